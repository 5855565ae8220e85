package localaddr

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// notLocal returns an address no interface of this machine has (from the
// documentation and private ranges), skipping the test if all are taken.
func notLocal(t *testing.T) netip.Addr {
	t.Helper()
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	have := map[netip.Addr]bool{}
	for _, a := range ifAddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			have[p.Addr().Unmap()] = true
		}
	}
	for _, s := range []string{"203.0.113.254", "198.51.100.254", "10.255.255.254", "192.0.2.254"} {
		if a := netip.MustParseAddr(s); !have[a] {
			return a
		}
	}
	t.Skip("every candidate address is configured on this machine")
	return netip.Addr{}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string   // the addresses, comma-joined
		errs []string // substrings of the error; none: valid
	}{
		{"", "", nil},
		{" , ", "", nil},
		{"127.0.2.1", "127.0.2.1", nil},
		{" 127.0.2.1 ,127.0.2.2,", "127.0.2.1,127.0.2.2", nil},
		{"127.0.2.1,127.0.2.1", "127.0.2.1", nil},
		{"[::1],::ffff:127.0.2.3", "::1,127.0.2.3", nil},
		{"bogus", "", []string{`"bogus": not an IP address`}},
		{"127.0.2.1,10.0.0.1:80,nope", "", []string{`"10.0.0.1:80": not an IP address`, `"nope": not an IP address`}},
		{"0.0.0.0,::,224.0.0.1", "", []string{"0.0.0.0: the unspecified address", "::: the unspecified", "224.0.0.1: a multicast address"}},
	} {
		got, err := Parse(c.in)
		if len(c.errs) == 0 {
			if err != nil {
				t.Errorf("Parse(%q): %v", c.in, err)
			} else if s := join(got); s != c.want {
				t.Errorf("Parse(%q) = %s, want %s", c.in, s, c.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error", c.in, got)
			continue
		}
		for _, w := range c.errs {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Parse(%q): %q lacks %q", c.in, err, w)
			}
		}
	}
}

func join(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

func TestCheck(t *testing.T) {
	// Linux answers for all of 127/8, configured or not.
	for _, s := range []string{"127.0.0.1", "127.0.2.1"} {
		if err := Check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("Check(%s): %v", s, err)
		}
	}
	a := notLocal(t)
	err := Check(a)
	var nl *NotLocalError
	if !errors.As(err, &nl) || nl.Addr != a {
		t.Fatalf("Check(%v) = %v, want a *NotLocalError", a, err)
	}
	// On Linux: "...: bind: cannot assign requested address".
	want := a.String() + ": this machine has no such address: bind: "
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Check(%v) = %q, want %q...", a, err, want)
	}
	t.Logf("Check(%v): %v", a, err)
	if err := CheckAll([]netip.Addr{netip.MustParseAddr("127.0.2.1"), a, netip.IPv4Unspecified()}); err == nil ||
		!strings.Contains(err.Error(), a.String()) || !strings.Contains(err.Error(), "0.0.0.0: the unspecified") {
		t.Errorf("CheckAll: %v, want both problems", err)
	}
}

func TestPick(t *testing.T) {
	v4a, v4b := netip.MustParseAddr("127.0.2.1"), netip.MustParseAddr("127.0.2.2")
	v6 := netip.MustParseAddr("::1")
	if a, err := Pick(nil, v4a); err != nil || a.IsValid() {
		t.Fatalf("Pick(nil) = %v, %v; want no address", a, err)
	}
	locals := []netip.Addr{v4a, v6, v4b}
	used := map[netip.Addr]int{}
	for i := range 256 {
		remote := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		a, err := Pick(locals, remote)
		if err != nil {
			t.Fatal(err)
		}
		if !a.Is4() {
			t.Fatalf("Pick(%v) = %v: not IPv4", remote, a)
		}
		// The same remote, in its IPv4-mapped form too, leaves from the
		// same address every time.
		again, _ := Pick(locals, netip.AddrFrom16(remote.As16()))
		if again != a {
			t.Fatalf("Pick(%v) = %v, then %v for its mapped form", remote, a, again)
		}
		used[a]++
	}
	if len(used) != 2 || used[v4a] < 64 || used[v4b] < 64 {
		t.Errorf("256 remotes spread over the two IPv4 addresses as %v", used)
	}
	if a, err := Pick(locals, netip.MustParseAddr("2001:db8::1")); err != nil || a != v6 {
		t.Errorf("IPv6 remote: %v, %v; want %v", a, err, v6)
	}
	_, err := Pick([]netip.Addr{v4a}, netip.MustParseAddr("2001:db8::1"))
	if !errors.Is(err, ErrNoFamily) || !strings.Contains(err.Error(), "2001:db8::1 is IPv6") {
		t.Errorf("IPv6 remote with IPv4 locals: %v", err)
	}
	// The choice is a pure function of the list and the remote: a
	// restarted crawler keeps it (this pins the hash).
	got := make([]string, 0, 4)
	for i := range 4 {
		a, _ := Pick([]netip.Addr{v4a, v4b}, netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}))
		got = append(got, a.String())
	}
	if want := []string{"127.0.2.1", "127.0.2.2", "127.0.2.1", "127.0.2.2"}; !slices.Equal(got, want) {
		t.Errorf("choices %v, want %v (the hash changed)", got, want)
	}
}

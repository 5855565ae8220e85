package dnscache

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/miekg/dns"
)

// TestLocalAddrs: queries, over UDP and the TCP retry of a truncated
// answer, leave from the bound address.
func TestLocalAddrs(t *testing.T) {
	s := startServer(t, func(network string, req *dns.Msg) *dns.Msg {
		if network == "udp" && strings.HasPrefix(req.Question[0].Name, "big.") {
			m := new(dns.Msg)
			m.SetReply(req)
			m.Truncated = true
			return m
		}
		return answerA("192.0.2.3", 60)(network, req)
	})
	local := netip.MustParseAddr("127.0.2.1")
	r := newResolver(t, Options{Server: s.addr, LocalAddrs: []netip.Addr{local}})
	for _, host := range []string{"small.example.test", "big.example.test"} {
		if addrs, _, err := r.Lookup(context.Background(), host); err != nil || len(addrs) != 1 {
			t.Fatalf("%s: %v %v", host, addrs, err)
		}
	}
	// Each lookup asks AAAA and A; big's are both truncated.
	want := []string{"udp 127.0.2.1", "udp 127.0.2.1", "udp 127.0.2.1", "udp 127.0.2.1", "tcp 127.0.2.1", "tcp 127.0.2.1"}
	if got := s.sources(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("queries from %q, want %q", got, want)
	}

	// Of several addresses, the one Pick chooses for the server's IP.
	locals := []netip.Addr{netip.MustParseAddr("127.0.2.2"), netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.2.3")}
	if err := localaddr.Check(locals[1]); err != nil {
		locals = []netip.Addr{locals[0], locals[2]}
	}
	pick, err := localaddr.Pick(locals, netip.MustParseAddrPort(s.addr).Addr())
	if err != nil {
		t.Fatal(err)
	}
	r = newResolver(t, Options{Server: s.addr, LocalAddrs: locals})
	if _, _, err := r.Lookup(context.Background(), "other.example.test"); err != nil {
		t.Fatal(err)
	}
	if got := s.sources(); got[len(got)-1] != "udp "+pick.String() {
		t.Fatalf("query from %q, want %v", got[len(got)-1], pick)
	}
}

// TestLocalAddrsRefused: New refuses an address the machine lacks, and a
// server none of the addresses can reach.
func TestLocalAddrsRefused(t *testing.T) {
	missing := netip.MustParseAddr("203.0.113.254")
	if localaddr.Check(missing) == nil {
		t.Skipf("%v is configured on this machine", missing)
	}
	_, err := New(Options{Server: "127.0.0.1:53", LocalAddrs: []netip.Addr{missing}})
	var nl *localaddr.NotLocalError
	if !errors.As(err, &nl) || !strings.Contains(err.Error(), "dnscache: local address 203.0.113.254: this machine has no such address") {
		t.Fatalf("New: %v", err)
	}
	v6 := netip.MustParseAddr("::1")
	if err := localaddr.Check(v6); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	_, err = New(Options{Server: "127.0.0.1:53", LocalAddrs: []netip.Addr{v6}})
	if !errors.Is(err, localaddr.ErrNoFamily) || !strings.Contains(err.Error(), "no DNS server can be queried") {
		t.Fatalf("IPv4 server, IPv6 local address: %v", err)
	}
}

package netguard

import (
	"errors"
	"net/netip"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		addr   string
		reason string // "" → allowed
	}{
		// Public addresses, including the neighbours of forbidden ranges.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"9.255.255.255", ""},
		{"11.0.0.0", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"126.255.255.255", ""},
		{"128.0.0.0", ""},
		{"169.253.255.255", ""},
		{"169.255.0.0", ""},
		{"172.15.255.255", ""},
		{"172.32.0.0", ""},
		{"192.167.255.255", ""},
		{"192.169.0.0", ""},
		{"223.255.255.255", ""},
		{"2606:4700::1111", ""},
		{"2001:4860:4860::8888", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},
		{"2002:808:808::1", ""},
		{"fbff:ffff::1", ""},
		{"fe7f:ffff::1", ""},
		{"fec0::1", "private"},
		// Unspecified and "this network".
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"::", "unspecified"},
		{"::ffff:0.0.0.0", "unspecified"},
		// Loopback.
		{"127.0.0.1", "loopback"},
		{"127.77.0.5", "loopback"},
		{"127.255.255.255", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:7f00:1", "loopback"},
		// RFC 1918 and ULA.
		{"10.0.0.0", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.0", "private"},
		{"172.31.255.255", "private"},
		{"192.168.0.0", "private"},
		{"192.168.255.255", "private"},
		{"::ffff:10.1.2.3", "private"},
		{"::ffff:172.20.0.1", "private"},
		{"::ffff:192.168.1.1", "private"},
		{"fc00::", "private"},
		{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "private"},
		// CGNAT.
		{"100.64.0.0", "CGNAT"},
		{"100.127.255.255", "CGNAT"},
		{"::ffff:100.100.100.100", "CGNAT"},
		// Link-local.
		{"169.254.0.0", "link-local"},
		{"169.254.169.254", "link-local"},
		{"169.254.255.255", "link-local"},
		{"::ffff:169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"febf:ffff::1", "link-local"},
		// Multicast.
		{"224.0.0.0", "multicast"},
		{"224.0.0.251", "multicast"},
		{"239.255.255.255", "multicast"},
		{"::ffff:239.1.2.3", "multicast"},
		{"ff02::1", "multicast"},
		{"ff0e::1", "multicast"},
		// Reserved and broadcast.
		{"240.0.0.0", "reserved"},
		{"254.255.255.255", "reserved"},
		{"255.255.255.255", "broadcast"},
		{"::ffff:255.255.255.255", "broadcast"},
		// IPv6 forms embedding a forbidden IPv4 address.
		{"::127.0.0.1", "IPv4-compatible loopback"},
		{"::10.0.0.1", "IPv4-compatible private"},
		{"64:ff9b::7f00:1", "NAT64 loopback"},
		{"64:ff9b::a9fe:a9fe", "NAT64 link-local"},
		{"64:ff9b:1::808:808", "local-use NAT64"},
		{"2002:7f00:1::", "6to4 loopback"},
		{"2002:c0a8:101::1", "6to4 private"},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		err := Check(a, false)
		if got := Reason(a); got != tt.reason {
			t.Errorf("Reason(%s) = %q, want %q", tt.addr, got, tt.reason)
		}
		if (err != nil) != (tt.reason != "") {
			t.Errorf("Check(%s, false) = %v, want forbidden %v", tt.addr, err, tt.reason != "")
		}
		if err != nil && !errors.Is(err, ErrForbidden) {
			t.Errorf("Check(%s, false) = %v, does not wrap ErrForbidden", tt.addr, err)
		}
		if err := Check(a, true); err != nil {
			t.Errorf("Check(%s, true) = %v, want nil", tt.addr, err)
		}
	}
}

func TestCheckInvalid(t *testing.T) {
	if err := Check(netip.Addr{}, false); !errors.Is(err, ErrForbidden) {
		t.Fatalf("Check(zero Addr) = %v, want ErrForbidden", err)
	}
	if err := Check(netip.Addr{}, true); err != nil {
		t.Fatalf("Check(zero Addr, true) = %v, want nil", err)
	}
}

// TestCheckExhaustiveFirstOctet compares every /8 (with a few second octets)
// against a reference written from the IANA special-purpose registry.
func TestCheckExhaustiveFirstOctet(t *testing.T) {
	ref := func(b0, b1 byte) bool {
		switch {
		case b0 == 0, b0 == 10, b0 == 127, b0 >= 224:
			return true
		case b0 == 100:
			return b1 >= 64 && b1 <= 127
		case b0 == 169:
			return b1 == 254
		case b0 == 172:
			return b1 >= 16 && b1 <= 31
		case b0 == 192:
			return b1 == 168
		}
		return false
	}
	for b0 := range 256 {
		for b1 := range 256 {
			a := netip.AddrFrom4([4]byte{byte(b0), byte(b1), 7, 9})
			want := ref(byte(b0), byte(b1))
			if got := Check(a, false) != nil; got != want {
				t.Fatalf("Check(%v) forbidden = %v, want %v", a, got, want)
			}
			m := netip.AddrFrom16(a.As16())
			if got := Check(m, false) != nil; got != want {
				t.Fatalf("Check(%v) forbidden = %v, want %v", m, got, want)
			}
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	addrs := []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:4700::1111"), netip.MustParseAddr("::ffff:8.8.4.4")}
	for i := 0; b.Loop(); i++ {
		if Check(addrs[i%len(addrs)], false) != nil {
			b.Fatal("public address refused")
		}
	}
}

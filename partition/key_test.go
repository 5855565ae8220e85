package partition

import (
	"net/netip"
	"testing"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestKey(t *testing.T) {
	tests := []struct {
		name string
		host string
		ips  []netip.Addr
		want string
	}{
		{"no address: the name, lower-cased", "WWW.Example.ORG", nil, "www.example.org"},
		{"trailing dot", "www.example.org.", nil, "www.example.org"},
		{"one address", "a.test", addrs("127.77.0.9"), "127.77.0.9"},
		{"the smallest address", "a.test", addrs("127.77.0.9", "127.77.0.10", "127.77.0.2"), "127.77.0.2"},
		{"numeric, not string, order", "a.test", addrs("10.0.0.10", "10.0.0.9"), "10.0.0.9"},
		{"IPv4 before IPv6", "a.test", addrs("2001:db8::1", "192.0.2.7"), "192.0.2.7"},
		{"IPv6 only", "a.test", addrs("2001:db8::2", "2001:db8::1"), "2001:db8::1"},
		{"IPv4-mapped is unmapped", "a.test", addrs("::ffff:127.77.0.5"), "127.77.0.5"},
		{"zone dropped", "a.test", addrs("fe80::1%eth0"), "fe80::1"},
		{"invalid addresses skipped", "A.test", []netip.Addr{{}}, "a.test"},
		{"invalid among valid", "a.test", []netip.Addr{{}, netip.MustParseAddr("127.0.0.3")}, "127.0.0.3"},
		{"an address literal keys like its hosts", "127.77.0.9", nil, "127.77.0.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Key(tt.host, tt.ips); got != tt.want {
				t.Errorf("Key(%q, %v) = %q, want %q", tt.host, tt.ips, got, tt.want)
			}
		})
	}
}

func TestLocationValid(t *testing.T) {
	tests := []struct {
		loc  Location
		want bool
	}{
		{Location{}, false},
		{Location{Known: true}, true},
		{at(90, 180), true},
		{at(-90, -180), true},
		{at(90.0001, 0), false},
		{at(0, -180.0001), false},
		{Location{Lat: 10, Lon: 10}, false},
	}
	for _, tt := range tests {
		if got := tt.loc.Valid(); got != tt.want {
			t.Errorf("%+v.Valid() = %v, want %v", tt.loc, got, tt.want)
		}
	}
}

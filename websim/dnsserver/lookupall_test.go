package dnsserver

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// multiHosts are the names of TestLookupAll: several addresses of either
// family or both.
var multiHosts = map[string][]netip.Addr{
	"dual.test": {netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::2")},
	"v4.test":     {netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("::ffff:192.0.2.4")},
	"v6.test":     {netip.MustParseAddr("2001:db8::3")},
	"broken.test": {netip.MustParseAddr("192.0.2.5"), {}},
	"empty.test":  {},
	"many.test":   manyAddrs(60),
}

// manyAddrs returns n IPv6 addresses: too many for 512 bytes of UDP.
func manyAddrs(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", i+1))
	}
	return out
}

// answered returns the addresses of the A and AAAA records of resp, in order.
func answered(resp *dns.Msg) []string {
	var out []string
	for _, rr := range resp.Answer {
		switch a := rr.(type) {
		case *dns.A:
			out = append(out, "A "+a.A.String())
		case *dns.AAAA:
			out = append(out, "AAAA "+a.AAAA.String())
		}
	}
	return out
}

// TestLookupAll: an A question gets a name's IPv4 addresses, an AAAA
// question its IPv6 ones, in LookupAll's order; a family the name lacks
// is NODATA; no addresses is NXDOMAIN; an invalid one SERVFAIL; a UDP
// answer too large is truncated, and TCP carries it whole.
func TestLookupAll(t *testing.T) {
	srv, err := Start(Options{Addr: "127.0.0.1:0", TTL: testTTL, LookupAll: func(name string) []netip.Addr { return multiHosts[name] }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	tests := []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		want   []string
		nodata bool // SOA in the authority section
	}{
		{"dual A", "dual.test.", dns.TypeA, dns.RcodeSuccess, []string{"A 192.0.2.1", "A 192.0.2.2"}, false},
		{"dual AAAA", "dual.test.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA 2001:db8::1", "AAAA 2001:db8::2"}, false},
		{"dual ANY", "dual.test.", dns.TypeANY, dns.RcodeSuccess, []string{"A 192.0.2.1", "AAAA 2001:db8::1", "A 192.0.2.2", "AAAA 2001:db8::2"}, false},
		{"v4 A, mapped as IPv4", "v4.test.", dns.TypeA, dns.RcodeSuccess, []string{"A 192.0.2.3", "A 192.0.2.4"}, false},
		{"v4 AAAA is NODATA", "v4.test.", dns.TypeAAAA, dns.RcodeSuccess, nil, true},
		{"v6 AAAA", "V6.Test.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA 2001:db8::3"}, false},
		{"v6 A is NODATA", "v6.test.", dns.TypeA, dns.RcodeSuccess, nil, true},
		{"no addresses is NXDOMAIN", "empty.test.", dns.TypeA, dns.RcodeNameError, nil, true},
		{"unknown is NXDOMAIN", "nope.test.", dns.TypeAAAA, dns.RcodeNameError, nil, true},
		{"invalid address is SERVFAIL", "broken.test.", dns.TypeA, dns.RcodeServerFailure, nil, false},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range tests {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				resp := exchange(t, srv, network, new(dns.Msg).SetQuestion(tc.qname, tc.qtype))
				if resp.Rcode != tc.rcode {
					t.Errorf("rcode %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tc.rcode])
				}
				if got := answered(resp); !slices.Equal(got, tc.want) {
					t.Errorf("answer %q, want %q", got, tc.want)
				}
				for _, rr := range resp.Answer {
					if rr.Header().Ttl != uint32(testTTL.Seconds()) || rr.Header().Name != tc.qname {
						t.Errorf("record %v: want owner %s and TTL %v", rr, tc.qname, testTTL)
					}
				}
				if soa := len(resp.Ns) == 1 && resp.Ns[0].Header().Rrtype == dns.TypeSOA; soa != tc.nodata {
					t.Errorf("authority %v, want SOA: %v", resp.Ns, tc.nodata)
				}
				if resp.Truncated {
					t.Error("TC set on a small answer")
				}
			})
		}
	}

	all := make([]string, 0, 60)
	for _, a := range multiHosts["many.test"] {
		all = append(all, "AAAA "+a.String())
	}
	for _, tc := range []struct {
		name    string
		network string
		edns    uint16 // 0: none
		max     int    // bytes the answer may take
		whole   bool
	}{
		{"udp without EDNS", "udp", 0, 512, false},
		{"udp with EDNS 1232", "udp", 1232, 1232, false},
		{"udp with EDNS 4096 capped", "udp", 4096, ednsSize, false},
		{"tcp", "tcp", 0, 65535, true},
	} {
		t.Run("many/"+tc.name, func(t *testing.T) {
			m := new(dns.Msg).SetQuestion("many.test.", dns.TypeAAAA)
			if tc.edns != 0 {
				m.SetEdns0(tc.edns, false)
			}
			c := &dns.Client{Net: tc.network, UDPSize: 65535}
			resp, _, err := c.Exchange(m, srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			got := answered(resp)
			if resp.Truncated == tc.whole {
				t.Errorf("TC %v with %d of 60 records, want %v", resp.Truncated, len(got), !tc.whole)
			}
			if n := len(all); tc.whole && len(got) != n || !tc.whole && (len(got) == 0 || len(got) >= n) {
				t.Errorf("%d records, want all 60: %v, or some but not all: %v", len(got), tc.whole, !tc.whole)
			}
			if !slices.Equal(got, all[:len(got)]) {
				t.Errorf("records %q, want the first %d in order", got, len(got))
			}
			resp.Compress = true // as it came, if it came compressed: at most this long
			if n := resp.Len(); n > tc.max {
				t.Errorf("answer of %d bytes, want at most %d", n, tc.max)
			}
		})
	}
}

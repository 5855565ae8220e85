package dnscache

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/websim/dnsserver"
	"github.com/miekg/dns"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// TestFamilies resolves A-only, AAAA-only and dual-stack names through
// websim's DNS server: both families found, IPv6 first and alternating,
// NODATA of one family leaving the other's answer whole, NXDOMAIN and
// NODATA of both cached as negative answers.
func TestFamilies(t *testing.T) {
	names := map[string][]netip.Addr{
		"v4.test":   addrs("127.0.0.2", "127.0.0.3"),
		"v6.test":   addrs("::1"),
		"dual.test": addrs("127.0.0.4", "127.0.0.5", "127.0.0.6", "2001:db8::1", "2001:db8::2"),
		"none.test": {}, // NXDOMAIN: websim has no name without addresses
	}
	srv, err := dnsserver.Start(dnsserver.Options{
		Addr: "127.0.0.1:0", TTL: 42 * time.Second,
		LookupAll: func(name string) []netip.Addr { return names[name] },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	clk := newClock()
	r := newResolver(t, Options{Server: srv.Addr(), Now: clk.Now})
	tests := []struct {
		host string
		want []netip.Addr
		ttl  time.Duration
	}{
		{"v4.test", addrs("127.0.0.2", "127.0.0.3"), 42 * time.Second},
		{"v6.test", addrs("::1"), 42 * time.Second},
		{"dual.test", addrs("2001:db8::1", "127.0.0.4", "2001:db8::2", "127.0.0.5", "127.0.0.6"), 42 * time.Second},
		{"none.test", nil, 42 * time.Second},
		{"gone.test", nil, 42 * time.Second},
	}
	for _, tt := range tests {
		for i := range 2 { // the second from the cache
			got, exp, err := r.Lookup(context.Background(), tt.host)
			if tt.want == nil {
				if !errors.Is(err, ErrNotFound) {
					t.Errorf("%s (%d): %v %v, want ErrNotFound", tt.host, i, got, err)
				}
			} else if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("%s (%d): %v %v, want %v", tt.host, i, got, err, tt.want)
			}
			if d := exp.Sub(clk.Now()); d != tt.ttl {
				t.Errorf("%s (%d): TTL %v, want %v", tt.host, i, d, tt.ttl)
			}
		}
	}
	if q, want := srv.Queries(), int64(len(tests)*queriesPerLookup); q != want {
		t.Errorf("%d queries, want %d (AAAA and A once per name)", q, want)
	}
	if st := r.Stats(); st.Hits != uint64(len(tests)) || st.NotFound != 4 || st.Partial != 0 || st.Errors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestMerge checks how the answers to a name's two questions make one
// entry: the least TTL of the families with addresses (a NODATA does not
// shorten it), NXDOMAIN to either is NXDOMAIN, one question failing while
// the other has addresses is a partial answer that is not cached, and one
// failing while the other has none is a failure.
func TestMerge(t *testing.T) {
	type reply struct {
		rcode int
		addr  string // "" → no record (NODATA with SOA TTL 10 when rcode is success)
		ttl   uint32
	}
	tests := []struct {
		name       string
		a, aaaa    reply
		want       []netip.Addr
		ttl        time.Duration
		notFound   bool
		failed     bool // transient: ErrServer, not cached
		partial    bool // addresses, not cached
		queriesTwo int  // queries after two lookups
	}{
		{"both, AAAA shorter", reply{0, "192.0.2.1", 300}, reply{0, "2001:db8::1", 30}, addrs("2001:db8::1", "192.0.2.1"), 30 * time.Second, false, false, false, 2},
		{"both, A shorter", reply{0, "192.0.2.1", 20}, reply{0, "2001:db8::1", 300}, addrs("2001:db8::1", "192.0.2.1"), 20 * time.Second, false, false, false, 2},
		{"A only, AAAA NODATA does not shorten", reply{0, "192.0.2.1", 300}, reply{0, "", 0}, addrs("192.0.2.1"), 300 * time.Second, false, false, false, 2},
		{"AAAA only, A NODATA", reply{0, "", 0}, reply{0, "2001:db8::1", 300}, addrs("2001:db8::1"), 300 * time.Second, false, false, false, 2},
		{"NODATA both", reply{0, "", 0}, reply{0, "", 0}, nil, 10 * time.Second, true, false, false, 2},
		{"NXDOMAIN once is NXDOMAIN", reply{0, "192.0.2.1", 300}, reply{dns.RcodeNameError, "", 0}, nil, 10 * time.Second, true, false, false, 2},
		{"NXDOMAIN beside SERVFAIL", reply{dns.RcodeServerFailure, "", 0}, reply{dns.RcodeNameError, "", 0}, nil, 10 * time.Second, true, false, false, 2},
		{"AAAA SERVFAIL, A answers", reply{0, "192.0.2.1", 300}, reply{dns.RcodeServerFailure, "", 0}, addrs("192.0.2.1"), DefaultMinTTL, false, false, true, 4},
		{"A REFUSED, AAAA answers", reply{dns.RcodeRefused, "", 0}, reply{0, "2001:db8::1", 300}, addrs("2001:db8::1"), DefaultMinTTL, false, false, true, 4},
		{"A SERVFAIL, AAAA NODATA", reply{dns.RcodeServerFailure, "", 0}, reply{0, "", 0}, nil, 0, false, true, false, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, func(_ string, req *dns.Msg) *dns.Msg {
				q := req.Question[0]
				rp := tt.a
				if q.Qtype == dns.TypeAAAA {
					rp = tt.aaaa
				}
				m := new(dns.Msg)
				m.SetRcode(req, rp.rcode)
				hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: rp.ttl}
				switch {
				case rp.addr != "" && q.Qtype == dns.TypeA:
					m.Answer = []dns.RR{&dns.A{Hdr: hdr, A: net.ParseIP(rp.addr)}}
				case rp.addr != "":
					m.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: net.ParseIP(rp.addr)}}
				case rp.rcode == dns.RcodeSuccess || rp.rcode == dns.RcodeNameError:
					m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 10},
						Ns: "ns.test.", Mbox: "h.test.", Serial: 1, Refresh: 1, Retry: 1, Expire: 1, Minttl: 10}}
				}
				return m
			})
			clk := newClock()
			r := newResolver(t, Options{Server: s.addr, MinTTL: DefaultMinTTL, Now: clk.Now})
			for i := range 2 {
				got, exp, err := r.Lookup(context.Background(), "x.example.test")
				switch {
				case tt.notFound && !errors.Is(err, ErrNotFound),
					tt.failed && (!errors.Is(err, ErrServer) || errors.Is(err, ErrNotFound)),
					!tt.notFound && !tt.failed && (err != nil || !slices.Equal(got, tt.want)):
					t.Fatalf("lookup %d: %v %v, want %v (not found %v, failed %v)", i, got, err, tt.want, tt.notFound, tt.failed)
				}
				if d := exp.Sub(clk.Now()); !tt.failed && d != tt.ttl {
					t.Errorf("lookup %d: TTL %v, want %v", i, d, tt.ttl)
				}
			}
			if n := s.queries(); n != int64(tt.queriesTwo) {
				t.Errorf("%d queries for two lookups, want %d", n, tt.queriesTwo)
			}
			st := r.Stats()
			if tt.partial != (st.Partial == 2) || !tt.partial && st.Partial != 0 {
				t.Errorf("stats %+v: partial %v", st, tt.partial)
			}
		})
	}
}

// TestDialOrder: IPv6 first, families alternating, each in its own order,
// duplicates (mapped or not) once, at most MaxAddrs.
func TestDialOrder(t *testing.T) {
	many := func(f string, n int) []netip.Addr {
		out := make([]netip.Addr, n)
		for i := range out {
			if f == "4" {
				out[i] = netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)})
			} else {
				out[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i + 1)})
			}
		}
		return out
	}
	tests := []struct {
		name   string
		v6, v4 []netip.Addr
		want   []netip.Addr
	}{
		{"none", nil, nil, nil},
		{"v4 only", nil, addrs("192.0.2.2", "192.0.2.1"), addrs("192.0.2.2", "192.0.2.1")},
		{"v6 only", addrs("2001:db8::2", "2001:db8::1"), nil, addrs("2001:db8::2", "2001:db8::1")},
		{"alternate, more v4", addrs("2001:db8::1"), addrs("192.0.2.1", "192.0.2.2", "192.0.2.3"), addrs("2001:db8::1", "192.0.2.1", "192.0.2.2", "192.0.2.3")},
		{"alternate, more v6", addrs("2001:db8::1", "2001:db8::2", "2001:db8::3"), addrs("192.0.2.1"), addrs("2001:db8::1", "192.0.2.1", "2001:db8::2", "2001:db8::3")},
		{"mapped counts as v4, once", addrs("::ffff:192.0.2.1", "2001:db8::1"), addrs("192.0.2.1", "192.0.2.2"), addrs("2001:db8::1", "192.0.2.1", "192.0.2.2")},
		{"one list, sorted by family", addrs("192.0.2.1", "2001:db8::1", "192.0.2.2"), nil, addrs("2001:db8::1", "192.0.2.1", "192.0.2.2")},
		{"bounded", many("6", 40), many("4", 40), interleave(many("6", MaxAddrs/2), many("4", MaxAddrs/2))},
	}
	for _, tt := range tests {
		if got := dialOrder(tt.v6, tt.v4); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func interleave(a, b []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for i := range a {
		out = append(out, a[i], b[i])
	}
	return out
}

// TestOneFamilyTimesOut: a server that never answers AAAA questions (as
// some broken ones do) leaves the A answer, a partial one, once the
// timeout ends the wait; the error of the question is kept for Settled.
func TestOneFamilyTimesOut(t *testing.T) {
	a := answerA("192.0.2.8", 60)
	s := startServer(t, func(n string, req *dns.Msg) *dns.Msg {
		if req.Question[0].Qtype == dns.TypeAAAA {
			return nil // dropped
		}
		return a(n, req)
	})
	r := newResolver(t, Options{Server: s.addr, Timeout: 200 * time.Millisecond})
	e := r.lookup(context.Background(), "slow.example.test")
	if e.err != nil || !slices.Equal(e.addrs, addrs("192.0.2.8")) || e.partial == nil {
		t.Fatalf("entry %+v, want 192.0.2.8, partial", e)
	}
	var ne net.Error
	if !errors.As(e.partial, &ne) || !ne.Timeout() {
		t.Errorf("partial %v, want the AAAA question's timeout", e.partial)
	}
	if st := r.Stats(); st.Entries != 0 {
		t.Errorf("stats %+v: a partial answer cached", st)
	}
}

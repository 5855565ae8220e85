package dnscache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/websim/dnsserver"
	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a DNS server on 127.0.0.1 (UDP and TCP on one port) whose
// answers come from handle.
type server struct {
	addr       string
	udp, tcp   atomic.Int64
	handle     func(network string, req *dns.Msg) *dns.Msg
	udpS, tcpS *dns.Server

	mu   sync.Mutex
	from []string // "network source-IP" of every query
}

// sources returns the "network source-IP" of every query so far.
func (s *server) sources() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.from...)
}

func startServer(t *testing.T, handle func(network string, req *dns.Msg) *dns.Msg) *server {
	t.Helper()
	s := &server{handle: handle}
	var (
		ln  net.Listener
		pc  net.PacketConn
		err error
	)
	for range 10 {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err = net.ListenPacket("udp", ln.Addr().String())
		if err == nil {
			break
		}
		ln.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	var wg sync.WaitGroup
	for _, srv := range []*dns.Server{{PacketConn: pc}, {Listener: ln}} {
		network := "udp"
		if srv.Listener != nil {
			network = "tcp"
			s.tcpS = srv
		} else {
			s.udpS = srv
		}
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		srv.Handler = dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
			if network == "udp" {
				s.udp.Add(1)
			} else {
				s.tcp.Add(1)
			}
			src, _, _ := net.SplitHostPort(w.RemoteAddr().String())
			s.mu.Lock()
			s.from = append(s.from, network+" "+src)
			s.mu.Unlock()
			if resp := s.handle(network, req); resp != nil {
				_ = w.WriteMsg(resp)
			}
		})
		wg.Go(func() { _ = srv.ActivateAndServe() })
		<-started
	}
	t.Cleanup(func() {
		_ = s.udpS.Shutdown()
		_ = s.tcpS.Shutdown()
		wg.Wait()
	})
	return s
}

func (s *server) queries() int64 { return s.udp.Load() + s.tcp.Load() }

// answerA answers every A query with addr and ttl, and every other query
// with NODATA (no SOA).
func answerA(addr string, ttl uint32) func(string, *dns.Msg) *dns.Msg {
	return func(_ string, req *dns.Msg) *dns.Msg {
		m := new(dns.Msg)
		m.SetReply(req)
		if req.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
				A:   net.ParseIP(addr).To4(),
			})
		}
		return m
	}
}

// queriesPerLookup is what one lookup of a name sends: AAAA and A.
const queriesPerLookup = 2

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newResolver(t *testing.T, o Options) *Resolver {
	t.Helper()
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTTLAndExpiry(t *testing.T) {
	tests := []struct {
		name     string
		ttl      uint32
		min, max time.Duration
		want     time.Duration
	}{
		{"as answered", 30, time.Second, time.Hour, 30 * time.Second},
		{"clamped up", 1, 5 * time.Second, time.Hour, 5 * time.Second},
		{"zero clamped up", 0, 5 * time.Second, time.Hour, 5 * time.Second},
		{"clamped down", 86400, time.Second, time.Hour, time.Hour},
		{"defaults", 1 << 30, 0, 0, DefaultMaxTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, answerA("192.0.2.7", tt.ttl))
			clk := newClock()
			r := newResolver(t, Options{Server: s.addr, MinTTL: tt.min, MaxTTL: tt.max, Now: clk.Now})
			ctx := context.Background()
			addrs, exp, err := r.Lookup(ctx, "www.example.test")
			if err != nil {
				t.Fatal(err)
			}
			if len(addrs) != 1 || addrs[0] != netip.MustParseAddr("192.0.2.7") {
				t.Fatalf("addrs = %v", addrs)
			}
			if got := exp.Sub(clk.Now()); got != tt.want {
				t.Fatalf("TTL = %v, want %v", got, tt.want)
			}
			clk.Advance(tt.want - time.Millisecond)
			if _, exp2, err := r.Lookup(ctx, "WWW.Example.Test."); err != nil || !exp2.Equal(exp) {
				t.Fatalf("second lookup: %v, %v", exp2, err)
			}
			if n := s.queries(); n != queriesPerLookup {
				t.Fatalf("%d queries before expiry, want %d", n, queriesPerLookup)
			}
			clk.Advance(time.Millisecond)
			if _, _, err := r.Lookup(ctx, "www.example.test"); err != nil {
				t.Fatal(err)
			}
			if n := s.queries(); n != 2*queriesPerLookup {
				t.Fatalf("%d queries after expiry, want %d", n, 2*queriesPerLookup)
			}
			st := r.Stats()
			if st.Hits != 1 || st.Misses != 2 || st.Queries != 2*queriesPerLookup || st.Entries != 1 || st.Errors != 0 || st.Partial != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestSingleflight(t *testing.T) {
	gate := make(chan struct{})
	answer := answerA("192.0.2.1", 60)
	s := startServer(t, func(n string, req *dns.Msg) *dns.Msg {
		<-gate
		return answer(n, req)
	})
	r := newResolver(t, Options{Server: s.addr, Timeout: 10 * time.Second})
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			addrs, _, err := r.Lookup(context.Background(), "one.example.test")
			if err == nil && (len(addrs) != 1 || addrs[0] != netip.MustParseAddr("192.0.2.1")) {
				err = fmt.Errorf("addrs %v", addrs)
			}
			errs <- err
		})
	}
	waitFor(t, func() bool { st := r.Stats(); return st.Shared+st.Hits == n-1 && s.queries() == queriesPerLookup })
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if q := s.queries(); q != queriesPerLookup {
		t.Fatalf("%d queries for %d concurrent lookups, want %d", q, n, queriesPerLookup)
	}
	if st := r.Stats(); st.Misses != 1 || st.Shared != n-1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSingleflightCancelledOwner: when the lookup that sent the query is
// cancelled, a waiting lookup with a live context asks again.
func TestSingleflightCancelledOwner(t *testing.T) {
	gate := make(chan struct{})
	answer := answerA("192.0.2.2", 60)
	s := startServer(t, func(n string, req *dns.Msg) *dns.Msg {
		<-gate
		return answer(n, req)
	})
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	r := newResolver(t, Options{Server: s.addr, Timeout: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	ownerErr := make(chan error, 1)
	go func() {
		_, _, err := r.Lookup(ctx, "two.example.test")
		ownerErr <- err
	}()
	waitFor(t, func() bool { return s.queries() == queriesPerLookup })
	waiter := make(chan error, 1)
	go func() {
		addrs, _, err := r.Lookup(context.Background(), "two.example.test")
		if err == nil && len(addrs) != 1 {
			err = fmt.Errorf("addrs %v", addrs)
		}
		waiter <- err
	}()
	waitFor(t, func() bool { return r.Stats().Shared == 1 })
	start := time.Now()
	cancel()
	if err := <-ownerErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("owner: %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("cancelled lookup returned after %v", el)
	}
	waitFor(t, func() bool { return s.queries() == 2*queriesPerLookup })
	close(gate)
	if err := <-waiter; err != nil {
		t.Fatalf("waiter: %v", err)
	}
}

func TestNegativeCaching(t *testing.T) {
	soa := func(ttl, minTTL uint32) dns.RR {
		return &dns.SOA{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
			Ns: "ns.test.", Mbox: "h.test.", Serial: 1, Refresh: 1, Retry: 1, Expire: 1, Minttl: minTTL}
	}
	tests := []struct {
		name   string
		rcode  int
		ns     []dns.RR
		negTTL time.Duration
		want   time.Duration
	}{
		{"nxdomain without soa", dns.RcodeNameError, nil, 0, DefaultNegativeTTL},
		{"nxdomain soa ttl lower", dns.RcodeNameError, []dns.RR{soa(20, 300)}, 0, 20 * time.Second},
		{"nxdomain soa minimum lower", dns.RcodeNameError, []dns.RR{soa(300, 30)}, 0, 30 * time.Second},
		{"nxdomain soa above cap", dns.RcodeNameError, []dns.RR{soa(3000, 3000)}, 2 * time.Minute, 2 * time.Minute},
		{"nxdomain soa below min ttl", dns.RcodeNameError, []dns.RR{soa(0, 0)}, 0, DefaultMinTTL},
		{"nodata", dns.RcodeSuccess, []dns.RR{soa(40, 40)}, 0, 40 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, func(_ string, req *dns.Msg) *dns.Msg {
				m := new(dns.Msg)
				m.SetRcode(req, tt.rcode)
				m.Ns = tt.ns
				return m
			})
			clk := newClock()
			r := newResolver(t, Options{Server: s.addr, NegativeTTL: tt.negTTL, Now: clk.Now})
			for i := range 2 {
				_, exp, err := r.Lookup(context.Background(), "gone.example.test")
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("lookup %d: %v, want ErrNotFound", i, err)
				}
				if got := exp.Sub(clk.Now()); got != tt.want {
					t.Fatalf("negative TTL %v, want %v", got, tt.want)
				}
			}
			if n := s.queries(); n != queriesPerLookup {
				t.Fatalf("%d queries, want %d (negative answer cached)", n, queriesPerLookup)
			}
			clk.Advance(tt.want)
			if _, _, err := r.Lookup(context.Background(), "gone.example.test"); !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			if n := s.queries(); n != 2*queriesPerLookup {
				t.Fatalf("%d queries after the negative TTL, want %d", n, 2*queriesPerLookup)
			}
			if st := r.Stats(); st.NotFound != 3 || st.Hits != 1 || st.Errors != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestServerErrorsNotCached(t *testing.T) {
	for _, rcode := range []int{dns.RcodeServerFailure, dns.RcodeRefused} {
		s := startServer(t, func(_ string, req *dns.Msg) *dns.Msg {
			m := new(dns.Msg)
			m.SetRcode(req, rcode)
			return m
		})
		r := newResolver(t, Options{Server: s.addr})
		for range 2 {
			_, _, err := r.Lookup(context.Background(), "x.example.test")
			if !errors.Is(err, ErrServer) || errors.Is(err, ErrNotFound) {
				t.Fatalf("rcode %d: %v, want ErrServer", rcode, err)
			}
		}
		if n := s.queries(); n != 2*queriesPerLookup {
			t.Fatalf("rcode %d: %d queries, want %d (errors not cached)", rcode, n, 2*queriesPerLookup)
		}
		if st := r.Stats(); st.Errors != 2 || st.Entries != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
}

// TestSettled checks the lookup that places hosts: it waits out server
// failures, takes a name that does not exist as no addresses, and gives up
// only when its context ends. Of partial answers, one with IPv4 addresses
// is settled and one with IPv6 addresses only is not.
func TestSettled(t *testing.T) {
	var fails atomic.Int64
	fails.Store(2)
	servfail := func(req *dns.Msg) *dns.Msg {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeServerFailure)
		return m
	}
	s := startServer(t, func(n string, req *dns.Msg) *dns.Msg {
		q := req.Question[0]
		switch {
		case q.Name == "gone.example.test.":
			m := new(dns.Msg)
			m.SetRcode(req, dns.RcodeNameError)
			return m
		case q.Name == "down.example.test.":
			return servfail(req)
		case q.Name == "up.example.test." && q.Qtype == dns.TypeA && fails.Add(-1) >= 0:
			return servfail(req)
		case q.Name == "v4up.example.test." && q.Qtype == dns.TypeAAAA:
			return servfail(req)
		case q.Name == "v6up.example.test.":
			if q.Qtype == dns.TypeA {
				return servfail(req)
			}
			m := new(dns.Msg)
			m.SetReply(req)
			m.Answer = []dns.RR{&dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 60}, AAAA: net.ParseIP("2001:db8::7")}}
			return m
		}
		return answerA("127.0.0.7", 60)(n, req)
	})
	r := newResolver(t, Options{Server: s.addr})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs, err := r.Settled(ctx, "up.example.test")
	if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("127.0.0.7") {
		t.Fatalf("after two server failures: %v %v, want 127.0.0.7", addrs, err)
	}
	if n := s.queries(); n != 3*queriesPerLookup {
		t.Errorf("%d queries, want %d (two failed lookups, then the answer)", n, 3*queriesPerLookup)
	}
	if addrs, err := r.Settled(ctx, "gone.example.test"); err != nil || addrs != nil {
		t.Errorf("a name that does not exist: %v %v, want no addresses and no error", addrs, err)
	}
	before := s.queries()
	if addrs, err := r.Settled(ctx, "v4up.example.test"); err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("127.0.0.7") {
		t.Errorf("AAAA failing, A answered: %v %v, want 127.0.0.7 at once", addrs, err)
	}
	if n := s.queries() - before; n != queriesPerLookup {
		t.Errorf("%d queries for a partial answer with IPv4 addresses, want %d", n, queriesPerLookup)
	}
	for _, name := range []string{"down.example.test", "v6up.example.test"} {
		short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
		before := s.queries()
		if _, err := r.Settled(short, name); !errors.Is(err, ErrServer) {
			t.Errorf("%s: %v, want ErrServer once the context ends", name, err)
		}
		cancelShort()
		if n := s.queries() - before; n < 2*queriesPerLookup {
			t.Errorf("%s: %d queries for a failing name, want it tried again", name, n)
		}
	}
	// Lookup takes the partial answer all the same.
	if addrs, _, err := r.Lookup(ctx, "v6up.example.test"); err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("2001:db8::7") {
		t.Errorf("Lookup of an IPv6 answer beside a failing A: %v %v, want 2001:db8::7", addrs, err)
	}
	if st := r.Stats(); st.Partial < 3 {
		t.Errorf("stats %+v: want the partial answers counted", st)
	}
}

func TestWrongQuestionRejected(t *testing.T) {
	s := startServer(t, func(n string, req *dns.Msg) *dns.Msg {
		req.Question[0].Name = "other.test."
		return answerA("192.0.2.9", 60)(n, req)
	})
	r := newResolver(t, Options{Server: s.addr})
	if _, _, err := r.Lookup(context.Background(), "x.example.test"); !errors.Is(err, ErrServer) {
		t.Fatalf("answer for another name: %v, want ErrServer", err)
	}
}

func TestTCPFallback(t *testing.T) {
	full := func(_ string, req *dns.Msg) *dns.Msg {
		m := new(dns.Msg)
		m.SetReply(req)
		for i := range 40 {
			hdr := dns.RR_Header{Name: req.Question[0].Name, Rrtype: req.Question[0].Qtype, Class: dns.ClassINET, Ttl: uint32(100 + i)}
			if hdr.Rrtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.IPv4(198, 51, 100, byte(i+1)).To4()})
			} else {
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: net.ParseIP(fmt.Sprintf("2001:db8::%x", i+1))})
			}
		}
		return m
	}
	s := startServer(t, func(network string, req *dns.Msg) *dns.Msg {
		if network == "udp" {
			m := new(dns.Msg)
			m.SetReply(req)
			m.Truncated = true
			return m
		}
		return full(network, req)
	})
	clk := newClock()
	r := newResolver(t, Options{Server: s.addr, MinTTL: time.Second, Now: clk.Now})
	addrs, exp, err := r.Lookup(context.Background(), "big.example.test")
	if err != nil {
		t.Fatal(err)
	}
	// 40 of each family, alternating from IPv6, cut at MaxAddrs.
	if len(addrs) != MaxAddrs || addrs[0] != netip.MustParseAddr("2001:db8::1") || addrs[1] != netip.MustParseAddr("198.51.100.1") ||
		addrs[MaxAddrs-1] != netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", MaxAddrs/2)) {
		t.Fatalf("%d addrs %v; want %d, alternating from 2001:db8::1", len(addrs), addrs, MaxAddrs)
	}
	if got := exp.Sub(clk.Now()); got != 100*time.Second {
		t.Fatalf("TTL %v, want the lowest, 100s", got)
	}
	if s.udp.Load() != 2 || s.tcp.Load() != 2 {
		t.Fatalf("udp %d tcp %d queries, want 2 and 2", s.udp.Load(), s.tcp.Load())
	}
	if st := r.Stats(); st.TCP != 2 || st.Queries != 4 {
		t.Fatalf("stats %+v", st)
	}
}

func TestLiteralsAndBadNames(t *testing.T) {
	s := startServer(t, answerA("192.0.2.3", 60))
	r := newResolver(t, Options{Server: s.addr})
	for _, tt := range []struct{ host, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"8.8.8.8", "8.8.8.8"},
		{"::1", "::1"},
		{"[2001:db8::1]", "2001:db8::1"},
	} {
		addrs, _, err := r.Lookup(context.Background(), tt.host)
		if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr(tt.want) {
			t.Errorf("Lookup(%q) = %v, %v", tt.host, addrs, err)
		}
	}
	for _, host := range []string{"", ".", "a..b", ".a", "..", "a b.test", "x\x00.test", strings.Repeat("a", 64) + ".test", strings.Repeat("abcdefghi.", 26) + "test", "a/b"} {
		if _, _, err := r.Lookup(context.Background(), host); !errors.Is(err, ErrNotFound) {
			t.Errorf("Lookup(%q) = %v, want ErrNotFound", host, err)
		}
	}
	if n := s.queries(); n != 0 {
		t.Fatalf("%d queries for literals and bad names, want 0", n)
	}
	if st := r.Stats(); st.Literals != 4 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBoundedCache(t *testing.T) {
	s := startServer(t, answerA("192.0.2.4", 3600))
	r := newResolver(t, Options{Server: s.addr, MaxEntries: 10})
	for i := range 100 {
		if _, _, err := r.Lookup(context.Background(), fmt.Sprintf("h%d.example.test", i)); err != nil {
			t.Fatal(err)
		}
		if n := r.Stats().Entries; n > 10 {
			t.Fatalf("%d entries after %d lookups, max 10", n, i+1)
		}
	}
	st := r.Stats()
	if st.Evictions < 90 || st.Entries < 5 {
		t.Fatalf("stats %+v: want ≥ 90 evictions and a half-full cache", st)
	}
	// The latest name is always cached.
	if _, _, err := r.Lookup(context.Background(), "h99.example.test"); err != nil || r.Stats().Hits != 1 {
		t.Fatalf("latest entry not cached: %v %+v", err, r.Stats())
	}
}

func TestServerDown(t *testing.T) {
	// A socket that never answers: the lookup times out.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	// A closed port: the lookup fails at once (ICMP port unreachable).
	closed, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.LocalAddr().String()
	closed.Close()
	for _, addr := range []string{pc.LocalAddr().String(), closedAddr} {
		r := newResolver(t, Options{Server: addr, Timeout: 200 * time.Millisecond})
		start := time.Now()
		_, _, err := r.Lookup(context.Background(), "x.example.test")
		if err == nil || errors.Is(err, ErrNotFound) {
			t.Fatalf("server %s: %v, want a transient error", addr, err)
		}
		if el := time.Since(start); el > time.Second {
			t.Fatalf("server %s: failed after %v, timeout 200ms", addr, el)
		}
		if st := r.Stats(); st.Errors != 1 || st.Entries != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
	// The caller's deadline counts too.
	r := newResolver(t, Options{Server: pc.LocalAddr().String(), Timeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, _, err := r.Lookup(ctx, "x.example.test"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want DeadlineExceeded", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("failed after %v, deadline 100ms", el)
	}
}

// TestWebsimDNS resolves through websim's DNS server.
func TestWebsimDNS(t *testing.T) {
	srv, err := dnsserver.Start(dnsserver.Options{
		Addr: "127.0.0.1:0",
		TTL:  42 * time.Second,
		Lookup: func(name string) (netip.Addr, bool) {
			if name == "h1.fr.test" {
				return netip.MustParseAddr("127.77.0.3"), true
			}
			return netip.Addr{}, false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	clk := newClock()
	r := newResolver(t, Options{Server: srv.Addr(), Now: clk.Now})
	addrs, exp, err := r.Lookup(context.Background(), "h1.fr.test")
	if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("127.77.0.3") || exp.Sub(clk.Now()) != 42*time.Second {
		t.Fatalf("h1.fr.test: %v %v %v", addrs, exp.Sub(clk.Now()), err)
	}
	_, exp, err = r.Lookup(context.Background(), "h2.fr.test")
	if !errors.Is(err, ErrNotFound) || exp.Sub(clk.Now()) != 42*time.Second {
		t.Fatalf("h2.fr.test: %v %v", exp.Sub(clk.Now()), err)
	}
	if q := srv.Queries(); q != 2*queriesPerLookup {
		t.Fatalf("%d queries, want %d", q, 2*queriesPerLookup)
	}
}

func TestSystemConfig(t *testing.T) {
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.servers) == 0 && r.sys == nil {
		t.Fatal("no servers and no system resolver")
	}
	// Literals need no server.
	if addrs, _, err := r.Lookup(context.Background(), "127.0.0.1"); err != nil || len(addrs) != 1 {
		t.Fatalf("literal: %v %v", addrs, err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		o    Options
		want []string
	}{
		{Options{Server: "127.0.0.1:53"}, nil},
		{Options{Server: "127.0.0.1"}, nil},
		{Options{Server: "dns.example.test"}, nil},
		{Options{Server: "[::1]:5353"}, nil},
		{Options{Server: "a b:c:d"}, []string{"server"}},
		{Options{Timeout: -1, MinTTL: -1, MaxEntries: -1}, []string{"timeout", "TTLs", "max entries"}},
		{Options{MinTTL: time.Hour, MaxTTL: time.Minute}, []string{"min TTL"}},
	}
	for _, tt := range tests {
		_, err := New(tt.o)
		if (err != nil) != (len(tt.want) > 0) {
			t.Errorf("New(%+v) = %v, want problems %q", tt.o, err, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New(%+v) = %v, want a problem with %q", tt.o, err, w)
			}
		}
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func BenchmarkLookupHit(b *testing.B) {
	r, err := New(Options{Server: "127.0.0.1:53"})
	if err != nil {
		b.Fatal(err)
	}
	r.mu.cache["h1.fr.test"] = entry{addrs: []netip.Addr{netip.MustParseAddr("127.77.0.3")}, expiry: time.Now().Add(time.Hour)}
	ctx := context.Background()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := r.Lookup(ctx, "h1.fr.test"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

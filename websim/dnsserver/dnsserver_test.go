package dnsserver

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// longName is a 240-character name, long enough that an uncompressed answer
// would not fit in 512 bytes.
var longName = strings.Repeat(strings.Repeat("a", 59)+".", 4) + "test"

var hosts = map[string]netip.Addr{
	"example.test":     netip.MustParseAddr("192.0.2.10"),
	"www.websim.test":  netip.MustParseAddr("198.51.100.7"),
	"v6only.test":      netip.MustParseAddr("2001:db8::1"),
	"mapped.test":      netip.MustParseAddr("::ffff:192.0.2.77"),
	"broken.test":      {},
	longName:           netip.MustParseAddr("192.0.2.99"),
	"_service.example": netip.MustParseAddr("192.0.2.11"),
}

// recordingLookup looks names up in hosts and records every name it is asked.
type recordingLookup struct {
	mu    sync.Mutex
	names []string
}

func (r *recordingLookup) lookup(name string) (netip.Addr, bool) {
	r.mu.Lock()
	r.names = append(r.names, name)
	r.mu.Unlock()
	a, ok := hosts[name]
	return a, ok
}

func (r *recordingLookup) asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

const testTTL = 42 * time.Second

func startServer(t *testing.T) (*Server, *recordingLookup) {
	t.Helper()
	rec := &recordingLookup{}
	srv, err := Start(Options{Addr: "127.0.0.1:0", TTL: testTTL, Lookup: rec.lookup})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv, rec
}

func exchange(t *testing.T, srv *Server, network string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	resp, _, err := c.Exchange(m, srv.Addr())
	if err != nil {
		t.Fatalf("exchange over %s: %v", network, err)
	}
	return resp
}

func TestAnswers(t *testing.T) {
	srv, _ := startServer(t)
	tests := []struct {
		name      string
		qname     string
		qtype     uint16
		qclass    uint16 // 0 means IN
		wantRcode int
		wantAA    bool
		wantAddr  string // "" means no answer
		wantSOA   bool   // SOA in the authority section
	}{
		{"A known", "example.test.", dns.TypeA, 0, dns.RcodeSuccess, true, "192.0.2.10", false},
		{"A mixed case", "WwW.WebSim.TEST.", dns.TypeA, 0, dns.RcodeSuccess, true, "198.51.100.7", false},
		{"A underscore", "_service.example.", dns.TypeA, 0, dns.RcodeSuccess, true, "192.0.2.11", false},
		{"A 4in6 mapped", "mapped.test.", dns.TypeA, 0, dns.RcodeSuccess, true, "192.0.2.77", false},
		{"A long name", longName + ".", dns.TypeA, 0, dns.RcodeSuccess, true, "192.0.2.99", false},
		{"ANY known", "example.test.", dns.TypeANY, 0, dns.RcodeSuccess, true, "192.0.2.10", false},
		{"AAAA known v4 is NODATA", "example.test.", dns.TypeAAAA, 0, dns.RcodeSuccess, true, "", true},
		{"MX known is NODATA", "Example.Test.", dns.TypeMX, 0, dns.RcodeSuccess, true, "", true},
		{"AAAA v6 host", "v6only.test.", dns.TypeAAAA, 0, dns.RcodeSuccess, true, "2001:db8::1", false},
		{"A v6 host is NODATA", "v6only.test.", dns.TypeA, 0, dns.RcodeSuccess, true, "", true},
		{"A unknown", "nope.test.", dns.TypeA, 0, dns.RcodeNameError, true, "", true},
		{"AAAA unknown", "nope.test.", dns.TypeAAAA, 0, dns.RcodeNameError, true, "", true},
		{"subdomain of known", "sub.example.test.", dns.TypeA, 0, dns.RcodeNameError, true, "", true},
		{"escaped dot never looked up", `example\.test.`, dns.TypeA, 0, dns.RcodeNameError, true, "", true},
		{"root SOA", ".", dns.TypeSOA, 0, dns.RcodeSuccess, true, "", false},
		{"root A", ".", dns.TypeA, 0, dns.RcodeSuccess, true, "", true},
		{"invalid address from Lookup", "broken.test.", dns.TypeA, 0, dns.RcodeServerFailure, false, "", false},
		{"CHAOS class refused", "version.bind.", dns.TypeTXT, dns.ClassCHAOS, dns.RcodeRefused, false, "", false},
		{"AXFR refused", "example.test.", dns.TypeAXFR, 0, dns.RcodeRefused, false, "", false},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range tests {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				m := new(dns.Msg).SetQuestion(tc.qname, tc.qtype)
				if tc.qclass != 0 {
					m.Question[0].Qclass = tc.qclass
				}
				resp := exchange(t, srv, network, m)
				if resp.Rcode != tc.wantRcode {
					t.Errorf("Rcode = %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tc.wantRcode])
				}
				if resp.Authoritative != tc.wantAA {
					t.Errorf("AA = %v, want %v", resp.Authoritative, tc.wantAA)
				}
				if resp.RecursionAvailable {
					t.Error("RA set")
				}
				if !resp.RecursionDesired {
					t.Error("RD not copied from the query")
				}
				if len(resp.Question) != 1 || resp.Question[0] != m.Question[0] {
					t.Errorf("question = %v, want %v", resp.Question, m.Question)
				}
				if tc.qname == "." {
					checkRootSOA(t, resp, tc.qtype)
				}
				checkAnswer(t, resp, tc.qname, tc.wantAddr)
				gotSOA := len(resp.Ns) == 1 && resp.Ns[0].Header().Rrtype == dns.TypeSOA
				if gotSOA != tc.wantSOA || (!tc.wantSOA && len(resp.Ns) != 0) {
					t.Errorf("authority = %v, want SOA: %v", resp.Ns, tc.wantSOA)
				}
				if gotSOA {
					soa := resp.Ns[0].(*dns.SOA)
					if soa.Hdr.Name != "." || soa.Hdr.Ttl != 42 || soa.Minttl != 42 {
						t.Errorf("SOA = %v, want owner . with TTL and minimum 42", soa)
					}
				}
			})
		}
	}
}

func checkRootSOA(t *testing.T, resp *dns.Msg, qtype uint16) {
	t.Helper()
	if qtype != dns.TypeSOA {
		return
	}
	if len(resp.Answer) != 1 {
		t.Fatalf("answer = %v, want the root SOA", resp.Answer)
	}
	if soa, ok := resp.Answer[0].(*dns.SOA); !ok || soa.Hdr.Name != "." {
		t.Errorf("answer = %v, want the root SOA", resp.Answer[0])
	}
}

// checkAnswer checks that resp answers with exactly wantAddr (A or AAAA)
// owned by qname, or has no answer when wantAddr is "".
func checkAnswer(t *testing.T, resp *dns.Msg, qname, wantAddr string) {
	t.Helper()
	if wantAddr == "" {
		if len(resp.Answer) != 0 && resp.Answer[0].Header().Rrtype != dns.TypeSOA {
			t.Errorf("answer = %v, want none", resp.Answer)
		}
		return
	}
	if len(resp.Answer) != 1 {
		t.Fatalf("answer = %v, want one record for %s", resp.Answer, wantAddr)
	}
	var got net.IP
	switch rr := resp.Answer[0].(type) {
	case *dns.A:
		got = rr.A
	case *dns.AAAA:
		got = rr.AAAA
	default:
		t.Fatalf("answer = %v, want A or AAAA", rr)
	}
	h := resp.Answer[0].Header()
	if got.String() != wantAddr {
		t.Errorf("address = %s, want %s", got, wantAddr)
	}
	if h.Ttl != uint32(testTTL/time.Second) {
		t.Errorf("TTL = %d, want %d", h.Ttl, uint32(testTTL/time.Second))
	}
	if h.Name != qname || h.Class != dns.ClassINET {
		t.Errorf("owner = %q class %d, want %q IN", h.Name, h.Class, qname)
	}
}

func TestLookupGetsCanonicalNames(t *testing.T) {
	srv, rec := startServer(t)
	for _, q := range []string{"WWW.WebSim.Test.", "Nope.TEST."} {
		exchange(t, srv, "udp", new(dns.Msg).SetQuestion(q, dns.TypeA))
	}
	got := rec.asked()
	want := []string{"www.websim.test", "nope.test"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Lookup asked %q, want %q", got, want)
	}
}

func TestDefaultTTL(t *testing.T) {
	srv, err := Start(Options{Addr: "127.0.0.1:0", Lookup: func(string) (netip.Addr, bool) {
		return netip.MustParseAddr("192.0.2.1"), true
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp := exchange(t, srv, "udp", new(dns.Msg).SetQuestion("x.test.", dns.TypeA))
	if len(resp.Answer) != 1 || resp.Answer[0].Header().Ttl != 300 {
		t.Errorf("answer = %v, want one record with TTL 300", resp.Answer)
	}
}

func TestEDNS(t *testing.T) {
	srv, _ := startServer(t)
	for _, network := range []string{"udp", "tcp"} {
		m := new(dns.Msg).SetQuestion("example.test.", dns.TypeA).SetEdns0(1232, true)
		resp := exchange(t, srv, network, m)
		opt := resp.IsEdns0()
		if opt == nil || opt.Version() != 0 || opt.UDPSize() < 512 {
			t.Errorf("%s: OPT = %v, want version 0 with a UDP size", network, opt)
		}
		if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Errorf("%s: rcode %d answer %v, want one A record", network, resp.Rcode, resp.Answer)
		}

		m = new(dns.Msg).SetQuestion("example.test.", dns.TypeA).SetEdns0(1232, false)
		m.IsEdns0().SetVersion(1)
		resp = exchange(t, srv, network, m)
		if resp.Rcode != dns.RcodeBadVers || len(resp.Answer) != 0 {
			t.Errorf("%s: EDNS version 1: rcode %s answer %v, want BADVERS and no answer",
				network, dns.RcodeToString[resp.Rcode], resp.Answer)
		}
	}
}

// rawExchange sends b over UDP and returns the unpacked response, or nil if
// none arrives within wait.
func rawExchange(t *testing.T, srv *Server, b []byte, wait time.Duration) *dns.Msg {
	t.Helper()
	c, err := net.Dial("udp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	resp := new(dns.Msg)
	if err := resp.Unpack(buf[:n]); err != nil {
		t.Fatalf("unpack response: %v", err)
	}
	return resp
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestRejects(t *testing.T) {
	srv, _ := startServer(t)
	pack := func(m *dns.Msg) []byte {
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	noQuestion := &dns.Msg{MsgHdr: dns.MsgHdr{Id: 7}}
	twoQuestions := new(dns.Msg).SetQuestion("example.test.", dns.TypeA)
	twoQuestions.Question = append(twoQuestions.Question, dns.Question{Name: "www.websim.test.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	notify := new(dns.Msg).SetNotify("example.test.")
	update := new(dns.Msg)
	update.SetUpdate("example.test.")
	iquery := new(dns.Msg).SetQuestion("example.test.", dns.TypeA)
	iquery.Opcode = dns.OpcodeIQuery
	// A header that claims one question followed by a cut-off name.
	truncated := pack(new(dns.Msg).SetQuestion("example.test.", dns.TypeA))
	truncated = truncated[:len(truncated)-6]
	response := new(dns.Msg).SetQuestion("example.test.", dns.TypeA)
	response.Response = true

	tests := []struct {
		name      string
		msg       []byte
		wantRcode int // -1: no response at all
	}{
		{"no question", pack(noQuestion), dns.RcodeFormatError},
		{"two questions", pack(twoQuestions), dns.RcodeFormatError},
		{"malformed", truncated, dns.RcodeFormatError},
		{"NOTIFY", pack(notify), dns.RcodeNotImplemented},
		{"UPDATE", pack(update), dns.RcodeNotImplemented},
		{"IQUERY", pack(iquery), dns.RcodeNotImplemented},
		{"response is ignored", pack(response), -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wait := 5 * time.Second
			if tc.wantRcode < 0 {
				wait = 200 * time.Millisecond
			}
			resp := rawExchange(t, srv, tc.msg, wait)
			switch {
			case tc.wantRcode < 0 && resp != nil:
				t.Errorf("got response %v, want none", resp)
			case tc.wantRcode < 0:
			case resp == nil:
				t.Errorf("no response, want %s", dns.RcodeToString[tc.wantRcode])
			case resp.Rcode != tc.wantRcode || !resp.Response || len(resp.Answer) != 0:
				t.Errorf("rcode %s QR %v answer %v, want %s, QR and no answer",
					dns.RcodeToString[resp.Rcode], resp.Response, resp.Answer, dns.RcodeToString[tc.wantRcode])
			}
		})
	}
}

func TestQueriesCount(t *testing.T) {
	srv, _ := startServer(t)
	if n := srv.Queries(); n != 0 {
		t.Fatalf("Queries() = %d before any query", n)
	}
	exchange(t, srv, "udp", new(dns.Msg).SetQuestion("example.test.", dns.TypeA))
	exchange(t, srv, "tcp", new(dns.Msg).SetQuestion("nope.test.", dns.TypeA))
	rawExchange(t, srv, make([]byte, 12), 5*time.Second) // no question: FORMERR
	if n := srv.Queries(); n != 3 {
		t.Errorf("Queries() = %d, want 3", n)
	}
}

func TestConcurrentQueries(t *testing.T) {
	srv, _ := startServer(t)
	const workers, perWorker = 8, 25
	var wg sync.WaitGroup
	for i := range workers {
		network := "udp"
		if i%2 == 1 {
			network = "tcp"
		}
		wg.Go(func() {
			c := &dns.Client{Net: network, Timeout: 5 * time.Second}
			for j := range perWorker {
				name, want := "example.test.", dns.RcodeSuccess
				if j%3 == 0 {
					name, want = "nope.test.", dns.RcodeNameError
				}
				resp, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), srv.Addr())
				if err != nil {
					t.Errorf("%s: %v", network, err)
					return
				}
				if resp.Rcode != want {
					t.Errorf("%s %s: rcode %d, want %d", network, name, resp.Rcode, want)
				}
			}
		})
	}
	wg.Wait()
	if n := srv.Queries(); n != workers*perWorker {
		t.Errorf("Queries() = %d, want %d", n, workers*perWorker)
	}
}

func TestGoResolver(t *testing.T) {
	srv, _ := startServer(t)
	r := &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, srv.Addr())
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, name := range []string{"example.test", "EXAMPLE.test."} {
		addrs, err := r.LookupHost(ctx, name)
		if err != nil {
			t.Fatalf("LookupHost(%q): %v", name, err)
		}
		if len(addrs) != 1 || addrs[0] != "192.0.2.10" {
			t.Errorf("LookupHost(%q) = %v, want [192.0.2.10]", name, addrs)
		}
	}

	addrs, err := r.LookupHost(ctx, "nope.test")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("LookupHost(nope.test) = %v, %v; want a DNSError with IsNotFound", addrs, err)
	}
}

func TestValidate(t *testing.T) {
	lookup := func(string) (netip.Addr, bool) { return netip.Addr{}, false }
	tests := []struct {
		name string
		opts Options
		want []string // substrings of the error; none means valid
	}{
		{"valid", Options{Addr: "127.0.0.1:0", Lookup: lookup}, nil},
		{"valid IPv6 and TTL", Options{Addr: "[::1]:5353", TTL: time.Hour, Lookup: lookup}, nil},
		{"valid max TTL", Options{Addr: "127.0.0.1:0", TTL: MaxTTL, Lookup: lookup}, nil},
		{"everything wrong", Options{TTL: 500 * time.Millisecond},
			[]string{"Addr is required", "TTL 500ms is below 1s", "Lookup is required"}},
		{"host name", Options{Addr: "localhost:53", Lookup: lookup}, []string{`Addr "localhost:53" is not IP:port`}},
		{"no port", Options{Addr: "127.0.0.1", Lookup: lookup}, []string{`Addr "127.0.0.1" is not IP:port`}},
		{"negative TTL", Options{Addr: "127.0.0.1:0", TTL: -time.Second, Lookup: lookup}, []string{"below 1s"}},
		{"huge TTL", Options{Addr: "127.0.0.1:0", TTL: MaxTTL + time.Second, Lookup: lookup}, []string{"TTL", "above"}},
		{"valid LookupAll", Options{Addr: "127.0.0.1:0", LookupAll: func(string) []netip.Addr { return nil }}, nil},
		{"both lookups", Options{Addr: "127.0.0.1:0", Lookup: lookup, LookupAll: func(string) []netip.Addr { return nil }},
			[]string{"Lookup and LookupAll are both set"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors %q", tc.want)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Validate() = %q, missing %q", msg, w)
				}
			}
			for _, line := range strings.Split(msg, "\n") {
				if !strings.HasPrefix(line, "dnsserver: ") {
					t.Errorf("error line %q lacks the dnsserver: prefix", line)
				}
			}
			if got := len(strings.Split(msg, "\n")); got != len(tc.want) && tc.name == "everything wrong" {
				t.Errorf("Validate() reported %d problems, want %d: %q", got, len(tc.want), msg)
			}
			if _, err := Start(tc.opts); err == nil {
				t.Error("Start accepted invalid options")
			}
		})
	}
}

func TestStartAddressInUse(t *testing.T) {
	lookup := func(string) (netip.Addr, bool) { return netip.Addr{}, false }
	tests := []struct {
		network string
		occupy  func(addr string) (func() error, error)
	}{
		{"udp", func(addr string) (func() error, error) {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return nil, err
			}
			return pc.Close, nil
		}},
		{"tcp", func(addr string) (func() error, error) {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return nil, err
			}
			return ln.Close, nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.network, func(t *testing.T) {
			// Take a port that is free for both protocols, then occupy one.
			srv, err := Start(Options{Addr: "127.0.0.1:0", Lookup: lookup})
			if err != nil {
				t.Fatal(err)
			}
			addr := srv.Addr()
			if err := srv.Close(); err != nil {
				t.Fatal(err)
			}
			release, err := tc.occupy(addr)
			if err != nil {
				t.Skipf("cannot occupy %s %s: %v", tc.network, addr, err)
			}
			defer release()

			srv, err = Start(Options{Addr: addr, Lookup: lookup})
			if err == nil {
				srv.Close()
				t.Fatalf("Start on %s %s in use succeeded", tc.network, addr)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "dnsserver: ") || !strings.Contains(msg, addr) ||
				!strings.Contains(msg, "listen "+tc.network) || !strings.Contains(msg, "address already in use") {
				t.Errorf("error %q, want dnsserver: listen %s %s ... address already in use", msg, tc.network, addr)
			}
		})
	}
}

func TestCloseIdempotentNoLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	rec := &recordingLookup{}
	srv, err := Start(Options{Addr: "127.0.0.1:0", Lookup: rec.lookup})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()

	// Leave a TCP connection open and idle: Close must not wait for it.
	conn, err := dns.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.WriteMsg(new(dns.Msg).SetQuestion("example.test.", dns.TypeA)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ReadMsg(); err != nil {
		t.Fatal(err)
	}
	exchange(t, srv, "udp", new(dns.Msg).SetQuestion("example.test.", dns.TypeA))

	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v with an idle TCP connection", d)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	goleak.VerifyNone(t, ignore)

	// Both ports are released.
	c := &dns.Client{Net: "udp", Timeout: 300 * time.Millisecond}
	if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("example.test.", dns.TypeA), addr); err == nil {
		t.Error("UDP query after Close succeeded")
	}
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Errorf("TCP port still bound after Close: %v", err)
	} else {
		ln.Close()
	}
	if pc, err := net.ListenPacket("udp", addr); err != nil {
		t.Errorf("UDP port still bound after Close: %v", err)
	} else {
		pc.Close()
	}
}

func TestConcurrentClose(t *testing.T) {
	srv, _ := startServer(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- srv.Close() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

// TestDelay checks that Options.Delay sees each query's source address and
// canonical name, over UDP and TCP, that its answer waits that long and no
// other does, and that Close cuts a long wait short.
func TestDelay(t *testing.T) {
	const far = 60 * time.Millisecond
	farClient := netip.MustParseAddr("127.0.2.9")
	var mu sync.Mutex
	var seen []string
	srv, err := Start(Options{Addr: "127.0.0.1:0", Lookup: (&recordingLookup{}).lookup,
		Delay: func(client netip.Addr, name string) time.Duration {
			mu.Lock()
			seen = append(seen, client.String()+" "+name)
			mu.Unlock()
			switch {
			case name == "stuck.test":
				return time.Hour
			case client == farClient && name == "example.test":
				return far
			}
			return 0
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ask := func(network, from, qname string, timeout time.Duration) (time.Duration, error) {
		var local net.Addr
		if network == "udp" {
			local = &net.UDPAddr{IP: net.ParseIP(from)}
		} else {
			local = &net.TCPAddr{IP: net.ParseIP(from)}
		}
		c := &dns.Client{Net: network, Timeout: timeout, Dialer: &net.Dialer{LocalAddr: local}}
		start := time.Now()
		_, _, err := c.Exchange(new(dns.Msg).SetQuestion(qname, dns.TypeA), srv.Addr())
		return time.Since(start), err
	}
	for _, network := range []string{"udp", "tcp"} {
		took, err := ask(network, "127.0.2.9", "Example.TEST.", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if took < far || took > far+time.Second {
			t.Errorf("%s: delayed answer took %v, want %v (+ up to 1s)", network, took, far)
		}
		for _, from := range []string{"127.0.0.1", "127.0.2.9"} {
			qname := map[string]string{"127.0.0.1": "example.test.", "127.0.2.9": "nope.test."}[from]
			took, err := ask(network, from, qname, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if took >= far {
				t.Errorf("%s: undelayed answer to %s for %s took %v", network, from, qname, took)
			}
		}
	}
	mu.Lock()
	got := strings.Join(seen, ",")
	mu.Unlock()
	want := "127.0.2.9 example.test,127.0.0.1 example.test,127.0.2.9 nope.test"
	if got != want+","+want {
		t.Errorf("Delay saw %q, want %q twice", got, want)
	}

	// A query waiting an hour: Close ends the wait and drops the answer.
	errc := make(chan error, 1)
	go func() {
		_, err := ask("udp", "127.0.0.1", "stuck.test.", time.Second) // times out: never answered
		errc <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stuck query never reached Delay")
		}
	}
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v with a delayed answer pending", took)
	}
	if err := <-errc; err == nil {
		t.Error("the stuck query was answered after Close")
	}
}

package fetcher

// Tests of IPv6 and of a host's several addresses: AAAA-only names, IPv6
// literals, a first address that refuses connections, and the IP delay of
// hosts on one /64, each judged from the servers' own request logs.

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
	"github.com/meridian-crawler/meridian/websim/dnsserver"
)

// addrServer is an HTTP server on one loopback address that logs every
// request it gets. robots.txt allows everything; "/" links to "/next";
// any other path is a page without links.
type addrServer struct {
	ip   netip.Addr
	port int
	mu   sync.Mutex
	log  []addrEntry
}

// addrEntry is one request as the server saw it.
type addrEntry struct {
	path, host string
	from       netip.Addr // the client's address
	at         time.Time  // when the handler started
}

// startAddrServer starts a addrServer on ip ("::1", "127.0.0.1") and a free
// port, or on port if it is not 0.
func startAddrServer(t *testing.T, ip string, port int) *addrServer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		t.Fatal(err)
	}
	s := &addrServer{ip: netip.MustParseAddr(ip), port: ln.Addr().(*net.TCPAddr).Port}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := addrEntry{path: r.URL.Path, host: r.Host, at: time.Now()}
		if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
			e.from = ap.Addr().Unmap()
		}
		s.mu.Lock()
		s.log = append(s.log, e)
		s.mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("User-agent: *\nAllow: /\n"))
		case "/":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<html><body><a href="/next">next</a></body></html>`))
		default:
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html><body>ok</body></html>"))
		}
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return s
}

// entries returns the log so far.
func (s *addrServer) entries() []addrEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// paths returns "host path" of every request, in order.
func (s *addrServer) paths() []string {
	var out []string
	for _, e := range s.entries() {
		out = append(out, e.host+" "+e.path)
	}
	return out
}

// dnsFor starts websim's DNS server on 127.0.0.1 with names (every other
// name: NXDOMAIN) and returns a resolver that asks it.
func dnsFor(t *testing.T, names map[string][]netip.Addr) *dnscache.Resolver {
	t.Helper()
	srv, err := dnsserver.Start(dnsserver.Options{
		Addr:      "127.0.0.1:0",
		LookupAll: func(name string) []netip.Addr { return names[name] },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	res, err := dnscache.New(dnscache.Options{Server: srv.Addr(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// needIPv6 fails the test if ::1 cannot be listened on: the tests of this
// file are about IPv6, and a machine without a loopback IPv6 address
// cannot say anything about it.
func needIPv6(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatalf("no IPv6 loopback on this machine: %v", err)
	}
	ln.Close()
}

// fetchJobs runs a Fetcher with o over jobs until it is idle and returns
// the page Results by URL.
func fetchJobs(t *testing.T, o Options, jobs []Job) map[string]*Result {
	t.Helper()
	c := newCollector(1)
	o.OnResult, o.Logger = c.onResult, testLogger(t)
	o.AllowPrivate = true
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.HostDelay == 0 {
		o.HostDelay = time.Millisecond
	}
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	runCrawl(t, f, c, jobs, 10*time.Millisecond, 20*time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.final
}

// wantFetched checks that every job's URL was fetched.
func wantFetched(t *testing.T, got map[string]*Result, jobs []Job) {
	t.Helper()
	for _, j := range jobs {
		r := got[j.URL]
		if r == nil || r.Status != crawl.StatusFetched || r.HTTPStatus != 200 {
			t.Errorf("%s: %+v, want fetched", j.URL, r)
		}
	}
}

// TestAAAAOnly: a name with only an AAAA record, served on [::1], gets its
// robots.txt and pages, over IPv6.
func TestAAAAOnly(t *testing.T) {
	needIPv6(t)
	s := startAddrServer(t, "::1", 0)
	res := dnsFor(t, map[string][]netip.Addr{"v6only.test": {netip.IPv6Loopback()}})
	base := fmt.Sprintf("http://v6only.test:%d", s.port)
	jobs := []Job{{URL: base + "/"}, {URL: base + "/a"}}
	got := fetchJobs(t, Options{Resolver: res}, jobs)
	wantFetched(t, got, jobs)
	host := fmt.Sprintf("v6only.test:%d", s.port)
	if p, want := s.paths(), []string{host + " /robots.txt", host + " /", host + " /a"}; !sameSet(p, want) {
		t.Errorf("server log %q, want %q", p, want)
	}
	for _, e := range s.entries() {
		if e.from != netip.IPv6Loopback() {
			t.Errorf("%s from %v, want ::1", e.path, e.from)
		}
	}
	if r := got[base+"/"]; r != nil && !slices.Contains(r.Links, base+"/next") {
		t.Errorf("links of %s: %q, want %s/next", r.URL, r.Links, base)
	}
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestIPv6Literal: http://[::1]:PORT/ is fetched, robots.txt first, and
// its links resolve on the literal host.
func TestIPv6Literal(t *testing.T) {
	needIPv6(t)
	s := startAddrServer(t, "::1", 0)
	// The host is a literal: the resolver is never asked.
	res, err := dnscache.New(dnscache.Options{Server: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://[::1]:%d", s.port)
	jobs := []Job{{URL: base + "/", Host: "[::1]"}, {URL: base + "/b"}}
	got := fetchJobs(t, Options{Resolver: res}, jobs)
	wantFetched(t, got, jobs)
	host := fmt.Sprintf("[::1]:%d", s.port)
	if p := s.paths(); len(p) != 3 || p[0] != host+" /robots.txt" || !sameSet(p, []string{host + " /robots.txt", host + " /", host + " /b"}) {
		t.Errorf("server log %q, want robots.txt, then / and /b with Host %s", p, host)
	}
	if r := got[base+"/"]; r != nil && !slices.Equal(r.Links, []string{base + "/next"}) {
		t.Errorf("links %q, want [%s/next]", r.Links, base)
	}
	if st := res.Stats(); st.Queries != 0 || st.Literals == 0 {
		t.Errorf("resolver %+v: want the literal taken without a query", st)
	}
}

// TestFirstAddressRefuses: of a dual-stack name's addresses, the first
// (::1, IPv6 first) refuses connections and the second (127.0.0.1)
// serves: every page is fetched from the second, and the WARC records the
// address really connected to.
func TestFirstAddressRefuses(t *testing.T) {
	needIPv6(t)
	s := refusedOnV6(t)
	res := dnsFor(t, map[string][]netip.Addr{"dual.test": {netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}})
	if addrs, _, err := res.Lookup(t.Context(), "dual.test"); err != nil || len(addrs) != 2 || addrs[0] != netip.IPv6Loopback() {
		t.Fatalf("dual.test resolves to %v, %v; want ::1 first", addrs, err)
	}
	dir := t.TempDir()
	wr, err := warcfile.Open(warcfile.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://dual.test:%d", s.port)
	jobs := []Job{{URL: base + "/"}, {URL: base + "/c"}}
	got := fetchJobs(t, Options{Resolver: res, WARC: wr, HostDelay: 5 * time.Millisecond}, jobs)
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}
	wantFetched(t, got, jobs)
	if n := len(s.entries()); n != 3 {
		t.Errorf("server log %q, want robots.txt and two pages", s.paths())
	}
	for _, e := range s.entries() {
		if e.from != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("%s from %v, want 127.0.0.1", e.path, e.from)
		}
	}
	ips := warcIPs(t, dir)
	for _, u := range []string{base + "/robots.txt", base + "/", base + "/c"} {
		if ips[u] != "127.0.0.1" {
			t.Errorf("%s: WARC-IP-Address %q, want 127.0.0.1 (the address connected to)", u, ips[u])
		}
	}
}

// refusedOnV6 starts a addrServer on 127.0.0.1 at a port that refuses
// connections on [::1].
func refusedOnV6(t *testing.T) *addrServer {
	t.Helper()
	for range 10 {
		s := startAddrServer(t, "127.0.0.1", 0)
		// Nothing listens on [::1] at this port if a listener can take
		// it; once closed, connections to it are refused.
		ln, err := net.Listen("tcp", fmt.Sprintf("[::1]:%d", s.port))
		if err != nil {
			continue
		}
		ln.Close()
		return s
	}
	t.Fatal("no port free on both 127.0.0.1 and ::1 in 10 tries")
	return nil
}

// warcIPs reads the WARC files in dir and returns the WARC-IP-Address of
// each response record by target URI.
func warcIPs(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, x := range readWARCs(t, dir) {
		if x.typ == gowarc.Response {
			out[x.uri] = x.ip
		}
	}
	return out
}

// TestIPDelaySameV6Net: two names on one /64 (both on ::1, the only IPv6
// address here) share one IP delay: no two requests to them reach the
// server closer than IPDelay, though each host's own delay is far
// shorter, and the scheduler saw one IP.
func TestIPDelaySameV6Net(t *testing.T) {
	needIPv6(t)
	s := startAddrServer(t, "::1", 0)
	res := dnsFor(t, map[string][]netip.Addr{"a6.test": {netip.IPv6Loopback()}, "b6.test": {netip.IPv6Loopback()}})
	const ipDelay = 150 * time.Millisecond
	var jobs []Job
	for _, h := range []string{"a6.test", "b6.test"} {
		for i := range 3 {
			jobs = append(jobs, Job{URL: fmt.Sprintf("http://%s:%d/p%d", h, s.port, i)})
		}
	}
	c := newCollector(1)
	f, err := New(Options{
		Workers: 4, HostDelay: time.Millisecond, IPDelay: ipDelay, AllowPrivate: true, Resolver: res,
		OnResult: c.onResult, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	keys := map[netip.Addr]bool{}
	f.testOnStart = func(ip netip.Addr, at time.Time) { // the scheduler's goroutine; read after Run
		starts = append(starts, at)
		keys[ipKey(ip)] = true
	}
	runCrawl(t, f, c, jobs, 10*time.Millisecond, 30*time.Second)
	wantFetched(t, c.final, jobs)
	log := s.entries()
	if len(log) != 8 { // two robots.txt, six pages
		t.Fatalf("server log %q, want 8 requests", s.paths())
	}
	hosts := map[string]int{}
	for i, e := range log {
		hosts[strings.Split(e.host, ":")[0]]++
		if i > 0 {
			if gap := e.at.Sub(log[i-1].at); gap < ipDelay {
				t.Errorf("%s %s came %v after %s %s, want ≥ %v", e.host, e.path, gap, log[i-1].host, log[i-1].path, ipDelay)
			}
		}
	}
	if hosts["a6.test"] != 4 || hosts["b6.test"] != 4 {
		t.Errorf("requests by host %v, want 4 each", hosts)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < ipDelay {
			t.Errorf("answers %d and %d %v apart, want ≥ %v", i-1, i, gap, ipDelay)
		}
	}
	if len(starts) != 8 || len(keys) != 1 {
		t.Errorf("%d answers seen under keys %v, want 8 under one", len(starts), keys)
	}
}

// TestIPKey: IPv4 addresses are their own politeness keys, IPv6 addresses
// share their /64's; the scheduler gives hosts with one key one state.
func TestIPKey(t *testing.T) {
	for _, c := range []struct{ ip, key string }{
		{"192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::"},
		{"2001:db8:1:2::1", "2001:db8:1:2::"},
		{"fe80::1%eth0", "fe80::"},
		{"::1", "::"},
	} {
		if got := ipKey(netip.MustParseAddr(c.ip)); got != netip.MustParseAddr(c.key) {
			t.Errorf("ipKey(%s) = %v, want %s", c.ip, got, c.key)
		}
	}
	f, err := New(Options{AllowPrivate: true, OnResult: func(*Result) {}})
	if err != nil {
		t.Fatal(err)
	}
	s := newScheduler(f)
	hosts := map[string]*host{}
	for _, c := range []struct{ name, ip string }{
		{"a", "2001:db8::1"}, {"b", "2001:db8::2"}, {"c", "2001:db8:0:1::1"},
		{"d", "192.0.2.1"}, {"e", "192.0.2.2"}, {"f", "::ffff:192.0.2.1"},
	} {
		h := &host{name: c.name, hidx: -1}
		s.setIP(h, netip.MustParseAddr(c.ip))
		hosts[c.name] = h
	}
	same := func(a, b string) bool { return hosts[a].ipst == hosts[b].ipst }
	if !same("a", "b") || same("a", "c") || same("d", "e") || !same("d", "f") || same("a", "d") {
		t.Errorf("shared states: a=b %v (want true), a=c %v, d=e %v, d=f %v (want true), a=d %v",
			same("a", "b"), same("a", "c"), same("d", "e"), same("d", "f"), same("a", "d"))
	}
	if n := len(s.ips); n != 4 || hosts["a"].ipst.refs != 2 {
		t.Errorf("%d states, a's with %d hosts; want 4 and 2", n, hosts["a"].ipst.refs)
	}
	// Moving within the /64 keeps the state; leaving it lets go of it.
	st := hosts["a"].ipst
	s.setIP(hosts["a"], netip.MustParseAddr("2001:db8::99"))
	if hosts["a"].ipst != st || hosts["a"].ip != netip.MustParseAddr("2001:db8::99") || st.refs != 2 {
		t.Errorf("a moved in its /64: state %p (was %p), ip %v, refs %d", hosts["a"].ipst, st, hosts["a"].ip, st.refs)
	}
	s.setIP(hosts["a"], netip.MustParseAddr("2001:db8:0:2::1"))
	s.unrefIP(hosts["b"])
	if _, ok := s.ips[netip.MustParseAddr("2001:db8::")]; ok || len(s.ips) != 4 {
		t.Errorf("states %v: want 2001:db8::/64's dropped with its last host", s.ips)
	}
}

// TestEveryAddressFails: when no address of a host takes connections, the
// robots.txt Result's error names each address tried.
func TestEveryAddressFails(t *testing.T) {
	needIPv6(t)
	var port int
	for range 10 { // a port closed on both 127.0.0.1 and ::1
		ln4, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = ln4.Addr().(*net.TCPAddr).Port
		ln6, err := net.Listen("tcp", fmt.Sprintf("[::1]:%d", port))
		ln4.Close()
		if err == nil {
			ln6.Close()
			break
		}
		port = 0
	}
	if port == 0 {
		t.Fatal("no port free on both 127.0.0.1 and ::1 in 10 tries")
	}
	res := dnsFor(t, map[string][]netip.Addr{"dead.test": {netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}})
	c := newCollector(1)
	f, err := New(Options{Workers: 2, AllowPrivate: true, Resolver: res, BackoffBase: time.Hour, OnResult: c.onResult, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runCrawl(t, f, c, []Job{{URL: fmt.Sprintf("http://dead.test:%d/", port)}}, 10*time.Millisecond, 20*time.Second)
	var robots *Result
	for _, r := range c.results() {
		if r.Kind == KindRobots {
			robots = r
		}
	}
	want := []string{"every address failed", fmt.Sprintf("[::1]:%d", port), fmt.Sprintf("127.0.0.1:%d", port), "refused"}
	if robots == nil {
		t.Fatal("no robots.txt Result")
	}
	t.Logf("robots.txt: %s", robots.Err)
	for _, w := range want {
		if !strings.Contains(robots.Err, w) {
			t.Errorf("robots.txt error %q does not say %q", robots.Err, w)
		}
	}
}

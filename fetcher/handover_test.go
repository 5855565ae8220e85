package fetcher

// Tests of what a site of several nodes needs when a host's work moves from
// one node to another: Job.NotBefore, Options.Skip and Fetcher.Pause. All
// traffic goes to one HTTP server on 127.0.0.1; the host names (*.test)
// resolve to 127.0.0.1 through a websim DNS server on 127.0.0.1. Request
// start times are taken on the server side.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/websim/dnsserver"
)

// hoArrival is one request as the server saw it.
type hoArrival struct {
	host, path string
	at         time.Time
}

// hoServer is an HTTP server on 127.0.0.1 serving every *.test host: no
// robots.txt (404: everything allowed), "ok" for any other path, after
// slow(path) if that is set (robots.txt included). It records every arrival.
type hoServer struct {
	srv  *httptest.Server
	port int
	res  *dnscache.Resolver
	slow func(path string) time.Duration

	mu   sync.Mutex
	seen []hoArrival
}

func startHoServer(t *testing.T, slow func(string) time.Duration) *hoServer {
	t.Helper()
	s := &hoServer{slow: slow}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.Host, ":")
		s.mu.Lock()
		s.seen = append(s.seen, hoArrival{host: host, path: r.URL.Path, at: time.Now()})
		s.mu.Unlock()
		if s.slow != nil {
			if d := s.slow(r.URL.Path); d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
				}
			}
		}
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok"))
	}))
	s.srv.Start() // listens on 127.0.0.1
	t.Cleanup(s.srv.Close)
	s.port = int(netip.MustParseAddrPort(s.srv.Listener.Addr().String()).Port())

	s.res = testTLDResolver(t)
	return s
}

// testTLDResolver is a resolver whose DNS server (real, on loopback,
// stopped at the test's end) answers 127.0.0.1 for every *.test name and
// nothing else.
func testTLDResolver(t *testing.T) *dnscache.Resolver {
	t.Helper()
	dns, err := dnsserver.Start(dnsserver.Options{
		Addr: "127.0.0.1:0",
		Lookup: func(name string) (netip.Addr, bool) {
			if strings.HasSuffix(name, ".test") {
				return netip.AddrFrom4([4]byte{127, 0, 0, 1}), true
			}
			return netip.Addr{}, false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	res, err := dnscache.New(dnscache.Options{Server: dns.Addr(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// url is the URL of path on host (a *.test name).
func (s *hoServer) url(host, path string) string {
	return fmt.Sprintf("http://%s:%d%s", host, s.port, path)
}

func (s *hoServer) arrivals() []hoArrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// saw reports whether the server got a request for path on host.
func (s *hoServer) saw(host, path string) bool {
	for _, a := range s.arrivals() {
		if a.host == host && a.path == path {
			return true
		}
	}
	return false
}

// hoResults collects page Results by URL.
type hoResults struct {
	mu    sync.Mutex
	pages map[string][]*Result
	n     int
}

func (c *hoResults) onResult(r *Result) {
	if r.Kind != KindPage {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pages == nil {
		c.pages = map[string][]*Result{}
	}
	c.pages[r.URL] = append(c.pages[r.URL], r)
	c.n++
}

func (c *hoResults) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// only returns the single Result of url, failing the test if there are
// none or several.
func (c *hoResults) only(t *testing.T, url string) *Result {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := c.pages[url]
	if len(rs) != 1 {
		t.Errorf("%s: %d results, want 1", url, len(rs))
		if len(rs) == 0 {
			return &Result{}
		}
	}
	return rs[0]
}

// runHo starts f.Run; the cleanup stops it and waits for it.
func runHo(t *testing.T, f *Fetcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return after its context was cancelled")
		}
	})
}

// newHoFetcher returns a fetcher for s with a 1 ms host delay.
func newHoFetcher(t *testing.T, s *hoServer, c *hoResults, skip func(*Job) bool) *Fetcher {
	t.Helper()
	f, err := New(Options{
		Workers: 4, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: s.res,
		OnResult: c.onResult, Skip: skip, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// startHangingHo starts an hoServer whose /hang answers after 25 s (at
// once when the client goes away) and a running fetcher of it that
// collects its page results.
func startHangingHo(t *testing.T) (*hoServer, *hoResults, *Fetcher) {
	t.Helper()
	s := startHoServer(t, func(path string) time.Duration {
		if path == "/hang" {
			return 25 * time.Second // ends early when the client goes away
		}
		return 0
	})
	c := &hoResults{}
	f := newHoFetcher(t, s, c, nil)
	runHo(t, f)
	return s, c, f
}

// waitHo polls cond every 5 ms until it holds, failing the test after limit.
func waitHo(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %v", what, limit)
		}
	}
}

// waitIdle waits until f has answered n page jobs and is idle.
func waitIdle(t *testing.T, f *Fetcher, c *hoResults, n int) {
	t.Helper()
	waitHo(t, 10*time.Second, fmt.Sprintf("%d results", n), func() bool { return c.count() >= n && f.Idle() })
	if got := c.count(); got != n {
		t.Errorf("%d page results, want %d", got, n)
	}
}

// TestHandoverNotBefore: no request to a host whose job has NotBefore
// starts before it (robots.txt included: it is a request to the host, and
// the scheduler raises the host's next start when the job is queued),
// whether the host is new, known and idle, or has a request in flight when
// the job comes; another host is fetched meanwhile. Part and NotBefore are
// carried to the Result.
func TestHandoverNotBefore(t *testing.T) {
	const wait = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		// before is a job of host a.test fetched before the NotBefore
		// jobs are submitted; inFlight submits them while it is in flight.
		before   string
		inFlight string // the request of host a.test in flight at the submission
		want     []string
	}{
		{name: "new host", want: []string{"/robots.txt", "/a0", "/a1", "/a2"}},
		{name: "known idle host", before: "/warm", want: []string{"/a0", "/a1", "/a2"}},
		{name: "page in flight", before: "/slow", inFlight: "/slow", want: []string{"/a0", "/a1", "/a2"}},
		{name: "robots.txt in flight", before: "/warm", inFlight: "/robots.txt", want: []string{"/warm", "/a0", "/a1", "/a2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slow := tc.inFlight
			s := startHoServer(t, func(p string) time.Duration {
				if p == slow {
					return 150 * time.Millisecond
				}
				return 0
			})
			c := &hoResults{}
			f := newHoFetcher(t, s, c, nil)
			runHo(t, f)
			n := 0
			if tc.before != "" {
				f.Submit([]Job{{URL: s.url("a.test", tc.before), Part: 1}})
				n++
				if tc.inFlight != "" {
					waitHo(t, 5*time.Second, "the slow request", func() bool { return s.saw("a.test", tc.inFlight) })
				} else {
					waitIdle(t, f, c, n)
				}
			}
			submitted := len(s.arrivals())
			nb := time.Now().Add(wait)
			var jobs []Job
			for i := range 3 {
				jobs = append(jobs,
					Job{URL: s.url("a.test", fmt.Sprintf("/a%d", i)), Round: 4, Part: 7, NotBefore: nb},
					Job{URL: s.url("b.test", fmt.Sprintf("/b%d", i)), Round: 4, Part: 8})
			}
			f.Submit(jobs)
			n += len(jobs)
			waitIdle(t, f, c, n)

			arr := s.arrivals()
			var aPaths []string
			for _, a := range arr[submitted:] {
				switch a.host {
				case "a.test":
					aPaths = append(aPaths, a.path)
					if a.at.Before(nb) {
						t.Errorf("a.test%s started %v before NotBefore", a.path, nb.Sub(a.at))
					}
				case "b.test":
					// Not held back by a.test's NotBefore. The bound is
					// the whole wait: b.test needs a DNS lookup,
					// robots.txt and three 1 ms host delays.
					if !a.at.Before(nb) {
						t.Errorf("b.test%s started %v after a.test's NotBefore: held back", a.path, a.at.Sub(nb))
					}
				default:
					t.Errorf("request for unknown host %q", a.host)
				}
			}
			if !slices.Equal(aPaths, tc.want) {
				t.Errorf("a.test requests after the submission %q, want %q", aPaths, tc.want)
			}

			for i := range 3 {
				ra := c.only(t, s.url("a.test", fmt.Sprintf("/a%d", i)))
				if ra.Status != crawl.StatusFetched || ra.Part != 7 || !ra.NotBefore.Equal(nb) || ra.Round != 4 || ra.NoRequest {
					t.Errorf("%s: %s part=%d notBefore=%v round=%d noRequest=%v; want fetched, part 7, %v, round 4",
						ra.URL, describe(ra), ra.Part, ra.NotBefore, ra.Round, ra.NoRequest, nb)
				}
				if ra.FetchedAt.Before(nb) {
					t.Errorf("%s: FetchedAt %v before NotBefore", ra.URL, nb.Sub(ra.FetchedAt))
				}
				rb := c.only(t, s.url("b.test", fmt.Sprintf("/b%d", i)))
				if rb.Status != crawl.StatusFetched || rb.Part != 8 || !rb.NotBefore.IsZero() {
					t.Errorf("%s: %s part=%d notBefore=%v; want fetched, part 8, no NotBefore", rb.URL, describe(rb), rb.Part, rb.NotBefore)
				}
			}
			if tc.before != "" {
				if r := c.only(t, s.url("a.test", tc.before)); r.Status != crawl.StatusFetched || r.Part != 1 || !r.NotBefore.IsZero() {
					t.Errorf("%s: %s part=%d notBefore=%v", r.URL, describe(r), r.Part, r.NotBefore)
				}
			}
		})
	}
}

// TestHandoverNotBeforePast: a NotBefore in the past holds nothing back.
func TestHandoverNotBeforePast(t *testing.T) {
	s := startHoServer(t, nil)
	c := &hoResults{}
	f := newHoFetcher(t, s, c, nil)
	runHo(t, f)
	past := time.Now().Add(-time.Hour)
	start := time.Now()
	f.Submit([]Job{{URL: s.url("a.test", "/p"), NotBefore: past, Part: 3}})
	waitIdle(t, f, c, 1)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	if r := c.only(t, s.url("a.test", "/p")); r.Status != crawl.StatusFetched || !r.NotBefore.Equal(past) || r.Part != 3 {
		t.Errorf("%s part=%d notBefore=%v", describe(r), r.Part, r.NotBefore)
	}
}

// TestHandoverSkip: jobs Skip drops are answered without a request (Retry,
// NoRequest, StatusError, the dropped message, the job carried through);
// the server never sees their URLs; the others are fetched normally.
func TestHandoverSkip(t *testing.T) {
	const dropped = "fetcher: job dropped by its caller"
	type jobSpec struct {
		host, path string
		part       uint32
	}
	mixed := []jobSpec{
		{"a.test", "/keep/1", 1}, {"a.test", "/drop/1", 2}, {"a.test", "/keep/2", 1}, {"a.test", "/drop/2", 1},
		{"b.test", "/keep/3", 2}, {"b.test", "/drop/3", 1}, {"b.test", "/keep/4", 1},
	}
	for _, tc := range []struct {
		name string
		jobs []jobSpec
		skip func(*Job) bool
		drop func(jobSpec) bool // what skip should drop
	}{
		{
			name: "by URL",
			jobs: mixed,
			skip: func(j *Job) bool { return strings.Contains(j.URL, "/drop/") },
			drop: func(j jobSpec) bool { return strings.HasPrefix(j.path, "/drop/") },
		},
		{
			name: "by part",
			jobs: mixed,
			skip: func(j *Job) bool { return j.Part == 2 },
			drop: func(j jobSpec) bool { return j.part == 2 },
		},
		{
			name: "a whole host",
			jobs: mixed,
			skip: func(j *Job) bool { return j.Host == "a.test" || strings.Contains(j.URL, "//a.test:") },
			drop: func(j jobSpec) bool { return j.host == "a.test" },
		},
		{
			name: "nothing",
			jobs: mixed,
			skip: func(*Job) bool { return false },
			drop: func(jobSpec) bool { return false },
		},
		{
			name: "everything",
			jobs: mixed,
			skip: func(*Job) bool { return true },
			drop: func(jobSpec) bool { return true },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startHoServer(t, nil)
			c := &hoResults{}
			var mu sync.Mutex
			asked := map[string]int{}
			f := newHoFetcher(t, s, c, func(j *Job) bool {
				mu.Lock()
				asked[j.URL]++
				mu.Unlock()
				return tc.skip(j)
			})
			runHo(t, f)
			var jobs []Job
			for _, js := range tc.jobs {
				jobs = append(jobs, Job{URL: s.url(js.host, js.path), Round: 9, Depth: 3, Cash: 0.5, Part: js.part})
			}
			f.Submit(jobs)
			waitIdle(t, f, c, len(jobs))

			nDropped := 0
			for _, js := range tc.jobs {
				u := s.url(js.host, js.path)
				r := c.only(t, u)
				if r.Round != 9 || r.Depth != 3 || r.Cash != 0.5 || r.Part != js.part || r.Kind != KindPage {
					t.Errorf("%s: job not carried through: %+v", u, r.Job)
				}
				mu.Lock()
				if asked[u] < 1 {
					t.Errorf("%s: Skip never asked", u)
				}
				mu.Unlock()
				if tc.drop(js) {
					nDropped++
					if r.Status != crawl.StatusError || !r.Retry || !r.NoRequest || r.Err != dropped || r.HTTPStatus != 0 {
						t.Errorf("%s: %s retry=%v noRequest=%v err=%q; want the dropped answer", u, describe(r), r.Retry, r.NoRequest, r.Err)
					}
					if s.saw(js.host, js.path) {
						t.Errorf("%s: dropped, yet requested", u)
					}
				} else {
					if r.Status != crawl.StatusFetched || r.Retry || r.NoRequest || r.HTTPStatus != 200 {
						t.Errorf("%s: %s retry=%v noRequest=%v; want fetched", u, describe(r), r.Retry, r.NoRequest)
					}
					if !s.saw(js.host, js.path) {
						t.Errorf("%s: kept, yet not requested", u)
					}
				}
			}
			// A host whose jobs are all dropped gets no request at all, not
			// even robots.txt (it may be another node's host by now); a
			// host with a job kept gets its robots.txt.
			for _, host := range []string{"a.test", "b.test"} {
				kept := slices.ContainsFunc(tc.jobs, func(js jobSpec) bool { return js.host == host && !tc.drop(js) })
				if got := s.saw(host, "/robots.txt"); got != kept {
					t.Errorf("%s: robots.txt requested %v, want %v (a job kept: %v)", host, got, kept, kept)
				}
			}
			for _, a := range s.arrivals() {
				if a.path == "/robots.txt" {
					continue
				}
				if !slices.ContainsFunc(tc.jobs, func(js jobSpec) bool { return js.host == a.host && js.path == a.path && !tc.drop(js) }) {
					t.Errorf("unexpected request %s%s", a.host, a.path)
				}
			}
			st := f.Stats()
			if st.Done != int64(len(jobs)) || st.Retries != int64(nDropped) || st.Queued != 0 || st.InFlight != 0 {
				t.Errorf("stats %+v; want %d done, %d retries", st, len(jobs), nDropped)
			}
		})
	}
}

// TestHandoverPauseBeforeSubmit: jobs submitted while paused wait (no
// request at all reaches the server: the scheduler hands out no task,
// robots.txt and host setup included) without the scheduler spinning;
// pausing twice and resuming once fetches them all.
func TestHandoverPauseBeforeSubmit(t *testing.T) {
	s := startHoServer(t, nil)
	c := &hoResults{}
	f := newHoFetcher(t, s, c, nil)
	f.Pause(true)
	runHo(t, f)
	var jobs []Job
	for i := range 4 {
		jobs = append(jobs, Job{URL: s.url("a.test", fmt.Sprintf("/a%d", i)), Part: 1}, Job{URL: s.url("b.test", fmt.Sprintf("/b%d", i)), Part: 2})
	}
	f.Submit(jobs)
	f.Pause(true) // twice

	wall0, cpu0 := time.Now(), cpuTime(t)
	time.Sleep(500 * time.Millisecond)
	wall, cpu := time.Since(wall0), cpuTime(t)-cpu0
	if cpu > wall/2 {
		t.Errorf("paused scheduler used %v CPU in %v", cpu, wall)
	}
	if arr := s.arrivals(); len(arr) != 0 {
		t.Errorf("%d requests while paused, first %s%s", len(arr), arr[0].host, arr[0].path)
	}
	if n := c.count(); n != 0 {
		t.Errorf("%d results while paused", n)
	}
	if st := f.Stats(); st.Queued != int64(len(jobs)) || st.Requests != 0 || f.Idle() {
		t.Errorf("while paused: stats %+v, idle %v", st, f.Idle())
	}

	f.Pause(false) // once
	waitIdle(t, f, c, len(jobs))
	for _, j := range jobs {
		if r := c.only(t, j.URL); r.Status != crawl.StatusFetched || r.Part != j.Part {
			t.Errorf("%s: %s part %d", j.URL, describe(r), r.Part)
		}
		u := strings.TrimPrefix(j.URL, "http://")
		host, _, _ := strings.Cut(u, ":")
		if !s.saw(host, u[strings.IndexByte(u, '/'):]) {
			t.Errorf("%s not requested", j.URL)
		}
	}
}

// TestHandoverPauseMidCrawl: pausing in the middle of a host's queue lets
// the request in flight finish and starts no other until Pause(false);
// then the rest is fetched.
func TestHandoverPauseMidCrawl(t *testing.T) {
	s := startHoServer(t, func(string) time.Duration { return 20 * time.Millisecond })
	c := &hoResults{}
	f := newHoFetcher(t, s, c, nil)
	runHo(t, f)
	const n = 10
	var jobs []Job
	for i := range n {
		jobs = append(jobs, Job{URL: s.url("a.test", fmt.Sprintf("/p%d", i))})
	}
	f.Submit(jobs)
	waitHo(t, 5*time.Second, "two page requests", func() bool { return len(s.arrivals()) >= 3 }) // robots.txt, /p0, /p1
	f.Pause(true)
	// A task handed out just before Pause may still reach the server, and
	// the request in flight finishes: let them.
	time.Sleep(200 * time.Millisecond)
	before := len(s.arrivals())
	done := c.count()
	time.Sleep(300 * time.Millisecond)
	if after := len(s.arrivals()); after != before {
		t.Errorf("%d requests started while paused", after-before)
	}
	if got := c.count(); got != done {
		t.Errorf("%d results while paused", got-done)
	}
	if before >= n+1 {
		t.Fatalf("all %d requests made despite the pause", before)
	}
	if st := f.Stats(); st.Queued == 0 || st.InFlight != 0 {
		t.Errorf("while paused: %+v", st)
	}
	f.Pause(false)
	waitIdle(t, f, c, n)
	for _, j := range jobs {
		if r := c.only(t, j.URL); r.Status != crawl.StatusFetched {
			t.Errorf("%s: %s", j.URL, describe(r))
		}
	}
	if got := len(s.arrivals()); got != n+1 {
		t.Errorf("%d requests, want %d", got, n+1)
	}
}

// TestHandoverFreshRobots: a host whose robots.txt is stored is not asked
// for it again, unless a job says FreshRobots (its node died before the
// sitemaps named there were kept); and a fetcher that fetched robots.txt
// itself does not fetch it again for a later FreshRobots job.
func TestHandoverFreshRobots(t *testing.T) {
	s := startHoServer(t, nil)
	stored := crawl.HostRecord{Robots: []byte("User-agent: *\nAllow: /\n"), RobotsStatus: 200, RobotsExpiry: time.Now().Add(time.Hour)}
	hosts := newMemHosts()
	hosts.m["a.test"], hosts.m["b.test"] = stored, stored
	c := &hoResults{}
	f, err := New(Options{Workers: 4, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: s.res,
		OnResult: c.onResult, Hosts: hosts, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runHo(t, f)
	f.Submit([]Job{{URL: s.url("a.test", "/1"), Host: "a.test"}, {URL: s.url("b.test", "/1"), Host: "b.test", FreshRobots: true}})
	waitIdle(t, f, c, 2)
	if s.saw("a.test", "/robots.txt") {
		t.Error("a.test's stored robots.txt was fetched again without FreshRobots")
	}
	if !s.saw("b.test", "/robots.txt") {
		t.Error("b.test's robots.txt was not fetched again for a FreshRobots job")
	}
	robots := func(host string) int {
		n := 0
		for _, a := range s.arrivals() {
			if a.host == host && a.path == "/robots.txt" {
				n++
			}
		}
		return n
	}
	// b.test's robots.txt was fetched here: a later FreshRobots job does
	// not fetch it a second time; a.test's still comes from the store.
	f.Submit([]Job{{URL: s.url("b.test", "/2"), Host: "b.test", FreshRobots: true}, {URL: s.url("a.test", "/2"), Host: "a.test"}})
	waitIdle(t, f, c, 4)
	if n := robots("b.test"); n != 1 {
		t.Errorf("b.test's robots.txt fetched %d times, want once", n)
	}
	if n := robots("a.test"); n != 0 {
		t.Errorf("a.test's robots.txt fetched %d times, want never", n)
	}
}

// TestHandoverAbort: a node cut off from its leader pauses and aborts; the
// request in flight, which would run up to the 30 s TotalTimeout, ends at
// once as a transient failure, and requests after it are not affected.
func TestHandoverAbort(t *testing.T) {
	s, c, f := startHangingHo(t)
	hang := s.url("a.test", "/hang")
	f.Submit([]Job{{URL: hang}})
	waitHo(t, 10*time.Second, "the slow request to arrive", func() bool { return s.saw("a.test", "/hang") })
	f.Pause(true)
	f.Abort()
	// Far less than TotalTimeout: only the abort can end it by then.
	waitHo(t, 10*time.Second, "the aborted request's result", func() bool { return c.count() == 1 })
	if r := c.only(t, hang); !r.Retry || r.Status == crawl.StatusFetched {
		t.Errorf("aborted request: %s, want a transient failure", describe(r))
	}
	f.Pause(false)
	ok := s.url("b.test", "/ok")
	f.Submit([]Job{{URL: ok}})
	waitIdle(t, f, c, 2)
	if r := c.only(t, ok); r.Status != crawl.StatusFetched {
		t.Errorf("a request after the abort: %s", describe(r))
	}
}

// eventHosts is a HostStore that logs each save of one host beside the
// sitemap results a hook adds to the same log, in order.
type eventHosts struct {
	*memHosts
	host string
	mu   sync.Mutex
	log  []string
}

func (h *eventHosts) SaveHost(name string, rec crawl.HostRecord) {
	h.memHosts.SaveHost(name, rec)
	if name == h.host && rec.RobotsStatus != 0 {
		h.add(fmt.Sprintf("save pending=%v", rec.SitemapsPending))
	}
}

func (h *eventHosts) add(e string) {
	h.mu.Lock()
	h.log = append(h.log, e)
	h.mu.Unlock()
}

func (h *eventHosts) events() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.log)
}

// TestSitemapsPendingSurvive: a host's record is saved with its robots.txt
// before the sitemaps robots.txt names are fetched, and says so
// (SitemapsPending) until the last sitemap's result has gone to OnResult;
// a fetcher that takes a record saying so (a node killed in between, or a
// host moved) fetches those sitemaps from the kept robots.txt without
// asking for robots.txt again, so that the sitemaps' URLs are not lost.
func TestSitemapsPendingSurvive(t *testing.T) {
	var port int
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.Host, ":")
		mu.Lock()
		seen = append(seen, host+r.URL.Path)
		mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nAllow: /\nSitemap: http://%s:%d/s.xml\n", host, port)
		case "/s.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://%s:%d/only-in-sitemap</loc></url></urlset>`, host, port)
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	port = int(netip.MustParseAddrPort(srv.Listener.Addr().String()).Port())
	saw := func(hp string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range seen {
			if s == hp {
				n++
			}
		}
		return n
	}
	url := func(host, path string) string { return fmt.Sprintf("http://%s:%d%s", host, port, path) }

	// b.test: this fetcher fetches robots.txt, then the sitemap.
	hosts := &eventHosts{memHosts: newMemHosts(), host: "b.test"}
	// a.test: stored as a node killed after saving its robots.txt and
	// before its sitemap's result left it.
	robotsA := fmt.Sprintf("User-agent: *\nAllow: /\nSitemap: %s\n", url("a.test", "/s.xml"))
	hosts.m["a.test"] = crawl.HostRecord{Robots: []byte(robotsA), RobotsStatus: 200, RobotsExpiry: time.Now().Add(time.Hour), SitemapsPending: true}
	c := &hoResults{}
	sitemapLinks := map[string][]string{}
	var smu sync.Mutex
	onResult := func(r *Result) {
		if r.Kind == KindSitemap {
			smu.Lock()
			sitemapLinks[r.Host] = r.Links
			smu.Unlock()
			if r.Host == "b.test" {
				hosts.add("sitemap result")
			}
		}
		c.onResult(r)
	}
	f, err := New(Options{Workers: 4, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: testTLDResolver(t),
		OnResult: onResult, Hosts: hosts, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runHo(t, f)
	f.Submit([]Job{{URL: url("a.test", "/1"), Host: "a.test"}, {URL: url("b.test", "/1"), Host: "b.test"}})
	waitIdle(t, f, c, 2)

	if n := saw("a.test/robots.txt"); n != 0 {
		t.Errorf("a.test's stored robots.txt fetched %d times, want never", n)
	}
	if n := saw("a.test/s.xml"); n != 1 {
		t.Errorf("a.test's pending sitemap fetched %d times, want once (from the stored robots.txt)", n)
	}
	smu.Lock()
	for _, h := range []string{"a.test", "b.test"} {
		if want := url(h, "/only-in-sitemap"); !slices.Contains(sitemapLinks[h], want) {
			t.Errorf("%s's sitemap result links %v, want %s", h, sitemapLinks[h], want)
		}
	}
	smu.Unlock()
	for _, h := range []string{"a.test", "b.test"} {
		if rec, _, _ := hosts.LoadHost(h); rec.SitemapsPending || rec.RobotsStatus != 200 {
			t.Errorf("%s's record after its sitemaps: pending %v, robots status %d", h, rec.SitemapsPending, rec.RobotsStatus)
		}
	}
	// b.test: saved pending with its robots.txt, the sitemap's result,
	// then saved done.
	ev := hosts.events()
	want := []string{"save pending=true", "sitemap result", "save pending=false"}
	if i := slices.Index(ev, want[0]); i < 0 || len(ev) < i+3 || !slices.Equal(ev[i:i+3], want) {
		t.Errorf("b.test's saves and sitemap result in order %v, want %v in a row", ev, want)
	}
}

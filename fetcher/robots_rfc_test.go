package fetcher

// Tests of robots.txt by RFC 9309 (redirects across hosts, the product
// token, the 30-day rule, Cache-Control) and of Retry-After, against one
// HTTP server on 127.0.0.1 that serves every *.test host (told apart by
// Host) and logs what it receives; the names resolve to 127.0.0.1 through
// a websim DNS server on 127.0.0.1 (testTLDResolver). Every verdict is
// taken from the server's log: which requests came, and when.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// rfcArrival is one request as the server saw it: when it came and when
// its handler had written the whole answer.
type rfcArrival struct {
	host, path, ua string
	at, end        time.Time
	status         int
}

// rfcServer serves every *.test host on 127.0.0.1. A route ("host/path",
// path without the query) answers as it says; without one, robots.txt is
// 404 and any other path 200 "ok" (text/plain).
type rfcServer struct {
	srv  *httptest.Server
	port int

	mu       sync.Mutex
	routes   map[string]http.HandlerFunc
	log      []rfcArrival
	inflight map[string]int
	most     map[string]int // most requests in flight at once, by host
}

func startRFCServer(t *testing.T) *rfcServer {
	t.Helper()
	s := &rfcServer{routes: map[string]http.HandlerFunc{}, inflight: map[string]int{}, most: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	s.port = int(netip.MustParseAddrPort(s.srv.Listener.Addr().String()).Port())
	return s
}

// statusWriter notes the status an answer was given.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (s *rfcServer) serve(w http.ResponseWriter, r *http.Request) {
	host, _, _ := strings.Cut(r.Host, ":")
	a := rfcArrival{host: host, path: r.URL.Path, ua: r.UserAgent(), at: time.Now()}
	s.mu.Lock()
	s.inflight[host]++
	s.most[host] = max(s.most[host], s.inflight[host])
	h := s.routes[host+r.URL.Path]
	s.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w}
	switch {
	case h != nil:
		h(sw, r)
	case r.URL.Path == "/robots.txt":
		http.NotFound(sw, r)
	default:
		sw.Header().Set("Content-Type", "text/plain")
		sw.Write([]byte("ok"))
	}
	a.end, a.status = time.Now(), sw.status
	if a.status == 0 {
		a.status = http.StatusOK
	}
	s.mu.Lock()
	s.inflight[host]--
	s.log = append(s.log, a)
	s.mu.Unlock()
}

// route sets the handler of path on host.
func (s *rfcServer) route(host, path string, h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[host+path] = h
}

// url is the URL of path on host.
func (s *rfcServer) url(host, path string) string {
	return fmt.Sprintf("http://%s:%d%s", host, s.port, path)
}

// requests returns the log, in the order the answers ended.
func (s *rfcServer) requests() []rfcArrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// of returns the requests for host (and path, if not ""), by arrival.
func (s *rfcServer) of(host, path string) []rfcArrival {
	var out []rfcArrival
	for _, a := range s.requests() {
		if a.host == host && (path == "" || a.path == path) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(x, y rfcArrival) int { return x.at.Compare(y.at) })
	return out
}

// paths returns the "host path" of every request, sorted.
func (s *rfcServer) paths() []string {
	var out []string
	for _, a := range s.requests() {
		out = append(out, a.host+" "+a.path)
	}
	slices.Sort(out)
	return out
}

// text answers 200 with body (text/plain) and the given header fields.
func text(body string, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(body))
	}
}

// redirect answers 301 to the URL to.
func redirect(to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to, http.StatusMovedPermanently)
	}
}

// failing answers code with the given header fields.
func failing(code int, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(code)
	}
}

// newRFCFetcher returns a fetcher of s's hosts with a 5 ms host delay,
// changed by mod.
func newRFCFetcher(t *testing.T, res func(*Options), c *collector, mod func(*Options)) *Fetcher {
	t.Helper()
	o := Options{
		Workers: 4, HostDelay: 5 * time.Millisecond, AllowPrivate: true, Hosts: newMemHosts(),
		ConnectTimeout: 2 * time.Second, HeaderTimeout: 2 * time.Second, TotalTimeout: 5 * time.Second,
		BackoffBase: 50 * time.Millisecond, OnResult: c.onResult, Logger: testLogger(t),
	}
	res(&o)
	if mod != nil {
		mod(&o)
	}
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// withResolver gives the options the test's resolver.
func withResolver(t *testing.T) func(*Options) {
	r := testTLDResolver(t)
	return func(o *Options) { o.Resolver = r }
}

// pageResults returns the last page Result of each URL.
func pageResults(c *collector) map[string]*Result {
	out := map[string]*Result{}
	for _, r := range c.results() {
		if r.Kind == KindPage {
			out[r.URL] = r
		}
	}
	return out
}

// TestRobotsRedirects: a robots.txt that redirects, to the same host or to
// others, up to five times, gives the rules of where it leads to the host
// asked; a sixth redirect is not followed (robots.txt unavailable: nothing
// is disallowed); a hop to a name that does not resolve leaves robots.txt
// unreachable (everything disallowed).
func TestRobotsRedirects(t *testing.T) {
	const rules = "User-agent: *\nDisallow: /private\n"
	chain := func(hosts ...string) func(s *rfcServer) {
		return func(s *rfcServer) {
			for i := 0; i+1 < len(hosts); i++ {
				from := "/robots.txt"
				if i > 0 {
					from = "/r"
				}
				s.route(hosts[i], from, redirect(s.url(hosts[i+1], "/r")))
			}
			s.route(hosts[len(hosts)-1], "/r", text(rules))
		}
	}
	tests := []struct {
		name  string
		setup func(s *rfcServer)
		// hops are the requests robots.txt takes ("host path"), in order.
		hops    []string
		private bool // a.test's /private/x is fetched
		retry   bool // a.test's jobs are answered Retry without a request
	}{
		{name: "same host", setup: func(s *rfcServer) {
			s.route("a.test", "/robots.txt", redirect(s.url("a.test", "/robots2.txt")))
			s.route("a.test", "/robots2.txt", text(rules))
		}, hops: []string{"a.test /robots.txt", "a.test /robots2.txt"}},
		{name: "to another host", setup: func(s *rfcServer) {
			s.route("a.test", "/robots.txt", redirect(s.url("www.a.test", "/robots.txt")))
			s.route("www.a.test", "/robots.txt", text(rules))
		}, hops: []string{"a.test /robots.txt", "www.a.test /robots.txt"}},
		{name: "A to B to C", setup: chain("a.test", "b.test", "c.test"),
			hops: []string{"a.test /robots.txt", "b.test /r", "c.test /r"}},
		{name: "five redirects", setup: chain("a.test", "b.test", "c.test", "d.test", "e.test", "f.test"),
			hops: []string{"a.test /robots.txt", "b.test /r", "c.test /r", "d.test /r", "e.test /r", "f.test /r"}},
		{name: "six redirects: allow all", setup: chain("a.test", "b.test", "c.test", "d.test", "e.test", "f.test", "g.test"),
			hops: []string{"a.test /robots.txt", "b.test /r", "c.test /r", "d.test /r", "e.test /r", "f.test /r"}, private: true},
		{name: "a loop across hosts: allow all", setup: func(s *rfcServer) {
			s.route("a.test", "/robots.txt", redirect(s.url("b.test", "/loop")))
			s.route("b.test", "/loop", redirect(s.url("a.test", "/robots.txt")))
		}, hops: []string{"a.test /robots.txt", "b.test /loop", "a.test /robots.txt", "b.test /loop", "a.test /robots.txt", "b.test /loop"}, private: true},
		{name: "to a page: no rules", setup: func(s *rfcServer) {
			s.route("a.test", "/robots.txt", redirect(s.url("b.test", "/")))
			s.route("b.test", "/", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.Write([]byte("<html><body><p>Disallow: /private</p><a href=/x>home</a></body></html>"))
			})
		}, hops: []string{"a.test /robots.txt", "b.test /"}, private: true},
		{name: "to a name that does not resolve", setup: func(s *rfcServer) {
			s.route("a.test", "/robots.txt", redirect(fmt.Sprintf("http://nowhere.invalid:%d/robots.txt", s.port)))
		}, hops: []string{"a.test /robots.txt"}, retry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startRFCServer(t)
			tt.setup(s)
			c := newCollector(3)
			f := newRFCFetcher(t, withResolver(t), c, func(o *Options) { o.DeadEndBackoffMax = 50 * time.Millisecond })
			jobs := []Job{{URL: s.url("a.test", "/private/x"), Host: "a.test"}, {URL: s.url("a.test", "/public"), Host: "a.test"}}
			runCrawl(t, f, c, jobs, 20*time.Millisecond, 20*time.Second)

			want := slices.Clone(tt.hops)
			if !tt.retry {
				want = append(want, "a.test /public")
				if tt.private {
					want = append(want, "a.test /private/x")
				}
			}
			slices.Sort(want)
			got := s.paths()
			if tt.retry {
				// robots.txt is asked for again when the retries come after
				// the host's back-off: as often as that happens.
				got = slices.Compact(got)
			}
			if !slices.Equal(got, want) {
				t.Errorf("requests\n got %q\nwant %q", got, want)
			}
			res := pageResults(c)
			priv, pub := res[jobs[0].URL], res[jobs[1].URL]
			switch {
			case priv == nil || pub == nil:
				t.Fatalf("results: %v", res)
			case tt.retry:
				for _, r := range []*Result{priv, pub} {
					if !r.Retry || !r.NoRequest {
						t.Errorf("%s: %s, want a retry without a request", r.URL, describe(r))
					}
				}
			case tt.private && priv.Status != crawl.StatusFetched, !tt.private && priv.Status != crawl.StatusRobotsDenied:
				t.Errorf("/private/x: %s", describe(priv))
			case pub.Status != crawl.StatusFetched:
				t.Errorf("/public: %s", describe(pub))
			}
		})
	}
}

// TestRobotsHopPoliteness: the hop of a.test's robots.txt to b.test, while
// b.test is being crawled, is a request to b.test like its own: never
// while another is in flight, and no sooner than HostDelay after the end
// of the one before; the IP delay holds between any two requests (every
// host is on 127.0.0.1).
func TestRobotsHopPoliteness(t *testing.T) {
	const (
		hostDelay = 150 * time.Millisecond
		ipDelay   = 20 * time.Millisecond
	)
	s := startRFCServer(t)
	s.route("a.test", "/robots.txt", redirect(s.url("b.test", "/robots.txt")))
	s.route("b.test", "/robots.txt", text("User-agent: *\nDisallow: /private\n"))
	for i := range 4 {
		s.route("b.test", fmt.Sprintf("/p%d", i), func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(50 * time.Millisecond) // a slow page: a hop sent at once would overlap it
			w.Write([]byte("ok"))
		})
	}
	c := newCollector(1)
	f := newRFCFetcher(t, withResolver(t), c, func(o *Options) { o.HostDelay, o.IPDelay = hostDelay, ipDelay })
	var jobs []Job
	for i := range 4 {
		jobs = append(jobs, Job{URL: s.url("b.test", fmt.Sprintf("/p%d", i)), Host: "b.test"})
	}
	jobs = append(jobs, Job{URL: s.url("a.test", "/private/x"), Host: "a.test"}, Job{URL: s.url("a.test", "/public"), Host: "a.test"})
	runCrawl(t, f, c, jobs, 20*time.Millisecond, 20*time.Second)

	b := s.of("b.test", "")
	if len(b) != 6 { // its robots.txt, a.test's hop, four pages
		t.Fatalf("b.test got %d requests, want 6: %+v", len(b), b)
	}
	if n := len(s.of("b.test", "/robots.txt")); n != 2 {
		t.Errorf("b.test's robots.txt requested %d times, want 2 (its own and a.test's hop)", n)
	}
	for i := 1; i < len(b); i++ {
		if gap := b[i].at.Sub(b[i-1].end); gap < hostDelay {
			t.Errorf("b.test %s came %v after the end of %s, want ≥ %v", b[i].path, gap, b[i-1].path, hostDelay)
		}
	}
	if s.most["b.test"] != 1 {
		t.Errorf("b.test had %d requests at once", s.most["b.test"])
	}
	all := s.requests()
	slices.SortFunc(all, func(x, y rfcArrival) int { return x.at.Compare(y.at) })
	for i := 1; i < len(all); i++ {
		if gap := all[i].at.Sub(all[i-1].at); gap < ipDelay {
			t.Errorf("%s %s came %v after %s %s, want ≥ %v (IP delay)", all[i].host, all[i].path, gap, all[i-1].host, all[i-1].path, ipDelay)
		}
	}
	if len(s.of("a.test", "/private/x")) != 0 || len(s.of("a.test", "/public")) != 1 {
		t.Errorf("a.test: %q", s.paths())
	}
}

// TestRobotsAgent: the group matched is that of the product token of the
// User-Agent, or of Options.RobotsAgent, case-insensitively, with "*" as
// the fallback; an agent with a group of its own does not get the "*"
// group's rules.
func TestRobotsAgent(t *testing.T) {
	const file = "User-agent: *\nDisallow: /star\n\nUser-agent: mybot\nDisallow: /mine\n"
	tests := []struct {
		name, ua, agent string
		fetched         []string // of /star, /mine, /other
	}{
		{name: "user-agent's token", ua: "MyBot/2.0 (+https://x.test/bot)", fetched: []string{"/other", "/star"}},
		{name: "robots agent given", agent: "MyBot", fetched: []string{"/other", "/star"}},
		{name: "robots agent over the user-agent's", ua: "MyBot/2.0", agent: "otherbot", fetched: []string{"/mine", "/other"}},
		{name: "default", fetched: []string{"/mine", "/other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startRFCServer(t)
			s.route("a.test", "/robots.txt", text(file))
			c := newCollector(1)
			f := newRFCFetcher(t, withResolver(t), c, func(o *Options) { o.UserAgent, o.RobotsAgent = tt.ua, tt.agent })
			var jobs []Job
			for _, p := range []string{"/star", "/mine", "/other"} {
				jobs = append(jobs, Job{URL: s.url("a.test", p), Host: "a.test"})
			}
			runCrawl(t, f, c, jobs, 20*time.Millisecond, 20*time.Second)
			var got []string
			wantUA := tt.ua
			if wantUA == "" {
				wantUA = DefaultUserAgent("")
			}
			for _, a := range s.of("a.test", "") {
				if a.ua != wantUA {
					t.Errorf("%s sent with User-Agent %q, want %q", a.path, a.ua, wantUA)
				}
				if a.path != "/robots.txt" {
					got = append(got, a.path)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.fetched) {
				t.Errorf("fetched %q, want %q", got, tt.fetched)
			}
			for u, r := range pageResults(c) {
				if want := slices.Contains(tt.fetched, urlnorm.PathQuery(u)); want != (r.Status == crawl.StatusFetched) || !want && r.Status != crawl.StatusRobotsDenied {
					t.Errorf("%s: %s", u, describe(r))
				}
			}
		})
	}
}

// TestRetryAfter: a 429 or 503 with Retry-After (seconds, or an HTTP-date)
// to a page, robots.txt or a sitemap: the host's next request comes no
// sooner than that, and the URL is fetched again later.
func TestRetryAfter(t *testing.T) {
	const wait = 2 * time.Second
	seconds := func(time.Time) string { return "2" }
	date := func(now time.Time) string { return now.Add(wait).UTC().Format(http.TimeFormat) }
	tests := []struct {
		name   string
		path   string // the path answered with code once
		code   int
		value  func(now time.Time) string
		robots string // a.test's robots.txt, if not 404
	}{
		{name: "page 429 seconds", path: "/p0", code: 429, value: seconds},
		{name: "page 503 seconds", path: "/p0", code: 503, value: seconds},
		{name: "page 429 date", path: "/p0", code: 429, value: date},
		{name: "page 503 date", path: "/p0", code: 503, value: date},
		{name: "robots.txt 503 seconds", path: "/robots.txt", code: 503, value: seconds},
		{name: "robots.txt 429 date", path: "/robots.txt", code: 429, value: date},
		{name: "sitemap 429 seconds", path: "/sm.xml", code: 429, value: seconds, robots: "Sitemap: /sm.xml\n"},
		{name: "sitemap 503 date", path: "/sm.xml", code: 503, value: date, robots: "Sitemap: /sm.xml\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startRFCServer(t)
			if tt.robots != "" {
				s.route("a.test", "/robots.txt", text(strings.ReplaceAll(tt.robots, "/sm.xml", s.url("a.test", "/sm.xml"))))
			}
			var (
				mu    sync.Mutex
				once  bool
				until time.Time // no request before
			)
			s.route("a.test", tt.path, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				first := !once
				once = true
				mu.Unlock()
				if !first {
					switch tt.path {
					case "/robots.txt":
						http.NotFound(w, r)
					case "/sm.xml":
						w.Write([]byte(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"></urlset>`))
					default:
						w.Write([]byte("ok"))
					}
					return
				}
				now := time.Now()
				v := tt.value(now)
				w.Header().Set("Retry-After", v)
				w.WriteHeader(tt.code)
				mu.Lock()
				until = now.Add(wait) // the arrival of the 429 plus the wait
				if at, err := http.ParseTime(v); err == nil {
					until = at // the date, as the server means it
				}
				mu.Unlock()
			})
			c := newCollector(40)
			f := newRFCFetcher(t, withResolver(t), c, nil)
			jobs := []Job{{URL: s.url("a.test", "/p0"), Host: "a.test"}, {URL: s.url("a.test", "/p1"), Host: "a.test"}}
			runCrawl(t, f, c, jobs, 20*time.Millisecond, 20*time.Second)

			log := s.of("a.test", "")
			i := slices.IndexFunc(log, func(a rfcArrival) bool { return a.status == tt.code })
			if i < 0 {
				t.Fatalf("no %d answered: %+v", tt.code, log)
			}
			mu.Lock()
			defer mu.Unlock()
			if i+1 == len(log) {
				t.Fatalf("no request after the %d", tt.code)
			}
			for _, a := range log[i+1:] {
				if a.at.Before(until) {
					t.Errorf("%s came %v before the Retry-After's %v", a.path, until.Sub(a.at), until.Format(time.StampMilli))
				}
			}
			want := 2 // the URL is fetched again
			if tt.path == "/sm.xml" {
				want = 1 // a sitemap is fetched once a robots.txt
			}
			if n := len(s.of("a.test", tt.path)); n != want {
				t.Errorf("%s requested %d times, want %d", tt.path, n, want)
			}
			for _, p := range []string{"/p0", "/p1"} {
				if r := pageResults(c)[s.url("a.test", p)]; r == nil || r.Status != crawl.StatusFetched {
					t.Errorf("%s: %v", p, r)
				}
			}
		})
	}
}

// TestRetryAfterLong: a Retry-After beyond the host's pace backs the host
// off until then, capped at BackoffMax, saved in the HostStore: its
// queued jobs are answered at once (Retry, NoRequest) rather than held,
// and another fetcher with the same HostStore sends it nothing either.
func TestRetryAfterLong(t *testing.T) {
	const backoffMax = 30 * time.Second
	s := startRFCServer(t)
	s.route("a.test", "/p0", failing(http.StatusTooManyRequests, "Retry-After", "3600"))
	hs := newMemHosts()
	res := withResolver(t)
	c := newCollector(1)
	f := newRFCFetcher(t, res, c, func(o *Options) { o.Hosts, o.MaxCrawlDelay, o.BackoffMax = hs, time.Second, backoffMax })
	var jobs []Job
	for i := range 6 {
		jobs = append(jobs, Job{URL: s.url("a.test", fmt.Sprintf("/p%d", i)), Host: "a.test"})
	}
	start := time.Now()
	runCrawl(t, f, c, jobs, 20*time.Millisecond, 10*time.Second)
	done := time.Now()

	if got, want := s.paths(), []string{"a.test /p0", "a.test /robots.txt"}; !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
	got := pageResults(c)
	if r := got[jobs[0].URL]; r == nil || !r.Retry || r.HTTPStatus != 429 || r.NoRequest {
		t.Errorf("/p0: %v, want a retry of the 429", r)
	}
	for _, j := range jobs[1:] {
		if r := got[j.URL]; r == nil || !r.Retry || !r.NoRequest {
			t.Errorf("%s: %v, want a retry without a request", j.URL, r)
		}
	}
	hs.mu.Lock()
	rec := hs.m["a.test"]
	hs.mu.Unlock()
	first := s.of("a.test", "/p0")[0]
	if rec.BackoffUntil.Before(first.at.Add(backoffMax)) || rec.BackoffUntil.After(done.Add(backoffMax)) {
		t.Errorf("stored back-off until %v, want %v after the 429 (at %v), capped", rec.BackoffUntil, backoffMax, first.at)
	}
	if !done.Before(rec.BackoffUntil) {
		t.Errorf("the crawl took until %v, past the back-off's end %v: it waited for it", done, rec.BackoffUntil)
	}
	if f.Stats().Backoffs < 1 {
		t.Errorf("no back-off counted: %+v", f.Stats())
	}
	t.Logf("answered in %v", done.Sub(start))

	// Another node with the same host records.
	c2 := newCollector(1)
	f2 := newRFCFetcher(t, res, c2, func(o *Options) { o.Hosts = hs })
	runCrawl(t, f2, c2, []Job{{URL: s.url("a.test", "/p9"), Host: "a.test"}}, 20*time.Millisecond, 10*time.Second)
	if r := pageResults(c2)[s.url("a.test", "/p9")]; r == nil || !r.Retry || !r.NoRequest {
		t.Errorf("/p9 on another fetcher: %v, want a retry without a request", r)
	}
	if n := len(s.requests()); n != 2 {
		t.Errorf("%d requests in all, want 2: %q", n, s.paths())
	}
}

// TestRobotsUnreachable30Days: robots.txt unreachable (here 503) for more
// than 30 days gives the host its last good copy's rules, or none; for
// less, the host is disallowed and backs off, its last good copy kept.
// The stored records' times are in the past: nothing waits 30 days.
func TestRobotsUnreachable30Days(t *testing.T) {
	const copyRules = "User-agent: *\nDisallow: /private\n"
	now := time.Now()
	day := 24 * time.Hour
	tests := []struct {
		name    string
		rec     crawl.HostRecord
		robots  http.HandlerFunc
		fetched []string // of /private/x, /public
		// since is the stored RobotsUnreachableSince after the crawl
		// (zero: reachable; "now": set during the crawl).
		since     string
		keepsCopy bool
	}{
		{name: "31 days, last good copy", rec: crawl.HostRecord{Robots: []byte(copyRules), RobotsStatus: 200, RobotsExpiry: now.Add(-day), RobotsUnreachableSince: now.Add(-31 * day)},
			robots: failing(503), fetched: []string{"/public"}, since: "stored", keepsCopy: true},
		{name: "31 days, no copy", rec: crawl.HostRecord{RobotsUnreachableSince: now.Add(-31 * day)},
			robots: failing(503), fetched: []string{"/private/x", "/public"}, since: "stored"},
		{name: "31 days, last copy a 404", rec: crawl.HostRecord{RobotsStatus: 404, RobotsExpiry: now.Add(-day), RobotsUnreachableSince: now.Add(-31 * day)},
			robots: failing(500), fetched: []string{"/private/x", "/public"}, since: "stored"},
		{name: "2 days, last good copy", rec: crawl.HostRecord{Robots: []byte(copyRules), RobotsStatus: 200, RobotsExpiry: now.Add(-day), RobotsUnreachableSince: now.Add(-2 * day)},
			robots: failing(503), since: "stored", keepsCopy: true},
		{name: "2 days, no copy", rec: crawl.HostRecord{RobotsUnreachableSince: now.Add(-2 * day)},
			robots: failing(503), since: "stored"},
		{name: "first failure", rec: crawl.HostRecord{Robots: []byte(copyRules), RobotsStatus: 200, RobotsExpiry: now.Add(-day)},
			robots: failing(503), since: "now", keepsCopy: true},
		{name: "31 days, reachable again", rec: crawl.HostRecord{Robots: []byte(copyRules), RobotsStatus: 200, RobotsExpiry: now.Add(-day), RobotsUnreachableSince: now.Add(-31 * day)},
			robots: text("User-agent: *\nDisallow: /public\n"), fetched: []string{"/private/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startRFCServer(t)
			s.route("a.test", "/robots.txt", tt.robots)
			hs := newMemHosts()
			hs.m["a.test"] = tt.rec
			c := newCollector(3)
			f := newRFCFetcher(t, withResolver(t), c, func(o *Options) { o.Hosts = hs })
			jobs := []Job{{URL: s.url("a.test", "/private/x"), Host: "a.test"}, {URL: s.url("a.test", "/public"), Host: "a.test"}}
			start := time.Now()
			runCrawl(t, f, c, jobs, 20*time.Millisecond, 20*time.Second)

			var got []string
			for _, a := range s.of("a.test", "") {
				if a.path != "/robots.txt" {
					got = append(got, a.path)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.fetched) {
				t.Errorf("fetched %q, want %q", got, tt.fetched)
			}
			for _, j := range jobs {
				r := pageResults(c)[j.URL]
				switch want := slices.Contains(tt.fetched, urlnorm.PathQuery(j.URL)); {
				case r == nil:
					t.Errorf("%s: no result", j.URL)
				case want && r.Status != crawl.StatusFetched:
					t.Errorf("%s: %s, want fetched", j.URL, describe(r))
				case !want && len(tt.fetched) > 0 && r.Status != crawl.StatusRobotsDenied:
					t.Errorf("%s: %s, want robots-denied", j.URL, describe(r))
				case !want && len(tt.fetched) == 0 && !(r.Retry && r.NoRequest):
					t.Errorf("%s: %s, want a retry without a request", j.URL, describe(r))
				}
			}
			hs.mu.Lock()
			rec := hs.m["a.test"]
			hs.mu.Unlock()
			switch tt.since {
			case "":
				if !rec.RobotsUnreachableSince.IsZero() {
					t.Errorf("stored unreachable since %v, want zero", rec.RobotsUnreachableSince)
				}
			case "stored":
				if !rec.RobotsUnreachableSince.Equal(tt.rec.RobotsUnreachableSince) {
					t.Errorf("stored unreachable since %v, want %v", rec.RobotsUnreachableSince, tt.rec.RobotsUnreachableSince)
				}
			case "now":
				if rec.RobotsUnreachableSince.Before(start) || rec.RobotsUnreachableSince.After(time.Now()) {
					t.Errorf("stored unreachable since %v, want during the crawl", rec.RobotsUnreachableSince)
				}
			}
			if tt.keepsCopy && (string(rec.Robots) != copyRules || rec.RobotsStatus != 200) {
				t.Errorf("stored robots.txt %q (status %d), want the last good copy kept", rec.Robots, rec.RobotsStatus)
			}
		})
	}
}

// TestRobotsCacheControl: in a running crawl whose jobs keep coming, a
// robots.txt is fetched again once its lifetime (its Cache-Control
// max-age, within [100 × the host's pace, RobotsTTL]) is over, and not
// before.
func TestRobotsCacheControl(t *testing.T) {
	const hostDelay = 5 * time.Millisecond
	tests := []struct {
		name, cc string
		ttl      time.Duration
		maxAge   time.Duration // -1: none
	}{
		{name: "max-age=1", cc: "max-age=1", ttl: time.Hour, maxAge: time.Second},
		{name: "no-cache: the floor", cc: "no-cache", ttl: time.Hour, maxAge: 0},
		{name: "max-age=0: the floor", cc: "public, max-age=0", ttl: time.Hour, maxAge: 0},
		{name: "max-age past the cap", cc: "max-age=86400", ttl: 1500 * time.Millisecond, maxAge: 86400 * time.Second},
		{name: "none: the cap", ttl: 1500 * time.Millisecond, maxAge: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startRFCServer(t)
			s.route("a.test", "/robots.txt", func(w http.ResponseWriter, r *http.Request) {
				if tt.cc != "" {
					w.Header().Set("Cache-Control", tt.cc)
				}
				w.Write([]byte("User-agent: *\nDisallow: /private\n"))
			})
			c := newCollector(1)
			f := newRFCFetcher(t, withResolver(t), c, func(o *Options) { o.HostDelay, o.RobotsTTL = hostDelay, tt.ttl })
			runHo(t, f)
			n := 0
			submit := func() {
				f.Submit([]Job{{URL: s.url("a.test", fmt.Sprintf("/p%d", n)), Host: "a.test"}})
				n++
			}
			submit()
			waitHo(t, 10*time.Second, "the first robots.txt", func() bool { return len(s.of("a.test", "/robots.txt")) == 1 })
			var took time.Duration
			waitHo(t, 10*time.Second, "the robots.txt result", func() bool {
				for _, r := range c.results() {
					if r.Kind == KindRobots {
						took = r.Took
						return true
					}
				}
				return false
			})
			first := s.of("a.test", "/robots.txt")[0]
			life := tt.ttl
			if tt.maxAge >= 0 {
				life = min(max(tt.maxAge, robotsFloorPaces*(hostDelay+took)), tt.ttl)
			}
			// A job every 20 ms until robots.txt is fetched again.
			waitHo(t, life+10*time.Second, "robots.txt fetched again", func() bool {
				submit()
				time.Sleep(15 * time.Millisecond)
				return len(s.of("a.test", "/robots.txt")) >= 2
			})
			again := s.of("a.test", "/robots.txt")[1]
			if again.at.Before(first.at.Add(life)) {
				t.Errorf("robots.txt fetched again %v after the first, want ≥ %v", again.at.Sub(first.at), life)
			}
			pages := 0
			for _, a := range s.of("a.test", "") {
				if a.path != "/robots.txt" && a.at.Before(again.at) {
					pages++
				}
			}
			if pages < 2 {
				t.Errorf("%d pages fetched with the first robots.txt, want several", pages)
			}
			t.Logf("lifetime %v (took %v): fetched again after %v, %d pages between", life, took, again.at.Sub(first.at), pages)
		})
	}
}

// TestRetryAfterValue reads Retry-After values.
func TestRetryAfterValue(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		value, dateHdr string
		want           time.Duration
	}{
		{"", "", 0},
		{"0", "", 0},
		{"2", "", 2 * time.Second},
		{" 120 ", "", 2 * time.Minute},
		{"3600", "", time.Hour},
		{"99999999999999999999999", "", maxRetryAfter},
		{"1.5", "", 0},
		{"-1", "", 0},
		{"+5", "", 0},
		{"2s", "", 0},
		{date(2 * time.Second), "", 2 * time.Second},
		{date(-time.Minute), "", 0},
		{now.Add(90 * time.Second).Format(time.RFC850), "", 90 * time.Second},
		{now.Add(30 * time.Second).Format(time.ANSIC), "", 30 * time.Second},
		// The server's clock is an hour ahead: its date means 5 s.
		{date(time.Hour + 5*time.Second), date(time.Hour), 5 * time.Second},
		{date(5 * time.Second), "not a date", 5 * time.Second},
		{"tomorrow", "", 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.value != "" {
			h.Set("Retry-After", tt.value)
		}
		if tt.dateHdr != "" {
			h.Set("Date", tt.dateHdr)
		}
		if got := retryAfter(h, now); got != tt.want {
			t.Errorf("Retry-After %q (Date %q) = %v, want %v", tt.value, tt.dateHdr, got, tt.want)
		}
	}
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"2", "0", "Wed, 21 Oct 2015 07:28:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "999999999999999999999", "-3", ""} {
		f.Add(s, "Wed, 21 Oct 2015 07:28:00 GMT")
	}
	now := time.Date(2015, 10, 21, 7, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v, date string) {
		h := http.Header{"Retry-After": {v}, "Date": {date}}
		if d := retryAfter(h, now); d < 0 || d > maxRetryAfter {
			t.Fatalf("Retry-After %q, Date %q: %v", v, date, d)
		}
	})
}

// TestRobotsHopSkipped: a hop waiting for its host (busy with a slow
// page) is given up when the caller has dropped every job of the host it
// is for (Options.Skip): that host's robots.txt costs no request more.
func TestRobotsHopSkipped(t *testing.T) {
	s := startRFCServer(t)
	s.route("a.test", "/robots.txt", redirect(s.url("b.test", "/robots.txt")))
	release, arrived := make(chan struct{}), make(chan struct{})
	s.route("b.test", "/slow", func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		w.Write([]byte("ok"))
	})
	var skip atomic.Bool
	c := newCollector(1)
	f := newRFCFetcher(t, withResolver(t), c, func(o *Options) {
		o.Skip = func(j *Job) bool { return skip.Load() && j.Host == "a.test" }
	})
	runHo(t, f)
	f.Submit([]Job{{URL: s.url("b.test", "/slow"), Host: "b.test"}})
	select { // b.test is busy from here until release
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("b.test's /slow not requested")
	}
	f.Submit([]Job{{URL: s.url("a.test", "/x"), Host: "a.test"}, {URL: s.url("a.test", "/y"), Host: "a.test"}})
	waitHo(t, 10*time.Second, "a.test's robots.txt", func() bool { return len(s.of("a.test", "/robots.txt")) == 1 })
	skip.Store(true)
	close(release)
	waitHo(t, 10*time.Second, "every result", func() bool { return len(pageResults(c)) == 3 && f.Idle() })
	for _, p := range []string{"/x", "/y"} {
		if r := pageResults(c)[s.url("a.test", p)]; !r.Retry || !strings.Contains(r.Err, "dropped") {
			t.Errorf("%s: %s, want dropped", p, describe(r))
		}
	}
	if got, want := s.paths(), []string{"a.test /robots.txt", "b.test /robots.txt", "b.test /slow"}; !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
}

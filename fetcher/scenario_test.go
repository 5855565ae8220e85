package fetcher

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// site is a small HTTP server on a loopback address with a scripted
// handler; it records the requests it gets.
type site struct {
	origin string
	mu     sync.Mutex
	log    []string // paths in arrival order
	at     []time.Time
	inside int
	most   int
}

func startSite(t *testing.T, ip string, h func(s *site, w http.ResponseWriter, r *http.Request)) *site {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	s := &site{origin: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.log = append(s.log, r.URL.RequestURI())
		s.at = append(s.at, time.Now())
		s.inside++
		s.most = max(s.most, s.inside)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inside--
			s.mu.Unlock()
		}()
		h(s, w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return s
}

func (s *site) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// literalResolver resolves IP literals only (the sites are addressed by IP).
func literalResolver(t testing.TB) *dnscache.Resolver {
	r, err := dnscache.New(dnscache.Options{Server: "127.0.0.1:9", Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// TestRobotsAndSitemaps: robots.txt behind two redirects, its Crawl-delay,
// a sitemap index with a plain and a gzipped child and a foreign one,
// duplicates, redirects and a disallowed job, on one host.
func TestRobotsAndSitemaps(t *testing.T) {
	page := []byte(`<html><body><a href="/a">a</a> <a href="private/x">p</a></body></html>`)
	dup := []byte(`<html><body>same <a href="/b">b</a></body></html>`)
	s := startSite(t, "127.0.0.1", func(s *site, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, "/robots2.txt", http.StatusMovedPermanently)
		case "/robots2.txt":
			http.Redirect(w, r, s.origin+"/robots3.txt", http.StatusFound)
		case "/robots3.txt":
			fmt.Fprintf(w, "User-agent: *\nDisallow: /private\nCrawl-delay: 0.05\n\nSitemap: %s/index.xml\nSitemap: http://elsewhere.test/x.xml\n", s.origin)
		case "/index.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>%[1]s/sm1.xml</loc></sitemap><sitemap><loc>%[1]s/sm2.xml.gz</loc></sitemap><sitemap><loc>http://127.0.0.2:1/foreign.xml</loc></sitemap></sitemapindex>`, s.origin)
		case "/sm1.xml":
			fmt.Fprintf(w, `<urlset><url><loc>%[1]s/a</loc></url><url><loc>%[1]s/b#frag</loc><lastmod>2026-11-28</lastmod></url><url><loc>%[1]s/private/c</loc></url><url><loc>mailto:x@y</loc></url></urlset>`, s.origin)
		case "/sm2.xml.gz":
			w.Header().Set("Content-Type", "application/x-gzip")
			w.Write(gzipped(fmt.Appendf(nil, `<urlset><url><loc>%s/c</loc></url></urlset>`, s.origin)))
		case "/page":
			w.Header().Set("Content-Type", "text/html")
			w.Write(page)
		case "/dup1", "/dup2":
			w.Header().Set("Content-Type", "text/html")
			w.Write(dup)
		case "/moved":
			w.Header().Set("Location", "../a?sid=77#top")
			w.WriteHeader(http.StatusMovedPermanently)
		default:
			http.NotFound(w, r)
		}
	})
	var mu sync.Mutex
	seen := map[uint64]bool{}
	c := newCollector(1)
	f, err := New(Options{
		Workers: 4, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: literalResolver(t),
		Seen: func(fp uint64, _ string) bool {
			mu.Lock()
			defer mu.Unlock()
			old := seen[fp]
			seen[fp] = true
			return old
		},
		OnResult: c.onResult, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	o := s.origin
	jobs := []Job{{URL: o + "/page", Round: 3}, {URL: o + "/dup1", Round: 3}, {URL: o + "/dup2", Round: 3}, {URL: o + "/moved", Round: 3}, {URL: o + "/private/1", Round: 3}, {URL: o + "/a", Round: 3}}
	runCrawl(t, f, c, jobs, 10*time.Millisecond, 10*time.Second)

	wantLog := []string{"/robots.txt", "/robots2.txt", "/robots3.txt", "/index.xml", "/sm1.xml", "/sm2.xml.gz", "/page", "/dup1", "/dup2", "/moved", "/a"}
	if got := s.requests(); !slices.Equal(got, wantLog) {
		t.Errorf("requests\n got %q\nwant %q", got, wantLog)
	}
	s.mu.Lock()
	for i := 3; i < len(s.at); i++ { // after robots3.txt: Crawl-delay 50 ms, end to start
		if d := s.at[i].Sub(s.at[i-1]); d < 50*time.Millisecond {
			t.Errorf("%s came %v after %s", s.log[i], d, s.log[i-1])
		}
	}
	if s.most != 1 {
		t.Errorf("%d requests at once", s.most)
	}
	s.mu.Unlock()
	type want struct {
		kind   Kind
		status crawl.Status
		links  []string
		to     string
	}
	wants := map[string]want{
		o + "/robots.txt":  {KindRobots, crawl.StatusRedirect, nil, o + "/robots2.txt"},
		o + "/robots2.txt": {KindRobots, crawl.StatusRedirect, nil, o + "/robots3.txt"},
		o + "/robots3.txt": {KindRobots, crawl.StatusFetched, nil, ""},
		o + "/index.xml":   {KindSitemap, crawl.StatusFetched, nil, ""},
		o + "/sm1.xml":     {KindSitemap, crawl.StatusFetched, []string{o + "/a", o + "/b", o + "/private/c"}, ""},
		o + "/sm2.xml.gz":  {KindSitemap, crawl.StatusFetched, []string{o + "/c"}, ""},
		o + "/page":        {KindPage, crawl.StatusFetched, []string{o + "/a", o + "/private/x"}, ""},
		o + "/dup1":        {KindPage, crawl.StatusFetched, []string{o + "/b"}, ""},
		o + "/dup2":        {KindPage, crawl.StatusDuplicate, nil, ""},
		o + "/moved":       {KindPage, crawl.StatusRedirect, nil, o + "/a"},
		o + "/private/1":   {KindPage, crawl.StatusRobotsDenied, nil, ""},
		o + "/a":           {KindPage, crawl.StatusGone, nil, ""},
	}
	results := c.results()
	if len(results) != len(wants) {
		t.Errorf("%d results, want %d", len(results), len(wants))
	}
	for _, r := range results {
		w, ok := wants[r.URL]
		if !ok {
			t.Errorf("unexpected result %s %v", r.URL, r.Kind)
			continue
		}
		if r.Kind != w.kind || r.Status != w.status || !slices.Equal(r.Links, w.links) || r.RedirectTo != w.to || r.Round != 3 {
			t.Errorf("%s: %v %s links=%q round=%d; want %v %v %q to %q", r.URL, r.Kind, describe(r), r.Links, r.Round, w.kind, w.status, w.links, w.to)
		}
		if r.Kind == KindSitemap && r.Depth != 1 {
			t.Errorf("%s: depth %d", r.URL, r.Depth)
		}
		// sm1.xml's <lastmod>s, one for each of its links.
		wantMods := []time.Time(nil)
		if r.URL == o+"/sm1.xml" {
			wantMods = []time.Time{{}, time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), {}}
		}
		if !slices.EqualFunc(r.LastMods, wantMods, time.Time.Equal) {
			t.Errorf("%s: lastmods %v, want %v", r.URL, r.LastMods, wantMods)
		}
	}
	if fp := xxhash.Sum64(dup); c.final[o+"/dup2"].ContentFP != fp {
		t.Errorf("duplicate's fingerprint %x, want %x", c.final[o+"/dup2"].ContentFP, fp)
	}
	if st := f.Stats(); st.RobotsFetches != 3 || st.SitemapFetches != 3 || st.Requests != int64(len(wantLog)) {
		t.Errorf("stats %+v", st)
	}
}

// TestFailuresAndBackoff: robots.txt 500 backs the host off; three 429s in
// a row back it off again and return its queued jobs; the back-off is
// persisted, and a restarted fetcher honours it.
func TestFailuresAndBackoff(t *testing.T) {
	var robotsN int
	s := startSite(t, "127.0.0.3", func(s *site, w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/robots.txt":
			s.mu.Lock()
			robotsN++
			n := robotsN
			s.mu.Unlock()
			if n == 1 {
				http.Error(w, "down", http.StatusInternalServerError)
				return
			}
			http.NotFound(w, r) // no robots.txt: allow all
		case strings.HasPrefix(r.URL.Path, "/busy/"):
			http.Error(w, "slow down", http.StatusTooManyRequests)
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("ok"))
		}
	})
	hs := newMemHosts()
	c := newCollector(40)
	o := Options{
		Workers: 4, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: literalResolver(t),
		BackoffBase: 50 * time.Millisecond, Hosts: hs, OnResult: c.onResult, Logger: testLogger(t),
	}
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	origin := s.origin
	jobs := []Job{{URL: origin + "/busy/1"}, {URL: origin + "/busy/2"}, {URL: origin + "/busy/3"}, {URL: origin + "/ok1"}, {URL: origin + "/ok2"}}
	runCrawl(t, f, c, jobs, 20*time.Millisecond, 10*time.Second)

	var robotsRetry, backedOff int
	for _, r := range c.results() {
		switch {
		case r.Kind == KindRobots && r.Retry && r.HTTPStatus == 500:
			robotsRetry++
		case r.Kind == KindPage && r.Retry && strings.Contains(r.Err, "backing off"):
			backedOff++
		}
	}
	if robotsRetry != 1 || backedOff < 5+2 {
		t.Errorf("%d robots.txt retries, %d jobs answered by a back-off; want 1 and at least 7", robotsRetry, backedOff)
	}
	for _, u := range []string{"/ok1", "/ok2"} {
		if r := c.final[origin+u]; r == nil || r.Status != crawl.StatusFetched {
			t.Errorf("%s: %+v", u, r)
		}
	}
	for _, u := range []string{"/busy/1", "/busy/2", "/busy/3"} {
		if r := c.final[origin+u]; r == nil || !r.Retry || r.HTTPStatus != 429 {
			t.Errorf("%s: %+v", u, r)
		}
	}
	if st := f.Stats(); st.Backoffs < 2 {
		t.Errorf("%d back-offs", st.Backoffs)
	}

	// A restarted fetcher finds the host backing off in the store.
	rec, ok, _ := hs.LoadHost("127.0.0.3")
	if !ok || rec.RobotsStatus != 404 || rec.Failures == 0 && rec.BackoffUntil.IsZero() && len(rec.IPs) != 1 {
		t.Fatalf("stored record %+v", rec)
	}
	rec.BackoffUntil = time.Now().Add(time.Hour)
	hs.SaveHost("127.0.0.3", rec)
	before := len(s.requests())
	c2 := newCollector(1)
	o.OnResult = c2.onResult
	f2, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	runCrawl(t, f2, c2, []Job{{URL: origin + "/ok3"}}, 10*time.Millisecond, 5*time.Second)
	if r := c2.final[origin+"/ok3"]; r == nil || !r.Retry || !strings.Contains(r.Err, "backing off") {
		t.Errorf("job on a stored backed-off host: %+v", r)
	}
	if n := len(s.requests()) - before; n != 0 {
		t.Errorf("%d requests to a backed-off host", n)
	}
}

// TestDNSFailures: a name that does not exist is gone; a DNS server that
// does not answer makes a retry.
func TestDNSFailures(t *testing.T) {
	w := startWeb(t, synth.Options{Hosts: 2, Pages: 2, IPs: 1, Seed: 4}, websim.Limits{})
	port := w.srv.Port()
	c := newCollector(1)
	f, err := New(Options{Workers: 2, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: w.res, OnResult: c.onResult, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	gone := fmt.Sprintf("http://nosuch.zz.test:%d/", port)
	runCrawl(t, f, c, []Job{{URL: gone}, {URL: gone + "x"}, {URL: w.web.FrontURL(1)}}, 10*time.Millisecond, 5*time.Second)
	for _, u := range []string{gone, gone + "x"} {
		if r := c.final[u]; r == nil || r.Status != crawl.StatusGone || r.Retry || !strings.Contains(r.Err, "dns") {
			t.Errorf("%s: %+v, want gone", u, r)
		}
	}
	if r := c.final[w.web.FrontURL(1)]; r == nil || r.Status != crawl.StatusFetched {
		t.Errorf("front page: %+v", r)
	}

	// A DNS server that never answers.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	mute, err := dnscache.New(dnscache.Options{Server: pc.LocalAddr().String(), Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c2 := newCollector(1)
	f2, err := New(Options{Workers: 2, AllowPrivate: true, Resolver: mute, ConnectTimeout: 300 * time.Millisecond, OnResult: c2.onResult})
	if err != nil {
		t.Fatal(err)
	}
	runCrawl(t, f2, c2, []Job{{URL: w.web.FrontURL(0)}}, 10*time.Millisecond, 5*time.Second)
	if r := c2.final[w.web.FrontURL(0)]; r == nil || !r.Retry || r.Status != crawl.StatusError {
		t.Errorf("with a mute DNS server: %+v, want a retry", r)
	}
	if st := f2.Stats(); st.DNSErrors != 1 || st.Backoffs != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestEviction: an idle host leaves the workbench; when it comes back its
// robots.txt comes from the HostStore. A job whose Host is not its URL's is
// refused.
func TestEviction(t *testing.T) {
	s := startSite(t, "127.0.0.4", func(s *site, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Write([]byte("User-agent: *\nDisallow: /no\n"))
			return
		}
		w.Write([]byte("ok"))
	})
	c := newCollector(1)
	f, err := New(Options{
		Workers: 2, HostDelay: time.Millisecond, MaxCrawlDelay: time.Millisecond, HostIdleTTL: 30 * time.Millisecond,
		AllowPrivate: true, Resolver: literalResolver(t), Hosts: newMemHosts(), OnResult: c.onResult, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, cond func(Stats) bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(f.Stats()); {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %+v", what, f.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	f.Submit([]Job{{URL: s.origin + "/1", Host: "127.0.0.4"}, {URL: s.origin + "/2", Host: "h.example"}})
	waitFor("the first job", func(st Stats) bool { return st.Done == 2 && f.Idle() })
	if st := f.Stats(); st.Hosts != 1 || st.IPs != 1 || st.RobotsFetches != 1 {
		t.Errorf("after one job: %+v", st)
	}
	waitFor("eviction", func(st Stats) bool { return st.Hosts == 0 && st.IPs == 0 })
	f.Submit([]Job{{URL: s.origin + "/3"}, {URL: s.origin + "/no"}})
	waitFor("the second jobs", func(st Stats) bool { return st.Done == 4 && f.Idle() })
	if st := f.Stats(); st.RobotsFetches != 1 || st.RobotsFromDB != 1 || st.Hosts != 1 {
		t.Errorf("after the host came back: %+v", st)
	}
	if r := c.final[s.origin+"/2"]; r == nil || r.Status != crawl.StatusError || !strings.Contains(r.Err, "not the URL's") {
		t.Errorf("job with a wrong host: %+v", r)
	}
	if r := c.final[s.origin+"/no"]; r == nil || r.Status != crawl.StatusRobotsDenied {
		t.Errorf("disallowed job: %+v", r)
	}
	if got := s.requests(); !slices.Equal(got, []string{"/robots.txt", "/1", "/3"}) {
		t.Errorf("requests %q", got)
	}
}

// TestDeadEndBackoff: a host that gives no HTTP answer at all (its port
// refuses connections) backs off for at most DeadEndBackoffMax, however
// often it failed before; a host that answers 503 to robots.txt backs off
// as usual, up to BackoffMax.
func TestDeadEndBackoff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.5:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	busy := startSite(t, "127.0.0.6", func(s *site, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	hs := newMemHosts()
	for _, h := range []string{"127.0.0.5", "127.0.0.6"} {
		hs.SaveHost(h, crawl.HostRecord{Failures: 5}) // exponential back-off would be 16 × base
	}
	c := newCollector(1)
	f, err := New(Options{
		Workers: 2, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: literalResolver(t), Hosts: hs, OnResult: c.onResult,
		ConnectTimeout: time.Second, BackoffBase: time.Second, BackoffMax: time.Hour, DeadEndBackoffMax: 3 * time.Second, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runCrawl(t, f, c, []Job{{URL: refused + "/a"}, {URL: busy.origin + "/a"}}, 10*time.Millisecond, 10*time.Second)
	tests := []struct {
		host     string
		min, max time.Duration
	}{
		{"127.0.0.5", 2 * time.Second, 3 * time.Second},   // no answer: capped at DeadEndBackoffMax
		{"127.0.0.6", 30 * time.Second, 33 * time.Second}, // 503: 1 s × 2^5 after its 6th failure
	}
	for _, tt := range tests {
		rec, ok, _ := hs.LoadHost(tt.host)
		if !ok {
			t.Fatalf("%s: no host record", tt.host)
		}
		got := rec.BackoffUntil.Sub(start)
		if rec.Failures != 6 || got < tt.min || got > tt.max+time.Since(start) {
			t.Errorf("%s: %d failures, backing off %v after the start; want 6 failures and %v to %v", tt.host, rec.Failures, got.Round(time.Millisecond), tt.min, tt.max)
		}
	}
	for _, u := range []string{refused + "/a", busy.origin + "/a"} {
		if r := c.final[u]; r == nil || !r.Retry {
			t.Errorf("%s: %+v, want a retry", u, r)
		}
	}
}

// TestRedirectOutOfScope: a redirect whose target the scope (and so the
// URL rules) refuses is recorded as a redirect, but its target is not
// given to be followed; one in scope is.
func TestRedirectOutOfScope(t *testing.T) {
	s := startSite(t, "127.0.0.4", func(s *site, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			w.Header().Set("Location", "http://elsewhere.test/x")
			w.WriteHeader(http.StatusFound)
		case "/private-bound":
			w.Header().Set("Location", "/private/y")
			w.WriteHeader(http.StatusFound)
		case "/near":
			w.Header().Set("Location", "/y")
			w.WriteHeader(http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	c := newCollector(1)
	scope := &urlnorm.Scope{HostSuffixes: []string{"127.0.0.4"}, Filter: func(u []byte) bool { return !bytes.Contains(u, []byte("/private/")) }}
	f, err := New(Options{Workers: 2, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: literalResolver(t), Scope: scope,
		OnResult: c.onResult, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	o := s.origin
	runCrawl(t, f, c, []Job{{URL: o + "/away"}, {URL: o + "/private-bound"}, {URL: o + "/near"}}, 10*time.Millisecond, 10*time.Second)
	for _, tc := range []struct{ url, to string }{{o + "/away", ""}, {o + "/private-bound", ""}, {o + "/near", o + "/y"}} {
		r := c.final[tc.url]
		if r == nil || r.Status != crawl.StatusRedirect || r.RedirectTo != tc.to || (tc.to == "") != strings.Contains(r.Err, "out of scope") {
			t.Errorf("%s: %+v, want a redirect to %q", tc.url, r, tc.to)
		}
	}
}

package fetcher

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// memHosts is a HostStore in memory.
type memHosts struct {
	mu    sync.Mutex
	m     map[string]crawl.HostRecord
	saves int
}

func newMemHosts() *memHosts { return &memHosts{m: map[string]crawl.HostRecord{}} }

func (h *memHosts) LoadHost(name string) (crawl.HostRecord, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.m[name]
	return r, ok, nil
}

func (h *memHosts) SaveHost(name string, rec crawl.HostRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.m[name] = rec
	h.saves++
}

// expectLinks is what the Links of page self should be, given websim's
// truth outlinks: normalised, in scope, without the rel=nofollow ones
// (websim's /nf/ pages are only linked that way) and the page itself, each
// once, in order.
func expectLinks(n *urlnorm.Normalizer, scope *urlnorm.Scope, self string, outlinks []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, o := range outlinks {
		u, err := n.NormalizeString(o)
		if err != nil || u == self || strings.Contains(u, "/nf/") || !scope.AllowString(u) || seen[u] {
			continue
		}
		seen[u] = true
		out = append(out, u)
	}
	return out
}

// TestCrawlRealistic fetches every URL of a realistic web and checks
// politeness from websim's side and every Result against the truth.
func TestCrawlRealistic(t *testing.T) {
	w := startWeb(t, synth.Options{Hosts: 40, Pages: 6, IPs: 8, Seed: 33, Profile: synth.Realistic}, websim.Limits{})
	const (
		hostDelay     = 50 * time.Millisecond
		ipDelay       = 10 * time.Millisecond
		maxCrawlDelay = 100 * time.Millisecond
	)
	norm := urlnorm.New(urlnorm.Options{})
	scope := &urlnorm.Scope{}
	hs := newMemHosts()
	c := newCollector(60)
	o := Options{
		Workers: 32, HostDelay: hostDelay, IPDelay: ipDelay, MaxCrawlDelay: maxCrawlDelay,
		ConnectTimeout: 2 * time.Second, HeaderTimeout: 2 * time.Second, TotalTimeout: 5 * time.Second,
		AllowPrivate: true, Resolver: w.res, Hosts: hs, Normalizer: norm, Scope: scope,
		BackoffBase: 100 * time.Millisecond, HostIdleTTL: 100 * time.Millisecond,
		OnResult: c.onResult, Logger: testLogger(t),
	}
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	lastStart := map[netip.Addr]time.Time{}
	minIPGap := time.Hour
	f.testOnStart = func(ip netip.Addr, at time.Time) {
		if last, ok := lastStart[ip]; ok {
			minIPGap = min(minIPGap, at.Sub(last))
		}
		lastStart[ip] = later(lastStart[ip], at)
	}
	// Every URL websim answers, except robots.txt: the fetcher fetches that
	// itself, and the test counts how often.
	jobs := jobsOf(w, func(r *synth.Record) bool { return r.Status != 0 && r.Kind != "robots" })
	start := time.Now()
	runCrawl(t, f, c, jobs, 50*time.Millisecond, 40*time.Second)
	t.Logf("%d jobs in %v: %+v", len(jobs), time.Since(start), f.Stats())

	snap := w.srv.Stats().Snapshot()
	results := c.results()
	t.Run("politeness", func(t *testing.T) {
		if snap.RobotsViolationCount != 0 {
			t.Errorf("%d robots violations: %v", snap.RobotsViolationCount, snap.RobotsViolations)
		}
		hosts := w.web.Hosts()
		for i := range hosts {
			h := &hosts[i]
			v := snap.Hosts[h.Name]
			if v == nil {
				t.Errorf("%s: no requests", h.Name)
				continue
			}
			if v.MaxConcurrent > 1 {
				t.Errorf("%s: %d requests at once", h.Name, v.MaxConcurrent)
			}
			want := hostDelay
			if h.Robots == synth.RobotsDelay {
				want = maxCrawlDelay // websim's Crawl-delays are 1-2 s, capped
			}
			if v.MinIntervalMS != nil && *v.MinIntervalMS < float64(want/time.Millisecond) {
				t.Errorf("%s (robots %d): min interval %.3f ms, want ≥ %v", h.Name, h.Robots, *v.MinIntervalMS, want)
			}
		}
		// The fetcher counts an IP's delay from the first response byte
		// of its previous request (when the server surely had it), so
		// websim's view of arrivals must keep the delay exactly, whatever
		// the scheduling delays on either side.
		if minIPGap < ipDelay {
			t.Errorf("two requests to one IP answered %v apart, want ≥ %v", minIPGap, ipDelay)
		}
		for ip, v := range snap.IPs {
			if v.MinIntervalMS == nil {
				t.Errorf("IP %s: fewer than two requests", ip)
				continue
			}
			if got := time.Duration(*v.MinIntervalMS * float64(time.Millisecond)); got < ipDelay {
				t.Errorf("IP %s: min interval %v at websim, want ≥ %v", ip, got, ipDelay)
			}
		}
	})
	t.Run("robots", func(t *testing.T) {
		robotsN := map[string]int{}
		retriedBeforeRobots := map[string]bool{}
		exchanges := map[string]int64{}
		for _, r := range results {
			if r.HTTPStatus != 0 {
				exchanges[r.Host]++
			}
			switch {
			case r.Kind == KindRobots && (r.Status == crawl.StatusFetched || r.Status == crawl.StatusGone && r.HTTPStatus == 404):
				robotsN[r.Host]++
			case r.Kind == KindRobots:
				robotsN[r.Host]++
				if !r.Retry || r.HTTPStatus != 503 {
					t.Errorf("%s: robots.txt result %s, want a 503 retry", r.URL, describe(r))
				}
			case r.Kind == KindPage && r.Retry && robotsN[r.Host] > 0 && robotsN[r.Host] < 3:
				retriedBeforeRobots[r.Host] = true
			}
		}
		for _, h := range w.web.Hosts() {
			want := 1
			if h.Robots == synth.RobotsFlaky {
				want = synth.RobotsFailures + 1
				if !retriedBeforeRobots[h.Name] {
					t.Errorf("%s: flaky robots.txt but no Retry result before it was fetched", h.Name)
				}
			}
			if robotsN[h.Name] != want {
				t.Errorf("%s (robots %d): robots.txt fetched %d times, want %d", h.Name, h.Robots, robotsN[h.Name], want)
			}
			if got := snap.Hosts[h.Name].Requests; got != exchanges[h.Name] {
				t.Errorf("%s: websim saw %d requests, the fetcher reported %d exchanges", h.Name, got, exchanges[h.Name])
			}
		}
	})
	t.Run("truth", func(t *testing.T) {
		bad := 0
		for _, j := range jobs {
			tr := w.byURL[j.URL]
			r := c.final[j.URL]
			if r == nil {
				t.Errorf("%s: no result", j.URL)
				continue
			}
			if r.Job != j {
				t.Errorf("%s: result job %+v, want %+v", j.URL, r.Job, j)
			}
			if msg := checkTruth(norm, scope, tr, r); msg != "" {
				if bad++; bad <= 20 {
					t.Errorf("%s (%s): %s", j.URL, tr.Kind, msg)
				}
			}
		}
		if bad > 20 {
			t.Errorf("%d mismatches in all", bad)
		}
	})
	t.Run("sitemaps", func(t *testing.T) {
		got := map[string]*Result{}
		for _, r := range results {
			if r.Kind == KindSitemap {
				if got[r.URL] != nil {
					t.Errorf("%s: sitemap fetched twice", r.URL)
				}
				got[r.URL] = r
				if r.Depth != 1 || r.Round != 7 {
					t.Errorf("%s: sitemap result job %+v, want depth 1 round 7", r.URL, r.Job)
				}
			}
		}
		n := 0
		for i := range w.truth {
			tr := &w.truth[i]
			if tr.Kind != "sitemap" {
				continue
			}
			n++
			r := got[tr.URL]
			switch {
			case !tr.RobotsAllowed:
				if r != nil {
					t.Errorf("%s: fetched, but robots.txt disallows it", tr.URL)
				}
				n--
			case r == nil:
				t.Errorf("%s: sitemap not fetched", tr.URL)
			case tr.Status == 404 && r.Status != crawl.StatusGone:
				t.Errorf("%s: missing sitemap gave %v", tr.URL, r.Status)
			case tr.Status == 200 && !slices.Equal(r.Links, expectLinks(norm, scope, "", tr.Outlinks)):
				t.Errorf("%s: links\n got %q\nwant %q", tr.URL, r.Links, expectLinks(norm, scope, "", tr.Outlinks))
			}
		}
		if n == 0 || len(got) != n {
			t.Errorf("%d sitemaps in the truth, %d fetched", n, len(got))
		}
	})
	t.Run("restart", func(t *testing.T) {
		// A new fetcher with the same HostStore takes robots.txt from it.
		before := w.srv.Stats().Snapshot().Requests
		c2 := newCollector(60)
		o.OnResult = c2.onResult
		f2, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		var front []Job
		for i, h := range w.web.Hosts() {
			if h.Robots != synth.RobotsDisallowAll {
				front = append(front, Job{URL: w.web.FrontURL(i), Host: h.Name, Round: 8})
			}
		}
		runCrawl(t, f2, c2, front, 20*time.Millisecond, 20*time.Second)
		st := f2.Stats()
		if st.RobotsFetches != 0 || st.RobotsFromDB != int64(len(front)) {
			t.Errorf("after restart: %d robots.txt fetches, %d from the store; want 0 and %d", st.RobotsFetches, st.RobotsFromDB, len(front))
		}
		if got := w.srv.Stats().Snapshot().Requests - before; got != int64(len(front)) {
			t.Errorf("after restart: %d requests for %d front pages", got, len(front))
		}
		for _, j := range front {
			if r := c2.final[j.URL]; r == nil || r.Status != crawl.StatusFetched {
				t.Errorf("%s: %+v", j.URL, r)
			}
		}
	})
}

// checkTruth compares a page Result with websim's truth record; "" if they agree.
func checkTruth(norm *urlnorm.Normalizer, scope *urlnorm.Scope, tr *synth.Record, r *Result) string {
	if r.Kind != KindPage {
		return "kind " + r.Kind.String()
	}
	if !tr.RobotsAllowed {
		if r.Status != crawl.StatusRobotsDenied || r.HTTPStatus != 0 {
			return "robots.txt disallows it, got " + describe(r)
		}
		return ""
	}
	if r.HTTPStatus != tr.Status && !(r.Retry && r.HTTPStatus == 0) {
		return "HTTP status differs: " + describe(r)
	}
	switch {
	case tr.Status == 200:
		if r.Status != crawl.StatusFetched || r.Retry || r.ContentType != tr.ContentType {
			return "want fetched " + tr.ContentType + ", got " + describe(r)
		}
		if r.Bytes == 0 || r.ContentFP == 0 || r.FetchedAt.IsZero() {
			return "no body: " + describe(r)
		}
		html := strings.HasPrefix(tr.ContentType, "text/html")
		switch {
		case !html && r.Links != nil:
			return "links from a non-HTML body"
		case html && tr.Kind != "nofollow":
			if want := expectLinks(norm, scope, tr.URL, tr.Outlinks); !slices.Equal(r.Links, want) {
				return "links differ:\n got " + strings.Join(r.Links, " ") + "\nwant " + strings.Join(want, " ")
			}
		}
	case tr.Status == 301 || tr.Status == 302:
		want, _ := norm.NormalizeString(tr.Outlinks[0])
		if r.Status != crawl.StatusRedirect || r.RedirectTo != want {
			return "want redirect to " + want + ", got " + describe(r)
		}
	case tr.Status == 404 || tr.Status == 410:
		if r.Status != crawl.StatusGone || r.Retry {
			return "want gone, got " + describe(r)
		}
	case tr.Status >= 500:
		if r.Status != crawl.StatusError || !r.Retry {
			return "want a retry, got " + describe(r)
		}
	default:
		return "unexpected truth status"
	}
	return ""
}

func describe(r *Result) string {
	return fmt.Sprintf("%v retry=%v http=%d type=%q to=%q err=%q", r.Status, r.Retry, r.HTTPStatus, r.ContentType, r.RedirectTo, r.Err)
}

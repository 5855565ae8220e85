package fetcher

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// trapNow is the crawl's clock in TestTrapsBounded: calendar months from
// 2021-06 to 2027-06 are in the window.
var trapNow = time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)

// trapMaxSegments is the test's Scope.MaxPathSegments, the default: the
// /trap/ tree (links a/ and b/ on every page) has infinitely many paths
// that no segment, nor run of segments, repeats three times in a row
// (binary words without cubes), so the rule's bound on a named segment
// anywhere (twice) is what ends it, not the segment limit.
const trapMaxSegments = urlnorm.DefaultMaxPathSegments

// trapSite serves the traps of TestTrapsBounded on 127.0.0.1 and records
// every request.
type trapSite struct {
	srv *httptest.Server
	mu  sync.Mutex
	log []string // request URIs, in arrival order
}

func startTrapSite(t *testing.T) *trapSite {
	s := &trapSite{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *trapSite) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

func (s *trapSite) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.log = append(s.log, r.URL.RequestURI())
	s.mu.Unlock()
	p := r.URL.Path
	page := func(hrefs ...string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		var b strings.Builder
		b.WriteString("<!doctype html><title>" + p + "</title>")
		for _, h := range hrefs {
			b.WriteString(`<a href="` + h + `">` + h + "</a>\n")
		}
		fmt.Fprint(w, b.String())
	}
	switch {
	case p == "/robots.txt":
		fmt.Fprintf(w, "User-agent: *\nAllow: /\nSitemap: %s/sitemap.xml\n", s.srv.URL)
	case p == "/sitemap.xml":
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for _, u := range []string{"/trap/", "/trap/s/s/s/", "/cal/1990/1", "/cal/2040/12/"} {
			fmt.Fprintf(w, "<url><loc>%s%s</loc></url>", s.srv.URL, u)
		}
		fmt.Fprint(w, `</urlset>`)
	case p == "/go-trap":
		http.Redirect(w, r, "/trap/r/r/r/", http.StatusFound)
	case p == "/go-cal":
		http.Redirect(w, r, "/cal/2040/1", http.StatusFound)
	case strings.HasPrefix(p, "/trap/") && strings.HasSuffix(p, "/"):
		page("a/", "b/") // a page at every path: relative links go ever deeper
	case strings.HasPrefix(p, "/loop/") && strings.HasSuffix(p, "/"):
		page("x/")
	case strings.HasPrefix(p, "/run/") && strings.HasSuffix(p, "/"):
		page("p/q/")
	case strings.HasPrefix(p, "/cal/"):
		y, m, ok := parseMonth(p)
		if !ok {
			http.NotFound(w, r)
			return
		}
		prev, next := time.Date(y, time.Month(m)-1, 1, 0, 0, 0, 0, time.UTC), time.Date(y, time.Month(m)+1, 1, 0, 0, 0, 0, time.UTC)
		page(calPath(prev), calPath(next))
	default:
		http.NotFound(w, r)
	}
}

// parseMonth parses /cal/Y/M (no zero padding, as websim's calendar).
func parseMonth(p string) (y, m int, ok bool) {
	parts := strings.Split(strings.TrimPrefix(p, "/cal/"), "/")
	if len(parts) != 2 {
		return 0, 0, false
	}
	y, err1 := strconv.Atoi(parts[0])
	m, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || m < 1 || m > 12 || strconv.Itoa(y) != parts[0] || strconv.Itoa(m) != parts[1] {
		return 0, 0, false
	}
	return y, m, true
}

func calPath(t time.Time) string { return fmt.Sprintf("/cal/%d/%d", t.Year(), int(t.Month())) }

// segmentsOf returns a path's segments as the repetition rule defines
// them: what lies between slashes, a trailing slash adding none.
func segmentsOf(path string) []string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if strings.HasSuffix(path, "/") {
		segs = segs[:len(segs)-1]
	}
	return segs
}

// tooRepetitive reports whether some run of consecutive segments occurs
// three times in a row, or some named segment (not empty, not all digits)
// three times anywhere: more than the default two repeats.
func tooRepetitive(segs []string) bool {
	count := map[string]int{}
	for _, s := range segs {
		if s != "" && strings.Trim(s, "0123456789") != "" {
			if count[s]++; count[s] > 2 {
				return true
			}
		}
	}
	for p := 1; 3*p <= len(segs); p++ {
		for i := 0; i+3*p <= len(segs); i++ {
			a, b, c := segs[i:i+p], segs[i+p:i+2*p], segs[i+2*p:i+3*p]
			if slices.Equal(a, b) && slices.Equal(b, c) {
				return true
			}
		}
	}
	return false
}

// monthAllowed is the calendar window by its definition: a month passes
// unless it ends before the clock less five years or starts after the
// clock plus one year.
func monthAllowed(y, m int) bool {
	first := time.Date(y, time.Month(m), 1, 0, 0, 0, 0, time.UTC)
	last := first.AddDate(0, 1, -1)
	past, future := trapNow.AddDate(-5, 0, 0), trapNow.AddDate(1, 0, 0)
	pastDay := time.Date(past.Year(), past.Month(), past.Day(), 0, 0, 0, 0, time.UTC)
	return !last.Before(pastDay) && !first.After(future)
}

// trapExpect is what the rules let through of the site, worked out from
// their definitions: the paths requested, the traps each page's links
// hold, and every URL refused as a trap.
type trapExpect struct {
	paths   map[string]bool
	traps   map[string]TrapCounts // page path → its links refused as traps
	refused map[string]string     // refused path → rule
}

func expectTraps() *trapExpect {
	e := &trapExpect{paths: map[string]bool{}, traps: map[string]TrapCounts{}, refused: map[string]string{}}
	for _, p := range []string{"/robots.txt", "/sitemap.xml", "/go-trap", "/go-cal"} {
		e.paths[p] = true
	}
	// A tree of relative links: a page's child is refused for its depth
	// (not a trap), or for a repeat, or fetched.
	tree := func(root string, hrefs ...string) {
		queue := []string{root}
		e.paths[root] = true
		for len(queue) > 0 {
			page := queue[0]
			queue = queue[1:]
			for _, h := range hrefs {
				child := page + h
				switch {
				case strings.Count(child, "/") > trapMaxSegments:
				case tooRepetitive(segmentsOf(child)):
					c := e.traps[page]
					c.Repetition++
					e.traps[page] = c
					e.refused[child] = "repetition trap"
				case !e.paths[child]:
					e.paths[child] = true
					queue = append(queue, child)
				}
			}
		}
	}
	tree("/trap/", "a/", "b/")
	tree("/loop/", "x/")
	tree("/run/", "p/q/")
	// The calendar, from its entry month along prev and next.
	queue := []time.Time{time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	e.paths[calPath(queue[0])] = true
	for len(queue) > 0 {
		month := queue[0]
		queue = queue[1:]
		for _, to := range []time.Time{month.AddDate(0, -1, 0), month.AddDate(0, 1, 0)} {
			p := calPath(to)
			switch {
			case !monthAllowed(to.Year(), int(to.Month())):
				c := e.traps[calPath(month)]
				c.Calendar++
				e.traps[calPath(month)] = c
				e.refused[p] = "calendar trap"
			case !e.paths[p]:
				e.paths[p] = true
				queue = append(queue, to)
			}
		}
	}
	// The redirects' targets and the sitemap's entries.
	e.refused["/trap/r/r/r/"] = "repetition trap"
	e.refused["/cal/2040/1"] = "calendar trap"
	e.refused["/trap/s/s/s/"] = "repetition trap"
	e.refused["/cal/1990/1"] = "calendar trap"
	e.refused["/cal/2040/12/"] = "calendar trap"
	return e
}

// trapLog records the fetcher's debug records of URLs refused as traps and
// passes its warnings to t.Log.
type trapLog struct {
	t       testing.TB
	mu      sync.Mutex
	refused map[string]string // url → rule
	n       int
}

func (h *trapLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *trapLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *trapLog) WithGroup(string) slog.Handler            { return h }

func (h *trapLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.t.Log(r.Message)
	}
	if !strings.Contains(r.Message, "refused as a trap") {
		return nil
	}
	var url, rule string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "url":
			url = a.Value.String()
		case "rule":
			rule = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refused[url] = rule
	h.n++
	return nil
}

// TestTrapsBounded crawls a site whose every path under /trap/ is a page
// of relative links (a/ and b/), /loop/ and /run/ the same with one link
// (x/, p/q/), and whose calendar under /cal/Y/M links each month to the
// next and the one before, with redirects and sitemap entries into traps.
// The crawl, fetching whatever each Result links to, ends by itself; the
// server's log holds exactly the paths the rules allow, each once; each
// Result counts the traps it was refused, and each refused URL is logged.
func TestTrapsBounded(t *testing.T) {
	s := startTrapSite(t)
	lg := &trapLog{t: t, refused: map[string]string{}}
	scope := &urlnorm.Scope{MaxPathSegments: trapMaxSegments, Now: func() time.Time { return trapNow }}
	var (
		mu      sync.Mutex
		seen    = map[string]bool{}
		pending []Job
		results []*Result
	)
	follow := func(u string) {
		if !seen[u] {
			seen[u] = true
			pending = append(pending, Job{URL: u, Host: urlnorm.Host(u)})
		}
	}
	f, err := New(Options{Workers: 4, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: literalResolver(t), Scope: scope,
		Logger: slog.New(lg), OnResult: func(r *Result) {
			mu.Lock()
			defer mu.Unlock()
			results = append(results, r)
			for _, l := range r.Links {
				follow(l)
			}
			if r.RedirectTo != "" {
				follow(r.RedirectTo)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for _, p := range []string{"/trap/", "/loop/", "/run/", "/cal/2026/11", "/go-trap", "/go-cal"} {
		follow(s.srv.URL + p)
	}
	mu.Unlock()

	const maxJobs, limit = 5000, 60 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- f.Run(ctx) }()
	deadline := time.Now().Add(limit)
	for {
		mu.Lock()
		jobs := pending
		pending = nil
		n := len(seen)
		mu.Unlock()
		if n > maxJobs {
			t.Fatalf("more than %d URLs to fetch: the traps are not bounded", maxJobs)
		}
		f.Submit(jobs)
		idle := f.Idle() // before looking at pending: once idle, no OnResult adds to it
		mu.Lock()
		more := len(pending)
		mu.Unlock()
		if idle && more == 0 && len(jobs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl not finished after %v: %+v", limit, f.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}

	want := expectTraps()
	got := map[string]int{}
	for _, u := range s.requests() {
		got[u]++
	}
	for p := range want.paths {
		if got[p] != 1 {
			t.Errorf("%s: %d requests, want 1", p, got[p])
		}
	}
	for p, n := range got {
		if !want.paths[p] {
			t.Errorf("%s: %d requests, want none", p, n)
		}
	}
	trapPaths := 0
	for p := range want.paths {
		if strings.HasPrefix(p, "/trap/") {
			trapPaths++
		}
	}
	t.Logf("%d requests (%d under /trap/, %d calendar months) for %d paths allowed", len(s.requests()), trapPaths, countPrefix(want.paths, "/cal/"), len(want.paths))
	if n := countPrefix(want.paths, "/cal/"); n != 73 {
		t.Errorf("%d calendar months allowed, want 73 (five years back, one ahead)", n)
	}

	var total TrapCounts
	for _, r := range results {
		total.Add(r.Traps)
		path := urlnorm.PathQuery(r.URL)
		switch {
		case r.Kind == KindSitemap:
			if r.Traps != (TrapCounts{Repetition: 1, Calendar: 2}) || !slices.Equal(r.Links, []string{s.srv.URL + "/trap/"}) {
				t.Errorf("sitemap: traps %+v, links %q; want 1 repetition, 2 calendar, /trap/ alone", r.Traps, r.Links)
			}
		case r.Kind != KindPage:
		case path == "/go-trap" || path == "/go-cal":
			rule := map[string]string{"/go-trap": "repetition trap", "/go-cal": "calendar trap"}[path]
			if r.Status != crawl.StatusRedirect || r.RedirectTo != "" || r.Traps.Total() != 1 || !strings.Contains(r.Err, rule) {
				t.Errorf("%s: %s traps %+v, want a redirect not followed, refused as a %s", path, describe(r), r.Traps, rule)
			}
		case r.Traps != want.traps[path]:
			t.Errorf("%s: traps %+v, want %+v", path, r.Traps, want.traps[path])
		}
	}
	if int(total.Total()) != len(want.refused) {
		t.Errorf("%d traps counted in the Results (%+v), want %d", total.Total(), total, len(want.refused))
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.n != len(want.refused) {
		t.Errorf("%d trap records logged, want %d", lg.n, len(want.refused))
	}
	for p, rule := range want.refused {
		if got := lg.refused[s.srv.URL+p]; got != rule {
			t.Errorf("%s: logged as %q, want %q", p, got, rule)
		}
	}
}

func countPrefix(paths map[string]bool, prefix string) int {
	n := 0
	for p := range paths {
		if strings.HasPrefix(p, prefix) {
			n++
		}
	}
	return n
}

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// FreshConfig is `bench fresh` (issue 23): one changing web crawled for
// the same simulated days under several refetch schedules, each from a
// fresh websim and an empty crawl database.
//
// Times marked simulated are on websim's clock; the site runs on the wall
// clock, so its refetch flags are these divided by TimeScale.
type FreshConfig struct {
	Hosts int    `json:"hosts"`
	Pages int    `json:"pages"`
	IPs   int    `json:"ips"`
	Seed  uint64 `json:"seed"`
	// TimeScale is simulated seconds per second.
	TimeScale float64 `json:"time_scale"`
	// Days is how long each crawl runs, simulated; the first WarmupDays
	// (the first crawl of the web) are not measured.
	Days       float64 `json:"days"`
	WarmupDays float64 `json:"warmup_days"`
	// Interval (simulated) is the fixed schedule's interval and the
	// optimal schedule's budget; Min and Max bound the adaptive and
	// optimal ones.
	Interval time.Duration `json:"interval_ns"`
	Min      time.Duration `json:"min_ns"`
	Max      time.Duration `json:"max_ns"`
	// Schedules are the runs, in order: none, fixed, adaptive, optimal,
	// each with Interval, or NAME:INTERVAL (simulated, e.g. fixed:40h)
	// for another budget.
	Schedules []string `json:"schedules"`
	// Samples is the number of points of each freshness curve.
	Samples int `json:"samples"`

	Width         int           `json:"width"`
	PerHost       int           `json:"per_host"`
	HostDelay     time.Duration `json:"host_delay_ns"`
	MaxCrawlDelay time.Duration `json:"max_crawl_delay_ns"`
	Timeout       time.Duration `json:"timeout_ns"` // of each run

	Dir          string                           `json:"-"`
	Keep         bool                             `json:"-"`
	ModuleRoot   string                           `json:"-"`
	WebsimBinary string                           `json:"-"`
	SiteBinary   string                           `json:"-"`
	Progress     func(format string, args ...any) `json:"-"`
}

// The schedules bench fresh knows.
var freshSchedules = []string{"none", "fixed", "adaptive", "optimal"}

// DefaultFreshConfig is `make -C bench fresh`: 3,000 hosts of about 5 pages,
// 16 simulated days in about 5 minutes a run, a refetch every 2 days on
// average.
func DefaultFreshConfig() FreshConfig {
	return FreshConfig{Hosts: 3000, Pages: 5, IPs: 64, Seed: 1, TimeScale: 4608, Days: 16, WarmupDays: 4,
		Interval: 48 * time.Hour, Min: time.Hour, Max: 64 * 24 * time.Hour,
		Schedules: slices.Clone(freshSchedules), Samples: 96,
		Width: 50_000, PerHost: 10, HostDelay: 200 * time.Millisecond, MaxCrawlDelay: 500 * time.Millisecond,
		Timeout: 30 * time.Minute}
}

// WithDefaults checks c.
func (c FreshConfig) WithDefaults() (FreshConfig, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("bench: fresh: "+format, args...)) }
	if c.TimeScale < 1 || c.TimeScale > 1e6 {
		bad("time scale must be in [1, 1e6], got %v", c.TimeScale)
	}
	if !(c.Days > 0 && c.WarmupDays >= 0 && c.WarmupDays < c.Days) {
		bad("want 0 ≤ warmup days < days, got %v and %v", c.WarmupDays, c.Days)
	}
	if c.Interval <= 0 || c.Min <= 0 || c.Min > c.Interval || c.Interval > c.Max {
		bad("want 0 < min ≤ interval ≤ max, got %v, %v, %v", c.Min, c.Interval, c.Max)
	}
	if len(c.Schedules) == 0 {
		bad("no schedules")
	}
	for _, s := range c.Schedules {
		name, iv, err := c.schedule(s)
		switch {
		case !slices.Contains(freshSchedules, name):
			bad("unknown schedule %q (want %s, or NAME:INTERVAL)", s, strings.Join(freshSchedules, ", "))
		case err != nil:
			bad("schedule %q: %v", s, err)
		case name != "none" && (iv < c.Min || iv > c.Max):
			bad("schedule %q: want min %v ≤ interval ≤ max %v", s, c.Min, c.Max)
		}
	}
	if c.Samples < 2 || c.Samples > 10_000 {
		bad("samples must be in [2, 10000], got %d", c.Samples)
	}
	if c.Timeout <= 0 {
		bad("timeout must be positive")
	}
	if wall := c.wall(time.Duration(c.Days * 24 * float64(time.Hour))); c.Timeout < wall*5/4 {
		bad("each run takes %v of wall time: give it a timeout of at least %v, got %v", wall, wall*5/4, c.Timeout)
	}
	if c.Interval > 0 && c.wall(c.Min) < 100*time.Millisecond {
		bad("the minimum interval %v is %v of wall time at %v×: too short to schedule", c.Min, c.wall(c.Min), c.TimeScale)
	}
	return c, errors.Join(errs...)
}

// wall is simulated duration d on the wall clock.
func (c *FreshConfig) wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.TimeScale)
}

// schedule splits NAME[:INTERVAL] (simulated; default Interval).
func (c *FreshConfig) schedule(s string) (name string, interval time.Duration, err error) {
	name, iv, ok := strings.Cut(s, ":")
	if !ok {
		return name, c.Interval, nil
	}
	interval, err = time.ParseDuration(iv)
	if err == nil && interval <= 0 {
		err = fmt.Errorf("interval %v is not positive", interval)
	}
	return name, interval, err
}

// flags are a schedule's `site up` flags.
func (c *FreshConfig) flags(schedule string) []string {
	w := func(d time.Duration) string { return c.wall(d).String() }
	name, iv, _ := c.schedule(schedule)
	switch name {
	case "fixed":
		return []string{"--refetch-interval=" + w(iv)}
	case "adaptive":
		return []string{"--refetch-interval=" + w(iv), "--refetch-adaptive", "--refetch-min=" + w(c.Min), "--refetch-max=" + w(c.Max)}
	case "optimal":
		return []string{"--refetch-interval=" + w(iv), "--refetch-optimal", "--refetch-min=" + w(c.Min), "--refetch-max=" + w(c.Max)}
	}
	return nil
}

// FreshResult is what bench fresh measured.
type FreshResult struct {
	// Pages is the collection: every page of the web with a change
	// schedule (news pages excluded), Static those of them that never
	// change.
	Pages  int `json:"pages"`
	Static int `json:"static"`
	// WindowDays is the measured span, simulated.
	WindowDays float64    `json:"window_days"`
	Runs       []FreshRun `json:"runs"`
}

// FreshRun is one schedule's crawl, measured over the window.
type FreshRun struct {
	Schedule string   `json:"schedule"`
	Flags    []string `json:"flags"`
	// Freshness and AgeDays are Cho and Garcia-Molina's, averaged over
	// the collection and the window. A page without a copy yet counts as
	// stale, its age from the epoch.
	Freshness float64 `json:"freshness"`
	AgeDays   float64 `json:"age_days"`
	// Requests are the answered requests for collection pages in the
	// window (200 or 304); Budget is that per page per simulated day, the
	// budget the theory's allocations get.
	Requests int64   `json:"requests"`
	Budget   float64 `json:"budget_per_page_day"`
	// AllRequests are the answered requests of the whole run, every URL
	// (robots.txt, sitemaps, news pages and their refetches too).
	AllRequests int64 `json:"all_requests"`
	// Refetches of collection pages in the window, and what they found.
	Refetches   int64 `json:"refetches"`
	NotModified int64 `json:"not_modified"`
	Unchanged   int64 `json:"unchanged_200"`
	Changed     int64 `json:"changed"`
	// NotModifiedShare is NotModified over all requests of the run.
	NotModifiedShare float64 `json:"not_modified_share"`
	// Bytes are the HTTP bytes (headers and bodies) of every answered
	// request of the run; UnchangedBytes those of refetches that found
	// the page unchanged, and UnchangedFullBytes what those would have
	// cost as plain GETs (the page's last 200). ConditionalCut is
	// 1 − UnchangedBytes/UnchangedFullBytes.
	Bytes              int64   `json:"bytes"`
	UnchangedBytes     int64   `json:"unchanged_bytes"`
	UnchangedFullBytes int64   `json:"unchanged_full_bytes"`
	ConditionalCut     float64 `json:"conditional_cut"`
	NewsPages          int64   `json:"news_pages"` // news pages fetched (new URLs the changes made)
	Breaches           int     `json:"politeness_breaches"`
	// Theory: the allocations at this run's budget (fresh_theory.go).
	Theory allocations `json:"theory"`
	// Classes are the collection by true change rate: where each
	// schedule spent its requests, against where the optimum would.
	Classes []FreshClass `json:"classes"`
	// Series is the collection's freshness over the run, simulated days
	// from the epoch.
	Series []FreshPoint `json:"series"`
	WallS  float64      `json:"wall_s"`
	CPUS   float64      `json:"site_cpu_s"`
}

// FreshClass is the pages of one band of true change rates in a run.
type FreshClass struct {
	// Name is the band: changes per day in [Lo, Hi) (static: 0).
	Name   string  `json:"name"`
	Lo, Hi float64 `json:"-"`
	Pages  int     `json:"pages"`
	// Rate is the run's answered requests per page per day in the window;
	// Freshness its freshness there.
	Rate      float64 `json:"rate_per_page_day"`
	Freshness float64 `json:"freshness"`
	// OptimalRate and OptimalFreshness are the optimum's, at the run's
	// budget.
	OptimalRate      float64 `json:"optimal_rate_per_page_day"`
	OptimalFreshness float64 `json:"optimal_freshness"`
}

// freshClasses are the bands of change rates (per day) the report shows:
// Cho and Garcia-Molina's classes of average change interval.
func freshClasses() []FreshClass {
	return []FreshClass{{Name: "static", Lo: 0, Hi: 0}, {Name: ">1mo", Lo: 1e-300, Hi: 1.0 / 30}, {Name: "1w-1mo", Lo: 1.0 / 30, Hi: 1.0 / 7},
		{Name: "1d-1w", Lo: 1.0 / 7, Hi: 1}, {Name: "<1d", Lo: 1, Hi: math.Inf(1)}}
}

// classOf is the index in freshClasses of a page of rate lambda.
func classOf(classes []FreshClass, lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	for i := 1; i < len(classes); i++ {
		if lambda >= classes[i].Lo && lambda < classes[i].Hi {
			return i
		}
	}
	return len(classes) - 1
}

// FreshPoint is the collection's freshness at a moment.
type FreshPoint struct {
	Day       float64 `json:"day"`
	Freshness float64 `json:"freshness"`
}

// RunFresh crawls the web of cfg once per schedule and measures each.
func RunFresh(ctx context.Context, cfg FreshConfig) (FreshResult, error) {
	var res FreshResult
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return res, err
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	for _, sched := range cfg.Schedules {
		sc := SiteConfig{Hosts: cfg.Hosts, Pages: cfg.Pages, IPs: cfg.IPs, Seed: cfg.Seed, Profile: synth.Clean,
			Width: cfg.Width, PerHost: cfg.PerHost, HostDelay: cfg.HostDelay, MaxCrawlDelay: cfg.MaxCrawlDelay,
			Timeout: cfg.Timeout, NoCheck: true, SiteFlags: cfg.flags(sched), TimeScale: cfg.TimeScale,
			RunFor: cfg.wall(time.Duration(cfg.Days * 24 * float64(time.Hour))),
			Dir:    cfg.Dir, Keep: true, ModuleRoot: cfg.ModuleRoot, WebsimBinary: cfg.WebsimBinary, SiteBinary: cfg.SiteBinary,
			Progress: func(format string, args ...any) { cfg.Progress(sched+": "+format, args...) }}
		cfg.Progress("%s: crawling %v simulated days (%v) with %q", sched, cfg.Days, sc.RunFor, sc.SiteFlags)
		sr, err := RunSite(ctx, sc)
		if sr.Dir != "" && !cfg.Keep {
			defer os.RemoveAll(sr.Dir)
		}
		if err != nil {
			return res, fmt.Errorf("bench: fresh: %s: %w", sched, err)
		}
		sc, _ = sc.WithDefaults()
		web, err := synth.New(sc.webOptions(0))
		if err != nil {
			return res, fmt.Errorf("bench: fresh: %w", err)
		}
		run, err := measureFresh(ctx, &cfg, web, filepath.Join(sr.Dir, "data", "warc"), &res)
		if err != nil {
			return res, fmt.Errorf("bench: fresh: %s: %w", sched, err)
		}
		run.Schedule, run.Flags = sched, sc.SiteFlags
		run.Breaches, run.WallS, run.CPUS = sr.Breaches, sr.WallS, sr.Site.CPUS
		res.Runs = append(res.Runs, run)
		cfg.Progress("%s: freshness %.3f, age %.2f days, %.2f requests a page a day (optimum at that budget %.3f, uniform %.3f, proportional %.3f)",
			sched, run.Freshness, run.AgeDays, run.Budget, run.Theory.Optimal.Freshness, run.Theory.Uniform.Freshness, run.Theory.Proportional.Freshness)
	}
	return res, nil
}

// freshPage is one collection page as the crawl saw it.
type freshPage struct {
	h, n   int
	lambda float64  // changes per day
	syncs  []int64  // simulated Unix seconds of its answered requests
	last   [2]int64 // header and body bytes of its last 200
}

// freshFetch is one answered request read from a WARC record.
type freshFetch struct {
	url          string
	at           int64 // simulated Unix seconds (the answer's Date)
	status       int
	revisit      bool // a revisit record (304, or a 200 with the same payload)
	header, body int64
}

// measureFresh reads the run's WARC files and computes its figures.
func measureFresh(ctx context.Context, cfg *FreshConfig, web *synth.Web, dir string, res *FreshResult) (FreshRun, error) {
	var run FreshRun
	pages := map[string]*freshPage{}
	var order []*freshPage
	for h, host := range web.Hosts() {
		if host.Domain == synth.DomainNone {
			continue
		}
		for n := range host.Pages + host.Orphans {
			p := &freshPage{h: h, n: n, lambda: web.ChangeRate(h, n)} // per day
			order = append(order, p)
			pages[host.Name+pagePath(n)] = p
		}
	}
	res.Pages, res.Static = len(order), 0
	lambdas := make([]float64, len(order))
	for i, p := range order {
		lambdas[i] = p.lambda
		if p.lambda == 0 {
			res.Static++
		}
	}
	fetches, err := readFreshWARC(ctx, dir)
	if err != nil {
		return run, err
	}
	epoch := web.Options().Epoch.Unix()
	day := int64(86400)
	w0 := epoch + int64(cfg.WarmupDays*float64(day))
	// The run ends Days after websim's start or later (websim starts
	// before the site, and the site runs Days of wall time): a crawl
	// without refetch, which ends early, keeps its copies to the end.
	w1 := epoch + int64(cfg.Days*float64(day))
	res.WindowDays = float64(w1-w0) / float64(day)
	var all, notMod int64
	slices.SortStableFunc(fetches, func(a, b freshFetch) int { return int(a.at - b.at) })
	for _, f := range fetches {
		all++
		run.Bytes += f.header + f.body
		if f.status == http.StatusNotModified {
			notMod++
		}
		u, err := url.Parse(f.url)
		if err != nil {
			continue
		}
		if strings.HasPrefix(u.Path, "/news/") && f.status == http.StatusOK {
			run.NewsPages++
		}
		p := pages[u.Hostname()+u.EscapedPath()]
		if p == nil || u.RawQuery != "" {
			continue
		}
		refetch := len(p.syncs) > 0
		p.syncs = append(p.syncs, f.at)
		if f.at >= w0 {
			run.Requests++
		}
		unchanged := f.status == http.StatusNotModified || f.revisit
		if refetch && f.at >= w0 {
			run.Refetches++
			switch {
			case f.status == http.StatusNotModified:
				run.NotModified++
			case f.revisit:
				run.Unchanged++
			default:
				run.Changed++
			}
		}
		if refetch && unchanged {
			run.UnchangedBytes += f.header + f.body
			run.UnchangedFullBytes += p.last[0] + p.last[1]
		}
		if f.status == http.StatusOK && !f.revisit {
			p.last = [2]int64{f.header, f.body}
		}
	}
	run.AllRequests = all
	if all > 0 {
		run.NotModifiedShare = float64(notMod) / float64(all)
	}
	if run.UnchangedFullBytes > 0 {
		run.ConditionalCut = 1 - float64(run.UnchangedBytes)/float64(run.UnchangedFullBytes)
	}
	run.Budget = float64(run.Requests) / float64(len(order)) / res.WindowDays
	run.Theory = allocate(lambdas, run.Budget)

	// Freshness and age over the window, and the curve over the run.
	var fresh, age float64
	run.Classes = freshClasses()
	days := float64(w1-w0) / float64(day)
	for _, p := range order {
		if err := ctx.Err(); err != nil {
			return run, err
		}
		f, a := p.window(web, epoch, w0, w1)
		fresh += f
		age += a
		cl := &run.Classes[classOf(run.Classes, p.lambda)]
		cl.Pages++
		i, _ := slices.BinarySearch(p.syncs, w0)
		cl.Rate += float64(len(p.syncs)-i) / days
		cl.Freshness += f / float64(w1-w0)
		if run.Theory.mu > 0 {
			f := optimalRate(p.lambda, run.Theory.mu)
			cl.OptimalRate += f
			cl.OptimalFreshness += freshnessOf(p.lambda, f)
		}
	}
	for i := range run.Classes {
		if cl := &run.Classes[i]; cl.Pages > 0 {
			n := float64(cl.Pages)
			cl.Rate, cl.Freshness, cl.OptimalRate, cl.OptimalFreshness = cl.Rate/n, cl.Freshness/n, cl.OptimalRate/n, cl.OptimalFreshness/n
		}
	}
	span := float64(w1-w0) * float64(len(order))
	run.Freshness, run.AgeDays = fresh/span, age/span/float64(day)
	for i := range cfg.Samples {
		t := epoch + (w1-epoch)*int64(i+1)/int64(cfg.Samples)
		n := 0
		for _, p := range order {
			if p.freshAt(web, epoch, t) {
				n++
			}
		}
		run.Series = append(run.Series, FreshPoint{Day: float64(t-epoch) / float64(day), Freshness: float64(n) / float64(len(order))})
	}
	return run, nil
}

// pagePath is the path of page node n (websim's clean profile).
func pagePath(n int) string {
	if n == 0 {
		return "/"
	}
	return "/p/" + strconv.Itoa(n) + ".html"
}

// nextChange is the first change of p after simulated second s (math.MaxInt64: none).
func (p *freshPage) nextChange(web *synth.Web, s int64) int64 {
	if p.lambda == 0 {
		return math.MaxInt64
	}
	v := web.Version(p.h, p.n, time.Unix(s, 0))
	t, ok := web.ChangeTime(p.h, p.n, v+1)
	if !ok {
		return math.MaxInt64
	}
	return t.Unix()
}

// freshAt reports whether p's copy at simulated second t is the live page.
func (p *freshPage) freshAt(web *synth.Web, epoch, t int64) bool {
	i, _ := slices.BinarySearch(p.syncs, t+1)
	if i == 0 {
		return false
	}
	return t < p.nextChange(web, p.syncs[i-1])
}

// window returns the seconds p was fresh in [w0, w1), and the integral of
// its age over them (second²): between two syncs the copy is fresh until
// the page's next change, then ages by one second a second. Before its
// first sync p is stale with the age of the crawl.
func (p *freshPage) window(web *synth.Web, epoch, w0, w1 int64) (fresh, age float64) {
	// area of an age that is a0 at a and grows to b.
	ramp := func(a, b, start int64) float64 {
		x, y := float64(a-start), float64(b-start)
		return (y*y - x*x) / 2
	}
	first := w1
	if len(p.syncs) > 0 {
		first = min(max(p.syncs[0], w0), w1)
	}
	if first > w0 {
		age += ramp(w0, first, epoch)
	}
	for i, s := range p.syncs {
		end := w1
		if i+1 < len(p.syncs) {
			end = min(p.syncs[i+1], w1)
		}
		a := max(s, w0)
		if end <= a {
			continue
		}
		nc := p.nextChange(web, s)
		stale := min(max(nc, a), end)
		fresh += float64(stale - a)
		if stale < end {
			age += ramp(stale, end, nc)
		}
	}
	return fresh, age
}

// readFreshWARC reads every answered request of the WARC files in dir:
// response records and revisit records, with the answer's Date.
func readFreshWARC(ctx context.Context, dir string) ([]freshFetch, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil {
		return nil, err
	}
	var out []freshFetch
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rd, err := gowarc.NewWarcFileReader(path, 0, warcOptions...)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		for rec, err := range rd.Records() {
			if err != nil {
				rd.Close()
				return nil, fmt.Errorf("read %s: %w", path, err)
			}
			wr := rec.WarcRecord
			if t := wr.Type(); t == gowarc.Response || t == gowarc.Revisit {
				if f, ok := freshFetchOf(wr); ok {
					out = append(out, f)
				}
			}
			rec.Close()
		}
		rd.Close()
	}
	return out, nil
}

// freshFetchOf reads a response or revisit record's status, Date and sizes.
func freshFetchOf(wr gowarc.WarcRecord) (freshFetch, bool) {
	ph, ok := wr.Block().(gowarc.ProtocolHeaderBlock)
	if !ok {
		return freshFetch{}, false
	}
	hdr := ph.ProtocolHeaderBytes()
	f := freshFetch{url: wr.WarcHeader().Get(gowarc.WarcTargetURI), revisit: wr.Type() == gowarc.Revisit,
		status: crawlcheck.StatusOf(hdr), header: int64(len(hdr))}
	var date string
	for _, line := range bytes.Split(hdr, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch strings.ToLower(string(bytes.TrimSpace(k))) {
		case "date":
			date = string(v)
		case "content-length":
			f.body, _ = strconv.ParseInt(string(v), 10, 64)
		}
	}
	t, err := http.ParseTime(date)
	if err != nil || f.status == 0 {
		return freshFetch{}, false // not websim's simulated answer
	}
	if f.status == http.StatusNotModified {
		f.body = 0
	}
	f.at = t.Unix()
	return f, true
}

// Report is the result as text: a row per schedule, then the comparisons
// the issue asks for.
func (r FreshResult) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "collection: %d pages (%d never change), measured over %.1f simulated days\n", r.Pages, r.Static, r.WindowDays)
	fmt.Fprintf(&b, "%-14s %9s %8s %9s %8s %7s %9s %8s %8s | %8s %8s %8s %8s\n", "schedule", "freshness", "age(d)", "req/pg/d",
		"refetch", "304", "changed", "cut", "breach", "optimum", "uniform", "proport", "ignored")
	for _, run := range r.Runs {
		fmt.Fprintf(&b, "%-14s %9.3f %8.2f %9.3f %8d %6.1f%% %9d %7.1f%% %8d | %8.3f %8.3f %8.3f %7.0f%%\n", run.Schedule, run.Freshness, run.AgeDays,
			run.Budget, run.Refetches, 100*share(run.NotModified, run.Refetches), run.Changed, 100*run.ConditionalCut, run.Breaches,
			run.Theory.Optimal.Freshness, run.Theory.Uniform.Freshness, run.Theory.Proportional.Freshness, 100*run.Theory.OptimalIgnored)
	}
	byName := map[string]FreshRun{}
	for _, run := range r.Runs {
		byName[run.Schedule] = run
	}
	// Where the requests went, by true change rate.
	if len(r.Runs) > 0 && len(r.Runs[0].Classes) > 0 {
		fmt.Fprintf(&b, "requests a page a day (freshness) by true change interval; optimum at each run's budget in brackets\n%-14s", "schedule")
		for _, cl := range r.Runs[0].Classes {
			fmt.Fprintf(&b, " %24s", fmt.Sprintf("%s (%d)", cl.Name, cl.Pages))
		}
		b.WriteByte('\n')
		for _, run := range r.Runs {
			fmt.Fprintf(&b, "%-14s", run.Schedule)
			for _, cl := range run.Classes {
				fmt.Fprintf(&b, " %24s", fmt.Sprintf("%.2f (%.2f) [%.2f (%.2f)]", cl.Rate, cl.Freshness, cl.OptimalRate, cl.OptimalFreshness))
			}
			b.WriteByte('\n')
		}
	}
	// At the same budget: a fixed interval is the uniform allocation, so
	// the theory's uniform freshness at a run's budget is what a fixed
	// schedule gets there (the fixed run checks the measure against it).
	for _, run := range r.Runs {
		if run.Budget == 0 || run.Theory.Uniform.Freshness == 0 {
			continue
		}
		fmt.Fprintf(&b, "%-9s at %.3f requests a page a day: %.3f, %+.1f%% over a fixed interval at that budget (%.3f), %.1f%% of the optimum (%.3f); "+
			"all requests %d\n", run.Schedule, run.Budget, run.Freshness, 100*(run.Freshness/run.Theory.Uniform.Freshness-1),
			run.Theory.Uniform.Freshness, 100*run.Freshness/run.Theory.Optimal.Freshness, run.Theory.Optimal.Freshness, run.AllRequests)
	}
	for _, name := range []string{"adaptive", "optimal"} {
		run, ok := byName[name]
		fixed, okF := byName["fixed"]
		// A fixed run at this run's budget, if there is one.
		for _, o := range r.Runs {
			if strings.HasPrefix(o.Schedule, "fixed:") && math.Abs(o.Budget/run.Budget-1) < 0.05 {
				fixed = o
			}
		}
		if !ok || !okF {
			continue
		}
		fmt.Fprintf(&b, "%s against the fixed run: freshness %.3f vs %.3f (%+.1f%%), age %.3f vs %.3f days, at %.2f vs %.2f requests a page a day\n",
			name, run.Freshness, fixed.Freshness, 100*(run.Freshness/fixed.Freshness-1), run.AgeDays, fixed.AgeDays, run.Budget, fixed.Budget)
	}
	return b.String()
}

func share(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Figures plots each schedule's freshness over the simulated days.
func (r FreshResult) Figures() []Figure {
	ch := lineChart{title: "Freshness of the collection", xLabel: "simulated day", yLabel: "share of pages whose copy is the live page"}
	for _, run := range r.Runs {
		x, y := make([]float64, len(run.Series)), make([]float64, len(run.Series))
		for i, p := range run.Series {
			x[i], y[i] = p.Day, p.Freshness
		}
		ch.series = append(ch.series, series{name: fmt.Sprintf("%s (%.3f, %.2f req/page/day)", run.Schedule, run.Freshness, run.Budget), x: x, y: y})
	}
	if len(ch.series) == 0 {
		return nil
	}
	return []Figure{{"freshness", ch.svg()}}
}

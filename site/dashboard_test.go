package site_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/rounds/control"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/shardset"
	"github.com/meridian-crawler/meridian/site"
)

// pageRate is the pages/s figure as the dashboard shows it.
type pageRate struct {
	Value string `json:"value"`
	T     string `json:"t"`
	Text  string `json:"text"`
}

const readRate = `(() => { const e = document.getElementById('pages-s'); return e ? {value: e.dataset.value || '', t: e.dataset.t || '', text: e.textContent} : {value: '', t: '', text: ''}; })()`

// TestDashboardInChromium opens a crawling site's dashboard in headless
// chromium and checks what it shows against the site: the pages/s figure
// equals /status's for the same sample, the rounds timeline has one bar per
// phase of every finished round (as rounds.jsonl lists them), the payload
// stays within its bounds, a crawl without refetch has no refetch figures
// (nor panel), and the page logs no error. A screenshot is
// saved among the test's artifacts.
func TestDashboardInChromium(t *testing.T) {
	cfg := testConfig(t, "realistic")
	cfg.WebsimHosts, cfg.WebsimPages = 50, 16
	cfg.HostDelay, cfg.MaxCrawlDelay = 80*time.Millisecond, 250*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := site.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := "http://" + s.Addr()
	b := startBrowser(t)
	if err := b.do(60*time.Second, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx, nil) }() // owner: the test; ends with the crawl or ctx

	// While the crawl runs: the figure shown is /status's for the same
	// sample, and the crawl shows progress (a non-zero rate).
	matched := 0
	deadline := time.Now().Add(90 * time.Second)
	for matched < 3 && time.Now().Before(deadline) {
		var st site.Status
		if err := getJSON(t, base+"/status", &st); err != nil {
			t.Fatal(err)
		}
		pr, err := eval[pageRate](b, readRate)
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		if pr.T != "" && pr.T == strconv.FormatInt(st.Fetcher.PagesAt, 10) && st.Fetcher.PagesPerSec > 0 {
			v, err := strconv.ParseFloat(pr.Value, 64)
			if err != nil || v != st.Fetcher.PagesPerSec {
				t.Fatalf("the page shows %q pages/s (data-value %q) for sample %s; /status says %v", pr.Text, pr.Value, pr.T, st.Fetcher.PagesPerSec)
			}
			if want := fmt.Sprintf("%.1f", v); pr.Text != want && math.Abs(mustFloat(t, pr.Text)-v) > 0.05+1e-9 {
				t.Fatalf("the page shows %q pages/s for %v", pr.Text, v)
			}
			matched++
		}
		time.Sleep(300 * time.Millisecond)
	}
	if matched < 3 {
		t.Fatalf("the page's pages/s never matched /status's for the same sample with the crawl running (matched %d)", matched)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the crawl did not end")
	}
	// Two more updates after the last round: the timeline is complete.
	p := b.polls()
	waitFor(t, 20*time.Second, "two more dashboard updates", func() bool { return b.polls() >= p+2 })

	// Every shard's rounds: the timeline has a bar per phase of the last
	// 60 to end (as each shard's rounds.jsonl dates them), each named by
	// its shard and round; rounds that ended within a few milliseconds
	// of each other may be told apart in either order at the 60th.
	byShard := readShardRounds(t, cfg.Data)
	type endedRound struct {
		name  string
		ended time.Time
	}
	var ls []endedRound
	for sh, rs := range byShard {
		var i int
		fmt.Sscanf(sh, "s%d", &i)
		for _, r := range rs {
			ls = append(ls, endedRound{fmt.Sprintf("%d/%d", i, r.Round), r.Ended})
		}
	}
	if len(ls) < 2 {
		t.Fatalf("%d rounds: too few to check a timeline", len(ls))
	}
	slices.SortStableFunc(ls, func(a, b endedRound) int { return a.ended.Compare(b.ended) })
	all := map[string]bool{}
	for _, r := range ls {
		for _, ph := range []string{"generate", "fetch", "update"} {
			all[r.name+"/"+ph] = true
		}
	}
	got, err := eval[[]string](b, `Array.from(document.querySelectorAll('rect.phase')).map(r => r.dataset.shard + '/' + r.dataset.round + '/' + r.dataset.phase)`)
	if err != nil {
		t.Fatal(err)
	}
	wantBars := 3 * min(len(ls), 60)
	for _, g := range got {
		if !all[g] {
			t.Errorf("timeline bar %s is no phase of a finished round", g)
		}
	}
	newest := ls[len(ls)-1].name + "/update"
	if len(got) != wantBars || !slices.Contains(got, newest) {
		t.Errorf("%d timeline bars (the newest round's update %s among them: %v), want %d", len(got), newest, slices.Contains(got, newest), wantBars)
	}
	labels, err := eval[[]string](b, `Array.from(document.querySelectorAll('#chart-rounds text.tick')).map(t => t.textContent).filter(s => /^s\d+ r\d+$/.test(s))`)
	if err != nil || len(labels) == 0 {
		t.Errorf("the timeline's rows are not named s<shard> r<round>: %v, %v", labels, err)
	}
	t.Logf("%d rounds; %d timeline bars", len(ls), len(got))

	// The payload's bounds.
	resp, err := http.Get(base + "/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var d site.Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Series) > 300 || len(d.Rounds) > 60 || len(d.OPIC.Top) > 10 || len(d.Hosts.Slowest) > 10 || len(d.Hosts.Troubled) > 10 || len(d.Hosts.IPs) > 10 {
		t.Errorf("payload over its bounds: %d samples, %d rounds, %d top URLs, %d/%d/%d hosts", len(d.Series), len(d.Rounds), len(d.OPIC.Top), len(d.Hosts.Slowest), len(d.Hosts.Troubled), len(d.Hosts.IPs))
	}
	if d.CrawlDB.Fetched == 0 || d.CrawlDB.Disk == 0 || d.Finished != "exhausted" {
		t.Errorf("dashboard after the crawl: %+v, finished %q", d.CrawlDB, d.Finished)
	}
	// No refetch: no refetch figures, in the JSON or on the page.
	if d.Refetch != nil || bytesContain(raw, `"refetch"`) {
		t.Errorf("a crawl without refetch has refetch figures %+v", d.Refetch)
	}
	if hidden, err := eval[bool](b, `document.getElementById('refetch-panel').hidden`); err != nil || !hidden {
		t.Errorf("a crawl without refetch shows the refetch panel (hidden %v, %v)", hidden, err)
	}
	t.Logf("dashboard.json: %d bytes", len(raw))
	b.screenshot(t, "dashboard")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("the page logged %d errors or warnings: %v", len(errs), errs)
	}
}

func bytesContain(b []byte, s string) bool { return strings.Contains(string(b), s) }

// TestDashboardRefetch: a site that refetches (--refetch-interval, ended
// by --rounds) shows the refetch figures of its recent rounds, as its
// rounds.jsonl counts them: dashboard.json's refetch (refetches/s over the
// rounds' span, the 304 share, the estimated freshness, and the pages
// waiting for their refetch) and /status's are the sums of the last
// rounds' counters, `site status` prints them, the metrics count the
// refetches of every round and the scheduled pages, and the dashboard page
// shows the panel with the figures of dashboard.json. (websim's pages
// here do not change and have no validators: every refetch finds the same
// body.)
func TestDashboardRefetch(t *testing.T) {
	cfg := testConfig(t, "clean")
	cfg.WebsimHosts, cfg.WebsimPages = 10, 4
	cfg.Refetch = plan.Refetch{Interval: 300 * time.Millisecond}
	cfg.Rounds = 8
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := site.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Operator's controls that change nothing here (the site's own
	// width, a host at the site's delay): the controls panel shows them.
	api, err := site.DialNode(cfg.Data, "")
	if err != nil {
		t.Fatal(err)
	}
	width, delay := cfg.Width, control.Duration(cfg.HostDelay)
	for _, op := range []control.Op{{Width: &width}, {Host: "h3.zz.test", Delay: &delay}} {
		if _, err := api.Control(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Run(ctx, nil); err != nil {
		t.Fatalf("run: %v", err)
	}
	base := "http://" + s.Addr()

	ls := readRounds(t, cfg.Data)
	var all int64
	for _, l := range ls {
		all += l.Refetches
		if l.NotModified+l.Unchanged+l.Changed != l.Refetches {
			t.Errorf("round %d: %d refetches, %d + %d + %d of them", l.Round, l.Refetches, l.NotModified, l.Unchanged, l.Changed)
		}
	}
	// The last 60 rounds to end (a site of shards: of every shard), over
	// the time from the first one's start to the last one's end.
	slices.SortStableFunc(ls, func(a, b rounds.RoundStats) int { return a.Ended.Compare(b.Ended) })
	recent := ls[max(0, len(ls)-60):]
	first, last := recent[0].Started, recent[len(recent)-1].Ended
	for _, l := range recent {
		if l.Started.Before(first) {
			first = l.Started
		}
	}
	want := site.RefetchFigures{Rounds: len(recent), Window: last.Sub(first).Seconds()}
	for _, l := range recent {
		want.Refetches += l.Refetches
		want.NotModified += l.NotModified
		want.Unchanged += l.Unchanged
		want.Changed += l.Changed
	}
	if want.Refetches == 0 {
		t.Fatalf("%d rounds refetched nothing", len(ls))
	}
	want.Rate = float64(want.Refetches) / want.Window
	want.NotModifiedShare = float64(want.NotModified) / float64(want.Refetches)
	want.Freshness = float64(want.NotModified+want.Unchanged) / float64(want.Refetches)
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) } // times in rounds.jsonl are rounded
	same := func(got site.RefetchFigures) bool {
		return got.Rounds == want.Rounds && got.Refetches == want.Refetches && got.NotModified == want.NotModified &&
			got.Unchanged == want.Unchanged && got.Changed == want.Changed && near(got.Window, want.Window) && near(got.Rate, want.Rate) &&
			got.NotModifiedShare == want.NotModifiedShare && got.Freshness == want.Freshness
	}
	t.Logf("%d rounds, %d refetches; recent: %+v", len(ls), all, want)

	var d site.Dashboard
	if err := getJSON(t, base+"/dashboard.json", &d); err != nil {
		t.Fatal(err)
	}
	var st site.Status
	if err := getJSON(t, base+"/status", &st); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Refetch == nil:
		t.Fatal("dashboard.json has no refetch figures")
	case !same(d.Refetch.RefetchFigures):
		t.Errorf("dashboard.json's refetch %+v, want %+v", d.Refetch.RefetchFigures, want)
	case d.Refetch.Scheduled != st.CrawlDB.Scheduled || d.Refetch.Scheduled == 0:
		t.Errorf("dashboard.json: %d pages scheduled; /status: %d", d.Refetch.Scheduled, st.CrawlDB.Scheduled)
	}
	if st.Refetch == nil || !same(*st.Refetch) {
		t.Errorf("/status's refetch %+v, want %+v", st.Refetch, want)
	}
	var sum strings.Builder
	if err := st.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	if line := fmt.Sprintf("refetch   %.1f/s over the last %d rounds", want.Rate, want.Rounds); !strings.Contains(sum.String(), line) ||
		!strings.Contains(sum.String(), fmt.Sprintf("est. freshness %.1f%%", 100*want.Freshness)) {
		t.Errorf("site status lacks %q and the freshness:\n%s", line, sum.String())
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var notModified, unchanged, changed int64
	for _, l := range ls {
		notModified, unchanged, changed = notModified+l.NotModified, unchanged+l.Unchanged, changed+l.Changed
	}
	for _, m := range []string{fmt.Sprintf("meridian_refetches_total %d\n", all), fmt.Sprintf("meridian_refetch_not_modified_total %d\n", notModified),
		fmt.Sprintf("meridian_refetch_unchanged_total %d\n", unchanged), fmt.Sprintf("meridian_refetch_changed_total %d\n", changed),
		fmt.Sprintf("meridian_crawldb_scheduled %d\n", st.CrawlDB.Scheduled)} {
		if !strings.Contains(string(raw), m) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(m))
		}
	}

	// The page: the panel, with dashboard.json's figures.
	b := startBrowser(t)
	if err := b.do(60*time.Second, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	waitFor(t, 20*time.Second, "two dashboard updates", func() bool { return b.polls() >= 2 })
	type panel struct {
		Hidden                                    bool
		Refetches, Rate, Share, Freshness, Sched  string
		RateText, ShareText, FreshText, SchedText string
	}
	p, err := eval[panel](b, `(() => { const p = document.getElementById('refetch-panel'), x = (id) => document.getElementById(id).textContent;
		return {Hidden: p.hidden, Refetches: p.dataset.refetches, Rate: p.dataset.rate, Share: p.dataset.notModifiedShare, Freshness: p.dataset.freshness,
			Sched: p.dataset.scheduled, RateText: x('refetch-rate'), ShareText: x('refetch-304'), FreshText: x('refetch-fresh'), SchedText: x('refetch-scheduled')}; })()`)
	if err != nil {
		t.Fatal(err)
	}
	if p.Hidden || p.Refetches != strconv.FormatInt(want.Refetches, 10) || mustFloat(t, p.Rate) != d.Refetch.Rate ||
		mustFloat(t, p.Share) != want.NotModifiedShare || mustFloat(t, p.Freshness) != want.Freshness || p.Sched != strconv.FormatUint(d.Refetch.Scheduled, 10) {
		t.Errorf("the page's refetch panel %+v; dashboard.json %+v", p, *d.Refetch)
	}
	if p.RateText != fmt.Sprintf("%.1f", d.Refetch.Rate) || p.FreshText != fmt.Sprintf("%.1f%%", 100*want.Freshness) ||
		p.ShareText != fmt.Sprintf("%.1f%%", 100*want.NotModifiedShare) {
		t.Errorf("the page shows %s refetches/s, %s answered 304, %s est. freshness; want %.1f, %.1f%%, %.1f%%",
			p.RateText, p.ShareText, p.FreshText, d.Refetch.Rate, 100*want.NotModifiedShare, 100*want.Freshness)
	}
	if d.Controls == nil || d.Controls.Version != 2 || d.Controls.Width != cfg.Width {
		t.Errorf("dashboard.json's controls: %+v", d.Controls)
	}
	cp, err := eval[struct {
		Hidden                 bool
		Version, Hosts, Change string
	}](b, `(() => { const p = document.getElementById('controls-panel');
		return {Hidden: p.hidden, Version: p.dataset.version, Hosts: p.dataset.hosts, Change: document.getElementById('controls-changes').textContent}; })()`)
	if err != nil || cp.Hidden || cp.Version != "2" || cp.Hosts != "1" || !strings.Contains(cp.Change, "host h3.zz.test delay=") {
		t.Errorf("the page's controls panel: %+v, %v", cp, err)
	}
	b.screenshot(t, "dashboard-refetch")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("the page logged %d errors or warnings: %v", len(errs), errs)
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return v
}

// startShardedNode starts a one-node sharded site (4 shards, R = 1) on a
// small realistic web, with mutual TLS, and runs its crawl in the
// background; done yields Run's error once the crawl ended.
func startShardedNode(t *testing.T, ctx context.Context) (s *site.Site, cfg site.Config, done <-chan error) {
	t.Helper()
	w := startMultiWeb(t, 12, 8, 3, 5)
	cfg = nodeConfig(t, w, t.TempDir(), "n1", "")
	cfg.Shards, cfg.Replicas = 4, 1
	s, err := site.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx, nil) }() // owner: the test; ends with the crawl or ctx
	t.Cleanup(func() { s.Close() })
	return s, cfg, ran
}

// shardCounts reads each shard's crawl database of a stopped sharded node
// offline, record by record: URLs, unfetched and fetched, by shard.
func shardCounts(t *testing.T, data string) map[int][3]uint64 {
	t.Helper()
	sh, err := store.OpenShared(filepath.Join(data, "crawldb", "store"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	groups, err := sh.Groups()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][3]uint64{}
	for _, g := range groups {
		n := shardset.ShardOfGroup(g)
		if n < 0 {
			continue // the meta group
		}
		st, err := sh.Store(g)
		if err != nil {
			t.Fatal(err)
		}
		var c [3]uint64
		err = st.ScanURLs(func(r store.URLRecord) error {
			c[0]++
			switch r.Status {
			case store.StatusUnfetched:
				c[1]++
			case store.StatusFetched:
				c[2]++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		out[n] = c
	}
	return out
}

// TestShardedDashboard: a one-node sharded site (4 shards, R = 1), its
// dashboard read as JSON and in headless chromium once the crawl has
// ended (one site for what were two tests).
//
// dashboard.json has one row per shard, each led by the node on its one
// replica (not under-replicated: R = 1), the node in the nodes' list
// leading and holding all four, and each row's URLs, frontier and fetched
// pages are what the shard's crawl database holds, record by record, read
// offline after the node stopped; the shards' pages/s, over a window that
// covers the crawl, add up to a rate above 0. `site status`'s summary has
// the same shards, each on its own line.
//
// The page's shards table has one row per shard of dashboard.json, in
// order, each with the shard's leader, replicas, frontier and fetched
// pages as the JSON has them; the nodes table lists the node; no
// partial-view note (the node holds every shard); the rounds timeline
// shows the shards' rounds (TestDashboardInChromium checks its bars); and
// the page logs no error.
//
// The site-wide view (dashboard.json's sharded.site, /status?site=1 and
// its summary, the page's site-wide table) lists the four shards, each
// from n1 and led by n1 with the counts of n1's rows, nothing not
// answering, n1 up, leading and holding four. A screenshot is saved among
// the test's artifacts.
func TestShardedDashboard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, cfg, ran := startShardedNode(t, ctx)
	base := "http://" + s.Addr()
	b := startBrowser(t)
	if err := b.do(60*time.Second, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	var d site.Dashboard
	waitFor(t, 30*time.Second, "the dashboard to show four shards", func() bool {
		d = site.Dashboard{}
		return getJSON(t, base+"/dashboard.json", &d) == nil && d.Sharded != nil && len(d.Sharded.Rows) == 4
	})
	// While it crawls: the top of the shards' frontiers and the hosts
	// their rounds keep busy the longest, merged over the shards.
	topSeen, busySeen := false, false
	var runErr error
wait:
	for {
		select {
		case runErr = <-ran:
			break wait
		case <-ctx.Done():
			t.Fatal("the crawl did not end")
		case <-time.After(50 * time.Millisecond):
		}
		d = site.Dashboard{}
		if getJSON(t, base+"/dashboard.json", &d) == nil {
			topSeen = topSeen || len(d.OPIC.Top) > 0 && d.OPIC.Top[0].Cash > 0
			busySeen = busySeen || len(d.Hosts.Slowest) > 0
		}
	}
	if runErr != nil {
		t.Fatalf("run: %v", runErr)
	}
	if !topSeen || !busySeen {
		t.Errorf("while crawling, the dashboard showed top URLs %v and busiest hosts %v: want both, from the shards", topSeen, busySeen)
	}
	p := b.polls()
	waitFor(t, 20*time.Second, "two more dashboard updates", func() bool { return b.polls() >= p+2 })
	d = site.Dashboard{}
	if err := getJSON(t, base+"/dashboard.json", &d); err != nil {
		t.Fatal(err)
	}
	sd := d.Sharded
	if sd == nil {
		t.Fatal("a sharded node's dashboard has no shards")
	}
	if sd.Shards != 4 || sd.Replicas != 1 || sd.Held != 4 || sd.Partial {
		t.Errorf("sharding %d shards, R = %d, %d held, partial %v; want 4, 1, 4, false", sd.Shards, sd.Replicas, sd.Held, sd.Partial)
	}
	if d.Rate.T == 0 || len(d.Series) == 0 {
		t.Errorf("a sharded node's dashboard has no fetch rate samples (rate %+v, %d samples)", d.Rate, len(d.Series))
	}
	// `site status` lists the same shards, each led by n1 on its replica.
	var sum strings.Builder
	if err := s.Status().WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sum.String(), "shards    4 in the site, target 1 replicas each; this node holds 4, leads 4\n") {
		t.Errorf("status summary lacks its shards' line:\n%s", sum.String())
	}
	for _, r := range sd.Rows {
		if line := fmt.Sprintf("\n  %d      n1      n1        %-8d  %-7d  finished\n", r.Shard, r.Frontier, r.Fetched); !strings.Contains(sum.String(), line) {
			t.Errorf("status summary lacks %q:\n%s", line, sum.String())
		}
	}

	if len(sd.Rows) != 4 {
		t.Fatalf("%d rows after the crawl, want 4", len(sd.Rows))
	}
	// The site-wide view: n1 alone, every shard from it.
	sv := sd.Site
	if sv == nil || sv.By != "n1" || sv.Shards != 4 || len(sv.Rows) != 4 || sv.NotAnswering != 0 {
		t.Fatalf("dashboard.json's site-wide view %+v, want 4 rows gathered by n1, every shard answering", sv)
	}
	for i, r := range sv.Rows {
		dr := sd.Rows[i]
		if r.Shard != i || r.From != "n1" || r.Leader != "n1" || !slices.Equal(r.Replicas, []string{"n1"}) || len(r.NotAnswering) > 0 ||
			r.URLs != dr.URLs || r.Frontier != dr.Frontier || r.Fetched != dr.Fetched || !r.Finished {
			t.Errorf("site-wide row %d: %+v; want shard %d from n1, led by n1 alone, finished, counts %d, %d, %d as n1's row", i, r, i, dr.URLs, dr.Frontier, dr.Fetched)
		}
	}
	if len(sv.Nodes) != 1 || !sv.Nodes[0].Up || !sv.Nodes[0].Self || sv.Nodes[0].Led != 4 || sv.Nodes[0].Held != 4 {
		t.Errorf("site-wide nodes %+v, want n1 up, leading and holding 4", sv.Nodes)
	}
	var st site.Status
	if err := getJSON(t, base+"/status?site=1", &st); err != nil {
		t.Fatal(err)
	}
	if st.Site == nil || len(st.Site.Rows) != 4 || len(st.Site.Nodes) != 1 {
		t.Fatalf("/status?site=1: site-wide view %+v, want 4 rows and n1", st.Site)
	}
	sum.Reset()
	if err := st.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sum.String(), "\nsite-wide 4 shards, gathered by n1 from 1 of 1 nodes\n") {
		t.Errorf("status summary lacks the site-wide view's line:\n%s", sum.String())
	}
	for _, r := range st.Site.Rows {
		want := []string{strconv.Itoa(r.Shard), "n1", "n1", "-", fmt.Sprint(r.Frontier), fmt.Sprint(r.Fetched), fmt.Sprintf("%.1f", r.Pages), "n1", "finished"}
		if !hasFields(sum.String(), want) {
			t.Errorf("status summary lacks the site-wide row %q:\n%s", want, sum.String())
		}
	}
	if api := st.Site.Nodes[0].API; api == "" || !hasFields(sum.String(), []string{"n1", "(this", "node)", "true", "4", "4", api, "-"}) {
		t.Errorf("status summary lacks the site-wide node line of n1:\n%s", sum.String())
	}
	if getJSON(t, base+"/status?site=maybe", &st) == nil {
		t.Error("/status?site=maybe answered 200, want 400")
	}

	// The page.
	rows, err := eval[[]shardRow](b, readShards)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(sd.Rows) {
		t.Fatalf("the page shows %d shard rows, dashboard.json has %d: %+v", len(rows), len(sd.Rows), rows)
	}
	for i, r := range sd.Rows {
		got := rows[i]
		want := []string{strconv.Itoa(r.Shard), r.Leader, strings.Join(r.Replicas, ", "), fmt.Sprint(r.Frontier), fmt.Sprint(r.Fetched)}
		if got.Shard != strconv.Itoa(r.Shard) || got.Leader != "n1" || got.Under != "false" || len(got.Cells) != 7 || !slices.Equal(got.Cells[:5], want) {
			t.Errorf("row %d: %+v, want shard %d led by n1, not under-replicated, cells starting %q", i, got, r.Shard, want)
		}
	}
	nodes, err := eval[[]string](b, `Array.from(document.querySelectorAll('#shard-nodes tbody tr')).map(tr => Array.from(tr.cells).map(c => c.textContent).join('|'))`)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || !strings.HasPrefix(nodes[0], "n1 (this node)|") || !strings.HasSuffix(nodes[0], "|4|4|yes") {
		t.Errorf("nodes table %q, want n1, this node, leading and holding 4, alive", nodes)
	}
	hidden, err := eval[[]bool](b, `['shards-panel', 'shards-partial', 'rounds-panel', 'site-panel'].map(id => document.getElementById(id).hidden)`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hidden, []bool{false, true, false, false}) {
		t.Errorf("hidden shards panel, partial note, rounds panel, site-wide panel: %v, want false, true, false, false", hidden)
	}
	srows := pageSiteRows(t, b, 4)
	for i, r := range sv.Rows {
		got := srows[i]
		want := []string{strconv.Itoa(r.Shard), "n1", "n1", "–", fmt.Sprint(r.Frontier)}
		if got.Shard != strconv.Itoa(r.Shard) || got.Leader != "n1" || got.From != "n1" || got.NotAnswering != "" || len(got.Cells) != 8 ||
			!slices.Equal(got.Cells[:5], want) || got.Cells[6] != "n1" || got.Cells[7] != "finished" {
			t.Errorf("site-wide row %d on the page: %+v, want cells starting %q, from n1, finished", i, got, want)
		}
	}
	snodes, err := eval[[]string](b, readSiteNodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(snodes) != 1 || !strings.HasPrefix(snodes[0], "n1 (this node)|") || !strings.HasSuffix(snodes[0], "|4|4|yes") {
		t.Errorf("site-wide nodes table %q, want n1, this node, leading and holding 4, up", snodes)
	}
	b.screenshot(t, "dashboard-sharded")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("the page logged %d errors or warnings: %v", len(errs), errs)
	}

	s.Close()
	counts := shardCounts(t, cfg.Data)
	var rate float64
	var fetched uint64
	for i, r := range sd.Rows {
		if r.Shard != i {
			t.Errorf("row %d is shard %d", i, r.Shard)
			continue
		}
		if r.Leader != "n1" || !slices.Equal(r.Replicas, []string{"n1"}) || r.Want != 1 || r.UnderReplicated || len(r.Down) > 0 {
			t.Errorf("shard %d: leader %q, replicas %v (want %d), under-replicated %v, down %v; want n1 alone, 1, false", i, r.Leader, r.Replicas, r.Want, r.UnderReplicated, r.Down)
		}
		c, ok := counts[i]
		if !ok {
			t.Errorf("shard %d is not in the node's crawl database", i)
			continue
		}
		if r.URLs != c[0] || r.Frontier != c[1] || r.Fetched != c[2] {
			t.Errorf("shard %d: dashboard %d URLs, frontier %d, fetched %d; its crawl database %d, %d, %d", i, r.URLs, r.Frontier, r.Fetched, c[0], c[1], c[2])
		}
		if !r.Finished {
			t.Errorf("shard %d: not finished after the crawl ended", i)
		}
		if r.Pages < 0 {
			t.Errorf("shard %d: %v pages/s", i, r.Pages)
		}
		rate += r.Pages
		fetched += r.Fetched
	}
	if len(sd.Rows) != 4 || len(counts) != 4 {
		t.Errorf("%d rows, %d shards in the crawl database; want 4", len(sd.Rows), len(counts))
	}
	if fetched == 0 || rate <= 0 || sd.Window <= 0 {
		t.Errorf("after the crawl: %d pages fetched, %v pages/s over %vs", fetched, rate, sd.Window)
	}
	if len(sd.Nodes) != 1 {
		t.Fatalf("nodes %+v, want n1 alone", sd.Nodes)
	}
	n := sd.Nodes[0]
	if n.ID != "n1" || !n.Self || n.Led != 4 || n.Held != 4 || n.Alive == nil || !*n.Alive || n.API == "" || n.Raft == "" {
		t.Errorf("node %+v (alive %v): want n1, this node, leading and holding 4, alive, with its addresses", n, n.Alive)
	}
	t.Logf("%d pages fetched in 4 shards, %.1f pages/s over %.0fs", fetched, rate, sd.Window)
}

// hasFields reports whether a line of text has exactly these fields
// (separated by white space).
func hasFields(text string, fields []string) bool {
	for line := range strings.Lines(text) {
		if slices.Equal(strings.Fields(line), fields) {
			return true
		}
	}
	return false
}

// shardRow is a row of the page's shards table.
type shardRow struct {
	Shard  string   `json:"shard"`
	Leader string   `json:"leader"`
	Under  string   `json:"under"`
	Cells  []string `json:"cells"`
}

const readShards = `Array.from(document.querySelectorAll('#shards tbody tr')).map(tr => ({shard: tr.dataset.shard || '', leader: tr.dataset.leader || '', under: tr.dataset.under || '', cells: Array.from(tr.cells).map(c => c.textContent)}))`

// siteRow is a row of the page's site-wide shards table.
type siteRow struct {
	Shard        string   `json:"shard"`
	Leader       string   `json:"leader"`
	From         string   `json:"from"`
	NotAnswering string   `json:"not_answering"`
	Cells        []string `json:"cells"`
}

const (
	readSiteRows  = `Array.from(document.querySelectorAll('#site-shards tbody tr')).map(tr => ({shard: tr.dataset.shard || '', leader: tr.dataset.leader || '', from: tr.dataset.from || '', not_answering: tr.dataset.notAnswering || '', cells: Array.from(tr.cells).map(c => c.textContent)}))`
	readSiteNodes = `Array.from(document.querySelectorAll('#site-nodes tbody tr')).map(tr => Array.from(tr.cells).map(c => c.textContent).join('|'))`
)

// siteStatus is GET /status?site=1 of the node at base: its site-wide view.
func siteStatus(t *testing.T, base string) (*site.SiteView, error) {
	t.Helper()
	var st site.Status
	if err := getJSON(t, base+"/status?site=1", &st); err != nil {
		return nil, err
	}
	if st.Site == nil {
		return nil, fmt.Errorf("%s/status?site=1 has no site-wide view", base)
	}
	return st.Site, nil
}

// siteAgrees checks the site-wide view of the node at view against the
// nodes' own dashboards (nodes: ID → status base URL): a row per shard of
// the site, each the row of its leader (From), which that node's own
// dashboard row says it leads; nothing not answering; every node up.
func siteAgrees(t *testing.T, shards int, view string, nodes map[string]string) (*site.SiteView, error) {
	t.Helper()
	sv, err := siteStatus(t, view)
	if err != nil {
		return nil, err
	}
	own := map[string]map[int]site.DashShard{}
	for id, base := range nodes {
		var d site.Dashboard
		if err := getJSON(t, base+"/dashboard.json", &d); err != nil || d.Sharded == nil {
			return nil, fmt.Errorf("%s's dashboard: %v", id, err)
		}
		own[id] = map[int]site.DashShard{}
		for _, r := range d.Sharded.Rows {
			own[id][r.Shard] = r
		}
	}
	if len(sv.Rows) != shards || sv.Shards != shards || sv.NotAnswering != 0 {
		return sv, fmt.Errorf("%d rows of %d shards, %d not answering; want %d, none", len(sv.Rows), sv.Shards, sv.NotAnswering, shards)
	}
	for i, r := range sv.Rows {
		if r.Shard != i || r.Leader == "" || r.From != r.Leader || len(r.NotAnswering) > 0 {
			return sv, fmt.Errorf("row %d: shard %d led by %q from %q, not answering %v; want its leader's own row", i, r.Shard, r.Leader, r.From, r.NotAnswering)
		}
		if mine, ok := own[r.Leader][i]; !ok || mine.Leader != r.Leader {
			return sv, fmt.Errorf("shard %d: led by %s in the site-wide view, %s's own dashboard row %+v", i, r.Leader, r.Leader, mine)
		}
	}
	if len(sv.Nodes) != len(nodes) {
		return sv, fmt.Errorf("site-wide nodes %+v, want %d", sv.Nodes, len(nodes))
	}
	for _, n := range sv.Nodes {
		if !n.Up || n.Err != "" {
			return sv, fmt.Errorf("node %s not up in the site-wide view: %s", n.ID, n.Err)
		}
	}
	return sv, nil
}

// waitNil waits until f returns nil, at most d, and fails the test with
// f's last error if it does not.
func waitNil(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %v", d, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestShardedDashboardNodeDown: a sharded site of two nodes (4 shards,
// R = 2): once every shard has both replicas, n1's dashboard lists both
// nodes alive, holding four replicas each, the four leads between them,
// and its site-wide view lists the four shards, each from the node that
// leads it as that node's own dashboard says; once n2 has stopped, n1's
// site-wide view still answers, from n1's replicas, and names n2 not
// answering on every shard and down among the nodes; n1's dashboard shows
// n2 not alive and names it down on every shard's row, and `site status`
// on n1 says so per shard.
func TestShardedDashboardNodeDown(t *testing.T) {
	w := startMultiWeb(t, 6, 10, 2, 7)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg1 := nodeConfig(t, w, root, "n1", "")
	cfg1.Shards, cfg1.Replicas = 4, 2
	cfg1.HostDelay = 2 * time.Second // a crawl that lasts while the site grows
	n1, err := site.Start(ctx, cfg1, nil)
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, ctx, n1)
	n2, err := site.Start(ctx, nodeConfig(t, w, root, "n2", n1.Addr()), nil)
	if err != nil {
		t.Fatal(err)
	}
	stop2 := runNode(t, ctx, n2)
	base := "http://" + n1.Addr()
	dash := func() *site.DashSharded {
		var d site.Dashboard
		if err := getJSON(t, base+"/dashboard.json", &d); err != nil || d.Sharded == nil {
			return nil
		}
		return d.Sharded
	}
	var sd *site.DashSharded
	waitFor(t, 60*time.Second, "every shard on both nodes, led, both alive", func() bool {
		sd = dash()
		if sd == nil || len(sd.Rows) != 4 || len(sd.Nodes) != 2 {
			return false
		}
		for _, r := range sd.Rows {
			if len(r.Replicas) != 2 || r.Leader == "" || r.UnderReplicated {
				return false
			}
		}
		for _, n := range sd.Nodes {
			if n.Alive == nil || !*n.Alive {
				return false
			}
		}
		return true
	})
	if sd.Partial || sd.Nodes[0].ID != "n1" || sd.Nodes[1].ID != "n2" || sd.Nodes[0].Held != 4 || sd.Nodes[1].Held != 4 || sd.Nodes[0].Led+sd.Nodes[1].Led != 4 {
		t.Errorf("two nodes: partial %v, nodes %+v; want n1 and n2 holding 4 each, 4 leads between them", sd.Partial, sd.Nodes)
	}
	waitNil(t, 30*time.Second, "n1's site-wide view to list every shard from its leader", func() error {
		_, err := siteAgrees(t, 4, base, map[string]string{"n1": base, "n2": "http://" + n2.Addr()})
		return err
	})
	stop2()
	var sv *site.SiteView
	waitNil(t, 30*time.Second, "n1's site-wide view to name n2 not answering", func() error {
		var err error
		if sv, err = siteStatus(t, base); err != nil {
			return err
		}
		if len(sv.Rows) != 4 || len(sv.Nodes) != 2 || sv.Nodes[1].Up || sv.Nodes[1].Err == "" || !sv.Nodes[0].Up {
			return fmt.Errorf("rows %d, nodes %+v; want 4 rows, n1 up, n2 not", len(sv.Rows), sv.Nodes)
		}
		for _, r := range sv.Rows {
			if r.From != "n1" || !slices.Equal(r.NotAnswering, []string{"n2"}) {
				return fmt.Errorf("shard %d from %q, not answering %v; want from n1, n2 not answering", r.Shard, r.From, r.NotAnswering)
			}
		}
		return nil
	})
	start := time.Now()
	if _, err := siteStatus(t, base); err != nil {
		t.Fatal(err)
	}
	t.Logf("n1's site-wide view with n2 stopped: %v (n2: %s)", time.Since(start).Round(time.Millisecond), sv.Nodes[1].Err)
	waitFor(t, 60*time.Second, "n2 shown down on n1's dashboard", func() bool {
		sd = dash()
		if sd == nil || len(sd.Nodes) != 2 || sd.Nodes[1].Alive == nil || *sd.Nodes[1].Alive {
			return false
		}
		for _, r := range sd.Rows {
			if !slices.Contains(r.Down, "n2") {
				return false
			}
		}
		return true
	})
	if a := sd.Nodes[0].Alive; a == nil || !*a {
		t.Errorf("n1 not alive on its own dashboard: %+v", sd.Nodes[0])
	}
	var sum strings.Builder
	if err := n1.Status().WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(sum.String(), "silent: n2"); n != 4 {
		t.Errorf("status summary names n2 silent on %d shards, want 4:\n%s", n, sum.String())
	}
}

// runNode runs s until ctx ends or stop is called (stop also closes s;
// a second call does nothing); the test's cleanup stops it.
func runNode(t *testing.T, ctx context.Context, s *site.Site) (stop func()) {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx, nil); close(done) }() // owner: the test; ends with rctx
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done; s.Close() }) }
	t.Cleanup(stop)
	return stop
}

// TestShardedDashboardPartialInChromium: on a sharded site of two nodes
// with R = 1, each node holds half the shards: n1's dashboard.json says
// its view is partial (2 of 4 held), and its page shows the shards it
// holds, one row each, and says that the others are not shown there; n2,
// with no shard in common, is listed with its liveness unknown. n1's
// site-wide view (/status?site=1, the page's site-wide table) lists all
// four shards, each from the node that leads it as that node's own
// dashboard says, both nodes up. Once n2 has stopped, n1's site-wide view
// still answers: the two shards n2 led come from the meta group's records
// with n2 named not answering (in the summary of `site status` too, and on
// the page), n1's two from n1, n2 down.
func TestShardedDashboardPartialInChromium(t *testing.T) {
	w := startMultiWeb(t, 6, 10, 2, 7)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg1 := nodeConfig(t, w, root, "n1", "")
	cfg1.Shards, cfg1.Replicas = 4, 1
	cfg1.HostDelay = 2 * time.Second // a crawl that lasts while the site grows
	n1, err := site.Start(ctx, cfg1, nil)
	if err != nil {
		t.Fatal(err)
	}
	runNode(t, ctx, n1)
	n2, err := site.Start(ctx, nodeConfig(t, w, root, "n2", n1.Addr()), nil)
	if err != nil {
		t.Fatal(err)
	}
	stop2 := runNode(t, ctx, n2)
	base, base2 := "http://"+n1.Addr(), "http://"+n2.Addr()
	var d site.Dashboard
	waitFor(t, 60*time.Second, "n1 to hold two of the four shards", func() bool {
		d = site.Dashboard{}
		return getJSON(t, base+"/dashboard.json", &d) == nil && d.Sharded != nil && len(d.Sharded.Rows) == 2 && len(d.Sharded.Nodes) == 2
	})
	sd := d.Sharded
	if !sd.Partial || sd.Held != 2 || sd.Shards != 4 {
		t.Errorf("n1 holding 2 of 4 shards: partial %v, held %d of %d", sd.Partial, sd.Held, sd.Shards)
	}
	if n := sd.Nodes[1]; n.ID != "n2" || n.Alive != nil || n.Held != 0 || n.Led != 0 {
		t.Errorf("n2 as n1 sees it: %+v (alive %v), want no lead or replica among n1's shards, liveness unknown", n, n.Alive)
	}
	// The site-wide view, once every shard is where the placement wants
	// it (one voter, no learner, its placed leader).
	var sv *site.SiteView
	waitNil(t, 30*time.Second, "n1's site-wide view to list every shard from its leader, placed", func() error {
		var err error
		if sv, err = siteAgrees(t, 4, base, map[string]string{"n1": base, "n2": base2}); err != nil {
			return err
		}
		led := map[string]int{}
		for _, r := range sv.Rows {
			if len(r.Replicas) != 1 || len(r.Learners) > 0 || r.Leader != r.TargetLeader || !slices.Equal(r.Target, r.Replicas) {
				return fmt.Errorf("shard %d not placed: %+v", r.Shard, r.ShardStatus)
			}
			led[r.Leader]++
		}
		if led["n1"] != 2 || led["n2"] != 2 {
			return fmt.Errorf("leads %v, want two each", led)
		}
		return nil
	})
	b := startBrowser(t)
	if err := b.do(60*time.Second, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	waitFor(t, 20*time.Second, "two dashboard updates", func() bool { return b.polls() >= 2 })
	rows, err := eval[[]shardRow](b, readShards)
	if err != nil {
		t.Fatal(err)
	}
	note, err := eval[string](b, `(() => { const e = document.getElementById('shards-partial'); return e.hidden ? '' : e.textContent; })()`)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Leader != "n1" || rows[1].Leader != "n1" {
		t.Errorf("the page's shard rows %+v, want the two n1 holds, led by n1", rows)
	}
	if !strings.Contains(note, "Partial view") || !strings.Contains(note, "2 of the site's 4 shards") {
		t.Errorf("the page's partial-view note %q", note)
	}
	alive, err := eval[[]string](b, `Array.from(document.querySelectorAll('#shard-nodes tbody tr')).map(tr => tr.cells[4].textContent)`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(alive, []string{"yes", "?"}) {
		t.Errorf("the page's nodes alive %q, want yes for n1 and ? for n2", alive)
	}
	srows := pageSiteRows(t, b, 4)
	for i, r := range sv.Rows {
		if got := srows[i]; got.Shard != strconv.Itoa(i) || got.Leader != r.Leader || got.From != r.Leader || got.NotAnswering != "" {
			t.Errorf("site-wide row %d on the page: %+v, want led by and from %s", i, got, r.Leader)
		}
	}

	// n2 stops: its shards are not answering; n1's still are.
	n2led := map[int]bool{}
	for _, r := range sv.Rows {
		n2led[r.Shard] = r.Leader == "n2"
	}
	stop2()
	var st site.Status
	waitNil(t, 30*time.Second, "n1's site-wide view to name n2's shards not answering", func() error {
		st = site.Status{}
		if err := getJSON(t, base+"/status?site=1", &st); err != nil {
			return err
		}
		v := st.Site
		if v == nil || len(v.Rows) != 4 || v.NotAnswering != 2 || len(v.Nodes) != 2 || v.Nodes[1].Up || !v.Nodes[0].Up {
			return fmt.Errorf("site-wide view %+v; want 4 rows, 2 not answering, n1 up, n2 not", v)
		}
		for _, r := range v.Rows {
			switch {
			case n2led[r.Shard] && (r.From != "" || r.Leader != "" || !slices.Equal(r.NotAnswering, []string{"n2"})):
				return fmt.Errorf("n2's shard %d: from %q, leader %q, not answering %v; want from the records, n2 not answering", r.Shard, r.From, r.Leader, r.NotAnswering)
			case !n2led[r.Shard] && (r.From != "n1" || r.Leader != "n1" || len(r.NotAnswering) > 0):
				return fmt.Errorf("n1's shard %d: from %q, leader %q, not answering %v; want n1's own row", r.Shard, r.From, r.Leader, r.NotAnswering)
			}
		}
		return nil
	})
	var sum strings.Builder
	if err := st.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(sum.String(), "NOT ANSWERING: n2"); n != 2 || !strings.Contains(sum.String(), "gathered by n1 from 1 of 2 nodes (n2 not answering within 1s); 2 with no answering replica\n") {
		t.Errorf("status summary names n2 not answering on %d shards, want 2, and the site-wide line:\n%s", n, sum.String())
	}
	waitNil(t, 20*time.Second, "the page to show n2's shards not answering", func() error {
		srows, err := eval[[]siteRow](b, readSiteRows)
		if err != nil {
			return err
		}
		if len(srows) != 4 {
			return fmt.Errorf("%d site-wide rows on the page", len(srows))
		}
		for i, r := range srows {
			if n2led[i] != (r.NotAnswering == "n2" && r.From == "") {
				return fmt.Errorf("site-wide row %d on the page: %+v (n2 led it: %v)", i, r, n2led[i])
			}
		}
		up, err := eval[[]string](b, `Array.from(document.querySelectorAll('#site-nodes tbody tr')).map(tr => tr.cells[4].textContent)`)
		if err != nil {
			return err
		}
		if !slices.Equal(up, []string{"yes", "no"}) {
			return fmt.Errorf("the page's site-wide nodes up %q, want yes, no", up)
		}
		return nil
	})
	b.screenshot(t, "dashboard-sharded-node-down")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("the page logged %d errors or warnings: %v", len(errs), errs)
	}
}

// pageSiteRows reads the page's site-wide table, which must have want
// rows.
func pageSiteRows(t *testing.T, b *browser, want int) []siteRow {
	t.Helper()
	srows, err := eval[[]siteRow](b, readSiteRows)
	if err != nil {
		t.Fatal(err)
	}
	if len(srows) != want {
		t.Fatalf("the page's site-wide table has %d rows, want %d: %+v", len(srows), want, srows)
	}
	return srows
}

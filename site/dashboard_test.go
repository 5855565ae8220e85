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
// stays within its bounds, and the page logs no error. A screenshot is
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

	ls := readRounds(t, cfg.Data)
	if len(ls) < 2 {
		t.Fatalf("%d rounds: too few to check a timeline", len(ls))
	}
	var want []string
	for _, r := range ls[max(0, len(ls)-60):] {
		for _, ph := range []string{"generate", "fetch", "update"} {
			want = append(want, fmt.Sprintf("%d/%s", r.Round, ph))
		}
	}
	got, err := eval[[]string](b, `Array.from(document.querySelectorAll('rect.phase')).map(r => r.dataset.round + '/' + r.dataset.phase)`)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("timeline bars %v, want one per phase of the finished rounds %v", got, want)
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
	t.Logf("dashboard.json: %d bytes", len(raw))
	b.screenshot(t, "dashboard")
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

// TestShardedDashboard: a one-node sharded site's dashboard.json has one
// row per shard, each led by the node on its one replica (not
// under-replicated: R = 1), the node in the nodes' list leading and
// holding all four, and, once the crawl has ended, each row's URLs,
// frontier and fetched pages are what the shard's crawl database holds,
// record by record, read offline after the node stopped; the shards'
// pages/s, over a window that covers the crawl, add up to a rate above 0.
// `site status`'s summary has the same shards, each on its own line.
func TestShardedDashboard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, cfg, ran := startShardedNode(t, ctx)
	base := "http://" + s.Addr()
	var d site.Dashboard
	waitFor(t, 30*time.Second, "the dashboard to show four shards", func() bool {
		d = site.Dashboard{}
		return getJSON(t, base+"/dashboard.json", &d) == nil && d.Sharded != nil && len(d.Sharded.Rows) == 4
	})
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the crawl did not end")
	}
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

// shardRow is a row of the page's shards table.
type shardRow struct {
	Shard  string   `json:"shard"`
	Leader string   `json:"leader"`
	Under  string   `json:"under"`
	Cells  []string `json:"cells"`
}

const readShards = `Array.from(document.querySelectorAll('#shards tbody tr')).map(tr => ({shard: tr.dataset.shard || '', leader: tr.dataset.leader || '', under: tr.dataset.under || '', cells: Array.from(tr.cells).map(c => c.textContent)}))`

// TestShardedDashboardInChromium opens a one-node sharded site's dashboard
// in headless chromium: once the crawl has ended, its shards table has one
// row per shard of dashboard.json, in order, each with the shard's leader,
// replicas, frontier and fetched pages as the JSON has them; the nodes
// table lists the node; no partial-view note (the node holds every shard);
// the rounds timeline is hidden (each shard runs its own rounds); and the
// page logs no error. A screenshot is saved among the test's artifacts.
func TestShardedDashboardInChromium(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, _, ran := startShardedNode(t, ctx)
	base := "http://" + s.Addr()
	b := startBrowser(t)
	if err := b.do(60*time.Second, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the crawl did not end")
	}
	p := b.polls()
	waitFor(t, 20*time.Second, "two more dashboard updates", func() bool { return b.polls() >= p+2 })
	var d site.Dashboard
	if err := getJSON(t, base+"/dashboard.json", &d); err != nil {
		t.Fatal(err)
	}
	if d.Sharded == nil || len(d.Sharded.Rows) != 4 {
		t.Fatalf("dashboard.json's shards: %+v, want 4 rows", d.Sharded)
	}
	rows, err := eval[[]shardRow](b, readShards)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(d.Sharded.Rows) {
		t.Fatalf("the page shows %d shard rows, dashboard.json has %d: %+v", len(rows), len(d.Sharded.Rows), rows)
	}
	for i, r := range d.Sharded.Rows {
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
	hidden, err := eval[[]bool](b, `['shards-panel', 'shards-partial', 'rounds-panel'].map(id => document.getElementById(id).hidden)`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hidden, []bool{false, true, true}) {
		t.Errorf("hidden shards panel, partial note, rounds panel: %v, want false, true, true", hidden)
	}
	b.screenshot(t, "dashboard-sharded")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("the page logged %d errors or warnings: %v", len(errs), errs)
	}
}

// TestShardedDashboardNodeDown: a sharded site of two nodes (4 shards,
// R = 2): once every shard has both replicas, n1's dashboard lists both
// nodes alive, holding four replicas each, the four leads between them;
// once n2 has stopped, n1's dashboard shows it not alive and names it
// down on every shard's row, and `site status` on n1 says so per shard.
func TestShardedDashboardNodeDown(t *testing.T) {
	w := startMultiWeb(t, 6, 10, 2, 7)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg1 := nodeConfig(t, w, root, "n1", "")
	cfg1.Shards, cfg1.Replicas = 4, 2
	cfg1.HostDelay = 2 * time.Second // a crawl that lasts while the site grows
	run := func(s *site.Site) (stop func()) {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { s.Run(rctx, nil); close(done) }() // owner: the test; ends with rctx
		var once sync.Once
		stop = func() { once.Do(func() { cancel(); <-done; s.Close() }) }
		t.Cleanup(stop)
		return stop
	}
	n1, err := site.Start(ctx, cfg1, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(n1)
	n2, err := site.Start(ctx, nodeConfig(t, w, root, "n2", n1.Addr()), nil)
	if err != nil {
		t.Fatal(err)
	}
	stop2 := run(n2)
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
	stop2()
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

// TestShardedDashboardPartialInChromium: on a sharded site of two nodes
// with R = 1, each node holds half the shards: n1's dashboard.json says
// its view is partial (2 of 4 held), and its page shows the shards it
// holds, one row each, and says that the others are not shown; n2, with
// no shard in common, is listed with its liveness unknown.
func TestShardedDashboardPartialInChromium(t *testing.T) {
	w := startMultiWeb(t, 6, 10, 2, 7)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg1 := nodeConfig(t, w, root, "n1", "")
	cfg1.Shards, cfg1.Replicas = 4, 1
	cfg1.HostDelay = 2 * time.Second // a crawl that lasts while the site grows
	run := func(s *site.Site) {
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { s.Run(rctx, nil); close(done) }() // owner: the test; ends with rctx
		t.Cleanup(func() { stop(); <-done; s.Close() })
	}
	n1, err := site.Start(ctx, cfg1, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(n1)
	n2, err := site.Start(ctx, nodeConfig(t, w, root, "n2", n1.Addr()), nil)
	if err != nil {
		t.Fatal(err)
	}
	run(n2)
	base := "http://" + n1.Addr()
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
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("the page logged %d errors or warnings: %v", len(errs), errs)
	}
}

package site_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/shard"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// multiWeb is a websim for a site of several nodes: it runs in the test
// (so it outlives any node), with a seeds file of every front page.
type multiWeb struct {
	sim   *websim.Server
	seeds string
	truth string
	certs string // the deployment's certificates: every node runs with mutual TLS
}

func startMultiWeb(t *testing.T, hosts, pages, ips int, seed uint64) *multiWeb {
	t.Helper()
	dir := t.TempDir()
	truth := filepath.Join(dir, "truth.jsonl")
	sim, err := websim.Start(websim.Options{Web: synth.Options{Hosts: hosts, Pages: pages, Seed: seed, IPs: ips, Profile: synth.Realistic},
		DNSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", TruthPath: truth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	var b strings.Builder
	for h := range sim.Web().Hosts() {
		b.WriteString(sim.Web().FrontURL(h) + "\n")
	}
	seeds := filepath.Join(dir, "seeds.txt")
	if err := os.WriteFile(seeds, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cd := filepath.Join(dir, "certs")
	if err := certs.Init(cd); err != nil {
		t.Fatal(err)
	}
	return &multiWeb{sim: sim, seeds: seeds, truth: truth, certs: cd}
}

// nodeConfig is the configuration of node name of a test site crawling w.
func nodeConfig(t *testing.T, w *multiWeb, root, name, join string) site.Config {
	cfg := site.DefaultConfig()
	cfg.Region = "eu"
	cfg.Node = name
	cfg.Data = filepath.Join(root, name)
	cfg.Join = join
	cfg.Websim = "off"
	if join == "" {
		cfg.Seeds = w.seeds
	}
	cfg.DNS, cfg.AllowPrivate = w.sim.DNSAddr(), true
	cfg.HostDelay, cfg.IPDelay, cfg.MaxCrawlDelay = 60*time.Millisecond, 10*time.Millisecond, 150*time.Millisecond
	cfg.Listen = "127.0.0.1:0"
	cfg.Width, cfg.PerHost, cfg.Workers = 300, 4, 8
	cfg.Progress = 0
	cfg.Timeout = 3 * time.Second
	cfg.Backoff, cfg.BackoffMax = 200*time.Millisecond, 2*time.Second
	cfg.FailTimeout = 1500 * time.Millisecond
	cfg.CheckCash = true
	// A site of 4 shards (R = 3), as testConfig's; a joining node takes
	// its site's.
	if join == "" {
		cfg.Shards = 4
	}
	if w.certs != "" {
		cfg.Certs = w.certs
		issueNodeCert(w.certs, cfg.Region, name)
	}
	return cfg
}

// nodeAPIClient is a client of the site's node APIs with node's
// certificate (issued if needed) from w's deployment.
func nodeAPIClient(t *testing.T, w *multiWeb, region, node string) *http.Client {
	t.Helper()
	issueNodeCert(w.certs, region, node)
	return nodeClientFrom(t, w.certs, region, node)
}

// nodeClientFrom is a client of region's node APIs with node's certificate
// from dir.
func nodeClientFrom(t *testing.T, dir, region, node string) *http.Client {
	t.Helper()
	tl, err := certs.LoadNode(dir, region, node)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tl.Client(certs.AllowNodesOf(region))}}
}

// issueNodeCert makes node's certificate in dir unless it has one.
func issueNodeCert(dir, region, node string) {
	if err := certs.IssueNode(dir, region, node); err != nil && !errors.Is(err, certs.ErrExists) {
		panic(fmt.Sprintf("certificate of node %s/%s: %v", region, node, err))
	}
}

// kill is a node SIGKILLed at a time. A leader killed with rounds in
// flight may have retired one of them and died before writing its line in
// rounds.jsonl (the statistics follow the retirement and the cash check's
// scan): those rounds, and the ones it had retired without a line when it
// was last seen, may be missing there.
type kill struct {
	node   string
	at     time.Time
	rounds []uint64
}

// checkMultiCrawl checks a finished crawl of w by the nodes in dirs:
// coverage, robots, politeness in websim's statistics, URLs fetched twice
// (only those a killed node had fetched and not yet staged when it was
// killed: within rounds' stage interval, 2 s, before the kill), and OPIC's
// invariant after every round and at the end.
func checkMultiCrawl(t *testing.T, w *multiWeb, cfg site.Config, dirs []string, kills []kill) {
	t.Helper()
	rep, err := crawlcheck.CheckData(context.Background(), dirs[0], w.truth)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("coverage %d/%d = %.4f; Spearman %.3f", rep.Coverage.Covered, rep.Coverage.Targets, rep.Coverage.Ratio, rep.Ranking.Spearman)
	if rep.Coverage.Ratio < 0.99 || rep.Coverage.Targets < 100 {
		t.Errorf("coverage %.4f of %d targets; missing e.g. %v", rep.Coverage.Ratio, rep.Coverage.Targets, rep.Coverage.Missing)
	}
	if rep.Coverage.Disallow != 0 {
		t.Errorf("%d robots-disallowed URLs fetched", rep.Coverage.Disallow)
	}
	snap := w.sim.Stats().Snapshot()
	breaches := crawlcheck.Politeness(snap, cfg.HostDelay, cfg.IPDelay, crawlDelays(w.sim.Web(), cfg.MaxCrawlDelay))
	if len(breaches) > 0 {
		t.Errorf("politeness breaches across the nodes: %v", breaches)
	}
	// Every node's WARC files, together.
	byURL, responses := warcPages(t, dirs)
	for i, d := range dirs {
		if responses[i] == 0 {
			t.Errorf("node %s wrote no WARC responses", filepath.Base(d))
		}
	}
	// For a breach, which nodes fetched the host, what and when (WARC
	// dates are to the second).
	for _, b := range breaches {
		host, _, _ := strings.Cut(strings.TrimPrefix(b, "host "), ":")
		for _, d := range dirs {
			recs, _ := crawlcheck.ResponseRecords(filepath.Join(d, "warc"))
			for _, r := range recs {
				if strings.Contains(r.URL, "//"+host+":") {
					t.Logf("  %s %s %d %s", r.Date.Format(time.TimeOnly), r.File, r.Status, r.URL)
				}
			}
		}
	}
	twice, excused := 0, 0
	for u, fs := range byURL {
		if len(fs) < 2 {
			continue
		}
		twice++
		sort.Slice(fs, func(i, j int) bool { return fs[i].Date.Before(fs[j].Date) })
		first := fs[0]
		ok := false
		for _, k := range kills {
			if strings.HasPrefix(first.File, "meridian-"+k.node+"-") && !first.Date.Before(k.at.Add(-4*time.Second)) && !first.Date.After(k.at.Add(time.Second)) {
				ok = true
			}
		}
		if ok {
			excused++
		} else if twice-excused <= 5 {
			t.Errorf("%s fetched %d times (first %s by %s), not by a node killed within its stage interval", u, len(fs), first.Date.Format(time.TimeOnly), first.File)
		}
	}
	t.Logf("%d URLs fetched twice with 2xx across the nodes, %d of them first by a node killed before it staged them", twice, excused)
	// OPIC's invariant after every round of every shard, on whichever
	// node led it; every shard's rounds, each on some node.
	seen := map[string]map[uint64]bool{} // shard → rounds
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "shards", "*", "stats", "rounds.jsonl"))
		for _, f := range files {
			sh := filepath.Base(filepath.Dir(filepath.Dir(f)))
			if seen[sh] == nil {
				seen[sh] = map[uint64]bool{}
			}
			for _, l := range readRoundsFile(t, f) {
				seen[sh][l.Round] = true
				if l.Unanswered > 0 {
					t.Errorf("shard %s round %d (led by %s): %d URLs without a result at its update", sh, l.Round, l.Leader, l.Unanswered)
				}
				if l.CashError == nil {
					t.Errorf("shard %s round %d (led by %s): no cash check", sh, l.Round, l.Leader)
				} else if math.Abs(*l.CashError) > 1e-9 {
					t.Errorf("shard %s round %d (led by %s): cash off by %g of what was injected", sh, l.Round, l.Leader, *l.CashError)
				}
			}
		}
	}
	if len(seen) != cfg.Shards {
		t.Errorf("rounds of %d shards in the nodes' statistics, want %d", len(seen), cfg.Shards)
	}
	excusedRounds := map[uint64]bool{}
	for _, k := range kills {
		for _, r := range k.rounds {
			excusedRounds[r] = true
		}
	}
	for sh, rs := range seen {
		last := uint64(0)
		for r := range rs {
			last = max(last, r)
		}
		for r := uint64(1); r <= last; r++ {
			if !rs[r] && !excusedRounds[r] {
				t.Errorf("shard %s: round %d is in no node's rounds.jsonl (rounds %v)", sh, r, keys(rs))
			}
		}
	}
	// Every shard's crawl ended exhausted.
	sh, err := store.OpenShared(filepath.Join(dirs[0], "crawldb", "store"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	for g := range seen {
		st, err := sh.Store(g)
		if err != nil {
			t.Fatal(err)
		}
		state, err := rounds.ReadState(st)
		if err != nil {
			t.Fatal(err)
		}
		if state.Finished == nil || state.Finished.Reason != "exhausted" {
			t.Errorf("shard %s's state does not say its crawl is exhausted: %+v", g, state.Finished)
		}
	}
}

// warcPages reads the WARC files of the nodes whose data directories are
// dirs: the pages fetched with 2xx, by URL, and how many responses each
// node wrote (responses[i] is dirs[i]'s). robots.txt and sitemaps are not
// pages here: a node taking over from one that died fetches them again on
// purpose (its sitemaps' URLs may not have been kept).
func warcPages(t *testing.T, dirs []string) (pages map[string][]crawlcheck.Fetch, responses []int) {
	t.Helper()
	pages = map[string][]crawlcheck.Fetch{}
	for _, d := range dirs {
		recs, err := crawlcheck.ResponseRecords(filepath.Join(d, "warc"))
		if err != nil {
			t.Fatal(err)
		}
		responses = append(responses, len(recs))
		for _, r := range recs {
			if r.Status >= 200 && r.Status < 300 && !strings.HasSuffix(r.URL, "/robots.txt") && !strings.Contains(r.URL, "/sitemap") {
				pages[r.URL] = append(pages[r.URL], r)
			}
		}
	}
	return pages, responses
}

func keys(m map[uint64]bool) []uint64 {
	var out []uint64
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestNodesLeaveAndStop crawls with three nodes in this process (4
// shards, R = 3): one leaves the site mid-crawl, a follower of the meta
// group and then its leader are stopped (as by SIGTERM) and started again. Nothing is lost: the crawl ends with full
// coverage, no URL fetched twice and no politeness breach.
func TestNodesLeaveAndStop(t *testing.T) {
	w := startMultiWeb(t, 50, 12, 6, 21)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logs []*os.File
	defer func() {
		for _, f := range logs {
			f.Close()
		}
		if t.Failed() {
			for _, name := range []string{"n1", "n2", "n3"} {
				logEvents(t, name, filepath.Join(root, name+".log"))
			}
		}
	}()
	start := func(cfg site.Config) *runningSite {
		t.Helper()
		lf, err := os.OpenFile(filepath.Join(root, cfg.Node+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, lf)
		s, err := site.Start(ctx, cfg, slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo})))
		if err != nil {
			t.Fatalf("start %s: %v", cfg.Node, err)
		}
		return runStarted(ctx, s)
	}
	cfg1 := nodeConfig(t, w, root, "n1", "")
	n1 := start(cfg1)
	n2 := start(nodeConfig(t, w, root, "n2", n1.s.Addr()))
	cfg3 := nodeConfig(t, w, root, "n3", n1.s.Addr())
	n3 := start(cfg3)

	// Wait until n2 and n3 lead shards and n2 has fetched some (every
	// node must have written WARC records), then take n2 out of the site.
	waitFor(t, 60*time.Second, "n2 and n3 to lead shards, n2 to fetch", func() bool {
		return led(n2.s, "n2") > 0 && led(n3.s, "n3") > 0 && n2.s.Status().Fetcher.Done > 0
	})
	resp, err := nodeAPIClient(t, w, "eu", "n2").Post("https://"+n2.s.APIAddr()+"/site/leave", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("leave: %s", resp.Status)
	}
	select {
	case err := <-n2.done:
		if err != nil {
			t.Fatalf("n2 leaving: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("n2 did not leave")
	}
	in, err := site.ReadInfo(filepath.Join(root, "n2"))
	if err != nil || !in.Left {
		t.Fatalf("n2's site.json after leaving: %+v, %v", in, err)
	}
	if _, err := site.Start(ctx, nodeConfig(t, w, root, "n2", ""), nil); !errors.Is(err, site.ErrLeft) {
		t.Errorf("starting a node that left: %v, want ErrLeft", err)
	}

	// Stop n3 (as SIGTERM does) while it leads shards, and start it again.
	waitFor(t, 60*time.Second, "n3 to lead shards", func() bool { return led(n3.s, "n3") > 0 })
	n3.stop()
	if err := <-n3.done; err != nil {
		t.Fatalf("n3 stopping: %v", err)
	}
	cfg3.Join = "" // it has its state: it restarts as a member
	n3 = start(cfg3)

	// Stop the meta group's leader the same way, while it leads shards
	// (with n2 gone, n3 alone is no quorum of the groups until n1 is
	// back).
	waitFor(t, 60*time.Second, "n1 to lead the site and shards", func() bool {
		return n1.s.DB().IsLeader() && led(n1.s, "n1") > 0
	})
	n1.stop()
	if err := <-n1.done; err != nil {
		t.Fatalf("n1 stopping: %v", err)
	}
	cfg1.Seeds = "" // seeded already
	n1 = start(cfg1)

	for _, r := range []*runningSite{n1, n3} {
		select {
		case err := <-r.done:
			if err != nil {
				t.Fatalf("%s: %v", r.s.Node(), err)
			}
		case <-ctx.Done():
			t.Fatal("the crawl did not end")
		}
	}
	checkMultiCrawl(t, w, cfg1, []string{filepath.Join(root, "n1"), filepath.Join(root, "n2"), filepath.Join(root, "n3")}, nil)
}

// TestJoinRefused: a join to no site, a data directory of another region
// and a node name the site has are refused with a clear error, and leave
// nothing behind.
func TestJoinRefused(t *testing.T) {
	w := startMultiWeb(t, 4, 3, 2, 3)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n1, err := site.Start(ctx, nodeConfig(t, w, root, "n1", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()

	// Nobody listens at this address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	// A data directory of region "us".
	usDir := filepath.Join(root, "us-node")
	if err := os.MkdirAll(usDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(usDir, "site.json"), []byte(`{"region":"us","node":"u1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cfg  func() site.Config
		want error
		msg  string
	}{
		{"no site at the address", func() site.Config { return nodeConfig(t, w, root, "x1", dead) }, site.ErrNoSite, "no Meridian site answers"},
		{"another region's data directory", func() site.Config {
			c := nodeConfig(t, w, root, "u1", n1.Addr())
			c.Data = usDir
			return c
		}, site.ErrWrongSite, `region "us", not "eu"`},
		{"a site of another region", func() site.Config {
			c := nodeConfig(t, w, root, "x2", n1.Addr())
			c.Region = "us"
			return c
		}, site.ErrWrongSite, `is region "eu", not "us"`},
		{"a name the site has", func() site.Config {
			c := nodeConfig(t, w, root, "n1", n1.Addr())
			c.Data = filepath.Join(root, "another-n1")
			return c
		}, site.ErrWrongSite, `already has a node named "n1"`},
		{"--replicas other than the site's", func() site.Config {
			c := nodeConfig(t, w, root, "x3", n1.Addr())
			c.Replicas = 1
			return c
		}, site.ErrWrongSite, "has --replicas 3, not 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg()
			before := listDir(t, cfg.Data)
			s, err := site.Start(ctx, cfg, nil)
			if err == nil {
				s.Close()
				t.Fatal("started")
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q, want %v with %q", err, c.want, c.msg)
			}
			if after := listDir(t, cfg.Data); after != before {
				t.Fatalf("the data directory changed: %q → %q", before, after)
			}
		})
	}
	// The site still has its one node, and its name was not taken over.
	m, err := n1.DB().Members()
	if err != nil || len(m) != 1 || m["n1"] == "" {
		t.Fatalf("members after the refused joins: %v, %v", m, err)
	}
	n1.Close()
	// --replicas alone creates a site of the default shard count.
	cfg := nodeConfig(t, w, root, "r1", "")
	cfg.Shards, cfg.Replicas = 0, 1
	s, err := site.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := s.Status().Sharding; st == nil || st.Shards != shard.DefaultShards || st.Replicas != 1 {
		t.Errorf("a new site with --replicas 1: sharding %+v, want %d shards of 1 replica", st, shard.DefaultShards)
	}
}

func listDir(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			names = append(names, fmt.Sprintf("%s:%d", p, info.Size()))
		}
		return nil
	})
	return strings.Join(names, ",")
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logEvents logs the events of a node's log file that matter for a
// failure: parts taken, moved or given away, leadership, pauses, warnings
// and errors (the last 300).
func logEvents(t *testing.T, name, path string) {
	b, _ := os.ReadFile(path)
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, k := range []string{"took part", "moved", "given to another", "leading", "lost", "paused", "resumed", "again", "level=WARN", "level=ERROR", "site: up", "federation", "shardset"} {
			if strings.Contains(l, k) {
				keep = append(keep, l)
				break
			}
		}
	}
	if len(keep) > 300 {
		keep = keep[len(keep)-300:]
	}
	t.Logf("--- %s's log (events):\n%s", name, strings.Join(keep, "\n"))
}

// TestNodesExpected: a node started with --expect-nodes 2 fetches nothing
// until a second node has joined and the shards are placed on both, and
// then both share the crawl, which ends as TestNodesLeaveAndStop's does
// (coverage, politeness, every page once, cash conserved every round).
func TestNodesExpected(t *testing.T) {
	w := startMultiWeb(t, 30, 6, 6, 41)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg1 := nodeConfig(t, w, root, "n1", "")
	cfg1.ExpectNodes = 2
	n1 := runSite(t, ctx, cfg1)
	defer n1.stop()
	waitFor(t, 30*time.Second, "n1 to lead every shard", func() bool { return led(n1.s, "n1") == 4 })
	// Long enough for a leader that does not wait to start its first
	// round and its robots.txt requests (stepTick is 100 ms).
	time.Sleep(1500 * time.Millisecond)
	if got := w.sim.Stats().Snapshot().Requests; got != 0 {
		t.Fatalf("websim saw %d requests before the second node joined, want 0", got)
	}
	n2 := runSite(t, ctx, nodeConfig(t, w, root, "n2", n1.s.Addr()))
	defer n2.stop()
	for _, r := range []*runningSite{n1, n2} {
		r.wait(t, ctx)
	}
	checkMultiCrawl(t, w, cfg1, []string{cfg1.Data, filepath.Join(root, "n2")}, nil)
}

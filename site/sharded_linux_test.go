//go:build linux

package site_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/site"
)

// TestShardedNodesKilled: a sharded site (4 shards, R = 3) of three nodes,
// each its own process on real TCP with mutual TLS, crawls a realistic
// web. A follower of the site's meta group, then its leader (the node
// that places the shards), each leading shards, is SIGKILLed mid-crawl:
// the survivors lead every shard again within Raft's election time and go
// on; the node restarts on its data and takes its replicas back. Every node
// exits 0 at the end, with coverage ≥ 99%, no politeness breach in
// websim's statistics (host and address, across nodes), the cash check
// holding after every round of every shard, and URLs fetched twice only
// among those the killed node fetched in its last seconds or had in
// flight (every node's WARC files).
func TestShardedNodesKilled(t *testing.T) {
	w := startMultiWeb(t, 60, 16, 6, 41)
	root := t.TempDir()
	cfg1 := nodeConfig(t, w, root, "n1", "")
	cfg1.Shards, cfg1.Replicas = 4, 3
	nodes := startNodes(t, w, root, cfg1, nil)
	shardsOf := func(n *node) []site.Status {
		st, ok := n.status(t)
		if !ok {
			return nil
		}
		return []site.Status{st}
	}
	// Every shard on three replicas, and the crawl under way.
	waitFor(t, 90*time.Second, "every shard on three replicas and pages fetched", func() bool {
		full := map[int]bool{}
		var done int64
		for _, n := range nodes {
			for _, st := range shardsOf(n) {
				done += st.Fetcher.Done
				for _, sh := range st.Shards {
					if len(sh.Replicas) == 3 {
						full[sh.Shard] = true
					}
				}
			}
		}
		return len(full) == 4 && done > 100
	})
	grownAt := time.Now()
	// First a follower of the meta group, then its leader (the node that
	// places the shards): each the node of its role leading the most
	// shards, SIGKILLed with its shards' rounds in flight.
	type killed struct {
		node string
		at   time.Time
	}
	var kills []killed
	for _, role := range []string{"follower", "leader"} {
		victim, most := "", -1
		waitFor(t, 60*time.Second, "a "+role+" of the meta group leading shards", func() bool {
			for name, n := range nodes {
				st, ok := n.status(t)
				if !ok || st.Role != role {
					continue
				}
				led := 0
				for _, sh := range st.Shards {
					if sh.Leader == name {
						led++
					}
				}
				if led > most {
					victim, most = name, led
				}
			}
			return most > 0
		})
		killedAt := time.Now()
		nodes[victim].kill(t)
		kills = append(kills, killed{victim, killedAt})
		waitFor(t, 30*time.Second, "every shard led by a survivor", func() bool {
			led := map[int]bool{}
			for name, n := range nodes {
				if name == victim {
					continue
				}
				for _, st := range shardsOf(n) {
					for _, sh := range st.Shards {
						if sh.Leader != "" && sh.Leader != victim {
							led[sh.Shard] = true
						}
					}
				}
			}
			return len(led) == 4
		})
		t.Logf("%s, the meta group's %s leading %d shards, SIGKILLed; every shard led again %v later", victim, role, most, time.Since(killedAt).Round(10*time.Millisecond))
		cfg := nodes[victim].cfg
		cfg.Join = ""
		nodes[victim] = startNode(t, cfg)
		waitFor(t, 60*time.Second, victim+" to hold replicas again", func() bool {
			for _, st := range shardsOf(nodes[victim]) {
				return len(st.Shards) > 0
			}
			return false
		})
	}
	waitNodesEnd(t, nodes)

	// Coverage, on a node that holds every shard.
	var dirs []string
	for _, name := range []string{"n1", "n2", "n3"} {
		dirs = append(dirs, filepath.Join(root, name))
	}
	var rep crawlcheck.Report
	best := -1.0
	for _, d := range dirs {
		r, err := crawlcheck.CheckData(context.Background(), d, w.truth)
		if err != nil {
			t.Fatal(err)
		}
		if r.Coverage.Ratio > best {
			rep, best = r, r.Coverage.Ratio
		}
	}
	t.Logf("coverage %d/%d = %.4f; Spearman %.3f", rep.Coverage.Covered, rep.Coverage.Targets, rep.Coverage.Ratio, rep.Ranking.Spearman)
	if rep.Coverage.Ratio < 0.99 || rep.Coverage.Targets < 100 {
		t.Errorf("coverage %.4f of %d targets; missing e.g. %v", rep.Coverage.Ratio, rep.Coverage.Targets, rep.Coverage.Missing)
	}
	breaches := crawlcheck.Politeness(w.sim.Stats().Snapshot(), cfg1.HostDelay, cfg1.IPDelay, crawlDelays(w.sim.Web(), cfg1.MaxCrawlDelay))
	if len(breaches) > 0 {
		t.Errorf("politeness breaches across the nodes: %v", breaches)
	}
	// Fetched twice: only what the killed node fetched in its last seconds.
	byURL, _ := warcPages(t, dirs)
	// While the site grows, a shard's leadership moves to each node that
	// joins, sometimes twice in a second (n1 → n2 → n1): no page may be
	// fetched again for it (a hand-over keeps the fetcher paused, a deposed
	// leader stages everything it holds). Counted apart from the kill.
	twice, growing := 0, 0
	for u, fs := range byURL {
		if len(fs) < 2 {
			continue
		}
		twice++
		sort.Slice(fs, func(i, j int) bool { return fs[i].Date.Before(fs[j].Date) })
		first := fs[0]
		byKilled := false
		for _, k := range kills {
			byKilled = byKilled || strings.HasPrefix(first.File, "meridian-"+k.node+"-") && !first.Date.Before(k.at.Add(-4*time.Second)) && !first.Date.After(k.at.Add(time.Second))
		}
		switch {
		case byKilled:
		case first.Date.Before(grownAt.Add(time.Second)):
			growing++
			t.Logf("fetched %d times while the site grew: %s (first %s by %s)", len(fs), u, first.Date.Format(time.TimeOnly), first.File)
		default:
			t.Errorf("%s fetched %d times (first %s by %s), not by a killed node in its last seconds", u, len(fs), first.Date.Format(time.TimeOnly), first.File)
		}
	}
	if growing > 0 {
		t.Errorf("%d URLs fetched twice while the site grew, none expected", growing)
	}
	// The cash after every round of every shard, on whichever node led it.
	checks := 0
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "shards", "*", "stats", "rounds.jsonl"))
		for _, f := range files {
			for _, l := range readRoundsFile(t, f) {
				if l.CashError == nil {
					t.Errorf("%s round %d: no cash check", f, l.Round)
					continue
				}
				checks++
				if math.Abs(*l.CashError) > 1e-9 {
					t.Errorf("%s round %d: cash off by %g", f, l.Round, *l.CashError)
				}
			}
		}
	}
	if checks == 0 {
		t.Error("no round's cash was checked")
	}
	t.Logf("%d URLs fetched twice (%d while the site grew); %d rounds' cash checked", twice, growing, checks)
}

// TestShardedJoin: a sharded site of one node (R = 2) shows its shards as
// under-replicated in /status and /metrics; a node joining with another
// --replicas is refused with the site's value and leaves nothing behind;
// one joining without --replicas takes the site's, and the shards then
// have two replicas each.
func TestShardedJoin(t *testing.T) {
	w := startMultiWeb(t, 6, 10, 2, 7)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg1 := nodeConfig(t, w, root, "n1", "")
	cfg1.Shards, cfg1.Replicas = 4, 2
	cfg1.HostDelay = 2 * time.Second // a crawl that lasts while the site grows
	run := func(s *site.Site) {
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { s.Run(rctx, nil); close(done) }()
		t.Cleanup(func() { stop(); <-done; s.Close() })
	}
	n1, err := site.Start(ctx, cfg1, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(n1)
	under := func(s *site.Site) int {
		n := 0
		for _, sh := range s.Status().Shards {
			if sh.UnderReplicated {
				n++
			}
		}
		return n
	}
	waitFor(t, 30*time.Second, "n1 to hold the four shards", func() bool { return len(n1.Status().Shards) == 4 })
	if u := under(n1); u != 0 {
		t.Errorf("%d shards under-replicated on a site of one node (R = 2 allows 1 replica)", u)
	}
	// Another --replicas is refused, with the site's value.
	bad := nodeConfig(t, w, root, "n2", n1.Addr())
	bad.Replicas = 3
	_, err = site.Start(ctx, bad, nil)
	if !errors.Is(err, site.ErrWrongSite) || !strings.Contains(err.Error(), "--replicas 2, not 3") {
		t.Fatalf("join with --replicas 3: %v, want ErrWrongSite naming the site's --replicas 2", err)
	}
	if _, err := os.Stat(bad.Data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused join left %s behind: %v", bad.Data, err)
	}
	// Without --replicas: the site's.
	good := nodeConfig(t, w, root, "n2", n1.Addr())
	n2, err := site.Start(ctx, good, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(n2)
	if st := n2.Status().Sharding; st == nil || st.Replicas != 2 || st.Shards != 4 {
		t.Fatalf("n2's sharding settings %+v, want 4 shards of 2 replicas", st)
	}
	waitFor(t, 60*time.Second, "every shard on two replicas", func() bool {
		two := 0
		for _, sh := range n2.Status().Shards {
			if len(sh.Replicas) == 2 {
				two++
			}
		}
		return two == 4
	})
	// The metrics name the shards held.
	var body strings.Builder
	resp, err := http.Get("http://" + n2.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(&body, resp.Body)
	resp.Body.Close()
	for _, want := range []string{"meridian_shards_held 4", "meridian_shards_under_replicated 0"} {
		if !strings.Contains(body.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

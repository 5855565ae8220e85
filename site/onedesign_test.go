package site_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/shard"
	"github.com/meridian-crawler/meridian/site"
)

// TestOneCommandSiteIsSharded: the site `site up` starts with no flags is
// a sharded site on one node (its /status lists shard.DefaultShards
// shards, all led here); a second node joins it with --join alone, takes
// shards and fetches; `site leave` gives them back; the crawl ends
// exhausted with its coverage and every shard's cash after every round.
func TestOneCommandSiteIsSharded(t *testing.T) {
	w := startMultiWeb(t, 24, 10, 4, 36)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg1 := nodeConfig(t, w, root, "n1", "")
	cfg1.Shards = 0                         // the one-command site's
	cfg1.HostDelay = 400 * time.Millisecond // a crawl that lasts while n2 joins and leaves
	n1 := runSite(t, ctx, cfg1)
	defer n1.stop()
	var st site.Status
	if err := getJSON(t, "http://"+n1.s.Addr()+"/status", &st); err != nil {
		t.Fatal(err)
	}
	if st.Sharding == nil || st.Sharding.Shards != shard.DefaultShards || st.Sharding.Replicas != site.DefaultReplicas {
		t.Fatalf("the one-command site's /status sharding %+v, want %d shards of R = %d", st.Sharding, shard.DefaultShards, site.DefaultReplicas)
	}
	waitFor(t, 30*time.Second, "n1 to lead every shard", func() bool { return led(n1.s, "n1") == shard.DefaultShards })

	n2 := runSite(t, ctx, nodeConfig(t, w, root, "n2", n1.s.Addr()))
	defer n2.stop()
	waitFor(t, 90*time.Second, "n2 to lead shards and fetch", func() bool {
		return led(n2.s, "n2") > 0 && n2.s.Status().Fetcher.Done > 0
	})
	t.Logf("n2 leads %d shards, fetched %d", led(n2.s, "n2"), n2.s.Status().Fetcher.Done)
	if err := n2.s.Leave(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-n2.done:
		if err != nil {
			t.Fatalf("n2 leaving: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("n2 did not leave")
	}
	if in, err := site.ReadInfo(filepath.Join(root, "n2")); err != nil || !in.Left {
		t.Fatalf("n2's site.json after leaving: %+v, %v", in, err)
	}
	// Every shard back on n1 alone.
	waitFor(t, 60*time.Second, "n1 to hold and lead every shard alone", func() bool {
		shards := n1.s.Status().Shards
		if len(shards) != shard.DefaultShards {
			return false
		}
		for _, sh := range shards {
			if sh.Leader != "n1" || !slices.Equal(sh.Replicas, []string{"n1"}) {
				return false
			}
		}
		return true
	})
	n1.wait(t, ctx)

	rep, err := crawlcheck.CheckData(context.Background(), cfg1.Data, w.truth)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Coverage.Ratio < 0.99 || rep.Coverage.Targets < 100 {
		t.Errorf("coverage %.4f of %d targets; missing e.g. %v", rep.Coverage.Ratio, rep.Coverage.Targets, rep.Coverage.Missing)
	}
	if p := crawlcheck.Politeness(w.sim.Stats().Snapshot(), cfg1.HostDelay, cfg1.IPDelay, crawlDelays(w.sim.Web(), cfg1.MaxCrawlDelay)); len(p) > 0 {
		t.Errorf("politeness breaches across the nodes: %v", p)
	}
	checks := 0
	for _, d := range []string{cfg1.Data, filepath.Join(root, "n2")} {
		files, _ := filepath.Glob(filepath.Join(d, "shards", "*", "stats", "rounds.jsonl"))
		for _, f := range files {
			for _, l := range readRoundsFile(t, f) {
				switch {
				case l.CashError == nil:
					t.Errorf("%s round %d: no cash check", f, l.Round)
				case math.Abs(*l.CashError) > 1e-9:
					t.Errorf("%s round %d: cash off by %g", f, l.Round, *l.CashError)
				default:
					checks++
				}
			}
		}
	}
	if checks == 0 {
		t.Error("no shard round's cash was checked")
	}
	byURL, responses := warcPages(t, []string{cfg1.Data, filepath.Join(root, "n2")})
	if responses[1] == 0 {
		t.Error("n2 wrote no WARC responses")
	}
	for u, fs := range byURL {
		if len(fs) > 1 {
			t.Errorf("%s fetched %d times with 2xx", u, len(fs))
		}
	}
}

// led counts the shards s's /status says node leads.
func led(s *site.Site, node string) int {
	n := 0
	for _, sh := range s.Status().Shards {
		if sh.Leader == node {
			n++
		}
	}
	return n
}

// TestRestartRefusesAnotherWeb: a data directory holds the crawl of one
// web. Restarting it on a websim of another spec, or on a websim when it
// crawled seeds, would add another web's hosts under the same names: it is
// refused with ErrWrongSite and the data left as it was; the same websim
// resumes.
func TestRestartRefusesAnotherWeb(t *testing.T) {
	cfg := testConfig(t, "clean")
	cfg.WebsimHosts, cfg.WebsimPages = 8, 3
	cfg.Rounds, cfg.Shards = 1, 2
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(cfg site.Config) error {
		s, err := site.Start(ctx, cfg, nil)
		if err != nil {
			return err
		}
		defer s.Close()
		return s.Run(ctx, nil)
	}
	if err := run(cfg); err != nil {
		t.Fatal(err)
	}
	in, err := site.ReadInfo(cfg.Data)
	if err != nil || in.Web == nil || *in.Web != *site.WebsimSpecOf(cfg) {
		t.Fatalf("site.json records web %+v (err %v), want %+v", in.Web, err, site.WebsimSpecOf(cfg))
	}
	other := cfg
	other.WebsimSeed++
	if err := run(other); !errors.Is(err, site.ErrWrongSite) {
		t.Fatalf("restart on another websim seed: %v, want ErrWrongSite", err)
	}
	if err := run(cfg); err != nil { // the same web resumes
		t.Fatalf("restart on the same websim: %v", err)
	}
	// As a crawl of seeds records it: no websim.
	in, _ = site.ReadInfo(cfg.Data)
	in.Websim, in.Web = "", nil
	b, _ := json.Marshal(in)
	if err := os.WriteFile(site.InfoPath(cfg.Data), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(cfg); !errors.Is(err, site.ErrWrongSite) {
		t.Fatalf("a websim on a crawl of seeds: %v, want ErrWrongSite", err)
	}
}

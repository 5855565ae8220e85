package shardset

import (
	"context"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/rounds"
)

// TestTwoShardsWideUpdates: one node, a site of two shards, rounds wide
// enough that an update sends over a thousand URLs to the other shard
// (here ~1,250: entries cut by URL count alone came to ~82 KB, more than
// the store takes in one, and stopped both shards' crawls at round 2 with
// a crawler failing again at every restart: issue 36). The site crawls to
// exhaustion with no crawler failing, every page once and every check of
// TestOneNodeShards.
func TestTwoShardsWideUpdates(t *testing.T) {
	w := startWeb(t, 2000, 4)
	w.width = 8000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := startNode(t, ctx, w, t.TempDir(), "n1", &Settings{Shards: 2, Replicas: 1, Creator: "n1"}, nil)
	if err := n.run(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the site's crawl did not end")
	}
	if r := n.set.Restarts(); r != 0 {
		t.Errorf("%d shard crawlers failed and started again, want none", r)
	}
	for sh := range 2 {
		if s := n.set.replica(sh).crawler().Status(); s.Finished == nil || s.Finished.Reason != rounds.EndExhausted {
			t.Errorf("shard %d: finished %+v, want exhausted", sh, s.Finished)
		}
	}
	n.mu.Lock()
	most := 0
	for _, st := range n.stats {
		most = max(most, st.RemoteURLs)
	}
	n.mu.Unlock()
	if most < 1000 {
		t.Errorf("at most %d URLs sent to the other shard in one update, want ≥ 1,000 (the test's point)", most)
	}
	urls, batches, twice, checks := checkSite(t, ctx, w, n, 2, 0)
	t.Logf("%d URL records in 2 shards, %d batches between them, at most %d URLs to the other shard in one update; %d pages fetched twice; %d cash checks",
		urls, batches, most, twice, checks)
}

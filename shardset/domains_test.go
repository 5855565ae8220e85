package shardset

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
)

// TestDomainSharesOnMeta: the shards of a site share a domain's budget
// through records in a real meta group: a shard reads its implicit share,
// asks for more when at it, the others see the want and yield what they do
// not use, and the asker's next ask takes it; concurrent asks and yields
// of every shard (their guards refusing one another's stale writes) never
// give out more than the budget.
func TestDomainSharesOnMeta(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := crawldb.OpenHost(ctx, crawldb.HostOptions{Dir: filepath.Join(t.TempDir(), "crawldb"), NodeID: "n1", RaftAddr: "127.0.0.1:0", FastTimeouts: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	meta, err := h.Group(ctx, crawldb.GroupOptions{ID: MetaGroup, Bootstrap: []crawldb.Member{{ID: "n1", RaftAddr: h.RaftAddr()}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := meta.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	const shards, budget, dom = 4, 100, "spam.test"
	ds := make([]*domainShares, shards)
	for i := range ds {
		ds[i] = newDomainShares(meta, i, shards)
	}
	if err := ds[0].Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if c, full, err := ds[0].Share(dom, budget); err != nil || c != 25 || full {
		t.Fatalf("no record: cap %d full %v (%v), want 25 and not full", c, full, err)
	}
	if err := ds[0].Ask(ctx, budget, []string{dom}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < shards; i++ {
		w, err := ds[i].Wanted()
		if err != nil || len(w) != 1 || w[0] != dom {
			t.Fatalf("shard %d sees wanted %v (%v), want [%s]", i, w, err, dom)
		}
		if err := ds[i].Yield(ctx, budget, map[string]int64{dom: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ds[0].Ask(ctx, budget, []string{dom}); err != nil {
		t.Fatal(err)
	}
	c, full, err := ds[0].Share(dom, budget)
	if err != nil || c != budget-(1+2+3) || !full {
		t.Fatalf("after the yields: shard 0's cap %d full %v (%v), want %d and full", c, full, err, budget-6)
	}

	// Every shard at once, many times: the caps never sum over the budget.
	var wg sync.WaitGroup
	for i := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 10 {
				var err error
				if (i+k)%2 == 0 {
					err = ds[i].Ask(ctx, budget, []string{dom})
				} else {
					err = ds[i].Yield(ctx, budget, map[string]int64{dom: int64(i)})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	sh, _, err := ds[0].read(dom)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for i := range shards {
		sum += sh.Cap(i, budget, shards)
		if sh.Cap(i, budget, shards) < int64(i) && i > 0 {
			t.Errorf("shard %d's cap %d below its usage %d", i, sh.Cap(i, budget, shards), i)
		}
	}
	if sum > budget {
		t.Errorf("the caps sum to %d over the budget %d: %+v", sum, budget, sh)
	}
	t.Logf("after concurrent asks and yields: %+v", sh)
}

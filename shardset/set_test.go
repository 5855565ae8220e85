package shardset

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/route"
	"github.com/meridian-crawler/meridian/shard"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testNode is one node of a sharded test site.
type testNode struct {
	host  *crawldb.Host
	meta  *crawldb.DB
	set   *Set
	fetch *fetcher.Fetcher
	mu    sync.Mutex
	stats []rounds.RoundStats
}

// testWeb is a websim web and what the tests need of it.
type testWeb struct {
	sim       *websim.Server
	res       *dnscache.Resolver
	seeds     []string
	reachable int
}

func startWeb(t *testing.T, hosts, pages int) *testWeb {
	t.Helper()
	sim, err := websim.Start(websim.Options{Web: synth.Options{Hosts: hosts, Pages: pages, Seed: 21, IPs: 8, Profile: synth.Clean}, DNSAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.Stats().CountURLs()
	res, err := dnscache.New(dnscache.Options{Server: sim.DNSAddr()})
	if err != nil {
		t.Fatal(err)
	}
	w := &testWeb{sim: sim, res: res}
	if err := sim.Web().Truth(func(r *synth.Record) error {
		if r.Reachable && r.Status == 200 {
			w.reachable++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for h := range sim.Web().Hosts() {
		w.seeds = append(w.seeds, sim.Web().FrontURL(h))
	}
	return w
}

// locate is the politeness key of a host of the test web.
func (w *testWeb) locate(ctx context.Context, host string) string {
	ips, _, _ := w.res.Lookup(ctx, host)
	return partition.Key(host, ips)
}

// startNode opens a node's Host and meta group (bootstrapping the site
// when create) and its Set and fetcher.
func startNode(t *testing.T, ctx context.Context, w *testWeb, dir, id string, create *Settings) *testNode {
	t.Helper()
	h, err := crawldb.OpenHost(ctx, crawldb.HostOptions{Dir: filepath.Join(dir, "crawldb"), NodeID: id, RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", FastTimeouts: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	g := crawldb.GroupOptions{ID: MetaGroup}
	if create != nil {
		g.Bootstrap = []crawldb.Member{{ID: id, RaftAddr: h.RaftAddr(), APIAddr: h.APIAddr()}}
	}
	meta, err := h.Group(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if err := meta.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	if create != nil {
		if err := Create(ctx, meta, *create); err != nil {
			t.Fatal(err)
		}
	}
	n := &testNode{host: h, meta: meta}
	n.set, err = New(Options{Host: h, Meta: meta, Dir: dir, Locate: w.locate,
		Crawler: func(sh int) rounds.Options {
			return rounds.Options{Width: 400, PerHost: 5, HostDelay: 20 * time.Millisecond, CheckCash: true, FailTimeout: time.Second,
				OnRound: func(st rounds.RoundStats) { n.mu.Lock(); n.stats = append(n.stats, st); n.mu.Unlock() }}
		},
		Router: func(sh int, db *crawldb.DB) (route.Router, error) { return n.set.NewRouter(sh, db), nil },
		Seeds: func(ctx context.Context, sh int) ([]string, error) {
			var out []string
			for _, u := range w.seeds {
				if shard.Of(w.locate(ctx, crawl.HostOf(u)), n.set.Settings().Shards) == sh {
					out = append(out, u)
				}
			}
			return out, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.fetch, err = fetcher.New(fetcher.Options{
		Workers: 16, HostDelay: 20 * time.Millisecond, MaxCrawlDelay: 50 * time.Millisecond, AllowPrivate: true,
		TotalTimeout: 2 * time.Second, BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		Resolver: w.res, Hosts: n.set.Hosts(), Seen: n.set.Seen, OnResult: n.set.OnResult, Skip: n.set.Skip,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.set.Attach(n.fetch)
	return n
}

// run runs the node's fetcher and Set until the Set returns.
func (n *testNode) run(ctx context.Context) error {
	fctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.fetch.Run(fctx) }()
	err := n.set.Run(ctx)
	stop()
	<-done
	return err
}

// TestOneNodeShards: one node, a site of four shards of one replica,
// crawls a web to exhaustion. Every reachable page is fetched once, every
// URL record is in the shard that owns its host, every round's cash check
// holds in its shard, and the site's cash (summed over the shards) is what
// the seeds injected: the cash that crossed between shards arrived.
func TestOneNodeShards(t *testing.T) {
	w := startWeb(t, 40, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	n := startNode(t, ctx, w, dir, "n1", &Settings{Shards: 4, Replicas: 1, Creator: "n1"})
	if err := n.run(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the site's crawl did not end")
	}
	reqs := w.sim.Stats().URLRequests()
	twice := 0
	for u, c := range reqs {
		if c > 1 && !strings.HasSuffix(u, "/robots.txt") {
			twice++
			t.Errorf("fetched %d times: %s", c, u)
		}
	}
	if len(reqs) < w.reachable {
		t.Errorf("%d of %d reachable pages fetched", len(reqs), w.reachable)
	}
	for h, v := range w.sim.Stats().Snapshot().Hosts {
		if v.MaxConcurrent > 1 {
			t.Errorf("host %s: %d requests at once", h, v.MaxConcurrent)
		}
	}
	n.mu.Lock()
	checks := 0
	for _, st := range n.stats {
		if st.CashError != nil {
			checks++
			if math.Abs(*st.CashError) > 1e-9 {
				t.Errorf("round %d: cash error %g", st.Round, *st.CashError)
			}
		}
	}
	n.mu.Unlock()
	if checks == 0 {
		t.Error("no round checked its cash")
	}
	// Every URL in the shard of its host; the site's cash is the seeds'.
	var cash opic.Sum
	var injected float64
	urls := 0
	for sh := range 4 {
		db := n.host.Lookup(GroupID(sh))
		if db == nil {
			t.Fatalf("shard %d not open", sh)
		}
		if err := db.Store().ScanURLs(func(r store.URLRecord) error {
			urls++
			cash.Add(r.Cash)
			if got := shard.Of(w.locate(ctx, crawl.HostOf(r.URL)), 4); got != sh {
				t.Errorf("%s in shard %d, its host's shard is %d", r.URL, sh, got)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		c := n.set.replica(sh)
		if c == nil {
			t.Fatalf("shard %d has no crawler", sh)
		}
		s := c.c.Status()
		cash.Add(s.Virtual)
		injected += s.Injected
		if s.Finished == nil || s.Finished.Reason != rounds.EndExhausted {
			t.Errorf("shard %d: finished %+v, want exhausted", sh, s.Finished)
		}
	}
	if off := (cash.Value() - injected) / injected; math.Abs(off) > 1e-9 {
		t.Errorf("site's cash %g, injected %g: off by %g", cash.Value(), injected, off)
	}
	var batches uint64
	for sh := range 4 {
		_, _, b, err := federation.InboundTotals(n.host.Lookup(GroupID(sh)).Store())
		if err != nil {
			t.Fatal(err)
		}
		batches += b
	}
	if batches == 0 {
		t.Error("no batch crossed between shards: the test exercises no routing")
	}
	if d := n.set.Dropped(); d != 0 {
		t.Errorf("%d fetcher results of shards not open", d)
	}
	t.Logf("%d URL records in 4 shards, %d batches between them; %d of %d reachable pages fetched, %d twice; %d cash checks", urls, batches, len(reqs), w.reachable, twice, checks)
}

package rounds

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// soloNode is one voter of a three-voter crawl database with its own Solo
// crawler and fetcher.
type soloNode struct {
	id     string
	db     *crawldb.DB
	c      *Crawler
	f      *fetcher.Fetcher
	cancel context.CancelFunc
	done   chan error
	pages  atomic.Int64 // page results this node's fetcher delivered
	mu     sync.Mutex
	at     map[string]time.Time // when each page's result arrived, by URL
}

// TestSoloFollowsLeader: a crawl database of three voters, a Solo crawler
// on each (a shard's group: the rounds run where the leader is). Only the
// leader fetches; when it dies mid-crawl, a new leader continues the
// crawl to its end from the staged results, no host is ever fetched by
// two nodes at once, the cash is conserved after every round, and the
// URLs fetched twice are at most those the dead node fetched in its last
// staging interval or had in flight.
func TestSoloFollowsLeader(t *testing.T) {
	sim, err := websim.Start(websim.Options{Web: synth.Options{Hosts: 60, Pages: 15, Seed: 11, IPs: 4, Profile: synth.Clean}, DNSAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	sim.Stats().CountURLs()
	var seeds []string
	reachable := 0
	if err := sim.Web().Truth(func(r *synth.Record) error {
		if r.Reachable && r.Status == 200 {
			reachable++
		}
		if r.Reachable && r.Status == 200 && strings.HasSuffix(r.URL, "/") {
			seeds = append(seeds, r.URL)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const workers, stageEvery = 8, 300 * time.Millisecond
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var nodes []*soloNode
	var cashErrs []float64
	var cashMu sync.Mutex
	for i := 1; i <= 3; i++ {
		id, join := fmt.Sprintf("n%d", i), ""
		if i > 1 {
			join = nodes[0].db.APIAddr()
		}
		db, err := crawldb.Open(ctx, crawldb.Options{Dir: filepath.Join(root, id, "crawldb"), NodeID: id, RaftAddr: "127.0.0.1:0",
			APIAddr: "127.0.0.1:0", Join: join, FastTimeouts: true, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		n := &soloNode{id: id, db: db, done: make(chan error, 1), at: map[string]time.Time{}}
		nodes = append(nodes, n)
		t.Cleanup(func() { db.Close() })
	}
	for _, n := range nodes {
		c, err := New(Options{DB: n.db, Dir: filepath.Join(root, n.id), NodeID: n.id, Width: 400, PerHost: 4,
			HostDelay: 30 * time.Millisecond, Solo: true, Fence: 400 * time.Millisecond, StageEvery: stageEvery,
			FailTimeout: time.Second, Seeds: seeds, CheckCash: true,
			OnRound: func(s RoundStats) {
				if s.CashError != nil {
					cashMu.Lock()
					cashErrs = append(cashErrs, *s.CashError)
					cashMu.Unlock()
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		n.c = c
		t.Cleanup(func() { c.Close() })
		n.f, err = fetcher.New(fetcher.Options{
			Workers: workers, HostDelay: 30 * time.Millisecond, MaxCrawlDelay: 50 * time.Millisecond, AllowPrivate: true,
			TotalTimeout: 2 * time.Second, BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
			Resolver: mustResolver(t, sim.DNSAddr()), Hosts: c.Hosts(), Seen: c.Seen, Skip: c.Skip(),
			OnResult: func(r *fetcher.Result) {
				if r.Kind == fetcher.KindPage {
					n.pages.Add(1)
					n.mu.Lock()
					n.at[r.URL] = time.Now()
					n.mu.Unlock()
				}
				c.OnResult(r)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		rctx, stop := context.WithCancel(ctx)
		n.cancel = stop
		go func() { // owner: the test; ends with rctx
			fdone := make(chan error, 1)
			fctx, fstop := context.WithCancel(context.Background())
			go func() { fdone <- n.f.Run(fctx) }()
			err := n.c.Run(rctx, n.f, 0)
			fstop()
			<-fdone
			n.done <- err
		}()
	}
	leaderNode := func() *soloNode {
		for _, n := range nodes {
			if n.db.IsLeader() {
				return n
			}
		}
		return nil
	}
	// Phase 1: until a third of the reachable pages are fetched, only the
	// leader fetches.
	var first *soloNode
	for deadline := time.Now().Add(time.Minute); ; {
		if time.Now().After(deadline) {
			t.Fatal("a third of the web not fetched within a minute")
		}
		first = leaderNode()
		if first != nil && first.pages.Load() >= int64(reachable/3) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, n := range nodes {
		if n != first && n.pages.Load() != 0 {
			t.Errorf("%s fetched %d pages while %s led: only the leader of a Solo crawl fetches", n.id, n.pages.Load(), first.id)
		}
	}
	// The leader dies: its crawler, fetcher and crawl database stop.
	killedAt := time.Now()
	first.cancel()
	first.db.Close()
	if err := <-first.done; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, crawldb.ErrClosed) {
		t.Logf("killed leader's run: %v", err)
	}
	first.mu.Lock()
	lost := 0 // results of its last staging interval (and a margin), which no replica may have
	for _, at := range first.at {
		if killedAt.Sub(at) <= 2*stageEvery {
			lost++
		}
	}
	firstAt := first.at
	first.mu.Unlock()
	// Phase 2: the others crawl to the end.
	for _, n := range nodes {
		if n == first {
			continue
		}
		select {
		case err := <-n.done:
			if err != nil && !errors.Is(err, ErrExhausted) {
				t.Errorf("%s: %v", n.id, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s did not end: %v", n.id, ctx.Err())
		}
	}
	second := 0
	for _, n := range nodes {
		if n != first {
			second += int(n.pages.Load())
		}
	}
	if second == 0 {
		t.Fatal("no survivor fetched after the leader died")
	}
	// A page fetched twice must be one the dead leader fetched in its last
	// staging interval (its result may not have reached a replica), or
	// one it had in flight (no result): never one whose result was staged.
	reqs := sim.Stats().URLRequests()
	twice, inFlight := 0, 0
	for u, c := range reqs {
		if c < 2 || strings.HasSuffix(u, "/robots.txt") { // a new leader reads robots.txt again (FreshRobots)
			continue
		}
		twice++
		at, ok := firstAt[u]
		switch {
		case !ok:
			inFlight++
		case killedAt.Sub(at) > 2*stageEvery:
			t.Errorf("%s fetched %d times: the dead leader had its result %v before it died (staged every %v)", u, c, killedAt.Sub(at).Round(time.Millisecond), stageEvery)
		}
	}
	if inFlight > workers {
		t.Errorf("%d pages fetched twice that the dead leader had no result of; bound: %d workers in flight", inFlight, workers)
	}
	if len(reqs) < reachable*99/100 {
		t.Errorf("%d of %d reachable pages fetched", len(reqs), reachable)
	}
	snap := sim.Stats().Snapshot()
	for h, v := range snap.Hosts {
		if v.MaxConcurrent > 1 {
			t.Errorf("host %s: %d requests at once", h, v.MaxConcurrent)
		}
		// Request starts are at least the host delay apart, across the
		// leaders too (websim stamps a start when it reads the request:
		// a few ms of scheduling noise are allowed).
		if v.MinIntervalMS != nil && *v.MinIntervalMS < 30-5 {
			t.Errorf("host %s: two requests %.1f ms apart (host delay 30 ms)", h, *v.MinIntervalMS)
		}
	}
	cashMu.Lock()
	defer cashMu.Unlock()
	if len(cashErrs) == 0 {
		t.Fatal("no round checked its cash")
	}
	for i, e := range cashErrs {
		if math.Abs(e) > 1e-9 {
			t.Errorf("round check %d: cash error %g of the injected cash", i+1, e)
		}
	}
	t.Logf("leader %s fetched %d pages before it died (%d in its last %v), the others %d; %d of %d reachable fetched, %d pages twice (%d without a result on the dead leader), %d cash checks",
		first.id, first.pages.Load(), lost, 2*stageEvery, second, len(reqs), reachable, twice, inFlight, len(cashErrs))
}

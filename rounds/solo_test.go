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
	pages  atomic.Int64 // page requests this node's fetcher made (results not answered without one)
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
	sim, seeds, reachable := startSoloWeb(t, synth.Options{Hosts: 60, Pages: 15, Seed: 11, IPs: 4, Profile: synth.Clean})
	const workers, stageEvery = 8, 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var cashErrs []float64
	var cashMu sync.Mutex
	nodes := startSoloGroup(ctx, t, sim, 3, workers, func(o *Options) {
		o.Fence, o.StageEvery, o.Seeds = 400*time.Millisecond, stageEvery, seeds
		o.OnRound = func(s RoundStats) {
			if s.CashError != nil {
				cashMu.Lock()
				cashErrs = append(cashErrs, *s.CashError)
				cashMu.Unlock()
			}
		}
	})
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
	checkCashErrs(t, cashErrs)
	t.Logf("leader %s fetched %d pages before it died (%d in its last %v), the others %d; %d of %d reachable fetched, %d pages twice (%d without a result on the dead leader), %d cash checks",
		first.id, first.pages.Load(), lost, 2*stageEvery, second, len(reqs), reachable, twice, inFlight, len(cashErrs))
}

// startSoloGroup opens a crawl database of k voters (n1 bootstraps it and
// leads, the others join) on real TCP, a Solo crawler on each (Width 400,
// PerHost 4, a 30 ms host delay, cash checked after every round; set
// changes the rest) with its own fetcher of workers on sim, and runs them
// until ctx ends or their crawl does (each node's done).
func startSoloGroup(ctx context.Context, t *testing.T, sim *websim.Server, k, workers int, set func(*Options)) []*soloNode {
	t.Helper()
	root := t.TempDir()
	var nodes []*soloNode
	for i := 1; i <= k; i++ {
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
		o := Options{DB: n.db, Dir: filepath.Join(root, n.id), NodeID: n.id, Width: 400, PerHost: 4,
			HostDelay: 30 * time.Millisecond, Solo: true, FailTimeout: time.Second, CheckCash: true}
		set(&o)
		c, err := New(o)
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
				if r.Kind == fetcher.KindPage && !r.NoRequest {
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
		go func() { // owner: the test; ends with rctx or the crawl
			fdone := make(chan error, 1)
			fctx, fstop := context.WithCancel(context.Background())
			go func() { fdone <- n.f.Run(fctx) }() // owner: this goroutine, which stops it
			err := n.c.Run(rctx, n.f, 0)
			fstop()
			<-fdone
			n.done <- err
		}()
	}
	return nodes
}

// TestSoloLeaderMoves: a Solo group's leadership moves while it crawls,
// and no page is fetched twice, the cash is conserved after every round,
// and the crawl reaches the whole web. Its results are staged only every
// 10 s, so what a leader that stops leading still holds must be staged
// then, not left to the next leader to fetch again:
//   - quick hand-back: n1 → n2 → n1 in quick succession, as a sharded
//     site's placement does while nodes join. n2 hands its leadership back
//     as soon as it leads, before its node side has resumed its fetcher (a
//     Solo follower is paused), while its leader side moves n1's parts to
//     it and generates. The hand-over must keep n2's fetcher paused until
//     the transfer returns: a page n2 fetched after it staged its results
//     was lost and fetched again by n1 (a sharded site fetched a part
//     twice this way). The transfer waits, bounded, for n2 to fetch: a
//     transfer slowed as under load.
//   - lost: n1 loses its leadership without a hand-over (a transfer that
//     does not call HandOver, as an election under load would): it stages
//     what it holds at once, and n2 moves n1's parts only after the fence
//     and n1's release, so that they are staged first.
//   - lost, staged late: the same, but n1 stages only well after the
//     fence (a node starved of CPU); n2 waits for its release.
func TestSoloLeaderMoves(t *testing.T) {
	transferTo := func(from, to *soloNode) func(context.Context) error {
		return func(ctx context.Context) error { return from.db.TransferLeadershipTo(ctx, to.id) }
	}
	waitLeads := func(t *testing.T, n *soloNode) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !n.db.IsLeader(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not lead 10 s after the transfer to it", n.id)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, tc := range []struct {
		name string
		// move moves the leadership away from n1, which leads and
		// fetches; it returns the pages n2 fetched while it handed over.
		move func(ctx context.Context, t *testing.T, n1, n2 *soloNode) (during int64)
		// released: n1, deposed, writes its release marker (a hand-over
		// has it stage before the transfer instead).
		released bool
	}{
		{"quick hand-back", func(ctx context.Context, t *testing.T, n1, n2 *soloNode) int64 {
			if err := n1.c.HandOver(ctx, n1.f, transferTo(n1, n2)); err != nil {
				t.Fatalf("n1 → n2: %v", err)
			}
			waitLeads(t, n2)
			before := n2.pages.Load()
			var during int64
			err := n2.c.HandOver(ctx, n2.f, func(ctx context.Context) error {
				// A slow transfer: n2 would fetch meanwhile were its
				// fetcher resumed (bounded: it must not).
				for deadline := time.Now().Add(3 * time.Second); n2.pages.Load()-before < 5 && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				during = n2.pages.Load() - before
				return transferTo(n2, n1)(ctx)
			})
			if err != nil {
				t.Fatalf("n2 → n1: %v", err)
			}
			return during
		}, false},
		{"lost", func(ctx context.Context, t *testing.T, n1, n2 *soloNode) int64 {
			if err := transferTo(n1, n2)(ctx); err != nil {
				t.Fatalf("n1 → n2: %v", err)
			}
			waitLeads(t, n2)
			return 0
		}, true},
		{"lost, staged late", func(ctx context.Context, t *testing.T, n1, n2 *soloNode) int64 {
			// n1 stages what it holds only 1.5 s after it lost, well
			// after the fence (400 ms), as a node starved of CPU does:
			// n2 must wait for n1's release, not move n1's parts at the
			// fence and fetch their unstaged pages again.
			n1.c.node.deposedStageDelay.Store(int64(1500 * time.Millisecond))
			if err := transferTo(n1, n2)(ctx); err != nil {
				t.Fatalf("n1 → n2: %v", err)
			}
			waitLeads(t, n2)
			return 0
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The lost cases are about the part n1 holds unfinished when
			// it loses: n1 may finish it between the test's look and the
			// move (a part lasts ~100 ms), so a run in which n2 found no
			// part of n1's to wait for is run again, up to three times.
			for attempt := 1; ; attempt++ {
				exercised := soloMove(t, tc.move, tc.released)
				if exercised {
					break
				}
				if attempt == 3 {
					t.Fatalf("in %d runs n1 never held an unfinished part when it lost its leadership", attempt)
				}
				t.Logf("run %d: n1 held no unfinished part when it lost its leadership; again", attempt)
			}
		})
	}
}

// soloMove runs one crawl of TestSoloLeaderMoves: n1 leads and fetches
// until it has a quarter of the web (and, with released, holds an
// unfinished part), move moves the leadership, and both run to the end.
// It reports whether the case was exercised: with released, n1 held an
// unfinished part when it lost its leadership.
func soloMove(t *testing.T, move func(ctx context.Context, t *testing.T, n1, n2 *soloNode) int64, released bool) bool {
	sim, seeds, reachable := startSoloWeb(t, synth.Options{Hosts: 40, Pages: 12, Seed: 5, IPs: 4, Profile: synth.Clean})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cashErrs []float64
	var cashMu sync.Mutex
	nodes := startSoloGroup(ctx, t, sim, 2, 8, func(o *Options) {
		o.Width, o.Seeds = 120, seeds
		o.Fence, o.ReportEvery, o.StageEvery = 400*time.Millisecond, 50*time.Millisecond, 10*time.Second
		o.OnRound = func(s RoundStats) {
			if s.CashError != nil {
				cashMu.Lock()
				cashErrs = append(cashErrs, *s.CashError)
				cashMu.Unlock()
			}
		}
	})
	n1, n2 := nodes[0], nodes[1]
	holds := func() bool {
		if !released {
			return true
		}
		owns, err := n1.c.node.ownsParts()
		return err == nil && owns
	}
	for deadline := time.Now().Add(time.Minute); n1.pages.Load() < int64(reachable/4) || !holds(); {
		if time.Now().After(deadline) {
			t.Fatalf("n1 fetched %d pages in a minute (want a quarter of %d, in an unfinished part)", n1.pages.Load(), reachable)
		}
		time.Sleep(time.Millisecond)
	}
	during := move(ctx, t, n1, n2)
	for _, n := range nodes {
		select {
		case err := <-n.done:
			if err != nil && !errors.Is(err, ErrExhausted) {
				t.Errorf("%s: %v", n.id, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s did not end: %v", n.id, ctx.Err())
		}
	}
	if during > 0 {
		t.Errorf("n2 fetched %d pages after its hand-over had staged its results", during)
	}
	// n1, deposed, releases its parts, or finds it held none unfinished
	// (it finished its part after the test's look): not exercised then.
	exercised := !released || n1.c.node.releasedNone.Load() == 0
	if v, err := n2.c.st.User(releaseKey(n1.id)); released && exercised && (err != nil || v == nil) {
		t.Errorf("n1's release marker in n2's replica: %q, %v; want n1 to have released its parts", v, err)
	}
	reqs := sim.Stats().URLRequests()
	twice := 0
	for u, c := range reqs {
		if c > 1 && !strings.HasSuffix(u, "/robots.txt") {
			twice++
			if twice <= 10 {
				t.Errorf("%s fetched %d times", u, c)
			}
		}
	}
	if twice > 0 {
		t.Errorf("%d pages fetched twice", twice)
	}
	if len(reqs) < reachable*99/100 {
		t.Errorf("%d of %d reachable pages fetched", len(reqs), reachable)
	}
	cashMu.Lock()
	defer cashMu.Unlock()
	checkCashErrs(t, cashErrs)
	t.Logf("n1 %d pages, n2 %d (%d during its hand-over); %d of %d reachable fetched, %d twice, %d cash checks; n1 held no unfinished part: %v",
		n1.pages.Load(), n2.pages.Load(), during, len(reqs), reachable, twice, len(cashErrs), !exercised)
	return exercised
}

// startSoloWeb starts a websim of wo that counts requests per URL (closed
// when the test ends), and returns its front pages (the seeds) and how
// many pages are reachable with a 200.
func startSoloWeb(t *testing.T, wo synth.Options) (sim *websim.Server, seeds []string, reachable int) {
	t.Helper()
	sim, err := websim.Start(websim.Options{Web: wo, DNSAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.Stats().CountURLs()
	if err := sim.Web().Truth(func(r *synth.Record) error {
		if r.Reachable && r.Status == 200 {
			reachable++
			if strings.HasSuffix(r.URL, "/") {
				seeds = append(seeds, r.URL)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return sim, seeds, reachable
}

// checkCashErrs fails the test unless some round checked its cash and
// every check held.
func checkCashErrs(t *testing.T, cashErrs []float64) {
	t.Helper()
	if len(cashErrs) == 0 {
		t.Fatal("no round checked its cash")
	}
	for i, e := range cashErrs {
		if math.Abs(e) > 1e-9 {
			t.Errorf("round check %d: cash error %g of the injected cash", i+1, e)
		}
	}
}

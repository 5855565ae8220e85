package rounds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds/segment"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// jobSink is a Fetcher that keeps what it is given and fetches nothing: the
// tests below decide when, and whether, a job's result comes back.
type jobSink struct {
	mu   sync.Mutex
	jobs []fetcher.Job
}

func (s *jobSink) Submit(jobs []fetcher.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = append(s.jobs, jobs...)
}

func (s *jobSink) Stats() fetcher.Stats { return fetcher.Stats{} }

func (s *jobSink) take() []fetcher.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs
	s.jobs = nil
	return j
}

// nodeFixture is a crawler on a real one-node crawl database whose round
// state, plan and part owners the test writes itself, as a leader's
// replicated commands would arrive at a node's replica.
type nodeFixture struct {
	t    *testing.T
	c    *Crawler
	sink *jobSink
}

func newNodeFixture(t *testing.T) *nodeFixture {
	t.Helper()
	dir := t.TempDir()
	db := openDB(t, dir)
	t.Cleanup(func() { db.Close() })
	c, err := New(Options{DB: db, Dir: dir, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &nodeFixture{t: t, c: c, sink: &jobSink{}}
}

// apply writes b to the crawl database, as the leader's command would.
func (f *nodeFixture) apply(b *store.Batch) {
	f.t.Helper()
	res, err := f.c.db.Apply(context.Background(), b)
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// plan writes round 1 in phase ph with one part of urls on host h.test,
// owned by node.
func (f *nodeFixture) plan(ph Phase, node string, gen int, urls ...string) {
	f.t.Helper()
	pp := partPlan{Hosts: []partHost{{Name: "h.test"}}}
	for _, u := range urls {
		pp.Entries = append(pp.Entries, genEntry{URL: u, Host: "h.test", Cash: 0.5, Depth: 1})
	}
	b := store.NewBatch()
	b.PutUser(headKey(1), mustJSON(f.t, planHead{Round: 1, Parts: 1, URLs: len(urls)}))
	b.PutUser(partKey(1, 0), pp.encode())
	b.PutUser(ownKey(1, 0), partOwner{Node: node, Gen: gen}.encode())
	s := State{Next: 2, Active: []Active{{Round: 1, Phase: ph, Generated: len(urls), Parts: 1}}}
	b.PutRound(s.encode())
	f.apply(b)
}

// move gives the part to node (generation gen), and with done marks it done
// by that node and puts the round in its update: what a replica that was
// behind sees at once when it catches up.
func (f *nodeFixture) move(node string, gen int, done bool) {
	f.t.Helper()
	b := store.NewBatch()
	b.PutUser(ownKey(1, 0), partOwner{Node: node, Gen: gen}.encode())
	if done {
		b.PutUser(doneKey(1, 0), partDone{Node: node, At: time.Now()}.encode())
		s := State{Next: 2, Active: []Active{{Round: 1, Phase: PhaseUpdate, Parts: 1}}}
		b.PutRound(s.encode())
	}
	f.apply(b)
}

func (f *nodeFixture) watch() {
	f.t.Helper()
	if err := f.c.node.watch(context.Background(), f.sink); err != nil {
		f.t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSkipAfterCatchUpJump: a node holds a part and its jobs wait; its
// replica then jumps past the part's move to another node and the round's
// end (the round is in its update) before the next watch. No job of the
// part may start, and a result that comes anyway is not staged; the next
// watch drops the part although its round is no longer fetching.
func TestSkipAfterCatchUpJump(t *testing.T) {
	f := newNodeFixture(t)
	f.plan(PhaseFetch, "n1", 0, "http://h.test/a", "http://h.test/b")
	f.watch()
	jobs := f.sink.take()
	if len(jobs) != 2 {
		t.Fatalf("took %d jobs, want 2", len(jobs))
	}
	for _, j := range jobs {
		if f.c.skip(&j) {
			t.Fatalf("job %s of a part this node holds is skipped", j.URL)
		}
	}
	f.move("n2", 1, true) // the replica catches up: moved, done by n2, round in update
	for _, j := range jobs {
		if !f.c.skip(&j) {
			t.Errorf("job %s of a part that moved to n2 would start", j.URL)
		}
	}
	f.c.node.mu.Lock()
	p := f.c.node.parts[partRef{1, 0}]
	f.c.node.mu.Unlock()
	if p == nil {
		t.Fatal("the part is gone before the watch saw the move")
	}
	f.watch()
	f.c.node.mu.Lock()
	_, held := f.c.node.parts[partRef{1, 0}]
	f.c.node.mu.Unlock()
	if held || !p.revoked.Load() {
		t.Fatal("the watch kept a part that moved, because its round is past its fetch")
	}
	// A result that was in flight: dropped, and counted as late.
	f.c.OnResult(&fetcher.Result{Job: jobs[0], Status: store.StatusFetched, HTTPStatus: 200})
	f.c.node.mu.Lock()
	late := f.c.node.late
	f.c.node.mu.Unlock()
	p.mu.Lock()
	queued := len(p.results)
	p.mu.Unlock()
	if queued != 0 || late != 1 {
		t.Errorf("a result of the moved part: %d queued, %d counted late; want 0 and 1", queued, late)
	}
	for _, j := range jobs {
		if !f.c.skip(&j) {
			t.Errorf("job %s would start after the watch", j.URL)
		}
	}
}

// TestSkipKeyedByTake: a part moves away and back within one process while
// the first take's jobs still wait (their host backing off): the old jobs
// are skipped, the new take's go, and a result of the old take is dropped
// and counted instead of being staged with the new take or re-queued to
// another part.
func TestSkipKeyedByTake(t *testing.T) {
	f := newNodeFixture(t)
	f.plan(PhaseFetch, "n1", 0, "http://h.test/a", "http://h.test/b")
	f.watch()
	old := f.sink.take()
	f.move("n2", 1, false)
	f.watch()
	if j := f.sink.take(); len(j) != 0 {
		t.Fatalf("a part given away produced %d jobs", len(j))
	}
	f.move("n1", 2, false)
	f.watch()
	cur := f.sink.take()
	if len(old) != 2 || len(cur) != 2 {
		t.Fatalf("jobs: %d then %d, want 2 and 2", len(old), len(cur))
	}
	if old[0].Take == cur[0].Take {
		t.Fatalf("two takes of a part share the epoch %d", cur[0].Take)
	}
	for i := range old {
		if !f.c.skip(&old[i]) {
			t.Errorf("job %s of the first take would start again", old[i].URL)
		}
		if f.c.skip(&cur[i]) {
			t.Errorf("job %s of the current take is skipped", cur[i].URL)
		}
	}
	// The old take's result of a: fetched (a request was made), dropped.
	f.c.OnResult(&fetcher.Result{Job: old[0], Status: store.StatusFetched, HTTPStatus: 200, Links: []string{"http://h.test/x"}})
	f.c.node.mu.Lock()
	p := f.c.node.parts[partRef{1, 0}]
	late := f.c.node.late
	f.c.node.mu.Unlock()
	p.mu.Lock()
	queued := len(p.results)
	p.mu.Unlock()
	if queued != 0 {
		t.Errorf("the first take's result is queued with the second take (%d results)", queued)
	}
	if late != 1 {
		t.Errorf("late results counted: %d, want 1", late)
	}
	// The current take's results complete the part; the done marker
	// carries the late count into the round's statistics.
	for i := range cur {
		f.c.OnResult(&fetcher.Result{Job: cur[i], Status: store.StatusFetched, HTTPStatus: 200})
	}
	if err := f.c.node.stage(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	n, err := f.c.lateResults(1)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("the round's done markers count %d late results, want 1", n)
	}
	f.c.node.mu.Lock()
	left := f.c.node.late
	f.c.node.mu.Unlock()
	if left != 0 {
		t.Errorf("%d late results still to count after the done marker", left)
	}
}

// TestFoldRefusesSecondResult: two staged results of one URL in a round
// would credit its outlinks twice while spending its cash once (cash
// created); the update refuses them with an error that names the URL.
func TestFoldRefusesSecondResult(t *testing.T) {
	f := newNodeFixture(t)
	f.plan(PhaseUpdate, "n1", 0, "http://h.test/a")
	batch := func() []byte {
		acc := newStageAcc()
		p := &nodePart{ref: partRef{1, 0}}
		res := &fetcher.Result{Job: fetcher.Job{URL: "http://h.test/a", Host: "h.test", Cash: 1, Depth: 1},
			Status: store.StatusFetched, HTTPStatus: 200, Links: []string{"http://h.test/x", "http://h.test/y"}}
		if err := f.c.mapResults(p, []*fetcher.Result{res}, acc); err != nil {
			t.Fatal(err)
		}
		return acc.batch().encode()
	}
	b := store.NewBatch()
	b.PutUser(resKey(1, 0, "n1-1", 0), batch())
	f.apply(b)
	if err := f.c.prepareUpdate(context.Background(), 1); err != nil {
		t.Fatalf("one result: %v", err)
	}
	b = store.NewBatch()
	b.PutUser(resKey(1, 0, "n1-2", 0), batch()) // the same URL, from a second take
	f.apply(b)
	err := f.c.prepareUpdate(context.Background(), 1)
	if !errors.Is(err, errTwoResults) {
		t.Fatalf("two results of one URL: %v, want errTwoResults", err)
	}
	t.Log(err)
}

// TestLocalPartAfterStagedTake: a part taken again by a node that leads a
// site of one node (a local part) after an earlier take staged some of its
// results. The node's fetch segment may hold its own result of a staged
// URL from before (a shard that left this node and came back); the update
// counts each URL once, from the staged batch, and the others from the
// segment. Before, the segment's copy was counted too: errTwoResults, and
// the shard's crawler stopped.
func TestLocalPartAfterStagedTake(t *testing.T) {
	f := newNodeFixture(t)
	const a, b = "http://h.test/a", "http://h.test/b"
	f.plan(PhaseUpdate, "n1", 0, a, b)
	result := func(u string) *fetcher.Result {
		return &fetcher.Result{Job: fetcher.Job{URL: u, Host: "h.test", Cash: 0.5, Depth: 1, Round: 1},
			Status: store.StatusFetched, HTTPStatus: 200, Links: []string{"http://h.test/x"}}
	}
	acc := newStageAcc()
	if err := f.c.mapResults(&nodePart{ref: partRef{1, 0}}, []*fetcher.Result{result(a)}, acc); err != nil {
		t.Fatal(err)
	}
	batch := store.NewBatch()
	batch.PutUser(resKey(1, 0, "n1-1", 0), acc.batch().encode())
	batch.PutUser(doneKey(1, 0), partDone{Node: "n1", At: time.Now(), Local: true}.encode())
	f.apply(batch)
	dir := f.c.roundDir(1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := segment.Create(filepath.Join(dir, fetchFile))
	if err != nil {
		t.Fatal(err)
	}
	// a: this node's own result from its earlier take (staged then); b:
	// the local take's.
	if err := w.AppendBatch([][]byte{appendResult(nil, result(a)), appendResult(nil, result(b))}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.c.prepareUpdate(context.Background(), 1); err != nil {
		t.Fatalf("prepare the update: %v", err)
	}
	_, tr, err := readUpdate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Stats == nil || tr.Stats.Fetched != 2 || tr.Duplicates != 0 {
		t.Fatalf("update counts %+v fetched, %d duplicates; want 2 fetched (a staged, b local), 0 duplicates", tr.Stats, tr.Duplicates)
	}
}

// TestRestartRecoversEveryPart stops a one-node crawl in the middle of a
// round that is cut into several parts (as a SIGKILL would: nothing is
// drained or staged) and starts a new crawler on its crawl database and
// round files. Every part taken again must use the results its fetch
// segment already holds: no URL is fetched twice but the few in flight at
// the stop, and OPIC's cash is conserved after every round.
func TestRestartRecoversEveryPart(t *testing.T) {
	sim, err := websim.Start(websim.Options{Web: synth.Options{Hosts: 100, Pages: 12, Seed: 9, IPs: 4, Profile: synth.Clean}, DNSAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	sim.Stats().CountURLs()
	ts := &testSite{dir: t.TempDir(), sim: sim}
	ts.db = openDB(t, ts.dir)
	defer ts.db.Close()
	// Every page is a seed, so the first round is large enough to be cut
	// into several parts.
	var seeds []string
	if err := sim.Web().Truth(func(r *synth.Record) error {
		if r.Reachable && r.Status == 200 && strings.HasPrefix(r.ContentType, "text/html") {
			seeds = append(seeds, r.URL)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const workers = 8
	start := func(o Options) (*Crawler, *fetcher.Fetcher) {
		o.DB, o.Dir, o.Width, o.PerHost, o.HostDelay = ts.db, ts.dir, 5000, 10, 40*time.Millisecond
		c, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		f, err := fetcher.New(fetcher.Options{
			Workers: workers, HostDelay: 40 * time.Millisecond, MaxCrawlDelay: 50 * time.Millisecond, AllowPrivate: true,
			TotalTimeout: 2 * time.Second, BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
			Resolver: mustResolver(t, sim.DNSAddr()), Hosts: c.Hosts(), Seen: c.Seen, OnResult: c.OnResult, Skip: c.Skip(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return c, f
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// First run: stopped once a third of round 1 is fetched.
	c, f := start(Options{})
	if _, err := c.Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	ts.c, ts.f = c, f
	rctx, stop := context.WithCancel(ctx)
	go func() {
		defer stop()
		for rctx.Err() == nil && c.node.done.Load() < int64(len(seeds)/3) {
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if err := ts.run(t, rctx, 0); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	st := c.Status()
	c.node.mu.Lock()
	parts := 0
	for ref := range c.node.parts {
		if ref.round == 1 {
			parts++
		}
	}
	c.node.mu.Unlock()
	atStop := c.node.done.Load()
	c.Close()
	if st.Done != 0 || parts < 2 {
		t.Fatalf("stopped after %d rounds with %d parts of round 1 held (%d results of %d seeds, state %+v): the stop must land in a first round of several parts", st.Done, parts, atStop, len(seeds), st)
	}
	t.Logf("stopped in round 1 (%d parts) with %d of %d results", parts, atStop, len(seeds))

	// Second run, to exhaustion, checking the cash after every round.
	var cashErrs []float64
	rounds := 0
	c, f = start(Options{CheckCash: true, OnRound: func(s RoundStats) {
		rounds++
		if s.CashError != nil {
			cashErrs = append(cashErrs, *s.CashError)
		}
		if s.DuplicateResults != 0 || s.LateResults != 0 {
			t.Errorf("round %d: %d duplicate and %d late results", s.Round, s.DuplicateResults, s.LateResults)
		}
	}})
	defer c.Close()
	ts.c, ts.f = c, f
	if err := ts.run(t, ctx, 0); !errors.Is(err, ErrExhausted) {
		t.Fatalf("second run: %v", err)
	}
	if len(cashErrs) != rounds || rounds == 0 {
		t.Fatalf("%d cash checks for %d rounds", len(cashErrs), rounds)
	}
	for i, e := range cashErrs {
		if math.Abs(e) > 1e-9 {
			t.Errorf("round %d after the restart: cash error %g of the injected cash", i+1, e)
		}
	}
	twice := 0
	for u, n := range sim.Stats().URLRequests() {
		if n > 1 {
			twice++
			if twice <= 5 {
				t.Logf("fetched %d times: %s", n, u)
			}
		}
	}
	t.Logf("%d rounds after the restart; %d URLs fetched twice (bound: %d workers in flight)", rounds, twice, workers)
	if twice > workers {
		t.Errorf("%d URLs fetched twice: the parts taken again after the restart fetched what the fetch segment held", twice)
	}
}

// TestGrowthGate: a node leading a site alone keeps a part's results in its
// fetch segment (a local part). Before another node may join, the gate
// stops making parts local and waits until the local part is done and its
// results are staged in the crawl database like any other's, so that a
// later leader can update the round.
func TestGrowthGate(t *testing.T) {
	f := newNodeFixture(t)
	f.plan(PhaseFetch, "n1", 0, "http://h.test/a", "http://h.test/b")
	f.watch()
	jobs := f.sink.take()
	f.c.node.mu.Lock()
	p := f.c.node.parts[partRef{1, 0}]
	f.c.node.mu.Unlock()
	if p == nil || !p.local.Load() {
		t.Fatal("a part taken by a node alone is not local")
	}
	type opened struct {
		release func()
		err     error
	}
	gate := make(chan opened, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		r, err := f.c.GrowthGate(ctx)
		gate <- opened{r, err}
	}()
	// While the gate waits, nothing is local any more.
	waitFor(t, 5*time.Second, "the gate to close", func() bool { return f.c.growing.Load() })
	if f.c.node.alone() {
		t.Error("the node still counts as alone while a node waits to join")
	}
	select {
	case o := <-gate:
		t.Fatalf("the gate opened with a local part held: %v", o.err)
	default:
	}
	for i := range jobs {
		f.c.OnResult(&fetcher.Result{Job: jobs[i], Status: store.StatusFetched, HTTPStatus: 200, Links: []string{"http://h.test/x"}})
	}
	if err := f.c.node.stage(ctx, false); err != nil {
		t.Fatal(err)
	}
	var o opened
	select {
	case o = <-gate:
	case <-ctx.Done():
		t.Fatal("the gate did not open once the local part was staged")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	o.release()
	v, err := f.c.st.User(doneKey(1, 0))
	if err != nil || v == nil {
		t.Fatalf("no done marker: %v", err)
	}
	var d partDone
	if err := decodeJSON(v, &d); err != nil || d.Local {
		t.Errorf("done marker %s: the part stayed local (%v)", v, err)
	}
	staged := 0
	if err := f.c.st.UserScan(resPrefix(1), func(string, []byte) error { staged++; return nil }); err != nil {
		t.Fatal(err)
	}
	if staged == 0 {
		t.Error("the part's results were not staged in the crawl database")
	}
	if f.c.growing.Load() {
		t.Error("still growing after the release")
	}
}

// waitFor polls cond every 5 ms until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %v", what, limit)
		}
	}
}

// pauseSink is a jobSink that can pause, as the fetcher does.
type pauseSink struct {
	jobSink
	paused bool
}

func (s *pauseSink) Pause(on bool) { s.paused = on }

// TestResumeRechecksLease: a paused node resumes once its replica has
// applied what the leader had when it last took a report, but only while
// that report is recent: a reply from before the leader was lost again does
// not resume it.
func TestResumeRechecksLease(t *testing.T) {
	f := newNodeFixture(t)
	f.plan(PhaseFetch, "n2", 0, "http://h.test/a") // something applied
	n := f.c.node
	s := &pauseSink{paused: true}
	fail := f.c.o.FailTimeout
	for _, tc := range []struct {
		name   string
		lastOK time.Duration // before now
		resume bool
	}{
		{"recent report", fail / 4, true},
		{"report older than the lease", fail, false},
	} {
		s.paused = true
		n.paused.Store(true)
		n.resumeAt.Store(f.c.st.AppliedIndex())
		n.lastOK.Store(f.c.o.Now().Add(-tc.lastOK).UnixNano())
		n.maybeResume(s)()
		if s.paused == tc.resume || n.paused.Load() == tc.resume {
			t.Errorf("%s: fetcher paused %v, node paused %v; want resumed %v", tc.name, s.paused, n.paused.Load(), tc.resume)
		}
	}
}

// TestGrowthGateGaveUp: a gate that gives up (a local part still held
// after growthWait) keeps parts from being made local for twice that, so
// that its next try finds none (a round longer than the wait kept a
// sharded site's R = 1 shards from ever moving); then the node is alone
// again.
func TestGrowthGateGaveUp(t *testing.T) {
	f := newNodeFixture(t)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	f.c.o.Now = func() time.Time { return time.Unix(0, now.Load()) }
	f.plan(PhaseFetch, "n1", 0, "http://h.test/a")
	f.watch()
	f.c.node.mu.Lock()
	p := f.c.node.parts[partRef{1, 0}]
	f.c.node.mu.Unlock()
	if p == nil || !p.local.Load() {
		t.Fatal("a part taken by a node alone is not local")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gate := make(chan error, 1)
	go func() {
		release, err := f.c.GrowthGate(ctx)
		if release != nil {
			release()
		}
		gate <- err
	}()
	waitFor(t, 5*time.Second, "the gate to close", func() bool { return f.c.growing.Load() })
	now.Add(int64(growthWait + time.Second))
	select {
	case err := <-gate:
		if err == nil {
			t.Fatal("the gate opened with a local part held")
		}
	case <-ctx.Done():
		t.Fatal("the gate did not give up past growthWait")
	}
	if f.c.node.alone() {
		t.Error("parts may be made local again right after the gate gave up")
	}
	now.Add(int64(growthWait))
	if f.c.node.alone() {
		t.Error("parts may be made local again before twice growthWait")
	}
	now.Add(int64(growthWait + time.Second))
	if !f.c.node.alone() {
		t.Error("the node is not alone again long after the gate gave up")
	}
}

// stuckFetcher reports a request in flight until it is aborted; each look
// at its statistics moves the test's clock a second on.
type stuckFetcher struct {
	jobSink
	now     *atomic.Int64
	aborted atomic.Bool
}

func (s *stuckFetcher) Stats() fetcher.Stats {
	s.now.Add(int64(time.Second))
	if s.aborted.Load() {
		return fetcher.Stats{}
	}
	return fetcher.Stats{InFlight: 1}
}

func (s *stuckFetcher) Abort() { s.aborted.Store(true) }

// TestHandOverKeepsDelays: a hand-over aborts the requests still in flight
// after its wait, and transfers only a host's longest delay after the last
// request ended, so that the new leader's first request to a host keeps
// its delay (a sharded site's moves breached a crawl-delay: bench cluster).
func TestHandOverKeepsDelays(t *testing.T) {
	f := newNodeFixture(t)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	f.c.o.Now = func() time.Time { return time.Unix(0, now.Load()) }
	f.c.o.HostDelay, f.c.o.MaxCrawlDelay = 100*time.Millisecond, 300*time.Millisecond
	st := &stuckFetcher{now: &now}
	var waited time.Duration
	var abortedFirst bool
	start := time.Now()
	err := f.c.HandOver(context.Background(), st, func(context.Context) error {
		waited, abortedFirst = time.Since(start), st.aborted.Load()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !abortedFirst {
		t.Error("the transfer came with a request still in flight")
	}
	if waited < f.c.o.MaxCrawlDelay {
		t.Errorf("the transfer came %v after the last request, before the longest delay %v", waited, f.c.o.MaxCrawlDelay)
	}
}

// TestTookReportAndLearn checks the fetch times a node reports and the
// leader learns: a report carries each host's mean since the last one
// (answered requests only, a millisecond or more), the next starts
// afresh, and the leader averages what it hears with what it knew,
// forgets a host that turned fast and keeps a bounded number.
func TestTookReportAndLearn(t *testing.T) {
	n := &nodeSide{took: map[string]*hostTook{}}
	res := func(host string, took time.Duration, status int, retry bool) *fetcher.Result {
		return &fetcher.Result{Job: fetcher.Job{Host: host}, Took: took, HTTPStatus: status, Retry: retry}
	}
	for _, r := range []*fetcher.Result{
		res("far.test", 200*time.Millisecond, 200, false),
		res("far.test", 100*time.Millisecond, 404, false),
		res("far.test", 5*time.Second, 0, true),            // a timeout: not a round trip
		res("far.test", 3*time.Second, 503, true),          // a retry: not counted either
		res("near.test", 300*time.Microsecond, 200, false), // under a millisecond: not reported
		res("none.test", 0, 200, false),                    // no request time
	} {
		n.addTook(r)
	}
	got := n.takeTook()
	if want := map[string]int64{"far.test": 150_000}; !maps.Equal(got, want) {
		t.Fatalf("report's Took = %v, want %v", got, want)
	}
	if again := n.takeTook(); again != nil {
		t.Fatalf("the next report's Took = %v, want none (nothing fetched since)", again)
	}
	for i := range maxTookHosts + 10 {
		n.addTook(res(fmt.Sprintf("h%d.test", i), 2*time.Millisecond, 200, false))
	}
	if got := len(n.takeTook()); got != maxTookHosts {
		t.Errorf("a report names %d hosts, want at most %d", got, maxTookHosts)
	}
	long := strings.Repeat("a", 240) // long names: the report's size binds first
	for i := range maxTookHosts {
		n.addTook(res(fmt.Sprintf("h%d.%s.test", i, long), 2*time.Millisecond, 200, false))
	}
	took := n.takeTook()
	b, err := json.Marshal(NodeReport{ID: "n1", Took: took})
	if err != nil {
		t.Fatal(err)
	}
	if len(took) == 0 || len(took) == maxTookHosts || len(b) > maxTookBytes+1024 {
		t.Errorf("a report of %d long-named hosts carries %d of them in %d bytes: want some, not all, within %d bytes", maxTookHosts, len(took), len(b), maxTookBytes)
	}

	l := &leader{took: map[string]time.Duration{}}
	l.learnTook(map[string]int64{"far.test": 150_000, "bad.test": -5})
	l.learnTook(map[string]int64{"far.test": 250_000, "fast.test": 4_000})
	if got := l.took["far.test"]; got != 200*time.Millisecond {
		t.Errorf("far.test learned %v, want 200ms (150 then 250 ms, weight 1/2)", got)
	}
	if _, ok := l.took["bad.test"]; ok {
		t.Error("a negative time was learned")
	}
	l.learnTook(map[string]int64{"fast.test": 0}) // no answer: ignored
	l.learnTook(map[string]int64{"fast.test": 100})
	if got := l.took["fast.test"]; got != 2050*time.Microsecond {
		t.Errorf("fast.test learned %v, want 2.05ms (4 ms, then 0.1 ms)", got)
	}
	l.learnTook(map[string]int64{"fast.test": 100}) // 1.075 ms
	l.learnTook(map[string]int64{"fast.test": 100}) // 0.5875 ms
	if got, ok := l.took["fast.test"]; ok {
		t.Errorf("fast.test, now under a millisecond, is kept at %v: want it forgotten", got)
	}
	big := map[string]int64{}
	for i := range maxTook + 100 {
		big[fmt.Sprintf("h%d.test", i)] = 10_000
	}
	l.learnTook(big)
	if len(l.took) > maxTook {
		t.Errorf("the leader keeps %d hosts' times, want at most %d", len(l.took), maxTook)
	}
}

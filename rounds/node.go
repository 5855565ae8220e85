package rounds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds/segment"
)

// The node side of a round, on every node of a site: it takes the parts
// the leader gives it (watching its replica of the crawl database), hands
// their URLs to its fetcher, appends each result to a local write-ahead
// segment (DIR/rounds/N/fetched, so a restart stages what it had instead
// of fetching it again), maps the results (outlinks, cash split, combined
// by URL) and stages them in the crawl database in batches, each guarded by
// the part's owner so a node whose part was given away cannot add to it.
// It reports to the leader every ReportEvery and pauses its fetcher when it
// cannot reach a leader for longer than FailTimeout.

// partRef names a part of a round.
type partRef struct {
	round uint64
	id    int
}

func (r partRef) String() string { return fmt.Sprintf("%d/%d", r.round, r.id) }

// nodePart is a part this node fetches.
type nodePart struct {
	ref       partRef
	epoch     uint64 // this take of the part: its jobs carry it (fetcher.Job.Take)
	owner     []byte // the owner value its stage commands are guarded by
	hosts     []string
	threshold float64 // stage the outlinks of pages that distributed at least this much cash
	// local: this node leads a site of one node, so the part's results stay
	// in its fetch segment, where the update reads them; only the done
	// marker goes to the crawl database (see stage).
	local   atomic.Bool
	pending atomic.Int64
	revoked atomic.Bool

	mu       sync.Mutex
	results  []*fetcher.Result // not mapped yet
	complete bool              // every job has a result
	done     bool              // its done marker is staged

	// Owned by the stage pass (stageSem):
	acc      *stageAcc // mapped and combined, not staged yet
	accSince time.Time // when acc got its oldest results
	taker    string    // this node and this take of the part: its batches' keys
	seq      uint64    // next staged batch number
}

// nodeSide is one node's share of the rounds.
type nodeSide struct {
	c    *Crawler
	wake chan struct{}
	// stageSem lets one stage pass run at a time; waiting for it ends
	// with the caller's context (a hand-over must not wait for ever
	// behind a pass whose write waits for a quorum that is gone).
	stageSem chan struct{}

	mu      sync.Mutex
	parts   map[partRef]*nodePart
	lastEnd map[string]time.Time // host → when its last request here ended (any part, robots.txt and sitemaps too)
	wal     map[uint64]*segment.Writer
	recover map[uint64]bool // rounds whose write-ahead segment was read at this start
	// recovered holds, per round, the results its write-ahead segment had
	// at this start and that no take has used yet: every part taken again
	// after a restart stages them instead of fetching their URLs again.
	recovered  map[uint64]*recoveredRound
	epochs     uint64            // takes so far: the last take's epoch
	late       int64             // page results dropped since the last done marker: their take was over
	orphans    []*fetcher.Result // sitemap results that came with no part open
	failed     error             // a write-ahead segment write failed
	draining   atomic.Bool
	handedBack atomic.Bool // draining, and every result staged (see NodeReport)
	// pauseMu orders the changes of the fetcher's pause (the report
	// loop's pause, a resume, a hand-over's and a drain's pause), so that
	// a resume decided before a hand-over began cannot undo its pause.
	pauseMu sync.Mutex
	paused  atomic.Bool
	// handing: a hand-over (HandOver) is under way; the fetcher stays
	// paused until it ends, whatever the reports (see maybeResume).
	handing  atomic.Bool
	lastOK   atomic.Int64  // unix nanos of the last report the leader took
	resumeAt atomic.Uint64 // paused: resume once the replica has applied this index
	done     atomic.Int64  // page results this node fetched
	rate     rateMeter

	// watched is what the last full watch saw (the watch loop only): a
	// watch that would see the same skips its scans (see watch).
	watched unchanged[watchKey]
}

// watchKey is what decides whether a watch can find anything new: the
// replica's applied index, the parts held, and whether the node drains.
type watchKey struct {
	index    uint64
	parts    int
	draining bool
}

// watchIdle bounds how long a periodic scan (a node's watch, a leader's
// refresh) may be skipped while nothing it reads changed: every change of
// the crawl database moves the applied index, so this only bounds
// in-memory changes (a sharded node runs dozens of crawlers, and their
// scans every 100 ms were a sixth of its CPU).
const watchIdle = 500 * time.Millisecond

// unchanged is what a periodic scan last saw and when, so that a scan
// whose inputs have not changed is skipped, for at most watchIdle.
type unchanged[K comparable] struct {
	key K
	at  time.Time
}

// same reports whether key is what the scan last saw, less than watchIdle
// ago. A clock that has not moved never skips (tests' fixed clocks).
func (u *unchanged[K]) same(key K, now time.Time) bool {
	return key == u.key && now.After(u.at) && now.Sub(u.at) < watchIdle
}

// saw records that the scan saw key at now.
func (u *unchanged[K]) saw(key K, now time.Time) { u.key, u.at = key, now }

func newNodeSide(c *Crawler) *nodeSide {
	n := &nodeSide{c: c, wake: make(chan struct{}, 1), stageSem: make(chan struct{}, 1), parts: map[partRef]*nodePart{}, wal: map[uint64]*segment.Writer{}, recover: map[uint64]bool{},
		recovered: map[uint64]*recoveredRound{}, lastEnd: map[string]time.Time{}}
	n.lastOK.Store(c.o.Now().UnixNano())
	return n
}

func (n *nodeSide) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *nodeSide) close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for r, w := range n.wal {
		errs = append(errs, w.Close())
		delete(n.wal, r)
	}
	return errors.Join(errs...)
}

// maxOrphans bounds the sitemap results kept while no part is open.
const maxOrphans = 10_000

// OnResult is the fetcher's result hook: it appends the result to its
// round's write-ahead segment and queues it for staging with its part. It
// is called from fetch workers.
func (c *Crawler) OnResult(res *fetcher.Result) {
	n := c.node
	now := c.o.Now()
	n.mu.Lock()
	if res.Host != "" && !res.NoRequest {
		n.lastEnd[res.Host] = now
	}
	p := n.parts[partRef{res.Round, int(res.Part)}]
	if res.Kind == fetcher.KindPage && (p == nil || p.revoked.Load() || p.epoch != res.Take || p.isDone()) {
		// A page result of a take that is over (its part given away, or
		// given away and taken again, or done): what the part's current
		// take fetched, or its new owner, counts; this one is dropped.
		// Staging it would count the URL's result twice.
		if !res.NoRequest {
			n.late++
		}
		n.mu.Unlock()
		return
	}
	if res.Kind != fetcher.KindPage && (p == nil || p.revoked.Load() || p.isDone()) {
		// A robots.txt or sitemap fetch can finish after the part that
		// asked for it: it goes with the newest part still open here.
		p = n.openPartLocked()
		if p == nil {
			if res.Kind == fetcher.KindSitemap && len(n.orphans) < maxOrphans {
				n.orphans = append(n.orphans, res)
			}
			n.mu.Unlock()
			return
		}
	}
	if p == nil || p.revoked.Load() {
		n.mu.Unlock()
		return // a part given away, or unknown: its owner fetches it
	}
	// The take is still the part's: the part's state changes under n.mu,
	// so a revoke cannot come between this check and the append below
	// without the stage's owner guard refusing what it adds.
	w := n.wal[p.ref.round]
	n.mu.Unlock()
	if w != nil {
		if err := w.Append(appendResult(nil, res)); err != nil {
			n.mu.Lock()
			if n.failed == nil {
				n.failed = fmt.Errorf("rounds: round %d: write fetch segment: %w", p.ref.round, err)
			}
			n.mu.Unlock()
			n.poke()
			return
		}
	}
	p.mu.Lock()
	if !p.local.Load() {
		p.results = append(p.results, res)
	}
	complete := false
	if res.Kind == fetcher.KindPage && p.pending.Add(-1) == 0 {
		p.complete, complete = true, true
	}
	p.mu.Unlock()
	if res.Kind == fetcher.KindPage {
		n.done.Add(1)
	}
	if complete || n.deposed() {
		n.poke() // a deposed Solo leader stages at once (see stage)
	}
}

func (p *nodePart) isStaged() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *nodePart) isDone() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done || p.complete
}

// openPartLocked returns the newest part still open (not complete) here.
func (n *nodeSide) openPartLocked() *nodePart {
	var best *nodePart
	for _, p := range n.parts {
		if p.revoked.Load() || p.isDone() {
			continue
		}
		if best == nil || p.ref.round > best.ref.round || (p.ref.round == best.ref.round && p.ref.id > best.ref.id) {
			best = p
		}
	}
	return best
}

// skip is the fetcher's Skip hook: a job goes only while its take is the
// part's (its epoch is the part's held here, not revoked, not done) and
// this node's replica says the same: the part's owner is the one this take
// was given, and no other node has marked the part done. The watch catches
// moves only every 100 ms, and a replica that catches up after a restart
// can jump past a move and the round's end between two watches: the
// replica is asked again here, right before each request, so a job of a
// part that moved cannot start however late the watch sees the move. In a
// federation, jobs of hosts their owner has taken back are dropped too.
func (c *Crawler) skip(j *fetcher.Job) bool {
	if r := c.o.Router; r != nil && r.Away(j.Host) {
		return true
	}
	if c.o.Solo && !c.db.IsLeader() {
		return true
	}
	n := c.node
	ref := partRef{j.Round, int(j.Part)}
	n.mu.Lock()
	p := n.parts[ref]
	n.mu.Unlock()
	if p == nil || p.revoked.Load() || p.epoch != j.Take || p.isStaged() {
		return true
	}
	return !n.stillMine(p)
}

// stillMine reports whether this node's replica still gives part p to the
// take that holds it: the part's owner value is the one the take was given
// and no other node's done marker exists. On a read error it says no.
func (n *nodeSide) stillMine(p *nodePart) bool {
	cur, err := n.c.st.User(ownKey(p.ref.round, p.ref.id))
	if err != nil || !bytes.Equal(cur, p.owner) {
		return false
	}
	v, err := n.c.st.User(doneKey(p.ref.round, p.ref.id))
	if err != nil {
		return false
	}
	if v == nil {
		return true
	}
	var d partDone
	return decodeJSON(v, &d) == nil && d.Node == n.c.id
}

// Skip returns the fetcher's Skip hook (see fetcher.Options.Skip).
func (c *Crawler) Skip() func(*fetcher.Job) bool { return c.skip }

// run is the node side's loop: it watches for parts, stages results and
// reports to the leader until ctx is done or the site has finished
// (errFinished).
func (n *nodeSide) run(ctx context.Context, f Fetcher) error {
	// A node starts paused: until a leader has taken its report and its
	// replica has caught up, it may hold parts the leader is giving to
	// others (it was silent while it restarted).
	if p, ok := f.(pauser); ok {
		n.paused.Store(true)
		p.Pause(true)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(2)
	go func() { defer wg.Done(); n.reportLoop(ctx, f) }() // owner: run
	stageErr := make(chan error, 1)
	go func() { defer wg.Done(); stageErr <- n.stageLoop(ctx) }() // owner: run
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resume := n.maybeResume(f)
		if err := n.watch(ctx, f); err != nil {
			return err
		}
		resume()
		if err := n.c.hosts.flushIfDue(ctx); err != nil && ctx.Err() == nil {
			n.c.log.Warn("rounds: save host records", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-stageErr:
			return err
		case <-tick.C:
		}
	}
}

// finished is the error of a node loop that saw the site finish.
type finished struct{ reason string }

func (e finished) Error() string { return "rounds: the site finished: " + e.reason }

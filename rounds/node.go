package rounds

import (
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
// cannot reach a leader for longer than half of FailTimeout (the rules:
// plan.NodeState).
//
// This file holds the node side's state and its loop; its jobs are in
// their own files: the fetcher's hooks (hooks.go), the watch and the take
// (take.go), the write-ahead segment read at a start (recover.go),
// staging (staging.go; stage.go encodes a part's plan and a staged
// batch), the reports and the pause (report.go), and a drain or a
// hand-over (drain.go).

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
	// took sums, per host, the answered requests since the last report
	// and what they took (fetcher.Result.Took), for the report's Took.
	took    map[string]*hostTook
	wal     map[uint64]*segment.Writer
	recover map[uint64]bool // rounds whose write-ahead segment was read at this start
	// recovered holds, per round, the results its write-ahead segment had
	// at this start and that no take has used yet: every part taken again
	// after a restart stages them instead of fetching their URLs again.
	recovered map[uint64]*recoveredRound
	epochs    uint64            // takes so far: the last take's epoch
	late      int64             // page results dropped since the last done marker: their take was over
	orphans   []*fetcher.Result // sitemap results that came with no part open
	failed    error             // a write-ahead segment write failed
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

	// fetch is the fetcher run was given (under mu).
	fetch Fetcher
	// releasedTo is the leader token this node, deposed, last released
	// its parts to (the stage pass only: release).
	releasedTo []byte
	// deposedStageDelay (nanoseconds; tests) delays each stage pass of a
	// deposed Solo node: a node starved of CPU.
	deposedStageDelay atomic.Int64
	// releasedNone counts the leaderships this node, deposed, found it
	// held no unfinished part of (nothing to release; tests read it).
	releasedNone atomic.Int64

	// watched is what the last full watch saw (the watch loop only): a
	// watch that would see the same skips its scans (see watch).
	watched unchanged[watchKey]
}

func newNodeSide(c *Crawler) *nodeSide {
	n := &nodeSide{c: c, wake: make(chan struct{}, 1), stageSem: make(chan struct{}, 1), parts: map[partRef]*nodePart{}, wal: map[uint64]*segment.Writer{}, recover: map[uint64]bool{},
		recovered: map[uint64]*recoveredRound{}, lastEnd: map[string]time.Time{}, took: map[string]*hostTook{}}
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

// heldParts returns the parts this node holds now, in no set order.
func (n *nodeSide) heldParts() []*nodePart {
	n.mu.Lock()
	defer n.mu.Unlock()
	parts := make([]*nodePart, 0, len(n.parts))
	for _, p := range n.parts {
		parts = append(parts, p)
	}
	return parts
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
	n.mu.Lock()
	n.fetch = f
	n.mu.Unlock()
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

package rounds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/opic"
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

	// Owned by the stage pass (stageMu):
	acc      *stageAcc // mapped and combined, not staged yet
	accSince time.Time // when acc got its oldest results
	taker    string    // this node and this take of the part: its batches' keys
	seq      uint64    // next staged batch number
}

// nodeSide is one node's share of the rounds.
type nodeSide struct {
	c       *Crawler
	wake    chan struct{}
	stageMu sync.Mutex // one stage pass at a time

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
	paused     atomic.Bool
	lastOK     atomic.Int64  // unix nanos of the last report the leader took
	resumeAt   atomic.Uint64 // paused: resume once the replica has applied this index
	done       atomic.Int64  // page results this node fetched
	rate       rateMeter
}

func newNodeSide(c *Crawler) *nodeSide {
	n := &nodeSide{c: c, wake: make(chan struct{}, 1), parts: map[partRef]*nodePart{}, wal: map[uint64]*segment.Writer{}, recover: map[uint64]bool{},
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
	if complete {
		n.poke()
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

// watch reads the round state and the owners of the active rounds' parts
// from this node's replica, takes the parts given to it and drops those
// given away.
func (n *nodeSide) watch(ctx context.Context, f Fetcher) error {
	c := n.c
	n.mu.Lock()
	failed := n.failed
	n.mu.Unlock()
	if failed != nil {
		return failed
	}
	s, err := loadState(c.st)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.lead == nil {
		c.state = s
	}
	c.mu.Unlock()
	if s.Finished != nil && s.Finished.At.After(c.started) {
		return finished{s.Finished.Reason}
	}
	live := map[uint64]bool{}
	for _, a := range s.Active {
		live[a.Round] = true
		if a.Phase != PhaseFetch {
			// Every part of a round past its fetch is done, by this node
			// or another: a part still held here that this node has not
			// marked done was given away (seen only now: the replica
			// caught up past the move and the round's end at once).
			n.mu.Lock()
			var stale []*nodePart
			for ref, p := range n.parts {
				if ref.round == a.Round && !p.isStaged() {
					stale = append(stale, p)
				}
			}
			n.mu.Unlock()
			for _, p := range stale {
				n.revoke(p)
			}
			continue
		}
		done := map[int]bool{}
		err := c.st.UserScan(donePrefix(a.Round), func(k string, _ []byte) error {
			id, err := partID(k)
			done[id] = true
			return err
		})
		if err != nil {
			return fmt.Errorf("rounds: read parts of round %d: %w", a.Round, err)
		}
		type own struct {
			id    int
			owner []byte
			o     partOwner
		}
		var owns []own
		err = c.st.UserScan(ownPrefix(a.Round), func(k string, v []byte) error {
			id, err := partID(k)
			if err != nil {
				return err
			}
			o, err := decodeOwner(v)
			if err != nil {
				return err
			}
			owns = append(owns, own{id, bytes.Clone(v), o})
			return nil
		})
		if err != nil {
			return fmt.Errorf("rounds: read parts of round %d: %w", a.Round, err)
		}
		retake := map[partRef]bool{}
		for _, w := range owns {
			ref := partRef{a.Round, w.id}
			n.mu.Lock()
			lp := n.parts[ref]
			n.mu.Unlock()
			mine := w.o.Node == c.id && !done[w.id]
			switch {
			case lp != nil && (!mine || !bytes.Equal(lp.owner, w.owner)):
				if !done[w.id] || !lp.isDone() {
					n.revoke(lp)
				}
				if mine {
					lp = nil
				}
			case lp != nil && mine && lp.local.Load() && lp.isStaged() && !n.doneNow(ref):
				// Its done marker is gone: a new leader wants the results
				// of a part that stayed local. Take it again: the fetch
				// segment still holds them. (The marker is read again:
				// the scan above may predate the stage loop writing it.)
				n.mu.Lock()
				delete(n.parts, lp.ref)
				n.mu.Unlock()
				lp = nil
				retake[ref] = true
			}
			if mine && lp == nil && !n.draining.Load() {
				if err := n.take(ctx, f, ref, w.owner, w.o, retake[ref]); err != nil {
					return err
				}
			}
		}
	}
	// Forget the parts and segments of retired rounds, and request ends
	// long past any delay.
	n.mu.Lock()
	if len(n.lastEnd) > 4096 {
		for h, t := range n.lastEnd {
			if c.o.Now().Sub(t) > time.Minute+c.o.MaxCrawlDelay {
				delete(n.lastEnd, h)
			}
		}
	}
	for ref := range n.parts {
		if !live[ref.round] {
			delete(n.parts, ref)
		}
	}
	for r := range n.recovered {
		if !live[r] {
			delete(n.recovered, r)
		}
	}
	var retired []uint64
	for r, w := range n.wal {
		if !live[r] {
			w.Close()
			delete(n.wal, r)
			retired = append(retired, r)
		}
	}
	n.mu.Unlock()
	if !c.o.KeepFiles {
		for _, r := range retired {
			// The round is updated and retired: its write-ahead segment,
			// and an update file prepared here in an earlier leadership,
			// are done with.
			os.RemoveAll(c.roundDir(r))
		}
	}
	return nil
}

// doneNow reports whether part ref's done marker is in the replica now.
func (n *nodeSide) doneNow(ref partRef) bool {
	v, err := n.c.st.User(doneKey(ref.round, ref.id))
	return err != nil || v != nil // on a read error, do not take the part again
}

// revoke drops a part given to another node: its unstaged results are
// dropped and its queued jobs skipped.
func (n *nodeSide) revoke(p *nodePart) {
	if p.revoked.Swap(true) {
		return
	}
	p.mu.Lock()
	p.results = nil
	p.mu.Unlock()
	n.mu.Lock()
	delete(n.parts, p.ref)
	n.mu.Unlock()
	n.c.log.Info("rounds: part given to another node", "part", p.ref.String())
}

// take starts fetching a part given to this node: the URLs that have no
// staged result yet, minus those whose result this node's write-ahead
// segment already holds (a restart), which are staged instead.
func (n *nodeSide) take(ctx context.Context, f Fetcher, ref partRef, owner []byte, o partOwner, fromWAL bool) error {
	c := n.c
	raw, err := c.st.User(partKey(ref.round, ref.id))
	if err != nil {
		return fmt.Errorf("rounds: read part %s: %w", ref, err)
	}
	if raw == nil {
		return nil // not replicated here yet
	}
	pp, err := decodePart(raw)
	if err != nil {
		return fmt.Errorf("rounds: part %s: %w", ref, err)
	}
	var head planHead
	if b, err := c.st.User(headKey(ref.round)); err != nil {
		return fmt.Errorf("rounds: read plan of round %d: %w", ref.round, err)
	} else if err := decodeJSON(b, &head); err != nil {
		return fmt.Errorf("rounds: plan of round %d: %w", ref.round, err)
	}
	staged := map[string]bool{}
	err = c.st.UserScan(resPartPrefix(ref.round, ref.id), func(_ string, v []byte) error {
		b, err := decodeStage(v, ref.round)
		if err != nil {
			return err
		}
		b.handled(func(u string) { staged[u] = true })
		return nil
	})
	if err != nil {
		return fmt.Errorf("rounds: read staged results of part %s: %w", ref, err)
	}
	n.mu.Lock()
	n.epochs++
	epoch := n.epochs
	n.mu.Unlock()
	p := &nodePart{ref: ref, epoch: epoch, owner: owner, threshold: head.LinkThreshold,
		taker: fmt.Sprintf("%s-%x", c.id, time.Now().UnixNano())}
	p.local.Store(n.alone())
	want := map[string]*genEntry{}
	for i := range pp.Entries {
		e := &pp.Entries[i]
		if !staged[e.URL] {
			want[e.URL] = e
		}
	}
	for _, h := range pp.Hosts {
		p.hosts = append(p.hosts, h.Name)
	}
	// A restart: results this node wrote before it stopped are staged, not
	// fetched again, for every part of the round (each takes its own).
	if err := n.openWAL(ref.round); err != nil {
		return err
	}
	var recovered []*fetcher.Result
	if fromWAL {
		var err error
		if recovered, err = n.readPart(p); err != nil {
			return err
		}
	} else {
		recovered = n.takeRecovered(ref.round, want)
	}
	for _, r := range recovered {
		switch {
		case r.Kind == fetcher.KindPage && want[r.URL] != nil:
			delete(want, r.URL)
			if !p.local.Load() {
				p.results = append(p.results, r)
			}
		case r.Kind == fetcher.KindSitemap && !p.local.Load():
			p.results = append(p.results, r) // credits of 0 cash: staging twice is harmless
		}
	}
	notBefore := map[string]time.Time{}
	for _, h := range pp.Hosts {
		nb := h.NotBefore
		if o.NotBefore.After(nb) {
			nb = o.NotBefore
		}
		notBefore[h.Name] = nb
	}
	jobs := make([]fetcher.Job, 0, len(want))
	for i := range pp.Entries {
		e := &pp.Entries[i]
		if want[e.URL] == nil {
			continue
		}
		jobs = append(jobs, fetcher.Job{URL: e.URL, Host: e.Host, Round: ref.round, Part: uint32(ref.id), Take: epoch, Depth: e.Depth, Cash: e.Cash,
			NotBefore: notBefore[e.Host], FreshRobots: o.Lost})
	}
	p.pending.Store(int64(len(jobs)))
	if len(jobs) == 0 {
		p.complete = true
	}
	n.mu.Lock()
	n.parts[ref] = p
	orphans := n.orphans
	n.orphans = nil
	w := n.wal[ref.round]
	n.mu.Unlock()
	if len(orphans) > 0 {
		if p.local.Load() {
			recs := make([][]byte, len(orphans))
			for i, r := range orphans {
				recs[i] = appendResult(nil, r)
			}
			if err := w.AppendBatch(recs); err != nil {
				return fmt.Errorf("rounds: round %d: write fetch segment: %w", ref.round, err)
			}
		} else {
			p.mu.Lock()
			p.results = append(p.results, orphans...)
			p.mu.Unlock()
		}
	}
	c.log.Info("rounds: took part", "part", ref.String(), "jobs", len(jobs), "staged", len(staged), "recovered", len(recovered), "gen", o.Gen, "local", p.local.Load())
	if len(jobs) > 0 {
		f.Submit(jobs)
	} else {
		n.poke()
	}
	return nil
}

// recoveredRound is what a round's write-ahead segment held when this node
// started, not yet used by a take: page results by URL (the first of each:
// a URL has one result per round) and sitemap results.
type recoveredRound struct {
	pages    map[string]*fetcher.Result
	sitemaps []*fetcher.Result
}

// openWAL opens (once per start) the write-ahead segment of a round,
// keeping the results it already holds for the round's takes.
func (n *nodeSide) openWAL(round uint64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.wal[round] != nil {
		return nil
	}
	dir := n.c.roundDir(round)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	path := filepath.Join(dir, fetchFile)
	if _, err := os.Stat(path); err == nil && !n.recover[round] {
		rr := &recoveredRound{pages: map[string]*fetcher.Result{}}
		_, _, err := segment.Read(path, func(rec []byte) error {
			fr, err := decodeFetch(rec)
			if err != nil {
				return err
			}
			switch fr.Kind {
			case fetcher.KindPage:
				if rr.pages[fr.URL] == nil {
					rr.pages[fr.URL] = fr.result(round)
				}
			case fetcher.KindSitemap:
				rr.sitemaps = append(rr.sitemaps, fr.result(round))
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rounds: round %d: read fetch segment: %w", round, err)
		}
		if len(rr.pages)+len(rr.sitemaps) > 0 {
			n.recovered[round] = rr
		}
	}
	n.recover[round] = true
	w, dropped, err := segment.OpenAppend(path)
	if errors.Is(err, fs.ErrNotExist) {
		w, err = segment.Create(path)
	}
	if err != nil {
		return fmt.Errorf("rounds: round %d: open fetch segment: %w", round, err)
	}
	if dropped > 0 {
		n.c.log.Warn("rounds: fetch segment had a torn tail", "round", round, "bytes", dropped)
	}
	n.wal[round] = w
	return nil
}

// takeRecovered hands a take the results recovered at this start for the
// URLs it wants (and, to the round's first take, its sitemap results); each
// is handed once.
func (n *nodeSide) takeRecovered(round uint64, want map[string]*genEntry) []*fetcher.Result {
	n.mu.Lock()
	defer n.mu.Unlock()
	rr := n.recovered[round]
	if rr == nil {
		return nil
	}
	out := rr.sitemaps
	rr.sitemaps = nil
	for u := range want {
		if r := rr.pages[u]; r != nil {
			out = append(out, r)
			delete(rr.pages, u)
		}
	}
	if len(rr.pages) == 0 {
		delete(n.recovered, round)
	}
	return out
}

// result turns a fetch segment record back into the fetcher's result.
func (f *fetchRecord) result(round uint64) *fetcher.Result {
	return &fetcher.Result{Job: fetcher.Job{URL: f.URL, Host: f.Host, Round: round, Depth: f.Depth, Cash: f.Cash},
		Kind: f.Kind, Status: f.Status, Retry: f.Retry, NoRequest: f.NoRequest, HTTPStatus: f.HTTPStatus,
		RedirectTo: f.RedirectTo, Links: f.Links, ContentFP: f.ContentFP, Bytes: f.Bytes, FetchedAt: f.At, Err: f.Err, Wait: f.Wait, Truncated: f.Truncated}
}

// Staging.

// stageBytes is how large a part's mapped results grow before they are
// staged although the part is not complete (bounding a node's memory).
const stageBytes = 4 << 20

// stageCommandBytes bounds one staging command.
const stageCommandBytes = 8 << 20

// alone reports whether this node leads a site of one node: then no other
// node can take over its parts or its updates, and results need not cross
// the crawl database (local parts).
func (n *nodeSide) alone() bool {
	if !n.c.db.IsLeader() || n.c.growing.Load() {
		return false
	}
	m, err := n.c.db.Members()
	return err == nil && len(m) == 1
}

// GrowthGate is the crawl database's join gate (crawldb.DB.SetJoinGate):
// before a node joins, this node (leading a site of one node) stops keeping
// parts local and waits until no local part is held and no round has a
// local part done, so that every round's results are in the crawl database
// when the site grows. A local round's update is prepared from this node's
// fetch segment alone: were the site to grow while one is applied, a new
// leader could not finish it. It gives up after growthWait (the joining
// node tries again).
func (c *Crawler) GrowthGate(ctx context.Context) (release func(), err error) {
	c.growMu.Lock()
	c.growing.Store(true)
	release = func() {
		c.growing.Store(false)
		c.growMu.Unlock()
	}
	deadline := c.o.Now().Add(growthWait)
	for {
		local, err := c.node.localWork()
		if err != nil {
			release()
			return nil, err
		}
		if !local {
			return release, nil
		}
		if c.o.Now().After(deadline) {
			release()
			return nil, fmt.Errorf("rounds: the site's rounds still hold parts done by this node alone after %v: try again", growthWait)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			release()
			return nil, ctx.Err()
		}
	}
}

// growthWait bounds how long a join waits for local parts to be updated.
const growthWait = 30 * time.Second

// localWork reports whether this node holds a local part or an active
// round has a part done locally.
func (n *nodeSide) localWork() (bool, error) {
	n.mu.Lock()
	for _, p := range n.parts {
		if p.local.Load() && !p.revoked.Load() {
			n.mu.Unlock()
			return true, nil
		}
	}
	n.mu.Unlock()
	s, err := loadState(n.c.st)
	if err != nil {
		return false, err
	}
	for _, a := range s.Active {
		local := false
		err := n.c.st.UserScan(donePrefix(a.Round), func(k string, v []byte) error {
			var d partDone
			if err := decodeJSON(v, &d); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			local = local || d.Local
			return nil
		})
		if err != nil || local {
			return local, err
		}
	}
	return false, nil
}

func (n *nodeSide) stageLoop(ctx context.Context) error {
	t := time.NewTicker(max(n.c.o.StageEvery/4, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.wake:
		case <-t.C:
		}
		if err := n.stage(ctx, false); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			n.c.log.Warn("rounds: stage results", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// staged is one part's batch on its way to the crawl database.
type staged struct {
	p     *nodePart
	final bool
	value []byte // the batch; nil for a local part's done marker alone
	done  []byte
	late  int64 // the late results its done marker counts
}

// stage maps the results each part has into its accumulator (combined by
// URL), and stages the accumulators of parts that are complete or large
// (all of them with force), with the done markers of complete parts. A
// local part stages only its done marker; if the site has grown since the
// part was taken, its results are read back from the fetch segment and
// staged like any other's.
func (n *nodeSide) stage(ctx context.Context, force bool) error {
	n.stageMu.Lock()
	defer n.stageMu.Unlock()
	c := n.c
	now := c.o.Now()
	n.mu.Lock()
	parts := make([]*nodePart, 0, len(n.parts))
	for _, p := range n.parts {
		parts = append(parts, p)
	}
	n.mu.Unlock()
	slices.SortFunc(parts, func(a, b *nodePart) int {
		if a.ref.round != b.ref.round {
			return cmpUint(a.ref.round, b.ref.round)
		}
		return a.ref.id - b.ref.id
	})
	var due []*staged
	n.mu.Lock()
	lateLeft := n.late
	n.mu.Unlock()
	for _, p := range parts {
		if p.revoked.Load() {
			continue
		}
		p.mu.Lock()
		results, complete, done := p.results, p.complete, p.done
		p.results = nil
		p.mu.Unlock()
		if done {
			n.requeue(results) // late sitemap results: another part takes them
			continue
		}
		if p.acc == nil {
			p.acc = newStageAcc()
		}
		if p.local.Load() && complete && !n.alone() {
			// The site grew: stage this part's results like any other's.
			recovered, err := n.readPart(p)
			if err != nil {
				return err
			}
			results = append(recovered, results...)
			p.local.Store(false)
		}
		if len(results) > 0 {
			if p.acc.empty() {
				p.accSince = now
			}
			if err := c.mapResults(p, results, p.acc); err != nil {
				return err
			}
		}
		if !complete && (p.acc.empty() || !force && p.acc.size < stageBytes && now.Sub(p.accSince) < c.o.StageEvery) {
			continue
		}
		s := &staged{p: p, final: complete}
		if !p.local.Load() || !complete {
			s.value = p.acc.batch().encode()
		}
		if complete {
			// The first done marker of the pass counts the late results.
			s.late, lateLeft = lateLeft, 0
			s.done = partDone{Node: c.id, At: now, FreeAt: n.freeAt(p, now), Local: p.local.Load(), Late: s.late}.encode()
		}
		due = append(due, s)
	}
	// Commands of at most stageCommandBytes, each part guarded by its owner.
	for len(due) > 0 {
		size, k := 0, 0
		for k < len(due) && (k == 0 || size+len(due[k].value) < stageCommandBytes) {
			size += len(due[k].value) + 256
			k++
		}
		group := due[:k]
		due = due[k:]
		b := store.NewBatch()
		for _, s := range group {
			ref := s.p.ref
			b.Guard(ownKey(ref.round, ref.id), s.p.owner)
			b.Guard(doneKey(ref.round, ref.id), nil)
			if s.value != nil {
				b.PutUser(resKey(ref.round, ref.id, s.p.taker, s.p.seq), s.value)
			}
			if s.final {
				b.PutUser(doneKey(ref.round, ref.id), s.done)
			}
		}
		res, err := c.db.Apply(ctx, b)
		if err == nil && res.Err == nil {
			for _, s := range group {
				n.staged(s)
			}
			continue
		}
		if err == nil && !errors.Is(res.Err, store.ErrGuard) {
			err = res.Err
		}
		if err != nil {
			// The command may or may not have been applied: staging it
			// again writes the same keys with the same values.
			return fmt.Errorf("rounds: stage results: %w", err)
		}
		// A guard failed: some part moved away, or an earlier attempt of
		// this very batch was applied. Sort it out part by part.
		for _, s := range group {
			ref := s.p.ref
			var applied bool
			if s.value != nil {
				v, _ := c.st.User(resKey(ref.round, ref.id, s.p.taker, s.p.seq))
				applied = bytes.Equal(v, s.value)
			} else {
				v, _ := c.st.User(doneKey(ref.round, ref.id))
				applied = bytes.Equal(v, s.done)
			}
			cur, err := c.st.User(ownKey(ref.round, ref.id))
			switch {
			case applied:
				n.staged(s)
			case err == nil && !bytes.Equal(cur, s.p.owner):
				n.revoke(s.p)
			}
		}
	}
	return nil
}

// staged records a part's batch as staged.
func (n *nodeSide) staged(s *staged) {
	p := s.p
	p.acc = newStageAcc()
	p.seq++
	if !s.final {
		return
	}
	n.mu.Lock()
	n.late -= s.late
	n.mu.Unlock()
	p.mu.Lock()
	p.done = true
	late := p.results
	p.results = nil
	p.mu.Unlock()
	n.requeue(late)
}

// requeue gives results that came for a part already done (sitemaps that
// finished late) to another open part, or keeps them for the next one.
func (n *nodeSide) requeue(results []*fetcher.Result) {
	if len(results) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if q := n.openPartLocked(); q != nil && !q.local.Load() {
		q.mu.Lock()
		q.results = append(q.results, results...)
		q.mu.Unlock()
		return
	}
	for _, r := range results {
		if r.Kind == fetcher.KindSitemap && len(n.orphans) < maxOrphans {
			n.orphans = append(n.orphans, r)
		}
	}
}

// readPart reads a local part's results back from the round's fetch segment.
func (n *nodeSide) readPart(p *nodePart) ([]*fetcher.Result, error) {
	c := n.c
	raw, err := c.st.User(partKey(p.ref.round, p.ref.id))
	if err != nil {
		return nil, fmt.Errorf("rounds: read part %s: %w", p.ref, err)
	}
	pp, err := decodePart(raw)
	if err != nil {
		return nil, fmt.Errorf("rounds: part %s: %w", p.ref, err)
	}
	urls := make(map[string]bool, len(pp.Entries))
	for _, e := range pp.Entries {
		urls[e.URL] = true
	}
	var out []*fetcher.Result
	_, _, err = segment.Read(filepath.Join(c.roundDir(p.ref.round), fetchFile), func(rec []byte) error {
		fr, err := decodeFetch(rec)
		if err != nil {
			return err
		}
		if fr.Kind == fetcher.KindSitemap || (fr.Kind == fetcher.KindPage && urls[fr.URL]) {
			out = append(out, fr.result(p.ref.round))
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("rounds: round %d: read fetch segment: %w", p.ref.round, err)
	}
	return out, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// freeAt is when this node would allow the next request to any of p's
// hosts: the end of its last request to each (for any part, robots.txt
// and sitemaps included) plus the host's delay.
func (n *nodeSide) freeAt(p *nodePart, now time.Time) time.Time {
	n.mu.Lock()
	ends := make(map[string]time.Time, len(p.hosts))
	for _, h := range p.hosts {
		if t, ok := n.lastEnd[h]; ok {
			ends[h] = t
		}
	}
	n.mu.Unlock()
	free := now
	for h, t := range ends {
		if f := t.Add(n.c.hostDelay(h)); f.After(free) {
			free = f
		}
	}
	return free
}

// mapResults is the map side of the update for results of part p, added to
// acc: fetch results to record, URLs to requeue, redirect chains, outlink
// credits combined by URL, the virtual page's share, the outlinks of heavy
// pages and the round's counters.
func (c *Crawler) mapResults(p *nodePart, results []*fetcher.Result, acc *stageAcc) error {
	b := &acc.b
	emit := acc.emit
	round := p.ref.round
	n0 := len(b.Ops) + len(b.Requeues) + len(b.Hops) + len(b.Links)
	for _, res := range results {
		b.Stats.count(res)
		switch res.Kind {
		case fetcher.KindRobots:
			continue
		case fetcher.KindSitemap:
			for _, l := range res.Links {
				emit(l, credit{depth: 1})
			}
			continue
		}
		op := store.FetchResult{URL: res.URL, Status: res.Status, HTTPStatus: uint16(min(max(res.HTTPStatus, 0), math.MaxUint16)),
			At: res.FetchedAt, ContentFP: res.ContentFP, Round: round}
		if !op.At.IsZero() {
			op.At = time.UnixMilli(op.At.UnixMilli()).UTC()
		}
		if res.Retry && res.NoRequest {
			// The host was unavailable, not the URL: back to the frontier
			// without spending one of its retries, until the host has
			// failed so often that its URLs are given up like any other.
			h, _, err := c.hosts.LoadHost(res.Host)
			if err != nil {
				return err
			}
			if int(h.Failures) < c.o.MaxRetries+hostGrace && c.requeueAgain(res.URL) {
				b.Requeues = append(b.Requeues, res.URL)
				continue
			}
		}
		if res.Retry {
			rec, ok, err := c.st.Get(res.URL)
			if err != nil {
				return err
			}
			if !ok || int(rec.Retries)+1 < c.o.MaxRetries {
				op.Retry = true
				b.Ops = append(b.Ops, op)
				continue
			}
			op.Status = store.StatusError // out of retries
		}
		if op.Status < store.StatusFetched {
			op.Status = store.StatusError
		}
		op.Spend = res.Cash
		b.Ops = append(b.Ops, op)
		var links []string
		switch {
		case res.Status == store.StatusFetched:
			links = res.Links
		case res.Status == store.StatusRedirect && res.RedirectTo != "" && res.RedirectTo != res.URL:
			// A redirect target is a link, unless the chain that led here
			// is already MaxRedirects long.
			hops, err := c.redirectHops(res.URL)
			if err != nil {
				return err
			}
			if hops < c.o.MaxRedirects {
				links = []string{res.RedirectTo}
				b.Hops = append(b.Hops, redirectHop{res.RedirectTo, hops + 1})
			}
		}
		// A link is one deeper than its page; a redirect target is the
		// same page moved, as deep as the URL that redirected (chains
		// are bounded by MaxRedirects, not by depth).
		depth := res.Depth + 1
		if res.Status == store.StatusRedirect {
			depth = res.Depth
		}
		if depth > c.o.MaxDepth {
			links = nil
		}
		damping := 1.0 // a redirect passes all of its cash on
		if res.Status == store.StatusFetched {
			damping = c.o.Damping
			if len(links) > 0 && c.o.Revisits > 0 && res.Cash >= p.threshold {
				b.Links = append(b.Links, linkOffer{URL: res.URL, Depth: res.Depth, Weight: res.Cash, Links: links})
				for _, l := range links {
					acc.size += len(l)
				}
			}
		}
		acc.virtual.Add(distribute(emit, res.Cash, damping, links, depth))
	}
	acc.size += 64 * (len(b.Ops) + len(b.Requeues) + len(b.Hops) + len(b.Links) - n0)
	return nil
}

// stageAcc accumulates the map side of a part's results until it is staged.
type stageAcc struct {
	b       stageBatch
	credits map[string]credit
	virtual opic.Sum
	size    int // approximate encoded bytes
}

func newStageAcc() *stageAcc { return &stageAcc{credits: map[string]credit{}} }

func (a *stageAcc) emit(url string, cr credit) {
	if old, ok := a.credits[url]; ok {
		cr = combineCredit(old, cr)
	} else {
		a.size += len(url) + 12
	}
	a.credits[url] = cr
}

func (a *stageAcc) empty() bool {
	return len(a.b.Ops) == 0 && len(a.b.Requeues) == 0 && len(a.credits) == 0 && a.b.Stats.Robots == 0
}

// batch returns the accumulated batch, its credits sorted by URL.
func (a *stageAcc) batch() *stageBatch {
	b := a.b
	b.Virtual = a.virtual.Value()
	b.Credits = make([]target, 0, len(a.credits))
	for u, cr := range a.credits {
		b.Credits = append(b.Credits, target{url: u, credit: cr})
	}
	slices.SortFunc(b.Credits, func(x, y target) int { return cmpString(x.url, y.url) })
	return &b
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// count adds one result to the counters.
func (s *stageStats) count(res *fetcher.Result) {
	s.Bytes += res.Bytes
	s.Wait += int64(res.Wait)
	switch res.Kind {
	case fetcher.KindRobots:
		s.Robots++
		return
	case fetcher.KindSitemap:
		s.Sitemaps++
		return
	}
	s.Links += int64(len(res.Links))
	if res.Retry {
		s.Retries++
	} else {
		s.Fetched++
		cl := res.HTTPStatus / 100
		if cl < 1 || cl > 5 {
			cl = 0
		}
		s.Class[cl]++
		if int(res.Status) < len(s.Status) {
			s.Status[res.Status]++
		}
	}
	// The host's fate, when not a plain success.
	st := res.Status
	if !res.Retry && res.Truncated == "" && (st == store.StatusFetched || st == store.StatusRedirect || st == store.StatusDuplicate) {
		return
	}
	if s.Troubled == nil {
		s.Troubled = map[string]*HostFate{}
	}
	f := s.Troubled[res.Host]
	if f == nil {
		if len(s.Troubled) >= maxTroubled {
			return
		}
		f = &HostFate{ByStatus: map[string]int64{}}
		s.Troubled[res.Host] = f
	}
	if res.Retry {
		f.Retries++
	} else {
		f.ByStatus[st.String()]++
	}
	if res.Truncated != "" {
		f.Truncated++
	}
	if res.Err != "" {
		f.LastError = res.Err
	}
}

// Reports to the leader.

// NodeReport is what a node tells the site's leader every ReportEvery: that
// it is alive, how much work it holds, and, when it stops, when the hosts
// of the parts it hands back are free.
type NodeReport struct {
	ID       string    `json:"id"`
	At       time.Time `json:"at"`
	Queued   int64     `json:"queued"`    // jobs not started yet
	InFlight int64     `json:"in_flight"` // requests being fetched
	Done     int64     `json:"done"`      // page results since this node started
	Rate     float64   `json:"pages_per_s"`
	Parts    int       `json:"parts"`    // parts held
	Hosts    int       `json:"hosts"`    // hosts of the parts held
	Unstaged int       `json:"unstaged"` // results not staged yet
	Draining bool      `json:"draining,omitempty"`
	// HandedBack: draining, the node has staged every result it had and
	// starts no request: its parts may go to other nodes, each from its
	// FreeAt (per part, "round/id": when its hosts may be fetched by
	// another node).
	HandedBack bool                 `json:"handed_back,omitempty"`
	FreeAt     map[string]time.Time `json:"free_at,omitempty"`
}

// report builds this node's report.
func (n *nodeSide) report(f Fetcher) NodeReport {
	c := n.c
	now := c.o.Now()
	st := f.Stats()
	r := NodeReport{ID: c.id, At: now, Queued: st.Queued, InFlight: st.InFlight, Done: n.done.Load(), Draining: n.draining.Load(), HandedBack: n.handedBack.Load()}
	r.Rate = n.rate.observe(now, r.Done)
	n.mu.Lock()
	parts := make([]*nodePart, 0, len(n.parts))
	for _, p := range n.parts {
		parts = append(parts, p)
	}
	n.mu.Unlock()
	for _, p := range parts {
		if p.revoked.Load() {
			continue
		}
		p.mu.Lock()
		done := p.done
		r.Unstaged += len(p.results)
		p.mu.Unlock()
		if done {
			continue
		}
		r.Parts++
		r.Hosts += len(p.hosts)
		if r.HandedBack {
			if r.FreeAt == nil {
				r.FreeAt = map[string]time.Time{}
			}
			r.FreeAt[p.ref.String()] = n.freeAt(p, now)
		}
	}
	return r
}

// reportLoop reports to the leader every ReportEvery, and pauses the
// fetcher while no leader has taken a report for half of FailTimeout: by
// FailTimeout the leader may give this node's parts to others. It resumes
// once a leader takes a report again and the replica has caught up with
// it (the run loop's next watch then drops the parts moved away).
func (n *nodeSide) reportLoop(ctx context.Context, f Fetcher) {
	c := n.c
	t := time.NewTicker(c.o.ReportEvery)
	defer t.Stop()
	for {
		r := n.report(f)
		var err error
		var reply ReportReply
		if c.db.IsLeader() {
			reply, err = c.heard(r)
		} else if c.o.Report != nil {
			rctx, cancel := context.WithTimeout(ctx, 2*c.o.ReportEvery)
			reply, err = c.o.Report(rctx, r)
			cancel()
		} else {
			err = errors.New("rounds: no way to reach the leader")
		}
		now := c.o.Now()
		if err == nil {
			n.lastOK.Store(now.UnixNano())
			if n.paused.Load() {
				n.resumeAt.Store(max(reply.Index, 1))
			}
		}
		if p, ok := f.(pauser); ok && !n.paused.Load() && !n.draining.Load() && now.Sub(time.Unix(0, n.lastOK.Load())) > c.o.FailTimeout/2 {
			n.paused.Store(true)
			n.resumeAt.Store(0)
			p.Pause(true)
			// The leader moves this node's parts FailTimeout after it last
			// heard of it, and lets their hosts go from then on (plus
			// their delays): requests still in flight must end now, not
			// at the request timeout, or they would overlap the new
			// owner's (a node cut off from the leader is not dead).
			if a, ok := f.(aborter); ok {
				a.Abort()
			}
			c.log.Warn("rounds: no leader took this node's report: fetching paused, requests in flight aborted", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maybeResume resumes a paused fetcher once the replica has applied what
// the leader had when it took a report again; call it before a watch.
func (n *nodeSide) maybeResume(f Fetcher) (resume func()) {
	idx := n.resumeAt.Load()
	if idx == 0 || !n.paused.Load() || n.c.st.AppliedIndex() < idx || n.draining.Load() {
		return func() {}
	}
	// The reply that set idx may be old: resume only while a leader has
	// taken a report within half the fail timeout (the lease the pause
	// is about), or the node would fetch again just as it should pause.
	if n.c.o.Now().Sub(time.Unix(0, n.lastOK.Load())) > n.c.o.FailTimeout/2 {
		n.resumeAt.Store(0)
		return func() {}
	}
	return func() {
		n.resumeAt.Store(0)
		n.paused.Store(false)
		if p, ok := f.(pauser); ok {
			p.Pause(false)
		}
		n.c.log.Info("rounds: leader reached again: fetching resumed")
	}
}

// rateMeter turns a counter into a rate over the last few seconds.
type rateMeter struct {
	mu    sync.Mutex
	at    [8]time.Time
	count [8]int64
	i     int
}

func (m *rateMeter) observe(now time.Time, count int64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldest := (m.i + 1) % len(m.at)
	m.at[m.i], m.count[m.i] = now, count
	m.i = oldest
	if m.at[oldest].IsZero() {
		oldest = 0
	}
	if dt := now.Sub(m.at[oldest]).Seconds(); dt > 0 {
		return float64(count-m.count[oldest]) / dt
	}
	return 0
}

// Drain stops this node's share of the site cleanly: it takes no new part,
// pauses its fetcher, waits (up to 5 s) for the requests in flight, stages
// every result it has and reports when its parts' hosts are free, so the
// leader gives them to other nodes at once; then it waits (up to twice the
// fail timeout) until they are gone. It gives up waiting when no leader
// takes its reports (the whole site is stopping): its parts then move when
// a leader finds it dead, and what it staged is kept.
func (c *Crawler) Drain(ctx context.Context, f Fetcher) error {
	n := c.node
	n.draining.Store(true)
	if p, ok := f.(pauser); ok {
		p.Pause(true)
	}
	deadline := c.o.Now().Add(5 * time.Second)
	for f.Stats().InFlight > 0 && c.o.Now().Before(deadline) {
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
	deadline = c.o.Now().Add(2 * c.o.FailTimeout)
	for {
		err := n.stage(ctx, true)
		if err == nil && n.unstaged() == 0 {
			break
		}
		if c.o.Now().After(deadline) {
			return fmt.Errorf("rounds: drain: results not staged in time: %v", err)
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	n.handedBack.Store(true)
	deadline = c.o.Now().Add(2 * c.o.FailTimeout)
	for c.o.Now().Before(deadline) {
		r := n.report(f)
		var err error
		if c.db.IsLeader() {
			_, err = c.heard(r)
		} else if c.o.Report != nil {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err = c.o.Report(rctx, r)
			cancel()
		}
		if r.Parts == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("rounds: drain: no leader takes this node's report: %w", err)
		}
		if err := n.watch(ctx, f); err != nil {
			var fin finished
			if errors.As(err, &fin) {
				return nil
			}
			return err
		}
		if !sleepCtx(ctx, c.o.ReportEvery/2) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("rounds: drain: parts still held after %v", 2*c.o.FailTimeout)
}

func (n *nodeSide) unstaged() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for _, p := range n.parts {
		p.mu.Lock()
		k += len(p.results)
		p.mu.Unlock()
	}
	return k
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// maxNoRequest is how often a URL goes back to the frontier unrequested
// (its host unavailable) before such returns spend its retries: a host
// whose failures are not counted (its record elsewhere, a moved part)
// must not keep a crawl from ending.
const maxNoRequest = 4

// requeueAgain counts a return of u to the frontier without a request and
// reports whether it may go back once more without spending a retry.
func (c *Crawler) requeueAgain(u string) bool {
	c.noReqMu.Lock()
	defer c.noReqMu.Unlock()
	if c.noReq == nil {
		c.noReq = map[string]int{}
	}
	c.noReq[u]++
	if c.noReq[u] <= maxNoRequest {
		return true
	}
	delete(c.noReq, u)
	return false
}

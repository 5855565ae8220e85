package rounds

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/meridian-crawler/meridian/fetcher"
)

// Taking parts: the watch that reads which parts are this node's, and
// the take that hands a part's URLs to the fetcher.

// watch reads the round state and the owners of the active rounds' parts
// from this node's replica, takes the parts given to it and drops those
// given away.
func (n *nodeSide) watch(ctx context.Context, f Fetcher) (err error) {
	c := n.c
	n.mu.Lock()
	failed := n.failed
	n.mu.Unlock()
	if failed != nil {
		return failed
	}
	key := n.watchKey()
	if n.watched.same(key, c.o.Now()) {
		return nil
	}
	defer func() {
		// What this watch saw: the index read before its scans, the
		// parts after its takes and revokes.
		if err == nil {
			after := n.watchKey()
			key.parts = after.parts
			n.watched.saw(key, c.o.Now())
		}
	}()
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
			if mine && lp == nil {
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
	staged, err := c.stagedURLs(ref)
	if err != nil {
		return err
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
			NotBefore: notBefore[e.Host], FreshRobots: o.Lost, Prev: e.Prev})
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

// stagedURLs returns the page URLs that part ref's staged batches answer.
func (c *Crawler) stagedURLs(ref partRef) (map[string]bool, error) {
	staged := map[string]bool{}
	err := c.st.UserScan(resPartPrefix(ref.round, ref.id), func(_ string, v []byte) error {
		b, err := decodeStage(v, ref.round)
		if err != nil {
			return err
		}
		b.handled(func(u string) { staged[u] = true })
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rounds: read staged results of part %s: %w", ref, err)
	}
	return staged, nil
}

// watchKey is what decides whether a watch can find anything new: the
// replica's applied index, the parts held, and whether the node drains.
type watchKey struct {
	index uint64
	parts int
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

// watchKey is what a watch would read now (see nodeSide.watched).
func (n *nodeSide) watchKey() watchKey {
	n.mu.Lock()
	parts := len(n.parts)
	n.mu.Unlock()
	return watchKey{index: n.c.st.AppliedIndex(), parts: parts}
}

package rounds

import (
	"bytes"
	"fmt"

	"github.com/meridian-crawler/meridian/fetcher"
)

// The fetcher's hooks: OnResult takes each result into its part's
// write-ahead segment and staging queue, Skip lets a job go only while its
// take still holds its part.

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
		n.addTook(res)
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
	if r := c.backs; r != nil && r.Away(j.Host) {
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

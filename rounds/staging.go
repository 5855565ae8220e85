package rounds

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/rounds/segment"
)

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
	if !n.c.db.IsLeader() || n.c.growing.Load() || n.c.o.Now().UnixNano() < n.c.noLocalUntil.Load() {
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
			// The next try must not find new local parts again (a round
			// lasting longer than the wait would keep the site from ever
			// growing): none are made for a while yet.
			c.noLocalUntil.Store(c.o.Now().Add(2 * growthWait).UnixNano())
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

// deposed reports whether this node runs a Solo crawl it does not lead:
// the results it holds are of a leadership it lost (see stage).
func (n *nodeSide) deposed() bool { return n.c.o.Solo && !n.c.db.IsLeader() }

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
// staged like any other's. A Solo node that no longer leads stages all it
// has at once: its parts go to the new leader after the fence, and what
// is not staged by then is fetched again.
func (n *nodeSide) stage(ctx context.Context, force bool) error {
	select {
	case n.stageSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("rounds: stage: waiting for the stage pass under way: %w", ctx.Err())
	}
	defer func() { <-n.stageSem }()
	c := n.c
	force = force || n.deposed()
	if d := n.deposedStageDelay.Load(); d > 0 && n.deposed() {
		sleepCtx(ctx, time.Duration(d))
	}
	now := c.o.Now()
	parts := n.heldParts()
	slices.SortFunc(parts, func(a, b *nodePart) int {
		if a.ref.round != b.ref.round {
			return cmp.Compare(a.ref.round, b.ref.round)
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
	if n.deposed() {
		return n.release(ctx)
	}
	return nil
}

// release writes, on a deposed Solo node that has staged every result it
// holds, its release marker for the leadership its replica knows of (the
// leader token), once per leadership, once its requests in flight have
// ended: the new leader moves this node's parts when it sees it, not only
// after Options.ReleaseWait, and lets their hosts go from then on. Called
// by the stage pass (stageSem held).
func (n *nodeSide) release(ctx context.Context) error {
	c := n.c
	tok, err := c.st.User(leaderKey)
	if err != nil || tok == nil || bytes.HasPrefix(tok, []byte(c.id+"#")) || bytes.Equal(tok, n.releasedTo) {
		return err // no new leader's token yet, or released to it already
	}
	n.mu.Lock()
	f := n.fetch
	n.mu.Unlock()
	if f != nil && f.Stats().InFlight > 0 {
		return nil // their results come first (the report loop aborts them if they take too long)
	}
	parts := n.heldParts()
	for _, p := range parts {
		if p.revoked.Load() {
			continue
		}
		p.mu.Lock()
		unstaged := len(p.results) > 0 || p.complete && !p.done
		p.mu.Unlock()
		if unstaged || p.acc != nil && !p.acc.empty() {
			return nil // the next pass stages the rest
		}
	}
	owns, err := n.ownsParts()
	if err != nil {
		return err
	}
	if !owns {
		n.releasedTo = bytes.Clone(tok) // nothing to release: no leader waits for it
		n.releasedNone.Add(1)
		return nil
	}
	b := store.NewBatch()
	b.PutUser(releaseKey(c.id), tok)
	res, err := c.db.Apply(ctx, b)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("rounds: release parts to the new leader: %w", err)
	}
	n.releasedTo = bytes.Clone(tok)
	c.log.Info("rounds: deposed: every result held is staged, the parts released to the new leader", "parts", len(parts))
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
	n0 := len(b.Ops) + len(b.Requeues) + len(b.Hops) + len(b.Links) + len(b.LastMods) + len(b.NearDups) + len(b.Directives)
	for _, res := range results {
		b.Stats.count(res)
		switch res.Kind {
		case fetcher.KindRobots:
			continue
		case fetcher.KindSitemap:
			for i, l := range res.Links {
				emit(l, credit{depth: 1})
				if c.o.Refetch.On() && i < len(res.LastMods) && !res.LastMods[i].IsZero() {
					b.LastMods = append(b.LastMods, lastModHint{URL: l, LastMod: res.LastMods[i].UnixMilli()})
				}
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
			if c.blocked(res.Host) || int(h.Failures) < c.o.MaxRetries+hostGrace && c.requeueAgain(res.URL) {
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
		if c.o.Refetch.On() && op.Status == store.StatusFetched {
			// What the update's schedule needs (its times come there).
			op.Schedule = &store.Schedule{ETag: res.ETag, LastModified: res.LastModified, Change: fetchChange(res)}
		}
		if res.NotModified {
			// A 304 has no links to give its cash to: the page keeps it
			// (nothing spent, nothing distributed) until a fetch with a
			// body, or a revisit from the link store, passes it on.
			op.Spend = 0
			b.Ops = append(b.Ops, op)
			continue
		}
		b.Ops = append(b.Ops, op)
		if h, ok := directivesOf(res, op.Status); ok {
			b.Directives = append(b.Directives, h)
		}
		var links, embeds []string
		switch {
		case res.Status == store.StatusFetched:
			links, embeds = res.Links, res.Embeds
			if res.NearDupOf != "" {
				b.NearDups = append(b.NearDups, nearDupHint{URL: res.URL, Of: res.NearDupOf})
			}
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
		if len(embeds) > 0 {
			// A page's requisites are as deep as the page (a page at
			// MaxDepth still gets its images, a style sheet's images are
			// as deep as its page), and ranked with it (distributeEmbeds).
			acc.virtual.Add(distributeEmbeds(emit, res.Cash, damping, links, depth, embeds, res.Depth))
			continue
		}
		acc.virtual.Add(distribute(emit, res.Cash, damping, links, depth))
	}
	acc.size += 64 * (len(b.Ops) + len(b.Requeues) + len(b.Hops) + len(b.Links) + len(b.LastMods) + len(b.NearDups) + len(b.Directives) - n0)
	return nil
}

// directivesOf returns the directives hint of a page's final result of
// status st (a 304 has none: the page keeps its last fetch's): a fetched
// page's noindex and canonical (one the crawl database does not take, or
// the page's own URL, left out), and for a refetch that names neither the
// zero hint, which clears what its last fetch recorded. ok is false for a
// first fetch that names neither: it has nothing to record.
func directivesOf(res *fetcher.Result, st store.Status) (h directivesHint, ok bool) {
	h.URL = res.URL
	if st == store.StatusFetched {
		h.D.NoIndex = res.NoIndex
		if c := res.Canonical; c != "" && c != res.URL && store.ValidURL(c) {
			h.D.Canonical = c
		}
	}
	return h, h.D != (store.Directives{}) || res.Prev != (fetcher.Prev{})
}

// fetchChange is what a page's fetch found against its previous fetch.
func fetchChange(res *fetcher.Result) store.Change {
	switch {
	case res.Prev == (fetcher.Prev{}):
		return store.ChangeNone
	case res.NotModified || res.Unchanged:
		return store.ChangeUnchanged
	default:
		return store.ChangeChanged
	}
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
	slices.SortFunc(b.Credits, func(x, y target) int { return cmp.Compare(x.url, y.url) })
	return &b
}

// count adds one result to the counters.
func (s *stageStats) count(res *fetcher.Result) {
	s.Bytes += res.Bytes
	s.Wait += int64(res.Wait)
	s.TrapRepetition += int64(max(res.Traps.Repetition, 0))
	s.TrapCalendar += int64(max(res.Traps.Calendar, 0))
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
		if res.Prev != (fetcher.Prev{}) {
			s.Refetches++
			switch {
			case res.NotModified:
				s.NotModified++
			case res.Unchanged:
				s.Unchanged++
			default:
				s.Changed++
			}
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

// ownsParts reports whether a part of a round in flight is this node's and
// not done, as its replica has it.
func (n *nodeSide) ownsParts() (bool, error) {
	c := n.c
	s, err := loadState(c.st)
	if err != nil {
		return false, err
	}
	owns := false
	for _, a := range s.Active {
		err := c.st.UserScan(ownPrefix(a.Round), func(k string, v []byte) error {
			o, err := decodeOwner(v)
			if err != nil || o.Node != c.id || owns {
				return err
			}
			id, err := partID(k)
			if err != nil {
				return err
			}
			d, err := c.st.User(doneKey(a.Round, id))
			owns = err == nil && d == nil
			return err
		})
		if err != nil || owns {
			return owns, err
		}
	}
	return false, nil
}

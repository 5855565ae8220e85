package rounds

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/rounds/plan"
)

// The leader side of a site's rounds, on the node that leads the crawl
// database: it plans every round (generate, then the fetch list split over
// the live nodes by politeness unit), watches the nodes' reports and gives
// the parts of a node that died or is stopping to the others, starts a
// round's update once every part is staged, and ends the crawl. Everything
// it decides is in the crawl database, so a new leader continues where the
// old one stopped; the rules themselves are package plan's.

// ErrNotLeader: a report reached a node that does not lead the site.
var ErrNotLeader = errors.New("rounds: this node does not lead the site")

// leader is the leader side's state while this node leads.
type leader struct {
	c     *Crawler
	f     Fetcher
	token []byte
	det   *plan.Detector
	// members: the site's nodes this leader has seen among the members
	members map[string]bool
	start   time.Time

	// refreshed: the applied index and active rounds the last refresh
	// saw (see refresh).
	refreshed unchanged[refreshKey]

	stepMu  sync.Mutex // held by a step and by Heard: a node's report never interleaves with moves of its parts
	mu      sync.Mutex
	reports map[string]NodeReport

	ips    map[string][]netip.Addr  // host → addresses, for units by address
	last   map[string]plan.Last     // host → node that fetched it last, and when it is free again
	lastIP map[netip.Addr]plan.Last // the same for addresses (units by address)
	plans  map[uint64]*roundPlan    // the parts of the rounds in flight
	sent   []assignment             // parts given recently, not yet in their node's report

	// fetched is the page budget used per host, as of the updates applied:
	// read from the crawl database the first time a host is generated in
	// this leadership, then counted from the updates' fetch results.
	fetched map[string]int64
	// pldFetched is the same per registrable domain (--pld-budget): read
	// with store.DomainFetched, then counted from the updates.
	pldFetched map[string]int64
	// pldWant is, on a shard sharing --pld-budget (Options.Domains), the
	// domains the last pick found at this shard's cap with URLs left:
	// asked for more after the pick. pldWaiting: that pick
	// found one whose budget is not all given out, so this shard may yet
	// get more of it (the site's crawl must not end meanwhile); yieldedAt
	// is when this shard last gave back what others want.
	pldWant    map[string]bool
	pldWaiting bool
	yieldedAt  time.Time

	// rates is the pages' change rates, for the optimal refetch schedule.
	rates rateState

	// busyUntil is when each host's generated URLs are projected to be
	// done at its own pace (generate's per-host budget).
	busyUntil   map[string]time.Time
	busyUntilIP map[netip.Addr]time.Time // the same for addresses, with an address delay
	// took is what a request to a host takes, learned from the nodes'
	// reports (learnTook): part of its pace, since its next request
	// starts its delay after the end of the last. Hosts whose requests take
	// under a millisecond are left out (0).
	took          map[string]time.Duration
	ipHosts       map[netip.Addr]int // hosts of each address in the newest round generated
	frontierEmpty bool
	genIndex      uint64 // the applied index before the generate that found nothing
	retryAt       time.Time
	replanned     time.Time // when parts last moved (status)
	resets        []partRef // local parts of another node whose done marker is to go
	moves         int
	// awaiting: this Solo leader waits for a former leader's release;
	// released: it no longer does (awaitRelease).
	awaiting, released bool
	releasedAt         time.Time       // when released became true (plan.Lead.Released)
	releasedBy         map[string]bool // former leaders that released (plan.Lead.ReleasedBy)

	// inUpdate counts the rounds given to the updater whose statistics
	// line is not yet written; lastLine is the round of the last line
	// this leadership wrote. Both belong to the loop (run and step): the
	// crawl ends only when every round's line is written, and its end
	// goes on the line written last, whatever its round (updates go in
	// the order fetches finish, which is not always the rounds' order).
	inUpdate int
	lastLine uint64

	// refillAt is when the generate that found nothing would find a
	// host left out for being busy ready for more (plan.Refill; zero:
	// none); genTook is how long the last generate that gave URLs took.
	refillAt time.Time
	genTook  time.Duration
}

// assignment is a part given to a node at a time.
type assignment struct {
	node string
	at   time.Time
	urls int
}

// roundPlan is what the leader keeps of a round's plan.
type roundPlan struct {
	parts   map[int]*planPart
	perHost map[string]int // URLs per host, for the page budget
	perPLD  map[string]int // the same per registrable domain (domains), for --pld-budget
}

// planPart is a part as the leader sees it.
type planPart struct {
	id       int
	hosts    []string
	urls     int
	ownerRaw []byte
	owner    partOwner
	done     bool
}

// NodeView is a node of the site as the leader sees it (for status).
type NodeView struct {
	ID       string      `json:"id"`
	Role     string      `json:"role"` // leader or follower
	Alive    bool        `json:"alive"`
	LastSeen time.Time   `json:"last_seen"`
	Report   *NodeReport `json:"report,omitempty"`
}

// ReportReply is the leader's answer to a node's report.
type ReportReply struct {
	// Index is the leader's applied index when it took the report: a
	// node that paused (it had lost the leader) resumes only once its
	// replica has applied it, so it sees the parts moved away meanwhile.
	Index uint64 `json:"index"`
}

// Heard takes a node's report; it fails with ErrNotLeader on a node that
// does not lead the site (the node then finds the leader again).
func (c *Crawler) Heard(r NodeReport) (ReportReply, error) {
	c.mu.Lock()
	l := c.lead
	c.mu.Unlock()
	if l == nil {
		return ReportReply{}, ErrNotLeader
	}
	// A report waits for a step in progress: a move of this node's parts
	// decided before the report is then applied, and in the index the
	// node waits for before it fetches again.
	l.stepMu.Lock()
	defer l.stepMu.Unlock()
	l.heard(r)
	return ReportReply{Index: c.st.AppliedIndex()}, nil
}

func (c *Crawler) heard(r NodeReport) (ReportReply, error) { return c.Heard(r) }

func (l *leader) heard(r NodeReport) {
	now := l.c.o.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.learnTook(r.Took)
	r.Took = nil // learned; the report is kept for its other fields
	l.reports[r.ID] = r
	l.det.Heard(r.ID, now)
}

// Nodes returns the site's nodes as this node sees them: as the leader, with
// their reports; otherwise nil.
func (c *Crawler) Nodes() []NodeView {
	c.mu.Lock()
	l := c.lead
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	members, err := c.db.Members()
	if err != nil {
		return nil
	}
	now := c.o.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []NodeView
	for id := range members {
		v := NodeView{ID: id, Role: "follower", Alive: l.det.Alive(id, now), LastSeen: l.det.LastSeen(id)}
		if id == c.id {
			v.Role = "leader"
		}
		if r, ok := l.reports[id]; ok {
			r := r
			v.Report = &r
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// token returns the leader token, nil if this node does not lead.
func (c *Crawler) token() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lead == nil {
		return nil
	}
	return c.lead.token
}

// newBatch returns a batch for the leader's writes: guarded by its token,
// so that once another node leads they are refused.
func (c *Crawler) newBatch() *store.Batch {
	b := store.NewBatch()
	if t := c.token(); t != nil {
		b.Guard(leaderKey, t)
	}
	return b
}

// applyLeader applies a leader's batch; a refused guard is errDeposed.
func (c *Crawler) applyLeader(ctx context.Context, b *store.Batch) (*store.Result, error) {
	res, err := c.apply(ctx, b)
	if errors.Is(err, store.ErrGuard) {
		return nil, fmt.Errorf("%w: %w", errDeposed, err)
	}
	return res, err
}

// putState writes the round state (with whatever else b holds).
func (c *Crawler) putState(ctx context.Context, b *store.Batch, s State) error {
	b.PutRound(s.encode())
	if _, err := c.applyLeader(ctx, b); err != nil {
		return fmt.Errorf("rounds: save round state: %w", err)
	}
	c.mu.Lock()
	c.state = s.clone()
	c.mu.Unlock()
	return nil
}

// lead runs the leader side until ctx is done (leadership lost, or the node
// stops), the site finishes, or a failure.
func (c *Crawler) leadSite(ctx context.Context, f Fetcher, maxRounds int) error {
	if err := c.db.Barrier(ctx); err != nil {
		return fmt.Errorf("rounds: lead: %w", err)
	}
	if c.o.Domains != nil {
		if err := c.o.Domains.Sync(ctx); err != nil {
			return fmt.Errorf("rounds: lead: %w", err)
		}
	}
	now := c.o.Now()
	l := &leader{c: c, f: f, det: plan.NewDetector(c.o.FailTimeout, now), members: map[string]bool{}, start: now, reports: map[string]NodeReport{},
		ips: map[string][]netip.Addr{}, last: map[string]plan.Last{}, lastIP: map[netip.Addr]plan.Last{}, plans: map[uint64]*roundPlan{}, fetched: map[string]int64{}, pldFetched: map[string]int64{}, busyUntil: map[string]time.Time{}, busyUntilIP: map[netip.Addr]time.Time{}, took: map[string]time.Duration{}}
	l.token = fmt.Appendf(nil, "%s#%d", c.id, time.Now().UnixNano())
	b := store.NewBatch()
	b.PutUser(leaderKey, l.token)
	if _, err := c.apply(ctx, b); err != nil {
		return fmt.Errorf("rounds: lead: claim: %w", err)
	}
	c.mu.Lock()
	c.lead = l
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.lead = nil
		c.mu.Unlock()
		c.idleIndex.Store(0)
	}()
	c.stateMu.Lock()
	s, err := loadState(c.st)
	c.stateMu.Unlock()
	if err != nil {
		return err
	}
	if s.Finished != nil {
		if s.Finished.At.After(c.started) {
			return nil // the site finished while this node ran: every node stops
		}
		s.Finished, s.StopAt = nil, 0 // a new run
	}
	s.StopAt = 0
	if maxRounds > 0 {
		s.StopAt = s.Next - 1 + uint64(maxRounds)
		if prev, _ := loadState(c.st); prev.StopAt > 0 && prev.Finished == nil {
			s.StopAt = prev.StopAt // a run in progress keeps its limit
		}
	}
	if err := c.putState(ctx, c.newBatch(), s); err != nil {
		return err
	}
	if len(c.o.Seeds) > 0 {
		n, err := c.Seed(ctx, c.o.Seeds)
		if err != nil {
			return err
		}
		c.log.Info("rounds: seeded", "new", n, "given", len(c.o.Seeds))
	}
	if err := l.resumeGenerate(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	s = c.state.clone()
	c.mu.Unlock()
	for _, a := range s.Active {
		if err := l.loadPlan(a.Round); err != nil {
			return err
		}
	}
	if err := l.reclaimLocal(ctx); err != nil {
		return err
	}
	c.log.Info("rounds: leading the site", "node", c.id, "next_round", s.Next, "active", len(s.Active))
	return l.run(ctx)
}

// run is the leader's loop.
func (l *leader) run(ctx context.Context) error {
	c := l.c
	type updated struct {
		round uint64
		err   error
	}
	updates := make(chan uint64, 1024) // rounds waiting for their update, in order
	updatedC := make(chan updated, 1)
	uctx, cancelUpdates := context.WithCancel(ctx)
	updaterDone := make(chan struct{})
	go func() { // owner: run; stops when uctx is done
		defer close(updaterDone)
		for {
			select {
			case <-uctx.Done():
				return
			case round := <-updates:
				st, err := c.update(uctx, round)
				if err == nil {
					// The round has left the state: its statistics are
					// written here, before the loop can see no round in
					// flight and end the crawl.
					err = c.roundDone(st)
				}
				select {
				case updatedC <- updated{round, err}:
				case <-uctx.Done():
					return
				}
			}
		}
	}()
	defer func() {
		cancelUpdates()
		<-updaterDone
		// Bounded: a group that has lost its quorum would wait for ever,
		// and the node could not stop (the records are a cache: robots.txt
		// and back-offs are learnt again).
		fctx, cancel := context.WithTimeout(context.Background(), hostFlushTimeout)
		if err := c.hosts.flush(fctx); err != nil {
			c.log.Warn("rounds: save host records", "err", err)
		}
		cancel()
		c.setPhase("idle")
	}()
	c.mu.Lock()
	for _, a := range c.state.Active {
		if a.Phase == PhaseUpdate {
			updates <- a.Round
			l.inUpdate++
		}
	}
	c.mu.Unlock()

	tick := time.NewTicker(stepTick)
	defer tick.Stop()
	for {
		if err := l.step(ctx, updates); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case u := <-updatedC:
			l.inUpdate--
			if u.err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return u.err
			}
			l.lastLine = u.round
			l.frontierEmpty = false
		case <-tick.C:
		}
		c.mu.Lock()
		fin := c.state.Finished
		c.mu.Unlock()
		if fin != nil {
			return nil
		}
	}
}

// step is one pass of the leader: nodes, moves, finished fetches, generate.
func (l *leader) step(ctx context.Context, updates chan<- uint64) error {
	c := l.c
	// Reports wait for the moves only (Heard): generate may take seconds.
	l.stepMu.Lock()
	locked := true
	defer func() {
		if locked {
			l.stepMu.Unlock()
		}
	}()
	now := c.o.Now()
	nodes, err := l.nodes(now)
	if err != nil {
		return err
	}
	if err := l.refresh(); err != nil {
		return err
	}
	if err := c.ctl.Refresh(); err != nil {
		return err
	}
	if err := l.yieldDomains(ctx, now); err != nil {
		return err
	}
	for _, ref := range l.resets {
		b := c.newBatch()
		b.PutUser(doneKey(ref.round, ref.id), nil)
		if _, err := c.applyLeader(ctx, b); err != nil {
			return fmt.Errorf("rounds: reset part %s: %w", ref, err)
		}
		c.log.Info("rounds: a part done by a node alone is to be staged again", "part", ref.String())
	}
	l.resets = l.resets[:0]
	if l.lead().Fenced(now) {
		// The former leader may fetch until the fence, and stages what
		// it holds as soon as it knows it lost (nodeSide.stage): its
		// parts move here, and rounds are planned, only after it, so
		// that its results are staged first and not fetched again.
		return nil
	}
	if l.awaitRelease(now) {
		return nil
	}
	if err := l.reassign(ctx, nodes, now); err != nil {
		return err
	}
	l.stepMu.Unlock()
	locked = false
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	fetching, updating := 0, 0
	for _, a := range s.Active {
		if a.Phase != PhaseFetch {
			updating++
			continue
		}
		fetching++
		if rp := l.plans[a.Round]; rp != nil && rp.allDone() {
			if err := c.fetchDone(ctx, a.Round); err != nil {
				return err
			}
			if l.fetchedAll(a.Round, now) {
				l.frontierEmpty = false // a host it held may take URLs now
			}
			fetching--
			updating++
			updates <- a.Round
			l.inUpdate++
		}
	}
	// A round whose update is done but whose line is not yet written
	// has left the state: it is still in flight here.
	active := fetching + max(updating, l.inUpdate)
	limit := s.StopAt > 0 && s.Next-1 >= s.StopAt
	if active > 0 {
		c.idleIndex.Store(0)
	}
	if c.paused() {
		// The operator paused the crawl: the rounds in flight finish,
		// no new one is generated, and the crawl does not end.
		c.idleIndex.Store(0)
		return nil
	}
	es := plan.EndState{Active: active, LimitReached: limit, FrontierEmpty: l.frontierEmpty,
		Retrying: !l.retryAt.IsZero(), Federated: c.ending != nil}
	if plan.NeedsBackoff(es) {
		if es.BackingOff, err = c.backingOff(); err != nil {
			return err
		}
		if c.o.Refetch.On() {
			if es.NextDue, err = c.nextDue(); err != nil {
				return err
			}
		}
		if plan.NeedsFederation(es) {
			// In a federation the crawl ends when every site's does:
			// until then URLs may still arrive here.
			c.idleIndex.Store(max(l.genIndex, 1))
			es.FederationDone = c.ending.Finished()
		}
	}
	if l.pldWaiting && !limit {
		// A domain this shard has URLs of may yet get budget another
		// shard gives back: the crawl is not idle (nor over) here.
		c.idleIndex.Store(0)
		es.FederationDone = false
	}
	switch v := plan.End(es); v {
	case plan.EndRounds:
		return l.finish(ctx, EndRounds)
	case plan.EndExhausted:
		return l.finish(ctx, EndExhausted)
	case plan.Backoff:
		c.idleIndex.Store(0)
		l.retryAt = now.Add(backoffPoll)
	case plan.Idle:
		l.retryAt = now.Add(backoffPoll)
	case plan.Waiting:
		// A crawl that refetches sleeps until its next page is due.
		c.idleIndex.Store(0)
		l.retryAt = later(es.NextDue, now.Add(stepTick))
	}
	if l.frontierEmpty && !l.retryAt.IsZero() && !now.Before(l.retryAt) {
		l.frontierEmpty, l.retryAt = false, time.Time{}
	}
	pace := plan.Pace{Fetching: fetching, Updating: updating, Queued: l.queued(nodes, now), Width: c.limits().width, LimitReached: limit}
	if l.frontierEmpty || !plan.Generate(pace) {
		return nil
	}
	c.setPhase(PhaseGenerate)
	defer c.setPhase(PhaseFetch)
	genIndex := c.st.AppliedIndex() // what this generate sees at least
	r, err := l.generate(ctx, nodes)
	if errors.Is(err, plan.ErrNoNode) {
		c.log.Warn("rounds: no node takes work: generate waits", "nodes", len(nodes))
		return nil
	}
	if err != nil {
		return err
	}
	if r == 0 {
		// With a host left out for being busy, look again when it is
		// about to run out rather than after the next update, which at
		// a crawl's tail may come after it ran dry (plan.Refill).
		l.mu.Lock()
		refill := l.refillAt
		l.mu.Unlock()
		l.frontierEmpty, l.retryAt, l.genIndex = true, refill, genIndex
	} else {
		c.idleIndex.Store(0)
	}
	return nil
}

// stepTick is how often the leader steps when nothing wakes it.
const stepTick = 100 * time.Millisecond

// backoffPoll is how often generate looks again while the only URLs left
// belong to hosts backing off.
const backoffPoll = 500 * time.Millisecond

// nodes returns the site's nodes as the planner sees them.
func (l *leader) nodes(now time.Time) ([]plan.Node, error) {
	members, err := l.c.db.Members()
	if err != nil {
		return nil, fmt.Errorf("rounds: site members: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]plan.Node, 0, len(members))
	lead := l.lead()
	for id := range l.members {
		if _, ok := members[id]; !ok {
			delete(l.members, id) // left: a return is a new join
		}
	}
	for id := range members {
		if !l.members[id] {
			// A node that joined since this leader started gets a full
			// fail timeout from now to report, as those at its start
			// did: else a node joining later than that would be dead at
			// once, and the parts it was just given moved away.
			l.members[id] = true
			l.det.Heard(id, now)
		}
		// This node leads: it is alive whatever its reports (they may
		// wait for a step); in a Solo crawl no other node takes work.
		n := plan.Node{ID: id, Alive: lead.Alive(id, l.det.Alive(id, now))}
		if r, ok := l.reports[id]; ok {
			n.Load = int(r.Queued + r.InFlight)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b plan.Node) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// queued estimates the URLs handed out and not started, site-wide: the
// nodes' reports, plus the parts given to a node since its last report
// (a node takes a part within a watch interval of its replica seeing it).
func (l *leader) queued(nodes []plan.Node, now time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var q int64
	for _, n := range nodes {
		if r, ok := l.reports[n.ID]; ok && n.Alive {
			q += r.Queued
		}
	}
	fresh := l.sent[:0]
	for _, a := range l.sent {
		r := l.reports[a.node]
		if r.At.Before(a.at.Add(takeDelay)) && now.Sub(a.at) < l.c.o.FailTimeout {
			q += int64(a.urls)
			fresh = append(fresh, a)
		}
	}
	l.sent = fresh
	return q
}

// takeDelay bounds how long a node takes to see a part given to it and
// submit its URLs (its watch interval, and a margin for its replica).
const takeDelay = 300 * time.Millisecond

// loadPlan reads a round's plan from the crawl database.
func (l *leader) loadPlan(round uint64) error {
	c := l.c
	rp := &roundPlan{parts: map[int]*planPart{}, perHost: map[string]int{}}
	err := c.st.UserScan(roundPrefix(round)+"part/", func(k string, v []byte) error {
		id, err := partID(k)
		if err != nil {
			return err
		}
		pp, err := decodePart(v)
		if err != nil {
			return fmt.Errorf("part %d: %w", id, err)
		}
		p := &planPart{id: id, urls: len(pp.Entries)}
		for _, h := range pp.Hosts {
			p.hosts = append(p.hosts, h.Name)
		}
		for _, e := range pp.Entries {
			rp.perHost[e.Host]++
		}
		rp.parts[id] = p
		return nil
	})
	if err != nil {
		return fmt.Errorf("rounds: read plan of round %d: %w", round, err)
	}
	l.plans[round] = rp
	return l.refreshRound(round, rp)
}

// reclaimLocal takes back, at the start of a leadership, the parts that
// another node did alone (leading a site of one node then): their results
// stayed in that node's fetch segment. Their done markers go, and a round
// already waiting for its update goes back to its fetch phase: the node
// stages them if it is alive (it keeps its segment), or another node
// fetches them again.
func (l *leader) reclaimLocal(ctx context.Context) error {
	c := l.c
	c.stateMu.Lock() // held until the new state is written: writers take turns
	defer c.stateMu.Unlock()
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	changed := false
	for i := range s.Active {
		a := &s.Active[i]
		var refs []partRef
		var by string
		err := c.st.UserScan(donePrefix(a.Round), func(k string, v []byte) error {
			var d partDone
			if err := decodeJSON(v, &d); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if d.Local && d.Node != c.id {
				by = d.Node
				id, err := partID(k)
				if err != nil {
					return err
				}
				refs = append(refs, partRef{a.Round, id})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("rounds: read parts of round %d: %w", a.Round, err)
		}
		if len(refs) == 0 {
			continue
		}
		// The update of a round with local parts is prepared from the
		// node's fetch segment alone: once one of its commands is applied,
		// no other node can prepare the rest. GrowthGate keeps the site
		// from growing while such a round is active, so this cannot be;
		// were it so, preparing the update again here from other data and
		// resuming after the applied commands would corrupt the accounts.
		if applied, err := loadProgress(c.st, a.Round); err != nil {
			return err
		} else if applied > 0 {
			return fmt.Errorf("rounds: round %d: %d update commands applied from %s's local results, which only it has: it must lead to finish the round", a.Round, applied, by)
		}
		b := c.newBatch()
		b.PutUser(progressKey(a.Round), nil)
		for _, ref := range refs {
			b.PutUser(doneKey(ref.round, ref.id), nil)
			if rp := l.plans[ref.round]; rp != nil && rp.parts[ref.id] != nil {
				rp.parts[ref.id].done = false
			}
		}
		if _, err := c.applyLeader(ctx, b); err != nil {
			return fmt.Errorf("rounds: reclaim parts of round %d: %w", a.Round, err)
		}
		c.log.Warn("rounds: parts done by another node alone are to be staged or fetched again", "round", a.Round, "parts", len(refs))
		if a.Phase == PhaseUpdate {
			a.Phase, a.Fetched = PhaseFetch, time.Time{}
			changed = true
		}
	}
	if changed {
		return c.putState(ctx, c.newBatch(), s)
	}
	return nil
}

// delayOf is the longest politeness delay among hosts.
func (l *leader) delayOf(hosts []string) time.Duration {
	d := max(l.c.o.HostDelay, l.c.o.IPDelay)
	for _, h := range hosts {
		d = max(d, l.c.hostDelay(h))
	}
	return d
}

// refresh reads the owners and done markers of the fetching rounds' parts.
func (l *leader) refresh() error {
	c := l.c
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	// Nothing it reads changed since the last refresh (every change of
	// the crawl database moves the applied index): skip its scans, for
	// at most watchIdle.
	key, now := refreshKey{index: c.st.AppliedIndex(), active: len(s.Active)}, c.o.Now()
	if l.refreshed.same(key, now) {
		return nil
	}
	live := map[uint64]bool{}
	for _, a := range s.Active {
		live[a.Round] = true
		rp := l.plans[a.Round]
		if rp == nil {
			if err := l.loadPlan(a.Round); err != nil {
				return err
			}
			continue
		}
		if a.Phase == PhaseFetch {
			if err := l.refreshRound(a.Round, rp); err != nil {
				return err
			}
		}
	}
	for r := range l.plans {
		if !live[r] {
			delete(l.plans, r)
		}
	}
	l.refreshed.saw(key, now)
	return nil
}

// refreshKey is what decides whether a refresh can find anything new.
type refreshKey struct {
	index  uint64
	active int
}

func (l *leader) refreshRound(round uint64, rp *roundPlan) error {
	c := l.c
	err := c.st.UserScan(ownPrefix(round), func(k string, v []byte) error {
		id, err := partID(k)
		if err != nil {
			return err
		}
		p := rp.parts[id]
		if p == nil || bytes.Equal(p.ownerRaw, v) {
			return nil
		}
		o, err := decodeOwner(v)
		if err != nil {
			return err
		}
		p.ownerRaw, p.owner = bytes.Clone(v), o
		return nil
	})
	if err != nil {
		return fmt.Errorf("rounds: read owners of round %d: %w", round, err)
	}
	return c.st.UserScan(donePrefix(round), func(k string, v []byte) error {
		id, err := partID(k)
		if err != nil {
			return err
		}
		p := rp.parts[id]
		if p == nil || p.done {
			return nil
		}
		var d partDone
		if err := decodeJSON(v, &d); err != nil {
			return fmt.Errorf("done marker of part %d of round %d: %w", id, round, err)
		}
		if d.Local && d.Node != c.id {
			// The results stayed on the node that led before: that node
			// must stage them (or, gone, the part is fetched again).
			l.resets = append(l.resets, partRef{round, id})
			return nil
		}
		p.done = true
		last := plan.Last{Node: d.Node, FreeAt: d.FreeAt}
		for _, h := range p.hosts {
			if old, ok := l.last[h]; !ok || !d.FreeAt.Before(old.FreeAt) || old.Node == d.Node {
				l.last[h] = last
			}
			// The addresses it was fetched at are busy until then too,
			// for the hosts behind them that were not in this part.
			for _, ip := range l.ips[h] {
				if old, ok := l.lastIP[ip]; !ok || !d.FreeAt.Before(old.FreeAt) || old.Node == d.Node {
					l.lastIP[ip] = last
				}
			}
		}
		return nil
	})
}

func (rp *roundPlan) allDone() bool {
	for _, p := range rp.parts {
		if !p.done {
			return false
		}
	}
	return true
}

// awaitRelease reports whether this Solo leader, past its fence, still
// waits for a former leader to release the parts it holds (see
// plan.Lead.AwaitsRelease). Once no longer, never again in this
// leadership.
func (l *leader) awaitRelease(now time.Time) bool {
	c := l.c
	if !c.o.Solo || l.released {
		return false
	}
	held := map[string]bool{}
	for _, rp := range l.plans {
		for _, p := range rp.parts {
			if !p.done && p.owner.Node != "" && p.owner.Node != c.id {
				held[p.owner.Node] = true
			}
		}
	}
	var holders []plan.Holder
	var waiting []string
	for id := range held {
		h := plan.Holder{Alive: c.o.NodeAlive == nil || c.o.NodeAlive(id)}
		v, err := c.st.User(releaseKey(id))
		h.Released = err == nil && bytes.Equal(v, l.token)
		if h.Released {
			if l.releasedBy == nil {
				l.releasedBy = map[string]bool{}
			}
			l.releasedBy[id] = true
		}
		if h.Alive && !h.Released {
			waiting = append(waiting, id)
		}
		holders = append(holders, h)
	}
	if l.lead().AwaitsRelease(now, holders) {
		if !l.awaiting {
			l.awaiting = true
			c.log.Info("rounds: waiting for a former leader to stage what it holds", "nodes", waiting)
		}
		return true
	}
	l.released, l.releasedAt = true, now
	if len(waiting) > 0 {
		c.log.Warn("rounds: a former leader did not release its parts in time: what it has not staged is fetched again", "nodes", waiting, "wait", c.o.ReleaseWait)
	} else if l.awaiting {
		c.log.Info("rounds: former leaders released their parts", "after", now.Sub(l.start).Round(time.Millisecond))
	}
	return false
}

// reassign gives the parts of nodes that are dead (a Solo crawl's former
// leaders, once released or fenced) to those that take work.
func (l *leader) reassign(ctx context.Context, nodes []plan.Node, now time.Time) error {
	c := l.c
	var held []plan.Held
	l.mu.Lock()
	lastSeen := map[string]time.Time{}
	lead := l.lead()
	for _, n := range nodes {
		// In a Solo crawl a former leader may fetch until its lease
		// runs out: the fence.
		lastSeen[n.ID] = lead.LastSeen(n.ID, l.det.LastSeen(n.ID))
	}
	takes, alive := map[string]bool{}, map[string]bool{}
	for _, n := range nodes {
		takes[n.ID], alive[n.ID] = n.TakesWork(), n.Alive
	}
	for round, rp := range l.plans {
		for _, p := range rp.parts {
			if p.done || p.owner.Node == "" {
				continue
			}
			held = append(held, plan.Held{Round: round, ID: p.id, Node: p.owner.Node, Hosts: p.hosts, URLs: p.urls})
		}
	}
	l.mu.Unlock()
	anyOrphan := false
	for _, h := range held {
		if !takes[h.Node] {
			anyOrphan = true
			break
		}
	}
	if !anyOrphan {
		return nil
	}
	for i := range held {
		if !takes[held[i].Node] {
			// Only for the parts that may move (a read per host). A node
			// silent since lastSeen pauses within half the fail timeout
			// and aborts its requests in flight then (it is dead, or cut
			// off: see reportLoop), so they end by then: after that the
			// hosts' delays.
			held[i].Delay = c.o.FailTimeout + l.delayOf(held[i].Hosts)
		}
	}
	ips := l.ipsOf(ctx, held)
	moves := plan.Reassign(held, nodes, lastSeen, ips)
	for _, m := range moves {
		p := l.plans[m.Round].parts[m.ID]
		// A host of the part that another node fetched since (a part of
		// another round, moved or done meanwhile) is busy until that
		// node's free time too.
		for _, h := range p.hosts {
			if v, ok := l.last[h]; ok && v.Node != m.To && v.FreeAt.After(m.NotBefore) {
				m.NotBefore = v.FreeAt
			}
			for _, ip := range ips[h] {
				if v, ok := l.lastIP[ip]; ok && v.Node != m.To && v.FreeAt.After(m.NotBefore) {
					m.NotBefore = v.FreeAt
				}
			}
		}
		o := partOwner{Node: m.To, Gen: p.owner.Gen + 1, NotBefore: m.NotBefore, Lost: !alive[m.From] || p.owner.Lost}
		b := c.newBatch()
		b.Guard(doneKey(m.Round, m.ID), nil)
		b.Guard(ownKey(m.Round, m.ID), p.ownerRaw)
		b.PutUser(ownKey(m.Round, m.ID), o.encode())
		if _, err := c.applyLeader(ctx, b); err != nil {
			if errors.Is(err, errDeposed) && l.stillLeader() {
				continue // the part was done meanwhile: the next pass sees it
			}
			return fmt.Errorf("rounds: move part %d/%d: %w", m.Round, m.ID, err)
		}
		p.ownerRaw, p.owner = o.encode(), o
		l.mu.Lock()
		l.sent = append(l.sent, assignment{node: m.To, at: c.o.Now(), urls: p.urls})
		l.replanned = now
		l.moves++
		l.mu.Unlock()
		c.log.Warn("rounds: part moved", "round", m.Round, "part", m.ID, "from", m.From, "to", m.To, "not_before", m.NotBefore)
	}
	return nil
}

// stillLeader reports whether the leader key still holds this leader's
// token (a refused command was refused for another of its guards).
func (l *leader) stillLeader() bool {
	v, err := l.c.st.User(leaderKey)
	return err == nil && bytes.Equal(v, l.token)
}

// ipsOf returns the addresses of the held parts' hosts, when units are by
// address.
func (l *leader) ipsOf(ctx context.Context, held []plan.Held) map[string][]netip.Addr {
	if l.c.o.IPDelay <= 0 {
		return nil
	}
	var hosts []string
	for _, h := range held {
		hosts = append(hosts, h.Hosts...)
	}
	return l.resolve(ctx, hosts)
}

// resolve returns the addresses of hosts: from the leader's cache, the host
// records, or Options.Resolve (at most 32 at once, 2 s each).
func (l *leader) resolve(ctx context.Context, hosts []string) map[string][]netip.Addr {
	c := l.c
	out := make(map[string][]netip.Addr, len(hosts))
	var todo []string
	now := c.o.Now()
	for _, h := range hosts {
		if ips, ok := l.ips[h]; ok {
			out[h] = ips
			continue
		}
		if rec, ok, err := c.hosts.LoadHost(h); err == nil && ok && len(rec.IPs) > 0 && now.Before(rec.IPsExpiry) {
			l.ips[h] = rec.IPs
			out[h] = rec.IPs
			continue
		}
		todo = append(todo, h)
	}
	if len(todo) == 0 || c.o.Resolve == nil {
		return out
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, h := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() { // owner: resolve, which waits for it
			defer wg.Done()
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			ips, err := c.o.Resolve(rctx, h)
			cancel()
			if err != nil {
				return
			}
			mu.Lock()
			out[h] = ips
			l.ips[h] = ips
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// finish marks the site's crawl ended: every node sees it and stops. It
// records what the crawl left: a crawl found exhausted whose frontier
// still holds URLs (all of hosts closed for their budget: generate skips
// them) ended at its budget. The last round's line in rounds.jsonl says
// so too.
func (l *leader) finish(ctx context.Context, reason string) error {
	c := l.c
	c.stateMu.Lock() // held until the new state is written: writers take turns
	defer c.stateMu.Unlock()
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	counts := c.st.Counts()
	left, parked := counts.Frontier, uint64(0)
	if !c.o.Refetch.On() {
		// Without refetches only --pld-budget parks URLs (pick).
		parked = counts.Parked
	}
	if reason == EndExhausted && left+parked > 0 {
		reason = EndBudget
	}
	if reason != EndBudget {
		parked = 0
	}
	s.Finished = &Finish{Reason: reason, At: c.o.Now(), Rounds: s.Done, Frontier: left, Parked: parked}
	if err := c.putState(ctx, c.newBatch(), s); err != nil {
		return err
	}
	c.log.Info("rounds: the site's crawl is finished", "reason", reason, "rounds", s.Done, "frontier", left)
	// The line written last in this leadership (every round's line is
	// written before the crawl can end here), or with none, the last
	// round's line if this node wrote it in an earlier leadership.
	last := l.lastLine
	if last == 0 {
		last = s.Next - 1
	}
	if _, err := c.markEnd(last, *s.Finished); err != nil {
		c.log.Warn("rounds: mark the crawl's end in rounds.jsonl", "err", err)
	}
	return nil
}

// fetchDone moves a round whose parts are all staged to its update.
func (c *Crawler) fetchDone(ctx context.Context, round uint64) error {
	if err := c.hosts.flush(ctx); err != nil {
		return err
	}
	c.stateMu.Lock() // held until the new state is written: writers take turns
	defer c.stateMu.Unlock()
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	a := s.active(round)
	if a == nil {
		return fmt.Errorf("rounds: round %d fetched but not in the round state", round)
	}
	a.Phase, a.Fetched = PhaseUpdate, c.o.Now()
	return c.putState(ctx, c.newBatch(), s)
}

// backingOff reports whether the frontier holds URLs of hosts that are
// only backing off for a while (not closed for their budget): the crawl is
// not exhausted while they wait.
func (c *Crawler) backingOff() (bool, error) {
	if !c.ctl.Load().NextUnblock(c.o.Now()).IsZero() {
		return true, nil // a host the operator blocked for a while (control.Host.Until)
	}
	fr, err := c.st.Frontier(store.FrontierQuery{Width: 1000, PerHost: 1})
	if err != nil {
		return false, fmt.Errorf("rounds: read frontier: %w", err)
	}
	for _, e := range fr {
		rec, _, err := c.hosts.LoadHost(e.Host)
		if err != nil {
			return false, err
		}
		if !rec.BackoffUntil.Equal(closedUntil) {
			return true, nil
		}
	}
	return false, nil
}

func (c *Crawler) setPhase(p Phase) {
	c.mu.Lock()
	c.phase = p
	c.mu.Unlock()
}

// lead is what this leader's Solo rules read (plan.Lead): which node
// leads, since when, and the fence.
func (l *leader) lead() plan.Lead {
	return plan.Lead{Self: l.c.id, Solo: l.c.o.Solo, Since: l.start, Fence: l.c.o.Fence, ReleaseWait: l.c.o.ReleaseWait, Released: l.releasedAt, ReleasedBy: l.releasedBy}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Busy is a host or address the leader gave URLs to, projected busy with
// them until Until at its pace.
type Busy struct {
	Name  string
	Delay time.Duration // a host's politeness delay (its own or --host-delay)
	Until time.Time
	Hosts int // an address's hosts in the newest round generated
}

// Busiest returns the n hosts and the n addresses projected busy the
// longest after now, longest first; nil on a node that does not lead.
// Its cost is linear in the hosts given URLs recently. It does not wait
// for a generate that holds the leader's projections: ok is false then.
func (c *Crawler) Busiest(n int, now time.Time) (hosts, ips []Busy, ok bool) {
	c.mu.Lock()
	l := c.lead
	c.mu.Unlock()
	if l == nil || n <= 0 {
		return nil, nil, true
	}
	if !l.mu.TryLock() {
		return nil, nil, false
	}
	for h, t := range l.busyUntil {
		if t.After(now) {
			hosts = topBusy(hosts, Busy{Name: h, Until: t}, n)
		}
	}
	for ip, t := range l.busyUntilIP {
		if t.After(now) {
			ips = topBusy(ips, Busy{Name: ip.String(), Until: t, Hosts: l.ipHosts[ip]}, n)
		}
	}
	l.mu.Unlock()
	for i := range hosts {
		hosts[i].Delay = c.hostPace(hosts[i].Name).delay
	}
	return hosts, ips, true
}

// topBusy inserts b into top (longest first), keeping at most n.
func topBusy(top []Busy, b Busy, n int) []Busy {
	if len(top) == n && !b.Until.After(top[n-1].Until) {
		return top
	}
	i := sort.Search(len(top), func(i int) bool { return b.Until.After(top[i].Until) })
	if len(top) < n {
		top = append(top, Busy{})
	}
	copy(top[i+1:], top[i:])
	top[i] = b
	return top
}

// yieldEvery is how often a shard gives back the --pld-budget others want
// of it (yieldDomains).
const yieldEvery = time.Second

// yieldDomains gives back, every yieldEvery on a shard sharing
// --pld-budget, what other shards want of a domain and this one does not
// use: its cap lowered to its pages fetched and in flight.
func (l *leader) yieldDomains(ctx context.Context, now time.Time) error {
	c := l.c
	budget := c.limits().pldBudget
	if c.o.Domains == nil || budget <= 0 || now.Sub(l.yieldedAt) < yieldEvery {
		return nil
	}
	l.yieldedAt = now
	doms, err := c.o.Domains.Wanted()
	if err != nil || len(doms) == 0 {
		return err
	}
	// Usage from the store (its fetch results are in before their round
	// leaves the state) and the plans held: at worst a round counted
	// twice, never a page missed, so a cap never drops below what the
	// shard has used.
	usage := make(map[string]int64, len(doms))
	for _, dom := range doms {
		n, err := c.st.DomainFetched(dom)
		if err != nil {
			return fmt.Errorf("rounds: yield: %w", err)
		}
		usage[dom] = int64(n)
		for _, rp := range l.plans {
			usage[dom] += int64(rp.domains()[dom])
		}
	}
	return c.o.Domains.Yield(ctx, budget, usage)
}

// hostFlushTimeout bounds the save of the host records when a leader's
// loop ends.
const hostFlushTimeout = 10 * time.Second

// nextDue is the earliest next fetch of a page scheduled for a refetch
// (zero: none).
func (c *Crawler) nextDue() (time.Time, error) {
	d, err := c.st.DueURLs(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), 1)
	if err != nil || len(d) == 0 {
		return time.Time{}, err
	}
	return d[0].NextFetch, nil
}

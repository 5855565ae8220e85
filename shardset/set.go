// Package shardset runs the shards a node of a sharded site holds. A
// sharded site splits its hosts into shards (package shard), each a Raft
// group of R replicas on the nodes' crawldb.Host; the site's meta group
// (every node a replica) keeps the site's sharding Settings and the
// shards' target placement.
//
// A Set, on each node:
//   - opens the replicas the placement gives the node (the site's creator
//     bootstraps every group alone; the others wait to be added) and
//     removes those the placement took away once their group has let the
//     node go;
//   - runs a Solo crawler (package rounds) on every replica, so that the
//     shard's rounds run where its leader is, and a new leader takes over
//     as a site's does;
//   - feeds those crawlers from the node's one fetcher: jobs carry their
//     shard (fetcher.Job.Group), and results, robots.txt records and
//     duplicate checks go back to the shard's crawler;
//   - on the meta group's leader, computes the target placement when the
//     site's nodes change (shard.Place) and writes it;
//   - on each group it leads, carries out the placement's next step for
//     that group (add a voter, hand the leadership over, remove a voter:
//     shard.Steps), one at a time.
package shardset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/route"
	"github.com/meridian-crawler/meridian/shard"
)

// Options configure a Set.
type Options struct {
	// Host holds the node's replicas; Meta is its replica of the site's
	// meta group (opened on Host). Required.
	Host *crawldb.Host
	Meta *crawldb.DB
	// Dir holds each shard's round files, under Dir/shards/<group>.
	// Required.
	Dir string
	// Crawler returns the options of shard s's crawler: the site's crawl
	// settings. The Set fills DB, Dir, NodeID, Solo, Seeds and Router.
	Crawler func(s int) rounds.Options
	// Router returns shard s's router (the URLs its updates find that
	// other shards or sites own go through it), given the shard's crawl
	// database. Required when the site has more than one shard.
	Router func(s int, db *crawldb.DB) (route.Router, error)
	// Seeds returns the seeds of shard s (the site's seeds whose hosts
	// the shard owns); nil: none.
	Seeds func(ctx context.Context, s int) ([]string, error)
	// Rounds is the rounds of each shard (0: until the crawl ends).
	Rounds int
	// Locate gives a host's politeness key (partition.Key of its
	// addresses); nil: the host's name. An error (a lookup that failed)
	// places nothing: the call that needed the key fails and is tried
	// again, as a key recorded from a failed lookup would put the host in
	// another shard than its key from its addresses.
	Locate func(ctx context.Context, host string) (string, error)
	// Client and Scheme ("http" or "https") call the other nodes' APIs
	// (delivery between shards); Client nil: shards on other nodes are
	// unreachable.
	Client *http.Client
	Scheme string
	// Every is how often the Set looks at the placement; 0 → 200 ms.
	Every time.Duration
	// DeadAfter: a node whose state record has not changed for this long
	// (it writes one every 500 ms) is down for the placement: its
	// leaderships go to the others; 0 → 5 s.
	DeadAfter time.Duration
	// ReplaceAfter: a node silent this long is given up: its replicas are
	// re-created on the other nodes (R > 1) and it leaves every group.
	// Until then a node that is down keeps its replicas, so that one that
	// restarts catches up from its groups' logs instead of receiving
	// every replica again by snapshot (Elasticsearch delays the same
	// reallocation by a minute, index.unassigned.node_left.delayed_timeout).
	// 0 → 1 min; at least DeadAfter.
	ReplaceAfter time.Duration
	// ExpectNodes, if above 1, holds each replica's crawler until the
	// site has this many nodes in its placement and the replica's group
	// is as the placement wants it (its voters and its leader), or until
	// ExpectWait has passed since the Set was made: a site whose nodes
	// start together settles its placement before it crawls, instead of
	// moving shards away from a first node that is busy crawling them all.
	ExpectNodes int
	// ExpectWait bounds the wait for ExpectNodes; 0 → 5 min.
	ExpectWait time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Set is one node's shards (see the package doc).
type Set struct {
	o        Options
	log      *slog.Logger
	self     string
	settings Settings
	fetch    atomic.Pointer[fetcher.Fetcher]

	mu    sync.Mutex
	reps  map[int]*replica
	heard map[string]heard // meta leader: each node's state record as last seen

	// steps are the placement steps under way (reconcile, one per shard
	// at most, maxSteps at once); stepSlots bounds them.
	steps     sync.WaitGroup
	stepSlots chan struct{}

	hostShard sync.Map // host → uint32: the shard whose jobs named it last
	dropped   atomic.Int64
	restarts  atomic.Int64 // crawlers started again after a failure (runCrawler)
	leaving   atomic.Bool
	fed       fedState // a site in a federation (federated.go)

	made       time.Time     // when New made the Set (ExpectWait counts from it)
	expectDone atomic.Bool   // ExpectWait has passed: crawlers start at once
	rotate     atomic.Uint64 // step's starting shard, moved on at every step
}

// replica is this node's replica of one shard, and the crawler on it.
type replica struct {
	shard int
	db    *crawldb.DB
	cur   atomic.Pointer[crawlerRef] // the shard's crawler: a new one after a failure
	stop  context.CancelFunc
	done  chan error // the crawler's Run, once it returned
	ended atomic.Bool
	err   error                  // Run's error, once done
	step  atomic.Pointer[string] // the placement step under way (reconcile)
	busy  atomic.Bool            // a reconcile of this replica runs

	acked atomic.Uint64 // outbox entries acked while this node led
	// recv and recvIndex: the batches applied from other shards as the
	// state writer last saw them, and an applied index at or after the
	// last of them (stateLoop only).
	recv      uint64
	recvIndex uint64
}

// crawlerRef is a replica's crawler with its Skip hook.
type crawlerRef struct {
	c    *rounds.Crawler
	skip func(*fetcher.Job) bool
}

// Restarts is how many shard crawlers failed on this node and were
// started again.
func (s *Set) Restarts() int64 { return s.restarts.Load() }

// crawler returns r's crawler now.
func (r *replica) crawler() *rounds.Crawler { return r.cur.Load().c }

// New makes a node's Set. The site's settings must be in its meta group
// (Create, on the node that creates the site; a node that joins reads
// them from its replica once it has caught up).
func New(o Options) (*Set, error) {
	if o.Host == nil || o.Meta == nil || o.Dir == "" || o.Crawler == nil {
		return nil, errors.New("shardset: New needs a Host, a Meta group, a Dir and Crawler options")
	}
	if o.Every <= 0 {
		o.Every = 200 * time.Millisecond
	}
	if o.DeadAfter <= 0 {
		o.DeadAfter = 5 * time.Second
	}
	if o.ReplaceAfter <= 0 {
		o.ReplaceAfter = time.Minute
	}
	o.ReplaceAfter = max(o.ReplaceAfter, o.DeadAfter)
	if o.Scheme == "" {
		o.Scheme = "http"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := ReadSettings(o.Meta.Store())
	if err != nil {
		return nil, err
	}
	if st.Shards > 1 && o.Router == nil {
		return nil, fmt.Errorf("shardset: a site of %d shards needs a Router", st.Shards)
	}
	return &Set{o: o, log: o.Logger, self: o.Host.NodeID(), settings: st, reps: map[int]*replica{}, heard: map[string]heard{}, stepSlots: make(chan struct{}, maxSteps), made: time.Now()}, nil
}

// Settings returns the site's sharding settings.
func (s *Set) Settings() Settings { return s.settings }

// Attach gives the Set the node's fetcher (made with the Set's hooks:
// OnResult, Skip, Seen, Hosts). Call it before Run.
func (s *Set) Attach(f *fetcher.Fetcher) { s.fetch.Store(f) }

// Run runs the node's share of the site until ctx ends or every shard's
// crawl has ended (nil), and stops its crawlers before it returns.
func (s *Set) Run(ctx context.Context) error {
	if s.fetch.Load() == nil {
		return errors.New("shardset: Run before Attach")
	}
	if s.o.Meta.IsLeader() {
		// An earlier run's end: this is a new run.
		if err := s.clearFinished(ctx); err != nil {
			return err
		}
	}
	lctx, stopLoops := context.WithCancel(ctx)
	var loops sync.WaitGroup
	loops.Go(func() { s.deliverLoop(lctx) }) // owner: Run; ends with lctx
	loops.Go(func() { s.fedLoop(lctx) })     // owner: Run; ends with lctx
	loops.Go(func() { s.stateLoop(lctx) })   // owner: Run; ends with lctx
	sctx, stopSteps := context.WithCancel(ctx)
	defer func() {
		stopSteps()
		s.steps.Wait() // before the crawlers they hand over stop
		s.stopAll()
		stopLoops()
		loops.Wait()
	}()
	// Replicas this node has state of are opened first: a node that
	// restarts serves its groups before it reads a placement.
	ids, err := s.o.Host.Groups()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if sh := ShardOfGroup(id); sh >= 0 && sh < s.settings.Shards {
			if err := s.open(ctx, sh, false); err != nil {
				return err
			}
		}
	}
	if err := s.create(ctx); err != nil {
		return err
	}
	t := time.NewTicker(s.o.Every)
	defer t.Stop()
	for {
		if err := s.step(sctx); err != nil && ctx.Err() == nil {
			s.log.Warn("shardset: step", "err", err)
		}
		if s.ended() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// create bootstraps, on the site's creator, every shard's group that was
// never created (alone: the others join by the placement), and then
// records that they were.
func (s *Set) create(ctx context.Context) error {
	if s.settings.Creator != s.self {
		return nil
	}
	if v, err := s.o.Meta.Store().User(createdKey); err != nil || v != nil {
		return err
	}
	for sh := range s.settings.Shards {
		if s.replica(sh) != nil {
			continue
		}
		if err := s.open(ctx, sh, true); err != nil {
			return err
		}
	}
	b := store.NewBatch()
	b.PutUser(createdKey, []byte{1})
	return apply(ctx, s.o.Meta, b)
}

// ended reports whether every shard's crawl has ended on this node: every
// shard has a replica here, and each one's crawler returned (the site's
// crawl finished). A node that holds only some shards runs until stopped.
func (s *Set) ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reps) == 0 {
		return false
	}
	for _, r := range s.reps {
		if !r.ended.Load() {
			return false
		}
	}
	return true
}

// step looks at the placement once: the meta leader updates it, and this
// node opens, removes and reconciles its replicas.
func (s *Set) step(ctx context.Context) error {
	p, raw, err := readPlacement(s.o.Meta.Store())
	if err != nil {
		return err
	}
	if s.o.Meta.IsLeader() {
		if p, err = s.replan(ctx, p, raw); err != nil {
			return err
		}
	}
	if len(p.P.Shards) != s.settings.Shards {
		return nil // not yet written (a joining node's replica catching up)
	}
	var errs []error
	// Shards are looked at from a rotating start, so that the step slots
	// go to every shard in turn, not always to the first ones.
	start := int(s.rotate.Add(1)) % len(p.P.Shards)
	for i := range p.P.Shards {
		sh := (start + i) % len(p.P.Shards)
		target := p.P.Shards[sh]
		mine := slices.Contains(target.Replicas, s.self)
		s.mu.Lock()
		r := s.reps[sh]
		s.mu.Unlock()
		switch {
		case mine && r == nil:
			if err := s.open(ctx, sh, false); err != nil {
				errs = append(errs, err)
			}
		case r != nil && !mine && !r.busy.Load():
			if err := s.maybeRemove(r); err != nil {
				errs = append(errs, err)
			}
		}
		if r != nil && r.db.IsLeader() {
			if placed(r, target) {
				r.step.Store(nil) // the last step is done
			} else {
				s.startReconcile(ctx, r, target)
			}
		}
	}
	return errors.Join(errs...)
}

// placed reports whether r's group is as target wants it: its members
// (voters, no learner) are target's replicas and this node, its leader,
// is target's leader. A placed shard takes no step slot: with the slots
// taken every 200 ms by shards that had nothing to do, the last shards of
// a starved node waited minutes for theirs (bench cluster, R = 3).
func placed(r *replica, target shard.Shard) bool {
	m, err := r.db.Members()
	if err != nil || len(m) != len(target.Replicas) || target.Leader != r.db.Leader() {
		return false
	}
	for _, n := range target.Replicas {
		if _, ok := m[n]; !ok {
			return false
		}
	}
	l, err := r.db.Learners()
	return err == nil && len(l) == 0
}

// maxSteps bounds the placement steps under way at once on a node. A step
// may wait seconds (the growth gate waits for a round's results to be in
// the group, a hand-over for the crawler to stop its fetches), so the
// shards of a node move side by side, not one after another (48 shards
// moving to a new node one at a time took minutes); the bound keeps the
// snapshots sent at once few.
const maxSteps = 8

// startReconcile runs reconcile for r in its own goroutine unless one
// already runs for r or maxSteps run; the next step tries again.
func (s *Set) startReconcile(ctx context.Context, r *replica, target shard.Shard) {
	if !r.busy.CompareAndSwap(false, true) {
		return
	}
	select {
	case s.stepSlots <- struct{}{}:
	default:
		r.busy.Store(false)
		return
	}
	s.steps.Go(func() { // owner: Run, which cancels ctx and waits before it stops the crawlers
		defer func() {
			<-s.stepSlots
			r.busy.Store(false)
		}()
		if err := s.reconcile(ctx, r, target); err != nil && ctx.Err() == nil {
			s.log.Warn("shardset: step", "shard", r.shard, "err", err)
		}
	})
}

// replan computes the target placement from the meta group's voters and
// writes it if it changed (on the meta leader).
func (s *Set) replan(ctx context.Context, p placement, raw []byte) (placement, error) {
	voters, err := s.o.Meta.Voters()
	if err != nil {
		return p, err
	}
	st := s.o.Meta.Store()
	now := time.Now()
	nodes := make([]shard.Node, 0, len(voters))
	for _, v := range voters {
		leaving, err := st.User(leavingKey + v.ID)
		if err != nil {
			return p, err
		}
		nodes = append(nodes, s.placementNode(v.ID, s.seqOf(v.ID), now, leaving != nil))
	}
	target := shard.Place(shard.Input{Shards: s.settings.Shards, Replicas: s.settings.Replicas, Nodes: nodes, Current: p.P})
	if len(target.Shards) == s.settings.Shards && samePlacement(target, p.P) {
		return p, nil
	}
	next := placement{Version: p.Version + 1, P: target, Why: placementWhy(p.P, nodes)}
	v, err := json.Marshal(next)
	if err != nil {
		return p, err
	}
	b := store.NewBatch()
	b.Guard(placementKey, raw)
	b.PutUser(placementKey, v)
	if err := apply(ctx, s.o.Meta, b); err != nil {
		return p, fmt.Errorf("shardset: write placement %d: %w", next.Version, err)
	}
	s.log.Info("shardset: new placement", "version", next.Version, "nodes", len(nodes), "why", next.Why)
	return next, nil
}

// placementWhy says what changed between the nodes of placement prev and
// nodes, the nodes a new placement is made for: "n4 joined", "n2 silent",
// "n3 given up", "n5 leaving", joined by "; " (in that order, each list
// sorted); "the site created" for the first; "rebalance" when no node
// changed (a placement finishing what an earlier one began).
func placementWhy(prev shard.Placement, nodes []shard.Node) string {
	if len(prev.Shards) == 0 {
		return "the site created"
	}
	had := map[string]bool{}
	for _, sh := range prev.Shards {
		for _, id := range sh.Replicas {
			had[id] = true
		}
	}
	var joined, silent, gone, leaving []string
	for _, n := range nodes {
		switch {
		case n.Leaving:
			leaving = append(leaving, n.ID)
		case !n.Alive:
			gone = append(gone, n.ID)
		case n.Down:
			silent = append(silent, n.ID)
		case !had[n.ID]:
			joined = append(joined, n.ID)
		}
	}
	var why []string
	for _, g := range []struct {
		ids  []string
		what string
	}{{joined, "joined"}, {silent, "silent"}, {gone, "given up"}, {leaving, "leaving"}} {
		if len(g.ids) > 0 {
			slices.Sort(g.ids)
			why = append(why, strings.Join(g.ids, ", ")+" "+g.what)
		}
	}
	if len(why) == 0 {
		return "rebalance"
	}
	return strings.Join(why, "; ")
}

// alive reports whether node id has written its state record (every
// stateEvery) within DeadAfter, as this node has watched it: a node it
// has not watched for DeadAfter yet counts as alive, and one that has
// written no record yet (starting) gets six times as long. A node that is
// not alive is down: it leads no shard.
func (s *Set) alive(id string, now time.Time) bool {
	return !s.down(id, s.seqOf(id), now)
}

// placementNode is node id as the placement sees it at now, its state
// record being at sequence seq: this node is alive; another is down
// (leads no shard) once silent for DeadAfter, and given up (not Alive:
// its replicas are re-created elsewhere) once silent for ReplaceAfter.
func (s *Set) placementNode(id string, seq uint64, now time.Time, leaving bool) shard.Node {
	if id == s.self {
		return shard.Node{ID: id, Alive: true, Leaving: leaving}
	}
	return shard.Node{ID: id, Alive: !s.givenUpAt(id, seq, now), Down: s.down(id, seq, now), Leaving: leaving}
}

// givenUp reports whether node id has been silent for ReplaceAfter at now
// (as placementNode counts).
func (s *Set) givenUp(id string, now time.Time) bool { return s.givenUpAt(id, s.seqOf(id), now) }

// givenUpAt is givenUp with id's state record at sequence seq.
func (s *Set) givenUpAt(id string, seq uint64, now time.Time) bool {
	return s.silent(id, seq, now, s.o.ReplaceAfter, "shardset: node silent: given up (its replicas are re-created elsewhere)",
		func(h *heard) *bool { return &h.givenUp })
}

// down reports whether node id, its state record at sequence seq, has
// been silent for DeadAfter at now.
func (s *Set) down(id string, seq uint64, now time.Time) bool {
	return s.silent(id, seq, now, s.o.DeadAfter, "shardset: node silent: down for the placement (it leads no shard)",
		func(h *heard) *bool { return &h.dead })
}

// silent reports whether node id's state record, at sequence seq, has
// not changed for limit at now (six times limit before its first record),
// logging msg the first time it says so (flag: which of heard's marks
// records that).
func (s *Set) silent(id string, seq uint64, now time.Time, limit time.Duration, msg string, flag func(*heard) *bool) bool {
	h := s.observe(id, seq, now)
	if h.seq == 0 {
		limit *= 6 // a node that has not begun to run its shards yet (starting, or catching up)
	}
	if now.Sub(h.at) <= limit {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h = s.heard[id]
	if f := flag(&h); !*f {
		*f = true
		s.heard[id] = h
		s.log.Warn(msg, "node", id, "silent", now.Sub(h.at).Round(time.Millisecond))
	}
	return true
}

// transferFresh is how recently a node must have written its state record
// for a shard's leadership to be handed to it: a leadership transfer to a
// node that has died blocks the shard's writes and pauses its fetches
// until Raft gives up on it (an election timeout), and a dead node is
// declared so only after DeadAfter; within that time every shard placed
// to be led by it tried and timed out (bench cluster --kill-after: 2–4 s
// of stalled writes per shard, on the survivors that had just won its
// groups' elections). Four of its writes' intervals: a live node's record
// changes every stateEvery.
const transferFresh = 4 * stateEvery

// fresh reports whether node id has written its state record within
// transferFresh, as this node has watched it (every node watches every
// record each stateEvery: watchStates).
func (s *Set) fresh(id string, now time.Time) bool {
	return freshAt(s.observe(id, s.seqOf(id), now), now)
}

// freshAt reports whether a node last seen to change its state record as
// h says counts as fresh at now: it has written one (a starting node has
// not), and within transferFresh.
func freshAt(h heard, now time.Time) bool {
	return h.seq != 0 && now.Sub(h.at) <= transferFresh
}

// seqOf is the sequence number of node id's state record in this node's
// replica of the meta group (0: none).
func (s *Set) seqOf(id string) uint64 {
	var ns struct {
		Seq uint64 `json:"seq"`
	}
	if v, err := s.o.Meta.Store().User(stateKey + id); err == nil && v != nil {
		if json.Unmarshal(v, &ns) != nil {
			return 0
		}
	}
	return ns.Seq
}

// observe notes that node id's state record has sequence seq at now, and
// returns what this node knows of it: when the record was last seen to
// change (now if it just did, or if the node was not watched before).
func (s *Set) observe(id string, seq uint64, now time.Time) heard {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.heard[id]
	if !ok || h.seq != seq {
		h = heard{seq: seq, at: now}
		s.heard[id] = h
	}
	return h
}

// heard is when the meta leader last saw a node's state record change.
type heard struct {
	seq     uint64
	at      time.Time
	dead    bool // logged as down
	givenUp bool // logged as given up
}

// open opens this node's replica of shard sh (bootstrapping its group
// alone when boot) and starts its crawler.
func (s *Set) open(ctx context.Context, sh int, boot bool) error {
	g := crawldb.GroupOptions{ID: GroupID(sh)}
	if boot {
		g.Bootstrap = []crawldb.Member{{ID: s.self, RaftAddr: s.o.Host.RaftAddr(), APIAddr: s.o.Host.APIAddr()}}
	}
	db, err := s.o.Host.Group(ctx, g)
	if err != nil {
		return fmt.Errorf("shardset: open shard %d: %w", sh, err)
	}
	o := s.o.Crawler(sh)
	o.DB, o.Dir, o.NodeID, o.Solo = db, s.shardDir(sh), s.self, true
	// A new leader waits for a deposed one to stage what it holds while
	// that node writes its state record (a killed node soon does not).
	o.NodeAlive = func(id string) bool { return s.fresh(id, time.Now()) }
	if s.settings.Shards > 1 {
		// One --pld-budget per domain site-wide, shared by the shards.
		o.Domains = newDomainShares(s.o.Meta, sh, s.settings.Shards)
	}
	if s.o.Router != nil {
		if o.Router, err = s.o.Router(sh, db); err != nil {
			return fmt.Errorf("shardset: shard %d: router: %w", sh, err)
		}
	}
	if s.o.Seeds != nil && boot {
		if o.Seeds, err = s.o.Seeds(ctx, sh); err != nil {
			return fmt.Errorf("shardset: shard %d: seeds: %w", sh, err)
		}
	}
	c, err := rounds.New(o)
	if err != nil {
		return fmt.Errorf("shardset: shard %d: %w", sh, err)
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r := &replica{shard: sh, db: db, stop: stop, done: make(chan error, 1)}
	r.cur.Store(&crawlerRef{c: c, skip: c.Skip()})
	s.mu.Lock()
	s.reps[sh] = r
	s.mu.Unlock()
	go func() { // owner: the Set; stopped by r.stop (close, stopAll)
		s.awaitExpected(rctx, r)
		r.err = s.runCrawler(rctx, r, o)
		r.done <- r.err
	}()
	s.log.Info("shardset: replica open", "shard", sh, "bootstrap", boot)
	return nil
}

// runCrawler runs r's crawler until ctx ends or the shard's crawl does
// (r.ended). A crawler that fails is replaced by a new one on the same
// replica and files (o), after a back-off of a second doubling to a
// minute, as a restart of the node would: a shard whose crawler stopped
// would otherwise count as ended (passive), and the site could end its
// crawl with the shard unfinished. The error that ends it is returned
// (nil when the crawl ended or ctx did).
func (s *Set) runCrawler(ctx context.Context, r *replica, o rounds.Options) error {
	f := groupFetcher{s: s, g: uint32(r.shard)}
	backoff := time.Second
	for {
		err := r.crawler().Run(ctx, f, s.o.Rounds)
		if errors.Is(err, rounds.ErrExhausted) {
			err = nil
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			r.ended.Store(true)
			return nil
		}
		s.log.Error("shardset: shard's crawler failed: a new one starts", "shard", r.shard, "err", err, "after", backoff)
		s.restarts.Add(1)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
		c, nerr := rounds.New(o)
		if nerr != nil {
			// The shard stays open and not ended: its crawl is not done
			// here, and the site must not end as if it were.
			s.log.Error("shardset: shard's crawler cannot start again", "shard", r.shard, "err", nerr)
			return fmt.Errorf("shardset: shard %d: %w", r.shard, nerr)
		}
		if fe := s.fetch.Load(); fe != nil {
			fe.AbortGroup(uint32(r.shard)) // the failed crawler's requests in flight
		}
		old := r.cur.Swap(&crawlerRef{c: c, skip: c.Skip()})
		old.c.Close()
	}
}

// awaitExpected returns once r's crawler may start (Options.ExpectNodes),
// or ctx ends.
func (s *Set) awaitExpected(ctx context.Context, r *replica) {
	if s.o.ExpectNodes <= 1 || s.expectDone.Load() {
		return
	}
	t := time.NewTicker(s.o.Every)
	defer t.Stop()
	for {
		if time.Since(s.made) >= s.expectWait() {
			if !s.expectDone.Swap(true) {
				s.log.Warn("shardset: the site did not settle on its expected nodes in time: crawling anyway", "expect", s.o.ExpectNodes, "waited", s.expectWait())
			}
			return
		}
		if s.expected(r) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// expected reports whether the placement spans ExpectNodes nodes and r's
// group has the voters and the leader it gives the shard.
func (s *Set) expected(r *replica) bool {
	p, _, err := readPlacement(s.o.Meta.Store())
	if err != nil || r.shard >= len(p.P.Shards) {
		return false
	}
	nodes := map[string]bool{}
	for _, sh := range p.P.Shards {
		for _, n := range sh.Replicas {
			nodes[n] = true
		}
	}
	if len(nodes) < s.o.ExpectNodes {
		return false
	}
	return placed(r, p.P.Shards[r.shard])
}

// expectWait is Options.ExpectWait or its default.
func (s *Set) expectWait() time.Duration {
	if s.o.ExpectWait > 0 {
		return s.o.ExpectWait
	}
	return 5 * time.Minute
}

// maybeRemove removes this node's replica r once its group no longer
// counts the node among its voters.
func (s *Set) maybeRemove(r *replica) error {
	m, err := r.db.Members()
	if err != nil {
		return err
	}
	if _, ok := m[s.self]; ok {
		// The group's leader removes this node first; a replica removed
		// may not hear of it from Raft, so its leader's report says so.
		voters, term, reported := s.reportedVoters(r.shard)
		if !reported || term < r.db.Term() || slices.Contains(voters, s.self) || r.db.IsLeader() {
			return nil
		}
	}
	s.close(r)
	if err := s.o.Host.RemoveGroup(GroupID(r.shard)); err != nil {
		return fmt.Errorf("shardset: remove shard %d: %w", r.shard, err)
	}
	if err := rounds.RemoveRoundFiles(s.shardDir(r.shard)); err != nil {
		s.log.Warn("shardset: replica removed, its round files not", "shard", r.shard, "err", err)
		return nil
	}
	s.log.Info("shardset: replica removed", "shard", r.shard)
	return nil
}

// shardDir is where shard sh's crawler keeps its files on this node.
func (s *Set) shardDir(sh int) string { return filepath.Join(s.o.Dir, "shards", GroupID(sh)) }

// close stops r's crawler and forgets r.
func (s *Set) close(r *replica) {
	r.stop()
	<-r.done
	r.done <- r.err // for a later close
	if f := s.fetch.Load(); f != nil {
		f.AbortGroup(uint32(r.shard))
	}
	r.crawler().Close()
	s.mu.Lock()
	if s.reps[r.shard] == r {
		delete(s.reps, r.shard)
	}
	s.mu.Unlock()
}

// stopAll stops every crawler (the replicas stay open: the Host closes
// them).
func (s *Set) stopAll() {
	s.mu.Lock()
	reps := slices.Collect(maps.Values(s.reps))
	s.mu.Unlock()
	for _, r := range reps {
		r.stop()
	}
	for _, r := range reps {
		err := <-r.done
		r.done <- err
		r.crawler().Close()
	}
}

// reconcile carries out, on the leader of r's group, the next step that
// brings the group to its target (one at a time: a step is a Raft
// configuration change, or a leadership transfer).
func (s *Set) reconcile(ctx context.Context, r *replica, target shard.Shard) error {
	if r.ended.Load() {
		// Its crawl is over (its round limit, or the site's end): moving
		// it would only wait on a crawler that no longer stages.
		return nil
	}
	members, err := r.db.Members()
	if err != nil {
		return err
	}
	learners, err := r.db.Learners()
	if err != nil {
		return err
	}
	for _, id := range learners {
		delete(members, id)
	}
	cur := shard.Shard{Replicas: slices.Sorted(maps.Keys(members)), Leader: s.self}
	now := time.Now()
	steps := shard.StepsFor(shard.Placement{Shards: []shard.Shard{cur}}, shard.Placement{Shards: []shard.Shard{target}}, func(id string) bool {
		return s.alive(id, now) && s.fresh(id, now)
	})
	// A learner the target no longer wants (the placement changed while it
	// caught up) is removed first: Steps sees voters only.
	for _, id := range learners {
		if !slices.Contains(target.Replicas, id) {
			steps = append([]shard.Step{{Op: shard.RemoveVoter, Shard: r.shard, Node: id}}, steps...)
			break
		}
	}
	if len(steps) == 0 {
		r.step.Store(nil)
		return nil
	}
	st := steps[0]
	desc := st.String()
	r.step.Store(&desc)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch st.Op {
	case shard.AddVoter:
		if !s.alive(st.Node, time.Now()) {
			s.log.Info("shardset: step waits: node silent", "shard", r.shard, "step", desc)
			return nil
		}
		m, err := s.member(st.Node)
		if err != nil {
			return err
		}
		if len(members) == 1 {
			// A shard of one replica keeps its rounds' results on its
			// node alone (local parts): they go into the group first.
			release, err := r.crawler().GrowthGate(cctx)
			if err != nil {
				return err
			}
			defer release()
		}
		err = r.db.AddVoter(cctx, st.Node, m.RaftAddr, m.APIAddr)
		if err == nil {
			s.log.Info("shardset: voter added", "shard", r.shard, "node", st.Node)
		}
		return err
	case shard.TransferLeader:
		if now := time.Now(); !s.alive(st.Node, now) || !s.fresh(st.Node, now) {
			s.log.Info("shardset: step waits: node silent", "shard", r.shard, "step", desc)
			return nil // the placement moves its shards elsewhere soon
		}
		err := r.crawler().HandOver(cctx, groupFetcher{s: s, g: uint32(r.shard)}, func(ctx context.Context) error {
			return r.db.TransferLeadershipTo(ctx, st.Node)
		})
		if err == nil {
			s.log.Info("shardset: leadership handed over", "shard", r.shard, "to", st.Node)
		}
		return err
	case shard.RemoveVoter:
		err := r.db.RemoveVoter(cctx, st.Node)
		if err == nil {
			s.log.Info("shardset: voter removed", "shard", r.shard, "node", st.Node)
		}
		return err
	}
	return fmt.Errorf("shardset: unknown step %v", st)
}

// member returns a node of the site as the meta group knows it.
func (s *Set) member(id string) (crawldb.Member, error) {
	voters, err := s.o.Meta.Voters()
	if err != nil {
		return crawldb.Member{}, err
	}
	for _, v := range voters {
		if v.ID == id {
			return v, nil
		}
	}
	return crawldb.Member{}, fmt.Errorf("shardset: node %s is not a member of the site", id)
}

// replicas returns the open replicas.
func (s *Set) replicas() []*replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.reps))
}

// locate returns host's politeness key.
func (s *Set) locate(ctx context.Context, host string) (string, error) {
	if s.o.Locate == nil {
		return host, nil
	}
	return s.o.Locate(ctx, host)
}

// replica returns the open replica of shard sh, or nil.
func (s *Set) replica(sh int) *replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reps[sh]
}

// Leave moves this node's replicas to the site's other nodes: it marks the
// node leaving in the meta group (the placement then gives its replicas
// to the others, and the groups' leaders move them, leadership first) and
// returns once the node holds no replica, or ctx ends. Run must be
// running. The caller then removes the node from the meta group.
func (s *Set) Leave(ctx context.Context) error {
	s.leaving.Store(true)
	if err := s.markLeaving(ctx); err != nil {
		return err
	}
	t := time.NewTicker(s.o.Every)
	defer t.Stop()
	for {
		if len(s.replicas()) == 0 {
			s.log.Info("shardset: this node holds no replica: it may leave the site")
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shardset: leave: %d replicas still here: %w", len(s.replicas()), ctx.Err())
		case <-t.C:
		}
	}
}

// markLeaving records in the meta group that this node leaves. The write
// is idempotent, so one whose outcome an election left unknown ("leadership
// lost while committing", also when forwarded to the leader) is sent again
// until ctx ends; a closed or failed crawl database and a refused command
// are returned at once.
func (s *Set) markLeaving(ctx context.Context) error {
	b := store.NewBatch()
	b.PutUser(leavingKey+s.self, []byte{1})
	for attempt := 1; ; attempt++ {
		res, err := s.o.Meta.Apply(ctx, b)
		switch {
		case err == nil && res != nil && res.Err != nil:
			return fmt.Errorf("shardset: mark %s leaving: %w", s.self, res.Err)
		case err == nil:
			return nil
		case errors.Is(err, crawldb.ErrClosed), errors.Is(err, crawldb.ErrFailed), errors.Is(err, store.ErrBadOp), ctx.Err() != nil:
			return fmt.Errorf("shardset: mark %s leaving: %w", s.self, err)
		}
		s.log.Warn("shardset: mark this node leaving: sending it again", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("shardset: mark %s leaving: %w (last: %v)", s.self, ctx.Err(), err)
		case <-time.After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
		}
	}
}

// ShardStatus is one shard as this node sees it.
type ShardStatus struct {
	Shard    int      `json:"id"`
	Group    string   `json:"group"`
	Leader   string   `json:"leader"`             // the node leading the group, as this replica knows ("" if none)
	Term     uint64   `json:"term"`               // the group's Raft term as this replica knows it
	Replicas []string `json:"replicas"`           // the group's voters
	Learners []string `json:"learners,omitempty"` // replicas added and still catching up (not voting yet)
	Target   []string `json:"target"`             // the placement's replicas
	// TargetLeader is the node the placement has lead the shard.
	TargetLeader string `json:"target_leader"`
	// UnderReplicated: fewer voters than the site's target R allows.
	UnderReplicated bool `json:"under_replicated"`
	// Down are the nodes among Replicas and Target whose state record
	// (written every 500 ms) has not changed for DeadAfter, as this node
	// watches them: dead for the placement.
	Down []string `json:"down,omitempty"`
	// URLs, Frontier (unfetched URLs) and Fetched (pages fetched) are the
	// counts of this node's replica of the shard's crawl database.
	URLs     uint64 `json:"urls"`
	Frontier uint64 `json:"frontier"`
	Fetched  uint64 `json:"fetched"`
	Step     string `json:"step,omitempty"` // the placement step under way (on its leader)
	// Moving, for a shard not yet as its placement wants it (its voters,
	// learners or leader), says why the placement moved it (placementWhy).
	Moving   string `json:"moving,omitempty"`
	Finished bool   `json:"finished"`
}

// Status returns the shards this node holds a replica of. Calling it also
// watches the nodes named (Down), as the placement's checks do.
func (s *Set) Status() []ShardStatus {
	p, _, _ := readPlacement(s.o.Meta.Store())
	voters, _ := s.o.Meta.Voters()
	now := time.Now()
	alive := map[string]bool{} // each node asked once
	var out []ShardStatus
	for _, r := range s.replicas() {
		st := ShardStatus{Shard: r.shard, Group: GroupID(r.shard), Finished: r.ended.Load()}
		if p := r.step.Load(); p != nil {
			st.Step = *p
		}
		if m, err := r.db.Members(); err == nil {
			st.Learners, _ = r.db.Learners()
			for _, id := range st.Learners {
				delete(m, id)
			}
			st.Replicas = slices.Sorted(maps.Keys(m))
		}
		st.Leader, st.Term = r.db.Leader(), r.db.Term()
		if r.shard < len(p.P.Shards) {
			st.Target = p.P.Shards[r.shard].Replicas
			st.TargetLeader = p.P.Shards[r.shard].Leader
		}
		st.UnderReplicated = len(st.Replicas) < min(s.settings.Replicas, max(len(voters), 1))
		for _, id := range slices.Concat(st.Replicas, st.Target) {
			if id == s.self || slices.Contains(st.Down, id) {
				continue
			}
			up, ok := alive[id]
			if !ok {
				up = s.alive(id, now)
				alive[id] = up
			}
			if !up {
				st.Down = append(st.Down, id)
			}
		}
		slices.Sort(st.Down)
		if r.shard < len(p.P.Shards) && !placed(r, p.P.Shards[r.shard]) {
			st.Moving = p.Why
			if st.Moving == "" {
				st.Moving = "placement " + strconv.FormatUint(p.Version, 10)
			}
		}
		c := r.db.Store().Counts()
		st.URLs, st.Frontier, st.Fetched = c.URLs, c.Frontier, c.ByStatus[store.StatusFetched]
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ShardStatus) int { return a.Shard - b.Shard })
	return out
}

// Leading returns the crawlers of the shards this node leads, by shard.
func (s *Set) Leading() map[int]*rounds.Crawler {
	out := map[int]*rounds.Crawler{}
	for _, r := range s.replicas() {
		if r.db.IsLeader() {
			out[r.shard] = r.crawler()
		}
	}
	return out
}

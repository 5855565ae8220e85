package shardset

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/termwave"
)

// When a sharded site's crawl ends. A shard is passive when its leader has
// nothing to generate, no round in flight (the crawler's IdleIndex) and
// nothing in its outbox. Each node writes the states of the shards it
// leads into the meta group every stateEvery; the meta group's leader
// reads them in waves (package termwave, which the federation's waves
// between sites use too), and the crawl has ended when two consecutive
// waves find every shard passive with the same counters (batches applied
// in every shard, outbox entries acked by every shard: Mattern's four
// counters, summed), each node's record written anew between them. It
// then writes the end mark, which every shard's Router.Finished reads.

// Keys in the meta group.
const (
	stateKey    = "shardset/state/" // + node
	finishedKey = "shardset/finished"
)

// stateEvery is how often a node writes its shards' states.
const stateEvery = 500 * time.Millisecond

// shardState is a shard's state as its leader saw it.
type shardState struct {
	Term    uint64 `json:"term"` // the group's Raft term as its leader wrote this
	Passive bool   `json:"passive"`
	Recv    uint64 `json:"recv"`    // batches applied here from other shards
	Pending int    `json:"pending"` // outbox entries not yet acked
	Acked   uint64 `json:"acked"`   // entries acked, in all (a count that only grows while this node leads)
	// Voters are the group's voters as its leader sees them: a replica
	// removed from its group may never hear of it from Raft (the leader
	// stops replicating to it), so it learns it here.
	Voters []string `json:"voters,omitempty"`
	// Sites is, in a federation, per other site, the last outbox entry
	// of this shard's that it acknowledged.
	Sites map[string]uint64 `json:"sites,omitempty"`
	// Backs is, in a federation, the shard's hand-backs of other sites'
	// hosts it held (federation.Shard.HandBacks).
	Backs map[string]federation.HandBack `json:"backs,omitempty"`
}

// nodeState is a node's record: the states of the shards it leads.
type nodeState struct {
	Seq uint64 `json:"seq"`
	// Meta is the meta group's applied index on this node before the
	// shards' states were read: a batch from another site whose site
	// record (meta group) is at or before it is in them.
	Meta   uint64             `json:"meta,omitempty"`
	Shards map[int]shardState `json:"shards"`
}

// stateLoop writes this node's shards' states, and on the meta leader runs
// the termination waves, until ctx ends.
func (s *Set) stateLoop(ctx context.Context) {
	t := time.NewTicker(stateEvery)
	defer t.Stop()
	var seq uint64
	var waves termwave.Detector
	var last *wave // a federated site's last wave, for its meta index
	for {
		seq++
		if err := s.writeState(ctx, seq); err != nil && ctx.Err() == nil {
			s.log.Debug("shardset: write state", "err", err)
		}
		s.watchStates(time.Now())
		if s.o.Meta.IsLeader() {
			w, err := s.readWave()
			switch {
			case err != nil:
				s.log.Debug("shardset: termination wave", "err", err)
				waves.Reset()
				last = nil
			case s.fed.on.Load():
				// In a federation, the site is passive towards it; the
				// federation's waves end the crawl.
				since := w.meta
				if last != nil {
					since = min(since, last.meta)
				}
				s.setQuiet(waves.Observe(w.Wave), w.sent, since)
				s.setBacks(w.backs, w.allBacks)
				last = &w
			case waves.Observe(w.Wave):
				if err := s.markFinished(ctx); err != nil {
					s.log.Warn("shardset: mark the end", "err", err)
				}
			}
		} else {
			waves.Reset()
			last = nil
			s.setQuiet(false, nil, 0)
			s.setBacks(nil, true)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchStates notes every node's state record as this node's replica of
// the meta group has it (observe), so that how recently each node wrote
// one is known here within stateEvery (fresh).
func (s *Set) watchStates(now time.Time) {
	var ns struct {
		Seq uint64 `json:"seq"`
	}
	err := s.o.Meta.Store().UserScan(stateKey, func(k string, v []byte) error {
		ns.Seq = 0
		if json.Unmarshal(v, &ns) == nil {
			s.observe(strings.TrimPrefix(k, stateKey), ns.Seq, now)
		}
		return nil
	})
	if err != nil {
		s.log.Debug("shardset: read the nodes' state records", "err", err)
	}
}

// writeState writes the states of the shards this node leads.
func (s *Set) writeState(ctx context.Context, seq uint64) error {
	ns := nodeState{Seq: seq, Meta: s.o.Meta.Store().AppliedIndex(), Shards: map[int]shardState{}}
	for _, r := range s.replicas() {
		if !r.db.IsLeader() {
			continue
		}
		st := r.db.Store()
		_, _, recv, err := federation.InboundTotals(st)
		if err != nil {
			return err
		}
		prefix := outboxPrefix
		var sites map[string]uint64
		if s.fed.on.Load() {
			prefix = "" // and the other sites
			if sites, err = federation.SentTotals(st); err != nil {
				return err
			}
		}
		heads, err := st.OutboxHeads(prefix, 1)
		if err != nil {
			return err
		}
		pending := len(heads) // the other shards (and sites) this one has entries for
		var backs map[string]federation.HandBack
		if v, ok := s.fed.shards.Load(r.shard); ok {
			if d, ok := v.(*fedShard).fs.(backer); ok {
				in, err := d.InDoubt()
				if err != nil {
					return err
				}
				if in {
					pending++ // entries in doubt to settle with a site back
				}
				if in, err = d.BackPending(); err != nil {
					return err
				}
				if in {
					pending++ // a hand-back to a site back
				}
				if backs, err = d.HandBacks(); err != nil {
					return err
				}
			}
		}
		if recv != r.recv {
			// Batches arrived since the last look: the shard is passive
			// only once its leader has looked at its frontier after them.
			r.recv, r.recvIndex = recv, st.AppliedIndex()
		}
		idle := r.crawler().IdleIndex()
		// A shard whose crawler has ended (its round limit) generates no
		// more: it is passive once its outbox is empty.
		passive := (r.ended.Load() || idle != 0 && idle >= r.recvIndex) && pending == 0
		var voters []string
		if m, err := r.db.Members(); err == nil {
			voters = slices.Sorted(maps.Keys(m))
		}
		ns.Shards[r.shard] = shardState{Term: r.db.Term(), Passive: passive, Recv: recv, Pending: pending, Acked: r.acked.Load(), Voters: voters, Sites: sites, Backs: backs}
	}
	v, err := json.Marshal(ns)
	if err != nil {
		return err
	}
	b := store.NewBatch()
	b.PutUser(stateKey+s.self, v)
	return apply(ctx, s.o.Meta, b)
}

// backer is a shard's sender's part in site failures
// (*federation.Shard): its entries in doubt and its hand-backs.
type backer interface {
	InDoubt() (bool, error)
	BackPending() (bool, error)
	HandBacks() (map[string]federation.HandBack, error)
}

// wave is one reading of every node's record: the shards' states as a
// termination wave (termwave), numbered by each node's record, and what a
// federated site's probes need of it.
type wave struct {
	termwave.Wave
	sent map[string]uint64 // per other site, the shards' acknowledged entries summed
	meta uint64            // the least of the nodes' meta indexes (nodeState.Meta)
	// backs merges the shards' hand-backs (shardState.Backs), by site;
	// allBacks: every shard's state was read.
	backs    map[string]federation.HandBack
	allBacks bool
}

// memberStates calls fn with the state record of every member of the
// site (members: the meta group's) in this node's meta replica, in node
// order; the records of nodes that left are skipped.
func (s *Set) memberStates(members map[string]string, fn func(node string, ns nodeState) error) error {
	return s.o.Meta.Store().UserScan(stateKey, func(k string, v []byte) error {
		node := strings.TrimPrefix(k, stateKey)
		if _, ok := members[node]; !ok {
			return nil // a node that left
		}
		var ns nodeState
		if err := json.Unmarshal(v, &ns); err != nil {
			return fmt.Errorf("shardset: state record %s: %w", k, err)
		}
		return fn(node, ns)
	})
}

// readWave reads the records of the site's nodes from the meta replica:
// each shard's state is the one written in its group's latest term (a
// node that led it before may not have written since). A node given up
// (silent for ReplaceAfter: its replicas go elsewhere) is left out: it
// writes no more records, and a wave that waited for a newer one from it
// would never end the crawl while it stays a member of the site.
func (s *Set) readWave() (wave, error) {
	w := wave{sent: map[string]uint64{}, backs: map[string]federation.HandBack{}, allBacks: true}
	members, err := s.o.Meta.Members()
	if err != nil {
		return w, err
	}
	now := time.Now()
	for id := range members {
		if id != s.self && s.givenUp(id, now) {
			delete(members, id)
		}
	}
	seqs := map[string]uint64{}
	states := map[int]shardState{}
	err = s.memberStates(members, func(node string, ns nodeState) error {
		seqs[node] = ns.Seq
		if w.meta == 0 || ns.Meta < w.meta {
			w.meta = ns.Meta
		}
		for sh, st := range ns.Shards {
			if old, ok := states[sh]; !ok || st.Term > old.Term {
				states[sh] = st
			}
		}
		return nil
	})
	if err != nil {
		return w, err
	}
	// A shard's batches to the other shards are counted by its outbox
	// (Pending: none waiting), not per pair: its counters are totals.
	ts := make(map[string]termwave.State, s.settings.Shards)
	for sh := range s.settings.Shards {
		st, ok := states[sh]
		if !ok {
			w.allBacks = false
		}
		for site, hb := range st.Backs {
			w.backs[site] = mergeBack(w.backs[site], hb)
		}
		counters := map[string]uint64{"recv": st.Recv, "acked": st.Acked}
		for site, n := range st.Sites {
			counters["site/"+site] = n
			w.sent[site] += n
		}
		ts[GroupID(sh)] = termwave.State{Passive: ok && st.Passive && st.Pending == 0, Counters: counters}
	}
	w.Wave = termwave.Read(ts, seqs)
	return w, nil
}

// mergeBack merges a shard's hand-back of a site into the site's: pending
// if either is, else every shard's last entry.
func mergeBack(a, b federation.HandBack) federation.HandBack {
	if a.Pending || b.Pending {
		return federation.HandBack{Pending: true}
	}
	out := federation.HandBack{Senders: maps.Clone(a.Senders)}
	if out.Senders == nil {
		out.Senders = map[string]uint64{}
	}
	maps.Copy(out.Senders, b.Senders)
	return out
}

// markFinished writes the end mark (once).
func (s *Set) markFinished(ctx context.Context) error {
	if v, err := s.o.Meta.Store().User(finishedKey); err != nil || v != nil {
		return err
	}
	b := store.NewBatch()
	b.PutUser(finishedKey, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	if err := apply(ctx, s.o.Meta, b); err != nil {
		return err
	}
	s.log.Info("shardset: every shard is done and nothing is in transit: the site's crawl has ended")
	return nil
}

// finished reports whether the site's crawl has ended (the end mark).
func (s *Set) finished() bool {
	v, err := s.o.Meta.Store().User(finishedKey)
	return err == nil && v != nil
}

// clearFinished removes an earlier run's end mark (on the meta leader, at
// the start of a run).
func (s *Set) clearFinished(ctx context.Context) error {
	if !s.finished() {
		return nil
	}
	b := store.NewBatch()
	b.PutUser(finishedKey, nil)
	return apply(ctx, s.o.Meta, b)
}

// reportedVoters returns shard sh's voters as the leader of its latest
// term reported them in the meta group (ok false: no report).
func (s *Set) reportedVoters(sh int) (voters []string, term uint64, ok bool) {
	members, err := s.o.Meta.Members()
	if err != nil {
		return nil, 0, false
	}
	_ = s.o.Meta.Store().UserScan(stateKey, func(k string, v []byte) error {
		if _, member := members[strings.TrimPrefix(k, stateKey)]; !member {
			return nil
		}
		var ns nodeState
		if json.Unmarshal(v, &ns) != nil {
			return nil
		}
		if st, has := ns.Shards[sh]; has && st.Voters != nil && (!ok || st.Term > term) {
			voters, term, ok = st.Voters, st.Term, true
		}
		return nil
	})
	return voters, term, ok
}

package shard

import (
	"errors"
	"fmt"
	"slices"
)

// Node is one node of a site as Place sees it.
type Node struct {
	ID string // unique and non-empty
	// Alive is false for a node the site considers dead: its replicas are
	// re-created elsewhere.
	Alive bool
	// Leaving is true for a node on its way out (site leave): it keeps its
	// replicas until they are re-created elsewhere, then gets none.
	Leaving bool
	// Down is true for a node silent for a while but not given up (Alive
	// still true): it keeps its replicas, as a node that restarts soon
	// comes back to them, but leads no shard while down.
	Down bool
}

// Shard is the placement of one shard.
type Shard struct {
	// Replicas are the IDs of the nodes holding a replica (a Raft voter),
	// in order; no ID twice.
	Replicas []string
	// Leader is the node leading the shard's Raft group, one of Replicas;
	// "" if none is known.
	Leader string
}

// Placement is where every shard of a site is: Shards[i] is shard i.
type Placement struct {
	Shards []Shard
}

// Clone returns a deep copy of p.
func (p Placement) Clone() Placement {
	q := Placement{Shards: make([]Shard, len(p.Shards))}
	for i, s := range p.Shards {
		q.Shards[i] = Shard{Replicas: slices.Clone(s.Replicas), Leader: s.Leader}
	}
	return q
}

// Input is what Place needs.
type Input struct {
	Shards   int    // the site's shard count S, at least 1
	Replicas int    // the site's replication target R, at least 1
	Nodes    []Node // the site's nodes
	// Current is the placement now; empty (or shorter than Shards) for a
	// new site. Replicas on nodes not in Nodes count as on dead nodes.
	Current Placement
}

// Sentinel errors of Validate.
var (
	ErrShards   = errors.New("shard: shard count must be at least 1")
	ErrReplicas = errors.New("shard: replication target must be at least 1")
	ErrNodeID   = errors.New("shard: bad node ID")
	ErrCurrent  = errors.New("shard: current placement has more shards than the shard count")
)

// Validate reports every problem of in at once.
func (in Input) Validate() error {
	var errs []error
	if in.Shards < 1 {
		errs = append(errs, fmt.Errorf("%w: got %d", ErrShards, in.Shards))
	}
	if in.Replicas < 1 {
		errs = append(errs, fmt.Errorf("%w: got %d", ErrReplicas, in.Replicas))
	}
	seen := map[string]bool{}
	for i, n := range in.Nodes {
		switch {
		case n.ID == "":
			errs = append(errs, fmt.Errorf("%w: node %d has an empty ID", ErrNodeID, i))
		case seen[n.ID]:
			errs = append(errs, fmt.Errorf("%w: node %d: ID %q appears twice", ErrNodeID, i, n.ID))
		}
		seen[n.ID] = true
	}
	if in.Shards >= 1 && len(in.Current.Shards) > in.Shards {
		errs = append(errs, fmt.Errorf("%w: %d shards, shard count %d", ErrCurrent, len(in.Current.Shards), in.Shards))
	}
	return errors.Join(errs...)
}

// Place returns the target placement for in. Every shard gets
// r = min(R, live nodes) replicas on distinct live nodes that are not
// leaving (a node that is down counts as live here). Replicas per node
// differ by at most one. Every shard has a leader among its replicas that
// are not down ("" when all are), and leaders per node are as even as those
// replicas allow (no lower maximum exists; TestPlaceEvents and FuzzPlace found
// max−min ≤ 1 in every case they tried, which TestLeaderBalanceTable checks
// for DefaultShards on 1 to 20 nodes).
//
// Moves are minimal: no placement with these properties keeps more of the
// current replicas where they are (replicas on dead or leaving nodes cannot
// stay). Place finds it as a minimum-cost flow (see assign). So a node that
// joins takes replicas from the nodes above the new balance (the most
// loaded), and a dead or leaving node's replicas are re-created on the nodes
// below it (the least loaded); another replica moves only when the balance
// cannot be reached otherwise (a node that shares many shards with the dead
// one cannot take their new replicas). A current leader keeps its shard
// unless its node leads more than its share; leaders then move along the
// shortest chains of transfers that even them out.
//
// Place does not fail: an invalid Input (see Validate) is read as closely as
// it can be: S < 1 gives an empty placement, R < 1 counts as 1, a node ID
// listed twice counts once (dead if either says so), replicas on unknown nodes
// count as on dead ones, duplicate replicas count once, and current shards
// past S are ignored. With no live node, the result has S shards without
// replicas or leaders.
func Place(in Input) Placement {
	if in.Shards < 1 {
		return Placement{}
	}
	R := max(in.Replicas, 1)
	live := liveNodes(in.Nodes)
	L := len(live)
	out := Placement{Shards: make([]Shard, in.Shards)}
	if L == 0 {
		return out
	}
	r := min(R, L)
	down := downNodes(in.Nodes)
	isLive := make(map[string]bool, L)
	for _, id := range live {
		isLive[id] = true
	}

	// Keep the replicas on live nodes, once each.
	for i := range out.Shards {
		var cur Shard
		if i < len(in.Current.Shards) {
			cur = in.Current.Shards[i]
		}
		var keep []string
		for _, id := range cur.Replicas {
			if isLive[id] && !slices.Contains(keep, id) {
				keep = append(keep, id)
			}
		}
		out.Shards[i].Replicas = keep
		if slices.Contains(keep, cur.Leader) && !down[cur.Leader] {
			out.Shards[i].Leader = cur.Leader
		}
	}

	assign(out.Shards, r, live)
	balanceLeaders(out.Shards, slices.DeleteFunc(slices.Clone(live), func(id string) bool { return down[id] }))
	return out
}

// downNodes returns the IDs of the nodes that are down (Node.Down).
func downNodes(nodes []Node) map[string]bool {
	down := map[string]bool{}
	for _, n := range nodes {
		if n.Down {
			down[n.ID] = true
		}
	}
	return down
}

// liveNodes returns the IDs of the nodes that may hold replicas, sorted.
func liveNodes(nodes []Node) []string {
	bad := map[string]bool{}
	for _, n := range nodes {
		if !n.Alive || n.Leaving {
			bad[n.ID] = true
		}
	}
	var live []string
	for _, n := range nodes {
		if n.ID != "" && !bad[n.ID] && !slices.Contains(live, n.ID) {
			live = append(live, n.ID)
		}
	}
	slices.Sort(live)
	return live
}

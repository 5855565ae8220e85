package plan

import "time"

// A Solo crawl's leader: in a Solo crawl (a shard's group) only the
// crawl database's Raft leader fetches, the other voters are replicas
// only, and a new leader waits for the fence before it takes over what
// its predecessor held.

// Lead is what a leader's Solo rules read: which node leads, whether the
// crawl is Solo, since when this node leads and the fence.
type Lead struct {
	// Self is the ID of the node that leads (this one).
	Self string
	// Solo: only the leader fetches (rounds.Options.Solo).
	Solo bool
	// Since is when this node began to lead.
	Since time.Time
	// Fence is how long after Since a former leader may still fetch
	// (rounds.Options.Fence: its Raft lease, and what it takes to learn it
	// lost and stage what it holds).
	Fence time.Duration
}

// Fenced reports whether, at now, a Solo leader still waits for its
// fence: the former leader may fetch until Since + Fence and stages what
// it holds as soon as it knows it lost, so its parts move to this node,
// and rounds are planned, only from then on (its results are then staged
// first, not fetched again). At Since + Fence exactly the fence is over. A
// crawl that is not Solo is never fenced.
func (l Lead) Fenced(now time.Time) bool {
	return l.Solo && now.Before(l.Since.Add(l.Fence))
}

// Alive reports whether node id counts as alive for the split and the
// moves: the leader always (it leads: its own reports may wait for a
// step), no other node in a Solo crawl (they are replicas only and take no
// work), and otherwise heard (the Detector's word on it).
func (l Lead) Alive(id string, heard bool) bool {
	return id == l.Self || !l.Solo && heard
}

// LastSeen is when node id counts as last heard of, for the politeness of
// the parts it held (Reassign lets their hosts go from then plus their
// delays): seen, the detector's time, except that in a Solo crawl another
// node may have led and fetched until the fence was over, so it counts as
// seen then at the earliest.
func (l Lead) LastSeen(id string, seen time.Time) time.Time {
	if l.Solo && id != l.Self {
		if fence := l.Since.Add(l.Fence); fence.After(seen) {
			return fence
		}
	}
	return seen
}

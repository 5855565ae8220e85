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
	// ReleaseWait is how long after the fence a Solo leader waits at most
	// for a former leader that is alive to release the parts it holds
	// (rounds.Options.ReleaseWait).
	ReleaseWait time.Duration
	// Released is when this leader moved on from waiting for former
	// leaders' releases (they released, or the wait ran out); zero while
	// it waits. ReleasedBy names the former leaders that released: their
	// requests ended before they did.
	Released   time.Time
	ReleasedBy map[string]bool
}

// Holder is what a Solo leader knows of a node, not itself, that holds
// parts of the rounds in flight: a former leader.
type Holder struct {
	// Alive: the node may still run (the site's liveness says so).
	Alive bool
	// Released: the node wrote, after it knew this leader led, that it has
	// staged every result it held (rounds' release marker).
	Released bool
}

// AwaitsRelease reports whether at now a Solo leader past its fence still
// keeps the parts that former leaders hold where they are: some holder is
// alive and has not released them yet, and ReleaseWait after the fence
// has not passed. A former leader deposed by an election stages what it
// holds once it learns it lost; a starved one may learn it, or finish
// staging, well after the fence, and what it has not staged when its
// parts move is fetched again. A dead holder is not waited for.
func (l Lead) AwaitsRelease(now time.Time, holders []Holder) bool {
	if !l.Solo || !now.Before(l.Since.Add(l.Fence+l.ReleaseWait)) {
		return false
	}
	for _, h := range holders {
		if h.Alive && !h.Released {
			return true
		}
	}
	return false
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
// delays): seen, the detector's time, except in a Solo crawl. There
// another node may have led and fetched until the fence was over, and a
// deposed leader lets its requests in flight end before it releases its
// parts, and aborts those still in flight ReleaseWait/2 after it last
// led: it counts as seen at the fence's end or at Released, whichever is
// later, at the earliest, and, unless it released, at ReleaseWait/2 after
// Since at the earliest (one the site calls dead is not waited for, but
// it may be alive and starved).
func (l Lead) LastSeen(id string, seen time.Time) time.Time {
	if l.Solo && id != l.Self {
		floor := l.Since.Add(l.Fence)
		if l.Released.After(floor) {
			floor = l.Released
		}
		if abort := l.Since.Add(l.ReleaseWait / 2); !l.ReleasedBy[id] && abort.After(floor) {
			floor = abort
		}
		if floor.After(seen) {
			return floor
		}
	}
	return seen
}

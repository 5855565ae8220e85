package shard

import (
	"fmt"
	"slices"
)

// Op is what a Step does.
type Op uint8

// The kinds of Step.
const (
	// AddVoter adds Node as a voter of Shard's Raft group (it receives a
	// snapshot and catches up).
	AddVoter Op = iota + 1
	// TransferLeader moves Shard's leadership to Node, one of its voters.
	TransferLeader
	// RemoveVoter removes Node from Shard's Raft group.
	RemoveVoter
)

var opNames = [...]string{"", "add-voter", "transfer-leader", "remove-voter"}

// String names the op.
func (o Op) String() string {
	if int(o) < len(opNames) && o > 0 {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Step is one change to one shard's Raft group.
type Step struct {
	Op    Op
	Shard int
	Node  string
}

// String formats the step for logs.
func (s Step) String() string { return fmt.Sprintf("%s shard %d %s", s.Op, s.Shard, s.Node) }

// Steps returns the changes that take current to target, in the order a
// caller executes them, one at a time, each after the previous one has been
// committed. Shard by shard: each replica that moves is a pair, the new voter
// added first, then, if the replica leaving leads the shard, leadership moved
// to the target's leader (or, if that voter is not there yet, to a voter that
// stays), then the old voter removed; so a shard never has fewer voters than
// it has now while a replica moves (with R = 1, the new replica is added
// before the old one is removed) and at most one more. Replicas added without
// one leaving (a shard growing to R as nodes join) and removed without one
// coming (a shard shrinking because nodes left) come after the pairs. When
// all of a shard's moves are done, a last TransferLeader gives it its target
// leader if it has another; these balancing transfers come after every
// shard's moves.
//
// A dead voter is replaced the same way, new voter first: with R = 3 and one
// voter dead, the group has 4 voters of which 3 live until the removal, so
// commits wait for the new voter to catch up (its snapshot) meanwhile.
//
// Shards past the end of either placement count as having no replicas.
func Steps(current, target Placement) []Step { return StepsFor(current, target, nil) }

// StepsFor is Steps where canLead says which nodes can take a leadership
// now (nil: all): when a leaving leader's target successor is not a voter
// yet, the voter that stays and takes the leadership in its place is one
// that can lead, if there is one (a node that is down keeps its replicas
// for a while, and a transfer to it would wait until it returns).
func StepsFor(current, target Placement, canLead func(id string) bool) []Step {
	var moves, transfers []Step
	n := max(len(current.Shards), len(target.Shards))
	for i := range n {
		var cur, tgt Shard
		if i < len(current.Shards) {
			cur = current.Shards[i]
		}
		if i < len(target.Shards) {
			tgt = target.Shards[i]
		}
		var adds, removes []string
		for _, id := range tgt.Replicas {
			if !slices.Contains(cur.Replicas, id) && !slices.Contains(adds, id) {
				adds = append(adds, id)
			}
		}
		for _, id := range cur.Replicas {
			if !slices.Contains(tgt.Replicas, id) && !slices.Contains(removes, id) {
				removes = append(removes, id)
			}
		}
		// The leader's replica leaves last, so that the leader can move to a
		// voter added by then.
		slices.SortStableFunc(removes, func(a, b string) int {
			switch {
			case a == cur.Leader:
				return 1
			case b == cur.Leader:
				return -1
			}
			return 0
		})
		voters := slices.Clone(cur.Replicas)
		leader := cur.Leader
		remove := func(id string) {
			if id == leader && leader != "" {
				to := tgt.Leader
				if !slices.Contains(voters, to) || to == id {
					to = ""
					for _, v := range voters {
						if v != id && slices.Contains(tgt.Replicas, v) && (to == "" || canLead != nil && canLead(v) && !canLead(to)) {
							to = v
						}
					}
				}
				if to != "" {
					moves = append(moves, Step{TransferLeader, i, to})
					leader = to
				}
			}
			moves = append(moves, Step{RemoveVoter, i, id})
			voters = slices.DeleteFunc(voters, func(v string) bool { return v == id })
			if leader == id {
				leader = ""
			}
		}
		k := 0
		for ; k < len(adds) && k < len(removes); k++ {
			moves = append(moves, Step{AddVoter, i, adds[k]})
			voters = append(voters, adds[k])
			remove(removes[k])
		}
		for _, id := range adds[k:] {
			moves = append(moves, Step{AddVoter, i, id})
			voters = append(voters, id)
		}
		for _, id := range removes[k:] {
			remove(id)
		}
		if tgt.Leader != "" && tgt.Leader != leader && slices.Contains(voters, tgt.Leader) {
			transfers = append(transfers, Step{TransferLeader, i, tgt.Leader})
		}
	}
	return append(moves, transfers...)
}

// UnderReplicated returns, in order, the shards of p with fewer than r
// replicas.
func UnderReplicated(p Placement, r int) []int {
	var out []int
	for i, s := range p.Shards {
		if len(s.Replicas) < r {
			out = append(out, i)
		}
	}
	return out
}

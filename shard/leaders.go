package shard

import "slices"

// balanceLeaders gives every shard a leader among its replicas on nodes of
// lead (the nodes that may lead) and evens out leaders per node. Current
// leaders stay; a shard without one gets the replica of lead that leads
// the fewest shards (none when no replica is on a node of lead). Then, while the most and the least
// loaded nodes differ by two or more, leadership moves along the shortest
// chain node → shard it leads → another replica of that shard → … from a
// most loaded node to one at least two below it: each transfer in the chain
// keeps the counts of the nodes in between. When no such chain exists, the
// nodes a most loaded node can reach lead only shards whose replicas are all
// among them, so no placement of leaders over these replicas has a lower
// maximum.
func balanceLeaders(shards []Shard, lead []string) {
	count := make(map[string]int, len(lead))
	for i := range shards {
		if shards[i].Leader != "" {
			count[shards[i].Leader]++
		}
	}
	for i := range shards {
		s := &shards[i]
		if s.Leader != "" {
			continue
		}
		best := ""
		for _, id := range s.Replicas {
			if slices.Contains(lead, id) && (best == "" || count[id] < count[best]) {
				best = id
			}
		}
		if best == "" {
			continue
		}
		s.Leader = best
		count[best]++
	}
	// Bounded: each chain lowers Σ count² by at least 2.
	for range len(shards) * len(shards) {
		if !leaderChain(shards, lead, count) {
			return
		}
	}
}

// leaderChain moves leadership along one shortest chain, over the nodes of
// lead, from a most loaded node to a node at least two below it; false if
// there is none.
func leaderChain(shards []Shard, lead []string, count map[string]int) bool {
	hi := 0
	for _, id := range lead {
		hi = max(hi, count[id])
	}
	type via struct {
		from  string
		shard int
	}
	prev := map[string]via{}
	var queue []string
	for _, id := range lead {
		if count[id] == hi {
			prev[id] = via{shard: -1}
			queue = append(queue, id)
		}
	}
	led := map[string][]int{}
	for i := range shards {
		led[shards[i].Leader] = append(led[shards[i].Leader], i)
	}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, i := range led[x] {
			for _, y := range shards[i].Replicas {
				if _, seen := prev[y]; seen || !slices.Contains(lead, y) {
					continue
				}
				prev[y] = via{from: x, shard: i}
				if count[y] <= hi-2 {
					for n := y; prev[n].shard >= 0; n = prev[n].from {
						shards[prev[n].shard].Leader = n
					}
					count[y]++
					for n := y; ; n = prev[n].from {
						if prev[n].shard < 0 {
							count[n]--
							break
						}
					}
					return true
				}
				queue = append(queue, y)
			}
		}
	}
	return false
}

// leaderCounts returns the number of shards each live node leads.
func leaderCounts(p Placement, live []string) []int {
	out := make([]int, len(live))
	for _, s := range p.Shards {
		if k := slices.Index(live, s.Leader); k >= 0 {
			out[k]++
		}
	}
	return out
}

package shard

import "slices"

// assign gives every shard exactly r replicas on distinct live nodes, with
// replicas per node ⌊S·r/L⌋ or one more, keeping as many of the shards'
// current replicas (shards[i].Replicas: live, distinct) as such a placement
// can. Kept replicas stay in their order; new ones are appended. A leader
// whose replica goes is cleared.
//
// It is a minimum-cost flow: source → shard (capacity r) → node (capacity 1,
// cost −1 where the shard has a replica on the node now, 0 elsewhere) → sink,
// each node's edge to the sink split in a part of capacity ⌊S·r/L⌋ at cost
// −big, which every node must fill, and one more unit at cost 0 when S·r is
// not a multiple of L. big exceeds every replica's cost, so a cheapest flow of
// S·r units first balances the nodes, then keeps the most replicas.
// Successive shortest paths (Bellman–Ford queue, as edge costs are negative)
// find it; the graph has S+L+2 vertices and S·L+S+2L edges.
func assign(shards []Shard, r int, live []string) {
	S, L := len(shards), len(live)
	total := S * r
	floor, extra := total/L, total%L
	big := total + 1
	src, sink := 0, S+L+1
	g := newFlowGraph(S + L + 2)
	for i := range S {
		g.add(src, 1+i, r, 0)
	}
	mid := make([][]int, S) // mid[i][j]: edge index shard i → node j
	for i, s := range shards {
		mid[i] = make([]int, L)
		for j, id := range live {
			cost := 0
			if slices.Contains(s.Replicas, id) {
				cost = -1
			}
			mid[i][j] = g.add(1+i, 1+S+j, 1, cost)
		}
	}
	for j := range L {
		if floor > 0 {
			g.add(1+S+j, sink, floor, -big)
		}
		if extra > 0 {
			g.add(1+S+j, sink, 1, 0)
		}
	}
	g.flow(src, sink, total)
	for i := range shards {
		s := &shards[i]
		var keep, add []string
		for j, id := range live {
			if g.e[mid[i][j]].cap == 0 { // used
				if slices.Contains(s.Replicas, id) {
					keep = append(keep, id)
				} else {
					add = append(add, id)
				}
			}
		}
		// Keep the current order of kept replicas.
		kept := slices.DeleteFunc(slices.Clone(s.Replicas), func(id string) bool { return !slices.Contains(keep, id) })
		s.Replicas = append(kept, add...)
		if !slices.Contains(s.Replicas, s.Leader) {
			s.Leader = ""
		}
	}
}

// flowGraph is a residual graph for minimum-cost flow.
type flowGraph struct {
	e   []flowEdge
	adj [][]int // vertex → indices of its outgoing edges
}

type flowEdge struct {
	to, cap, cost int
}

func newFlowGraph(n int) *flowGraph { return &flowGraph{adj: make([][]int, n)} }

// add adds an edge and its residual twin (index ^ 1); it returns the edge's
// index.
func (g *flowGraph) add(from, to, cap, cost int) int {
	k := len(g.e)
	g.e = append(g.e, flowEdge{to, cap, cost}, flowEdge{from, 0, -cost})
	g.adj[from] = append(g.adj[from], k)
	g.adj[to] = append(g.adj[to], k+1)
	return k
}

// flow sends up to want units from s to t, each along a cheapest path of the
// residual graph; it returns the units sent. Each path carries its bottleneck.
func (g *flowGraph) flow(s, t, want int) int {
	n := len(g.adj)
	const inf = int(^uint(0) >> 2)
	dist := make([]int, n)
	via := make([]int, n)
	inQueue := make([]bool, n)
	sent := 0
	for sent < want {
		for v := range dist {
			dist[v], via[v] = inf, -1
		}
		dist[s] = 0
		queue := []int{s}
		inQueue[s] = true
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			inQueue[v] = false
			for _, k := range g.adj[v] {
				e := g.e[k]
				if e.cap > 0 && dist[v]+e.cost < dist[e.to] {
					dist[e.to] = dist[v] + e.cost
					via[e.to] = k
					if !inQueue[e.to] {
						inQueue[e.to] = true
						queue = append(queue, e.to)
					}
				}
			}
		}
		if dist[t] == inf {
			break
		}
		push := want - sent
		for v := t; v != s; v = g.e[via[v]^1].to {
			push = min(push, g.e[via[v]].cap)
		}
		for v := t; v != s; v = g.e[via[v]^1].to {
			g.e[via[v]].cap -= push
			g.e[via[v]^1].cap += push
		}
		sent += push
	}
	return sent
}

package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// live returns the sorted IDs of the nodes that may hold replicas.
func liveIDs(nodes []Node) []string { return liveNodes(nodes) }

// spread returns the least and the most of counts.
func spread(counts []int) (lo, hi int) {
	if len(counts) == 0 {
		return 0, 0
	}
	return slices.Min(counts), slices.Max(counts)
}

// checkPlacement fails t unless p is a valid target for in: S shards of
// min(R, L) replicas on distinct live nodes, a leader among them, replicas
// and leaders per node within one of each other.
func checkPlacement(t testing.TB, in Input, p Placement) {
	t.Helper()
	live := liveIDs(in.Nodes)
	if len(p.Shards) != in.Shards {
		t.Fatalf("%d shards, want %d", len(p.Shards), in.Shards)
	}
	r := min(max(in.Replicas, 1), len(live))
	down := downNodes(in.Nodes)
	reps := make([]int, len(live))
	for i, s := range p.Shards {
		if len(s.Replicas) != r {
			t.Fatalf("shard %d has %d replicas %v, want %d", i, len(s.Replicas), s.Replicas, r)
		}
		for k, id := range s.Replicas {
			j := slices.Index(live, id)
			if j < 0 {
				t.Fatalf("shard %d: replica on %q, not a live node that stays", i, id)
			}
			if slices.Index(s.Replicas, id) != k {
				t.Fatalf("shard %d: %q holds two replicas", i, id)
			}
			reps[j]++
		}
		canLead := slices.ContainsFunc(s.Replicas, func(id string) bool { return !down[id] })
		if canLead && (!slices.Contains(s.Replicas, s.Leader) || down[s.Leader]) {
			t.Fatalf("shard %d: leader %q is not one of its replicas %v that is up (down %v)", i, s.Leader, s.Replicas, down)
		}
		if !canLead && s.Leader != "" {
			t.Fatalf("shard %d: leader %q without a replica that is up (%v, down %v)", i, s.Leader, s.Replicas, down)
		}
	}
	if lo, hi := spread(reps); hi-lo > 1 {
		t.Fatalf("replicas per node from %d to %d (%v over %v)", lo, hi, reps, live)
	}
	// With nodes down, the shards they hold replicas of have fewer
	// replicas that may lead: no evenness to check.
	if lo, hi := spread(leaderCounts(p, live)); len(down) == 0 && hi-lo > 1 {
		t.Fatalf("leaders per node from %d to %d (%v over %v)", lo, hi, leaderCounts(p, live), live)
	}
}

// bruteKept is the reference for minimal moves, for small inputs: it tries
// every placement of min(R, L) replicas per shard on distinct live nodes with
// replicas per node within one of each other, and returns the most current
// replicas any of them keeps.
func bruteKept(in Input) int {
	live := liveIDs(in.Nodes)
	L := len(live)
	if L == 0 || in.Shards < 1 {
		return 0
	}
	r := min(max(in.Replicas, 1), L)
	var subsets [][]int // r-subsets of nodes, as indices
	var pick func(from int, cur []int)
	pick = func(from int, cur []int) {
		if len(cur) == r {
			subsets = append(subsets, slices.Clone(cur))
			return
		}
		for j := from; j < L; j++ {
			pick(j+1, append(cur, j))
		}
	}
	pick(0, nil)
	has := func(i, j int) bool {
		return i < len(in.Current.Shards) && slices.Contains(in.Current.Shards[i].Replicas, live[j])
	}
	total := in.Shards * r
	hi := (total + L - 1) / L
	load := make([]int, L)
	best := -1
	var place func(i, keptSoFar int)
	place = func(i, keptSoFar int) {
		if i == in.Shards {
			if lo, top := spread(load); top-lo <= 1 {
				best = max(best, keptSoFar)
			}
			return
		}
		for _, sub := range subsets {
			ok, k := true, 0
			for _, j := range sub {
				if load[j] >= hi {
					ok = false
				}
				if has(i, j) {
					k++
				}
			}
			if !ok {
				continue
			}
			for _, j := range sub {
				load[j]++
			}
			place(i+1, keptSoFar+k)
			for _, j := range sub {
				load[j]--
			}
		}
	}
	place(0, 0)
	return best
}

// kept counts the replicas of target that current has on the same node.
func kept(current, target Placement) int {
	n := 0
	for i, s := range target.Shards {
		if i < len(current.Shards) {
			for _, id := range s.Replicas {
				if slices.Contains(current.Shards[i].Replicas, id) {
					n++
				}
			}
		}
	}
	return n
}

// checkSteps applies Steps(current, target) to current one at a time and
// fails t unless each is valid (no voter added twice, leadership only to a
// voter, no removal of an absent voter), no shard ever has fewer voters than
// min(now, target) or more than max(now, target)+1, and the end is target.
func checkSteps(t testing.TB, current, target Placement) []Step {
	t.Helper()
	steps := Steps(current, target)
	p := current.Clone()
	for i := range p.Shards { // Steps reads replicas as a set
		var seen []string
		for _, id := range p.Shards[i].Replicas {
			if !slices.Contains(seen, id) {
				seen = append(seen, id)
			}
		}
		p.Shards[i].Replicas = seen
	}
	for len(p.Shards) < len(target.Shards) {
		p.Shards = append(p.Shards, Shard{})
	}
	floor := make([]int, len(p.Shards))
	ceil := make([]int, len(p.Shards))
	for i := range p.Shards {
		n := len(p.Shards[i].Replicas)
		var m int
		if i < len(target.Shards) {
			m = len(target.Shards[i].Replicas)
		}
		floor[i], ceil[i] = min(n, m), max(n, m)+1
	}
	for k, st := range steps {
		s := &p.Shards[st.Shard]
		has := slices.Contains(s.Replicas, st.Node)
		switch st.Op {
		case AddVoter:
			if has {
				t.Fatalf("step %d %v: already a voter", k, st)
			}
			s.Replicas = append(s.Replicas, st.Node)
		case TransferLeader:
			if !has {
				t.Fatalf("step %d %v: not a voter of %v", k, st, s.Replicas)
			}
			s.Leader = st.Node
		case RemoveVoter:
			if !has {
				t.Fatalf("step %d %v: not a voter", k, st)
			}
			if s.Leader == st.Node && len(s.Replicas) > 1 && slices.ContainsFunc(s.Replicas, func(v string) bool {
				return v != st.Node && slices.Contains(target.Shards[st.Shard].Replicas, v)
			}) {
				t.Fatalf("step %d %v: removes the leader while a voter that stays could lead", k, st)
			}
			s.Replicas = slices.DeleteFunc(s.Replicas, func(v string) bool { return v == st.Node })
			if s.Leader == st.Node {
				s.Leader = ""
			}
		default:
			t.Fatalf("step %d: bad op %v", k, st.Op)
		}
		if n := len(s.Replicas); n < floor[st.Shard] || n > ceil[st.Shard] {
			t.Fatalf("step %d %v: shard has %d voters, want %d..%d", k, st, n, floor[st.Shard], ceil[st.Shard])
		}
	}
	for i, s := range target.Shards {
		got := p.Shards[i]
		if !sameSet(got.Replicas, s.Replicas) || (s.Leader != "" && got.Leader != s.Leader) {
			t.Fatalf("shard %d after steps: %v led by %q, want %v led by %q", i, got.Replicas, got.Leader, s.Replicas, s.Leader)
		}
	}
	return steps
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func nodes(n int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{ID: fmt.Sprintf("n%02d", i+1), Alive: true}
	}
	return out
}

// TestLeaderBalanceTable: the leader balance DefaultShards allows at 1 to 20
// nodes (the table in DefaultShards' comment), reached by Place both for a new
// site of N nodes and for a site grown to N one node at a time, for R = 1
// and R = 3.
func TestLeaderBalanceTable(t *testing.T) {
	// N → most and fewest leaders per node with 24 shards: 24/N rounded up
	// and down.
	table := []struct{ n, most, fewest int }{
		{1, 24, 24}, {2, 12, 12}, {3, 8, 8}, {4, 6, 6}, {5, 5, 4},
		{6, 4, 4}, {7, 4, 3}, {8, 3, 3}, {9, 3, 2}, {10, 3, 2},
		{11, 3, 2}, {12, 2, 2}, {13, 2, 1}, {14, 2, 1}, {15, 2, 1},
		{16, 2, 1}, {17, 2, 1}, {18, 2, 1}, {19, 2, 1}, {20, 2, 1},
	}
	for _, row := range table {
		if row.most != (DefaultShards+row.n-1)/row.n || row.fewest != DefaultShards/row.n {
			t.Fatalf("table row %+v is not ⌈24/N⌉, ⌊24/N⌋", row)
		}
	}
	for _, R := range []int{1, 3} {
		grown := Placement{}
		for _, row := range table {
			for _, c := range []struct {
				name    string
				current Placement
			}{{"new", Placement{}}, {"grown", grown}} {
				in := Input{Shards: DefaultShards, Replicas: R, Nodes: nodes(row.n), Current: c.current}
				p := Place(in)
				checkPlacement(t, in, p)
				lo, hi := spread(leaderCounts(p, liveIDs(in.Nodes)))
				if lo != row.fewest || hi != row.most {
					t.Errorf("R=%d %s N=%d: leaders per node %d..%d, want %d..%d", R, c.name, row.n, lo, hi, row.fewest, row.most)
				}
				if c.name == "grown" {
					checkSteps(t, grown, p)
					grown = p
					break
				}
			}
		}
	}
}

// TestPlaceCases: table of small placements with the target written out.
func TestPlaceCases(t *testing.T) {
	sh := func(leader string, reps ...string) Shard { return Shard{Replicas: reps, Leader: leader} }
	cases := []struct {
		name string
		in   Input
		want Placement
	}{
		{"one node", Input{Shards: 2, Replicas: 3, Nodes: nodes(1)},
			Placement{[]Shard{sh("n01", "n01"), sh("n01", "n01")}}},
		{"no live node", Input{Shards: 2, Replicas: 1, Nodes: []Node{{ID: "a"}},
			Current: Placement{[]Shard{sh("a", "a"), sh("a", "a")}}},
			Placement{[]Shard{{}, {}}}},
		{"balanced stays", Input{Shards: 2, Replicas: 1, Nodes: nodes(2),
			Current: Placement{[]Shard{sh("n02", "n02"), sh("n01", "n01")}}},
			Placement{[]Shard{sh("n02", "n02"), sh("n01", "n01")}}},
		{"leader moves to the joiner, no replica moves (R=2)", Input{Shards: 2, Replicas: 2, Nodes: nodes(2),
			Current: Placement{[]Shard{sh("n01", "n01"), sh("n01", "n01")}}},
			Placement{[]Shard{sh("n02", "n01", "n02"), sh("n01", "n01", "n02")}}},
		{"dead leader's replica re-created, leader among the rest", Input{Shards: 1, Replicas: 2,
			Nodes:   []Node{{ID: "a", Alive: true}, {ID: "b"}, {ID: "c", Alive: true}},
			Current: Placement{[]Shard{sh("b", "a", "b")}}},
			Placement{[]Shard{sh("a", "a", "c")}}},
		{"down leader keeps its replica, leads none", Input{Shards: 2, Replicas: 2,
			Nodes:   []Node{{ID: "a", Alive: true}, {ID: "b", Alive: true, Down: true}},
			Current: Placement{[]Shard{sh("b", "a", "b"), sh("a", "a", "b")}}},
			Placement{[]Shard{sh("a", "a", "b"), sh("a", "a", "b")}}},
		{"shard on a down node alone: no leader (R=1)", Input{Shards: 2, Replicas: 1,
			Nodes:   []Node{{ID: "a", Alive: true}, {ID: "b", Alive: true, Down: true}},
			Current: Placement{[]Shard{sh("b", "b"), sh("a", "a")}}},
			Placement{[]Shard{sh("", "b"), sh("a", "a")}}},
		{"down node given up: replica re-created", Input{Shards: 1, Replicas: 2,
			Nodes:   []Node{{ID: "a", Alive: true}, {ID: "b", Down: true}, {ID: "c", Alive: true}},
			Current: Placement{[]Shard{sh("b", "a", "b")}}},
			Placement{[]Shard{sh("a", "a", "c")}}},
		{"leaving node emptied", Input{Shards: 3, Replicas: 1,
			Nodes:   []Node{{ID: "a", Alive: true}, {ID: "b", Alive: true, Leaving: true}},
			Current: Placement{[]Shard{sh("a", "a"), sh("b", "b"), sh("a", "a")}}},
			Placement{[]Shard{sh("a", "a"), sh("a", "a"), sh("a", "a")}}},
		{"unknown node and duplicate replica dropped", Input{Shards: 1, Replicas: 2, Nodes: nodes(2),
			Current: Placement{[]Shard{sh("zz", "zz", "n02", "n02")}}},
			Placement{[]Shard{sh("n02", "n02", "n01")}}},
		{"S < 1", Input{Shards: 0, Replicas: 1, Nodes: nodes(2)}, Placement{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Place(c.in)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("Place = %v, want %v", got, c.want)
			}
			if c.in.Shards > 0 {
				checkPlacement(t, c.in, got)
				checkSteps(t, c.in.Current, got)
			}
		})
	}
}

// TestPlaceJoinR1: with R = 1, a second node takes one of two shards (and
// leads it); the other stays.
func TestPlaceJoinR1(t *testing.T) {
	cur := Placement{[]Shard{{Replicas: []string{"n01"}, Leader: "n01"}, {Replicas: []string{"n01"}, Leader: "n01"}}}
	in := Input{Shards: 2, Replicas: 1, Nodes: nodes(2), Current: cur}
	p := Place(in)
	checkPlacement(t, in, p)
	if k := kept(cur, p); k != 1 {
		t.Errorf("kept %d replicas of 2, want 1: %v", k, p)
	}
	steps := checkSteps(t, cur, p)
	if len(steps) != 3 {
		t.Errorf("steps %v, want add, transfer, remove", steps)
	}
}

// TestValidate: every problem is reported at once, with what and where.
func TestValidate(t *testing.T) {
	in := Input{Shards: 0, Replicas: 0, Nodes: []Node{{ID: "a"}, {ID: ""}, {ID: "a"}}}
	err := in.Validate()
	for _, want := range []string{"shard count must be at least 1: got 0", "replication target must be at least 1: got 0",
		"node 1 has an empty ID", `node 2: ID "a" appears twice`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	in = Input{Shards: 1, Replicas: 1, Current: Placement{Shards: make([]Shard, 2)}}
	if err := in.Validate(); err == nil || !strings.Contains(err.Error(), "2 shards, shard count 1") {
		t.Errorf("Validate() = %v, want the extra shards named", err)
	}
	if err := (Input{Shards: 48, Replicas: 3, Nodes: nodes(3)}).Validate(); err != nil {
		t.Errorf("Validate() = %v for a good input", err)
	}
}

// TestUnderReplicated names the shards with fewer replicas than R.
func TestUnderReplicated(t *testing.T) {
	in := Input{Shards: 6, Replicas: 3, Nodes: nodes(2)}
	p := Place(in)
	if got := UnderReplicated(p, 3); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
		t.Errorf("2 nodes, R=3: UnderReplicated = %v, want every shard", got)
	}
	in.Nodes, in.Current = nodes(3), p
	p = Place(in)
	if got := UnderReplicated(p, 3); got != nil {
		t.Errorf("3 nodes, R=3: UnderReplicated = %v, want none", got)
	}
	p.Shards[4].Replicas = p.Shards[4].Replicas[:1]
	if got := UnderReplicated(p, 3); !slices.Equal(got, []int{4}) {
		t.Errorf("UnderReplicated = %v, want [4]", got)
	}
}

// TestStepsForAvoidsDown: the leader's replica leaves before the target
// leader is a voter, so a voter that stays takes the leadership in between:
// one that can lead (not a node that is down, where the transfer would
// wait), unless none can.
func TestStepsForAvoidsDown(t *testing.T) {
	cur := Placement{[]Shard{{Replicas: []string{"a", "b"}, Leader: "a"}}}
	tgt := Placement{[]Shard{{Replicas: []string{"b", "c", "d"}, Leader: "d"}}}
	for _, c := range []struct {
		name    string
		canLead func(string) bool
		want    string
	}{
		{"all can lead", nil, "[add-voter shard 0 c transfer-leader shard 0 b remove-voter shard 0 a add-voter shard 0 d transfer-leader shard 0 d]"},
		{"b is down", func(id string) bool { return id != "b" }, "[add-voter shard 0 c transfer-leader shard 0 c remove-voter shard 0 a add-voter shard 0 d transfer-leader shard 0 d]"},
		{"none can", func(string) bool { return false }, "[add-voter shard 0 c transfer-leader shard 0 b remove-voter shard 0 a add-voter shard 0 d transfer-leader shard 0 d]"},
	} {
		if got := fmt.Sprint(StepsFor(cur, tgt, c.canLead)); got != c.want {
			t.Errorf("%s: StepsFor = %s, want %s", c.name, got, c.want)
		}
	}
}

// TestStepsR1: with one replica a move adds the new voter, moves the
// leadership to it, then removes the old one.
func TestStepsR1(t *testing.T) {
	cur := Placement{[]Shard{{Replicas: []string{"a"}, Leader: "a"}}}
	tgt := Placement{[]Shard{{Replicas: []string{"b"}, Leader: "b"}}}
	got := fmt.Sprint(Steps(cur, tgt))
	want := "[add-voter shard 0 b transfer-leader shard 0 b remove-voter shard 0 a]"
	if got != want {
		t.Errorf("Steps = %s, want %s", got, want)
	}
}

// event is one change to a site in TestPlaceEvents.
type event uint8

const (
	evJoin event = iota
	evLeave
	evDie
	evRestart
)

var eventNames = [...]string{"join", "leave", "die", "restart"}

// TestPlaceEvents: random sequences of joins, leaves, deaths and restarts
// over up to 20 nodes (seeded). After each event the target is valid
// (checkPlacement); it keeps as many replicas as any valid placement can
// (bruteKept, for small sites; the optimality certificate of a minimum-cost
// flow otherwise, see checkOptimal); a join, when r stays, adds replicas only
// on the joining node;
// the steps from current to target are safe (checkSteps); and placing again
// from the target changes nothing.
func TestPlaceEvents(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 21))
		S := []int{DefaultShards, 16, 7, 1, 5}[seed%5]
		R := 1 + int(seed%4)
		var ns []Node
		next := 1
		cur := Placement{}
		for step := range 60 {
			ev := event(rng.IntN(4))
			var who string
			before := len(liveIDs(ns))
			switch {
			case ev == evJoin && len(ns) < 20 || len(liveIDs(ns)) == 0 && len(ns) < 20:
				ev = evJoin
				who = fmt.Sprintf("n%02d", next)
				next++
				ns = append(ns, Node{ID: who, Alive: true})
			case ev == evLeave && len(ns) > 1:
				k := rng.IntN(len(ns))
				who = ns[k].ID
				ns[k].Leaving = true
			case ev == evDie:
				k := rng.IntN(len(ns))
				who = ns[k].ID
				ns[k].Alive = false
			case ev == evRestart:
				k := rng.IntN(len(ns))
				who = ns[k].ID
				ns[k].Alive = true
			default:
				continue
			}
			in := Input{Shards: S, Replicas: R, Nodes: slices.Clone(ns), Current: cur}
			tgt := Place(in)
			name := fmt.Sprintf("seed %d step %d S=%d R=%d %s %s (live %d→%d)", seed, step, S, R, eventNames[ev], who, before, len(liveIDs(ns)))
			t.Run(name, func(t *testing.T) {
				checkPlacement(t, in, tgt)
				checkOptimal(t, in, tgt)
				if S*min(R, len(liveIDs(ns))) <= 10 && len(liveIDs(ns)) <= 5 {
					if k, want := kept(cur, tgt), bruteKept(in); k != want {
						t.Fatalf("kept %d replicas, the most possible is %d", k, want)
					}
				}
				live := liveIDs(ns)
				r := min(R, len(live))
				rBefore := min(R, before)
				for i, s := range tgt.Shards {
					var c Shard
					if i < len(cur.Shards) {
						c = cur.Shards[i]
					}
					for _, id := range s.Replicas {
						if ev == evJoin && r == rBefore && id != who && !slices.Contains(c.Replicas, id) {
							t.Fatalf("join of %s added shard %d on %s", who, i, id)
						}
					}
				}
				checkSteps(t, cur, tgt)
				again := Place(Input{Shards: S, Replicas: R, Nodes: ns, Current: tgt})
				if fmt.Sprint(again) != fmt.Sprint(tgt) {
					t.Fatalf("placing the target again changed it:\n%v\n%v", tgt, again)
				}
			})
			if t.Failed() {
				return
			}
			cur = tgt
			// A node that has left is gone once its replicas have moved.
			ns = slices.DeleteFunc(ns, func(n Node) bool { return n.Leaving })
		}
	}
}

// FuzzPlace: on any input Place does not panic and, for a valid input
// (Validate is nil), returns a valid placement whose steps are safe.
func FuzzPlace(f *testing.F) {
	f.Add(uint8(48), uint8(3), uint16(0x0f0f), uint64(1))
	f.Add(uint8(1), uint8(1), uint16(1), uint64(2))
	f.Add(uint8(7), uint8(5), uint16(0xffff), uint64(3))
	f.Fuzz(func(t *testing.T, s, r uint8, mask uint16, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, uint64(mask)))
		S, R := int(s%65), int(r%6)
		var ns []Node
		for i := range 1 + rng.IntN(20) {
			ns = append(ns, Node{ID: fmt.Sprintf("n%d", i), Alive: mask>>(i%16)&1 == 1, Leaving: rng.IntN(8) == 0, Down: rng.IntN(6) == 0})
		}
		cur := Placement{Shards: make([]Shard, rng.IntN(S+2))}
		for i := range cur.Shards {
			for range rng.IntN(6) {
				cur.Shards[i].Replicas = append(cur.Shards[i].Replicas, fmt.Sprintf("n%d", rng.IntN(24)))
			}
			if len(cur.Shards[i].Replicas) > 0 && rng.IntN(4) > 0 {
				cur.Shards[i].Leader = cur.Shards[i].Replicas[rng.IntN(len(cur.Shards[i].Replicas))]
			}
		}
		in := Input{Shards: S, Replicas: R, Nodes: ns, Current: cur}
		p := Place(in)
		if in.Validate() != nil {
			return
		}
		checkPlacement(t, in, p)
		checkOptimal(t, in, p)
		if live := len(liveIDs(ns)); S*min(R, live) <= 10 && live <= 5 {
			if k, want := kept(cur, p), bruteKept(in); k != want {
				t.Fatalf("kept %d replicas, the most possible is %d", k, want)
			}
		}
		checkSteps(t, cur, p)
	})
}

// checkOptimal fails t unless no valid placement keeps more current replicas
// than p, by the optimality condition of minimum-cost flow: p as a flow in
// the network of assign (shard → node, kept replicas cost −1; each node's
// first ⌊S·r/L⌋ units cost −big, one more costs 0) has no negative-cost cycle
// in its residual graph. Bellman–Ford from every vertex at once finds one if
// there is one.
func checkOptimal(t testing.TB, in Input, p Placement) {
	t.Helper()
	live := liveIDs(in.Nodes)
	S, L := in.Shards, len(live)
	if L == 0 || S < 1 {
		return
	}
	r := min(max(in.Replicas, 1), L)
	total := S * r
	floor, extra, big := total/L, total%L, total+1
	src, sink := 0, S+L+1
	type edge struct{ from, to, cost int }
	var es []edge
	load := make([]int, L)
	for i := range S {
		es = append(es, edge{1 + i, src, 0}) // every shard's source edge is full
		for j, id := range live {
			cost := 0
			if i < len(in.Current.Shards) && slices.Contains(in.Current.Shards[i].Replicas, id) {
				cost = -1
			}
			if slices.Contains(p.Shards[i].Replicas, id) {
				es = append(es, edge{1 + S + j, 1 + i, -cost})
				load[j]++
			} else {
				es = append(es, edge{1 + i, 1 + S + j, cost})
			}
		}
	}
	for j := range L {
		if floor > 0 {
			es = append(es, edge{sink, 1 + S + j, big}) // full
			if load[j] < floor {
				es = append(es, edge{1 + S + j, sink, -big})
			}
		}
		if extra > 0 {
			if load[j] > floor {
				es = append(es, edge{sink, 1 + S + j, 0})
			} else {
				es = append(es, edge{1 + S + j, sink, 0})
			}
		}
	}
	dist := make([]int, S+L+2)
	for range len(dist) {
		changed := false
		for _, e := range es {
			if dist[e.from]+e.cost < dist[e.to] {
				dist[e.to] = dist[e.from] + e.cost
				changed = true
			}
		}
		if !changed {
			return
		}
	}
	t.Fatalf("a placement keeping more current replicas exists (negative cycle in the residual graph)")
}

// BenchmarkPlace: a 20-node site of 48 shards, R = 3, after a node's death.
func BenchmarkPlace(b *testing.B) {
	ns := nodes(20)
	p := Place(Input{Shards: DefaultShards, Replicas: 3, Nodes: ns})
	ns[7].Alive = false
	in := Input{Shards: DefaultShards, Replicas: 3, Nodes: ns, Current: p}
	b.ReportAllocs()
	for b.Loop() {
		Place(in)
	}
}

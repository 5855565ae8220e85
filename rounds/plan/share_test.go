package plan

import (
	"math/rand/v2"
	"testing"
)

func TestDomainShareRules(t *testing.T) {
	const budget, shards = 100, 4 // implicit share 25
	var none DomainShare
	tests := []struct {
		name     string
		got      int64
		want     int64
		gotFull  bool
		wantFull bool
	}{
		{"no record: the implicit share", none.Cap(2, budget, shards), 25, none.Full(budget, shards), false},
		{"one shard asks: what the implicit others leave", none.Ask(0, budget, shards).Cap(0, budget, shards), 25, false, false},
	}
	for _, tc := range tests {
		if tc.got != tc.want || tc.gotFull != tc.wantFull {
			t.Errorf("%s: cap %d full %v, want %d %v", tc.name, tc.got, tc.gotFull, tc.want, tc.wantFull)
		}
	}

	// Shard 0 at its cap asks; it wants more, so the others yield what
	// they do not use (10, 0 and 5 pages), then it asks again.
	d := none.Ask(0, budget, shards)
	if !d.Want[0] || !d.Wanted(1) || d.Wanted(0) {
		t.Fatalf("after the ask: %+v, want shard 0 wanting more", d)
	}
	for s, used := range map[int]int64{1: 10, 2: 0, 3: 5} {
		var changed bool
		if d, changed = d.Yield(s, budget, shards, used); !changed || d.Cap(s, budget, shards) != used {
			t.Fatalf("shard %d yield: %+v (changed %v), want its cap at its usage %d", s, d, changed, used)
		}
	}
	if d, _ := d.Yield(1, budget, shards, 10); d.Cap(1, budget, shards) != 10 {
		t.Errorf("a second yield changed shard 1's cap: %+v", d)
	}
	d = d.Ask(0, budget, shards)
	if c := d.Cap(0, budget, shards); c != 85 {
		t.Errorf("shard 0's cap after the yields: %d, want 85 (100 - 10 - 0 - 5)", c)
	}
	if d, _ = d.Yield(0, budget, shards, 25); d.Want[0] {
		t.Errorf("shard 0 has room and still wants after its yield: %+v", d)
	}
	if !d.Full(budget, shards) {
		t.Errorf("every shard's cap written, summing to the budget: not full: %+v", d)
	}
	// A shard never yields below what it uses, and yields nothing when
	// nobody else wants.
	if d2, changed := d.Yield(0, budget, shards, 40); changed || d2.Cap(0, budget, shards) != 85 {
		t.Errorf("shard 0 yielded with nobody wanting: %+v", d2)
	}
	// A shard with no room wants; its want goes once it has room.
	d = d.Ask(1, budget, shards)
	if !d.Want[1] || d.Cap(1, budget, shards) != 10 {
		t.Fatalf("shard 1 asked with nothing free: %+v, want cap 10 and wanting", d)
	}
	d, _ = d.Yield(0, budget, shards, 40)
	if d.Cap(0, budget, shards) != 40 {
		t.Errorf("shard 0, using 40, did not yield to shard 1: %+v", d)
	}
	if d = d.Ask(1, budget, shards); d.Cap(1, budget, shards) != 55 {
		t.Errorf("shard 1's second ask: %+v, want cap 55", d)
	}
	// Fewer pages than shards: the implicit share is 0, an ask takes all.
	if c := none.Ask(3, 3, shards).Cap(3, 3, shards); c != 3 {
		t.Errorf("budget 3 over 4 shards: the asker's cap %d, want 3", c)
	}
}

// TestDomainShareNeverOverBudget plays random asks and yields of shards
// whose usage grows within their caps: the caps never sum to more than
// the budget, no cap drops below its shard's usage, and once a shard at
// its cap asks, every other shard yields, and it asks again, it has all
// that the others do not use.
func TestDomainShareNeverOverBudget(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 36))
	for iter := range 2000 {
		shards := 1 + r.IntN(6)
		budget := r.IntN(200)
		usage := make([]int64, shards)
		var d DomainShare
		sum := func() int64 {
			var s int64
			for i := range shards {
				s += d.Cap(i, budget, shards)
			}
			return s
		}
		for step := range 60 {
			s := r.IntN(shards)
			c := d.Cap(s, budget, shards)
			switch r.IntN(3) {
			case 0: // fetch within its cap
				if c > usage[s] {
					usage[s] += 1 + r.Int64N(c-usage[s])
				}
			case 1:
				d = d.Ask(s, budget, shards)
			case 2:
				d, _ = d.Yield(s, budget, shards, usage[s])
			}
			if got := sum(); got > int64(budget) {
				t.Fatalf("iter %d step %d: caps sum to %d over budget %d: %+v", iter, step, got, budget, d)
			}
			for i := range shards {
				if d.Cap(i, budget, shards) < usage[i] {
					t.Fatalf("iter %d step %d: shard %d's cap %d below its usage %d", iter, step, i, d.Cap(i, budget, shards), usage[i])
				}
			}
		}
		asker := r.IntN(shards)
		usage[asker] = d.Cap(asker, budget, shards) // at its cap: it asks
		d = d.Ask(asker, budget, shards)
		for i := range shards {
			if i != asker {
				d, _ = d.Yield(i, budget, shards, usage[i])
			}
		}
		d = d.Ask(asker, budget, shards)
		var others int64
		for i := range shards {
			if i != asker {
				others += usage[i]
			}
		}
		if got, want := d.Cap(asker, budget, shards), max(int64(budget)-others, usage[asker]); got != want {
			t.Fatalf("iter %d: after every yield the asker's cap is %d, want %d (budget %d, others use %d): %+v", iter, got, want, budget, others, d)
		}
	}
}

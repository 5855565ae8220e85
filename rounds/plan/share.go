package plan

import "maps"

// A site of several shards holds one --pld-budget per registrable domain,
// site-wide, while each shard counts only the pages of the hosts it holds
// (a domain's hosts spread over shards by address). The budget is split
// into caps, one per shard: a shard gives a domain new URLs only while its
// pages fetched and in flight stay within its cap, and the caps sum to at
// most the budget, so the site never fetches more of a domain than its
// budget. A shard's cap is its share of the domain's record (DomainShare)
// when the record names it, else the implicit share budget/shards: a
// domain no shard needed more of has no record at all. A shard that needs
// more Asks: it takes all the budget the others' caps leave, and marks
// that it wants more; every other shard then Yields, lowering its cap to
// what it uses, so that the next Ask finds that room. Only a shard writes
// its own cap, and a shard's cap never drops below its own usage: a cap
// is never taken from pages already given out.

// DomainShare is the record of a registrable domain's budget on a site of
// shards: the caps of the shards that wrote one, and the shards that want
// more than they have.
type DomainShare struct {
	Caps map[int]int64 `json:"caps,omitempty"`
	Want map[int]bool  `json:"want,omitempty"`
}

// ImplicitShare is a shard's cap of a domain whose record does not name it:
// budget/shards, so that the implicit caps sum to at most the budget.
func ImplicitShare(budget, shards int) int64 {
	if shards < 1 {
		return int64(budget)
	}
	return int64(budget / shards)
}

// Cap is shard's cap of the domain.
func (d DomainShare) Cap(shard, budget, shards int) int64 {
	if c, ok := d.Caps[shard]; ok {
		return c
	}
	return ImplicitShare(budget, shards)
}

// others is the sum of the caps of the shards but shard.
func (d DomainShare) others(shard, budget, shards int) int64 {
	var sum int64
	for s := range shards {
		if s != shard {
			sum += d.Cap(s, budget, shards)
		}
	}
	return sum
}

// Ask is d after shard, at its cap with more URLs of the domain, asked for
// more: its cap is all the budget the others' caps leave (never less than
// it had), and it wants more, so that the others Yield what they do not
// use; its want goes at its own Yield once it has room.
func (d DomainShare) Ask(shard, budget, shards int) DomainShare {
	out := d.clone()
	c := max(d.Cap(shard, budget, shards), int64(budget)-d.others(shard, budget, shards), 0)
	out.Caps[shard] = c
	out.Want[shard] = true // until it has room left at a Yield of its own
	return out
}

// Yield is d after shard, which uses usage of the domain, gave back what
// another shard wants and it does not use (its cap lowered to usage), and
// took back its own want if it has room; changed reports whether d
// changed (a record to write).
func (d DomainShare) Yield(shard, budget, shards int, usage int64) (out DomainShare, changed bool) {
	out = d.clone()
	c := d.Cap(shard, budget, shards)
	othersWant := false
	for s, w := range d.Want {
		othersWant = othersWant || w && s != shard
	}
	if othersWant && c > usage {
		out.Caps[shard] = max(usage, 0)
		changed = true
	}
	if d.Want[shard] && usage < out.Cap(shard, budget, shards) {
		delete(out.Want, shard)
		changed = true
	}
	return out, changed
}

// Wanted reports whether a shard other than shard wants more of the
// domain.
func (d DomainShare) Wanted(shard int) bool {
	for s, w := range d.Want {
		if w && s != shard {
			return true
		}
	}
	return false
}

// Full reports whether the domain's budget is all given out to caps that
// every shard wrote: no shard can have more until one of them yields.
func (d DomainShare) Full(budget, shards int) bool {
	if len(d.Caps) < shards {
		return false
	}
	var sum int64
	for _, c := range d.Caps {
		sum += c
	}
	return sum >= int64(budget)
}

func (d DomainShare) clone() DomainShare {
	out := DomainShare{Caps: make(map[int]int64, len(d.Caps)+1), Want: make(map[int]bool, len(d.Want)+1)}
	maps.Copy(out.Caps, d.Caps)
	for s, w := range d.Want {
		if w {
			out.Want[s] = true
		}
	}
	return out
}

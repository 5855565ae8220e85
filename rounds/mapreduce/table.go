package mapreduce

import (
	"bytes"
	"math"
	"slices"
)

// table is one partition's in-memory key → value index: open addressing
// with linear probing over slots that hold the key's 64-bit hash, where
// its bytes sit in the arena, and the value itself. A hit costs one slot
// probe (usually one cache line) and one key comparison in the arena, and
// reuses the hash Emit computed for partitioning. Growing rehashes from
// the stored hashes without touching the keys.
type table[V any] struct {
	slots []slot[V] // len is 0 or a power of two
	used  int
	arena []byte // keys back to back; offsets into it are uint32
}

type slot[V any] struct {
	h   uint64 // the key's hash with bit 0 set; 0 marks an empty slot
	off uint32 // the key is arena[off : off+n]
	n   uint32
	v   V
}

const (
	minSlots = 64
	// maxArena bounds one partition's key bytes in memory (offsets are uint32).
	maxArena = math.MaxUint32
)

// key returns the slot's key (capacity clipped).
func (t *table[V]) key(s *slot[V]) []byte {
	return t.arena[s.off : s.off+s.n : s.off+s.n]
}

// find returns the slot holding key, or the empty slot where it belongs.
// hs is the key's hash with bit 0 set. The table must not be full.
func (t *table[V]) find(hs uint64, key []byte) (s *slot[V], found bool) {
	mask := uint64(len(t.slots) - 1)
	for i := (hs >> 1) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.h == 0 {
			return s, false
		}
		if s.h == hs && int(s.n) == len(key) && bytes.Equal(t.arena[s.off:s.off+s.n], key) {
			return s, true
		}
	}
}

// reserve makes room for one more key, growing the table past 7/10 full.
func (t *table[V]) reserve() {
	if (t.used+1)*10 <= len(t.slots)*7 {
		return
	}
	old := t.slots
	t.slots = make([]slot[V], max(minSlots, 2*len(old)))
	mask := uint64(len(t.slots) - 1)
	for j := range old {
		o := &old[j]
		if o.h == 0 {
			continue
		}
		i := (o.h >> 1) & mask
		for t.slots[i].h != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = *o
	}
}

// insert fills the empty slot s (from find) with key and v.
func (t *table[V]) insert(s *slot[V], hs uint64, key []byte, v V) {
	*s = slot[V]{h: hs, off: uint32(len(t.arena)), n: uint32(len(key)), v: v}
	if len(t.arena)+len(key) > cap(t.arena) {
		// Double (append grows big slices by only 1.25x, copying often).
		grown := make([]byte, len(t.arena), max(2*cap(t.arena), len(t.arena)+len(key), 4096))
		copy(grown, t.arena)
		t.arena = grown
	}
	t.arena = append(t.arena, key...)
	t.used++
}

// sorted packs the used slots to the front of the table and sorts them by
// key. The table is unusable for lookups until reset.
func (t *table[V]) sorted() []slot[V] {
	n := 0
	for i := range t.slots {
		if t.slots[i].h != 0 {
			t.slots[n] = t.slots[i]
			n++
		}
	}
	clear(t.slots[n:])
	es := t.slots[:n]
	arena := t.arena
	slices.SortFunc(es, func(a, b slot[V]) int {
		return bytes.Compare(arena[a.off:a.off+a.n], arena[b.off:b.off+b.n])
	})
	return es
}

// reset empties the table, keeping its memory for reuse.
func (t *table[V]) reset() {
	clear(t.slots)
	t.used = 0
	t.arena = t.arena[:0]
}

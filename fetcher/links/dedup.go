package links

// dedup is an open-addressing hash table from link hashes to link indexes,
// emptied in O(1) by bumping a generation (a map's clear costs its capacity).
type dedup struct {
	slots []slot
	n     int
	gen   uint32
}

type slot struct {
	hash uint64
	idx  int32
	gen  uint32
}

const dedupMinSlots = 256

// reset empties the table.
func (d *dedup) reset() {
	d.n = 0
	d.gen++
	if d.gen == 0 || d.slots == nil { // first use, or the generation wrapped
		d.gen = 1
		if d.slots == nil {
			d.slots = make([]slot, dedupMinSlots)
		}
		clear(d.slots)
	}
}

// lookup returns the index stored for h.
func (d *dedup) lookup(h uint64) (int32, bool) {
	mask := uint64(len(d.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &d.slots[i]
		if s.gen != d.gen {
			return 0, false
		}
		if s.hash == h {
			return s.idx, true
		}
	}
}

// insert stores idx for h, which must not be in the table.
func (d *dedup) insert(h uint64, idx int32) {
	if 2*(d.n+1) > len(d.slots) {
		d.grow()
	}
	mask := uint64(len(d.slots) - 1)
	i := h & mask
	for d.slots[i].gen == d.gen {
		i = (i + 1) & mask
	}
	d.slots[i] = slot{hash: h, idx: idx, gen: d.gen}
	d.n++
}

// grow doubles the table, keeping the current generation's entries.
func (d *dedup) grow() {
	old := d.slots
	d.slots = make([]slot, 2*len(old))
	mask := uint64(len(d.slots) - 1)
	for _, s := range old {
		if s.gen != d.gen {
			continue
		}
		i := s.hash & mask
		for d.slots[i].gen == d.gen {
			i = (i + 1) & mask
		}
		d.slots[i] = s
	}
}

package simhash

import (
	"errors"
	"fmt"
	"math/bits"
)

// blocks is the number of 16-bit blocks a fingerprint is cut into: two
// fingerprints within K = 3 bits differ in at most 3 of the 4 blocks, so
// they agree exactly on at least one (Manku et al.'s tables, with t = 4
// blocks and one table per block).
const blocks = 4

// Index holds up to a fixed number of fingerprints, each with an ID and a
// host, and finds a stored fingerprint within K bits of a given one. It
// keeps one table per 16-bit block of the fingerprint, from the block's
// value to the entries that have it; a lookup checks the entries of the
// query's four blocks (on average 4·Len/65,536 of them) by Distance.
//
// Memory is bounded: when the index is full, Add evicts the oldest entry
// (first in, first out; Lookup does not refresh an entry). With a per-host
// cap, a host that has HostCap entries loses its own oldest entry instead,
// so that one huge host cannot push every other host's fingerprints out.
// An entry costs about 140 bytes (measured with uint64 IDs at a million
// entries, BenchmarkIndex), plus what its ID points to and its host's name
// (shared by the host's entries).
//
// An Index is not safe for concurrent use: callers that share one among
// fetch workers hold a mutex around Lookup and Add (LookupOrAdd does both
// under one lock), which costs little next to fetching a page.
type Index[ID any] struct {
	capacity, hostCap int
	shift             uint // block >> shift is the bucket

	// Entries live in slots; free slots are chained through next.
	slots []slot[ID]
	free  int32
	len   int
	// The live slots in order of insertion, oldest first (a doubly
	// linked list through older and newer); -1 ends it.
	oldest, newest int32
	hosts          map[string]*hostList
	tables         [blocks][][]bucketEntry
}

// slot is one entry of an Index.
type slot[ID any] struct {
	fp           uint64
	id           ID
	host         *hostList
	older, newer int32 // insertion order
	hostNext     int32 // the host's next newer entry; the free list's next slot
}

// hostList is the entries of one host, oldest first.
type hostList struct {
	name         string
	oldest, last int32
	n            int
}

// bucketEntry is a fingerprint in a table, with its slot.
type bucketEntry struct {
	fp   uint64
	slot int32
}

// IndexOptions configure an Index.
type IndexOptions struct {
	// Capacity is the most fingerprints the index holds (at least 1).
	Capacity int
	// HostCap, if positive, is the most fingerprints it holds for one host.
	HostCap int
}

// Limits on IndexOptions.
const (
	// MaxCapacity is the largest Capacity: slots are numbered in int32.
	MaxCapacity = 1 << 30
)

// NewIndex returns an empty index.
func NewIndex[ID any](o IndexOptions) (*Index[ID], error) {
	if o.Capacity < 1 || o.Capacity > MaxCapacity {
		return nil, fmt.Errorf("simhash: index capacity must be in [1, %d], got %d", MaxCapacity, o.Capacity)
	}
	if o.HostCap < 0 {
		return nil, errors.New("simhash: negative per-host cap")
	}
	x := &Index[ID]{capacity: o.Capacity, hostCap: o.HostCap, free: -1, oldest: -1, newest: -1, hosts: map[string]*hostList{}}
	if x.hostCap == 0 || x.hostCap > x.capacity {
		x.hostCap = x.capacity
	}
	// About one entry per bucket when full, up to the 65,536 values of a
	// block: fewer buckets for small indexes, so that they stay small.
	b := min(16, max(4, bits.Len(uint(o.Capacity))))
	x.shift = uint(16 - b)
	for t := range x.tables {
		x.tables[t] = make([][]bucketEntry, 1<<b)
	}
	return x, nil
}

// Len returns the number of fingerprints held.
func (x *Index[ID]) Len() int { return x.len }

// HostLen returns the number of fingerprints held for host.
func (x *Index[ID]) HostLen(host string) int {
	if hl := x.hosts[host]; hl != nil {
		return hl.n
	}
	return 0
}

// Hosts returns the number of hosts with fingerprints held.
func (x *Index[ID]) Hosts() int { return len(x.hosts) }

// bucket returns the bucket of block t of fp.
func (x *Index[ID]) bucket(t int, fp uint64) *[]bucketEntry {
	return &x.tables[t][uint16(fp>>(16*t))>>x.shift]
}

// Lookup finds a stored fingerprint within K bits of fp, the closest one
// (of several at the same distance, the first in table order: which one
// depends only on the calls made to the index). It returns its ID and host
// and the distance.
func (x *Index[ID]) Lookup(fp uint64) (id ID, host string, dist int, ok bool) {
	best, bestSlot := K+1, int32(-1)
	for t := range blocks {
		for _, e := range *x.bucket(t, fp) {
			if d := bits.OnesCount64(e.fp ^ fp); d < best {
				best, bestSlot = d, e.slot
			}
		}
		if best == 0 {
			break
		}
	}
	if bestSlot < 0 {
		return id, "", 0, false
	}
	s := &x.slots[bestSlot]
	return s.id, s.host.name, best, true
}

// Add stores fp with its ID and host, evicting the host's oldest entry if
// the host is at its cap, else the index's oldest if the index is full.
func (x *Index[ID]) Add(fp uint64, id ID, host string) {
	hl := x.hosts[host]
	switch {
	case hl != nil && hl.n >= x.hostCap:
		x.remove(hl.oldest)
	case x.len >= x.capacity:
		x.remove(x.oldest)
	}
	if hl = x.hosts[host]; hl == nil { // the removal may have emptied it
		hl = &hostList{name: host, oldest: -1, last: -1}
		x.hosts[host] = hl
	}
	i := x.free
	if i >= 0 {
		x.free = x.slots[i].hostNext
	} else {
		i = int32(len(x.slots))
		x.slots = append(x.slots, slot[ID]{})
	}
	x.slots[i] = slot[ID]{fp: fp, id: id, host: hl, older: x.newest, newer: -1, hostNext: -1}
	if x.newest >= 0 {
		x.slots[x.newest].newer = i
	} else {
		x.oldest = i
	}
	x.newest = i
	if hl.last >= 0 {
		x.slots[hl.last].hostNext = i
	} else {
		hl.oldest = i
	}
	hl.last = i
	hl.n++
	x.len++
	for t := range blocks {
		b := x.bucket(t, fp)
		*b = append(*b, bucketEntry{fp: fp, slot: i})
	}
}

// LookupOrAdd looks fp up and, if no stored fingerprint is within K bits,
// adds it: what a crawler does with each page it fetches.
func (x *Index[ID]) LookupOrAdd(fp uint64, id ID, host string) (match ID, matchHost string, dist int, found bool) {
	if match, matchHost, dist, found = x.Lookup(fp); found {
		return match, matchHost, dist, true
	}
	x.Add(fp, id, host)
	return match, "", 0, false
}

// remove evicts slot i, the oldest entry of its host.
func (x *Index[ID]) remove(i int32) {
	s := &x.slots[i]
	for t := range blocks {
		b := x.bucket(t, s.fp)
		for j, e := range *b {
			if e.slot == i {
				last := len(*b) - 1
				(*b)[j] = (*b)[last]
				*b = (*b)[:last]
				if cap(*b) > 8 && len(*b) < cap(*b)/4 {
					*b = append([]bucketEntry(nil), *b...) // give back the memory of a bucket that shrank
				}
				break
			}
		}
	}
	if s.older >= 0 {
		x.slots[s.older].newer = s.newer
	} else {
		x.oldest = s.newer
	}
	if s.newer >= 0 {
		x.slots[s.newer].older = s.older
	} else {
		x.newest = s.older
	}
	hl := s.host
	hl.oldest = s.hostNext
	if hl.n--; hl.n == 0 {
		delete(x.hosts, hl.name)
	}
	var zero slot[ID]
	*s = zero
	s.hostNext = x.free
	x.free = i
	x.len--
}

package simhash

import (
	"fmt"
	"math/bits"
	"runtime"
	"testing"
)

// flip returns fp with the given bits flipped.
func flip(fp uint64, bs ...int) uint64 {
	for _, b := range bs {
		fp ^= 1 << b
	}
	return fp
}

func mustIndex[ID any](t testing.TB, o IndexOptions) *Index[ID] {
	t.Helper()
	x, err := NewIndex[ID](o)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestIndexLookup: a fingerprint within K bits is found, whichever blocks
// the differing bits fall in; one K+1 bits away is not.
func TestIndexLookup(t *testing.T) {
	const fp = 0x0123456789abcdef
	x := mustIndex[string](t, IndexOptions{Capacity: 100})
	x.Add(fp, "orig", "a.test")
	x.Add(^uint64(fp), "other", "b.test") // 64 bits away from fp
	for _, c := range []struct {
		name  string
		query uint64
		dist  int
		found bool
	}{
		{"same", fp, 0, true},
		{"1 bit", flip(fp, 5), 1, true},
		{"3 bits in one block", flip(fp, 0, 7, 15), 3, true},
		{"3 bits in three blocks", flip(fp, 3, 20, 40), 3, true},
		{"3 bits in the top blocks", flip(fp, 33, 50, 63), 3, true},
		{"4 bits in four blocks", flip(fp, 1, 17, 33, 49), 0, false},
		{"4 bits in one block", flip(fp, 1, 2, 3, 4), 0, false},
		{"far", fp ^ 0x5555, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, host, d, ok := x.Lookup(c.query)
			if ok != c.found || (ok && (id != "orig" || host != "a.test" || d != c.dist)) {
				t.Errorf("Lookup = %q %q %d %v, want orig a.test %d %v", id, host, d, ok, c.dist, c.found)
			}
		})
	}
	// The closest of two candidates.
	x.Add(flip(fp, 9, 10), "two away", "a.test")
	if id, _, d, _ := x.Lookup(flip(fp, 9, 10, 11)); id != "two away" || d != 1 {
		t.Errorf("closest: %q at %d, want 'two away' at 1", id, d)
	}
}

// TestIndexMatchesBruteForce checks Lookup against a scan of every entry
// on random fingerprints and queries near them.
func TestIndexMatchesBruteForce(t *testing.T) {
	x := mustIndex[int](t, IndexOptions{Capacity: 5000})
	var fps []uint64
	s := uint64(1)
	next := func() uint64 { s = mix(s + 0x9e3779b97f4a7c15); return s }
	for i := range 3000 {
		fp := next()
		fps = append(fps, fp)
		x.Add(fp, i, "h")
	}
	found := 0
	for q := range 20000 {
		query := next()
		if q%2 == 0 { // near a stored one
			query = fps[int(next()%uint64(len(fps)))]
			for range next() % 6 {
				query ^= 1 << (next() % 64)
			}
		}
		best := K + 1
		for _, fp := range fps {
			best = min(best, bits.OnesCount64(fp^query))
		}
		id, _, d, ok := x.Lookup(query)
		if ok != (best <= K) || (ok && (d != best || Distance(fps[id], query) != d)) {
			t.Fatalf("query %#x: Lookup %d %d %v, brute force distance %d", query, id, d, ok, best)
		}
		if ok {
			found++
		}
	}
	if found < 5000 {
		t.Fatalf("only %d of 20,000 queries found a match: the test tests little", found)
	}
}

// TestIndexEviction: the index never holds more than its capacity, and it
// forgets the oldest first.
func TestIndexEviction(t *testing.T) {
	const capacity = 100
	x := mustIndex[int](t, IndexOptions{Capacity: capacity})
	fp := func(i int) uint64 { return mix(uint64(i) + 1) }
	for i := range 1000 {
		x.Add(fp(i), i, fmt.Sprintf("h%d.test", i%7))
		if x.Len() > capacity {
			t.Fatalf("after %d adds the index holds %d > %d", i+1, x.Len(), capacity)
		}
	}
	if x.Len() != capacity {
		t.Fatalf("Len %d, want %d", x.Len(), capacity)
	}
	for i := range 1000 {
		id, _, _, ok := x.Lookup(fp(i))
		if want := i >= 1000-capacity; ok != want || (ok && id != i) {
			t.Fatalf("entry %d: found %v (id %d), want found %v", i, ok, id, want)
		}
	}
	// The tables hold exactly the live entries.
	for t2, table := range x.tables {
		n := 0
		for _, b := range table {
			n += len(b)
		}
		if n != capacity {
			t.Fatalf("table %d holds %d entries, want %d", t2, n, capacity)
		}
	}
	if len(x.slots) != capacity {
		t.Fatalf("%d slots for %d entries: freed slots not reused", len(x.slots), capacity)
	}
}

// TestIndexHostCap: a host at its cap loses its own oldest entry; other
// hosts keep theirs, and the global capacity still holds.
func TestIndexHostCap(t *testing.T) {
	x := mustIndex[string](t, IndexOptions{Capacity: 50, HostCap: 10})
	fp := func(host string, i int) uint64 { return mix(uint64(len(host))<<32 + uint64(i)) }
	for i := range 5 {
		x.Add(fp("small.test", i), fmt.Sprint("small", i), "small.test")
	}
	for i := range 1000 {
		x.Add(fp("huge.test", i), fmt.Sprint("huge", i), "huge.test")
	}
	if x.HostLen("huge.test") != 10 || x.HostLen("small.test") != 5 || x.Len() != 15 {
		t.Fatalf("huge %d, small %d, all %d; want 10, 5, 15", x.HostLen("huge.test"), x.HostLen("small.test"), x.Len())
	}
	for i := range 5 {
		if _, _, _, ok := x.Lookup(fp("small.test", i)); !ok {
			t.Errorf("small host's entry %d evicted by the huge host", i)
		}
	}
	for _, c := range []struct {
		i    int
		want bool
	}{{0, false}, {989, false}, {990, true}, {999, true}} {
		if _, _, _, ok := x.Lookup(fp("huge.test", c.i)); ok != c.want {
			t.Errorf("huge host's entry %d: found %v, want %v", c.i, ok, c.want)
		}
	}
	// Many hosts: the global capacity evicts the oldest, whole hosts go.
	for h := range 100 {
		for i := range 3 {
			host := fmt.Sprintf("m%d.test", h)
			x.Add(mix(uint64(h)<<40+uint64(i)+7), host, host)
		}
	}
	if x.Len() != 50 || x.Hosts() > 17 || x.HostLen("small.test") != 0 {
		t.Fatalf("all %d (want 50), hosts %d (want ≤ 17), small %d (want 0)", x.Len(), x.Hosts(), x.HostLen("small.test"))
	}
}

func TestLookupOrAdd(t *testing.T) {
	x := mustIndex[string](t, IndexOptions{Capacity: 10})
	if _, _, _, found := x.LookupOrAdd(0xabcdef, "first", "a"); found {
		t.Fatal("found in an empty index")
	}
	id, host, d, found := x.LookupOrAdd(flip(0xabcdef, 60), "copy", "b")
	if !found || id != "first" || host != "a" || d != 1 {
		t.Fatalf("LookupOrAdd = %q %q %d %v", id, host, d, found)
	}
	if x.Len() != 1 {
		t.Fatalf("a near-duplicate was added: Len %d", x.Len())
	}
}

func TestNewIndexErrors(t *testing.T) {
	for _, o := range []IndexOptions{{}, {Capacity: -1}, {Capacity: MaxCapacity + 1}, {Capacity: 5, HostCap: -1}} {
		if _, err := NewIndex[int](o); err == nil {
			t.Errorf("NewIndex(%+v) accepted", o)
		}
	}
}

// BenchmarkIndex is a crawler's use of a full index of 1M fingerprints:
// one LookupOrAdd per page, half of them near-duplicates of stored
// fingerprints, the rest new (each evicting the oldest).
func BenchmarkIndex(b *testing.B) {
	const n = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := mustIndex[uint64](b, IndexOptions{Capacity: n, HostCap: 1 << 16})
	s := uint64(3)
	next := func() uint64 { s = mix(s + 0x9e3779b97f4a7c15); return s }
	for i := range uint64(n) {
		x.Add(next(), i, hostName(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / n
	b.ReportAllocs()
	found, i := 0, 0
	for b.Loop() {
		q := next()
		if i%2 == 0 {
			q = flip(x.slots[q%n].fp, int(q>>10%64), int(q>>20%64))
		}
		if _, _, _, ok := x.LookupOrAdd(q, uint64(i), hostName(uint64(i))); ok {
			found++
		}
		i++
	}
	b.ReportMetric(float64(found)/float64(i), "found/op")
	b.ReportMetric(heap, "heap-B/entry")
}

var hostNames = func() (out [1024]string) {
	for i := range out {
		out[i] = fmt.Sprintf("h%d.test", i)
	}
	return out
}()

func hostName(i uint64) string { return hostNames[i%1024] }

// BenchmarkLookup is Lookup alone in a full index of 1M fingerprints, half
// the queries within K bits of a stored one.
func BenchmarkLookup(b *testing.B) {
	const n = 1 << 20
	x := mustIndex[uint64](b, IndexOptions{Capacity: n})
	s := uint64(5)
	next := func() uint64 { s = mix(s + 0x9e3779b97f4a7c15); return s }
	for i := range uint64(n) {
		x.Add(next(), i, "h")
	}
	found, i := 0, 0
	for b.Loop() {
		q := next()
		if i%2 == 0 {
			q = flip(x.slots[q%n].fp, int(q>>10%64), int(q>>20%64))
		}
		if _, _, _, ok := x.Lookup(q); ok {
			found++
		}
		i++
	}
	b.ReportMetric(float64(found)/float64(i), "found/op")
}

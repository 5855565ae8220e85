package store

import (
	"fmt"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// urlFilter is an in-memory Bloom filter over the keys of all URL records,
// so that Apply need not look up a URL that is surely new (most URLs an
// update phase hands over are). A false positive only costs the lookup the
// store would have done anyway, so results never depend on it. It grows by
// adding layers of twice the capacity; it is rebuilt from the keys at Open.
type urlFilter struct {
	layers []*bloomLayer
}

type bloomLayer struct {
	bits     []uint64
	mask     uint64
	n, limit int
}

const (
	filterBitsPerKey = 12
	filterProbes     = 6
	filterMinKeys    = 1 << 20
)

func newBloomLayer(keys int) *bloomLayer {
	m := uint64(keys) * filterBitsPerKey
	m = 1 << bits.Len64(m-1) // a power of two
	return &bloomLayer{bits: make([]uint64, m/64), mask: m - 1, limit: keys}
}

func filterHash(key []byte) uint64 { return xxhash.Sum64(key) }

func (l *bloomLayer) add(h uint64) {
	h1, h2 := h, h>>32|h<<32
	for i := range uint64(filterProbes) {
		b := (h1 + i*h2) & l.mask
		l.bits[b/64] |= 1 << (b % 64)
	}
	l.n++
}

func (l *bloomLayer) has(h uint64) bool {
	h1, h2 := h, h>>32|h<<32
	for i := range uint64(filterProbes) {
		b := (h1 + i*h2) & l.mask
		if l.bits[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

func (f *urlFilter) add(key []byte) {
	last := f.layers[len(f.layers)-1]
	if last.n >= last.limit {
		last = newBloomLayer(2 * last.limit)
		f.layers = append(f.layers, last)
	}
	last.add(filterHash(key))
}

// mayContain reports false only for keys surely absent.
func (f *urlFilter) mayContain(key []byte) bool {
	h := filterHash(key)
	for _, l := range f.layers {
		if l.has(h) {
			return true
		}
	}
	return false
}

// buildURLFilter reads every URL key of a store into a new filter.
func buildURLFilter(ks *keyspace, urls uint64) (*urlFilter, error) {
	f := &urlFilter{layers: []*bloomLayer{newBloomLayer(max(filterMinKeys, int(2*urls)))}}
	it, err := ks.newIter([]byte{pURL}, []byte{pURL + 1})
	if err != nil {
		return nil, fmt.Errorf("store: build url filter: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		f.add(it.Key())
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("store: build url filter: %w", err)
	}
	return f, nil
}

package site

import (
	"sync"

	"github.com/meridian-crawler/meridian/fetcher/simhash"
)

// nearDupIndex is a node's near-duplicate detection (its fetcher's
// Options.NearDup): the fingerprints of the pages it fetched, in bounded
// memory (--near-dups, the oldest out first, each host at most a twentieth
// of it so that one huge host cannot push the others out). It is this
// node's: a near-duplicate whose original another node fetched, or that
// this node fetched before it restarted, is not found.
type nearDupIndex struct {
	mu sync.Mutex
	x  *simhash.Index[string]
}

// newNearDupIndex returns an index of capacity fingerprints, nil for 0.
func newNearDupIndex(capacity int) (*nearDupIndex, error) {
	if capacity <= 0 {
		return nil, nil
	}
	x, err := simhash.NewIndex[string](simhash.IndexOptions{Capacity: capacity, HostCap: max(capacity/20, 100)})
	if err != nil {
		return nil, err
	}
	return &nearDupIndex{x: x}, nil
}

// check returns the URL of a page fetched before whose fingerprint is
// within simhash.K bits of fp ("" if none); the page is added if it has
// none.
func (n *nearDupIndex) check(host, url string, fp uint64) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	orig, _, _, found := n.x.LookupOrAdd(fp, url, host)
	if !found {
		return ""
	}
	return orig
}

package rounds

import (
	"container/heap"
	"encoding/binary"
	"slices"
	"sort"
	"strings"
	"sync"
)

// linkStore keeps, within a memory budget, the outlinks of the fetched pages
// that distributed the most cash, so that cash reaching them after their
// fetch can be passed on without fetching them again: OPIC's visit of a page
// done from stored links (Abiteboul et al. read a page's links at each
// visit; a crawler that fetches each page once would otherwise leave that
// cash where it lands, and a page's score would only reflect the cash it
// had when it was fetched).
//
// It is an index, not a record: the cash itself is always read from the
// crawl database before it is moved, and losing the store (a restart) only
// means that cash waits for pages fetched later.
type linkStore struct {
	mu     sync.Mutex
	budget int64
	used   int64
	byURL  map[string]*linkEntry
	heap   linkHeap // least weight first: evicted first
	// scratch packs an offer's links before they are copied to their size.
	scratch []byte
}

// linkEntry is one page's outlinks.
type linkEntry struct {
	url   string
	depth uint32 // the page's depth; its links are one deeper
	n     int    // outlinks
	links []byte // each: uvarint length, then the link with the page's origin cut off when it had one
	// weight is the cash the page distributed at its last visit: the
	// store keeps the pages of most weight.
	weight float64
	// owed is the credit planned for the page since its last visit, as
	// the updates computed it: what picks the pages to revisit.
	owed float64
	idx  int
}

// linkEntryOverhead approximates an entry's memory beside its strings.
const linkEntryOverhead = 160

func newLinkStore(budget int64) *linkStore {
	return &linkStore{budget: budget, byURL: map[string]*linkEntry{}}
}

// origin returns u's scheme and authority ("http://h:8080"), or "".
func origin(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(u[i+3:], '/')
	if j < 0 {
		return u
	}
	return u[:i+3+j]
}

// appendLinks packs links onto dst, cutting off o where a link starts with it.
func appendLinks(dst []byte, o string, links []string) []byte {
	for _, l := range links {
		if o != "" && len(l) > len(o) && l[len(o)] == '/' && strings.HasPrefix(l, o) {
			l = l[len(o):]
		}
		dst = binary.AppendUvarint(dst, uint64(len(l)))
		dst = append(dst, l...)
	}
	return dst
}

// decodeLinks unpacks e's links, restoring its origin on relative ones.
func (e *linkEntry) decodeLinks() []string {
	o := origin(e.url)
	out := make([]string, 0, e.n)
	b := e.links
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			break // cannot happen: the store wrote it
		}
		l := string(b[k : k+int(n)])
		b = b[k+int(n):]
		if strings.HasPrefix(l, "/") {
			l = o + l
		}
		out = append(out, l)
	}
	return out
}

// offer adds (or replaces) a page's outlinks if its weight earns a place
// within the budget, evicting the pages of least weight. It is called from
// the update's map workers at once.
func (s *linkStore) offer(url string, depth uint32, links []string, weight float64) {
	if s == nil || len(links) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used >= s.budget && len(s.heap) > 0 && s.heap[0].weight >= weight && s.byURL[url] == nil {
		return // full of heavier pages: not worth packing the links
	}
	s.scratch = appendLinks(s.scratch[:0], origin(url), links)
	size := int64(len(url)+len(s.scratch)) + linkEntryOverhead
	if size > s.budget {
		return
	}
	if old := s.byURL[url]; old != nil {
		s.remove(old)
	}
	for s.used+size > s.budget && len(s.heap) > 0 && s.heap[0].weight < weight {
		s.remove(s.heap[0])
	}
	if s.used+size > s.budget {
		return
	}
	e := &linkEntry{url: url, depth: depth, n: len(links), links: slices.Clone(s.scratch), weight: weight}
	s.byURL[url] = e
	s.used += size
	heap.Push(&s.heap, e)
}

func (s *linkStore) remove(e *linkEntry) {
	heap.Remove(&s.heap, e.idx)
	delete(s.byURL, e.url)
	s.used -= int64(len(e.url)+len(e.links)) + linkEntryOverhead
}

// credit notes that an update planned cash for the URLs of targets.
func (s *linkStore) credit(targets []target, each float64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range targets {
		if e := s.byURL[targets[i].url]; e != nil {
			e.owed += targets[i].cash + each
		}
	}
}

// revisit is a stored page picked to pass its cash on.
type revisit struct {
	url   string
	depth uint32
	links []string
}

// pick returns up to n stored pages with the most cash owed, and resets
// what they are owed.
func (s *linkStore) pick(n int) []revisit {
	if s == nil || n <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var owed []*linkEntry
	for _, e := range s.byURL {
		if e.owed > 0 {
			owed = append(owed, e)
		}
	}
	sort.Slice(owed, func(i, j int) bool { return owed[i].owed > owed[j].owed })
	if len(owed) > n {
		owed = owed[:n]
	}
	out := make([]revisit, len(owed))
	for i, e := range owed {
		e.owed = 0
		out[i] = revisit{url: e.url, depth: e.depth, links: e.decodeLinks()}
	}
	return out
}

// visited records the cash a page distributed at a revisit as its weight.
func (s *linkStore) visited(url string, weight float64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if e := s.byURL[url]; e != nil {
		e.weight = weight
		heap.Fix(&s.heap, e.idx)
	}
	s.mu.Unlock()
}

// forget drops a page (it is no longer a fetched page with links).
func (s *linkStore) forget(url string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if e := s.byURL[url]; e != nil {
		s.remove(e)
	}
	s.mu.Unlock()
}

// threshold is the least weight a page must have to enter the store: the
// lightest page kept when the store is full, 0 while it has room. Nodes
// stage the outlinks of the pages that reach it.
func (s *linkStore) threshold() float64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used < s.budget*9/10 || len(s.heap) == 0 {
		return 0
	}
	return s.heap[0].weight
}

// size returns the pages stored and their bytes.
func (s *linkStore) size() (pages int, bytes int64) {
	if s == nil {
		return 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byURL), s.used
}

// linkHeap is a min-heap of entries by weight.
type linkHeap []*linkEntry

func (h linkHeap) Len() int           { return len(h) }
func (h linkHeap) Less(i, j int) bool { return h[i].weight < h[j].weight }
func (h linkHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *linkHeap) Push(x any) {
	e := x.(*linkEntry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *linkHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

package rounds

import (
	"context"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// closedUntil is the back-off given to a host that has used its page
// budget: generate skips it from then on.
var closedUntil = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// hostStore keeps the fetcher's per-host state (robots.txt, DNS, back-off)
// in the crawl database. Saves are collected and written in batches by
// flush; loads see unsaved records first.
type hostStore struct {
	c       *Crawler
	mu      sync.Mutex
	pending map[string]store.HostRecord
	closed  map[string]bool
	flushed time.Time // last flush
}

func newHostStore(c *Crawler) *hostStore {
	return &hostStore{c: c, pending: map[string]store.HostRecord{}, closed: map[string]bool{}}
}

// LoadHost returns the stored record of host.
func (h *hostStore) LoadHost(host string) (store.HostRecord, bool, error) {
	h.mu.Lock()
	rec, ok := h.pending[host]
	h.mu.Unlock()
	if ok {
		return rec, true, nil
	}
	return h.c.st.Host(host)
}

// SaveHost queues host's record for the next flush. A host closed for its
// budget stays closed whatever the fetcher's back-off says.
func (h *hostStore) SaveHost(host string, rec store.HostRecord) {
	if len(rec.Robots) > store.MaxRobotsBytes {
		rec.Robots = rec.Robots[:store.MaxRobotsBytes]
	}
	if len(rec.IPs) > 64 {
		rec.IPs = rec.IPs[:64]
	}
	h.mu.Lock()
	if h.closed[host] {
		rec.BackoffUntil = closedUntil
	}
	h.pending[host] = rec
	h.mu.Unlock()
}

// close marks host as having used its budget.
func (h *hostStore) close(host string) error {
	rec, _, err := h.LoadHost(host)
	if err != nil {
		return err
	}
	rec.BackoffUntil = closedUntil
	h.mu.Lock()
	h.closed[host] = true
	h.pending[host] = rec
	h.mu.Unlock()
	return nil
}

// flushIfDue flushes when the last flush is 200 ms old.
func (h *hostStore) flushIfDue(ctx context.Context) error {
	h.mu.Lock()
	due := time.Since(h.flushed) >= 200*time.Millisecond
	h.mu.Unlock()
	if !due {
		return nil
	}
	return h.flush(ctx)
}

// flush writes the queued records.
func (h *hostStore) flush(ctx context.Context) error {
	h.mu.Lock()
	h.flushed = time.Now()
	if len(h.pending) == 0 {
		h.mu.Unlock()
		return nil
	}
	recs := h.pending
	h.pending = map[string]store.HostRecord{}
	h.mu.Unlock()
	b := store.NewBatch()
	for host, rec := range recs {
		b.PutHost(host, rec)
		if b.Len() >= h.c.o.BatchOps {
			if _, err := h.c.apply(ctx, b); err != nil {
				h.requeue(recs)
				return err
			}
			b = store.NewBatch()
		}
	}
	if b.Len() > 0 {
		if _, err := h.c.apply(ctx, b); err != nil {
			h.requeue(recs)
			return err
		}
	}
	return nil
}

// requeue puts records back after a failed flush, unless newer ones came.
func (h *hostStore) requeue(recs map[string]store.HostRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for host, rec := range recs {
		if _, ok := h.pending[host]; !ok {
			h.pending[host] = rec
		}
	}
}

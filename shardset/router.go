package shardset

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/route"
	"github.com/meridian-crawler/meridian/shard"
)

// keyPrefix keyed a host's politeness key in the crawl database of the
// shard that routed it, before the site's one record of where a host is
// (federation.ReadHostLoc) held it: read where that record is missing, in
// data written before, never written.
const keyPrefix = "shardset/key/"

// outboxOwner names shard t in a shard's outbox.
func outboxOwner(t int) string { return outboxPrefix + GroupID(t) }

// outboxPrefix begins the outbox owner of every other shard (no site's
// name begins with it).
const outboxPrefix = federation.LocalOutboxPrefix

// Maximum records per outbox entry and per delivered frame.
const (
	maxPutsPerEntry = 4096
	maxFramePuts    = 50_000
	maxFrameBytes   = 4 << 20
)

// Router routes the URLs a shard's update finds (route.Router): in a
// federation (NewFedRouter), those of other sites' hosts go to the shard's
// outbox for their site; of the rest, a URL whose host's shard is this one
// stays, the others go to their shard's outbox in the same command, and
// the Set delivers them.
type Router struct {
	set *Set
	sh  int
	db  *crawldb.DB

	mu   sync.Mutex
	locs map[string]federation.HostLoc // host → its location record (key, and place in a federation)

	fed *federation.Shard // in a federation (NewFedRouter): other sites' URLs
}

// A shard's router is all the rounds take of the routing layer (the
// rounds use each interface their Router implements).
var (
	_ route.Inbound  = (*Router)(nil)
	_ route.Ending   = (*Router)(nil)
	_ route.HandBack = (*Router)(nil)
)

// NewRouter returns shard sh's router; locate gives a host's politeness
// key (partition.Key of its addresses).
func (s *Set) NewRouter(sh int, db *crawldb.DB) *Router {
	return &Router{set: s, sh: sh, db: db, locs: map[string]federation.HostLoc{}}
}

// Route keeps this shard's URLs and writes the others into b as outbox
// entries for their shards.
func (r *Router) Route(ctx context.Context, urls []route.Remote, b *store.Batch) ([]route.Remote, route.Sent, error) {
	var away route.Sent
	if r.fed != nil {
		// Other sites' URLs first (the federation's partitioner, the
		// URL-sent cache, the shard's outbox for each site).
		var err error
		if urls, away, err = r.fed.Route(ctx, urls, b); err != nil {
			return nil, route.Sent{}, err
		}
	}
	local, sent, err := r.route(ctx, urls, b)
	if err != nil {
		return nil, route.Sent{}, err
	}
	if away.URLs > 0 || away.Cash != 0 {
		var cash opic.Sum
		cash.Add(sent.Cash)
		cash.Add(away.Cash)
		sent = route.Sent{URLs: sent.URLs + away.URLs, Cash: cash.Value()}
	}
	return local, sent, nil
}

// route keeps this shard's URLs, of this site's, and writes the others
// into b as outbox entries for their shards.
func (r *Router) route(ctx context.Context, urls []route.Remote, b *store.Batch) ([]route.Remote, route.Sent, error) {
	var local []route.Remote
	by := map[int][]route.Remote{}
	locs := map[string]federation.HostLoc{}
	var sent route.Sent
	var cash opic.Sum
	for _, u := range urls {
		h := crawl.HostOf(u.URL)
		l, err := r.loc(ctx, h, b)
		if err != nil {
			return nil, route.Sent{}, err
		}
		t := shard.Of(l.Key, r.set.settings.Shards)
		if t == r.sh {
			local = append(local, u)
			continue
		}
		locs[h] = l
		by[t] = append(by[t], u)
		sent.URLs++
		cash.Add(u.Cash)
	}
	sent.Cash = cash.Value()
	for _, t := range slices.Sorted(maps.Keys(by)) {
		for _, e := range r.entries(t, by[t], locs) {
			b.OutboxEnqueue(outboxOwner(t), e)
		}
	}
	return local, sent, nil
}

// loc returns host's location record (federation.ReadHostLoc): its
// politeness key, which names its shard, and in a federation its place,
// which the federation's routing (run first) recorded; a host with no
// record is located now and its key recorded in b (federation.PutHostKey).
// Located once, a host's shard never changes, so an update prepared again
// routes the same.
func (r *Router) loc(ctx context.Context, host string, b *store.Batch) (federation.HostLoc, error) {
	r.mu.Lock()
	l, ok := r.locs[host]
	r.mu.Unlock()
	if ok {
		return l, nil
	}
	st := r.db.Store()
	l, ok, err := federation.ReadHostLoc(st, host)
	if err != nil {
		return l, fmt.Errorf("shardset: location of %s: %w", host, err)
	}
	if !ok {
		l = federation.HostLoc{Host: host}
		v, err := st.User(keyPrefix + host) // data written before the one record
		if err != nil {
			return l, fmt.Errorf("shardset: key of %s: %w", host, err)
		}
		if v != nil {
			l.Key = string(v)
		} else {
			if l.Key, err = r.set.locate(ctx, host); err != nil {
				return l, fmt.Errorf("shardset: key of %s: %w", host, err)
			}
			federation.PutHostKey(b, host, l.Key)
		}
	}
	r.mu.Lock()
	if len(r.locs) >= maxKeys {
		clear(r.locs)
	}
	r.locs[host] = l
	r.mu.Unlock()
	return l, nil
}

// maxKeys bounds a router's memory of keys.
const maxKeys = 1 << 20

// entries cuts urls for shard t into encoded outbox entries (federation
// wire batches) with their hosts' locations (the key, and in a federation
// the place, so that the shard that takes them records where the host is
// as this one does, and its federation routes the host as this one), bounded in bytes as well
// as in URLs (federation.CutEntries), so that an entry always fits the
// crawl database's limit on one, however many URLs an update sends a shard.
func (r *Router) entries(t int, urls []route.Remote, locs map[string]federation.HostLoc) [][]byte {
	puts := make([]federation.Put, len(urls))
	for i, u := range urls {
		puts[i] = federation.Put{URL: u.URL, Cash: u.Cash, Depth: u.Depth}
	}
	loc := func(h string) (federation.HostLoc, bool) { l := locs[h]; l.Host = h; return l, true }
	return federation.CutEntries(GroupID(r.sh), GroupID(t), len(puts), func(i int) string { return puts[i].URL }, 24, loc,
		func(b *federation.Batch, lo, hi int) { b.Puts = puts[lo:hi] })
}

// Inbound returns the cash other shards have delivered to this one.
func (r *Router) Inbound() (puts, virtual float64, err error) {
	puts, virtual, _, err = federation.InboundTotals(r.db.Store())
	return puts, virtual, err
}

// Finished reports whether the site's crawl has ended: every shard
// passive and nothing in transit, as the meta group's leader found.
func (r *Router) Finished() bool {
	if r.fed != nil {
		return r.fed.Finished() // the federation's crawl has ended
	}
	return r.set.finished()
}

// Returned names, among hosts, those the shard held for another site
// that is back (federation.Shard.Returned); none without a federation.
func (r *Router) Returned(ctx context.Context, hosts []string) (map[string]route.Owner, error) {
	if r.fed == nil {
		return nil, nil
	}
	return r.fed.Returned(ctx, hosts)
}

// Away reports whether the fetcher drops host's jobs: in a federation,
// a host the shard held for a site that is back, or one of this site's
// that waits for a hand-back (federation.Shard.Away).
func (r *Router) Away(host string) bool { return r.fed != nil && r.fed.Away(host) }

// Waiting reports whether host, this site's, waits for another site to
// hand it back after this site was down (federation.Shard.Waiting); never
// without a federation.
func (r *Router) Waiting(host string) bool { return r.fed != nil && r.fed.Waiting(host) }

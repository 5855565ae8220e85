package shardset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/route"
	"github.com/meridian-crawler/meridian/shard"
)

// A sharded site in a federation (docs/sharding.md): each shard's router
// sends the URLs of other sites' hosts through the shard's outboxes
// (federation.Shard), which the shard's leader delivers to the other
// sites (fedLoop); the site's federation endpoint splits each batch it
// receives by shard and applies each part to the shard's leader
// (ApplyPart: in process, or over the node API); and the site is passive
// towards the federation when two state waves in a row found every shard
// passive, nothing in transit between shards or to other sites, and the
// same counters (Quiet). The site's crawl then ends when the federation's
// does, not when its shards are done.

// fedState is a Set's part in its site's federation.
type fedState struct {
	on     atomic.Bool
	shards sync.Map // shard → *fedShard

	mu    sync.Mutex
	quiet bool
	sent  map[string]uint64
	since uint64
	// backs and allBacks: the last wave's hand-backs (HandBacks).
	backs    map[string]federation.HandBack
	allBacks bool
}

// fedShard is a shard's sender, and the crawl database it was made for.
type fedShard struct {
	db   *crawldb.DB
	fs   fedSender
	busy atomic.Bool // a Step runs (fedLoop)
}

// fedSender moves a shard's outboxes for other sites on
// (*federation.Shard).
type fedSender interface {
	Step(ctx context.Context)
}

// Federate makes the Set a federated site's (call it before Run): the
// site's crawl ends when the federation's does (the routers' Finished),
// and the meta group's leader publishes its waves (Quiet) instead of
// marking the end.
func (s *Set) Federate() { s.fed.on.Store(true) }

// NewFedRouter returns shard sh's router in a federated site: fs (the
// shard's part in the site's federation, made on db) routes the URLs of
// other sites; the rest go between the shards as NewRouter's do.
func (s *Set) NewFedRouter(sh int, db *crawldb.DB, fs *federation.Shard) *Router {
	r := s.NewRouter(sh, db)
	r.fed = fs
	fs.Keep(func(ctx context.Context, urls []route.Remote, b *store.Batch) ([]route.Remote, error) {
		local, _, err := r.route(ctx, urls, b)
		return local, err
	})
	s.fed.shards.Store(sh, &fedShard{db: db, fs: fs})
	return r
}

// fedLoop moves the outboxes for other sites of this node's replicas on
// (Step: on a shard's leader; elsewhere its sender forgets what it was
// sending) until ctx ends: each shard's Step in a goroutine of its own,
// one at a time per shard, so that a peer site slow to answer (a call
// waits up to the federation's Timeout) delays neither the delivery
// between shards (deliverLoop) nor the other shards' senders.
func (s *Set) fedLoop(ctx context.Context) {
	t := time.NewTicker(deliverEvery)
	defer t.Stop()
	var steps sync.WaitGroup
	defer steps.Wait()
	for {
		for _, r := range s.replicas() {
			v, ok := s.fed.shards.Load(r.shard)
			if !ok {
				continue
			}
			f := v.(*fedShard)
			if f.db != r.db || f.busy.Swap(true) {
				continue
			}
			steps.Go(func() { // owner: fedLoop; ends with ctx (the sender's calls are bounded by its Timeout)
				defer f.busy.Store(false)
				f.fs.Step(ctx)
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ShardOf names the shard of a host by its politeness key
// (federation.ShardedSite).
func (s *Set) ShardOf(key string) int { return shard.Of(key, s.settings.Shards) }

// Quiet reports what the meta group's leader's last two state waves found
// (federation.ShardedSite): every shard passive with nothing in transit;
// what the shards acknowledged to each peer site, summed; and the meta
// group's applied index the shards' states were all read after.
func (s *Set) Quiet() (bool, map[string]uint64, uint64) {
	s.fed.mu.Lock()
	defer s.fed.mu.Unlock()
	return s.fed.quiet, s.fed.sent, s.fed.since
}

// HandBacks returns the site's hand-backs as the meta leader's last wave
// merged them (federation.ShardedSite): with a shard's state missing from
// it, every site any shard has a record for is pending (the missing shard
// may hold its hosts). nil on another node.
func (s *Set) HandBacks() map[string]federation.HandBack {
	s.fed.mu.Lock()
	defer s.fed.mu.Unlock()
	if s.fed.allBacks {
		return s.fed.backs
	}
	out := make(map[string]federation.HandBack, len(s.fed.backs))
	for site := range s.fed.backs {
		out[site] = federation.HandBack{Pending: true}
	}
	return out
}

// setBacks publishes a wave's merged hand-backs (all: every shard's
// state was in it).
func (s *Set) setBacks(backs map[string]federation.HandBack, all bool) {
	s.fed.mu.Lock()
	s.fed.backs, s.fed.allBacks = backs, all
	s.fed.mu.Unlock()
}

// setQuiet publishes a wave's verdict.
func (s *Set) setQuiet(quiet bool, sent map[string]uint64, since uint64) {
	s.fed.mu.Lock()
	s.fed.quiet, s.fed.sent, s.fed.since = quiet, sent, since
	s.fed.mu.Unlock()
}

// ApplyPart applies a part of a batch another site sent to shard sh
// (federation.ShardedSite): to this node's replica (its crawl database
// forwards the write to the shard's leader), else over the node API of a
// node that holds the shard.
func (s *Set) ApplyPart(ctx context.Context, sh int, from string, part []byte) error {
	if sh < 0 || sh >= s.settings.Shards {
		return fmt.Errorf("shardset: part for shard %d of %d", sh, s.settings.Shards)
	}
	if d := s.replica(sh); d != nil {
		return federation.ApplyPart(ctx, d.db, from, part)
	}
	api, err := s.holder(sh)
	if err != nil {
		return err
	}
	q := url.Values{"from": {from}, "to": {GroupID(sh)}}
	_, err = s.call(ctx, http.MethodPost, api, "/shardset/inbound?"+q.Encode(), part)
	return err
}

// serveInbound serves POST /shardset/inbound?from=SENDER&to=GROUP: a part
// of a batch from another site's sender applied to this node's replica.
func (s *Set) serveInbound(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	from, to := q.Get("from"), q.Get("to")
	sh := ShardOfGroup(to)
	if from == "" || sh < 0 || sh >= s.settings.Shards {
		http.Error(w, fmt.Sprintf("shardset: inbound: from %q and to %q must name a sender and one of this site's %d shards", from, to, s.settings.Shards), http.StatusBadRequest)
		return
	}
	d := s.replica(sh)
	if d == nil {
		http.Error(w, fmt.Sprintf("shardset: node %s holds no replica of shard %d", s.self, sh), http.StatusServiceUnavailable)
		return
	}
	part, err := io.ReadAll(io.LimitReader(req.Body, federation.DefaultMaxBytes+1))
	if err != nil || len(part) > federation.DefaultMaxBytes {
		http.Error(w, "shardset: inbound: body unreadable or over the frame limit", http.StatusRequestEntityTooLarge)
		return
	}
	if err := federation.ApplyPart(req.Context(), d.db, from, part); err != nil {
		code := http.StatusServiceUnavailable
		if errors.Is(err, federation.ErrRejected) || errors.Is(err, federation.ErrRefused) {
			code = http.StatusBadRequest
		}
		http.Error(w, err.Error(), code)
		return
	}
	fmt.Fprintln(w, 0)
}

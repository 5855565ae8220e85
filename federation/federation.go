package federation

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/partition/geoip"
	"github.com/meridian-crawler/meridian/route"
	"github.com/meridian-crawler/meridian/termwave"
)

// Options configures a site's federation layer.
type Options struct {
	File File   // the federation file
	Self string // this site's name in it (its --region)
	DB   *crawldb.DB
	// ServerTLS and ClientTLS authenticate the federation endpoint and
	// this site's calls to its peers (certs.Load).
	ServerTLS, ClientTLS *tls.Config
	// Resolve gives a host's addresses (the partition key, the GeoIP
	// location): none for a name that does not exist, an error when it
	// cannot tell now (the host is not placed then; the call that placed
	// it fails and is tried again). Every site must get the same answer
	// for a host, so Resolve should wait out a lookup that failed
	// (dnscache.Resolver.Settled). nil: hosts are keyed by name.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// GeoIP locates addresses for the distance partitioner; nil: no host
	// is located (the consistent ring decides).
	GeoIP *geoip.DB
	// Idle is the crawl database's applied index as of the moment the
	// site last found nothing to do (rounds.Crawler.IdleIndex); 0: busy.
	Idle func() uint64
	// LeaderState asks the site's leader for its probe state (its
	// Fed.LeaderState), for a node that does not lead: the leader runs
	// the rounds and delivers the outbox, so only it can tell whether the
	// site is passive. nil: such a node reports the site busy.
	LeaderState func(ctx context.Context) ([]byte, error)
	// Seeds are the crawl's seed URLs (every site's): when a site goes
	// down past the grace period, those of its hosts this site now owns
	// are added to its frontier (the down site's own frontier is lost).
	Seeds []string
	// Rounds reads the rounds' state in DB (the next round, those in
	// flight: route.Rounds), for the hand-back of a returning site's
	// hosts. nil: no round is ever in flight.
	Rounds func() (route.Rounds, error)
	// Shards delivers the outbox entries for other shards of this site
	// (Transport). nil: the site has one shard (today's sites).
	Shards Transport
	// Sharded is this site's shards, for a sharded site (sharded.go): a
	// batch received is split by shard and applied to each shard's
	// leader; the shards send their own batches (Fed.Shard); the site is
	// passive when its shards are. nil: the site has one crawl database,
	// DB.
	Sharded ShardedSite
	// SentCache is the URL-sent cache's capacity in fingerprints; 0 → 4 Mi.
	SentCache uint64
	// ProbeEvery is how often peers are probed; 0 → 250 ms.
	ProbeEvery time.Duration
	// SuspectAfter: a peer silent this long is suspect; 0 → 2 s. Its hosts
	// move after the file's grace period more.
	SuspectAfter time.Duration
	// Timeout of one call to a peer; 0 → 10 s.
	Timeout time.Duration
	Logger  *slog.Logger
	Now     func() time.Time
}

// Fed is a site's federation layer: the rounds' Router (route.Router),
// the endpoint's Receiver, and the loop that delivers the outbox and watches the peers.
type Fed struct {
	o      Options
	st     *store.Store
	part   partition.Partitioner
	client *Client
	server *Server
	log    *slog.Logger

	locs  locations
	stats stats

	mu    sync.Mutex
	peers map[string]*peer
	down  atomic.Pointer[map[string]bool] // sites down past their grace period
	// returned: a site down past its grace period came back since this
	// site started (it may hold some of its hosts).
	returned atomic.Bool
	// gate: what this site's own hosts wait for (handback.go).
	gate atomic.Pointer[gate]

	lastRecv   atomic.Uint64     // the applied index of the last batch received
	terminated atomic.Bool       // the federation's crawl has ended
	ended      atomic.Bool       // and this site may stop (the coordinator told the others)
	waves      termwave.Detector // the coordinator's termination waves

	// name is the sender's name in batches when it is not o.Self: a
	// shard's view of its site's federation (Fed.Shard); site is then the
	// site's Fed, whose view of the peers (down, sharded) it shares.
	name string
	site *Fed
	// shardNo is a shard's view's shard (from its sender name).
	shardNo int
	// keep, on a shard's view (Shard.Keep), routes URLs of this site's
	// own hosts between its shards.
	keep Local
	// shards are a sharded site's shards' views made on this node, by
	// sender name (the latest of each: Fed.Shard), for Status.
	shards sync.Map
}

// sender is the name this Fed's batches are sent under.
func (f *Fed) sender() string {
	if f.name != "" {
		return f.name
	}
	return f.o.Self
}

// stats are the node's counters since it started.
type stats struct {
	hits, lookups            atomic.Int64
	sentURLs, sentBatches    atomic.Int64
	recvURLs, recvBatches    atomic.Int64
	dupBatches               atomic.Int64
	deliveries, deliveryNano atomic.Int64
}

func (s *stats) observe(d time.Duration) {
	s.deliveries.Add(1)
	s.deliveryNano.Add(int64(d))
}

// New checks the options and builds the federation layer of site o.Self.
func New(o Options) (*Fed, error) {
	if o.DB == nil {
		return nil, errors.New("federation: no crawl database")
	}
	if _, ok := o.File.Site(o.Self); !ok {
		return nil, fmt.Errorf("federation: site %q (--region) is not in the federation file", o.Self)
	}
	part, err := o.File.partitioner()
	if err != nil {
		return nil, fmt.Errorf("federation: %w", err)
	}
	if o.SentCache == 0 {
		o.SentCache = 4 << 20
	}
	if o.ProbeEvery <= 0 {
		o.ProbeEvery = 250 * time.Millisecond
	}
	if o.SuspectAfter <= 0 {
		o.SuspectAfter = 2 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	f := &Fed{o: o, st: o.DB.Store(), part: part, log: o.Logger, peers: map[string]*peer{}, locs: locations{m: map[string]location{}}}
	f.down.Store(&map[string]bool{})
	now := o.Now()
	start := &gate{peers: map[string]bool{}} // until each peer is heard from
	for _, s := range o.File.Sites {
		if s.Name != o.Self {
			f.peers[s.Name] = &peer{name: s.Name, spec: s, lastOK: now}
			start.peers[s.Name] = true
		}
	}
	f.gate.Store(start)
	f.client = NewClient(ClientOptions{Site: o.Self, TLS: o.ClientTLS, Timeout: o.Timeout})
	f.server = NewServer(ServerOptions{Site: o.Self, TLS: o.ServerTLS, Receiver: f, Log: o.Logger})
	return f, nil
}

// Serve serves the federation endpoint on ln until Shutdown.
func (f *Fed) Serve(ln net.Listener) error { return f.server.Serve(ln) }

// Shutdown stops the endpoint and closes the connections to the peers.
func (f *Fed) Shutdown(ctx context.Context) error {
	return errors.Join(f.server.Shutdown(ctx), f.client.Close())
}

// Finished reports whether the federation's crawl has ended (see
// route.Ending).
func (f *Fed) Finished() bool { return f.ended.Load() }

// What a Fed and a shard's sender are to the rounds, besides routers: the
// rounds use each interface their Router implements, so these say it.
var (
	_ route.Inbound  = (*Fed)(nil)
	_ route.Ending   = (*Fed)(nil)
	_ route.HandBack = (*Fed)(nil)
	_ route.Ending   = (*Shard)(nil)
	_ route.HandBack = (*Shard)(nil)
)

// CacheStats returns the URL-sent cache's hits and lookups on this node.
func (f *Fed) CacheStats() (hits, lookups int64) { return f.stats.hits.Load(), f.stats.lookups.Load() }

// Traffic returns the bytes exchanged with each peer by this node's calls.
func (f *Fed) Traffic() map[string]Traffic { return f.client.Traffic() }

func (f *Fed) isDown(site string) bool {
	if f.site != nil {
		return f.site.isDown(site)
	}
	return (*f.down.Load())[site]
}

func (f *Fed) noteReceived(index uint64, urls int) {
	for {
		old := f.lastRecv.Load()
		if index <= old || f.lastRecv.CompareAndSwap(old, index) {
			break
		}
	}
	f.stats.recvBatches.Add(1)
	f.stats.recvURLs.Add(int64(urls))
}

// apply applies b through the site's Raft group.
func (f *Fed) apply(ctx context.Context, b *store.Batch) error {
	res, err := f.o.DB.Apply(ctx, b)
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("federation: apply: %w", err)
	}
	return nil
}

// Run delivers the outbox, probes the peers, hands over the hosts of sites
// down past the grace period and detects the federation's termination,
// while this node leads its site's crawl database, until ctx is done.
func (f *Fed) Run(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastProbe time.Time
	forgot := false // forgetRemoved done
	probes := make(chan struct{}, 1)
	probes <- struct{}{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now := f.o.Now()
		if err := f.updateGate(); err != nil {
			f.log.Error("federation: what this site's hosts wait for", "err", err)
		}
		if now.Sub(lastProbe) >= f.o.ProbeEvery {
			select {
			case <-probes: // one probe round at a time
				lastProbe = now
				wg.Go(func() { // owner: Run; bounded by the calls' timeouts
					defer func() { probes <- struct{}{} }()
					f.probeAll(ctx)
				})
			default:
			}
		}
		if !f.o.DB.IsLeader() || f.o.Sharded != nil {
			continue // a sharded site's shards deliver their own outboxes
		}
		if !forgot {
			if err := f.forgetRemoved(ctx); err != nil {
				f.log.Error("federation: hand over what is held for sites removed from the federation file", "err", err)
			} else {
				forgot = true
			}
		}
		f.mu.Lock()
		peers := make([]*peer, 0, len(f.peers))
		for _, p := range f.peers {
			peers = append(peers, p)
		}
		f.mu.Unlock()
		for _, p := range peers {
			if ctx.Err() != nil {
				return nil
			}
			f.tend(ctx, p, now)
		}
	}
}

// tend moves p's outbox on: hand-over, sync, or one delivery; and the
// hand-back of p's hosts once p is back (handback.go).
func (f *Fed) tend(ctx context.Context, p *peer, now time.Time) {
	f.mu.Lock()
	down, synced, applied, known := p.down, p.synced, p.state.Recv[f.o.Self], p.heard
	f.mu.Unlock()
	if !down {
		// The hand-back of its hosts, if it returned, goes on beside
		// the deliveries.
		if err := f.handBackStep(ctx, p, now); err != nil {
			f.log.Error("federation: hand back", "peer", p.name, "err", err)
		}
	}
	switch {
	case down:
		if err := f.holding(ctx, p); err != nil {
			f.log.Error("federation: hand over", "peer", p.name, "err", err)
			return
		}
		// A batch it never answered stays in the outbox: it goes to the
		// next owners with the rest.
		f.mu.Lock()
		p.pend = nil
		f.mu.Unlock()
		for ctx.Err() == nil {
			did, err := f.handOver(ctx, p)
			if err != nil {
				f.log.Error("federation: hand over", "peer", p.name, "err", err)
				return
			}
			if !did {
				break
			}
		}
		f.mu.Lock()
		need := !p.reseeded
		f.mu.Unlock()
		if need && ctx.Err() == nil {
			if err := f.reseed(ctx, p); err != nil {
				f.log.Error("federation: seeds of a site down", "peer", p.name, "err", err)
				return
			}
			f.mu.Lock()
			p.reseeded = p.down // unless it came back meanwhile
			f.mu.Unlock()
		}
	case !synced:
		if !known {
			return // wait for its first answer
		}
		f.mu.Lock()
		asked := p.askedAt
		f.mu.Unlock()
		if err := f.resync(ctx, p, applied, asked); err != nil {
			f.log.Error("federation: sync with peer", "peer", p.name, "err", err)
		}
	default:
		f.deliver(ctx, p, now)
	}
}

// reseed adds to this site's frontier the seeds of p's hosts that this
// site owns while p is down (with no cash: the seeds' cash was injected at
// p). A shard's view adds those of its own shard's hosts (located by its
// site, and recorded in the shard: their fetched URLs go back to p).
func (f *Fed) reseed(ctx context.Context, p *peer) error {
	at := f // where the seeds' hosts are located
	if f.site != nil {
		at = f.site
	}
	hosts := map[string]bool{}
	var list []string
	for _, u := range f.o.Seeds {
		if h := hostOf(u); h != "" && !hosts[h] {
			hosts[h] = true
			list = append(list, h)
		}
	}
	if _, err := at.Owners(ctx, list); err != nil { // locate them
		return err
	}
	b := store.NewBatch()
	n := 0
	for _, u := range f.o.Seeds {
		h := hostOf(u)
		l, ok, err := at.cachedLoc(h)
		if err != nil || !ok {
			return err
		}
		if f.site != nil && f.site.o.Sharded.ShardOf(l.key) != f.shardNo {
			continue // another shard's
		}
		if f.primary(h, l) == p.name && f.owner(h, l) == f.o.Self {
			if at != f {
				if _, known, err := f.cachedLoc(h); err != nil {
					return err
				} else if !known {
					b.PutUser(locPrefix+h, encodeLocation(l))
				}
			}
			b.PutIfAbsent(u, 0, 0)
			n++
		}
	}
	if n == 0 {
		return nil
	}
	f.log.Info("federation: seeds of a site down added here", "site", p.name, "seeds", n)
	return f.apply(ctx, b)
}

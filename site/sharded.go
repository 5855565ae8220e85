package site

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/route"
	"github.com/meridian-crawler/meridian/shard"
	"github.com/meridian-crawler/meridian/shardset"
)

// A sharded site (--shards, issue 21): the node holds its replicas on a
// crawldb.Host (one Raft listener, one store), the site's meta group keeps
// its members, settings and placement, and a shardset.Set runs the shards
// this node holds, fed by the node's one fetcher.

// DefaultReplicas is a sharded site's replication target when --replicas
// is not given.
const DefaultReplicas = 3

// deadAfter is how long a node of a sharded site stays silent before it
// is down for the placement (shardset.Options.DeadAfter): three times
// --fail-timeout, at least 5 s.
func deadAfter(failTimeout time.Duration) time.Duration { return max(3*failTimeout, 5*time.Second) }

// isSharded reports whether the data directory holds a sharded node.
func isSharded(data string) bool {
	_, err := os.Stat(filepath.Join(data, "crawldb", "groups"))
	return err == nil
}

// shardedStart is what start hands startSharded.
type shardedStart struct {
	prev      Info
	hasState  bool
	join      string // the API to join through ("" → create or restart)
	raftAddr  string
	advertise string
	tls       *crawldb.TLSConfig
	seeds     []string
	norm      *urlnorm.Normalizer
	scope     *urlnorm.Scope
}

// startSharded opens a sharded node: its Host and meta group (creating the
// site, joining it, or restarting), its Set and its fetcher.
func (s *Site) startSharded(ctx context.Context, ss shardedStart) error {
	cfg := &s.cfg
	log := s.log
	if cfg.Replicas == 0 {
		cfg.Replicas = DefaultReplicas
	}
	if cfg.Shards == 0 {
		cfg.Shards = shard.DefaultShards // a restart reads its site's from the meta group
	}
	host, err := crawldb.OpenHost(ctx, crawldb.HostOptions{
		Dir: filepath.Join(cfg.Data, "crawldb"), NodeID: cfg.Node, RaftAddr: ss.raftAddr, RaftAdvertise: cfg.RaftAdvertise,
		AdvertiseAPI: ss.advertise, TLS: ss.tls, NoSync: cfg.NoSync,
		Logger: slog.New(quietHandler{log.Handler()}).With("part", "crawldb"),
	})
	if err != nil {
		return fmt.Errorf("site: open the node's crawl database: %w", err)
	}
	s.mu.Lock()
	s.host = host
	s.mu.Unlock()
	g := crawldb.GroupOptions{ID: shardset.MetaGroup}
	creating := !ss.hasState && ss.join == ""
	if creating {
		g.Bootstrap = []crawldb.Member{{ID: cfg.Node, RaftAddr: host.RaftAddr(), APIAddr: ss.advertise}}
	}
	meta, err := host.Group(ctx, g)
	if err != nil {
		return fmt.Errorf("site: open the meta group: %w", err)
	}
	if !ss.hasState && ss.join != "" {
		if err := host.AddVoterAt(ctx, ss.join, shardset.MetaGroup, cfg.Node, host.RaftAddr(), ss.advertise); err != nil {
			if errors.Is(err, crawldb.ErrRefused) {
				return fmt.Errorf("%w: %w", ErrWrongSite, err)
			}
			return fmt.Errorf("site: join the site's meta group through %s: %w", ss.join, err)
		}
	}
	s.db = meta
	s.mu.Lock()
	s.dbReady = meta
	s.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = meta.WaitLeader(wctx)
	cancel()
	if err != nil {
		return fmt.Errorf("site: the meta group has no leader: %w", err)
	}
	if creating {
		if err := shardset.Create(ctx, meta, shardset.Settings{Shards: cfg.Shards, Replicas: cfg.Replicas, Creator: cfg.Node}); err != nil {
			return err
		}
	}
	// A node that joined (or restarts) reads its site's settings from its
	// replica of the meta group once it has caught up.
	var st shardset.Settings
	for {
		if st, err = shardset.ReadSettings(meta.Store()); err == nil {
			break
		}
		if !errors.Is(err, shardset.ErrNoSettings) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	cfg.Shards, cfg.Replicas = st.Shards, st.Replicas

	seeds, err := s.readSeeds(ss.seeds, ss.norm, ss.scope)
	if err != nil {
		return err
	}
	res, err := dnscache.New(dnscache.Options{Server: cfg.DNS, LocalAddrs: cfg.FetchFrom})
	if err != nil {
		return fmt.Errorf("site: resolver: %w", err)
	}
	// A host's shard is from its addresses, or its name when it has none;
	// a lookup that failed places it nowhere (dnscache's Settled).
	locate := func(ctx context.Context, host string) (string, error) {
		ips, err := res.Settled(ctx, host)
		return partition.Key(host, ips), err
	}
	var set *shardset.Set
	set, err = shardset.New(shardset.Options{
		Host: host, Meta: meta, Dir: cfg.Data, Rounds: cfg.Rounds, Locate: locate, Client: s.nodeClient, Scheme: s.apiScheme,
		DeadAfter: deadAfter(cfg.FailTimeout), ReplaceAfter: cfg.ReplaceAfter, ExpectNodes: cfg.ExpectNodes,
		Crawler: func(sh int) rounds.Options {
			o := s.crawlerOptions(cfg, res)
			o.Width = max(cfg.Width/st.Shards, 1)
			o.Controls, o.Shards = meta.Store(), st.Shards // the operator's controls are the site's
			o.Logger = log.With("part", "rounds", "node", cfg.Node, "shard", sh)
			o.OnRound = func(st rounds.RoundStats) { s.metrics.round(st); s.dash.round(sh, st) }
			return o
		},
		Router: func(sh int, db *crawldb.DB) (route.Router, error) {
			if s.fed != nil {
				return set.NewFedRouter(sh, db, s.fed.Shard(db, federation.SenderName(cfg.Region, sh), func() (route.Rounds, error) { return roundsInFlight(db) })), nil
			}
			return set.NewRouter(sh, db), nil
		},
		Seeds: func(ctx context.Context, sh int) ([]string, error) {
			var out []string
			for _, u := range seeds {
				k, err := locate(ctx, crawl.HostOf(u))
				if err != nil {
					return nil, fmt.Errorf("site: place the seeds: %w", err)
				}
				if shard.Of(k, st.Shards) == sh {
					out = append(out, u)
				}
			}
			return out, nil
		},
		Logger: log.With("part", "shards", "node", cfg.Node),
	})
	if err != nil {
		return err
	}
	s.set = set
	if cfg.Federation != "" {
		// The site's federation layer on its meta group; its shards send
		// and receive (shardset/federated.go). Only the seeds of this
		// site's hosts are crawled here.
		if err := s.startFederationOf(res, seeds, set); err != nil {
			return err
		}
		set.Federate()
		if seeds, err = s.ownSeeds(ctx, seeds); err != nil {
			return err
		}
	}
	s.warc, err = warcfile.Open(warcfile.Options{Dir: filepath.Join(cfg.Data, "warc"), Prefix: "meridian-" + cfg.Node, MaxSize: cfg.WARCSize, Software: "meridian", Index: true, Logger: log})
	if err != nil {
		return fmt.Errorf("site: warc: %w", err)
	}
	fo, err := fetcherOptions(*cfg)
	if err != nil {
		return err
	}
	fo.Resolver, fo.WARC, fo.Hosts, fo.Normalizer, fo.Scope = res, s.warc, set.Hosts(), ss.norm, ss.scope
	fo.Seen, fo.OnResult, fo.Skip, fo.Logger = set.Seen, set.OnResult, set.Skip, log.With("part", "fetcher")
	fo.Override = rounds.NewControlWatch(meta.Store(), nil, log).HostOverride
	if err := s.nearDups(&fo); err != nil {
		return err
	}
	s.fetch, err = fetcher.New(fo)
	if err != nil {
		return fmt.Errorf("site: fetcher: %w", err)
	}
	set.Attach(s.fetch)
	s.metrics.attach(s)
	return s.finishStart(ss.prev, ss.raftAddr)
}

// shardedStatus is Status for a sharded node: the crawl database's counts
// are those of the shards this node leads.
func (s *Site) shardedStatus() Status {
	cs := crawldbStatus{ByStatus: map[string]uint64{}, Leader: s.db.IsLeader()}
	shards := s.set.Status()
	for _, sh := range shards {
		db := s.host.Lookup(shardset.GroupID(sh.Shard))
		if db == nil || sh.Leader != s.cfg.Node {
			continue
		}
		c := db.Store().Counts()
		cs.URLs += c.URLs
		cs.Frontier += c.Frontier
		cs.Scheduled += c.Scheduled
		for k, v := range c.ByStatus {
			cs.ByStatus[store.Status(k).String()] += v
		}
	}
	settings := s.set.Settings()
	st := Status{Region: s.cfg.Region, Node: s.cfg.Node, Role: strings.ToLower(s.db.Status().State), PID: s.info.PID, Started: s.started,
		Uptime: time.Since(s.started).Seconds(), Fetcher: fetcherStatusOf(s.fetch.Stats(), s.cfg.FetchFrom), CrawlDB: cs, Traffic: s.host.Traffic(),
		Shards: shards, Sharding: &settings}
	// The rounds of the shards led here: the newest round, a phase under
	// way in any of them, rounds done and cash summed.
	rs := s.Rounds()
	st.Phase, st.Rounds = rs.Phase, rs
	if rs.Next > 0 {
		st.Round = rs.Next - 1
	}
	rate := s.dash.latest()
	st.Fetcher.PagesPerSec, st.Fetcher.PagesAt = rate.Pages, rate.T
	st.Refetch = s.refetchStatus()
	st.Controls = s.controlsStatus()
	if s.fed != nil {
		fs := s.fed.Status()
		st.Federation = &fs
	}
	s.mu.Lock()
	st.Stopped = s.stopped
	s.mu.Unlock()
	if s.sim != nil {
		st.Websim = "http://" + s.sim.AdminAddr() + "/_websim/stats"
	}
	return st
}

// Rounds is the crawl's status on this node: the sum over the shards it
// leads (rounds done and cash summed, the newest round).
func (s *Site) Rounds() rounds.Status {
	var out rounds.Status
	for _, c := range s.set.Leading() {
		st := c.Status()
		out.Done += st.Done
		out.Next = max(out.Next, st.Next)
		out.Virtual += st.Virtual
		out.Injected += st.Injected
		out.Spent += st.Spent
		if st.Phase != "" && st.Phase != "idle" {
			out.Phase = st.Phase
		}
		out.Leading = true
	}
	if out.Phase == "" {
		out.Phase = "idle"
	}
	s.mu.Lock()
	out.Finished = s.finished // the crawl's end, over its shards (shardedEnding)
	s.mu.Unlock()
	return out
}

// counts are the crawl database counts of the shards this node leads,
// summed.
func (s *Site) counts() store.Counts {
	out := store.Counts{ByStatus: map[store.Status]uint64{}}
	for sh := range s.set.Leading() {
		db := s.host.Lookup(shardset.GroupID(sh))
		if db == nil {
			continue
		}
		c := db.Store().Counts()
		out.Applied += c.Applied
		out.URLs += c.URLs
		out.Frontier += c.Frontier
		out.Outbox += c.Outbox
		out.Scheduled += c.Scheduled
		for k, v := range c.ByStatus {
			out.ByStatus[k] += v
		}
	}
	return out
}

// Stores are the crawl databases of the shards this node holds a replica
// of, for reading (in shard order). A URL is in one of them only.
func (s *Site) Stores() []*store.Store {
	var out []*store.Store
	for sh := range s.cfg.Shards {
		if db := s.host.Lookup(shardset.GroupID(sh)); db != nil {
			out = append(out, db.Store())
		}
	}
	return out
}

// leaveWait bounds a sharded node's leave.
const leaveWait = 2 * time.Minute

// leaveSharded moves this node's replicas to the others, takes the node
// out of the meta group and ends Run.
func (s *Site) leaveSharded() {
	ctx, cancel := context.WithTimeout(context.Background(), leaveWait)
	defer cancel()
	err := s.set.Leave(ctx)
	if err == nil {
		err = s.db.Leave(ctx)
	}
	if err == nil {
		s.info.Left = true
		err = writeInfo(s.cfg.Data, s.info)
	}
	if err == nil {
		s.log.Info("site: node left the site", "node", s.cfg.Node)
	} else {
		s.log.Error("site: leave", "err", err)
	}
	s.mu.Lock()
	s.leaveErr = err
	stop := s.stopRun
	s.mu.Unlock()
	stop()
}

package site

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/rounds/control"
	"github.com/meridian-crawler/meridian/shardset"
	"github.com/meridian-crawler/meridian/site/dashboard"
)

// Dashboard is what GET /dashboard.json returns: everything the dashboard
// page at / draws, bounded in size whatever the crawl's (no per-host list
// beyond a top N). The page polls it once per Interval.
type Dashboard struct {
	Region   string    `json:"region"`
	Node     string    `json:"node"`
	Role     string    `json:"role"` // leader, follower, candidate
	Now      time.Time `json:"now"`
	Uptime   float64   `json:"uptime_s"`
	Interval float64   `json:"interval_s"` // seconds between samples (and polls)
	Round    uint64    `json:"round"`      // the newest round generated
	Phase    string    `json:"phase"`
	Finished string    `json:"finished,omitempty"` // why the crawl ended, once it has

	// Rate is the newest sample: the figure the page shows as pages/s
	// (GET /status's fetcher.pages_per_s is the same sample).
	Rate Sample `json:"rate"`
	// Series are the samples of the last dashSamples intervals, oldest first.
	Series []Sample `json:"series"`
	// Rounds are the last dashRounds rounds, finished or not, oldest first.
	Rounds []RoundBar `json:"rounds"`

	CrawlDB DashDB     `json:"crawldb"`
	OPIC    DashOPIC   `json:"opic"`
	Hosts   DashHosts  `json:"hosts"`
	Nodes   []DashNode `json:"nodes,omitempty"`
	// Refetch is the refetch figures, present when the site refetches
	// (--refetch-interval) or its recent rounds refetched pages.
	Refetch *DashRefetch `json:"refetch,omitempty"`
	// Controls are the operator's overrides (site pause, limits, host);
	// absent while there are none.
	Controls *control.Controls `json:"controls,omitempty"`
	// Federation is absent on a site without --federation.
	Federation *DashFed `json:"federation,omitempty"`
	// Sharded is a sharded node's shards and the site's nodes (absent on a
	// site without --shards). On such a node CrawlDB, OPIC and Round are
	// those of the shards it leads, and Rounds are the last rounds of
	// those shards to end, each with its shard.
	Sharded *DashSharded `json:"sharded,omitempty"`
}

// DashSharded is a sharded site as this node sees it: one row per shard it
// holds a replica of (the others are not in its store: Partial says so),
// and the site's nodes; and the site-wide view gathered from every node.
type DashSharded struct {
	Shards   int  `json:"shards"`   // the site's shards
	Replicas int  `json:"replicas"` // the site's target R
	Held     int  `json:"held"`     // shards this node holds a replica of (len(Rows))
	Partial  bool `json:"partial"`  // Held < Shards: the rows, and each node's counts, cover only these
	// Window is the span, in seconds, over which each row's pages/s is
	// measured (at most shardWindow).
	Window float64         `json:"rate_window_s"`
	Rows   []DashShard     `json:"rows"`
	Nodes  []DashShardNode `json:"nodes"`
	// Site is the site-wide view: every shard of the site and every node,
	// gathered from the other nodes (each within siteWait; see SiteView).
	Site *SiteView `json:"site"`
}

// DashShard is one shard: its replication, and its crawl database as this
// node's replica has it.
type DashShard struct {
	Shard    int      `json:"shard"`
	Leader   string   `json:"leader"`   // "" while it has none
	Replicas []string `json:"replicas"` // the group's voters
	// Want is the replicas the site's target allows now: min(R, nodes).
	Want            int      `json:"want_replicas"`
	UnderReplicated bool     `json:"under_replicated"`
	Down            []string `json:"down,omitempty"` // replicas or targets on nodes silent for the placement
	URLs            uint64   `json:"urls"`
	Frontier        uint64   `json:"frontier"` // unfetched URLs
	Fetched         uint64   `json:"fetched"`  // pages fetched
	// Pages is the URLs whose result the shard's crawl database recorded
	// (it leaves the frontier: fetched, gone, failed for good…) per second
	// over the last Window seconds. A shard writes its results once per
	// round, so a shorter window shows bursts.
	Pages float64 `json:"pages_s"`
	Step  string  `json:"step,omitempty"` // the placement step under way
	// Moving says why the shard moves (shardset.ShardStatus.Moving).
	Moving   string `json:"moving,omitempty"`
	Finished bool   `json:"finished"`
}

// DashShardNode is one node of a sharded site (the meta group's voters).
type DashShardNode struct {
	ID   string `json:"id"`
	API  string `json:"api_addr"`
	Raft string `json:"raft_addr"`
	Self bool   `json:"self"`
	Led  int    `json:"shards_led"`    // of the rows
	Held int    `json:"replicas_held"` // of the rows
	// Alive: this node, or a node named in the rows whose state record
	// keeps changing; false for one the placement counts dead; null when
	// this node cannot tell (it shares no shard with it).
	Alive *bool `json:"alive"`
}

// Sample is the fetcher's work over one interval.
type Sample struct {
	T        int64   `json:"t"`       // end of the interval, Unix milliseconds
	Pages    float64 `json:"pages_s"` // fetch results per second
	OK       float64 `json:"ok_s"`    // of which 2xx
	Busy     float64 `json:"busy"`    // share of the interval the fetcher had work (0..1)
	InFlight int64   `json:"in_flight"`
	Queued   int64   `json:"queued"`
}

// RoundBar is one round on the timeline: each phase's start and end (Unix
// milliseconds; End 0 while the phase runs, Start 0 if it has not begun).
type RoundBar struct {
	Round uint64 `json:"round"`
	// Shard is the shard whose round it is, on a site of shards (each
	// runs its own rounds); absent on a site of the old design.
	Shard    *int  `json:"shard,omitempty"`
	Generate Span  `json:"generate"`
	Fetch    Span  `json:"fetch"`
	Update   Span  `json:"update"`
	Pages    int64 `json:"pages"` // fetched in the round (once finished)
	Done     bool  `json:"done"`
}

// Span is a phase's time on the timeline.
type Span struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// DashDB is the crawl database's size.
type DashDB struct {
	URLs     uint64 `json:"urls"`
	Frontier uint64 `json:"frontier"`
	Fetched  uint64 `json:"fetched"`
	Disk     int64  `json:"disk_bytes"`
}

// DashRefetch is the dashboard's refetch panel: the recent rounds'
// refetch figures, and the pages waiting for their refetch.
type DashRefetch struct {
	RefetchFigures
	// Scheduled counts the fetched pages waiting for their refetch (not
	// due yet; a due page is back in the frontier), as GET /status's
	// crawldb.scheduled.
	Scheduled uint64 `json:"scheduled"`
}

// RefetchFigures are the refetches of the recent rounds (the last
// dashRounds rounds this node recorded: the rounds it led), as `site
// status`, GET /status's refetch and the dashboard show them.
type RefetchFigures struct {
	Rounds int `json:"rounds"` // rounds counted
	// Window is the span of those rounds, in seconds: from the first
	// one's start to the last one's end.
	Window float64 `json:"window_s"`
	// Refetches counts their refetch results (pages fetched again, final
	// results), of which NotModified were answered 304, Unchanged 2xx with
	// the body fetched before, and Changed the rest.
	Refetches   int64 `json:"refetches"`
	NotModified int64 `json:"not_modified"`
	Unchanged   int64 `json:"unchanged"`
	Changed     int64 `json:"changed"`
	// Rate is Refetches per second over Window.
	Rate float64 `json:"refetches_s"`
	// NotModifiedShare is NotModified / Refetches: the 304 share.
	NotModifiedShare float64 `json:"not_modified_share"`
	// Freshness is (NotModified + Unchanged) / Refetches: the share of
	// refetched pages whose stored copy was still the live one when they
	// were refetched. It estimates the collection's freshness from below:
	// a page that changes at rate λ (a Poisson process), refetched every
	// I, is unchanged at its refetch with probability e^{−λI}, but fresh
	// (Cho and Garcia-Molina) on average over the interval for
	// (1−e^{−λI})/(λI) of the time, which is more.
	Freshness float64 `json:"est_freshness"`
}

// roundRefetch is one round's refetch counts, kept for RefetchFigures.
type roundRefetch struct {
	started, ended                             time.Time
	refetches, notModified, unchanged, changed int64
}

// refetchFigures sums the rounds' refetch counts (rs: the recent rounds,
// in any order; a sharded node's shards' rounds overlap in time).
func refetchFigures(rs []roundRefetch) RefetchFigures {
	var f RefetchFigures
	var first, last time.Time
	for _, r := range rs {
		f.Rounds++
		f.Refetches += r.refetches
		f.NotModified += r.notModified
		f.Unchanged += r.unchanged
		f.Changed += r.changed
		if first.IsZero() || r.started.Before(first) {
			first = r.started
		}
		if r.ended.After(last) {
			last = r.ended
		}
	}
	if f.Rounds > 0 && last.After(first) {
		f.Window = last.Sub(first).Seconds()
		f.Rate = float64(f.Refetches) / f.Window
	}
	if f.Refetches > 0 {
		f.NotModifiedShare = float64(f.NotModified) / float64(f.Refetches)
		f.Freshness = float64(f.NotModified+f.Unchanged) / float64(f.Refetches)
	}
	return f
}

// DashOPIC is OPIC's state: the virtual page's cash and the frontier's
// most important URLs (by cash), top dashTop.
type DashOPIC struct {
	Virtual  float64   `json:"virtual_cash"`
	Injected float64   `json:"injected_cash"`
	Spent    float64   `json:"spent_cash"`
	Top      []DashURL `json:"top"`
}

// DashURL is one URL with its OPIC cash.
type DashURL struct {
	URL  string  `json:"url"`
	Cash float64 `json:"cash"`
}

// DashHosts are the hosts worth a look, each list top dashTop.
type DashHosts struct {
	Total int64 `json:"total"` // hosts the fetcher knows
	// Slowest: hosts whose given URLs keep them busy the longest (the
	// leader's projection: delay × URLs given).
	Slowest []DashHost `json:"slowest"`
	// Troubled: hosts of the last rounds that failed, backed off, had no
	// robots.txt or are gone, with the reason.
	Troubled []DashHost `json:"troubled"`
	// IPs: the addresses busy the longest, with their hosts in flight.
	IPs []DashIP `json:"ips"`
}

// DashHost is one host in a list.
type DashHost struct {
	Host   string  `json:"host"`
	Delay  float64 `json:"delay_s,omitempty"` // its politeness delay
	BusyS  float64 `json:"busy_s,omitempty"`  // projected busy for this long from now
	Reason string  `json:"reason,omitempty"`  // troubled: why
	Count  int64   `json:"count,omitempty"`   // troubled: results of that kind
}

// DashIP is one address's load.
type DashIP struct {
	IP    string  `json:"ip"`
	Hosts int     `json:"hosts"`  // hosts of the address given out
	BusyS float64 `json:"busy_s"` // projected busy for this long from now
}

// DashNode is one node of the site.
type DashNode struct {
	ID       string  `json:"id"`
	Role     string  `json:"role"`
	Alive    bool    `json:"alive"`
	Hosts    int     `json:"hosts"`     // hosts of the parts it holds
	InFlight int64   `json:"in_flight"` // its requests in flight
	Pages    float64 `json:"pages_s"`   // its fetch results per second
}

// DashFed is the federation as this site sees it.
type DashFed struct {
	Partitioner string     `json:"partitioner"`
	Outbox      uint64     `json:"outbox_entries"`
	CacheRate   float64    `json:"sent_cache_hit_rate"`
	Sites       []DashSite `json:"sites"`
	// Links are this site's exchanges with each peer, per second over the
	// last interval.
	Links []DashLink `json:"links"`
}

// DashSite is one site on the map.
type DashSite struct {
	Name  string  `json:"name"`
	Lat   float64 `json:"lat"`
	Lon   float64 `json:"lon"`
	State string  `json:"state"` // self, up, suspect, down, unknown
	Self  bool    `json:"self"`
}

// DashLink is this site's traffic with one peer.
type DashLink struct {
	From   string  `json:"from"`
	To     string  `json:"to"`
	SentS  float64 `json:"sent_urls_s"`
	RecvS  float64 `json:"recv_urls_s"`
	Sent   uint64  `json:"sent_urls"` // in all
	Recv   uint64  `json:"recv_urls"`
	Outbox int     `json:"outbox_pending"`
	State  string  `json:"state"`
}

// Limits on the dashboard's payload.
const (
	dashSamples = 300 // five minutes at one sample a second
	dashRounds  = 60
	dashTop     = 10
)

// dashState is what the dashboard remembers between polls: the samples,
// the rounds finished, the troubled hosts of the newest round that had
// any, and the counters of the last poll (for per-peer rates).
type dashState struct {
	mu       sync.Mutex
	samples  []Sample // oldest first, at most dashSamples
	rounds   []RoundBar
	refetch  []roundRefetch // of the last dashRounds rounds, oldest first
	troubled []DashHost
	slowest  []DashHost // the last lists read from the leader
	ips      []DashIP
	prev     fetcher.Stats
	prevAt   time.Time
	disk     int64
	diskAt   time.Time

	// The last poll's counters, for the per-peer rates.
	polledAt time.Time
	peerURLs map[string][2]uint64
	peerRate map[string][2]float64

	// shardHist are a sharded node's samples of its shards' results
	// recorded (URLs − frontier), oldest first, spanning shardWindow.
	shardHist []shardSample
}

// shardSample is the results recorded in each shard held, at one time.
type shardSample struct {
	at   time.Time
	done map[int]uint64
}

// shardWindow is the span of a shard's pages/s.
const shardWindow = 60 * time.Second

// sampleShards records the results each shard has recorded now.
func (d *dashState) sampleShards(shards []shardset.ShardStatus, now time.Time) {
	smp := shardSample{at: now, done: make(map[int]uint64, len(shards))}
	for _, sh := range shards {
		smp.done[sh.Shard] = sh.URLs - min(sh.Frontier, sh.URLs)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := len(d.shardHist); n > 0 && !now.After(d.shardHist[n-1].at) {
		return
	}
	d.shardHist = append(d.shardHist, smp)
	// Keep the newest sample at or before the window's start (the rates'
	// base) and those after it.
	i := 0
	for i+1 < len(d.shardHist) && !d.shardHist[i+1].at.After(now.Add(-shardWindow)) {
		i++
	}
	d.shardHist = slices.Delete(d.shardHist, 0, i)
}

// shardRates are each shard's results recorded per second between the
// oldest sample kept and the newest, and that span in seconds (0 before
// two samples). A shard in the newest sample only has no rate.
func (d *dashState) shardRates() (map[int]float64, float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[int]float64{}
	n := len(d.shardHist)
	if n < 2 {
		return out, 0
	}
	last := d.shardHist[n-1]
	for sh, done := range last.done {
		// The oldest sample that has the shard (a replica opened since has
		// a shorter span).
		for _, old := range d.shardHist[:n-1] {
			if prev, ok := old.done[sh]; ok {
				dt := last.at.Sub(old.at).Seconds()
				out[sh] = float64(done-min(prev, done)) / dt
				break
			}
		}
	}
	return out, last.at.Sub(d.shardHist[0].at).Seconds()
}

// sampleEvery is the dashboard's sampling interval (and the page's poll).
const sampleEvery = time.Second

// sample records the fetcher's work since the last sample.
func (d *dashState) sample(st fetcher.Stats, now time.Time, workers int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.prevAt.IsZero() {
		dt := now.Sub(d.prevAt).Seconds()
		if dt <= 0 {
			return
		}
		ok := st.ByStatus[crawl.StatusFetched] - d.prev.ByStatus[crawl.StatusFetched]
		s := Sample{T: now.UnixMilli(), Pages: float64(st.Done-d.prev.Done) / dt, OK: float64(ok) / dt,
			Busy: min(1, max(0, (st.Busy-d.prev.Busy).Seconds()/(dt*float64(max(workers, 1))))), InFlight: st.InFlight, Queued: st.Queued}
		if len(d.samples) == dashSamples {
			copy(d.samples, d.samples[1:])
			d.samples = d.samples[:dashSamples-1]
		}
		d.samples = append(d.samples, s)
	}
	d.prev, d.prevAt = st, now
}

// refetches returns the refetch figures of the recent rounds.
func (d *dashState) refetches() RefetchFigures {
	d.mu.Lock()
	defer d.mu.Unlock()
	return refetchFigures(d.refetch)
}

// latest returns the newest sample (zero before the second one).
func (d *dashState) latest() Sample {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.samples) == 0 {
		return Sample{}
	}
	return d.samples[len(d.samples)-1]
}

// round records a finished round (the rounds' OnRound, on the leader) of
// shard sh (-1: a site of the old design).
func (d *dashState) round(sh int, st rounds.RoundStats) {
	gen := st.Started.Add(seconds(st.GenerateSeconds))
	bar := RoundBar{Round: st.Round, Done: true, Pages: st.Fetched,
		Generate: Span{st.Started.UnixMilli(), gen.UnixMilli()},
		Fetch:    Span{gen.UnixMilli(), st.Started.Add(seconds(st.FetchSeconds)).UnixMilli()},
		Update:   Span{st.Ended.Add(-seconds(st.UpdateSeconds)).UnixMilli(), st.Ended.UnixMilli()}}
	if bar.Fetch.End < bar.Fetch.Start {
		bar.Fetch.End = bar.Fetch.Start
	}
	if sh >= 0 {
		bar.Shard = &sh
	}
	var troubled []DashHost
	for h, f := range st.Troubled {
		dh := DashHost{Host: h, Reason: f.LastError, Count: f.Retries + f.Truncated}
		var kinds []string
		for k, n := range f.ByStatus {
			dh.Count += n
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
		if dh.Reason == "" {
			slices.Sort(kinds)
			dh.Reason = strings.Join(kinds, ", ")
		}
		troubled = append(troubled, dh)
	}
	slices.SortFunc(troubled, func(a, b DashHost) int {
		if a.Count != b.Count {
			return cmp.Compare(b.Count, a.Count)
		}
		return strings.Compare(a.Host, b.Host)
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.rounds) == dashRounds {
		copy(d.rounds, d.rounds[1:])
		d.rounds = d.rounds[:dashRounds-1]
	}
	d.rounds = append(d.rounds, bar)
	if len(d.refetch) == dashRounds {
		copy(d.refetch, d.refetch[1:])
		d.refetch = d.refetch[:dashRounds-1]
	}
	d.refetch = append(d.refetch, roundRefetch{started: st.Started, ended: st.Ended,
		refetches: st.Refetches, notModified: st.NotModified, unchanged: st.Unchanged, changed: st.Changed})
	if len(troubled) > 0 {
		d.troubled = troubled[:min(len(troubled), dashTop)]
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// dashSampler samples the fetcher (and a sharded node's shards) every
// sampleEvery until ctx is done.
func (s *Site) dashSampler(ctx context.Context) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	now := time.Now()
	for {
		s.dash.sample(s.fetch.Stats(), now, s.cfg.Workers)
		s.dash.sampleShards(s.set.Status(), now)
		select {
		case <-ctx.Done():
			return
		case now = <-t.C:
		}
	}
}

// diskUsage is the crawl database's size on disk, measured at most every
// ten seconds.
func (s *Site) diskUsage(now time.Time) int64 {
	s.dash.mu.Lock()
	defer s.dash.mu.Unlock()
	if now.Sub(s.dash.diskAt) < 10*time.Second {
		return s.dash.disk
	}
	var n int64
	filepath.WalkDir(filepath.Join(s.cfg.Data, "crawldb"), func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	s.dash.disk, s.dash.diskAt = n, now
	return n
}

// Dashboard returns the dashboard's data now.
func (s *Site) Dashboard() Dashboard {
	now := time.Now()
	rs := s.Rounds()
	c := s.counts()
	d := Dashboard{Region: s.cfg.Region, Node: s.cfg.Node, Role: strings.ToLower(s.db.Status().State), Now: now,
		Uptime: now.Sub(s.started).Seconds(), Interval: sampleEvery.Seconds(), Phase: string(rs.Phase),
		CrawlDB: DashDB{URLs: c.URLs, Frontier: c.Frontier, Fetched: c.ByStatus[store.StatusFetched], Disk: s.diskUsage(now)},
		OPIC:    DashOPIC{Virtual: rs.Virtual, Injected: rs.Injected, Spent: rs.Spent}}
	if rs.Next > 0 {
		d.Round = rs.Next - 1
	}
	if rs.Finished != nil {
		d.Finished = rs.Finished.Reason
	}
	if rf := s.dash.refetches(); s.cfg.Refetch.On() || rf.Refetches > 0 {
		d.Refetch = &DashRefetch{RefetchFigures: rf, Scheduled: c.Scheduled}
	}
	if ctl := s.controlsStatus(); ctl != nil {
		d.Controls = ctl
	}
	// The top of the frontiers and the busiest hosts and addresses of the
	// shards led here, merged.
	var hosts, ips []rounds.Busy
	busyOK := true
	for sh, cr := range s.set.Leading() {
		if db := s.host.Lookup(shardset.GroupID(sh)); db != nil {
			if top, err := db.Store().Frontier(store.FrontierQuery{Width: dashTop, PerHost: 1}); err == nil {
				for _, e := range top {
					d.OPIC.Top = append(d.OPIC.Top, DashURL{URL: e.URL, Cash: e.Score})
				}
			}
		}
		h, i, ok := cr.Busiest(dashTop, now)
		hosts, ips, busyOK = append(hosts, h...), append(ips, i...), busyOK && ok
	}
	slices.SortFunc(d.OPIC.Top, func(a, b DashURL) int { return cmp.Compare(b.Cash, a.Cash) })
	d.OPIC.Top = d.OPIC.Top[:min(len(d.OPIC.Top), dashTop)]
	byUntil := func(a, b rounds.Busy) int { return b.Until.Compare(a.Until) }
	slices.SortFunc(hosts, byUntil)
	slices.SortFunc(ips, byUntil)
	if busyOK {
		for _, h := range hosts[:min(len(hosts), dashTop)] {
			d.Hosts.Slowest = append(d.Hosts.Slowest, DashHost{Host: h.Name, Delay: h.Delay.Seconds(), BusyS: h.Until.Sub(now).Seconds()})
		}
		for _, ip := range ips[:min(len(ips), dashTop)] {
			d.Hosts.IPs = append(d.Hosts.IPs, DashIP{IP: ip.Name, Hosts: ip.Hosts, BusyS: ip.Until.Sub(now).Seconds()})
		}
	}
	// Its shards and the site's nodes; the fetcher's rate and the hosts
	// troubled in the shards' last rounds.
	d.Sharded = s.dashSharded()
	d.Hosts.Total = s.fetch.Stats().Hosts
	s.dash.mu.Lock()
	defer s.dash.mu.Unlock()
	if busyOK {
		s.dash.slowest, s.dash.ips = d.Hosts.Slowest, d.Hosts.IPs
	} else { // a generate holds them: the last poll's lists
		d.Hosts.Slowest, d.Hosts.IPs = s.dash.slowest, s.dash.ips
	}
	d.Series = slices.Clone(s.dash.samples)
	if n := len(d.Series); n > 0 {
		d.Rate = d.Series[n-1]
	}
	d.Hosts.Troubled = slices.Clone(s.dash.troubled)
	d.Rounds = slices.Clone(s.dash.rounds) // the shards' last rounds to end
	if s.fed != nil {
		d.Federation = s.dashFed(s.fed.Status(), now)
	}
	return d
}

// dashFed is the dashboard's federation panel from the federation's
// status: the sites and this site's links to them, with the URLs sent
// and received per second since the last poll (kept if it was too recent
// to tell). s.dash.mu is held.
func (s *Site) dashFed(fs federation.Status, now time.Time) *DashFed {
	dt := now.Sub(s.dash.polledAt).Seconds()
	fresh := s.dash.polledAt.IsZero() || dt >= sampleEvery.Seconds()/2
	if s.dash.peerRate == nil {
		s.dash.peerURLs, s.dash.peerRate = map[string][2]uint64{}, map[string][2]float64{}
	}
	f := &DashFed{Partitioner: fs.Partitioner, Outbox: fs.Outbox, CacheRate: fs.CacheRate,
		Sites: []DashSite{{Name: fs.Site, Lat: fs.Lat, Lon: fs.Lon, State: "self", Self: true}}}
	for _, p := range fs.Peers {
		f.Sites = append(f.Sites, DashSite{Name: p.Name, Lat: p.Lat, Lon: p.Lon, State: p.State})
		if fresh {
			if prev, ok := s.dash.peerURLs[p.Name]; ok && !s.dash.polledAt.IsZero() {
				s.dash.peerRate[p.Name] = [2]float64{float64(p.SentURLs-prev[0]) / dt, float64(p.RecvURLs-prev[1]) / dt}
			}
			s.dash.peerURLs[p.Name] = [2]uint64{p.SentURLs, p.RecvURLs}
		}
		r := s.dash.peerRate[p.Name]
		f.Links = append(f.Links, DashLink{From: fs.Site, To: p.Name, SentS: r[0], RecvS: r[1], Sent: p.SentURLs, Recv: p.RecvURLs, Outbox: p.Outbox, State: p.State})
	}
	if fresh {
		s.dash.polledAt = now
	}
	return f
}

// dashSharded is the shards this node holds and the site's nodes (the
// meta group's voters), each node's leads and replicas counted over those
// shards, and the site-wide view.
func (s *Site) dashSharded() *DashSharded {
	site := s.SiteView()
	settings := s.set.Settings()
	shards := s.set.Status()
	rates, window := s.dash.shardRates()
	voters, _ := s.db.Voters()
	out := &DashSharded{Shards: settings.Shards, Replicas: settings.Replicas, Held: len(shards), Partial: len(shards) < settings.Shards,
		Window: window, Rows: []DashShard{}, Nodes: []DashShardNode{}, Site: site}
	type seen struct{ led, held int }
	byNode := map[string]*seen{}
	named, down := map[string]bool{}, map[string]bool{}
	for _, sh := range shards {
		out.Rows = append(out.Rows, DashShard{Shard: sh.Shard, Leader: sh.Leader, Replicas: sh.Replicas,
			Want: min(settings.Replicas, max(len(voters), 1)), UnderReplicated: sh.UnderReplicated, Down: sh.Down,
			URLs: sh.URLs, Frontier: sh.Frontier, Fetched: sh.Fetched, Pages: rates[sh.Shard], Step: sh.Step, Moving: sh.Moving, Finished: sh.Finished})
		for _, id := range slices.Concat(sh.Replicas, sh.Target, []string{sh.Leader}) {
			if id == "" {
				continue
			}
			named[id] = true
			if byNode[id] == nil {
				byNode[id] = &seen{}
			}
		}
		for _, id := range sh.Replicas {
			byNode[id].held++
		}
		if sh.Leader != "" {
			byNode[sh.Leader].led++
		}
		for _, id := range sh.Down {
			down[id] = true
		}
	}
	for _, v := range voters {
		n := DashShardNode{ID: v.ID, API: v.APIAddr, Raft: v.RaftAddr, Self: v.ID == s.cfg.Node}
		if c := byNode[v.ID]; c != nil {
			n.Led, n.Held = c.led, c.held
		}
		if n.Self || named[v.ID] {
			alive := n.Self || !down[v.ID]
			n.Alive = &alive
		}
		out.Nodes = append(out.Nodes, n)
	}
	slices.SortFunc(out.Nodes, func(a, b DashShardNode) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// dashboardPage serves the dashboard page and its assets (embedded):
// GET / is the page, which polls GET /dashboard.json. Nothing is loaded
// from elsewhere, which the Content-Security-Policy states.
func dashboardPage() http.Handler {
	files := http.FileServerFS(dashboard.Files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
}

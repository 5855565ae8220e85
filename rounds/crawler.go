package rounds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/route"
)

// Fetcher is what the rounds need of the polite fetcher: it takes jobs and
// reports each one's result through the OnResult hook the crawler gives it.
// A fetcher that can also pause (Pause(bool)) is paused while its node has
// lost touch with the site's leader.
type Fetcher interface {
	Submit(jobs []fetcher.Job)
	Stats() fetcher.Stats
}

// pauser is the optional capability of a Fetcher to stop starting requests.
type pauser interface{ Pause(on bool) }

// aborter is the optional capability of a Fetcher to end its requests in
// flight at once.
type aborter interface{ Abort() }

// Options configures a Crawler. A zero field takes the default its comment
// gives; Validate (called by New) rejects negative and out-of-range values.
type Options struct {
	DB  *crawldb.DB
	Dir string // round files go under Dir/rounds, statistics under Dir/stats
	// NodeID is this node's name in the site (its crawl database node ID);
	// "" → the crawl database's.
	NodeID     string
	Width      int    // URLs generated per round; 0 → 10,000
	PerHost    int    // URLs per host per round at most (k), what a host at HostDelay gets; 0 → 10
	MaxDepth   uint32 // links deeper than this are not followed (a redirect target is as deep as its source); 0 → 32
	HostBudget int    // pages fetched per host at most; 0 → 20,000
	// PLDBudget is the pages fetched per registrable domain at most
	// (plan.Registrable: a.spam.test and b.spam.test share spam.test's),
	// a second budget beside HostBudget; 0: none. Each crawl database
	// counts the hosts it holds; the shards of a site share one budget
	// per domain through Domains. A federation's sites each have theirs.
	PLDBudget int
	// Domains, on a shard of a site of several, shares PLDBudget between
	// the site's shards (shardset's): nil, the budget is this crawl
	// database's alone.
	Domains    DomainShares
	MaxRetries int // transient failures before a URL is given up; 0 → 3
	// MaxRedirects is the longest chain of redirects followed; 0 → 10.
	MaxRedirects int
	// BatchOps is the number of operations per crawl-database command; 0 → 10,000.
	BatchOps int
	// Workers for the update's map and reduce; 0 → GOMAXPROCS.
	Workers int
	// MemoryBudget for the update's shuffle before it spills; 0 → 256 MiB.
	MemoryBudget int64
	// Damping is the share of the cash a page distributes that follows its
	// outlinks; the rest goes to the virtual page (see opic.Damp).
	// 0 → opic.DefaultDamping (0.85); 1 → all of it follows the links.
	Damping float64
	// Revisits is how many fetched pages per update pass on the cash that
	// reached them after their fetch, over their stored outlinks (OPIC's
	// visit without a refetch); 0 → Width/16, negative → none.
	Revisits int
	// LinkMemory bounds the memory of the outlinks kept for revisits;
	// 0 → 64 MiB.
	LinkMemory int64
	// KeepFiles keeps each round's files after its update (default: removed).
	KeepFiles bool

	// HostDelay, MaxCrawlDelay and IPDelay are the fetchers' politeness
	// settings (the same on every node): a host that moves between nodes
	// starts on its new node only after the delay its old node would have
	// kept, and with IPDelay > 0 hosts that share an address are fetched by
	// one node at a time.
	HostDelay, MaxCrawlDelay, IPDelay time.Duration
	// Resolve gives a host's addresses, for grouping a round's hosts by
	// address on a site of several nodes (IPDelay > 0); nil → the addresses
	// in the host records only.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// FailTimeout: a node not heard of for this long is dead and its parts
	// go to other nodes; 0 → 3 s.
	FailTimeout time.Duration
	// ReportEvery is how often a node reports to the leader; 0 → 500 ms.
	ReportEvery time.Duration
	// Solo: this node alone fetches for the crawl database while it leads
	// it, and nobody else does: the other voters are replicas only (a
	// shard's group: the shard's rounds run where its leader is). Parts
	// go to the leader only; parts that a former leader held move here,
	// and new rounds are planned, only Fence after this node began to
	// lead, and start no earlier than that plus their hosts' delays; a job
	// starts only while this node leads (its Skip hook asks the crawl
	// database, so a deposed leader's fetcher stops before its successor
	// starts: Raft's leader lease is shorter than its election timeout,
	// and Fence covers the rest); and a node that no longer leads stages
	// the results it holds at once, so that they are in the crawl
	// database before its parts move (HandOver stages them before the
	// transfer).
	Solo bool
	// Fence is Solo's wait before parts a former leader held may move to
	// and start on a new leader; 0 → 1 s (crawldb's leader lease).
	Fence time.Duration
	// ReleaseWait is how long after the fence a Solo leader waits at most
	// for a former leader that is alive (NodeAlive) to release the parts
	// it holds: a node deposed by an election stages what it holds when
	// it learns it lost, then writes that it has (its release marker);
	// a starved node may do so well after the fence, and what it has not
	// staged when its parts move is fetched again. 0 → 5 s.
	ReleaseWait time.Duration
	// NodeAlive reports whether a node may still run (a sharded site's
	// liveness: its state record is fresh); a Solo leader does not wait
	// for the release of a node it says is dead. nil: every node may.
	NodeAlive func(id string) bool
	// StageEvery is how long a node keeps a part's results before it
	// stages them although the part is not done: what a node that dies
	// loses (and another fetches again) at most; 0 → 2 s.
	StageEvery time.Duration
	// Seeds are added to the frontier (new URLs only) whenever this node
	// starts to lead the site.
	Seeds []string
	// CheckCash checks OPIC's invariant (the cash of all pages and the
	// virtual page is what the seeds injected) after every round, on the
	// leader, by scanning the crawl database; the error goes to the
	// round's statistics (cash_error). A debugging aid: costs a full scan.
	CheckCash bool
	// Refetch is the refetch schedule (issue 23; docs/refetch.md). The
	// zero value never refetches. Set, each fetched page's result carries
	// what the schedule needs (its validators, whether it changed), and
	// the update gives it its next fetch.
	Refetch plan.Refetch
	// Controls is the store the operator's controls are read from
	// (package control; a sharded site's meta group); nil → this crawl
	// database's.
	Controls *store.Store
	// Shards is how many crawl databases share the site's width: an
	// operator's width (control.Controls.Width) is the site's, and each
	// gets its share; 0 → 1.
	Shards int

	// Router, for a shard of a site or a site in a federation, routes the
	// URLs the update finds to the crawl database that owns them
	// (route.Router): those of other shards and sites go to their
	// outboxes instead of the frontier. A Router that is also a
	// route.Inbound has the cash others sent counted in, a route.Ending
	// ends the crawl only when the whole crawl has ended, a
	// route.HandBack hands hosts back to their owner. nil: every URL is
	// this crawl database's.
	Router route.Router

	// OnRound, if set, receives each round's statistics when it completes,
	// on the node that led the round's update, before the next update
	// begins (it must not block for long).
	OnRound func(RoundStats)
	Logger  *slog.Logger
	Now     func() time.Time
}

// DomainShares shares each registrable domain's --pld-budget between the
// crawl databases of a site (plan.DomainShare's rules): each gives a
// domain new URLs within its cap, asks for more once it has used its cap
// and has more URLs of the domain, and gives back what another wants and
// it does not use. Usage is a crawl database's pages of the domain,
// fetched and in flight.
type DomainShares interface {
	// Share is this crawl database's cap of dom under budget, and whether
	// the whole budget is given out to caps (none can grow).
	Share(dom string, budget int) (cap int64, full bool, err error)
	// Ask asks for more of doms (at this crawl database's cap, with URLs
	// left).
	Ask(ctx context.Context, budget int, doms []string) error
	// Wanted are the domains another crawl database wants more of, or
	// this one did.
	Wanted() ([]string, error)
	// Yield gives back what others want of each domain in usage.
	Yield(ctx context.Context, budget int, usage map[string]int64) error
	// Sync returns once the caps this crawl database reads are those
	// written before (a new leader's first read).
	Sync(ctx context.Context) error
}

// setRouter notes what c's Router is besides a router.
func (c *Crawler) setRouter() {
	c.inbound, _ = c.o.Router.(route.Inbound)
	c.ending, _ = c.o.Router.(route.Ending)
	c.backs, _ = c.o.Router.(route.HandBack)
}

// ErrBadOptions is wrapped by Validate's errors.
var ErrBadOptions = errors.New("rounds: bad options")

// Validate reports every bad value in o at once. A zero field takes its
// documented default (ensureDefaults); a negative count, size or
// duration, a damping outside [0, 1] or a missing DB or Dir is an error,
// not a value replaced in silence.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrBadOptions}, args...)...))
	}
	if o.DB == nil {
		bad("no DB")
	}
	if o.Dir == "" {
		bad("no Dir")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Width", int64(o.Width)}, {"PerHost", int64(o.PerHost)}, {"HostBudget", int64(o.HostBudget)},
		{"PLDBudget", int64(o.PLDBudget)}, {"MaxRetries", int64(o.MaxRetries)}, {"MaxRedirects", int64(o.MaxRedirects)},
		{"BatchOps", int64(o.BatchOps)}, {"Workers", int64(o.Workers)}, {"MemoryBudget", o.MemoryBudget},
		{"LinkMemory", o.LinkMemory}, {"Shards", int64(o.Shards)},
	} {
		if f.v < 0 {
			bad("%s %d: want ≥ 0 (0: its default)", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"HostDelay", o.HostDelay}, {"MaxCrawlDelay", o.MaxCrawlDelay}, {"IPDelay", o.IPDelay},
		{"FailTimeout", o.FailTimeout}, {"ReportEvery", o.ReportEvery}, {"Fence", o.Fence},
		{"ReleaseWait", o.ReleaseWait}, {"StageEvery", o.StageEvery},
	} {
		if f.v < 0 {
			bad("%s %v: want ≥ 0 (0: its default)", f.name, f.v)
		}
	}
	if !(o.Damping >= 0 && o.Damping <= 1) { // also NaN
		bad("Damping %v: want in [0, 1] (0: %v)", o.Damping, opic.DefaultDamping)
	}
	return errors.Join(errs...)
}

func (o *Options) ensureDefaults() {
	if o.Width <= 0 {
		o.Width = 10_000
	}
	if o.PerHost <= 0 {
		o.PerHost = 10
	}
	if o.MaxDepth == 0 {
		o.MaxDepth = 32
	}
	if o.HostBudget <= 0 {
		o.HostBudget = 20_000
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 3
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = 10
	}
	if o.BatchOps <= 0 {
		o.BatchOps = 10_000
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MemoryBudget <= 0 {
		o.MemoryBudget = 256 << 20
	}
	if o.Damping == 0 {
		o.Damping = opic.DefaultDamping
	}
	if o.Revisits == 0 {
		o.Revisits = max(o.Width/16, 1)
	}
	if o.LinkMemory <= 0 {
		o.LinkMemory = 64 << 20
	}
	if o.FailTimeout <= 0 {
		o.FailTimeout = 3 * time.Second
	}
	if o.ReportEvery <= 0 {
		o.ReportEvery = 500 * time.Millisecond
	}
	if o.Fence <= 0 {
		o.Fence = time.Second
	}
	if o.ReleaseWait <= 0 {
		o.ReleaseWait = 5 * time.Second
	}
	if o.StageEvery <= 0 {
		o.StageEvery = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Sentinel errors.
var (
	// ErrExhausted is returned by Run when a round generates nothing and
	// no round is in flight: the crawl has fetched everything it can reach.
	ErrExhausted = errors.New("rounds: crawl exhausted")
	// ErrClosed: the crawler is closed.
	ErrClosed = errors.New("rounds: closed")
	// errDeposed: this node no longer leads the site (its writes were
	// refused by the leader guard).
	errDeposed = errors.New("rounds: no longer the leader")
)

// Crawler runs one node's share of a site's rounds. Every node fetches the
// parts of rounds the leader gives it and stages their results in the crawl
// database; the node that leads the crawl database also plans the rounds
// and runs their updates (leader.go).
type Crawler struct {
	o       Options
	db      *crawldb.DB
	st      *store.Store
	log     *slog.Logger
	id      string
	started time.Time
	// What the Router is besides (route.Inbound, route.Ending,
	// route.HandBack: backs), nil where it is not one (setRouter).
	inbound route.Inbound
	ending  route.Ending
	backs   route.HandBack

	// stateMu orders the writers of the round state (generate, a fetch
	// ending, an update retiring its round, finish): each copies the
	// state, changes it and writes it under it, so none undoes another.
	stateMu sync.Mutex
	mu      sync.Mutex
	state   State // the round state as this node last read or wrote it
	phase   Phase // what this node's leader side is doing (for status)
	last    *RoundStats
	lead    *leader // non-nil while this node leads
	// genDur is how long each round in flight took to generate (stats).
	genDur map[uint64]time.Duration

	hosts   *hostStore
	links   *linkStore // outlinks of fetched pages for revisits (leader); nil → none
	noReqMu sync.Mutex
	noReq   map[string]int // URLs sent back to the frontier unrequested, and how often
	seenMu  sync.Mutex
	seen    map[uint64]struct{} // content fingerprints fetched

	node *nodeSide
	// ctl is the operator's controls (Options.Controls, else this crawl
	// database's).
	ctl *ControlWatch

	// idleIndex is the crawl database's applied index as of the leader's
	// last look at a frontier with nothing to generate and no round in
	// flight; 0 while the site has work (see IdleIndex).
	idleIndex atomic.Uint64

	statsMu sync.Mutex
	// afterCommand, if set (tests), runs after each update command is
	// applied (i counts from 1); an error stops the update there.
	afterCommand func(round uint64, i int) error
	// beforeSeed, if set (tests), runs between Seed's check of which URLs
	// are new and its command.
	beforeSeed func()
	statsF     *os.File

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
	// growMu and growing: a node is joining (GrowthGate); no part is
	// kept local meanwhile.
	growMu  sync.Mutex
	growing atomic.Bool
	// noLocalUntil (unix nanos): a GrowthGate that gave up keeps parts
	// from being made local until then, so that its next try finds them
	// gone.
	noLocalUntil atomic.Int64
}

// New opens the crawler's state in the crawl database and directory.
func New(o Options) (*Crawler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.ensureDefaults()
	var err error
	if o.Refetch, err = o.Refetch.WithDefaults(); err != nil {
		return nil, fmt.Errorf("rounds: %w", err)
	}
	for _, d := range []string{filepath.Join(o.Dir, "rounds"), filepath.Join(o.Dir, "stats")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("rounds: %w", err)
		}
	}
	id := o.NodeID
	if id == "" {
		id = o.DB.Status().NodeID
	}
	c := &Crawler{
		o: o, db: o.DB, st: o.DB.Store(), log: o.Logger, id: id, started: o.Now(),
		seen:   map[uint64]struct{}{},
		phase:  "idle",
		genDur: map[uint64]time.Duration{},
	}
	c.setRouter()
	c.hosts = newHostStore(c)
	if c.o.Revisits > 0 {
		c.links = newLinkStore(c.o.LinkMemory)
	}
	c.node = newNodeSide(c)
	s, err := loadState(c.st)
	if err != nil {
		return nil, err
	}
	c.state = s
	cst := o.Controls
	if cst == nil {
		cst = c.st
	}
	c.ctl = NewControlWatch(cst, o.Now, o.Logger)
	if err := c.ctl.Refresh(); err != nil {
		return nil, err
	}
	// Rebuild the content fingerprints fetched (for duplicates).
	err = c.st.ScanURLs(func(r store.URLRecord) error {
		if r.ContentFP != 0 && r.Status == store.StatusFetched {
			c.seen[r.ContentFP] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rounds: scan crawl database: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(o.Dir, "stats", "rounds.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("rounds: open statistics: %w", err)
	}
	c.statsF = f
	return c, nil
}

// Close releases the crawler's files. Call it after Run has returned; later
// calls return the first one's result.
func (c *Crawler) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		errs := []error{c.node.close()}
		errs = append(errs, c.statsF.Close())
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// NodeID is this node's name in its site.
func (c *Crawler) NodeID() string { return c.id }

// Hosts returns the host-state store to give the fetcher.
func (c *Crawler) Hosts() fetcher.HostStore { return c.hosts }

// Seen reports whether content with fingerprint fp was fetched before, and
// records it if not: the fetcher's duplicate check. A site of several
// nodes checks against what this node fetched and what the crawl database
// held when it started.
func (c *Crawler) Seen(fp uint64, _ string) bool {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	if _, ok := c.seen[fp]; ok {
		return true
	}
	c.seen[fp] = struct{}{}
	return false
}

// hostOf returns the host of a normalised URL.
func hostOf(u string) string { return crawl.HostOf(u) }

// RemoveRoundFiles removes the round files (fetch segments, update files)
// that a crawler on dir kept, and keeps its statistics. For a replica that
// leaves this node: the files are of no use once the crawl database they
// belong to is gone, and a replica that comes back starts without them.
func RemoveRoundFiles(dir string) error {
	if err := os.RemoveAll(filepath.Join(dir, "rounds")); err != nil {
		return fmt.Errorf("rounds: remove round files: %w", err)
	}
	return nil
}

func (c *Crawler) roundDir(round uint64) string {
	return filepath.Join(c.o.Dir, "rounds", strconv.FormatUint(round, 10))
}

// apply applies one batch through Raft (forwarded to the leader if need be).
func (c *Crawler) apply(ctx context.Context, b *store.Batch) (*store.Result, error) {
	res, err := c.db.Apply(ctx, b)
	if err != nil {
		return nil, err
	}
	if res.Err != nil {
		return nil, res.Err
	}
	return res, nil
}

// hostPace is what a round's budgets need of a host, from one read of its
// record: its delay and, with an address delay, the address the fetcher
// keys its politeness by (the first of its last resolution; ok false when
// there is no address delay or the host was never resolved).
type hostPace struct {
	delay time.Duration
	// took is what a request to the host takes (the leader's learned
	// fetch time; 0: not known, or under a millisecond).
	took time.Duration
	ip   netip.Addr
	ipOK bool
}

// each is the time the host gives each of its URLs: its delay, and what
// a request takes (the fetcher starts the next request its delay after
// the end of the last).
func (p hostPace) each() time.Duration { return p.delay + p.took }

func (c *Crawler) hostPace(host string) hostPace {
	p := hostPace{delay: c.o.HostDelay}
	if d := c.ctl.Load().Delay(host); d > 0 {
		p.delay = d // the operator's (control.Host.Delay)
	}
	rec, ok, err := c.hosts.LoadHost(host)
	if err == nil && ok {
		p.delay = max(p.delay, min(rec.CrawlDelay, c.o.MaxCrawlDelay))
		if c.o.IPDelay > 0 && len(rec.IPs) > 0 {
			p.ip, p.ipOK = rec.IPs[0], true
		}
	}
	p.delay = max(p.delay, c.o.IPDelay)
	return p
}

// roundSpan is the time a round gives its hosts work for: what a host at
// the site's host delay takes for PerHost URLs ((PerHost − 1) × HostDelay
// after its first).
func (c *Crawler) roundSpan() time.Duration {
	return time.Duration(c.limits().perHost-1) * c.o.HostDelay
}

// hostDelay is the least gap this site keeps between two requests to host:
// the host delay, or its robots.txt Crawl-delay up to the cap (or the
// address delay, if longer).
func (c *Crawler) hostDelay(host string) time.Duration { return c.hostPace(host).delay }

// IdleIndex returns the crawl database's applied index as of the moment
// this node, leading, last found nothing to generate, no round in flight
// and no host to wait for; 0 while the site has work or this node does not
// lead. URLs that arrive in a command after that index are not covered.
func (c *Crawler) IdleIndex() uint64 { return c.idleIndex.Load() }

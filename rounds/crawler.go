package rounds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/rounds/segment"
)

// Fetcher is what the rounds need of the polite fetcher: it takes jobs and
// reports each one's result through the OnResult hook the crawler gives it.
type Fetcher interface {
	Submit(jobs []fetcher.Job)
	Stats() fetcher.Stats
}

// Options configures a Crawler.
type Options struct {
	DB         *crawldb.DB
	Dir        string // round files go under Dir/rounds, statistics under Dir/stats
	Width      int    // URLs generated per round; 0 → 10,000
	PerHost    int    // URLs per host per round (k); 0 → 10
	MaxDepth   uint32 // links deeper than this are not followed; 0 → 32
	HostBudget int    // pages fetched per host at most; 0 → 20,000
	MaxRetries int    // transient failures before a URL is given up; 0 → 3
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
	// OnRound, if set, receives each round's statistics when it completes,
	// before the next update begins (it must not block for long).
	OnRound func(RoundStats)
	Logger  *slog.Logger
	Now     func() time.Time
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
	if o.Damping <= 0 || o.Damping > 1 {
		o.Damping = opic.DefaultDamping
	}
	if o.Revisits == 0 {
		o.Revisits = max(o.Width/16, 1)
	}
	if o.LinkMemory <= 0 {
		o.LinkMemory = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// ErrExhausted is returned by Run when a round generates nothing and no
// round is in flight: the crawl has fetched everything it can reach.
var ErrExhausted = errors.New("rounds: crawl exhausted")

// Crawler runs rounds over one site's crawl database.
type Crawler struct {
	o   Options
	db  *crawldb.DB
	st  *store.Store
	log *slog.Logger

	mu      sync.Mutex
	state   State
	running map[uint64]*roundRun // rounds in flight, by number
	phase   Phase                // what Run is doing now (for status)
	last    *RoundStats

	hosts   *hostStore
	links   *linkStore // outlinks of fetched pages for revisits; nil → none
	seenMu  sync.Mutex
	seen    map[uint64]struct{} // content fingerprints fetched
	fetched sync.Map            // host → *atomic.Int64 pages fetched (for the budget)

	orphans [][]byte // encoded sitemap results that came when no round was open
	events  chan event
	statsMu sync.Mutex
	// afterCommand, if set (tests), runs after each update command is
	// applied (i counts from 1); an error stops the update there.
	afterCommand func(round uint64, i int) error
	statsF       *os.File
}

// roundRun is the in-memory side of a round in flight.
type roundRun struct {
	round   uint64
	gen     []genEntry
	seg     *segment.Writer
	pending atomic.Int64
	closed  atomic.Bool
	failed  atomic.Bool
	stats   roundCounters
	started time.Time
	genDur  time.Duration
	fetchAt time.Time // when the fetch phase began
}

type event struct {
	kind  string // "fetched", "updated", "failed"
	round uint64
	err   error
}

// New opens the crawler's state in the crawl database and directory.
func New(o Options) (*Crawler, error) {
	o.ensureDefaults()
	if o.DB == nil || o.Dir == "" {
		return nil, errors.New("rounds: New needs a DB and a Dir")
	}
	for _, d := range []string{filepath.Join(o.Dir, "rounds"), filepath.Join(o.Dir, "stats")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("rounds: %w", err)
		}
	}
	c := &Crawler{
		o: o, db: o.DB, st: o.DB.Store(), log: o.Logger,
		running: map[uint64]*roundRun{},
		seen:    map[uint64]struct{}{},
		events:  make(chan event, 1024),
		phase:   "idle",
	}
	c.hosts = newHostStore(c)
	if c.o.Revisits > 0 {
		c.links = newLinkStore(c.o.LinkMemory)
	}
	s, err := loadState(c.st)
	if err != nil {
		return nil, err
	}
	c.state = s
	// Rebuild what lives in memory: content fingerprints (for duplicates)
	// and pages fetched per host (for the budget).
	err = c.st.ScanURLs(func(r store.URLRecord) error {
		switch r.Status {
		case store.StatusUnfetched, store.StatusGenerated:
			return nil
		}
		if r.ContentFP != 0 && r.Status == store.StatusFetched {
			c.seen[r.ContentFP] = struct{}{}
		}
		c.hostFetched(hostOf(r.URL)).Add(1)
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

// Close releases the crawler's files. Call it after Run has returned.
func (c *Crawler) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, r := range c.running {
		if r.seg != nil && r.closed.CompareAndSwap(false, true) {
			errs = append(errs, r.seg.Close())
		}
	}
	errs = append(errs, c.statsF.Close())
	return errors.Join(errs...)
}

// Hosts returns the host-state store to give the fetcher.
func (c *Crawler) Hosts() fetcher.HostStore { return c.hosts }

// Seen reports whether content with fingerprint fp was fetched before, and
// records it if not: the fetcher's duplicate check.
func (c *Crawler) Seen(fp uint64, _ string) bool {
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	if _, ok := c.seen[fp]; ok {
		return true
	}
	c.seen[fp] = struct{}{}
	return false
}

func (c *Crawler) hostFetched(host string) *atomic.Int64 {
	if v, ok := c.fetched.Load(host); ok {
		return v.(*atomic.Int64)
	}
	v, _ := c.fetched.LoadOrStore(host, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// hostOf returns the host of a normalised URL.
func hostOf(u string) string {
	i := 0
	switch {
	case len(u) > 8 && u[:8] == "https://":
		i = 8
	case len(u) > 7 && u[:7] == "http://":
		i = 7
	default:
		return ""
	}
	j := i
	for j < len(u) && u[j] != '/' && u[j] != ':' {
		j++
	}
	return u[i:j]
}

func (c *Crawler) roundDir(round uint64) string {
	return filepath.Join(c.o.Dir, "rounds", strconv.FormatUint(round, 10))
}

// apply applies one batch through Raft.
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

// putState writes the round state (with whatever else b holds).
func (c *Crawler) putState(ctx context.Context, b *store.Batch, s State) error {
	b.PutRound(s.encode())
	if _, err := c.apply(ctx, b); err != nil {
		return fmt.Errorf("rounds: save round state: %w", err)
	}
	return nil
}

// OnResult is the fetcher's result hook: it appends the result to its
// round's fetch segment and counts it. It is called from fetch workers.
func (c *Crawler) OnResult(res *fetcher.Result) {
	c.mu.Lock()
	r := c.running[res.Round]
	if (r == nil || r.closed.Load()) && res.Kind == fetcher.KindSitemap {
		// A sitemap can finish after the round that asked for it: its
		// URLs go with the newest round still fetching, or wait for the
		// next one.
		r = c.openRoundLocked()
		if r == nil {
			if len(c.orphans) < maxOrphans {
				c.orphans = append(c.orphans, appendResult(nil, res))
			}
			c.mu.Unlock()
			return
		}
	}
	c.mu.Unlock()
	if r == nil || r.closed.Load() {
		return // a round stopped or unknown: its state on disk decides
	}
	if res.Kind == fetcher.KindPage && !res.Retry {
		c.hostFetched(res.Host).Add(1)
	}
	r.stats.add(res)
	if err := r.seg.Append(appendResult(nil, res)); err != nil {
		if r.failed.CompareAndSwap(false, true) {
			c.send(event{kind: "failed", round: r.round, err: fmt.Errorf("rounds: round %d: write fetch segment: %w", r.round, err)})
		}
		return
	}
	if res.Kind == fetcher.KindPage && r.pending.Add(-1) == 0 {
		c.send(event{kind: "fetched", round: r.round})
	}
}

// openRoundLocked returns the newest round whose fetch segment is open.
func (c *Crawler) openRoundLocked() *roundRun {
	var best *roundRun
	for _, r := range c.running {
		if !r.closed.Load() && r.seg != nil && (best == nil || r.round > best.round) {
			best = r
		}
	}
	return best
}

// maxOrphans bounds the sitemap results kept while no round is fetching.
const maxOrphans = 10_000

// send queues an event for the run loop. There are a few events per round
// and the queue holds many rounds' worth; a full queue means the loop is
// gone, and the event is dropped.
func (c *Crawler) send(e event) {
	select {
	case c.events <- e:
	default:
		c.log.Warn("rounds: event dropped", "kind", e.kind, "round", e.round)
	}
}

package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
)

// LogSync says whether a node fsyncs its Raft log (crawldb.Options.NoSync).
type LogSync string

// The two Raft log modes.
const (
	// LogFsync fsyncs every Raft log write: the honest, durable figure.
	LogFsync LogSync = "fsync"
	// LogNoSync skips the fsync (crawldb.Options.NoSync), for comparison
	// and for loading large databases fast.
	LogNoSync LogSync = "nosync"
)

// ParseLogSync parses "fsync" or "nosync".
func ParseLogSync(s string) (LogSync, error) {
	switch LogSync(s) {
	case LogFsync, LogNoSync:
		return LogSync(s), nil
	}
	return "", fmt.Errorf("bench: raft log mode %q: want fsync or nosync", s)
}

// Defaults and bounds of CrawldbConfig.
const (
	DefaultCrawldbUpserts = 1_000_000
	DefaultCrawldbBatch   = 1000
	DefaultUpsertHosts    = 10_000
	DefaultKnownFraction  = 0.2
	DefaultFrontierHosts  = 100_000
	DefaultURLsSmall      = 1_000_000
	DefaultURLsLarge      = 10_000_000
	DefaultFrontierWidth  = 50_000
	DefaultFrontierCalls  = 5
	DefaultLoadWriters    = 4
	DefaultSettleMax      = 60 * time.Second

	maxCrawldbWriters = 256
	maxCrawldbURLs    = 1 << 31
	// settleIdle is the CPU use (in cores) under which the process counts
	// as idle: Pebble's flushes and compactions are done.
	settleIdle = 0.05
	// settleWindow is how long the CPU use is sampled for each settle check.
	settleWindow = 500 * time.Millisecond
	// snapshotWait bounds the wait for a snapshot being persisted (its
	// checkpoint in snapshots-tmp) before disk use is measured.
	snapshotWait = 5 * time.Minute
)

// DefaultCrawldbWriters are the concurrent writers of the upsert runs.
var DefaultCrawldbWriters = []int{1, 4, 8}

// DefaultPerHost are the per-host bounds k of the frontier reads.
var DefaultPerHost = []int{10, 100}

// CrawldbConfig configures RunCrawldb. Zero fields take the defaults named
// below; DefaultCrawldbConfig returns them all.
type CrawldbConfig struct {
	// Dir is where the benchmark's nodes keep their state, one
	// subdirectory per node; empty: a new temporary directory. The nodes'
	// directories are removed at the end unless Keep.
	Dir  string `json:"-"`
	Keep bool   `json:"keep"`
	// Seed makes the URLs, hosts and scores deterministic.
	Seed uint64 `json:"seed"`

	// SkipUpserts and SkipFrontier leave out a phase (to profile the
	// other alone).
	SkipUpserts  bool `json:"skip_upserts"`
	SkipFrontier bool `json:"skip_frontier"`

	// Upserts is the number of upserts of each upsert run (one fresh node
	// per run, per Raft log mode and number of writers). Default 1,000,000.
	Upserts int `json:"upserts"`
	// BatchSize is the number of upserts per command. Default 1,000.
	BatchSize int `json:"batch_size"`
	// Writers are the numbers of goroutines applying their own commands
	// concurrently through DB.Apply, one run each. Default 1, 4, 8.
	Writers []int `json:"writers"`
	// Syncs are the Raft log modes of the upsert runs. Default fsync, nosync.
	Syncs []LogSync `json:"syncs"`
	// UpsertHosts is the number of hosts of the upsert runs' URLs.
	// Default 10,000.
	UpsertHosts int `json:"upsert_hosts"`
	// KnownFraction is the share of upserts that add cash to a URL the
	// writer inserted before. Default 0.2; negative: none (it stays
	// negative, so that defaults can be filled in again).
	KnownFraction float64 `json:"known_fraction"`

	// FrontierHosts is the number of hosts of the frontier database's URLs,
	// with heavy-tailed sizes. Default 100,000.
	FrontierHosts int `json:"frontier_hosts"`
	// URLsSmall and URLsLarge are the sizes of the frontier database at its
	// two measurements. Default 1,000,000 and 10,000,000.
	URLsSmall int `json:"urls_small"`
	URLsLarge int `json:"urls_large"`
	// Width is the frontier query's width. Default 50,000.
	Width int `json:"width"`
	// PerHost are the per-host bounds k measured. Default 10, 100.
	PerHost []int `json:"per_host"`
	// Calls is the number of timed Frontier calls per measurement, after
	// one untimed warm-up call; the median is reported. Default 5.
	Calls int `json:"calls"`
	// LoadWriters is the number of goroutines loading the frontier
	// database through DB.Apply. Default 4.
	LoadWriters int `json:"load_writers"`
	// LoadSync is the Raft log mode of the frontier database. Default
	// nosync: loading is not what it measures.
	LoadSync LogSync `json:"load_sync"`
	// SettleMax bounds the wait for Pebble's background work to finish
	// (the process's CPU use to fall below 5% of a core) after a load,
	// before the frontier is read. Default 60s; negative: no wait (it stays
	// negative).
	SettleMax time.Duration `json:"settle_max_ns"`

	// CacheBytes and MemTableBytes are the store's Pebble block cache and
	// memtable size. Zero: the store's defaults (the result's Settings say
	// which values the nodes ran with).
	CacheBytes    int64  `json:"cache_bytes"`
	MemTableBytes uint64 `json:"memtable_bytes"`
	// FastTimeouts shortens Raft's election at start (tests).
	FastTimeouts bool `json:"fast_timeouts"`
	// Progress, if set, is told of each step as it ends (the full run
	// takes minutes).
	Progress func(format string, args ...any) `json:"-"`
}

// progress reports a step through c.Progress.
func (c *CrawldbConfig) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(format, args...)
	}
}

// DefaultCrawldbConfig returns the configuration of the figures.
func DefaultCrawldbConfig() CrawldbConfig {
	c := CrawldbConfig{Seed: 1}
	_ = c.ensureDefaults()
	return c
}

// WithDefaults returns c with its zero fields filled in, or an error if a
// field is out of bounds.
func (c CrawldbConfig) WithDefaults() (CrawldbConfig, error) {
	err := c.ensureDefaults()
	return c, err
}

// ensureDefaults fills zero fields and checks the bounds.
func (c *CrawldbConfig) ensureDefaults() error {
	setInt := func(p *int, def int) {
		if *p == 0 {
			*p = def
		}
	}
	setInt(&c.Upserts, DefaultCrawldbUpserts)
	setInt(&c.BatchSize, DefaultCrawldbBatch)
	setInt(&c.UpsertHosts, DefaultUpsertHosts)
	setInt(&c.FrontierHosts, DefaultFrontierHosts)
	setInt(&c.URLsSmall, DefaultURLsSmall)
	setInt(&c.URLsLarge, DefaultURLsLarge)
	setInt(&c.Width, DefaultFrontierWidth)
	setInt(&c.Calls, DefaultFrontierCalls)
	setInt(&c.LoadWriters, DefaultLoadWriters)
	if len(c.Writers) == 0 {
		c.Writers = slices.Clone(DefaultCrawldbWriters)
	}
	if len(c.PerHost) == 0 {
		c.PerHost = slices.Clone(DefaultPerHost)
	}
	if len(c.Syncs) == 0 {
		c.Syncs = []LogSync{LogFsync, LogNoSync}
	}
	if c.LoadSync == "" {
		c.LoadSync = LogNoSync
	}
	if c.KnownFraction == 0 {
		c.KnownFraction = DefaultKnownFraction
	}
	if c.SettleMax == 0 {
		c.SettleMax = DefaultSettleMax
	}
	var errs []error
	positive := func(name string, v, max int) {
		if v < 1 || v > max {
			errs = append(errs, fmt.Errorf("bench: %s must be in [1, %d], got %d", name, max, v))
		}
	}
	positive("upserts", c.Upserts, maxCrawldbURLs)
	positive("batch size", c.BatchSize, store.MaxOps)
	positive("upsert hosts", c.UpsertHosts, maxCrawldbURLs)
	positive("frontier hosts", c.FrontierHosts, maxCrawldbURLs)
	positive("urls-small", c.URLsSmall, maxCrawldbURLs)
	positive("urls-large", c.URLsLarge, maxCrawldbURLs)
	positive("width", c.Width, maxCrawldbURLs)
	positive("calls", c.Calls, 1000)
	positive("load writers", c.LoadWriters, maxCrawldbWriters)
	for _, w := range c.Writers {
		positive("writers", w, maxCrawldbWriters)
	}
	for _, k := range c.PerHost {
		positive("per host", k, maxCrawldbURLs)
	}
	for _, s := range append(slices.Clone(c.Syncs), c.LoadSync) {
		if _, err := ParseLogSync(string(s)); err != nil {
			errs = append(errs, err)
		}
	}
	if c.URLsLarge < c.URLsSmall {
		errs = append(errs, fmt.Errorf("bench: urls-large (%d) is below urls-small (%d)", c.URLsLarge, c.URLsSmall))
	}
	if c.KnownFraction >= 1 {
		errs = append(errs, fmt.Errorf("bench: known fraction must be below 1, got %v", c.KnownFraction))
	}
	if c.CacheBytes < 0 {
		errs = append(errs, fmt.Errorf("bench: cache bytes must not be negative, got %d", c.CacheBytes))
	}
	if c.SkipUpserts && c.SkipFrontier {
		errs = append(errs, errors.New("bench: both phases skipped"))
	}
	return errors.Join(errs...)
}

// CrawldbResult is what RunCrawldb measured.
type CrawldbResult struct {
	// Upserts has one entry per Raft log mode and number of writers, in
	// the order of the configuration (nil when skipped).
	Upserts []UpsertRun `json:"upserts"`
	// Frontier holds the frontier reads, memory and disk figures (nil when
	// skipped).
	Frontier *FrontierResult `json:"frontier"`
	// Settings are the node's settings that bear on the figures.
	Settings CrawldbSettings `json:"settings"`
}

// CrawldbSettings are the settings the nodes ran with. The store's Pebble
// settings are read from the OPTIONS file Pebble writes in its directory,
// so they are the effective ones, defaults included.
type CrawldbSettings struct {
	CacheBytes    int64  `json:"cache_bytes"`
	MemTableBytes uint64 `json:"memtable_bytes"`
	// BlockSize, Compression and FilterPolicy are those of level 0.
	BlockSize         int    `json:"block_size"`
	Compression       string `json:"compression"`
	FilterPolicy      string `json:"filter_policy"`
	SnapshotThreshold uint64 `json:"snapshot_threshold"`
	TrailingLogs      uint64 `json:"trailing_logs"`
	Transport         string `json:"transport"`
}

// UpsertRun is one upsert run: a fresh one-node database written by
// Writers goroutines through Raft.
type UpsertRun struct {
	Sync    LogSync `json:"sync"`
	Writers int     `json:"writers"`
	// Upserts were applied in Batches commands; New of them inserted a URL
	// (the others added cash to a known one).
	Upserts int64 `json:"upserts"`
	Batches int64 `json:"batches"`
	New     int64 `json:"new"`
	// Elapsed is the wall time from the first command to the last result.
	Elapsed       time.Duration `json:"elapsed_ns"`
	UpsertsPerSec float64       `json:"upserts_per_sec"`
	// CPU is the process's user+system CPU time over the run (writers,
	// Raft, store and Pebble together).
	CPU time.Duration `json:"cpu_ns"`
	// MeanApply and P99Apply are the latency of one DB.Apply call.
	MeanApply time.Duration `json:"mean_apply_ns"`
	P99Apply  time.Duration `json:"p99_apply_ns"`
	// StoreURLs is the store's URL count after the run (= New).
	StoreURLs uint64 `json:"store_urls"`
}

// FrontierResult is the frontier database's figures at its two sizes.
type FrontierResult struct {
	LoadSync LogSync         `json:"load_sync"`
	Small    FrontierScale   `json:"small"`
	Large    FrontierScale   `json:"large"`
	Ratios   []FrontierRatio `json:"ratios"`
	// Memory is read after loading URLsLarge and reading the frontier.
	Memory MemoryStats `json:"memory"`
	// Disk is the node's directory after loading URLsLarge.
	Disk DiskStats `json:"disk"`
}

// FrontierScale is the frontier database at one size.
type FrontierScale struct {
	URLs uint64 `json:"urls"`
	// Hosts holding at least one URL; LargestHost and MedianHost are the
	// URL counts of the largest and the median of those.
	Hosts       int `json:"hosts"`
	LargestHost int `json:"largest_host"`
	MedianHost  int `json:"median_host"`
	// Load is the time to load the URLs added for this size, LoadPerSec
	// their rate.
	Load       time.Duration `json:"load_ns"`
	LoadPerSec float64       `json:"load_per_sec"`
	// Settle is the wait for Pebble's background work after the load.
	Settle time.Duration  `json:"settle_ns"`
	Reads  []FrontierRead `json:"reads"`
}

// FrontierRead is the timing of Frontier(Width, PerHost) at one size.
type FrontierRead struct {
	PerHost int `json:"per_host"`
	Width   int `json:"width"`
	// Entries is the length of the answer, Hosts the hosts it holds and
	// MaxPerHost the most URLs of one host in it.
	Entries    int `json:"entries"`
	Hosts      int `json:"hosts"`
	MaxPerHost int `json:"max_per_host"`
	// Sorted: each host's URLs came in descending score order.
	Sorted bool `json:"sorted"`
	// Median, Min and Max are over the timed calls (Times).
	Median time.Duration   `json:"median_ns"`
	Min    time.Duration   `json:"min_ns"`
	Max    time.Duration   `json:"max_ns"`
	Times  []time.Duration `json:"times_ns"`
}

// FrontierRatio is t(URLsLarge)/t(URLsSmall) of the median Frontier call.
type FrontierRatio struct {
	PerHost int     `json:"per_host"`
	Ratio   float64 `json:"ratio"`
}

// MemoryStats is the process's memory.
type MemoryStats struct {
	// RSS is VmRSS after a GC; RSSFreed after also returning freed memory
	// to the OS (debug.FreeOSMemory). Peak is VmHWM since the frontier
	// phase began (PeakReset) or since the process started.
	RSS       uint64 `json:"rss_bytes"`
	RSSFreed  uint64 `json:"rss_freed_bytes"`
	Peak      uint64 `json:"peak_bytes"`
	PeakReset bool   `json:"peak_reset"`
	// GoHeapInuse and GoSys are the Go runtime's view (after the GC).
	GoHeapInuse uint64 `json:"go_heap_inuse_bytes"`
	GoSys       uint64 `json:"go_sys_bytes"`
	// Err says why RSS could not be read (not Linux).
	Err string `json:"err,omitempty"`
}

// DiskStats is the size of a node's directory.
type DiskStats struct {
	// Total is every file under the node's Dir; Store the state machine's
	// Pebble, RaftLog the Raft log's Pebble, Snapshots Raft's snapshots.
	Total     int64 `json:"total_bytes"`
	Store     int64 `json:"store_bytes"`
	RaftLog   int64 `json:"raft_log_bytes"`
	Snapshots int64 `json:"snapshots_bytes"`
	// PerURL is Total/URLs, StorePerURL Store/URLs.
	PerURL      float64 `json:"bytes_per_url"`
	StorePerURL float64 `json:"store_bytes_per_url"`
}

// RunCrawldb measures a one-node crawl database: upserts per second through
// Raft (one fresh node per Raft log mode and number of writers), then the
// time of a top-of-frontier read at URLsSmall and, on the same node grown,
// at URLsLarge, and the memory and disk it takes at URLsLarge.
func RunCrawldb(ctx context.Context, cfg CrawldbConfig) (res CrawldbResult, err error) {
	if err := cfg.ensureDefaults(); err != nil {
		return res, err
	}
	base := cfg.Dir
	if base == "" {
		base, err = os.MkdirTemp("", "meridian-bench-crawldb-")
		if err != nil {
			return res, fmt.Errorf("bench: %w", err)
		}
		if !cfg.Keep {
			defer os.RemoveAll(base)
		}
	} else if err := os.MkdirAll(base, 0o755); err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	probe := cdbNodeOptions(&cfg, "", LogFsync)
	res.Settings = CrawldbSettings{SnapshotThreshold: probe.SnapshotThreshold, TrailingLogs: probe.TrailingLogs,
		Transport: "tcp 127.0.0.1"}
	settingsRead := false
	// settings reads the store's effective Pebble settings from the first node.
	settings := func(db *crawldb.DB) error {
		if settingsRead {
			return nil
		}
		settingsRead = true
		return cdbPebbleSettings(db.Store().Dir(), &res.Settings)
	}
	if !cfg.SkipUpserts {
		for _, mode := range cfg.Syncs {
			for _, w := range cfg.Writers {
				dir := filepath.Join(base, fmt.Sprintf("upserts-%s-w%d", mode, w))
				run, err := cdbUpsertRun(ctx, &cfg, dir, mode, w, settings)
				if !cfg.Keep {
					os.RemoveAll(dir)
				}
				if err != nil {
					return res, err
				}
				res.Upserts = append(res.Upserts, run)
				cfg.progress("upserts, raft log %s, %d writers: %.0f/s", mode, w, run.UpsertsPerSec)
			}
		}
	}
	if !cfg.SkipFrontier {
		dir := filepath.Join(base, "frontier")
		fr, err := cdbFrontierRun(ctx, &cfg, dir, settings)
		if !cfg.Keep {
			os.RemoveAll(dir)
		}
		if err != nil {
			return res, err
		}
		res.Frontier = fr
	}
	return res, nil
}

// cdbNodeOptions returns the options of a one-node database in dir, with the
// store's settings applied and the node's defaults filled in.
func cdbNodeOptions(cfg *CrawldbConfig, dir string, mode LogSync) crawldb.Options {
	return crawldb.Options{
		Dir: dir, NodeID: "bench", RaftAddr: "127.0.0.1:0",
		SnapshotThreshold: 8192, TrailingLogs: 10240, // crawldb's defaults, spelled out for the report
		Store:        store.Options{CacheBytes: cfg.CacheBytes, MemTableBytes: cfg.MemTableBytes},
		NoSync:       mode == LogNoSync,
		FastTimeouts: cfg.FastTimeouts,
	}
}

// cdbOpenNode opens a fresh one-node database in dir and waits for it to lead.
func cdbOpenNode(ctx context.Context, cfg *CrawldbConfig, dir string, mode LogSync) (*crawldb.DB, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	db, err := crawldb.Open(ctx, cdbNodeOptions(cfg, dir, mode))
	if err != nil {
		return nil, fmt.Errorf("bench: open crawldb in %s: %w", dir, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := db.WaitLeader(wctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	for !db.IsLeader() { // the only voter: it elects itself
		if err := cdbSleep(wctx, 5*time.Millisecond); err != nil {
			db.Close()
			return nil, fmt.Errorf("bench: node in %s never led: %w", dir, err)
		}
	}
	return db, nil
}

// cdbURLs makes the benchmark's URLs: URL number m is on a host drawn from
// a fixed heavy-tailed distribution (host i gets a share ∝ i^(-2/3)), with
// a random score and depth. Everything is a function of m and the seed.
type cdbURLs struct {
	seed  uint64
	hosts int
}

// cdbMix64 is splitmix64's finaliser: a well-spread hash of z.
func cdbMix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// cdbUnit maps 53 bits of h to [0, 1).
func cdbUnit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// host returns the host number of URL m.
func (g cdbURLs) host(m uint64) int {
	u := cdbUnit(cdbMix64(m*0x9e3779b97f4a7c15 + g.seed))
	return min(int(float64(g.hosts)*u*u*u), g.hosts-1)
}

// score returns the cash of URL m, in [0, 1).
func (g cdbURLs) score(m uint64) float64 { return cdbUnit(cdbMix64(m ^ (g.seed+1)*0xd1b54a32d192ed03)) }

// depth returns the depth of URL m, 1 to 6.
func (g cdbURLs) depth(m uint64) uint32 { return 1 + uint32(cdbMix64(m+g.seed*31+7)%6) }

// appendURL appends URL m: http://hN.cc.test/p/M.html.
func (g cdbURLs) appendURL(dst []byte, m uint64) []byte {
	dst = append(dst, "http://h"...)
	dst = strconv.AppendInt(dst, int64(g.host(m)), 10)
	dst = append(dst, ".cc.test/p/"...)
	dst = strconv.AppendUint(dst, m, 10)
	return append(dst, ".html"...)
}

// hostSizes returns the URL counts of the hosts with URLs among URLs 0..n-1.
func (g cdbURLs) hostSizes(n int) []int {
	counts := make([]int, g.hosts)
	for m := range uint64(n) {
		counts[g.host(m)]++
	}
	out := counts[:0]
	for _, c := range counts {
		if c > 0 {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// cdbUpsertRun applies cfg.Upserts upserts to a fresh node from writers
// goroutines, each applying its own commands, and times them.
func cdbUpsertRun(ctx context.Context, cfg *CrawldbConfig, dir string, mode LogSync, writers int, settings func(*crawldb.DB) error) (UpsertRun, error) {
	run := UpsertRun{Sync: mode, Writers: writers}
	db, err := cdbOpenNode(ctx, cfg, dir, mode)
	if err != nil {
		return run, err
	}
	defer db.Close()
	if err := settings(db); err != nil {
		return run, err
	}
	gen := cdbURLs{seed: cfg.Seed, hosts: cfg.UpsertHosts}
	batches := int64((cfg.Upserts + cfg.BatchSize - 1) / cfg.BatchSize)
	var (
		next    atomic.Int64 // next command number to apply
		upserts atomic.Int64
		news    atomic.Int64
		errOnce sync.Once
		runErr  error
	)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		errOnce.Do(func() { runErr = err; cancel() })
	}
	lat := make([][]time.Duration, writers)
	cpu0, _ := selfCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rng{s: cfg.Seed ^ uint64(w+1)*0x9e3779b97f4a7c15}
			b := store.NewBatch()
			var buf []byte
			var inserted uint64 // URLs this writer inserted: numbers i*writers+w, i < inserted
			for rctx.Err() == nil {
				c := next.Add(1) - 1
				if c >= batches {
					return
				}
				n := min(cfg.BatchSize, cfg.Upserts-int(c)*cfg.BatchSize)
				b.Reset()
				fresh := inserted
				for range n {
					var m uint64
					known := inserted > 0 && cdbUnit(r.next()) < cfg.KnownFraction
					if known {
						m = uint64(r.intn(int(inserted)))*uint64(writers) + uint64(w)
					} else {
						m = fresh*uint64(writers) + uint64(w)
						fresh++
					}
					buf = gen.appendURL(buf[:0], m)
					cash := gen.score(m)
					if known {
						cash = cdbUnit(r.next()) * 0.1
					}
					b.UpsertCash(string(buf), cash, gen.depth(m))
				}
				t := time.Now()
				out, err := db.Apply(rctx, b)
				lat[w] = append(lat[w], time.Since(t))
				if err == nil && out.Err != nil {
					err = out.Err
				}
				if err != nil {
					fail(fmt.Errorf("bench: upsert command %d (%s, %d writers): %w", c, mode, writers, err))
					return
				}
				inserted = fresh
				nn := 0
				for _, o := range out.Ops {
					if o.New {
						nn++
					}
				}
				upserts.Add(int64(n))
				news.Add(int64(nn))
			}
		})
	}
	wg.Wait()
	run.Elapsed = time.Since(start)
	cpu1, _ := selfCPU()
	if runErr != nil {
		return run, runErr
	}
	if err := ctx.Err(); err != nil {
		return run, fmt.Errorf("bench: upsert run: %w", err)
	}
	run.CPU = cpu1 - cpu0
	run.Upserts, run.New, run.Batches = upserts.Load(), news.Load(), batches
	if s := run.Elapsed.Seconds(); s > 0 {
		run.UpsertsPerSec = float64(run.Upserts) / s
	}
	run.MeanApply, run.P99Apply = cdbLatencies(lat)
	run.StoreURLs = db.Store().Counts().URLs
	if run.StoreURLs != uint64(run.New) {
		return run, fmt.Errorf("bench: the store holds %d URLs after %d new ones were upserted", run.StoreURLs, run.New)
	}
	if err := db.Close(); err != nil {
		return run, fmt.Errorf("bench: close crawldb: %w", err)
	}
	return run, nil
}

// cdbLatencies returns the mean and 99th percentile of all the durations.
func cdbLatencies(per [][]time.Duration) (mean, p99 time.Duration) {
	var all []time.Duration
	for _, l := range per {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return 0, 0
	}
	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	return sum / time.Duration(len(all)), all[min(len(all)-1, len(all)*99/100)]
}

// cdbFrontierRun loads URLsSmall URLs into a fresh node, times the frontier
// reads, grows it to URLsLarge, times them again, and reads the memory and
// disk use.
func cdbFrontierRun(ctx context.Context, cfg *CrawldbConfig, dir string, settings func(*crawldb.DB) error) (*FrontierResult, error) {
	fr := &FrontierResult{LoadSync: cfg.LoadSync}
	// Peak memory from here on: Linux resets VmHWM on "5" to clear_refs.
	fr.Memory.PeakReset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	db, err := cdbOpenNode(ctx, cfg, dir, cfg.LoadSync)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := settings(db); err != nil {
		return nil, err
	}
	gen := cdbURLs{seed: cfg.Seed, hosts: cfg.FrontierHosts}
	scale := func(from, to int) (FrontierScale, error) {
		sc := FrontierScale{}
		var err error
		if sc.Load, err = cdbLoad(ctx, cfg, db, gen, from, to); err != nil {
			return sc, err
		}
		if s := sc.Load.Seconds(); s > 0 {
			sc.LoadPerSec = float64(to-from) / s
		}
		sc.URLs = db.Store().Counts().URLs
		if sc.URLs != uint64(to) {
			return sc, fmt.Errorf("bench: the store holds %d URLs after loading %d", sc.URLs, to)
		}
		sizes := gen.hostSizes(to)
		sc.Hosts, sc.LargestHost, sc.MedianHost = len(sizes), sizes[len(sizes)-1], sizes[len(sizes)/2]
		cfg.progress("frontier: loaded %d URLs at %.0f/s", to, sc.LoadPerSec)
		if sc.Settle, err = cdbSettle(ctx, cfg.SettleMax); err != nil {
			return sc, err
		}
		for _, k := range cfg.PerHost {
			var r FrontierRead
			var err error
			// Labelled, so that a CPU profile of the run can be cut by read.
			pprof.Do(ctx, pprof.Labels("phase", "frontier", "urls", strconv.Itoa(to), "k", strconv.Itoa(k)), func(ctx context.Context) {
				r, err = cdbTimeFrontier(ctx, db.Store(), cfg.Width, k, cfg.Calls)
			})
			if err != nil {
				return sc, err
			}
			sc.Reads = append(sc.Reads, r)
			cfg.progress("frontier: %d URLs, k=%d: median %.1f ms", to, k, cdbMS(r.Median))
		}
		return sc, nil
	}
	if fr.Small, err = scale(0, cfg.URLsSmall); err != nil {
		return nil, err
	}
	if fr.Large, err = scale(cfg.URLsSmall, cfg.URLsLarge); err != nil {
		return nil, err
	}
	for i, k := range cfg.PerHost {
		r := FrontierRatio{PerHost: k}
		if s := fr.Small.Reads[i].Median; s > 0 {
			r.Ratio = float64(fr.Large.Reads[i].Median) / float64(s)
		}
		fr.Ratios = append(fr.Ratios, r)
	}
	fr.Memory = cdbMemoryStats(fr.Memory.PeakReset)
	if fr.Disk, err = cdbDiskStats(ctx, dir, db.Store().Dir(), fr.Large.URLs); err != nil {
		return nil, err
	}
	if err := db.Close(); err != nil {
		return nil, fmt.Errorf("bench: close crawldb: %w", err)
	}
	return fr, nil
}

// cdbLoad upserts URLs from..to-1 (all new) into db from cfg.LoadWriters
// goroutines, in commands of cfg.BatchSize, and returns the time it took.
func cdbLoad(ctx context.Context, cfg *CrawldbConfig, db *crawldb.DB, gen cdbURLs, from, to int) (time.Duration, error) {
	var (
		next    atomic.Int64
		errOnce sync.Once
		runErr  error
	)
	next.Store(int64(from))
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.LoadWriters {
		wg.Go(func() {
			b := store.NewBatch()
			var buf []byte
			for lctx.Err() == nil {
				lo := next.Add(int64(cfg.BatchSize)) - int64(cfg.BatchSize)
				if lo >= int64(to) {
					return
				}
				hi := min(lo+int64(cfg.BatchSize), int64(to))
				b.Reset()
				for m := uint64(lo); m < uint64(hi); m++ {
					buf = gen.appendURL(buf[:0], m)
					b.UpsertCash(string(buf), gen.score(m), gen.depth(m))
				}
				out, err := db.Apply(lctx, b)
				if err == nil && out.Err != nil {
					err = out.Err
				}
				if err != nil {
					errOnce.Do(func() {
						runErr = fmt.Errorf("bench: load URLs %d..%d: %w", lo, hi-1, err)
						cancel()
					})
					return
				}
				if step := int64(1_000_000); hi/step > lo/step {
					cfg.progress("frontier: loading, %d URLs at %.0f/s", hi, float64(hi-int64(from))/time.Since(start).Seconds())
				}
			}
		})
	}
	wg.Wait()
	if runErr != nil {
		return 0, runErr
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("bench: load: %w", err)
	}
	return time.Since(start), nil
}

// cdbSettle waits until the process is idle (Pebble's flushes and compactions
// after a load are done), at most max, and returns the time waited.
func cdbSettle(ctx context.Context, max time.Duration) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < max {
		c0, err := selfCPU()
		if err != nil {
			break // no CPU times: do not wait
		}
		if err := cdbSleep(ctx, settleWindow); err != nil {
			return 0, fmt.Errorf("bench: settle: %w", err)
		}
		c1, _ := selfCPU()
		if (c1-c0).Seconds()/settleWindow.Seconds() < settleIdle {
			break
		}
	}
	return time.Since(start), nil
}

// cdbTimeFrontier times calls Frontier(width, k) calls after a warm-up call
// and checks the answer.
func cdbTimeFrontier(ctx context.Context, st *store.Store, width, k, calls int) (FrontierRead, error) {
	r := FrontierRead{PerHost: k, Width: width}
	q := store.FrontierQuery{Width: width, PerHost: k}
	entries, err := st.Frontier(q) // warm-up
	if err != nil {
		return r, fmt.Errorf("bench: frontier (width %d, k %d): %w", width, k, err)
	}
	for range calls {
		if err := ctx.Err(); err != nil {
			return r, fmt.Errorf("bench: frontier: %w", err)
		}
		t := time.Now()
		entries, err = st.Frontier(q)
		r.Times = append(r.Times, time.Since(t))
		if err != nil {
			return r, fmt.Errorf("bench: frontier (width %d, k %d): %w", width, k, err)
		}
	}
	sorted := slices.Clone(r.Times)
	slices.Sort(sorted)
	r.Min, r.Max, r.Median = sorted[0], sorted[len(sorted)-1], sorted[len(sorted)/2]
	r.Entries = len(entries)
	perHost := map[string]int{}
	last := map[string]float64{}
	r.Sorted = true
	for _, e := range entries {
		perHost[e.Host]++
		if s, ok := last[e.Host]; ok && e.Score > s {
			r.Sorted = false
		}
		last[e.Host] = e.Score
	}
	r.Hosts = len(perHost)
	for _, n := range perHost {
		r.MaxPerHost = max(r.MaxPerHost, n)
	}
	return r, nil
}

// cdbPebbleSettings reads the effective settings of the Pebble in dir from
// the newest OPTIONS file Pebble wrote there.
func cdbPebbleSettings(dir string, st *CrawldbSettings) error {
	files, err := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("bench: no Pebble OPTIONS file in %s (%v)", dir, err)
	}
	slices.Sort(files) // fixed-width numbers: the last is the newest
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch {
		case section == "[Options]" && name == "cache_size":
			st.CacheBytes, err = strconv.ParseInt(value, 10, 64)
		case section == "[Options]" && name == "mem_table_size":
			st.MemTableBytes, err = strconv.ParseUint(value, 10, 64)
		case section == `[Level "0"]` && name == "block_size":
			st.BlockSize, err = strconv.Atoi(value)
		case section == `[Level "0"]` && name == "compression":
			st.Compression = value
		case section == `[Level "0"]` && name == "filter_policy":
			st.FilterPolicy = value
		}
		if err != nil {
			return fmt.Errorf("bench: %s: bad line %q: %w", files[len(files)-1], line, err)
		}
	}
	if st.CacheBytes == 0 || st.MemTableBytes == 0 {
		return fmt.Errorf("bench: %s names no cache or memtable size", files[len(files)-1])
	}
	return nil
}

// cdbMemoryStats reads the process's memory after a GC.
func cdbMemoryStats(peakReset bool) MemoryStats {
	m := MemoryStats{PeakReset: peakReset}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.GoHeapInuse, m.GoSys = ms.HeapInuse, ms.Sys
	st, err := cdbProcStatus("VmRSS", "VmHWM")
	if err != nil {
		m.Err = err.Error()
		return m
	}
	m.RSS, m.Peak = st["VmRSS"], st["VmHWM"]
	debug.FreeOSMemory()
	if st, err := cdbProcStatus("VmRSS"); err == nil {
		m.RSSFreed = st["VmRSS"]
	}
	return m
}

// cdbProcStatus returns fields of /proc/self/status given in kB, in bytes.
func cdbProcStatus(names ...string) (map[string]uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		f := strings.Fields(value)
		if len(f) != 2 || f[1] != "kB" {
			return nil, fmt.Errorf("bench: /proc/self/status: bad line %q", sc.Text())
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bench: /proc/self/status: bad line %q", sc.Text())
		}
		out[name] = kb << 10
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("bench: /proc/self/status has no %s", n)
		}
	}
	return out, nil
}

// cdbDiskStats sums the sizes of the files under a node's dir, after waiting
// for a snapshot being persisted (whose checkpoint hard-links the store's
// files) to finish.
func cdbDiskStats(ctx context.Context, dir, storeDir string, urls uint64) (DiskStats, error) {
	var d DiskStats
	tmp := filepath.Join(dir, "snapshots-tmp")
	for start := time.Now(); time.Since(start) < snapshotWait; {
		ents, err := os.ReadDir(tmp)
		if err != nil || len(ents) == 0 {
			break
		}
		if err := cdbSleep(ctx, 100*time.Millisecond); err != nil {
			return d, fmt.Errorf("bench: disk use: %w", err)
		}
	}
	// One walk, so that the parts add up while Pebble changes files.
	parts := map[string]*int64{storeDir: &d.Store, filepath.Join(dir, "raft"): &d.RaftLog,
		filepath.Join(dir, "snapshots"): &d.Snapshots}
	err := cdbWalkSizes(dir, func(path string, size int64) {
		d.Total += size
		for p, n := range parts {
			if strings.HasPrefix(path, p+string(filepath.Separator)) {
				*n += size
			}
		}
	})
	if err != nil {
		return d, err
	}
	if urls > 0 {
		d.PerURL = float64(d.Total) / float64(urls)
		d.StorePerURL = float64(d.Store) / float64(urls)
	}
	return d, nil
}

// cdbWalkSizes calls fn with the path and size of every regular file under
// dir. Files removed during the walk are skipped.
func cdbWalkSizes(dir string, fn func(path string, size int64)) error {
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // a file Pebble just removed
				return nil
			}
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		fn(path, fi.Size())
		return nil
	})
	if err != nil {
		return fmt.Errorf("bench: disk use of %s: %w", dir, err)
	}
	return nil
}

// cdbBytes formats n in MiB or GiB.
func cdbBytes(n float64) string {
	if n >= 1<<30 {
		return strconv.FormatFloat(n/(1<<30), 'f', 2, 64) + " GiB"
	}
	return strconv.FormatFloat(n/(1<<20), 'f', 1, 64) + " MiB"
}

// Report writes a short human report of r.
func (r CrawldbResult) Report(cfg CrawldbConfig) string {
	var sb strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	st := r.Settings
	p("crawldb, one node (%d CPUs; Raft over %s; snapshot every %d entries, %d trailing)\n",
		runtime.NumCPU(), st.Transport, st.SnapshotThreshold, st.TrailingLogs)
	p("store's Pebble: cache %s, memtable %s, %d-byte blocks, %s, filter %s\n",
		cdbBytes(float64(st.CacheBytes)), cdbBytes(float64(st.MemTableBytes)), st.BlockSize, st.Compression, st.FilterPolicy)
	if len(r.Upserts) > 0 {
		p("upserts through Raft: %d per run in commands of %d, %d hosts, %.0f%% known\n",
			cfg.Upserts, cfg.BatchSize, cfg.UpsertHosts, 100*max(0, cfg.KnownFraction))
		p("  %-7s %7s %12s %9s %10s %12s %12s\n", "log", "writers", "upserts/s", "elapsed", "CPU cores", "mean apply", "p99 apply")
		for _, u := range r.Upserts {
			p("  %-7s %7d %12.0f %8.2fs %10.2f %12v %12v\n", u.Sync, u.Writers, u.UpsertsPerSec, u.Elapsed.Seconds(),
				cdbCores(u.CPU, u.Elapsed), u.MeanApply.Round(10*time.Microsecond), u.P99Apply.Round(10*time.Microsecond))
		}
	}
	if f := r.Frontier; f != nil {
		p("frontier reads of width %d (median of %d after a warm-up), %d hosts, loaded with Raft log %s by %d writers\n",
			cfg.Width, cfg.Calls, cfg.FrontierHosts, f.LoadSync, cfg.LoadWriters)
		for _, sc := range []FrontierScale{f.Small, f.Large} {
			p("  %d URLs on %d hosts (largest %d, median %d); loaded at %.0f/s, settled in %.1fs\n",
				sc.URLs, sc.Hosts, sc.LargestHost, sc.MedianHost, sc.LoadPerSec, sc.Settle.Seconds())
			for _, rd := range sc.Reads {
				p("    k=%-4d %8.1f ms (min %.1f, max %.1f); %d entries, %d hosts, ≤%d per host, sorted %v\n",
					rd.PerHost, cdbMS(rd.Median), cdbMS(rd.Min), cdbMS(rd.Max), rd.Entries, rd.Hosts, rd.MaxPerHost, rd.Sorted)
			}
		}
		for _, rt := range f.Ratios {
			p("  ratio t(%d)/t(%d), k=%d: %.2f\n", f.Large.URLs, f.Small.URLs, rt.PerHost, rt.Ratio)
		}
		m := f.Memory
		if m.Err != "" {
			p("  memory: %s\n", m.Err)
		} else {
			peak := "since start"
			if m.PeakReset {
				peak = "since the frontier phase began"
			}
			p("  memory at %d URLs: RSS %s after GC (%s after FreeOSMemory), peak %s (%s); Go heap in use %s, Go sys %s\n",
				f.Large.URLs, cdbBytes(float64(m.RSS)), cdbBytes(float64(m.RSSFreed)), cdbBytes(float64(m.Peak)), peak,
				cdbBytes(float64(m.GoHeapInuse)), cdbBytes(float64(m.GoSys)))
		}
		d := f.Disk
		p("  disk at %d URLs: %s in all, %.1f B/URL (store %s, %.1f B/URL; raft log %s; snapshots %s)\n",
			f.Large.URLs, cdbBytes(float64(d.Total)), d.PerURL, cdbBytes(float64(d.Store)), d.StorePerURL,
			cdbBytes(float64(d.RaftLog)), cdbBytes(float64(d.Snapshots)))
	}
	return sb.String()
}

func cdbCores(cpu, wall time.Duration) float64 {
	if wall <= 0 {
		return 0
	}
	return cpu.Seconds() / wall.Seconds()
}

func cdbMS(d time.Duration) float64 { return float64(d) / 1e6 }

// cdbSleep waits for d or until ctx ends, and returns ctx's error then.
func cdbSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

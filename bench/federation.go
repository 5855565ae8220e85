package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/wan"
	"github.com/meridian-crawler/meridian/websim/geodb"
	"github.com/meridian-crawler/meridian/websim/replay"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// Defaults, bounds and targets of RunFederation.
const (
	DefaultFederationTimeout = 15 * time.Minute // per run
	DefaultFederationSample  = time.Second      // /status of every site or node: see FederationConfig.SampleEvery
	maxFederationDelay       = 2 * time.Second  // one-way WAN delay
	// fedGrace is the federation file's grace period: longer than any run,
	// so that a site that has done its rounds and exited never has its
	// hosts taken over by the sites still crawling.
	fedGrace = 24 * time.Hour

	fedLossTarget    = 0.05 // pages/s lost from 20 to 80 ms (UniCrawl: 17%)
	fedCacheTarget   = 0.92 // URL-sent cache hit rate (UniCrawl: 92%)
	fedTrafficTarget = 0.95 // inter-site bytes per page saved by federating (UniCrawl: 93.6%)
	fedSpeedTarget   = 2.0  // federated pages/s over stretched (UniCrawl: 1.75)
)

// Modes of a FederationRun.
const (
	ModeFederated = "federated" // one site per region, exchanging URLs
	ModeStretched = "stretched" // one site whose nodes sit in the regions
)

// FederationSites are the benchmark's sites, where UniCrawl's were: eu
// (Hamburg), us (New York) and asia (Singapore). Endpoints are filled in
// by each run.
func FederationSites() []federation.SiteSpec {
	var out []federation.SiteSpec
	for _, s := range PartitionSites3().Sites {
		out = append(out, federation.SiteSpec{Name: s.Name, Lat: s.Lat, Lon: s.Lon})
	}
	return out
}

// FederationConfig configures RunFederation: one synthetic web served by
// websim, crawled by three federated sites once per WAN delay in Delays,
// and by one site of three nodes stretched across the same WAN once per
// delay in Stretched. Every site, node and websim is its own process; the
// WAN links are proxies in this process (package wan).
type FederationConfig struct {
	// Hosts, Pages, PageBytes, IPs, Seed and Profile describe the web, as
	// in SiteConfig.
	Hosts     int           `json:"hosts"`
	Pages     int           `json:"pages"`
	PageBytes int           `json:"page_bytes"`
	IPs       int           `json:"ips"`
	Seed      uint64        `json:"seed"`
	Profile   synth.Profile `json:"-"`
	// Partitioner is the federation file's: "consistent" (default) or
	// "distance" (hosts located with a GeoIP file of websim's addresses,
	// written by this benchmark as `websim --geoip` writes it). Replicas
	// per site on the consistent-hashing ring; default 200.
	Partitioner string `json:"partitioner"`
	Replicas    int    `json:"replicas"`
	// Rounds is every site's `site up --rounds` (0: the federation crawls
	// the web to exhaustion). Width is each federated site's URLs per
	// round; the stretched site, one site doing the work of all, gets
	// Width × the number of sites. PerHost, Workers (per site, and per
	// node of the stretched site), the delays and NoSync are the sites'
	// flags of the same names.
	Rounds        int           `json:"rounds"`
	Width         int           `json:"width"`
	PerHost       int           `json:"per_host"`
	Workers       int           `json:"workers"`
	HostDelay     time.Duration `json:"host_delay_ns"`
	IPDelay       time.Duration `json:"ip_delay_ns"`
	MaxCrawlDelay time.Duration `json:"max_crawl_delay_ns"`
	NoSync        bool          `json:"no_sync"`
	// Delays are the one-way WAN delays of the federated runs, one fresh
	// crawl each, in this order; Stretched those of the stretched runs,
	// run after them. At least one run in all.
	Delays    []time.Duration `json:"delays_ns"`
	Stretched []time.Duration `json:"stretched_delays_ns"`
	// SampleEvery is how often every site's or node's /status and CPU are
	// read. Default 1s: a follower's /status asks its leader for the
	// site's nodes, and in a stretched run that call crosses the WAN, so
	// sampling adds to what is measured (~1 KB a call).
	SampleEvery time.Duration `json:"sample_every_ns"`
	// Timeout bounds each run: its processes are stopped when a fifth of
	// it (at most a minute) is left. Default 15 min.
	Timeout time.Duration `json:"timeout_ns"`
	// Stall stops a run whose processes have all been idle this long (no
	// request in flight, no page, round or URL exchanged) without
	// exiting; it is reported "stalled". Default 2 min; negative: never.
	Stall time.Duration `json:"stall_ns"`
	// SiteFlags are more `site up` flags for every site (federated) and
	// the first node (stretched).
	SiteFlags []string `json:"site_flags,omitempty"`
	// Replay, if set, are WARC files (or globs of them) that `websim
	// replay` serves as the web instead of a synthetic one (issue 10,
	// benchmark 5): every archived URL on the port it was recorded with,
	// the hosts spread over IPs loopback addresses. The seeds are each
	// archived host's front page (or its first URL); the GeoIP file places
	// the addresses where the synthetic web of Seed places them. Hosts,
	// Pages and Profile are then unused, and only the host and address
	// delays are checked in websim's statistics.
	Replay []string `json:"replay,omitempty"`
	// Dir, Keep, ModuleRoot, WebsimBinary, SiteBinary and Progress are as
	// in ClusterConfig.
	Dir          string                           `json:"-"`
	Keep         bool                             `json:"-"`
	ModuleRoot   string                           `json:"-"`
	WebsimBinary string                           `json:"-"`
	SiteBinary   string                           `json:"-"`
	Progress     func(format string, args ...any) `json:"-"`
}

// DefaultFederationConfig is issue 10's benchmark 1: 3,000 realistic hosts
// of 30 pages on 64 addresses, three sites (consistent hashing, 200
// replicas), 24 rounds of 1,000 URLs per site, at most 10 per host, bench
// site's politeness (200 ms per host, crawl-delays capped at 500 ms), at
// WAN delays of 0, 20, 40 and 80 ms. The width is small because an
// update that sends more than ~1,500 URLs to one site fails (see
// bench/README.md, "federation").
func DefaultFederationConfig() FederationConfig {
	return FederationConfig{Hosts: 3000, Pages: 30, IPs: 64, Seed: 1, Profile: synth.Realistic,
		Partitioner: "consistent", Replicas: 200, Rounds: 24, Width: 1000, PerHost: 10, Workers: 256,
		HostDelay: 200 * time.Millisecond, MaxCrawlDelay: 500 * time.Millisecond,
		Delays:      []time.Duration{0, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond},
		SampleEvery: DefaultFederationSample, Timeout: DefaultFederationTimeout, Stall: DefaultStall}
}

// siteConfig is c as a SiteConfig (its web, checks and websim).
func (c *FederationConfig) siteConfig() SiteConfig {
	return SiteConfig{Hosts: c.Hosts, Pages: c.Pages, PageBytes: c.PageBytes, IPs: c.IPs, Seed: c.Seed, Profile: c.Profile,
		Rounds: c.Rounds, Width: c.Width, PerHost: c.PerHost, Workers: c.Workers,
		HostDelay: c.HostDelay, IPDelay: c.IPDelay, MaxCrawlDelay: c.MaxCrawlDelay, NoSync: c.NoSync,
		SampleEvery: c.SampleEvery, Timeout: c.Timeout, SiteFlags: c.SiteFlags,
		ModuleRoot: c.ModuleRoot, WebsimBinary: c.WebsimBinary, SiteBinary: c.SiteBinary, Progress: c.Progress}
}

// WithDefaults returns c with its zero fields filled in, or every problem
// with it.
func (c FederationConfig) WithDefaults() (FederationConfig, error) {
	c.Delays, c.Stretched = slices.Clone(c.Delays), slices.Clone(c.Stretched)
	c.SiteFlags, c.Replay = slices.Clone(c.SiteFlags), slices.Clone(c.Replay)
	if c.Partitioner == "" {
		c.Partitioner = "consistent"
	}
	if c.Replicas == 0 {
		c.Replicas = 200
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = DefaultFederationSample
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultFederationTimeout
	}
	if c.Stall == 0 {
		c.Stall = DefaultStall
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("bench: "+format, args...)) }
	s, err := c.siteConfig().WithDefaults()
	if err != nil {
		errs = append(errs, err)
	}
	c.Hosts, c.Pages, c.PageBytes, c.IPs = s.Hosts, s.Pages, s.PageBytes, s.IPs
	c.Width, c.PerHost, c.Workers = s.Width, s.PerHost, s.Workers
	if c.Partitioner != "consistent" && c.Partitioner != "distance" {
		bad("partitioner %q: want consistent or distance", c.Partitioner)
	}
	if c.Replicas < 1 || c.Replicas > 100_000 {
		bad("replicas must be in [1, 100000], got %d", c.Replicas)
	}
	if len(c.Delays)+len(c.Stretched) == 0 {
		bad("no run: give at least one federated or stretched delay")
	}
	for _, d := range slices.Concat(c.Delays, c.Stretched) {
		if d < 0 || d > maxFederationDelay {
			bad("WAN delay must be in [0, %v], got %v", maxFederationDelay, d)
		}
	}
	if n := len(FederationSites()); c.Width*n > 1_000_000 {
		bad("width × %d sites (the stretched site's width) must be at most 1000000, got %d", n, c.Width*n)
	}
	if c.Timeout < 10*time.Second {
		bad("timeout must be at least 10s, got %v", c.Timeout)
	}
	return c, errors.Join(errs...)
}

// FederationRound is one round of one site (federated) or of the site
// (stretched), from rounds.jsonl.
type FederationRound struct {
	Site string `json:"site"`
	RoundRow
	Leader string `json:"leader,omitempty"`
	// RemoteURLs: the URLs its update put in other sites' outboxes.
	// CacheHits, CacheLookups and CacheHitRate: the URL-sent cache's
	// counts so far on the node that ran the update.
	RemoteURLs   int     `json:"remote_urls"`
	CacheHits    int64   `json:"sent_cache_hits"`
	CacheLookups int64   `json:"sent_cache_lookups"`
	CacheHitRate float64 `json:"sent_cache_hit_rate"`
}

// FederationMember is one process of a run: a site (federated) or a node
// of the site (stretched).
type FederationMember struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Role: at its last answered /status; Exit and ExitCode: how it ended;
	// Stopped: by the benchmark at the timeout.
	Role     string `json:"role"`
	Exit     string `json:"exit"`
	ExitCode int    `json:"exit_code"`
	Stopped  bool   `json:"stopped,omitempty"`
	// Rounds: lines in its rounds.jsonl (rounds whose update it ran).
	// Pages: Σ fetched over its rounds (a site), or its fetcher.done at
	// its last answered /status (a node: retries included).
	Rounds int   `json:"rounds"`
	Pages  int64 `json:"pages"`
	// CPU over the run's window (interpolated), over its life, and the
	// window's per page of its own (Pages).
	WindowCPUS   float64 `json:"window_cpu_s"`
	CPUS         float64 `json:"cpu_s"`
	CPUPerPageUS float64 `json:"cpu_us_per_page"`
	PeakRSS      int64   `json:"peak_rss_bytes"`
	// Federation (federated runs), at its last answered /status.
	SentURLs     int64   `json:"sent_urls,omitempty"`
	SentBatches  int64   `json:"sent_batches,omitempty"`
	RecvURLs     int64   `json:"received_urls,omitempty"`
	RecvBatches  int64   `json:"received_batches,omitempty"`
	Outbox       uint64  `json:"outbox_entries,omitempty"`
	CacheHits    int64   `json:"sent_cache_hits,omitempty"`
	CacheLookups int64   `json:"sent_cache_lookups,omitempty"`
	CacheHitRate float64 `json:"sent_cache_hit_rate,omitempty"`
	TLSBytesOut  int64   `json:"tls_bytes_out,omitempty"` // Σ over its peers: its calls' wire bytes
	TLSBytesIn   int64   `json:"tls_bytes_in,omitempty"`
	// Crawl database traffic (stretched runs), at its last answered /status.
	RaftSent int64 `json:"raft_sent_bytes,omitempty"`
	APISent  int64 `json:"api_sent_bytes,omitempty"`
	// UpS: its start to its status answering (site.json written).
	UpS float64 `json:"up_s"`
}

// FederationLink is what crossed one WAN link (a proxy in front of a
// site's federation endpoint, or of a node's Raft or HTTP listener).
type FederationLink struct {
	Name       string `json:"name"`
	Upstream   int64  `json:"upstream_bytes"`   // towards the site or node behind it
	Downstream int64  `json:"downstream_bytes"` // back
	Conns      int64  `json:"conns"`
}

// FederationRun is one crawl of the web: federated or stretched, at one
// WAN delay.
type FederationRun struct {
	Mode    string        `json:"mode"`
	Delay   time.Duration `json:"delay_ns"`
	DelayMS float64       `json:"delay_ms"`
	// Exit: "rounds" (every site did its rounds), "exhausted", "cut" (the
	// timeout stopped it), "stalled" (idle for FederationConfig.Stall,
	// stopped), "failed" (a process failed) or "exited".
	Exit string `json:"exit"`
	// Load is the load average when the run started.
	Load   [3]float64        `json:"load_average_start"`
	Rounds []FederationRound `json:"rounds"`
	// The window runs from the first round's start to the last round's end
	// over every site's (node's) rounds.jsonl; Pages is Σ fetched over
	// those rounds.
	WindowS       float64 `json:"window_s"`
	Pages         int64   `json:"pages"`
	Pages2xx      int64   `json:"pages_2xx"`
	PagesPerSec   float64 `json:"pages_per_sec"`
	FirstRoundAtS float64 `json:"first_round_at_s"` // first process start to the first round's start
	WallS         float64 `json:"wall_s"`           // first process start to the last exit
	// MeanUpdateS and MaxUpdateS: over every round of every site.
	MeanUpdateS float64 `json:"mean_update_s"`
	MaxUpdateS  float64 `json:"max_update_s"`
	// RemoteURLs: Σ over the rounds of the URLs put in other sites'
	// outboxes. CacheHits and CacheLookups: Σ over the sites of their
	// URL-sent cache's counts at their last round; CacheHitRate their
	// ratio (federated runs).
	RemoteURLs   int64   `json:"remote_urls"`
	CacheHits    int64   `json:"sent_cache_hits"`
	CacheLookups int64   `json:"sent_cache_lookups"`
	CacheHitRate float64 `json:"sent_cache_hit_rate"`
	// CacheHitRateLast is the rate over each site's last round alone (Σ of
	// the counts' growth in it), what the cache achieves once warm.
	CacheHitRateLast float64 `json:"sent_cache_hit_rate_last_round"`
	// WANBytes: Σ over the WAN links of the bytes both ways; per page.
	// Inter-site traffic is this, for both modes.
	WANBytes        int64            `json:"wan_bytes"`
	WANBytesPerPage float64          `json:"wan_bytes_per_page"`
	Links           []FederationLink `json:"links"`
	// CountedBytes: what the processes counted themselves — Σ TLS bytes
	// out and in of the sites' federation calls (federated), or Σ Raft and
	// crawl-database API bytes sent (stretched, as bench cluster counts).
	CountedBytes int64              `json:"counted_bytes"`
	Members      []FederationMember `json:"members"`
	// CPU over the window: Σ over the sites or nodes, per page; websim's.
	SiteCPUS         float64 `json:"site_window_cpu_s"`
	SiteCPUPerPageUS float64 `json:"site_cpu_us_per_page"`
	WebsimWindowCPUS float64 `json:"websim_window_cpu_s"`
	// websim's statistics, reset before the run: politeness across the
	// whole federation.
	Breaches       int      `json:"politeness_breaches"`
	BreachSample   []string `json:"politeness_breach_sample,omitempty"`
	WebsimRequests int64    `json:"websim_requests"`
	UnknownHost    int64    `json:"websim_unknown_host_requests"`
	StatusErrors   int      `json:"status_errors"`
	Error          string   `json:"error,omitempty"`
}

// FederationResult is what RunFederation measured.
type FederationResult struct {
	Runs   []FederationRun `json:"runs"`
	Websim ProcStats       `json:"websim"`
	// PrimedFlakyHosts: as in ClusterResult (every run sees the same web).
	PrimedFlakyHosts int `json:"primed_flaky_robots_hosts"`
	// Loss20to80 is 1 − pages/s at 80 ms over pages/s at 20 ms, of the
	// first federated runs at those delays (-1: not both measured).
	Loss20to80 float64 `json:"loss_20_to_80"`
	// Comparisons: each stretched run against the first federated run at
	// its delay.
	Comparisons []FederationComparison `json:"comparisons,omitempty"`
	// Replayed: with FederationConfig.Replay, what websim replays.
	Replayed *FederationReplay        `json:"replayed,omitempty"`
	Targets  map[string]ClusterTarget `json:"targets"`
	Dir      string                   `json:"dir,omitempty"`
	NumCPU   int                      `json:"num_cpu"`
}

// FederationReplay is the archive a replayed web serves.
type FederationReplay struct {
	Files int `json:"files"`
	URLs  int `json:"urls"`
	Hosts int `json:"hosts"`
	Port  int `json:"port"`
}

// FederationComparison is benchmark 2: federated against stretched at one
// WAN delay.
type FederationComparison struct {
	DelayMS float64 `json:"delay_ms"`
	// TrafficSaved is 1 − federated over stretched WAN bytes per page;
	// Speedup is federated over stretched pages/s.
	TrafficSaved float64 `json:"traffic_saved"`
	Speedup      float64 `json:"speedup"`
}

// RunFederation serves the web cfg describes with one websim and crawls
// it once per run (the federated runs, then the stretched ones), each a
// fresh crawl with websim's statistics reset. A run that is cut or has a
// failed process is reported and the next one runs; the error then joins
// ErrCrawlCut or ErrNodeFailed for each. Setup failures and ctx's end
// return at once.
func RunFederation(ctx context.Context, cfg FederationConfig) (FederationResult, error) {
	res := FederationResult{NumCPU: runtime.NumCPU(), Loss20to80: -1}
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return res, err
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return res, fmt.Errorf("bench: %w", err)
		}
	}
	dir, err := os.MkdirTemp(cfg.Dir, "meridian-bench-federation-")
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	if cfg.Keep {
		res.Dir = dir
	} else {
		defer os.RemoveAll(dir)
	}
	cc := ClusterConfig{ModuleRoot: cfg.ModuleRoot, WebsimBinary: cfg.WebsimBinary, SiteBinary: cfg.SiteBinary, Progress: cfg.Progress}
	simBin, siteBin, err := clusterBinaries(ctx, &cc, dir)
	if err != nil {
		return res, err
	}
	sc := cfg.siteConfig()
	sr := &siteRun{cfg: &sc, dir: dir}
	defer sr.close() // websim
	env := &fedEnv{cfg: &cfg, bin: siteBin, dir: dir,
		seeds: filepath.Join(dir, "seeds.txt"), geoip: filepath.Join(dir, "geoip.mmdb"), certs: filepath.Join(dir, "certs")}
	if len(cfg.Replay) > 0 {
		if res.Replayed, err = env.startReplay(ctx, sr, simBin); err != nil {
			return res, err
		}
	} else {
		cfg.Progress("starting websim: %d %s hosts × %d pages on %d addresses", cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs)
		if err := sr.startSim(ctx, simBin); err != nil {
			return res, err
		}
		env.web = sr.web
		if err := writeSeeds(env.seeds, env.web); err != nil {
			return res, err
		}
		if res.PrimedFlakyHosts, err = primeFlakyRobots(ctx, sr.web); err != nil {
			return res, err
		}
	}
	env.sim = sr.sim
	res.Websim.PID = sr.sim.pid
	if err := env.prepare(); err != nil {
		return res, err
	}
	type spec struct {
		mode  string
		delay time.Duration
	}
	var specs []spec
	for _, d := range cfg.Delays {
		specs = append(specs, spec{ModeFederated, d})
	}
	for _, d := range cfg.Stretched {
		specs = append(specs, spec{ModeStretched, d})
	}
	var errs []error
	for i, s := range specs {
		r := &fedRun{env: env, mode: s.mode, delay: s.delay,
			dir: filepath.Join(dir, fmt.Sprintf("run%d-%s-%dms", i+1, s.mode, s.delay.Milliseconds()))}
		run, err := r.run(ctx)
		if !cfg.Keep {
			os.RemoveAll(r.dir)
		}
		if err != nil && (ctx.Err() != nil || run == nil) {
			return res, err
		}
		res.Runs = append(res.Runs, *run)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s at %v: %w", s.mode, s.delay, err))
		}
	}
	if cpu, err := procCPU(sr.sim.pid); err == nil {
		res.Websim.CPUS = cpu.Seconds()
	}
	res.Websim.PeakRSS = peakRSS(sr.sim.pid)
	res.compare()
	res.Targets = res.targets()
	return res, errors.Join(errs...)
}

// fedEnv is what the runs of RunFederation share: the web, the binaries,
// the seeds, the GeoIP file and the certificates.
type fedEnv struct {
	cfg   *FederationConfig
	sim   *simProc
	web   *synth.Web // nil when replaying WARC files
	bin   string
	dir   string
	seeds string
	geoip string
	certs string
}

// prepare writes the GeoIP file of websim's addresses (as `websim
// --geoip` writes it; for a replayed web, the synthetic web's of the same
// addresses) and the federation's certificates.
func (e *fedEnv) prepare() error {
	w := e.web
	if w == nil {
		sc := e.cfg.siteConfig()
		var err error
		if w, err = synth.New(sc.webOptions(80)); err != nil {
			return fmt.Errorf("bench: the web that places the addresses: %w", err)
		}
	}
	if err := geodb.WriteFile(e.geoip, w.GeoEntries()); err != nil {
		return fmt.Errorf("bench: GeoIP file: %w", err)
	}
	if err := certs.Init(e.certs); err != nil {
		return fmt.Errorf("bench: certificates: %w", err)
	}
	for _, s := range FederationSites() {
		if err := certs.IssueSite(e.certs, s.Name); err != nil {
			return fmt.Errorf("bench: certificates: %w", err)
		}
		// Each federated site is one node, REGION-1: its Raft and node
		// API run over mutual TLS too.
		if err := certs.IssueNode(e.certs, s.Name, s.Name+"-1"); err != nil {
			return fmt.Errorf("bench: certificates: %w", err)
		}
	}
	return nil
}

// startReplay starts `websim replay` of the WARC files cfg.Replay names
// (as sr's websim, so that sr stops it), on the port their URLs were
// recorded with, and writes the seeds: each archived host's front page,
// or its first URL.
func (e *fedEnv) startReplay(ctx context.Context, sr *siteRun, bin string) (*FederationReplay, error) {
	var files []string
	for _, g := range e.cfg.Replay {
		m, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("bench: --replay %q: %w", g, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("bench: --replay %q: no such file", g)
		}
		files = append(files, m...)
	}
	arc, err := replay.Open(files...)
	if err != nil {
		return nil, fmt.Errorf("bench: replay: %w", err)
	}
	urls := arc.URLs()
	arc.Close()
	port, seeds, err := replaySeeds(urls)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(e.seeds, []byte(strings.Join(seeds, "\n")+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("bench: seeds: %w", err)
	}
	e.cfg.Progress("starting websim replay: %d WARC files, %d URLs of %d hosts on port %d, %d addresses", len(files), len(urls), len(seeds), port, e.cfg.IPs)
	ready := filepath.Join(e.dir, "websim-ready")
	args := []string{"replay", "--port", strconv.Itoa(port), "--dns", "127.0.0.1:0", "--admin", "127.0.0.1:0",
		"--ready-file", ready, "--log-level", "warn", "--progress", "0", "--ips", strconv.Itoa(e.cfg.IPs)}
	for _, f := range files {
		args = append(args, "--warc", f)
	}
	c, err := startProcess(bin, args, &tailBuffer{max: 8 << 10}, stopTimeout)
	if err != nil {
		return nil, fmt.Errorf("bench: start websim replay: %w", err)
	}
	sr.sim = &simProc{child: c, pid: c.cmd.Process.Pid}
	if _, err := c.waitReady(ctx, ready); err != nil {
		return nil, err
	}
	if err := sr.sim.readAddrs(ready); err != nil {
		return nil, err
	}
	return &FederationReplay{Files: len(files), URLs: len(urls), Hosts: len(seeds), Port: port}, nil
}

// replaySeeds returns the one port that archived http URLs name and, per
// host, its front page if archived, else its first URL.
func replaySeeds(urls []string) (int, []string, error) {
	port := 0
	first := map[string]string{}
	front := map[string]bool{}
	var hosts []string
	for _, u := range urls {
		rest, ok := strings.CutPrefix(u, "http://")
		if !ok {
			continue
		}
		hostport, path, _ := strings.Cut(rest, "/")
		h, p, err := net.SplitHostPort(hostport)
		if err != nil {
			return 0, nil, fmt.Errorf("bench: replay: %s names no port: websim replays a web on one port, the one its URLs name", u)
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || port != 0 && n != port {
			return 0, nil, fmt.Errorf("bench: replay: %s: the archive's URLs name more than one port (or a bad one)", u)
		}
		port = n
		if _, ok := first[h]; !ok {
			first[h] = u
			hosts = append(hosts, h)
		}
		if path == "" && !front[h] {
			front[h], first[h] = true, u
		}
	}
	if port == 0 {
		return 0, nil, errors.New("bench: replay: no http URL in the archive")
	}
	seeds := make([]string, len(hosts))
	for i, h := range hosts {
		seeds[i] = first[h]
	}
	return port, seeds, nil
}

// fedRun is one run of RunFederation.
type fedRun struct {
	env   *fedEnv
	mode  string
	delay time.Duration
	dir   string

	ctx        context.Context // the run's: the WAN links close with it
	em         *wan.Emulator
	members    []*fedMember
	simPts     []cpuPoint
	started    time.Time // the first process's start
	grace      time.Duration
	statusErrs int
}

// fedMember is one `site up` process of a run: a federated site or a
// node of the stretched site.
type fedMember struct {
	name    string
	data    string
	args    []string
	log     *os.File
	proc    *siteProc
	listen  string
	started time.Time
	upAt    time.Time
	exited  time.Time
	stopped bool
	pts     []cpuPoint
	hwm     int64
	last    *site.Status
}

// done reports whether the member's process has exited.
func (m *fedMember) done() bool {
	select {
	case <-m.proc.exit:
		return true
	default:
		return false
	}
}

// run runs the crawl; run is nil when it could not start at all.
func (r *fedRun) run(ctx context.Context) (*FederationRun, error) {
	cfg := r.env.cfg
	cfg.Progress("%s at %v one-way: starting", r.mode, r.delay)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	begin := time.Now()
	r.ctx = ctx
	r.grace = min(siteGrace, cfg.Timeout/5)
	defer r.close()
	if err := resetWebsimStats(ctx, r.env.sim.admin); err != nil {
		return nil, err
	}
	out := &FederationRun{Mode: r.mode, Delay: r.delay, DelayMS: float64(r.delay) / 1e6, Load: fedLoadAverage()}
	r.samplePoint(time.Now()) // websim's CPU at the start
	sctx, cancel := context.WithDeadline(ctx, begin.Add(cfg.Timeout))
	var startErr error
	if r.mode == ModeFederated {
		startErr = r.startFederated(sctx)
	} else {
		startErr = r.startStretched(sctx)
	}
	cancel()
	ending := ""
	if startErr == nil {
		var err error
		if ending, err = r.crawl(ctx, begin.Add(cfg.Timeout-r.grace)); err != nil {
			return nil, err
		}
	} else {
		if ctx.Err() != nil || len(r.members) == 0 {
			return nil, startErr
		}
		r.stopAll()
		ending = "failed"
	}
	r.samplePoint(time.Now())
	if err := r.collect(ctx, out, ending); err != nil {
		return out, err
	}
	if startErr != nil {
		out.Error = startErr.Error()
		return out, startErr
	}
	var failed []string
	for _, m := range r.members {
		if m.stopped {
			continue
		}
		if e := m.proc.err; e != nil {
			failed = append(failed, fmt.Sprintf("%s: %v: %s", m.name, e, m.proc.tail))
		}
	}
	var err error
	switch {
	case len(failed) > 0:
		out.Exit = "failed"
		err = fmt.Errorf("%w: %s", ErrNodeFailed, strings.Join(failed, "; "))
	case ending == "cut":
		err = ErrCrawlCut
	case ending == "stalled":
		err = ErrCrawlStalled
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out, err
}

// freeAddrs returns n distinct loopback addresses whose ports are free,
// held open until all are chosen. The ports are drawn below the kernel's
// ephemeral range, so that the many outgoing connections of a crawl (and
// the WAN proxies' listeners on port 0) cannot take one before the
// process it is meant for binds it.
func freeAddrs(n int) ([]string, error) {
	lo, hi := 10_000, ephemeralLow()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []string
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	for tries := 0; len(out) < n; tries++ {
		if tries >= 100*n {
			return nil, fmt.Errorf("bench: no free port in [%d, %d) after %d tries", lo, hi, tries)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rnd.IntN(hi-lo))))
		if err != nil {
			continue // taken
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// where it cannot be read, or where it leaves too little below it).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo < 12_000 {
		return 32768
	}
	return lo
}

// crawlArgs are the `site up` flags that set the crawl (a federated site,
// or the stretched site's first node) with width URLs per round.
func (r *fedRun) crawlArgs(width int) []string {
	c := r.env.cfg
	return []string{"--seeds", r.env.seeds, "--dns", r.env.sim.dns, "--allow-private",
		"--rounds", strconv.Itoa(c.Rounds), "--width", strconv.Itoa(width), "--per-host", strconv.Itoa(c.PerHost),
		"--host-delay", c.HostDelay.String(), "--ip-delay", c.IPDelay.String(), "--max-crawl-delay", c.MaxCrawlDelay.String()}
}

// nodeArgs are the `site up` flags every process has.
func (r *fedRun) nodeArgs(region, data, listen string) []string {
	c := r.env.cfg
	args := []string{"up", "--region", region, "--data", data, "--listen", listen,
		"--workers", strconv.Itoa(c.Workers), "--progress", "5s", "--log-level", "info"}
	if c.NoSync {
		args = append(args, "--no-sync")
	}
	return args
}

// startFederated starts a WAN link in front of each site's federation
// endpoint, writes the federation file, and starts the sites, all at
// once (each seeds the hosts it owns), then waits for them.
func (r *fedRun) startFederated(ctx context.Context) error {
	c := r.env.cfg
	sites := FederationSites()
	listens, err := freeAddrs(len(sites))
	if err != nil {
		return err
	}
	var links []wan.Link
	for i, s := range sites {
		links = append(links, wan.Link{Name: s.Name, Listen: "127.0.0.1:0", Upstream: listens[i], Delay: r.delay})
	}
	if r.em, err = wan.Start(r.ctx, links); err != nil {
		return fmt.Errorf("bench: WAN: %w", err)
	}
	file := federation.File{Partitioner: c.Partitioner, Replicas: c.Replicas, Grace: federation.Duration(fedGrace)}
	for i, s := range sites {
		s.Endpoint, s.Listen = r.em.Addr(s.Name), listens[i]
		file.Sites = append(file.Sites, s)
	}
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: federation file: %w", err)
	}
	fedFile := filepath.Join(r.dir, "federation.json")
	if err := os.WriteFile(fedFile, b, 0o644); err != nil {
		return fmt.Errorf("bench: federation file: %w", err)
	}
	for _, s := range sites {
		data := filepath.Join(r.dir, s.Name)
		args := append(r.nodeArgs(s.Name, data, "127.0.0.1:0"), "--federation", fedFile, "--certs", r.env.certs)
		if c.Partitioner == "distance" {
			args = append(args, "--geoip", r.env.geoip)
		}
		args = append(append(args, r.crawlArgs(c.Width)...), c.SiteFlags...)
		if err := r.startMember(s.Name, data, args); err != nil {
			return err
		}
	}
	for _, m := range r.members {
		if err := r.waitUp(ctx, m); err != nil {
			return err
		}
	}
	r.upLine()
	return nil
}

// startStretched starts one site of as many nodes as the federation has
// sites, each node behind two WAN links (its Raft listener and its node
// API, which serves the crawl database's API and the nodes' reports),
// advertising the links' addresses so that every connection between nodes
// crosses the WAN: the first node, then the others joining it (they read
// its /site/info on its status listener, which gives its API's link).
func (r *fedRun) startStretched(ctx context.Context) error {
	c := r.env.cfg
	n := len(FederationSites())
	addrs, err := freeAddrs(3 * n) // per node: Raft, API, status
	if err != nil {
		return err
	}
	var links []wan.Link
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		links = append(links,
			wan.Link{Name: name + "-raft", Listen: "127.0.0.1:0", Upstream: addrs[2*i], Delay: r.delay},
			wan.Link{Name: name + "-api", Listen: "127.0.0.1:0", Upstream: addrs[2*i+1], Delay: r.delay})
	}
	if r.em, err = wan.Start(r.ctx, links); err != nil {
		return fmt.Errorf("bench: WAN: %w", err)
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		data := filepath.Join(r.dir, name)
		args := append(r.nodeArgs("bench", data, addrs[2*n+i]), "--node", name, "--raft", addrs[2*i], "--api", addrs[2*i+1],
			"--raft-advertise", r.em.Addr(name+"-raft"), "--advertise", r.em.Addr(name+"-api"))
		if i == 0 {
			args = append(append(args, r.crawlArgs(c.Width*n)...), c.SiteFlags...)
		} else {
			args = append(args, "--join", addrs[2*n])
		}
		if err := r.startMember(name, data, args); err != nil {
			return err
		}
		if i == 0 {
			if err := r.waitUp(ctx, r.members[0]); err != nil {
				return err
			}
		}
	}
	for _, m := range r.members[1:] {
		if err := r.waitUp(ctx, m); err != nil {
			return err
		}
	}
	r.upLine()
	return nil
}

// upLine reports the processes up.
func (r *fedRun) upLine() {
	in := make([]string, len(r.members))
	for i, m := range r.members {
		in[i] = fmt.Sprintf("%s (pid %d, up in %.1fs)", m.name, m.proc.pid, m.upAt.Sub(m.started).Seconds())
	}
	r.env.cfg.Progress("%s at %v: up: %s", r.mode, r.delay, strings.Join(in, ", "))
}

// startMember starts one `site up` process.
func (r *fedRun) startMember(name, data string, args []string) error {
	m := &fedMember{name: name, data: data, args: args}
	var err error
	if m.log, err = os.Create(filepath.Join(r.dir, name+".log")); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	tail := &tailBuffer{max: siteLogTail}
	m.started = time.Now()
	ch, err := startProcess(r.env.bin, args, io.MultiWriter(m.log, tail), r.grace)
	if err != nil {
		m.log.Close()
		return fmt.Errorf("bench: start %s: %w", name, err)
	}
	p := &siteProc{child: ch, pid: ch.cmd.Process.Pid, tail: tail, exit: make(chan struct{})}
	go func() { // owner: fedRun; ends when the process does
		err := <-ch.waitErr
		ch.waitErr <- err // for stop
		p.err = err
		close(p.exit)
	}()
	m.proc = p
	m.pts = []cpuPoint{{at: m.started}}
	if len(r.members) == 0 {
		r.started = m.started
	}
	r.members = append(r.members, m)
	return nil
}

// waitUp waits for a member's site.json (written once it is seeded or
// has joined, and serving).
func (r *fedRun) waitUp(ctx context.Context, m *fedMember) error {
	var err error
	m.listen, m.upAt, err = m.proc.waitUp(ctx, m.data, m.name)
	return err
}

// crawl samples the processes until every one has exited, stopping them
// at deadline (ending "cut") or once they have been idle for the stall
// bound (ending "stalled").
func (r *fedRun) crawl(ctx context.Context, deadline time.Time) (ending string, err error) {
	client := &http.Client{Timeout: statusTimeout}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(r.env.cfg.SampleEvery)
	defer tick.Stop()
	stopAt := time.NewTimer(time.Until(deadline))
	defer stopAt.Stop()
	lastProgress, lastActive, lastWork := time.Now(), time.Now(), int64(-1)
	stall := r.env.cfg.Stall
	for {
		running := 0
		for _, m := range r.members {
			if m.done() {
				if m.exited.IsZero() {
					m.exited = time.Now()
				}
			} else {
				running++
			}
		}
		if running == 0 {
			return ending, nil
		}
		select {
		case <-ctx.Done():
			r.stopAll()
			return ending, fmt.Errorf("bench: federation run: %w", ctx.Err())
		case <-stopAt.C:
			r.env.cfg.Progress("timeout: stopping every process")
			ending = "cut"
			r.stopAll()
		case <-tick.C:
			work, busy := r.sample(client)
			now := time.Now()
			if busy || work != lastWork {
				lastActive, lastWork = now, work
			}
			if stall > 0 && ending == "" && now.Sub(lastActive) > stall {
				r.env.cfg.Progress("every process has been idle for %v without ending: stopping them", stall)
				ending = "stalled"
				r.stopAll()
			}
			if now.Sub(lastProgress) >= progressEvery {
				lastProgress = now
				r.progress(now)
			}
		}
	}
}

// sample reads every running process's /status, CPU and memory, and
// websim's CPU. work sums what the processes have done (pages, rounds,
// URLs exchanged), busy says whether a request is in flight anywhere.
func (r *fedRun) sample(client *http.Client) (work int64, busy bool) {
	now := time.Now()
	sts := make([]*site.Status, len(r.members))
	var wg sync.WaitGroup
	for i, m := range r.members {
		if m.done() {
			continue
		}
		wg.Add(1)
		go func() { // owner: sample, which waits for it
			defer wg.Done()
			sts[i] = getStatus(client, m.listen)
		}()
	}
	wg.Wait()
	for i, m := range r.members {
		if m.done() {
			continue
		}
		if cpu, err := procCPU(m.proc.pid); err == nil {
			m.pts = append(m.pts, cpuPoint{now, cpu})
		}
		m.hwm = max(m.hwm, peakRSS(m.proc.pid))
		if st := sts[i]; st != nil {
			m.last = st
			work += st.Fetcher.Done + int64(st.Rounds.Done)
			if f := st.Federation; f != nil {
				work += f.SentURLs + f.RecvURLs
			}
			busy = busy || st.Fetcher.InFlight > 0
		} else if !m.done() {
			r.statusErrs++
		}
	}
	r.samplePoint(now)
	return work, busy
}

// samplePoint takes websim's CPU.
func (r *fedRun) samplePoint(now time.Time) {
	if cpu, err := procCPU(r.env.sim.pid); err == nil {
		r.simPts = append(r.simPts, cpuPoint{now, cpu})
	}
}

// wanBytes is Σ over the run's links of the bytes both ways so far.
func (r *fedRun) wanBytes() int64 {
	if r.em == nil {
		return 0
	}
	var n int64
	for _, name := range r.em.Names() {
		if st, err := r.em.Stats(name); err == nil {
			n += st.Upstream + st.Downstream
		}
	}
	return n
}

// progress prints one line of the processes' state.
func (r *fedRun) progress(now time.Time) {
	var b strings.Builder
	for _, m := range r.members {
		switch {
		case m.done():
			fmt.Fprintf(&b, " | %s exited", m.name)
		case m.last != nil:
			fmt.Fprintf(&b, " | %s %s round %d, fetched %d", m.name, m.last.Role, m.last.Round, m.last.Fetcher.Done)
			if f := m.last.Federation; f != nil {
				fmt.Fprintf(&b, ", sent %d, cache %.1f%%", f.SentURLs, 100*f.CacheRate)
			}
		}
	}
	r.env.cfg.Progress("%5.0fs %s %v: WAN %s%s", now.Sub(r.started).Seconds(), r.mode, r.delay, mibf(r.wanBytes()), b.String())
}

// stopAll stops every process still running (SIGTERM, killed after the
// grace) and waits for them.
func (r *fedRun) stopAll() {
	for _, m := range r.members {
		if !m.done() {
			m.stopped = true
		}
		m.proc.child.cancel()
	}
	for _, m := range r.members {
		<-m.proc.exit
		if m.exited.IsZero() {
			m.exited = time.Now()
		}
	}
}

// close stops the processes (if any still runs), closes their logs and the
// WAN links.
func (r *fedRun) close() {
	r.stopAll()
	for _, m := range r.members {
		m.proc.child.stop() // reaps: the exit watcher has put the result back
		m.log.Close()
	}
	if r.em != nil {
		r.em.Close()
	}
}

// collect reads what the stopped processes left, the WAN links' counts
// and websim's statistics, and fills out.
func (r *fedRun) collect(ctx context.Context, out *FederationRun, ending string) error {
	type key struct {
		site  string
		round uint64
	}
	seen := map[key]bool{}
	var stats []rounds.RoundStats
	var siteOf []string
	led := map[string]int{}
	last := map[string]rounds.RoundStats{} // each site's last round (its cache counts)
	prev := map[string]rounds.RoundStats{} // and the one before
	fetched := map[string]int64{}          // Σ fetched over each site's rounds
	for _, m := range r.members {
		st, err := readRoundStats(filepath.Join(m.data, "stats", "rounds.jsonl"))
		if err != nil {
			return err
		}
		led[m.name] = len(st)
		name := m.name
		if r.mode == ModeStretched {
			name = "site" // the nodes' rounds are the one site's
		}
		for _, s := range st {
			k := key{name, s.Round}
			if seen[k] {
				continue // a leader change mid-update: the first line stands
			}
			seen[k] = true
			stats, siteOf = append(stats, s), append(siteOf, name)
			fetched[name] += s.Fetched
			if l, ok := last[name]; !ok || s.Round > l.Round {
				if ok {
					prev[name] = l
				}
				last[name] = s
			} else if p, ok := prev[name]; !ok || s.Round > p.Round {
				prev[name] = s
			}
		}
	}
	var t SiteResult
	start, end := t.table(stats, r.started) // rows in stats' order
	out.WindowS, out.Pages, out.Pages2xx, out.PagesPerSec, out.FirstRoundAtS = t.WindowS, t.Pages, t.Pages2xx, t.PagesPerSec, t.FirstRoundAtS
	for i, s := range stats {
		out.Rounds = append(out.Rounds, FederationRound{Site: siteOf[i], RoundRow: t.Rounds[i], Leader: s.Leader,
			RemoteURLs: s.RemoteURLs, CacheHits: s.SentCacheHits, CacheLookups: s.SentCacheLookups, CacheHitRate: s.SentCacheHitRate})
		out.RemoteURLs += int64(s.RemoteURLs)
		out.MeanUpdateS += s.UpdateSeconds
		out.MaxUpdateS = max(out.MaxUpdateS, s.UpdateSeconds)
	}
	sort.SliceStable(out.Rounds, func(i, j int) bool { return out.Rounds[i].StartS < out.Rounds[j].StartS })
	if len(stats) > 0 {
		out.MeanUpdateS /= float64(len(stats))
	}
	var lastHits, lastLookups int64
	for name, s := range last {
		out.CacheHits += s.SentCacheHits
		out.CacheLookups += s.SentCacheLookups
		lastHits += s.SentCacheHits - prev[name].SentCacheHits
		lastLookups += s.SentCacheLookups - prev[name].SentCacheLookups
	}
	out.CacheHitRate = ratio(float64(out.CacheHits), float64(out.CacheLookups))
	out.CacheHitRateLast = ratio(float64(lastHits), float64(lastLookups))

	lastExit := r.started
	for _, m := range r.members {
		lastExit = later(lastExit, m.exited)
		fm := FederationMember{Name: m.name, PID: m.proc.pid, Stopped: m.stopped, PeakRSS: m.hwm, Rounds: led[m.name]}
		if !m.upAt.IsZero() {
			fm.UpS = m.upAt.Sub(m.started).Seconds()
		}
		if ps := m.proc.child.cmd.ProcessState; ps != nil {
			fm.Exit, fm.ExitCode = ps.String(), ps.ExitCode()
			fm.CPUS = (ps.UserTime() + ps.SystemTime()).Seconds()
		}
		if r.mode == ModeFederated {
			fm.Pages = fetched[m.name]
		}
		if st := m.last; st != nil {
			fm.Role = st.Role
			if r.mode == ModeStretched {
				fm.Pages = st.Fetcher.Done
			}
			fm.RaftSent, fm.APISent = st.Traffic.RaftSent, st.Traffic.APISent
			if f := st.Federation; f != nil {
				fm.SentURLs, fm.SentBatches, fm.RecvURLs, fm.RecvBatches = f.SentURLs, f.SentBatches, f.RecvURLs, f.RecvBatches
				fm.Outbox, fm.CacheHits, fm.CacheLookups, fm.CacheHitRate = f.Outbox, f.CacheHits, f.CacheLookup, f.CacheRate
				for _, p := range f.Peers {
					fm.TLSBytesOut += p.BytesOut
					fm.TLSBytesIn += p.BytesIn
				}
			}
		}
		if len(stats) > 0 {
			fm.WindowCPUS = (cpuAt(m.pts, end) - cpuAt(m.pts, start)).Seconds()
		}
		fm.CPUPerPageUS = 1e6 * ratio(fm.WindowCPUS, float64(fm.Pages))
		out.SiteCPUS += fm.WindowCPUS
		if r.mode == ModeFederated {
			out.CountedBytes += fm.TLSBytesOut + fm.TLSBytesIn
		} else {
			out.CountedBytes += fm.RaftSent + fm.APISent
		}
		out.Members = append(out.Members, fm)
	}
	out.WallS = lastExit.Sub(r.started).Seconds()
	out.SiteCPUPerPageUS = 1e6 * ratio(out.SiteCPUS, float64(out.Pages))
	if len(stats) > 0 && len(r.simPts) > 0 {
		out.WebsimWindowCPUS = (cpuAt(r.simPts, end) - cpuAt(r.simPts, start)).Seconds()
	}
	if r.em != nil {
		for _, name := range r.em.Names() {
			st, err := r.em.Stats(name)
			if err != nil {
				return fmt.Errorf("bench: WAN: %w", err)
			}
			out.Links = append(out.Links, FederationLink{Name: name, Upstream: st.Upstream, Downstream: st.Downstream, Conns: st.Conns})
			out.WANBytes += st.Upstream + st.Downstream
		}
	}
	out.WANBytesPerPage = ratio(float64(out.WANBytes), float64(out.Pages))
	out.StatusErrors = r.statusErrs

	switch {
	case ending != "":
		out.Exit = ending
	case r.anyTail("crawl exhausted"):
		out.Exit = "exhausted"
	case r.env.cfg.Rounds > 0 && len(stats) >= r.env.cfg.Rounds:
		out.Exit = "rounds"
	default:
		out.Exit = "exited"
	}

	snap, err := fetchSnapshot(ctx, r.env.sim.admin)
	if err != nil {
		return err
	}
	out.WebsimRequests, out.UnknownHost = snap.Requests, snap.UnknownHost
	c := r.env.cfg
	if r.env.web != nil {
		out.Breaches, out.BreachSample = politenessBreaches(r.env.web, snap, c.HostDelay, c.IPDelay, c.MaxCrawlDelay)
	} else { // a replayed web: no robots crawl-delays known here
		b := crawlcheck.Politeness(snap, c.HostDelay, c.IPDelay, func(string) time.Duration { return 0 })
		out.Breaches, out.BreachSample = len(b), b[:min(len(b), maxBreachesKept)]
	}
	return nil
}

// anyTail reports whether some process's output ends with s in it.
func (r *fedRun) anyTail(s string) bool {
	for _, m := range r.members {
		if strings.Contains(m.proc.tail.String(), s) {
			return true
		}
	}
	return false
}

// firstRun returns the first run of mode at delay d, or nil.
func (res *FederationResult) firstRun(mode string, d time.Duration) *FederationRun {
	for i := range res.Runs {
		if r := &res.Runs[i]; r.Mode == mode && r.Delay == d && r.PagesPerSec > 0 {
			return r
		}
	}
	return nil
}

// compare sets the loss from 20 to 80 ms and the stretched comparisons.
func (res *FederationResult) compare() {
	if a, b := res.firstRun(ModeFederated, 20*time.Millisecond), res.firstRun(ModeFederated, 80*time.Millisecond); a != nil && b != nil {
		res.Loss20to80 = 1 - b.PagesPerSec/a.PagesPerSec
	}
	done := map[time.Duration]bool{}
	for _, s := range res.Runs {
		if s.Mode != ModeStretched || s.PagesPerSec <= 0 || done[s.Delay] {
			continue
		}
		f := res.firstRun(ModeFederated, s.Delay)
		if f == nil {
			continue
		}
		done[s.Delay] = true
		res.Comparisons = append(res.Comparisons, FederationComparison{DelayMS: s.DelayMS,
			TrafficSaved: 1 - ratio(f.WANBytesPerPage, s.WANBytesPerPage), Speedup: ratio(f.PagesPerSec, s.PagesPerSec)})
	}
}

// targets: the loss from 20 to 80 ms at most 5%; the URL-sent cache's hit
// rate at least 92% in every federated run (the lowest is shown); for
// each stretched comparison, at least 95% less inter-site traffic and 2×
// the pages/s; no politeness breach in any run.
func (res *FederationResult) targets() map[string]ClusterTarget {
	t := map[string]ClusterTarget{}
	if res.Loss20to80 >= 0 {
		t["loss_20_to_80ms"] = ClusterTarget{fmt.Sprintf("≤ %.2f", fedLossTarget), res.Loss20to80, res.Loss20to80 <= fedLossTarget}
	}
	lowest, found := 1.0, false
	breaches := 0
	for _, r := range res.Runs {
		breaches += r.Breaches
		if r.Mode == ModeFederated && r.CacheLookups > 0 {
			lowest, found = min(lowest, r.CacheHitRate), true
		}
	}
	if found {
		t["sent_cache_hit_rate"] = ClusterTarget{fmt.Sprintf("≥ %.2f", fedCacheTarget), lowest, lowest >= fedCacheTarget}
	}
	for _, c := range res.Comparisons {
		t[fmt.Sprintf("traffic_saved_%gms", c.DelayMS)] = ClusterTarget{fmt.Sprintf("≥ %.2f", fedTrafficTarget), c.TrafficSaved, c.TrafficSaved >= fedTrafficTarget}
		t[fmt.Sprintf("speedup_%gms", c.DelayMS)] = ClusterTarget{fmt.Sprintf("≥ %.1f", fedSpeedTarget), c.Speedup, c.Speedup >= fedSpeedTarget}
	}
	t["politeness_breaches"] = ClusterTarget{"0", float64(breaches), breaches == 0}
	return t
}

// Report is a short human report of res: one line per run, the
// comparisons, the processes, the cache over the rounds and the targets.
func (res FederationResult) Report(cfg FederationConfig) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	extent := "to exhaustion"
	if cfg.Rounds > 0 {
		extent = fmt.Sprintf("%d rounds", cfg.Rounds)
	}
	n := len(FederationSites())
	web := fmt.Sprintf("%d %s hosts × %d pages on %d addresses", cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs)
	if r := res.Replayed; r != nil {
		web = fmt.Sprintf("websim replay of %d WARC files (%d URLs of %d hosts, port %d) on %d addresses", r.Files, r.URLs, r.Hosts, r.Port, min(cfg.IPs, r.Hosts))
	}
	p("federation crawl: %s, %s; %d sites (%s, %d replicas), width %d per site, %d per host, %d workers per process\n",
		web, extent, n, cfg.Partitioner, cfg.Replicas, cfg.Width, cfg.PerHost, cfg.Workers)
	if len(cfg.Stretched) > 0 {
		p("  stretched: one site of %d nodes, width %d, every node-to-node connection (Raft, crawl-database API, reports) through a WAN link\n", n, cfg.Width*n)
	}
	p("  host delay %v, ip delay %v, max crawl-delay %v, fsync %v; websim, every site and node in their own processes, the WAN proxies in this one, all on %d CPUs\n",
		cfg.HostDelay, cfg.IPDelay, cfg.MaxCrawlDelay, onOff(!cfg.NoSync), res.NumCPU)
	p("\n  mode       delay  ended      rounds  window s  pages    pages/s  mean upd s  max upd s  WAN B/page  WAN bytes   counted     cache hit    remote URLs  CPU µs/page  websim CPU s  cores  breaches  load\n")
	for _, r := range res.Runs {
		hit := "-"
		if r.CacheLookups > 0 {
			hit = fmt.Sprintf("%.1f/%.1f%%", 100*r.CacheHitRate, 100*r.CacheHitRateLast)
		}
		p("  %-9s  %3.0fms  %-9s  %6d  %8.1f  %7d  %7.0f  %10.2f  %9.2f  %10.0f  %-10s  %-10s  %11s  %11d  %11.0f  %12.1f  %5.2f  %8d  %.2f\n",
			r.Mode, r.DelayMS, r.Exit, len(r.Rounds), r.WindowS, r.Pages, r.PagesPerSec, r.MeanUpdateS, r.MaxUpdateS,
			r.WANBytesPerPage, mibf(r.WANBytes), mibf(r.CountedBytes), hit, r.RemoteURLs, r.SiteCPUPerPageUS, r.WebsimWindowCPUS,
			ratio(r.SiteCPUS+r.WebsimWindowCPUS, r.WindowS), r.Breaches, r.Load[0])
	}
	p("  (rounds: of every site; WAN: Σ bytes both ways through the proxies; counted: the sites' own TLS byte counts of their federation calls, or the nodes' Raft + API bytes sent;\n")
	p("   cache hit: the URL-sent cache over the run / over each site's last round; cores: the sites' or nodes' and websim's CPU over the window, in cores)\n")
	if res.Loss20to80 >= 0 {
		p("\n  loss from 20 to 80 ms: %.1f%% of pages/s (ratio of two runs of this invocation)\n", 100*res.Loss20to80)
	}
	for _, c := range res.Comparisons {
		p("  federated vs stretched at %gms: %.1f%% less inter-site traffic per page, %.2f× the pages/s\n", c.DelayMS, 100*c.TrafficSaved, c.Speedup)
	}
	p("\n  mode       delay  member  role       exit                      rounds  pages    CPU s (window)  µs/page  peak RSS  sent URLs  recv URLs  cache hit  TLS out    TLS in     raft sent  api sent\n")
	for _, r := range res.Runs {
		for _, m := range r.Members {
			exit := m.Exit
			if m.Stopped {
				exit += " (stopped)"
			}
			hit := "-"
			if m.CacheLookups > 0 {
				hit = fmt.Sprintf("%.2f%%", 100*m.CacheHitRate)
			}
			p("  %-9s  %3.0fms  %-6s  %-9s  %-24s  %6d  %7d  %14.1f  %7.0f  %8s  %9d  %9d  %9s  %-9s  %-9s  %-9s  %s\n",
				r.Mode, r.DelayMS, m.Name, m.Role, exit, m.Rounds, m.Pages, m.WindowCPUS, m.CPUPerPageUS, mib(m.PeakRSS),
				m.SentURLs, m.RecvURLs, hit, mibf(m.TLSBytesOut), mibf(m.TLSBytesIn), mibf(m.RaftSent), mibf(m.APISent))
		}
	}
	p("\n  URL-sent cache hit rate after each round (cumulative, per site; federated runs)\n")
	for _, r := range res.Runs {
		if r.Mode != ModeFederated {
			continue
		}
		bySite := map[string][]string{}
		var names []string
		for _, rd := range r.Rounds {
			if _, ok := bySite[rd.Site]; !ok {
				names = append(names, rd.Site)
			}
			bySite[rd.Site] = append(bySite[rd.Site], fmt.Sprintf("%d:%.1f%%", rd.Round, 100*rd.CacheHitRate))
		}
		sort.Strings(names)
		for _, s := range names {
			p("  %3.0fms %-5s %s\n", r.DelayMS, s, strings.Join(bySite[s], " "))
		}
	}
	for _, r := range res.Runs {
		if r.Error != "" {
			p("  error (%s at %gms): %s\n", r.Mode, r.DelayMS, firstLine(r.Error))
		}
		for _, s := range r.BreachSample[:min(len(r.BreachSample), 10)] {
			p("  breach (%s at %gms): %s\n", r.Mode, r.DelayMS, s)
		}
	}
	p("\n  websim       CPU %.1fs over all runs; peak RSS %s; %d flaky robots.txt hosts primed before the first run\n",
		res.Websim.CPUS, mib(res.Websim.PeakRSS), res.PrimedFlakyHosts)
	keys := make([]string, 0, len(res.Targets))
	for k := range res.Targets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t := res.Targets[k]
		verdict := "met"
		if !t.Met {
			verdict = "MISSED"
		}
		p("  target %-26s want %-8s got %-10.4g %s\n", k, t.Want, t.Got, verdict)
	}
	p("  (%d CPUs shared by every site or node, websim and the proxies: ratios within one invocation mean more than absolute figures)\n", res.NumCPU)
	return b.String()
}

// fedLoadAverage reads /proc/loadavg (zeros where it cannot).
func fedLoadAverage() [3]float64 {
	var l [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &l[0], &l[1], &l[2])
	}
	return l
}

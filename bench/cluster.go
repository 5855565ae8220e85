package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// ErrNodeFailed: a node of a cluster run exited with an error (or failed
// to start or join) without being stopped or killed by the benchmark.
var ErrNodeFailed = errors.New("bench: a node of the site failed")

// Defaults and bounds of ClusterConfig.
const (
	DefaultClusterTimeout = 20 * time.Minute       // per configuration
	DefaultClusterSample  = 200 * time.Millisecond // three nodes' /status: a lighter touch than bench site's 100ms
	maxClusterNodes       = 9
	maxClusterReplicas    = maxClusterNodes
	clusterRatioTarget    = 0.85 // pages/s of N nodes over one node's, uncapped on one box
	// clusterScaleTarget: with --node-cpus (fixed-size "machines"), pages/s
	// of N nodes over the base's must be at least this × N/base (issue 21:
	// 4 nodes ≥ 3.6× one, 6 nodes ≥ 1.8× three).
	clusterScaleTarget = 0.9
)

// ClusterConfig configures RunCluster: one synthetic web served by websim,
// crawled by a site of 1, then 2, then 3 nodes (Nodes), each node a
// `site up` process on loopback with its own data directory and, with
// NodeCPUs, its own CPU quota.
type ClusterConfig struct {
	// Hosts, Pages, PageBytes, IPs, Seed and Profile describe the web, as
	// in SiteConfig.
	Hosts     int           `json:"hosts"`
	Pages     int           `json:"pages"`
	PageBytes int           `json:"page_bytes"`
	IPs       int           `json:"ips"`
	Seed      uint64        `json:"seed"`
	Profile   synth.Profile `json:"-"`
	// Rounds, Width, PerHost, HostDelay, IPDelay and MaxCrawlDelay are the
	// site's crawl settings, given to the first node (the others take them
	// when they join). Rounds 0 crawls to exhaustion.
	Rounds        int           `json:"rounds"`
	Width         int           `json:"width"`
	PerHost       int           `json:"per_host"`
	HostDelay     time.Duration `json:"host_delay_ns"`
	IPDelay       time.Duration `json:"ip_delay_ns"`
	MaxCrawlDelay time.Duration `json:"max_crawl_delay_ns"`
	// Workers and NoSync are every node's own --workers and --no-sync.
	Workers int  `json:"workers"`
	NoSync  bool `json:"no_sync"`
	// Expect starts every node of a sharded run with --expect-nodes N (the
	// run's node count): the crawl begins once every shard is placed.
	Expect bool `json:"expect,omitempty"`
	// Nodes are the configurations, run in this order: the number of nodes
	// of each (default 1, 2, 3; a number may repeat).
	Nodes []int `json:"nodes"`
	// Replicas, if positive, is given to every node as `site up
	// --replicas R` (the sharded site's replicas per shard); 0 passes
	// nothing (a site without the flag).
	Replicas int `json:"replicas,omitempty"`
	// Shards, if positive, makes the site a sharded one (`site up --shards
	// N` on the node that creates it); 0: today's site of one crawl
	// database.
	Shards int `json:"shards,omitempty"`
	// NodeCPUs, if positive, puts each node process in a cgroup of its own
	// capped at this many cores (see ClusterQuota; websim and the benchmark
	// stay outside); 0: no quota.
	NodeCPUs float64 `json:"node_cpus,omitempty"`
	// BusyMachines, with NodeCPUs, runs this many more "machines" beside
	// every run's nodes: each a cgroup of NodeCPUs cores holding one busy
	// loop that uses its whole quota, from the nodes' start to their stop.
	// They put on the box the CPU load of a larger site without its
	// nodes, so that a run of n nodes beside n busy machines shows what
	// the box's sharing alone costs the nodes (issue 21's R = 3 runs).
	BusyMachines int `json:"busy_machines,omitempty"`
	// KillAfter, if positive, SIGKILLs one follower of each configuration
	// of at least 3 nodes this long after the first node is up (and not
	// before every node is; with Steady, this long after the window
	// opens), and measures how long the leader takes to move its parts to
	// the others, and a sharded site's shards to be led again. The killed
	// node stays dead.
	KillAfter time.Duration `json:"kill_after_ns"`
	// TLS runs every node with certificates (--certs): Raft and the node
	// API over mutual TLS 1.3, for the TLS on/off A/B.
	TLS bool `json:"tls,omitempty"`
	// Steady, if positive, measures each configuration over a steady
	// window of this length instead of its rounds (a sharded site's rounds
	// are per shard): the window opens when every shard is where the
	// placement wants it (a site without shards: at once), and not before
	// Warmup after every node is up
	// (or at SettleTimeout after that, default 2 min, whichever comes
	// first), and the nodes are stopped when it closes (see steady.go).
	Steady        time.Duration `json:"steady_ns,omitempty"`
	Warmup        time.Duration `json:"warmup_ns,omitempty"`
	SettleTimeout time.Duration `json:"settle_timeout_ns,omitempty"`
	// SampleEvery is how often every node's /status, CPU and memory (and
	// websim's CPU and memory) are sampled. Default 200ms.
	SampleEvery time.Duration `json:"sample_every_ns"`
	// Timeout bounds each configuration: its nodes are stopped (SIGTERM,
	// then SIGKILL) when a fifth of it (at most a minute) is left. Default
	// 20 min.
	Timeout time.Duration `json:"timeout_ns"`
	// SiteFlags are more `site up` flags for the first node (e.g.
	// --fail-timeout=2s, a site setting the others take when they join).
	SiteFlags []string `json:"site_flags,omitempty"`
	// Dir is where the run directory (seeds, binaries, each configuration's
	// data and logs) is made; default the system's temporary directory.
	// Keep keeps it (otherwise each configuration's data goes once it is
	// measured).
	Dir  string `json:"-"`
	Keep bool   `json:"-"`
	// ModuleRoot is the directory of Meridian's go.mod (default: found);
	// WebsimBinary and SiteBinary, if set, are run instead of building.
	ModuleRoot   string `json:"-"`
	WebsimBinary string `json:"-"`
	SiteBinary   string `json:"-"`
	// Progress, if set, receives a line every few seconds while crawling.
	Progress func(format string, args ...any) `json:"-"`
}

// DefaultClusterConfig is bench site's throughput crawl (10,000 realistic
// hosts of 50 pages on 64 addresses, 10 rounds of 50,000 URLs, at most 10
// per host, 200 ms between requests to a host, crawl-delays capped at
// 500 ms, no per-address delay, fsync on) by 1, 2 and 3 nodes.
func DefaultClusterConfig() ClusterConfig {
	s := DefaultSiteConfig()
	return ClusterConfig{Hosts: s.Hosts, Pages: s.Pages, IPs: s.IPs, Seed: s.Seed, Profile: s.Profile,
		Rounds: s.Rounds, Width: s.Width, PerHost: s.PerHost, Workers: s.Workers,
		HostDelay: s.HostDelay, IPDelay: s.IPDelay, MaxCrawlDelay: s.MaxCrawlDelay,
		Nodes: []int{1, 2, 3}, SampleEvery: DefaultClusterSample, Timeout: DefaultClusterTimeout}
}

// siteConfig is c as a SiteConfig (for its checks and its websim).
func (c *ClusterConfig) siteConfig() SiteConfig {
	return SiteConfig{Hosts: c.Hosts, Pages: c.Pages, PageBytes: c.PageBytes, IPs: c.IPs, Seed: c.Seed, Profile: c.Profile,
		Rounds: c.Rounds, Width: c.Width, PerHost: c.PerHost, Workers: c.Workers,
		HostDelay: c.HostDelay, IPDelay: c.IPDelay, MaxCrawlDelay: c.MaxCrawlDelay, NoSync: c.NoSync,
		SampleEvery: c.SampleEvery, Timeout: c.Timeout, SiteFlags: c.SiteFlags,
		ModuleRoot: c.ModuleRoot, WebsimBinary: c.WebsimBinary, SiteBinary: c.SiteBinary, Progress: c.Progress}
}

// WithDefaults returns c with its zero fields filled in, or every problem
// with it.
func (c ClusterConfig) WithDefaults() (ClusterConfig, error) {
	c.Nodes = slices.Clone(c.Nodes)
	c.SiteFlags = slices.Clone(c.SiteFlags)
	if len(c.Nodes) == 0 {
		c.Nodes = []int{1, 2, 3}
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = DefaultClusterSample
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultClusterTimeout
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("bench: "+format, args...)) }
	s, err := c.siteConfig().WithDefaults()
	if err != nil {
		errs = append(errs, err)
	}
	c.Hosts, c.Pages, c.PageBytes, c.IPs = s.Hosts, s.Pages, s.PageBytes, s.IPs
	c.Width, c.PerHost, c.Workers = s.Width, s.PerHost, s.Workers
	for _, n := range c.Nodes {
		if n < 1 || n > maxClusterNodes {
			bad("nodes must be in [1, %d], got %d", maxClusterNodes, n)
		}
	}
	if c.Replicas < 0 || c.Replicas > maxClusterReplicas {
		bad("replicas must be in [0, %d] (0: no --replicas flag), got %d", maxClusterReplicas, c.Replicas)
	}
	if err := checkNodeCPUs(c.NodeCPUs, runtime.NumCPU()); err != nil {
		errs = append(errs, err)
	}
	if c.BusyMachines < 0 || (c.BusyMachines > 0 && c.NodeCPUs <= 0) {
		bad("busy-machines needs node-cpus (each busy machine has a node's quota) and must not be negative, got %d", c.BusyMachines)
	}
	if c.KillAfter < 0 {
		bad("kill-after must not be negative, got %v", c.KillAfter)
	}
	if c.KillAfter > 0 && slices.Max(c.Nodes) < 3 {
		bad("kill-after needs a configuration of at least 3 nodes (a follower dies, two nodes keep the quorum), got %v", c.Nodes)
	}
	if c.Steady < 0 || c.Warmup < 0 {
		bad("steady and warmup must not be negative, got %v and %v", c.Steady, c.Warmup)
	}
	if c.Steady > 0 && c.SettleTimeout == 0 {
		c.SettleTimeout = 2 * time.Minute
	}
	if c.Timeout < 10*time.Second {
		bad("timeout must be at least 10s, got %v", c.Timeout)
	}
	return c, errors.Join(errs...)
}

// ClusterRound is one round of a cluster run, from the nodes' rounds.jsonl.
type ClusterRound struct {
	RoundRow
	Parts       int    `json:"parts"`
	StagedBytes int64  `json:"staged_bytes"`
	Leader      string `json:"leader"` // the node that led its update
}

// ClusterNode is what one node of a cluster run did and cost.
type ClusterNode struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Role is the node's role at its last answered /status (a node whose
	// peers exited first may end as a follower or candidate); Roles are
	// the roles its samples saw, in order of first sight.
	Role  string   `json:"role"`
	Roles []string `json:"roles"`
	// Exit is how the process ended ("exit status 0", "signal: killed",
	// ...); ExitCode is -1 for a signal. Killed: by the benchmark's
	// --kill-after; Stopped: by the benchmark at the timeout.
	Exit     string `json:"exit"`
	ExitCode int    `json:"exit_code"`
	Killed   bool   `json:"killed,omitempty"`
	Stopped  bool   `json:"stopped,omitempty"`
	// Pages is the node's fetcher.done at its last answered /status: the
	// page results it delivered, retried ones (Retries) included.
	Pages   int64 `json:"pages"`
	Retries int64 `json:"retries"`
	// WindowCPUS is the node's CPU seconds over the measured window,
	// interpolated between the samples (the last sample stands after the
	// node exits); CPUS over its whole life (rusage). CPUPerPageUS is
	// WindowCPUS over Pages.
	WindowCPUS   float64 `json:"window_cpu_s"`
	CPUS         float64 `json:"cpu_s"`
	CPUPerPageUS float64 `json:"cpu_us_per_page"`
	PeakRSS      int64   `json:"peak_rss_bytes"`
	// Traffic at the last answered /status.
	RaftSent     int64 `json:"raft_sent_bytes"`
	RaftReceived int64 `json:"raft_received_bytes"`
	APISent      int64 `json:"api_sent_bytes"`
	APIReceived  int64 `json:"api_received_bytes"`
	// Cgroup is the node's CPU-quota group ("" uncapped). CgroupWindowCPUS
	// is its CPU over the measured window from the group's own counter
	// (cpuacct.usage or cpu.stat usage_usec: every thread the node ever
	// ran, interpolated between the samples), CgroupCPUS over the group's
	// life, CgroupCPUPerPageUS CgroupWindowCPUS over Pages. QuotaUse is
	// CgroupWindowCPUS over the window × the quota (1: the node used its
	// whole "machine"). Periods, Throttled and ThrottledS: CFS periods in
	// which it ran, in which the quota stopped it, and for how long.
	Cgroup             string  `json:"cgroup,omitempty"`
	CgroupWindowCPUS   float64 `json:"cgroup_window_cpu_s,omitempty"`
	CgroupCPUS         float64 `json:"cgroup_cpu_s,omitempty"`
	CgroupCPUPerPageUS float64 `json:"cgroup_cpu_us_per_page,omitempty"`
	QuotaUse           float64 `json:"quota_use,omitempty"`
	Periods            int64   `json:"cfs_periods,omitempty"`
	Throttled          int64   `json:"cfs_throttled_periods,omitempty"`
	ThrottledS         float64 `json:"cfs_throttled_s,omitempty"`
	// RoundsLed: lines in its rounds.jsonl (rounds whose update it led).
	RoundsLed int `json:"rounds_led"`
	// UpS: the node's start to its status answering (site.json written).
	UpS float64 `json:"up_s"`
}

// ClusterKill is the --kill-after event of a run.
type ClusterKill struct {
	Node   string `json:"node"`
	Parts  int    `json:"parts"`  // parts it held when killed (its /status)
	Leader string `json:"leader"` // the leader when it was killed
	// AfterS: from the first node up; AtWindowS: from the first round's start.
	AfterS    float64 `json:"after_s"`
	AtWindowS float64 `json:"at_window_s"`
	// Replanned is the leader's rounds.replanned (the time of its latest
	// part move) as first seen after the kill; ReplanS is it minus the
	// kill time, -1 when no part moved. ReplanLastS is the same for the
	// last value seen: later moves (a part of the dead node that the first
	// pass did not move, or any other move) push it on. Moves is how many
	// parts the leader moved after the kill.
	Replanned     string  `json:"replanned,omitempty"`
	ReplanS       float64 `json:"replan_s"`
	ReplannedLast string  `json:"replanned_last,omitempty"`
	ReplanLastS   float64 `json:"replan_last_s"`
	Moves         int     `json:"moves"`
	// The crawl's recovery: LeadersBackS is the time from the SIGKILL to
	// the first sample (every SampleEvery) at which every shard listed in
	// the survivors' /status has a leader that is not the killed node, -1
	// if that never happened before the run ended. LeaderProbe says what
	// it read: "shards" (the shard list of a sharded site's /status, see
	// statusShards) or "site leader" (no shard list: the site's one Raft
	// group, led by the node whose role is "leader"). Shards is how many
	// shards the survivors listed (1 for "site leader"); ShardsLed how
	// many of them the killed node led when it was killed.
	LeaderProbe  string  `json:"leader_probe"`
	Shards       int     `json:"shards"`
	ShardsLed    int     `json:"shards_led_by_killed"`
	LeadersBackS float64 `json:"leaders_back_s"`
}

// ClusterRun is one configuration: a site of Nodes nodes crawling the web.
type ClusterRun struct {
	Nodes int `json:"nodes"`
	// Exit: "steady" (the steady window closed), "rounds" (the configured rounds were done), "exhausted",
	// "cut" (the timeout stopped it), "failed" (a node failed) or
	// "exited" (none of these).
	Exit   string         `json:"exit"`
	Rounds []ClusterRound `json:"rounds"`
	// The window runs from the first round's start to the last round's end
	// over every node's rounds.jsonl; Pages is Σ fetched over its rounds.
	WindowS       float64 `json:"window_s"`
	Pages         int64   `json:"pages"`
	Pages2xx      int64   `json:"pages_2xx"`
	PagesPerSec   float64 `json:"pages_per_sec"`
	FirstRoundAtS float64 `json:"first_round_at_s"` // first node's start to the first round's start
	WallS         float64 `json:"wall_s"`           // first node's start to the last node's exit
	// Ratio is PagesPerSec over the mean pages/s of the runs with the
	// fewest nodes (RatioBaseNodes: 1 when the list has 1-node runs; 3 for
	// --nodes 3,6), all from the one invocation (0: no base).
	Ratio          float64 `json:"ratio"`
	RatioBaseNodes int     `json:"ratio_base_nodes,omitempty"`
	// CPU over the window: Σ over the nodes, and per page (from /proc).
	SiteCPUS         float64 `json:"site_window_cpu_s"`
	SiteCPUPerPageUS float64 `json:"site_cpu_us_per_page"`
	// The same from the nodes' cgroups (with a quota), and the largest
	// QuotaUse of a node.
	SiteCgroupCPUS         float64 `json:"site_cgroup_window_cpu_s,omitempty"`
	SiteCgroupCPUPerPageUS float64 `json:"site_cgroup_cpu_us_per_page,omitempty"`
	MaxQuotaUse            float64 `json:"max_quota_use,omitempty"`
	// CgroupNote: a node's group that could not be removed.
	CgroupNote string `json:"cgroup_note,omitempty"`
	// BusyMachines and BusyCores: the busy machines beside the nodes
	// (ClusterConfig.BusyMachines) and the cores they used together.
	BusyMachines int     `json:"busy_machines,omitempty"`
	BusyCores    float64 `json:"busy_cores,omitempty"`
	// Bytes between nodes: Σ over nodes of raft_sent + api_sent at their
	// last /status (crawldb.Traffic: Raft's TCP transport on the wire, TLS
	// included; the crawl database's node API request and response bodies,
	// as client and server; not HTTP headers, not /status or /site/*
	// calls), per page; staged bytes (rounds.jsonl) per page.
	NodeBytes          int64         `json:"node_sent_bytes"`
	NodeBytesPerPage   float64       `json:"node_bytes_per_page"`
	StagedBytes        int64         `json:"staged_bytes"`
	StagedBytesPerPage float64       `json:"staged_bytes_per_page"`
	NodeList           []ClusterNode `json:"node_list"`
	// Websim over the window (interpolated) and over the whole run.
	WebsimWindowCPUS float64 `json:"websim_window_cpu_s"`
	WebsimCPUS       float64 `json:"websim_cpu_s"`
	// websim's statistics, reset before the run.
	Breaches       int      `json:"politeness_breaches"`
	BreachSample   []string `json:"politeness_breach_sample,omitempty"`
	WebsimRequests int64    `json:"websim_requests"`
	UnknownHost    int64    `json:"websim_unknown_host_requests"`
	// DuplicateRounds: round lines found in more than one node's
	// rounds.jsonl (a leader change mid-update); the first is kept.
	DuplicateRounds int          `json:"duplicate_rounds,omitempty"`
	Kill            *ClusterKill `json:"kill,omitempty"`
	KillNote        string       `json:"kill_note,omitempty"` // a kill was due in this run but did not happen
	StatusErrors    int          `json:"status_errors"`       // /status samples of a running node that got no answer
	// With a steady window (ClusterConfig.Steady) the window figures above
	// are over it; SettleS is from every node up to the shards settled (-1:
	// not by SettleTimeout); SteadyNote says why there is no window.
	// Pages is then websim's requests over the window, and FetcherResults
	// the nodes' fetcher results over it.
	SettleS        float64 `json:"settle_s,omitempty"`
	SteadyNote     string  `json:"steady_note,omitempty"`
	FetcherResults int64   `json:"fetcher_results,omitempty"`
	Error          string  `json:"error,omitempty"`
}

// ClusterTarget is one of the targets and whether the run met it.
type ClusterTarget struct {
	Want string  `json:"want"`
	Got  float64 `json:"got"`
	Met  bool    `json:"met"`
}

// ClusterResult is what RunCluster measured.
type ClusterResult struct {
	Runs   []ClusterRun `json:"runs"`
	Websim ProcStats    `json:"websim"`
	// PrimedFlakyHosts: hosts whose robots.txt answers its first requests
	// with 503 (synth.RobotsFlaky), asked for it that many times before
	// the first run, so that every run sees the same web (websim keeps
	// that count across a statistics reset).
	PrimedFlakyHosts int                      `json:"primed_flaky_robots_hosts"`
	Targets          map[string]ClusterTarget `json:"targets"`
	// Quota is how the nodes' CPU was capped (Mode "off": not asked;
	// "none": asked, but the nodes ran uncapped, Note says why).
	Quota  ClusterQuota `json:"cpu_quota"`
	Dir    string       `json:"dir,omitempty"` // the run directory, when kept
	NumCPU int          `json:"num_cpu"`
}

// RunCluster serves the web cfg describes with one websim and crawls it
// with a site of each number of nodes in cfg.Nodes in turn (websim's
// statistics reset in between), every node its own `site up` process.
// A configuration that is cut or has a failed node is reported, and the
// next one runs; the error then joins ErrCrawlCut or ErrNodeFailed for
// each. Setup failures and ctx's end return at once.
func RunCluster(ctx context.Context, cfg ClusterConfig) (ClusterResult, error) {
	res := ClusterResult{NumCPU: runtime.NumCPU()}
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
	dir, err := os.MkdirTemp(cfg.Dir, "meridian-bench-cluster-")
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	if cfg.Keep {
		res.Dir = dir
	} else {
		defer os.RemoveAll(dir)
	}
	simBin, siteBin, err := clusterBinaries(ctx, &cfg, dir)
	if err != nil {
		return res, err
	}
	sc := cfg.siteConfig()
	sr := &siteRun{cfg: &sc, dir: dir}
	defer sr.close() // websim
	cfg.Progress("starting websim: %d %s hosts × %d pages on %d addresses", cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs)
	if err := sr.startSim(ctx, simBin); err != nil {
		return res, err
	}
	res.Websim.PID = sr.sim.pid
	seeds := filepath.Join(dir, "seeds.txt")
	if err := writeSeeds(seeds, sr.web); err != nil {
		return res, err
	}
	if res.PrimedFlakyHosts, err = primeFlakyRobots(ctx, sr.web); err != nil {
		return res, err
	}
	quota, qinfo := setupCPUQuota(cfg.NodeCPUs)
	res.Quota = qinfo
	switch {
	case quota != nil:
		cfg.Progress("each node in its own CPU quota: %g core (%s, %d µs per %d µs period, under %s); websim and bench outside",
			cfg.NodeCPUs, qinfo.Mode, qinfo.QuotaUS, qinfo.PeriodUS, qinfo.Parent)
		if worst := float64(slices.Max(cfg.Nodes)) * cfg.NodeCPUs; worst >= float64(res.NumCPU) {
			cfg.Progress("warning: %d nodes × %g core = %g cores, not less than this machine's %d: the quotas are not the limit, the box is",
				slices.Max(cfg.Nodes), cfg.NodeCPUs, worst, res.NumCPU)
		}
		if qinfo.Note != "" {
			cfg.Progress("cgroups: %s", qinfo.Note)
		}
	case qinfo.Mode == QuotaNone:
		cfg.Progress("%s", qinfo.Note)
	}
	certsDir := ""
	if cfg.TLS {
		certsDir = filepath.Join(dir, "certs")
		if err := issueClusterCerts(certsDir, slices.Max(cfg.Nodes)); err != nil {
			return res, err
		}
	}
	var errs []error
	for i, n := range cfg.Nodes {
		r := &clusterRun{cfg: &cfg, sim: sr.sim, web: sr.web, bin: siteBin, seeds: seeds, n: n, certs: certsDir,
			dir: filepath.Join(dir, fmt.Sprintf("run%d-%dnodes", i+1, n)), kill: cfg.KillAfter > 0 && n >= 3,
			quota: quota, tag: fmt.Sprintf("run%d", i+1)}
		run, err := r.run(ctx)
		if !cfg.Keep {
			os.RemoveAll(r.dir)
		}
		if err != nil && (ctx.Err() != nil || run == nil) {
			return res, err
		}
		res.Runs = append(res.Runs, *run)
		if err != nil {
			errs = append(errs, fmt.Errorf("%d nodes: %w", n, err))
		}
	}
	if cpu, err := procCPU(sr.sim.pid); err == nil {
		res.Websim.CPUS = cpu.Seconds()
	}
	res.Websim.PeakRSS = peakRSS(sr.sim.pid)
	res.ratios()
	res.Targets = res.targets(cfg.NodeCPUs > 0 && res.Quota.Capped())
	return res, errors.Join(errs...)
}

// clusterBinaries builds what cfg does not name.
func clusterBinaries(ctx context.Context, cfg *ClusterConfig, dir string) (simBin, siteBin string, err error) {
	simBin, siteBin = cfg.WebsimBinary, cfg.SiteBinary
	if simBin != "" && siteBin != "" {
		return simBin, siteBin, nil
	}
	root := cfg.ModuleRoot
	if root == "" {
		if root, err = moduleRoot(ctx); err != nil {
			return "", "", err
		}
	}
	cfg.Progress("building ./cmd/websim and ./cmd/site")
	if simBin == "" {
		if simBin, err = buildCmd(ctx, root, dir, "websim"); err != nil {
			return "", "", err
		}
	}
	if siteBin == "" {
		if siteBin, err = buildCmd(ctx, root, dir, "site"); err != nil {
			return "", "", err
		}
	}
	return simBin, siteBin, nil
}

// ratios sets each run's ratio to the mean pages/s of the runs with the
// fewest nodes that crawled (the 1-node runs when there are some).
func (res *ClusterResult) ratios() {
	base := 0
	for _, r := range res.Runs {
		if r.PagesPerSec > 0 && (base == 0 || r.Nodes < base) {
			base = r.Nodes
		}
	}
	if base == 0 {
		return
	}
	var sum float64
	var n int
	for _, r := range res.Runs {
		if r.Nodes == base && r.PagesPerSec > 0 {
			sum += r.PagesPerSec
			n++
		}
	}
	for i := range res.Runs {
		res.Runs[i].Ratio, res.Runs[i].RatioBaseNodes = res.Runs[i].PagesPerSec/(sum/float64(n)), base
	}
}

// targets: for each configuration of more nodes than the ratios' base
// (the first run of each), its ratio: uncapped (every node on this box),
// at least 0.85; capped (fixed-size machines, scaled),
// at least 0.9 × nodes/base. No politeness breach in any run.
func (res *ClusterResult) targets(capped bool) map[string]ClusterTarget {
	t := map[string]ClusterTarget{}
	breaches := 0
	for _, r := range res.Runs {
		breaches += r.Breaches
		key := fmt.Sprintf("ratio_%d_nodes", r.Nodes)
		if r.RatioBaseNodes != 1 {
			key = fmt.Sprintf("ratio_%d_to_%d_nodes", r.Nodes, r.RatioBaseNodes)
		}
		if r.Kill != nil {
			key += "_killed"
		}
		if _, seen := t[key]; r.Nodes > r.RatioBaseNodes && r.Ratio > 0 && !seen {
			want, desc := clusterRatioTarget, fmt.Sprintf("≥ %.2f", clusterRatioTarget)
			if capped {
				want = clusterScaleTarget * float64(r.Nodes) / float64(r.RatioBaseNodes)
				desc = fmt.Sprintf("≥ %.2f (%.1f × %d/%d)", want, clusterScaleTarget, r.Nodes, r.RatioBaseNodes)
			}
			t[key] = ClusterTarget{desc, r.Ratio, r.Ratio >= want}
		}
	}
	t["politeness_breaches"] = ClusterTarget{"0", float64(breaches), breaches == 0}
	return t
}

// clusterRun is one configuration of RunCluster.
type clusterRun struct {
	cfg   *ClusterConfig
	certs string // the deployment's certificates ("": no TLS)
	sim   *simProc
	web   *synth.Web
	bin   string
	seeds string
	n     int
	dir   string
	kill  bool
	quota *cpuQuota // nil: no CPU quota
	tag   string    // the run's part of its nodes' cgroup names

	nodes   []*clusterNode
	simPts  []cpuPoint
	simHWM  int64
	started time.Time // the first node's start
	up      time.Time // the first node up (site.json)
	grace   time.Duration
	killed  *ClusterKill
	killAt  time.Time
	// replanBase is the leader's rounds.replanned when the node was killed.
	replanBase string
	movesBase  int
	movesLast  int
	statusErrs int
	groups     []*nodeCgroup // made, not yet removed
	busy       []*busyMachine
	busyCores  float64 // what they used, once stopped
	// The steady window (steady.go): every node up at allUp; the window
	// from steadyStart to steadyEnd; settleS from allUp to its start (-1:
	// the shards had not settled by SettleTimeout).
	allUp, settledAt, steadyStart, steadyEnd time.Time
	settleS                                  float64
	steadyReqFrom, steadyReqTo               int64 // websim's requests as the window opened and closed
}

// clusterNode is one node (a `site up` process) of a clusterRun.
type clusterNode struct {
	name    string
	data    string
	log     *os.File
	proc    *siteProc
	listen  string
	started time.Time
	upAt    time.Time
	exited  time.Time
	killed  bool
	stopped bool
	roles   []string
	pts     []cpuPoint
	hwm     int64
	last    *site.Status // the last answered /status
	lastRaw []byte       // its JSON (for statusShards)
	lastAt  time.Time    // when it answered
	cg      *nodeCgroup  // nil: no quota
	cgPts   []cpuPoint   // its cgroup's CPU usage
	// steadyFrom and steadyTo: its counters as the steady window opened
	// and closed.
	steadyFrom, steadyTo steadyCounters
}

// cpuPoint is a process's CPU time at a moment.
type cpuPoint struct {
	at  time.Time
	cpu time.Duration
}

// cpuAt interpolates a process's CPU time at t from its points (the first
// point may be its start, at zero); before the first point it is the first
// point's, after the last the last's.
func cpuAt(pts []cpuPoint, t time.Time) time.Duration {
	if len(pts) == 0 {
		return 0
	}
	if !t.After(pts[0].at) {
		return pts[0].cpu
	}
	i := sort.Search(len(pts), func(i int) bool { return !pts[i].at.Before(t) })
	if i == len(pts) {
		return pts[len(pts)-1].cpu
	}
	a, b := pts[i-1], pts[i]
	span := b.at.Sub(a.at)
	if span <= 0 {
		return b.cpu
	}
	f := float64(t.Sub(a.at)) / float64(span)
	return a.cpu + time.Duration(f*float64(b.cpu-a.cpu))
}

// run runs the configuration; run is nil when it could not start at all.
func (r *clusterRun) run(ctx context.Context) (*ClusterRun, error) {
	cfg := r.cfg
	cfg.Progress("%d node(s): starting", r.n)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	begin := time.Now()
	r.grace = min(siteGrace, cfg.Timeout/5)
	defer r.close()
	if err := resetWebsimStats(ctx, r.sim.admin); err != nil {
		return nil, err
	}
	r.samplePoint(time.Now()) // websim's CPU at the start
	out := &ClusterRun{Nodes: r.n}
	// Starting is bounded by the run's timeout; the crawl stops its nodes
	// with the grace left, and what follows is quick.
	sctx, cancel := context.WithDeadline(ctx, begin.Add(cfg.Timeout))
	startErr := r.start(sctx)
	cancel()
	ending := ""
	if startErr == nil {
		var err error
		if ending, err = r.crawl(ctx, begin.Add(cfg.Timeout-r.grace)); err != nil {
			return nil, err
		}
	} else {
		if ctx.Err() != nil {
			return nil, startErr
		}
		r.stopAll()
		ending = "failed"
	}
	r.samplePoint(time.Now())
	if r.kill && r.killed == nil && startErr == nil {
		out.KillNote = "no node was killed: the crawl ended before the kill was due, or no follower answered"
	}
	err := r.collect(ctx, out, ending)
	r.stopAll() // (all have exited already) before their groups go
	out.BusyMachines, out.BusyCores = r.cfg.BusyMachines, r.busyCores
	if gerr := r.removeGroups(); gerr != nil {
		out.CgroupNote = gerr.Error()
		r.cfg.Progress("cgroups: %v", gerr)
	}
	if err != nil {
		return out, err
	}
	if startErr != nil {
		out.Error = startErr.Error()
		return out, startErr
	}
	var failed []string
	for _, nd := range r.nodes {
		if nd.killed || nd.stopped {
			continue
		}
		if e := nd.proc.err; e != nil {
			failed = append(failed, fmt.Sprintf("%s: %v: %s", nd.name, e, nd.proc.tail))
		}
	}
	switch {
	case len(failed) > 0:
		out.Exit = "failed"
		err = fmt.Errorf("%w: %s", ErrNodeFailed, strings.Join(failed, "; "))
	case ending == "cut":
		err = ErrCrawlCut
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out, err
}

// start starts the first node, waits for it, then starts the others
// (joining through it) and waits for them.
func (r *clusterRun) start(ctx context.Context) error {
	first, err := r.startNode(ctx, "n1", nil)
	if err != nil {
		return err
	}
	r.started = first.started
	if err := r.waitUp(ctx, first); err != nil {
		return err
	}
	r.up = first.upAt
	for i := 2; i <= r.n; i++ {
		if _, err := r.startNode(ctx, fmt.Sprintf("n%d", i), first); err != nil {
			return err
		}
	}
	for _, nd := range r.nodes[1:] {
		if err := r.waitUp(ctx, nd); err != nil {
			return err
		}
	}
	in := make([]string, len(r.nodes))
	for i, nd := range r.nodes {
		in[i] = fmt.Sprintf("%s (pid %d, up in %.1fs)", nd.name, nd.proc.pid, nd.upAt.Sub(nd.started).Seconds())
	}
	r.cfg.Progress("%d node(s) up: %s", r.n, strings.Join(in, ", "))
	for i := 1; i <= r.cfg.BusyMachines && r.quota != nil; i++ {
		b, err := r.startBusy(fmt.Sprintf("busy%d", i))
		if err != nil {
			return err
		}
		r.busy = append(r.busy, b)
	}
	if len(r.busy) > 0 {
		r.cfg.Progress("%d busy machine(s) of %g core beside the nodes", len(r.busy), r.cfg.NodeCPUs)
	}
	return nil
}

// busyMachine is a cgroup of a node's quota holding one busy loop
// (ClusterConfig.BusyMachines).
type busyMachine struct {
	cg    *nodeCgroup
	proc  *child
	start time.Time
}

// startBusy starts one busy machine.
func (r *clusterRun) startBusy(name string) (*busyMachine, error) {
	cg, err := r.quota.create(r.tag, name)
	if err != nil {
		return nil, err
	}
	r.groups = append(r.groups, cg)
	bin, args := cg.command("sh", []string{"-c", "while :; do :; done"})
	ch, err := startProcess(bin, args, io.Discard, r.grace)
	if err != nil {
		return nil, fmt.Errorf("bench: start busy machine %s: %w", name, err)
	}
	return &busyMachine{cg: cg, proc: ch, start: time.Now()}, nil
}

// stopBusy stops the busy machines and returns the cores they used, all
// together, over their lives.
func (r *clusterRun) stopBusy() float64 {
	var cores float64
	for _, b := range r.busy {
		used, _ := b.cg.usage()
		if life := time.Since(b.start).Seconds(); life > 0 {
			cores += used.Seconds() / life
		}
		b.proc.stop()
	}
	r.busy = nil
	return cores
}

// issueClusterCerts makes a CA in dir and the certificates of nodes n1..nN
// of site "bench".
func issueClusterCerts(dir string, n int) error {
	if err := certs.Init(dir); err != nil {
		return fmt.Errorf("bench: certificates: %w", err)
	}
	for i := 1; i <= n; i++ {
		if err := certs.IssueNode(dir, "bench", fmt.Sprintf("n%d", i)); err != nil {
			return fmt.Errorf("bench: certificates: %w", err)
		}
	}
	return nil
}

// nodeArgs are the `site up` flags of a node; join is nil for the first.
func (r *clusterRun) nodeArgs(nd *clusterNode, join *clusterNode) []string {
	c := r.cfg
	args := []string{"up", "--region", "bench", "--node", nd.name, "--data", nd.data, "--listen", "127.0.0.1:0",
		"--workers", strconv.Itoa(c.Workers), "--progress", "5s", "--log-level", "info"}
	if c.NoSync {
		args = append(args, "--no-sync")
	}
	if c.Expect && c.Shards > 0 {
		args = append(args, "--expect-nodes", strconv.Itoa(r.n))
	}
	if r.certs != "" {
		args = append(args, "--certs", r.certs)
	}
	if c.Replicas > 0 {
		args = append(args, "--replicas", strconv.Itoa(c.Replicas))
	}
	if c.Shards > 0 && join == nil {
		args = append(args, "--shards", strconv.Itoa(c.Shards))
	}
	if join != nil {
		return append(args, "--join", join.listen)
	}
	args = append(args, "--seeds", r.seeds, "--dns", r.sim.dns, "--allow-private",
		"--rounds", strconv.Itoa(c.Rounds), "--width", strconv.Itoa(c.Width), "--per-host", strconv.Itoa(c.PerHost),
		"--host-delay", c.HostDelay.String(), "--ip-delay", c.IPDelay.String(), "--max-crawl-delay", c.MaxCrawlDelay.String())
	return append(args, c.SiteFlags...)
}

// startNode starts one node process.
func (r *clusterRun) startNode(ctx context.Context, name string, join *clusterNode) (*clusterNode, error) {
	nd := &clusterNode{name: name, data: filepath.Join(r.dir, name)}
	var err error
	if nd.log, err = os.Create(filepath.Join(r.dir, name+".log")); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	tail := &tailBuffer{max: siteLogTail}
	bin, args := r.bin, r.nodeArgs(nd, join)
	if r.quota != nil {
		if nd.cg, err = r.quota.create(r.tag, name); err != nil {
			nd.log.Close()
			return nil, err
		}
		r.groups = append(r.groups, nd.cg)
		bin, args = nd.cg.command(bin, args)
	}
	nd.started = time.Now()
	ch, err := startProcess(bin, args, io.MultiWriter(nd.log, tail), r.grace)
	if err != nil {
		nd.log.Close()
		return nil, fmt.Errorf("bench: start node %s: %w", name, err)
	}
	p := &siteProc{child: ch, pid: ch.cmd.Process.Pid, tail: tail, exit: make(chan struct{})}
	go func() { // owner: clusterRun; ends when the process does
		err := <-ch.waitErr
		ch.waitErr <- err // for stop
		p.err = err
		close(p.exit)
	}()
	nd.proc = p
	nd.pts = []cpuPoint{{at: nd.started}}
	if nd.cg != nil {
		nd.cgPts = []cpuPoint{{at: nd.started}}
	}
	r.nodes = append(r.nodes, nd)
	return nd, nil
}

// waitUp waits for a node's site.json (written once it is seeded or has
// joined, and serving).
// With a quota, it checks that the node's process is in its group.
func (r *clusterRun) waitUp(ctx context.Context, nd *clusterNode) error {
	var err error
	if nd.listen, nd.upAt, err = nd.proc.waitUp(ctx, nd.data, "node "+nd.name); err != nil || nd.cg == nil {
		return err
	}
	in, err := nd.cg.holds(nd.proc.pid)
	switch {
	case err != nil:
		return fmt.Errorf("bench: node %s (pid %d): %w", nd.name, nd.proc.pid, err)
	case !in:
		return fmt.Errorf("bench: node %s (pid %d) is not in its cgroup %s: its CPU would not be capped", nd.name, nd.proc.pid, nd.cg.cpu)
	}
	return nil
}

// waitUp waits until the site process has written its site.json in data
// (it is seeded or has joined, and serving), and returns its status
// address and when it was up; what names it in errors.
func (p *siteProc) waitUp(ctx context.Context, data, what string) (string, time.Time, error) {
	wctx, cancel := context.WithTimeout(ctx, siteStartBound)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if in, err := site.ReadInfo(data); err == nil && in.PID == p.pid {
			return in.Listen, time.Now(), nil
		}
		select {
		case <-p.exit:
			return "", time.Time{}, fmt.Errorf("%w: %s exited before it was up (%v): %s", ErrNodeFailed, what, p.err, p.tail)
		case <-wctx.Done():
			return "", time.Time{}, fmt.Errorf("bench: waiting for %s to be up: %w: %s", what, wctx.Err(), p.tail)
		case <-tick.C:
		}
	}
}

// crawl samples the nodes until every one has exited (or been killed). It
// stops them at deadline (ending "cut").
func (r *clusterRun) crawl(ctx context.Context, deadline time.Time) (ending string, err error) {
	client := &http.Client{Timeout: statusTimeout}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(r.cfg.SampleEvery)
	defer tick.Stop()
	stopAt := time.NewTimer(time.Until(deadline))
	defer stopAt.Stop()
	var killC <-chan time.Time
	if r.kill && r.cfg.Steady == 0 {
		kt := time.NewTimer(time.Until(r.up.Add(r.cfg.KillAfter)))
		defer kt.Stop()
		killC = kt.C
	}
	killDue := false
	lastProgress := time.Now()
	r.allUp = time.Now()
	for {
		running := 0
		for _, nd := range r.nodes {
			select {
			case <-nd.proc.exit:
				if nd.exited.IsZero() {
					nd.exited = time.Now()
				}
			default:
				running++
			}
		}
		if running == 0 {
			return ending, nil
		}
		select {
		case <-ctx.Done():
			r.stopAll()
			return ending, fmt.Errorf("bench: cluster run: %w", ctx.Err())
		case <-stopAt.C:
			r.cfg.Progress("timeout: stopping the nodes")
			ending = "cut"
			r.stopAll()
		case <-killC:
			killDue = true
		case <-tick.C:
			r.sample(client)
			if r.cfg.Steady > 0 && ending == "" && r.steadyStep(time.Now()) {
				ending = "steady"
				r.stopAll()
			}
			// With a steady window, the kill is timed from its opening:
			// every shard is then where the placement wants it, so the
			// time until every shard is led again is that of a settled
			// site, not of one still growing.
			if r.kill && r.cfg.Steady > 0 && !r.steadyStart.IsZero() && ending == "" && time.Since(r.steadyStart) >= r.cfg.KillAfter {
				killDue = true
			}
			if killDue && r.killed == nil {
				r.killOne(client)
			}
			if r.killed != nil {
				r.watchReplan()
				r.watchLeaders()
			}
			if now := time.Now(); now.Sub(lastProgress) >= progressEvery {
				lastProgress = now
				r.progress(now)
			}
		}
	}
}

// sample reads every running node's /status, CPU and memory, and websim's.
func (r *clusterRun) sample(client *http.Client) {
	now := time.Now()
	sts := make([]*site.Status, len(r.nodes))
	raws := make([][]byte, len(r.nodes))
	var wg sync.WaitGroup
	for i, nd := range r.nodes {
		if nd.done() {
			continue
		}
		wg.Add(1)
		go func() { // owner: sample, which waits for it
			defer wg.Done()
			sts[i], raws[i] = getStatusRaw(client, nd.listen)
		}()
	}
	wg.Wait()
	for i, nd := range r.nodes {
		if nd.done() {
			continue
		}
		if cpu, err := procCPU(nd.proc.pid); err == nil {
			nd.pts = append(nd.pts, cpuPoint{now, cpu})
		}
		if nd.cg != nil {
			if cpu, ok := nd.cg.usage(); ok {
				nd.cgPts = append(nd.cgPts, cpuPoint{now, cpu})
			}
		}
		if h := peakRSS(nd.proc.pid); h > nd.hwm {
			nd.hwm = h
		}
		if st := sts[i]; st != nil {
			nd.last, nd.lastRaw, nd.lastAt = st, raws[i], now
			if !slices.Contains(nd.roles, st.Role) {
				nd.roles = append(nd.roles, st.Role)
			}
		} else if !nd.done() { // not answering while it still runs
			r.statusErrs++
		}
	}
	r.samplePoint(now)
}

// samplePoint takes websim's CPU and memory.
func (r *clusterRun) samplePoint(now time.Time) {
	if cpu, err := procCPU(r.sim.pid); err == nil {
		r.simPts = append(r.simPts, cpuPoint{now, cpu})
	}
	r.simHWM = max(r.simHWM, peakRSS(r.sim.pid))
}

// done reports whether the node's process has exited.
func (nd *clusterNode) done() bool {
	select {
	case <-nd.proc.exit:
		return true
	default:
		return false
	}
}

// getStatus reads a node's /status (nil: no answer).
func getStatus(client *http.Client, listen string) *site.Status {
	st, _ := getStatusRaw(client, listen)
	return st
}

// getStatusRaw reads a node's /status, decoded and as JSON (nil: no
// answer): the JSON may hold fields site.Status does not have yet (see
// statusShards).
func getStatusRaw(client *http.Client, listen string) (*site.Status, []byte) {
	resp, err := client.Get("http://" + listen + "/status")
	if err != nil {
		return nil, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	var st site.Status
	if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &st) != nil {
		io.Copy(io.Discard, resp.Body)
		return nil, nil
	}
	return &st, raw
}

// killOne SIGKILLs one node, asking every node for its /status first.
// On a sharded site (the /status lists shards, see statusShards) it is the
// node leading the most shards, so that their leaders must move; on a
// site of one Raft group, a follower, the one holding the most parts (so
// that the leader has parts to move). With no such node answering it
// tries again at the next sample.
func (r *clusterRun) killOne(client *http.Client) {
	var victim *clusterNode
	var vst *site.Status
	leader := ""
	var raws [][]byte
	sts := map[*clusterNode]*site.Status{}
	for _, nd := range r.nodes {
		if nd.done() {
			continue
		}
		st, raw := getStatusRaw(client, nd.listen)
		if st == nil {
			continue
		}
		sts[nd], raws = st, append(raws, raw)
		switch st.Role {
		case "leader":
			leader = nd.name
			r.replanBase, r.movesBase = st.Rounds.Replanned, st.Rounds.Moves
		case "follower":
			if vst == nil || st.Rounds.Parts >= vst.Rounds.Parts {
				victim, vst = nd, st
			}
		}
	}
	probe, shards, led := "site leader", 1, 0
	if view, ok := shardView(raws, ""); ok {
		probe, shards, victim, vst = "shards", len(view), nil, nil
		for _, nd := range r.nodes { // the most shards led; ties: the later node
			st := sts[nd]
			if st == nil {
				continue
			}
			n := 0
			for _, l := range view {
				if l == nd.name {
					n++
				}
			}
			if n > 0 && n >= led {
				victim, vst, led = nd, st, n
			}
		}
	} else if victim == nil || leader == "" {
		victim = nil
	}
	if victim == nil {
		return
	}
	r.killAt = time.Now()
	if err := victim.proc.child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		r.cfg.Progress("kill %s: %v", victim.name, err)
		return
	}
	victim.killed = true
	<-victim.proc.exit
	victim.exited = time.Now()
	r.killed = &ClusterKill{Node: victim.name, Parts: vst.Rounds.Parts, Leader: leader,
		AfterS: r.killAt.Sub(r.up).Seconds(), ReplanS: -1, ReplanLastS: -1,
		LeaderProbe: probe, Shards: shards, ShardsLed: led, LeadersBackS: -1}
	r.cfg.Progress("SIGKILLed %s (%s, %d parts, %d hosts, leading %d of %d shards) %.1fs after n1 was up; leader %s",
		victim.name, vst.Role, vst.Rounds.Parts, vst.Rounds.Hosts, led, shards, r.killed.AfterS, leader)
}

// watchLeaders looks, after the kill, for the first sample at which every
// shard in the survivors' /status (answered after the kill) has a leader
// other than the killed node; without shard lists, at which a survivor
// leads the site's one Raft group.
func (r *clusterRun) watchLeaders() {
	k := r.killed
	if k.LeadersBackS >= 0 {
		return
	}
	var raws [][]byte
	var at time.Time
	leads := false
	for _, nd := range r.nodes {
		if nd.killed || nd.last == nil || !nd.lastAt.After(r.killAt) {
			continue
		}
		raws = append(raws, nd.lastRaw)
		at = later(at, nd.lastAt)
		leads = leads || nd.last.Role == "leader"
	}
	if len(raws) == 0 {
		return
	}
	if view, ok := shardView(raws, k.Node); ok {
		k.Shards = len(view)
		for _, l := range view {
			if l == "" {
				return
			}
		}
	} else if !leads {
		return
	}
	k.LeadersBackS = at.Sub(r.killAt).Seconds()
	r.cfg.Progress("every shard has a leader %.2fs after the kill of %s (%s, %d shard(s))", k.LeadersBackS, k.Node, k.LeaderProbe, k.Shards)
}

// shardLeader is one shard as a node's /status lists it.
type shardLeader struct {
	ID     string
	Leader string // the leading node's name ("": none)
}

// statusShardsField is the /status field statusShards reads.
const statusShardsField = "shards"

// statusShards is the hook for the sharded site's /status (issue 21): the
// shards a node's /status lists and their leaders, read from the field
// statusShardsField, a list of objects with "id" (a string or a number)
// and "leader" (the leading node's --node name; "" or absent when the
// shard has none). ok is false when the status has no such list or an
// empty one (today's site: one Raft group, led by the node whose role is
// "leader"). When the sharded site names these otherwise, change this
// function (and statusShardsField) only.
func statusShards(raw []byte) (shards []shardLeader, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return nil, false
	}
	list, has := top[statusShardsField]
	if !has {
		return nil, false
	}
	var items []struct {
		ID     json.RawMessage `json:"id"`
		Leader string          `json:"leader"`
	}
	if json.Unmarshal(list, &items) != nil || len(items) == 0 {
		return nil, false
	}
	for _, it := range items {
		shards = append(shards, shardLeader{ID: strings.Trim(string(it.ID), `"`), Leader: it.Leader})
	}
	return shards, true
}

// shardView merges the shard lists of nodes' /status JSON: every shard
// any of them lists, with a leader some of them names that is not dead
// ("" when none does). ok is false when none of them lists shards.
func shardView(raws [][]byte, dead string) (map[string]string, bool) {
	view := map[string]string{}
	any := false
	for _, raw := range raws {
		shards, ok := statusShards(raw)
		if !ok {
			continue
		}
		any = true
		for _, sh := range shards {
			if _, seen := view[sh.ID]; !seen {
				view[sh.ID] = ""
			}
			if sh.Leader != "" && sh.Leader != dead {
				view[sh.ID] = sh.Leader
			}
		}
	}
	return view, any
}

// watchReplan looks at the leader's last status for the first part moves
// after the kill.
func (r *clusterRun) watchReplan() {
	for _, nd := range r.nodes {
		st := nd.last
		if nd.done() || st == nil || st.Role != "leader" {
			continue
		}
		if nd.name != r.killed.Leader { // a new leader: its own counters
			r.replanBase, r.movesBase, r.killed.Leader = "", 0, nd.name
		}
		// A leader's status drops its moves when its lead ends (the crawl
		// finished): the most seen stands.
		r.movesLast = max(r.movesLast, st.Rounds.Moves)
		k := r.killed
		if st.Rounds.Replanned == "" || st.Rounds.Replanned == r.replanBase || st.Rounds.Replanned == k.ReplannedLast {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05.000Z07:00", st.Rounds.Replanned)
		if err != nil || at.Before(r.killAt.Add(-time.Millisecond)) {
			continue
		}
		k.ReplannedLast, k.ReplanLastS = st.Rounds.Replanned, at.Sub(r.killAt).Seconds()
		if k.Replanned == "" {
			k.Replanned, k.ReplanS = k.ReplannedLast, k.ReplanLastS
		}
		r.cfg.Progress("leader %s moved parts %.2fs after the kill of %s (%d moves since)", nd.name, k.ReplanLastS, k.Node, st.Rounds.Moves-r.movesBase)
	}
}

// progress prints one line of the nodes' state.
func (r *clusterRun) progress(now time.Time) {
	var b strings.Builder
	for _, nd := range r.nodes {
		switch {
		case nd.killed:
			fmt.Fprintf(&b, " | %s killed", nd.name)
		case nd.done():
			fmt.Fprintf(&b, " | %s exited", nd.name)
		case nd.last != nil:
			cpu := time.Duration(0)
			if len(nd.pts) > 0 {
				cpu = nd.pts[len(nd.pts)-1].cpu
			}
			fmt.Fprintf(&b, " | %s %s round %d, fetched %d, in flight %d, CPU %.0fs",
				nd.name, nd.last.Role, nd.last.Round, nd.last.Fetcher.Done, nd.last.Fetcher.InFlight, cpu.Seconds())
			if n := len(nd.cgPts); n > 0 {
				fmt.Fprintf(&b, " (cgroup %.0fs)", nd.cgPts[n-1].cpu.Seconds())
			}
		}
	}
	r.cfg.Progress("%5.0fs%s", now.Sub(r.started).Seconds(), b.String())
}

// stopAll stops every node still running: SIGTERM to all, then each is
// killed if it has not exited after the grace.
func (r *clusterRun) stopAll() {
	if len(r.busy) > 0 {
		r.busyCores = r.stopBusy()
	}
	for _, nd := range r.nodes {
		if !nd.done() {
			nd.stopped = true
		}
		nd.proc.child.cancel()
	}
	for _, nd := range r.nodes {
		<-nd.proc.exit
		if nd.exited.IsZero() {
			nd.exited = time.Now()
		}
	}
}

// close stops the nodes (if any still runs), closes their logs and
// removes their cgroups.
func (r *clusterRun) close() {
	r.stopAll()
	for _, nd := range r.nodes {
		nd.proc.child.stop() // reaps: the exit watcher has put the result back
		nd.log.Close()
	}
	if err := r.removeGroups(); err != nil {
		r.cfg.Progress("cgroups: %v", err)
	}
}

// removeGroups removes the nodes' cgroups (their processes have exited),
// each within cgroupRmBound; a group that will not go is kept in the list
// and named in the error.
func (r *clusterRun) removeGroups() error {
	var errs []error
	var left []*nodeCgroup
	for _, g := range r.groups {
		if err := g.remove(); err != nil {
			errs = append(errs, fmt.Errorf("bench: remove cgroup %s: %w", g.cpu, err))
			left = append(left, g)
		}
	}
	r.groups = left
	return errors.Join(errs...)
}

// collect reads what the stopped nodes left and websim's statistics, and
// fills out.
func (r *clusterRun) collect(ctx context.Context, out *ClusterRun, ending string) error {
	byRound := map[uint64]rounds.RoundStats{}
	led := map[string]int{}
	for _, nd := range r.nodes {
		stats, err := readRoundStats(filepath.Join(nd.data, "stats", "rounds.jsonl"))
		if err != nil {
			return err
		}
		led[nd.name] = len(stats)
		for _, s := range stats {
			if _, dup := byRound[s.Round]; dup {
				out.DuplicateRounds++
				continue
			}
			byRound[s.Round] = s
		}
	}
	stats := make([]rounds.RoundStats, 0, len(byRound))
	for _, s := range byRound {
		stats = append(stats, s)
	}
	sort.Slice(stats, func(i, j int) bool { return stats[i].Round < stats[j].Round })

	var t SiteResult
	start, end := t.table(stats, r.started)
	out.WindowS, out.Pages, out.Pages2xx, out.PagesPerSec, out.FirstRoundAtS = t.WindowS, t.Pages, t.Pages2xx, t.PagesPerSec, t.FirstRoundAtS
	for i, s := range stats {
		out.Rounds = append(out.Rounds, ClusterRound{RoundRow: t.Rounds[i], Parts: s.Parts, StagedBytes: s.StagedBytes, Leader: s.Leader})
		out.StagedBytes += s.StagedBytes
	}
	last := r.started
	for _, nd := range r.nodes {
		last = later(last, nd.exited)
		cn := ClusterNode{Name: nd.name, PID: nd.proc.pid, Roles: nd.roles, Killed: nd.killed, Stopped: nd.stopped,
			PeakRSS: nd.hwm, RoundsLed: led[nd.name]}
		if !nd.upAt.IsZero() {
			cn.UpS = nd.upAt.Sub(nd.started).Seconds()
		}
		if ps := nd.proc.child.cmd.ProcessState; ps != nil {
			cn.Exit, cn.ExitCode = ps.String(), ps.ExitCode()
			cn.CPUS = (ps.UserTime() + ps.SystemTime()).Seconds()
		}
		if st := nd.last; st != nil {
			cn.Role, cn.Pages, cn.Retries = st.Role, st.Fetcher.Done, st.Fetcher.Retries
			cn.RaftSent, cn.RaftReceived = st.Traffic.RaftSent, st.Traffic.RaftReceived
			cn.APISent, cn.APIReceived = st.Traffic.APISent, st.Traffic.APIReceived
		}
		if len(stats) > 0 {
			cn.WindowCPUS = (cpuAt(nd.pts, end) - cpuAt(nd.pts, start)).Seconds()
		}
		cn.CPUPerPageUS = 1e6 * ratio(cn.WindowCPUS, float64(cn.Pages))
		if g := nd.cg; g != nil {
			r.cgroupCPU(nd, &cn, start, end, len(stats) > 0)
			out.SiteCgroupCPUS += cn.CgroupWindowCPUS
			out.MaxQuotaUse = max(out.MaxQuotaUse, cn.QuotaUse)
		}
		out.SiteCPUS += cn.WindowCPUS
		out.NodeBytes += cn.RaftSent + cn.APISent
		out.NodeList = append(out.NodeList, cn)
	}
	out.WallS = last.Sub(r.started).Seconds()
	out.SiteCPUPerPageUS = 1e6 * ratio(out.SiteCPUS, float64(out.Pages))
	out.SiteCgroupCPUPerPageUS = 1e6 * ratio(out.SiteCgroupCPUS, float64(out.Pages))
	out.NodeBytesPerPage = ratio(float64(out.NodeBytes), float64(out.Pages))
	out.StagedBytesPerPage = ratio(float64(out.StagedBytes), float64(out.Pages))
	out.StatusErrors = r.statusErrs
	if len(r.simPts) > 0 {
		out.WebsimCPUS = (r.simPts[len(r.simPts)-1].cpu - r.simPts[0].cpu).Seconds()
		if len(stats) > 0 {
			out.WebsimWindowCPUS = (cpuAt(r.simPts, end) - cpuAt(r.simPts, start)).Seconds()
		}
	}
	if k := r.killed; k != nil {
		k.Moves = r.movesLast - r.movesBase
		if len(stats) > 0 {
			k.AtWindowS = r.killAt.Sub(start).Seconds()
		}
		out.Kill = k
	}

	switch {
	case ending != "":
		out.Exit = ending
	case r.anyTail("crawl exhausted"):
		out.Exit = "exhausted"
	case r.cfg.Rounds > 0 && len(stats) >= r.cfg.Rounds:
		out.Exit = "rounds"
	default:
		out.Exit = "exited"
	}

	if r.cfg.Steady > 0 {
		r.collectSteady(out)
	}
	snap, err := fetchSnapshot(ctx, r.sim.admin)
	if err != nil {
		return err
	}
	out.WebsimRequests, out.UnknownHost = snap.Requests, snap.UnknownHost
	out.Breaches, out.BreachSample = politenessBreaches(r.web, snap, r.cfg.HostDelay, r.cfg.IPDelay, r.cfg.MaxCrawlDelay)
	return nil
}

// cgroupCPU fills a node's figures from its cgroup (its processes have
// exited: the group's counters are final); window: the run has rounds,
// from start to end.
func (r *clusterRun) cgroupCPU(nd *clusterNode, cn *ClusterNode, start, end time.Time, window bool) {
	g := nd.cg
	cn.Cgroup = g.cpu
	if total, ok := g.usage(); ok {
		cn.CgroupCPUS = total.Seconds()
		if n := len(nd.cgPts); !nd.exited.IsZero() && (n == 0 || nd.exited.After(nd.cgPts[n-1].at)) {
			nd.cgPts = append(nd.cgPts, cpuPoint{nd.exited, total})
		}
	}
	if window {
		cn.CgroupWindowCPUS = (cpuAt(nd.cgPts, end) - cpuAt(nd.cgPts, start)).Seconds()
		cn.CgroupCPUPerPageUS = 1e6 * ratio(cn.CgroupWindowCPUS, float64(cn.Pages))
		cn.QuotaUse = ratio(cn.CgroupWindowCPUS, end.Sub(start).Seconds()*r.cfg.NodeCPUs)
	}
	periods, throttled, d := g.throttling()
	cn.Periods, cn.Throttled, cn.ThrottledS = periods, throttled, d.Seconds()
}

// anyTail reports whether some node's output ends with s in it.
func (r *clusterRun) anyTail(s string) bool {
	for _, nd := range r.nodes {
		if strings.Contains(nd.proc.tail.String(), s) {
			return true
		}
	}
	return false
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// primeFlakyRobots asks every RobotsFlaky host of w (served by websim) for
// its robots.txt until it has answered synth.RobotsFailures times: websim
// counts those failures per host for its whole life, and not statistics
// reset, so without this only the first run would meet them. It returns
// the number of such hosts.
func primeFlakyRobots(ctx context.Context, w *synth.Web) (int, error) {
	var hosts []synth.Host
	for _, h := range w.Hosts() {
		if h.Robots == synth.RobotsFlaky && h.Role == synth.RoleNone {
			hosts = append(hosts, h)
		}
	}
	port := w.Options().Port
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	get := func(h synth.Host) error {
		for range synth.RobotsFailures {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.IP.String()+":"+strconv.Itoa(port)+"/robots.txt", nil)
			if err != nil {
				return err
			}
			req.Host = h.Name + ":" + strconv.Itoa(port)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				return fmt.Errorf("robots.txt of %s: %s, want 503", h.Name, resp.Status)
			}
		}
		return nil
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, h := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func() { // owner: primeFlakyRobots, which waits for it
			defer wg.Done()
			defer func() { <-sem }()
			if err := get(h); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return 0, fmt.Errorf("bench: prime websim's flaky robots.txt hosts: %w", errors.Join(errs[:min(len(errs), 3)]...))
	}
	return len(hosts), nil
}

// resetWebsimStats clears websim's visitor statistics.
func resetWebsimStats(ctx context.Context, admin string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+admin+"/_websim/stats/reset", nil)
	if err != nil {
		return fmt.Errorf("bench: websim stats reset: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("bench: websim stats reset: %w", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("bench: websim stats reset: %s", resp.Status)
	}
	return nil
}

// Report is a short human report of res: one line per configuration, then
// the nodes, then the rounds.
func (res ClusterResult) Report(cfg ClusterConfig) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	extent := "to exhaustion"
	if cfg.Rounds > 0 {
		extent = fmt.Sprintf("%d rounds", cfg.Rounds)
	}
	p("cluster crawl: %d %s hosts × %d pages on %d addresses, %s, width %d, %d per host, %d workers per node\n",
		cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs, extent, cfg.Width, cfg.PerHost, cfg.Workers)
	p("  host delay %v, ip delay %v, max crawl-delay %v, fsync %v; websim and every node in their own processes on %d CPUs\n",
		cfg.HostDelay, cfg.IPDelay, cfg.MaxCrawlDelay, onOff(!cfg.NoSync), res.NumCPU)
	if cfg.Replicas > 0 {
		p("  site up --replicas %d on every node\n", cfg.Replicas)
	}
	q := res.Quota
	switch q.Mode {
	case QuotaV1, QuotaV2:
		p("  CPU quota: %g core per node (%s: %d µs per %d µs period), a cgroup per node under %s; CPU from %s; websim and bench outside\n",
			q.NodeCPUs, q.Mode, q.QuotaUS, q.PeriodUS, q.Parent, q.Accounting)
	case QuotaNone:
		p("  CPU quota: %g core per node asked, NONE APPLIED: %s\n", q.NodeCPUs, q.Note)
	default:
		p("  CPU quota: none (the nodes share the box uncapped)\n")
	}
	if q.Capped() && q.Note != "" {
		p("  cgroups: %s\n", q.Note)
	}
	base := "×base"
	if len(res.Runs) > 0 && res.Runs[0].RatioBaseNodes > 0 {
		base = fmt.Sprintf("×%d node", res.Runs[0].RatioBaseNodes)
	}
	p("\n  nodes  ended      rounds  window s  pages     pages/s  %7s  site CPU s  µs/page  cg µs/page  quota use  node B/page  staged B/page  websim CPU s  breaches\n", base)
	for _, r := range res.Runs {
		rt := "-"
		if r.Ratio > 0 {
			rt = fmt.Sprintf("%.3f", r.Ratio)
		}
		cg, use := "-", "-"
		if r.SiteCgroupCPUS > 0 {
			cg, use = fmt.Sprintf("%.0f", r.SiteCgroupCPUPerPageUS), fmt.Sprintf("%.2f", r.MaxQuotaUse)
		}
		p("  %5d  %-9s  %6d  %8.1f  %8d  %7.0f  %7s  %10.1f  %7.0f  %10s  %9s  %11.0f  %13.0f  %12.1f  %8d\n",
			r.Nodes, r.Exit, len(r.Rounds), r.WindowS, r.Pages, r.PagesPerSec, rt, r.SiteCPUS, r.SiteCPUPerPageUS, cg, use,
			r.NodeBytesPerPage, r.StagedBytesPerPage, r.WebsimWindowCPUS, r.Breaches)
	}
	p("  (µs/page: the nodes' CPU from /proc over the window, per page of the site; cg: the same from their cgroups; quota use: the busiest node's\n")
	p("   cgroup CPU over window × quota; node B/page: Raft on the wire + crawl-database API bodies sent, all nodes)\n")
	p("\n  nodes  node  roles seen                  exit                      pages  share   CPU s (window)  µs/page  cg CPU s  cg µs/page  quota use  throttled s  CPU s (all)  peak RSS  raft sent  api sent   led rounds\n")
	for _, r := range res.Runs {
		var total int64
		for _, n := range r.NodeList {
			total += n.Pages
		}
		for _, n := range r.NodeList {
			role := strings.Join(n.Roles, ">")
			exit := n.Exit
			if n.Killed {
				exit += " (bench)"
			} else if n.Stopped {
				exit += " (stopped)"
			}
			cgs, cgp, use, thr := "-", "-", "-", "-"
			if n.Cgroup != "" {
				cgs, cgp = fmt.Sprintf("%.1f", n.CgroupWindowCPUS), fmt.Sprintf("%.0f", n.CgroupCPUPerPageUS)
				use, thr = fmt.Sprintf("%.2f", n.QuotaUse), fmt.Sprintf("%.1f", n.ThrottledS)
			}
			p("  %5d  %-4s  %-26s  %-24s  %7d  %5.1f%%  %14.1f  %7.0f  %8s  %10s  %9s  %11s  %11.1f  %8s  %9s  %9s  %10d\n",
				r.Nodes, n.Name, role, exit, n.Pages, 100*ratio(float64(n.Pages), float64(total)), n.WindowCPUS, n.CPUPerPageUS,
				cgs, cgp, use, thr, n.CPUS, mib(n.PeakRSS), mibf(n.RaftSent), mibf(n.APISent), n.RoundsLed)
		}
	}
	p("  (roles: in the node's /status samples, in order of first sight; pages: its fetcher.done at its last sample, retries included)\n")
	for _, r := range res.Runs {
		if k := r.Kill; k != nil {
			replan := "no part moved"
			if k.ReplanS >= 0 {
				replan = fmt.Sprintf("re-plan %.2fs after the kill, last move %.2fs after it (leader %s moved %d parts)", k.ReplanS, k.ReplanLastS, k.Leader, k.Moves)
			}
			p("  kill (%d nodes): %s SIGKILLed %.1fs after n1 was up (%.1fs into the window) holding %d parts; %s\n",
				r.Nodes, k.Node, k.AfterS, k.AtWindowS, k.Parts, replan)
			back := "not within the run"
			if k.LeadersBackS >= 0 {
				back = fmt.Sprintf("%.2fs after the kill (sampled every %v)", k.LeadersBackS, cfg.SampleEvery)
			}
			p("  kill (%d nodes): every shard led again %s; probe %q, %d shard(s), %d led by %s when killed\n",
				r.Nodes, back, k.LeaderProbe, k.Shards, k.ShardsLed, k.Node)
		}
		if r.KillNote != "" {
			p("  kill (%d nodes): %s\n", r.Nodes, r.KillNote)
		}
		if r.Error != "" {
			p("  error (%d nodes): %s\n", r.Nodes, firstLine(r.Error))
		}
		if r.BusyMachines > 0 {
			p("  busy machines (%d nodes): %d beside the nodes, using %.2f cores together\n", r.Nodes, r.BusyMachines, r.BusyCores)
		}
		if r.CgroupNote != "" {
			p("  cgroups (%d nodes): %s\n", r.Nodes, r.CgroupNote)
		}
		for _, s := range r.BreachSample[:min(len(r.BreachSample), 10)] {
			p("  breach (%d nodes): %s\n", r.Nodes, s)
		}
	}
	p("\n  rounds  (start/end s from the window's start; fetched; parts; staged bytes; update leader)\n")
	for _, r := range res.Runs {
		var cells []string
		for _, rd := range r.Rounds {
			cells = append(cells, fmt.Sprintf("%d: %.1f–%.1f %d p%d %s %s", rd.Round, rd.StartS, rd.EndS, rd.Fetched, rd.Parts,
				mibf(rd.StagedBytes), rd.Leader))
		}
		p("  %d node(s): %s\n", r.Nodes, strings.Join(cells, " | "))
	}
	p("\n  websim       CPU %.1fs over all runs; peak RSS %s; %d flaky robots.txt hosts primed before the first run (every run sees the same web)\n",
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
	return b.String()
}

// mibf shows a byte count in MiB with a decimal (KiB below 1 MiB).
func mibf(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

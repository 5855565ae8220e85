package bench

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/meridian-crawler/meridian/websim/synth"
)

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
	// Expect starts every node with --expect-nodes N (the run's node
	// count): the crawl begins once the site has its N nodes (a sharded
	// run's: and every shard is placed).
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
	// Grow, if positive, makes each configuration a growth run (growth.go):
	// GrowAfter after its nodes are up, Grow more join one after another
	// (each once the one before is up, without --expect-nodes); websim's
	// requests are counted in windows of GrowWindow (default 30 s) until
	// GrowTail (default 3 min) after the last join, and the nodes are then
	// stopped. GrowAfter defaults to 90 s.
	Grow       int           `json:"grow,omitempty"`
	GrowAfter  time.Duration `json:"grow_after_ns,omitempty"`
	GrowWindow time.Duration `json:"grow_window_ns,omitempty"`
	GrowTail   time.Duration `json:"grow_tail_ns,omitempty"`
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
	if c.Grow < 0 || c.GrowAfter < 0 || c.GrowWindow < 0 || c.GrowTail < 0 {
		bad("grow, grow-after, grow-window and grow-tail must not be negative")
	}
	if c.Grow > 0 {
		if c.GrowAfter == 0 {
			c.GrowAfter = 90 * time.Second
		}
		if c.GrowWindow == 0 {
			c.GrowWindow = 30 * time.Second
		}
		if c.GrowTail == 0 {
			c.GrowTail = 3 * time.Minute
		}
		if c.GrowTail < 60*time.Second || c.GrowWindow > 60*time.Second || c.GrowWindow > c.GrowAfter {
			bad("grow: the tail must be at least 60s and the window at most 60s and at most grow-after, got tail %v, window %v, after %v", c.GrowTail, c.GrowWindow, c.GrowAfter)
		}
		if c.Steady > 0 || c.KillAfter > 0 {
			bad("grow: a growth run has no steady window and no kill")
		}
		for _, n := range c.Nodes {
			if n+c.Grow > maxClusterNodes {
				bad("grow: %d + %d nodes, more than %d", n, c.Grow, maxClusterNodes)
			}
		}
	}
	if c.Timeout < 10*time.Second {
		bad("timeout must be at least 10s, got %v", c.Timeout)
	}
	return c, errors.Join(errs...)
}

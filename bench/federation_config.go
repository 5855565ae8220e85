package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// Defaults, bounds and targets of RunFederation.
const (
	DefaultFederationTimeout = 15 * time.Minute // per run
	DefaultFederationSample  = time.Second      // /status of every site or node: see FederationConfig.SampleEvery
	maxFederationDelay       = 2 * time.Second  // one-way WAN delay
	maxGeoWorkers            = 10_000           // the central site's workers (Workers × 3): site up --workers's bound
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
	ModeCentral   = "central"   // one one-node site, no federation (FederationConfig.Geo)
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
	// Geo runs the geographic benchmark (issue 22) instead of Delays and
	// Stretched: websim makes each site's fetches pay the modelled round
	// trips between the site and the hosts' cities (GeoClients: each site,
	// or node, fetches from its own loopback address, which websim knows
	// at the site's coordinates), and the web is crawled to exhaustion four
	// ways, one fresh crawl each (GeoModes): federated with the distance
	// partitioner, federated with consistent hashing, by one central site
	// in eu with the three sites' width and workers, and by the stretched
	// site with a node in each region. The WAN delay between sites is
	// Delays' one delay, or if Delays is empty GeoWANDelay (the model's
	// mean one-way delay of the three pairs of sites). Geo needs Rounds 0
	// and a synthetic web (no Replay), and makes Stretched and Partitioner
	// moot (Stretched must be empty).
	Geo bool `json:"geo"`
	// GeoRuns are the geographic runs to make, in GeoModes' order (empty:
	// all of them). A comparison needs the distance run and the other.
	GeoRuns []string `json:"geo_runs,omitempty"`
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
	if c.Geo {
		if len(c.Delays) == 0 {
			c.Delays = []time.Duration{GeoWANDelay()}
		}
		if len(c.Delays) > 1 {
			bad("geo: one WAN delay (or none: the model's), got %v", c.Delays)
		}
		if len(c.Stretched) > 0 {
			bad("geo: the geographic benchmark makes its own stretched run: give no stretched delays, got %v", c.Stretched)
		}
		if c.Rounds != 0 {
			bad("geo: the runs crawl to exhaustion: rounds must be 0, got %d", c.Rounds)
		}
		if len(c.Replay) > 0 {
			bad("geo: the floor needs a synthetic web: no replay")
		}
		for _, m := range c.GeoRuns {
			if !slices.Contains(GeoModes(), m) {
				bad("geo: run %q: want one of %s", m, strings.Join(GeoModes(), ", "))
			}
		}
	} else if len(c.GeoRuns) > 0 {
		bad("geo runs %v without geo", c.GeoRuns)
	}
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
	if n := len(FederationSites()); c.Geo && c.Workers*n > maxGeoWorkers {
		bad("geo: workers × %d sites (the central site's workers) must be at most %d, got %d", n, maxGeoWorkers, c.Workers*n)
	}
	if c.Timeout < 10*time.Second {
		bad("timeout must be at least 10s, got %v", c.Timeout)
	}
	return c, errors.Join(errs...)
}

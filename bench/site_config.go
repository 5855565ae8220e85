package bench

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// Defaults and bounds of SiteConfig.
const (
	DefaultSiteTimeout = 20 * time.Minute
	DefaultSampleEvery = 100 * time.Millisecond
	DefaultStall       = 2 * time.Minute

	maxSiteTimeout  = 24 * time.Hour // SiteConfig.Timeout
	maxBreachesKept = 50             // politeness breaches listed in a result
	maxDupExamples  = 10             // URLs fetched twice listed in a result
	maxHog          = 64             // SiteConfig.Hog
	checkShare      = 5              // the checks keep 1/checkShare of Timeout
)

// SiteConfig configures RunSite: a synthetic web served by websim and one
// site crawling it from a seeds file of every host's front page, each in
// its own process (unless InProcess).
type SiteConfig struct {
	// Hosts, Pages, PageBytes, IPs, Seed and Profile describe the web, as in
	// synth.Options (zero: synth's defaults).
	Hosts     int           `json:"hosts"`
	Pages     int           `json:"pages"`
	PageBytes int           `json:"page_bytes"`
	IPs       int           `json:"ips"`
	Seed      uint64        `json:"seed"`
	Profile   synth.Profile `json:"-"`
	// Rounds is `site up --rounds`: the site stops after this many rounds;
	// 0 runs the crawl until it is exhausted.
	Rounds int `json:"rounds"`
	// Width, PerHost, Workers, HostDelay, IPDelay, MaxCrawlDelay and NoSync
	// are the site's flags of the same names. Zero Width, PerHost and
	// Workers take the site's defaults (10,000, 10, 256); zero delays are
	// zero delays.
	Width         int           `json:"width"`
	PerHost       int           `json:"per_host"`
	Workers       int           `json:"workers"`
	HostDelay     time.Duration `json:"host_delay_ns"`
	IPDelay       time.Duration `json:"ip_delay_ns"`
	MaxCrawlDelay time.Duration `json:"max_crawl_delay_ns"`
	NoSync        bool          `json:"no_sync"`
	// SampleEvery is how often the site's /status (and the processes' CPU
	// and memory) are sampled. Default 100ms.
	SampleEvery time.Duration `json:"sample_every_ns"`
	// Timeout bounds the whole run. The crawl is stopped (SIGTERM) when
	// 1/5 of it is left, so that the checks can still run. Default 20 min.
	Timeout time.Duration `json:"timeout_ns"`
	// Stall stops the site when it has been idle this long (no request in
	// flight, no round active, no page done) without exiting: a crawl that
	// waits for nothing. Default 2 min; negative: never.
	Stall time.Duration `json:"stall_ns"`
	// ScanWARC counts the responses per URL in the site's WARC files.
	ScanWARC bool `json:"scan_warc"`
	// InProcess runs websim and the site in this process instead of
	// building and starting ./cmd/websim and ./cmd/site (quick tests; CPU
	// and memory are then not split between them).
	InProcess bool `json:"in_process"`
	// NoCheck skips the check against the web's truth (coverage,
	// Spearman, politeness): `bench peers` needs the throughput only.
	NoCheck bool `json:"no_check,omitempty"`
	// Watch keeps the site's dashboard open in headless chromium for the
	// run and reports what that cost the site (SiteResult.Watch).
	Watch bool `json:"watch,omitempty"`
	// Hog runs this many CPU busy loops (each its own process) from the
	// site's start to the crawl's end: the overload run, where the site
	// must slow down instead of giving pages up or fetching them twice.
	Hog int `json:"hog,omitempty"`
	// SiteFlags are more `site up` flags (e.g. --revisits=-1), for
	// experiments; not with InProcess.
	SiteFlags []string `json:"site_flags,omitempty"`
	// TimeScale, when positive, serves a web that changes over time
	// (websim serve --changes) at this many simulated seconds per second,
	// from synth.DefaultEpoch; not with InProcess.
	TimeScale float64 `json:"time_scale,omitempty"`
	// RunFor, when positive, stops the crawl this long after the site's
	// start, an expected end (a crawl that refetches does not end by
	// itself); Timeout still bounds the whole run.
	RunFor time.Duration `json:"run_for_ns,omitempty"`
	// Dir is where the run directory (seeds, the site's data, logs) is
	// made; default the system's temporary directory. Keep keeps it.
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

// DefaultSiteConfig is the throughput figure: 10,000 realistic
// hosts of 50 pages on 64 addresses, 10 rounds of 50,000 URLs, at most 10
// per host, 200 ms between requests to a host, robots crawl-delays capped
// at 500 ms, no per-address delay, fsync on, websim and the site in their
// own processes.
func DefaultSiteConfig() SiteConfig {
	return SiteConfig{Hosts: 10_000, Pages: 50, IPs: 64, Seed: 1, Profile: synth.Realistic,
		Rounds: 10, Width: 50_000, PerHost: 10, Workers: 256,
		HostDelay: 200 * time.Millisecond, IPDelay: 0, MaxCrawlDelay: 500 * time.Millisecond,
		SampleEvery: DefaultSampleEvery, Timeout: DefaultSiteTimeout, Stall: DefaultStall}
}

// DefaultCorrectnessConfig is the correctness run: 2,000 realistic hosts of
// 20 pages on 64 addresses crawled to exhaustion, 200 ms between requests
// to a host, 20 ms between request starts to an address, robots
// crawl-delays (1–2 s) honoured in full, WARC files scanned.
func DefaultCorrectnessConfig() SiteConfig {
	return SiteConfig{Hosts: 2_000, Pages: 20, IPs: 64, Seed: 1, Profile: synth.Realistic,
		Rounds: 0, Width: 20_000, PerHost: 20, Workers: 256,
		HostDelay: 200 * time.Millisecond, IPDelay: 20 * time.Millisecond, MaxCrawlDelay: 2 * time.Second,
		SampleEvery: DefaultSampleEvery, Timeout: DefaultSiteTimeout, Stall: DefaultStall, ScanWARC: true}
}

// WithDefaults returns c with its zero fields filled in, or every problem
// with it.
func (c SiteConfig) WithDefaults() (SiteConfig, error) {
	d := site.DefaultConfig()
	if c.Width == 0 {
		c.Width = d.Width
	}
	if c.PerHost == 0 {
		c.PerHost = d.PerHost
	}
	if c.Workers == 0 {
		c.Workers = d.Workers
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = DefaultSampleEvery
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultSiteTimeout
	}
	if c.Stall == 0 {
		c.Stall = DefaultStall
	}
	o := c.webOptions(80)
	c.Hosts, c.Pages, c.PageBytes, c.IPs = o.Hosts, o.Pages, o.PageBytes, o.IPs
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("bench: "+format, args...)) }
	if err := o.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Rounds < 0 {
		bad("rounds must not be negative, got %d", c.Rounds)
	}
	if c.HostDelay < 0 || c.IPDelay < 0 || c.MaxCrawlDelay < 0 {
		bad("delays must not be negative")
	}
	if c.SampleEvery < time.Millisecond || c.SampleEvery > time.Minute {
		bad("sample interval must be in [1ms, 1m], got %v", c.SampleEvery)
	}
	if c.Timeout < 0 || c.Timeout > maxSiteTimeout {
		bad("timeout must be in (0, %v], got %v", maxSiteTimeout, c.Timeout)
	}
	if c.Hog < 0 || c.Hog > maxHog {
		bad("hog must be in [0, %d] busy loops, got %d", maxHog, c.Hog)
	}
	if c.TimeScale < 0 || c.TimeScale > websim.MaxTimeScale || c.TimeScale > 0 && c.InProcess {
		bad("time scale must be in [0, %g] and needs websim in its own process, got %v", float64(websim.MaxTimeScale), c.TimeScale)
	}
	if c.RunFor < 0 || c.RunFor > c.Timeout {
		bad("run-for must be in [0, timeout %v], got %v", c.Timeout, c.RunFor)
	}
	if c.InProcess && len(c.SiteFlags) > 0 {
		bad("site flags %q need the site in its own process (not --in-process)", c.SiteFlags)
	}
	for _, f := range c.SiteFlags {
		if !strings.HasPrefix(f, "--") {
			bad("site flag %q: want --name=value", f)
		}
	}
	// The site checks the rest of its flags itself; check them here too
	// so that a bad value fails before anything is built.
	sc := d
	sc.Width, sc.PerHost, sc.Workers = c.Width, c.PerHost, c.Workers
	if err := sc.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// webOptions returns the synth options of the web, defaults filled in, on port.
func (c *SiteConfig) webOptions(port int) synth.Options {
	o := synth.Options{Hosts: c.Hosts, Pages: c.Pages, Seed: c.Seed, IPs: c.IPs, Port: port,
		Profile: c.Profile, PageBytes: c.PageBytes}
	if c.TimeScale > 0 {
		o.Changes, o.Epoch = true, synth.DefaultEpoch
	}
	o.EnsureDefaults()
	return o
}

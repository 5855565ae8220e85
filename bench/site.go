package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
	"github.com/nlnwa/gowarc/v3"
)

// Sentinel errors of RunSite, returned with the figures gathered so far.
var (
	// ErrCrawlCut: the crawl had to be stopped because SiteConfig.Timeout ran out.
	ErrCrawlCut = errors.New("bench: the crawl did not finish in time and was stopped")
	// ErrCrawlStalled: the site sat idle for SiteConfig.Stall without
	// finishing, and was stopped.
	ErrCrawlStalled = errors.New("bench: the site stalled (idle, not finished) and was stopped")
)

// Defaults and bounds of SiteConfig.
const (
	DefaultSiteTimeout = 20 * time.Minute
	DefaultSampleEvery = 100 * time.Millisecond
	DefaultStall       = 2 * time.Minute

	siteGrace       = time.Minute     // SIGTERM to exit, for the site (it closes its crawl database)
	siteStartBound  = 3 * time.Minute // site start to its status API answering
	statusTimeout   = 2 * time.Second // one GET /status or /_websim/stats
	maxSiteTimeout  = 24 * time.Hour  // SiteConfig.Timeout
	maxBreachesKept = 50              // politeness breaches listed in a result
	maxDupExamples  = 10              // URLs fetched twice listed in a result
	maxHog          = 64              // SiteConfig.Hog
	progressEvery   = 5 * time.Second // progress lines while crawling
	siteLogTail     = 16 << 10        // bytes of the site's output kept for errors
	checkShare      = 5               // the checks keep 1/checkShare of Timeout
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
	o.EnsureDefaults()
	return o
}

// RoundRow is one round of the phase table, from the site's rounds.jsonl.
type RoundRow struct {
	Round uint64 `json:"round"`
	// StartS and EndS are offsets from the first round's start.
	StartS    float64 `json:"start_s"`
	EndS      float64 `json:"end_s"`
	GenerateS float64 `json:"generate_s"`
	FetchS    float64 `json:"fetch_s"`
	UpdateS   float64 `json:"update_s"`
	Generated int     `json:"generated"`
	Fetched   int64   `json:"fetched"`
	OK        int64   `json:"fetched_2xx"`
	Requests  int64   `json:"requests"` // pages, retries, robots.txt and sitemaps
	Bytes     int64   `json:"bytes"`
	NewURLs   int64   `json:"new_urls"`
	WaitS     float64 `json:"politeness_wait_s"`
	Troubled  int     `json:"troubled_hosts"`
}

// ProcStats is what one process cost.
type ProcStats struct {
	PID int `json:"pid"`
	// CPUS is user+system CPU seconds over the process's life (websim: up
	// to when it was stopped); WindowCPUS over the measured window.
	CPUS       float64 `json:"cpu_s"`
	WindowCPUS float64 `json:"window_cpu_s"`
	// PeakRSS is VmHWM from /proc/PID/status, last sampled before the
	// process exited (site) or was stopped (websim).
	PeakRSS int64 `json:"peak_rss_bytes"`
}

// WARCStats counts the response records of the site's WARC files by
// WARC-Target-URI.
type WARCStats struct {
	Files        int   `json:"files"`
	Responses    int64 `json:"responses"`
	Responses2xx int64 `json:"responses_2xx"`
	NoStatus     int64 `json:"responses_without_status"` // an HTTP status could not be read
	Truncated    int64 `json:"responses_truncated"`      // with WARC-Truncated
	URLs         int   `json:"urls"`
	// Multi2xx: URLs with more than one 2xx response; Multi2xxPages: of
	// those, the ones that are not robots.txt or sitemaps.
	Multi2xx      int `json:"urls_multi_2xx"`
	Multi2xxPages int `json:"urls_multi_2xx_pages"`
	// MultiComplete2xx: URLs with more than one 2xx response that is not
	// WARC-Truncated (a truncated page is retried, so a slow host's page
	// can have several truncated 2xx records).
	MultiComplete2xx int `json:"urls_multi_complete_2xx"`
	// MultiAny: URLs with more than one response other than 5xx and 429.
	MultiAny int      `json:"urls_multi_non5xx"`
	Examples []string `json:"examples,omitempty"` // "URL statuses…", up to 10
}

// HostileHost is what happened to one host with a hostile role: what
// websim saw and what the site's rounds.jsonl listed for it.
type HostileHost struct {
	Host   string           `json:"host"`
	Role   string           `json:"role"`
	Websim *websim.Visitor  `json:"websim"` // nil: never requested
	Rounds int              `json:"troubled_rounds"`
	Fate   *rounds.HostFate `json:"troubled,omitempty"` // summed over the rounds that list it
}

// SiteResult is what RunSite measured.
type SiteResult struct {
	// Exit says how the crawl ended: "rounds" (the configured number was
	// done), "exhausted", "cut" (Timeout: stopped with SIGTERM), "stalled"
	// (idle for Stall: stopped) or "exited" (none of these, see the log).
	Exit string `json:"exit"`
	// Dir is the run directory when it was kept.
	Dir    string     `json:"dir,omitempty"`
	Rounds []RoundRow `json:"rounds"`
	// The measured window runs from the first round's start to the last
	// round's end, from rounds.jsonl. Pages counts the final page results
	// of its rounds (every status); PagesPerSec is Pages over the window.
	WindowS       float64 `json:"window_s"`
	Pages         int64   `json:"pages"`
	Pages2xx      int64   `json:"pages_2xx"`
	Requests      int64   `json:"requests"`
	Bytes         int64   `json:"bytes"`
	PagesPerSec   float64 `json:"pages_per_sec"`
	Pages2xxPerS  float64 `json:"pages_2xx_per_sec"`
	RequestsPerS  float64 `json:"requests_per_sec"`
	WallS         float64 `json:"wall_s"`           // site start to exit
	FirstRoundAtS float64 `json:"first_round_at_s"` // site start to the first round's start
	// Fetcher busy fraction: of the /status samples in the window, those
	// with requests in flight. IdleByPhase splits the other samples by the
	// crawler's phase. BusyWorkers is Δbusy_s / (Workers × window).
	Samples      int            `json:"samples"`
	BusySamples  int            `json:"busy_samples"`
	BusyFraction float64        `json:"busy_fraction"`
	IdleByPhase  map[string]int `json:"idle_samples_by_phase"`
	BusyWorkers  float64        `json:"busy_worker_fraction"`
	MeanInFlight float64        `json:"mean_in_flight"`
	StatusErrors int            `json:"status_errors"` // samples that got no answer while the site ran
	Site         ProcStats      `json:"site"`
	// Watch is what the dashboard open in a browser cost (with --watch).
	Watch *WatchResult `json:"watch,omitempty"`
	// Hog is what the CPU hog beside the crawl used (SiteConfig.Hog).
	Hog    *HogResult `json:"hog,omitempty"`
	Websim ProcStats  `json:"websim"`
	// The checks, after the site stopped.
	Coverage       crawlcheck.Coverage `json:"coverage"`
	Ranking        crawlcheck.Ranking  `json:"ranking"`
	Breaches       int                 `json:"politeness_breaches"`
	BreachSample   []string            `json:"politeness_breach_sample,omitempty"`
	WebsimRequests int64               `json:"websim_requests"`
	UnknownHost    int64               `json:"websim_unknown_host_requests"`
	WARC           *WARCStats          `json:"warc,omitempty"`
	Hostile        []HostileHost       `json:"hostile,omitempty"`
	// Floor is the web's politeness floor for the crawl's delays, with the
	// crawl's time to exhaustion over it when it ran to exhaustion.
	Floor  *Floor  `json:"floor,omitempty"`
	CheckS float64 `json:"check_s"`
}

// RunSite serves the web cfg describes with websim, crawls it with a site
// seeded with every host's front page until cfg.Rounds rounds are done or
// the crawl is exhausted, sampling the site's /status meanwhile, and then
// checks the stopped site's crawl against the web's truth. When the
// timeout cuts the crawl it returns what it measured and ErrCrawlCut.
func RunSite(ctx context.Context, cfg SiteConfig) (SiteResult, error) {
	var res SiteResult
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return res, err
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	crawlDeadline := start.Add(cfg.Timeout - cfg.Timeout/checkShare)

	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return res, fmt.Errorf("bench: %w", err)
		}
	}
	dir, err := os.MkdirTemp(cfg.Dir, "meridian-bench-site-")
	if err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	if cfg.Keep {
		res.Dir = dir
	} else {
		defer os.RemoveAll(dir)
	}
	r := &siteRun{cfg: &cfg, dir: dir, data: filepath.Join(dir, "data")}
	defer r.close()
	if err := r.start(ctx); err != nil {
		return res, err
	}
	cfg.Progress("site up (pid %d), data in %s", r.site.pid, r.data)
	var watch *Watch
	if cfg.Watch {
		in, err := site.ReadInfo(r.data)
		if err != nil {
			return res, err
		}
		if watch, err = StartWatch(ctx, "http://"+in.Listen); err != nil {
			return res, err
		}
		cfg.Progress("the dashboard is open in headless chromium")
	}
	var cpuHog *hog
	if cfg.Hog > 0 {
		if cpuHog, err = startHog(ctx, cfg.Hog); err != nil {
			return res, err
		}
		cfg.Progress("%d CPU busy loops running beside the crawl", cfg.Hog)
	}
	ending, err := r.crawl(ctx, crawlDeadline)
	if cpuHog != nil {
		hr := cpuHog.stop()
		res.Hog = &hr
	}
	if err != nil {
		return res, err
	}
	if err := r.collect(ctx, &res, ending); err != nil {
		return res, err
	}
	if watch != nil {
		wr := watch.Stop(r.exited.Sub(r.started), time.Duration(res.Site.CPUS*float64(time.Second)))
		res.Watch = &wr
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bench: site run: %w", err)
	}
	if !cfg.NoCheck {
		t := time.Now()
		cfg.Progress("checking the crawl against the web's truth")
		if err := r.check(ctx, &res); err != nil {
			return res, err
		}
		res.CheckS = time.Since(t).Seconds()
	}
	switch ending {
	case "cut":
		return res, ErrCrawlCut
	case "stalled":
		return res, ErrCrawlStalled
	}
	return res, nil
}

// siteRun is one RunSite: the two processes (or in-process servers), the
// sampler and what it saw.
type siteRun struct {
	cfg  *SiteConfig
	dir  string
	data string
	web  *synth.Web
	sim  *simProc
	site *siteProc
	log  *os.File // the site's output (and the in-process logs)

	samples []sample
	started time.Time // the site's start
	exited  time.Time // the site's exit
}

// simProc is websim, in a subprocess or in this process.
type simProc struct {
	child *child         // subprocess
	srv   *websim.Server // in-process
	pid   int
	dns   string
	admin string
}

// readAddrs reads websim's DNS and admin addresses from its ready file
// (complete once waitReady has read a port from it).
func (p *simProc) readAddrs(ready string) error {
	b, err := os.ReadFile(ready)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "dns="); ok {
			p.dns = v
		} else if v, ok := strings.CutPrefix(f, "admin="); ok {
			p.admin = v
		}
	}
	if p.dns == "" || p.admin == "" {
		return fmt.Errorf("bench: websim ready file without dns= or admin=: %q", b)
	}
	return nil
}

// siteProc is the site, in a subprocess or in this process.
type siteProc struct {
	child  *child // subprocess
	pid    int
	cancel func()        // in-process: stops site.Up
	tail   *tailBuffer   // the end of its output
	exit   chan struct{} // closed when it has exited
	err    error         // its exit error, set before exit is closed
}

// sample is one look at the site and the processes.
type sample struct {
	at       time.Time
	ok       bool // /status answered
	inFlight int64
	done     int64
	busyS    float64
	phase    string
	siteCPU  time.Duration
	simCPU   time.Duration
	siteHWM  int64
	simHWM   int64
}

func (r *siteRun) close() {
	if r.site != nil {
		r.stopSite()
	}
	if r.sim != nil {
		r.stopSim()
	}
	if r.log != nil {
		r.log.Close()
	}
}

// start builds what is needed, starts websim, writes the seeds and starts
// the site.
func (r *siteRun) start(ctx context.Context) error {
	cfg := r.cfg
	var err error
	if r.log, err = os.Create(filepath.Join(r.dir, "site.log")); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	simBin, siteBin := cfg.WebsimBinary, cfg.SiteBinary
	if !cfg.InProcess && (simBin == "" || siteBin == "") {
		root := cfg.ModuleRoot
		if root == "" {
			if root, err = moduleRoot(ctx); err != nil {
				return err
			}
		}
		cfg.Progress("building ./cmd/websim and ./cmd/site")
		if simBin == "" {
			if simBin, err = buildWebsim(ctx, root, r.dir); err != nil {
				return err
			}
		}
		if siteBin == "" {
			if siteBin, err = buildCmd(ctx, root, r.dir, "site"); err != nil {
				return err
			}
		}
	}
	cfg.Progress("starting websim: %d %s hosts × %d pages on %d addresses", cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs)
	if err := r.startSim(ctx, simBin); err != nil {
		return err
	}
	seeds := filepath.Join(r.dir, "seeds.txt")
	if err := writeSeeds(seeds, r.web); err != nil {
		return err
	}
	return r.startSite(ctx, siteBin, seeds)
}

// startSim starts websim with its DNS and admin servers on free ports.
func (r *siteRun) startSim(ctx context.Context, bin string) error {
	o := r.cfg.webOptions(0)
	if r.cfg.InProcess {
		srv, err := websim.Start(websim.Options{Web: o, DNSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0"})
		if err != nil {
			return fmt.Errorf("bench: start websim: %w", err)
		}
		r.sim = &simProc{srv: srv, pid: os.Getpid(), dns: srv.DNSAddr(), admin: srv.AdminAddr()}
		r.web = srv.Web()
		return nil
	}
	ready := filepath.Join(r.dir, "websim-ready")
	args := []string{"serve", "--port", "0", "--dns", "127.0.0.1:0", "--admin", "127.0.0.1:0",
		"--ready-file", ready, "--log-level", "warn", "--progress", "0",
		"--hosts", strconv.Itoa(o.Hosts), "--pages", strconv.Itoa(o.Pages), "--page-bytes", strconv.Itoa(o.PageBytes),
		"--ips", strconv.Itoa(o.IPs), "--ip-base", o.IPBase.String(), "--seed", strconv.FormatUint(o.Seed, 10),
		"--profile", o.Profile.String()}
	c, err := startProcess(bin, args, &tailBuffer{max: 8 << 10}, stopTimeout)
	if err != nil {
		return fmt.Errorf("bench: start websim: %w", err)
	}
	r.sim = &simProc{child: c, pid: c.cmd.Process.Pid}
	port, err := c.waitReady(ctx, ready)
	if err != nil {
		return err
	}
	if err := r.sim.readAddrs(ready); err != nil {
		return err
	}
	o.Port = port
	if r.web, err = synth.New(o); err != nil {
		return fmt.Errorf("bench: rebuild the web: %w", err)
	}
	return nil
}

// startProcess starts bin with args as a child process that dies with this
// one; its output goes to out. stop sends SIGTERM and kills after grace.
func startProcess(bin string, args []string, out io.Writer, grace time.Duration) (*child, error) {
	tail, _ := out.(*tailBuffer)
	if tail == nil {
		tail = &tailBuffer{max: 8 << 10}
		out = io.MultiWriter(out, tail)
	}
	cctx, cancel := context.WithCancel(context.Background()) // ended by stop
	cmd := exec.CommandContext(cctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = grace
	cmd.Stdout, cmd.Stderr = out, out
	setChildAttrs(cmd)
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	c := &child{cmd: cmd, cancel: cancel, waitErr: make(chan error, 1), out: tail}
	go func() { c.waitErr <- cmd.Wait() }() // owner: c; ends when the process does
	return c, nil
}

// buildCmd builds ./cmd/NAME of the module at root into dir and returns
// the binary's path.
func buildCmd(ctx context.Context, root, dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: go build ./cmd/%s in %s: %w: %s", name, root, err, bytes.TrimSpace(out))
	}
	return bin, nil
}

// writeSeeds writes every host's front page to path, one a line.
func writeSeeds(path string, w *synth.Web) error {
	var b bytes.Buffer
	for h := range w.Hosts() {
		b.WriteString(w.FrontURL(h))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("bench: seeds: %w", err)
	}
	return nil
}

// siteArgs are the flags of `site up` for cfg.
func (r *siteRun) siteArgs(seeds string) []string {
	c := r.cfg
	args := []string{"up", "--region", "bench", "--data", r.data, "--seeds", seeds,
		"--dns", r.sim.dns, "--allow-private", "--listen", "127.0.0.1:0",
		"--rounds", strconv.Itoa(c.Rounds), "--width", strconv.Itoa(c.Width), "--per-host", strconv.Itoa(c.PerHost),
		"--workers", strconv.Itoa(c.Workers), "--host-delay", c.HostDelay.String(), "--ip-delay", c.IPDelay.String(),
		"--max-crawl-delay", c.MaxCrawlDelay.String(), "--progress", "5s", "--log-level", "info"}
	if c.NoSync {
		args = append(args, "--no-sync")
	}
	return append(args, c.SiteFlags...)
}

// startSite starts the site and waits for its status API to answer.
func (r *siteRun) startSite(ctx context.Context, bin, seeds string) error {
	c := r.cfg
	tail := &tailBuffer{max: siteLogTail}
	out := io.MultiWriter(r.log, tail)
	r.started = time.Now()
	if c.InProcess {
		sc := site.DefaultConfig()
		sc.Region, sc.Data, sc.Seeds, sc.Websim = "bench", r.data, seeds, "off"
		sc.DNS, sc.AllowPrivate, sc.Listen = r.sim.dns, true, "127.0.0.1:0"
		sc.Rounds, sc.Width, sc.PerHost, sc.Workers = c.Rounds, c.Width, c.PerHost, c.Workers
		sc.HostDelay, sc.IPDelay, sc.MaxCrawlDelay, sc.NoSync = c.HostDelay, c.IPDelay, c.MaxCrawlDelay, c.NoSync
		sc.Progress = 5 * time.Second
		log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx)) // stopped by stopSite
		p := &siteProc{pid: os.Getpid(), cancel: cancel, tail: tail, exit: make(chan struct{})}
		go func() { // owner: siteRun; stopped by cancel
			p.err = site.Up(sctx, sc, log, out)
			close(p.exit)
		}()
		r.site = p
	} else {
		ch, err := startProcess(bin, r.siteArgs(seeds), out, siteGrace)
		if err != nil {
			return fmt.Errorf("bench: start site: %w", err)
		}
		p := &siteProc{child: ch, pid: ch.cmd.Process.Pid, tail: tail, exit: make(chan struct{})}
		go func() { // owner: siteRun; ends when the process does
			err := <-ch.waitErr
			ch.waitErr <- err // for stop
			p.err = err
			close(p.exit)
		}()
		r.site = p
	}
	// The site writes site.json once it is seeded and serving.
	wctx, cancel := context.WithTimeout(ctx, siteStartBound)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := site.ReadInfo(r.data); err == nil {
			return nil
		}
		select {
		case <-r.site.exit:
			return fmt.Errorf("bench: the site exited before it was up (%v): %s", r.site.err, tail)
		case <-wctx.Done():
			return fmt.Errorf("bench: waiting for the site to be up: %w: %s", wctx.Err(), tail)
		case <-tick.C:
		}
	}
}

// crawl samples the site until it exits. It stops the site at deadline
// (ending "cut") or when it has stalled (ending "stalled").
func (r *siteRun) crawl(ctx context.Context, deadline time.Time) (ending string, err error) {
	in, err := site.ReadInfo(r.data)
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: statusTimeout}
	defer client.CloseIdleConnections()
	url := "http://" + in.Listen + "/status"
	tick := time.NewTicker(r.cfg.SampleEvery)
	defer tick.Stop()
	stopAt := time.NewTimer(time.Until(deadline))
	defer stopAt.Stop()
	lastProgress, lastActive, lastDone := time.Now(), time.Now(), int64(-1)
	stop := func(why string) {
		if ending == "" {
			ending = why
			go r.stopSite() // owner: crawl; the exit case below ends the loop
		}
	}
	for {
		select {
		case <-r.site.exit:
			r.exited = time.Now()
			return ending, nil
		case <-ctx.Done():
			r.stopSite()
			return ending, fmt.Errorf("bench: site run: %w", ctx.Err())
		case <-stopAt.C:
			r.cfg.Progress("timeout: stopping the site")
			stop("cut")
		case <-tick.C:
			s := r.sample(client, url)
			r.samples = append(r.samples, s)
			if !s.ok {
				continue
			}
			if s.inFlight > 0 || s.done != lastDone || s.phase != "idle" {
				lastActive, lastDone = s.at, s.done
			}
			if r.cfg.Stall > 0 && s.at.Sub(lastActive) > r.cfg.Stall {
				r.cfg.Progress("the site has been idle for %v without finishing: stopping it", r.cfg.Stall)
				stop("stalled")
			}
			if s.at.Sub(lastProgress) >= progressEvery {
				lastProgress = s.at
				r.cfg.Progress("%5.0fs  %-8s fetched %d, in flight %d, site CPU %.0fs, websim CPU %.0fs",
					s.at.Sub(r.started).Seconds(), s.phase, s.done, s.inFlight, s.siteCPU.Seconds(), s.simCPU.Seconds())
			}
		}
	}
}

// statusBody is the part of the site's /status that the sampler reads.
type statusBody struct {
	Phase   string `json:"phase"`
	Fetcher struct {
		InFlight int64   `json:"in_flight"`
		Done     int64   `json:"done"`
		Busy     float64 `json:"busy_s"`
	} `json:"fetcher"`
}

// sample reads the site's status and both processes' CPU and memory.
func (r *siteRun) sample(client *http.Client, url string) sample {
	s := sample{at: time.Now()}
	if resp, err := client.Get(url); err == nil {
		var st statusBody
		if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil {
			s.ok, s.inFlight, s.done, s.busyS, s.phase = true, st.Fetcher.InFlight, st.Fetcher.Done, st.Fetcher.Busy, st.Phase
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A process that has just exited has no CPU time to read: the sample
	// keeps zero, and is outside the window anyway.
	if r.cfg.InProcess {
		s.siteCPU, _ = selfCPU()
	} else {
		s.siteCPU, _ = procCPU(r.site.pid)
		s.simCPU, _ = procCPU(r.sim.pid)
		s.simHWM = peakRSS(r.sim.pid)
	}
	s.siteHWM = peakRSS(r.site.pid)
	return s
}

// peakRSS returns VmHWM of process pid in bytes, 0 if it cannot be read.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// stopSite stops the site (SIGTERM, killed after siteGrace; or cancelling
// site.Up) and waits for it. It is idempotent.
func (r *siteRun) stopSite() {
	p := r.site
	if p.child != nil {
		p.child.cancel()
		<-p.exit
		p.child.stop() // reaps: the exit watcher has put the result back
		return
	}
	p.cancel()
	<-p.exit
}

// stopSim stops websim; it is idempotent.
func (r *siteRun) stopSim() error {
	if r.sim.child != nil {
		return r.sim.child.stop()
	}
	return r.sim.srv.Close()
}

// collect reads what the stopped site left (rounds.jsonl), websim's
// statistics, and turns the samples into figures.
func (r *siteRun) collect(ctx context.Context, res *SiteResult, ending string) error {
	p := r.site
	res.WallS = r.exited.Sub(r.started).Seconds()
	res.Site.PID, res.Websim.PID = p.pid, r.sim.pid
	if p.child != nil {
		if ps := p.child.cmd.ProcessState; ps != nil {
			res.Site.CPUS = (ps.UserTime() + ps.SystemTime()).Seconds()
		}
	}
	if p.err != nil && ending == "" {
		return fmt.Errorf("bench: the site failed: %w: %s", p.err, p.tail)
	}
	stats, err := readRoundStats(filepath.Join(r.data, "stats", "rounds.jsonl"))
	if err != nil {
		return err
	}
	switch {
	case ending != "":
		res.Exit = ending
	case strings.Contains(p.tail.String(), "crawl exhausted"):
		res.Exit = "exhausted"
	case r.cfg.Rounds > 0 && len(stats) >= r.cfg.Rounds:
		res.Exit = "rounds"
	default:
		res.Exit = "exited"
	}
	winStart, winEnd := res.table(stats, r.started)

	// websim's view, before it is stopped.
	snap, err := fetchSnapshot(ctx, r.sim.admin)
	if err != nil {
		return err
	}
	if r.sim.child != nil {
		res.Websim.PeakRSS = peakRSS(r.sim.pid)
		if cpu, err := procCPU(r.sim.pid); err == nil {
			res.Websim.CPUS = cpu.Seconds()
		}
	}
	if err := r.stopSim(); err != nil {
		return err
	}
	res.WebsimRequests, res.UnknownHost = snap.Requests, snap.UnknownHost
	r.politeness(res, snap)
	if r.cfg.Profile == synth.Hostile {
		res.Hostile = hostileReport(r.web, snap, stats)
	}
	r.busy(res, winStart, winEnd)
	return nil
}

// readRoundStats reads the site's stats/rounds.jsonl.
func readRoundStats(path string) ([]rounds.RoundStats, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	var out []rounds.RoundStats
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for line := 1; sc.Scan(); line++ {
		var s rounds.RoundStats
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("bench: %s:%d: %w", path, line, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Round < out[j].Round })
	return out, nil
}

// table fills the phase table and the throughput figures, and returns the
// measured window.
func (res *SiteResult) table(stats []rounds.RoundStats, siteStart time.Time) (time.Time, time.Time) {
	if len(stats) == 0 {
		return time.Time{}, time.Time{}
	}
	start, end := stats[0].Started, stats[0].Ended
	for _, s := range stats {
		if s.Started.Before(start) {
			start = s.Started
		}
		if s.Ended.After(end) {
			end = s.Ended
		}
	}
	for _, s := range stats {
		row := RoundRow{Round: s.Round, StartS: s.Started.Sub(start).Seconds(), EndS: s.Ended.Sub(start).Seconds(),
			GenerateS: s.GenerateSeconds, FetchS: s.FetchSeconds, UpdateS: s.UpdateSeconds,
			Generated: s.Generated, Fetched: s.Fetched, OK: s.ByClass["2xx"],
			Requests: s.Fetched + s.Retries + s.Robots + s.Sitemaps, Bytes: s.Bytes, NewURLs: s.NewURLs,
			WaitS: s.WaitSecs, Troubled: len(s.Troubled)}
		res.Rounds = append(res.Rounds, row)
		res.Pages += row.Fetched
		res.Pages2xx += row.OK
		res.Requests += row.Requests
		res.Bytes += row.Bytes
	}
	res.WindowS = end.Sub(start).Seconds()
	res.FirstRoundAtS = start.Sub(siteStart).Seconds()
	if res.WindowS > 0 {
		res.PagesPerSec = float64(res.Pages) / res.WindowS
		res.Pages2xxPerS = float64(res.Pages2xx) / res.WindowS
		res.RequestsPerS = float64(res.Requests) / res.WindowS
	}
	return start, end
}

// busy turns the samples in [start, end] into the busy fraction and the
// processes' CPU over the window.
func (r *siteRun) busy(res *SiteResult, start, end time.Time) {
	res.IdleByPhase = map[string]int{}
	var first, last *sample
	var inFlight int64
	for i := range r.samples {
		s := &r.samples[i]
		if s.siteHWM > 0 {
			res.Site.PeakRSS = s.siteHWM
		}
		if s.simHWM > res.Websim.PeakRSS {
			res.Websim.PeakRSS = s.simHWM
		}
		if s.at.Before(start) || s.at.After(end) {
			continue
		}
		if !s.ok {
			res.StatusErrors++
			continue
		}
		if first == nil {
			first = s
		}
		last = s
		res.Samples++
		inFlight += s.inFlight
		if s.inFlight > 0 {
			res.BusySamples++
		} else {
			res.IdleByPhase[s.phase]++
		}
	}
	if res.Samples > 0 {
		res.BusyFraction = float64(res.BusySamples) / float64(res.Samples)
		res.MeanInFlight = float64(inFlight) / float64(res.Samples)
	}
	if first != nil && last != first {
		span := last.at.Sub(first.at).Seconds()
		res.BusyWorkers = (last.busyS - first.busyS) / (float64(r.cfg.Workers) * span)
		res.Site.WindowCPUS = (last.siteCPU - first.siteCPU).Seconds() * res.WindowS / span
		res.Websim.WindowCPUS = (last.simCPU - first.simCPU).Seconds() * res.WindowS / span
	}
}

// fetchSnapshot reads websim's visitor statistics.
func fetchSnapshot(ctx context.Context, admin string) (*websim.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/_websim/stats", nil)
	if err != nil {
		return nil, fmt.Errorf("bench: websim stats: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: websim stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: websim stats: %s", resp.Status)
	}
	var snap websim.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		return nil, fmt.Errorf("bench: websim stats: %w", err)
	}
	return &snap, nil
}

// politeness checks websim's statistics against the host delay, the
// address delay and each host's robots crawl-delay (capped as the site
// caps it).
func (r *siteRun) politeness(res *SiteResult, snap *websim.Snapshot) {
	res.Breaches, res.BreachSample = politenessBreaches(r.web, snap, r.cfg.HostDelay, r.cfg.IPDelay, r.cfg.MaxCrawlDelay)
}

// politenessBreaches counts the breaches in websim's statistics of web w
// (each robots.txt violation counts) and lists up to maxBreachesKept.
func politenessBreaches(w *synth.Web, snap *websim.Snapshot, hostDelay, ipDelay, maxCrawlDelay time.Duration) (int, []string) {
	delays := map[string]time.Duration{}
	for _, h := range w.Hosts() {
		if h.CrawlDelay > 0 {
			delays[h.Name] = min(time.Duration(h.CrawlDelay)*time.Second, maxCrawlDelay)
		}
	}
	b := crawlcheck.Politeness(snap, hostDelay, ipDelay, func(host string) time.Duration { return delays[host] })
	n := len(b)
	if snap.RobotsViolationCount > 0 { // one line for them all: count each violation
		n += int(snap.RobotsViolationCount) - 1
	}
	return n, b[:min(len(b), maxBreachesKept)]
}

// hostileReport lists the hosts with a hostile role: what websim saw of
// them and what the rounds' troubled_hosts said.
func hostileReport(w *synth.Web, snap *websim.Snapshot, stats []rounds.RoundStats) []HostileHost {
	var out []HostileHost
	for _, h := range w.Hosts() {
		if h.Role == synth.RoleNone {
			continue
		}
		hh := HostileHost{Host: h.Name, Role: h.Role.String(), Websim: snap.Hosts[h.Name]}
		for _, s := range stats {
			for name, f := range s.Troubled {
				if stripPort(name) != h.Name {
					continue
				}
				hh.Rounds++
				if hh.Fate == nil {
					hh.Fate = &rounds.HostFate{ByStatus: map[string]int64{}}
				}
				for k, n := range f.ByStatus {
					hh.Fate.ByStatus[k] += n
				}
				hh.Fate.Retries += f.Retries
				hh.Fate.Truncated += f.Truncated
				if f.LastError != "" {
					hh.Fate.LastError = f.LastError
				}
			}
		}
		out = append(out, hh)
	}
	return out
}

func stripPort(host string) string {
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		return host[:i]
	}
	return host
}

// check opens the stopped site's crawl database and compares it with the
// web's truth; it also scans the WARC files if asked.
func (r *siteRun) check(ctx context.Context, res *SiteResult) error {
	truth, err := compactTruth(r.web)
	if err != nil {
		return err
	}
	st, err := crawldb.OpenStore(filepath.Join(r.data, "crawldb"), store.Options{})
	if err != nil {
		return fmt.Errorf("bench: open the site's crawl database: %w", err)
	}
	defer st.Close()
	if res.Coverage, err = crawlcheck.Check(truth, st); err != nil {
		return fmt.Errorf("bench: coverage: %w", err)
	}
	if res.Ranking, err = crawlcheck.CompareRanking(truth, st); err != nil {
		return fmt.Errorf("bench: ranking: %w", err)
	}
	f := PolitenessFloor(r.web, truth, r.cfg.HostDelay, r.cfg.IPDelay, r.cfg.MaxCrawlDelay)
	if res.Exit == "exhausted" && f.S > 0 {
		f.Ratio = res.WindowS / f.S
	}
	res.Floor = &f
	if r.cfg.ScanWARC {
		w, err := scanWARC(ctx, filepath.Join(r.data, "warc"))
		if err != nil {
			return err
		}
		res.WARC = &w
	}
	return nil
}

// compactTruth is crawlcheck.Truth with every string interned and outlinks
// kept only where PageRank reads them (pages with status 200), so that a
// web of millions of URLs fits in a few hundred MB.
func compactTruth(w *synth.Web) ([]synth.Record, error) {
	strs := map[string]string{}
	intern := func(s string) string {
		if v, ok := strs[s]; ok {
			return v
		}
		strs[s] = s
		return s
	}
	var recs []synth.Record
	err := w.Truth(func(r *synth.Record) error {
		c := *r
		c.URL, c.Canonical, c.Host, c.IP = intern(r.URL), intern(r.Canonical), intern(r.Host), intern(r.IP)
		c.ContentType, c.Kind, c.Role, c.DuplicateOf = intern(r.ContentType), intern(r.Kind), intern(r.Role), intern(r.DuplicateOf)
		c.Outlinks = nil
		if r.Status == http.StatusOK && r.Kind != "robots" && r.Kind != "sitemap" {
			c.Outlinks = make([]string, len(r.Outlinks))
			for i, l := range r.Outlinks {
				c.Outlinks[i] = intern(l)
			}
		}
		recs = append(recs, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: the web's truth: %w", err)
	}
	return recs, nil
}

// scanWARC counts the response records in dir's WARC files by URL.
func scanWARC(ctx context.Context, dir string) (WARCStats, error) {
	var st WARCStats
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil {
		return st, fmt.Errorf("bench: %w", err)
	}
	open, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz.open")) // left by a site that was killed
	files = append(files, open...)
	sort.Strings(files)
	st.Files = len(files)
	byURL := map[string][]int{}
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("bench: scan WARC files: %w", err)
		}
		if err := scanWARCFile(path, byURL, &st); err != nil {
			return st, err
		}
	}
	st.URLs = len(byURL)
	var examples []string
	for u, codes := range byURL {
		ok, complete, other := 0, 0, 0
		shown := make([]string, len(codes))
		for i, c := range codes {
			shown[i] = strconv.Itoa(c)
			if c >= truncatedMark {
				c -= truncatedMark
				shown[i] = strconv.Itoa(c) + "(truncated)"
			} else if c/100 == 2 {
				complete++
			}
			if c/100 == 2 {
				ok++
			}
			if c/100 != 5 && c != http.StatusTooManyRequests {
				other++
			}
		}
		if complete > 1 {
			st.MultiComplete2xx++
		}
		if ok > 1 {
			st.Multi2xx++
			if !strings.HasSuffix(u, "/robots.txt") && !strings.Contains(u, "sitemap") {
				st.Multi2xxPages++
			}
		}
		if other > 1 {
			st.MultiAny++
			examples = append(examples, u+" "+strings.Join(shown, " "))
		}
	}
	sort.Strings(examples)
	st.Examples = examples[:min(len(examples), maxDupExamples)]
	return st, nil
}

// warcOptions make gowarc lenient (a torn or odd record still counts) but
// have it parse HTTP response blocks, whose status is what is counted.
var warcOptions = []gowarc.WarcRecordOption{
	gowarc.WithSyntaxErrorPolicy(gowarc.ErrIgnore),
	gowarc.WithSpecViolationPolicy(gowarc.ErrIgnore),
	gowarc.WithUnknownRecordTypePolicy(gowarc.ErrIgnore),
	gowarc.WithBlockErrorPolicy(gowarc.ErrIgnore),
}

// truncatedMark is added to the status of a WARC-Truncated response while
// scanning.
const truncatedMark = 1000

// scanWARCFile adds the statuses of path's response records to byURL
// (-1: no HTTP status could be read; truncatedMark added: truncated).
func scanWARCFile(path string, byURL map[string][]int, st *WARCStats) error {
	rd, err := gowarc.NewWarcFileReader(path, 0, warcOptions...)
	if err != nil {
		return fmt.Errorf("bench: open %s: %w", path, err)
	}
	defer rd.Close()
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			rec.Close()
			if strings.HasSuffix(path, ".open") { // a torn last record
				return nil
			}
			return fmt.Errorf("bench: read %s at %d: %w", path, rec.Offset, err)
		}
		wr := rec.WarcRecord
		if wr.Type() == gowarc.Response {
			code := -1
			if hb, ok := wr.Block().(gowarc.HttpResponseBlock); ok {
				code = hb.HttpStatusCode()
			}
			u := wr.WarcHeader().Get(gowarc.WarcTargetURI)
			st.Responses++
			switch {
			case code < 0:
				st.NoStatus++
			case code/100 == 2:
				st.Responses2xx++
			}
			if code >= 0 && wr.WarcHeader().Has(gowarc.WarcTruncated) {
				st.Truncated++
				code += truncatedMark
			}
			byURL[u] = append(byURL[u], code)
		}
		rec.Close()
	}
}

// Report is a short human report of r.
func (r SiteResult) Report(cfg SiteConfig) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	mode := "websim and the site in their own processes"
	if cfg.InProcess {
		mode = "websim and the site in this process"
	}
	extent := "to exhaustion"
	if cfg.Rounds > 0 {
		extent = fmt.Sprintf("%d rounds", cfg.Rounds)
	}
	p("site crawl: %d %s hosts × %d pages on %d addresses, %s, width %d, %d per host, %d workers\n",
		cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs, extent, cfg.Width, cfg.PerHost, cfg.Workers)
	p("  host delay %v, ip delay %v, max crawl-delay %v, fsync %v; %s\n",
		cfg.HostDelay, cfg.IPDelay, cfg.MaxCrawlDelay, onOff(!cfg.NoSync), mode)
	p("  ended: %s after %d rounds; site wall %.1fs, first round %.1fs after start\n", r.Exit, len(r.Rounds), r.WallS, r.FirstRoundAtS)
	p("\n  round  start s  gen s  fetch s  upd s  generated  fetched   2xx     new URLs  pages/s (fetch)\n")
	for _, row := range r.Rounds {
		rate := 0.0
		if row.FetchS > 0 {
			rate = float64(row.Fetched) / row.FetchS
		}
		p("  %5d  %7.1f  %5.2f  %7.2f  %5.2f  %9d  %7d  %7d  %8d  %7.0f\n", row.Round, row.StartS, row.GenerateS, row.FetchS, row.UpdateS,
			row.Generated, row.Fetched, row.OK, row.NewURLs, rate)
	}
	p("\n  throughput   %.0f pages/s (%d pages in %.1fs, first round start → last round end); %.0f 2xx/s; %.0f requests/s\n",
		r.PagesPerSec, r.Pages, r.WindowS, r.Pages2xxPerS, r.RequestsPerS)
	p("  fetcher busy %.1f%% of %d samples (in flight > 0; mean in flight %.0f); busy_s / (workers × window) %.1f%%\n",
		100*r.BusyFraction, r.Samples, r.MeanInFlight, 100*r.BusyWorkers)
	if len(r.IdleByPhase) > 0 {
		p("  idle samples by phase %v\n", r.IdleByPhase)
	}
	if cfg.InProcess {
		p("  CPU          %.1fs in the window (this process: websim, site and bench together)\n", r.Site.WindowCPUS)
	} else {
		p("  site         CPU %.1fs in the window (%.2f cores, %.0f µs/page), %.1fs in all; peak RSS %s\n",
			r.Site.WindowCPUS, ratio(r.Site.WindowCPUS, r.WindowS), 1e6*ratio(r.Site.WindowCPUS, float64(r.Pages)), r.Site.CPUS, mib(r.Site.PeakRSS))
		p("  websim       CPU %.1fs in the window (%.2f cores, %.0f µs/page), %.1fs in all; peak RSS %s\n",
			r.Websim.WindowCPUS, ratio(r.Websim.WindowCPUS, r.WindowS), 1e6*ratio(r.Websim.WindowCPUS, float64(r.Pages)), r.Websim.CPUS, mib(r.Websim.PeakRSS))
		p("  CPU ratio    site ÷ websim per page %.2f\n", ratio(r.Site.WindowCPUS, r.Websim.WindowCPUS))
	}
	if h := r.Hog; h != nil {
		p("  CPU hog      %d busy loops beside the crawl for %.1fs: %.1fs of CPU (%.2f cores)\n", h.Threads, h.Seconds, h.CPUS, h.Cores)
	}
	p("  coverage     %.2f%% of %d reachable robots-allowed URLs (%d URLs with a final status; %d robots-disallowed fetched)\n",
		100*r.Coverage.Ratio, r.Coverage.Targets, r.Coverage.Fetched, r.Coverage.Disallow)
	p("  ranking      Spearman OPIC vs PageRank %.3f over %d pages\n", r.Ranking.Spearman, r.Ranking.Pages)
	if w := r.Watch; w != nil {
		p("  dashboard    %d updates rendered, %.0f served in %.2fs of CPU (%.2fs wall, lock waits included): %.3f%% of a core, %.3f%% of the site's CPU; %d bytes an update; %d console errors\n",
			w.Polls, w.ServedPolls, w.ServedCPU, w.ServedSeconds, 100*w.ShareOfCore, 100*w.ShareOfSite, w.PayloadBytes, len(w.ConsoleErrors))
	}
	p("  politeness   %d breaches in websim's statistics (%d requests)\n", r.Breaches, r.WebsimRequests)
	if f := r.Floor; f != nil {
		p("  floor        %.1fs: %s, %d robots-allowed URLs × %.2fs", f.S, f.By, f.URLs, f.DelayS)
		if f.Ratio > 0 {
			p("; time to exhaustion %.1fs = %.2f× the floor", r.WindowS, f.Ratio)
		}
		p("\n")
	}
	for _, s := range r.BreachSample[:min(len(r.BreachSample), 10)] {
		p("               %s\n", s)
	}
	if w := r.WARC; w != nil {
		p("  WARC         %d responses (%d 2xx, %d truncated, %d without a status) for %d URLs in %d files\n",
			w.Responses, w.Responses2xx, w.Truncated, w.NoStatus, w.URLs, w.Files)
		p("               URLs with >1 2xx response: %d (%d not robots.txt or sitemaps; %d with >1 untruncated); with >1 response not 5xx/429: %d\n",
			w.Multi2xx, w.Multi2xxPages, w.MultiComplete2xx, w.MultiAny)
		for _, e := range w.Examples {
			p("               %s\n", e)
		}
	}
	for _, h := range r.Hostile {
		v := "never requested"
		if h.Websim != nil {
			mi := "-"
			if h.Websim.MinIntervalMS != nil {
				mi = fmt.Sprintf("%.0fms", *h.Websim.MinIntervalMS)
			}
			v = fmt.Sprintf("%d requests %v, max %d at once, min interval %s", h.Websim.Requests, h.Websim.Statuses, h.Websim.MaxConcurrent, mi)
		}
		f := "not listed"
		if h.Fate != nil {
			f = fmt.Sprintf("%d rounds: %v retries %d truncated %d, last error %q", h.Rounds, h.Fate.ByStatus, h.Fate.Retries, h.Fate.Truncated, h.Fate.LastError)
		}
		p("  %-14s %-10s websim: %s\n  %25s troubled_hosts: %s\n", h.Host, h.Role, v, "", f)
	}
	return b.String()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(b) {
		return 0
	}
	return a / b
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

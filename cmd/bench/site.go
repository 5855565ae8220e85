package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/bench"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// siteJSON is the one-line JSON result of bench site and bench correctness.
type siteJSON struct {
	Benchmark string            `json:"benchmark"`
	Profile   string            `json:"profile"`
	Config    bench.SiteConfig  `json:"config"`
	Result    bench.SiteResult  `json:"result"`
	Targets   map[string]target `json:"targets"`
	Commit    string            `json:"commit,omitempty"` // git HEAD where the benchmark ran, "+dirty" with uncommitted changes
	Load      [3]float64        `json:"load_average_start"`
	LoadEnd   [3]float64        `json:"load_average_end"`
	ElapsedS  float64           `json:"elapsed_s"`
	NumCPU    int               `json:"num_cpu"`
	GoVersion string            `json:"go_version"`
	Time      string            `json:"time"`
	Error     string            `json:"error,omitempty"`
}

// target is one of the targets and whether the run met it.
type target struct {
	Want string  `json:"want"`
	Got  float64 `json:"got"`
	Met  bool    `json:"met"`
}

// runSite is `bench site`: the throughput figure.
func runSite(args []string, stdout, stderr io.Writer) error {
	return runSiteBench("site", bench.DefaultSiteConfig(), args, stdout, stderr)
}

// runCorrectness is `bench correctness`: a crawl to exhaustion, checked.
func runCorrectness(args []string, stdout, stderr io.Writer) error {
	return runSiteBench("correctness", bench.DefaultCorrectnessConfig(), args, stdout, stderr)
}

func runSiteBench(name string, cfg bench.SiteConfig, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Hosts, "hosts", cfg.Hosts, "websim hosts")
	fs.IntVar(&cfg.Pages, "pages", cfg.Pages, "mean pages per host")
	fs.IntVar(&cfg.PageBytes, "page-bytes", cfg.PageBytes, "mean HTML page size in bytes (0: websim's 10,000)")
	fs.IntVar(&cfg.IPs, "ips", cfg.IPs, "loopback addresses the hosts are spread over")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "websim seed")
	profile := fs.String("profile", cfg.Profile.String(), "websim profile: clean, realistic or hostile")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "site up --rounds (0: until the crawl is exhausted)")
	fs.IntVar(&cfg.Width, "width", cfg.Width, "site up --width: URLs per round")
	fs.IntVar(&cfg.PerHost, "per-host", cfg.PerHost, "site up --per-host: URLs per host per round")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "site up --workers: concurrent fetches")
	fs.DurationVar(&cfg.HostDelay, "host-delay", cfg.HostDelay, "site up --host-delay")
	fs.DurationVar(&cfg.IPDelay, "ip-delay", cfg.IPDelay, "site up --ip-delay")
	fs.DurationVar(&cfg.MaxCrawlDelay, "max-crawl-delay", cfg.MaxCrawlDelay, "site up --max-crawl-delay: robots Crawl-delay honoured up to this")
	fs.BoolVar(&cfg.NoSync, "no-sync", cfg.NoSync, "site up --no-sync: no fsync of the Raft log")
	fs.DurationVar(&cfg.SampleEvery, "sample", cfg.SampleEvery, "interval of the /status, CPU and memory samples")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on the whole run (the crawl is stopped with a fifth of it left, for the checks)")
	fs.DurationVar(&cfg.Stall, "stall", cfg.Stall, "stop the site when it has been idle this long without finishing (negative: never)")
	fs.BoolVar(&cfg.ScanWARC, "scan-warc", cfg.ScanWARC, "count the responses per URL in the site's WARC files")
	siteFlags := fs.String("site-flags", "", "more `site up` flags, space-separated (e.g. \"--revisits=-1 --damping=1\")")
	fs.BoolVar(&cfg.NoCheck, "no-check", cfg.NoCheck, "skip the check against the web's truth (throughput only)")
	fs.BoolVar(&cfg.Watch, "watch", cfg.Watch, "keep the site's dashboard open in headless chromium and report what it cost the site")
	fs.IntVar(&cfg.Hog, "hog", cfg.Hog, "run this many CPU busy loops beside the crawl (the overload run)")
	fs.BoolVar(&cfg.InProcess, "in-process", cfg.InProcess, "run websim and the site in this process (CPU and memory not split)")
	fs.StringVar(&cfg.Dir, "dir", "", "where to make the run directory (default: the temporary directory)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the run directory (seeds, the site's data and log)")
	fs.StringVar(&cfg.ModuleRoot, "module-root", "", "directory of Meridian's go.mod, where ./cmd/websim and ./cmd/site are built (default: found)")
	fs.StringVar(&cfg.WebsimBinary, "websim-bin", "", "run this websim binary instead of building one")
	fs.StringVar(&cfg.SiteBinary, "site-bin", "", "run this site binary instead of building one")
	jsonPath := fs.String("json", "", "also write the JSON result to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	p, err := synth.ParseProfile(*profile)
	if err != nil {
		return fmt.Errorf("bench: --profile: %w", err)
	}
	cfg.Profile = p
	cfg.SiteFlags = strings.Fields(*siteFlags)
	if cfg, err = cfg.WithDefaults(); err != nil {
		return err
	}
	cfg.Progress = func(format string, args ...any) {
		fmt.Fprintf(stderr, "  %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := siteJSON{Benchmark: name, Profile: p.String(), Commit: gitCommit(ctx, cfg.ModuleRoot), Load: loadAverage(),
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version()}
	fmt.Fprintf(stderr, "bench %s: commit %s, load average %.2f %.2f %.2f\n", name, out.Commit, out.Load[0], out.Load[1], out.Load[2])
	start := time.Now()
	res, err := bench.RunSite(ctx, cfg)
	if err != nil && !errors.Is(err, bench.ErrCrawlCut) && !errors.Is(err, bench.ErrCrawlStalled) {
		return err
	}
	out.Config, out.Result, out.ElapsedS = cfg, res, time.Since(start).Seconds()
	out.LoadEnd, out.Time = loadAverage(), time.Now().UTC().Format(time.RFC3339)
	if err != nil {
		out.Error = err.Error()
	}
	out.Targets = targets(name, cfg, res)
	fmt.Fprint(stdout, res.Report(cfg))
	fmt.Fprintf(stdout, "  load average %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end (%d CPUs); commit %s\n",
		out.Load[0], out.Load[1], out.Load[2], out.LoadEnd[0], out.LoadEnd[1], out.LoadEnd[2], out.NumCPU, out.Commit)
	for _, k := range slices.Sorted(maps.Keys(out.Targets)) {
		t := out.Targets[k]
		verdict := "met"
		if !t.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(stdout, "  target %-22s want %-8s got %-10.4g %s\n", k, t.Want, t.Got, verdict)
	}
	if jerr := emitJSON(stdout, *jsonPath, out); jerr != nil {
		return jerr
	}
	if perr := writeFigures(stderr, *jsonPath, "", res.Figures()); perr != nil {
		return perr
	}
	return err
}

// targets are the targets for benchmark name.
func targets(name string, cfg bench.SiteConfig, r bench.SiteResult) map[string]target {
	t := map[string]target{}
	if name == "site" {
		t["pages_per_sec"] = target{"≥ 3000", r.PagesPerSec, r.PagesPerSec >= 3000}
		t["busy_fraction"] = target{"≥ 0.85", r.BusyFraction, r.BusyFraction >= 0.85}
		if !cfg.InProcess {
			gib := float64(r.Site.PeakRSS) / (1 << 30)
			t["site_peak_rss_gib"] = target{"≤ 2", gib, r.Site.PeakRSS > 0 && gib <= 2}
		}
	} else {
		t["coverage"] = target{"≥ 0.99", r.Coverage.Ratio, r.Coverage.Ratio >= 0.99}
		t["politeness_breaches"] = target{"0", float64(r.Breaches), r.Breaches == 0}
		if r.WARC != nil {
			t["urls_multi_2xx"] = target{"0", float64(r.WARC.Multi2xx), r.WARC.Multi2xx == 0}
		}
		if f := r.Floor; f != nil && cfg.Rounds == 0 {
			// Issue 11: time to exhaustion within 1.25× the politeness floor.
			t["floor_ratio"] = target{"≤ 1.25", f.Ratio, f.Ratio > 0 && f.Ratio <= 1.25}
		}
	}
	t["spearman"] = target{"≥ 0.7", r.Ranking.Spearman, r.Ranking.Spearman >= 0.7}
	return t
}

// loadAverage reads /proc/loadavg (zeros where it cannot).
func loadAverage() [3]float64 {
	var l [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &l[0], &l[1], &l[2])
	}
	return l
}

// gitCommit returns the HEAD commit of the repository at dir ("" : the
// current directory), with "+dirty" if tracked files have changes; "" when
// git cannot tell.
func gitCommit(ctx context.Context, dir string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	head, err := git("rev-parse", "--short=12", "HEAD")
	if err != nil {
		return ""
	}
	if st, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
		head += "+dirty"
	}
	return head
}

// runCompare prints two `bench site` (or two `bench correctness`) JSON
// results side by side, with B/A.
func runCompare(args []string, stdout io.Writer) error {
	if len(args) != 2 {
		return errors.New("bench compare: want two result files: A.json B.json")
	}
	var runs [2]siteJSON
	var names [2]string
	for i, path := range args {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("bench compare: %w", err)
		}
		if err := json.Unmarshal(b, &runs[i]); err != nil {
			return fmt.Errorf("bench compare: %s: %w", path, err)
		}
		if runs[i].Benchmark != "site" && runs[i].Benchmark != "correctness" {
			return fmt.Errorf("bench compare: %s: a %q result, want a site or correctness result", path, runs[i].Benchmark)
		}
		names[i] = fmt.Sprintf("%s (commit %s, %s, site flags %q", path, runs[i].Commit, runs[i].Time, runs[i].Config.SiteFlags)
		if runs[i].Config.Hog > 0 {
			names[i] += fmt.Sprintf(", %d CPU busy loops beside it", runs[i].Config.Hog)
		}
		names[i] += ")"
	}
	if runs[0].Benchmark != runs[1].Benchmark {
		return fmt.Errorf("bench compare: a %s result against a %s result", runs[0].Benchmark, runs[1].Benchmark)
	}
	if runs[0].Config.Hosts != runs[1].Config.Hosts || runs[0].Config.Rounds != runs[1].Config.Rounds || runs[0].Config.Width != runs[1].Config.Width {
		fmt.Fprintln(stdout, "warning: the two runs crawled different webs or rounds")
	}
	bench.WriteComparison(stdout, names[0], names[1], bench.CompareSites(&runs[0].Result, &runs[1].Result))
	return nil
}

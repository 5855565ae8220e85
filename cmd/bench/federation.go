package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/bench"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// federationJSON is the one-line JSON result of bench federation.
type federationJSON struct {
	Benchmark string                 `json:"benchmark"`
	Profile   string                 `json:"profile"`
	Config    bench.FederationConfig `json:"config"`
	Result    bench.FederationResult `json:"result"`
	Commit    string                 `json:"commit,omitempty"`
	Load      [3]float64             `json:"load_average_start"`
	LoadEnd   [3]float64             `json:"load_average_end"`
	ElapsedS  float64                `json:"elapsed_s"`
	NumCPU    int                    `json:"num_cpu"`
	GoVersion string                 `json:"go_version"`
	Time      string                 `json:"time"`
	Error     string                 `json:"error,omitempty"`
}

// runFederation is `bench federation`: three federated sites crawling one
// web at several WAN delays (issue 10, benchmarks 1 and 3), and one site
// of three nodes stretched across the same WAN (benchmark 2); with --geo,
// the geographic benchmark (issue 22): the web crawled to exhaustion by
// the federation with the distance partitioner, with consistent hashing,
// by one central site and by the stretched site, every fetch paying its
// modelled distance.
//
//	go run ./cmd/bench federation [--hosts 3000 --pages 30 --rounds 8 --delays 0,20ms,40ms,80ms --stretched 40ms --partitioner consistent]
//	go run ./cmd/bench federation --geo [--hosts 1000 --pages 20 --ips 256 --host-delay 100ms --delays 71ms]
func runFederation(args []string, stdout, stderr io.Writer) error {
	cfg, jsonPath, err := federationFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg.Progress = func(format string, args ...any) {
		fmt.Fprintf(stderr, "  %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := federationJSON{Benchmark: "federation", Profile: cfg.Profile.String(), Commit: gitCommit(ctx, cfg.ModuleRoot), Load: loadAverage(),
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version()}
	if cfg.Geo {
		fmt.Fprintf(stderr, "bench federation --geo: %s at %v one-way between sites; commit %s, load average %.2f %.2f %.2f\n",
			strings.Join(bench.GeoModes(), ", "), cfg.Delays, out.Commit, out.Load[0], out.Load[1], out.Load[2])
	} else {
		fmt.Fprintf(stderr, "bench federation: federated at %v, stretched at %v; commit %s, load average %.2f %.2f %.2f\n",
			cfg.Delays, cfg.Stretched, out.Commit, out.Load[0], out.Load[1], out.Load[2])
	}
	start := time.Now()
	res, err := bench.RunFederation(ctx, cfg)
	if err != nil && len(res.Runs) == 0 {
		return err
	}
	out.Config, out.Result, out.ElapsedS = cfg, res, time.Since(start).Seconds()
	out.LoadEnd, out.Time = loadAverage(), time.Now().UTC().Format(time.RFC3339)
	if err != nil {
		out.Error = err.Error()
	}
	fmt.Fprint(stdout, res.Report(cfg))
	fmt.Fprintf(stdout, "  load average %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end (%d CPUs); commit %s; %.0fs in all\n",
		out.Load[0], out.Load[1], out.Load[2], out.LoadEnd[0], out.LoadEnd[1], out.LoadEnd[2], out.NumCPU, out.Commit, out.ElapsedS)
	if jerr := emitJSON(stdout, jsonPath, out); jerr != nil {
		return jerr
	}
	if perr := writeFigures(stderr, jsonPath, "", res.Figures()); perr != nil {
		return perr
	}
	return err
}

// federationFlags parses `bench federation`'s flags into a configuration
// with its defaults filled in (every problem with it in the error), and
// the --json path. With --geo, the delay sweep's defaults of --delays,
// --stretched and --rounds do not apply: no delay (the model's), no
// stretched delay, rounds 0.
func federationFlags(args []string, stderr io.Writer) (bench.FederationConfig, string, error) {
	cfg := bench.DefaultFederationConfig()
	fs := flag.NewFlagSet("bench federation", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Hosts, "hosts", cfg.Hosts, "websim hosts")
	fs.IntVar(&cfg.Pages, "pages", cfg.Pages, "mean pages per host")
	fs.IntVar(&cfg.PageBytes, "page-bytes", cfg.PageBytes, "mean HTML page size in bytes (0: websim's 10,000)")
	fs.IntVar(&cfg.IPs, "ips", cfg.IPs, "loopback addresses the hosts are spread over")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "websim seed")
	profile := fs.String("profile", cfg.Profile.String(), "websim profile: clean, realistic or hostile")
	fs.StringVar(&cfg.Partitioner, "partitioner", cfg.Partitioner, "the federation's partitioner: consistent or distance (GeoIP of websim's addresses)")
	fs.IntVar(&cfg.Replicas, "replicas", cfg.Replicas, "replicas per site on the consistent-hashing ring")
	delays := durationList(cfg.Delays)
	fs.Var(&delays, "delays", "comma-separated one-way WAN delays of the federated runs, one fresh crawl each (\"\": none)")
	stretched := durationList(cfg.Stretched)
	fs.Var(&stretched, "stretched", "comma-separated one-way WAN delays of the stretched runs (one site of three nodes across the WAN), after the federated runs")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "site up --rounds of every site (0: until the federation's crawl is exhausted)")
	fs.IntVar(&cfg.Width, "width", cfg.Width, "site up --width of each federated site (the stretched site gets 3×)")
	fs.IntVar(&cfg.PerHost, "per-host", cfg.PerHost, "site up --per-host")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "site up --workers of every site and node")
	fs.DurationVar(&cfg.HostDelay, "host-delay", cfg.HostDelay, "site up --host-delay")
	fs.DurationVar(&cfg.IPDelay, "ip-delay", cfg.IPDelay, "site up --ip-delay")
	fs.DurationVar(&cfg.MaxCrawlDelay, "max-crawl-delay", cfg.MaxCrawlDelay, "site up --max-crawl-delay")
	fs.BoolVar(&cfg.NoSync, "no-sync", cfg.NoSync, "site up --no-sync everywhere: no fsync of the Raft log")
	fs.DurationVar(&cfg.SampleEvery, "sample", cfg.SampleEvery, "interval of the /status and CPU samples")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on each run (its processes are stopped with a fifth of it, at most 1m, left)")
	fs.DurationVar(&cfg.Stall, "stall", cfg.Stall, "stop a run whose processes have all been idle this long without ending (negative: never)")
	siteFlags := fs.String("site-flags", "", "more `site up` flags for every federated site and the stretched site's first node, space-separated")
	replay := fs.String("replay", "", "comma-separated WARC files or globs (e.g. a kept run's */warc/*.warc.gz) to crawl through `websim replay` instead of a synthetic web")
	fs.StringVar(&cfg.Dir, "dir", "", "where to make the run directory (default: the temporary directory)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the run directory (seeds, certificates, federation files, every process's data and log)")
	fs.StringVar(&cfg.ModuleRoot, "module-root", "", "directory of Meridian's go.mod, where ./cmd/websim and ./cmd/site are built (default: found)")
	fs.StringVar(&cfg.WebsimBinary, "websim-bin", "", "run this websim binary instead of building one")
	fs.StringVar(&cfg.SiteBinary, "site-bin", "", "run this site binary instead of building one")
	fs.BoolVar(&cfg.Geo, "geo", cfg.Geo, "the geographic benchmark: each site (node) fetches from its own address, which websim makes pay the round trips to the hosts' cities, "+
		"and the web is crawled to exhaustion (--rounds 0) by the federation with the distance partitioner, with consistent hashing, by one central site in eu "+
		"(3× --width and --workers) and by the stretched site, at one WAN delay: --delays D, or by default the distance model's mean one-way delay between the sites ("+
		bench.GeoWANDelay().String()+")")
	geoRuns := fs.String("geo-runs", "", "with --geo: comma-separated runs to make, of "+strings.Join(bench.GeoModes(), ", ")+" (default: all)")
	jsonPath := fs.String("json", "", "also write the JSON result to this file")
	if err := fs.Parse(args); err != nil {
		return cfg, "", err
	}
	if *geoRuns != "" {
		cfg.GeoRuns = strings.Split(*geoRuns, ",")
	}
	if cfg.Geo { // its own runs: the defaults of the delay sweep do not apply
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["delays"] {
			delays = nil
		}
		if !set["stretched"] {
			stretched = nil
		}
		if !set["rounds"] {
			cfg.Rounds = 0
		}
	}
	if fs.NArg() > 0 {
		return cfg, "", fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	p, err := synth.ParseProfile(*profile)
	if err != nil {
		return cfg, "", fmt.Errorf("bench: --profile: %w", err)
	}
	cfg.Profile, cfg.Delays, cfg.Stretched, cfg.SiteFlags = p, delays, stretched, strings.Fields(*siteFlags)
	for _, g := range strings.Split(*replay, ",") {
		if g = strings.TrimSpace(g); g != "" {
			cfg.Replay = append(cfg.Replay, g)
		}
	}
	cfg, err = cfg.WithDefaults()
	return cfg, *jsonPath, err
}

// durationList is a flag of comma-separated durations ("0" is zero; an
// empty value is no duration).
type durationList []time.Duration

func (l *durationList) String() string {
	var s []string
	for _, d := range *l {
		s = append(s, d.String())
	}
	return strings.Join(s, ",")
}

func (l *durationList) Set(v string) error {
	var out durationList
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			return fmt.Errorf("bench: %q is not a list of durations: %w", v, err)
		}
		out = append(out, d)
	}
	*l = out
	return nil
}

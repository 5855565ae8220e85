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
)

// freshJSON is the one-line JSON result of bench fresh.
type freshJSON struct {
	Benchmark string            `json:"benchmark"`
	Commit    string            `json:"commit,omitempty"`
	Config    bench.FreshConfig `json:"config"`
	Result    bench.FreshResult `json:"result"`
	NumCPU    int               `json:"num_cpu"`
	GoVersion string            `json:"go_version"`
	Time      string            `json:"time"`
}

// runFresh is `bench fresh` (issue 23): a changing web crawled for the
// same simulated days under each refetch schedule, with the freshness and
// age of the collection, against what the true change rates allow.
func runFresh(args []string, stdout, stderr io.Writer) error {
	cfg := bench.DefaultFreshConfig()
	fs := flag.NewFlagSet("bench fresh", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Hosts, "hosts", cfg.Hosts, "websim hosts (clean profile, pages changing)")
	fs.IntVar(&cfg.Pages, "pages", cfg.Pages, "mean pages per host")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "websim seed")
	fs.Float64Var(&cfg.TimeScale, "time-scale", cfg.TimeScale, "simulated seconds per second")
	fs.Float64Var(&cfg.Days, "days", cfg.Days, "simulated days each crawl runs")
	fs.Float64Var(&cfg.WarmupDays, "warmup-days", cfg.WarmupDays, "simulated days not measured (the first crawl)")
	fs.DurationVar(&cfg.Interval, "interval", cfg.Interval, "simulated: the fixed schedule's interval, the budget of the optimal one")
	fs.DurationVar(&cfg.Min, "min", cfg.Min, "simulated: the adaptive and optimal schedules' shortest interval")
	fs.DurationVar(&cfg.Max, "max", cfg.Max, "simulated: their longest interval")
	schedules := fs.String("schedules", strings.Join(cfg.Schedules, ","), "the runs: none, fixed, adaptive, optimal")
	fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "points of each freshness curve")
	fs.DurationVar(&cfg.HostDelay, "host-delay", cfg.HostDelay, "the site's host delay (wall clock)")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on each run")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for the runs' files (default: a temporary one)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the runs' files")
	fs.StringVar(&cfg.ModuleRoot, "module-root", "", "directory of Meridian's go.mod (default: found)")
	jsonPath := fs.String("json", "", "also write the JSON result to this file, and its figure beside it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	cfg.Schedules = strings.Split(*schedules, ",")
	var err error
	if cfg, err = cfg.WithDefaults(); err != nil {
		return err
	}
	cfg.Progress = func(format string, args ...any) {
		fmt.Fprintf(stderr, "  %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.RunFresh(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, res.Report())
	out := freshJSON{Benchmark: "fresh", Commit: gitCommit(ctx, cfg.ModuleRoot), Config: cfg, Result: res,
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)}
	if err := emitJSON(stdout, *jsonPath, out); err != nil {
		return err
	}
	return writeFigures(stdout, *jsonPath, "", res.Figures())
}

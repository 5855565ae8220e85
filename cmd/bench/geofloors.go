package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/bench"
)

// geoFloorsJSON is the one-line JSON result of bench geo-floors.
type geoFloorsJSON struct {
	Benchmark string                `json:"benchmark"`
	Config    bench.GeoFloorsConfig `json:"config"`
	Result    bench.GeoFloorsResult `json:"result"`
	NumCPU    int                   `json:"num_cpu"`
	GoVersion string                `json:"go_version"`
	Time      string                `json:"time"`
}

// runGeoFloors is `bench geo-floors`: the geographic benchmark's web from
// several seeds, made in memory, with each run's floor and mean round trip.
// No crawl runs.
func runGeoFloors(args []string, stdout, stderr io.Writer) error {
	cfg := bench.DefaultGeoFloorsConfig()
	fs := flag.NewFlagSet("bench geo-floors", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Hosts, "hosts", cfg.Hosts, "websim hosts (realistic profile)")
	fs.IntVar(&cfg.Pages, "pages", cfg.Pages, "mean pages per host")
	fs.IntVar(&cfg.IPs, "ips", cfg.IPs, "addresses the hosts are spread over")
	seeds := fs.String("seeds", "1-12", "websim seeds: comma-separated numbers or ranges A-B")
	fs.IntVar(&cfg.Replicas, "replicas", cfg.Replicas, "replicas of the consistent partitioner")
	fs.DurationVar(&cfg.HostDelay, "host-delay", cfg.HostDelay, "the sites' host delay")
	fs.DurationVar(&cfg.MaxCrawlDelay, "max-crawl-delay", cfg.MaxCrawlDelay, "the cap on robots.txt Crawl-delay")
	jsonPath := fs.String("json", "", "also write the JSON result to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.Seeds, err = parseSeeds(*seeds); err != nil {
		return err
	}
	if cfg, err = cfg.WithDefaults(); err != nil {
		return err
	}
	cfg.Progress = func(format string, args ...any) {
		fmt.Fprintf(stderr, "  %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.GeoFloors(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, res.Report(cfg))
	return emitJSON(stdout, *jsonPath, geoFloorsJSON{Benchmark: "geo-floors", Config: cfg, Result: res,
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)})
}

// parseSeeds reads "1-12" or "1,5,9-11".
func parseSeeds(v string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseUint(hi, 10, 64)
		}
		if err != nil || b < a || b-a >= 1000 {
			return nil, fmt.Errorf("bench: --seeds %q: want numbers or ranges A-B (A ≤ B, under 1000 apart), separated by commas", v)
		}
		for s := a; s <= b; s++ {
			out = append(out, s)
		}
	}
	return out, nil
}

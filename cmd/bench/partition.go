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

// partitionJSON is the one-line JSON result of bench partition.
type partitionJSON struct {
	Benchmark string                `json:"benchmark"`
	Profile   string                `json:"profile"`
	Config    bench.PartitionConfig `json:"config"`
	Result    bench.PartitionResult `json:"result"`
	Broken    []string              `json:"broken,omitempty"`
	NumCPU    int                   `json:"num_cpu"`
	GoVersion string                `json:"go_version"`
	Time      string                `json:"time"`
}

// runPartition is `bench partition`: the partitioners' balance, churn and
// IP gap on a websim web built in memory. It fails if an invariant is broken.
//
//	go run ./cmd/bench partition [--hosts 10000 --ips 64 --replicas 100,200,1000 --trials 200 --unlocated 0]
func runPartition(args []string, stdout, stderr io.Writer) error {
	cfg := bench.DefaultPartitionConfig()
	fs := flag.NewFlagSet("bench partition", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Hosts, "hosts", cfg.Hosts, "websim hosts")
	fs.IntVar(&cfg.Pages, "pages", cfg.Pages, "mean pages per host (the page weights)")
	fs.IntVar(&cfg.IPs, "ips", cfg.IPs, "addresses the hosts are spread over")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "websim seed")
	profile := fs.String("profile", cfg.Profile.String(), "websim profile: clean, realistic or hostile")
	replicas := intList(cfg.Replicas)
	fs.Var(&replicas, "replicas", "comma-separated replica counts (points per unit of capacity) of the consistent partitioner")
	fs.IntVar(&cfg.Trials, "trials", cfg.Trials, "random federations per set size and replica count for the ring's balance (negative: none)")
	fs.Float64Var(&cfg.Unlocated, "unlocated", cfg.Unlocated, "share of the addresses left out of the GeoIP database (their hosts are hashed)")
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
	cfg.Profile, cfg.Replicas = p, replicas
	if cfg, err = cfg.WithDefaults(); err != nil {
		return err
	}
	cfg.Progress = func(format string, args ...any) {
		fmt.Fprintf(stderr, "  %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.RunPartition(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, res.Report(cfg))
	broken := res.Broken()
	if err := emitJSON(stdout, *jsonPath, partitionJSON{Benchmark: "partition", Profile: p.String(), Config: cfg, Result: res,
		Broken: broken, NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)}); err != nil {
		return err
	}
	if err := writeFigures(stderr, *jsonPath, "", res.Figures()); err != nil {
		return err
	}
	if len(broken) > 0 {
		return fmt.Errorf("bench partition: %d invariants broken: %s", len(broken), strings.Join(broken, "; "))
	}
	return nil
}

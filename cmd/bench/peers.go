package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/bench"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// runPeers is `bench peers`: Meridian and a bare colly crawler on the
// same web, one after the other, and the ratios.
func runPeers(args []string, stdout, stderr io.Writer) error {
	cfg := bench.PeersConfig{Site: bench.DefaultSiteConfig(), CollyWorkers: 256, CollyDuration: 5 * time.Minute}
	fs := flag.NewFlagSet("bench peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Site.Hosts, "hosts", cfg.Site.Hosts, "websim hosts")
	fs.IntVar(&cfg.Site.Pages, "pages", cfg.Site.Pages, "mean pages per host")
	fs.IntVar(&cfg.Site.IPs, "ips", cfg.Site.IPs, "loopback addresses the hosts are spread over")
	fs.Uint64Var(&cfg.Site.Seed, "seed", cfg.Site.Seed, "websim seed")
	profile := fs.String("profile", cfg.Site.Profile.String(), "websim profile: clean, realistic or hostile")
	fs.IntVar(&cfg.Site.Rounds, "rounds", cfg.Site.Rounds, "Meridian's rounds (site up --rounds)")
	fs.DurationVar(&cfg.Site.Timeout, "timeout", cfg.Site.Timeout, "bound on Meridian's run")
	fs.IntVar(&cfg.CollyWorkers, "colly-workers", cfg.CollyWorkers, "colly's requests in parallel")
	fs.DurationVar(&cfg.CollyDuration, "colly-duration", cfg.CollyDuration, "bound on colly's run")
	fs.StringVar(&cfg.Site.SiteBinary, "site-bin", "", "run this site binary instead of building one")
	fs.StringVar(&cfg.Site.WebsimBinary, "websim-bin", "", "run this websim binary instead of building one")
	jsonPath := fs.String("json", "", "also write the JSON result to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	p, err := synth.ParseProfile(*profile)
	if err != nil {
		return fmt.Errorf("bench: --profile: %w", err)
	}
	cfg.Site.Profile = p
	cfg.Site.Progress = func(format string, a ...any) {
		fmt.Fprintf(stderr, "  %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.RunPeers(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench peers: %d %s hosts × %d pages on %d addresses, each crawler alone with its websim\n", cfg.Site.Hosts, cfg.Site.Profile, cfg.Site.Pages, cfg.Site.IPs)
	fmt.Fprint(stdout, res.Report())
	b, _ := json.Marshal(struct {
		Benchmark string            `json:"benchmark"`
		Config    bench.PeersConfig `json:"config"`
		Result    bench.PeersResult `json:"result"`
		Time      time.Time         `json:"time"`
	}{"peers", cfg, res, time.Now().UTC()})
	fmt.Fprintln(stdout, string(b))
	if *jsonPath != "" {
		return os.WriteFile(*jsonPath, append(b, '\n'), 0o644)
	}
	return nil
}

// runCollyCrawl is `bench colly-crawl`, the child process of `bench
// peers`: the colly crawler, its result as JSON on stdout.
func runCollyCrawl(args []string, stdout, stderr io.Writer) error {
	var o bench.CollyOptions
	fs := flag.NewFlagSet("bench colly-crawl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seeds := fs.String("seeds", "", "seed URLs, one a line")
	fs.StringVar(&o.DNS, "dns", "", "websim's DNS server")
	fs.IntVar(&o.Workers, "workers", 256, "requests in parallel")
	fs.Int64Var(&o.Max, "max", 0, "stop after this many page responses (0: none)")
	fs.DurationVar(&o.Duration, "duration", 5*time.Minute, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := os.Open(*seeds)
	if err != nil {
		return fmt.Errorf("bench: colly-crawl: %w", err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			o.Seeds = append(o.Seeds, s)
		}
	}
	f.Close()
	res, err := bench.CrawlColly(context.Background(), o)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

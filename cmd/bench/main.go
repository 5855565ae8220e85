// Command bench runs Meridian's benchmarks (package bench) and prints a
// short report and a one-line JSON result.
//
//	go run ./cmd/bench websim [--hosts 1000 --pages 100 --page-bytes 10000 --conns 32 --duration 10s --in-process]
//	go run ./cmd/bench crawldb [--urls-small 1000000 --urls-large 10000000 --width 50000 --per-host 10,100 --writers 1,4,8]
//	go run ./cmd/bench site [--hosts 10000 --rounds 10 --width 50000 --per-host 10 --host-delay 200ms --no-sync]
//	go run ./cmd/bench correctness [--hosts 2000 --profile realistic|hostile --ip-delay 20ms --max-crawl-delay 2s]
//	go run ./cmd/bench cluster [--hosts 10000 --rounds 10 --nodes 1,2,3 --kill-after 60s --node-cpus 0.25 --replicas 1]
//	go run ./cmd/bench partition [--hosts 10000 --ips 64 --replicas 100,200,1000]
//	go run ./cmd/bench federation [--hosts 3000 --rounds 8 --delays 0,20ms,40ms,80ms --stretched 40ms | --geo [--geo-runs distance,central]]
//	go run ./cmd/bench geo-floors [--seeds 1-12 --hosts 1000 --pages 20]   (the geographic web of each seed: its runs' floors and mean RTTs; no crawl)
//	go run ./cmd/bench fresh [--hosts 3000 --days 16 --schedules none,fixed,adaptive,optimal]   (issue 23: freshness and age of a changing web under each refetch schedule)
//	go run ./cmd/bench check --data DIR [--truth FILE]
//	go run ./cmd/bench compare A.json B.json   (two `bench site` results)
//	go run ./cmd/bench plot [--out DIR] RESULT.json...   (SVG figures of results, again)
//	go run ./cmd/bench peers [--hosts 10000 --rounds 10 --colly-workers 256]   (Meridian and a bare colly crawler on one web)
//
// With --json F.json, site, correctness, cluster, partition and federation
// also write their SVG figures beside it (F-NAME.svg).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/bench"
	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/websim/synth"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: bench websim|crawldb|site|correctness|cluster|partition|federation|geo-floors|fresh|peers|check|compare|plot [flags]   (bench NAME -h for the flags)")
		return errors.New("bench: name a benchmark")
	}
	switch args[0] {
	case "websim":
		return runWebsim(args[1:], stdout, stderr)
	case "crawldb":
		return runCrawldb(args[1:], stdout, stderr)
	case "check":
		return runCheck(args[1:], stdout, stderr)
	case "site":
		return runSite(args[1:], stdout, stderr)
	case "correctness":
		return runCorrectness(args[1:], stdout, stderr)
	case "cluster":
		return runCluster(args[1:], stdout, stderr)
	case "compare":
		return runCompare(args[1:], stdout)
	case "partition":
		return runPartition(args[1:], stdout, stderr)
	case "federation":
		return runFederation(args[1:], stdout, stderr)
	case "geo-floors":
		return runGeoFloors(args[1:], stdout, stderr)
	case "fresh":
		return runFresh(args[1:], stdout, stderr)
	case "plot":
		return runPlot(args[1:], stdout, stderr)
	case "peers":
		return runPeers(args[1:], stdout, stderr)
	case "colly-crawl": // bench peers' child process
		return runCollyCrawl(args[1:], stdout, stderr)
	default:
		return fmt.Errorf("bench: unknown benchmark %q (want websim, crawldb, site, correctness, cluster, partition, federation, peers, check, compare or plot)", args[0])
	}
}

// websimJSON is the one-line JSON result of bench websim.
type websimJSON struct {
	Benchmark  string             `json:"benchmark"`
	Profile    string             `json:"profile"`
	Config     bench.WebsimConfig `json:"config"`
	Result     bench.WebsimResult `json:"result"`
	ServerCPUS float64            `json:"server_cpu_s"`
	ClientCPUS float64            `json:"client_cpu_s"`
	ElapsedS   float64            `json:"elapsed_s"`
	NumCPU     int                `json:"num_cpu"`
	GoVersion  string             `json:"go_version"`
	Time       string             `json:"time"`
}

func runWebsim(args []string, stdout, stderr io.Writer) error {
	cfg := bench.DefaultWebsimConfig()
	fs := flag.NewFlagSet("bench websim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Hosts, "hosts", cfg.Hosts, "number of hosts")
	fs.IntVar(&cfg.Pages, "pages", cfg.Pages, "mean pages per host")
	fs.IntVar(&cfg.PageBytes, "page-bytes", cfg.PageBytes, "mean HTML page size in bytes")
	fs.IntVar(&cfg.IPs, "ips", cfg.IPs, "loopback addresses the hosts are spread over (0: min(16, hosts))")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "websim seed")
	profile := fs.String("profile", "clean", "websim profile: clean, realistic or hostile (hostile role hosts are not requested)")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "client keep-alive connections")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured window, after the warmup")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "warmup, not counted (negative: none)")
	fs.Int64Var(&cfg.MaxRequests, "max-requests", cfg.MaxRequests, "bound on the requests sent, warmup included")
	inProcess := fs.Bool("in-process", false, "run websim in this process instead of a subprocess")
	fs.StringVar(&cfg.ModuleRoot, "module-root", "", "directory of Meridian's go.mod, where ./cmd/websim is built (default: found)")
	fs.StringVar(&cfg.WebsimBinary, "websim-bin", "", "run this websim binary instead of building one")
	jsonPath := fs.String("json", "", "also write the JSON result to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process to this file (with --in-process it covers websim too)")
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
	cfg.Subprocess = !*inProcess
	if cfg, err = cfg.WithDefaults(); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	mode := "websim in a subprocess"
	if *inProcess {
		mode = "websim in-process"
	}
	fmt.Fprintf(stderr, "bench websim: %d hosts × %d pages of ~%d bytes (%s), %d conns, %v warmup + %v, %s...\n",
		cfg.Hosts, cfg.Pages, cfg.PageBytes, p, cfg.Conns, cfg.Warmup, cfg.Duration, mode)
	res, err := bench.RunWebsim(ctx, cfg)
	if err != nil {
		return err
	}

	sec := res.Elapsed.Seconds()
	fmt.Fprintf(stdout, "websim throughput (%s, %d conns, %d CPUs)\n", mode, cfg.Conns, runtime.NumCPU())
	fmt.Fprintf(stdout, "  pages        %d in %.2fs\n", res.Pages, sec)
	fmt.Fprintf(stdout, "  pages/s      %.0f\n", res.PagesPerSec)
	fmt.Fprintf(stdout, "  MB/s         %.1f (body bytes, 10^6)\n", res.MBPerSec)
	fmt.Fprintf(stdout, "  mean page    %.0f bytes\n", res.MeanPageBytes)
	if cfg.Subprocess {
		fmt.Fprintf(stdout, "  server CPU   %.2fs (%.2f cores, %.1f µs/page)\n", res.ServerCPU.Seconds(), cores(res.ServerCPU, sec), perPage(res.ServerCPU, res.Pages))
		fmt.Fprintf(stdout, "  client CPU   %.2fs (%.2f cores, %.1f µs/page)\n", res.ClientCPU.Seconds(), cores(res.ClientCPU, sec), perPage(res.ClientCPU, res.Pages))
	} else {
		fmt.Fprintf(stdout, "  process CPU  %.2fs (%.2f cores, %.1f µs/page; client and server together)\n", res.ClientCPU.Seconds(), cores(res.ClientCPU, sec), perPage(res.ClientCPU, res.Pages))
	}
	fmt.Fprintf(stdout, "  errors       %d, non-200 %d, dials %d\n", res.Errors, res.Non200, res.Dials)
	return emitJSON(stdout, *jsonPath, websimJSON{
		Benchmark: "websim", Profile: p.String(), Config: cfg, Result: res,
		ServerCPUS: res.ServerCPU.Seconds(), ClientCPUS: res.ClientCPU.Seconds(), ElapsedS: sec,
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339),
	})
}

func cores(cpu time.Duration, sec float64) float64 {
	if sec <= 0 {
		return 0
	}
	return cpu.Seconds() / sec
}

func perPage(cpu time.Duration, pages int64) float64 {
	if pages <= 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(pages)
}

// crawldbJSON is the one-line JSON result of bench crawldb.
type crawldbJSON struct {
	Benchmark string              `json:"benchmark"`
	Config    bench.CrawldbConfig `json:"config"`
	Result    bench.CrawldbResult `json:"result"`
	ElapsedS  float64             `json:"elapsed_s"`
	NumCPU    int                 `json:"num_cpu"`
	GoVersion string              `json:"go_version"`
	Time      string              `json:"time"`
}

func runCrawldb(args []string, stdout, stderr io.Writer) error {
	cfg := bench.DefaultCrawldbConfig()
	fs := flag.NewFlagSet("bench crawldb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Upserts, "upserts", cfg.Upserts, "upserts per upsert run (one fresh node per Raft log mode and writer count)")
	fs.IntVar(&cfg.BatchSize, "batch", cfg.BatchSize, "upserts per command")
	writers := intList(cfg.Writers)
	fs.Var(&writers, "writers", "comma-separated numbers of concurrent writers, one upsert run each")
	syncs := fs.String("sync", "fsync,nosync", "comma-separated Raft log modes of the upsert runs: fsync, nosync")
	fs.IntVar(&cfg.UpsertHosts, "upsert-hosts", cfg.UpsertHosts, "hosts of the upsert runs' URLs")
	fs.Float64Var(&cfg.KnownFraction, "known", cfg.KnownFraction, "share of upserts to known URLs (negative: none)")
	fs.IntVar(&cfg.URLsSmall, "urls-small", cfg.URLsSmall, "URLs of the frontier database at its first measurement")
	fs.IntVar(&cfg.URLsLarge, "urls-large", cfg.URLsLarge, "URLs of the frontier database at its second measurement")
	fs.IntVar(&cfg.FrontierHosts, "frontier-hosts", cfg.FrontierHosts, "hosts of the frontier database (heavy-tailed sizes)")
	fs.IntVar(&cfg.Width, "width", cfg.Width, "frontier read width")
	perHost := intList(cfg.PerHost)
	fs.Var(&perHost, "per-host", "comma-separated per-host bounds k of the frontier reads")
	fs.IntVar(&cfg.Calls, "calls", cfg.Calls, "timed frontier calls per measurement (after one warm-up; the median is reported)")
	fs.IntVar(&cfg.LoadWriters, "load-writers", cfg.LoadWriters, "goroutines loading the frontier database")
	loadSync := fs.String("load-sync", string(cfg.LoadSync), "Raft log mode of the frontier database: fsync or nosync")
	fs.DurationVar(&cfg.SettleMax, "settle-max", cfg.SettleMax, "longest wait for Pebble's background work after a load (negative: none)")
	fs.Int64Var(&cfg.CacheBytes, "cache-bytes", cfg.CacheBytes, "the store's Pebble block cache in bytes (0: the store's default)")
	fs.Uint64Var(&cfg.MemTableBytes, "memtable-bytes", cfg.MemTableBytes, "the store's Pebble memtable size in bytes (0: the store's default)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the URLs, hosts and scores")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for the nodes' state (default: a temporary directory)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the nodes' directories")
	fs.BoolVar(&cfg.SkipUpserts, "skip-upserts", false, "leave out the upsert runs")
	fs.BoolVar(&cfg.SkipFrontier, "skip-frontier", false, "leave out the frontier, memory and disk measurements")
	jsonPath := fs.String("json", "", "also write the JSON result to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile to this file at the end")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	cfg.Writers, cfg.PerHost, cfg.Syncs = writers, perHost, nil
	for _, s := range strings.Split(*syncs, ",") {
		m, err := bench.ParseLogSync(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("bench: --sync: %w", err)
		}
		cfg.Syncs = append(cfg.Syncs, m)
	}
	m, err := bench.ParseLogSync(*loadSync)
	if err != nil {
		return fmt.Errorf("bench: --load-sync: %w", err)
	}
	cfg.LoadSync = m
	if cfg, err = cfg.WithDefaults(); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	cfg.Progress = func(format string, args ...any) {
		fmt.Fprintf(stderr, "  %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(stderr, "bench crawldb: upserts %d × writers %v × %v; frontier %d → %d URLs on %d hosts, width %d, k %v...\n",
		cfg.Upserts, cfg.Writers, cfg.Syncs, cfg.URLsSmall, cfg.URLsLarge, cfg.FrontierHosts, cfg.Width, cfg.PerHost)
	start := time.Now()
	res, err := bench.RunCrawldb(ctx, cfg)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			return err
		}
	}
	fmt.Fprint(stdout, res.Report(cfg))
	return emitJSON(stdout, *jsonPath, crawldbJSON{Benchmark: "crawldb", Config: cfg, Result: res, ElapsedS: elapsed.Seconds(),
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)})
}

// startCPUProfile starts a CPU profile into path ("" : none); the returned
// func stops it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: --cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// emitJSON prints a result as one JSON line and, if path is set, writes it there too.
func emitJSON(stdout io.Writer, path string, v any) error {
	out, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("bench: encode result: %w", err)
	}
	fmt.Fprintf(stdout, "%s\n", out)
	if path != "" {
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			return fmt.Errorf("bench: --json: %w", err)
		}
	}
	return nil
}

// writeHeapProfile writes a heap profile to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: --memprofile: %w", err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return fmt.Errorf("bench: --memprofile: %w", err)
	}
	return f.Close()
}

// intList is a flag of comma-separated integers.
type intList []int

func (l *intList) String() string {
	var s []string
	for _, n := range *l {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var out intList
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("bench: %q is not a list of integers", v)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// runCheck checks a stopped site's crawl against websim's truth.
func runCheck(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "meridian-data", "the stopped site's data directory")
	truth := fs.String("truth", "", "truth JSONL (default DATA/websim-truth.jsonl)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rep, err := crawlcheck.CheckData(context.Background(), *data, *truth)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// clusterJSON is the one-line JSON result of bench cluster.
type clusterJSON struct {
	Benchmark string              `json:"benchmark"`
	Profile   string              `json:"profile"`
	Config    bench.ClusterConfig `json:"config"`
	Result    bench.ClusterResult `json:"result"`
	Commit    string              `json:"commit,omitempty"`
	Load      [3]float64          `json:"load_average_start"`
	LoadEnd   [3]float64          `json:"load_average_end"`
	ElapsedS  float64             `json:"elapsed_s"`
	NumCPU    int                 `json:"num_cpu"`
	GoVersion string              `json:"go_version"`
	Time      string              `json:"time"`
	Error     string              `json:"error,omitempty"`
}

// runCluster is `bench cluster`: the same crawl by a site of 1, 2 and 3 nodes.
func runCluster(args []string, stdout, stderr io.Writer) error {
	cfg := bench.DefaultClusterConfig()
	fs := flag.NewFlagSet("bench cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Hosts, "hosts", cfg.Hosts, "websim hosts")
	fs.IntVar(&cfg.Pages, "pages", cfg.Pages, "mean pages per host")
	fs.IntVar(&cfg.PageBytes, "page-bytes", cfg.PageBytes, "mean HTML page size in bytes (0: websim's 10,000)")
	fs.IntVar(&cfg.IPs, "ips", cfg.IPs, "loopback addresses the hosts are spread over")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "websim seed")
	profile := fs.String("profile", cfg.Profile.String(), "websim profile: clean, realistic or hostile")
	fs.Func("nodes", "comma-separated numbers of nodes, one run each, in this order (default 1,2,3)", func(v string) (err error) {
		cfg.Nodes, err = bench.ParseClusterNodes(v)
		return err
	})
	fs.Func("node-cpus", "put each node in a CPU quota of this many cores (a cgroup per node; websim and bench outside); leave out for none", func(v string) (err error) {
		cfg.NodeCPUs, err = bench.ParseNodeCPUs(v, runtime.NumCPU())
		return err
	})
	fs.IntVar(&cfg.BusyMachines, "busy-machines", 0, "with --node-cpus: run this many more cgroups of a node's quota beside every run's nodes, each a busy loop using its whole quota (the box's load of a larger site, without its nodes)")
	fs.IntVar(&cfg.Shards, "shards", cfg.Shards, "make the site sharded: site up --shards N on the first node (0: today's site)")
	fs.IntVar(&cfg.Replicas, "replicas", cfg.Replicas, "pass site up --replicas R to every node (the sharded site's replicas per shard; 0: no flag)")
	fs.BoolVar(&cfg.TLS, "tls", cfg.TLS, "run every node with certificates: Raft and the node API over mutual TLS")
	fs.DurationVar(&cfg.Steady, "steady", 0, "measure each run over a window this long that opens after --warmup once every shard is where the placement wants it (no shards: after --warmup), then stop the nodes (0: over the rounds)")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "with --steady: the window opens no sooner than this after every node is up")
	fs.DurationVar(&cfg.SettleTimeout, "settle-timeout", 0, "with --steady: open the window this long after every node is up even if the shards have not settled (0: 2m)")
	fs.IntVar(&cfg.Grow, "grow", 0, "make each run a growth run: --grow-after after its nodes are up, this many more join one after another (no --expect-nodes); pages/s in --grow-window windows until --grow-tail after the last join, then the nodes stop")
	fs.DurationVar(&cfg.GrowAfter, "grow-after", 0, "with --grow: crawl this long at the run's nodes before the first join (0: 90s)")
	fs.DurationVar(&cfg.GrowWindow, "grow-window", 0, "with --grow: the windows' length (0: 30s)")
	fs.DurationVar(&cfg.GrowTail, "grow-tail", 0, "with --grow: how long to crawl after the last join (0: 3m)")
	fs.DurationVar(&cfg.KillAfter, "kill-after", 0, "SIGKILL a follower this long after the first node is up (with --steady: after the window opens), in runs of ≥ 3 nodes, and time the re-plan and the shards' leaders (0: none)")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "site up --rounds (0: until the crawl is exhausted)")
	fs.IntVar(&cfg.Width, "width", cfg.Width, "site up --width: URLs per round")
	fs.IntVar(&cfg.PerHost, "per-host", cfg.PerHost, "site up --per-host: URLs per host per round")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "site up --workers of every node: its concurrent fetches")
	fs.BoolVar(&cfg.Expect, "expect", false, "every node starts with --expect-nodes N (the run's node count), so the crawl begins once the site has them (a sharded run: once every shard is placed)")
	fs.DurationVar(&cfg.HostDelay, "host-delay", cfg.HostDelay, "site up --host-delay")
	fs.DurationVar(&cfg.IPDelay, "ip-delay", cfg.IPDelay, "site up --ip-delay")
	fs.DurationVar(&cfg.MaxCrawlDelay, "max-crawl-delay", cfg.MaxCrawlDelay, "site up --max-crawl-delay: robots Crawl-delay honoured up to this")
	fs.BoolVar(&cfg.NoSync, "no-sync", cfg.NoSync, "site up --no-sync on every node: no fsync of the Raft log")
	fs.DurationVar(&cfg.SampleEvery, "sample", cfg.SampleEvery, "interval of the /status, CPU and memory samples")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "bound on each run (its nodes are stopped with a fifth of it, at most 1m, left)")
	siteFlags := fs.String("site-flags", "", "more `site up` flags for the first node, space-separated (e.g. \"--fail-timeout=2s\")")
	fs.StringVar(&cfg.Dir, "dir", "", "where to make the run directory (default: the temporary directory)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the run directory (seeds, binaries, every node's data and log)")
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
	cfg.Profile, cfg.SiteFlags = p, strings.Fields(*siteFlags)
	if cfg, err = cfg.WithDefaults(); err != nil {
		return err
	}
	cfg.Progress = func(format string, args ...any) {
		fmt.Fprintf(stderr, "  %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := clusterJSON{Benchmark: "cluster", Profile: p.String(), Commit: gitCommit(ctx, cfg.ModuleRoot), Load: loadAverage(),
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version()}
	fmt.Fprintf(stderr, "bench cluster: nodes %v, replicas %d, node CPUs %g, commit %s, load average %.2f %.2f %.2f\n",
		cfg.Nodes, cfg.Replicas, cfg.NodeCPUs, out.Commit, out.Load[0], out.Load[1], out.Load[2])
	start := time.Now()
	res, err := bench.RunCluster(ctx, cfg)
	if err != nil && len(res.Runs) == 0 {
		return err
	}
	out.Config, out.Result, out.ElapsedS = cfg, res, time.Since(start).Seconds()
	out.LoadEnd, out.Time = loadAverage(), time.Now().UTC().Format(time.RFC3339)
	if err != nil {
		out.Error = err.Error()
	}
	fmt.Fprint(stdout, res.Report(cfg))
	fmt.Fprintf(stdout, "  load average %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end (%d CPUs); commit %s\n",
		out.Load[0], out.Load[1], out.Load[2], out.LoadEnd[0], out.LoadEnd[1], out.LoadEnd[2], out.NumCPU, out.Commit)
	if jerr := emitJSON(stdout, *jsonPath, out); jerr != nil {
		return jerr
	}
	if perr := writeFigures(stderr, *jsonPath, "", res.Figures()); perr != nil {
		return perr
	}
	return err
}

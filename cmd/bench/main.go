// Command bench runs Meridian's benchmarks (package bench) and prints a
// short report and a one-line JSON result.
//
//	go run ./cmd/bench websim [--hosts 1000 --pages 100 --page-bytes 10000 --conns 32 --duration 10s --in-process]
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
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/bench"
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
		fmt.Fprintln(stderr, "usage: bench websim [flags]   (bench websim -h for the flags)")
		return errors.New("bench: name a benchmark")
	}
	switch args[0] {
	case "websim":
		return runWebsim(args[1:], stdout, stderr)
	default:
		return fmt.Errorf("bench: unknown benchmark %q (want websim)", args[0])
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
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
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
	out, err := json.Marshal(websimJSON{
		Benchmark: "websim", Profile: p.String(), Config: cfg, Result: res,
		ServerCPUS: res.ServerCPU.Seconds(), ClientCPUS: res.ClientCPU.Seconds(), ElapsedS: sec,
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		return fmt.Errorf("bench: encode result: %w", err)
	}
	fmt.Fprintf(stdout, "%s\n", out)
	if *jsonPath != "" {
		if err := os.WriteFile(*jsonPath, append(out, '\n'), 0o644); err != nil {
			return fmt.Errorf("bench: --json: %w", err)
		}
	}
	return nil
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

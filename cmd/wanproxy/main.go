// Command wanproxy puts an emulated WAN in front of TCP endpoints: one
// proxy per link, each holding data for a one-way delay (± jitter) in each
// direction. It is package wan as a command, and scripts/wan.sh's fallback
// where the kernel has no sch_netem.
//
//	wanproxy --link eu=127.0.0.1:0>127.0.0.1:7101 --link us=127.0.0.1:0>127.0.0.1:7102 \
//	    --delay 40ms --jitter 5ms --stats 127.0.0.1:0
//
// It prints one line per link, "link NAME LISTEN UPSTREAM delay=D jitter=J",
// then "ready", and runs until SIGINT or SIGTERM; then it prints the bytes
// that crossed each link, "bytes NAME upstream=N downstream=N conns=N".
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/meridian-crawler/meridian/wan"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot(ctx, os.Stdout, os.Stderr).Execute()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wanproxy:", err)
		os.Exit(1)
	}
}

// flags are wanproxy's command-line flags.
type flags struct {
	links     []string
	config    string
	delay     time.Duration
	jitter    time.Duration
	stats     string
	readyFile string
}

// newRoot returns the command; it runs until ctx is done.
func newRoot(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:   "wanproxy --link NAME=LISTEN>UPSTREAM... [--delay D] [--jitter J]",
		Short: "An emulated WAN (one-way delay ± jitter, each direction) in front of TCP endpoints",
		Long: `wanproxy runs one TCP proxy per link. Every connection to a link's LISTEN
address is forwarded to its UPSTREAM, and data is held for the one-way delay
(± jitter, uniform) in each direction, so a round trip pays 2×delay.
Connection set-up is not delayed; data stays in order.

It prints "link NAME LISTEN UPSTREAM delay=D jitter=J" per link (LISTEN with
the port chosen for :0), then "ready", and runs until SIGINT or SIGTERM, then
prints "bytes NAME upstream=N downstream=N conns=N" per link.

--stats ADDR serves, on that address:
  GET  /stats                            the links, their settings and bytes, as JSON
  POST /delay?link=NAME&delay=D&jitter=J change a link's delay while it runs
                                         (no link=: every link)

--config FILE reads links from JSON instead of (or besides) --link:
  {"links": [{"name": "eu", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:7101",
              "delay": "20ms", "jitter": "2ms"}]}
where a link's delay and jitter default to --delay and --jitter.`,
		Example: `  wanproxy --link 'eu=127.0.0.1:17101>127.0.0.1:7101' --delay 40ms --jitter 5ms
  wanproxy --config links.json --stats 127.0.0.1:7199 --ready-file /tmp/wan.ready`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(ctx, f, stdout, stderr)
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	fl := cmd.Flags()
	fl.StringArrayVar(&f.links, "link", nil, "a link, NAME=LISTEN>UPSTREAM (repeatable); LISTEN's port may be 0")
	fl.StringVar(&f.config, "config", "", "read links from this JSON file")
	fl.DurationVar(&f.delay, "delay", 0, "one-way delay, applied in each direction (e.g. 0, 20ms, 40ms, 80ms)")
	fl.DurationVar(&f.jitter, "jitter", 0, "each delay varies uniformly within delay ± jitter (at most --delay)")
	fl.StringVar(&f.stats, "stats", "", "serve GET /stats and POST /delay on this host:port (\"\": none)")
	fl.StringVar(&f.readyFile, "ready-file", "", "once listening, write the link lines and \"ready\" to this file")
	return cmd
}

// run starts the links and serves until ctx is done.
func run(ctx context.Context, f flags, stdout, stderr io.Writer) error {
	var links []wan.Link
	for _, s := range f.links {
		l, err := parseLink(s, f.delay, f.jitter)
		if err != nil {
			return err
		}
		links = append(links, l)
	}
	if f.config != "" {
		more, err := loadConfig(f.config, f.delay, f.jitter)
		if err != nil {
			return err
		}
		links = append(links, more...)
	}
	if len(links) == 0 {
		return errors.New("no links: give --link or --config (see --help)")
	}
	em, err := wan.Start(ctx, links)
	if err != nil {
		return err
	}
	defer em.Close()

	var report strings.Builder
	for _, l := range em.Links() {
		fmt.Fprintf(&report, "link %s %s %s delay=%v jitter=%v\n", l.Name, l.Listen, l.Upstream, l.Delay, l.Jitter)
	}
	if f.stats != "" {
		ln, err := net.Listen("tcp", f.stats)
		if err != nil {
			return fmt.Errorf("--stats: %w", err)
		}
		srv := &http.Server{Handler: statsHandler(em), ReadHeaderTimeout: 5 * time.Second}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		defer func() {
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdownCtx)
			<-served
		}()
		fmt.Fprintf(&report, "stats http://%s/stats\n", ln.Addr())
	}
	report.WriteString("ready\n")
	fmt.Fprint(stdout, report.String())
	if f.readyFile != "" {
		if err := writeFileAtomic(f.readyFile, report.String()); err != nil {
			return fmt.Errorf("--ready-file: %w", err)
		}
	}

	<-em.Done()
	for _, name := range em.Names() {
		s, _ := em.Stats(name)
		fmt.Fprintf(stdout, "bytes %s upstream=%d downstream=%d conns=%d\n", name, s.Upstream, s.Downstream, s.Conns)
	}
	return nil
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, so a reader never sees half of it.
func writeFileAtomic(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

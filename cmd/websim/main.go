// Command websim serves Meridian's in-vitro web: a deterministic synthetic
// web (websim serve) or a recorded one (websim replay), on loopback
// addresses with its own DNS server.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/geodelay"
	"github.com/meridian-crawler/meridian/websim/synth"
)

func main() {
	if err := newRoot(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "websim:", err)
		os.Exit(1)
	}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "websim",
		Short:         "Meridian's in-vitro web: a synthetic or replayed web on loopback",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newServe(stdout, stderr), newReplay(stdout, stderr))
	return root
}

type commonFlags struct {
	ips       int
	ipBase    string
	port      int
	dns       string
	dnsTTL    time.Duration
	admin     string
	logLevel  string
	waitReady string
	progress  time.Duration
	clients   string
	nClients  int // read from the clients file
}

func (c *commonFlags) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&c.ips, "ips", 16, "spread hosts over this many loopback addresses")
	f.StringVar(&c.ipBase, "ip-base", "127.77.0.1", "first loopback address")
	f.IntVar(&c.port, "port", 8080, "HTTP port, listened on every address (0: pick a free one)")
	f.StringVar(&c.dns, "dns", "127.0.0.1:5353", "serve DNS (UDP and TCP) on this IP:port (\"\": none)")
	f.DurationVar(&c.dnsTTL, "dns-ttl", 300*time.Second, "TTL of DNS answers")
	f.StringVar(&c.admin, "admin", "127.0.0.1:8099", "serve GET /_websim/stats on this IP:port (\"\": none)")
	f.DurationVar(&c.progress, "progress", 10*time.Second, "log request totals this often while serving (0: never)")
	f.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&c.waitReady, "ready-file", "", "write \"ready\" and the addresses to this file once serving")
	f.StringVar(&c.clients, "clients", "", "clients file, one \"ADDR CITY\" or \"ADDR LAT LON [NAME]\" a line (# comments): "+
		"connections and DNS queries from ADDR pay the modelled network delay to each host's city")
}

// readClients reads the --clients file, if any.
func (c *commonFlags) readClients() ([]geodelay.Client, error) {
	if c.clients == "" {
		return nil, nil
	}
	cs, err := geodelay.ReadFile(c.clients)
	if err != nil {
		return nil, fmt.Errorf("--clients: %w", err)
	}
	c.nClients = len(cs)
	return cs, nil
}

func (c *commonFlags) logger(stderr io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl})), nil
}

func (c *commonFlags) base() (netip.Addr, error) {
	a, err := netip.ParseAddr(c.ipBase)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("--ip-base: %w", err)
	}
	return a, nil
}

func newServe(stdout, stderr io.Writer) *cobra.Command {
	var (
		c         commonFlags
		hosts     int
		pages     int
		seed      uint64
		profile   string
		pageBytes int
		truth     string
		geoip     string
		seedsOut  string
		changes   bool
		timeScale float64
		epoch     string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a deterministic synthetic web",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := c.logger(stderr)
			if err != nil {
				return err
			}
			prof, err := synth.ParseProfile(profile)
			if err != nil {
				return fmt.Errorf("--profile: %w", err)
			}
			base, err := c.base()
			if err != nil {
				return err
			}
			clients, err := c.readClients()
			if err != nil {
				return err
			}
			ep, err := parseClock(changes, timeScale, epoch)
			if err != nil {
				return err
			}
			o := websim.Options{
				Web: synth.Options{Hosts: hosts, Pages: pages, Seed: seed, IPs: c.ips, IPBase: base,
					Port: c.port, Profile: prof, PageBytes: pageBytes, Changes: changes, Epoch: ep},
				DNSAddr: c.dns, DNSTTL: c.dnsTTL, AdminAddr: c.admin,
				TruthPath: truth, GeoIPPath: geoip, Clients: clients, Logger: log, TimeScale: timeScale,
			}
			if c.port < 0 || c.port > 65535 {
				return fmt.Errorf("--port must be in [0, 65535], got %d", c.port)
			}
			start := time.Now()
			srv, err := websim.Start(o)
			if err != nil {
				return err
			}
			web := srv.Web()
			if seedsOut != "" {
				var b strings.Builder
				for h := range web.Hosts() {
					b.WriteString(web.FrontURL(h))
					b.WriteByte('\n')
				}
				if err := os.WriteFile(seedsOut, []byte(b.String()), 0o644); err != nil {
					srv.Close()
					return fmt.Errorf("--seeds-out: %w", err)
				}
			}
			fmt.Fprintf(stdout, "websim: serving %d hosts (%s, seed %d) on %d addresses from %s, port %d; front page of host 0: %s at %s\n",
				len(web.Hosts()), prof, seed, len(srv.IPs()), srv.IPs()[0], srv.Port(), web.FrontURL(0), web.Hosts()[0].IP)
			if changes {
				clk, _ := srv.Clock()
				fmt.Fprintf(stdout, "websim: pages change (Cho and Garcia-Molina 2000 rates); simulated clock from %s at %g× (a simulated day every %v)\n",
					clk.Epoch.Format(time.RFC3339), clk.Scale, simDay(clk.Scale))
			}
			return serveUntilSignal(cmd.Context(), stdout, srv, &c, start)
		},
	}
	c.bind(cmd)
	f := cmd.Flags()
	f.IntVar(&hosts, "hosts", 100, "number of hosts")
	f.IntVar(&pages, "pages", 50, "mean pages per host (heavy-tailed per host)")
	f.Uint64Var(&seed, "seed", 1, "the same seed gives the same web, byte for byte")
	f.StringVar(&profile, "profile", "clean", "clean, realistic or hostile")
	f.IntVar(&pageBytes, "page-bytes", 10_000, "mean HTML page size in bytes")
	f.StringVar(&truth, "truth", "", "write the ground truth (JSONL, one object per URL) to this file")
	f.StringVar(&geoip, "geoip", "", "write a GeoIP2-City database of the hosts' addresses to this file")
	f.StringVar(&seedsOut, "seeds-out", "", "write every host's front page URL to this file, one a line (a crawler's seeds)")
	f.BoolVar(&changes, "changes", false, "pages change over time at published rates, on websim's simulated clock, and carry ETag and Last-Modified")
	f.Float64Var(&timeScale, "time-scale", 1, "simulated seconds per wall-clock second, with --changes (86400: a simulated day per second)")
	f.StringVar(&epoch, "epoch", synth.DefaultEpoch.Format(time.RFC3339), "simulated time when serving starts, RFC 3339, with --changes")
	return cmd
}

// parseClock checks --changes, --time-scale and --epoch and returns the epoch.
func parseClock(changes bool, scale float64, epoch string) (time.Time, error) {
	if !(scale > 0 && scale <= websim.MaxTimeScale) {
		return time.Time{}, fmt.Errorf("--time-scale must be a positive number of simulated seconds per second, at most %g, got %v",
			float64(websim.MaxTimeScale), scale)
	}
	ep, err := time.Parse(time.RFC3339, epoch)
	if err != nil {
		return time.Time{}, fmt.Errorf("--epoch: want an RFC 3339 time such as 2026-01-01T00:00:00Z: %w", err)
	}
	if !changes && (scale != 1 || !ep.Equal(synth.DefaultEpoch)) {
		return time.Time{}, errors.New("--time-scale and --epoch need --changes (a static web has no clock)")
	}
	return ep, nil
}

// simDay returns the wall-clock time a simulated day takes at scale.
func simDay(scale float64) time.Duration {
	return time.Duration(float64(24*time.Hour) / scale).Round(time.Microsecond)
}

func newReplay(stdout, stderr io.Writer) *cobra.Command {
	var (
		c     commonFlags
		warcs []string
	)
	cmd := &cobra.Command{
		Use:   "replay --warc FILE...",
		Short: "Serve the HTTP responses recorded in WARC files, by URL",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			warcs = append(warcs, args...)
			if len(warcs) == 0 {
				return errors.New("replay: name at least one file with --warc")
			}
			log, err := c.logger(stderr)
			if err != nil {
				return err
			}
			base, err := c.base()
			if err != nil {
				return err
			}
			clients, err := c.readClients()
			if err != nil {
				return err
			}
			start := time.Now()
			srv, err := websim.StartReplay(websim.ReplayOptions{WARCs: warcs, IPs: c.ips, IPBase: base, Port: c.port,
				DNSAddr: c.dns, DNSTTL: c.dnsTTL, AdminAddr: c.admin, Clients: clients, Logger: log})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "websim: replaying %d files on %d addresses from %s, port %d\n", len(warcs), len(srv.IPs()), srv.IPs()[0], srv.Port())
			return serveUntilSignal(cmd.Context(), stdout, srv, &c, start)
		},
	}
	c.bind(cmd)
	cmd.Flags().StringSliceVar(&warcs, "warc", nil, "WARC file(s) to serve (repeat or comma-separate; trailing arguments count too)")
	return cmd
}

func serveUntilSignal(ctx context.Context, stdout io.Writer, srv *websim.Server, c *commonFlags, start time.Time) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if a := srv.DNSAddr(); a != "" {
		fmt.Fprintf(stdout, "websim: dns on %s\n", a)
	}
	if a := srv.AdminAddr(); a != "" {
		fmt.Fprintf(stdout, "websim: stats at http://%s/_websim/stats\n", a)
	}
	if c.clients != "" {
		fmt.Fprintf(stdout, "websim: %d named clients from %s pay for distance\n", c.nClients, c.clients)
	}
	fmt.Fprintf(stdout, "websim: ready in %v\n", time.Since(start).Round(time.Millisecond))
	if c.waitReady != "" {
		msg := fmt.Sprintf("ready port=%d dns=%s admin=%s\n", srv.Port(), srv.DNSAddr(), srv.AdminAddr())
		if err := os.WriteFile(c.waitReady, []byte(msg), 0o644); err != nil {
			srv.Close()
			return fmt.Errorf("--ready-file: %w", err)
		}
	}
	var tick <-chan time.Time
	if c.progress > 0 {
		t := time.NewTicker(c.progress)
		defer t.Stop()
		tick = t.C
	}
	var last int64
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick:
			snap := srv.Stats().Snapshot()
			if snap.Requests != last {
				var sim string
				if snap.SimTime != "" {
					sim = fmt.Sprintf("; simulated time %s, %d conditional requests, %d not modified",
						snap.SimTime, snap.ConditionalRequests, snap.NotModified)
				}
				fmt.Fprintf(stdout, "websim: %d requests (%.0f/s) from %d hosts visited, %d robots violations%s\n",
					snap.Requests, float64(snap.Requests-last)/c.progress.Seconds(), len(snap.Hosts), snap.RobotsViolationCount, sim)
				last = snap.Requests
			}
		}
	}
	fmt.Fprintln(stdout, "websim: stopping")
	return srv.Close()
}

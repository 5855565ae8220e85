// Command site runs and inspects a Meridian site.
//
//	site up [--region NAME] [--data DIR] [flags]   crawl until stopped, done or exhausted
//	site up --join HOST:PORT --data DIR2 --listen ADDR2 [--raft ADDR] [--node NAME]
//	                                               add a node to a running site
//	site status [--data DIR | --addr HOST:PORT] [--json]   print a node's state (and its site's nodes and federation peers;
//	                                               on a sharded site every shard of the site, asked of every node)
//	site leave [--data DIR | --addr API-HOST:PORT]  take a node out of its site, handing its work back
//	site inject FILE|- [--data DIR]                 add seeds to a running crawl
//	site pause | resume [--data DIR]                stop and restart generating rounds (kept across restarts)
//	site host HOST --delay D | --block [UNTIL] | --unblock   override one host's politeness
//	site limits [--width N] [--per-host K] [--host-budget N] [--pld-budget N] change the round limits while running
//	site warc-index DIR                              (re)build the CDXJ index beside every WARC file in DIR
//
// With no --seeds, `site up` starts an in-process websim (--websim PROFILE)
// and crawls it: the README's first command.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/meridian-crawler/meridian/shard"
	"github.com/meridian-crawler/meridian/site"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func main() {
	if err := newRoot(os.Stdout, os.Stderr, upSite).Execute(); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "site: ") { // the site package's errors say it already
			msg = "site: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

// upFunc runs a site; tests replace it to see the configuration.
type upFunc func(ctx context.Context, cfg site.Config, log *slog.Logger, progress io.Writer) error

func upSite(ctx context.Context, cfg site.Config, log *slog.Logger, progress io.Writer) error {
	return site.Up(ctx, cfg, log, progress)
}

func newRoot(stdout, stderr io.Writer, up upFunc) *cobra.Command {
	root := &cobra.Command{Use: "site", Short: "Run and inspect a Meridian site", SilenceUsage: true, SilenceErrors: true}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(upCmd(stderr, up), statusCmd(stdout), leaveCmd(stdout))
	root.AddCommand(certsCmd(stdout))
	root.AddCommand(controlCmds(os.Stdin, stdout)...)
	root.AddCommand(warcIndexCmd(stdout, stderr))
	return root
}

// changedAny reports whether any of the named flags was given.
func changedAny(fs *pflag.FlagSet, names ...string) bool {
	for _, n := range names {
		if fs.Changed(n) {
			return true
		}
	}
	return false
}

func upCmd(stderr io.Writer, up upFunc) *cobra.Command {
	cfg := site.DefaultConfig()
	var configFile, logLevel, urlRules string
	var websimSeed uint
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a site: rounds of generate, fetch+parse, update",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs := cmd.Flags()
			if configFile != "" {
				// Flags given on the command line win over the file.
				err := site.LoadConfigFile(configFile, func(k, v string) error {
					f := fs.Lookup(k)
					if f == nil || k == "config" {
						return fmt.Errorf("unknown setting %q", k)
					}
					if f.Changed {
						return nil
					}
					if err := fs.Set(k, v); err != nil {
						return fmt.Errorf("%s: %v", k, err)
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			// A node restarted on its data directory keeps its region and
			// its status address unless told otherwise.
			prev, prevErr := site.ReadInfo(cfg.Data)
			if prevErr == nil {
				if !fs.Changed("region") && prev.Region != "" {
					cfg.Region = prev.Region
				}
				if !fs.Changed("listen") && prev.Listen != "" {
					cfg.Listen = prev.Listen
				}
			}
			cfg.WebsimSeed = uint64(websimSeed)
			// A restart crawls the web it crawled: the recorded websim,
			// or none for a crawl of seeds (site.New refuses a mix).
			if prevErr == nil && prev.Node != "" && !prev.Joined && cfg.Seeds == "" {
				switch {
				case prev.Websim == "" && !fs.Changed("websim"):
					cfg.Websim = "off"
				case prev.Web != nil && !changedAny(fs, "websim", "websim-hosts", "websim-pages", "websim-seed", "websim-ips"):
					prev.Web.Apply(&cfg)
				}
			}
			if urlRules != "" {
				b, err := os.ReadFile(urlRules)
				if err != nil {
					return fmt.Errorf("--url-rules: %w", err)
				}
				if len(b) == 0 {
					return fmt.Errorf("--url-rules %s: the file is empty (it would refuse every URL; end it with \"+.\" to accept the rest)", urlRules)
				}
				cfg.URLRules, cfg.URLRulesFile = string(b), urlRules
			}
			if (cfg.Seeds != "" || cfg.Join != "") && !fs.Changed("websim") {
				cfg.Websim = "off" // given seeds, or joining a site: no in-vitro web of its own
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: %v", logLevel, err)
			}
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return up(ctx, cfg, log, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "config file of name = value lines (flag names); flags win")
	f.StringVar(&cfg.Region, "region", cfg.Region, "the site's region name")
	f.StringVar(&cfg.Data, "data", cfg.Data, "data directory (crawl database, WARC files, statistics)")
	f.StringVar(&cfg.Node, "node", cfg.Node, "this node's name in its site (default: REGION-1, or REGION-<raft port> for a node that joins; kept in --data)")
	f.StringVar(&cfg.Raft, "raft", cfg.Raft, "this node's Raft address, host:port (default: the one it had, or a free loopback port; kept in --data)")
	f.StringVar(&cfg.RaftAdvertise, "raft-advertise", cfg.RaftAdvertise, "the Raft address the site's other nodes dial, when not --raft's (a proxy or NAT in front of it)")
	f.StringVar(&cfg.Advertise, "advertise", cfg.Advertise, "the --api address the site's other nodes call, when not --api's (a proxy or NAT in front of it)")
	f.StringVar(&cfg.Join, "join", cfg.Join, "join the site of the node whose status (--listen) address this is: its /site/info gives the site's crawl settings and the node's --api address")
	f.DurationVar(&cfg.JoinWait, "join-wait", cfg.JoinWait, "how long --join waits for a node that answers it is still starting (a progress line every few seconds); a wrong address fails at once")
	f.DurationVar(&cfg.FailTimeout, "fail-timeout", cfg.FailTimeout, "a node silent this long is taken for dead and its hosts go to the other nodes")
	f.DurationVar(&cfg.ReplaceAfter, "replace-after", cfg.ReplaceAfter, "a sharded site: a node silent this long is given up and its replicas are re-created on the other nodes; until then it keeps them and leads none (at least max(3 × --fail-timeout, 5s))")
	f.BoolVar(&cfg.CheckCash, "check-cash", cfg.CheckCash, "check OPIC's cash invariant after every round (a full scan of the crawl database: for debugging)")
	f.StringVar(&cfg.Seeds, "seeds", cfg.Seeds, "file of seed URLs, one a line (bad lines are reported and skipped)")
	f.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "stop after this many rounds (0: until stopped or the crawl is exhausted); a sharded site: this many rounds of each shard")
	f.IntVar(&cfg.Shards, "shards", cfg.Shards, fmt.Sprintf("a new site's shard count: its hosts split into this many shards, each a Raft group whose rounds run on its leader (0: %d; fixed when the site is created)", shard.DefaultShards))
	f.IntVar(&cfg.Replicas, "replicas", cfg.Replicas, "replicas per shard, R (0: 3; a shard has min(R, nodes)); fixed when the site is created; a joining node must give its site's or none")
	f.IntVar(&cfg.Width, "width", cfg.Width, "URLs generated per round")
	f.IntVar(&cfg.PerHost, "per-host", cfg.PerHost, "URLs per host per round at most (k): what a host at --host-delay gets; slower hosts (Crawl-delay) get what they can serve in the same time")
	f.DurationVar(&cfg.HostDelay, "host-delay", cfg.HostDelay, "minimum gap between requests to one host (robots Crawl-delay wins when larger)")
	f.DurationVar(&cfg.MaxCrawlDelay, "max-crawl-delay", cfg.MaxCrawlDelay, "a robots.txt Crawl-delay is honoured up to this")
	f.DurationVar(&cfg.IPDelay, "ip-delay", cfg.IPDelay, "minimum gap between request starts to one IP address")
	f.StringVar(&cfg.DNS, "dns", cfg.DNS, "DNS server host:port (default: the system's)")
	f.Var(addrsFlag{&cfg.FetchFrom}, "fetch-from", "bind the fetcher's outgoing connections (HTTP and DNS) to the local addresses `ADDR[,ADDR...]`, for a multi-homed crawler or to tell sites on one machine apart (e.g. 127.0.2.1); each host is always reached from the same one of its family, and an address this machine lacks is refused at start. This node's own setting: not taken from the site on --join (default: the system's choice)")
	f.BoolVar(&cfg.AllowPrivate, "allow-private", cfg.AllowPrivate, "allow fetching from loopback, private and link-local addresses")
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "status, Prometheus /metrics and dashboard address (read-only, plain HTTP)")
	f.StringVar(&cfg.API, "api", cfg.API, "this node's API address: the crawl database's API and the calls of the site's other nodes (default: the one it had, or a free loopback port); mutual TLS with --certs")
	f.BoolVar(&cfg.Pprof, "pprof", cfg.Pprof, "also serve Go's /debug/pprof profiles on --listen (they expose the process's internals: keep --listen private)")
	f.BoolVar(&cfg.Insecure, "insecure", cfg.Insecure, "allow --raft and --api off loopback without --certs: anyone who reaches those ports can write the crawl database (labs only)")
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "concurrent fetches")
	f.IntVar(&cfg.ExpectNodes, "expect-nodes", 0, "hold the crawl's first round (at most 5 min) until the site has this many nodes (a sharded site: and every shard is placed on them), so that nodes started together share the first rounds and do not move work under load (0: crawl at once)")
	f.IntVar(&cfg.MaxDepth, "max-depth", cfg.MaxDepth, "links deeper than this are not followed")
	f.BoolVar(&cfg.PageRequisites, "page-requisites", cfg.PageRequisites, "also fetch what each page needs to render (images and srcset, scripts, style sheets, icons, CSS url() and @import), as deep as the page and ranked with it, as wget --page-requisites and Heritrix's embeds do")
	f.IntVar(&cfg.HostBudget, "host-budget", cfg.HostBudget, "pages fetched per host at most")
	f.IntVar(&cfg.NearDups, "near-dups", cfg.NearDups, "page fingerprints (SimHash) this node keeps to find near-duplicates, at most 1/20 of them of one host (0: no near-duplicate detection)")
	f.IntVar(&cfg.PLDBudget, "pld-budget", cfg.PLDBudget, "pages fetched per registrable domain at most, its hosts together (a.spam.test, b.spam.test, … share spam.test's, by the public-suffix list), beside --host-budget; the site's, shared by its shards (0: no limit)")
	f.DurationVar(&cfg.Refetch.Interval, "refetch-interval", cfg.Refetch.Interval, "fetch each fetched page again this long after its fetch (0: never; the crawl then ends when its frontier is empty)")
	f.BoolVar(&cfg.Refetch.Adaptive, "refetch-adaptive", cfg.Refetch.Adaptive, "adapt each page's refetch interval: × 0.8 when it changed, × 1.4 when it did not (Nutch's AdaptiveFetchSchedule), within --refetch-min and --refetch-max")
	f.BoolVar(&cfg.Refetch.Optimal, "refetch-optimal", cfg.Refetch.Optimal, "allocate refetches by each page's estimated change rate to maximise freshness at the budget of --refetch-interval (Cho and Garcia-Molina 2003), within --refetch-min and --refetch-max")
	f.DurationVar(&cfg.Refetch.Min, "refetch-min", cfg.Refetch.Min, "the adaptive or optimal refetch interval's floor (0: min(1m, --refetch-interval))")
	f.DurationVar(&cfg.Refetch.Max, "refetch-max", cfg.Refetch.Max, "the adaptive or optimal refetch interval's ceiling (0: max(365 days, --refetch-interval))")
	f.Int64Var(&cfg.MaxBody, "max-body", cfg.MaxBody, "bytes kept per response body")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "total time per fetch")
	f.DurationVar(&cfg.Backoff, "backoff", cfg.Backoff, "first back-off of a failing host; each further failure doubles it")
	f.DurationVar(&cfg.BackoffMax, "backoff-max", cfg.BackoffMax, "longest back-off of a failing host")
	f.IntVar(&cfg.MaxRetries, "max-retries", cfg.MaxRetries, "transient failures (timeouts, 5xx) before a URL is given up")
	f.IntVar(&cfg.MaxRedirects, "max-redirects", cfg.MaxRedirects, "longest chain of redirects followed (each target goes through the frontier)")
	f.StringVar(&cfg.UserAgent, "user-agent", cfg.UserAgent, "User-Agent header (default: Meridian/0.1 (+CONTACT)); its product token is the robots.txt agent unless --robots-agent says otherwise")
	f.StringVar(&cfg.Contact, "contact", cfg.Contact, "where site owners reach you, a URL or mailto: that goes into the default User-Agent; a crawl of the public web needs it (or a --user-agent of your own)")
	f.StringVar(&cfg.RobotsAgent, "robots-agent", cfg.RobotsAgent, "the product token matched against robots.txt user-agent lines, case-insensitively, * as fallback (default: the User-Agent's, e.g. meridian)")
	f.BoolVar(&cfg.RespectNoIndex, "respect-noindex", cfg.RespectNoIndex, "do not archive pages that say noindex (meta robots, X-Robots-Tag): they are fetched and their links followed, and the WARC holds only a metadata record saying so (default: archived, with that record after the response)")
	f.BoolVar(&cfg.TLSInsecure, "tls-insecure", cfg.TLSInsecure, "fetch from servers whose certificate does not verify (expired, self-signed, another name), as archival crawlers do; their WARC records say why")
	f.BoolVar(&cfg.Cookies, "cookies", cfg.Cookies, "keep the cookies servers set, per host, in memory (bounded), and send them back to that host (session and consent walls)")
	f.StringVar(&cfg.Proxy, "proxy", cfg.Proxy, "send every fetch through this HTTP proxy, `URL` (http://host:port; https goes through CONNECT), or \"env\" for HTTPS_PROXY and HTTP_PROXY; NO_PROXY from the environment applies; politeness stays per target host and address")
	f.IntVar(&cfg.TrapRepeats, "trap-repeats", cfg.TrapRepeats, "spider traps: a URL whose path repeats a segment, or a run of segments, more than this many times in a row, or a named segment (not all digits) more than this many times anywhere, is refused (/a/a/a/, /x/a/b/a/b/a/b/, /a/x/a/y/a/; 0: the rule off)")
	f.IntVar(&cfg.TrapCalendarPast, "trap-calendar-past", cfg.TrapCalendarPast, "spider traps: a calendar-like URL (a date ending the path, /cal/2019/05/, or in the query, ?date=2019-05-01, ?year=2019&month=5) dated more than this many months ago is refused (0: no bound in the past)")
	f.IntVar(&cfg.TrapCalendarFuture, "trap-calendar-future", cfg.TrapCalendarFuture, "spider traps: a calendar-like URL dated more than this many months ahead is refused (0: no bound in the future; with --trap-calendar-past 0 the rule is off)")
	f.StringVar(&cfg.TLSCA, "tls-ca", cfg.TLSCA, "PEM `FILE` of certificate authorities trusted besides the system's (SSL_CERT_FILE and SSL_CERT_DIR change those)")
	f.Int64Var(&cfg.WARCSize, "warc-size", cfg.WARCSize, "rotate WARC files past this many bytes")
	f.StringVar(&cfg.Scope, "scope", cfg.Scope, "comma-separated host suffixes to stay within (default: any)")
	f.StringVar(&urlRules, "url-rules", "", "file of URL rules, one a line: +/- then prefix:, suffix:, host:, host-suffix:, regex: (RE2) and a pattern, or a bare regex; the first that matches decides, none matching refuses (end with \"+.\" to accept the rest); applied to links, sitemap entries and seeds")
	f.StringVar(&cfg.SkipExts, "skip-ext", cfg.SkipExts, "comma-separated path extensions not to fetch, e.g. jpg,png,zip (default: fetch all)")
	f.StringVar(&cfg.Websim, "websim", cfg.Websim, "crawl an in-process websim: clean, realistic, hostile or off (off by default when --seeds is given)")
	f.IntVar(&cfg.WebsimHosts, "websim-hosts", cfg.WebsimHosts, "hosts of the in-process websim")
	f.IntVar(&cfg.WebsimPages, "websim-pages", cfg.WebsimPages, "mean pages per host of the in-process websim")
	f.UintVar(&websimSeed, "websim-seed", uint(cfg.WebsimSeed), "seed of the in-process websim")
	f.IntVar(&cfg.WebsimIPs, "websim-ips", cfg.WebsimIPs, "loopback addresses of the in-process websim")
	f.DurationVar(&cfg.Progress, "progress", cfg.Progress, "interval of the progress line on stderr (0: none)")
	f.BoolVar(&cfg.NoSync, "no-sync", cfg.NoSync, "skip fsync of the Raft log (benchmarks only)")
	f.Float64Var(&cfg.Damping, "damping", cfg.Damping, "share of the cash a page distributes that follows its links; the rest goes to OPIC's virtual page (PageRank's damping)")
	f.IntVar(&cfg.Revisits, "revisits", cfg.Revisits, "fetched pages per update that pass on, over their stored links, the cash that reached them after their fetch (0: width/16, -1: none)")
	f.Int64Var(&cfg.LinkMemory, "link-memory", cfg.LinkMemory, "bytes of outlinks kept for revisits (the pages that distributed the most cash)")
	f.StringVar(&cfg.Federation, "federation", cfg.Federation, "federation file (JSON: partitioner, replicas, grace, sites): crawl one web with the sites it lists, as the site named by --region")
	f.StringVar(&cfg.FederationListen, "federation-listen", cfg.FederationListen, "where this node serves the federation endpoint: default the address the federation file names for the site; \"off\": not on this node (another node of the site serves it)")
	f.StringVar(&cfg.Certs, "certs", cfg.Certs, "directory of the deployment's certificates (make them with site certs): ca.pem, this node's REGION.NODE.pem and -key.pem (mutual TLS on --raft and --api), and with --federation the site's REGION.pem and -key.pem")
	f.StringVar(&cfg.GeoIP, "geoip", cfg.GeoIP, "GeoIP2/GeoLite2 City database locating hosts for the distance partitioner")
	f.BoolVar(&cfg.KeepFiles, "keep-round-files", cfg.KeepFiles, "keep each round's generate/fetch/update files")
	f.StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	return cmd
}

// addrsFlag is --fetch-from: comma-separated IP addresses (see
// localaddr.Parse), added to the list at each use, each kept once.
type addrsFlag struct{ addrs *[]netip.Addr }

// String implements pflag.Value.
func (f addrsFlag) String() string {
	if f.addrs == nil {
		return ""
	}
	s := make([]string, len(*f.addrs))
	for i, a := range *f.addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// Set implements pflag.Value.
func (f addrsFlag) Set(v string) error {
	addrs, err := localaddr.Parse(v)
	if err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), "\n", "; ")) // one line after pflag's "invalid argument"
	}
	for _, a := range addrs {
		if !slices.Contains(*f.addrs, a) {
			*f.addrs = append(*f.addrs, a)
		}
	}
	return nil
}

// Type implements pflag.Value.
func (addrsFlag) Type() string { return "addrs" }

func statusCmd(stdout io.Writer) *cobra.Command {
	var data, addr string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the running site's state: a summary, or with --json the /status?site=1 object",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if addr == "" {
				in, err := site.ReadInfo(data)
				if err != nil {
					return err
				}
				addr = in.Listen
			}
			c := &http.Client{Timeout: 5 * time.Second}
			// site=1: a sharded node adds the site-wide view (every
			// shard, from the node that leads it; each node asked
			// within a second); other nodes ignore it.
			resp, err := c.Get("http://" + addr + "/status?site=1")
			if err != nil {
				return fmt.Errorf("no site answering at %s (is it running?): %w", addr, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status from %s: %s", addr, resp.Status)
			}
			if asJSON {
				_, err = io.Copy(stdout, resp.Body)
				return err
			}
			var st site.Status
			if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&st); err != nil {
				return fmt.Errorf("status from %s: %w", addr, err)
			}
			return st.WriteSummary(stdout)
		},
	}
	cmd.Flags().StringVar(&data, "data", site.DefaultConfig().Data, "the site's data directory")
	cmd.Flags().StringVar(&addr, "addr", "", "the site's status address (default: from DATA/site.json)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the /status?site=1 JSON object instead of the summary")
	return cmd
}

func leaveCmd(stdout io.Writer) *cobra.Command {
	var data, addr string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "leave",
		Short: "Take a running node out of its site: it hands its hosts back, leaves the site's group and exits",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pid, status := 0, ""
			c := &http.Client{Timeout: 10 * time.Second}
			scheme := "http"
			if addr == "" {
				in, err := site.ReadInfo(data)
				if err != nil {
					return err
				}
				if in.Left {
					return fmt.Errorf("node %s (%s) has already left its site", in.Node, data)
				}
				addr, pid, status = in.API, in.PID, in.Listen
				if in.Certs != "" {
					// The node API admits the site's nodes only: call it
					// with this node's own certificate.
					t, err := certs.LoadNode(in.Certs, in.Region, in.Node)
					if err != nil {
						return fmt.Errorf("node %s's certificate: %w", in.Node, err)
					}
					c.Transport = &http.Transport{TLSClientConfig: t.Client(certs.AllowNodesOf(in.Region))}
					scheme = "https"
				}
			}
			resp, err := c.Post(scheme+"://"+addr+"/site/leave", "text/plain", nil)
			if err != nil {
				return fmt.Errorf("no node API answering at %s (is it running? a node with --certs: give --data, not --addr): %w", addr, err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				return fmt.Errorf("leave refused by %s: %s", addr, strings.TrimSpace(string(body)))
			}
			fmt.Fprint(stdout, string(body))
			// Wait for the node to hand its work back and exit.
			deadline := time.Now().Add(wait)
			for time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
				if pid > 0 {
					if !alive(pid) {
						fmt.Fprintln(stdout, "left")
						return nil
					}
					continue
				}
				probe := scheme + "://" + addr + "/site/nodes" // any answer: still up
				if status != "" {
					probe = "http://" + status + "/status"
				}
				if _, err := c.Get(probe); err != nil {
					fmt.Fprintln(stdout, "left")
					return nil
				}
			}
			return fmt.Errorf("the node at %s is still running after %v", addr, wait)
		},
	}
	cmd.Flags().StringVar(&data, "data", site.DefaultConfig().Data, "the node's data directory (its API address and certificate are found there)")
	cmd.Flags().StringVar(&addr, "addr", "", "the node's API address (--api), for a node without --certs (default: from DATA/site.json)")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the node to exit")
	return cmd
}

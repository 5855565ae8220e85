// Package site is one site's daemon: it wires the crawl database, the
// rounds, the polite fetcher, WARC output, the status API and Prometheus
// metrics, and runs them until stopped (`site up`).
package site

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/fetcher/urlrules"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/shardset"
)

// Config is what `site up` takes, from flags and an optional config file.
type Config struct {
	Region        string        // the site's region name
	Data          string        // data directory: crawldb/, warc/, stats/, rounds/
	Node          string        // this node's name in its site ("" → region-1, or region-<raft port> for a node that joins)
	Raft          string        // this node's Raft address ("" → the one it had, or a free loopback port)
	RaftAdvertise string        // the Raft address the site's other nodes dial ("" → Raft's bound address); a proxy in front of Raft
	API           string        // this node's API address: the crawl database's API and the other nodes' calls ("" → the one it had, or a free loopback port)
	Advertise     string        // the --api address the site's other nodes call ("" → API's bound address); a proxy in front of it
	Join          string        // --listen (status) address of a node of the site to join ("" → start or restart a site)
	JoinWait      time.Duration // how long a joining node waits for a node that answers it is still starting (0: not at all)
	FailTimeout   time.Duration // a node silent this long is dead and its hosts go to the others
	ReplaceAfter  time.Duration // a sharded site: a node silent this long is given up and its replicas re-created elsewhere
	CheckCash     bool          // check OPIC's invariant after every round (a full scan: debugging)
	Seeds         string        // file of seed URLs, one a line; "" with Websim set: websim's front pages
	Rounds        int           // stop after this many rounds (0: until stopped or exhausted)
	Width         int           // URLs per round
	PerHost       int           // URLs per host per round (k)
	HostDelay     time.Duration // minimum gap between requests to one host
	MaxCrawlDelay time.Duration // robots Crawl-delay honoured up to this
	IPDelay       time.Duration // minimum gap between request starts to one IP
	DNS           string        // DNS server host:port ("" → the system's)
	AllowPrivate  bool          // allow loopback/private/link-local addresses
	Listen        string        // status, /metrics and dashboard address: read-only (and /debug/pprof with Pprof)
	Pprof         bool          // serve /debug/pprof on Listen
	Insecure      bool          // allow Raft and API listeners off loopback without certificates (labs only)
	Workers       int           // concurrent fetches
	ExpectNodes   int           // the crawl's first round waits (at most 5 min) until the site has this many nodes (a sharded site's: and its shards are placed on them)
	MaxDepth      int           // links deeper than this are not followed
	HostBudget    int           // pages per host at most
	// NearDups is how many page fingerprints (SimHash) this node keeps to
	// find near-duplicates (0: none found); at most NearDups/20 (and at
	// least 100) of one host.
	NearDups int
	// PageRequisites makes the crawl fetch what each page needs to render
	// (fetcher.Options.PageRequisites): its embeds go through the
	// frontier as its links do, at the page's depth, ranked with the page.
	PageRequisites bool
	// PLDBudget is the pages per registrable domain at most (its hosts
	// together: a.spam.test and b.spam.test share spam.test's), a second
	// budget beside HostBudget; 0: none.
	PLDBudget int
	// Refetch is the refetch schedule (issue 23): each fetched page is
	// fetched again Refetch.Interval after its fetch (0: never, and a
	// crawl ends when its frontier is empty); Adaptive scales a page's
	// interval by what its refetches find, within [Min, Max]; Optimal
	// gives each page the interval of its estimated change rate that
	// maximises freshness at the budget of Interval, within [Min, Max].
	Refetch      plan.Refetch
	MaxBody      int64         // bytes per response body
	Timeout      time.Duration // total time per fetch
	Backoff      time.Duration // first back-off of a failing host (doubles per failure)
	BackoffMax   time.Duration // longest back-off
	MaxRetries   int           // transient failures before a URL is given up
	MaxRedirects int           // longest redirect chain followed
	UserAgent    string
	// Contact is where a site owner reaches the crawl's operator (a URL
	// or mailto:); it goes into the default User-Agent
	// (fetcher.Options.Contact). A crawl that may reach public addresses
	// (no --websim) needs it, or a UserAgent of the operator's own.
	Contact string
	// RobotsAgent is the product token matched in robots.txt ("" → the
	// User-Agent's).
	RobotsAgent string
	// RespectNoIndex: a page that says noindex is fetched and its links
	// followed, but not archived (fetcher.Options.RespectNoIndex).
	RespectNoIndex bool
	// TLSInsecure fetches from servers whose certificate does not verify,
	// marking their WARC records (fetcher.Options.TLSInsecure).
	TLSInsecure bool
	// Cookies keeps the cookies servers set, per host, in memory, and
	// sends them back (fetcher.Options.Cookies).
	Cookies bool
	// Proxy is the HTTP proxy every fetch goes through: a URL
	// (http://host:port), "env" for HTTPS_PROXY and HTTP_PROXY from the
	// environment, or "" for none; NO_PROXY from the environment applies
	// to both. A node-local setting (a machine's way out), not one of
	// the Settings a joining node takes.
	Proxy string
	// TrapRepeats is how often a path segment, or a run of segments, may
	// repeat in a row, and a named segment anywhere, before a URL is
	// refused as a spider trap (urlnorm.Scope.MaxRepeats); 0 turns the
	// rule off.
	TrapRepeats int
	// TrapCalendarPast and TrapCalendarFuture are the months before and
	// after now that a calendar-like URL's date may lie in
	// (urlnorm.Scope's calendar rule); 0 leaves that side unbounded, both
	// 0 turn the rule off.
	TrapCalendarPast, TrapCalendarFuture int
	// TLSCA is a PEM file of certificate authorities the fetcher trusts
	// besides the system's (SSL_CERT_FILE and SSL_CERT_DIR change
	// those). A node-local setting.
	TLSCA    string
	WARCSize int64  // rotate WARC files past this many bytes
	Scope    string // comma-separated host suffixes to stay within ("" → anything)
	SkipExts string // comma-separated path extensions not fetched ("" → none)
	// URLRules is the text of the URL rules (package urlrules: ordered
	// +/- rules, the first match deciding; "" → none), applied to links,
	// sitemap entries and seeds; URLRulesFile names it in messages (the
	// --url-rules file, read by the command).
	URLRules     string
	URLRulesFile string
	Websim       string // "" or "off": none; else a profile: start an in-process websim to crawl
	WebsimHosts  int
	WebsimPages  int
	WebsimSeed   uint64
	WebsimIPs    int
	Progress     time.Duration // live progress line interval on stderr (0: none)
	NoSync       bool          // skip fsync of the Raft log (benchmarks)
	KeepFiles    bool          // keep each round's files after its update
	Damping      float64       // share of a page's distributed cash that follows its links (the rest: virtual page)
	Revisits     int           // stored pages per update that pass on cash received after their fetch (0: width/16, -1: none)
	LinkMemory   int64         // bytes of outlinks kept for revisits
	Federation   string        // federation file ("" → this site crawls alone)
	// FederationListen is where this node serves the federation endpoint:
	// "" → the address the federation file names for the site; "off" →
	// not here (another node of the site serves it, e.g. on this machine).
	FederationListen string
	// Certs is the directory of the deployment's certificates (site certs):
	// ca.pem, the node's REGION.NODE.pem pair (mutual TLS on Raft and the
	// node API), and with Federation the site's REGION.pem pair. "" → no
	// TLS, allowed only with every Raft and API listener on loopback (or
	// with Insecure).
	Certs string
	GeoIP string // GeoIP2/GeoLite2 City database, for the distance partitioner
	// Shards is a new site's shard count (package shardset): its hosts
	// split into this many shards, each a Raft group of Replicas
	// replicas, each shard's rounds run on its leader. 0:
	// shard.DefaultShards. Fixed when the site is created; a node that
	// joins takes its site's.
	Shards int
	// Replicas is the site's replication target R (0: 3; a shard has
	// min(R, nodes) replicas). A node that joins with --replicas set must
	// give its site's.
	Replicas int
	// FetchFrom are the local addresses the fetcher's connections (HTTP
	// and DNS) leave from, each host's always from the same one of its
	// family (fetcher.Options.LocalAddrs); every one must be the
	// machine's. nil → the system chooses. A node-local setting: not one
	// of the Settings a joining node takes from its site.
	FetchFrom []netip.Addr
}

// DefaultConfig is the configuration of `site up` with no flags: a local
// site crawling an in-process websim.
func DefaultConfig() Config {
	return Config{
		Region: "local", Data: "meridian-data", Width: 10_000, PerHost: 10,
		HostDelay: time.Second, MaxCrawlDelay: 30 * time.Second, Listen: "127.0.0.1:7077", Workers: 256,
		MaxDepth: 32, HostBudget: 20_000, NearDups: 200_000, MaxBody: 8 << 20, Timeout: 30 * time.Second,
		Backoff: 5 * time.Second, BackoffMax: 10 * time.Minute, MaxRetries: 3, MaxRedirects: 10,
		WARCSize: 1 << 30, Websim: "realistic", WebsimHosts: 200, WebsimPages: 20,
		WebsimSeed: 1, WebsimIPs: 16, Progress: 2 * time.Second,
		Damping: 0.85, LinkMemory: 64 << 20, FailTimeout: 3 * time.Second, JoinWait: time.Minute,
		ReplaceAfter: time.Minute,
		TrapRepeats:  urlnorm.DefaultMaxRepeats, TrapCalendarPast: urlnorm.DefaultCalendarPastMonths, TrapCalendarFuture: urlnorm.DefaultCalendarFutureMonths,
	}
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("site: "+format, args...)) }
	if c.Region == "" || strings.ContainsAny(c.Region, "/ \t\n") {
		bad("--region %q must be a non-empty name without spaces or slashes", c.Region)
	}
	if c.Data == "" {
		bad("--data is required")
	}
	if c.Node != "" && (strings.ContainsAny(c.Node, "/ \t\n#:") || len(c.Node) > 64) {
		bad("--node %q must be a name of at most 64 characters without spaces, slashes, colons or '#'", c.Node)
	}
	if c.FailTimeout < 500*time.Millisecond {
		bad("--fail-timeout must be at least 500ms, got %v", c.FailTimeout)
	}
	if c.ReplaceAfter < 0 {
		bad("--replace-after must not be negative, got %v", c.ReplaceAfter)
	}
	if c.Width < 1 || c.Width > 1_000_000 {
		bad("--width must be in [1, 1000000], got %d", c.Width)
	}
	if c.PerHost < 1 {
		bad("--per-host must be at least 1, got %d", c.PerHost)
	}
	if c.HostDelay < 0 || c.IPDelay < 0 || c.MaxCrawlDelay < 0 {
		bad("--host-delay, --ip-delay and --max-crawl-delay must not be negative")
	}
	if c.JoinWait < 0 {
		bad("--join-wait must not be negative, got %v", c.JoinWait)
	}
	if c.Rounds < 0 {
		bad("--rounds must not be negative")
	}
	if c.Shards < 0 || c.Shards > shardset.MaxShards {
		bad("--shards must be in [0, %d], got %d", shardset.MaxShards, c.Shards)
	}
	if c.Replicas < 0 || c.Replicas > shardset.MaxReplicas {
		bad("--replicas must be in [1, %d] (0: 3), got %d", shardset.MaxReplicas, c.Replicas)
	}
	if c.ExpectNodes < 0 || c.ExpectNodes > 1000 {
		bad("--expect-nodes must be in [0, 1000], got %d", c.ExpectNodes)
	}
	if c.Workers < 1 || c.Workers > 10_000 {
		bad("--workers must be in [1, 10000], got %d", c.Workers)
	}
	if c.MaxDepth < 1 {
		bad("--max-depth must be at least 1, got %d", c.MaxDepth)
	}
	if c.NearDups < 0 || c.NearDups > 100_000_000 {
		bad("--near-dups must be in [0, 100000000], got %d", c.NearDups)
	}
	if c.HostBudget < 1 {
		bad("--host-budget must be at least 1, got %d", c.HostBudget)
	}
	if c.PLDBudget < 0 {
		bad("--pld-budget must be 0 (none) or a number of pages, got %d", c.PLDBudget)
	}
	if _, err := c.Refetch.WithDefaults(); err != nil {
		bad("--refetch-interval %v, --refetch-adaptive %v, --refetch-optimal %v, --refetch-min %v, --refetch-max %v: %v",
			c.Refetch.Interval, c.Refetch.Adaptive, c.Refetch.Optimal, c.Refetch.Min, c.Refetch.Max, err)
	}
	if c.URLRules != "" {
		if _, err := urlrules.ParseString(c.urlRulesName(), c.URLRules); err != nil {
			bad("--url-rules: %v", err)
		}
	}
	if c.MaxBody < 1024 {
		bad("--max-body must be at least 1024 bytes, got %d", c.MaxBody)
	}
	if c.Timeout <= 0 {
		bad("--timeout must be positive")
	}
	if c.Backoff <= 0 || c.BackoffMax < c.Backoff {
		bad("--backoff must be positive and at most --backoff-max")
	}
	if c.TrapRepeats < 0 || c.TrapCalendarPast < 0 || c.TrapCalendarFuture < 0 {
		bad("--trap-repeats, --trap-calendar-past and --trap-calendar-future must not be negative (0 turns a rule, or a side, off)")
	}
	if _, err := proxyFunc(c.Proxy); err != nil {
		bad("--proxy %q: %v", c.Proxy, err)
	}
	if c.Contact != "" && strings.ContainsAny(c.Contact, " \t\r\n()") {
		bad("--contact %q must be a URL or mailto: without spaces or parentheses", c.Contact)
	}
	if c.RobotsAgent != "" && !validToken(c.RobotsAgent) {
		bad("--robots-agent %q must be a product token: letters, '-' and '_' only", c.RobotsAgent)
	}
	if c.MaxRedirects < 1 {
		bad("--max-redirects must be at least 1, got %d", c.MaxRedirects)
	}
	if c.MaxRetries < 1 {
		bad("--max-retries must be at least 1, got %d", c.MaxRetries)
	}
	if !(c.Damping > 0 && c.Damping <= 1) {
		bad("--damping must be in (0, 1], got %v", c.Damping)
	}
	if c.Revisits < -1 {
		bad("--revisits must be -1 (none), 0 (width/16) or a count, got %d", c.Revisits)
	}
	if c.LinkMemory < 1<<20 {
		bad("--link-memory must be at least 1 MiB, got %d bytes", c.LinkMemory)
	}
	for _, a := range c.FetchFrom {
		if err := localaddr.Check(a); err != nil {
			bad("--fetch-from %w", err)
		}
	}
	for _, a := range []struct{ flag, addr string }{{"--listen", c.Listen}, {"--dns", c.DNS}, {"--raft", c.Raft}, {"--api", c.API}, {"--join", c.Join}} {
		if a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			bad("%s %q: want host:port: %v", a.flag, a.addr, err)
		}
	}
	for _, a := range []struct{ flag, addr string }{{"--raft-advertise", c.RaftAdvertise}, {"--advertise", c.Advertise}} {
		if a.addr == "" {
			continue
		}
		if host, port, err := net.SplitHostPort(a.addr); err != nil || port == "" || port == "0" {
			bad("%s %q: want host:port with a port the other nodes can dial", a.flag, a.addr)
		} else if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			bad("%s %q: want a host the other nodes can reach, not a wildcard", a.flag, a.addr)
		}
	}
	if c.Certs == "" && !c.Insecure {
		for _, a := range []struct{ flag, addr string }{{"--raft", c.Raft}, {"--api", c.API}} {
			if a.addr != "" && !IsLoopback(a.addr) {
				bad("%s %s is not a loopback address: the site's nodes must authenticate each other there; give --certs DIR (make it with: site certs --dir DIR --nodes %s/NODE,...), or --insecure for a lab", a.flag, a.addr, c.Region)
			}
		}
	}
	if c.Federation != "" && c.Certs == "" {
		bad("--federation needs --certs DIR: sites authenticate each other (make them with: site certs --dir DIR --sites NAME,...)")
	}
	if c.Federation != "" && c.Websim != "" && c.Websim != "off" {
		bad("--federation with --websim: the sites of a federation crawl one web; start websim on its own and give every site its --dns")
	}
	switch c.Websim {
	case "", "off", "clean", "realistic", "hostile":
	default:
		bad("--websim %q: want off, clean, realistic or hostile", c.Websim)
	}
	return errors.Join(errs...)
}

// ErrNoContact is the error of a site that would crawl the public web
// without saying who runs it (checkContact).
var ErrNoContact = errors.New("site: a crawl of the public web needs --contact URL (where site owners reach you; it goes into the User-Agent) or a --user-agent of your own")

// checkContact refuses a crawl that may reach public addresses (no
// in-process websim, no --allow-private) with neither a Contact nor a
// UserAgent. It is asked of the settings a node runs with: a node that
// joins takes its site's (Settings).
func (c Config) checkContact() error {
	if c.Contact == "" && c.UserAgent == "" && (c.Websim == "" || c.Websim == "off") && !c.AllowPrivate {
		return ErrNoContact
	}
	return nil
}

// IsLoopback reports whether the host of addr (host:port) is a loopback
// address or "localhost". An empty host (all interfaces) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ConfigError is a problem in a config file, with its place.
type ConfigError struct {
	File string
	Line int
	Msg  string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// ReadConfigFile reads "name = value" lines (names as the flags of `site up`
// without dashes; # starts a comment) and calls set for each; set returns
// an error for an unknown name or a bad value. All problems are reported,
// each with its line.
func ReadConfigFile(name string, r io.Reader, set func(key, value string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var errs []error
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			errs = append(errs, &ConfigError{name, line, fmt.Sprintf("want name = value, got %q", t)})
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		v = strings.Trim(v, `"`)
		if err := set(k, v); err != nil {
			errs = append(errs, &ConfigError{name, line, err.Error()})
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	return errors.Join(errs...)
}

// LoadConfigFile opens path and reads it with ReadConfigFile.
func LoadConfigFile(path string, set func(key, value string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("site: config file: %w", err)
	}
	defer f.Close()
	return ReadConfigFile(path, f, set)
}

// Settings are the crawl settings a site keeps the same on all its nodes
// (politeness above all: a host's delay must not depend on which node
// fetches it). A node that joins a site takes them from the node it joins
// through, keeps them in its data directory, and uses them on restarts.
type Settings struct {
	Width         int              `json:"width"`
	PerHost       int              `json:"per_host"`
	HostDelay     time.Duration    `json:"host_delay"`
	MaxCrawlDelay time.Duration    `json:"max_crawl_delay"`
	IPDelay       time.Duration    `json:"ip_delay"`
	DNS           string           `json:"dns,omitempty"`
	AllowPrivate  bool             `json:"allow_private,omitempty"`
	MaxDepth      int              `json:"max_depth"`
	HostBudget    int              `json:"host_budget"`
	PLDBudget     int              `json:"pld_budget,omitempty"` // absent: none, as for a site created before it
	Refetch       *refetchSettings `json:"refetch,omitempty"`
	MaxBody       int64            `json:"max_body"`
	Timeout       time.Duration    `json:"timeout"`
	Backoff       time.Duration    `json:"backoff"`
	BackoffMax    time.Duration    `json:"backoff_max"`
	MaxRetries    int              `json:"max_retries"`
	MaxRedirects  int              `json:"max_redirects"`
	UserAgent     string           `json:"user_agent,omitempty"`
	Scope         string           `json:"scope,omitempty"`
	SkipExts      string           `json:"skip_ext,omitempty"`
	URLRules      string           `json:"url_rules,omitempty"` // the rules' text
	Rounds        int              `json:"rounds,omitempty"`
	Damping       float64          `json:"damping"`
	Revisits      int              `json:"revisits,omitempty"`
	LinkMemory    int64            `json:"link_memory"`
	FailTimeout   time.Duration    `json:"fail_timeout"`
	ReplaceAfter  time.Duration    `json:"replace_after,omitempty"`
	CheckCash     bool             `json:"check_cash,omitempty"`
	Shards        int              `json:"shards,omitempty"`
	Replicas      int              `json:"replicas,omitempty"`

	// PageRequisites is absent (false) for a site created before it.
	PageRequisites bool `json:"page_requisites,omitempty"`

	// The real web's settings (issue 35): absent for a site created
	// before them, which had none of them.
	Contact        string `json:"contact,omitempty"`
	RobotsAgent    string `json:"robots_agent,omitempty"`
	RespectNoIndex bool   `json:"respect_noindex,omitempty"`
	TLSInsecure    bool   `json:"tls_insecure,omitempty"`
	Cookies        bool   `json:"cookies,omitempty"`
	// The trap rules, as urlnorm.Scope takes them: 0 (absent) the
	// default, -1 off.
	TrapRepeats        int `json:"trap_repeats,omitempty"`
	TrapCalendarPast   int `json:"trap_calendar_past,omitempty"`
	TrapCalendarFuture int `json:"trap_calendar_future,omitempty"`
}

// SettingsOf returns c's crawl settings.
func SettingsOf(c Config) Settings {
	return Settings{Width: c.Width, PerHost: c.PerHost, HostDelay: c.HostDelay, MaxCrawlDelay: c.MaxCrawlDelay, IPDelay: c.IPDelay,
		DNS: c.DNS, AllowPrivate: c.AllowPrivate, MaxDepth: c.MaxDepth, HostBudget: c.HostBudget, PLDBudget: c.PLDBudget, MaxBody: c.MaxBody,
		Timeout: c.Timeout, Backoff: c.Backoff, BackoffMax: c.BackoffMax, MaxRetries: c.MaxRetries, MaxRedirects: c.MaxRedirects,
		UserAgent: c.UserAgent, Scope: c.Scope, SkipExts: c.SkipExts, Rounds: c.Rounds, Damping: c.Damping, Revisits: c.Revisits,
		LinkMemory: c.LinkMemory, FailTimeout: c.FailTimeout, CheckCash: c.CheckCash, Shards: c.Shards, Replicas: c.Replicas,
		ReplaceAfter: c.ReplaceAfter, Refetch: refetchSettingsOf(c.Refetch), URLRules: c.URLRules, PageRequisites: c.PageRequisites,
		Contact: c.Contact, RobotsAgent: c.RobotsAgent, RespectNoIndex: c.RespectNoIndex, TLSInsecure: c.TLSInsecure, Cookies: c.Cookies,
		TrapRepeats: scopeLimit(c.TrapRepeats, urlnorm.DefaultMaxRepeats), TrapCalendarPast: scopeLimit(c.TrapCalendarPast, urlnorm.DefaultCalendarPastMonths),
		TrapCalendarFuture: scopeLimit(c.TrapCalendarFuture, urlnorm.DefaultCalendarFutureMonths)}
}

// urlRulesName names the URL rules in messages.
func (c *Config) urlRulesName() string {
	if c.URLRulesFile != "" {
		return c.URLRulesFile
	}
	return "url-rules"
}

// urlRules returns the parsed URL rules (nil: none); Check has parsed
// them once already.
func (c *Config) urlRules() (*urlrules.Rules, error) {
	if c.URLRules == "" {
		return nil, nil
	}
	return urlrules.ParseString(c.urlRulesName(), c.URLRules)
}

// refetchSettings is Settings' refetch schedule (absent: never refetch,
// as for a site created before refetch existed).
type refetchSettings struct {
	Interval time.Duration `json:"interval"`
	Adaptive bool          `json:"adaptive,omitempty"`
	Optimal  bool          `json:"optimal,omitempty"`
	Min      time.Duration `json:"min,omitempty"`
	Max      time.Duration `json:"max,omitempty"`
}

func refetchSettingsOf(r plan.Refetch) *refetchSettings {
	if !r.On() {
		return nil
	}
	return &refetchSettings{Interval: r.Interval, Adaptive: r.Adaptive, Optimal: r.Optimal, Min: r.Min, Max: r.Max}
}

// Apply sets s in c.
func (s Settings) Apply(c *Config) {
	c.Width, c.PerHost, c.HostDelay, c.MaxCrawlDelay, c.IPDelay = s.Width, s.PerHost, s.HostDelay, s.MaxCrawlDelay, s.IPDelay
	c.DNS, c.AllowPrivate, c.MaxDepth, c.HostBudget, c.MaxBody = s.DNS, s.AllowPrivate, s.MaxDepth, s.HostBudget, s.MaxBody
	c.PLDBudget = s.PLDBudget
	c.Timeout, c.Backoff, c.BackoffMax, c.MaxRetries, c.MaxRedirects = s.Timeout, s.Backoff, s.BackoffMax, s.MaxRetries, s.MaxRedirects
	c.UserAgent, c.Scope, c.SkipExts, c.Rounds, c.Damping, c.Revisits = s.UserAgent, s.Scope, s.SkipExts, s.Rounds, s.Damping, s.Revisits
	if s.URLRules != c.URLRules {
		c.URLRules, c.URLRulesFile = s.URLRules, "the site's url rules"
	}
	c.LinkMemory, c.FailTimeout, c.CheckCash = s.LinkMemory, s.FailTimeout, s.CheckCash
	c.PageRequisites = s.PageRequisites
	c.Contact, c.RobotsAgent, c.RespectNoIndex, c.TLSInsecure, c.Cookies = s.Contact, s.RobotsAgent, s.RespectNoIndex, s.TLSInsecure, s.Cookies
	c.TrapRepeats = configLimit(s.TrapRepeats, urlnorm.DefaultMaxRepeats)
	c.TrapCalendarPast = configLimit(s.TrapCalendarPast, urlnorm.DefaultCalendarPastMonths)
	c.TrapCalendarFuture = configLimit(s.TrapCalendarFuture, urlnorm.DefaultCalendarFutureMonths)
	if s.ReplaceAfter > 0 { // a site created before the setting keeps the default
		c.ReplaceAfter = s.ReplaceAfter
	}
	c.Shards, c.Replicas = s.Shards, s.Replicas
	c.Refetch = plan.Refetch{}
	if r := s.Refetch; r != nil {
		c.Refetch = plan.Refetch{Interval: r.Interval, Adaptive: r.Adaptive, Optimal: r.Optimal, Min: r.Min, Max: r.Max}
	}
}

// scopeLimit turns a trap limit of the Config (0: off) into the Scope's
// and the Settings' form (0: the default def, -1: off).
func scopeLimit(v, def int) int {
	switch v {
	case 0:
		return -1
	case def:
		return 0
	}
	return v
}

// configLimit is scopeLimit's inverse.
func configLimit(v, def int) int {
	switch v {
	case -1:
		return 0
	case 0:
		return def
	}
	return v
}

package site

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
	"github.com/meridian-crawler/meridian/partition/geoip"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/shardset"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// Sentinel errors.
var (
	// ErrLocked: another site runs on the data directory.
	ErrLocked = errors.New("site: data directory in use")
	// ErrWrongSite: the data directory, the join target or the node name
	// belongs to another site, region or node.
	ErrWrongSite = errors.New("site: wrong site")
	// ErrNoSite: no site answers at the --join address.
	ErrNoSite = errors.New("site: no site to join")
	// ErrLeft: the node of this data directory left its site.
	ErrLeft = errors.New("site: this node left its site")
)

// Info is what a running node writes to DATA/site.json, for `site status`,
// `site leave` and restarts (the Raft address and the node's name must stay
// the same).
type Info struct {
	Region   string `json:"region"`
	Node     string `json:"node"`
	PID      int    `json:"pid"`
	Listen   string `json:"listen"`
	API      string `json:"api"` // the node API's bound address
	RaftAddr string `json:"raft_addr"`
	// Certs is the absolute path of --certs ("" → no TLS): `site leave`
	// calls its node's API with the node's own certificate from there.
	Certs   string    `json:"certs,omitempty"`
	Started time.Time `json:"started"`
	Websim  string    `json:"websim,omitempty"` // the in-process websim's admin address
	// Web is the in-process websim's web when the node crawls one (nil:
	// seeds, a joined site, or a node of an older version): a restart
	// that would start another web on the same data is refused.
	Web *WebsimSpec `json:"web,omitempty"`
	// Joined: the node joined a site (it did not bootstrap it); Settings
	// are the site's crawl settings it took then.
	Joined   bool      `json:"joined,omitempty"`
	Settings *Settings `json:"settings,omitempty"`
	// Left: the node left its site (`site leave`); it cannot run again.
	Left bool `json:"left,omitempty"`
	// Migrated: when the node's data directory, of the old design, was
	// migrated into a site of one shard (migrate.go).
	Migrated time.Time `json:"migrated,omitzero"`
}

// WebsimSpec is what makes an in-process websim's web: the same spec gives
// the same web, byte for byte.
type WebsimSpec struct {
	Profile string `json:"profile"`
	Hosts   int    `json:"hosts"`
	Pages   int    `json:"pages"`
	Seed    uint64 `json:"seed"`
	IPs     int    `json:"ips"`
}

// WebsimSpecOf is the websim spec c asks for (nil: no websim).
func WebsimSpecOf(c Config) *WebsimSpec {
	if c.Websim == "" || c.Websim == "off" {
		return nil
	}
	return &WebsimSpec{Profile: c.Websim, Hosts: c.WebsimHosts, Pages: c.WebsimPages, Seed: c.WebsimSeed, IPs: c.WebsimIPs}
}

// Apply sets c's websim settings to w's.
func (w WebsimSpec) Apply(c *Config) {
	c.Websim, c.WebsimHosts, c.WebsimPages, c.WebsimSeed, c.WebsimIPs = w.Profile, w.Hosts, w.Pages, w.Seed, w.IPs
}

// String is the spec as `site up`'s flags say it.
func (w WebsimSpec) String() string {
	return fmt.Sprintf("--websim %s --websim-hosts %d --websim-pages %d --websim-seed %d --websim-ips %d", w.Profile, w.Hosts, w.Pages, w.Seed, w.IPs)
}

// InfoPath is where a node keeps its Info.
func InfoPath(data string) string { return filepath.Join(data, "site.json") }

// ReadInfo reads a node's Info.
func ReadInfo(data string) (Info, error) {
	var in Info
	b, err := os.ReadFile(InfoPath(data))
	if err != nil {
		return in, fmt.Errorf("site: no site state in %s: %w", data, err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("site: %s: %w", InfoPath(data), err)
	}
	return in, nil
}

func writeInfo(data string, in Info) error {
	// The PID alone, for `kill "$(cat DATA/site.pid)"`.
	if err := os.WriteFile(filepath.Join(data, "site.pid"), fmt.Appendf(nil, "%d\n", in.PID), 0o644); err != nil {
		return fmt.Errorf("site: write site.pid: %w", err)
	}
	b, _ := json.MarshalIndent(in, "", "  ")
	tmp := InfoPath(data) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("site: write %s: %w", tmp, err)
	}
	return os.Rename(tmp, InfoPath(data))
}

// Site is one running node of a site.
type Site struct {
	cfg Config
	log *slog.Logger
	db  *crawldb.DB // the site's meta group (its members, settings and placement)
	// migrating: the data directory is of the old design (or its
	// migration did not finish): start migrates it (migrate.go).
	migrating bool
	host      *crawldb.Host // the node's replicas of the site's groups
	set       *shardset.Set // the node's shards
	// norm and scope normalise and filter URLs as the fetcher does (the
	// seeds an operator injects).
	norm    *urlnorm.Normalizer
	scope   *urlnorm.Scope
	joined  bool // the node joined its site (rather than created it)
	fetch   *fetcher.Fetcher
	warc    *warcfile.Writer
	sim     *websim.Server
	http    *http.Server
	ln      net.Listener
	apiHTTP *http.Server // the node API (apiHandler), mutual TLS with --certs
	apiLn   net.Listener
	nodeTLS *certs.TLS // this node's certificate; nil without --certs
	// nodeClient calls the other nodes' APIs (over mutual TLS with
	// --certs); client calls status listeners (plain, read-only).
	nodeClient *http.Client
	apiScheme  string // "https" with --certs, else "http"
	joinAPI    string // the API address of the node to join (from its /site/info)
	lock       *os.File
	info       Info
	progressW  io.Writer // Up's progress writer (nil: none), for a join that waits
	started    time.Time
	metrics    *metrics
	dash       dashState // the dashboard's samples and rounds
	view       siteCache // a sharded site's last site-wide view (siteview.go)
	client     *http.Client

	fed   *federation.Fed // nil: not in a federation
	fedLn net.Listener
	geo   *geoip.DB

	ready   atomic.Bool // Start is done: every field is set (for the HTTP handlers)
	mu      sync.Mutex
	dbReady *crawldb.DB // set once the crawl database is open (for the API handler)
	stopRun context.CancelFunc
	leaving bool
	stopped *rounds.Finish // why this node stopped (a signal), once it has
	// finished: why a site of shards' crawl ended, as this node saw it
	// end (shardedEnding), for /status's Rounds.Finished.
	finished *rounds.Finish
	// leaveErr: a sharded node's leave failed (Run returns it).
	leaveErr error

	closeOnce sync.Once
	closeErr  error
}

// Up runs a node until ctx is done, the site's crawl ends, or the node
// leaves. Progress lines go to progress (nil: none).
func Up(ctx context.Context, cfg Config, log *slog.Logger, progress io.Writer) error {
	s, err := start(ctx, cfg, log, progress)
	if err != nil {
		return err
	}
	err = s.Run(ctx, progress)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// Start opens everything a node needs: it starts a site (or restarts its
// node), or joins one with cfg.Join. Run crawls. Nothing is created in the
// data directory until the checks (region, node name, the site to join)
// have passed.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Site, error) {
	return start(ctx, cfg, log, nil)
}

// start is Start; a join that waits for its site says so on progress too
// (nil: in the log only).
func start(ctx context.Context, cfg Config, log *slog.Logger, progress io.Writer) (_ *Site, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Site{cfg: cfg, log: log, started: time.Now(), client: &http.Client{Timeout: 5 * time.Second}, progressW: progress}
	prev, hasState, err := s.check(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.checkContact(); err != nil {
		return nil, err
	}
	created := false
	if _, err := os.Stat(cfg.Data); errors.Is(err, fs.ErrNotExist) {
		created = true
	}
	if err := os.MkdirAll(s.cfg.Data, 0o755); err != nil {
		return nil, fmt.Errorf("site: data directory: %w", err)
	}
	defer func() {
		if err != nil {
			s.Close()
			if created {
				os.RemoveAll(s.cfg.Data) // a refused join leaves nothing behind
			}
		}
	}()
	if err := s.lockData(); err != nil {
		return nil, err
	}
	cfg = s.cfg
	norm := urlnorm.New(urlnorm.Options{})
	// Images, PDFs and the like are fetched and archived too (not parsed),
	// unless --skip-ext names extensions to leave alone.
	scope := &urlnorm.Scope{SkipExts: []string{}, MaxRepeats: scopeLimit(cfg.TrapRepeats, urlnorm.DefaultMaxRepeats)}
	if cfg.TrapCalendarPast == 0 && cfg.TrapCalendarFuture == 0 {
		scope.CalendarPastMonths, scope.CalendarFutureMonths = -1, -1 // the rule off
	} else {
		scope.CalendarPastMonths = scopeLimit(cfg.TrapCalendarPast, urlnorm.DefaultCalendarPastMonths)
		scope.CalendarFutureMonths = scopeLimit(cfg.TrapCalendarFuture, urlnorm.DefaultCalendarFutureMonths)
	}
	for _, e := range strings.Split(cfg.SkipExts, ",") {
		if e = strings.TrimSpace(strings.ToLower(e)); e != "" {
			scope.SkipExts = append(scope.SkipExts, strings.TrimPrefix(e, "."))
		}
	}
	if cfg.Scope != "" {
		for _, sfx := range strings.Split(cfg.Scope, ",") {
			if sfx = strings.TrimSpace(strings.ToLower(sfx)); sfx != "" {
				scope.HostSuffixes = append(scope.HostSuffixes, sfx)
			}
		}
	}
	rules, err := cfg.urlRules()
	if err != nil {
		return nil, fmt.Errorf("site: %w", err)
	}
	if rules != nil {
		scope.Filter = rules.Allow
		s.log.Info("site: URL rules", "file", cfg.urlRulesName(), "rules", rules.Len())
	}
	s.norm, s.scope = norm, scope

	// The in-vitro web, when asked for: crawled like any web, through its
	// own DNS server, on loopback (so private addresses are allowed).
	var seeds []string
	if cfg.Websim != "" && cfg.Websim != "off" {
		if seeds, err = s.startWebsim(prev); err != nil {
			return nil, err
		}
	}
	cfg = s.cfg

	// The status listener: status, metrics, the dashboard, read-only.
	s.ln, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("site: --listen %s: %w", cfg.Listen, err)
	}
	s.metrics = newMetrics()
	s.http = &http.Server{Handler: s.handler(), ReadHeaderTimeout: 5 * time.Second}
	go s.http.Serve(s.ln) // owner: Site; stopped by Close

	raftAddr := cfg.Raft
	if raftAddr == "" {
		raftAddr = prev.RaftAddr
	}
	if raftAddr == "" {
		if raftAddr, err = freeAddr("Raft"); err != nil {
			return nil, err
		}
	}
	if cfg.Node == "" {
		cfg.Node = cfg.Region + "-1"
		if cfg.Join != "" {
			_, port, _ := net.SplitHostPort(raftAddr)
			cfg.Node = cfg.Region + "-" + port
		}
		s.cfg.Node = cfg.Node
	}
	// The node API: the crawl database's API and the other nodes' calls.
	// It serves before the crawl database opens (a node that becomes
	// leader at once is forwarded to at once).
	dbTLS, err := s.listenAPI(prev)
	if err != nil {
		return nil, err
	}
	join := ""
	if !hasState {
		join = s.joinAPI
	}
	if s.migrating {
		if err := s.migrateUnsharded(ctx, raftAddr); err != nil {
			return nil, err
		}
		prev.Migrated = time.Now().UTC()
		prev.RaftAddr = raftAddr
		if err := writeInfo(cfg.Data, prev); err != nil {
			return nil, err
		}
		hasState, join = false, ""
	}
	if !prev.Migrated.IsZero() && !hasState {
		cfg.Shards, s.cfg.Shards = 1, 1 // a migrated site is of one shard
	}
	advertise := s.apiLn.Addr().String()
	if cfg.Advertise != "" {
		advertise = cfg.Advertise
	}
	s.joined = prev.Joined || cfg.Join != "" && !hasState
	if err := s.startSharded(ctx, shardedStart{prev: prev, hasState: hasState, join: join, raftAddr: raftAddr,
		advertise: advertise, tls: dbTLS, seeds: seeds, norm: norm, scope: scope}); err != nil {
		return nil, err
	}
	return s, nil
}

// finishStart writes the node's info file and marks the node ready.
func (s *Site) finishStart(prev Info, raftAddr string) error {
	cfg := s.cfg
	st := SettingsOf(cfg)
	s.info = Info{Region: cfg.Region, Node: cfg.Node, PID: os.Getpid(), Listen: s.ln.Addr().String(), API: s.apiLn.Addr().String(),
		Certs: certsPath(cfg.Certs), RaftAddr: raftAddr, Started: s.started, Joined: s.joined, Settings: &st, Migrated: prev.Migrated}
	if s.sim != nil {
		s.info.Websim = s.sim.AdminAddr()
		s.info.Web = WebsimSpecOf(cfg)
	}
	if err := writeInfo(cfg.Data, s.info); err != nil {
		return err
	}
	s.ready.Store(true)
	s.log.Info("site: up", "region", cfg.Region, "node", cfg.Node, "status", "http://"+s.info.Listen+"/status", "metrics", "http://"+s.info.Listen+"/metrics")
	return nil
}

// readSeeds adds the seeds of --seeds to seeds.
func (s *Site) readSeeds(seeds []string, norm *urlnorm.Normalizer, scope *urlnorm.Scope) ([]string, error) {
	cfg := s.cfg
	if n := len(seeds); n > 0 { // websim's front pages: the scope and URL rules apply to them too
		seeds = slices.DeleteFunc(seeds, func(u string) bool { return !scope.AllowString(u) })
		if len(seeds) < n {
			s.log.Info("site: websim seeds out of scope or refused by the URL rules", "refused", n-len(seeds), "kept", len(seeds))
		}
	}
	if cfg.Seeds == "" {
		return seeds, nil
	}
	f, err := os.Open(cfg.Seeds)
	if err != nil {
		return nil, fmt.Errorf("site: seeds: %w", err)
	}
	urls, bad, err := ReadSeeds(f, norm, scope)
	f.Close()
	if err != nil {
		return nil, err
	}
	for _, b := range bad {
		s.log.Warn("site: seed skipped", "file", cfg.Seeds, "line", b.Line, "text", b.Text, "err", b.Err)
	}
	return append(seeds, urls...), nil
}

// check looks at the data directory and, for a join, at the site to join,
// before anything is created: a data directory of another region or node
// or one that left, a join to no site or to a site of another region, and
// a node name the site has already are refused. For a node that joins (or
// joined) it sets the site's crawl settings in s.cfg.
func (s *Site) check(ctx context.Context) (prev Info, hasState bool, err error) {
	cfg := &s.cfg
	if b, err := os.ReadFile(InfoPath(cfg.Data)); err == nil {
		if err := json.Unmarshal(b, &prev); err != nil {
			return prev, false, fmt.Errorf("site: %s: %w", InfoPath(cfg.Data), err)
		}
		if prev.Region != "" && prev.Region != cfg.Region {
			return prev, false, fmt.Errorf("%w: data directory %s is a node of region %q, not %q", ErrWrongSite, cfg.Data, prev.Region, cfg.Region)
		}
		if prev.Left {
			return prev, false, fmt.Errorf("%w: node %s (data directory %s) left its site; start a new node with an empty --data", ErrLeft, prev.Node, cfg.Data)
		}
		if prev.Node != "" && cfg.Node != "" && cfg.Node != prev.Node {
			return prev, false, fmt.Errorf("%w: data directory %s is node %q, not %q", ErrWrongSite, cfg.Data, prev.Node, cfg.Node)
		}
		if cfg.Node == "" {
			cfg.Node = prev.Node
		}
		if prev.Joined && prev.Settings != nil {
			prev.Settings.Apply(cfg) // a node that joined keeps its site's settings
			cfg.Websim = "off"
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return prev, false, fmt.Errorf("site: %w", err)
	}
	entries, err := os.ReadDir(filepath.Join(cfg.Data, "crawldb", "raft"))
	hasState = err == nil && len(entries) > 0
	if entries, err := os.ReadDir(filepath.Join(cfg.Data, "crawldb", "raftlog")); err == nil && len(entries) > 0 {
		hasState = true // a sharded node's
	}
	if hasState && prev.Node != "" && !prev.Joined {
		if err := checkWeb(cfg, prev); err != nil {
			return prev, hasState, err
		}
	}
	if needsMigration(cfg.Data, prev) {
		if cfg.Shards > 1 {
			return prev, hasState, fmt.Errorf("%w: data directory %s holds a node of the old design, which migrates into a site of one shard: leave --shards out, or start a new site with an empty --data", ErrWrongSite, cfg.Data)
		}
		s.migrating = true
		return prev, true, nil
	}
	if cfg.Join == "" || hasState {
		return prev, hasState, nil
	}
	// A new node joining: ask the site first.
	in, err := s.siteInfo(ctx, cfg.Join)
	if err != nil {
		return prev, false, fmt.Errorf("%w: no Meridian site answers at --join %s: %w", ErrNoSite, cfg.Join, err)
	}
	if in.Region != cfg.Region {
		return prev, false, fmt.Errorf("%w: the site at %s is region %q, not %q", ErrWrongSite, cfg.Join, in.Region, cfg.Region)
	}
	for _, m := range in.Members {
		if cfg.Node != "" && m.ID == cfg.Node {
			return prev, false, fmt.Errorf("%w: the site at %s already has a node named %q (at %s); pick another --node", ErrWrongSite, cfg.Join, cfg.Node, m.RaftAddr)
		}
	}
	if in.API == "" {
		return prev, false, fmt.Errorf("%w: the node at %s does not say its API address (an older version?)", ErrNoSite, cfg.Join)
	}
	s.joinAPI = in.API
	if in.Settings == nil || in.Settings.Shards == 0 {
		return prev, false, fmt.Errorf("%w: the site at %s is of the old design (one crawl database on every node), which this version does not run: restart its node with this version (its data migrates into a site of one shard), then join it", ErrWrongSite, cfg.Join)
	}
	if cfg.Replicas != 0 && in.Settings.Replicas != cfg.Replicas {
		return prev, false, fmt.Errorf("%w: the site at %s has --replicas %d, not %d (a joining node takes its site's: leave --replicas out)", ErrWrongSite, cfg.Join, in.Settings.Replicas, cfg.Replicas)
	}
	in.Settings.Apply(cfg)
	s.log.Info("site: joining with the site's crawl settings", "site", cfg.Join, "host_delay", cfg.HostDelay, "ip_delay", cfg.IPDelay, "width", cfg.Width)
	cfg.Websim = "off"
	return prev, false, nil
}

// SiteInfo is what GET /site/info answers: enough for a node to join.
type SiteInfo struct {
	Region   string           `json:"region"`
	Node     string           `json:"node"`
	Leader   string           `json:"leader"`
	API      string           `json:"api"` // the API address this node advertises (where a joining node sends its join)
	Members  []crawldb.Member `json:"members"`
	Settings *Settings        `json:"settings"`
}

// joinNoteEvery is how often a join waiting for its site says so.
const joinNoteEvery = 5 * time.Second

// errStarting is a node's answer that it is still starting (503 from
// whenReady, before Start is done).
var errStarting = errors.New("the node is still starting")

// siteInfo asks the node at addr (its status listener) for its site. A
// node that answers it is still starting is asked again every 200 ms for
// up to cfg.JoinWait, with a line every joinNoteEvery in the log and on
// the progress writer; a refused connection is tried again for 2 s (a node
// that is about to listen); any other answer (a 404, another server's
// 503, an answer that is not a Meridian site's) fails at once.
func (s *Site) siteInfo(ctx context.Context, addr string) (SiteInfo, error) {
	start := time.Now()
	nextNote := start.Add(joinNoteEvery)
	for attempt := 1; ; attempt++ {
		in, err := s.askSiteInfo(ctx, addr)
		if err == nil {
			if attempt > 1 {
				s.log.Info("site: the site to join answers", "join", addr, "waited", time.Since(start).Round(time.Millisecond))
			}
			return in, nil
		}
		var netErr net.Error
		waited := time.Since(start)
		switch {
		case errors.Is(err, errStarting):
			if waited >= s.cfg.JoinWait {
				return in, fmt.Errorf("%w after waiting %v (--join-wait)", err, waited.Round(time.Second))
			}
			if now := time.Now(); !now.Before(nextNote) {
				nextNote = now.Add(joinNoteEvery)
				msg := fmt.Sprintf("site: the node at --join %s is still starting; waiting (%v of --join-wait %v)", addr, waited.Round(time.Second), s.cfg.JoinWait)
				s.log.Info(msg)
				if s.progressW != nil {
					fmt.Fprintln(s.progressW, msg)
				}
			}
		case errors.As(err, &netErr) && attempt < 10:
		default:
			return in, err
		}
		select {
		case <-ctx.Done():
			return in, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// askSiteInfo asks the node at addr for its site once. A node still
// starting gives errStarting.
func (s *Site) askSiteInfo(ctx context.Context, addr string) (SiteInfo, error) {
	var in SiteInfo
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/site/info", nil)
	if err != nil {
		return in, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return in, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("GET /site/info: %s", resp.Status)
		if resp.StatusCode == http.StatusServiceUnavailable && bytes.HasPrefix(b, []byte(startingMsg)) {
			err = fmt.Errorf("%w (%w)", errStarting, err)
		}
		return in, err
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&in); err != nil {
		return in, fmt.Errorf("GET /site/info: %w", err)
	}
	if in.Region == "" {
		return in, errors.New("the answer is not a Meridian site's")
	}
	return in, nil
}

// checkWeb refuses to start an in-process websim on a data directory that
// holds a crawl of another web: seeds of its own (the websim's hosts would
// join that crawl under the same names), or a websim of another spec (the
// same host names, other pages).
func checkWeb(cfg *Config, prev Info) error {
	want := WebsimSpecOf(*cfg)
	if want == nil {
		return nil
	}
	if prev.Websim == "" {
		return fmt.Errorf("%w: data directory %s holds a crawl of seeds, not of an in-process websim: run it with --websim off (`site up` leaves the websim out by itself when neither --websim nor --seeds is given), or start the websim on an empty --data", ErrWrongSite, cfg.Data)
	}
	if prev.Web != nil && *prev.Web != *want {
		return fmt.Errorf("%w: data directory %s holds a crawl of the websim of %s, not %s: leave the --websim flags out (`site up` takes them from the data directory), or start another web on an empty --data", ErrWrongSite, cfg.Data, prev.Web, want)
	}
	return nil
}

func (s *Site) startWebsim(prev Info) ([]string, error) {
	cfg := s.cfg
	prof, err := synth.ParseProfile(cfg.Websim)
	if err != nil {
		return nil, err
	}
	port := 0
	if prev.Websim != "" { // same port as before, so stored URLs still resolve
		port = prevWebsimPort(cfg.Data)
	}
	opts := func(port int) websim.Options {
		return websim.Options{
			Web:       synth.Options{Hosts: cfg.WebsimHosts, Pages: cfg.WebsimPages, Seed: cfg.WebsimSeed, IPs: cfg.WebsimIPs, Profile: prof, Port: port},
			DNSAddr:   "127.0.0.1:0",
			AdminAddr: "127.0.0.1:0",
			TruthPath: filepath.Join(cfg.Data, "websim-truth.jsonl"),
			Logger:    s.log,
		}
	}
	sim, err := websim.Start(opts(port))
	if err != nil && port != 0 {
		sim, err = websim.Start(opts(0))
	}
	if err != nil {
		return nil, fmt.Errorf("site: start websim: %w", err)
	}
	s.sim = sim
	if err := os.WriteFile(filepath.Join(cfg.Data, "websim-port"), []byte(fmt.Sprint(sim.Port())), 0o644); err != nil {
		return nil, fmt.Errorf("site: %w", err)
	}
	s.cfg.DNS = sim.DNSAddr()
	s.cfg.AllowPrivate = true
	var seeds []string
	for h := range sim.Web().Hosts() {
		seeds = append(seeds, sim.Web().FrontURL(h))
	}
	if farm := sim.Web().FarmFront(); farm != "" {
		// The hostile web's subdomain farm: endless, one page a host,
		// held only by --pld-budget.
		seeds = append(seeds, farm)
	}
	s.log.Info("site: websim started", "profile", cfg.Websim, "hosts", len(seeds), "dns", sim.DNSAddr(), "stats", "http://"+sim.AdminAddr()+"/_websim/stats")
	return seeds, nil
}

func prevWebsimPort(data string) int {
	b, err := os.ReadFile(filepath.Join(data, "websim-port"))
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return p
}

func freeAddr(what string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("site: pick a %s port: %w", what, err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// lockData takes an exclusive lock on the data directory (lockFile).
func (s *Site) lockData() error {
	f, err := os.OpenFile(filepath.Join(s.cfg.Data, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("site: lock data directory: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return fmt.Errorf("%w: %s (%w)", ErrLocked, s.cfg.Data, err)
	}
	s.lock = f
	return nil
}

// Addr is the status API's address.
func (s *Site) Addr() string { return s.info.Listen }

// Node is this node's name.
func (s *Site) Node() string { return s.cfg.Node }

// Websim is the in-process websim, if any.
func (s *Site) Websim() *websim.Server { return s.sim }

// DB is the node's replica of the site's meta group (its members,
// settings and placement; the operator's controls).
func (s *Site) DB() *crawldb.DB { return s.db }

// Run crawls until ctx is done, the site's crawl ends, or the node leaves
// (none of which is an error): it runs the shards this node leads
// (shardset.Set.Run) and the fetcher they share.
func (s *Site) Run(ctx context.Context, progress io.Writer) error {
	fctx, stopFetch := context.WithCancel(context.WithoutCancel(ctx))
	fetchDone := make(chan error, 1)
	go func() { fetchDone <- s.fetch.Run(fctx) }() // owner: Run
	rctx, stopRun := context.WithCancel(ctx)
	s.mu.Lock()
	s.stopRun = stopRun
	s.mu.Unlock()
	var wg sync.WaitGroup
	pctx, stopProgress := context.WithCancel(ctx)
	if progress != nil && s.cfg.Progress > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); s.progress(pctx, progress) }()
	}
	if s.fed != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.fed.Run(pctx) }() // owner: Run
	}
	wg.Add(1)
	go func() { defer wg.Done(); s.dashSampler(pctx) }() // owner: Run
	// The shards run until the node stops, and then until the fetcher's
	// requests in flight have ended (drainFetch): their results reach the
	// shards' fetch segments, so that a restart does not fetch them again.
	sctx, stopSet := context.WithCancel(context.WithoutCancel(ctx))
	setDone := make(chan struct{})
	go func() { // owner: Run; ends with set.Run
		select {
		case <-rctx.Done():
			s.drainFetch(setDone)
			stopSet()
		case <-setDone:
			stopSet()
		}
	}()
	err := s.set.Run(sctx)
	close(setDone)
	stopped := rctx.Err() != nil // by a signal or a leave, not by the crawl's end
	s.mu.Lock()
	if s.leaveErr != nil && err == nil {
		err = s.leaveErr
	}
	s.mu.Unlock()
	stopProgress()
	wg.Wait()
	stopRun()
	stopFetch()
	if ferr := <-fetchDone; ferr != nil && !errors.Is(ferr, context.Canceled) && err == nil {
		err = ferr
	}
	if progress != nil {
		s.printProgress(progress, time.Now(), nil)
	}
	if err == nil {
		s.mu.Lock()
		leaving := s.leaving
		s.mu.Unlock()
		if end := s.shardedEnding(ctx, stopped, leaving); end != nil {
			s.reportEnd(*end, progress)
		}
	}
	return err
}

// drainWait bounds how long a stopping node waits for its requests in
// flight (drainFetch).
const drainWait = 5 * time.Second

// drainFetch pauses the fetcher (no new request starts) and waits, for
// drainWait at most or until done is closed, for its requests in flight to
// end and their results to be handed to the shards.
func (s *Site) drainFetch(done <-chan struct{}) {
	s.fetch.Pause(true)
	deadline := time.Now().Add(drainWait)
	for s.fetch.Stats().InFlight > 0 && time.Now().Before(deadline) {
		select {
		case <-done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	if n := s.fetch.Stats().InFlight; n > 0 {
		s.log.Warn("site: stopping with requests still in flight (fetched again after a restart)", "in_flight", n, "waited", drainWait)
		return
	}
	// A request ends (InFlight) before the fetcher's scheduler hands its
	// result on: a moment for the last ones.
	select {
	case <-done:
	case <-time.After(200 * time.Millisecond):
	}
}

// markStopped records a stop by a signal for /status (until the node
// exits) and logs its cause.
func (s *Site) markStopped(ctx context.Context, end rounds.Finish) *rounds.Finish {
	s.mu.Lock()
	s.stopped = &end
	s.mu.Unlock()
	if cause := context.Cause(ctx); cause != nil {
		s.log.Info("site: stopping", "cause", cause)
	}
	return &end
}

// shardedEnding is ending for a site of shards, from the round states of
// the shards led here: the site's crawl ended (by the strongest reason of
// its shards: a budget, then the round limit, else exhausted; the most
// rounds a shard did; what the shards left, summed), or this node was
// stopped by a signal (nil for a node that leaves).
func (s *Site) shardedEnding(ctx context.Context, stopped, leaving bool) *rounds.Finish {
	if stopped && leaving {
		return nil
	}
	end := rounds.Finish{Reason: rounds.EndExhausted, At: time.Now()}
	finished := 0
	// A site of one node stopped by a signal: each shard marks the last
	// line of its rounds.jsonl with its own stop, as a one-node site of
	// the old design marks its one; a node of several does not, since
	// the others crawl on.
	markStop := false
	if stopped {
		members, err := s.db.Members()
		markStop = err == nil && len(members) < 2
	}
	for sh, c := range s.set.Leading() {
		st := c.Status()
		end.Rounds = max(end.Rounds, st.Done)
		var shardEnd rounds.Finish
		if db := s.host.Lookup(shardset.GroupID(sh)); db != nil {
			cs := db.Store().Counts()
			shardEnd.Frontier, shardEnd.InFlight = cs.Frontier, cs.ByStatus[store.StatusGenerated]
			end.Frontier += shardEnd.Frontier
			end.InFlight += shardEnd.InFlight
		}
		if markStop && st.Finished == nil {
			shardEnd.Reason, shardEnd.At, shardEnd.Rounds = rounds.EndSignal, end.At, st.Done
			if err := c.MarkEnd(shardEnd); err != nil {
				s.log.Warn("site: mark the stop in a shard's rounds.jsonl", "shard", sh, "err", err)
			}
		}
		f := st.Finished
		if f == nil {
			continue
		}
		finished++
		end.Parked += f.Parked
		switch {
		case f.Reason == rounds.EndBudget:
			end.Reason = rounds.EndBudget
		case f.Reason == rounds.EndRounds && end.Reason == rounds.EndExhausted:
			end.Reason = rounds.EndRounds
		}
	}
	if stopped {
		end.Reason = rounds.EndSignal
		return s.markStopped(ctx, end)
	}
	if finished == 0 {
		return nil // a node that leads no shard: the log of the shards' end says it
	}
	if end.Reason == rounds.EndExhausted {
		end.Frontier, end.InFlight = 0, 0
	}
	s.mu.Lock()
	s.finished = &end
	s.mu.Unlock()
	return &end
}

// reportEnd says in the log and on the progress writer (nil: none) why
// the crawl stopped and what it left.
func (s *Site) reportEnd(end rounds.Finish, progress io.Writer) {
	msg := end.String()
	if end.Reason == rounds.EndSignal {
		if members, err := s.db.Members(); err == nil && len(members) > 1 {
			msg = fmt.Sprintf("node %s stopped by a signal; the site's other nodes crawl on (%d URLs left unfetched in the frontier)", s.cfg.Node, end.Frontier)
		}
	}
	attrs := []any{"reason", end.Reason, "rounds", end.Rounds, "frontier", end.Frontier}
	switch end.Reason {
	case rounds.EndExhausted:
		s.log.Info("site: crawl exhausted", attrs...)
	case rounds.EndBudget:
		s.log.Warn("site: "+msg, attrs...)
	default:
		s.log.Info("site: "+msg, attrs...)
	}
	if progress != nil {
		fmt.Fprintln(progress, msg)
	}
}

// Leave makes the node leave its site: its replicas move to the other
// nodes, it is removed from the meta group, and Run returns when done.
func (s *Site) Leave() error {
	members, err := s.db.Members()
	if err != nil {
		return err
	}
	if len(members) < 2 {
		return fmt.Errorf("site: node %s is the last node of its site: stop it instead", s.cfg.Node)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopRun == nil {
		return errors.New("site: the node is not running")
	}
	s.leaving = true
	go s.leaveSharded() // owner: Site; bounded by leaveWait, ends Run
	return nil
}

// Close stops the status API and closes everything Start opened. Later
// calls return the first call's result.
func (s *Site) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Site) close() error {
	var errs []error
	for _, srv := range []*http.Server{s.http, s.apiHTTP} {
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			srv.Shutdown(ctx)
			cancel()
		}
	}
	if s.apiHTTP == nil && s.apiLn != nil {
		s.apiLn.Close()
	}
	if s.fed != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.fed.Shutdown(ctx)
		cancel()
	} else if s.fedLn != nil {
		s.fedLn.Close()
	}
	if s.geo != nil {
		errs = append(errs, s.geo.Close())
	}
	if s.warc != nil {
		errs = append(errs, s.warc.Close())
	}
	if s.host != nil {
		errs = append(errs, s.host.Close()) // its groups, the meta group (s.db) among them
	}
	if s.sim != nil {
		errs = append(errs, s.sim.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
	}
	return errors.Join(errs...)
}

// quietHandler passes on a handler's records from Error up, and the
// crawl database's own warnings (messages "crawldb: ...", such as a
// connection refused on the Raft port); not Raft's warnings: a one-node
// site's Raft warns at every start that it is holding an election, which
// tells an operator nothing.
type quietHandler struct{ slog.Handler }

func (q quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && q.Handler.Enabled(ctx, l)
}

func (q quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelError && !strings.HasPrefix(r.Message, "crawldb: ") {
		return nil
	}
	return q.Handler.Handle(ctx, r)
}

func (q quietHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return quietHandler{q.Handler.WithAttrs(a)}
}

func (q quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{q.Handler.WithGroup(name)}
}

// nearDups sets the fetcher's near-duplicate detection (--near-dups).
func (s *Site) nearDups(fo *fetcher.Options) error {
	nd, err := newNearDupIndex(s.cfg.NearDups)
	if err != nil {
		return fmt.Errorf("site: --near-dups: %w", err)
	}
	if nd != nil {
		fo.NearDup = nd.check
	}
	return nil
}

// crawlerOptions gives the rounds options that every crawl database of a
// site takes from its configuration (every shard alike); each caller adds what is its own (the database,
// the width's share, the router, the logger).
func (s *Site) crawlerOptions(cfg *Config, res *dnscache.Resolver) rounds.Options {
	return rounds.Options{Width: cfg.Width, PerHost: cfg.PerHost,
		MaxDepth: uint32(cfg.MaxDepth), HostBudget: cfg.HostBudget, PLDBudget: cfg.PLDBudget, Refetch: cfg.Refetch,
		MaxRetries: cfg.MaxRetries, MaxRedirects: cfg.MaxRedirects, KeepFiles: cfg.KeepFiles,
		Damping: cfg.Damping, Revisits: cfg.Revisits, LinkMemory: cfg.LinkMemory,
		HostDelay: cfg.HostDelay, MaxCrawlDelay: cfg.MaxCrawlDelay, IPDelay: cfg.IPDelay,
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			ips, _, err := res.Lookup(ctx, host)
			return ips, err
		},
		FailTimeout: cfg.FailTimeout, CheckCash: cfg.CheckCash,
		OnRound: func(st rounds.RoundStats) { s.metrics.round(st); s.dash.round(-1, st) },
	}
}

// fetcherOptions are the fetcher's options that come from cfg alone; the
// caller adds the resolver, WARC writer, crawl hooks and logger. It fails
// on a --proxy or --tls-ca it cannot use.
func fetcherOptions(cfg Config) (fetcher.Options, error) {
	o := fetcher.Options{
		UserAgent: cfg.UserAgent, Contact: cfg.Contact, RobotsAgent: cfg.RobotsAgent, Workers: cfg.Workers,
		HostDelay: cfg.HostDelay, IPDelay: cfg.IPDelay, MaxCrawlDelay: cfg.MaxCrawlDelay,
		TotalTimeout: cfg.Timeout, BackoffBase: cfg.Backoff, BackoffMax: cfg.BackoffMax, MaxBodyBytes: cfg.MaxBody,
		AllowPrivate: cfg.AllowPrivate, LocalAddrs: cfg.FetchFrom, PageRequisites: cfg.PageRequisites,
		RespectNoIndex: cfg.RespectNoIndex, TLSInsecure: cfg.TLSInsecure, Cookies: cfg.Cookies,
	}
	var err error
	if o.Proxy, err = proxyFunc(cfg.Proxy); err != nil {
		return o, fmt.Errorf("site: --proxy: %w", err)
	}
	if o.TLSRoots, err = tlsRoots(cfg.TLSCA); err != nil {
		return o, fmt.Errorf("site: --tls-ca: %w", err)
	}
	return o, nil
}

package site

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// ErrLocked: another site runs on the data directory.
var ErrLocked = errors.New("site: data directory in use")

// Info is what a running site writes to DATA/site.json, for `site status`
// and for restarts (the Raft address must stay the same).
type Info struct {
	Region   string    `json:"region"`
	PID      int       `json:"pid"`
	Listen   string    `json:"listen"`
	RaftAddr string    `json:"raft_addr"`
	Started  time.Time `json:"started"`
	Websim   string    `json:"websim,omitempty"` // the in-process websim's admin address
}

// InfoPath is where a site keeps its Info.
func InfoPath(data string) string { return filepath.Join(data, "site.json") }

// ReadInfo reads a site's Info.
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
	b, _ := json.MarshalIndent(in, "", "  ")
	tmp := InfoPath(data) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("site: write %s: %w", tmp, err)
	}
	return os.Rename(tmp, InfoPath(data))
}

// Site is a running site.
type Site struct {
	cfg     Config
	log     *slog.Logger
	db      *crawldb.DB
	crawler *rounds.Crawler
	fetch   *fetcher.Fetcher
	warc    *warcfile.Writer
	sim     *websim.Server
	http    *http.Server
	ln      net.Listener
	lock    *os.File
	info    Info
	started time.Time
	metrics *metrics

	mu    sync.Mutex
	seeds int

	closeOnce sync.Once
	closeErr  error
}

// Up runs a site until ctx is done, cfg.Rounds rounds are done, or the crawl
// is exhausted. Progress lines go to progress (nil: none).
func Up(ctx context.Context, cfg Config, log *slog.Logger, progress io.Writer) error {
	s, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	err = s.Run(ctx, progress)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// Start opens everything a site needs and seeds it; Run crawls.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (_ *Site, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		return nil, fmt.Errorf("site: data directory: %w", err)
	}
	s := &Site{cfg: cfg, log: log, started: time.Now()}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.lockData(); err != nil {
		return nil, err
	}
	prev, _ := ReadInfo(cfg.Data)
	norm := urlnorm.New(urlnorm.Options{})
	// Images, PDFs and the like are fetched and archived too (not parsed),
	// unless --skip-ext names extensions to leave alone.
	scope := &urlnorm.Scope{SkipExts: []string{}}
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

	// The in-vitro web, when asked for: crawled like any web, through its
	// own DNS server, on loopback (so private addresses are allowed).
	var seeds []string
	if cfg.Websim != "" && cfg.Websim != "off" {
		prof, err := synth.ParseProfile(cfg.Websim)
		if err != nil {
			return nil, err
		}
		port := 0
		if prev.Websim != "" { // same port as before, so stored URLs still resolve
			port = prevWebsimPort(cfg.Data)
		}
		sim, err := websim.Start(websim.Options{
			Web:       synth.Options{Hosts: cfg.WebsimHosts, Pages: cfg.WebsimPages, Seed: cfg.WebsimSeed, IPs: cfg.WebsimIPs, Profile: prof, Port: port},
			DNSAddr:   "127.0.0.1:0",
			AdminAddr: "127.0.0.1:0",
			TruthPath: filepath.Join(cfg.Data, "websim-truth.jsonl"),
			Logger:    log,
		})
		if err != nil && port != 0 {
			sim, err = websim.Start(websim.Options{
				Web:       synth.Options{Hosts: cfg.WebsimHosts, Pages: cfg.WebsimPages, Seed: cfg.WebsimSeed, IPs: cfg.WebsimIPs, Profile: prof},
				DNSAddr:   "127.0.0.1:0",
				AdminAddr: "127.0.0.1:0",
				TruthPath: filepath.Join(cfg.Data, "websim-truth.jsonl"),
				Logger:    log,
			})
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
		for h := range sim.Web().Hosts() {
			seeds = append(seeds, sim.Web().FrontURL(h))
		}
		log.Info("site: websim started", "profile", cfg.Websim, "hosts", len(seeds), "dns", sim.DNSAddr(), "stats", "http://"+sim.AdminAddr()+"/_websim/stats")
	}
	cfg = s.cfg

	raftAddr := prev.RaftAddr
	if raftAddr == "" {
		raftAddr, err = freeAddr()
		if err != nil {
			return nil, err
		}
	}
	s.db, err = crawldb.Open(ctx, crawldb.Options{
		Dir: filepath.Join(cfg.Data, "crawldb"), NodeID: cfg.Region + "-1", RaftAddr: raftAddr,
		NoSync: cfg.NoSync, Logger: slog.New(quietHandler{log.Handler()}).With("part", "crawldb"),
	})
	if err != nil {
		return nil, fmt.Errorf("site: open crawl database: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = s.db.WaitLeader(wctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("site: crawl database has no leader: %w", err)
	}

	s.metrics = newMetrics()
	s.crawler, err = rounds.New(rounds.Options{
		DB: s.db, Dir: cfg.Data, Width: cfg.Width, PerHost: cfg.PerHost,
		MaxDepth: uint32(cfg.MaxDepth), HostBudget: cfg.HostBudget, MaxRetries: cfg.MaxRetries, MaxRedirects: cfg.MaxRedirects, KeepFiles: cfg.KeepFiles,
		Damping: cfg.Damping, Revisits: cfg.Revisits, LinkMemory: cfg.LinkMemory,
		Logger: log.With("part", "rounds"), OnRound: s.metrics.round,
	})
	if err != nil {
		return nil, err
	}

	if cfg.Seeds != "" {
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
			log.Warn("site: seed skipped", "file", cfg.Seeds, "line", b.Line, "text", b.Text, "err", b.Err)
		}
		seeds = append(seeds, urls...)
	}
	added, err := s.crawler.Seed(ctx, seeds)
	if err != nil {
		return nil, err
	}
	s.seeds = added
	log.Info("site: seeded", "new", added, "given", len(seeds))

	res, err := dnscache.New(dnscache.Options{Server: cfg.DNS})
	if err != nil {
		return nil, fmt.Errorf("site: resolver: %w", err)
	}
	s.warc, err = warcfile.Open(warcfile.Options{Dir: filepath.Join(cfg.Data, "warc"), Prefix: "meridian-" + cfg.Region, MaxSize: cfg.WARCSize, Software: "meridian", Logger: log})
	if err != nil {
		return nil, fmt.Errorf("site: warc: %w", err)
	}
	s.fetch, err = fetcher.New(fetcher.Options{
		UserAgent: cfg.UserAgent, Workers: cfg.Workers, HostDelay: cfg.HostDelay, IPDelay: cfg.IPDelay, MaxCrawlDelay: cfg.MaxCrawlDelay,
		TotalTimeout: cfg.Timeout, BackoffBase: cfg.Backoff, BackoffMax: cfg.BackoffMax, MaxBodyBytes: cfg.MaxBody, AllowPrivate: cfg.AllowPrivate,
		Resolver: res, WARC: s.warc, Hosts: s.crawler.Hosts(), Normalizer: norm, Scope: scope,
		Seen: s.crawler.Seen, OnResult: s.crawler.OnResult, Logger: log.With("part", "fetcher"),
	})
	if err != nil {
		return nil, fmt.Errorf("site: fetcher: %w", err)
	}
	s.metrics.attach(s)

	s.ln, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("site: --listen %s: %w", cfg.Listen, err)
	}
	s.http = &http.Server{Handler: s.handler(), ReadHeaderTimeout: 5 * time.Second}
	go s.http.Serve(s.ln) // owner: Site; stopped by Close
	s.info = Info{Region: cfg.Region, PID: os.Getpid(), Listen: s.ln.Addr().String(), RaftAddr: raftAddr, Started: s.started}
	if s.sim != nil {
		s.info.Websim = s.sim.AdminAddr()
	}
	if err := writeInfo(cfg.Data, s.info); err != nil {
		return nil, err
	}
	log.Info("site: up", "region", cfg.Region, "status", "http://"+s.info.Listen+"/status", "metrics", "http://"+s.info.Listen+"/metrics")
	return s, nil
}

func prevWebsimPort(data string) int {
	b, err := os.ReadFile(filepath.Join(data, "websim-port"))
	if err != nil {
		return 0
	}
	var p int
	fmt.Sscan(string(b), &p)
	return p
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("site: pick a Raft port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// lockData takes an exclusive lock on the data directory.
func (s *Site) lockData() error {
	f, err := os.OpenFile(filepath.Join(s.cfg.Data, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("site: lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("%w: %s (%v)", ErrLocked, s.cfg.Data, err)
	}
	s.lock = f
	return nil
}

// Addr is the status API's address.
func (s *Site) Addr() string { return s.info.Listen }

// Websim is the in-process websim, if any.
func (s *Site) Websim() *websim.Server { return s.sim }

// Crawler is the site's rounds.
func (s *Site) Crawler() *rounds.Crawler { return s.crawler }

// DB is the site's crawl database.
func (s *Site) DB() *crawldb.DB { return s.db }

// Run crawls until ctx is done, the configured rounds are done or the crawl
// is exhausted (not an error).
func (s *Site) Run(ctx context.Context, progress io.Writer) error {
	fctx, stopFetch := context.WithCancel(context.WithoutCancel(ctx))
	fetchDone := make(chan error, 1)
	go func() { fetchDone <- s.fetch.Run(fctx) }() // owner: Run
	var wg sync.WaitGroup
	pctx, stopProgress := context.WithCancel(ctx)
	if progress != nil && s.cfg.Progress > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); s.progress(pctx, progress) }()
	}
	err := s.crawler.Run(ctx, s.fetch, s.cfg.Rounds)
	stopProgress()
	wg.Wait()
	stopFetch()
	if ferr := <-fetchDone; ferr != nil && !errors.Is(ferr, context.Canceled) && err == nil {
		err = ferr
	}
	if errors.Is(err, rounds.ErrExhausted) {
		s.log.Info("site: crawl exhausted")
		if progress != nil {
			fmt.Fprintln(progress, "crawl exhausted: every reachable URL in scope has been fetched")
		}
		err = nil
	}
	if progress != nil {
		s.printProgress(progress, time.Now(), nil)
	}
	return err
}

// Close stops the status API and closes everything Start opened. Later
// calls return the first call's result.
func (s *Site) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Site) close() error {
	var errs []error
	if s.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.http.Shutdown(ctx)
		cancel()
	}
	if s.crawler != nil {
		errs = append(errs, s.crawler.Close())
	}
	if s.warc != nil {
		errs = append(errs, s.warc.Close())
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	if s.sim != nil {
		errs = append(errs, s.sim.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
	}
	return errors.Join(errs...)
}

// quietHandler passes on a handler's records from Error up only: a
// one-node site's Raft warns at every start that it is holding an election,
// which tells an operator nothing.
type quietHandler struct{ slog.Handler }

func (q quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError && q.Handler.Enabled(ctx, l)
}

func (q quietHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return quietHandler{q.Handler.WithAttrs(a)}
}

func (q quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{q.Handler.WithGroup(name)}
}

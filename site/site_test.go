package site_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/shard"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// testConfig is a small site crawling an in-process websim with short
// delays, so a crawl to exhaustion takes seconds.
func testConfig(t *testing.T, profile string) site.Config {
	cfg := site.DefaultConfig()
	cfg.Data = t.TempDir()
	cfg.Websim = profile
	cfg.WebsimHosts, cfg.WebsimPages, cfg.WebsimIPs, cfg.WebsimSeed = 40, 6, 8, 11
	cfg.HostDelay, cfg.IPDelay, cfg.MaxCrawlDelay = 30*time.Millisecond, 5*time.Millisecond, 150*time.Millisecond
	cfg.Listen = "127.0.0.1:0"
	cfg.Width, cfg.PerHost, cfg.Workers = 300, 5, 32
	cfg.Progress = 0
	cfg.Timeout = 3 * time.Second
	cfg.Backoff, cfg.BackoffMax = 200*time.Millisecond, 2*time.Second
	// OPIC's invariant is checked after every round of every test crawl
	// (a full scan: small webs), and each round's result checked at the
	// test's end.
	cfg.CheckCash = true
	// The one design, a site of shards, with 4 of them rather than the
	// one-command site's 24 (onedesign_test.go runs those): a test's
	// site then costs the race detector 4 Raft groups, not 24.
	cfg.Shards = 4
	t.Cleanup(func() { checkCashEveryRound(t, cfg.Data) })
	return cfg
}

// checkCashEveryRound checks the cash error each round of the crawl in data
// recorded (CheckCash): OPIC's cash is conserved after every round, across
// restarts too. A data directory where no round ended has nothing to check.
func checkCashEveryRound(t *testing.T, data string) {
	t.Helper()
	shards, _ := filepath.Glob(filepath.Join(data, "shards", "*", "stats", "rounds.jsonl"))
	if _, err := os.Stat(filepath.Join(data, "stats", "rounds.jsonl")); err != nil && len(shards) == 0 {
		return
	}
	for _, st := range readRounds(t, data) {
		switch {
		case st.CashError == nil:
			t.Errorf("round %d has no cash check", st.Round)
		case math.Abs(*st.CashError) > 1e-9:
			t.Errorf("round %d (led by %s): cash off by %g of what was injected", st.Round, st.Leader, *st.CashError)
		}
		if st.DuplicateResults != 0 {
			t.Errorf("round %d: %d URLs had a second result in a fetch segment (fetched again after a restart)", st.Round, st.DuplicateResults)
		}
		if st.LateResults != 0 {
			t.Logf("round %d: %d late results dropped (parts that moved)", st.Round, st.LateResults)
		}
	}
}

func getJSON(t *testing.T, url string, v any) error {
	t.Helper()
	return getJSONWith(&http.Client{Timeout: 5 * time.Second}, url, v)
}

// getJSONWith is getJSON through c.
func getJSONWith(c *http.Client, url string, v any) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// crawlDelays gives each websim host's minimum interval: its robots.txt
// Crawl-delay, capped as the site caps it.
func crawlDelays(w *synth.Web, maxDelay time.Duration) func(string) time.Duration {
	m := map[string]time.Duration{}
	for _, h := range w.Hosts() {
		if h.CrawlDelay > 0 {
			m[h.Name] = min(time.Duration(h.CrawlDelay)*time.Second, maxDelay)
		}
	}
	return func(host string) time.Duration {
		host, _, _ = strings.Cut(host, ":")
		return m[host]
	}
}

// readRounds reads the rounds.jsonl of the site whose data directory is
// data.
func readRounds(t *testing.T, data string) []rounds.RoundStats {
	t.Helper()
	shards, _ := filepath.Glob(filepath.Join(data, "shards", "*", "stats", "rounds.jsonl"))
	if len(shards) == 0 {
		return readRoundsFile(t, filepath.Join(data, "stats", "rounds.jsonl"))
	}
	var out []rounds.RoundStats // a site of shards: every shard's rounds
	for _, f := range shards {
		out = append(out, readRoundsFile(t, f)...)
	}
	return out
}

// readRoundsFile reads a rounds.jsonl file: a site's, or a shard's.
func readRoundsFile(t *testing.T, path string) []rounds.RoundStats {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []rounds.RoundStats
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var st rounds.RoundStats
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			t.Fatalf("%s line %d: %v", path, len(out)+1, err)
		}
		out = append(out, st)
	}
	return out
}

// checkConservation checks OPIC's invariant on the crawl database: the
// cash of all pages plus the virtual page's is what the seeds injected, and
// the history of all pages is what fetches distributed.
func checkConservation(t *testing.T, st crawlcheck.Reader, s rounds.Status) {
	t.Helper()
	var cash, hist opic.Sum
	if err := st.ScanURLs(func(r store.URLRecord) error {
		cash.Add(r.Cash)
		hist.Add(r.History)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cash.Add(s.Virtual)
	if s.Injected <= 0 || math.Abs(cash.Value()-s.Injected) > 1e-9*s.Injected {
		t.Errorf("cash %.12f (virtual %.6f), injected %.12f", cash.Value(), s.Virtual, s.Injected)
	}
	if s.Spent <= 0 || math.Abs(hist.Value()-s.Spent) > 1e-9*s.Spent {
		t.Errorf("history %.12f, spent %.12f", hist.Value(), s.Spent)
	}
}

// TestCrawlRealistic crawls a realistic websim to exhaustion and checks it
// against the truth and websim's view of politeness.
func TestCrawlRealistic(t *testing.T) {
	cfg := testConfig(t, "realistic")
	cfg.Shards = 0 // the one-command site: its 24 shards on one node
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := site.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Watch the status API while the crawl runs.
	var wg sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(ctx)
	var maxRound uint64
	phases := map[rounds.Phase]bool{}
	var metrics string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for watchCtx.Err() == nil {
			var st site.Status
			if err := getJSON(t, "http://"+s.Addr()+"/status", &st); err == nil {
				maxRound = max(maxRound, st.Round)
				phases[st.Phase] = true
			}
			if metrics == "" {
				if resp, err := http.Get("http://" + s.Addr() + "/metrics"); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					metrics = string(b)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	err = s.Run(ctx, nil)
	stopWatch()
	wg.Wait()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("crawl took %v", time.Since(start).Round(time.Millisecond))

	truth, err := crawlcheck.Truth(s.Websim().Web())
	if err != nil {
		t.Fatal(err)
	}
	db := crawlcheck.Stores(s.Stores())
	if len(db) != shard.DefaultShards {
		t.Fatalf("the node holds %d shards' stores, want %d", len(db), shard.DefaultShards)
	}
	cov, err := crawlcheck.Check(truth, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("coverage %d/%d = %.4f, %d fetched", cov.Covered, cov.Targets, cov.Ratio, cov.Fetched)
	if cov.Ratio < 0.99 || cov.Targets < 100 {
		t.Errorf("coverage %.4f of %d targets; missing e.g. %v", cov.Ratio, cov.Targets, cov.Missing)
	}
	if cov.Disallow != 0 {
		t.Errorf("%d robots-disallowed URLs fetched, e.g. %v", cov.Disallow, cov.Unwanted)
	}
	snap := s.Websim().Stats().Snapshot()
	if p := crawlcheck.Politeness(snap, cfg.HostDelay, cfg.IPDelay, crawlDelays(s.Websim().Web(), cfg.MaxCrawlDelay)); len(p) > 0 {
		t.Errorf("politeness: %v", p)
	}
	rs := s.Rounds()
	checkConservation(t, db, rs)

	// Statistics: one line a round, and the status API showed rounds.
	lines := readRounds(t, cfg.Data)
	if uint64(len(lines)) != rs.Done || len(lines) < 2 {
		t.Errorf("%d lines in rounds.jsonl, %d rounds done", len(lines), rs.Done)
	}
	var fetched int64
	revisits := 0
	for _, l := range lines {
		fetched += l.Fetched
		revisits += l.Revisits
		if l.Round == 0 || l.Ended.Before(l.Started) || l.ByClass == nil {
			t.Errorf("bad round line %+v", l)
		}
	}
	if c := countsOf(db); fetched == 0 || uint64(fetched) > c.URLs-c.Frontier {
		t.Errorf("rounds.jsonl counts %d fetched; database %+v", fetched, c)
	}
	if revisits == 0 {
		t.Error("rounds.jsonl shows no revisits: no cash was passed on over stored links")
	}
	if maxRound < 1 || !phases[rounds.PhaseFetch] {
		t.Errorf("status API showed rounds up to %d, phases %v", maxRound, phases)
	}
	for _, m := range []string{"meridian_fetch_requests_total", "meridian_crawldb_urls", "meridian_phase_fetch", "meridian_revisits_total"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	// Refetch is off by default: nothing of it reaches the crawl
	// database (every record as before refetch existed).
	if c := countsOf(db); c.Scheduled != 0 {
		t.Errorf("%d pages scheduled for a refetch with refetch off", c.Scheduled)
	}
	if err := db.ScanURLs(func(r store.URLRecord) error {
		if !r.NextFetch.IsZero() || r.Interval != 0 || r.ETag != "" || r.LastModified != "" || r.Due || r.Changed+r.Unchanged != 0 || r.Watched != 0 {
			return fmt.Errorf("%s carries refetch fields with refetch off: %+v", r.URL, r)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	rank, err := crawlcheck.CompareRanking(truth, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("OPIC vs PageRank: Spearman %.3f over %d pages", rank.Spearman, rank.Pages)

	// The WARC files are complete once the site is closed: no URL was
	// fetched twice (robots.txt and 5xx retries aside).
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := crawlcheck.Responses(filepath.Join(cfg.Data, "warc"))
	if err == nil {
		err = errors.New("WARC has no responses")
		if len(resp) > 0 {
			err = nil
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if n, sample := crawlcheck.Refetched(resp, func(st int) bool { return st >= 200 && st < 300 }); n > 0 {
		t.Errorf("%d URLs fetched twice with 2xx, e.g. %v", n, sample)
	}
	if n, sample := crawlcheck.Refetched(resp, func(st int) bool { return st != 429 && st < 500 }); n > 0 {
		t.Errorf("%d URLs fetched twice (non-5xx), e.g. %v", n, sample)
	}
}

// countsOf sums the counts of stores.
func countsOf(stores []*store.Store) store.Counts {
	var out store.Counts
	for _, st := range stores {
		c := st.Counts()
		out.URLs += c.URLs
		out.Frontier += c.Frontier
		out.Scheduled += c.Scheduled
	}
	return out
}

// TestCrawlHostile crawls the hostile web: the crawl must end, traps within
// their limits (its subdomain farm within --pld-budget: checkFarm), memory
// bounded, and each hostile host's fate recorded.
func TestCrawlHostile(t *testing.T) {
	cfg := testConfig(t, "hostile")
	cfg.WebsimHosts = 24
	// 4 shards (testConfig's): the farm's hosts spread over them by
	// address, and share one --pld-budget (plan.DomainShare).
	cfg.MaxDepth, cfg.HostBudget, cfg.MaxRedirects = 12, 120, 5
	cfg.PLDBudget = hostilePLDBudget(t, cfg)
	cfg.MaxBody = 256 << 10
	cfg.Timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := site.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	if err := s.Run(ctx, nil); err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("hostile crawl took %v", time.Since(start).Round(time.Millisecond))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > 512<<20 {
		t.Errorf("heap in use %d MiB after the crawl", ms.HeapInuse>>20)
	}
	snap := s.Websim().Stats().Snapshot()
	if p := crawlcheck.Politeness(snap, cfg.HostDelay, cfg.IPDelay, crawlDelays(s.Websim().Web(), cfg.MaxCrawlDelay)); len(p) > 0 {
		t.Errorf("politeness: %v", p)
	}
	troubled := map[string]*rounds.HostFate{}
	for _, l := range readRounds(t, cfg.Data) {
		for h, f := range l.Troubled {
			troubled[h] = f
		}
	}
	checkFarm(t, cfg, s)
	web := s.Websim().Web()
	for _, h := range web.Hosts() {
		if h.Role == synth.RoleNone {
			continue
		}
		v := snap.Hosts[h.Name]
		reqs := int64(0)
		if v != nil {
			reqs = v.Requests
		}
		// Every host ends within its budget: pages, plus robots.txt,
		// sitemaps and retries.
		if limit := int64(cfg.HostBudget + 4*cfg.MaxRetries + 20); reqs > limit {
			t.Errorf("%s (%v): %d requests, limit %d", h.Name, h.Role, reqs, limit)
		}
		fate, inStats := troubled[h.Name]
		t.Logf("%-16s %-10v websim requests %4d statuses %v; troubled %v %+v", h.Name, h.Role, reqs, statuses(v), inStats, fate)
		switch h.Role {
		case synth.RoleChain:
			// The 30-hop chain answers 302 at every hop: the first
			// request and MaxRedirects followed hops, no more.
			if v == nil || v.Statuses[302] != int64(cfg.MaxRedirects+1) {
				t.Errorf("%s: %v 302 answers, want the chain cut after %d redirects", h.Name, statuses(v), cfg.MaxRedirects)
			}
		case synth.RoleBlackhole, synth.RoleDrip, synth.RoleHuge, synth.RoleBomb:
			// They fail or are cut: their fate must be in the statistics.
			if !inStats {
				t.Errorf("%s (%v): not among the troubled hosts of rounds.jsonl", h.Name, h.Role)
			}
		}
	}
}

func statuses(v *websim.Visitor) map[int]int64 {
	if v == nil {
		return nil
	}
	return v.Statuses
}

// frontierOf is the URLs left in the frontier of every crawl database s
// holds a replica of (a one-node site: all of them).
func frontierOf(s *site.Site) uint64 {
	var n uint64
	for _, st := range s.Stores() {
		n += st.Counts().Frontier
	}
	return n
}

// readShardRounds reads each shard's rounds.jsonl under data, by shard
// directory name (s000, ...).
func readShardRounds(t *testing.T, data string) map[string][]rounds.RoundStats {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(data, "shards", "*", "stats", "rounds.jsonl"))
	out := map[string][]rounds.RoundStats{}
	for _, f := range files {
		out[filepath.Base(filepath.Dir(filepath.Dir(f)))] = readRoundsFile(t, f)
	}
	return out
}

package bench

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestRunFederationSmoke crawls a tiny clean web to exhaustion twice: by
// three federated sites behind WAN links of 5 ms, then by one site of
// three nodes whose every connection to another crosses such a link
// (the stretched run's links have no delay: see below). Every process
// exits 0 by itself, both crawls fetch the same pages, politely, the
// sites exchange URLs through the links and only through them, and the
// figures the report is made of are consistent.
func TestRunFederationSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	siteBin, simBin := buildSiteAndWebsim(t, ctx)
	// 12 addresses for 36 hosts: each site owns some (hosts are placed by
	// address). The stretched run's delay is 0: a multi-node site can
	// wedge when a round's update and the next round's end of fetch
	// write the round state at once (both read-modify-write it across a
	// Raft apply, and a WAN delay widens that window; bench/README.md,
	// "federation"), and this test is about the benchmark, not that.
	cfg := FederationConfig{Hosts: 36, Pages: 6, IPs: 12, Seed: 5, Profile: synth.Clean,
		Rounds: 0, Width: 1000, PerHost: 4, Workers: 16,
		HostDelay: 50 * time.Millisecond, MaxCrawlDelay: 100 * time.Millisecond, NoSync: true,
		Delays: []time.Duration{5 * time.Millisecond}, Stretched: []time.Duration{0},
		SampleEvery: 100 * time.Millisecond, Timeout: 40 * time.Second, Stall: 20 * time.Second,
		Dir: t.TempDir(), SiteBinary: siteBin, WebsimBinary: simBin,
		Progress: func(format string, args ...any) { t.Logf(format, args...) }}
	start := time.Now()
	res, err := RunFederation(ctx, cfg)
	cfg, _ = cfg.WithDefaults()
	t.Logf("RunFederation took %.1fs\n%s", time.Since(start).Seconds(), res.Report(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || res.Runs[0].Mode != ModeFederated || res.Runs[1].Mode != ModeStretched {
		t.Fatalf("runs %+v, want a federated and a stretched run", res.Runs)
	}
	fed, str := res.Runs[0], res.Runs[1]
	for _, r := range res.Runs {
		if r.Exit != "exhausted" {
			t.Errorf("%s: exit %q, want exhausted", r.Mode, r.Exit)
		}
		if len(r.Members) != 3 {
			t.Fatalf("%s: %d processes, want 3", r.Mode, len(r.Members))
		}
		for _, m := range r.Members {
			if m.ExitCode != 0 || m.Stopped {
				t.Errorf("%s: %s ended %q (stopped %v), want exit status 0 by itself", r.Mode, m.Name, m.Exit, m.Stopped)
			}
			if m.Pages <= 0 || m.CPUS <= 0 || m.WindowCPUS < 0 || m.WindowCPUS > m.CPUS {
				t.Errorf("%s: %s fetched %d pages, CPU %.3fs (window %.3fs): want pages > 0, CPU > 0, window in [0, CPU]",
					r.Mode, m.Name, m.Pages, m.CPUS, m.WindowCPUS)
			}
		}
		if r.Pages <= 0 || r.PagesPerSec <= 0 || r.WindowS <= 0 || len(r.Rounds) == 0 || r.MeanUpdateS <= 0 {
			t.Errorf("%s: %d pages, %.1f pages/s over %.2fs in %d rounds (mean update %.3fs): want positive",
				r.Mode, r.Pages, r.PagesPerSec, r.WindowS, len(r.Rounds), r.MeanUpdateS)
		}
		if r.WANBytes <= 0 || r.WANBytesPerPage <= 0 || len(r.Links) == 0 {
			t.Errorf("%s: %d bytes through %d WAN links: want some", r.Mode, r.WANBytes, len(r.Links))
		}
		if r.Breaches != 0 {
			t.Errorf("%s: %d politeness breaches: %v", r.Mode, r.Breaches, r.BreachSample)
		}
		if r.WebsimRequests < r.Pages {
			t.Errorf("%s: websim saw %d requests since its reset, fewer than the %d pages", r.Mode, r.WebsimRequests, r.Pages)
		}
	}
	// The same web crawled to exhaustion: the same pages, however it is split.
	if fed.Pages != str.Pages {
		t.Errorf("pages: %d federated, %d stretched; want the same crawl", fed.Pages, str.Pages)
	}
	// Federated: each site's pages are its rounds', every site sent and
	// received URLs, and what the sites counted on their TLS connections
	// is about what crossed the links. Not exactly: a site's last /status
	// sample misses its last calls, and a site still probing a peer that
	// has exited counts a ClientHello that the peer's link takes but
	// cannot pass on.
	var pages int64
	for _, m := range fed.Members {
		pages += m.Pages
		if m.SentURLs <= 0 || m.RecvURLs <= 0 || m.TLSBytesOut <= 0 {
			t.Errorf("federated: %s sent %d and received %d URLs, %d TLS bytes out: want some", m.Name, m.SentURLs, m.RecvURLs, m.TLSBytesOut)
		}
		if m.Outbox != 0 {
			t.Errorf("federated: %s ended with %d outbox entries, want 0 (an exhausted federation has delivered everything)", m.Name, m.Outbox)
		}
	}
	if pages != fed.Pages {
		t.Errorf("federated: the sites' pages sum to %d, the run counts %d", pages, fed.Pages)
	}
	if r := ratio(float64(fed.CountedBytes), float64(fed.WANBytes)); r < 0.5 || r > 2 {
		t.Errorf("federated: the sites counted %d TLS bytes, %d crossed the WAN links: want about the same", fed.CountedBytes, fed.WANBytes)
	}
	if fed.CacheLookups <= 0 || fed.CacheHitRate < 0 || fed.CacheHitRate > 1 || fed.RemoteURLs <= 0 {
		t.Errorf("federated: URL-sent cache %d hits of %d lookups (rate %v), %d remote URLs: want lookups and remote URLs, a rate in [0, 1]",
			fed.CacheHits, fed.CacheLookups, fed.CacheHitRate, fed.RemoteURLs)
	}
	for _, l := range fed.Links {
		if l.Conns == 0 {
			t.Errorf("federated: no connection through link %s", l.Name)
		}
	}
	// Stretched: every node fetched, and the nodes' traffic went through
	// the links (Raft to each follower, forwarded writes and reports to the
	// leader).
	for _, m := range str.Members {
		if m.RaftSent+m.APISent <= 0 {
			t.Errorf("stretched: %s sent no Raft or API bytes", m.Name)
		}
	}
	var raftLinks int64
	for _, l := range str.Links {
		if strings.HasSuffix(l.Name, "-raft") {
			raftLinks += l.Upstream + l.Downstream
		}
	}
	if raftLinks <= 0 || str.CountedBytes <= 0 {
		t.Errorf("stretched: %d bytes through the Raft links, the nodes counted %d: want both > 0", raftLinks, str.CountedBytes)
	}
	// The figure of benchmark 2, whatever its value on a web this small.
	if len(res.Comparisons) != 0 {
		t.Errorf("comparisons %+v: want none (the runs' delays differ)", res.Comparisons)
	}
	if fed.WANBytesPerPage >= str.WANBytesPerPage {
		t.Errorf("WAN bytes per page: federated %.0f, stretched %.0f: want the federated far below", fed.WANBytesPerPage, str.WANBytesPerPage)
	}
	if !res.Targets["politeness_breaches"].Met {
		t.Errorf("targets %v: the politeness target is missed", res.Targets)
	}
}

func TestFederationConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*FederationConfig)
		ok   bool
	}{
		{"default", func(*FederationConfig) {}, true},
		{"stretched only", func(c *FederationConfig) { c.Delays, c.Stretched = nil, []time.Duration{40 * time.Millisecond} }, true},
		{"distance", func(c *FederationConfig) { c.Partitioner = "distance" }, true},
		{"no run", func(c *FederationConfig) { c.Delays = nil }, false},
		{"negative delay", func(c *FederationConfig) { c.Delays = []time.Duration{-time.Millisecond} }, false},
		{"huge delay", func(c *FederationConfig) { c.Stretched = []time.Duration{time.Minute} }, false},
		{"bad partitioner", func(c *FederationConfig) { c.Partitioner = "random" }, false},
		{"short timeout", func(c *FederationConfig) { c.Timeout = time.Second }, false},
		{"negative rounds", func(c *FederationConfig) { c.Rounds = -1 }, false},
		{"wide stretched site", func(c *FederationConfig) { c.Width = 500_000 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultFederationConfig()
			tc.edit(&c)
			_, err := c.WithDefaults()
			if (err == nil) != tc.ok {
				t.Errorf("WithDefaults() error = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestFederationComparisons checks the loss, the comparisons and the
// targets computed from runs.
func TestFederationComparisons(t *testing.T) {
	ms := time.Millisecond
	res := FederationResult{Runs: []FederationRun{
		{Mode: ModeFederated, Delay: 20 * ms, DelayMS: 20, PagesPerSec: 1000, WANBytesPerPage: 50, CacheHits: 95, CacheLookups: 100, CacheHitRate: 0.95},
		{Mode: ModeFederated, Delay: 80 * ms, DelayMS: 80, PagesPerSec: 960, WANBytesPerPage: 50, CacheHits: 90, CacheLookups: 100, CacheHitRate: 0.90},
		{Mode: ModeStretched, Delay: 80 * ms, DelayMS: 80, PagesPerSec: 400, WANBytesPerPage: 2000},
		{Mode: ModeStretched, Delay: 40 * ms, DelayMS: 40, PagesPerSec: 400, WANBytesPerPage: 2000}, // no federated run at 40 ms
	}, Loss20to80: -1}
	res.compare()
	res.Targets = res.targets()
	if d := res.Loss20to80 - 0.04; d > 1e-9 || d < -1e-9 {
		t.Errorf("loss 20→80: %v, want 0.04", res.Loss20to80)
	}
	if len(res.Comparisons) != 1 || res.Comparisons[0].DelayMS != 80 {
		t.Fatalf("comparisons %+v, want one at 80 ms", res.Comparisons)
	}
	c := res.Comparisons[0]
	if d := c.TrafficSaved - 0.975; d > 1e-9 || d < -1e-9 {
		t.Errorf("traffic saved %v, want 0.975", c.TrafficSaved)
	}
	if d := c.Speedup - 2.4; d > 1e-9 || d < -1e-9 {
		t.Errorf("speedup %v, want 2.4", c.Speedup)
	}
	want := map[string]bool{"loss_20_to_80ms": true, "sent_cache_hit_rate": false, "traffic_saved_80ms": true, "speedup_80ms": true, "politeness_breaches": true}
	for k, met := range want {
		if got, ok := res.Targets[k]; !ok || got.Met != met {
			t.Errorf("target %s: %+v (present %v), want met %v", k, got, ok, met)
		}
	}
	if got := res.Targets["sent_cache_hit_rate"].Got; got != 0.90 {
		t.Errorf("cache target: got %v, want the lowest rate 0.90", got)
	}
}

// TestReplaySeeds checks the seeds of a replayed web: one URL per host,
// its front page when archived, and the archive's one port.
func TestReplaySeeds(t *testing.T) {
	port, seeds, err := replaySeeds([]string{
		"http://a.example:8080/x", "http://a.example:8080/", "http://b.example:8080/robots.txt",
		"http://b.example:8080/p/1", "https://c.example/", "http://d.example:8080",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://a.example:8080/", "http://b.example:8080/robots.txt", "http://d.example:8080"}
	if port != 8080 || strings.Join(seeds, " ") != strings.Join(want, " ") {
		t.Errorf("port %d, seeds %q; want 8080, %q", port, seeds, want)
	}
	for _, bad := range [][]string{
		{"http://a.example:8080/", "http://b.example:9090/"}, // two ports
		{"http://a.example/"},                                // none
		{"https://a.example:8080/"},                          // no http URL
	} {
		if _, _, err := replaySeeds(bad); err == nil {
			t.Errorf("replaySeeds(%q): no error", bad)
		}
	}
}

package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/websim/synth"
)

// buildSiteAndWebsim builds ./cmd/site and ./cmd/websim into a temporary
// directory, with -race when this test binary has it (its packages are
// then in the build cache already, and the nodes are checked for races
// too).
func buildSiteAndWebsim(t *testing.T, ctx context.Context) (site, websim string) {
	t.Helper()
	root, err := moduleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if raceEnabled() {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/site", "./cmd/websim")...)
	cmd.Dir = root
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
	t.Logf("built site and websim (race %v) in %.1fs", raceEnabled(), time.Since(start).Seconds())
	return filepath.Join(dir, "site"), filepath.Join(dir, "websim")
}

// raceEnabled reports whether this binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestRunClusterSmoke crawls a tiny clean web to exhaustion with a site
// of one node, then of two, each node its own `site up` process: every
// node exits 0 by itself, both crawls fetch the same pages, politely, and
// in the two-node run both nodes fetch and bytes cross between them.
func TestRunClusterSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	siteBin, simBin := buildSiteAndWebsim(t, ctx)
	cfg := ClusterConfig{Hosts: 30, Pages: 8, IPs: 4, Seed: 3, Profile: synth.Clean,
		Rounds: 0, Width: 1000, PerHost: 4, Workers: 16,
		HostDelay: 50 * time.Millisecond, IPDelay: 0, MaxCrawlDelay: 100 * time.Millisecond, NoSync: true,
		Nodes: []int{1, 2}, SampleEvery: 50 * time.Millisecond, Timeout: 40 * time.Second,
		Dir: t.TempDir(), SiteBinary: siteBin, WebsimBinary: simBin,
		Progress: func(format string, args ...any) { t.Logf(format, args...) }}
	start := time.Now()
	res, err := RunCluster(ctx, cfg)
	cfg, _ = cfg.WithDefaults()
	t.Logf("RunCluster took %.1fs\n%s", time.Since(start).Seconds(), res.Report(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 || res.Runs[0].Nodes != 1 || res.Runs[1].Nodes != 2 {
		t.Fatalf("runs %+v, want a 1-node and a 2-node run", res.Runs)
	}
	for _, r := range res.Runs {
		if r.Exit != "exhausted" {
			t.Errorf("%d nodes: exit %q, want exhausted", r.Nodes, r.Exit)
		}
		if len(r.NodeList) != r.Nodes {
			t.Fatalf("%d nodes: %d in the node list", r.Nodes, len(r.NodeList))
		}
		var done int64
		for _, n := range r.NodeList {
			if n.ExitCode != 0 || n.Exit != "exit status 0" || n.Killed || n.Stopped {
				t.Errorf("%d nodes: node %s ended %q (code %d, killed %v, stopped %v), want exit status 0 by itself",
					r.Nodes, n.Name, n.Exit, n.ExitCode, n.Killed, n.Stopped)
			}
			if n.CPUS <= 0 || n.PeakRSS <= 0 || n.WindowCPUS < 0 || n.WindowCPUS > n.CPUS {
				t.Errorf("%d nodes: node %s CPU %.3fs (window %.3fs), peak RSS %d: want CPU > 0, window CPU in [0, CPU], RSS > 0",
					r.Nodes, n.Name, n.CPUS, n.WindowCPUS, n.PeakRSS)
			}
			done += n.Pages - n.Retries
		}
		if r.Pages <= 0 || r.PagesPerSec <= 0 || r.WindowS <= 0 || len(r.Rounds) == 0 {
			t.Errorf("%d nodes: %d pages, %.1f pages/s over %.2fs in %d rounds: want positive", r.Nodes, r.Pages, r.PagesPerSec, r.WindowS, len(r.Rounds))
		}
		// Every page of the rounds is some node's, and no node delivered a
		// final page result that no round counts (no node was killed).
		if done != r.Pages {
			t.Errorf("%d nodes: the nodes answered %d pages, the rounds count %d", r.Nodes, done, r.Pages)
		}
		if r.Breaches != 0 {
			t.Errorf("%d nodes: %d politeness breaches: %v", r.Nodes, r.Breaches, r.BreachSample)
		}
		if r.WebsimRequests < r.Pages {
			t.Errorf("%d nodes: websim saw %d requests since its reset, fewer than the %d pages", r.Nodes, r.WebsimRequests, r.Pages)
		}
	}
	one, two := res.Runs[0], res.Runs[1]
	// The same web crawled to exhaustion: the same pages, whoever fetched them.
	if one.Pages != two.Pages {
		t.Errorf("pages: %d with one node, %d with two; want the same crawl", one.Pages, two.Pages)
	}
	if one.Ratio != 1 || two.Ratio <= 0 {
		t.Errorf("ratios to one node: %v and %v, want 1 and > 0", one.Ratio, two.Ratio)
	}
	for _, n := range two.NodeList {
		if n.Pages <= 0 {
			t.Errorf("2 nodes: node %s fetched %d pages, want some: the work is not shared", n.Name, n.Pages)
		}
	}
	if two.NodeBytesPerPage <= 0 || two.StagedBytesPerPage <= 0 {
		t.Errorf("2 nodes: %.0f bytes sent between nodes and %.0f staged per page, want > 0", two.NodeBytesPerPage, two.StagedBytesPerPage)
	}
	if !res.Targets["politeness_breaches"].Met {
		t.Errorf("targets %v: the politeness target is missed", res.Targets)
	}
}

// TestCPUAt checks the interpolation of a process's CPU time between
// samples, before the first and after the last.
func TestCPUAt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	pts := []cpuPoint{{at(1), 0}, {at(2), time.Second}, {at(4), 2 * time.Second}}
	for _, tc := range []struct {
		t    float64
		want time.Duration
	}{
		{0, 0}, {1, 0}, {1.5, 500 * time.Millisecond}, {2, time.Second}, {3, 1500 * time.Millisecond}, {4, 2 * time.Second}, {9, 2 * time.Second},
	} {
		if got := cpuAt(pts, at(tc.t)); got != tc.want {
			t.Errorf("cpuAt(%vs) = %v, want %v", tc.t, got, tc.want)
		}
	}
	if got := cpuAt(nil, t0); got != 0 {
		t.Errorf("cpuAt(no points) = %v, want 0", got)
	}
}

func TestClusterConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*ClusterConfig)
		ok   bool
	}{
		{"default", func(*ClusterConfig) {}, true},
		{"kill with three nodes", func(c *ClusterConfig) { c.KillAfter = time.Minute }, true},
		{"kill without three nodes", func(c *ClusterConfig) { c.Nodes, c.KillAfter = []int{1, 2}, time.Minute }, false},
		{"zero nodes", func(c *ClusterConfig) { c.Nodes = []int{1, 0} }, false},
		{"too many nodes", func(c *ClusterConfig) { c.Nodes = []int{10} }, false},
		{"negative kill", func(c *ClusterConfig) { c.KillAfter = -time.Second }, false},
		{"short timeout", func(c *ClusterConfig) { c.Timeout = time.Second }, false},
		{"negative rounds", func(c *ClusterConfig) { c.Rounds = -1 }, false},
		{"bad site flag", func(c *ClusterConfig) { c.SiteFlags = []string{"fail-timeout=1s"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultClusterConfig()
			tc.edit(&c)
			_, err := c.WithDefaults()
			if (err == nil) != tc.ok {
				t.Errorf("WithDefaults() error = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

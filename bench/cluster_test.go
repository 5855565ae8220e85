package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
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
// in the two-node run both nodes fetch and bytes cross between them. Its
// site is of 4 shards, whose rounds bench cluster reads from every
// shard's statistics.
func TestRunClusterSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	siteBin, simBin := buildSiteAndWebsim(t, ctx)
	for _, tc := range []struct {
		name   string
		shards int
	}{{"4 shards", 4}} {
		t.Run(tc.name, func(t *testing.T) { runClusterSmoke(t, ctx, siteBin, simBin, tc.shards) })
	}
}

// runClusterSmoke is one design's TestRunClusterSmoke.
func runClusterSmoke(t *testing.T, ctx context.Context, siteBin, simBin string, shards int) {
	cfg := ClusterConfig{Shards: shards, Replicas: min(shards, 1), Hosts: 30, Pages: 8, IPs: 4, Seed: 3, Profile: synth.Clean,
		Rounds: 0, Width: 1000, PerHost: 4, Workers: 16,
		HostDelay: 50 * time.Millisecond, IPDelay: 0, MaxCrawlDelay: 100 * time.Millisecond, NoSync: true,
		Nodes: []int{1, 2}, SampleEvery: 50 * time.Millisecond, Timeout: 40 * time.Second,
		// The second node must be in before the tiny web is fetched.
		Expect: true,
		Dir:    t.TempDir(), SiteBinary: siteBin, WebsimBinary: simBin,
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
	// A node of the old design stages its pages' results for the round's
	// leader; a shard's leader fetches its own shard's pages, so a site
	// of shards stages nothing between nodes (but sends Raft and batches).
	if two.NodeBytesPerPage <= 0 || (shards == 0 && two.StagedBytesPerPage <= 0) {
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
		{"node cpus 0: no quota", func(c *ClusterConfig) { c.NodeCPUs = 0 }, true},
		{"node cpus a quarter", func(c *ClusterConfig) { c.NodeCPUs = 0.25 }, true},
		{"node cpus all cores", func(c *ClusterConfig) { c.NodeCPUs = float64(runtime.NumCPU()) }, true},
		{"node cpus negative", func(c *ClusterConfig) { c.NodeCPUs = -0.25 }, false},
		{"node cpus below the kernel's smallest quota", func(c *ClusterConfig) { c.NodeCPUs = 0.005 }, false},
		{"node cpus more than the cores", func(c *ClusterConfig) { c.NodeCPUs = float64(runtime.NumCPU()) + 0.5 }, false},
		{"node cpus NaN", func(c *ClusterConfig) { c.NodeCPUs = math.NaN() }, false},
		{"replicas 3", func(c *ClusterConfig) { c.Replicas, c.Nodes = 3, []int{3, 6} }, true},
		{"replicas negative", func(c *ClusterConfig) { c.Replicas = -1 }, false},
		{"replicas too many", func(c *ClusterConfig) { c.Replicas = maxClusterReplicas + 1 }, false},
		{"six nodes", func(c *ClusterConfig) { c.Nodes = []int{3, 6} }, true},
		{"busy machines with a quota", func(c *ClusterConfig) { c.NodeCPUs, c.BusyMachines = 0.25, 3 }, true},
		{"busy machines without a quota", func(c *ClusterConfig) { c.BusyMachines = 3 }, false},
		{"busy machines negative", func(c *ClusterConfig) { c.NodeCPUs, c.BusyMachines = 0.25, -1 }, false},
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

// TestClusterParseNodeCPUs: --node-cpus takes a number of cores in
// (0, this machine's cores] and refuses anything else, saying what.
func TestClusterParseNodeCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		cpus int
		want float64
		err  string // a part of the error; "" for none
	}{
		{"0.25", 2, 0.25, ""},
		{" 1 ", 2, 1, ""},
		{"2", 2, 2, ""},
		{"0.01", 2, 0.01, ""},
		{"0", 2, 0, "more than 0 cores"},
		{"-0.25", 2, 0, "must not be negative"},
		{"2.5", 2, 0, "more than this machine's 2 cores"},
		{"0.001", 2, 0, "below the smallest quota"},
		{"quarter", 2, 0, "not a number of cores"},
		{"", 2, 0, "not a number of cores"},
		{"NaN", 2, 0, "not a number of cores"},
		{"+Inf", 2, 0, "not a number of cores"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseNodeCPUs(tc.in, tc.cpus)
			switch {
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("ParseNodeCPUs(%q, %d) = %v, %v; want %v", tc.in, tc.cpus, got, err, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--node-cpus")):
				t.Errorf("ParseNodeCPUs(%q, %d) = %v, %v; want an error naming --node-cpus and %q", tc.in, tc.cpus, got, err, tc.err)
			}
		})
	}
}

// TestClusterParseNodes: --nodes is a list of node counts in [1, 9], in
// the order given, repeats allowed; a bad item is named by its position.
func TestClusterParseNodes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{"1,2,4", []int{1, 2, 4}, ""},
		{"3, 6", []int{3, 6}, ""},
		{"2,1,2", []int{2, 1, 2}, ""},
		{"9", []int{9}, ""},
		{"", nil, "item 1"},
		{"1,,2", nil, "item 2"},
		{"1,two", nil, `item 2 ("two")`},
		{"0", nil, "item 1 is 0"},
		{"4,10", nil, "item 2 is 10, want 1 to 9"},
		{"-1", nil, "item 1 is -1"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseClusterNodes(tc.in)
			switch {
			case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
				t.Errorf("ParseClusterNodes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("ParseClusterNodes(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.err)
			}
		})
	}
}

// TestClusterStatusShards: the kill probe's hook reads a sharded
// /status's shard list (ids as strings or numbers, a missing leader as
// none) and reports no list for today's /status, so that the probe falls
// back to the site's one leader; shardView merges the survivors' lists,
// not counting a dead leader.
func TestClusterStatusShards(t *testing.T) {
	today, err := json.Marshal(map[string]any{"node": "n1", "role": "leader", "nodes": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		raw  string
		want []shardLeader
		ok   bool
	}{
		{"today's status", string(today), nil, false},
		{"not JSON", "<html>", nil, false},
		{"empty list", `{"shards":[]}`, nil, false},
		{"not a list", `{"shards":3}`, nil, false},
		{"string ids", `{"shards":[{"id":"s0","leader":"n1"},{"id":"s1","leader":""}]}`, []shardLeader{{"s0", "n1"}, {"s1", ""}}, true},
		{"number ids, no leader field", `{"shards":[{"id":0,"leader":"n2"},{"id":1}]}`, []shardLeader{{"0", "n2"}, {"1", ""}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := statusShards([]byte(tc.raw))
			if ok != tc.ok || !slices.Equal(got, tc.want) {
				t.Errorf("statusShards(%s) = %v, %v; want %v, %v", tc.raw, got, ok, tc.want, tc.ok)
			}
		})
	}
	a := []byte(`{"shards":[{"id":0,"leader":"n3"},{"id":1,"leader":"n1"},{"id":2,"leader":"n3"}]}`) // stale: n3 is dead
	b := []byte(`{"shards":[{"id":0,"leader":"n2"},{"id":2,"leader":""},{"id":3,"leader":"n2"}]}`)
	view, ok := shardView([][]byte{a, b, today}, "n3")
	want := map[string]string{"0": "n2", "1": "n1", "2": "", "3": "n2"}
	if !ok || fmt.Sprint(view) != fmt.Sprint(want) {
		t.Errorf("shardView = %v, %v; want %v, true", view, ok, want)
	}
	if _, ok := shardView([][]byte{today}, "n3"); ok {
		t.Errorf("shardView of today's status: ok, want no shard list")
	}
}

// TestClusterRatiosTargets: ratios are to the runs with the fewest nodes
// (one node, or three for --nodes 3,6), and the targets are 0.85 on one
// box and 0.9 × N/base with quotas.
func TestClusterRatiosTargets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runs    []ClusterRun
		capped  bool
		base    int
		ratios  []float64
		targets map[string]bool
	}{
		{"1,2,4 capped", []ClusterRun{{Nodes: 1, PagesPerSec: 500}, {Nodes: 2, PagesPerSec: 950}, {Nodes: 4, PagesPerSec: 1700}}, true, 1,
			[]float64{1, 1.9, 3.4}, map[string]bool{"ratio_2_nodes": true, "ratio_4_nodes": false, "politeness_breaches": true}},
		{"3,6 capped", []ClusterRun{{Nodes: 3, PagesPerSec: 1000}, {Nodes: 6, PagesPerSec: 1850, Breaches: 1}}, true, 3,
			[]float64{1, 1.85}, map[string]bool{"ratio_6_to_3_nodes": true, "politeness_breaches": false}},
		{"1,1,3 uncapped", []ClusterRun{{Nodes: 1, PagesPerSec: 900}, {Nodes: 1, PagesPerSec: 1100}, {Nodes: 3, PagesPerSec: 800}}, false, 1,
			[]float64{0.9, 1.1, 0.8}, map[string]bool{"ratio_3_nodes": false, "politeness_breaches": true}},
		{"a run that crawled nothing is no base", []ClusterRun{{Nodes: 1}, {Nodes: 2, PagesPerSec: 800}, {Nodes: 4, PagesPerSec: 1600}}, false, 2,
			[]float64{0, 1, 2}, map[string]bool{"ratio_4_to_2_nodes": true, "politeness_breaches": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ClusterResult{Runs: tc.runs}
			res.ratios()
			for i, r := range res.Runs {
				if math.Abs(r.Ratio-tc.ratios[i]) > 1e-9 || r.RatioBaseNodes != tc.base {
					t.Errorf("run %d (%d nodes): ratio %v to %d nodes, want %v to %d", i, r.Nodes, r.Ratio, r.RatioBaseNodes, tc.ratios[i], tc.base)
				}
			}
			got := map[string]bool{}
			for k, v := range res.targets(tc.capped) {
				got[k] = v.Met
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.targets) {
				t.Errorf("targets met: %v, want %v (%+v)", got, tc.targets, res.targets(tc.capped))
			}
		})
	}
}

// quotaOrSkip sets up the CPU quota cgroups, or skips when this machine
// has none usable (not root, no cgroup cpu controller): the quota is then
// reported as not applied, which TestClusterCgroupUnavailable covers.
func quotaOrSkip(t *testing.T, cpus float64) (*cpuQuota, ClusterQuota) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("cgroups are Linux's")
	}
	q, info := setupCPUQuota(cpus)
	if q == nil {
		t.Skipf("no usable cgroup for CPU quotas here: %s", info.Note)
	}
	return q, info
}

// TestClusterCgroupQuota puts a real process in a real quota group through
// the join wrapper: the group has the quota, the process (the wrapper's
// PID, after exec) is in it, the group's CPU counter moves, a group whose
// cgroup.procs is gone makes the start fail, and the group goes at the
// end; the sweep removes a dead benchmark's leftover and keeps a live
// one's.
func TestClusterCgroupQuota(t *testing.T) {
	q, info := quotaOrSkip(t, 0.25)
	if info.QuotaUS != 25_000 || info.PeriodUS != cfsPeriodUS || !info.Capped() {
		t.Fatalf("quota %+v, want 25000 µs per %d µs, capped", info, cfsPeriodUS)
	}
	g, err := q.create("test", "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer g.remove()
	quotaFile, want := filepath.Join(g.cpu, "cpu.cfs_quota_us"), "25000"
	if q.mode == QuotaV2 {
		quotaFile, want = filepath.Join(g.cpu, "cpu.max"), "25000 100000"
	}
	if b, err := os.ReadFile(quotaFile); err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("%s = %q, %v; want %q", quotaFile, b, err, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The wrapped process counts to 200,000 (CPU for the counter, over
	// several CFS periods under the quota: one that ends within its first
	// period may count none), then waits for its stdin to close.
	bin, args := g.command("/bin/sh", []string{"-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; cat`})
	cmd := exec.CommandContext(ctx, bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The wrapper may still be joining: look until it is in (bounded).
	in := false
	for i := 0; i < 200 && !in; i++ {
		if in, err = g.holds(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if !in {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !in {
		t.Errorf("pid %d is not in %s", cmd.Process.Pid, g.cpu)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the wrapped process: %v", err)
	}
	if use, ok := g.usage(); !ok || use <= 0 {
		t.Errorf("the group's CPU usage is %v (read %v), want > 0", use, ok)
	}
	if periods, _, _ := g.throttling(); periods <= 0 && q.mode == QuotaV1 {
		t.Errorf("the group ran in %d CFS periods, want > 0", periods)
	}
	if err := g.remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{g.cpu, g.acct} {
		if _, err := os.Stat(d); d != "" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after remove (%v)", d, err)
		}
	}

	// A wrapper that cannot join fails before it runs the command.
	gone, err := q.create("test", "gone")
	if err != nil {
		t.Fatal(err)
	}
	bin, args = gone.command("/bin/true", nil)
	if err := gone.remove(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err == nil {
		t.Errorf("the wrapper of a removed group ran its command (%s), want a failure", out)
	}

	// A leftover of a benchmark that died is swept, a live one's is kept.
	dead := exec.CommandContext(ctx, "/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(q.parent, fmt.Sprintf("%d-run9-n1", dead.Process.Pid))
	live := filepath.Join(q.parent, fmt.Sprintf("%d-run9-n1", os.Getppid()))
	for _, d := range []string{leftover, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defer os.Remove(live)
	defer os.Remove(leftover)
	note := q.sweep()
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) || !strings.Contains(note, leftover) {
		t.Errorf("leftover %s: stat %v after the sweep (note %q), want removed and named", leftover, err, note)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a running benchmark's group %s was swept: %v", live, err)
	}
}

// TestRunClusterQuotaSmoke crawls a tiny web with a one-node site in a
// CPU quota: the node runs in its group, its CPU is read from the group
// (at most its whole-life figure from the group), and the group is gone
// after the run.
func TestRunClusterQuotaSmoke(t *testing.T) {
	quotaOrSkip(t, 0.5)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	siteBin, simBin := buildSiteAndWebsim(t, ctx)
	cfg := ClusterConfig{Hosts: 20, Pages: 6, IPs: 4, Seed: 5, Profile: synth.Clean,
		Rounds: 0, Width: 1000, PerHost: 4, Workers: 16,
		HostDelay: 50 * time.Millisecond, IPDelay: 0, MaxCrawlDelay: 100 * time.Millisecond, NoSync: true,
		Nodes: []int{1}, NodeCPUs: 0.5, BusyMachines: 1, SampleEvery: 50 * time.Millisecond, Timeout: 60 * time.Second,
		Dir: t.TempDir(), SiteBinary: siteBin, WebsimBinary: simBin,
		Progress: func(format string, args ...any) { t.Logf(format, args...) }}
	res, err := RunCluster(ctx, cfg)
	cfg, _ = cfg.WithDefaults()
	t.Logf("\n%s", res.Report(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Quota.Capped() || res.Quota.QuotaUS != 50_000 {
		t.Fatalf("quota %+v, want capped at 50000 µs", res.Quota)
	}
	if len(res.Runs) != 1 || len(res.Runs[0].NodeList) != 1 {
		t.Fatalf("runs %+v, want one run of one node", res.Runs)
	}
	r, n := res.Runs[0], res.Runs[0].NodeList[0]
	if r.Exit != "exhausted" || n.Exit != "exit status 0" {
		t.Errorf("run ended %q, node %q; want exhausted, exit status 0", r.Exit, n.Exit)
	}
	if n.Cgroup == "" || n.CgroupCPUS <= 0 || n.CgroupWindowCPUS <= 0 || n.CgroupWindowCPUS > n.CgroupCPUS+1e-9 {
		t.Errorf("node cgroup %q: CPU %.3fs, window %.3fs; want a group, CPU > 0, window in (0, CPU]", n.Cgroup, n.CgroupCPUS, n.CgroupWindowCPUS)
	}
	if r.SiteCgroupCPUPerPageUS <= 0 || n.QuotaUse <= 0 {
		t.Errorf("site cgroup µs/page %.0f, quota use %.3f; want > 0", r.SiteCgroupCPUPerPageUS, n.QuotaUse)
	}
	if _, err := os.Stat(n.Cgroup); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the node's group %s is still there after the run (%v)", n.Cgroup, err)
	}
	if r.CgroupNote != "" {
		t.Errorf("cgroup note %q, want none", r.CgroupNote)
	}
	// The busy machine ran (a busy loop in 0.5 core) and used no more
	// than its quota. How close to the quota it came depends on what
	// else the box runs (0.20 cores in a CI run beside the other
	// packages' tests), so the floor only says that it ran.
	if r.BusyMachines != 1 || r.BusyCores < 0.02 || r.BusyCores > 0.55 {
		t.Errorf("busy machines %d using %.2f cores; want 1, running and within its 0.5-core quota", r.BusyMachines, r.BusyCores)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(n.Cgroup), "*-busy1")); len(left) > 0 {
		t.Errorf("the busy machine's group is still there after the run: %v", left)
	}
}

// TestClusterCgroupUnavailable: where no cgroup can cap the nodes, the
// quota is reported as not applied, with the reason (the nodes run
// uncapped); a writable v1 cpu hierarchy is preferred to v2, and its
// accounting reported missing when there is no cpuacct. The hierarchies
// are directories made here (the kernel's are not needed to choose).
func TestClusterCgroupUnavailable(t *testing.T) {
	mk := func(t *testing.T, files map[string]string) string {
		dir := t.TempDir()
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		mode  string
		note  []string // parts of ClusterQuota.Note or Accounting
	}{
		{"nothing mounted", nil, QuotaNone, []string{"uncapped", "cgroup v1: no cpu controller", "cgroup v2: no unified hierarchy"}},
		{"v2 without the cpu controller", map[string]string{"unified/cgroup.controllers": "memory pids\n"}, QuotaNone,
			[]string{"uncapped", `the cpu controller is not available there (cgroup.controllers "memory pids")`}},
		{"v1 cpu without cpuacct", map[string]string{"cpu/cpu.cfs_quota_us": "-1\n", "unified/cgroup.controllers": "cpu\n"}, QuotaV1,
			[]string{"none (no cpuacct)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := mk(t, tc.files)
			m := cgroupMounts{v1CPU: []string{filepath.Join(root, "cpu")}, v1Acct: filepath.Join(root, "cpuacct"),
				v2: []string{filepath.Join(root, "unified")}}
			q, info := setupCPUQuotaAt(m, 0.25)
			if info.Mode != tc.mode || (q == nil) != (tc.mode == QuotaNone) || info.Capped() != (tc.mode != QuotaNone) {
				t.Fatalf("mode %q (quota %v, capped %v), want %q", info.Mode, q != nil, info.Capped(), tc.mode)
			}
			for _, part := range tc.note {
				if !strings.Contains(info.Note+" "+info.Accounting, part) {
					t.Errorf("note %q, accounting %q: want %q in them", info.Note, info.Accounting, part)
				}
			}
		})
	}
	if _, info := setupCPUQuotaAt(cgroupMounts{}, 0); info.Mode != QuotaOff || info.Capped() {
		t.Errorf("no quota asked: mode %q, want %q", info.Mode, QuotaOff)
	}
}

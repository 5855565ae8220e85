package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/meridian-crawler/meridian/site"
)

// capture runs the command line and returns the configuration `up` got.
func capture(t *testing.T, args ...string) (site.Config, error) {
	t.Helper()
	var got site.Config
	up := func(_ context.Context, cfg site.Config, _ *slog.Logger, _ io.Writer) error {
		got = cfg
		return nil
	}
	root := newRoot(io.Discard, io.Discard, up)
	root.SetArgs(args)
	return got, root.Execute()
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.conf")
	os.WriteFile(good, []byte("# a site\nwidth = 123\nper-host = 4\nhost-delay = \"250ms\"\nregion = eu\n"), 0o644)
	cfg, err := capture(t, "up", "--config", good, "--width", "77")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width != 77 || cfg.PerHost != 4 || cfg.HostDelay != 250*time.Millisecond || cfg.Region != "eu" {
		t.Fatalf("config %+v: want width 77 (flag wins), per-host 4, host-delay 250ms, region eu from the file", cfg)
	}
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("width = 10\nbogus = 1\nper-host = many\njust words\n"), 0o644)
	_, err = capture(t, "up", "--config", bad)
	if err == nil {
		t.Fatal("bad config file accepted")
	}
	for _, want := range []string{"bad.conf:2: unknown setting \"bogus\"", "bad.conf:3: per-host", "bad.conf:4: want name = value"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := capture(t, "up", "--config", filepath.Join(dir, "missing.conf")); err == nil || !strings.Contains(err.Error(), "missing.conf") {
		t.Errorf("missing config file: %v", err)
	}
	// A node of a site of several, from a file: its name, Raft address,
	// the site to join, the failure timeout; joining turns websim off.
	node := filepath.Join(dir, "node.conf")
	os.WriteFile(node, []byte("node = eu-2\nraft = 127.0.0.1:7182\njoin = 127.0.0.1:7081\nfail-timeout = 5s\ncheck-cash = true\n"), 0o644)
	cfg, err = capture(t, "up", "--config", node, "--data", filepath.Join(dir, "d2"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Node != "eu-2" || cfg.Raft != "127.0.0.1:7182" || cfg.Join != "127.0.0.1:7081" || cfg.FailTimeout != 5*time.Second || !cfg.CheckCash || cfg.Websim != "off" {
		t.Fatalf("node config %+v", cfg)
	}
}

// TestLeaveCommand: `site leave` refuses a data directory with no node, and
// a node that has left.
func TestLeaveCommand(t *testing.T) {
	dir := t.TempDir()
	root := newRoot(io.Discard, io.Discard, nil)
	root.SetArgs([]string{"leave", "--data", dir})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "no site state") {
		t.Fatalf("leave of an empty directory: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "site.json"), []byte(`{"region":"eu","node":"n2","left":true}`), 0o644)
	root = newRoot(io.Discard, io.Discard, nil)
	root.SetArgs([]string{"leave", "--data", dir})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "already left") {
		t.Fatalf("leave of a node that left: %v", err)
	}
}

// TestFetchFromFlag: --fetch-from takes comma-separated addresses, from
// the command line (repeated: added up) or a config file; a bad one fails
// before the site starts, naming the flag and the item, and an address
// this machine lacks is refused by `site up` before it creates anything.
func TestFetchFromFlag(t *testing.T) {
	cfg, err := capture(t, "up", "--fetch-from", "127.0.2.1, 127.0.2.2", "--fetch-from", "127.0.2.1,[::1]")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(cfg.FetchFrom); got != "[127.0.2.1 127.0.2.2 ::1]" {
		t.Errorf("--fetch-from twice: %s", got)
	}
	if cfg, err = capture(t, "up"); err != nil || cfg.FetchFrom != nil {
		t.Errorf("no --fetch-from: %v, %v; want none", cfg.FetchFrom, err)
	}
	conf := filepath.Join(t.TempDir(), "node.conf")
	os.WriteFile(conf, []byte("fetch-from = 127.0.2.3\n"), 0o644)
	if cfg, err = capture(t, "up", "--config", conf); err != nil || fmt.Sprint(cfg.FetchFrom) != "[127.0.2.3]" {
		t.Errorf("from a config file: %v, %v", cfg.FetchFrom, err)
	}

	called := false
	up := func(context.Context, site.Config, *slog.Logger, io.Writer) error { called = true; return nil }
	root := newRoot(io.Discard, io.Discard, up)
	root.SetArgs([]string{"up", "--fetch-from", "127.0.2.1,bogus"})
	err = root.Execute()
	if err == nil || called || !strings.Contains(err.Error(), `"--fetch-from" flag: "bogus": not an IP address`) {
		t.Fatalf("--fetch-from bogus: %v (up called: %v), want it refused naming the flag", err, called)
	}

	missing := "203.0.113.254"
	if localaddr.Check(netip.MustParseAddr(missing)) == nil {
		t.Skipf("%s is configured on this machine", missing)
	}
	data := filepath.Join(t.TempDir(), "data")
	root = newRoot(io.Discard, io.Discard, upSite)
	root.SetArgs([]string{"up", "--data", data, "--listen", "127.0.0.1:0", "--websim", "off", "--fetch-from", missing})
	err = root.Execute()
	if err == nil || !strings.HasPrefix(err.Error(), "site: --fetch-from 203.0.113.254: this machine has no such address: bind: ") {
		t.Fatalf("--fetch-from %s: %v", missing, err)
	}
	if _, err := os.Stat(data); err == nil {
		t.Errorf("the refused node created its data directory")
	}
}

func TestSeedsTurnWebsimOff(t *testing.T) {
	cfg, err := capture(t, "up", "--seeds", "s.txt")
	if err != nil || cfg.Websim != "off" {
		t.Fatalf("with --seeds: websim %q, err %v", cfg.Websim, err)
	}
	cfg, err = capture(t, "up", "--seeds", "s.txt", "--websim", "clean")
	if err != nil || cfg.Websim != "clean" {
		t.Fatalf("with --seeds and --websim clean: websim %q, err %v", cfg.Websim, err)
	}
	cfg, err = capture(t, "up")
	if err != nil || cfg.Websim != "realistic" {
		t.Fatalf("default: websim %q, err %v", cfg.Websim, err)
	}
}

// TestUpAndStatus runs the real `site up` on a tiny in-process websim for
// two rounds, with `site status` asked while it runs, and bad seed lines;
// its fetches leave from 127.0.2.1 (--fetch-from), which status shows.
func TestUpAndStatus(t *testing.T) {
	data := t.TempDir()
	seeds := filepath.Join(t.TempDir(), "seeds.txt")
	os.WriteFile(seeds, []byte("# seeds\nhttp://h0.zz.test/\nmailto:someone@example.test\nhttp://[::1\n\nhttp://h1.zz.test/x\n"), 0o644)
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		root := newRoot(io.Discard, &stderr, upSite)
		root.SetArgs([]string{"up", "--data", data, "--listen", "127.0.0.1:0", "--websim", "clean", "--websim-hosts", "5",
			"--websim-pages", "5", "--seeds", seeds, "--rounds", "2", "--host-delay", "10ms", "--progress", "50ms", "--log-level", "warn",
			"--fetch-from", "127.0.2.1"})
		done <- root.Execute()
	}()
	var status map[string]any
	summary := ""
	deadline := time.Now().Add(60 * time.Second)
	for (status == nil || summary == "") && time.Now().Before(deadline) {
		var out bytes.Buffer
		root := newRoot(&out, io.Discard, upSite)
		if status == nil {
			root.SetArgs([]string{"status", "--data", data, "--json"})
			if root.Execute() == nil {
				if err := json.Unmarshal(out.Bytes(), &status); err != nil {
					t.Fatalf("status --json output is not JSON: %v\n%s", err, out.String())
				}
			}
		} else {
			root.SetArgs([]string{"status", "--data", data})
			if root.Execute() == nil {
				summary = out.String()
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The summary is for people: lines, not JSON, naming what they read.
	for _, want := range []string{"site local, node", "\nrounds ", "\nfetcher ", "; fetching from 127.0.2.1\n", "\ncrawldb ", " URLs, ", " in the frontier"} {
		if !strings.Contains(summary, want) {
			t.Errorf("status summary lacks %q:\n%s", want, summary)
		}
	}
	if json.Valid([]byte(summary)) {
		t.Errorf("status without --json printed JSON:\n%s", summary)
	}
	if err := <-done; err != nil {
		t.Fatalf("up: %v\n%s", err, stderr.String())
	}
	if status == nil || status["region"] != "local" || status["phase"] == nil || status["round"] == nil {
		t.Fatalf("status %v", status)
	}
	log := stderr.String()
	for _, want := range []string{"line=3", "line=4", "round 2", "fetched", "crawl stopped at its round limit (--rounds) after 2 rounds: "} {
		if !strings.Contains(log, want) {
			t.Errorf("stderr lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "crawl exhausted") {
		t.Errorf("a crawl cut by --rounds says it is exhausted:\n%s", log)
	}
	if strings.Contains(log, "line=2 ") || strings.Contains(log, "line=6") {
		t.Errorf("good seed lines reported as bad:\n%s", log)
	}
	// A site of shards (the default): --rounds 2 is at most two rounds of
	// each shard (fewer if its hosts ran out), in its rounds.jsonl.
	files, _ := filepath.Glob(filepath.Join(data, "shards", "*", "stats", "rounds.jsonl"))
	if len(files) == 0 {
		t.Fatalf("no shard's rounds.jsonl in %s", data)
	}
	crawled := 0
	for _, f := range files {
		lines, err := os.ReadFile(f)
		switch n := bytes.Count(lines, []byte("\n")); {
		case err != nil || n > 2:
			t.Fatalf("%s after 2 rounds: %q, %v", f, lines, err)
		case n == 2:
			crawled++
		}
	}
	if crawled == 0 {
		t.Fatal("no shard did its 2 rounds")
	}
	warcs, _ := filepath.Glob(filepath.Join(data, "warc", "*.warc.gz"))
	if len(warcs) == 0 {
		t.Fatal("no WARC file")
	}
	// Once stopped, status says so.
	root := newRoot(io.Discard, io.Discard, upSite)
	root.SetArgs([]string{"status", "--data", data})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "no site answering") {
		t.Fatalf("status of a stopped site: %v", err)
	}
}

// TestRefetchFlags: the refetch flags reach the site's configuration, and
// a schedule that cannot be used is refused before the site starts.
func TestRefetchFlags(t *testing.T) {
	cfg, err := capture(t, "up", "--refetch-interval", "6h", "--refetch-adaptive", "--refetch-min", "1h", "--refetch-max", "48h")
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Refetch; r.Interval != 6*time.Hour || !r.Adaptive || r.Min != time.Hour || r.Max != 48*time.Hour {
		t.Errorf("refetch %+v, want 6h adaptive within [1h, 48h]", r)
	}
	if cfg, err = capture(t, "up", "--refetch-interval", "6h", "--refetch-optimal", "--refetch-max", "48h"); err != nil {
		t.Fatal(err)
	}
	if r := cfg.Refetch; r.Interval != 6*time.Hour || r.Adaptive || !r.Optimal || r.Min != 0 || r.Max != 48*time.Hour {
		t.Errorf("refetch %+v, want 6h optimal within [default, 48h]", r)
	}
	if cfg, err = capture(t, "up"); err != nil || cfg.Refetch.On() {
		t.Errorf("no refetch flags: %+v, %v; want never", cfg.Refetch, err)
	}
	data := filepath.Join(t.TempDir(), "data")
	root := newRoot(io.Discard, io.Discard, upSite)
	root.SetArgs([]string{"up", "--data", data, "--listen", "127.0.0.1:0", "--websim", "off", "--refetch-adaptive"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--refetch-adaptive true") || !strings.Contains(err.Error(), "need a refetch interval") {
		t.Errorf("--refetch-adaptive alone: %v, want it refused naming the flags", err)
	}
	root = newRoot(io.Discard, io.Discard, upSite)
	root.SetArgs([]string{"up", "--data", data, "--listen", "127.0.0.1:0", "--websim", "off", "--refetch-interval", "1h", "--refetch-adaptive", "--refetch-optimal"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--refetch-optimal true") || !strings.Contains(err.Error(), "exclude each other") {
		t.Errorf("--refetch-adaptive and --refetch-optimal: %v, want them refused naming the flags", err)
	}
	if _, err := os.Stat(data); err == nil {
		t.Errorf("the refused node created its data directory")
	}
}

// TestURLRulesFlag: --url-rules reads its file into the config and the
// crawl settings a joining node gets; a bad rule refuses the site with its
// file and line, before anything is created; an empty file is refused.
func TestURLRulesFlag(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "rules.txt")
	if err := os.WriteFile(good, []byte("# docs only\n-suffix:.pdf\n+host-suffix:example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := capture(t, "up", "--url-rules", good)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URLRulesFile != good || !strings.Contains(cfg.URLRules, "+host-suffix:example.com") {
		t.Errorf("config: file %q, rules %q", cfg.URLRulesFile, cfg.URLRules)
	}
	var joined site.Config
	site.SettingsOf(cfg).Apply(&joined)
	if joined.URLRules != cfg.URLRules {
		t.Errorf("the settings a joining node gets carry rules %q, want %q", joined.URLRules, cfg.URLRules)
	}
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"bad regex", "+host:example.com\n\n-regex:a(b\n", []string{"--url-rules", "rules-bad.txt:3:", "missing closing )"}},
		{"no sign", "host:example.com\n", []string{"rules-bad.txt:1:", "starts with + (accept) or - (reject)"}},
		{"empty", "", []string{"is empty"}},
	} {
		bad := filepath.Join(dir, "rules-bad.txt")
		if err := os.WriteFile(bad, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, "data-"+strings.ReplaceAll(tc.name, " ", "-"))
		root := newRoot(io.Discard, io.Discard, upSite)
		root.SetArgs([]string{"up", "--data", data, "--listen", "127.0.0.1:0", "--websim", "off", "--url-rules", bad})
		err := root.Execute()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it refused saying %q", tc.name, err, w)
			}
		}
		if _, err := os.Stat(data); err == nil {
			t.Errorf("%s: the refused site created its data directory", tc.name)
		}
	}
}

// TestPageRequisitesFlag: --page-requisites reaches the site's
// configuration and the crawl settings a joining node gets; it is off by
// default.
func TestPageRequisitesFlag(t *testing.T) {
	cfg, err := capture(t, "up", "--page-requisites")
	if err != nil {
		t.Fatal(err)
	}
	var joined site.Config
	site.SettingsOf(cfg).Apply(&joined)
	if !cfg.PageRequisites || !joined.PageRequisites {
		t.Errorf("--page-requisites: config %v, a joining node's %v; want both on", cfg.PageRequisites, joined.PageRequisites)
	}
	if cfg, err = capture(t, "up"); err != nil || cfg.PageRequisites {
		t.Errorf("no flag: page requisites %v, %v; want off", cfg.PageRequisites, err)
	}
}

// TestRestartKeepsItsWeb: a node restarted on its data directory crawls
// the web it crawled: a crawl of seeds gets no websim, a websim crawl the
// recorded websim, unless flags say otherwise (site.New then judges them).
func TestRestartKeepsItsWeb(t *testing.T) {
	web := &site.WebsimSpec{Profile: "hostile", Hosts: 300, Pages: 7, Seed: 11, IPs: 4}
	tests := []struct {
		name  string
		info  site.Info
		args  []string
		want  string // websim profile up gets
		hosts int
	}{
		{"seeds crawl, no flags", site.Info{Node: "local-1"}, nil, "off", 200},
		{"seeds crawl, --websim given", site.Info{Node: "local-1"}, []string{"--websim", "clean"}, "clean", 200},
		{"websim crawl, no flags", site.Info{Node: "local-1", Websim: "127.0.0.1:1", Web: web}, nil, "hostile", 300},
		{"websim crawl, a websim flag given", site.Info{Node: "local-1", Websim: "127.0.0.1:1", Web: web}, []string{"--websim-seed", "2"}, "realistic", 200},
		{"websim crawl of an older version", site.Info{Node: "local-1", Websim: "127.0.0.1:1"}, nil, "realistic", 200},
		{"joined node", site.Info{Node: "local-2", Joined: true}, nil, "realistic", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b, _ := json.Marshal(tc.info)
			if err := os.WriteFile(site.InfoPath(dir), b, 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := capture(t, append([]string{"up", "--data", dir}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Websim != tc.want || cfg.WebsimHosts != tc.hosts {
				t.Errorf("websim %q with %d hosts, want %q with %d", cfg.Websim, cfg.WebsimHosts, tc.want, tc.hosts)
			}
		})
	}
}

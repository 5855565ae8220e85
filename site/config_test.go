package site_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/site"
)

// TestListenersOffLoopbackNeedCertificates: a node whose Raft or API
// listener is off loopback refuses to start without --certs (saying how to
// make them), unless --insecure; loopback needs none.
func TestListenersOffLoopbackNeedCertificates(t *testing.T) {
	tests := []struct {
		name      string
		raft, api string
		certs     string
		insecure  bool
		wantErr   string // "" : valid
	}{
		{"defaults", "", "", "", false, ""},
		{"loopback v4", "127.0.0.1:7180", "127.0.0.2:7280", "", false, ""},
		{"loopback v6 and localhost", "[::1]:7180", "localhost:7280", "", false, ""},
		{"raft on all interfaces", "0.0.0.0:7180", "", "", false, "--raft 0.0.0.0:7180 is not a loopback address"},
		{"raft with an empty host", ":7180", "", "", false, "--raft :7180 is not a loopback address"},
		{"api on a LAN address", "", "10.1.2.3:7280", "", false, "--api 10.1.2.3:7280 is not a loopback address"},
		{"api on a host name", "", "node1.example:7280", "", false, "--api node1.example:7280"},
		{"off loopback with certificates", "0.0.0.0:7180", "10.1.2.3:7280", "certs", false, ""},
		{"off loopback, --insecure", "0.0.0.0:7180", "10.1.2.3:7280", "", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := site.DefaultConfig()
			cfg.Raft, cfg.API, cfg.Certs, cfg.Insecure = tt.raft, tt.api, tt.certs, tt.insecure
			err := cfg.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "site certs") || !strings.Contains(err.Error(), "--insecure") {
				t.Fatalf("Validate: %v, want an error with %q that says how to make certificates and names --insecure", err, tt.wantErr)
			}
		})
	}
}

// TestReplaceAfterSetting: --replace-after must not be negative (the
// error names the flag and the value); it travels with the site's crawl
// settings to a joining node; a site whose settings predate it (zero)
// leaves the joining node's default.
func TestReplaceAfterSetting(t *testing.T) {
	cfg := site.DefaultConfig()
	if cfg.ReplaceAfter != time.Minute {
		t.Errorf("default --replace-after %v, want 1m", cfg.ReplaceAfter)
	}
	cfg.ReplaceAfter = -time.Second
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--replace-after must not be negative, got -1s") {
		t.Errorf("Validate with --replace-after -1s: %v, want it refused by name", err)
	}
	cfg.ReplaceAfter = 5 * time.Minute
	joiner := site.DefaultConfig()
	site.SettingsOf(cfg).Apply(&joiner)
	if joiner.ReplaceAfter != 5*time.Minute {
		t.Errorf("joining node's --replace-after %v, want the site's 5m", joiner.ReplaceAfter)
	}
	old := site.SettingsOf(cfg)
	old.ReplaceAfter = 0
	joiner = site.DefaultConfig()
	old.Apply(&joiner)
	if joiner.ReplaceAfter != time.Minute {
		t.Errorf("joining a site without the setting: --replace-after %v, want the default 1m", joiner.ReplaceAfter)
	}
}

// TestFetchFromConfig: --fetch-from takes addresses this machine has (any
// of 127/8 on Linux), refuses one it lacks naming the flag and the
// address, and stays with the node: it is not a crawl setting a joining
// node takes from its site.
func TestFetchFromConfig(t *testing.T) {
	cfg := site.DefaultConfig()
	cfg.FetchFrom = []netip.Addr{netip.MustParseAddr("127.0.2.1"), netip.MustParseAddr("127.0.2.2")}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate with --fetch-from 127.0.2.1,127.0.2.2: %v", err)
	}
	joiner := site.DefaultConfig()
	site.SettingsOf(cfg).Apply(&joiner)
	if joiner.FetchFrom != nil {
		t.Errorf("a joining node took --fetch-from %v from its site", joiner.FetchFrom)
	}

	missing := netip.MustParseAddr("203.0.113.254")
	if err := localaddr.Check(missing); err == nil {
		t.Skipf("%v is configured on this machine", missing)
	}
	cfg.FetchFrom = []netip.Addr{netip.MustParseAddr("127.0.2.1"), missing, netip.IPv4Unspecified()}
	err := cfg.Validate()
	var nl *localaddr.NotLocalError
	if !errors.As(err, &nl) {
		t.Fatalf("Validate: %v, want a *localaddr.NotLocalError", err)
	}
	for _, want := range []string{
		"site: --fetch-from 203.0.113.254: this machine has no such address: bind: ",
		"site: --fetch-from 0.0.0.0: the unspecified address",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %q lacks %q", err, want)
		}
	}
}

// TestRefetchSetting: the refetch schedule's flags are checked together
// (bounds without the adaptive or optimal schedule, both schedules, or
// min > interval, are refused naming the flags); the schedule travels with the site's crawl settings to a joining node, and a site
// whose settings predate it never refetches.
func TestRefetchSetting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       plan.Refetch
		errText string
	}{
		{"off", plan.Refetch{}, ""},
		{"fixed", plan.Refetch{Interval: time.Hour}, ""},
		{"adaptive", plan.Refetch{Interval: time.Hour, Adaptive: true}, ""},
		{"optimal", plan.Refetch{Interval: time.Hour, Optimal: true, Min: time.Minute}, ""},
		{"bounds without adaptive", plan.Refetch{Interval: time.Hour, Max: 2 * time.Hour}, "--refetch-interval 1h0m0s, --refetch-adaptive false, --refetch-optimal false, --refetch-min 0s, --refetch-max 2h0m0s: plan: bad refetch schedule: refetch bounds"},
		{"adaptive and optimal", plan.Refetch{Interval: time.Hour, Adaptive: true, Optimal: true}, "--refetch-adaptive true, --refetch-optimal true"},
		{"optimal without interval", plan.Refetch{Optimal: true}, "need a refetch interval"},
		{"adaptive without interval", plan.Refetch{Adaptive: true}, "need a refetch interval"},
		{"min above the interval", plan.Refetch{Interval: time.Minute, Adaptive: true, Min: time.Hour}, "want min ≤ interval ≤ max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := site.DefaultConfig()
			cfg.Refetch = tc.r
			err := cfg.Validate()
			if tc.errText == "" && err != nil || tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)) {
				t.Fatalf("Validate: %v, want %q", err, tc.errText)
			}
		})
	}
	joiner := site.DefaultConfig()
	for _, r := range []plan.Refetch{
		{Interval: time.Hour, Adaptive: true, Max: 48 * time.Hour},
		{Interval: time.Hour, Optimal: true, Min: time.Minute, Max: 48 * time.Hour},
	} {
		cfg := site.DefaultConfig()
		cfg.Refetch = r
		site.SettingsOf(cfg).Apply(&joiner)
		if joiner.Refetch != cfg.Refetch {
			t.Errorf("joining node's refetch %+v, want the site's %+v", joiner.Refetch, cfg.Refetch)
		}
	}
	old := site.SettingsOf(site.DefaultConfig())
	joiner.Refetch = plan.Refetch{Interval: time.Minute}
	old.Apply(&joiner)
	if joiner.Refetch.On() {
		t.Errorf("joining a site without refetch: %+v, want none", joiner.Refetch)
	}
}

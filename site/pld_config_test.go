package site_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/site"
)

// TestPLDBudgetSetting: --pld-budget is off by default, refuses a negative
// value by name, travels with the site's crawl settings to a joining node,
// and a site whose stored settings predate it (no pld_budget) has none.
func TestPLDBudgetSetting(t *testing.T) {
	tests := []struct {
		name    string
		budget  int
		errText string // "": valid
	}{
		{"off", 0, ""},
		{"a budget", 5000, ""},
		{"negative", -1, "--pld-budget must be 0 (none) or a number of pages, got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := site.DefaultConfig()
			cfg.PLDBudget = tt.budget
			err := cfg.Validate()
			if tt.errText == "" && err != nil || tt.errText != "" && (err == nil || !strings.Contains(err.Error(), tt.errText)) {
				t.Fatalf("Validate: %v, want %q", err, tt.errText)
			}
		})
	}
	if d := site.DefaultConfig().PLDBudget; d != 0 {
		t.Errorf("default --pld-budget %d, want 0 (none)", d)
	}
	cfg := site.DefaultConfig()
	cfg.PLDBudget = 700
	joiner := site.DefaultConfig()
	site.SettingsOf(cfg).Apply(&joiner)
	if joiner.PLDBudget != 700 {
		t.Errorf("joining node's --pld-budget %d, want the site's 700", joiner.PLDBudget)
	}
	// Settings stored by a site created before the budget: none.
	b, err := json.Marshal(site.SettingsOf(site.DefaultConfig()))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "pld_budget") {
		t.Errorf("settings without a budget store it: %s", b)
	}
	var old site.Settings
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	joiner.PLDBudget = 300
	old.Apply(&joiner)
	if joiner.PLDBudget != 0 {
		t.Errorf("joining a site without the setting: --pld-budget %d, want 0", joiner.PLDBudget)
	}
}

package bench

import (
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/websim/synth"
)

func TestPolitenessFloor(t *testing.T) {
	w, err := synth.New(synth.Options{Hosts: 60, Pages: 8, Seed: 3, IPs: 4, Profile: synth.Realistic})
	if err != nil {
		t.Fatal(err)
	}
	truth, err := crawlcheck.Truth(w)
	if err != nil {
		t.Fatal(err)
	}
	// The reference: each host's distinct canonical targets × its delay.
	count := func(host string) int {
		seen := map[string]bool{}
		for i := range truth {
			r := &truth[i]
			if r.Host != host || !crawlcheck.Target(r) {
				continue
			}
			u := r.URL
			if r.Canonical != "" {
				u = r.Canonical
			}
			seen[u] = true
		}
		return len(seen)
	}
	withDelay := ""
	for _, h := range w.Hosts() {
		if h.CrawlDelay > 0 && count(h.Name) > 0 {
			withDelay = h.Name
		}
	}
	if withDelay == "" {
		t.Fatal("the test web has no host with a crawl-delay and pages")
	}
	tests := []struct {
		name            string
		host, ip, maxCD time.Duration
		wantIP          bool
	}{
		{"host delay only", 200 * time.Millisecond, 0, 0, false},
		{"crawl-delays honoured", 200 * time.Millisecond, 0, 2 * time.Second, false},
		{"an address delay that dominates", 10 * time.Millisecond, 100 * time.Millisecond, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := PolitenessFloor(w, truth, tt.host, tt.ip, tt.maxCD)
			if f.S <= 0 || f.URLs <= 0 || f.DelayS <= 0 {
				t.Fatalf("floor %+v: want positive figures", f)
			}
			if got := float64(f.URLs) * f.DelayS; got != f.S {
				t.Errorf("floor %+v: URLs × delay = %v, not S", f, got)
			}
			if (f.By[:3] == "ip ") != tt.wantIP {
				t.Errorf("floor set by %q, want by an address: %v", f.By, tt.wantIP)
			}
			// No host may take longer than the floor.
			for _, h := range w.Hosts() {
				d := tt.host
				if h.CrawlDelay > 0 {
					d = max(d, min(time.Duration(h.CrawlDelay)*time.Second, tt.maxCD))
				}
				if s := float64(count(h.Name)) * d.Seconds(); s > f.S+1e-9 {
					t.Errorf("host %s needs %.2fs, above the floor %+v", h.Name, s, f)
				}
			}
		})
	}
	// A crawl-delay longer than the host delay raises its host's floor.
	lo := PolitenessFloor(w, truth, 200*time.Millisecond, 0, 0)
	hi := PolitenessFloor(w, truth, 200*time.Millisecond, 0, 2*time.Second)
	if hi.S <= lo.S {
		t.Errorf("with crawl-delays honoured the floor is %.2fs, without %.2fs: want higher", hi.S, lo.S)
	}
}

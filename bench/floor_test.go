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

// TestPolitenessFloorRTT checks the floor with distance: each URL of a
// host costs its delay and its RTT, so a host that is not the largest
// sets the floor once its RTT is large enough, and the floor records that
// RTT; an address's floor takes the smallest RTT of its hosts.
func TestPolitenessFloorRTT(t *testing.T) {
	w, err := synth.New(synth.Options{Hosts: 60, Pages: 8, Seed: 3, IPs: 4, Profile: synth.Realistic})
	if err != nil {
		t.Fatal(err)
	}
	truth, err := crawlcheck.Truth(w)
	if err != nil {
		t.Fatal(err)
	}
	const d = 100 * time.Millisecond // every host's delay: no crawl-delay honoured (max 0)
	base := PolitenessFloor(w, truth, d, 0, 0)
	big, nBig := base.By, base.URLs
	// The runner-up: the host with the most URLs below the largest's.
	perHost := map[string]int{}
	seen := map[string]bool{}
	for i := range truth {
		r := &truth[i]
		u := r.URL
		if r.Canonical != "" {
			u = r.Canonical
		}
		if crawlcheck.Target(r) && !seen[u] {
			seen[u] = true
			perHost[r.Host]++
		}
	}
	other, nOther := "", 0
	for h, n := range perHost {
		if n < nBig && (n > nOther || n == nOther && h < other) {
			other, nOther = h, n
		}
	}
	if other == "" || nOther == 0 {
		t.Fatalf("the test web has no host with fewer URLs than %s (%d)", big, nBig)
	}
	// other overtakes big once nOther × (d + rtt) > nBig × d.
	threshold := time.Duration(float64(d) * (float64(nBig)/float64(nOther) - 1))
	only := func(host string, rtt time.Duration) func(string) time.Duration {
		return func(h string) time.Duration {
			if h == host {
				return rtt
			}
			return 0
		}
	}
	for _, tc := range []struct {
		name   string
		rtt    func(string) time.Duration
		wantBy string
		wantMS float64
	}{
		{"no distance", nil, big, 0},
		{"every host as far", func(string) time.Duration { return 50 * time.Millisecond }, big, 50},
		{"the runner-up just short of it", only(other, threshold-time.Millisecond), big, 0},
		{"the runner-up far enough", only(other, threshold+time.Millisecond), other, msOf(threshold + time.Millisecond)},
		{"the largest far too", func(h string) time.Duration {
			return map[string]time.Duration{big: 10 * time.Millisecond, other: threshold + time.Millisecond}[h]
		}, big, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := PolitenessFloorRTT(w, truth, d, 0, 0, tc.rtt)
			if f.By != tc.wantBy || f.RTTMS != tc.wantMS {
				t.Fatalf("floor %+v: want set by %s at RTT %.3f ms", f, tc.wantBy, tc.wantMS)
			}
			want := float64(f.URLs) * (f.DelayS + f.RTTMS/1000)
			if diff := f.S - want; diff > 1e-9 || diff < -1e-9 {
				t.Errorf("floor %+v: S is not URLs × (delay + RTT) = %v", f, want)
			}
			if f.S < base.S {
				t.Errorf("floor %.3fs below the floor without distance %.3fs", f.S, base.S)
			}
		})
	}
	if f := PolitenessFloorRTT(w, truth, d, 0, 0, nil); f != base {
		t.Errorf("PolitenessFloorRTT without RTTs = %+v, PolitenessFloor = %+v", f, base)
	}
	// An address delay that dominates: its hosts' smallest RTT counts.
	ip := PolitenessFloor(w, truth, time.Millisecond, 200*time.Millisecond, 0)
	if ip.By[:3] != "ip " {
		t.Fatalf("floor %+v: want set by an address", ip)
	}
	f := PolitenessFloorRTT(w, truth, time.Millisecond, 200*time.Millisecond, 0, func(h string) time.Duration {
		if h == big {
			return 5 * time.Millisecond
		}
		return 30 * time.Millisecond
	})
	wantMS := 30.0
	for _, h := range w.Hosts() {
		if h.Name == big && "ip "+h.IP.String() == f.By {
			wantMS = 5
		}
	}
	if f.By[:3] != "ip " || f.RTTMS != wantMS || f.S < ip.S {
		t.Errorf("address floor %+v (without distance %+v): want an address at RTT %.0f ms, not below", f, ip, wantMS)
	}
}

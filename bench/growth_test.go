package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestGrowthResult: a growth run's figures from websim's counts: 100
// pages/s before the first join, 80 while three nodes join (the first 60
// s), then 160 from the last join on and 200 from 120 s after it. The
// base rate, the first window above it, and the windows 60 s and 3 min
// after the last join are read off as such, and the targets judge them.
func TestGrowthResult(t *testing.T) {
	cfg, err := ClusterConfig{Nodes: []int{3}, Grow: 3}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	r := &clusterRun{cfg: &cfg, n: 3}
	g := &r.grow
	g.joinStart = t0
	lastJoin := t0.Add(60 * time.Second)
	g.joinedAt = []time.Time{t0.Add(20 * time.Second), t0.Add(40 * time.Second), lastJoin}
	g.lastJoinAt = lastJoin
	rate := func(s float64) float64 {
		switch {
		case s < 0:
			return 100
		case s < 60:
			return 80
		case s < 180:
			return 160
		}
		return 200
	}
	var reqs float64
	for s := -90.0; s <= 60+180+1; s += 5 {
		g.points = append(g.points, growPoint{at: t0.Add(time.Duration(s * float64(time.Second))), reqs: int64(math.Round(reqs)), nodes: 3})
		reqs += 5 * rate(s)
	}
	res := r.growthResult()
	if res.BaseRate != 100 {
		t.Errorf("base rate %v, want 100", res.BaseRate)
	}
	if res.ExceedS != 90 {
		t.Errorf("above the base rate %v s after the first join, want 90 (the window 60…90)", res.ExceedS)
	}
	if math.Abs(res.At60Ratio-1.6) > 1e-9 || math.Abs(res.AtTailRatio-2.0) > 1e-9 {
		t.Errorf("at 60 s %v (%v×), at 3 min %v (%v×); want 1.6× and 2×", res.At60, res.At60Ratio, res.AtTail, res.AtTailRatio)
	}
	if res.LastJoinS != 60 || len(res.JoinsS) != 3 || res.From != 3 || res.To != 6 {
		t.Errorf("joins %v, last %v, %d → %d nodes", res.JoinsS, res.LastJoinS, res.From, res.To)
	}
	tg := map[string]ClusterTarget{}
	growthTargets(res, tg)
	if !tg["growth_at_60s"].Met || !tg["growth_at_tail"].Met {
		t.Errorf("targets %+v, want both met", tg)
	}
	var b strings.Builder
	writeGrowth(&b, res)
	if !strings.Contains(b.String(), "before the first join 100 pages/s; above it 90 s after the first join") {
		t.Errorf("report:\n%s", b.String())
	}
	// A run that ended before its first join has no figures.
	r2 := &clusterRun{cfg: &cfg, n: 3}
	if res := r2.growthResult(); res.Note == "" || res.At60Ratio != 0 {
		t.Errorf("no join: %+v, want a note and no ratio", res)
	}
}

// TestGrowthConfig: a growth run's defaults, and its bad settings refused.
func TestGrowthConfig(t *testing.T) {
	c, err := ClusterConfig{Nodes: []int{3}, Grow: 3}.WithDefaults()
	if err != nil || c.GrowAfter != 90*time.Second || c.GrowWindow != 30*time.Second || c.GrowTail != 3*time.Minute {
		t.Fatalf("defaults %v %v %v, %v", c.GrowAfter, c.GrowWindow, c.GrowTail, err)
	}
	for _, bad := range []ClusterConfig{
		{Nodes: []int{3}, Grow: -1},
		{Nodes: []int{3}, Grow: 3, GrowTail: 30 * time.Second},
		{Nodes: []int{3}, Grow: 3, Steady: time.Minute},
		{Nodes: []int{maxClusterNodes}, Grow: 1},
	} {
		if _, err := bad.WithDefaults(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

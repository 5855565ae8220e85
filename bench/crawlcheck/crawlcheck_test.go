package crawlcheck

import (
	"math"
	"testing"

	"github.com/meridian-crawler/meridian/websim/synth"
)

func TestSpearman(t *testing.T) {
	for _, tc := range []struct {
		xs, ys []float64
		want   float64
	}{
		{[]float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, 1},
		{[]float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}, -1},
		{[]float64{1, 2, 3, 4, 5}, []float64{2, 1, 4, 3, 5}, 0.8},
		{[]float64{1, 1, 2, 2}, []float64{1, 1, 2, 2}, 1},
	} {
		if got := Spearman(tc.xs, tc.ys); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Spearman(%v, %v) = %v, want %v", tc.xs, tc.ys, got, tc.want)
		}
	}
	if !math.IsNaN(Spearman([]float64{1}, []float64{1})) {
		t.Error("one point should give NaN")
	}
}

func TestPageRank(t *testing.T) {
	// a → b, c → b, b → a: b ranks first, then a, then c.
	truth := []synth.Record{
		{URL: "a", Status: 200, Outlinks: []string{"b"}},
		{URL: "b", Status: 200, Outlinks: []string{"a"}},
		{URL: "c", Status: 200, Outlinks: []string{"b"}},
	}
	pr := PageRank(truth, 0.85, 100)
	if !(pr["b"] > pr["a"] && pr["a"] > pr["c"]) {
		t.Fatalf("ranks %v", pr)
	}
	sum := pr["a"] + pr["b"] + pr["c"]
	if math.Abs(sum-1) > 1e-9 {
		t.Fatalf("ranks sum to %v", sum)
	}
}

func TestPageRankCanonical(t *testing.T) {
	// b is linked from a and c only under its session-id form b?sid=1; a
	// crawler keeps it as b, so the rank must land on b.
	truth := []synth.Record{
		{URL: "a", Status: 200, Outlinks: []string{"b?sid=1"}},
		{URL: "b?sid=1", Canonical: "b", Status: 200, Outlinks: []string{"a"}},
		{URL: "b", Canonical: "b", Status: 200, Outlinks: []string{"a"}},
		{URL: "c", Status: 200, Outlinks: []string{"b?sid=1"}},
	}
	pr := PageRank(truth, 0.85, 100)
	if _, ok := pr["b?sid=1"]; ok {
		t.Fatalf("session URL kept as its own page: %v", pr)
	}
	if !(pr["b"] > pr["a"] && pr["a"] > pr["c"]) {
		t.Fatalf("ranks %v", pr)
	}
}

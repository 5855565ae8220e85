package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
)

func TestCompareSites(t *testing.T) {
	a := &SiteResult{Pages: 1000, PagesPerSec: 3000, BusyFraction: 0.9, Site: ProcStats{WindowCPUS: 0.5, PeakRSS: 1 << 30},
		Ranking: crawlcheck.Ranking{Spearman: 0.7}, Coverage: crawlcheck.Coverage{Ratio: 0.4}}
	b := &SiteResult{Pages: 2000, PagesPerSec: 3300, BusyFraction: 0.85, Site: ProcStats{WindowCPUS: 0.8, PeakRSS: 3 << 29},
		Ranking: crawlcheck.Ranking{Spearman: 0.735}, Coverage: crawlcheck.Coverage{Ratio: 0.4}, Breaches: 2}
	want := map[string][3]float64{
		"pages/s":                   {3000, 3300, 1.1},
		"fetcher busy fraction":     {0.9, 0.85, 0.85 / 0.9},
		"site CPU µs/page":          {500, 400, 0.8},
		"site peak RSS MiB":         {1024, 1536, 1.5},
		"Spearman OPIC vs PageRank": {0.7, 0.735, 1.05},
		"coverage":                  {0.4, 0.4, 1},
		"politeness breaches":       {0, 2, math.NaN()},
	}
	cs := CompareSites(a, b)
	if len(cs) != len(want) {
		t.Fatalf("%d measures, want %d", len(cs), len(want))
	}
	for _, c := range cs {
		w, ok := want[c.Measure]
		if !ok {
			t.Errorf("unexpected measure %q", c.Measure)
			continue
		}
		near := func(x, y float64) bool { return math.IsNaN(x) && math.IsNaN(y) || math.Abs(x-y) < 1e-9 }
		if !near(c.A, w[0]) || !near(c.B, w[1]) || !near(c.Ratio, w[2]) {
			t.Errorf("%s: A %v B %v ratio %v, want %v", c.Measure, c.A, c.B, c.Ratio, w)
		}
	}
	var buf bytes.Buffer
	WriteComparison(&buf, "base", "change", cs)
	if s := buf.String(); !strings.Contains(s, "A: base") || !strings.Contains(s, "1.100") || !strings.Contains(s, "politeness breaches") {
		t.Errorf("table:\n%s", s)
	}
}

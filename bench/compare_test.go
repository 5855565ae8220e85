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
		Websim: ProcStats{WindowCPUS: 0.125}, WindowS: 10, WARC: &WARCStats{Multi2xx: 0},
		Ranking: crawlcheck.Ranking{Spearman: 0.7}, Coverage: crawlcheck.Coverage{Ratio: 0.4}}
	b := &SiteResult{Pages: 2000, PagesPerSec: 3300, BusyFraction: 0.85, Site: ProcStats{WindowCPUS: 0.8, PeakRSS: 3 << 29},
		Websim: ProcStats{WindowCPUS: 0.4}, WindowS: 12, WARC: &WARCStats{Multi2xx: 3},
		Ranking: crawlcheck.Ranking{Spearman: 0.735}, Coverage: crawlcheck.Coverage{Ratio: 0.4}, Breaches: 2}
	want := map[string][3]float64{
		"pages/s":                    {3000, 3300, 1.1},
		"fetcher busy fraction":      {0.9, 0.85, 0.85 / 0.9},
		"site CPU µs/page":           {500, 400, 0.8},
		"websim CPU µs/page":         {125, 200, 1.6},
		"site ÷ websim CPU per page": {4, 2, 0.5},
		"crawl seconds":              {10, 12, 1.2},
		"URLs with > 1 2xx (WARC)":   {0, 3, math.NaN()},
		"site peak RSS MiB":          {1024, 1536, 1.5},
		"Spearman OPIC vs PageRank":  {0.7, 0.735, 1.05},
		"coverage":                   {0.4, 0.4, 1},
		"politeness breaches":        {0, 2, math.NaN()},
	}
	cs := CompareSites(a, b)
	if len(cs) != len(want) {
		t.Fatalf("%d measures, want %d", len(cs), len(want))
	}
	if n := len(CompareSites(&SiteResult{}, b)); n != len(want)-1 {
		t.Errorf("with one run's WARC files unscanned: %d measures, want %d (no WARC row)", n, len(want)-1)
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

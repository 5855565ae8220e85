package bench

import (
	"fmt"
	"io"
	"math"
)

// Comparison is one measure of two site runs side by side.
type Comparison struct {
	Measure string  `json:"measure"`
	A       float64 `json:"a"`
	B       float64 `json:"b"`
	// Ratio is B/A; NaN when A is 0.
	Ratio float64 `json:"ratio"`
}

// measure is one row of CompareSites: a name and how to read it off a run.
type measure struct {
	name string
	f    func(*SiteResult) float64
}

// CompareSites lines up the headline measures of two site runs (B against
// A), for A/B runs made one after the other on the same machine: on a noisy
// machine their ratios mean more than either figure alone.
func CompareSites(a, b *SiteResult) []Comparison {
	perPage := func(r *SiteResult) float64 {
		if r.Pages == 0 {
			return 0
		}
		return r.Site.WindowCPUS / float64(r.Pages) * 1e6
	}
	rows := []measure{
		{"pages/s", func(r *SiteResult) float64 { return r.PagesPerSec }},
		{"fetcher busy fraction", func(r *SiteResult) float64 { return r.BusyFraction }},
		{"site CPU µs/page", perPage},
		{"websim CPU µs/page", func(r *SiteResult) float64 {
			if r.Pages == 0 {
				return 0
			}
			return r.Websim.WindowCPUS / float64(r.Pages) * 1e6
		}},
		{"site ÷ websim CPU per page", func(r *SiteResult) float64 {
			if r.Websim.WindowCPUS == 0 {
				return 0
			}
			return r.Site.WindowCPUS / r.Websim.WindowCPUS
		}},
		{"crawl seconds", func(r *SiteResult) float64 { return r.WindowS }},
		{"site peak RSS MiB", func(r *SiteResult) float64 { return float64(r.Site.PeakRSS) / (1 << 20) }},
		{"Spearman OPIC vs PageRank", func(r *SiteResult) float64 { return r.Ranking.Spearman }},
		{"coverage", func(r *SiteResult) float64 { return r.Coverage.Ratio }},
		{"politeness breaches", func(r *SiteResult) float64 { return float64(r.Breaches) }},
	}
	if a.WARC != nil && b.WARC != nil { // both scanned their WARC files
		rows = append(rows, measure{"URLs with > 1 2xx (WARC)", func(r *SiteResult) float64 { return float64(r.WARC.Multi2xx) }})
	}
	out := make([]Comparison, len(rows))
	for i, row := range rows {
		x, y := row.f(a), row.f(b)
		ratio := math.NaN()
		if x != 0 {
			ratio = y / x
		}
		out[i] = Comparison{Measure: row.name, A: x, B: y, Ratio: ratio}
	}
	return out
}

// WriteComparison prints cs as a table, with what A and B were.
func WriteComparison(w io.Writer, aName, bName string, cs []Comparison) {
	fmt.Fprintf(w, "A: %s\nB: %s\n\n", aName, bName)
	fmt.Fprintf(w, "  %-28s %12s %12s %8s\n", "measure", "A", "B", "B/A")
	for _, c := range cs {
		ratio := "-"
		if !math.IsNaN(c.Ratio) {
			ratio = fmt.Sprintf("%.3f", c.Ratio)
		}
		fmt.Fprintf(w, "  %-28s %12.4g %12.4g %8s\n", c.Measure, c.A, c.B, ratio)
	}
}

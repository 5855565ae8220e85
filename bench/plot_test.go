package bench

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

const nasty = `a<b & c>"d"`

// checkSVG walks the document with encoding/xml, checks that its root is
// an svg element and that no NaN or Inf made it into it, and returns its
// texts.
func checkSVG(t *testing.T, doc []byte) []string {
	t.Helper()
	s := string(doc)
	for _, bad := range []string{"NaN", "Inf"} {
		if strings.Contains(s, bad) {
			t.Errorf("the SVG holds %q:\n%s", bad, s)
		}
	}
	d := xml.NewDecoder(strings.NewReader(s))
	var texts []string
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG does not parse: %v\n%s", err, s)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			if txt := strings.TrimSpace(string(tok)); txt != "" {
				texts = append(texts, txt)
			}
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	return texts
}

func TestLineChartSVG(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name       string
		chart      lineChart
		wantSeries int
		wantText   string
	}{
		{"two series", lineChart{title: "t", xLabel: "x", yLabel: "y", series: []series{
			{name: "a", x: []float64{1, 2, 3}, y: []float64{10, 20, 15}},
			{name: "b", x: []float64{1, 2, 3}, y: []float64{5, 6, 7}},
		}}, 2, "b"},
		{"escaped texts", lineChart{title: nasty, xLabel: nasty, yLabel: nasty, series: []series{
			{name: nasty, x: []float64{0, 1}, y: []float64{1, 2}},
		}}, 1, nasty},
		{"no series", lineChart{title: "empty"}, 0, "no data"},
		{"series without points", lineChart{series: []series{{name: "none"}}}, 0, "no data"},
		{"single point", lineChart{series: []series{{name: "one", x: []float64{3}, y: []float64{5}}}}, 1, "one"},
		{"single point at zero", lineChart{series: []series{{name: "zero", x: []float64{0}, y: []float64{0}}}}, 1, "zero"},
		{"tiny range", lineChart{series: []series{{name: "tiny", x: []float64{1e-9, 2e-9}, y: []float64{1e-12, 3e-12}}}}, 1, "tiny"},
		{"negative values", lineChart{series: []series{{name: "neg", x: []float64{-5, 5}, y: []float64{-2, -1}}}}, 1, "neg"},
		{"non-finite points left out", lineChart{series: []series{
			{name: "some", x: []float64{1, 2, nan, 4}, y: []float64{1, inf, 3, 4}},
			{name: "none", x: []float64{nan}, y: []float64{1}},
		}}, 1, "some"},
		{"x and y of different lengths", lineChart{series: []series{{name: "short", x: []float64{1, 2, 3}, y: []float64{1}}}}, 1, "short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.chart.svg()
			texts := checkSVG(t, doc)
			if n := strings.Count(string(doc), `class="series"`); n != tc.wantSeries {
				t.Errorf("%d series paths, want %d", n, tc.wantSeries)
			}
			if !slices.Contains(texts, tc.wantText) {
				t.Errorf("no text %q in %q", tc.wantText, texts)
			}
			if strings.Contains(string(doc), "a<b") {
				t.Error("a text is not escaped")
			}
		})
	}
}

func TestBarChartSVG(t *testing.T) {
	many := barChart{kinds: []string{"k"}}
	for i := range 100 {
		many.rows = append(many.rows, barRow{label: "r", spans: []span{{0, float64(i), float64(i + 1)}}})
	}
	for _, tc := range []struct {
		name     string
		chart    barChart
		wantBars int
		wantText string
	}{
		{"timeline", barChart{title: "t", xLabel: "s", kinds: []string{"generate", "fetch", "update"}, rows: []barRow{
			{label: "round 1", spans: []span{{0, 0, 0.1}, {1, 0.1, 4}, {2, 4, 5}}},
			{label: "round 2", spans: []span{{0, 3, 3.2}, {1, 3.2, 9}, {2, 9, 12}}},
		}}, 6, "update"},
		{"bars with values", barChart{values: true, rows: []barRow{
			{label: "federated", spans: []span{{0, 0, 17.04}}},
			{label: "stretched", spans: []span{{1, 0, 2599.6}}},
		}}, 2, "2600"},
		{"escaped texts", barChart{title: nasty, xLabel: nasty, kinds: []string{nasty}, values: true, rows: []barRow{
			{label: nasty, spans: []span{{0, 0, 1}}},
		}}, 1, nasty},
		{"no rows", barChart{title: "empty", values: true}, 0, "no data"},
		{"row without spans", barChart{values: true, rows: []barRow{{label: "nothing"}}}, 0, "nothing"},
		{"single zero bar", barChart{values: true, rows: []barRow{{label: "zero", spans: []span{{0, 0, 0}}}}}, 1, "0.00"},
		{"reversed and negative", barChart{rows: []barRow{{label: "rev", spans: []span{{0, 5, -3}}}}}, 1, "rev"},
		{"kind out of the legend", barChart{kinds: []string{"one"}, rows: []barRow{{label: "odd", spans: []span{{-7, 0, 1}, {9, 1, 2}}}}}, 2, "odd"},
		{"non-finite spans left out", barChart{values: true, rows: []barRow{
			{label: "ok", spans: []span{{0, 0, 2}, {1, math.NaN(), 3}, {2, 1, math.Inf(1)}}},
		}}, 1, "2.00"},
		{"many rows", many, 100, "r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := tc.chart.svg()
			texts := checkSVG(t, doc)
			if n := strings.Count(string(doc), `class="bar"`); n != tc.wantBars {
				t.Errorf("%d bars, want %d", n, tc.wantBars)
			}
			if !slices.Contains(texts, tc.wantText) {
				t.Errorf("no text %q in %q", tc.wantText, texts)
			}
			if strings.Contains(string(doc), "a<b") {
				t.Error("a text is not escaped")
			}
		})
	}
}

func TestNewAxis(t *testing.T) {
	for _, tc := range []struct {
		lo, hi               float64
		wantLo, wantHi, step float64
	}{
		{0, 9.3, 0, 10, 2},
		{0, 2600, 0, 3000, 1000},
		{1, 10, 0, 10, 2},
		{0, 0, -1, 1, 0.5},
		{5, 5, 4.4, 5.6, 0.2},
		{0, 0.013, 0, 0.015, 0.005},
		{math.NaN(), 1, 0, 1, 0.2},
		{3, 1, 0, 1, 0.2},
	} {
		a := newAxis(tc.lo, tc.hi)
		if math.Abs(a.lo-tc.wantLo) > 1e-12 || math.Abs(a.hi-tc.wantHi) > 1e-12 || math.Abs(a.step-tc.step) > 1e-12 {
			t.Errorf("newAxis(%v, %v) = [%v, %v] by %v, want [%v, %v] by %v", tc.lo, tc.hi, a.lo, a.hi, a.step, tc.wantLo, tc.wantHi, tc.step)
		}
	}
	if got := newAxis(0, 0.013).label(0.006); got != "0.006" {
		t.Errorf("label 0.006 = %q", got)
	}
	if got := newAxis(-1, 1).label(-0.0); got != "0.0" {
		t.Errorf("label -0 = %q", got)
	}
}

func TestFigures(t *testing.T) {
	rows := []RoundRow{
		{Round: 1, StartS: 0, EndS: 5, GenerateS: 0.1, FetchS: 4, UpdateS: 1, Fetched: 900},
		{Round: 2, StartS: 3, EndS: 12, GenerateS: 0.2, FetchS: 6, UpdateS: 3, Fetched: 1000},
		{Round: 3, StartS: 8, EndS: 13, GenerateS: 0.2, FetchS: 0, UpdateS: 1}, // no fetch phase
	}
	fed := func(mode string, ms int, pps float64) FederationRun {
		return FederationRun{Mode: mode, Delay: time.Duration(ms) * time.Millisecond, DelayMS: float64(ms), PagesPerSec: pps,
			MeanUpdateS: 0.5, MaxUpdateS: 2, WANBytesPerPage: 17}
	}
	ring := []PartitionRingResult{{Replicas: 100, RingDev: 1.5}, {Replicas: 200, RingDev: 0.8}}
	for _, tc := range []struct {
		name  string
		figs  []Figure
		names []string
		bars  int // in all the figures
	}{
		{"site", SiteResult{Rounds: rows, PagesPerSec: 150}.Figures(), []string{"pages", "phases"}, 8},
		{"site without rounds", SiteResult{}.Figures(), nil, 0},
		{"cluster", ClusterResult{Runs: []ClusterRun{
			{Nodes: 1, Rounds: []ClusterRound{{RoundRow: rows[0]}, {RoundRow: rows[1]}}},
			{Nodes: 3, Rounds: []ClusterRound{{RoundRow: rows[0]}}, Kill: &ClusterKill{Node: "n3", AtWindowS: 2}},
		}}.Figures(), []string{"pages", "1-nodes-phases", "3-nodes-phases"}, 9},
		{"federation sweep", FederationResult{Runs: []FederationRun{fed("federated", 80, 850), fed("federated", 0, 860), fed("federated", 20, 870)}}.Figures(),
			[]string{"delay-pages", "delay-update"}, 0},
		{"stretched", FederationResult{Runs: []FederationRun{fed("federated", 40, 1500), fed("stretched", 40, 1285)}}.Figures(),
			[]string{"wan-bytes", "pages"}, 4},
		{"sweep and stretched", FederationResult{Runs: []FederationRun{fed("federated", 0, 1), fed("federated", 40, 2), fed("stretched", 40, 3)}}.Figures(),
			[]string{"delay-pages", "delay-update", "wan-bytes", "pages"}, 4},
		{"one federated run", FederationResult{Runs: []FederationRun{fed("federated", 40, 1500)}}.Figures(), nil, 0},
		{"partition", PartitionResult{Sets: []PartitionSetResult{
			{Name: "3 sites", Consistent: ring, Trials: []PartitionTrialsResult{{Replicas: 100, N: 200, P95: 3.5}}},
			{Name: "10 sites", Consistent: ring},
			{Name: "no ring"},
		}}.Figures(), []string{"3-sites", "10-sites"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			bars := 0
			for _, f := range tc.figs {
				names = append(names, f.Name)
				checkSVG(t, f.SVG)
				bars += strings.Count(string(f.SVG), `class="bar"`)
			}
			if !slices.Equal(names, tc.names) {
				t.Errorf("figures %q, want %q", names, tc.names)
			}
			if bars != tc.bars {
				t.Errorf("%d bars, want %d", bars, tc.bars)
			}
		})
	}
}

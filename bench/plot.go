package bench

// A small SVG plotter for the benchmarks' figures: line charts on linear
// axes, and horizontal bar charts whose rows hold one or more spans (plain
// bars, or a timeline). The SVG is written by hand; every text is escaped.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// palette holds the series and bar colours (Okabe and Ito's, which stay
// apart for colour-blind readers), used in turn.
var palette = []string{"#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#777777", "#000000"}

func color(i int) string {
	n := len(palette)
	return palette[(i%n+n)%n]
}

// series is one line of a lineChart, through (x[i], y[i]). Points whose x
// or y is NaN or infinite are left out; a series with no point left is
// neither drawn nor in the legend.
type series struct {
	name string
	x, y []float64
}

// lineChart is lines through points, on linear axes. The y axis always
// holds 0.
type lineChart struct {
	title, xLabel, yLabel string
	series                []series
}

// span is one bar of a barRow, from from to to on the x axis, in the
// colour of its kind.
type span struct {
	kind     int
	from, to float64
}

// barRow is one labelled row of a barChart.
type barRow struct {
	label string
	spans []span
}

// barChart is horizontal bars, one row per label, on a shared x axis that
// always holds 0. With one span from 0 per row it is a plain bar chart;
// with several spans per row, a timeline. kinds name the spans' kinds in
// the legend (none: no legend); values prints, right of each row, the end
// of its last span.
type barChart struct {
	title, xLabel string
	kinds         []string
	rows          []barRow
	values        bool
}

// axis maps [lo, hi] onto a span of the picture, with "nice" ticks.
type axis struct {
	lo, hi, step float64
}

// newAxis is an axis over at least [lo, hi], widened to whole steps of 1, 2
// or 5 × 10ⁿ (about five of them). Empty or non-finite bounds give [0, 1].
func newAxis(lo, hi float64) axis {
	if !finite(lo) || !finite(hi) || lo > hi {
		lo, hi = 0, 1
	}
	if lo == hi {
		d := math.Abs(lo) / 10
		if d == 0 {
			d = 1
		}
		lo, hi = lo-d, hi+d
	}
	step := niceStep((hi - lo) / 5)
	return axis{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step, step: step}
}

// niceStep is the smallest of 1, 2, 5 × 10ⁿ that is ≥ x (x > 0).
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5} {
		if x <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// ticks are the axis's tick values, lo to hi by step.
func (a axis) ticks() []float64 {
	n := int(math.Round((a.hi - a.lo) / a.step))
	t := make([]float64, 0, n+1)
	for i := 0; i <= n; i++ {
		t = append(t, a.lo+float64(i)*a.step)
	}
	return t
}

// at maps v onto [p0, p1].
func (a axis) at(v, p0, p1 float64) float64 {
	return p0 + (v-a.lo)/(a.hi-a.lo)*(p1-p0)
}

// label is tick value v with as many decimals as the step needs.
func (a axis) label(v float64) string {
	d := 0
	if a.step < 1 {
		d = min(int(math.Ceil(-math.Log10(a.step)-1e-9)), 9)
	}
	return strconv.FormatFloat(v+0, 'f', d, 64) // +0: no "-0"
}

// value formats a bar's value: 3 significant digits or whole units.
func value(v float64) string {
	v += 0 // no "-0"
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// canvas collects an SVG document.
type canvas struct{ bytes.Buffer }

func newCanvas(w, h float64, title string) *canvas {
	c := &canvas{}
	fmt.Fprintf(c, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(c, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	c.text(w/2, 22, "middle", `font-size="15" font-weight="bold"`, title)
	return c
}

// text writes s (escaped) at (x, y); anchor is start, middle or end.
func (c *canvas) text(x, y float64, anchor, attrs, s string) {
	if s == "" {
		return
	}
	fmt.Fprintf(c, `<text x="%.1f" y="%.1f" text-anchor="%s" %s>`, x, y, anchor, attrs)
	xml.EscapeText(c, []byte(s))
	c.WriteString("</text>\n")
}

func (c *canvas) line(x0, y0, x1, y1 float64, attrs string) {
	fmt.Fprintf(c, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" %s/>`+"\n", x0, y0, x1, y1, attrs)
}

func (c *canvas) finish() []byte {
	c.WriteString("</svg>\n")
	return c.Bytes()
}

// textWidth estimates the width of s at font size 12.
func textWidth(s string) float64 { return 7 * float64(len([]rune(s))) }

const gridAttrs = `stroke="#dddddd"`

// xAxis draws the x axis's grid, ticks and labels under a plot area
// [x0, x1] × [y0, y1], and its title.
func (c *canvas) xAxis(a axis, x0, x1, y0, y1 float64, title string) {
	for _, t := range a.ticks() {
		x := a.at(t, x0, x1)
		c.line(x, y0, x, y1, gridAttrs)
		c.line(x, y1, x, y1+5, `stroke="#000000"`)
		c.text(x, y1+18, "middle", "", a.label(t))
	}
	c.line(x0, y1, x1, y1, `stroke="#000000"`)
	c.text((x0+x1)/2, y1+38, "middle", "", title)
}

// svg renders the chart.
func (ch lineChart) svg() []byte {
	type point struct{ x, y float64 }
	var drawn []int
	var pts [][]point
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), 0.0, math.Inf(-1)
	legendW := 0.0
	for i, s := range ch.series {
		var p []point
		for j := range min(len(s.x), len(s.y)) {
			if x, y := s.x[j], s.y[j]; finite(x) && finite(y) {
				p = append(p, point{x, y})
				xlo, xhi, ylo, yhi = min(xlo, x), max(xhi, x), min(ylo, y), max(yhi, y)
			}
		}
		if len(p) > 0 {
			drawn, pts = append(drawn, i), append(pts, p)
			legendW = max(legendW, 40+textWidth(s.name))
		}
	}
	xa, ya := newAxis(xlo, xhi), newAxis(ylo, max(yhi, ylo))
	const x0, y0, h = 70.0, 40.0, 400.0
	x1, y1 := x0+560, h-56
	c := newCanvas(x1+20+legendW, h, ch.title)
	for _, t := range ya.ticks() {
		y := ya.at(t, y1, y0)
		c.line(x0, y, x1, y, gridAttrs)
		c.line(x0-5, y, x0, y, `stroke="#000000"`)
		c.text(x0-8, y+4, "end", "", ya.label(t))
	}
	c.line(x0, y0, x0, y1, `stroke="#000000"`)
	c.text(16, (y0+y1)/2, "middle", fmt.Sprintf(`transform="rotate(-90 16 %.1f)"`, (y0+y1)/2), ch.yLabel)
	c.xAxis(xa, x0, x1, y0, y1, ch.xLabel)
	if len(drawn) == 0 {
		c.text((x0+x1)/2, (y0+y1)/2, "middle", `fill="#777777"`, "no data")
	}
	for k, i := range drawn {
		col := color(i)
		var d strings.Builder
		for j, p := range pts[k] {
			cmd := "L"
			if j == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, xa.at(p.x, x0, x1), ya.at(p.y, y1, y0))
		}
		fmt.Fprintf(c, `<path class="series" d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.TrimSpace(d.String()), col)
		for _, p := range pts[k] {
			fmt.Fprintf(c, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", xa.at(p.x, x0, x1), ya.at(p.y, y1, y0), col)
		}
		ly := y0 + 8 + 20*float64(k)
		c.line(x1+20, ly, x1+44, ly, fmt.Sprintf(`stroke="%s" stroke-width="2"`, col))
		c.text(x1+50, ly+4, "start", "", ch.series[i].name)
	}
	return c.finish()
}

// svg renders the chart.
func (ch barChart) svg() []byte {
	lo, hi := 0.0, 0.0
	labelW := 40.0
	for _, r := range ch.rows {
		labelW = max(labelW, 16+textWidth(r.label))
		for _, s := range r.spans {
			if finite(s.from) && finite(s.to) {
				lo, hi = min(lo, s.from, s.to), max(hi, s.from, s.to)
			}
		}
	}
	a := newAxis(lo, hi)
	rowH := 24.0
	if n := float64(len(ch.rows)); n > 24 {
		rowH = max(4, 576/n)
	}
	every := int(math.Ceil(14 / rowH)) // label every row that has room
	y0 := 40.0
	if len(ch.kinds) > 0 {
		y0 += 24
	}
	x0, x1 := labelW, 740.0
	if ch.values {
		x1 -= 60
	}
	y1 := y0 + rowH*float64(max(len(ch.rows), 1))
	c := newCanvas(760, y1+50, ch.title)
	x := x0
	for k, name := range ch.kinds {
		fmt.Fprintf(c, `<rect x="%.1f" y="%.1f" width="14" height="14" fill="%s"/>`+"\n", x, y0-32, color(k))
		c.text(x+20, y0-20, "start", "", name)
		x += 40 + textWidth(name)
	}
	c.xAxis(a, x0, x1, y0, y1, ch.xLabel)
	c.line(x0, y0, x0, y1, `stroke="#000000"`)
	if len(ch.rows) == 0 {
		c.text((x0+x1)/2, (y0+y1)/2+4, "middle", `fill="#777777"`, "no data")
	}
	for i, r := range ch.rows {
		top := y0 + rowH*float64(i)
		if i%every == 0 {
			c.text(x0-8, top+rowH/2+4, "end", "", r.label)
		}
		end, drew := 0.0, false
		for _, s := range r.spans {
			if !finite(s.from) || !finite(s.to) {
				continue
			}
			f, t := a.at(min(s.from, s.to), x0, x1), a.at(max(s.from, s.to), x0, x1)
			fmt.Fprintf(c, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">`,
				f, top+rowH*0.15, max(t-f, 1), rowH*0.7, color(s.kind))
			tip := value(s.from) + "–" + value(s.to)
			if s.kind >= 0 && s.kind < len(ch.kinds) {
				tip = ch.kinds[s.kind] + ": " + tip
			}
			c.WriteString("<title>")
			xml.EscapeText(c, []byte(r.label+", "+tip))
			c.WriteString("</title></rect>\n")
			end, drew = s.to, true
		}
		if ch.values && drew {
			c.text(a.at(max(end, 0), x0, x1)+6, top+rowH/2+4, "start", "", value(end))
		}
	}
	return c.finish()
}

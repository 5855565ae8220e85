package bench

import (
	"fmt"
	"time"

	"github.com/meridian-crawler/meridian/site"
)

// A growth run (ClusterConfig.Grow): a site crawling at its configuration's
// nodes is joined by Grow more, one after another as an operator adds
// machines (each joining once the one before it is up, without
// --expect-nodes), and websim's requests are counted in windows of
// GrowWindow from GrowWindow before the first join to GrowTail after the
// last; then the nodes are stopped. The figures: the rate before the
// first join, how long after it until a window's rate exceeds it, and the
// rates in the windows ending 60 s and GrowTail after the last join.

// Growth targets (issue 36): 60 s after the last join, ≥ 1.5× the rate
// before the first; GrowTail (3 min) after it, ≥ 1.8×.
const (
	growAt60Target   = 1.5
	growAtTailTarget = 1.8
)

// GrowthWindow is one window of a growth run.
type GrowthWindow struct {
	// FromS and ToS are from the first join (negative: before it).
	FromS       float64 `json:"from_s"`
	ToS         float64 `json:"to_s"`
	Pages       int64   `json:"pages"` // websim's requests in the window
	PagesPerSec float64 `json:"pages_per_sec"`
	Nodes       int     `json:"nodes"` // nodes up at its end
}

// GrowthResult is what a growth run measured.
type GrowthResult struct {
	From, To int // nodes before the first join and after the last
	// JoinsS: when each joining node was up (site.json), from the first
	// join's start; LastJoinS the last of them.
	JoinsS    []float64 `json:"joins_s"`
	LastJoinS float64   `json:"last_join_s"`
	// BaseRate is the rate in the window before the first join.
	BaseRate float64        `json:"base_pages_per_sec"`
	Windows  []GrowthWindow `json:"windows"`
	// ExceedS: from the first join to the end of the first window after it
	// whose rate is above BaseRate (-1: none).
	ExceedS float64 `json:"exceed_s"`
	// At60 and AtTail: the rates of the windows ending 60 s and GrowTail
	// after the last join, and their ratios to BaseRate (0: not measured).
	At60        float64 `json:"at_60s_pages_per_sec"`
	At60Ratio   float64 `json:"at_60s_ratio"`
	AtTail      float64 `json:"at_tail_pages_per_sec"`
	AtTailRatio float64 `json:"at_tail_ratio"`
	TailS       float64 `json:"tail_s"`
	Note        string  `json:"note,omitempty"`
}

// growth is a growth run's state inside a clusterRun.
type growth struct {
	joinStart  time.Time // the first join's start
	joining    *clusterNode
	joinedAt   []time.Time
	lastJoinAt time.Time
	points     []growPoint // websim's requests, every GrowWindow/6 or so
	lastPoint  time.Time
	done       bool
}

// growPoint is websim's request count at a time.
type growPoint struct {
	at    time.Time
	reqs  int64
	nodes int
}

// growStep advances the growth run at a sample; it returns true once the
// tail after the last join has passed (the nodes are then stopped).
func (r *clusterRun) growStep(now time.Time) bool {
	c, g := r.cfg, &r.grow
	if g.done {
		return true
	}
	every := max(c.GrowWindow/6, time.Second)
	if now.Sub(g.lastPoint) >= every {
		if n := r.websimRequests(); n >= 0 {
			g.points = append(g.points, growPoint{now, n, r.upNodes()})
			g.lastPoint = now
		}
	}
	if g.joinStart.IsZero() {
		if now.Sub(r.allUp) < c.GrowAfter {
			return false
		}
		g.joinStart = now
		c.Progress("growth: %d node(s) crawling for %v: %d more join one after another", r.n, c.GrowAfter, c.Grow)
	}
	if g.joining != nil {
		in, err := site.ReadInfo(g.joining.data)
		switch {
		case g.joining.done():
			c.Progress("growth: %s exited while joining: %s", g.joining.name, g.joining.proc.tail)
			g.done = true
			return true
		case err != nil || in.PID != g.joining.proc.pid:
			return false
		}
		g.joining.listen, g.joining.upAt = in.Listen, now
		g.joinedAt = append(g.joinedAt, now)
		c.Progress("growth: %s up %.1fs after the first join (%d nodes)", g.joining.name, now.Sub(g.joinStart).Seconds(), len(r.nodes))
		g.joining = nil
		if len(g.joinedAt) == c.Grow {
			g.lastJoinAt = now
		}
	}
	if len(g.joinedAt) < c.Grow {
		name := fmt.Sprintf("n%d", len(r.nodes)+1)
		nd, err := r.startNode(name, r.nodes[0])
		if err != nil {
			c.Progress("growth: start %s: %v", name, err)
			g.done = true
			return true
		}
		g.joining = nd
		return false
	}
	if now.Sub(g.lastJoinAt) >= c.GrowTail {
		g.done = true
		c.Progress("growth: %v after the last join: stopping the nodes", c.GrowTail)
		return true
	}
	return false
}

// upNodes counts the nodes up and running.
func (r *clusterRun) upNodes() int {
	n := 0
	for _, nd := range r.nodes {
		if !nd.upAt.IsZero() && !nd.done() {
			n++
		}
	}
	return n
}

// growthResult turns the growth run's points into its figures.
func (r *clusterRun) growthResult() *GrowthResult {
	c, g := r.cfg, &r.grow
	res := &GrowthResult{From: r.n, To: r.n + len(g.joinedAt), ExceedS: -1, TailS: c.GrowTail.Seconds()}
	if g.joinStart.IsZero() || len(g.points) < 2 {
		res.Note = "the run ended before the first join"
		return res
	}
	for _, at := range g.joinedAt {
		res.JoinsS = append(res.JoinsS, at.Sub(g.joinStart).Seconds())
	}
	if !g.lastJoinAt.IsZero() {
		res.LastJoinS = g.lastJoinAt.Sub(g.joinStart).Seconds()
	} else {
		res.Note = fmt.Sprintf("%d of %d nodes joined", len(g.joinedAt), c.Grow)
	}
	// Windows of GrowWindow, aligned on the first join: one before it,
	// then on until the last point.
	win := c.GrowWindow
	last := g.points[len(g.points)-1].at
	for from := g.joinStart.Add(-win); !from.Add(win).After(last.Add(time.Second)); from = from.Add(win) {
		w, ok := windowOf(g.points, from, from.Add(win))
		if !ok {
			continue
		}
		w.FromS, w.ToS = from.Sub(g.joinStart).Seconds(), from.Add(win).Sub(g.joinStart).Seconds()
		res.Windows = append(res.Windows, w)
	}
	if w, ok := windowOf(g.points, g.joinStart.Add(-win), g.joinStart); ok {
		res.BaseRate = w.PagesPerSec
	}
	for _, w := range res.Windows {
		if w.FromS >= 0 && res.BaseRate > 0 && w.PagesPerSec > res.BaseRate {
			res.ExceedS = w.ToS
			break
		}
	}
	if !g.lastJoinAt.IsZero() && res.BaseRate > 0 {
		if w, ok := windowOf(g.points, g.lastJoinAt.Add(60*time.Second-win), g.lastJoinAt.Add(60*time.Second)); ok {
			res.At60, res.At60Ratio = w.PagesPerSec, w.PagesPerSec/res.BaseRate
		}
		if w, ok := windowOf(g.points, g.lastJoinAt.Add(c.GrowTail-win), g.lastJoinAt.Add(c.GrowTail)); ok {
			res.AtTail, res.AtTailRatio = w.PagesPerSec, w.PagesPerSec/res.BaseRate
		}
	}
	return res
}

// windowOf is the rate between the points nearest from and to (the
// window's bounds as sampled: a point within a tenth of its length of
// each bound, else none).
func windowOf(pts []growPoint, from, to time.Time) (GrowthWindow, bool) {
	slack := to.Sub(from) / 10
	a, b := nearest(pts, from), nearest(pts, to)
	if a < 0 || b <= a || pts[a].at.Sub(from).Abs() > slack || pts[b].at.Sub(to).Abs() > slack {
		return GrowthWindow{}, false
	}
	d := pts[b].at.Sub(pts[a].at).Seconds()
	n := pts[b].reqs - pts[a].reqs
	return GrowthWindow{Pages: n, PagesPerSec: float64(n) / d, Nodes: pts[b].nodes}, true
}

// nearest is the index of the point nearest t (-1: none).
func nearest(pts []growPoint, t time.Time) int {
	best := -1
	for i, p := range pts {
		if best < 0 || p.at.Sub(t).Abs() < pts[best].at.Sub(t).Abs() {
			best = i
		}
	}
	return best
}

// growthTargets are a growth run's targets.
func growthTargets(g *GrowthResult, t map[string]ClusterTarget) {
	t["growth_at_60s"] = ClusterTarget{fmt.Sprintf("≥ %.2f", growAt60Target), g.At60Ratio, g.At60Ratio >= growAt60Target}
	t["growth_at_tail"] = ClusterTarget{fmt.Sprintf("≥ %.2f", growAtTailTarget), g.AtTailRatio, g.AtTailRatio >= growAtTailTarget}
}

// Package opic holds On-line Page Importance Computation (Abiteboul,
// Preda, Cobena: "Adaptive On-Line Page Importance Computation", WWW 2003)
// as pure functions: how a fetched page's cash is split over its outlinks,
// what the virtual page receives, and how a page's importance is read off its
// cash and history.
//
// The invariant the crawler keeps with them: cash is only ever moved, never
// created, except by seeds. The sum of every page's cash, the virtual page's
// cash and the shares in flight between a fetch and the update that credits
// them equals the cash that seeds injected. History grows by exactly the cash
// that fetches distributed, so a page's importance, (history + cash) over the
// total, never inflates the way a filter that credits without debiting does.
package opic

import "math"

// SeedCash is the cash each seed URL injects.
const SeedCash = 1.0

// Split divides the cash a fetched page distributes over its n outlinks.
// Each outlink receives share; with no outlinks (n <= 0) the whole cash goes
// to the virtual page, as the paper's virtual page makes the graph strongly
// connected. share*n + virtual equals cash up to rounding.
func Split(cash float64, n int) (share, virtual float64) {
	if n <= 0 || cash <= 0 {
		return 0, max(cash, 0)
	}
	return cash / float64(n), 0
}

// DefaultDamping is the share of a page's distributed cash that follows
// its outlinks, PageRank's usual damping factor.
const DefaultDamping = 0.85

// Damp divides the cash a page distributes into the share that follows its
// outlinks (d of it) and the share that goes to the virtual page. The virtual
// page spreads its cash over pages at large, as PageRank's random jump does:
// without it, cash that enters a group of pages linking only among
// themselves (most of a site) stays there, and a page's score says more
// about which site it is on than about its links. d is clamped to [0, 1];
// follow + virtual equals cash up to rounding.
func Damp(cash, d float64) (follow, virtual float64) {
	if cash <= 0 {
		return 0, 0
	}
	d = min(max(d, 0), 1)
	follow = cash * d
	return follow, cash - follow
}

// Spread divides the virtual page's cash evenly over n pages. With n <= 0
// nothing is spread and the virtual page keeps it all.
func Spread(virtual float64, n int) (each, kept float64) {
	if n <= 0 || virtual <= 0 {
		return 0, max(virtual, 0)
	}
	return virtual / float64(n), 0
}

// Importance is a page's importance estimate: its history plus its current
// cash, over the total history of the crawl. It is 0 while nothing has been
// distributed.
func Importance(history, cash, totalHistory float64) float64 {
	if totalHistory <= 0 {
		return 0
	}
	return (history + cash) / totalHistory
}

// Sum is a compensated (Neumaier) sum, so that checks of the cash invariant
// over millions of pages are not lost in rounding. The zero value is 0.
type Sum struct{ s, c float64 }

// Add adds x.
func (a *Sum) Add(x float64) {
	t := a.s + x
	if math.Abs(a.s) >= math.Abs(x) {
		a.c += (a.s - t) + x
	} else {
		a.c += (x - t) + a.s
	}
	a.s = t
}

// Value returns the sum.
func (a *Sum) Value() float64 { return a.s + a.c }

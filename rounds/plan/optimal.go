package plan

import (
	"math"
	"time"
)

// The optimal refetch schedule (Refetch.Optimal): Cho and Garcia-Molina,
// "Effective page refresh policies for Web crawlers", ACM TODS 2003.
//
// A page whose changes are a Poisson process of rate λ, refreshed every
// I = 1/f, is fresh a fraction F(λ, f) = (f/λ)(1 − e^(−λ/f)) of the time.
// With a budget of refreshes per unit time (Σ f_i = B), the allocation
// that maximises the total freshness has ∂F/∂f_i = μ for every page that
// is refreshed. With r = λ/f = λI, ∂F/∂f = g(r)/λ, where
//
//	g(r) = 1 − (1 + r)e^(−r)
//
// rises from 0 to 1 on r > 0. So a page gets the r that solves
// g(r) = μλ, and the interval I = r/λ; a page with μλ ≥ 1 changes too
// often to be worth refreshing and gets none (here: the longest interval).
// The interval is longest for the pages that change least and most often,
// and shortest in between: refreshing in proportion to λ is worse than a
// uniform schedule, and this is not that.

// EstimateRate is a page's estimated change rate, in changes per second,
// from its refetches: changed of the n = changed + unchanged refetches
// found a change, over watched, the total time between the fetches they
// compared. It is Cho and Garcia-Molina's estimator for changes seen at
// intervals (bias-reduced, with smoothing), X = changed, over the mean
// interval watched/n:
//
//	λ̂ = ln((n + 1) / (n − X + 0.5)) / (watched / n)
//
// A page never seen changed (X = 0) gets about 0.5 changes over the time
// watched, not 0; one seen changed every time (X = n) gets a finite rate,
// ln(2n + 2)·n/watched. ok is false, and λ̂ 0, when there is nothing to
// estimate from: no refetch (n = 0) or no time watched (watched ≤ 0).
func EstimateRate(changed, unchanged uint32, watched time.Duration) (lambda float64, ok bool) {
	n := float64(changed) + float64(unchanged)
	if n == 0 || watched <= 0 {
		return 0, false
	}
	x := float64(changed)
	return math.Log((n+1)/(n-x+0.5)) / (watched.Seconds() / n), true
}

// g is ∂F/∂f × λ at r = λ/f: 1 − (1 + r)e^(−r), from its series for a
// small r, where the closed form cancels.
func g(r float64) float64 {
	if r < 0.5 {
		// Σ_{k≥2} (−1)^k (k − 1) r^k / k!
		sum, term := 0.0, -r // term = (−r)^(k−1)/(k−1)!
		for k := 2; k < 30; k++ {
			term *= -r / float64(k)
			d := float64(k-1) * term
			sum += d
			if math.Abs(d) < 1e-18*math.Abs(sum) {
				break
			}
		}
		return sum
	}
	return 1 - (1+r)*math.Exp(-r)
}

// solveG returns the r > 0 with g(r) = y, for 0 < y < 1.
func solveG(y float64) float64 {
	// below reports whether g(r) < y. Near y = 1 it compares
	// ln(1 − g(r)) = ln(1 + r) − r with ln(1 − y), which keeps its
	// precision there.
	below := func(r float64) bool {
		if y <= 0.5 {
			return g(r) < y
		}
		return math.Log1p(r)-r > math.Log1p(-y)
	}
	// g(r) ≤ r²/2 (g′(r) = re^(−r) ≤ r), so r ≥ √(2y).
	lo := math.Sqrt(2 * y)
	hi := 2 * lo
	for below(hi) && hi < 1e6 {
		lo, hi = hi, 2*hi
	}
	for range 200 {
		if hi-lo <= 1e-15*hi {
			break
		}
		mid := math.Sqrt(lo * hi)
		if mid <= lo || mid >= hi {
			break
		}
		if below(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// OptimalInterval is the refetch interval of a page of change rate lambda
// (changes per second) under the optimal schedule of Lagrange multiplier
// mu (seconds; from RateHistogram.Mu): I = r/λ where g(r) = μλ, within
// [min, max]. A page with μλ ≥ 1 gets max (it changes too often to be
// worth refreshing), and so does one that never changes (λ = 0: its
// optimal interval is unbounded, as I ≈ √(2μ/λ) for a small λ). μ ≤ 0
// would be an unbounded budget: min. A NaN or negative rate is taken as 0.
func OptimalInterval(lambda, mu float64, min, max time.Duration) time.Duration {
	if !(lambda > 0) || math.IsInf(lambda, 1) {
		return max
	}
	if !(mu > 0) {
		return min
	}
	y := mu * lambda
	if y >= 1 {
		return max
	}
	ns := solveG(y) / lambda * 1e9
	switch {
	case !(ns < float64(max)):
		return max
	case ns <= float64(min):
		return min
	}
	return time.Duration(ns)
}

// NextOptimal is a page's next fetch and interval under the optimal
// schedule after a fetch at `at`: OptimalInterval(lambda, mu, Min, Max)
// for a page with an estimated change rate (EstimateRate's lambda, ok)
// when there is a multiplier (mu > 0: RateHistogram.Mu of the pages with
// an estimate); otherwise, as for a first fetch, the schedule's Interval.
// With refetch off it is (zero, 0): never.
func (r Refetch) NextOptimal(at time.Time, lambda float64, ok bool, mu float64) (time.Time, time.Duration) {
	if !r.On() {
		return time.Time{}, 0
	}
	next := r.Interval
	if ok && mu > 0 {
		next = OptimalInterval(lambda, mu, r.Min, r.Max)
	}
	return at.Add(next), next
}

// The bins of RateHistogram: RateBinsPerDecade log-spaced bins from
// MinBinnedRate to MaxBinnedRate changes per second (about 300 years to
// 1 second between changes), and a bin below and one above.
const (
	RateBinsPerDecade = 16
	MinBinnedRate     = 1e-10
	MaxBinnedRate     = 1.0
	rateBins          = 10 * RateBinsPerDecade // decades from MinBinnedRate to MaxBinnedRate
)

// RateHistogram counts pages by estimated change rate, in log-spaced bins,
// for the optimal schedule's multiplier (Mu). A bin keeps its pages' count
// and the sum of their rates: its pages stand for pages of the bin's mean
// rate (within the bin). Its zero value is empty and ready. It is not
// safe for concurrent use.
type RateHistogram struct {
	// Slot 0: rates under MinBinnedRate (0 included); 1 … rateBins: the
	// bins; rateBins+1: rates at or over MaxBinnedRate.
	count [rateBins + 2]uint64
	sum   [rateBins + 2]float64
}

// rateSlot is lambda's slot in RateHistogram (a NaN or negative rate is
// taken as 0).
func rateSlot(lambda float64) int {
	if !(lambda >= MinBinnedRate) {
		return 0
	}
	if lambda >= MaxBinnedRate {
		return rateBins + 1
	}
	i := 1 + min(max(int(math.Floor(math.Log10(lambda/MinBinnedRate)*RateBinsPerDecade)), 0), rateBins-1)
	// The logarithm may round across an edge: the bounds decide.
	if lo, hi := slotBounds(i); lambda < lo {
		i--
	} else if lambda >= hi {
		i++
	}
	return i
}

// slotBounds are the rates slot i holds, [lo, hi).
func slotBounds(i int) (lo, hi float64) {
	switch {
	case i <= 0:
		return 0, MinBinnedRate
	case i > rateBins:
		return MaxBinnedRate, math.Inf(1)
	}
	return MinBinnedRate * math.Pow(10, float64(i-1)/RateBinsPerDecade), MinBinnedRate * math.Pow(10, float64(i)/RateBinsPerDecade)
}

// Add counts a page of estimated change rate lambda (a NaN or negative
// rate counts as 0; an infinite one as MaxBinnedRate).
func (h *RateHistogram) Add(lambda float64) {
	i := rateSlot(lambda)
	h.count[i]++
	h.sum[i] += clampRate(lambda, i)
}

// Remove uncounts a page of estimated change rate lambda; a bin already
// empty stays empty.
func (h *RateHistogram) Remove(lambda float64) {
	i := rateSlot(lambda)
	switch h.count[i] {
	case 0:
		return
	case 1:
		h.count[i], h.sum[i] = 0, 0 // no rounding left behind
	default:
		h.count[i]--
		h.sum[i] = max(h.sum[i]-clampRate(lambda, i), 0)
	}
}

// clampRate is lambda within slot i's bounds.
func clampRate(lambda float64, i int) float64 {
	lo, hi := slotBounds(i)
	if !(lambda >= lo) {
		return lo
	}
	if lambda >= hi {
		return math.Nextafter(hi, lo)
	}
	return lambda
}

// Known is the number of pages counted.
func (h *RateHistogram) Known() uint64 {
	var n uint64
	for _, c := range h.count {
		n += c
	}
	return n
}

// refetchRate is the refetches per second of the pages counted with each
// given its OptimalInterval(λ, mu, min, max), λ its bin's mean rate.
func (h *RateHistogram) refetchRate(mu float64, min, max time.Duration) float64 {
	sum := 0.0
	for i, c := range h.count {
		if c > 0 {
			sum += float64(c) / OptimalInterval(clampRate(h.sum[i]/float64(c), i), mu, min, max).Seconds()
		}
	}
	return sum
}

// The range Mu searches, in seconds.
const (
	minMu = 1e-30
	maxMu = 1e30
)

// Mu is the optimal schedule's multiplier (seconds) for the pages counted
// at the budget of a fixed schedule of the given interval: the μ for
// which Σ_pages 1/OptimalInterval(λ, μ, min, max) = Known()/interval,
// each page's λ its bin's mean rate (exact for pages of one rate per bin;
// for rates spread within a bin near μλ = 1, where the interval rises
// steeply to max, an approximation). The pages with an estimate then use, in
// all, one refetch per interval each, as the fixed schedule would. It is
// found by bisection on ln μ (the sum falls as μ grows).
//
// Edge cases: an empty histogram, or an interval ≤ 0, gives 0, which
// NextOptimal takes as "no multiplier" (the fixed interval for every
// page). A budget the bounds cannot spend gives the end of the search
// range nearest to it: 1e-30 (every page at min, or max for λ = 0) when
// interval ≤ min, 1e30 (every page at max) when interval ≥ max.
func (h *RateHistogram) Mu(interval, min, max time.Duration) float64 {
	known := h.Known()
	if known == 0 || interval <= 0 {
		return 0
	}
	target := float64(known) / interval.Seconds()
	lo, hi := math.Log(minMu), math.Log(maxMu)
	const eps = 1e-12 // the sums' rounding
	if h.refetchRate(minMu, min, max) <= target*(1+eps) {
		return minMu
	}
	if h.refetchRate(maxMu, min, max) >= target*(1-eps) {
		return maxMu
	}
	for hi-lo > 1e-12 {
		mid := (lo + hi) / 2
		if h.refetchRate(math.Exp(mid), min, max) > target {
			lo = mid // too many refetches: a larger μ
		} else {
			hi = mid
		}
	}
	// The sum jumps where μλ crosses 1 for a bin's rate λ: just under,
	// its pages are refreshed every r/λ with r only logarithmically large
	// (g(r) = 1 − ε at r ≈ ln(1/ε)); at 1 and over, never (max). A budget
	// inside a jump cannot be met by one μ (the optimum would refresh a
	// part of that bin's pages): the side nearer the budget is taken.
	muLo, muHi := math.Exp(lo), math.Exp(hi)
	if math.Abs(h.refetchRate(muLo, min, max)-target) < math.Abs(h.refetchRate(muHi, min, max)-target) {
		return muLo
	}
	return muHi
}

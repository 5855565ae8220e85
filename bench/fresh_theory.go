package bench

import "math"

// The freshness of a collection under a refresh budget, from Cho and
// Garcia-Molina, "Effective page refresh policies for Web crawlers" (ACM
// TODS 2003). A page whose changes are a Poisson process of rate λ,
// refreshed every 1/f, is fresh (its copy is the live page) for a share
//
//	F(λ, f) = (f/λ)(1 − e^{−λ/f})
//
// of the time, and its age (the time since the live page first changed
// after the copy was taken, 0 while fresh) averages
//
//	A(λ, f) = 1/(2f) − 1/λ + (f/λ²)(1 − e^{−λ/f}).
//
// A page that never changes (λ = 0) is always fresh once fetched, and a
// page refreshed never (f = 0) but changing is never fresh in the long
// run. With a budget of B refreshes per page per unit of time, they
// compare three allocations: uniform (every page at f = B), proportional
// (f ∝ λ, worse than uniform) and the optimum, which maximises the mean
// freshness: every refreshed page has the same marginal gain ∂F/∂f = μ,
// i.e. g(λ/f) = μλ with g(r) = 1 − (1 + r)e^{−r}, and pages with μλ ≥ 1
// change too often to be worth refreshing at all.

// freshnessOf is F(λ, f) (rates per day).
func freshnessOf(lambda, f float64) float64 {
	switch {
	case lambda <= 0:
		return 1
	case f <= 0:
		return 0
	}
	r := lambda / f
	return -math.Expm1(-r) / r
}

// ageOf is A(λ, f) in days (rates per day); +Inf for a changing page
// never refreshed.
func ageOf(lambda, f float64) float64 {
	switch {
	case lambda <= 0:
		return 0
	case f <= 0:
		return math.Inf(1)
	}
	r := lambda / f
	if r < 1e-4 { // the series, where the closed form cancels
		return r / (6 * f) * (1 - r/4)
	}
	return 1/(2*f) - 1/lambda - f/(lambda*lambda)*math.Expm1(-r)
}

// marginal is g(r) = 1 − (1 + r)e^{−r}, increasing from 0 to 1.
func marginal(r float64) float64 {
	if r < 1e-4 {
		return r * r / 2 * (1 - 2*r/3)
	}
	return 1 - (1+r)*math.Exp(-r)
}

// optimalRate is the refresh frequency the optimum gives a page of rate
// λ at multiplier μ: λ/r with g(r) = μλ, or 0 if μλ ≥ 1.
func optimalRate(lambda, mu float64) float64 {
	if lambda <= 0 {
		return 0
	}
	target := mu * lambda
	if target >= 1 {
		return 0
	}
	if target <= 0 {
		return math.Inf(1)
	}
	lo, hi := 0.0, 1.0
	for marginal(hi) < target {
		hi *= 2
		if hi > 1e6 {
			return 0
		}
	}
	for range 100 {
		mid := (lo + hi) / 2
		if marginal(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lambda / ((lo + hi) / 2)
}

// Allocation is what a refresh allocation gives a collection: its mean
// freshness and age, at a budget.
type Allocation struct {
	Freshness float64 `json:"freshness"`
	AgeDays   float64 `json:"age_days"`
}

// allocations are the uniform, proportional and optimal allocations of
// budget refreshes per page per day over pages of change rates lambdas
// (per day).
type allocations struct {
	Uniform      Allocation `json:"uniform"`
	Proportional Allocation `json:"proportional"`
	Optimal      Allocation `json:"optimal"`
	// OptimalIgnored is the share of changing pages the optimum never
	// refreshes (they change too often to be worth it).
	OptimalIgnored float64 `json:"optimal_ignored"`
	// mu is the optimum's multiplier (days).
	mu float64
}

// allocate computes the three allocations.
func allocate(lambdas []float64, budget float64) allocations {
	var out allocations
	n := float64(len(lambdas))
	if n == 0 || budget <= 0 {
		return out
	}
	mean := func(f func(lambda float64) float64) Allocation {
		var fr, age float64
		for _, l := range lambdas {
			rate := f(l)
			fr += freshnessOf(l, rate)
			if a := ageOf(l, rate); !math.IsInf(a, 0) {
				age += a
			}
		}
		return Allocation{Freshness: fr / n, AgeDays: age / n}
	}
	out.Uniform = mean(func(float64) float64 { return budget })
	var sum float64
	for _, l := range lambdas {
		sum += l
	}
	if sum > 0 {
		out.Proportional = mean(func(l float64) float64 { return budget * n * l / sum })
	}
	// μ: the total of optimalRate falls as μ grows.
	total := func(mu float64) float64 {
		t := 0.0
		for _, l := range lambdas {
			t += optimalRate(l, mu)
		}
		return t
	}
	lo, hi := 1e-12, 1e12 // log-space bisection bounds on μ (days)
	for range 200 {
		mid := math.Sqrt(lo * hi)
		if total(mid) > budget*n {
			lo = mid
		} else {
			hi = mid
		}
	}
	mu := hi
	out.mu = mu
	out.Optimal = mean(func(l float64) float64 { return optimalRate(l, mu) })
	changing, ignored := 0, 0
	for _, l := range lambdas {
		if l > 0 {
			changing++
			if optimalRate(l, mu) == 0 {
				ignored++
			}
		}
	}
	if changing > 0 {
		out.OptimalIgnored = float64(ignored) / float64(changing)
	}
	return out
}

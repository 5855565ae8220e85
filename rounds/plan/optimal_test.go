package plan

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// gRef is g(r) = 1 − (1 + r)e^(−r) as written, for r where it does not
// cancel (the reference the tests check the solver against).
func gRef(r float64) float64 { return 1 - (1+r)*math.Exp(-r) }

func TestRefetchWithDefaultsOptimal(t *testing.T) {
	h := time.Hour
	for _, tc := range []struct {
		name string
		in   Refetch
		want Refetch
		err  bool
	}{
		{"default bounds", Refetch{Interval: h, Optimal: true}, Refetch{Interval: h, Optimal: true, Min: time.Minute, Max: 365 * 24 * h}, false},
		{"bounds given", Refetch{Interval: h, Optimal: true, Min: 2 * time.Minute, Max: 9 * h}, Refetch{Interval: h, Optimal: true, Min: 2 * time.Minute, Max: 9 * h}, false},
		{"with adaptive", Refetch{Interval: h, Optimal: true, Adaptive: true}, Refetch{}, true},
		{"without interval", Refetch{Optimal: true}, Refetch{}, true},
		{"interval above max", Refetch{Interval: 2 * h, Optimal: true, Max: h}, Refetch{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.WithDefaults()
			if tc.err != (err != nil) || !tc.err && got != tc.want {
				t.Fatalf("WithDefaults() = %+v, %v; want %+v (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestEstimateRate(t *testing.T) {
	h := time.Hour
	for _, tc := range []struct {
		name               string
		changed, unchanged uint32
		watched            time.Duration
		want               float64 // changes per second
		ok                 bool
	}{
		{"no refetch", 0, 0, h, 0, false},
		{"no time watched", 1, 2, 0, 0, false},
		{"negative time watched", 1, 2, -h, 0, false},
		// n = 4 over 4 h: mean interval 1 h.
		{"never changed", 0, 4, 4 * h, math.Log(5/4.5) / 3600, true},
		{"changed twice", 2, 2, 4 * h, math.Log(5/2.5) / 3600, true},
		{"always changed", 4, 0, 4 * h, math.Log(5/0.5) / 3600, true},
		{"once, changed", 1, 0, 10 * time.Second, math.Log(2/0.5) / 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := EstimateRate(tc.changed, tc.unchanged, tc.watched)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-12*tc.want {
				t.Fatalf("EstimateRate(%d, %d, %v) = %v, %v; want %v, %v", tc.changed, tc.unchanged, tc.watched, got, ok, tc.want, tc.ok)
			}
		})
	}
	// Never seen changed: about 0.5 changes over the time watched.
	if got, _ := EstimateRate(0, 1000, 1000*h); math.Abs(got*1000*3600-0.5) > 0.01 {
		t.Errorf("never changed in 1000 refetches: %v changes over the time watched, want about 0.5", got*1000*3600)
	}
	// Pages seen at intervals I with a Poisson rate λ: the estimate is
	// near λ (the naive X/watched would be under it: changes between two
	// fetches count once).
	r := rand.New(rand.NewPCG(1, 2))
	for _, lambdaI := range []float64{0.1, 0.5, 1, 2} {
		const n = 20000
		x := uint32(0)
		for range n {
			if r.Float64() < 1-math.Exp(-lambdaI) {
				x++
			}
		}
		got, _ := EstimateRate(x, n-x, n*h)
		if want := lambdaI / 3600; math.Abs(got-want) > 0.03*want {
			t.Errorf("λI = %v: estimate %v, want %v within 3%%", lambdaI, got*3600, lambdaI)
		}
	}
}

func TestG(t *testing.T) {
	for _, r := range []float64{1e-8, 1e-4, 0.01, 0.3, 0.4999, 0.5, 1, 3, 30} {
		// The series, to five terms, for a small r.
		want := r*r/2 - r*r*r/3 + r*r*r*r/8 - r*r*r*r*r/30 + math.Pow(r, 6)/144
		if r > 0.01 {
			want = gRef(r)
		}
		if got := g(r); math.Abs(got-want) > 1e-12*want {
			t.Errorf("g(%v) = %v, want %v", r, got, want)
		}
	}
}

func TestOptimalInterval(t *testing.T) {
	const (
		day  = 24 * time.Hour
		lo   = time.Minute
		hi   = 1000 * day
		huge = time.Duration(math.MaxInt64)
	)
	// The interval solves g(λI) = μλ.
	for _, tc := range []struct{ lambda, mu float64 }{
		{1.0 / 3600, 1800},      // μλ = 0.5
		{1.0 / 86400, 43200},    // 0.5
		{1e-6, 1e5},             // 0.1
		{1e-3, 10},              // 0.01
		{1.0 / 3600, 3599},      // close to 1
		{1.0 / 3600, 3600 * .9}, // 0.9
		{2e-5, 49999.99},        // 0.9999998
	} {
		iv := OptimalInterval(tc.lambda, tc.mu, 0, huge)
		if got, want := gRef(tc.lambda*iv.Seconds()), tc.mu*tc.lambda; math.Abs(got-want) > 1e-9 {
			t.Errorf("λ %v, μ %v: interval %v, g(λI) = %v, want μλ = %v", tc.lambda, tc.mu, iv, got, want)
		}
	}
	// μλ → 0: r → √(2μλ), I → √(2μ/λ).
	lambda, mu := 1e-3, 1e-9
	if got, want := OptimalInterval(lambda, mu, 0, huge).Seconds(), math.Sqrt(2*mu/lambda); math.Abs(got-want) > 1e-4*want {
		t.Errorf("μλ = 1e-12: interval %vs, want √(2μ/λ) = %vs", got, want)
	}
	for _, tc := range []struct {
		name       string
		lambda, mu float64
		want       time.Duration
	}{
		{"μλ = 1", 1e-4, 1e4, hi},
		{"μλ > 1", 1, 1e4, hi},
		{"never changes", 0, 1e4, hi},
		{"a NaN rate", math.NaN(), 1e4, hi},
		{"a negative rate", -1, 1e4, hi},
		{"an infinite rate", math.Inf(1), 1e4, hi},
		{"μ = 0", 1e-4, 0, lo},
		{"a NaN μ", 1e-4, math.NaN(), lo},
		{"under the floor", 1e-4, 1e-3, lo},
		{"over the ceiling", 1e-12, 1e6, hi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OptimalInterval(tc.lambda, tc.mu, lo, hi); got != tc.want {
				t.Fatalf("OptimalInterval(%v, %v) = %v, want %v", tc.lambda, tc.mu, got, tc.want)
			}
		})
	}
	// Not proportional: at one μ, the interval falls and then rises with λ.
	mu = 3 * 86400.0
	var ivs []time.Duration
	for _, l := range []float64{1e-8, 1e-7, 1e-6, 1e-5, 3e-6 * 3} {
		ivs = append(ivs, OptimalInterval(l, mu, lo, hi))
	}
	if !(ivs[0] > ivs[1] && ivs[1] > ivs[2] && ivs[3] > ivs[2]) {
		t.Errorf("intervals over λ 1e-8 … 1e-5 at μ = 3 days: %v; want falling then rising", ivs)
	}
}

func TestRefetchNextOptimal(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	h := time.Hour
	r, err := Refetch{Interval: 10 * h, Optimal: true, Min: h, Max: 100 * h}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	lambda, mu := 1.0/(20*3600), 10*3600.0 // μλ = 0.5
	want := OptimalInterval(lambda, mu, h, 100*h)
	for _, tc := range []struct {
		name   string
		r      Refetch
		lambda float64
		ok     bool
		mu     float64
		want   time.Duration
	}{
		{"off", Refetch{}, lambda, true, mu, 0},
		{"an estimate", r, lambda, true, mu, want},
		{"no estimate", r, 0, false, mu, 10 * h},
		{"no multiplier", r, lambda, true, 0, 10 * h},
		{"too fast to follow", r, 1, true, mu, 100 * h},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, iv := tc.r.NextOptimal(at, tc.lambda, tc.ok, tc.mu)
			if iv != tc.want || tc.want == 0 && !next.IsZero() || tc.want > 0 && !next.Equal(at.Add(tc.want)) {
				t.Fatalf("NextOptimal = %v, %v; want interval %v", next, iv, tc.want)
			}
		})
	}
	if _, iv := r.Next(at, 50*h, Changed); iv != r.Interval {
		t.Errorf("Next of the optimal schedule: %v, want its interval %v", iv, r.Interval)
	}
}

func TestRateHistogram(t *testing.T) {
	var h RateHistogram
	h.Add(1e-5)
	h.Add(1.1e-5)
	h.Add(0)
	h.Add(5)
	h.Add(math.NaN())
	below, above, b := 0, rateBins+1, rateSlot(1e-5)
	if h.Known() != 5 || h.count[below] != 2 || h.count[above] != 1 || h.count[b] != 2 || math.Abs(h.sum[b]-2.1e-5) > 1e-18 {
		t.Fatalf("after 5 adds: known %d, below %d, above %d, bin of 1e-5 %d (sum %v)", h.Known(), h.count[below], h.count[above], h.count[b], h.sum[b])
	}
	h.Remove(1e-5)
	h.Remove(2e-3) // never added: stays empty
	h.Remove(0)
	h.Remove(0)
	h.Remove(0)
	if h.Known() != 2 || h.count[below] != 0 || h.count[rateSlot(2e-3)] != 0 || math.Abs(h.sum[b]-1.1e-5) > 1e-18 {
		t.Fatalf("after the removes: known %d, below %d, bin of 1e-5 sum %v", h.Known(), h.count[below], h.sum[b])
	}
	// The slots tile the rates.
	for i := range rateBins + 2 {
		lo, hi := slotBounds(i)
		if rateSlot(lo) != i || rateSlot(math.Nextafter(hi, 0)) != i {
			t.Fatalf("slot %d [%v, %v): its ends are in slots %d and %d", i, lo, hi, rateSlot(lo), rateSlot(math.Nextafter(hi, 0)))
		}
	}
	var empty RateHistogram
	if mu := empty.Mu(time.Hour, time.Minute, 1000*time.Hour); mu != 0 {
		t.Fatalf("Mu of an empty histogram = %v, want 0", mu)
	}
}

// TestRateHistogramBudget: the multiplier spends the fixed schedule's
// budget (one refetch per interval per page) over a population of pages
// of a few rates; a page too fast to follow gets the ceiling; more budget
// gives a smaller multiplier.
func TestRateHistogramBudget(t *testing.T) {
	const (
		day = 24 * time.Hour
		lo  = time.Minute
		hi  = 365 * day
	)
	r := rand.New(rand.NewPCG(3, 4))
	// Mean times between changes: an hour, a day, a week, a month, a
	// year; and a few that never change.
	means := []time.Duration{time.Hour, day, 7 * day, 30 * day, 365 * day}
	var h RateHistogram
	var pages []float64
	for range 10000 {
		lambda := 0.0
		if r.IntN(20) > 0 {
			lambda = 1 / means[r.IntN(len(means))].Seconds()
		}
		h.Add(lambda)
		pages = append(pages, lambda)
	}
	var prev float64
	// The intervals' budgets are not at a jump of the sum (where μλ
	// crosses 1 for one of the rates: see Mu).
	for i, interval := range []time.Duration{3 * day, 20 * time.Hour, 6 * time.Hour} {
		mu := h.Mu(interval, lo, hi)
		if !(mu > 0) {
			t.Fatalf("interval %v: μ %v", interval, mu)
		}
		// The budget, over the pages' own rates (not their bins').
		var rate float64
		for _, l := range pages {
			rate += 1 / OptimalInterval(l, mu, lo, hi).Seconds()
		}
		want := float64(len(pages)) / interval.Seconds()
		if math.Abs(rate-want) > 0.01*want {
			t.Errorf("interval %v: μ %v spends %v refetches/s, want %v within 1%%", interval, mu, rate, want)
		}
		// Over the bins, to the bisection's precision.
		if got := h.refetchRate(mu, lo, hi); math.Abs(got-want) > 1e-6*want {
			t.Errorf("interval %v: the bins spend %v refetches/s, want %v", interval, got, want)
		}
		if i > 0 && !(mu < prev) {
			t.Errorf("interval %v: μ %v, not under μ %v of the longer interval", interval, mu, prev)
		}
		prev = mu
		// Too fast to follow: the ceiling.
		if got := OptimalInterval(2/mu, mu, lo, hi); got != hi {
			t.Errorf("interval %v: a page with μλ = 2 gets %v, want %v", interval, got, hi)
		}
	}
	// Rates spread log-uniformly from an hour to a year between changes:
	// the bins' means stand for them within 1%.
	var spread RateHistogram
	pages = pages[:0]
	for range 10000 {
		lambda := 1 / (time.Hour.Seconds() * math.Pow(365*24, r.Float64()))
		spread.Add(lambda)
		pages = append(pages, lambda)
	}
	for _, interval := range []time.Duration{7 * day, day, time.Hour} {
		mu := spread.Mu(interval, lo, hi)
		var rate float64
		for _, l := range pages {
			rate += 1 / OptimalInterval(l, mu, lo, hi).Seconds()
		}
		if want := float64(len(pages)) / interval.Seconds(); math.Abs(rate-want) > 0.01*want {
			t.Errorf("spread rates, interval %v: μ %v spends %v refetches/s, want %v within 1%%", interval, mu, rate, want)
		}
	}
	// A budget the bounds cannot spend: the ends of the range.
	if mu := h.Mu(lo, lo, hi); mu != minMu {
		t.Errorf("interval = min: μ %v, want %v", mu, minMu)
	}
	if mu := h.Mu(hi, lo, hi); mu != maxMu {
		t.Errorf("interval = max: μ %v, want %v", mu, maxMu)
	}
}

func BenchmarkRateHistogramMu(b *testing.B) {
	var h RateHistogram
	for i := range rateBins + 2 {
		lo, _ := slotBounds(i)
		h.Add(lo * 1.01)
	}
	for b.Loop() {
		h.Mu(24*time.Hour, time.Minute, 365*24*time.Hour)
	}
}

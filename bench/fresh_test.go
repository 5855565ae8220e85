package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestFreshnessFormulas checks F and A against their definitions, by
// simulating a page's changes at fixed refreshes, and the allocations'
// order: optimum ≥ uniform ≥ proportional (Cho and Garcia-Molina 2003).
func TestFreshnessFormulas(t *testing.T) {
	for _, tc := range []struct{ lambda, f float64 }{{1, 1}, {0.1, 1}, {5, 1}, {2, 0.5}, {1e-6, 1}} {
		// Expected freshness and age over one interval of length 1/f,
		// numerically: a change by time s has probability 1 − e^{−λs}.
		i := 1 / tc.f
		const steps = 100_000
		var fr, age float64
		for k := range steps {
			s := (float64(k) + 0.5) * i / steps
			fr += math.Exp(-tc.lambda * s)
			// E[age at s] = ∫_0^s P(first change at u) (s − u) du = s − (1 − e^{−λs})/λ.
			age += s + math.Expm1(-tc.lambda*s)/tc.lambda
		}
		fr, age = fr/steps, age/steps
		if got := freshnessOf(tc.lambda, tc.f); math.Abs(got-fr) > 1e-6 {
			t.Errorf("F(%v, %v) = %v, numerically %v", tc.lambda, tc.f, got, fr)
		}
		if got := ageOf(tc.lambda, tc.f); math.Abs(got-age) > 1e-6*max(1, age) {
			t.Errorf("A(%v, %v) = %v, numerically %v", tc.lambda, tc.f, got, age)
		}
	}
	if freshnessOf(0, 0) != 1 || freshnessOf(1, 0) != 0 || ageOf(0, 1) != 0 || !math.IsInf(ageOf(1, 0), 1) {
		t.Error("limits of F and A")
	}
	lambdas := []float64{0, 0, 0, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 24}
	for _, budget := range []float64{0.1, 0.5, 2} {
		a := allocate(lambdas, budget)
		if !(a.Optimal.Freshness >= a.Uniform.Freshness-1e-9 && a.Uniform.Freshness > a.Proportional.Freshness) {
			t.Errorf("budget %v: optimum %.4f, uniform %.4f, proportional %.4f", budget, a.Optimal.Freshness, a.Uniform.Freshness, a.Proportional.Freshness)
		}
		// The optimum spends the budget.
		mu := 0.0
		var total float64
		for lo, hi := 1e-12, 1e12; hi/lo > 1+1e-12; {
			mu = math.Sqrt(lo * hi)
			total = 0
			for _, l := range lambdas {
				total += optimalRate(l, mu)
			}
			if total > budget*float64(len(lambdas)) {
				lo = mu
			} else {
				hi = mu
			}
		}
		if math.Abs(total-budget*float64(len(lambdas))) > 1e-6*budget*float64(len(lambdas)) {
			t.Errorf("budget %v: the optimum spends %v", budget, total)
		}
	}
	if a := allocate(lambdas, 0.1); a.OptimalIgnored == 0 {
		t.Error("a tight budget should leave the fastest pages alone")
	}
	// g(λ/f) = μλ at the optimal rate.
	for _, l := range []float64{0.01, 0.5, 3} {
		mu := 0.5 / (l + 0.1)
		if f := optimalRate(l, mu); f <= 0 || math.Abs(marginal(l/f)-mu*l) > 1e-9 {
			t.Errorf("optimalRate(%v, %v) = %v: g = %v, want %v", l, mu, f, marginal(l/f), mu*l)
		}
	}
}

// TestFreshWindow checks a page's fresh time and age over a window against
// a second-by-second count from websim's schedule.
func TestFreshWindow(t *testing.T) {
	web, err := synth.New(synth.Options{Hosts: 40, Pages: 5, Seed: 3, Changes: true, Epoch: synth.DefaultEpoch})
	if err != nil {
		t.Fatal(err)
	}
	var p *freshPage
	for h, host := range web.Hosts() {
		for n := range host.Pages {
			if l := web.ChangeRate(h, n); l > 2 && l < 10 {
				p = &freshPage{h: h, n: n, lambda: l}
				break
			}
		}
		if p != nil {
			break
		}
	}
	if p == nil {
		t.Fatal("no page changing 2-10 times a day")
	}
	epoch := synth.DefaultEpoch.Unix()
	day := int64(86400)
	p.syncs = []int64{epoch + day/2, epoch + day, epoch + day + 3600, epoch + 2*day}
	w0, w1 := epoch+day*3/4, epoch+3*day
	fresh, age := p.window(web, epoch, w0, w1)
	var wantFresh, wantAge float64
	for s := w0; s < w1; s += 60 { // a minute a step, the middle of it
		m := s + 30
		last := int64(-1)
		for _, y := range p.syncs {
			if y <= m {
				last = y
			}
		}
		if last < 0 {
			t.Fatal("window starts before the first sync")
		}
		v := web.Version(p.h, p.n, time.Unix(last, 0))
		if web.Version(p.h, p.n, time.Unix(m, 0)) == v {
			wantFresh += 60
			continue
		}
		ct, _ := web.ChangeTime(p.h, p.n, v+1)
		wantAge += 60 * float64(m-ct.Unix())
	}
	if math.Abs(fresh-wantFresh) > 120 || math.Abs(age-wantAge) > 0.01*wantAge+1e5 {
		t.Errorf("fresh %v s, age %v s²; counted %v s and %v s²", fresh, age, wantFresh, wantAge)
	}
	if fresh <= 0 || fresh >= float64(w1-w0) {
		t.Errorf("fresh %v s of %v: the test's page should be fresh some of the time", fresh, w1-w0)
	}
}

// TestFreshReport: the report compares each run with a fixed interval at
// its own budget, and the optimal run with the fixed run at its budget.
func TestFreshReport(t *testing.T) {
	lambdas := []float64{0, 0.01, 0.1, 1, 10}
	run := func(name string, fresh, budget float64) FreshRun {
		r := FreshRun{Schedule: name, Freshness: fresh, Budget: budget, Theory: allocate(lambdas, budget), Classes: freshClasses()}
		for i := range r.Classes {
			r.Classes[i].Pages = 1
		}
		return r
	}
	res := FreshResult{Pages: 5, Static: 1, WindowDays: 12, Runs: []FreshRun{run("fixed", 0.70, 0.5), run("fixed:40h", 0.72, 0.6), run("optimal", 0.75, 0.6)}}
	out := res.Report()
	for _, want := range []string{"optimal against the fixed run: freshness 0.750 vs 0.720 (+4.2%)", "fixed:40h      ", "requests a page a day (freshness) by true change interval"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

package rounds

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/rounds/plan"
)

// TestScheduleOptimal: under the optimal schedule the update gives a
// refetched page the interval of its estimated change rate (its counters
// and time watched, with this fetch) at the multiplier of the leader's
// rate histogram, rebuilt from the scheduled pages; the page's estimate
// joins the histogram once, however often the update is prepared; a
// first fetch, or a crawler that does not lead, gets the interval. Every
// schedule carries the time watched, in every mode.
func TestScheduleOptimal(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	h := time.Hour
	apply := func(build func(b *store.Batch)) {
		t.Helper()
		b := store.NewBatch()
		build(b)
		if _, err := db.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// Pages fetched at t0 and again an hour later, with the change each
	// found; u is due again and generated in round 5, v is new in it.
	const u, v = "http://a.test/u", "http://a.test/v"
	pages := map[string]store.Change{"http://a.test/p1": store.ChangeChanged, "http://a.test/p2": store.ChangeUnchanged, "http://a.test/p3": store.ChangeUnchanged, u: store.ChangeUnchanged}
	for p, ch := range pages {
		apply(func(b *store.Batch) {
			b.UpsertCash(p, 1, 0)
			b.MarkGenerated(p, 1)
			b.RecordRoundFetch(store.FetchResult{URL: p, Status: store.StatusFetched, At: t0, Round: 1, Spend: 0.5,
				Schedule: &store.Schedule{NextFetch: t0.Add(h), Interval: h}})
			b.MakeDue(p, t0.Add(h), 1)
			b.MarkGenerated(p, 2)
			b.RecordRoundFetch(store.FetchResult{URL: p, Status: store.StatusFetched, At: t0.Add(h), Round: 2, Spend: 0.5,
				Schedule: &store.Schedule{NextFetch: t0.Add(2 * h), Interval: h, Change: ch, Watched: h}})
		})
	}
	apply(func(b *store.Batch) {
		b.MakeDue(u, t0.Add(2*h), 1)
		b.MarkGenerated(u, 5)
		b.UpsertCash(v, 1, 0)
		b.MarkGenerated(v, 5)
	})

	optimal := plan.Refetch{Interval: 2 * h, Optimal: true, Min: time.Minute, Max: 1000 * h}
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	c := &Crawler{o: Options{Refetch: optimal}, st: db.Store(), log: log}
	c.state.Next = 6
	c.lead = &leader{c: c}

	// The histogram the leader should rebuild (u is generated, not in the
	// refetch index), and u's estimate: changed once and unchanged once
	// over an hour and then two.
	var want plan.RateHistogram
	for p, ch := range pages {
		if p == u {
			continue
		}
		want.Add(map[bool]float64{true: must(plan.EstimateRate(1, 0, h)), false: must(plan.EstimateRate(0, 1, h))}[ch == store.ChangeChanged])
	}
	mu := want.Mu(optimal.Interval, optimal.Min, optimal.Max)
	lambdaU := must(plan.EstimateRate(1, 1, 3*h))
	wantU := plan.OptimalInterval(lambdaU, mu, optimal.Min, optimal.Max)
	if wantU == optimal.Interval || wantU == optimal.Min || wantU == optimal.Max {
		t.Fatalf("the test's page gets %v: pick rates that tell the schedules apart", wantU)
	}
	want.Add(lambdaU) // u's old estimate is not removed: its round was generated before the rebuild
	at := t0.Add(3 * h)
	for i := range 2 { // the update prepared twice
		op := store.FetchResult{URL: u, Status: store.StatusFetched, At: at, Round: 5, Schedule: &store.Schedule{Change: store.ChangeChanged}}
		if err := c.schedule(&op); err != nil {
			t.Fatal(err)
		}
		if sc := op.Schedule; sc == nil || sc.Interval != wantU || !sc.NextFetch.Equal(at.Add(wantU)) || sc.Watched != 3*h {
			t.Fatalf("preparation %d: schedule %+v, want interval %v and 3h watched", i+1, sc, wantU)
		}
		if got := c.lead.rates.hist; got != want || c.lead.rates.mult != mu {
			t.Fatalf("preparation %d: histogram of %d pages, μ %v; want %d pages, μ %v", i+1, got.Known(), c.lead.rates.mult, want.Known(), mu)
		}
	}
	first := store.FetchResult{URL: v, Status: store.StatusFetched, At: at, Round: 5, Schedule: &store.Schedule{}}
	if err := c.schedule(&first); err != nil {
		t.Fatal(err)
	}
	if sc := first.Schedule; sc.Interval != optimal.Interval || sc.Watched != 0 || c.lead.rates.hist != want {
		t.Fatalf("a first fetch: schedule %+v, want the interval and nothing watched or counted", sc)
	}

	for _, tc := range []struct {
		name string
		c    *Crawler
		want time.Duration
	}{
		{"optimal, not leading", &Crawler{o: Options{Refetch: optimal}, st: db.Store(), log: log}, optimal.Interval},
		{"fixed", &Crawler{o: Options{Refetch: plan.Refetch{Interval: 5 * h}}, st: db.Store(), log: log}, 5 * h},
	} {
		op := store.FetchResult{URL: u, Status: store.StatusFetched, At: at, Round: 5, Schedule: &store.Schedule{Change: store.ChangeUnchanged}}
		if err := tc.c.schedule(&op); err != nil {
			t.Fatal(err)
		}
		if sc := op.Schedule; sc.Interval != tc.want || sc.Watched != 3*h {
			t.Errorf("%s: schedule %+v, want interval %v and 3h watched", tc.name, sc, tc.want)
		}
	}
}

func must(lambda float64, ok bool) float64 {
	if !ok {
		panic("no estimate")
	}
	return lambda
}

// testWriter routes a logger to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

package rounds

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestStageBatchSchedule: a staged batch without refetch data is encoded
// as before refetch existed (version 1, byte for byte); one whose fetch
// results carry a schedule's part, or whose counters count refetches, in
// version 2; all decode back, and a batch cut anywhere does not.
func TestStageBatchSchedule(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000).UTC()
	plain := stageBatch{Ops: []store.FetchResult{{URL: "http://a.test/", Status: store.StatusFetched, HTTPStatus: 200, At: at, ContentFP: 5, Spend: 0.5}},
		Requeues: []string{"http://a.test/r"}, Credits: []target{{url: "http://a.test/c", credit: credit{cash: 0.25, depth: 2}}}, Virtual: 0.125,
		Stats: stageStats{Fetched: 1, Retries: 2, Bytes: 300, Links: 4, Wait: 5, Class: [6]int64{0, 0, 1}, Status: [16]int64{0, 0, 1},
			Troubled: map[string]*HostFate{"b.test": {Retries: 2}}}}
	// plain as the encoder wrote it before refetch existed.
	const plainV1 = "5301010e687474703a2f2f612e746573742f0300c80180a0abfef96200000000000000053fe0000000000000010f687474703a2f2f612e746573742f72" +
		"00010f687474703a2f2f612e746573742f633fd0000000000000023fc0000000000000000001020000ac02040500000100000000000100000000000000000000000000" +
		"187b22622e74657374223a7b2272657472696573223a327d7d"
	if got := hex.EncodeToString(plain.encode()); got != plainV1 {
		t.Errorf("a batch without refetch data encodes as\n%s\nwant, as before refetch existed,\n%s", got, plainV1)
	}
	sched := plain
	sched.Ops = []store.FetchResult{
		plain.Ops[0],
		{URL: "http://a.test/b", Status: store.StatusFetched, HTTPStatus: 304, At: at, ContentFP: 6,
			Schedule: &store.Schedule{ETag: `"v2"`, LastModified: "Tue, 14 Nov 2023 22:13:20 GMT", Change: store.ChangeUnchanged}},
	}
	sched.Stats.Refetches, sched.Stats.NotModified = 1, 1
	// Counters of refetches, but no op with a schedule (say, the results
	// were all errors).
	counted := plain
	counted.Stats.Refetches, counted.Stats.NotModified, counted.Stats.Unchanged, counted.Stats.Changed = 300, 7, 200, 93
	// Near-duplicates (version 3), with a schedule.
	near := sched
	near.NearDups = []nearDupHint{{URL: "http://a.test/print", Of: "http://a.test/"}, {URL: "http://m.test/x", Of: "http://a.test/b"}}
	for _, tc := range []struct {
		name    string
		b       stageBatch
		version byte
	}{{"no refetch data", plain, stageVersion}, {"a schedule", sched, stageVersion2}, {"refetch counters only", counted, stageVersion2},
		{"near-duplicates", near, stageVersion3}} {
		enc := tc.b.encode()
		if enc[1] != tc.version {
			t.Errorf("%s: version %d, want %d", tc.name, enc[1], tc.version)
		}
		got, err := decodeStage(enc, 3)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(got.Ops) != len(tc.b.Ops) {
			t.Fatalf("%s: %d ops, want %d", tc.name, len(got.Ops), len(tc.b.Ops))
		}
		for i, op := range got.Ops {
			want := tc.b.Ops[i]
			if op.URL != want.URL || op.Spend != want.Spend || (op.Schedule == nil) != (want.Schedule == nil) ||
				op.Schedule != nil && *op.Schedule != *want.Schedule {
				t.Errorf("%s: op %d = %+v (schedule %+v), want %+v", tc.name, i, op, op.Schedule, want)
			}
		}
		gs, ws := got.Stats, tc.b.Stats
		if gs.Refetches != ws.Refetches || gs.NotModified != ws.NotModified || gs.Unchanged != ws.Unchanged || gs.Changed != ws.Changed ||
			gs.Fetched != ws.Fetched || gs.Wait != ws.Wait || gs.Status != ws.Status || len(gs.Troubled) != len(ws.Troubled) {
			t.Errorf("%s: counters %+v, want %+v", tc.name, gs, ws)
		}
		if !slices.Equal(got.NearDups, tc.b.NearDups) {
			t.Errorf("%s: near-duplicates %v, want %v", tc.name, got.NearDups, tc.b.NearDups)
		}
		for n := range len(enc) {
			if _, err := decodeStage(enc[:n], 3); !errors.Is(err, errRecord) {
				t.Fatalf("%s: the batch cut to %d of %d bytes decoded (%v), want %v", tc.name, n, len(enc), err, errRecord)
			}
		}
	}
	// The round's sum, and its statistics.
	var sum stageStats
	sum.add(&sched.Stats)
	sum.add(&counted.Stats)
	var st RoundStats
	sum.fill(&st)
	if st.Refetches != 301 || st.NotModified != 8 || st.Unchanged != 200 || st.Changed != 93 {
		t.Errorf("round statistics: %d refetches, %d not modified, %d unchanged, %d changed; want 301, 8, 200, 93",
			st.Refetches, st.NotModified, st.Unchanged, st.Changed)
	}
	var none RoundStats
	plain.Stats.fill(&none)
	if b, _ := json.Marshal(none); bytes.Contains(b, []byte("refetches")) || bytes.Contains(b, []byte("changed")) {
		t.Errorf("a round without refetches writes %s", b)
	}
}

// TestMapRefetch: with refetch on, a fetched page's op carries what its
// schedule needs (validators, and what the fetch found against the
// previous one); a 304 spends none of its cash and gives none away; with
// refetch off nothing changes. The round's counters count each final
// refetch result as not modified (304), unchanged (same fingerprint) or
// changed; a retry is not counted yet.
func TestMapRefetch(t *testing.T) {
	prev := fetcher.Prev{FetchedAt: time.UnixMilli(1_700_000_000_000).UTC(), ContentFP: 9, ETag: `"v1"`}
	page := func(url string, mod func(r *fetcher.Result)) *fetcher.Result {
		r := &fetcher.Result{Job: fetcher.Job{URL: url, Host: "a.test", Round: 1, Cash: 1}, Status: store.StatusFetched, HTTPStatus: 200,
			ContentFP: 9, FetchedAt: time.UnixMilli(1_700_000_100_000).UTC(), ETag: `"v1"`, Links: []string{"http://a.test/x", "http://a.test/y"}}
		mod(r)
		return r
	}
	results := []*fetcher.Result{
		page("http://a.test/first", func(r *fetcher.Result) {}),
		page("http://a.test/changed", func(r *fetcher.Result) { r.Prev, r.ContentFP, r.ETag = prev, 10, `"v2"` }),
		page("http://a.test/same", func(r *fetcher.Result) { r.Prev, r.Unchanged = prev, true }),
		page("http://a.test/304", func(r *fetcher.Result) { r.Prev, r.NotModified, r.HTTPStatus, r.Links = prev, true, 304, nil }),
	}
	wantChange := map[string]store.Change{"http://a.test/first": store.ChangeNone, "http://a.test/changed": store.ChangeChanged,
		"http://a.test/same": store.ChangeUnchanged, "http://a.test/304": store.ChangeUnchanged}
	for _, on := range []bool{false, true} {
		c := &Crawler{o: Options{Damping: 0.85, MaxDepth: 10}}
		if on {
			c.o.Refetch = plan.Refetch{Interval: time.Hour}
		}
		acc := newStageAcc()
		if err := c.mapResults(&nodePart{ref: partRef{round: 1}}, results, acc); err != nil {
			t.Fatal(err)
		}
		b := acc.batch()
		if len(b.Ops) != len(results) {
			t.Fatalf("refetch %v: %d ops, want %d", on, len(b.Ops), len(results))
		}
		for _, op := range b.Ops {
			switch {
			case !on && op.Schedule != nil:
				t.Errorf("refetch off: %s has a schedule %+v", op.URL, *op.Schedule)
			case on && (op.Schedule == nil || op.Schedule.Change != wantChange[op.URL]):
				t.Errorf("refetch on: %s has schedule %+v, want change %v", op.URL, op.Schedule, wantChange[op.URL])
			case on && op.URL == "http://a.test/changed" && op.Schedule.ETag != `"v2"`:
				t.Errorf("the changed page's schedule keeps ETag %q, want the new one", op.Schedule.ETag)
			}
			if want := map[bool]float64{true: 0, false: 1}[op.URL == "http://a.test/304"]; op.Spend != want {
				t.Errorf("refetch %v: %s spends %v, want %v", on, op.URL, op.Spend, want)
			}
		}
		// Three pages gave their cash to x and y; the 304 gave nothing.
		if got, want := acc.credits["http://a.test/x"].cash+acc.credits["http://a.test/y"].cash+acc.virtual.Value(), 3.0; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("refetch %v: %v cash given away, want %v (three pages of 1; the 304 keeps its own)", on, got, want)
		}
		// Three refetches (the first fetch is none): one of each kind.
		if st := b.Stats; st.Fetched != 4 || st.Refetches != 3 || st.NotModified != 1 || st.Unchanged != 1 || st.Changed != 1 {
			t.Errorf("refetch %v: %d fetched, %d refetches (%d not modified, %d unchanged, %d changed); want 4, 3 (1, 1, 1)",
				on, st.Fetched, st.Refetches, st.NotModified, st.Unchanged, st.Changed)
		}
	}
	// A refetch to be retried is not a final result: no refetch counted
	// yet, whatever it found; robots.txt is never a refetch.
	var st stageStats
	st.count(page("http://a.test/again", func(r *fetcher.Result) { r.Prev, r.Retry, r.Status, r.HTTPStatus = prev, true, store.StatusError, 503 }))
	st.count(page("http://a.test/robots.txt", func(r *fetcher.Result) { r.Prev, r.Kind, r.NotModified = prev, fetcher.KindRobots, true }))
	if st.Retries != 1 || st.Robots != 1 || st.refetched() {
		t.Errorf("a retry and a robots.txt: %+v, want one retry, one robots.txt and no refetch", st)
	}
}

// TestSchedule: the update's schedule of a fetched page counts from its
// fetch time with the interval its record holds: the schedule's interval
// for a first fetch, the adaptive one scaled by what the refetch found.
func TestSchedule(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	c := &Crawler{o: Options{Refetch: plan.Refetch{Interval: 10 * time.Hour, Adaptive: true, Min: time.Hour, Max: 100 * time.Hour}}, st: db.Store()}
	const u = "http://a.test/p"
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	b := store.NewBatch()
	b.UpsertCash(u, 1, 0)
	b.MarkGenerated(u, 1)
	b.RecordRoundFetch(store.FetchResult{URL: u, Status: store.StatusFetched, At: at, Round: 1, Spend: 1,
		Schedule: &store.Schedule{NextFetch: at.Add(20 * time.Hour), Interval: 20 * time.Hour}})
	if _, err := db.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		url    string
		change store.Change
		want   time.Duration
	}{
		{"a first fetch", "http://a.test/new", store.ChangeNone, 10 * time.Hour},
		{"changed", u, store.ChangeChanged, 16 * time.Hour},
		{"unchanged", u, store.ChangeUnchanged, 28 * time.Hour},
	} {
		op := store.FetchResult{URL: tc.url, Status: store.StatusFetched, At: at.Add(time.Hour), Schedule: &store.Schedule{ETag: `"e"`, Change: tc.change}}
		if err := c.schedule(&op); err != nil {
			t.Fatal(err)
		}
		if sc := op.Schedule; sc == nil || sc.Interval != tc.want || !sc.NextFetch.Equal(at.Add(time.Hour+tc.want)) || sc.ETag != `"e"` {
			t.Errorf("%s: schedule %+v, want interval %v from the fetch", tc.name, sc, tc.want)
		}
	}
	retry := store.FetchResult{URL: u, Retry: true, Schedule: &store.Schedule{}}
	if err := c.schedule(&retry); err != nil || retry.Schedule != nil {
		t.Errorf("a retry keeps schedule %+v (%v), want none", retry.Schedule, err)
	}
}

// refetchCrawl crawls a changing websim of web (a simulated day a second)
// with the crawler options o for rounds rounds, and returns the test
// site (its crawler and database are closed by the test's cleanup).
func refetchCrawl(t *testing.T, web synth.Options, o Options, rounds int) *testSite {
	t.Helper()
	return refetchCrawlTTL(t, web, o, rounds, 0)
}

// refetchCrawlTTL is refetchCrawl with the fetcher's RobotsTTL (0: its
// default): robots.txt, and the sitemaps it names, are read again that
// often.
func refetchCrawlTTL(t *testing.T, web synth.Options, o Options, rounds int, robotsTTL time.Duration) *testSite {
	t.Helper()
	web.Changes = true
	sim, err := websim.Start(websim.Options{Web: web, TimeScale: 86400, DNSAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ts := &testSite{dir: t.TempDir(), sim: sim, robotsTTL: robotsTTL}
	ts.db = openDB(t, ts.dir)
	t.Cleanup(func() { ts.db.Close() })
	newCrawler(t, ts, o)
	t.Cleanup(func() { ts.c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := ts.c.Seed(ctx, ts.seeds()); err != nil {
		t.Fatal(err)
	}
	if err := ts.run(t, ctx, rounds); err != nil {
		t.Fatalf("run: %v (a crawl that refetches ends at its round limit, not exhausted)", err)
	}
	return ts
}

// TestRefetchCrawl crawls a web that changes (websim: a simulated day a
// second, each page at a rate after Cho and Garcia-Molina) with the
// adaptive refetch schedule, for a number of rounds, and checks that the
// crawl kept going past its first pass and refreshed its collection:
// pages that changed were fetched again and the links their new versions
// added entered the crawl; pages that had not changed were answered 304;
// every interval stayed within its bounds and some moved; and OPIC's cash
// stayed conserved through the refetches.
func TestRefetchCrawl(t *testing.T) {
	r := plan.Refetch{Interval: 500 * time.Millisecond, Adaptive: true, Min: 200 * time.Millisecond, Max: 3 * time.Second}
	ts := refetchCrawl(t, synth.Options{Hosts: 6, Pages: 6, Seed: 5, IPs: 4, Profile: synth.Clean},
		Options{Width: 1000, PerHost: 10, HostDelay: 10 * time.Millisecond, CheckCash: true, Refetch: r}, 40)
	var changed, unchanged, news, adapted, scheduled int
	err := ts.c.st.ScanURLs(func(rec store.URLRecord) error {
		changed += int(rec.Changed)
		unchanged += int(rec.Unchanged)
		if strings.Contains(rec.URL, "/news/") && rec.Status == store.StatusFetched {
			news++
		}
		if rec.Interval != 0 {
			scheduled++
			if rec.Interval < r.Min || rec.Interval > r.Max {
				t.Errorf("%s: interval %v outside [%v, %v]", rec.URL, rec.Interval, r.Min, r.Max)
			}
			if rec.Interval != r.Interval {
				adapted++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st := ts.f.Stats()
	t.Logf("%d refetches found a change, %d none (%d answered 304); %d news pages fetched; %d of %d intervals adapted",
		changed, unchanged, st.NotModified, news, adapted, scheduled)
	if changed == 0 || unchanged == 0 || st.NotModified == 0 {
		t.Errorf("refetches: %d changed, %d unchanged, %d answered 304: want some of each", changed, unchanged, st.NotModified)
	}
	if news == 0 {
		t.Error("no page that a new version linked was fetched: changed pages' new links did not enter the crawl")
	}
	if adapted == 0 {
		t.Error("no interval moved from the first one")
	}
	if cashOff, histOff := conservation(t, ts.c); math.Abs(cashOff) > 1e-6 || math.Abs(histOff) > 1e-6 {
		t.Errorf("cash off by %v, history off by %v", cashOff, histOff)
	}
}

// TestRefetchHostBudget: a host whose fetched pages use its budget stays
// open for their refetches, and its other URLs leave the frontier for good
// (parked) instead of closing the host, which would stop the refetches too.
func TestRefetchHostBudget(t *testing.T) {
	const budget = 4
	ts := refetchCrawl(t, synth.Options{Hosts: 4, Pages: 12, Seed: 5, IPs: 4, Profile: synth.Clean},
		Options{Width: 1000, PerHost: 10, HostDelay: 10 * time.Millisecond, CheckCash: true, HostBudget: budget,
			Refetch: plan.Refetch{Interval: 300 * time.Millisecond}}, 30)
	pages := map[string]int{}     // fetched pages by host
	refetched := map[string]int{} // of them refetched at least once
	parked := 0
	err := ts.c.st.ScanURLs(func(rec store.URLRecord) error {
		host := hostOf(rec.URL)
		switch {
		case rec.Parked:
			parked++
			if rec.Status != store.StatusUnfetched {
				t.Errorf("%s parked with status %v", rec.URL, rec.Status)
			}
		case rec.Status == store.StatusFetched && !strings.HasSuffix(rec.URL, "/robots.txt"):
			pages[host]++
			if rec.Changed+rec.Unchanged > 0 {
				refetched[host]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pages by host %v, refetched %v, %d URLs parked", pages, refetched, parked)
	if parked == 0 {
		t.Error("no URL parked: no host reached its budget")
	}
	full := 0
	for host, n := range pages {
		st, err := ts.c.st.HostStats(host)
		if err != nil {
			t.Fatal(err)
		}
		if st.Fetched > budget {
			t.Errorf("%s: %d pages fetched, budget %d", host, st.Fetched, budget)
		}
		if st.Fetched == budget {
			full++
			if refetched[host] < n/2 {
				t.Errorf("%s used its budget and only %d of its %d pages were refetched after", host, refetched[host], n)
			}
		}
		if rec, _, _ := ts.c.st.Host(host); rec.BackoffUntil.Equal(closedUntil) {
			t.Errorf("%s closed: its pages cannot be refetched", host)
		}
	}
	if full == 0 {
		t.Error("no host used its budget")
	}
	if c := ts.c.st.Counts(); c.Parked != uint64(parked) {
		t.Errorf("Counts().Parked %d, %d parked records", c.Parked, parked)
	}
}

// TestRefetchOptimalCrawl crawls a changing websim with the optimal
// schedule: intervals spread by page (not one for all) within their
// bounds, and OPIC's cash is conserved.
func TestRefetchOptimalCrawl(t *testing.T) {
	r := plan.Refetch{Interval: 500 * time.Millisecond, Optimal: true, Min: 100 * time.Millisecond, Max: 5 * time.Second}
	ts := refetchCrawl(t, synth.Options{Hosts: 6, Pages: 6, Seed: 5, IPs: 4, Profile: synth.Clean},
		Options{Width: 1000, PerHost: 10, HostDelay: 10 * time.Millisecond, CheckCash: true, Refetch: r}, 40)
	intervals := map[time.Duration]int{}
	watched := 0
	err := ts.c.st.ScanURLs(func(rec store.URLRecord) error {
		if rec.Interval != 0 {
			intervals[rec.Interval]++
			if rec.Interval < r.Min || rec.Interval > r.Max {
				t.Errorf("%s: interval %v outside [%v, %v]", rec.URL, rec.Interval, r.Min, r.Max)
			}
		}
		if rec.Watched > 0 {
			watched++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d distinct intervals, %d pages with time watched", len(intervals), watched)
	if len(intervals) < 5 || watched == 0 {
		t.Errorf("%d distinct intervals, %d pages watched: the schedule did not set intervals by page", len(intervals), watched)
	}
	shorter, longer := 0, 0
	for iv, n := range intervals {
		if iv < r.Interval {
			shorter += n
		} else if iv > r.Interval {
			longer += n
		}
	}
	if shorter == 0 || longer == 0 {
		t.Errorf("%d pages below the budget's interval %v, %d above: the budget is not allocated by change rate", shorter, r.Interval, longer)
	}
	if cashOff, histOff := conservation(t, ts.c); math.Abs(cashOff) > 1e-6 || math.Abs(histOff) > 1e-6 {
		t.Errorf("cash off by %v, history off by %v", cashOff, histOff)
	}
}

// TestRevisitSkipsRefetches: the link store's revisits pass on the cash of
// fetched pages that are never fetched again, not of pages in the refetch
// cycle: one of those could be generated for its refetch, its cash in the
// job, between the revisit's plan and its command, and its cash would be
// given away twice (found by a SIGKILL run of a refetching crawl with
// --check-cash: cash created from the first refetch on).
func TestRevisitSkipsRefetches(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	c, err := New(Options{DB: db, Dir: dir, Width: 100, Revisits: 10, Refetch: plan.Refetch{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	b := store.NewBatch()
	for _, u := range []string{"http://a.test/once", "http://a.test/cycle"} {
		b.UpsertCash(u, 1, 0)
		b.MarkGenerated(u, 1)
		fr := store.FetchResult{URL: u, Status: store.StatusFetched, At: at, Round: 1, Spend: 1}
		if strings.HasSuffix(u, "cycle") {
			fr.Schedule = &store.Schedule{NextFetch: at.Add(time.Hour), Interval: time.Hour}
		}
		b.RecordRoundFetch(fr)
		b.UpsertCash(u, 0.5, 0) // cash from an in-link since
	}
	if _, err := db.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://a.test/once", "http://a.test/cycle"} {
		c.links.offer(u, 0, []string{"http://a.test/x"}, 1)
		c.links.credit([]target{{url: u, credit: credit{cash: 0.5}}}, 0) // the cash it was owed since
	}
	rb, err := c.revisit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Revisits) != 1 || rb.Revisits[0].url != "http://a.test/once" {
		t.Fatalf("revisits %+v, want the page fetched once only", rb.Revisits)
	}
}

// TestSitemapDue: a sitemap <lastmod> newer than a fetched page's copy (its
// Last-Modified, or its fetch time without one) makes the page due at once;
// an older one, a page of the round's own results, a page without a
// schedule or already due, and a crawl without refetch leave it.
func TestSitemapDue(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	lm := at.Add(-48 * time.Hour) // the copies' Last-Modified
	pages := []struct {
		url     string
		lastMod string
		next    time.Time
	}{
		{"http://a.test/newer", http.TimeFormat, at.Add(20 * time.Hour)},
		{"http://a.test/older", http.TimeFormat, at.Add(20 * time.Hour)},
		{"http://a.test/no-validator", "", at.Add(20 * time.Hour)},
		{"http://a.test/this-round", http.TimeFormat, at.Add(20 * time.Hour)},
		{"http://a.test/never", http.TimeFormat, time.Time{}},
	}
	b := store.NewBatch()
	for _, p := range pages {
		b.UpsertCash(p.url, 1, 0)
		b.MarkGenerated(p.url, 1)
		sc := &store.Schedule{NextFetch: p.next, Interval: 20 * time.Hour}
		if p.lastMod != "" {
			sc.LastModified = lm.Format(p.lastMod)
		}
		b.RecordRoundFetch(store.FetchResult{URL: p.url, Status: store.StatusFetched, At: at, Round: 1, Spend: 0.5, Schedule: sc})
	}
	if _, err := db.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	hints := map[string]int64{
		"http://a.test/newer":        ms(lm.Add(time.Hour)),
		"http://a.test/older":        ms(lm.Add(-time.Hour)),
		"http://a.test/no-validator": ms(at.Add(time.Minute)), // after its fetch
		"http://a.test/this-round":   ms(at),
		"http://a.test/never":        ms(at),
		"http://a.test/unknown":      ms(at),
	}
	skip := map[string]bool{"http://a.test/this-round": true}
	now := at.Add(time.Hour)
	for _, tc := range []struct {
		name string
		r    plan.Refetch
		want []string
	}{
		{"refetch on", plan.Refetch{Interval: 20 * time.Hour}, []string{"http://a.test/newer", "http://a.test/no-validator"}},
		{"refetch off", plan.Refetch{}, nil},
	} {
		c := &Crawler{o: Options{Refetch: tc.r}, st: db.Store()}
		var got []string
		err := c.sitemapDue(hints, skip, now, func(u string, due time.Time, score float64) error {
			got = append(got, u)
			if due.Before(now) || score != 1 { // its history and cash, 0.5 each
				t.Errorf("%s: %s due at %v (now %v), score %v", tc.name, u, due, now, score)
			}
			return nil
		})
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: due %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
	// The commands apply: the page is due in the frontier.
	c := &Crawler{o: Options{Refetch: plan.Refetch{Interval: 20 * time.Hour}}, st: db.Store()}
	b = store.NewBatch()
	if err := c.sitemapDue(hints, skip, now, func(u string, due time.Time, score float64) error {
		b.MakeDue(u, due, score)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://a.test/newer", "http://a.test/no-validator"} {
		if rec, _, _ := db.Store().Get(u); !rec.Due {
			t.Errorf("%s not due after the commands: %+v", u, rec)
		}
	}
	if rec, _, _ := db.Store().Get("http://a.test/older"); rec.Due {
		t.Error("a page whose lastmod is older than its copy was made due")
	}
}

// TestStageLastMods: a staged batch with sitemap lastmods is version 2 and
// round-trips; every shorter prefix and a lastmod ≤ 0 are refused.
func TestStageLastMods(t *testing.T) {
	s := stageBatch{LastMods: []lastModHint{{"http://a.test/x", 1_700_000_000_000}, {"http://a.test/y", 1}}}
	b := s.encode()
	if b[1] != stageVersion2 {
		t.Fatalf("version %d, want %d", b[1], stageVersion2)
	}
	got, err := decodeStage(b, 1)
	if err != nil || !slices.Equal(got.LastMods, s.LastMods) {
		t.Fatalf("round trip: %+v (%v), want %+v", got.LastMods, err, s.LastMods)
	}
	for i := range len(b) {
		if _, err := decodeStage(b[:i], 1); err == nil {
			t.Fatalf("a batch cut at %d of %d bytes decoded", i, len(b))
		}
	}
	bad := stageBatch{LastMods: []lastModHint{{"http://a.test/x", 0}}}
	if _, err := decodeStage(bad.encode(), 1); err == nil {
		t.Error("a lastmod of 0 decoded")
	}
}

// TestRefetchSitemapLastMod: in a crawl that refetches, a sitemap read
// again with robots.txt makes pages whose <lastmod> is newer than their
// copy due at once, through the whole path (the fetcher's LastMods, the
// fetch record, the staged batch, the update); OPIC's cash stays
// conserved (CheckCash).
func TestRefetchSitemapLastMod(t *testing.T) {
	var mu sync.Mutex
	var due, sitemaps int64
	web := synth.Options{Hosts: 12, Pages: 10, Seed: 5, IPs: 4, Profile: synth.Realistic}
	refetchCrawlTTL(t, web, Options{Width: 1000, PerHost: 10, HostDelay: 10 * time.Millisecond, CheckCash: true,
		Refetch: plan.Refetch{Interval: 2 * time.Second}, OnRound: func(st RoundStats) {
			mu.Lock()
			defer mu.Unlock()
			due += st.SitemapDue
			sitemaps += st.Sitemaps
		}}, 25, 300*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d sitemap fetches, %d pages made due by a sitemap lastmod", sitemaps, due)
	if due == 0 {
		t.Errorf("no page made due by its sitemap lastmod (%d sitemap fetches)", sitemaps)
	}
}

package store

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRefetchCycle takes one URL round the refetch cycle: fetched with a
// schedule, not due before its time, due after it (back in the frontier,
// still fetched), generated, requeued, retried, and fetched again with a
// new schedule; the host's page budget counts the page once.
func TestRefetchCycle(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	const u = "http://h1.test/a"
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	idx := uint64(0)
	apply := func(build func(b *Batch)) *Result {
		t.Helper()
		b := NewBatch()
		build(b)
		idx++
		return applyT(t, s, idx, b)
	}
	get := func() URLRecord {
		t.Helper()
		rec, ok, err := s.Get(u)
		if err != nil || !ok {
			t.Fatalf("Get(%s): %v, %v", u, ok, err)
		}
		return rec
	}
	frontier := func() []FrontierEntry {
		t.Helper()
		fr, err := s.Frontier(FrontierQuery{Width: 100, PerHost: 100})
		if err != nil {
			t.Fatal(err)
		}
		return fr
	}
	due := func(at time.Time) []DueURL {
		t.Helper()
		d, err := s.DueURLs(at, 10)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	fetched := func() uint64 {
		t.Helper()
		st, err := s.HostStats("h1.test")
		if err != nil {
			t.Fatal(err)
		}
		return st.Fetched
	}

	apply(func(b *Batch) { b.UpsertCash(u, 1, 0); b.MarkGenerated(u, 1) })
	apply(func(b *Batch) {
		b.RecordRoundFetch(FetchResult{URL: u, Status: StatusFetched, HTTPStatus: 200, At: t0, ContentFP: 7, Round: 1, Spend: 1,
			Schedule: &Schedule{NextFetch: t0.Add(time.Hour), Interval: time.Hour, ETag: `"a"`, LastModified: "Sat, 28 Nov 2026 11:00:00 GMT"}})
	})
	rec := get()
	if rec.Status != StatusFetched || !rec.NextFetch.Equal(t0.Add(time.Hour)) || rec.Interval != time.Hour || rec.ETag != `"a"` ||
		rec.LastModified != "Sat, 28 Nov 2026 11:00:00 GMT" || rec.Due || rec.Changed+rec.Unchanged != 0 || rec.History != 1 {
		t.Fatalf("after the first fetch: %+v", rec)
	}
	if c := s.Counts(); c.Scheduled != 1 || len(frontier()) != 0 || len(due(t0)) != 0 || fetched() != 1 {
		t.Fatalf("after the first fetch: scheduled %d, frontier %v, due at t0 %v, host fetched %d", c.Scheduled, frontier(), due(t0), fetched())
	}
	if d := due(t0.Add(time.Hour)); len(d) != 1 || d[0].URL != u || !d[0].NextFetch.Equal(t0.Add(time.Hour)) {
		t.Fatalf("due at t0+1h: %+v", d)
	}

	apply(func(b *Batch) { b.UpsertCash(u, 0.5, 0) }) // cash from an in-link meanwhile
	if res := apply(func(b *Batch) { b.MakeDue(u, t0.Add(30*time.Minute), 3) }); res.Ops[0].Applied {
		t.Fatal("MakeDue before the URL's next fetch applied")
	}
	if res := apply(func(b *Batch) { b.MakeDue(u, t0.Add(2*time.Hour), 3) }); !res.Ops[0].Applied {
		t.Fatal("MakeDue after the URL's next fetch did not apply")
	}
	if res := apply(func(b *Batch) { b.MakeDue(u, t0.Add(2*time.Hour), 5) }); res.Ops[0].Applied {
		t.Fatal("MakeDue of a URL already due applied")
	}
	fr := frontier()
	if rec = get(); rec.Status != StatusFetched || !rec.Due || rec.DueScore != 3 || rec.Cash != 0.5 {
		t.Fatalf("due: %+v", rec)
	}
	if len(fr) != 1 || fr[0].URL != u || fr[0].Score != 3 || !fr[0].Refetch || s.Counts().Scheduled != 0 || len(due(t0.Add(24*time.Hour))) != 0 {
		t.Fatalf("due: frontier %+v, scheduled %d", fr, s.Counts().Scheduled)
	}
	if c := s.Counts(); c.ByStatus[StatusFetched] != 1 || c.Frontier != 0 {
		t.Fatalf("due: counts %+v, want it counted as fetched, not unfetched", c)
	}

	apply(func(b *Batch) { b.MarkGenerated(u, 2) })
	if rec = get(); rec.Status != StatusGenerated || !rec.Due || len(frontier()) != 0 {
		t.Fatalf("generated: %+v, frontier %v", rec, frontier())
	}
	apply(func(b *Batch) { b.Requeue(u) })
	if rec = get(); rec.Status != StatusFetched || !rec.Due || len(frontier()) != 1 {
		t.Fatalf("requeued: %+v, frontier %v", rec, frontier())
	}
	apply(func(b *Batch) { b.MarkGenerated(u, 3) })
	apply(func(b *Batch) { b.RecordRoundFetch(FetchResult{URL: u, Retry: true, Round: 3}) })
	if rec = get(); rec.Status != StatusFetched || !rec.Due || rec.Retries != 1 || len(frontier()) != 1 {
		t.Fatalf("retried: %+v, frontier %v", rec, frontier())
	}

	apply(func(b *Batch) { b.MarkGenerated(u, 4) })
	apply(func(b *Batch) {
		b.RecordRoundFetch(FetchResult{URL: u, Status: StatusFetched, HTTPStatus: 304, At: t0.Add(3 * time.Hour), ContentFP: 7, Round: 4, Spend: 0.5,
			Schedule: &Schedule{NextFetch: t0.Add(5 * time.Hour), Interval: 2 * time.Hour, ETag: `"a"`, Change: ChangeUnchanged}})
	})
	rec = get()
	if rec.Status != StatusFetched || rec.Due || rec.DueScore != 0 || rec.Unchanged != 1 || rec.Changed != 0 || rec.Interval != 2*time.Hour ||
		rec.LastModified != "" || rec.History != 1.5 || rec.Cash != 0 || rec.HTTPStatus != 304 {
		t.Fatalf("refetched: %+v", rec)
	}
	if s.Counts().Scheduled != 1 || len(frontier()) != 0 || fetched() != 1 {
		t.Fatalf("refetched: scheduled %d, frontier %v, host fetched %d (want the page counted once)", s.Counts().Scheduled, frontier(), fetched())
	}
	// A refetch that finds the page gone ends its schedule.
	apply(func(b *Batch) { b.MakeDue(u, t0.Add(6*time.Hour), 1); b.MarkGenerated(u, 5) })
	apply(func(b *Batch) {
		b.RecordRoundFetch(FetchResult{URL: u, Status: StatusGone, HTTPStatus: 404, At: t0.Add(6 * time.Hour), Round: 5})
	})
	if rec = get(); rec.Status != StatusGone || rec.Due || s.Counts().Scheduled != 0 || len(due(t0.Add(100*time.Hour))) != 0 {
		t.Fatalf("gone: %+v, scheduled %d", rec, s.Counts().Scheduled)
	}
}

// TestRecordEncodingVersions: a record without refetch fields is stored
// as before refetch existed (version 1), one with them in version 2, and
// both decode back; version 2 with unknown flags or a bad score does not.
func TestRecordEncodingVersions(t *testing.T) {
	plain := URLRecord{Status: StatusFetched, Cash: 0.5, History: 2, Depth: 3, Round: 9, FetchedAt: time.UnixMilli(1_700_000_000_000).UTC(), HTTPStatus: 200, ContentFP: 42, FP: 7}
	if b := plain.appendTo(nil); b[0] != recordVersion {
		t.Fatalf("a plain record is stored in version %d, want %d", b[0], recordVersion)
	}
	full := plain
	full.NextFetch, full.Interval, full.ETag, full.LastModified = time.UnixMilli(1_700_000_360_000).UTC(), time.Hour, `W/"x"`, "Tue, 14 Nov 2023 22:13:20 GMT"
	full.Changed, full.Unchanged, full.Due, full.DueScore = 3, 4, true, 1.25
	for _, r := range []URLRecord{plain, full} {
		b := r.appendTo(nil)
		var got URLRecord
		if err := decodeRecord(b, &got); err != nil {
			t.Fatalf("decode %+v: %v", r, err)
		}
		got.URL = r.URL
		if got != r {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
	b := full.appendTo(nil)
	if b[0] != recordVersion2 {
		t.Fatalf("a record with a schedule is stored in version %d, want %d", b[0], recordVersion2)
	}
	flagsAt := len(plain.appendTo(nil))
	bad := append([]byte(nil), b...)
	bad[flagsAt] |= 0x80
	var r URLRecord
	if err := decodeRecord(bad, &r); err == nil {
		t.Error("a record with unknown refetch flags decoded")
	}
	neg := full
	neg.DueScore = math.NaN()
	if err := decodeRecord(neg.appendTo(nil), &r); err == nil {
		t.Error("a record with a NaN due score decoded")
	}
	if err := decodeRecord(b[:len(b)-3], &r); err == nil {
		t.Error("a cut record decoded")
	}
}

// TestRefetchBadOps: MakeDue and Schedule arguments that cannot be stored
// are refused at the batch, naming the URL; over-long validators are not
// kept.
func TestRefetchBadOps(t *testing.T) {
	const u = "http://h1.test/a"
	for _, tc := range []struct {
		name  string
		build func(b *Batch)
	}{
		{"due at the zero time", func(b *Batch) { b.MakeDue(u, time.Time{}, 1) }},
		{"due with a NaN score", func(b *Batch) { b.MakeDue(u, time.Now(), math.NaN()) }},
		{"due with a negative score", func(b *Batch) { b.MakeDue(u, time.Now(), -1) }},
		{"a negative interval", func(b *Batch) {
			b.RecordRoundFetch(FetchResult{URL: u, Status: StatusFetched, Round: 1, Schedule: &Schedule{Interval: -time.Second}})
		}},
		{"an unknown change", func(b *Batch) {
			b.RecordRoundFetch(FetchResult{URL: u, Status: StatusFetched, Round: 1, Schedule: &Schedule{Change: 9}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBatch()
			tc.build(b)
			if _, err := b.Encode(); !errors.Is(err, ErrBadOp) || !strings.Contains(err.Error(), u) {
				t.Fatalf("Encode() = %v, want ErrBadOp naming %s", err, u)
			}
		})
	}
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	applyT(t, s, 1, func() *Batch { b := NewBatch(); b.UpsertCash(u, 1, 0); b.MarkGenerated(u, 1); return b }())
	long := `"` + strings.Repeat("e", MaxValidatorLen) + `"`
	b := NewBatch()
	b.RecordRoundFetch(FetchResult{URL: u, Status: StatusFetched, Round: 1, Schedule: &Schedule{NextFetch: time.Now(), ETag: long, LastModified: "x"}})
	applyT(t, s, 2, b)
	if rec, _, _ := s.Get(u); rec.ETag != "" || rec.LastModified != "x" {
		t.Fatalf("ETag %q, Last-Modified %q: want the over-long ETag dropped and the other kept", rec.ETag, rec.LastModified)
	}
}

package store

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math"
	"slices"
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
// as before refetch existed (version 1, byte for byte), one with them in
// version 2 (byte for byte as before Watched existed), one with a time
// watched in version 3, and all decode back; version 2 with unknown flags
// or a bad score does not, nor a cut record of any version.
func TestRecordEncodingVersions(t *testing.T) {
	plain := URLRecord{Status: StatusFetched, Cash: 0.5, History: 2, Depth: 3, Round: 9, FetchedAt: time.UnixMilli(1_700_000_000_000).UTC(), HTTPStatus: 200, ContentFP: 42, FP: 7}
	full := plain
	full.NextFetch, full.Interval, full.ETag, full.LastModified = time.UnixMilli(1_700_000_360_000).UTC(), time.Hour, `W/"x"`, "Tue, 14 Nov 2023 22:13:20 GMT"
	full.Changed, full.Unchanged, full.Due, full.DueScore = 3, 4, true, 1.25
	watched := full
	watched.Watched = 90 * time.Minute
	// plain and full as the encoder wrote them before Watched existed.
	const (
		plainV1 = "01033fe000000000000040000000000000000000000000000007030980a0abfef962c80100000000000000002a"
		fullV2  = "02033fe000000000000040000000000000000000000000000007030980a0abfef962c80100000000000000002a" +
			"018099d7fef96280c0e285e36805572f2278221d5475652c203134204e6f7620323032332032323a31333a323020474d5403043ff4000000000000"
	)
	for _, tc := range []struct {
		name    string
		r       URLRecord
		version byte
		bytes   string // the stored bytes, if they must not change
	}{
		{"plain", plain, recordVersion, plainV1},
		{"a schedule", full, recordVersion2, fullV2},
		{"a schedule and a time watched", watched, recordVersion3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.r.appendTo(nil)
			if b[0] != tc.version {
				t.Fatalf("stored in version %d, want %d", b[0], tc.version)
			}
			if got := hex.EncodeToString(b); tc.bytes != "" && got != tc.bytes {
				t.Fatalf("stored as\n%s\nwant, as before,\n%s", got, tc.bytes)
			}
			var got URLRecord
			if err := decodeRecord(b, &got); err != nil {
				t.Fatalf("decode %+v: %v", tc.r, err)
			}
			got.URL = tc.r.URL
			if got != tc.r {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.r)
			}
			for n := 26; n < len(b); n++ {
				if err := decodeRecord(b[:n], &got); err == nil {
					t.Fatalf("the record cut to %d of %d bytes decoded", n, len(b))
				}
			}
			if err := decodeRecord(append(b[:len(b):len(b)], 0), &got); err == nil {
				t.Fatal("the record with a byte more decoded")
			}
		})
	}
	// Decoding into a record that held a time watched clears it.
	r := watched
	if err := decodeRecord(full.appendTo(nil), &r); err != nil || r.Watched != 0 {
		t.Fatalf("decoding version 2 over a record: Watched %v, %v; want 0", r.Watched, err)
	}
	b := full.appendTo(nil)
	flagsAt := len(plain.appendTo(nil))
	bad := append([]byte(nil), b...)
	bad[flagsAt] |= 0x80
	if err := decodeRecord(bad, &r); err == nil {
		t.Error("a record with unknown refetch flags decoded")
	}
	neg := full
	neg.DueScore = math.NaN()
	if err := decodeRecord(neg.appendTo(nil), &r); err == nil {
		t.Error("a record with a NaN due score decoded")
	}
	v4 := append([]byte(nil), watched.appendTo(nil)...)
	v4[0] = 4
	if err := decodeRecord(v4, &r); err == nil {
		t.Error("a record of an unknown version decoded")
	}
}

// TestScheduleOpWatched: a schedule's time watched travels in its op and
// is stored in the record as given; an op cut anywhere is refused as
// corrupt, and a negative time watched is refused at the batch.
func TestScheduleOpWatched(t *testing.T) {
	const u = "http://h1.test/a"
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	fr := FetchResult{URL: u, Status: StatusFetched, HTTPStatus: 200, At: at, ContentFP: 7, Round: 1, Spend: 1,
		Schedule: &Schedule{NextFetch: at.Add(time.Hour), Interval: time.Hour, ETag: `"a"`, Change: ChangeChanged, Watched: 3*time.Hour + time.Millisecond}}
	b := NewBatch()
	b.RecordRoundFetch(fr)
	cmd, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cmd = slices.Clone(cmd)
	ops, err := decodeCommand(cmd, nil)
	if err != nil || len(ops) != 1 || ops[0].t != OpRoundFetchSched || time.Duration(ops[0].sched.watched) != fr.Schedule.Watched {
		t.Fatalf("decode: %d ops, %v; watched %v, want %v", len(ops), err, time.Duration(ops[0].sched.watched), fr.Schedule.Watched)
	}
	body := cmd[:len(cmd)-4]
	for n := 3; n < len(body); n++ {
		cut := slices.Clone(body[:n])
		cut = binary.BigEndian.AppendUint32(cut, crc32.Checksum(cut, crcTable))
		if _, err := decodeCommand(cut, nil); !errors.Is(err, ErrCorruptCommand) {
			t.Fatalf("the op cut to %d of %d bytes: %v, want ErrCorruptCommand", n, len(body), err)
		}
	}

	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	applyT(t, s, 1, func() *Batch { b := NewBatch(); b.UpsertCash(u, 1, 0); b.MarkGenerated(u, 1); return b }())
	if _, err := s.Apply(2, cmd); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := s.Get(u); rec.Watched != fr.Schedule.Watched || rec.Changed != 1 {
		t.Fatalf("stored: Watched %v, Changed %d; want %v, 1", rec.Watched, rec.Changed, fr.Schedule.Watched)
	}

	b = NewBatch()
	neg := fr
	neg.Schedule = &Schedule{Watched: -time.Second}
	b.RecordRoundFetch(neg)
	if _, err := b.Encode(); !errors.Is(err, ErrBadOp) || !strings.Contains(err.Error(), u) {
		t.Fatalf("a negative time watched: Encode() = %v, want ErrBadOp naming %s", err, u)
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

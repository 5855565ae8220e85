package rounds

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/fnv"
	"log/slog"
	"maps"
	"math"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// Tests of a page's own signals (fetcher.Result.NoIndex, Canonical,
// Traps) on their way from the fetch segment to the crawl database and
// the round statistics.

// TestRecordSignals: a fetch record of a result without signals is what
// the encoder wrote before they existed, byte for byte (and such records
// decode as before); one with them is tagged recFetchSignals and decodes
// back with them, with its near-duplicate's original and embeds; a record
// cut anywhere, or with bad signals, is refused.
func TestRecordSignals(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	// Results and their records as the encoder wrote them before signals.
	old := []struct {
		res fetcher.Result
		hex string
	}{
		{fetcher.Result{Job: fetcher.Job{URL: "http://a.test/", Host: "a.test", Depth: 2, Cash: 0.25}, Status: store.StatusFetched, HTTPStatus: 200,
			Links: []string{"http://a.test/x"}, ContentFP: 42, Bytes: 1000, FetchedAt: at, Wait: time.Second},
			"46000300c801023fd0000000000000f6a1abfef962000000000000002ae8078094ebdc030e687474703a2f2f612e746573742f06612e746573740000010f687474703a2f2f612e746573742f78"},
		{fetcher.Result{Job: fetcher.Job{URL: "http://a.test/e", Host: "a.test", Cash: 0.5}, Status: store.StatusFetched, HTTPStatus: 200,
			Links: []string{"http://a.test/x"}, Embeds: []string{"http://a.test/i.png"}, ContentFP: 7, FetchedAt: at},
			"45000300c801003fe0000000000000f6a1abfef962000000000000000700000f687474703a2f2f612e746573742f6506612e746573740000010f687474703a2f2f612e746573742f780113687474703a2f2f612e746573742f692e706e67"},
		{fetcher.Result{Job: fetcher.Job{URL: "http://a.test/print", Host: "a.test", Prev: fetcher.Prev{FetchedAt: at, ContentFP: 9, ETag: `"v1"`}}, Status: store.StatusFetched, HTTPStatus: 200,
			NearDupOf: "http://a.test/", ETag: `"v2"`, FetchedAt: at, Truncated: "length"},
			"4e00030cc801000000000000000000f6a1abfef9620000000000000000000013687474703a2f2f612e746573742f7072696e7406612e7465737400000000066c656e67746801f6a1abfef96200000000000000090422763122000422763222000e687474703a2f2f612e746573742f"},
		{fetcher.Result{Job: fetcher.Job{URL: "http://a.test/sitemap.xml", Host: "a.test"}, Kind: fetcher.KindSitemap, Links: []string{"http://a.test/o"},
			LastMods: []time.Time{at}},
			"4602008000000000000000000000000000000000000000000019687474703a2f2f612e746573742f736974656d61702e786d6c06612e746573740000010f687474703a2f2f612e746573742f6ff6a1abfef962"},
	}
	for _, o := range old {
		if got := hex.EncodeToString(appendResult(nil, &o.res)); got != o.hex {
			t.Errorf("%s without signals encodes as\n%s\nwant, as before signals existed,\n%s", o.res.URL, got, o.hex)
		}
		raw, _ := hex.DecodeString(o.hex)
		f, err := decodeFetch(raw)
		if err != nil {
			t.Fatalf("%s: an old record does not decode: %v", o.res.URL, err)
		}
		r := f.result(0)
		if r.URL != o.res.URL || r.NearDupOf != o.res.NearDupOf || !slices.Equal(r.Embeds, o.res.Embeds) || !slices.Equal(r.Links, o.res.Links) ||
			r.ETag != o.res.ETag || r.Truncated != o.res.Truncated || r.NoIndex || r.Canonical != "" || r.Traps != (fetcher.TrapCounts{}) {
			t.Errorf("%s: an old record decodes as %+v", o.res.URL, r)
		}
	}

	base := old[0].res
	for _, tc := range []struct {
		name string
		mod  func(r *fetcher.Result)
	}{
		{"noindex", func(r *fetcher.Result) { r.NoIndex = true }},
		{"canonical", func(r *fetcher.Result) { r.Canonical = "http://a.test/c" }},
		{"traps", func(r *fetcher.Result) { r.Traps = fetcher.TrapCounts{Repetition: 300, Calendar: 2} }},
		{"calendar only", func(r *fetcher.Result) { r.Traps.Calendar = 1 }},
		{"all, with a near-duplicate, embeds and a refetch", func(r *fetcher.Result) {
			r.NoIndex, r.Canonical, r.Traps = true, "https://b.test/c?x=1", fetcher.TrapCounts{Repetition: 1}
			r.NearDupOf, r.Embeds, r.Truncated = "http://a.test/o", []string{"http://a.test/i.png"}, "time"
			r.Prev, r.ETag = fetcher.Prev{FetchedAt: at, ContentFP: 3}, `"e"`
		}},
		{"a sitemap's traps", func(r *fetcher.Result) {
			*r = fetcher.Result{Job: fetcher.Job{URL: "http://a.test/sitemap.xml", Host: "a.test"}, Kind: fetcher.KindSitemap,
				Links: []string{"http://a.test/o"}, Traps: fetcher.TrapCounts{Calendar: 40}}
		}},
	} {
		res := base
		res.Links = slices.Clone(base.Links)
		tc.mod(&res)
		b := appendResult(nil, &res)
		if b[0] != recFetchSignals {
			t.Errorf("%s: tag %q, want %q", tc.name, b[0], recFetchSignals)
		}
		f, err := decodeFetch(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		r := f.result(1)
		if r.NoIndex != res.NoIndex || r.Canonical != res.Canonical || r.Traps != res.Traps || r.NearDupOf != res.NearDupOf ||
			!slices.Equal(r.Embeds, res.Embeds) || !slices.Equal(r.Links, res.Links) || r.Truncated != res.Truncated || r.Prev != res.Prev ||
			r.ETag != res.ETag || r.URL != res.URL || r.Kind != res.Kind || r.Cash != res.Cash {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", tc.name, r, res)
		}
		for n := range len(b) {
			if _, err := decodeFetch(b[:n]); !errors.Is(err, errRecord) {
				t.Fatalf("%s: the record cut to %d of %d bytes decoded (%v)", tc.name, n, len(b), err)
			}
		}
	}

	// Bad signals: the record of a noindex page ends with its flags byte.
	res := base
	res.NoIndex = true
	good := appendResult(nil, &res)
	for _, bad := range []struct {
		name string
		tail []byte
	}{
		{"no signal", []byte{0}},
		{"an unknown signal", []byte{sigNoIndex | 0x80}},
		{"an empty canonical", []byte{sigCanonical, 0}},
		{"no trap counted", []byte{sigTraps, 0, 0}},
		{"bytes after the signals", []byte{sigNoIndex, 0}},
	} {
		b := append(slices.Clone(good[:len(good)-1]), bad.tail...)
		if _, err := decodeFetch(b); !errors.Is(err, errRecord) {
			t.Errorf("%s: decoded (%v), want %v", bad.name, err, errRecord)
		}
	}
}

// TestStageSignals: a staged batch without directives nor trap counts is
// encoded as before they existed (here a version 3 batch, byte for byte);
// one with them in version 4, with or without near-duplicates, and all
// decode back; a batch cut anywhere does not. The round's statistics sum
// the counters, and a round without signals writes none of them.
func TestStageSignals(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000).UTC()
	near := stageBatch{Ops: []store.FetchResult{{URL: "http://a.test/", Status: store.StatusFetched, HTTPStatus: 200, At: at, ContentFP: 5, Spend: 0.5,
		Schedule: &store.Schedule{ETag: `"v"`, Change: store.ChangeChanged}}},
		Credits: []target{{url: "http://a.test/c", credit: credit{cash: 0.25, depth: 2}}}, Virtual: 0.125,
		Stats:    stageStats{Fetched: 1, Links: 4, Class: [6]int64{0, 0, 1}, Status: [16]int64{0, 0, 1}, Refetches: 1, Changed: 1},
		NearDups: []nearDupHint{{URL: "http://a.test/print", Of: "http://a.test/"}}}
	// near as the encoder wrote it before signals existed.
	const nearV3 = "5303010e687474703a2f2f612e746573742f0300c80180a0abfef96200000000000000053fe0000000000000010103227622000000010f687474703a2f2f612e746573742f633fd0000000000000023fc00000000000000000010000000004000000010000000000010000000000000000000000000001000001000113687474703a2f2f612e746573742f7072696e740e687474703a2f2f612e746573742f00"
	if got := hex.EncodeToString(near.encode()); got != nearV3 {
		t.Errorf("a batch without signals encodes as\n%s\nwant, as before signals existed,\n%s", got, nearV3)
	}
	dirs := []directivesHint{
		{URL: "http://a.test/", D: store.Directives{NoIndex: true}},
		{URL: "http://a.test/p", D: store.Directives{Canonical: "http://a.test/q"}},
		{URL: "http://a.test/r", D: store.Directives{NoIndex: true, Canonical: "https://b.test/r"}},
		{URL: "http://a.test/s"}, // a refetch that names none
	}
	plain := near
	plain.Ops = []store.FetchResult{{URL: "http://a.test/", Status: store.StatusFetched, HTTPStatus: 200, At: at, ContentFP: 5, Spend: 0.5}}
	plain.Stats.Refetches, plain.Stats.Changed, plain.NearDups = 0, 0, nil
	withDirs := plain
	withDirs.Directives = dirs
	trapsOnly := plain
	trapsOnly.Stats.TrapRepetition, trapsOnly.Stats.TrapCalendar = 7, 0
	all := near
	all.Directives = dirs[:2]
	all.Stats.TrapRepetition, all.Stats.TrapCalendar = 1, 300
	for _, tc := range []struct {
		name    string
		b       stageBatch
		version byte
	}{
		{"directives", withDirs, stageVersion4},
		{"trap counts only", trapsOnly, stageVersion4},
		{"near-duplicates, a schedule, directives and trap counts", all, stageVersion4},
	} {
		enc := tc.b.encode()
		if enc[1] != tc.version {
			t.Errorf("%s: version %d, want %d", tc.name, enc[1], tc.version)
		}
		got, err := decodeStage(enc, 3)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got.Directives, tc.b.Directives) || !slices.Equal(got.NearDups, tc.b.NearDups) {
			t.Errorf("%s: directives %v and near-duplicates %v, want %v and %v", tc.name, got.Directives, got.NearDups, tc.b.Directives, tc.b.NearDups)
		}
		gs, ws := got.Stats, tc.b.Stats
		if gs.TrapRepetition != ws.TrapRepetition || gs.TrapCalendar != ws.TrapCalendar || gs.Fetched != ws.Fetched || gs.Refetches != ws.Refetches {
			t.Errorf("%s: counters %+v, want %+v", tc.name, gs, ws)
		}
		if len(got.Ops) != 1 || (got.Ops[0].Schedule == nil) != (tc.b.Ops[0].Schedule == nil) {
			t.Errorf("%s: ops %+v", tc.name, got.Ops)
		}
		for n := range len(enc) {
			if _, err := decodeStage(enc[:n], 3); !errors.Is(err, errRecord) {
				t.Fatalf("%s: the batch cut to %d of %d bytes decoded (%v)", tc.name, n, len(enc), err)
			}
		}
	}
	// A version 4 batch with neither directives nor trap counts is not
	// one the encoder writes; with a trap counted it is.
	v3 := plain
	v3.NearDups = near.NearDups
	tail := appendString(nil, "") // no troubled hosts
	for _, c := range []struct {
		sigs []byte // the directives' count, the trap counters
		ok   bool
	}{{[]byte{0, 0, 0}, false}, {[]byte{0, 0, 1}, true}} {
		enc := v3.encode()
		enc[1] = stageVersion4
		b := append(slices.Clone(enc[:len(enc)-len(tail)]), c.sigs...)
		b = append(b, tail...)
		got, err := decodeStage(b, 3)
		if (err == nil) != c.ok || c.ok && (got.Stats.TrapCalendar != 1 || len(got.NearDups) != 1) {
			t.Errorf("version 4 with directives and traps % x: %+v, %v; want ok %v", c.sigs, got.Stats, err, c.ok)
		}
	}

	// The round's sum, and its statistics.
	var sum stageStats
	for _, b := range []stageBatch{withDirs, trapsOnly, all} {
		sum.add(&b.Stats)
	}
	sum.NoIndex, sum.Canonical = 2, 3 // set by the update
	var st RoundStats
	sum.fill(&st)
	if st.Traps != (TrapStats{Repetition: 8, Calendar: 300}) || st.NoIndex != 2 || st.Canonical != 3 {
		t.Errorf("round statistics: traps %+v, noindex %d, canonical %d; want {8 300}, 2, 3", st.Traps, st.NoIndex, st.Canonical)
	}
	if b, _ := json.Marshal(st); !bytes.Contains(b, []byte(`"noindex":2,"canonical":3,"traps":{"repetition":8,"calendar":300}`)) {
		t.Errorf("round statistics as JSON: %s", b)
	}
	var none RoundStats
	plain.Stats.fill(&none)
	if b, _ := json.Marshal(none); bytes.Contains(b, []byte("noindex")) || bytes.Contains(b, []byte("canonical")) || bytes.Contains(b, []byte("traps")) {
		t.Errorf("a round without signals writes %s", b)
	}
}

// TestMapDirectives: the map side hands the update a fetched page's
// noindex and canonical (not its own URL, nor one the crawl database
// refuses), and for a refetch that names neither the empty directives
// that clear its last fetch's; a first fetch that names neither, a 304 and
// a retry hand none. Trap counts of every kind of result are counted.
func TestMapDirectives(t *testing.T) {
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	prev := fetcher.Prev{FetchedAt: time.UnixMilli(1_700_000_000_000).UTC(), ContentFP: 9}
	page := func(u string, mod func(r *fetcher.Result)) *fetcher.Result {
		r := &fetcher.Result{Job: fetcher.Job{URL: u, Host: "a.test", Round: 1, Cash: 1}, Status: store.StatusFetched, HTTPStatus: 200,
			Links: []string{"http://a.test/x"}}
		mod(r)
		return r
	}
	results := []*fetcher.Result{
		page("http://a.test/noindex", func(r *fetcher.Result) { r.NoIndex = true }),
		page("http://a.test/canon", func(r *fetcher.Result) { r.Canonical = "http://a.test/c" }),
		page("http://a.test/both", func(r *fetcher.Result) {
			r.NoIndex, r.Canonical, r.Traps = true, "https://b.test/", fetcher.TrapCounts{Repetition: 3, Calendar: 1}
		}),
		page("http://a.test/self", func(r *fetcher.Result) { r.Canonical = r.URL }),
		page("http://a.test/bad", func(r *fetcher.Result) { r.NoIndex, r.Canonical = true, "http://A.test/upper" }),
		page("http://a.test/plain", func(r *fetcher.Result) { r.Traps.Repetition = 2 }),
		page("http://a.test/refetched", func(r *fetcher.Result) { r.Prev = prev }),
		page("http://a.test/refetched-noindex", func(r *fetcher.Result) { r.Prev, r.NoIndex = prev, true }),
		page("http://a.test/304", func(r *fetcher.Result) { r.Prev, r.NotModified, r.HTTPStatus, r.Links = prev, true, 304, nil }),
		page("http://a.test/moved", func(r *fetcher.Result) {
			r.Prev, r.Status, r.HTTPStatus, r.RedirectTo, r.Links, r.NoIndex = prev, store.StatusRedirect, 301, "http://a.test/new", nil, true
			r.Traps.Calendar = 5 // its target refused
		}),
		page("http://a.test/retry", func(r *fetcher.Result) {
			r.Retry, r.Status, r.HTTPStatus, r.NoIndex, r.Links = true, store.StatusError, 503, true, nil
		}),
		{Job: fetcher.Job{URL: "http://a.test/sitemap.xml", Host: "a.test", Round: 1}, Kind: fetcher.KindSitemap, Links: []string{"http://a.test/s"},
			Traps: fetcher.TrapCounts{Calendar: 40}},
	}
	c := &Crawler{o: Options{Damping: 0.5, MaxDepth: 10, MaxRedirects: 5, MaxRetries: 3}, st: st}
	acc := newStageAcc()
	if err := c.mapResults(&nodePart{ref: partRef{round: 1}}, results, acc); err != nil {
		t.Fatal(err)
	}
	b := acc.batch()
	want := []directivesHint{
		{URL: "http://a.test/noindex", D: store.Directives{NoIndex: true}},
		{URL: "http://a.test/canon", D: store.Directives{Canonical: "http://a.test/c"}},
		{URL: "http://a.test/both", D: store.Directives{NoIndex: true, Canonical: "https://b.test/"}},
		{URL: "http://a.test/bad", D: store.Directives{NoIndex: true}},
		{URL: "http://a.test/refetched"},
		{URL: "http://a.test/refetched-noindex", D: store.Directives{NoIndex: true}},
		{URL: "http://a.test/moved"},
	}
	if !slices.Equal(b.Directives, want) {
		t.Errorf("directives\n got %v\nwant %v", b.Directives, want)
	}
	if b.Stats.TrapRepetition != 5 || b.Stats.TrapCalendar != 46 {
		t.Errorf("trap counts %d repetition, %d calendar; want 5, 46", b.Stats.TrapRepetition, b.Stats.TrapCalendar)
	}
	// What the update makes of them passes the crawl database's checks.
	sb := store.NewBatch()
	for _, h := range b.Directives {
		sb.SetDirectives(h.URL, h.D)
	}
	if _, err := sb.Encode(); err != nil {
		t.Errorf("the directives do not make a command: %v", err)
	}
}

// signalModel is what a crawl's signals should leave in the crawl
// database and its round statistics, from every result the fetcher
// delivered: each page's directives as its last final result (not a 304)
// gave them, and per round the pages that said noindex, named another
// canonical, and the links refused as traps.
type signalModel struct {
	mu      sync.Mutex
	dirs    map[string]store.Directives
	pending map[string]bool // a retry's URL, until a final result: out of retries it may end as an error
	rounds  map[uint64]*RoundStats
	fetches map[string]int
	// cleared and changed count the records a refetch removed or changed.
	cleared, changed int
}

func newSignalModel() *signalModel {
	return &signalModel{dirs: map[string]store.Directives{}, pending: map[string]bool{}, rounds: map[uint64]*RoundStats{}, fetches: map[string]int{}}
}

// hook gives each page signals that follow from its URL and how often it
// was fetched (so that a refetch changes or drops them), and models them.
func (m *signalModel) hook(r *fetcher.Result) {
	if r.Kind != fetcher.KindPage {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := fnv.New32a()
	h.Write([]byte(r.URL))
	n := uint32(m.fetches[r.URL])
	m.fetches[r.URL]++
	k := h.Sum32() + n
	if r.Status == store.StatusFetched && !r.Retry {
		r.NoIndex = k%2 == 0
		if k%3 == 0 {
			u, _ := url.Parse(r.URL)
			r.Canonical = u.Scheme + "://" + u.Host + "/canonical"
		}
	}
	if k%4 == 0 {
		r.Traps = fetcher.TrapCounts{Repetition: int32(k%7 + 1), Calendar: int32(k % 3)}
	}
	st := m.rounds[r.Round]
	if st == nil {
		st = &RoundStats{}
		m.rounds[r.Round] = st
	}
	st.Traps.Repetition += int64(r.Traps.Repetition)
	st.Traps.Calendar += int64(r.Traps.Calendar)
	if r.Retry {
		m.pending[r.URL] = true
		return
	}
	delete(m.pending, r.URL)
	if r.NotModified {
		return
	}
	d := store.Directives{NoIndex: r.NoIndex}
	if r.Canonical != r.URL {
		d.Canonical = r.Canonical
	}
	old, had := m.dirs[r.URL]
	if r.Status != store.StatusFetched || d == (store.Directives{}) {
		if had {
			m.cleared++
		}
		delete(m.dirs, r.URL)
		return
	}
	if had && old != d {
		m.changed++
	}
	m.dirs[r.URL] = d
	if d.NoIndex {
		st.NoIndex++
	}
	if d.Canonical != "" {
		st.Canonical++
	}
}

// check compares the crawl database's directives with the model's
// (leaving out URLs whose last result was a retry).
func (m *signalModel) check(t *testing.T, st *store.Store) (records int) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	got := map[string]store.Directives{}
	if err := st.ScanDirectives(func(u string, d store.Directives) error {
		if !m.pending[u] {
			got[u] = d
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(m.dirs)
	maps.DeleteFunc(want, func(u string, _ store.Directives) bool { return m.pending[u] })
	if !maps.Equal(got, want) {
		for u, d := range want {
			if g, ok := got[u]; !ok || g != d {
				t.Errorf("%s: directives %+v (recorded %v), want %+v", u, g, ok, d)
			}
		}
		for u, d := range got {
			if _, ok := want[u]; !ok {
				t.Errorf("%s: directives %+v recorded, want none", u, d)
			}
		}
	}
	for u, d := range want {
		if g, ok, err := st.DirectivesOf(u); err != nil || !ok || g != d {
			t.Errorf("DirectivesOf(%s) = %+v, %v, %v; want %+v", u, g, ok, err, d)
		}
	}
	return len(got)
}

// checkRound compares a round's statistics with the model's.
func (m *signalModel) checkRound(t *testing.T, st RoundStats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.rounds[st.Round]
	if w == nil {
		w = &RoundStats{}
	}
	if st.NoIndex != w.NoIndex || st.Canonical != w.Canonical || st.Traps != w.Traps {
		t.Errorf("round %d: noindex %d, canonical %d, traps %+v; want %d, %d, %+v", st.Round, st.NoIndex, st.Canonical, st.Traps, w.NoIndex, w.Canonical, w.Traps)
	}
}

// logRecorder keeps the messages a logger was given, with their attributes.
type logRecorder struct {
	mu   sync.Mutex
	recs []map[string]any
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message, "level": r.Level}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	l.mu.Lock()
	l.recs = append(l.recs, m)
	l.mu.Unlock()
	return nil
}

// trapLines returns the logged trap lines by round.
func (l *logRecorder) trapLines() map[uint64]map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[uint64]map[string]any{}
	for _, m := range l.recs {
		if m["msg"] == "rounds: links refused as spider traps" {
			out[m["round"].(uint64)] = m
		}
	}
	return out
}

// TestUpdateSignals crawls a web whose pages say noindex, name canonical
// URLs and have links refused as traps (set on the fetcher's results, as
// its trap rules and parser will), with the parts done locally (the
// results read back from the fetch segment) and staged in the crawl
// database: each page's directives end in the crawl database, every
// round's statistics count them as the results did, and a round that
// refused traps logs them at Info.
func TestUpdateSignals(t *testing.T) {
	for _, staged := range []bool{false, true} {
		name := "local"
		if staged {
			name = "staged"
		}
		t.Run(name, func(t *testing.T) {
			ts := startSite(t, synth.Clean, 8, 12)
			m := newSignalModel()
			ts.onResult = m.hook
			var log logRecorder
			var mu sync.Mutex
			var rounds []RoundStats
			newCrawler(t, ts, Options{Width: 200, PerHost: 4, Logger: slog.New(&log), OnRound: func(st RoundStats) {
				mu.Lock()
				rounds = append(rounds, st)
				mu.Unlock()
			}})
			defer ts.c.Close()
			if staged {
				ts.c.noLocalUntil.Store(math.MaxInt64) // every part's results go through the crawl database
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := ts.c.Seed(ctx, ts.seeds()); err != nil {
				t.Fatal(err)
			}
			if err := ts.run(t, ctx, 0); !errors.Is(err, ErrExhausted) {
				t.Fatalf("run: %v", err)
			}
			n := m.check(t, ts.db.Store())
			var sum RoundStats
			lines := log.trapLines()
			mu.Lock()
			defer mu.Unlock()
			for _, st := range rounds {
				m.checkRound(t, st)
				sum.NoIndex += st.NoIndex
				sum.Canonical += st.Canonical
				sum.Traps.Repetition += st.Traps.Repetition
				sum.Traps.Calendar += st.Traps.Calendar
				sum.StagedBytes += st.StagedBytes
				line, logged := lines[st.Round]
				if logged != (st.Traps.Total() > 0) {
					t.Errorf("round %d: refused %+v, trap line logged %v", st.Round, st.Traps, logged)
				}
				if logged && (line["repetition"] != st.Traps.Repetition || line["calendar"] != st.Traps.Calendar || line["level"] != slog.LevelInfo) {
					t.Errorf("round %d: trap line %v, want %+v at Info", st.Round, line, st.Traps)
				}
			}
			t.Logf("%d rounds, %d pages with directives; %d noindex, %d canonical, traps %+v", len(rounds), n, sum.NoIndex, sum.Canonical, sum.Traps)
			if n < 20 || sum.NoIndex == 0 || sum.Canonical == 0 || sum.Traps.Repetition == 0 || sum.Traps.Calendar == 0 {
				t.Fatalf("%d pages with directives, %d noindex, %d canonical, traps %+v: the test should cover each", n, sum.NoIndex, sum.Canonical, sum.Traps)
			}
			if staged != (sum.StagedBytes > 0) {
				t.Errorf("staged %v, but the updates read %d bytes of staged results", staged, sum.StagedBytes)
			}
		})
	}
}

// TestUpdateSignalsResumes stops the first round's update after a command
// that wrote some of its pages' directives but not all, as a crash would:
// a new crawler prepares the update again (a new leadership) and applies
// the rest once, the round's statistics count each page once, and the
// crawl database ends with every page's directives.
func TestUpdateSignalsResumes(t *testing.T) {
	ts := startSite(t, synth.Clean, 24, 6)
	m := newSignalModel()
	ts.onResult = m.hook
	o := Options{Width: 500, PerHost: 20, BatchOps: 4}
	newCrawler(t, ts, o)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := ts.c.Seed(ctx, ts.seeds()); err != nil {
		t.Fatal(err)
	}
	stopAt := errors.New("stopped by the test")
	var stopped int
	ts.c.afterCommand = func(round uint64, i int) error {
		if round != 1 {
			return nil
		}
		m.mu.Lock()
		want := len(m.dirs)
		m.mu.Unlock()
		n := 0
		ts.db.Store().ScanDirectives(func(string, store.Directives) error { n++; return nil })
		if n > 0 && n < want {
			stopped = i
			return stopAt
		}
		return nil
	}
	if err := ts.run(t, ctx, 1); !errors.Is(err, stopAt) {
		t.Fatalf("run: %v, want the test's stop in the middle of the directives", err)
	}
	if err := ts.c.Close(); err != nil {
		t.Fatal(err)
	}
	var applied []int
	var first *RoundStats
	o.OnRound = func(st RoundStats) {
		if st.Round == 1 {
			first = &st
		}
	}
	newCrawler(t, ts, o)
	defer ts.c.Close()
	ts.c.afterCommand = func(round uint64, i int) error {
		if round == 1 {
			applied = append(applied, i)
		}
		return nil
	}
	if err := ts.run(t, ctx, 0); !errors.Is(err, ErrExhausted) {
		t.Fatalf("resumed run: %v", err)
	}
	if len(applied) == 0 || applied[0] != stopped+1 {
		t.Fatalf("resumed update applied commands %v, want from %d on", applied, stopped+1)
	}
	if first == nil {
		t.Fatal("round 1 ended without statistics")
	}
	m.checkRound(t, *first)
	if first.NoIndex == 0 || first.Canonical == 0 {
		t.Errorf("round 1: %d noindex, %d canonical: the test should cover both", first.NoIndex, first.Canonical)
	}
	m.check(t, ts.db.Store())
}

// TestRefetchDirectives crawls a changing web with refetch on, its pages'
// directives changing from one fetch to the next: the crawl database ends
// with each page's as its last fetch with a body gave them (a 304 keeps
// them; a refetch that names none clears them), and every round's
// statistics count them as its results did.
func TestRefetchDirectives(t *testing.T) {
	sim, err := websim.Start(websim.Options{Web: synth.Options{Hosts: 8, Pages: 6, Seed: 5, IPs: 4, Profile: synth.Clean, Changes: true},
		TimeScale: 100 * 86400, DNSAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ts := &testSite{dir: t.TempDir(), sim: sim}
	ts.db = openDB(t, ts.dir)
	t.Cleanup(func() { ts.db.Close() })
	m := newSignalModel()
	ts.onResult = m.hook
	r := plan.Refetch{Interval: 300 * time.Millisecond, Adaptive: true, Min: 200 * time.Millisecond, Max: 2 * time.Second}
	newCrawler(t, ts, Options{Width: 1000, PerHost: 10, HostDelay: 10 * time.Millisecond, Refetch: r, OnRound: func(st RoundStats) { m.checkRound(t, st) }})
	t.Cleanup(func() { ts.c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := ts.c.Seed(ctx, ts.seeds()); err != nil {
		t.Fatal(err)
	}
	if err := ts.run(t, ctx, 25); err != nil {
		t.Fatalf("run: %v", err)
	}
	n := m.check(t, ts.db.Store())
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Logf("%d pages with directives; refetches cleared %d records and changed %d; %d answered 304", n, m.cleared, m.changed, ts.f.Stats().NotModified)
	if m.cleared == 0 || m.changed == 0 || ts.f.Stats().NotModified == 0 {
		t.Errorf("refetches cleared %d records and changed %d, %d answered 304: the test should see each", m.cleared, m.changed, ts.f.Stats().NotModified)
	}
}

package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openT(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func applyT(t testing.TB, s *Store, index uint64, b *Batch) *Result {
	t.Helper()
	cmd, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Apply(index, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil {
		t.Fatalf("command %d rejected: %v", index, res.Err)
	}
	return res
}

func TestSplitURL(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"http://h1.us.test/", true},
		{"http://h1.us.test:8080/p/1.html?sid=1", true},
		{"https://a-b.example/x", true},
		{"http://H1.us.test/", false},
		{"HTTP://h1.us.test/", false},
		{"http://h1.us.test", false},
		{"http://h1.us.test/#frag", false},
		{"http://user@h1.us.test/", false},
		{"http://h1.us.test:0/", false},
		{"http://h1.us.test:99999/", false},
		{"http://h1.us.test:08/", false},
		{"ftp://h1.us.test/", false},
		{"http:///x", false},
		{"http://a..b/", false},
		{"http://h1.us.test/a b", false},
		{"http://h1.us.test/" + strings.Repeat("a", MaxURLLen), false},
		{"http://[2001:db8::1]/", true},
		{"https://[::1]:8443/x?y", true},
		{"http://[::ffff:c000:201]/", true},
		{"http://[2001:DB8::1]/", false},
		{"http://[::ffff:192.0.2.1]/", false},
		{"http://[fe80::1%25eth0]/", false},
		{"http://[::1/", false},
		{"http://[1::2::3]/", false},
		{"http://[]/", false},
		{"http://[::1]:0/", false},
	} {
		p, ok := splitURL(c.in)
		if ok != c.ok {
			t.Errorf("splitURL(%q) ok = %v, want %v", c.in, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		key := p.urlKey(nil)
		i := bytes.IndexByte(key, 0)
		back, ok := urlFromTail(key[1:i], key[i+1:])
		if !ok || back != c.in {
			t.Errorf("key of %q gives back %q", c.in, back)
		}
	}
	// One host's URLs are contiguous and ordered after a shorter host name's.
	k1, _ := splitURL("http://h1.us.test/z")
	k2, _ := splitURL("http://h1.us.test:81/a")
	k3, _ := splitURL("http://x.h1.us.test/a")
	a, b, c := k1.urlKey(nil), k2.urlKey(nil), k3.urlKey(nil)
	if !(bytes.Compare(a, b) < 0 && bytes.Compare(b, c) < 0) {
		t.Errorf("keys out of host order: %q %q %q", a, b, c)
	}
}

// model is the reference: a plain map with the same semantics.
type model struct {
	urls     map[string]*URLRecord
	gen      map[uint64]map[string]bool
	sent     []uint64 // FIFO
	outbox   map[string][]byte
	outSeq   uint64
	round    []byte
	fetched  map[string]uint64
	statuses map[Status]uint64
	// dueMade and refetched count the refetch cycles the random commands
	// went through: MakeDue applied, and final fetches of due URLs.
	dueMade, refetched int
	// parks counts the URLs parked (Batch.Park applied).
	parks int
}

func newModel() *model {
	return &model{urls: map[string]*URLRecord{}, gen: map[uint64]map[string]bool{}, outbox: map[string][]byte{}, fetched: map[string]uint64{}, statuses: map[Status]uint64{}}
}

func hostOf(u string) string {
	p, _ := splitURL(u)
	return p.host
}

// inCycle returns a URL in the refetch cycle (scheduled, due, or
// generated), the first after u in URL order, or "" if none.
func (m *model) inCycle(u string) string {
	var first, after string
	for v, r := range m.urls {
		if !r.scheduled() && !r.Due && r.Status != StatusGenerated {
			continue
		}
		if first == "" || v < first {
			first = v
		}
		if v > u && (after == "" || v < after) {
			after = v
		}
	}
	if after != "" {
		return after
	}
	return first
}

func (m *model) move(r *URLRecord, to Status) {
	m.statuses[r.Status]--
	m.statuses[to]++
	r.Status = to
	if to != StatusUnfetched {
		r.Parked = false
	}
}

// randomOp adds one random operation to b and applies it to the model,
// returning the expected result.
func (m *model) randomOp(r *rand.Rand, b *Batch, urls []string, at time.Time) OpResult {
	u := urls[r.IntN(len(urls))]
	k := r.IntN(100)
	if refetchy := k == 77 || k == 78 || k >= 45 && k < 60 || k >= 73 && k < 77; refetchy && r.IntN(2) == 0 {
		// Half of the MakeDue, MarkGenerated and round fetches take a URL
		// in the refetch cycle, if there is one: URLs go round it.
		if v := m.inCycle(u); v != "" {
			u = v
		}
	}
	rec := m.urls[u]
	var res OpResult
	switch {
	case k < 35:
		cash := float64(r.IntN(8)) / 4
		depth := uint32(r.IntN(5))
		b.UpsertCash(u, cash, depth)
		if rec == nil {
			m.urls[u] = &URLRecord{URL: u, Status: StatusUnfetched, Cash: cash, Depth: depth, FP: Fingerprint(u)}
			m.statuses[StatusUnfetched]++
			return OpResult{New: true, Applied: true}
		}
		rec.Cash += cash
		rec.Depth = min(rec.Depth, depth)
		return OpResult{Applied: true}
	case k >= 42 && k < 45:
		cash := float64(r.IntN(8)) / 4
		if rec != nil && r.IntN(2) == 0 {
			cash = rec.Cash // all of it, as generate hands a URL over
		}
		b.HandOver(u, cash)
		if rec != nil && rec.Status == StatusUnfetched {
			rec.Cash -= min(cash, rec.Cash)
			if rec.Cash == 0 {
				delete(m.urls, u)
				m.statuses[StatusUnfetched]--
			}
			res.Applied = true
		}
	case k < 45:
		cash := float64(r.IntN(8)) / 4
		b.PutIfAbsent(u, cash, 2)
		if rec == nil {
			m.urls[u] = &URLRecord{URL: u, Status: StatusUnfetched, Cash: cash, Depth: 2, FP: Fingerprint(u)}
			m.statuses[StatusUnfetched]++
			return OpResult{New: true, Applied: true}
		}
	case k < 60:
		round := uint64(r.IntN(3) + 1)
		b.MarkGenerated(u, round)
		if rec != nil && rec.inFrontier() {
			m.move(rec, StatusGenerated)
			rec.Round = round
			if m.gen[round] == nil {
				m.gen[round] = map[string]bool{}
			}
			m.gen[round][u] = true
			res.Applied = true
		}
	case k < 65:
		b.Requeue(u)
		if rec != nil && rec.Status == StatusGenerated {
			delete(m.gen[rec.Round], u)
			if rec.Due {
				m.move(rec, StatusFetched)
			} else {
				m.move(rec, StatusUnfetched)
			}
			res.Applied = true
		}
	case k == 77 || k == 78:
		// A refetch comes due: the time is around the schedules' next
		// fetches (at - 1 s … at + 4 s), so that most are due, some not yet.
		due := at.Add(time.Duration(r.IntN(5000)-1000) * time.Millisecond)
		score := float64(r.IntN(16)) / 4
		b.MakeDue(u, due, score)
		if rec != nil && rec.scheduled() && !rec.NextFetch.After(due) {
			rec.Due, rec.DueScore = true, score
			res.Applied = true
			m.dueMade++
		}
	case k == 79:
		spend := r.Float64() * 2
		b.Revisit(u, spend)
		if rec != nil && rec.Status == StatusFetched {
			moved := min(spend, rec.Cash)
			rec.History += moved
			rec.Cash -= moved
			res.Applied = true
		}
	case k < 80:
		fr := FetchResult{URL: u, Status: Status(int(StatusFetched) + r.IntN(int(statusCount-StatusFetched))), HTTPStatus: 200, At: at, ContentFP: r.Uint64(), Retry: r.IntN(5) == 0}
		round := k >= 73
		if round {
			fr.Round, fr.Spend = uint64(r.IntN(3)+1), r.Float64()*2
			if rec != nil && rec.Status == StatusGenerated && r.IntN(2) == 0 {
				fr.Round, fr.Status = rec.Round, StatusFetched // the fetch of its round, a 2xx
			}
			if fr.Status == StatusFetched && r.IntN(2) == 0 {
				fr.Schedule = &Schedule{NextFetch: at.Add(time.Duration(r.IntN(3000)) * time.Millisecond), Interval: time.Duration(r.IntN(10)) * time.Hour,
					ETag: fmt.Sprintf(`"e%d"`, r.IntN(9)), LastModified: []string{"", "Wed, 21 Oct 2015 07:28:00 GMT"}[r.IntN(2)], Change: Change(r.IntN(int(changeCount))),
					Watched: []time.Duration{0, time.Duration(r.IntN(5000)) * time.Second}[r.IntN(2)]}
				if r.IntN(8) == 0 {
					fr.Schedule.NextFetch = time.Time{} // never again
				}
			}
			b.RecordRoundFetch(fr)
		} else {
			b.RecordFetch(fr)
		}
		if round && (rec == nil || rec.Status != StatusGenerated || rec.Round != fr.Round) {
			return res
		}
		if rec != nil {
			if rec.Status == StatusGenerated {
				delete(m.gen[rec.Round], u)
			}
			rec.HTTPStatus, rec.FetchedAt = fr.HTTPStatus, at
			if fr.Retry {
				rec.Retries++
				if rec.Due {
					m.move(rec, StatusFetched)
				} else {
					m.move(rec, StatusUnfetched)
				}
			} else {
				moved := rec.Cash
				if round {
					moved = min(fr.Spend, rec.Cash)
				}
				rec.History += moved
				rec.Cash -= moved
				rec.ContentFP = fr.ContentFP
				m.move(rec, fr.Status)
				if !rec.Due {
					m.fetched[hostOf(u)]++
				} else {
					m.refetched++
				}
				rec.Due, rec.DueScore = false, 0
				if sc := fr.Schedule; sc != nil {
					rec.NextFetch, rec.Interval, rec.ETag, rec.LastModified = sc.NextFetch.Truncate(time.Millisecond), sc.Interval, sc.ETag, sc.LastModified
					rec.Watched = sc.Watched
					if sc.NextFetch.IsZero() {
						rec.NextFetch = time.Time{}
					}
					switch sc.Change {
					case ChangeChanged:
						rec.Changed++
					case ChangeUnchanged:
						rec.Unchanged++
					}
				}
			}
			res.Applied = true
		}
	case k < 88:
		fp := uint64(r.IntN(12))
		b.SentCheckAdd(fp, 5)
		if slices.Contains(m.sent, fp) {
			return OpResult{Present: true}
		}
		m.sent = append(m.sent, fp)
		if len(m.sent) > 5 {
			m.sent = m.sent[1:]
		}
		res.Applied = true
	case k < 93:
		site := []string{"eu", "us"}[r.IntN(2)]
		payload := []byte(fmt.Sprintf("put %d", r.IntN(1000)))
		b.OutboxEnqueue(site, payload)
		m.outSeq++
		m.outbox[fmt.Sprintf("%s/%d", site, m.outSeq)] = payload
		return OpResult{Applied: true, Seq: m.outSeq}
	case k < 97:
		site := []string{"eu", "us"}[r.IntN(2)]
		seq := uint64(r.IntN(int(m.outSeq) + 2))
		b.OutboxAck(site, seq)
		key := fmt.Sprintf("%s/%d", site, seq)
		if _, ok := m.outbox[key]; ok {
			delete(m.outbox, key)
			res.Applied = true
		}
	case k == 97:
		b.Park(u)
		if rec != nil && rec.Status == StatusUnfetched && !rec.Parked {
			rec.Parked = true
			res.Applied = true
			m.parks++
		}
	default:
		m.round = []byte(fmt.Sprintf("round %d", r.IntN(100)))
		b.PutRound(m.round)
		res.Applied = true
	}
	return res
}

// check compares the store with the model in full.
func (m *model) check(t *testing.T, s *Store) {
	t.Helper()
	var got []URLRecord
	if err := s.ScanURLs(func(r URLRecord) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(m.urls) {
		t.Fatalf("store has %d URLs, model %d", len(got), len(m.urls))
	}
	for _, g := range got {
		w := m.urls[g.URL]
		if w == nil {
			t.Fatalf("store has %s, model does not", g.URL)
		}
		if g != *w {
			t.Fatalf("%s:\n store %+v\n model %+v", g.URL, g, *w)
		}
	}
	// The whole frontier: every unfetched URL once, hosts by best score,
	// each host's URLs by score.
	fr, err := s.Frontier(FrontierQuery{Width: 1 << 20, PerHost: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var want []*URLRecord
	var scheduled []string
	for _, r := range m.urls {
		if r.inFrontier() {
			want = append(want, r)
		}
		if r.scheduled() {
			scheduled = append(scheduled, r.URL)
		}
	}
	if len(fr) != len(want) {
		t.Fatalf("frontier has %d URLs, model %d unfetched or due", len(fr), len(want))
	}
	seen := map[string]bool{}
	best := map[string]float64{}
	for i, e := range fr {
		r := m.urls[e.URL]
		if r == nil || !r.inFrontier() || r.frontierScore() != e.Score || r.Depth != e.Depth || seen[e.URL] || e.Refetch != r.Due {
			t.Fatalf("frontier entry %d %+v does not match model %+v", i, e, r)
		}
		seen[e.URL] = true
		if i > 0 && fr[i-1].Host == e.Host && fr[i-1].Score < e.Score {
			t.Fatalf("frontier of %s not in score order at %d", e.Host, i)
		}
		if _, ok := best[e.Host]; !ok {
			best[e.Host] = e.Score
		}
	}
	var lastBest = math.Inf(1)
	var lastHost string
	for _, e := range fr {
		if e.Host != lastHost {
			if b := best[e.Host]; b > lastBest {
				t.Fatalf("host %s (best %v) after a host with best %v", e.Host, b, lastBest)
			} else {
				lastBest = b
			}
			lastHost = e.Host
		}
	}
	perHost := map[string]uint64{}
	for _, e := range fr {
		perHost[e.Host]++
	}
	for host, b := range best {
		st, err := s.HostStats(host)
		if err != nil {
			t.Fatal(err)
		}
		if st.Best != b || st.Frontier != perHost[host] {
			t.Fatalf("host %s: stored best %v, frontier best %v; frontier size %d, entries %d", host, st.Best, b, st.Frontier, perHost[host])
		}
	}
	for host, n := range m.fetched {
		st, _ := s.HostStats(host)
		if st.Fetched != n {
			t.Fatalf("host %s: fetched %d, model %d", host, st.Fetched, n)
		}
	}
	// The refetch index: every scheduled URL once, by time.
	due, err := s.DueURLs(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var dueURLs []string
	for i, d := range due {
		r := m.urls[d.URL]
		if r == nil || !r.scheduled() || !r.NextFetch.Equal(d.NextFetch) || i > 0 && d.NextFetch.Before(due[i-1].NextFetch) {
			t.Fatalf("due entry %d %+v does not match model %+v", i, d, r)
		}
		dueURLs = append(dueURLs, d.URL)
	}
	slices.Sort(dueURLs)
	slices.Sort(scheduled)
	if !slices.Equal(dueURLs, scheduled) {
		t.Fatalf("refetch index %v, model's scheduled URLs %v", dueURLs, scheduled)
	}
	if c := s.Counts(); c.Scheduled != uint64(len(scheduled)) {
		t.Fatalf("Counts().Scheduled %d, model %d", c.Scheduled, len(scheduled))
	}
	c := s.Counts()
	unfetched := 0 // Counts.Frontier: the unfetched URLs (not the due ones, not the parked ones)
	for _, r := range want {
		if r.Status == StatusUnfetched {
			unfetched++
		}
	}
	parked := 0
	for _, r := range m.urls {
		if r.Parked {
			parked++
		}
	}
	if c.Parked != uint64(parked) {
		t.Fatalf("Counts().Parked %d, model %d", c.Parked, parked)
	}
	if c.URLs != uint64(len(m.urls)) || c.Frontier != uint64(unfetched) || c.Sent != uint64(len(m.sent)) || c.Outbox != uint64(len(m.outbox)) {
		t.Fatalf("counts %+v; model %d urls, %d unfetched, %d sent, %d outbox", c, len(m.urls), unfetched, len(m.sent), len(m.outbox))
	}
	for st, n := range m.statuses {
		if c.ByStatus[st] != n {
			t.Fatalf("count of %v: %d, model %d", st, c.ByStatus[st], n)
		}
	}
	for _, fp := range m.sent {
		if ok, _ := s.SentContains(fp); !ok {
			t.Fatalf("sent cache lost %d", fp)
		}
	}
	for round, set := range m.gen {
		g, err := s.Generated(round, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		var w []string
		for u, ok := range set {
			if ok {
				w = append(w, u)
			}
		}
		slices.Sort(g)
		slices.Sort(w)
		if !slices.Equal(g, w) {
			t.Fatalf("generated in round %d: %v, model %v", round, g, w)
		}
	}
	if rs, _ := s.Round(); !bytes.Equal(rs, m.round) {
		t.Fatalf("round state %q, model %q", rs, m.round)
	}
}

// TestAgainstModel applies random commands and compares the store with a
// plain in-memory model after each, reopening the store now and then.
func TestAgainstModel(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 99))
			var urls []string
			for h := range 6 {
				for p := range 8 {
					urls = append(urls, fmt.Sprintf("http://h%d.%s.test/p/%d.html", h, []string{"us", "eu"}[h%2], p))
				}
			}
			dir := t.TempDir()
			s := openT(t, dir, Options{})
			defer func() { s.Close() }()
			m := newModel()
			at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
			for idx := uint64(1); idx <= 250; idx++ {
				b := NewBatch()
				var want []OpResult
				for range 1 + r.IntN(30) {
					want = append(want, m.randomOp(r, b, urls, at))
				}
				res := applyT(t, s, idx, b)
				for i := range want {
					if res.Ops[i] != want[i] {
						t.Fatalf("command %d op %d: result %+v, model %+v", idx, i, res.Ops[i], want[i])
					}
				}
				m.check(t, s)
				if idx%50 == 0 {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					s = openT(t, dir, Options{})
					if s.AppliedIndex() != idx {
						t.Fatalf("applied index %d after reopen, want %d", s.AppliedIndex(), idx)
					}
					m.check(t, s)
				}
			}
			// The random commands went through refetches: scheduled URLs
			// came due, and due URLs were fetched again.
			if m.dueMade == 0 || m.refetched == 0 || m.parks == 0 {
				t.Errorf("%d URLs made due, %d refetched, %d parked: the commands did not exercise refetches and parking", m.dueMade, m.refetched, m.parks)
			}
			t.Logf("%d URLs made due, %d refetched, %d parked", m.dueMade, m.refetched, m.parks)
		})
	}
}

// frontierStore opens a store whose frontier holds hosts h0..h(hosts-1).test
// with pages URLs each, URL p of host h scored h×100+p.
func frontierStore(t *testing.T, hosts, pages int) *Store {
	t.Helper()
	s := openT(t, t.TempDir(), Options{})
	b := NewBatch()
	for h := range hosts {
		for p := range pages {
			b.UpsertCash(fmt.Sprintf("http://h%d.test/%d", h, p), float64(h*100+p), 1)
		}
	}
	applyT(t, s, 1, b)
	return s
}

func TestFrontierLimits(t *testing.T) {
	s := frontierStore(t, 20, 30)
	defer s.Close()
	// Host h19 backs off.
	b := NewBatch()
	b.PutHost("h19.test", HostRecord{BackoffUntil: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)})
	applyT(t, s, 2, b)
	fr, err := s.Frontier(FrontierQuery{Width: 25, PerHost: 3, Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if len(fr) != 25 {
		t.Fatalf("%d entries, want 25", len(fr))
	}
	per := map[string]int{}
	for _, e := range fr {
		per[e.Host]++
	}
	for h, n := range per {
		if n > 3 || h == "h19.test" {
			t.Fatalf("host %s: %d entries", h, n)
		}
	}
	if fr[0].Host != "h18.test" || fr[0].Score != 1829 || fr[1].Score != 1828 || fr[3].Host != "h17.test" {
		t.Fatalf("frontier starts %+v", fr[:4])
	}
	if _, err := s.Frontier(FrontierQuery{Width: 0, PerHost: 1}); !errors.Is(err, ErrBadOp) {
		t.Fatalf("width 0: %v", err)
	}
}

// TestHostFrontierHandOver: a host's frontier is listed best first with
// each URL's cash; handing a URL over with all its cash forgets it (it can
// come back as new), with part of it leaves the rest in the frontier, and
// a URL that is not unfetched keeps its cash.
func TestHostFrontierHandOver(t *testing.T) {
	s := frontierStore(t, 3, 5)
	defer s.Close()
	fr, err := s.HostFrontier("h1.test", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(fr) != 5 || fr[0].URL != "http://h1.test/4" || fr[0].Score != 104 || fr[4].Score != 100 {
		t.Fatalf("h1's frontier: %+v", fr)
	}
	if fr, _ := s.HostFrontier("h1.test", 2); len(fr) != 2 {
		t.Fatalf("limit 2: %d entries", len(fr))
	}
	b := NewBatch()
	for _, e := range fr {
		b.HandOver(e.URL, e.Score)
	}
	b.HandOver("http://h2.test/0", 50) // half its cash
	b.MarkGenerated("http://h0.test/1", 1)
	b.HandOver("http://h0.test/1", 1)
	res := applyT(t, s, 2, b)
	for i, r := range res.Ops[:6] {
		if !r.Applied {
			t.Errorf("hand-over %d not applied", i)
		}
	}
	if res.Ops[7].Applied {
		t.Error("a generated URL was handed over")
	}
	if fr, _ := s.HostFrontier("h1.test", 100); len(fr) != 0 {
		t.Fatalf("h1's frontier after its hand-over: %+v", fr)
	}
	if ok, _ := s.Contains("http://h1.test/3"); ok {
		t.Fatal("a URL handed over with all its cash is still known")
	}
	if r, ok, _ := s.Get("http://h2.test/0"); !ok || r.Cash != 150 || r.Status != StatusUnfetched {
		t.Fatalf("h2.test/0 after half its cash went: %+v %v", r, ok)
	}
	if r, _, _ := s.Get("http://h0.test/1"); r.Cash != 1 || r.Status != StatusGenerated {
		t.Fatalf("generated h0.test/1 after a hand-over: %+v", r)
	}
	c := s.Counts()
	if c.URLs != 10 || c.Frontier != 9 {
		t.Fatalf("counts after the hand-over: %+v", c)
	}
	top, err := s.Frontier(FrontierQuery{Width: 100, PerHost: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		if e.Host == "h1.test" {
			t.Fatalf("h1 still in the frontier: %+v", e)
		}
	}
	b = NewBatch()
	b.UpsertCash("http://h1.test/3", 7, 2) // owned again: it comes back as new
	if res := applyT(t, s, 3, b); !res.Ops[0].New {
		t.Fatal("a forgotten URL did not come back as new")
	}
}

func TestFrontierPerHostFor(t *testing.T) {
	s := frontierStore(t, 6, 10)
	defer s.Close()
	limits := map[string]int{"h5.test": 0, "h4.test": 1, "h3.test": 100, "h2.test": -3, "h1.test": 2}
	fr, err := s.Frontier(FrontierQuery{Width: 100, PerHost: 4, PerHostFor: func(h string) int {
		if n, ok := limits[h]; ok {
			return n
		}
		return 4
	}})
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, e := range fr {
		per[e.Host]++
	}
	// 0 or less skips a host; a limit above PerHost is cut to it.
	want := map[string]int{"h4.test": 1, "h3.test": 4, "h1.test": 2, "h0.test": 4}
	if !maps.Equal(per, want) {
		t.Fatalf("entries per host %v, want %v", per, want)
	}
	if fr[0].Host != "h4.test" || fr[0].Score != 409 {
		t.Errorf("frontier starts %+v, want h4's best URL (h5 skipped)", fr[0])
	}
}

func TestReplaySkipsApplied(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	b := NewBatch()
	b.UpsertCash("http://a.test/", 1, 0)
	cmd, _ := b.Encode()
	cmd = slices.Clone(cmd)
	for i := range 3 {
		res, err := s.Apply(7, cmd)
		if err != nil {
			t.Fatal(err)
		}
		if res.Skipped != (i > 0) {
			t.Fatalf("apply %d: skipped %v", i, res.Skipped)
		}
	}
	if res, _ := s.Apply(5, cmd); !res.Skipped {
		t.Fatal("an older index was applied")
	}
	rec, _, _ := s.Get("http://a.test/")
	if rec.Cash != 1 {
		t.Fatalf("cash %v after replays, want 1", rec.Cash)
	}
}

func TestBadCommands(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	b := NewBatch()
	b.UpsertCash("http://a.test/", 1, 0)
	b.OutboxEnqueue("eu", []byte("x"))
	good, _ := b.Encode()
	good = slices.Clone(good)
	applyT(t, s, 1, func() *Batch { b := NewBatch(); b.UpsertCash("http://z.test/", 2, 0); return b }())
	before := s.Counts()
	cases := map[string][]byte{
		"empty":       nil,
		"bad magic":   append([]byte{0}, good[1:]...),
		"flipped bit": func() []byte { c := slices.Clone(good); c[5] ^= 1; return c }(),
		"truncated":   good[:len(good)-3],
		"oversized":   make([]byte, MaxCommandBytes+1),
	}
	idx := uint64(2)
	for name, cmd := range cases {
		res, err := s.Apply(idx, cmd)
		if err != nil {
			t.Fatalf("%s: storage error %v", name, err)
		}
		if res.Err == nil {
			t.Fatalf("%s: accepted", name)
		}
		if !errors.Is(res.Err, ErrCorruptCommand) && !errors.Is(res.Err, ErrCommandTooLarge) {
			t.Fatalf("%s: error %v", name, res.Err)
		}
		if s.AppliedIndex() != idx {
			t.Fatalf("%s: applied index not advanced", name)
		}
		idx++
	}
	if after := s.Counts(); after.URLs != before.URLs || after.Outbox != before.Outbox {
		t.Fatalf("rejected commands changed the store: %+v → %+v", before, after)
	}
	if _, ok, _ := s.Get("http://a.test/"); ok {
		t.Fatal("a rejected command wrote a URL")
	}
	// Builders refuse bad input and say what.
	for name, f := range map[string]func(*Batch){
		"bad url":      func(b *Batch) { b.UpsertCash("http://A.test/x", 1, 0) },
		"negative":     func(b *Batch) { b.UpsertCash("http://a.test/", -1, 0) },
		"nan":          func(b *Batch) { b.PutIfAbsent("http://a.test/", math.NaN(), 0) },
		"bad status":   func(b *Batch) { b.RecordFetch(FetchResult{URL: "http://a.test/", Status: StatusGenerated}) },
		"bad host":     func(b *Batch) { b.PutHost("a..b", HostRecord{}) },
		"zero cap":     func(b *Batch) { b.SentCheckAdd(1, 0) },
		"site with 0":  func(b *Batch) { b.OutboxEnqueue("e\x00u", nil) },
		"bad coords":   func(b *Batch) { b.PutDomain("a.test", 91, 0) },
		"huge payload": func(b *Batch) { b.OutboxEnqueue("eu", make([]byte, maxPayload+1)) },
	} {
		b := NewBatch()
		f(b)
		if _, err := b.Encode(); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func FuzzDecodeCommand(f *testing.F) {
	b := NewBatch()
	b.UpsertCash("http://a.test/", 1, 0)
	b.RecordFetch(FetchResult{URL: "http://a.test/", Status: StatusFetched})
	b.PutHost("a.test", HostRecord{Robots: []byte("User-agent: *")})
	b.PutHost("b.test", HostRecord{RobotsStatus: 200, RobotsUnreachableSince: time.UnixMilli(1)})
	b.SentCheckAdd(3, 10)
	b.PutDomain("a.test", 1, 2)
	b.Revisit("http://a.test/", 0.5)
	b.FetchedElsewhere("http://b.test/x", StatusRedirect)
	b.SetDirectives("http://a.test/", Directives{NoIndex: true, Canonical: "http://a.test/c"})
	cmd, _ := b.Encode()
	f.Add(slices.Clone(cmd))
	f.Add([]byte{cmdMagic, cmdVersion, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, cmd []byte) {
		ops, err := decodeCommand(cmd, nil)
		if err == nil {
			for _, o := range ops {
				if o.t == 0 || o.t >= opCount {
					t.Fatalf("decoded op type %d", o.t)
				}
			}
		}
	})
}

// TestStorageFailure injects write errors under Pebble in a child process:
// the node stops (Pebble gives up on a failed WAL write) after logging which
// file failed, and after reopening on a good disk every batch is either whole
// or absent.
func TestStorageFailure(t *testing.T) {
	if dir := os.Getenv("STORE_FAILURE_CHILD"); dir != "" {
		storageFailureChild(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStorageFailure$")
	cmd.Env = append(os.Environ(), "STORE_FAILURE_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child did not stop with an error: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("disk write failed")) || !bytes.Contains(out, []byte("injected error")) {
		t.Fatalf("child's output does not say what failed:\n%.2000s", out)
	}
	s := openT(t, dir, Options{})
	defer s.Close()
	perHost := map[string]int{}
	if err := s.ScanURLs(func(r URLRecord) error { perHost[hostOf(r.URL)]++; return nil }); err != nil {
		t.Fatal(err)
	}
	total := 0
	for h, n := range perHost {
		if n != 500 {
			t.Fatalf("batch for %s is half there: %d of 500 URLs", h, n)
		}
		total += n
	}
	if c := s.Counts(); c.URLs != uint64(total) || total < 500 {
		t.Fatalf("counters say %d URLs, records %d", c.URLs, total)
	}
	if _, err := s.Apply(s.AppliedIndex()+1, mustEncode(t, func(b *Batch) { b.UpsertCash("http://after.test/", 1, 0) })); err != nil {
		t.Fatalf("reopened store refuses writes: %v", err)
	}
}

func mustEncode(t testing.TB, f func(*Batch)) []byte {
	b := NewBatch()
	f(b)
	cmd, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(cmd)
}

func storageFailureChild(dir string) {
	toggle := &errorfs.Toggle{Injector: errorfs.ErrInjected}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := Open(dir, Options{FS: errorfs.Wrap(vfs.Default, toggle), Logger: log, MemTableBytes: 1 << 20})
	if err != nil {
		fmt.Println("child: open:", err)
		os.Exit(4)
	}
	batch := func(i int) []byte {
		b := NewBatch()
		for j := range 500 {
			b.UpsertCash(fmt.Sprintf("http://b%d.test/%d", i, j), 1, 0)
		}
		cmd, _ := b.Encode()
		return cmd
	}
	for i := 1; i <= 3; i++ {
		if _, err := s.Apply(uint64(i), batch(i)); err != nil {
			fmt.Println("child: apply before failure:", err)
			os.Exit(4)
		}
	}
	if err := s.Sync(); err != nil {
		os.Exit(4)
	}
	toggle.On()
	for i := 4; i < 10_000; i++ {
		if _, err := s.Apply(uint64(i), batch(i)); err != nil {
			fmt.Println("child: stopping:", err)
			os.Exit(3)
		}
		if err := s.Sync(); err != nil {
			fmt.Println("child: stopping: sync:", err)
			os.Exit(3)
		}
	}
	fmt.Println("child: no failure")
	os.Exit(0)
}

// TestApplyBatchSameAsOneByOne applies one random command sequence one
// command at a time and in random groups: results and state must agree.
func TestApplyBatchSameAsOneByOne(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var urls []string
	for h := range 5 {
		for p := range 10 {
			urls = append(urls, fmt.Sprintf("http://h%d.test/p/%d", h, p))
		}
	}
	m := newModel()
	var cmds [][]byte
	for i := range 120 {
		b := NewBatch()
		for range 1 + r.IntN(20) {
			m.randomOp(r, b, urls, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		}
		cmd, _ := b.Encode()
		cmd = slices.Clone(cmd)
		if i%17 == 5 {
			cmd[len(cmd)/2] ^= 0x55 // a corrupt one now and then
		}
		cmds = append(cmds, cmd)
	}
	one := openT(t, t.TempDir(), Options{})
	defer one.Close()
	many := openT(t, t.TempDir(), Options{})
	defer many.Close()
	var want []*Result
	for i, cmd := range cmds {
		res, err := one.Apply(uint64(i+1), cmd)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res)
	}
	var got []*Result
	for i := 0; i < len(cmds); {
		n := 1 + r.IntN(6)
		var es []Entry
		for j := i; j < min(i+n, len(cmds)); j++ {
			es = append(es, Entry{Index: uint64(j + 1), Cmd: cmds[j]})
		}
		if i > 0 && r.IntN(4) == 0 { // a replayed entry in front is skipped
			es = append([]Entry{{Index: uint64(i), Cmd: cmds[i-1]}}, es...)
		}
		res, err := many.ApplyBatch(es)
		if err != nil {
			t.Fatal(err)
		}
		for _, rr := range res {
			if !rr.Skipped {
				got = append(got, rr)
			}
		}
		i += n
	}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i := range want {
		if (want[i].Err == nil) != (got[i].Err == nil) || !slices.Equal(want[i].Ops, got[i].Ops) || want[i].Index != got[i].Index {
			t.Fatalf("command %d: batched result %+v, one by one %+v", i+1, got[i], want[i])
		}
	}
	scan := func(s *Store) []URLRecord {
		var out []URLRecord
		s.ScanURLs(func(r URLRecord) error { out = append(out, r); return nil })
		return out
	}
	if !slices.Equal(scan(one), scan(many)) {
		t.Fatal("stores differ after batched apply")
	}
	f1, _ := one.Frontier(FrontierQuery{Width: 1000, PerHost: 1000})
	f2, _ := many.Frontier(FrontierQuery{Width: 1000, PerHost: 1000})
	if !slices.Equal(f1, f2) {
		t.Fatal("frontiers differ after batched apply")
	}
	c1, c2 := one.Counts(), many.Counts()
	if c1.URLs != c2.URLs || c1.Frontier != c2.Frontier || c1.Sent != c2.Sent || c1.Outbox != c2.Outbox || c1.Applied != c2.Applied {
		t.Fatalf("counts differ: %+v vs %+v", c1, c2)
	}
}

// TestURLFilter: never a false negative, across growth, and few false
// positives; a reopened store rebuilds it from its keys.
func TestURLFilter(t *testing.T) {
	f := &urlFilter{layers: []*bloomLayer{newBloomLayer(1000)}}
	for i := range 5000 { // five times the first layer: it must grow
		f.add([]byte(fmt.Sprintf("key-%d", i)))
	}
	if len(f.layers) < 2 {
		t.Fatalf("filter did not grow: %d layers", len(f.layers))
	}
	for i := range 5000 {
		if !f.mayContain([]byte(fmt.Sprintf("key-%d", i))) {
			t.Fatalf("false negative for key-%d", i)
		}
	}
	fp := 0
	for i := range 10000 {
		if f.mayContain([]byte(fmt.Sprintf("other-%d", i))) {
			fp++
		}
	}
	if fp > 300 {
		t.Fatalf("%d false positives in 10,000", fp)
	}
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	applyT(t, s, 1, upsertBatch(0, 100))
	s.Close()
	s = openT(t, dir, Options{})
	defer s.Close()
	res := applyT(t, s, 2, upsertBatch(50, 100)) // half known, half new
	for i, r := range res.Ops {
		if r.New != (i >= 50) {
			t.Fatalf("op %d: new %v after reopen", i, r.New)
		}
	}
}

func upsertBatch(from, n int) *Batch {
	b := NewBatch()
	for i := from; i < from+n; i++ {
		b.UpsertCash(fmt.Sprintf("http://h%d.test/p/%d", i%9, i), 1, 0)
	}
	return b
}

// TestRevisit: a revisit moves at most the URL's cash to its history, and
// only for a fetched URL.
func TestRevisit(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	b := NewBatch()
	for _, u := range []string{"http://a.test/f", "http://a.test/u", "http://a.test/e"} {
		b.UpsertCash(u, 1, 0)
	}
	b.RecordFetch(FetchResult{URL: "http://a.test/f", Status: StatusFetched, HTTPStatus: 200})
	b.RecordFetch(FetchResult{URL: "http://a.test/e", Status: StatusError, HTTPStatus: 500})
	b.UpsertCash("http://a.test/f", 2, 1)
	b.UpsertCash("http://a.test/e", 2, 1)
	applyT(t, s, 1, b)
	tests := []struct {
		url           string
		spend         float64
		applied       bool
		cash, history float64
	}{
		{"http://a.test/f", 0.5, true, 1.5, 1.5},
		{"http://a.test/f", 4, true, 0, 3}, // at most the cash it has
		{"http://a.test/u", 0.5, false, 1, 0},
		{"http://a.test/e", 0.5, false, 2, 1},
		{"http://a.test/none", 0.5, false, 0, 0},
	}
	for i, tc := range tests {
		b := NewBatch()
		b.Revisit(tc.url, tc.spend)
		res := applyT(t, s, uint64(i+2), b)
		if res.Ops[0].Applied != tc.applied {
			t.Errorf("revisit %s %v: applied %v", tc.url, tc.spend, res.Ops[0].Applied)
		}
		rec, _, err := s.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Cash != tc.cash || rec.History != tc.history {
			t.Errorf("revisit %s %v: cash %v history %v, want %v %v", tc.url, tc.spend, rec.Cash, rec.History, tc.cash, tc.history)
		}
	}
	b = NewBatch()
	b.Revisit("http://a.test/f", math.NaN())
	if _, err := b.Encode(); !errors.Is(err, ErrBadOp) {
		t.Fatalf("NaN spend: %v", err)
	}
}

// TestGuardAndDeletePrefix checks that a guard makes its whole command
// conditional (seeing the batch's earlier commands and the command's own
// earlier operations), and that a prefix deletion removes exactly its keys,
// also when the same batch writes them before or after it.
func TestGuardAndDeletePrefix(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	user := func(k string) string {
		v, err := s.User(k)
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	applyT(t, s, 1, func() *Batch {
		b := NewBatch()
		b.PutUser("own/1", []byte("n1#0"))
		b.PutUser("r/1/a", []byte("x"))
		b.PutUser("r/1/b", []byte("y"))
		b.PutUser("r/10/a", []byte("z"))
		return b
	}())
	type step struct {
		name    string
		build   func(b *Batch)
		guarded bool // rejected with ErrGuard
	}
	idx := uint64(2)
	for _, c := range []step{
		{"guard holds", func(b *Batch) { b.Guard("own/1", []byte("n1#0")); b.PutUser("res/1", []byte("a")) }, false},
		{"guard fails: other value", func(b *Batch) { b.Guard("own/1", []byte("n2#1")); b.PutUser("res/1", []byte("b")) }, true},
		{"guard on absence holds", func(b *Batch) { b.Guard("done/1", nil); b.PutUser("done/1", []byte("d")) }, false},
		{"guard on absence fails", func(b *Batch) { b.PutUser("res/2", []byte("c")); b.Guard("done/1", nil) }, true},
		{"guard sees own earlier write", func(b *Batch) { b.PutUser("own/2", []byte("n3")); b.Guard("own/2", []byte("n3")) }, false},
		{"delete prefix, then guard on a deleted key", func(b *Batch) { b.DeleteUserPrefix("r/1/"); b.Guard("r/1/a", nil) }, false},
	} {
		b := NewBatch()
		c.build(b)
		cmd, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Apply(idx, cmd)
		idx++
		if err != nil {
			t.Fatal(err)
		}
		if got := errors.Is(res.Err, ErrGuard); got != c.guarded {
			t.Fatalf("%s: result %v, want guarded=%v", c.name, res.Err, c.guarded)
		}
	}
	for k, want := range map[string]string{"res/1": "a", "res/2": "", "done/1": "d", "own/2": "n3", "r/1/a": "", "r/1/b": "", "r/10/a": "z"} {
		if got := user(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// One ApplyBatch: a write, a prefix deletion over it, a write after it,
	// and a later command guarding on what the earlier ones left.
	var entries []Entry
	for _, f := range []func(b *Batch){
		func(b *Batch) { b.PutUser("q/1", []byte("1")); b.PutUser("q/2", []byte("2")) },
		func(b *Batch) { b.DeleteUserPrefix("q/"); b.PutUser("q/3", []byte("3")) },
		func(b *Batch) { b.Guard("q/1", nil); b.Guard("q/3", []byte("3")); b.PutUser("ok", []byte("yes")) },
		func(b *Batch) { b.Guard("q/2", []byte("2")); b.PutUser("bad", []byte("yes")) },
	} {
		b := NewBatch()
		f(b)
		entries = append(entries, Entry{Index: idx, Cmd: mustEncodeBatch(t, b)})
		idx++
	}
	res, err := s.ApplyBatch(entries)
	if err != nil {
		t.Fatal(err)
	}
	for i, wantGuarded := range []bool{false, false, false, true} {
		if got := errors.Is(res[i].Err, ErrGuard); got != wantGuarded {
			t.Errorf("batch command %d: %v, want guarded=%v", i+1, res[i].Err, wantGuarded)
		}
	}
	for k, want := range map[string]string{"q/1": "", "q/2": "", "q/3": "3", "ok": "yes", "bad": ""} {
		if got := user(k); got != want {
			t.Errorf("after batch: %s = %q, want %q", k, got, want)
		}
	}
	// A big node-layer value (staged results) round-trips; too big is refused.
	big := bytes.Repeat([]byte("v"), 4<<20)
	b := NewBatch()
	b.PutUser("big", big)
	applyT(t, s, idx, b)
	if got := user("big"); len(got) != len(big) {
		t.Fatalf("big value: %d bytes back", len(got))
	}
	b = NewBatch()
	b.PutUser("huge", make([]byte, MaxUserValue+1))
	if _, err := b.Encode(); !errors.Is(err, ErrBadOp) {
		t.Fatalf("value over MaxUserValue: %v", err)
	}
}

func mustEncodeBatch(t *testing.T, b *Batch) []byte {
	t.Helper()
	cmd, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), cmd...)
}

// TestFetchedElsewhere: a record that another site fetched a URL moves no
// cash. A new URL is inserted with the status given and no cash; an
// unfetched one takes the status and keeps its cash (it leaves the
// frontier); a final one is untouched; a generated one is marked, and
// takes the status with its cash when its round gives it back (requeue or
// retry), or keeps the fetch recorded here. Cash in the store (cash plus
// history) is the same before and after, exactly; the marks survive a
// reopen and name their URLs, hosts and rounds.
func TestFetchedElsewhere(t *testing.T) {
	const u = "http://h1.test/p"
	gen := func(b *Batch) { b.UpsertCash(u, 0.75, 2); b.MarkGenerated(u, 3) }
	for _, tc := range []struct {
		name    string
		setup   func(b *Batch) // brings u into its state (nil: unknown)
		status  Status         // what the other site recorded
		then    func(b *Batch) // what this site's round does next (nil: nothing)
		applied bool           // the FetchedElsewhere op changed something
		marked  bool           // OpResult.Marked
		want    URLRecord      // u at the end (URL and FP not compared)
		marks   uint64         // Counts.Marked at the end
		fetched uint64         // the host's fetch count at the end
	}{
		{"unknown", nil, StatusFetched, nil, true, false,
			URLRecord{Status: StatusFetched}, 0, 1},
		{"unknown, an error there", nil, StatusError, nil, true, false,
			URLRecord{Status: StatusError}, 0, 1},
		{"unfetched keeps its cash", func(b *Batch) { b.UpsertCash(u, 0.75, 2) }, StatusFetched, nil, true, false,
			URLRecord{Status: StatusFetched, Cash: 0.75, Depth: 2}, 0, 1},
		{"already fetched here", func(b *Batch) {
			b.UpsertCash(u, 0.75, 2)
			b.RecordFetch(FetchResult{URL: u, Status: StatusFetched, HTTPStatus: 200})
		}, StatusRedirect, nil, false, false,
			URLRecord{Status: StatusFetched, History: 0.75, Depth: 2, HTTPStatus: 200}, 0, 1},
		{"generated, marked", gen, StatusFetched, nil, true, true,
			URLRecord{Status: StatusGenerated, Cash: 0.75, Depth: 2, Round: 3}, 1, 0},
		{"generated, then requeued", gen, StatusDuplicate, func(b *Batch) { b.Requeue(u) }, true, true,
			URLRecord{Status: StatusDuplicate, Cash: 0.75, Depth: 2, Round: 3}, 0, 1},
		{"generated, then a retry", gen, StatusFetched, func(b *Batch) {
			b.RecordRoundFetch(FetchResult{URL: u, Retry: true, Round: 3})
		}, true, true,
			URLRecord{Status: StatusFetched, Cash: 0.75, Depth: 2, Round: 3}, 0, 1},
		{"generated, then fetched here", gen, StatusError, func(b *Batch) {
			b.RecordRoundFetch(FetchResult{URL: u, Status: StatusFetched, HTTPStatus: 200, Round: 3, Spend: 0.5})
		}, true, true,
			URLRecord{Status: StatusFetched, Cash: 0.25, History: 0.5, Depth: 2, Round: 3, HTTPStatus: 200}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openT(t, dir, Options{})
			defer func() { s.Close() }()
			idx := uint64(0)
			apply := func(f func(b *Batch)) *Result {
				b := NewBatch()
				f(b)
				idx++
				return applyT(t, s, idx, b)
			}
			apply(func(b *Batch) { b.UpsertCash("http://h2.test/other", 0.25, 1) })
			if tc.setup != nil {
				apply(tc.setup)
			}
			before := storeCash(t, s)
			res := apply(func(b *Batch) { b.FetchedElsewhere(u, tc.status) })
			if r := res.Ops[0]; r.Applied != tc.applied || r.Marked != tc.marked || r.New != (tc.setup == nil) {
				t.Errorf("result %+v, want applied %v, marked %v, new %v", r, tc.applied, tc.marked, tc.setup == nil)
			}
			if tc.marked {
				// A second record for a marked URL changes nothing.
				if r := apply(func(b *Batch) { b.FetchedElsewhere(u, StatusFetched) }).Ops[0]; r.Applied || !r.Marked {
					t.Errorf("second record: %+v", r)
				}
				s.Close()
				s = openT(t, dir, Options{})
				if m, err := s.MarkedURLs(10); err != nil || len(m) != 1 || m[0] != (Marked{URL: u, Host: "h1.test", Round: 3}) || s.Counts().Marked != 1 {
					t.Errorf("after a reopen: marked %+v (%v), %d marks", m, err, s.Counts().Marked)
				}
			}
			if tc.then != nil {
				apply(tc.then)
			}
			if after := storeCash(t, s); after != before {
				t.Errorf("cash in the store %v, was %v", after, before)
			}
			got, ok, err := s.Get(u)
			if err != nil || !ok {
				t.Fatalf("%s: %v, found %v", u, err, ok)
			}
			got.URL, got.FP = "", 0
			if got != tc.want {
				t.Errorf("%s:\n got %+v\nwant %+v", u, got, tc.want)
			}
			c := s.Counts()
			if c.Marked != tc.marks {
				t.Errorf("%d marks, want %d", c.Marked, tc.marks)
			}
			if m, _ := s.MarkedURLs(10); uint64(len(m)) != tc.marks {
				t.Errorf("marked URLs %+v", m)
			}
			if c.URLs != 2 || c.ByStatus[tc.want.Status] != 1 || c.Frontier != 1 {
				t.Errorf("counts %+v", c)
			}
			if fr, _ := s.HostFrontier("h1.test", 10); len(fr) != 0 {
				t.Errorf("h1.test's frontier: %+v", fr)
			}
			if st, _ := s.HostStats("h1.test"); st.Fetched != tc.fetched {
				t.Errorf("h1.test fetched %d, want %d", st.Fetched, tc.fetched)
			}
			var urls []string
			if err := s.ScanHostURLs("h1.test", func(r URLRecord) error { urls = append(urls, r.URL); return nil }); err != nil || len(urls) != 1 || urls[0] != u {
				t.Errorf("ScanHostURLs: %v, %v", urls, err)
			}
		})
	}
	b := NewBatch()
	b.FetchedElsewhere(u, StatusGenerated)
	if _, err := b.Encode(); !errors.Is(err, ErrBadOp) {
		t.Errorf("a record with status generated: %v", err)
	}
}

// storeCash is the cash of every URL record, undistributed and history.
func storeCash(t *testing.T, s *Store) float64 {
	t.Helper()
	sum := 0.0
	if err := s.ScanURLs(func(r URLRecord) error { sum += r.Cash + r.History; return nil }); err != nil {
		t.Fatal(err)
	}
	return sum
}

package rounds

import (
	"context"
	"errors"
	"maps"
	"math"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/geodelay"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// Every goroutine a crawler starts stops when Run returns and it is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRecordRoundTrip(t *testing.T) {
	for _, res := range []fetcher.Result{
		{Job: fetcher.Job{URL: "http://a.test/", Host: "a.test", Round: 3, Depth: 2, Cash: 0.25}, Status: store.StatusFetched, HTTPStatus: 200,
			Links: []string{"http://a.test/x", "http://b.test/"}, ContentFP: 42, Bytes: 1000, FetchedAt: time.UnixMilli(1_700_000_000_123).UTC(), Wait: time.Second},
		{Job: fetcher.Job{URL: "http://a.test/r", Host: "a.test"}, Status: store.StatusRedirect, HTTPStatus: 301, RedirectTo: "http://a.test/t"},
		{Job: fetcher.Job{URL: "http://a.test/e", Host: "a.test"}, Status: store.StatusError, Retry: true, NoRequest: true, Err: "backing off"},
		{Job: fetcher.Job{URL: "http://a.test/sitemap.xml", Host: "a.test"}, Kind: fetcher.KindSitemap, Links: []string{"http://a.test/o"}},
		{Job: fetcher.Job{URL: "http://a.test/sitemap2.xml", Host: "a.test"}, Kind: fetcher.KindSitemap, Links: []string{"http://a.test/o", "http://a.test/p"},
			LastMods: []time.Time{{}, time.UnixMilli(1_700_000_000_000).UTC()}},
		{Job: fetcher.Job{URL: "http://a.test/big", Host: "a.test"}, Status: store.StatusFetched, HTTPStatus: 200, Truncated: "length"},
		{Job: fetcher.Job{URL: "http://a.test/304", Host: "a.test", Prev: fetcher.Prev{FetchedAt: time.UnixMilli(1_700_000_000_000).UTC(), ContentFP: 9, ETag: `"v1"`}},
			Status: store.StatusFetched, HTTPStatus: 304, ContentFP: 9, ETag: `"v1"`, LastModified: "Tue, 14 Nov 2023 22:13:20 GMT", NotModified: true},
		{Job: fetcher.Job{URL: "http://a.test/same", Host: "a.test", Prev: fetcher.Prev{ContentFP: 9, LastModified: "Tue, 14 Nov 2023 22:13:20 GMT"}},
			Status: store.StatusFetched, HTTPStatus: 200, ContentFP: 9, Unchanged: true, Links: []string{"http://a.test/x"}},
		// A first fetch keeps its answer's validators: its refetch sends them.
		{Job: fetcher.Job{URL: "http://a.test/v", Host: "a.test"}, Status: store.StatusFetched, HTTPStatus: 200, ContentFP: 5,
			ETag: `"v0"`, LastModified: "Tue, 14 Nov 2023 22:13:20 GMT"},
		// A near-duplicate, with embeds and without.
		{Job: fetcher.Job{URL: "http://a.test/print", Host: "a.test"}, Status: store.StatusFetched, HTTPStatus: 200, ContentFP: 6,
			Links: []string{"http://a.test/x"}, NearDupOf: "http://a.test/"},
		{Job: fetcher.Job{URL: "http://a.test/print2", Host: "a.test"}, Status: store.StatusFetched, HTTPStatus: 200, ContentFP: 7,
			Embeds: []string{"http://a.test/i.png"}, NearDupOf: "http://a.test/", Truncated: "time"},
	} {
		b := appendResult(nil, &res)
		if validators := b[3]&flagValidators != 0; validators != (res.Prev == (fetcher.Prev{}) && res.ETag != "") {
			t.Errorf("%s: validators flag %v", res.URL, validators)
		}
		f, err := decodeFetch(b)
		if err != nil {
			t.Fatal(err)
		}
		want := fetchRecord{Kind: res.Kind, Status: res.Status, Retry: res.Retry, NoRequest: res.NoRequest, HTTPStatus: res.HTTPStatus,
			Depth: res.Depth, Cash: res.Cash, At: res.FetchedAt, ContentFP: res.ContentFP, Bytes: res.Bytes, Wait: res.Wait,
			URL: res.URL, Host: res.Host, RedirectTo: res.RedirectTo, Err: res.Err, Links: res.Links}
		if want.Links == nil {
			want.Links = []string{}
		}
		if f.URL != want.URL || f.Kind != want.Kind || f.Status != want.Status || f.Retry != want.Retry || f.NoRequest != want.NoRequest ||
			f.HTTPStatus != want.HTTPStatus || f.Depth != want.Depth || f.Cash != want.Cash || !f.At.Equal(want.At) ||
			f.ContentFP != want.ContentFP || f.Bytes != want.Bytes || f.Wait != want.Wait || f.Host != want.Host ||
			f.RedirectTo != want.RedirectTo || f.Err != want.Err || len(f.Links) != len(want.Links) || f.Truncated != res.Truncated ||
			f.Prev != res.Prev || f.ETag != res.ETag || f.LastModified != res.LastModified || f.NotModified != res.NotModified || f.Unchanged != res.Unchanged ||
			!slices.EqualFunc(f.LastMods, res.LastMods, time.Time.Equal) || f.NearDupOf != res.NearDupOf || !slices.Equal(f.Embeds, res.Embeds) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", f, want)
		}
		for i := range f.Links {
			if f.Links[i] != want.Links[i] {
				t.Fatalf("link %d: %q, want %q", i, f.Links[i], want.Links[i])
			}
		}
	}
}

// TestPartPlanPrev: a part without refetch entries is encoded as before
// refetch existed; one with them carries each entry's Prev, and both
// decode back.
func TestPartPlanPrev(t *testing.T) {
	plain := partPlan{Hosts: []partHost{{Name: "a.test"}, {Name: "b.test", NotBefore: time.UnixMilli(1_700_000_000_000).UTC()}},
		Entries: []genEntry{{URL: "http://a.test/", Host: "a.test", Cash: 0.5, Depth: 1}, {URL: "http://b.test/x", Host: "b.test", Cash: 0.25, Depth: 2}}}
	refetch := plain
	refetch.Entries = slices.Clone(plain.Entries)
	refetch.Entries[1].Prev = fetcher.Prev{FetchedAt: time.UnixMilli(1_700_000_000_000).UTC(), ContentFP: 7, ETag: `"e"`, LastModified: "Tue, 14 Nov 2023 22:13:20 GMT"}
	for _, tc := range []struct {
		name string
		p    partPlan
		tag  byte
	}{{"first fetches", plain, recPart}, {"a refetch", refetch, recPartPrev}} {
		b := tc.p.encode()
		if b[0] != tc.tag {
			t.Errorf("%s: encoded with tag %q, want %q", tc.name, b[0], tc.tag)
		}
		got, err := decodePart(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got.Entries, tc.p.Entries) || len(got.Hosts) != len(tc.p.Hosts) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", tc.name, got, tc.p)
		}
		if _, err := decodePart(b[:len(b)-1]); err == nil {
			t.Errorf("%s: a cut part decoded", tc.name)
		}
	}
}

// FuzzDecodeFetch: any bytes decode to a record or an error, never a panic,
// and a decoded record encodes back to bytes that decode the same.
func FuzzDecodeFetch(f *testing.F) {
	res := fetcher.Result{Job: fetcher.Job{URL: "http://a.test/", Host: "a.test", Cash: 1}, Links: []string{"http://a.test/x"}}
	f.Add(appendResult(nil, &res))
	refetch := fetcher.Result{Job: fetcher.Job{URL: "http://a.test/", Host: "a.test", Prev: fetcher.Prev{ContentFP: 3, ETag: `"x"`}}, HTTPStatus: 304, NotModified: true, ETag: `"x"`}
	f.Add(appendResult(nil, &refetch))
	f.Add([]byte{recFetch})
	embeds := fetcher.Result{Job: fetcher.Job{URL: "http://a.test/", Host: "a.test", Cash: 1}, Links: []string{"http://a.test/x"}, Embeds: []string{"http://a.test/i.png"}}
	f.Add(appendResult(nil, &embeds))
	signals := fetcher.Result{Job: fetcher.Job{URL: "http://a.test/", Host: "a.test"}, NoIndex: true, Canonical: "http://a.test/c",
		Traps: fetcher.TrapCounts{Repetition: 2, Calendar: 1}, NearDupOf: "http://a.test/o"}
	f.Add(appendResult(nil, &signals))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeFetch(b)
		if err != nil {
			if !errors.Is(err, errRecord) {
				t.Fatalf("error %v is not errRecord", err)
			}
			return
		}
		again := r.result(0)
		r2, err := decodeFetch(appendResult(nil, again))
		if err != nil || r2.URL != r.URL || r2.Cash != r.Cash || len(r2.Links) != len(r.Links) || !slices.Equal(r2.Embeds, r.Embeds) || r2.Truncated != r.Truncated ||
			r2.Prev != r.Prev || r2.ETag != r.ETag || r2.LastModified != r.LastModified || r2.NotModified != r.NotModified || r2.Unchanged != r.Unchanged ||
			r2.NearDupOf != r.NearDupOf || r2.NoIndex != r.NoIndex || r2.Canonical != r.Canonical || r2.Traps != r.Traps {
			t.Fatalf("re-encoded record differs: %+v vs %+v (%v)", r2, r, err)
		}
	})
}

// testSite is a crawl database, a websim and a fetcher for rounds tests.
type testSite struct {
	dir string
	sim *websim.Server
	db  *crawldb.DB
	c   *Crawler
	f   *fetcher.Fetcher
	// robotsTTL is the fetcher's RobotsTTL (0: its default).
	robotsTTL time.Duration
	// onResult, if set, sees (and may change) each fetch result before
	// the crawler does.
	onResult func(*fetcher.Result)
}

func openDB(t *testing.T, dir string) *crawldb.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := crawldb.Open(ctx, crawldb.Options{Dir: filepath.Join(dir, "crawldb"), NodeID: "t1", RaftAddr: "127.0.0.1:0", FastTimeouts: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return db
}

func newCrawler(t *testing.T, ts *testSite, o Options) {
	t.Helper()
	o.DB, o.Dir = ts.db, ts.dir
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	onResult := c.OnResult
	if h := ts.onResult; h != nil {
		onResult = func(r *fetcher.Result) { h(r); c.OnResult(r) }
	}
	f, err := fetcher.New(fetcher.Options{
		Workers: 16, HostDelay: 10 * time.Millisecond, MaxCrawlDelay: 50 * time.Millisecond, AllowPrivate: true,
		TotalTimeout: 2 * time.Second, BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		Resolver: mustResolver(t, ts.sim.DNSAddr()), Hosts: c.Hosts(), Seen: c.Seen, OnResult: onResult, Skip: c.Skip(),
		RobotsTTL: ts.robotsTTL,
	})
	if err != nil {
		t.Fatal(err)
	}
	ts.c, ts.f = c, f
}

func startSite(t *testing.T, profile synth.Profile, hosts, pages int) *testSite {
	t.Helper()
	sim, err := websim.Start(websim.Options{Web: synth.Options{Hosts: hosts, Pages: pages, Seed: 5, IPs: 4, Profile: profile}, DNSAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	ts := &testSite{dir: t.TempDir(), sim: sim}
	ts.db = openDB(t, ts.dir)
	t.Cleanup(func() { ts.db.Close() })
	return ts
}

func (ts *testSite) seeds() []string {
	var s []string
	for h := range ts.sim.Web().Hosts() {
		s = append(s, ts.sim.Web().FrontURL(h))
	}
	return s
}

// run runs the crawler with its fetcher until Run returns.
func (ts *testSite) run(t *testing.T, ctx context.Context, maxRounds int) error {
	t.Helper()
	fctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.f.Run(fctx) }()
	err := ts.c.Run(ctx, ts.f, maxRounds)
	stop()
	if ferr := <-done; ferr != nil {
		t.Errorf("fetcher: %v", ferr)
	}
	return err
}

// conservation returns how far the crawl database is from OPIC's
// invariant: cash + virtual − injected, and history − spent.
func conservation(t *testing.T, c *Crawler) (cashOff, histOff float64) {
	t.Helper()
	var cash, hist opic.Sum
	if err := c.st.ScanURLs(func(r store.URLRecord) error {
		cash.Add(r.Cash)
		hist.Add(r.History)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s := c.Status()
	return cash.Value() + s.Virtual - s.Injected, hist.Value() - s.Spent
}

// TestConservationEveryRound crawls a realistic web in many small rounds,
// with retries and so refetches of the same URLs, and checks OPIC's
// invariant after every round.
func TestConservationEveryRound(t *testing.T) {
	ts := startSite(t, synth.Realistic, 30, 8)
	rounds, revisits := 0, 0
	var c *Crawler
	newCrawler(t, ts, Options{Width: 40, PerHost: 2, OnRound: func(st RoundStats) {
		rounds++
		revisits += st.Revisits
		cashOff, histOff := conservation(t, c)
		if math.Abs(cashOff) > 1e-9*c.Status().Injected || math.Abs(histOff) > 1e-9*max(1, c.Status().Spent) {
			t.Errorf("round %d: cash off by %g, history off by %g", st.Round, cashOff, histOff)
		}
	}})
	c = ts.c
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Seed(ctx, ts.seeds()); err != nil {
		t.Fatal(err)
	}
	if err := ts.run(t, ctx, 0); !errors.Is(err, ErrExhausted) {
		t.Fatalf("run: %v", err)
	}
	retried := 0
	ts.db.Store().ScanURLs(func(r store.URLRecord) error {
		if r.Retries > 0 {
			retried++
		}
		return nil
	})
	t.Logf("%d rounds, %d URLs retried, %d revisits", rounds, retried, revisits)
	if rounds < 10 || retried == 0 || revisits < rounds {
		t.Fatalf("%d rounds, %d retried URLs, %d revisits: the test should cover many rounds with refetches and revisits", rounds, retried, revisits)
	}
	if s := c.Status(); s.Spent <= s.Injected {
		t.Errorf("spent %v not above injected %v: cash did not circulate", s.Spent, s.Injected)
	}
}

// TestSeedRacesDelivery delivers a seed URL (as another shard or site
// does, with its cash) between Seed's check that the URL is new and its
// command: the seed's cash must still be in a page, as the state counts it
// injected. Seeding with PutIfAbsent lost it (a sharded site in a
// federation did: its shards seed while the others deliver).
func TestSeedRacesDelivery(t *testing.T) {
	ts := startSite(t, synth.Clean, 4, 4)
	newCrawler(t, ts, Options{Width: 10, PerHost: 2})
	defer ts.c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seeds := ts.seeds()
	const delivered = 0.25
	ts.c.beforeSeed = func() {
		b := store.NewBatch()
		b.UpsertCash(seeds[0], delivered, 3)
		if _, err := ts.db.Apply(ctx, b); err != nil {
			t.Error(err)
		}
	}
	n, err := ts.c.Seed(ctx, seeds)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(seeds) {
		t.Fatalf("seeded %d of %d new URLs", n, len(seeds))
	}
	rec, ok, err := ts.db.Store().Get(seeds[0])
	if err != nil || !ok {
		t.Fatalf("seed %s: %v, found %v", seeds[0], err, ok)
	}
	if want := opic.SeedCash + delivered; math.Abs(rec.Cash-want) > 1e-12 || rec.Depth != 0 {
		t.Errorf("seed delivered during Seed: cash %v depth %d, want %v at depth 0", rec.Cash, rec.Depth, want)
	}
	if cashOff, _ := conservation(t, ts.c); math.Abs(cashOff-delivered) > 1e-9 {
		t.Errorf("cash off by %g after seeding, want the %g delivered", cashOff, delivered)
	}
}

// TestUpdateResumes stops an update after its first command, as a crash
// would, and checks that a new crawler applies each command exactly once.
func TestUpdateResumes(t *testing.T) {
	ts := startSite(t, synth.Clean, 20, 10)
	newCrawler(t, ts, Options{Width: 500, PerHost: 20, BatchOps: 50})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := ts.c.Seed(ctx, ts.seeds()); err != nil {
		t.Fatal(err)
	}
	// Round 1 fetches the front pages; stop its update after one command.
	stopAt := errors.New("stopped by the test")
	ts.c.afterCommand = func(round uint64, i int) error {
		if round == 1 && i == 1 {
			return stopAt
		}
		return nil
	}
	if err := ts.run(t, ctx, 1); !errors.Is(err, stopAt) {
		t.Fatalf("run: %v, want the test's stop", err)
	}
	if n, _ := loadProgress(ts.c.st, 1); n != 1 {
		t.Fatalf("progress %d after one command", n)
	}
	if err := ts.c.Close(); err != nil {
		t.Fatal(err)
	}
	// A new crawler over the same database and directory resumes the update.
	var applied []int
	newCrawler(t, ts, Options{Width: 500, PerHost: 20, BatchOps: 50})
	ts.c.afterCommand = func(round uint64, i int) error {
		if round == 1 {
			applied = append(applied, i)
		}
		return nil
	}
	defer ts.c.Close()
	if err := ts.run(t, ctx, 0); !errors.Is(err, ErrExhausted) {
		t.Fatalf("resumed run: %v", err)
	}
	if len(applied) == 0 || applied[0] != 2 {
		t.Fatalf("resumed update applied commands %v, want from 2 on", applied)
	}
	cashOff, histOff := conservation(t, ts.c)
	if math.Abs(cashOff) > 1e-9*ts.c.Status().Injected || math.Abs(histOff) > 1e-9*ts.c.Status().Spent {
		t.Fatalf("after resume: cash off by %g, history off by %g", cashOff, histOff)
	}
	if c := ts.db.Store().Counts(); c.ByStatus[store.StatusFetched] < 100 {
		t.Fatalf("only %d pages fetched", c.ByStatus[store.StatusFetched])
	}
}

func mustResolver(t *testing.T, addr string) *dnscache.Resolver {
	t.Helper()
	r, err := dnscache.New(dnscache.Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRedirectChainNotCutByDepth crawls the hostile web's redirect chain
// with a depth limit smaller than the redirect limit: a redirect target is
// the same page moved, as deep as the URL that redirected, so the chain is
// cut by MaxRedirects alone, whatever depth its first hop was found at.
func TestRedirectChainNotCutByDepth(t *testing.T) {
	ts := startSite(t, synth.Hostile, 12, 6)
	const maxRedirects = 4
	newCrawler(t, ts, Options{Width: 200, PerHost: 10, MaxDepth: 1, MaxRedirects: maxRedirects})
	defer ts.c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var chain string
	for _, h := range ts.sim.Web().Hosts() {
		if h.Role == synth.RoleChain {
			chain = h.Name
		}
	}
	if chain == "" {
		t.Fatal("the hostile web has no redirect chain host")
	}
	if _, err := ts.c.Seed(ctx, []string{ts.sim.Web().FrontURL(10)}); err != nil {
		t.Fatal(err)
	}
	if err := ts.run(t, ctx, 0); !errors.Is(err, ErrExhausted) {
		t.Fatalf("run: %v", err)
	}
	v := ts.sim.Stats().Snapshot().Hosts[chain]
	if v == nil {
		t.Fatalf("%s was never visited", chain)
	}
	if got := v.Statuses[302]; got != maxRedirects+1 {
		t.Errorf("%s answered 302 %d times (%v), want the first hop and %d followed", chain, got, v.Statuses, maxRedirects)
	}
}

// TestCrawlKeepsPaceWithPoliteness crawls small webs to exhaustion and
// checks that each ends near its politeness floor (the slowest host's
// allowed URLs × its delay), with everything fetched, and, where the row
// asks, in no more than twice the rounds any crawl giving a host at most k
// URLs a round needs (widthLimitedRounds: a lower bound of the rounds a
// width-limited crawl takes).
//
//   - mid-crawl (issue 11): one host with a 1 s Crawl-delay and one with 20×
//     the pages of the others: rounds must not be held by the slow host's
//     tail while the big host waits for its next URLs;
//   - the tail (issue 20): one host with a 1 s Crawl-delay holds most of
//     the last pages: it must stay busy across the rounds' turnover
//     without a round (and its update) for each of its URLs;
//   - far hosts (issue 22): the crawler fetches from a client address that
//     websim places in the city of host 0, which has 10× the pages of the
//     others; most others answer a round trip of 130-190 ms later
//     (websim's distance model). The leader must learn what their
//     requests take (the nodes' reports): a round that gave every far
//     host k URLs, as if each took only its delay, lasted k × (delay +
//     RTT), and the near host got its next URLs only that often (1.58×
//     the floor when measured so, 1.13-1.20× once learned, on a quiet
//     machine). The learning itself is asserted (each far host's learned
//     request time against its RTT); the bound on the ratio, 1.5×, is for
//     the outcome, above the 1.36-1.38× the learned crawl took beside the
//     other packages' tests under -race in three clean-clone CI runs.
func TestCrawlKeepsPaceWithPoliteness(t *testing.T) {
	const hostDelay = 50 * time.Millisecond
	tests := []struct {
		name      string
		web       synth.Options
		perHost   int
		maxRatio  float64 // time to exhaustion ÷ floor at most
		maxRounds float64 // rounds ÷ widthLimitedRounds at most; 0: not checked
		far       bool    // fetch from a client in host 0's city
	}{
		{"mid-crawl: a slow host and a 20x host", synth.Options{Hosts: 10, Pages: 10, Seed: 5, IPs: 4, Profile: synth.Clean,
			Overrides: []synth.Override{{Host: 0, Pages: 12, CrawlDelay: 1}, {Host: 1, Pages: 200}}}, 10, 1.5, 0, false},
		{"the tail: a slow host holds the last pages", synth.Options{Hosts: 6, Pages: 6, Seed: 7, IPs: 4, Profile: synth.Clean,
			Overrides: []synth.Override{{Host: 0, Pages: 24, CrawlDelay: 1}}}, 3, 1.15, 2, false},
		{"far hosts: a near host with 10x the pages", synth.Options{Hosts: 13, Pages: 20, Seed: 7, IPs: 13, Profile: synth.Clean,
			Overrides: []synth.Override{{Host: 0, Pages: 200}}}, 10, 1.5, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var clients []geodelay.Client
			var local []netip.Addr
			if tt.far {
				web, err := synth.New(tt.web)
				if err != nil {
					t.Fatal(err)
				}
				c := geodelay.Client{Addr: netip.MustParseAddr("127.0.2.1"), Name: "near", Loc: hostPlace(t, web, 0)}
				clients, local = []geodelay.Client{c}, []netip.Addr{c.Addr}
			}
			sim, err := websim.Start(websim.Options{Web: tt.web, DNSAddr: "127.0.0.1:0", Clients: clients})
			if err != nil {
				t.Fatal(err)
			}
			defer sim.Close()
			ts := &testSite{dir: t.TempDir(), sim: sim}
			ts.db = openDB(t, ts.dir)
			defer ts.db.Close()
			c, err := New(Options{DB: ts.db, Dir: ts.dir, Width: 1000, PerHost: tt.perHost, HostDelay: hostDelay, MaxCrawlDelay: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			f, err := fetcher.New(fetcher.Options{
				Workers: 16, HostDelay: hostDelay, MaxCrawlDelay: 2 * time.Second, AllowPrivate: true, LocalAddrs: local,
				TotalTimeout: 5 * time.Second, BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
				Resolver: mustResolver(t, sim.DNSAddr()), Hosts: c.Hosts(), Seen: c.Seen, OnResult: c.OnResult, Skip: c.Skip(),
			})
			if err != nil {
				t.Fatal(err)
			}
			ts.c, ts.f = c, f

			var rtt func(host string) time.Duration
			if len(local) > 0 {
				rtt = func(host string) time.Duration { d, _ := sim.ClientRTT(local[0], host); return d }
			}
			targets, floor, floorHost := politenessFloor(t, sim, hostDelay, rtt)
			if floor < 5*time.Second {
				t.Fatalf("floor %v: the test web is too small to tell a slow crawl from a fast one", floor)
			}
			need := widthLimitedRounds(t, sim, targets, ts.seeds(), tt.perHost)

			ctx, cancel := context.WithTimeout(context.Background(), 3*floor)
			defer cancel()
			if _, err := c.Seed(ctx, ts.seeds()); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			learned := map[string]time.Duration{} // the leader's learned fetch times, last seen
			stopWatch := make(chan struct{})
			watched := make(chan struct{})
			go func() { // the leader is gone once the crawl ends: look while it runs
				defer close(watched)
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stopWatch:
						return
					case <-tick.C:
					}
					c.mu.Lock()
					l := c.lead
					c.mu.Unlock()
					if l != nil {
						l.mu.Lock()
						maps.Copy(learned, l.took)
						l.mu.Unlock()
					}
				}
			}()
			err = ts.run(t, ctx, 0)
			close(stopWatch)
			<-watched
			if !errors.Is(err, ErrExhausted) {
				t.Fatalf("run: %v (after %v, floor %v)", err, time.Since(start), floor)
			}
			took := time.Since(start)
			c.mu.Lock()
			rounds := int(c.state.Next - 1)
			c.mu.Unlock()
			// Everything was fetched: the pace was not bought with coverage.
			missing := 0
			for host, urls := range targets {
				for u := range urls {
					rec, ok, err := c.st.Get(u)
					if err != nil {
						t.Fatal(err)
					}
					if !ok || rec.Status < store.StatusFetched {
						if missing++; missing <= 5 {
							t.Errorf("%s (host %s) was not fetched", u, host)
						}
					}
				}
			}
			ratio := took.Seconds() / floor.Seconds()
			t.Logf("exhausted in %v; floor %v (%s); %.2f× the floor; %d rounds, a width-limited crawl needs %d or more",
				took.Round(time.Millisecond), floor, floorHost, ratio, rounds, need)
			if ratio > tt.maxRatio {
				t.Errorf("the crawl took %.2f× its politeness floor (%v for %v), want ≤ %.2f×", ratio, took.Round(time.Millisecond), floor, tt.maxRatio)
			}
			if tt.maxRounds > 0 && float64(rounds) > tt.maxRounds*float64(need) {
				t.Errorf("the crawl took %d rounds, want ≤ %.0f× the %d a width-limited crawl needs at least", rounds, tt.maxRounds, need)
			}
			if rtt != nil {
				// The leader learned what the far hosts' requests take:
				// about their RTT (a response waits one, a connection's
				// first two), not less, and not far more.
				far := 0
				for _, h := range sim.Web().Hosts() {
					r := rtt(h.Name)
					if r < 100*time.Millisecond {
						continue
					}
					far++
					if got := learned[h.Name]; got < r*9/10 || got > 2*r+50*time.Millisecond {
						t.Errorf("host %s, RTT %v: the leader learned its requests take %v, want about the RTT", h.Name, r, got)
					}
				}
				if far < 5 {
					t.Errorf("only %d hosts are 100 ms or more away: the web does not test far hosts", far)
				}
			}
		})
	}
}

// politenessFloor returns, from the web's truth, each host's robots-allowed
// reachable URLs (canonical forms; no robots.txt or sitemap) and the web's
// politeness floor: the most any host needs for its URLs at its delay (the
// host delay, or its Crawl-delay if longer) plus the round trip each of
// its requests pays (rtt; nil: none), and that host.
func politenessFloor(t *testing.T, sim *websim.Server, hostDelay time.Duration, rtt func(host string) time.Duration) (map[string]map[string]bool, time.Duration, string) {
	t.Helper()
	targets := map[string]map[string]bool{}
	err := sim.Web().Truth(func(r *synth.Record) error {
		if r.Reachable && r.RobotsAllowed && r.Kind != "robots" && r.Kind != "sitemap" {
			u := r.URL
			if r.Canonical != "" {
				u = r.Canonical
			}
			if targets[r.Host] == nil {
				targets[r.Host] = map[string]bool{}
			}
			targets[r.Host][u] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var floor time.Duration
	floorHost := ""
	for _, h := range sim.Web().Hosts() {
		d := hostDelay
		if h.CrawlDelay > 0 {
			d = max(d, time.Duration(h.CrawlDelay)*time.Second)
		}
		if rtt != nil {
			d += rtt(h.Name)
		}
		if f := time.Duration(len(targets[h.Name])) * d; f > floor {
			floor, floorHost = f, h.Name
		}
	}
	return targets, floor, floorHost
}

// widthLimitedRounds returns a lower bound of the rounds any crawl of the
// web from seeds needs when a round gives a host at most k URLs: the most
// URLs of one host over k, or the longest shortest chain of links from a
// seed to a target plus one (a URL is generated at the earliest in the
// round after the one that fetched a page linking it), whichever is more.
// Targets no chain of the truth's links reaches count for the first only.
func widthLimitedRounds(t *testing.T, sim *websim.Server, targets map[string]map[string]bool, seeds []string, k int) int {
	t.Helper()
	links := map[string][]string{}
	canon := map[string]string{}
	err := sim.Web().Truth(func(r *synth.Record) error {
		links[r.URL] = r.Outlinks
		if r.Canonical != "" {
			canon[r.URL] = r.Canonical
		} else {
			canon[r.URL] = r.URL
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dist := map[string]int{}
	queue := []string{}
	for _, s := range seeds {
		if _, ok := dist[s]; !ok {
			dist[s] = 0
			queue = append(queue, s)
		}
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, v := range links[u] {
			if _, ok := dist[v]; !ok {
				dist[v] = dist[u] + 1
				queue = append(queue, v)
			}
		}
	}
	need := 0
	for u, d := range dist {
		if cu, ok := canon[u]; ok {
			for _, urls := range targets {
				if urls[cu] {
					need = max(need, d+1)
				}
			}
		}
	}
	for _, urls := range targets {
		need = max(need, (len(urls)+k-1)/k)
	}
	return need
}

func TestRoundBudget(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	c, err := New(Options{DB: db, Dir: dir, PerHost: 10, HostDelay: 100 * time.Millisecond, IPDelay: 10 * time.Millisecond, MaxCrawlDelay: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Hosts().SaveHost("slow.test", crawl.HostRecord{CrawlDelay: 450 * time.Millisecond})
	c.Hosts().SaveHost("capped.test", crawl.HostRecord{CrawlDelay: time.Hour})
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	span := c.roundSpan()
	if span != 900*time.Millisecond {
		t.Fatalf("span %v, want (10 - 1) × 100ms", span)
	}
	tests := []struct {
		name, host string
		busyUntil  time.Time
		want       int
	}{
		{"a host at the host delay gets k", "fast.test", time.Time{}, 10},
		{"its earlier URLs done long ago", "fast.test", now.Add(-time.Minute), 10},
		{"busy for a third of the span", "fast.test", now.Add(300 * time.Millisecond), 7},
		{"busy to the span's end", "fast.test", now.Add(span), 1},
		{"busy past the span", "fast.test", now.Add(span + time.Millisecond), 0},
		{"a Crawl-delay of 450ms", "slow.test", time.Time{}, 3},
		{"a Crawl-delay over the cap counts as the cap", "capped.test", time.Time{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := plan.RoundBudget(c.o.PerHost, c.o.HostDelay, c.hostPace(tt.host).delay, now, tt.busyUntil, span); got != tt.want {
				t.Errorf("RoundBudget(%s, busy until %v) = %d, want %d", tt.host, tt.busyUntil, got, tt.want)
			}
		})
	}
	for _, tt := range []struct {
		busyUntil time.Time
		want      int
	}{{time.Time{}, 91}, {now.Add(450 * time.Millisecond), 46}, {now.Add(span + time.Millisecond), 0}} {
		if got := plan.IPBudget(c.o.IPDelay, now, tt.busyUntil, span); got != tt.want {
			t.Errorf("IPBudget(busy until %v) = %d, want %d", tt.busyUntil, got, tt.want)
		}
	}
}

// hostPlace is where web places host i: its address's city.
func hostPlace(t *testing.T, web *synth.Web, i int) geodelay.Point {
	t.Helper()
	h := web.Hosts()[i]
	for _, e := range web.GeoEntries() {
		if e.IP == h.IP {
			return geodelay.PointOf(e.City)
		}
	}
	t.Fatalf("host %s (%s) has no city", h.Name, h.IP)
	return geodelay.Point{}
}

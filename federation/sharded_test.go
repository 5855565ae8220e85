package federation

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/route"
)

// testShards is a sharded site's shards for the tests: real one-node
// crawl databases, a host's shard by a hash of its key, and a shard that
// can be made to fail its parts.
type testShards struct {
	dbs   []*crawldb.DB
	down  atomic.Int32 // 1 + the shard whose parts fail; 0: none
	backs atomic.Pointer[map[string]HandBack]
}

func (s *testShards) ShardOf(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(s.dbs)))
}

func (s *testShards) ApplyPart(ctx context.Context, sh int, from string, part []byte) error {
	if int(s.down.Load()) == sh+1 {
		return fmt.Errorf("shard %d: %w", sh, ErrUnavailable)
	}
	return ApplyPart(ctx, s.dbs[sh], from, part)
}

func (s *testShards) Quiet() (bool, map[string]uint64, uint64) { return false, nil, 0 }

func (s *testShards) HandBacks() map[string]HandBack {
	if b := s.backs.Load(); b != nil {
		return *b
	}
	return nil
}

func openTestDB(t *testing.T, id string) *crawldb.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := crawldb.Open(ctx, crawldb.Options{Dir: filepath.Join(t.TempDir(), "crawldb"), NodeID: id, RaftAddr: "127.0.0.1:0", FastTimeouts: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return db
}

// newShardedTestFed is site self, sharded over n shards, its Fed on a
// meta crawl database.
func newShardedTestFed(t *testing.T, self string, n int) (*Fed, *testShards) {
	t.Helper()
	sh := &testShards{}
	for i := range n {
		sh.dbs = append(sh.dbs, openTestDB(t, fmt.Sprintf("%s-s%d", self, i)))
	}
	f, err := New(Options{File: testFile(), Self: self, DB: openTestDB(t, self+"-meta"), Sharded: sh})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Shutdown(context.Background()) })
	return f, sh
}

// frameOf frames entries (each a batch of URLs on hosts) from sender to
// site to as the sender's entries first..seq, and decodes it as the
// endpoint does.
func frameOf(t *testing.T, from, to string, seq, first uint64, entries [][]string) *Batch {
	t.Helper()
	var payloads [][]byte
	for i, hosts := range entries {
		e := &Batch{From: from, To: to, Virtual: 0.125}
		for _, h := range hosts {
			e.Puts = append(e.Puts, Put{URL: fmt.Sprintf("http://%s/e%d-%d", h, first, i), Cash: 0.5, Depth: 1})
			e.Hosts = append(e.Hosts, HostLoc{Host: h, Key: h})
		}
		payloads = append(payloads, e.Append(nil))
	}
	b, err := Decode(AppendFrame(nil, from, to, seq, first, payloads), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shardTotals sums the shards' URLs, the cash on them, and the cash
// received (on URLs and for the virtual page).
func shardTotals(t *testing.T, sh *testShards) (urls uint64, onURLs, received float64) {
	t.Helper()
	var cash, in opic.Sum
	for _, db := range sh.dbs {
		st := db.Store()
		urls += st.Counts().URLs
		if err := st.ScanURLs(func(r store.URLRecord) error { cash.Add(r.Cash); return nil }); err != nil {
			t.Fatal(err)
		}
		p, v, _, err := InboundTotals(st)
		if err != nil {
			t.Fatal(err)
		}
		in.Add(p)
		in.Add(v)
	}
	return urls, cash.Value(), in.Value()
}

// TestPutSharded: a sharded site applies a batch from another site's shard
// part by part, each URL in its host's shard, and answers only when every
// part is applied; a retry after a shard failed is applied once in every
// shard, also when the sender frames it again with more entries (it lost
// its pending batch: a restart); a shard with no part of some batches
// takes the later ones; the site's record of the sender (what the probes
// tell it, summed per site) moves on only once the whole batch is in.
func TestPutSharded(t *testing.T) {
	f, sh := newShardedTestFed(t, "eu", 3)
	ctx := context.Background()
	hosts := hostsOwnedBy(t, f, "eu", 12)
	const sender = "us--s001"
	if SiteOfSender(sender) != "us" {
		t.Fatalf("SiteOfSender(%q) = %q", sender, SiteOfSender(sender))
	}
	recv := func() (uint64, uint64) {
		m := probeMsg{Recv: map[string]uint64{}}
		if err := f.recvOf("us", &m); err != nil {
			t.Fatal(err)
		}
		return m.Recv["us"], m.RecvFrom[sender]
	}
	// Entries 10, 11, 12 (three of the sender's), shard 2 unavailable.
	e := [][]string{hosts[0:4], hosts[4:8], hosts[8:12]}
	b1 := frameOf(t, sender, "eu", 12, 10, e)
	sh.down.Store(3)
	if err := f.Put(ctx, "us", b1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("put with shard 2 down: %v, want ErrUnavailable", err)
	}
	if r, rf := recv(); r != 0 || rf != 0 {
		t.Errorf("site record after a part failed: %d, %d; want 0", r, rf)
	}
	// The sender restarted: it frames entries 10..15 (three more) anew.
	more := append(e, hosts[0:2], hosts[2:6], hosts[6:12])
	b2 := frameOf(t, sender, "eu", 15, 10, more)
	sh.down.Store(0)
	for i := range 2 { // and a retry of it, applied before
		if err := f.Put(ctx, "us", b2); err != nil {
			t.Fatalf("put %d of the batch framed again: %v", i, err)
		}
	}
	if r, rf := recv(); r != 15 || rf != 15 {
		t.Errorf("site record %d, %d; want 15", r, rf)
	}
	urls, onURLs, received := shardTotals(t, sh)
	want := 0
	for _, hs := range more {
		want += len(hs)
	}
	if urls != uint64(want) || onURLs != 0.5*float64(want) || received != onURLs+6*0.125 {
		t.Errorf("shards: %d URLs with %v cash, %v received; want %d URLs, %v cash, %v received",
			urls, onURLs, received, want, 0.5*float64(want), 0.5*float64(want)+6*0.125)
	}
	for i, db := range sh.dbs {
		db.Store().ScanURLs(func(r store.URLRecord) error {
			if s := sh.ShardOf(hostOf(r.URL)); s != i {
				t.Errorf("%s in shard %d, its host's shard is %d", r.URL, i, s)
			}
			return nil
		})
	}
	// A batch with URLs of one shard only, then one for every shard: the
	// others' sequence numbers jump (a gap), and they take the later one.
	one := ""
	for _, h := range hosts {
		if sh.ShardOf(h) == 0 {
			one = h
			break
		}
	}
	if err := f.Put(ctx, "us", frameOf(t, sender, "eu", 20, 18, [][]string{{one}})); err != nil {
		t.Fatal(err)
	}
	if err := f.Put(ctx, "us", frameOf(t, sender, "eu", 25, 21, [][]string{hosts})); err != nil {
		t.Fatal(err)
	}
	urls2, _, _ := shardTotals(t, sh)
	if urls2 != urls+1+uint64(len(hosts)) {
		t.Errorf("%d URLs after two more batches, want %d", urls2, urls+1+uint64(len(hosts)))
	}
	if r, _ := recv(); r != 25 {
		t.Errorf("site record %d, want 25", r)
	}
	// A sharded site takes no host of another site, even of one down.
	if err := f.Put(ctx, "us", frameOf(t, sender, "eu", 26, 26, [][]string{hostsOwnedBy(t, f, "asia", 1)})); !errors.Is(err, ErrNotOwner) {
		t.Errorf("a URL of asia's host: %v, want ErrNotOwner", err)
	}
}

// TestSiteOfSender: a shard's sender name and the site it is of.
func TestSiteOfSender(t *testing.T) {
	for _, c := range []struct{ name, site string }{
		{SenderName("eu", 7), "eu"},
		{SenderName("eu-west", 0), "eu-west"},
		{"eu", ""},
		{"eu--s", ""},
		{"eu--sx1", ""},
		{"--s001", ""},
	} {
		if got := SiteOfSender(c.name); got != c.site {
			t.Errorf("SiteOfSender(%q) = %q, want %q", c.name, got, c.site)
		}
	}
}

// TestShardedStatus: a sharded site's federation figures are its shards'
// (their outboxes for other sites, URL-sent caches and inbound records),
// those of the shards this node leads; before, Status read only the meta
// group's, where none of them is, and showed 0.
func TestShardedStatus(t *testing.T) {
	f, sh := newShardedTestFed(t, "eu", 2)
	ctx := context.Background()
	views := []*Shard{f.Shard(sh.dbs[0], SenderName("eu", 0), nil), f.Shard(sh.dbs[1], SenderName("eu", 1), nil)}
	// Shard 0 routes 5 URLs of us's hosts (one twice: a cache hit).
	var urls []route.Remote
	for i, h := range hostsOwnedBy(t, f, "us", 4) {
		urls = append(urls, route.Remote{URL: fmt.Sprintf("http://%s/%d", h, i), Cash: 0.25})
	}
	urls = append(urls, urls[0])
	b := store.NewBatch()
	if _, _, err := views[0].Route(ctx, urls, b); err != nil {
		t.Fatal(err)
	}
	if err := views[0].f.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	// us sends eu 6 URLs, split over the shards.
	hosts := hostsOwnedBy(t, f, "eu", 6)
	if err := f.Put(ctx, "us", frameOf(t, "us", "eu", 1, 1, [][]string{hosts})); err != nil {
		t.Fatal(err)
	}
	s := f.Status()
	var us PeerStatus
	for _, p := range s.Peers {
		if p.Name == "us" {
			us = p
		}
	}
	if us.Outbox == 0 || s.Outbox != uint64(us.Outbox) {
		t.Errorf("outbox entries for us %d, site %d; want the shard's (> 0), the same", us.Outbox, s.Outbox)
	}
	if us.RecvURLs != 6 {
		t.Errorf("URLs received from us %d, want 6 (summed over the shards)", us.RecvURLs)
	}
	if s.SentCache != 4 || s.CacheLookup == 0 {
		t.Errorf("URL-sent cache %d entries, %d lookups; want shard 0's 4, > 0", s.SentCache, s.CacheLookup)
	}
}

// TestShardHandsOver: a shard of a sharded site hands its outbox for a
// site down over to the next owners: another site takes them with their
// cash, except a batch that was on its way, whose cash waits until the
// site is back and says it did not apply it; when the next owner is the
// shard's own site (every other site down), the shard keeps them through
// its site's routing between shards (Keep). Before, a shard handed
// nothing over and its site was never passive while a site was down.
func TestShardHandsOver(t *testing.T) {
	asia, sh := newShardedTestFed(t, "asia", 2)
	view := asia.Shard(sh.dbs[0], SenderName("asia", 0), nil)
	var kept []string
	view.Keep(func(_ context.Context, urls []route.Remote, _ *store.Batch) ([]route.Remote, error) {
		for _, u := range urls {
			kept = append(kept, u.URL)
		}
		return urls, nil
	})
	ctx := context.Background()
	// us's hosts whose next owner, us down, is eu.
	var hosts []string
	for _, h := range hostsOwnedBy(t, asia, "us", 40) {
		if len(hosts) < 6 && asia.part.Owner(partition.Host{Name: h, Key: h}, func(s string) bool { return s == "us" }) == "eu" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) < 6 {
		t.Fatalf("%d of us's hosts go to eu next", len(hosts))
	}
	route1 := func(first int) {
		var urls []route.Remote
		for i, h := range hosts {
			urls = append(urls, route.Remote{URL: fmt.Sprintf("http://%s/%d", h, first+i), Cash: 1})
		}
		b := store.NewBatch()
		if _, _, err := view.Route(ctx, urls, b); err != nil {
			t.Fatal(err)
		}
		if err := view.f.apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	asia.heardFrom("us", probeMsg{Site: "us"}, now)
	asia.heardFrom("eu", probeMsg{Site: "eu"}, now)
	route1(0)
	view.Step(ctx) // learns what us applied (nothing)
	view.Step(ctx) // us's endpoint refuses: the batch is in flight, in doubt
	if p := view.f.peers["us"]; p.pend == nil {
		t.Fatalf("no batch in flight to us (last error %q)", p.lastErr)
	}
	route1(100) // and a second one, never sent
	if c := outCash(t, view.f, "us"); c != 12 {
		t.Fatalf("shard's outbox for us: %v cash, want 12", c)
	}
	setPeerDown(asia, "us", true)
	view.Step(ctx)
	if c := outCash(t, view.f, "us"); c != 0 {
		t.Errorf("%v cash left in the shard's outbox for us after the hand-over", c)
	}
	if c, d := outCash(t, view.f, "eu"), doubtCash(t, view.f, "us"); c != 6 || d != 6 {
		t.Errorf("handed to eu %v cash, in doubt %v; want 6 (never sent) and 6 (in flight)", c, d)
	}
	if n := storeCash(t, asia) + storeCash(t, view.f); n != 0 || len(kept) != 0 {
		t.Errorf("the sharded site kept %v cash, %d URLs of us's hosts that eu owns now", n, len(kept))
	}
	if in, err := view.InDoubt(); err != nil || in {
		t.Errorf("in doubt with us down: %v, %v; want false (us may never return)", in, err)
	}
	// us is back, and had not applied the batch.
	asia.heardFrom("us", probeMsg{Site: "us", RecvFrom: map[string]uint64{}}, now)
	if in, _ := view.InDoubt(); !in {
		t.Error("not in doubt with us back before the shard settled")
	}
	view.Step(ctx) // sync: settle
	if c := doubtCash(t, view.f, "us"); c != 6 {
		t.Errorf("after us's return, %v cash in doubt for us, want the 6 it did not apply (delivered again)", c)
	}
	pd, err := view.f.nextBatch(view.f.peers["us"])
	if err != nil || pd == nil || !pd.doubt || pd.urls != 6 {
		t.Fatalf("the shard's next batch for us: %+v, %v; want the 6 URLs in doubt, as they were", pd, err)
	}
	if err := view.f.acked(ctx, view.f.peers["us"], pd); err != nil {
		t.Fatal(err)
	}
	if in, _ := view.InDoubt(); in {
		t.Error("still in doubt after the shard delivered them again")
	}

	// Every other site down: the shard's own site is the next owner, and
	// the shard keeps what it has for us (and, without cash, the URLs it
	// had delivered to us).
	route1(200)
	setPeerDown(asia, "us", true)
	setPeerDown(asia, "eu", true)
	view.Step(ctx)
	if c := outCash(t, view.f, "us"); c != 0 || storeCash(t, view.f) != 6 {
		t.Errorf("every other site down: %v cash left for us, %v cash in the shard; want 0 and 6", c, storeCash(t, view.f))
	}
	for i, h := range hosts {
		if u := fmt.Sprintf("http://%s/%d", h, 200+i); !slices.Contains(kept, u) {
			t.Errorf("%s not kept by the shard", u)
		}
	}
}

// TestShardWaitsForHandBack: a sharded site back after a failure leaves
// its own hosts alone, in every shard, until the interim owner that held
// them has handed them back (the site's gate, fed by the probes), and a
// shard's host whose URL, generated in a round in flight, was marked as
// fetched elsewhere waits until that round is over. Before, a shard's
// router never waited: a sharded site back fetched again what its interim
// owners had fetched.
func TestShardWaitsForHandBack(t *testing.T) {
	asia, sh := newShardedTestFed(t, "asia", 1)
	ctx := context.Background()
	var inFlight atomic.Bool // round 4 of the shard
	view := asia.Shard(sh.dbs[0], SenderName("asia", 0), func() (route.Rounds, error) {
		if inFlight.Load() {
			return route.Rounds{Next: 5, Active: []uint64{4}}, nil
		}
		return route.Rounds{Next: 5}, nil
	})
	// asia's hosts, by the site that holds them while asia is down.
	byHolder := map[string][]string{}
	mine := hostsOwnedBy(t, asia, "asia", 40)
	for _, h := range mine {
		holder := asia.part.Owner(partition.Host{Name: h, Key: h}, func(s string) bool { return s == "asia" })
		byHolder[holder] = append(byHolder[holder], h)
	}
	if len(byHolder["us"]) == 0 || len(byHolder["eu"]) == 0 {
		t.Fatalf("asia's hosts by holder: %v", byHolder)
	}
	if _, err := view.f.locateAll(ctx, mine); err != nil {
		t.Fatal(err)
	}
	waits := func(when string, want map[string]bool) {
		t.Helper()
		if err := asia.updateGate(); err != nil {
			t.Fatal(err)
		}
		for holder, hosts := range byHolder {
			for _, h := range hosts {
				if view.Waiting(h) != want[holder] || view.Away(h) != want[holder] {
					t.Errorf("%s: %s (held by %s) waits %v, away %v; want %v", when, h, holder, view.Waiting(h), view.Away(h), want[holder])
				}
			}
		}
	}
	waits("no peer heard yet", map[string]bool{"us": true, "eu": true})
	now := time.Now()
	asia.heardFrom("eu", probeMsg{Site: "eu"}, now)
	asia.heardFrom("us", probeMsg{Site: "us", HandBack: map[string]HandBack{"asia": {Pending: true}}}, now)
	waits("us's hand-back pending", map[string]bool{"us": true})
	asia.heardFrom("us", probeMsg{Site: "us", HandBack: map[string]HandBack{"asia": {Seq: 3}}}, now)
	setInbound := func(seq uint64) {
		b := store.NewBatch()
		b.PutUser(inPrefix+"us", inbound{Seq: seq}.encode())
		if err := asia.apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	setInbound(2)
	waits("us's hand-back done at 3, 2 applied", map[string]bool{"us": true})
	setInbound(3)
	waits("us's hand-back applied", nil)

	// A URL the shard generated in round 4, marked as fetched at us.
	h := byHolder["us"][0]
	u := "http://" + h + "/p"
	b := store.NewBatch()
	b.UpsertCash(u, 0.5, 1)
	b.MarkGenerated(u, 4)
	b.FetchedElsewhere(u, store.StatusFetched)
	if err := view.f.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	inFlight.Store(true)
	view.Step(ctx)
	if !view.Waiting(h) || view.Waiting(byHolder["us"][1]) {
		t.Errorf("round 4 in flight: %s (marked) waits %v, %s (not) waits %v", h, view.Waiting(h), byHolder["us"][1], view.Waiting(byHolder["us"][1]))
	}
	inFlight.Store(false)
	view.Step(ctx)
	if view.Waiting(h) {
		t.Errorf("%s still waits once round 4 is over", h)
	}
}

// TestShardFigures: a shard's federation figures come from its crawl
// database (outbox entries for other sites, the URL-sent cache, URLs
// received from other sites, not from the site's other shards), so that a
// site-wide view can sum them over the shards; the shards' sum is what the
// site received.
func TestShardFigures(t *testing.T) {
	asia, sh := newShardedTestFed(t, "asia", 2)
	views := []*Shard{asia.Shard(sh.dbs[0], SenderName("asia", 0), nil), asia.Shard(sh.dbs[1], SenderName("asia", 1), nil)}
	ctx := context.Background()
	var urls []route.Remote
	for i, h := range hostsOwnedBy(t, asia, "us", 5) {
		urls = append(urls, route.Remote{URL: fmt.Sprintf("http://%s/%d", h, i), Cash: 1})
	}
	b := store.NewBatch()
	if _, _, err := views[0].Route(ctx, urls, b); err != nil {
		t.Fatal(err)
	}
	if err := views[0].f.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	in := batchFor("us", "asia", hostsOwnedBy(t, asia, "asia", 7), 1)
	if err := asia.Put(ctx, "us", in); err != nil {
		t.Fatal(err)
	}
	// Between shards (not another site's): not counted as received.
	if _, err := ApplyFrame(ctx, sh.dbs[1], "s000", AppendFrame(nil, "s000", "s001", 1, 1, [][]byte{batchFor("s000", "s001", hostsOwnedBy(t, asia, "asia", 2), 0).Append(nil)})); err != nil {
		t.Fatal(err)
	}
	if n, err := Applied(sh.dbs[1].Store(), "s000"); err != nil || n != 1 {
		t.Fatalf("the frame between shards: applied %d, %v", n, err)
	}
	var sum ShardFigures
	for i, v := range views {
		fig, ok := asia.ShardFigures(v.f.name)
		if !ok {
			t.Fatalf("no figures for shard %d", i)
		}
		if i == 0 && (fig.Outbox == 0 || fig.SentCache != 5) {
			t.Errorf("shard 0 routed 5 URLs to us: %+v, want outbox entries and 5 URLs in the sent cache", fig)
		}
		if i == 1 && (fig.Outbox != 0 || fig.SentCache != 0) {
			t.Errorf("shard 1 routed nothing: %+v", fig)
		}
		sum.Add(fig)
	}
	if sum.RecvURLs != 7 || sum.SentURLs != 0 {
		t.Errorf("summed over the shards: %+v; want the 7 URLs us sent, none delivered yet", sum)
	}
	if _, ok := asia.ShardFigures(SenderName("asia", 9)); ok {
		t.Error("figures for a shard this node has no replica of")
	}
}

// TestBatchInDoubtPartlyApplied: a batch from eu reaches us, sharded, and
// only one shard's part is applied before us dies (its record of eu does
// not move until every part is): us, back, says it applied none of it.
// eu, which handed the batch over while us was down, delivers it again as
// it was (its own sequence numbers), so the part applied is not applied
// twice and us ends with the batch's cash once. Before, eu sent the cash
// on in new entries, and the part applied got it twice.
func TestBatchInDoubtPartlyApplied(t *testing.T) {
	ctx := context.Background()
	eu := newTestFed(t, "eu")
	us, sh := newShardedTestFed(t, "us", 2)
	var hosts []string
	inShard := map[int]int{}
	for _, h := range hostsOwnedBy(t, eu, "us", 40) {
		if s := sh.ShardOf(h); inShard[s] < 3 {
			inShard[s]++
			hosts = append(hosts, h)
		}
	}
	if len(hosts) != 6 {
		t.Fatalf("hosts of us by shard: %v", inShard)
	}
	routeVia(t, eu, hosts)
	p := eu.peers["us"]
	now := time.Now()
	if eu.deliver(ctx, p, now) || p.pend == nil {
		t.Fatalf("delivery to a closed port: pending %v", p.pend)
	}
	dec, err := Decode(p.pend.frame, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	usCash := func() float64 {
		c := 0.0
		for _, db := range sh.dbs {
			if err := db.Store().ScanURLs(func(r store.URLRecord) error { c += r.Cash; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	sh.down.Store(2) // shard 1's part fails: us dies between the parts
	if err := us.Put(ctx, "eu", dec); err == nil {
		t.Fatal("the batch applied whole with a shard failing")
	}
	if c := usCash(); c != 3 {
		t.Fatalf("us's shards hold %v cash after the part applied, want 3", c)
	}
	setPeerDown(eu, "us", true)
	eu.tend(ctx, p, now) // hand-over: the batch in doubt
	if c := doubtCash(t, eu, "us"); c != 6 {
		t.Fatalf("in doubt %v, want the batch's 6", c)
	}
	sh.down.Store(0)
	st, err := us.local()
	if err != nil {
		t.Fatal(err)
	}
	if st.Recv["eu"] != 0 {
		t.Fatalf("us says it applied up to %d of eu's, want none", st.Recv["eu"])
	}
	eu.heardFrom("us", st, now)
	eu.tend(ctx, p, now) // sync: settle
	if pds := deliverAll(t, eu, us); len(pds) == 0 || !pds[0].doubt {
		t.Fatalf("%d batches after the return, want the batch in doubt first", len(pds))
	}
	if c := usCash(); c != 6 {
		t.Errorf("us's shards hold %v cash, want the batch's 6 once", c)
	}
	if c := doubtCash(t, eu, "us") + outCash(t, eu, "us"); c != 0 {
		t.Errorf("%v cash still at eu for us", c)
	}
	st, _ = us.local()
	if out, _ := eu.outboundOf("us"); out.Acked != st.Recv["eu"] {
		t.Errorf("eu's acknowledged count for us %d, us applied up to %d", out.Acked, st.Recv["eu"])
	}
}

// TestShardForgetsRemoved: a shard's outbox for a site removed from the
// federation file goes to its hosts' owners now; those its own site now
// owns are kept through the site's routing between shards (Shard.Keep),
// and without that routing they wait rather than go astray.
func TestShardForgetsRemoved(t *testing.T) {
	ctx := context.Background()
	asia, sh := newShardedTestFed(t, "asia", 1)
	view := asia.Shard(sh.dbs[0], SenderName("asia", 0), nil)
	file := testFile()
	file.Sites = slices.DeleteFunc(file.Sites, func(s SiteSpec) bool { return s.Name == "us" })
	next, err := New(Options{File: file, Self: "asia", DB: openTestDB(t, "asia-meta2")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Shutdown(ctx) })
	// us's hosts, some of them asia's once us is gone.
	var urls []route.Remote
	toAsia := 0
	for i, h := range hostsOwnedBy(t, asia, "us", 12) {
		urls = append(urls, route.Remote{URL: fmt.Sprintf("http://%s/p/%d", h, i), Cash: 1})
		if next.primary(h, location{key: h}) == "asia" {
			toAsia++
		}
	}
	if toAsia == 0 || toAsia == len(urls) {
		t.Fatalf("%d of %d hosts go to asia without us: want some, not all", toAsia, len(urls))
	}
	b := store.NewBatch()
	if _, _, err := view.Route(ctx, urls, b); err != nil {
		t.Fatal(err)
	}
	if err := view.f.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	after := next.Shard(sh.dbs[0], SenderName("asia", 0), nil)
	if err := after.f.forgetRemoved(ctx); !errors.Is(err, errNoInterim) {
		t.Fatalf("without routing between shards: %v, want errNoInterim", err)
	}
	if c := outCash(t, after.f, "us"); c != 12 {
		t.Fatalf("%v cash left for us, want all 12 waiting", c)
	}
	var kept []string
	after.Keep(func(_ context.Context, urls []route.Remote, _ *store.Batch) ([]route.Remote, error) {
		for _, u := range urls {
			kept = append(kept, u.URL)
		}
		return urls, nil // all of this shard's
	})
	if err := after.f.forgetRemoved(ctx); err != nil {
		t.Fatal(err)
	}
	if len(kept) != toAsia {
		t.Errorf("kept %d URLs through the shards' routing, want the %d asia now owns", len(kept), toAsia)
	}
	if c := storeCash(t, after.f) + outCash(t, after.f, "eu"); c != 12 || outCash(t, after.f, "us") != 0 {
		t.Errorf("cash in the shard and its outbox for eu %v, for us %v; want 12 and 0", c, outCash(t, after.f, "us"))
	}
}

// TestShardHoldsAndHandsBack: a shard of a sharded site is an interim
// owner (step 4): with us down it records that it may hold us's hosts and
// reseeds us's seeds of its hosts; when us is back it hands back the
// fetched URLs of those hosts (its outbox for us, under its own sender
// name) and records the hand-back done; its HandBacks say so per sender,
// the site's probe answer carries them (the shards' merged record), and a
// site waiting for it (an unsharded us) waits until it has applied up to
// that sender's number.
func TestShardHoldsAndHandsBack(t *testing.T) {
	ctx := context.Background()
	asia, sh := newShardedTestFed(t, "asia", 1)
	var held []string
	for _, h := range hostsOwnedBy(t, asia, "us", 40) {
		if asia.part.Owner(partition.Host{Name: h, Key: h}, func(s string) bool { return s == "us" }) == "asia" {
			held = append(held, h)
		}
	}
	if len(held) < 2 {
		t.Fatalf("%d of us's hosts go to asia next", len(held))
	}
	asia.o.Seeds = []string{"http://" + held[0] + "/", "http://" + held[1] + "/"}
	view := asia.Shard(sh.dbs[0], SenderName("asia", 0), nil)
	view.Keep(func(_ context.Context, urls []route.Remote, _ *store.Batch) ([]route.Remote, error) { return urls, nil })
	now := time.Now()
	asia.heardFrom("eu", probeMsg{Site: "eu"}, now)
	asia.heardFrom("us", probeMsg{Site: "us"}, now)
	setPeerDown(asia, "us", true)
	view.Step(ctx)
	backs, err := view.HandBacks()
	if err != nil || !backs["us"].Pending {
		t.Fatalf("the shard's hand-backs with us down: %+v, %v; want us pending", backs, err)
	}
	if busy, _ := view.BackPending(); busy {
		t.Error("a hand-back to us, down, counted as work to do")
	}
	for _, u := range asia.o.Seeds {
		if ok, _ := view.f.st.Contains(u); !ok {
			t.Errorf("seed %s of us's host held here not reseeded in the shard", u)
		}
	}
	// The shard fetched a seed meanwhile.
	b := store.NewBatch()
	b.RecordFetch(store.FetchResult{URL: asia.o.Seeds[0], Status: store.StatusFetched, HTTPStatus: 200})
	if err := view.f.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	// us is back: the shard hands back (no round of its in flight).
	asia.heardFrom("us", probeMsg{Site: "us", RecvFrom: map[string]uint64{}}, now)
	if busy, _ := view.BackPending(); !busy {
		t.Error("the hand-back to us, back, not counted as work to do")
	}
	view.Step(ctx)
	backs, _ = view.HandBacks()
	seq := backs["us"].Senders[view.f.name]
	if backs["us"].Pending || seq == 0 {
		t.Fatalf("the shard's hand-back after us's return: %+v", backs["us"])
	}
	pd, err := view.f.nextBatch(view.f.peers["us"])
	if err != nil || pd == nil || pd.seq != seq {
		t.Fatalf("the shard's batch for us: %+v, %v; want its hand-back up to %d", pd, err, seq)
	}
	dec, err := Decode(pd.frame, Limits{})
	if err != nil || len(dec.Fetched) != 1 || dec.Fetched[0].URL != asia.o.Seeds[0] {
		t.Fatalf("hand-back batch: %+v, %v; want the fetched seed", dec, err)
	}
	// The site's probe answer merges the shards' (here, what the waves
	// found: testShards.backs).
	sh.backs.Store(&map[string]HandBack{"us": backs["us"]})
	m, err := asia.local()
	if err != nil || !maps.Equal(m.HandBack["us"].Senders, backs["us"].Senders) {
		t.Fatalf("asia's probe answer: hand-back to us %+v, %v; want the shard's", m.HandBack["us"], err)
	}
	// us waits for asia until it has applied the shard's entries up to seq.
	us := newTestFed(t, "us")
	us.mu.Lock()
	for _, p := range us.peers {
		p.heard = true
	}
	us.peers["asia"].state = m
	us.mu.Unlock()
	if _, err := us.locateAll(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := us.updateGate(); err != nil {
		t.Fatal(err)
	}
	if !us.Waiting(held[0]) {
		t.Fatalf("%s does not wait for asia's shard's hand-back", held[0])
	}
	if err := us.Put(ctx, "asia", dec); err != nil {
		t.Fatal(err)
	}
	if err := us.updateGate(); err != nil {
		t.Fatal(err)
	}
	if us.Waiting(held[0]) {
		t.Errorf("%s still waits once the shard's hand-back is applied", held[0])
	}
}

package federation

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/route"
)

// testFile is a three-site federation on the consistent ring.
func testFile() File {
	return File{Partitioner: "consistent", Replicas: 100, Sites: []SiteSpec{
		{Name: "eu", Lat: 53.55, Lon: 9.99, Endpoint: "127.0.0.1:1"},
		{Name: "us", Lat: 40.71, Lon: -74.01, Endpoint: "127.0.0.1:2"},
		{Name: "asia", Lat: 1.35, Lon: 103.82, Endpoint: "127.0.0.1:3"},
	}}
}

// newTestFed opens a one-node crawl database and the federation layer of
// site self over it (no endpoint: the tests call it directly).
func newTestFed(t testing.TB, self string) *Fed {
	t.Helper()
	return newFedOf(t, self, testFile(), nil, nil)
}

// newFedOf is newTestFed with the federation file and the TLS of the
// endpoint and of the calls to peers.
func newFedOf(t testing.TB, self string, file File, serverTLS, clientTLS *tls.Config) *Fed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := crawldb.Open(ctx, crawldb.Options{Dir: filepath.Join(t.TempDir(), "crawldb"), NodeID: self + "-1", RaftAddr: "127.0.0.1:0", FastTimeouts: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := New(Options{File: file, Self: self, DB: db, ServerTLS: serverTLS, ClientTLS: clientTLS, Rounds: func() (route.Rounds, error) {
		st, err := rounds.ReadState(db.Store())
		r := route.Rounds{Next: st.Next}
		for _, a := range st.Active {
			r.Active = append(r.Active, a.Round)
		}
		return r, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Shutdown(context.Background()) })
	return f
}

// hostsOf returns n host names that site owns (unresolved: keyed by name).
func hostsOwnedBy(t *testing.T, f *Fed, site string, n int) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n && i < 10000; i++ {
		h := fmt.Sprintf("h%d.example.test", i)
		if f.primary(h, location{key: h}) == site {
			out = append(out, h)
		}
	}
	if len(out) < n {
		t.Fatalf("found %d hosts of %s", len(out), site)
	}
	return out
}

func batchFor(from, to string, hosts []string, seq uint64) *Batch {
	b := &Batch{From: from, To: to, Seq: seq, Virtual: 0.25}
	for i, h := range hosts {
		b.Puts = append(b.Puts, Put{URL: "http://" + h + "/p/" + fmt.Sprint(i), Cash: 0.5, Depth: 2})
		b.Hosts = append(b.Hosts, HostLoc{Host: h, Key: h})
	}
	return b
}

// TestPutRefusesForeignURLs: a batch holding one URL the receiver does not
// own is refused whole, and the crawl database does not change.
func TestPutRefusesForeignURLs(t *testing.T) {
	f := newTestFed(t, "eu")
	ctx := context.Background()
	mine := hostsOwnedBy(t, f, "eu", 3)
	theirs := hostsOwnedBy(t, f, "asia", 1)
	before := f.st.Counts()
	cases := []struct {
		name string
		from string
		b    *Batch
		want error
	}{
		{"a URL of another site's host", "us", batchFor("us", "eu", append(mine, theirs...), 1), ErrNotOwner},
		{"a host without its location", "us", &Batch{From: "us", To: "eu", Seq: 1, Puts: []Put{{URL: "http://" + mine[0] + "/", Cash: 1}}}, ErrRefused},
		{"a site not in the file", "mars", batchFor("mars", "eu", mine, 1), ErrRefused},
		{"itself", "eu", batchFor("eu", "eu", mine, 1), ErrRefused},
	}
	for _, c := range cases {
		err := f.Put(ctx, c.from, c.b)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	after := f.st.Counts()
	if after.URLs != before.URLs || after.Applied != before.Applied {
		t.Errorf("refused batches changed the crawl database: %+v → %+v", before, after)
	}
	if puts, virt, err := f.Inbound(); err != nil || puts != 0 || virt != 0 {
		t.Errorf("inbound after refusals: %v %v %v", puts, virt, err)
	}
}

// TestPutAppliesOnce: a batch is applied once; a retry (same sequence
// number) changes nothing; the cash received is counted.
func TestPutAppliesOnce(t *testing.T) {
	f := newTestFed(t, "eu")
	ctx := context.Background()
	mine := hostsOwnedBy(t, f, "eu", 4)
	b := batchFor("us", "eu", mine, 7)
	for i := 0; i < 2; i++ {
		if err := f.Put(ctx, "us", b); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if n := f.st.Counts().URLs; n != 4 {
		t.Errorf("%d URLs after the put and its retry, want 4", n)
	}
	puts, virt, err := f.Inbound()
	if err != nil || puts != 2 || virt != 0.25 {
		t.Errorf("inbound %v %v %v, want 2 and 0.25", puts, virt, err)
	}
	rec, ok, err := f.st.Get(b.Puts[0].URL)
	if err != nil || !ok || rec.Cash != 0.5 || rec.Depth != 2 {
		t.Errorf("%s: %+v %v %v", b.Puts[0].URL, rec, ok, err)
	}
	// A later batch with a known URL adds its cash (a known URL's cash
	// still arrives).
	b2 := batchFor("us", "eu", mine[:1], 9)
	if err := f.Put(ctx, "us", b2); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := f.st.Get(b.Puts[0].URL); rec.Cash != 1 {
		t.Errorf("cash %v after a second put of a known URL, want 1", rec.Cash)
	}
	// The host locations came with the batch: they are not looked up again.
	if _, ok, err := f.cachedLoc(mine[0]); err != nil || !ok {
		t.Errorf("location of %s not recorded: %v %v", mine[0], ok, err)
	}
}

// TestOutboxSentCache: URLs routed once are not sent again: Route leaves
// them out of the next entries and their cash goes to the owner's virtual
// page, unless they are Moved (a hand-back); the delivery frames the
// stored entries as they are.
func TestOutboxSentCache(t *testing.T) {
	f := newTestFed(t, "eu")
	ctx := context.Background()
	hosts := hostsOwnedBy(t, f, "us", 3)
	mine := hostsOwnedBy(t, f, "eu", 1)
	var urls []route.Remote
	for i, h := range append(hosts, mine...) {
		urls = append(urls, route.Remote{URL: "http://" + h + "/x" + fmt.Sprint(i), Cash: 1, Depth: 1})
	}
	routeAll := func() {
		t.Helper()
		b := store.NewBatch()
		local, sent, err := f.Route(ctx, urls, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(local) != 1 || local[0] != urls[3] || sent.URLs != 3 || sent.Cash != 3 {
			t.Fatalf("Route kept %v, sent %+v; want %s kept, 3 URLs and 3 cash sent", local, sent, urls[3].URL)
		}
		if err := f.apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	p := f.peers["us"]
	deliver := func() (*pending, *Batch) {
		t.Helper()
		pd, err := f.nextBatch(p)
		if err != nil || pd == nil {
			t.Fatalf("batch: %v %v", pd, err)
		}
		b, err := Decode(pd.frame, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if b.From != "eu" || b.To != "us" || b.Seq != pd.seq || b.First != pd.first || b.First == 0 || b.First > b.Seq {
			t.Fatalf("frame from %q to %q, %d..%d (pending %d..%d)", b.From, b.To, b.First, b.Seq, pd.first, pd.seq)
		}
		if err := f.acked(ctx, p, pd); err != nil {
			t.Fatal(err)
		}
		if n := f.st.Counts().Outbox; n != 0 {
			t.Fatalf("%d outbox entries after the ack", n)
		}
		return pd, b
	}
	routeAll()
	pd, b := deliver()
	if len(b.Puts) != 3 || b.Virtual != 0 || pd.urls != 3 || len(b.Hosts) != 3 {
		t.Fatalf("first batch: %d puts (%d counted), %d hosts, virtual %v", len(b.Puts), pd.urls, len(b.Hosts), b.Virtual)
	}
	routeAll()
	_, b = deliver()
	if len(b.Puts) != 0 || b.Virtual != 3 || len(b.Hosts) != 0 {
		t.Errorf("second batch: %d puts, %d hosts, virtual %v; want 0, 0, 3", len(b.Puts), len(b.Hosts), b.Virtual)
	}
	if hits, lookups := f.CacheStats(); hits != 3 || lookups != 6 {
		t.Errorf("sent cache: %d hits of %d lookups, want 3 of 6", hits, lookups)
	}
	// Moved URLs (a hand-back) are sent although the cache has them.
	for i := range urls {
		urls[i].Moved = true
	}
	routeAll()
	_, b = deliver()
	if len(b.Puts) != 3 || b.Virtual != 0 {
		t.Errorf("batch of moved URLs: %d puts, virtual %v; want 3, 0", len(b.Puts), b.Virtual)
	}
	if hits, lookups := f.CacheStats(); hits != 3 || lookups != 6 {
		t.Errorf("sent cache after moved URLs: %d hits of %d lookups, want 3 of 6 (moved URLs are not looked up)", hits, lookups)
	}
}

// TestRouteFitsTheOutbox: however many URLs an update sends one site, each
// outbox entry fits the crawl database's limit, each carries its hosts'
// locations, none is lost, and a delivery frames them in batches of at
// most maxBatchPuts.
func TestRouteFitsTheOutbox(t *testing.T) {
	f := newTestFed(t, "eu")
	ctx := context.Background()
	hosts := hostsOwnedBy(t, f, "us", 40)
	var urls []route.Remote
	for i := 0; i < 20000; i++ {
		h := hosts[i%len(hosts)]
		urls = append(urls, route.Remote{URL: fmt.Sprintf("http://%s/a/rather/long/path/to/page-%06d.html?session=%d", h, i, i*7), Cash: 0.001, Depth: 3})
	}
	b := store.NewBatch()
	if _, _, err := f.Route(ctx, urls, b); err != nil {
		t.Fatal(err)
	}
	if err := f.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	entries, err := f.st.Outbox("us", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, e := range entries {
		if len(e.Payload) > maxEntryBytes+1024 {
			t.Errorf("entry %d: %d bytes", i, len(e.Payload))
		}
		eb, err := Decode(e.Payload, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, put := range eb.Puts {
			found := false
			for _, h := range eb.Hosts {
				found = found || h.Host == hostOf(put.URL)
			}
			if !found {
				t.Fatalf("entry %d: no location for %s", i, put.URL)
			}
		}
		total += len(eb.Puts)
	}
	if total != len(urls) || len(entries) < 2 {
		t.Errorf("%d puts in %d entries, want %d in several", total, len(entries), len(urls))
	}
	p := f.peers["us"]
	sent := 0
	for i := 0; i < 100 && f.st.Counts().Outbox > 0; i++ {
		pd, err := f.nextBatch(p)
		if err != nil || pd == nil {
			t.Fatalf("batch %d: %v %v", i, pd, err)
		}
		fb, err := Decode(pd.frame, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if len(fb.Puts) > maxBatchPuts || len(fb.Puts) != pd.urls {
			t.Fatalf("batch %d: %d puts (%d counted), limit %d", i, len(fb.Puts), pd.urls, maxBatchPuts)
		}
		sent += len(fb.Puts)
		if err := f.acked(ctx, p, pd); err != nil {
			t.Fatal(err)
		}
	}
	if sent != len(urls) {
		t.Errorf("%d URLs delivered, want %d", sent, len(urls))
	}
}

// TestFollowerEndpointPassive: a node serving the site's endpoint without
// leading the site (after a leadership change) tells peers the site is
// passive only as its leader sees it (the leader runs the rounds and the
// deliveries), and only once the leader's idle index covers the batches
// this node received; without a way to ask the leader it says busy.
func TestFollowerEndpointPassive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := t.TempDir()
	open := func(id, join string) *crawldb.DB {
		db, err := crawldb.Open(ctx, crawldb.Options{Dir: filepath.Join(root, id), NodeID: id, RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", Join: join, FastTimeouts: true, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := db.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		return db
	}
	db1 := open("eu-1", "")
	for db1.APIAddr() == "" || !db1.IsLeader() {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // its API address announced
	db2 := open("eu-2", db1.APIAddr())
	var idle atomic.Uint64
	lead, err := New(Options{File: testFile(), Self: "eu", DB: db1, Idle: idle.Load})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lead.Shutdown(context.Background()) })
	follow, err := New(Options{File: testFile(), Self: "eu", DB: db2,
		LeaderState: func(context.Context) ([]byte, error) { return lead.LeaderState() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { follow.Shutdown(context.Background()) })
	if _, err := follow.LeaderState(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a follower's LeaderState: %v, want ErrNotLeader", err)
	}
	passive := func() bool {
		m, err := follow.state(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Site != "eu" {
			t.Fatalf("state of site %q", m.Site)
		}
		return m.Passive
	}
	if passive() {
		t.Fatal("passive while the leader has work")
	}
	idle.Store(db1.Store().AppliedIndex())
	if !passive() {
		t.Fatal("not passive with the leader idle and nothing received")
	}
	// A batch through the follower's endpoint, after the leader's idle look.
	if err := follow.Put(ctx, "us", batchFor("us", "eu", hostsOwnedBy(t, follow, "eu", 2), 1)); err != nil {
		t.Fatal(err)
	}
	if passive() {
		t.Fatal("passive although the leader's idle index predates a batch this node received")
	}
	idle.Store(db1.Store().AppliedIndex())
	if !passive() {
		t.Fatal("not passive once the leader's idle index covers the batch")
	}
	follow.o.LeaderState = nil
	if passive() {
		t.Fatal("a follower that cannot ask its leader says the site is passive")
	}
}

// TestHandBackFetched: a site ("us") that held hosts of a site down
// ("eu") records that it holds them; once eu is back and us has no round
// in flight, us puts in eu's outbox a fetched-elsewhere record of every
// URL of those hosts it recorded with a final status (none for a URL it
// has not fetched), and marks its hand-back done at its last entry. eu
// waits for that entry before it crawls those hosts: it records the URLs
// as fetched elsewhere (no cash moves: a new one has none, an unfetched
// one keeps its cash, a generated one is marked and its host keeps
// waiting), and then crawls its other hosts again.
func TestHandBackFetched(t *testing.T) {
	ctx := context.Background()
	us, eu := newTestFed(t, "us"), newTestFed(t, "eu")
	// Hosts of eu that us owns while eu is down.
	var held []string
	for i := 0; len(held) < 3 && i < 10000; i++ {
		h := fmt.Sprintf("h%d.example.test", i)
		l, err := us.locate(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if us.heldFor(h, l, "eu") {
			held = append(held, h)
		}
	}
	if len(held) < 3 {
		t.Fatalf("hosts eu's that us would hold: %v", held)
	}
	if _, err := us.locateAll(ctx, held); err != nil { // located, as us's update does
		t.Fatal(err)
	}
	u := func(h string, p int) string { return fmt.Sprintf("http://%s/p/%d", held[h[0]-'a'], p) }
	// What us did while eu was down: fetched a/0 (eu does not know it),
	// a/1 (unfetched at eu), b/0 (generated at eu), got a final error on
	// c/0, and has a/2 still in its frontier.
	b := store.NewBatch()
	for _, x := range []string{u("a", 0), u("a", 1), u("b", 0), u("c", 0), u("a", 2)} {
		b.UpsertCash(x, 0.125, 1)
	}
	for _, x := range []string{u("a", 0), u("a", 1), u("b", 0)} {
		b.RecordFetch(store.FetchResult{URL: x, Status: store.StatusFetched, HTTPStatus: 200})
	}
	b.RecordFetch(store.FetchResult{URL: u("c", 0), Status: store.StatusError, HTTPStatus: 404})
	if err := us.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	peer := us.peers["eu"]
	us.mu.Lock()
	peer.down = true
	us.publishDown()
	us.mu.Unlock()
	if err := us.holding(ctx, peer); err != nil {
		t.Fatal(err)
	}
	if m, err := us.local(); err != nil || !m.HandBack["eu"].Pending {
		t.Fatalf("us's state while eu is down: %+v, %v", m.HandBack, err)
	}
	us.heardFrom("eu", probeMsg{Site: "eu"}, time.Now()) // eu is back
	if m, _ := us.local(); !m.HandBack["eu"].Pending || m.Passive {
		t.Fatalf("us's state with its hand-back to do: %+v, passive %v", m.HandBack, m.Passive)
	}
	if err := us.handBackStep(ctx, peer, time.Now()); err != nil {
		t.Fatal(err)
	}
	m, _ := us.local()
	hb := m.HandBack["eu"]
	if hb.Pending || hb.Seq == 0 {
		t.Fatalf("us's hand-back after its step: %+v", hb)
	}
	pd, err := us.nextBatch(peer)
	if err != nil || pd == nil {
		t.Fatalf("us's batch for eu: %+v, %v", pd, err)
	}
	batch, err := Decode(pd.frame, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if batch.Seq != hb.Seq || len(batch.Fetched) != 4 || len(batch.Puts) != 0 {
		t.Fatalf("us's batch for eu: seq %d (hand-back done at %d), %d fetched records, %d puts", batch.Seq, hb.Seq, len(batch.Fetched), len(batch.Puts))
	}

	// eu, back: it knows a/1 (unfetched) and b/0 (generated in round 4,
	// in flight).
	b = store.NewBatch()
	b.UpsertCash(u("a", 1), 0.5, 1)
	b.UpsertCash(u("b", 0), 0.25, 1)
	b.MarkGenerated(u("b", 0), 4)
	state, _ := json.Marshal(rounds.State{Next: 5, Active: []rounds.Active{{Round: 4, Phase: rounds.PhaseFetch}}})
	b.PutRound(state)
	if err := eu.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	eu.mu.Lock()
	for _, p := range eu.peers {
		p.heard = true
	}
	eu.peers["us"].state = m // us's probe state: hand-back done at hb.Seq
	eu.mu.Unlock()
	if err := eu.updateGate(); err != nil {
		t.Fatal(err)
	}
	for _, h := range held {
		if !eu.Waiting(h) || !eu.Away(h) {
			t.Errorf("%s does not wait for us's hand-back", h)
		}
	}
	cash := func() (sum float64) {
		eu.st.ScanURLs(func(r store.URLRecord) error { sum += r.Cash + r.History; return nil })
		return sum
	}
	before := cash()
	if err := eu.Put(ctx, "us", batch); err != nil {
		t.Fatal(err)
	}
	if after := cash(); after != before {
		t.Errorf("eu's cash %v after the hand-back, %v before", after, before)
	}
	for _, c := range []struct {
		url    string
		status store.Status
		cash   float64
	}{
		{u("a", 0), store.StatusFetched, 0},
		{u("a", 1), store.StatusFetched, 0.5},
		{u("b", 0), store.StatusGenerated, 0.25},
		{u("c", 0), store.StatusError, 0},
	} {
		r, ok, err := eu.st.Get(c.url)
		if err != nil || !ok || r.Status != c.status || r.Cash != c.cash {
			t.Errorf("%s at eu: %+v (found %v, %v), want %v with cash %v", c.url, r, ok, err, c.status, c.cash)
		}
	}
	if ok, _ := eu.st.Contains(u("a", 2)); ok {
		t.Error("a URL us has not fetched came back as fetched")
	}
	if err := eu.updateGate(); err != nil {
		t.Fatal(err)
	}
	for i, h := range held {
		if want := i == 1; eu.Waiting(h) != want {
			t.Errorf("%s waits: %v, want %v (only b's URL is generated and marked)", h, !want, want)
		}
	}
	// b's round gives b/0 back: it takes us's status, with its cash.
	b = store.NewBatch()
	b.Requeue(u("b", 0))
	if err := eu.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := eu.st.Get(u("b", 0)); r.Status != store.StatusFetched || r.Cash != 0.25 {
		t.Errorf("b/0 after its round: %+v", r)
	}
	if err := eu.updateGate(); err != nil {
		t.Fatal(err)
	}
	if eu.Waiting(held[1]) {
		t.Error("b still waits after its round")
	}
	// A mark on a URL whose round is no longer in flight (it would stay
	// generated for ever) does not hold its host.
	b = store.NewBatch()
	b.UpsertCash(u("c", 1), 0.25, 1)
	b.MarkGenerated(u("c", 1), 2)
	b.FetchedElsewhere(u("c", 1), store.StatusFetched)
	if err := eu.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := eu.updateGate(); err != nil {
		t.Fatal(err)
	}
	if eu.st.Counts().Marked != 1 || eu.Waiting(held[2]) {
		t.Errorf("a mark of round 2, not in flight: %d marks, c waits %v", eu.st.Counts().Marked, eu.Waiting(held[2]))
	}
}

// TestShardedPeerInterim: a sharded peer is an interim owner as any other
// (docs/sharding.md, step 4): the hosts of a site down go to the next site
// up on the ring, sharded or not, and when the site is back each site
// knows which of them it held. (Before step 4, sharded sites were passed
// over and took none.)
func TestShardedPeerInterim(t *testing.T) {
	eu := newTestFed(t, "eu")
	now := time.Now()
	eu.heardFrom("asia", probeMsg{Site: "asia", Sharded: true}, now)
	eu.heardFrom("us", probeMsg{Site: "us"}, now)
	usHosts := hostsOwnedBy(t, eu, "us", 40)
	setPeerDown(eu, "us", true)
	held := map[string]int{}
	for _, h := range usHosts {
		next := eu.part.Owner(partition.Host{Name: h, Key: h}, func(s string) bool { return s == "us" })
		o := eu.owner(h, location{key: h})
		if o != next {
			t.Errorf("%s (us's, us down): owner %q, want the next on the ring, %q", h, o, next)
		}
		held[o]++
	}
	if held["asia"] == 0 || held["eu"] == 0 {
		t.Fatalf("us's hosts by interim owner %v: want some at the sharded asia and some at eu", held)
	}
	eu.heardFrom("us", probeMsg{Site: "us"}, now) // back
	for _, h := range usHosts {
		want := eu.part.Owner(partition.Host{Name: h, Key: h}, func(s string) bool { return s == "us" }) == "eu"
		if got := eu.heldFor(h, location{key: h}, "us"); got != want {
			t.Errorf("%s: eu held it for us: %v, want %v", h, got, want)
		}
	}
}

// TestLocateFailurePlacesNothing checks that a host whose lookup failed is
// neither placed nor recorded: placed by its name, it would have another
// owner here than at the sites that resolved it (a seed crawled nowhere).
func TestLocateFailurePlacesNothing(t *testing.T) {
	ctx := context.Background()
	f := newTestFed(t, "us")
	addr := netip.MustParseAddr("127.0.0.9")
	var failing atomic.Bool
	failing.Store(true)
	f.o.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if failing.Load() {
			return nil, errors.New("lookup timed out")
		}
		return []netip.Addr{addr}, nil
	}
	const h = "www.example.test"
	if _, err := f.Owners(ctx, []string{h}); err == nil {
		t.Fatal("Owners placed a host whose lookup failed")
	}
	if v, err := f.o.DB.Store().User(locPrefix + h); err != nil || v != nil {
		t.Fatalf("a failed lookup recorded a location %q (%v)", v, err)
	}
	failing.Store(false)
	if _, err := f.Owners(ctx, []string{h}); err != nil {
		t.Fatal(err)
	}
	l, ok, err := f.cachedLoc(h)
	if want := partition.Key(h, []netip.Addr{addr}); err != nil || !ok || l.key != want {
		t.Errorf("location %+v (%v, recorded %v), want key %q", l, err, ok, want)
	}
}

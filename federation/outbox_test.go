package federation

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/route"
)

// TestBatchInDoubtAtHandOver sends a batch from eu to us whose answer
// never comes, declares us down (eu hands its hosts over), and brings us
// back. Whether or not us applied the batch, the federation holds its
// cash once: the batch's URLs go to the next owners without cash, the
// batch waits at eu until us, back, says what it applied (if not, eu
// delivers it again, as it was, before anything else), and eu's count
// of what us acknowledged meets us's count of what it applied (the
// termination waves' counters). Before the fix the hand-over rerouted the
// batch with its cash (12 units for 6 sent when us had applied it) and
// the counters never agreed.
func TestBatchInDoubtAtHandOver(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			ctx := context.Background()
			eu, us := newTestFed(t, "eu"), newTestFed(t, "us")
			hosts := hostsOwnedBy(t, eu, "us", 6)
			var urls []route.Remote
			for i, h := range hosts {
				urls = append(urls, route.Remote{URL: fmt.Sprintf("http://%s/p/%d", h, i), Cash: 1})
			}
			b := store.NewBatch()
			local, sent, err := eu.Route(ctx, urls, b)
			if err != nil || len(local) != 0 || sent.Cash != 6 {
				t.Fatalf("route: local %v, sent %+v, %v", local, sent, err)
			}
			if err := eu.apply(ctx, b); err != nil {
				t.Fatal(err)
			}
			p := eu.peers["us"]
			now := time.Now()
			if eu.deliver(ctx, p, now) || p.pend == nil { // us's endpoint refuses: no answer
				t.Fatalf("delivery to a closed port: pending %v", p.pend)
			}
			if applied { // it reached us; the answer was lost
				dec, err := Decode(p.pend.frame, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if err := us.Put(ctx, "eu", dec); err != nil {
					t.Fatal(err)
				}
			}
			setPeerDown(eu, "us", true)
			eu.tend(ctx, p, now) // hand-over
			if n := eu.st.Counts().Outbox; n == 0 {
				t.Fatalf("nothing rerouted to the next owners")
			}
			if left, _ := eu.st.Outbox("us", 0, 10); len(left) != 0 {
				t.Fatalf("%d entries left for us after the hand-over", len(left))
			}
			held := doubtCash(t, eu, "us")
			if held != 6 {
				t.Errorf("cash in doubt %v, want the batch's 6", held)
			}
			if got, want := fedCash(t, eu, us)+held, 6+usCash(applied); got != want {
				t.Errorf("after the hand-over: cash %v federation-wide (in doubt included), want %v", got, want)
			}

			// us is back: its answer to a probe says what it applied.
			st, err := us.local()
			if err != nil {
				t.Fatal(err)
			}
			eu.heardFrom("us", st, now)
			if doubts, _ := eu.doubted(); !doubts["us"] {
				t.Fatalf("doubt settled before eu heard from us")
			}
			eu.tend(ctx, p, now) // sync: settle
			if doubts, _ := eu.doubted(); doubts["us"] == applied {
				t.Errorf("after settling, entries in doubt for us: %v; want them only if us did not apply them (to deliver again)", doubts["us"])
			}
			if got := fedCash(t, eu, us) + doubtCash(t, eu, "us"); got != 6 {
				t.Errorf("after us's return: cash %v federation-wide (in doubt included), want the 6 sent", got)
			}
			out, err := eu.outboundOf("us")
			if err != nil {
				t.Fatal(err)
			}
			if want := st.Recv["eu"]; out.Acked != want {
				t.Errorf("eu's acknowledged count for us %d, us applied up to %d: the counters disagree", out.Acked, want)
			}
			// What eu sends us now (the batch not applied, the
			// hand-back) is applied in order: first the batch in doubt,
			// as it was.
			pds := deliverAll(t, eu, us)
			if inDoubt := len(pds) > 0 && pds[0].doubt; inDoubt == applied {
				t.Errorf("after the return, the first of %d batches in doubt: %v; want it only if us did not apply it (%v)", len(pds), inDoubt, !applied)
			}
			if doubts, _ := eu.doubted(); doubts["us"] {
				t.Error("entries still in doubt for us after the deliveries")
			}
			if got := storeCash(t, us); got != 6-outCash(t, eu, "asia")-storeCash(t, eu) {
				t.Errorf("us holds %v of the 6 (eu %v, eu's outbox for asia %v)", got, storeCash(t, eu), outCash(t, eu, "asia"))
			}
		})
	}
}

// deliverAll delivers from's outbox for to (at most 5 batches, as the
// delivery loop would, without the endpoint): each batch is applied by
// to.Put and acknowledged. It returns the batches.
func deliverAll(t *testing.T, from, to *Fed) []*pending {
	t.Helper()
	ctx := context.Background()
	p := from.peers[to.o.Self]
	var pds []*pending
	for range 5 {
		pd, err := from.nextBatch(p)
		if err != nil {
			t.Fatal(err)
		}
		if pd == nil {
			break
		}
		dec, err := Decode(pd.frame, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if err := to.Put(ctx, from.o.Self, dec); err != nil {
			t.Fatalf("batch %d..%d from %s: %v", pd.first, pd.seq, from.o.Self, err)
		}
		if err := from.acked(ctx, p, pd); err != nil {
			t.Fatal(err)
		}
		pds = append(pds, pd)
	}
	return pds
}

// routeVia routes a URL with one unit of cash on each of hosts through f
// (Route, then its command applied), and returns them.
func routeVia(t *testing.T, f *Fed, hosts []string) []route.Remote {
	t.Helper()
	ctx := context.Background()
	var urls []route.Remote
	for i, h := range hosts {
		urls = append(urls, route.Remote{URL: fmt.Sprintf("http://%s/p/%d", h, i), Cash: 1})
	}
	b := store.NewBatch()
	if _, _, err := f.Route(ctx, urls, b); err != nil {
		t.Fatal(err)
	}
	if err := f.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	return urls
}

// usCash is what us holds before its return: the batch's cash if it
// applied it.
func usCash(applied bool) float64 {
	if applied {
		return 6
	}
	return 0
}

// storeCash sums the cash on f's URLs.
func storeCash(t *testing.T, f *Fed) float64 {
	t.Helper()
	c := 0.0
	if err := f.st.ScanURLs(func(r store.URLRecord) error { c += r.Cash; return nil }); err != nil {
		t.Fatal(err)
	}
	return c
}

// payloadCash sums the cash on an outbox payload's puts.
func payloadCash(t *testing.T, payload []byte) float64 {
	t.Helper()
	d, err := Decode(payload, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	c := 0.0
	for _, p := range d.Puts {
		c += p.Cash
	}
	return c
}

// outCash sums the cash in f's outbox for peer.
func outCash(t *testing.T, f *Fed, peer string) float64 {
	t.Helper()
	entries, err := f.st.Outbox(peer, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	c := 0.0
	for _, e := range entries {
		c += payloadCash(t, e.Payload)
	}
	return c
}

// doubtCash sums the cash f holds in doubt for peer.
func doubtCash(t *testing.T, f *Fed, peer string) float64 {
	t.Helper()
	c := 0.0
	if err := f.st.UserScan(doubtPrefix+peer+"/", func(_ string, v []byte) error {
		c += payloadCash(t, v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

// fedCash sums the cash in the sites' crawl databases and outboxes.
func fedCash(t *testing.T, sites ...*Fed) float64 {
	t.Helper()
	c := 0.0
	for _, f := range sites {
		c += storeCash(t, f)
		for _, s := range f.o.File.Sites {
			if s.Name != f.o.Self {
				c += outCash(t, f, s.Name)
			}
		}
	}
	return c
}

// TestDecodeOutbound reads outbound records of both layouts and refuses
// damaged ones.
func TestDecodeOutbound(t *testing.T) {
	full := outbound{Acked: 7, Batches: 3, URLs: 90, Tried: 9}
	old := binary.AppendUvarint(nil, 7)
	old = binary.AppendUvarint(old, 3)
	old = binary.AppendUvarint(old, 90)
	old = binary.AppendUvarint(old, 0)
	for _, c := range []struct {
		name string
		in   []byte
		want outbound
		err  bool
	}{
		{"empty", nil, outbound{}, false},
		{"current", full.encode(), full, false},
		{"four counters (before Tried)", old, outbound{Acked: 7, Batches: 3, URLs: 90, Tried: 7}, false},
		{"truncated", old[:2], outbound{}, true},
		{"trailing bytes", append(full.encode(), 1), outbound{}, true},
	} {
		got, err := decodeOutbound(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v (error %v)", c.name, got, err, c.want, c.err)
		}
	}
}

// TestRefusedBatchRerouted: asia handed URLs of us's hosts over to eu,
// their interim owner while us was down, and us came back before they were
// delivered: eu refuses the batch over the real endpoint (409, not the
// owner), and once an answer to a probe sent after the refusal says what eu
// applied, asia re-routes the entries to us with their cash. Before the
// fix they stayed in the outbox for eu, refused on every retry, and the
// federation's crawl never ended.
func TestRefusedBatchRerouted(t *testing.T) {
	eu, file, d := servedEU(t)
	srv, cli := load(t, d.dir, "asia")
	asia := newFedOf(t, "asia", file, srv, cli)
	ctx := context.Background()
	now := time.Now()
	setPeerDown(asia, "us", true)
	setPeerDown(eu, "us", true)
	// URLs of us's hosts that eu holds while us is down.
	var urls []route.Remote
	for i := 0; len(urls) < 6 && i < 10000; i++ {
		h := fmt.Sprintf("h%d.example.test", i)
		l := location{key: h}
		if asia.primary(h, l) == "us" && asia.owner(h, l) == "eu" {
			urls = append(urls, route.Remote{URL: fmt.Sprintf("http://%s/", h), Cash: 1})
		}
	}
	b := store.NewBatch()
	if _, _, err := asia.Route(ctx, urls, b); err != nil {
		t.Fatal(err)
	}
	if err := asia.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	asia.tend(ctx, asia.peers["us"], now) // hand-over of the outbox for us
	if c := outCash(t, asia, "eu"); c != 6 {
		t.Fatalf("asia's outbox for eu holds %v cash, want 6", c)
	}
	setPeerDown(eu, "us", false) // us is back: eu sees it first
	setPeerDown(asia, "us", false)
	p := asia.peers["eu"]
	if asia.deliver(ctx, p, now) {
		t.Fatal("eu took URLs of us's hosts with us up")
	}
	if p.refusedAt.IsZero() {
		t.Fatalf("no refusal recorded (last error %q)", p.lastErr)
	}
	asia.tend(ctx, p, now) // no answer since the refusal: waits
	if c := outCash(t, asia, "eu"); c != 6 {
		t.Fatalf("entries moved before an answer said what eu applied: %v cash left for eu", c)
	}
	asia.probeAll(ctx)
	asia.tend(ctx, p, now)
	if c := outCash(t, asia, "eu"); c != 0 {
		t.Errorf("%v cash still in asia's outbox for eu after the refusal", c)
	}
	if c := outCash(t, asia, "us"); c != 6 {
		t.Errorf("asia's outbox for us holds %v cash, want the 6 eu refused", c)
	}
	if c := storeCash(t, eu); c != 0 {
		t.Errorf("eu holds %v cash of us's URLs", c)
	}
}

// TestDetectorCountsRounds: a peer becomes suspect, then down, only after
// probe rounds it left unanswered, not on wall-clock silence alone: a node
// whose probes stalled for longer than the grace period (a starved
// process; here its clock jumps) suspects nobody on its first round after
// the stall. Before, that round declared every peer suspect.
func TestDetectorCountsRounds(t *testing.T) {
	eu := newTestFed(t, "eu") // us and asia: closed ports, nothing answers
	base := time.Now()
	var clock atomic.Int64
	clock.Store(base.UnixNano())
	eu.o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	for _, p := range []string{"us", "asia"} {
		eu.heardFrom(p, probeMsg{Site: p}, base)
	}
	state := func() (suspect, down bool) {
		eu.mu.Lock()
		defer eu.mu.Unlock()
		p := eu.peers["us"]
		return p.suspect, p.down
	}
	ctx := context.Background()
	grace := eu.o.File.GraceOr()
	clock.Store(base.Add(eu.o.SuspectAfter + 10*time.Second).UnixNano()) // a stall
	for round := 1; round <= suspectMisses; round++ {
		eu.probeAll(ctx)
		if s, _ := state(); s != (round == suspectMisses) {
			t.Fatalf("round %d after the stall: suspect %v, want %v", round, s, round == suspectMisses)
		}
	}
	clock.Store(base.Add(eu.o.SuspectAfter + grace + 20*time.Second).UnixNano()) // another
	for round := 1; round <= suspectMisses; round++ {
		eu.probeAll(ctx)
		if _, d := state(); d != (round == suspectMisses) {
			t.Fatalf("round %d after the second stall: down %v, want %v", round, d, round == suspectMisses)
		}
	}
	// An answer clears it.
	eu.heardFrom("us", probeMsg{Site: "us"}, eu.o.Now())
	if s, d := state(); s || d {
		t.Errorf("after an answer: suspect %v, down %v", s, d)
	}
}

// TestRefusedBatchReroutedByShard is TestRefusedBatchRerouted for a shard
// of a sharded site: its shard handed URLs of us's hosts over to eu while
// us was down, us came back, eu refuses them over the real endpoint, and
// the shard re-routes them to us once an answer to a probe the site sent
// after the refusal says what eu applied. Before, the shard retried the
// refused batch every second until the crawl's time ran out (seen in
// TestFederationSiteReturns under the race detector in a 0.7-core
// cgroup).
func TestRefusedBatchReroutedByShard(t *testing.T) {
	eu, file, d := servedEU(t)
	srv, cli := load(t, d.dir, "asia")
	sh := &testShards{dbs: []*crawldb.DB{openTestDB(t, "asia-s0")}}
	asia, err := New(Options{File: file, Self: "asia", DB: openTestDB(t, "asia-meta"), Sharded: sh, ServerTLS: srv, ClientTLS: cli})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { asia.Shutdown(context.Background()) })
	view := asia.Shard(sh.dbs[0], SenderName("asia", 0), nil)
	ctx := context.Background()
	now := time.Now()
	asia.heardFrom("eu", probeMsg{Site: "eu"}, now)
	asia.heardFrom("us", probeMsg{Site: "us"}, now)
	setPeerDown(asia, "us", true)
	setPeerDown(eu, "us", true)
	var urls []route.Remote
	for i := 0; len(urls) < 6 && i < 10000; i++ {
		h := fmt.Sprintf("h%d.example.test", i)
		if l := (location{key: h}); asia.primary(h, l) == "us" && asia.owner(h, l) == "eu" {
			urls = append(urls, route.Remote{URL: fmt.Sprintf("http://%s/", h), Cash: 1})
		}
	}
	b := store.NewBatch()
	if _, _, err := view.Route(ctx, urls, b); err != nil {
		t.Fatal(err)
	}
	if err := view.f.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	view.Step(ctx) // us down: hand-over to eu
	if c := outCash(t, view.f, "eu"); c != 6 {
		t.Fatalf("the shard's outbox for eu holds %v cash, want 6", c)
	}
	setPeerDown(eu, "us", false) // us is back
	setPeerDown(asia, "us", false)
	for range 3 { // sync with eu, then deliver: refused
		view.Step(ctx)
	}
	if p := view.f.peers["eu"]; p.refusedAt.IsZero() {
		t.Fatalf("no refusal recorded (last error %q)", p.lastErr)
	}
	view.Step(ctx) // no answer since the refusal: waits
	if c := outCash(t, view.f, "eu"); c != 6 {
		t.Fatalf("entries moved before an answer said what eu applied: %v cash left for eu", c)
	}
	asia.probeAll(ctx)
	view.Step(ctx)
	if c := outCash(t, view.f, "eu"); c != 0 {
		t.Errorf("%v cash still in the shard's outbox for eu after the refusal", c)
	}
	if c := outCash(t, view.f, "us"); c != 6 {
		t.Errorf("the shard's outbox for us holds %v cash, want the 6 eu refused", c)
	}
}

// servedEU starts site eu of the test federation, its endpoint served over
// mutual TLS on loopback, and returns it with the federation file that
// names its endpoint and the certificates' deployment.
func servedEU(t *testing.T) (*Fed, File, *deployment) {
	t.Helper()
	d := newDeployment(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	file := testFile()
	for i := range file.Sites {
		if file.Sites[i].Name == "eu" {
			file.Sites[i].Endpoint = ln.Addr().String()
		}
	}
	srv, cli := load(t, d.dir, "eu")
	eu := newFedOf(t, "eu", file, srv, cli)
	done := make(chan error, 1)
	go func() { done <- eu.Serve(ln) }() // owner: the test; ends with eu.Shutdown
	t.Cleanup(func() {
		eu.Shutdown(context.Background())
		<-done
	})
	return eu, file, d
}

// setPeerDown marks peer down (past its grace period) or up in f's view,
// as its failure detector would.
func setPeerDown(f *Fed, peer string, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers[peer].down = down
	f.publishDown()
}

// TestForgetRemoved: eu holds an outbox for us, an entry in doubt and one
// delivered to it; us is then removed from the federation file. At its
// next start eu hands them to us's hosts' owners now: the outbox and the
// entry in doubt with their cash, the delivered URLs without, and keeps
// no record of us, so nothing of us keeps the federation from ending.
// Before, they stayed for ever (and the outbox kept eu from being passive).
func TestForgetRemoved(t *testing.T) {
	ctx := context.Background()
	eu := newTestFed(t, "eu")
	urls := routeVia(t, eu, hostsOwnedBy(t, eu, "us", 6))
	entries, err := eu.st.Outbox("us", 0, 10)
	if err != nil || len(entries) == 0 {
		t.Fatalf("eu's outbox for us: %d entries, %v", len(entries), err)
	}
	b := store.NewBatch()
	b.PutUser(doubtKey("us", 100), entries[0].Payload)
	b.PutUser(sentKey("us", 101), entries[0].Payload)
	b.PutUser(outPrefix+"us", outbound{Acked: 101, Tried: 101}.encode())
	if err := eu.apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	held := outCash(t, eu, "us") + doubtCash(t, eu, "us")
	if held != 12 {
		t.Fatalf("held for us: %v cash, want 12", held)
	}

	file := testFile()
	file.Sites = slices.DeleteFunc(file.Sites, func(s SiteSpec) bool { return s.Name == "us" })
	eu2, err := New(Options{File: file, Self: "eu", DB: eu.o.DB})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eu2.Shutdown(ctx) })
	if gone, err := eu2.removedSites(); err != nil || !slices.Equal(gone, []string{"us"}) {
		t.Fatalf("removed sites %v, %v; want [us]", gone, err)
	}
	if err := eu2.forgetRemoved(ctx); err != nil {
		t.Fatal(err)
	}
	if gone, err := eu2.removedSites(); err != nil || len(gone) != 0 {
		t.Errorf("after the hand-over, records of %v (%v)", gone, err)
	}
	if c := storeCash(t, eu2) + outCash(t, eu2, "asia"); c != held {
		t.Errorf("cash at eu and in its outbox for asia %v, want the %v held for us", c, held)
	}
	// The delivered URLs went too (without cash): every URL is at eu or
	// in its outbox for asia.
	seen := map[string]int{}
	eu2.st.ScanURLs(func(r store.URLRecord) error { seen[r.URL]++; return nil })
	out, _ := eu2.st.Outbox("asia", 0, 100)
	for _, e := range out {
		dec, err := Decode(e.Payload, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range dec.Puts {
			seen[p.URL]++
		}
	}
	for _, u := range urls {
		if seen[u.URL] == 0 {
			t.Errorf("%s neither at eu nor sent to asia", u.URL)
		}
	}
}

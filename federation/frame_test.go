package federation

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/route"
)

// entry is b as an outbox entry: From us To eu, no sequence numbers.
func entry(b *Batch) []byte {
	b.From, b.To, b.Seq, b.First = "us", "eu", 0, 0
	return b.Append(nil)
}

// TestFrameRoundTrip: a frame of stored entries decodes as the one batch
// they make: puts and fetched records in order, each host once, virtual
// shares summed, the frame's sequence numbers.
func TestFrameRoundTrip(t *testing.T) {
	a := sampleBatch()
	b := sampleFetched()
	b.Virtual = 0.25
	b.Puts = b.Puts[:1]
	c := &Batch{Virtual: 0.5} // only a virtual share (its URLs were sent before)
	frame := AppendFrame(nil, "us", "eu", 9, 7, [][]byte{entry(a), entry(b), entry(c)})
	got, err := Decode(frame, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Batch{From: "us", To: "eu", Seq: 9, First: 7, Virtual: 0.125 + 0.25 + 0.5,
		Puts: append(append([]Put{}, a.Puts...), b.Puts...), Hosts: a.Hosts, Fetched: b.Fetched,
		// Where each entry ends (a sharded receiver splits by entry).
		ends: []entryEnd{{len(a.Puts), 0, 0.125}, {len(a.Puts) + 1, len(b.Fetched), 0.25}, {len(a.Puts) + 1, len(b.Fetched), 0.5}}}
	if !equalBatch(got, want) {
		t.Fatalf("Decode(frame) = %+v\nwant %+v", got, want)
	}
	from, to, seq, first, err := frameHeader(frame)
	if err != nil || from != "us" || to != "eu" || seq != 9 || first != 7 {
		t.Errorf("frameHeader: %q %q %d %d %v", from, to, seq, first, err)
	}
	for _, tc := range []struct {
		p           []byte
		records, ps int
	}{
		{entry(sampleBatch()), 3, 3},
		{entry(sampleFetched()), 3 + maxPutsPerEntry, 3},
		{entry(&Batch{Virtual: 1}), 0, 0},
	} {
		if r, n, err := entryCount(tc.p); err != nil || r != tc.records || n != tc.ps {
			t.Errorf("entryCount: %d records, %d puts, %v; want %d, %d", r, n, err, tc.records, tc.ps)
		}
	}
}

// TestFrameRejects: a frame that is corrupt, inconsistent or too large is
// refused with an error that says what and where.
func TestFrameRejects(t *testing.T) {
	good := entry(sampleBatch())
	other := sampleBatch()
	other.From, other.To = "asia", "eu"
	withSeq := sampleBatch()
	withSeq.From, withSeq.To, withSeq.Seq = "us", "eu", 3
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 0xff
	many := &Batch{}
	for i := range 30 {
		many.Puts = append(many.Puts, Put{URL: fmt.Sprintf("http://a.example/%d", i)})
	}
	many.Hosts = []HostLoc{{Host: "a.example"}}
	for _, tc := range []struct {
		name  string
		frame []byte
		lim   Limits
		kind  error
		says  string
	}{
		{"no entries", AppendFrame(nil, "us", "eu", 1, 1, nil), Limits{}, ErrMalformed, "no entries"},
		{"bad checksum", func() []byte { f := AppendFrame(nil, "us", "eu", 1, 1, [][]byte{good}); f[3] ^= 1; return f }(), Limits{}, ErrMalformed, "checksum"},
		{"an entry from another site", AppendFrame(nil, "us", "eu", 1, 1, [][]byte{good, other.Append(nil)}), Limits{}, ErrMalformed, "entry 1 is from \"asia\""},
		{"an entry with a sequence number", AppendFrame(nil, "us", "eu", 1, 1, [][]byte{withSeq.Append(nil)}), Limits{}, ErrMalformed, "seq 3"},
		{"a corrupt entry", AppendFrame(nil, "us", "eu", 1, 1, [][]byte{good, bad}), Limits{}, ErrMalformed, "entry 1"},
		{"truncated", func() []byte {
			f := AppendFrame(nil, "us", "eu", 1, 1, [][]byte{good})
			return reseal(append(f[:len(f)-30], 0, 0, 0, 0))
		}(), Limits{}, ErrMalformed, "truncated"},
		{"too many puts", AppendFrame(nil, "us", "eu", 1, 1, [][]byte{entry(many), entry(many)}), Limits{MaxPuts: 40}, ErrTooLarge, "over 40 puts"},
		{"first after seq", AppendFrame(nil, "us", "eu", 1, 2, [][]byte{good}), Limits{}, ErrMalformed, "first 2 is after seq 1"},
	} {
		_, err := Decode(tc.frame, tc.lim)
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.kind, tc.says)
		}
	}
}

// TestPutFrameReachesReceiver: a frame goes over mutual TLS as it is and
// reaches the receiver as the batch its entries make; a frame from
// another site or for another is refused before it is sent.
func TestPutFrameReachesReceiver(t *testing.T) {
	d := newDeployment(t)
	s := serve(t, d.dir, "eu")
	_, cliTLS := load(t, d.dir, "us")
	c := newClient(t, "us", cliTLS)
	ctx := context.Background()
	a, b := sampleBatch(), sampleFetched()
	frame := AppendFrame(nil, "us", "eu", 5, 4, [][]byte{entry(a), entry(b)})
	if err := c.PutFrame(ctx, s.addr, "eu", frame); err != nil {
		t.Fatal(err)
	}
	if n := s.rcv.calls.Load(); n != 1 {
		t.Fatalf("receiver called %d times, want 1", n)
	}
	got := s.rcv.batches[0]
	if got.Seq != 5 || got.First != 4 || len(got.Puts) != len(a.Puts)+len(b.Puts) || len(got.Fetched) != len(b.Fetched) || len(got.Hosts) != len(a.Hosts) {
		t.Errorf("receiver got %+v", got)
	}
	if tr := c.Traffic()["eu"]; tr.BodySent != uint64(len(frame)) {
		t.Errorf("body sent %d bytes, frame %d", tr.BodySent, len(frame))
	}
	for _, tc := range []struct {
		name  string
		peer  string
		frame []byte
	}{
		{"from another site", "eu", AppendFrame(nil, "asia", "eu", 6, 6, [][]byte{entry(sampleBatch())})},
		{"for another site", "asia", AppendFrame(nil, "us", "eu", 6, 6, [][]byte{entry(sampleBatch())})},
		{"not a frame", "eu", sampleBatch().Append(nil)},
	} {
		if err := c.PutFrame(ctx, s.addr, tc.peer, tc.frame); !errors.Is(err, ErrRejected) {
			t.Errorf("%s: %v, want ErrRejected", tc.name, err)
		}
	}
	if n := s.rcv.calls.Load(); n != 1 {
		t.Errorf("receiver called %d times after refused frames, want 1", n)
	}
}

// TestLocalShardDelivers: the local-shard transport applies a frame to
// another crawl database of this process as an endpoint would: URLs
// inserted with their cash (a known one's cash added), the cash counted
// in the receiver's inbound record of the sender, the hosts' locations
// recorded; a retry changes nothing, an overlapping batch is refused, and
// a broken frame is rejected.
func TestLocalShardDelivers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := crawldb.Open(ctx, crawldb.Options{Dir: filepath.Join(t.TempDir(), "shard1"), NodeID: "eu-1", RaftAddr: "127.0.0.1:0", FastTimeouts: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	tr := LocalShard{From: "eu/shard-0", DB: db}
	to := route.Owner{Shard: 1}
	e := func(urls ...string) []byte {
		b := &Batch{From: "eu", To: "eu", Virtual: 0.5}
		for _, u := range urls {
			b.Puts = append(b.Puts, Put{URL: u, Cash: 0.25, Depth: 2})
			b.Hosts = append(b.Hosts, HostLoc{Host: crawl.HostOf(u), Key: crawl.HostOf(u)})
		}
		return b.Append(nil)
	}
	frame := AppendFrame(nil, "eu", "eu", 2, 1, [][]byte{e("http://a.test/1", "http://b.test/1"), e("http://a.test/1")})
	for i := range 2 { // the second is a retry
		if err := tr.Deliver(ctx, to, frame); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	st := db.Store()
	for _, c := range []struct {
		url  string
		cash float64
	}{{"http://a.test/1", 0.5}, {"http://b.test/1", 0.25}} {
		r, ok, err := st.Get(c.url)
		if err != nil || !ok || r.Cash != c.cash || r.Depth != 2 {
			t.Errorf("%s: %+v (found %v, %v), want cash %v", c.url, r, ok, err, c.cash)
		}
	}
	raw, err := st.User(inPrefix + "eu/shard-0")
	if err != nil {
		t.Fatal(err)
	}
	in, err := decodeInbound(raw)
	if err != nil || in.Seq != 2 || in.Batches != 1 || in.URLs != 3 || in.Cash != 0.75 || in.Virtual != 1 {
		t.Errorf("inbound record %+v, %v; want seq 2, 1 batch, 3 URLs, cash 0.75, virtual 1", in, err)
	}
	if v, err := st.User(locPrefix + "b.test"); err != nil || v == nil {
		t.Errorf("location of b.test not recorded: %v", err)
	}
	overlap := AppendFrame(nil, "eu", "eu", 3, 2, [][]byte{e("http://c.test/1")})
	if err := tr.Deliver(ctx, to, overlap); !errors.Is(err, ErrRefused) {
		t.Errorf("overlapping batch: %v, want ErrRefused", err)
	}
	broken := append([]byte(nil), frame...)
	broken[10] ^= 1
	if err := tr.Deliver(ctx, to, broken); !errors.Is(err, ErrRejected) {
		t.Errorf("broken frame: %v, want ErrRejected", err)
	}
	if ok, _ := st.Contains("http://c.test/1"); ok {
		t.Error("a refused batch's URL was applied")
	}
}

// TestTransportByOwner: the delivery picks the endpoint for another site,
// the shards' transport for this site's shards, and says why when there
// is none.
func TestTransportByOwner(t *testing.T) {
	f := newTestFed(t, "eu")
	for _, tc := range []struct {
		owner route.Owner
		shard Transport
		want  string // the transport's type, or the error's words
	}{
		{route.Owner{Site: "us"}, nil, "federation.siteTransport"},
		{route.Owner{Site: "mars"}, nil, "not in the federation file"},
		{route.Owner{Shard: 2}, nil, "no other shards"},
		{route.Owner{Site: "eu", Shard: 2}, LocalShard{From: "eu/shard-0"}, "federation.LocalShard"},
	} {
		f.o.Shards = tc.shard
		tr, err := f.transport(tc.owner)
		got := fmt.Sprintf("%T", tr)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s, want %s", tc.owner, got, tc.want)
		}
	}
}

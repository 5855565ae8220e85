package federation

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/route"
)

// TestLocationRecord: the one record of where a host is round-trips
// placed and unplaced; a record written before the unplaced flag existed
// reads as placed; other flags and lengths are refused.
func TestLocationRecord(t *testing.T) {
	paris := partition.Location{Lat: 48.85, Lon: 2.35, Known: true}
	for _, l := range []location{
		{key: "93.184.216.34", loc: paris},
		{key: "unresolved.test"},
		{key: "10.0.0.1", unplaced: true},
		{key: "", unplaced: true},
	} {
		got, err := decodeLocation(encodeLocation(l))
		if err != nil || got != l {
			t.Errorf("decode(encode(%+v)) = %+v, %v", l, got, err)
		}
	}
	// Before the flag: the last byte was 1 (known) or 0.
	old := encodeLocation(location{key: "k", loc: paris})
	if l, err := decodeLocation(old); err != nil || l.unplaced || !l.loc.Known {
		t.Errorf("an old placed record read as %+v, %v", l, err)
	}
	old[len(old)-1] = 0
	if l, err := decodeLocation(old); err != nil || l.unplaced || l.loc.Known {
		t.Errorf("an old record of a host off the globe read as %+v, %v", l, err)
	}
	bad := append([]byte(nil), old...)
	bad[len(bad)-1] = 4
	if _, err := decodeLocation(bad); err == nil {
		t.Error("a record with an unknown flag was read")
	}
	if _, err := decodeLocation(old[:len(old)-1]); err == nil {
		t.Error("a short record was read")
	}
}

// TestShardBatchLocations: a batch between shards records the place of
// the hosts it places and the key alone of the others; a Fed that then
// routes a host recorded by its key alone places it and keeps that key
// (its shard never changes), and a site's batch places such a host.
func TestShardBatchLocations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := openTestDB(t, "eu-1")
	b := &Batch{From: "s000", To: "s001"}
	placed := HostLoc{Host: "paris.test", Key: "192.0.2.7", Lat: 48.85, Lon: 2.35, Known: true}
	keyOnly := HostLoc{Host: "nowhere.test", Key: "192.0.2.8"}
	for _, h := range []HostLoc{placed, keyOnly} {
		b.Puts = append(b.Puts, Put{URL: "http://" + h.Host + "/", Cash: 0.5})
		b.Hosts = append(b.Hosts, h)
	}
	if err := (LocalShard{From: "s000", DB: db}).Deliver(ctx, route.Owner{Shard: 1}, AppendFrame(nil, "s000", "s001", 1, 1, [][]byte{b.Append(nil)})); err != nil {
		t.Fatal(err)
	}
	st := db.Store()
	for _, c := range []struct {
		h        HostLoc
		unplaced bool
	}{{placed, false}, {keyOnly, true}} {
		l, ok, err := recordOf(st, c.h.Host)
		if err != nil || !ok || l.hostLoc(c.h.Host) != c.h || l.unplaced != c.unplaced {
			t.Errorf("%s: record %+v (found %v, %v), want %+v unplaced %v", c.h.Host, l, ok, err, c.h, c.unplaced)
		}
		if got, ok, err := ReadHostLoc(st, c.h.Host); err != nil || !ok || got != c.h {
			t.Errorf("ReadHostLoc(%s) = %+v, %v, %v; want %+v", c.h.Host, got, ok, err, c.h)
		}
	}

	f := newTestFed(t, "eu")
	const h = "keyed.test"
	pb := store.NewBatch()
	PutHostKey(pb, h, "recorded-key")
	if err := f.apply(ctx, pb); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.cachedLoc(h); err != nil || ok {
		t.Fatalf("a host recorded by its key alone is placed (%v, %v)", ok, err)
	}
	f.o.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.9")}, nil
	}
	if _, err := f.Owners(ctx, []string{h}); err != nil {
		t.Fatal(err)
	}
	l, ok, err := f.cachedLoc(h)
	if err != nil || !ok || l.key != "recorded-key" || l.unplaced {
		t.Errorf("after routing: %+v (placed %v, %v), want placed with the recorded key", l, ok, err)
	}
	if r, ok, err := recordOf(f.o.DB.Store(), h); err != nil || !ok || r.unplaced || r.key != "recorded-key" {
		t.Errorf("the record after routing: %+v (%v, %v), want placed with the recorded key", r, ok, err)
	}

	// A site's batch replaces a record of the key alone, not a placed one.
	g := newTestFed(t, "us")
	for _, host := range []string{"a.test", "b.test"} {
		pb := store.NewBatch()
		PutHostKey(pb, host, "k-"+host)
		if err := g.apply(ctx, pb); err != nil {
			t.Fatal(err)
		}
	}
	pb = store.NewBatch()
	pb.PutUser(locPrefix+"b.test", encodeLocation(location{key: "k-b.test", loc: partition.Location{Lat: 1, Lon: 2, Known: true}}))
	if err := g.apply(ctx, pb); err != nil {
		t.Fatal(err)
	}
	sb := &Batch{From: "eu", To: "us", Seq: 1, First: 1}
	for _, host := range []string{"a.test", "b.test"} {
		sb.Puts = append(sb.Puts, Put{URL: "http://" + host + "/", Cash: 0.1})
		sb.Hosts = append(sb.Hosts, HostLoc{Host: host, Key: "k-" + host, Lat: 40.7, Lon: -74, Known: true})
	}
	if _, err := applyInbound(ctx, g.o.DB, "eu", sb, placedIn(g.o.DB.Store()), false); err != nil {
		t.Fatal(err)
	}
	a, _, _ := recordOf(g.o.DB.Store(), "a.test")
	if a.unplaced || a.loc.Lat != 40.7 {
		t.Errorf("a.test, recorded by its key alone, after a site's batch: %+v, want the batch's place", a)
	}
	bl, _, _ := recordOf(g.o.DB.Store(), "b.test")
	if bl.loc.Lat != 1 {
		t.Errorf("b.test, placed, after a site's batch: %+v, want its own place kept", bl)
	}
}

package rounds

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
)

// TestUpdateRoutes: the update's routing (Crawler.route, over a real
// federation layer of site eu) keeps exactly eu's targets with their cash,
// puts the others in commands of their own, one per chunk of BatchOps
// targets, with the cash sent counted once; and a leader that prepares
// the update again after the first routing command was applied gets the
// same later commands byte for byte (the URL-sent cache it filled covers
// only the URLs of that command), so that resuming after the applied ones
// neither loses nor repeats a URL.
func TestUpdateRoutes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := crawldb.Open(ctx, crawldb.Options{Dir: filepath.Join(t.TempDir(), "crawldb"), NodeID: "eu-1", RaftAddr: "127.0.0.1:0", FastTimeouts: true, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	file := federation.File{Partitioner: "consistent", Replicas: 100, Sites: []federation.SiteSpec{
		{Name: "eu", Lat: 53.55, Lon: 9.99, Endpoint: "127.0.0.1:1"},
		{Name: "us", Lat: 40.71, Lon: -74.01, Endpoint: "127.0.0.1:2"},
		{Name: "asia", Lat: 1.35, Lon: 103.82, Endpoint: "127.0.0.1:3"},
	}}
	fed, err := federation.New(federation.Options{File: file, Self: "eu", DB: db})
	if err != nil {
		t.Fatal(err)
	}
	defer fed.Shutdown(context.Background())
	var hosts []string
	for i := range 60 {
		hosts = append(hosts, fmt.Sprintf("h%d.example.test", i))
	}
	owners, err := fed.Owners(ctx, hosts)
	if err != nil {
		t.Fatal(err)
	}
	parts := func() [][]target {
		ps := make([][]target, 4)
		for i := range 350 {
			h := hosts[i%len(hosts)]
			ps[i%4] = append(ps[i%4], target{url: fmt.Sprintf("http://%s/p%d", h, i), credit: credit{cash: 0.5, depth: 2}})
		}
		return ps
	}
	var wantLocal, wantSent int
	for _, p := range parts() {
		for _, tg := range p {
			if owners[hostOf(tg.url)] == "" {
				wantLocal++
			} else {
				wantSent++
			}
		}
	}
	if wantLocal == 0 || wantSent == 0 {
		t.Fatalf("%d local and %d remote targets: the test needs both", wantLocal, wantSent)
	}
	c := &Crawler{o: Options{Router: fed, BatchOps: 100}}
	c.setRouter()
	newBatch := func() *store.Batch { return store.NewBatch() }
	prepare := func() (int, [][]byte, float64) {
		t.Helper()
		local, routed, sent, err := c.route(ctx, parts(), newBatch)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range local {
			for _, tg := range p {
				if owners[hostOf(tg.url)] != "" || tg.cash != 0.5 || tg.depth != 2 {
					t.Fatalf("kept %+v (owner %q)", tg, owners[hostOf(tg.url)])
				}
				n++
			}
		}
		if sent.URLs != wantSent {
			t.Errorf("sent %d URLs, want %d", sent.URLs, wantSent)
		}
		var cmds [][]byte
		for _, b := range routed {
			cmd, err := b.Encode()
			if err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, bytes.Clone(cmd))
		}
		return n, cmds, sent.Cash
	}
	n, first, cash := prepare()
	if n != wantLocal || cash != 0.5*float64(wantSent) {
		t.Fatalf("kept %d, sent cash %v; want %d and %v", n, cash, wantLocal, 0.5*float64(wantSent))
	}
	if len(first) != 4 { // 350 targets in chunks of 100, each with remote URLs
		t.Fatalf("%d routing commands, want 4", len(first))
	}
	if res, err := db.ApplyCommand(ctx, first[0]); err != nil || res.Err != nil {
		t.Fatalf("apply the first routing command: %v %v", err, res.Err)
	}
	_, again, _ := prepare()
	if len(again) != len(first) {
		t.Fatalf("prepared again: %d commands, first %d", len(again), len(first))
	}
	for i := 1; i < len(first); i++ {
		if !bytes.Equal(first[i], again[i]) {
			t.Errorf("routing command %d differs when prepared again", i)
		}
	}
	if bytes.Equal(first[0], again[0]) {
		t.Error("the applied command's URLs are not in the URL-sent cache: prepared again, it is the same")
	}
}

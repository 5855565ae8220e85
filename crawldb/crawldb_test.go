package crawldb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// No goroutine outlives its node: the Raft stream layer closes the
// connections it accepted (hashicorp/raft's TCP one does not).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("CRAWLDB_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func openNode(t *testing.T, dir, id, join string) *DB {
	t.Helper()
	return openNodeTrailing(t, dir, id, join, 0)
}

// testOptions are a test node's options: loopback addresses, an API of its
// own, fast timeouts and no automatic snapshots.
func testOptions(t *testing.T, dir, id, join string) Options {
	return Options{Dir: dir, NodeID: id, RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", Join: join,
		FastTimeouts: true, Logger: testLogger(t), SnapshotThreshold: 1 << 30, SnapshotInterval: time.Hour}
}

func openNodeTrailing(t *testing.T, dir, id, join string, trailing uint64) *DB {
	t.Helper()
	o := testOptions(t, dir, id, join)
	o.TrailingLogs = trailing
	return openWith(t, o)
}

// openWith opens a node and waits until it knows a leader.
func openWith(t *testing.T, o Options) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return db
}

func upserts(from, n int, cash float64) *store.Batch {
	b := store.NewBatch()
	for i := from; i < from+n; i++ {
		b.UpsertCash(fmt.Sprintf("http://h%d.test/p/%d", i%7, i), cash, 1)
	}
	return b
}

func mustApply(t *testing.T, db *DB, b *store.Batch) *store.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := db.Apply(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return res
}

func TestSingleNodeRestart(t *testing.T) {
	dir := t.TempDir()
	db := openNode(t, dir, "n1", "")
	for i := range 10 {
		mustApply(t, db, upserts(i*100, 100, 1))
	}
	mustApply(t, db, upserts(0, 100, 1)) // the same URLs again: cash added
	applied := db.Store().AppliedIndex()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	db = openNode(t, dir, "n1", "")
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.WaitApplied(ctx, applied); err != nil {
		t.Fatal(err)
	}
	c := db.Store().Counts()
	if c.URLs != 1000 {
		t.Fatalf("%d URLs after restart, want 1000", c.URLs)
	}
	rec, ok, _ := db.Store().Get("http://h0.test/p/0")
	if !ok || rec.Cash != 2 {
		t.Fatalf("cash %v after restart (replay must not add twice), want 2", rec.Cash)
	}
}

func TestThreeNodes(t *testing.T) {
	root := t.TempDir()
	n1 := openNodeTrailing(t, filepath.Join(root, "n1"), "n1", "", 1)
	defer n1.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Wait until n1 has announced its API address, then join two nodes.
	for {
		if v, _ := n1.Store().User(memberKey("n1")); len(v) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	n2 := openNode(t, filepath.Join(root, "n2"), "n2", n1.APIAddr())
	defer n2.Close()
	mustApply(t, n1, upserts(0, 300, 1))
	// Writes at a follower are forwarded to the leader.
	res := mustApply(t, n2, upserts(300, 300, 1))
	if len(res.Ops) != 300 || !res.Ops[0].New {
		t.Fatalf("forwarded result: %d ops, first %+v", len(res.Ops), res.Ops[0])
	}
	// Compact the log, then a third node must catch up by snapshot.
	if err := n1.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n3 := openNode(t, filepath.Join(root, "n3"), "n3", n2.APIAddr())
	defer n3.Close()
	res = mustApply(t, n1, upserts(600, 100, 1))
	for _, n := range []*DB{n1, n2, n3} {
		if err := n.WaitApplied(ctx, res.Index); err != nil {
			t.Fatal(err)
		}
		if c := n.Store().Counts(); c.URLs != 700 {
			t.Fatalf("%s has %d URLs, want 700", n.opts.NodeID, c.URLs)
		}
	}
	if cur, err := os.ReadFile(filepath.Join(root, "n3", currentFile)); err != nil || string(cur[:3]) != "db-" {
		t.Fatalf("n3 did not install a snapshot: CURRENT %q, %v", cur, err)
	}
	m, _ := n1.Members()
	if len(m) != 3 {
		t.Fatalf("members %v", m)
	}
}

// TestAPIRejectsBadCommands posts garbage and an oversized body to a node's
// API: both are refused with a message, and the store is unchanged.
func TestAPIRejectsBadCommands(t *testing.T) {
	db := openNode(t, t.TempDir(), "n1", "")
	defer db.Close()
	mustApply(t, db, upserts(0, 10, 1))
	before := db.Store().Counts()
	post := func(body []byte) (int, string) {
		resp, err := http.Post("http://"+db.APIAddr()+"/crawldb/apply", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post([]byte("not a command at all"))
	if code != http.StatusBadRequest || !strings.Contains(body, "corrupt command") {
		t.Fatalf("garbage: %d %s", code, body)
	}
	code, body = post(make([]byte, store.MaxCommandBytes+10))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "too large") {
		t.Fatalf("oversized: %d %s", code, body)
	}
	after := db.Store().Counts()
	if after.URLs != before.URLs || after.Frontier != before.Frontier {
		t.Fatalf("bad commands changed the store: %+v → %+v", before, after)
	}
	// A bad batch never leaves the client.
	b := store.NewBatch()
	b.UpsertCash("http://Bad.Host/", 1, 0)
	if _, err := db.Apply(context.Background(), b); !errors.Is(err, store.ErrBadURL) {
		t.Fatalf("bad URL: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{Dir: "d", NodeID: "n1", RaftAddr: "127.0.0.1:0"}
	with := func(f func(*Options)) Options { o := ok; f(&o); return o }
	for _, tc := range []struct {
		name string
		o    Options
		want []string // substrings of the error; none: valid
	}{
		{"valid", ok, nil},
		{"everything wrong", Options{NodeID: "a b", Join: "x:1"},
			[]string{"Dir is required", "NodeID", "RaftAddr is required", "needs an APIAddr or an AdvertiseAPI"}},
		{"join with own API", with(func(o *Options) { o.Join, o.APIAddr = "x:1", "127.0.0.1:0" }), nil},
		{"join with mounted API", with(func(o *Options) { o.Join, o.AdvertiseAPI = "x:1", "10.0.0.1:8080" }), nil},
		{"both APIs", with(func(o *Options) { o.APIAddr, o.AdvertiseAPI = "127.0.0.1:0", "10.0.0.1:8080" }), []string{"not both"}},
		{"advertise no port", with(func(o *Options) { o.AdvertiseAPI = "host" }), []string{"must be host:port"}},
		{"advertise port 0", with(func(o *Options) { o.AdvertiseAPI = "host:0" }), []string{"must be host:port"}},
		{"advertise wildcard", with(func(o *Options) { o.AdvertiseAPI = "0.0.0.0:8080" }), []string{"not a wildcard"}},
		{"advertise no host", with(func(o *Options) { o.AdvertiseAPI = ":8080" }), []string{"not a wildcard"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if len(tc.want) == 0 && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Validate: %v lacks %q", err, want)
				}
			}
		})
	}
}

package crawldb

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

func openNodeTrailing(t *testing.T, dir, id, join string, trailing uint64) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := Open(ctx, Options{Dir: dir, NodeID: id, RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", Join: join,
		FastTimeouts: true, Logger: testLogger(t), SnapshotThreshold: 1 << 30, SnapshotInterval: time.Hour, TrailingLogs: trailing})
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

package crawldb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// MigrateOptions says what MigrateToGroup moves where.
type MigrateOptions struct {
	// From is the Dir of a crawl database of its own (Open's: db/, raft/,
	// snapshots/). It is read, not changed, but for its log's last
	// commands being applied to its store.
	From string
	// HostDir is the Dir of the Host that is to hold the group (OpenHost's);
	// the group must have no state there yet.
	HostDir string
	// Group is the group's ID on the Host.
	Group string
	// NodeID and RaftAddr are the one voter of the group's first
	// configuration: the Host's node.
	NodeID, RaftAddr string
	// ReplayWait bounds the wait for From's Raft to elect itself and apply
	// its log (a node that was one voter of several may not); 0 → 10 s.
	ReplayWait time.Duration
	Logger     *slog.Logger
}

// Migrated is what MigrateToGroup moved.
type Migrated struct {
	Index   uint64 // From's applied index: the group's snapshot's
	Bytes   int64  // the snapshot's size
	Replays bool   // From's log was applied to the end (its Raft had a leader)
}

// MigrateToGroup makes the crawl database of its own in o.From the state of
// group o.Group on the Host in o.HostDir: it opens From (so that its Raft
// applies what its log holds beyond its store, when it can elect itself),
// and writes its store, as of its applied index, as the group's Raft
// snapshot with o.NodeID as the group's one voter. When the Host opens the
// group, Raft installs that snapshot into the Host's store and the group
// goes on from there, its data whole. From is left as it was.
func MigrateToGroup(ctx context.Context, o MigrateOptions) (Migrated, error) {
	var m Migrated
	if o.ReplayWait == 0 {
		o.ReplayWait = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkGroupID(o.Group); err != nil {
		return m, fmt.Errorf("crawldb: migrate: %w", err)
	}
	// The Host's snapshot store of the group (Host.openGroup's): raft
	// keeps its snapshots under its base directory's "snapshots".
	snapDir := filepath.Join(o.HostDir, "groups", o.Group, "snapshots")
	if entries, err := os.ReadDir(filepath.Join(snapDir, "snapshots")); err == nil && len(entries) > 0 {
		return m, fmt.Errorf("crawldb: migrate: group %s already has snapshots in %s", o.Group, snapDir)
	}
	db, err := Open(ctx, Options{Dir: o.From, NodeID: o.NodeID, RaftAddr: "127.0.0.1:0", Logger: o.Logger})
	if err != nil {
		return m, fmt.Errorf("crawldb: migrate: open %s: %w", o.From, err)
	}
	defer db.Close()
	wctx, cancel := context.WithTimeout(ctx, o.ReplayWait)
	err = db.WaitLeader(wctx)
	if err == nil && db.IsLeader() {
		err = db.Barrier(wctx)
		m.Replays = err == nil
	}
	cancel()
	if !m.Replays {
		o.Logger.Warn("crawldb: migrate: the old crawl database's Raft did not apply its log to the end (it was one voter of several?): its store is migrated as it stands", "dir", o.From, "err", err)
	}
	sn, err := db.Store().Snapshot()
	if err != nil {
		return m, fmt.Errorf("crawldb: migrate: snapshot of %s: %w", o.From, err)
	}
	snapOpen := true
	defer func() {
		if snapOpen {
			sn.Close()
		}
	}()
	m.Index = sn.Index()
	if m.Index == 0 {
		return m, fmt.Errorf("crawldb: migrate: %s has applied nothing", o.From)
	}
	if err := os.MkdirAll(snapDir, 0o755); err != nil {
		return m, fmt.Errorf("crawldb: migrate: %w", err)
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: slogWriter{o.Logger}})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(snapDir, 2, hlog)
	if err != nil {
		return m, fmt.Errorf("crawldb: migrate: snapshot store: %w", err)
	}
	// Term 1: the group's own log starts empty, and its first election
	// (term 1) must not be older than its snapshot's term.
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(o.NodeID), Address: raft.ServerAddress(o.RaftAddr)}}}
	// Create encodes the configuration's peers the legacy way too, with a
	// transport's EncodePeer (an in-memory one is enough: nothing is sent).
	_, trans := raft.NewInmemTransport(raft.ServerAddress(o.RaftAddr))
	defer trans.Close()
	sink, err := snaps.Create(raft.SnapshotVersionMax, m.Index, 1, conf, m.Index, trans)
	if err != nil {
		return m, fmt.Errorf("crawldb: migrate: create snapshot: %w", err)
	}
	bw := bufio.NewWriterSize(sink, 1<<20)
	fmt.Fprintf(bw, "%s %s %d\n", groupSnapshotMagic, o.Group, m.Index)
	m.Bytes, err = sn.WriteTo(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		sink.Cancel()
		return m, fmt.Errorf("crawldb: migrate: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return m, fmt.Errorf("crawldb: migrate: write snapshot: %w", err)
	}
	snapOpen = false
	return m, errors.Join(sn.Close(), db.Close())
}

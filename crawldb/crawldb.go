// Package crawldb is a site's crawl database: the state machine of package
// store, replicated across the site's nodes by hashicorp/raft with its log
// on Pebble (package raftlog). Every write is a command in the Raft log;
// reads are local. A one-node site is a one-voter cluster bootstrapped on
// first start; more nodes join through the leader; writes that reach a
// follower are forwarded to the leader over HTTP.
package crawldb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/meridian-crawler/meridian/crawldb/raftlog"
	"github.com/meridian-crawler/meridian/crawldb/store"
)

// Sentinel errors.
var (
	// ErrClosed: the database is closed.
	ErrClosed = errors.New("crawldb: closed")
	// ErrNoLeader: no leader is known within the caller's deadline.
	ErrNoLeader = errors.New("crawldb: no leader")
	// ErrFailed: the node stopped after a storage failure.
	ErrFailed = errors.New("crawldb: node failed")
)

// Options configure a node. Zero values take the documented defaults.
type Options struct {
	// Dir holds the node's state: db/ (the store), raft/ (the log) and
	// snapshots/. Required.
	Dir string
	// NodeID names the node in its Raft group. Required.
	NodeID string
	// RaftAddr is the Raft TCP address to listen on ("127.0.0.1:0" picks a
	// port). Required unless Transport is set.
	RaftAddr string
	// APIAddr is where the node serves forwarded writes and joins over HTTP
	// ("127.0.0.1:0" picks a port); empty: no API (a single node that will
	// never have followers).
	APIAddr string
	// Join is the API address of a member to join through. Empty: bootstrap
	// a one-voter cluster if the node has no state yet.
	Join string
	// SnapshotThreshold is how many log entries trigger a snapshot. Default 8192.
	SnapshotThreshold uint64
	// TrailingLogs is how many entries a snapshot leaves in the log. Default 10240.
	TrailingLogs uint64
	// SnapshotInterval is how often Raft checks for a snapshot. Default 30s.
	SnapshotInterval time.Duration
	// ApplyTimeout bounds one write. Default 30s.
	ApplyTimeout time.Duration
	// Store options for the state machine's Pebble.
	Store store.Options
	// NoSync skips fsync of the Raft log (benchmarks and unit tests only).
	NoSync bool
	// Transport replaces the TCP transport (unit tests: raft.InmemTransport).
	Transport raft.Transport
	// OnFatal is called once if the node stops after a storage failure;
	// default: nothing (the node refuses writes with ErrFailed).
	OnFatal func(error)
	// Logger defaults to discarding.
	Logger *slog.Logger
	// FastTimeouts shortens Raft's heartbeat and election timeouts for
	// loopback tests.
	FastTimeouts bool
}

// Validate reports every problem with o.
func (o Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("crawldb: Dir is required"))
	}
	if o.NodeID == "" || strings.ContainsAny(o.NodeID, "/ \t\n") {
		errs = append(errs, fmt.Errorf("crawldb: NodeID %q must be non-empty without spaces or slashes", o.NodeID))
	}
	if o.RaftAddr == "" && o.Transport == nil {
		errs = append(errs, errors.New("crawldb: RaftAddr is required"))
	}
	if o.Join != "" && o.APIAddr == "" {
		errs = append(errs, errors.New("crawldb: a node that joins needs an APIAddr"))
	}
	return errors.Join(errs...)
}

func (o *Options) ensureDefaults() {
	if o.SnapshotThreshold == 0 {
		o.SnapshotThreshold = 8192
	}
	if o.TrailingLogs == 0 {
		o.TrailingLogs = 10240
	}
	if o.SnapshotInterval == 0 {
		o.SnapshotInterval = 30 * time.Second
	}
	if o.ApplyTimeout == 0 {
		o.ApplyTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Store.Logger == nil {
		o.Store.Logger = o.Logger
	}
}

// DB is one node of a site's crawl database.
type DB struct {
	opts   Options
	log    *slog.Logger
	raft   *raft.Raft
	fsm    *fsm
	logs   *raftlog.Store
	trans  raft.Transport
	api    *http.Server
	apiLn  net.Listener
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines that end after Raft
	bg     sync.WaitGroup // goroutines that use Raft: end before it shuts down

	mu struct {
		sync.Mutex
		closed bool
		failed error
	}
	closeOnce sync.Once
	closeErr  error
}

// Open starts a node: it opens (or creates) its state, starts Raft, and
// bootstraps or joins as Options say. It returns once the node runs; use
// WaitLeader to wait for a leader.
func Open(ctx context.Context, o Options) (*DB, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.ensureDefaults()
	for _, d := range []string{o.Dir, filepath.Join(o.Dir, "raft"), filepath.Join(o.Dir, "snapshots")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("crawldb: %w", err)
		}
	}
	bctx, cancel := context.WithCancel(context.Background())
	db := &DB{opts: o, log: o.Logger, ctx: bctx, cancel: cancel, client: &http.Client{Timeout: o.ApplyTimeout + 5*time.Second}}
	ok := false
	defer func() {
		if !ok {
			db.Close()
		}
	}()
	f, err := newFSM(db, filepath.Join(o.Dir, "db"), o.Store)
	if err != nil {
		return nil, err
	}
	db.fsm = f
	db.logs, err = raftlog.Open(filepath.Join(o.Dir, "raft"), raftlog.Options{NoSync: o.NoSync, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("crawldb: %w", err)
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: slogWriter{o.Logger}})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(o.Dir, "snapshots"), 2, hlog)
	if err != nil {
		return nil, fmt.Errorf("crawldb: snapshot store: %w", err)
	}
	db.trans = o.Transport
	if db.trans == nil {
		tcp, err := raft.NewTCPTransportWithLogger(o.RaftAddr, nil, 4, 10*time.Second, hlog)
		if err != nil {
			return nil, fmt.Errorf("crawldb: raft listen on %s: %w", o.RaftAddr, err)
		}
		db.trans = tcp
	}
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(o.NodeID)
	cfg.Logger = hlog
	cfg.SnapshotThreshold = o.SnapshotThreshold
	cfg.TrailingLogs = o.TrailingLogs
	cfg.SnapshotInterval = o.SnapshotInterval
	cfg.BatchApplyCh = true
	cfg.MaxAppendEntries = 256
	if o.FastTimeouts {
		cfg.HeartbeatTimeout = 300 * time.Millisecond
		cfg.ElectionTimeout = 300 * time.Millisecond
		cfg.LeaderLeaseTimeout = 150 * time.Millisecond
		cfg.CommitTimeout = 5 * time.Millisecond
	}
	has, err := raft.HasExistingState(db.logs, db.logs, snaps)
	if err != nil {
		return nil, fmt.Errorf("crawldb: %w", err)
	}
	db.raft, err = raft.NewRaft(cfg, db.fsm, db.logs, db.logs, snaps, db.trans)
	if err != nil {
		return nil, fmt.Errorf("crawldb: start raft: %w", err)
	}
	if o.APIAddr != "" {
		if err := db.startAPI(); err != nil {
			return nil, err
		}
	}
	if !has {
		if o.Join == "" {
			boot := raft.Configuration{Servers: []raft.Server{{ID: cfg.LocalID, Address: db.trans.LocalAddr()}}}
			if err := db.raft.BootstrapCluster(boot).Error(); err != nil {
				return nil, fmt.Errorf("crawldb: bootstrap: %w", err)
			}
		} else if err := db.join(ctx); err != nil {
			return nil, err
		}
	}
	db.bg.Add(1)
	go db.announce()
	ok = true
	return db, nil
}

// RaftAddr is the node's Raft address.
func (db *DB) RaftAddr() string { return string(db.trans.LocalAddr()) }

// APIAddr is the node's API address ("" without one).
func (db *DB) APIAddr() string {
	if db.apiLn == nil {
		return ""
	}
	return db.apiLn.Addr().String()
}

// Store returns the local state machine, for reads.
func (db *DB) Store() *store.Store { return db.fsm.store() }

// IsLeader reports whether this node leads its group.
func (db *DB) IsLeader() bool { return db.raft.State() == raft.Leader }

// Leader returns the leader's node ID, or "".
func (db *DB) Leader() string {
	_, id := db.raft.LeaderWithID()
	return string(id)
}

// WaitLeader waits until the group has a leader (and this node knows it).
func (db *DB) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if _, id := db.raft.LeaderWithID(); id != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrNoLeader, ctx.Err())
		case <-t.C:
		}
	}
}

// WaitApplied waits until the local store has applied index.
func (db *DB) WaitApplied(ctx context.Context, index uint64) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for db.Store().AppliedIndex() < index {
		select {
		case <-ctx.Done():
			return fmt.Errorf("crawldb: wait for index %d (at %d): %w", index, db.Store().AppliedIndex(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Apply writes one command through Raft and returns its result. On a
// follower it is forwarded to the leader. An error means the command may or
// may not have been applied (a timeout, a lost leader); Result.Err means it
// was rejected whole.
func (db *DB) Apply(ctx context.Context, b *store.Batch) (*store.Result, error) {
	cmd, err := b.Encode()
	if err != nil {
		return nil, err
	}
	return db.ApplyCommand(ctx, cmd)
}

// ApplyCommand is Apply for an encoded command.
func (db *DB) ApplyCommand(ctx context.Context, cmd []byte) (*store.Result, error) {
	if err := db.usable(); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		res, err := db.applyOnce(ctx, cmd)
		if err == nil || !retryable(err) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("crawldb: apply: %w (last: %v)", ctx.Err(), err)
		case <-time.After(min(time.Duration(attempt+1)*20*time.Millisecond, 500*time.Millisecond)):
		}
	}
}

// retryable reports whether a failed write certainly did not reach the log,
// so that sending it again cannot apply it twice. Anything else (a lost
// leadership, a reply lost after sending) is returned to the caller as
// ambiguous.
func retryable(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, ErrNoLeader) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, errNotSent)
}

func (db *DB) applyOnce(ctx context.Context, cmd []byte) (*store.Result, error) {
	if db.raft.State() == raft.Leader {
		return db.applyLocal(cmd)
	}
	return db.forward(ctx, "/crawldb/apply", cmd)
}

func (db *DB) applyLocal(cmd []byte) (*store.Result, error) {
	if err := db.usable(); err != nil {
		return nil, err
	}
	if err := store.CheckCommand(cmd); err != nil {
		return &store.Result{Err: err}, nil // refused before it reaches the log
	}
	f := db.raft.Apply(cmd, db.opts.ApplyTimeout)
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("crawldb: apply: %w", err)
	}
	switch r := f.Response().(type) {
	case *store.Result:
		return r, nil
	case error:
		return nil, r
	}
	return nil, fmt.Errorf("crawldb: apply: unexpected response %T", f.Response())
}

func (db *DB) usable() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.closed {
		return ErrClosed
	}
	if db.mu.failed != nil {
		return db.mu.failed
	}
	return nil
}

// fatal stops the node after a storage failure.
func (db *DB) fatal(err error) {
	db.mu.Lock()
	first := db.mu.failed == nil
	if first {
		db.mu.failed = fmt.Errorf("%w: %v", ErrFailed, err)
	}
	db.mu.Unlock()
	if !first {
		return
	}
	db.log.Error("crawldb: node stops after a storage failure", "node", db.opts.NodeID, "err", err)
	go db.raft.Shutdown() // not from the FSM goroutine: Shutdown waits for it
	if db.opts.OnFatal != nil {
		db.opts.OnFatal(err)
	}
}

// Snapshot makes Raft take a snapshot now and compact its log.
func (db *DB) Snapshot() error {
	if err := db.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("crawldb: snapshot: %w", err)
	}
	return nil
}

// Members returns the group's voters: node ID → Raft address.
func (db *DB) Members() (map[string]string, error) {
	f := db.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("crawldb: members: %w", err)
	}
	out := map[string]string{}
	for _, s := range f.Configuration().Servers {
		out[string(s.ID)] = string(s.Address)
	}
	return out, nil
}

// RaftStats returns Raft's own statistics.
func (db *DB) RaftStats() map[string]string { return db.raft.Stats() }

// Close stops the node: API, Raft, log and store. It is idempotent.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.mu.Lock()
		db.mu.closed = true
		db.mu.Unlock()
		db.cancel()
		var errs []error
		if db.api != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			db.api.Shutdown(ctx)
			cancel()
		}
		db.bg.Wait()
		if db.raft != nil {
			if err := db.raft.Shutdown().Error(); err != nil {
				errs = append(errs, fmt.Errorf("crawldb: raft shutdown: %w", err))
			}
		}
		if c, ok := db.trans.(io.Closer); ok && db.opts.Transport == nil {
			c.Close()
		}
		db.wg.Wait()
		if db.logs != nil {
			errs = append(errs, db.logs.Close())
		}
		if db.fsm != nil {
			errs = append(errs, db.fsm.close())
		}
		db.closeErr = errors.Join(errs...)
	})
	return db.closeErr
}

// slogWriter routes Raft's hclog lines to slog.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Warn(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Package crawldb is a site's crawl database: the state machine of package
// store, replicated across the site's nodes by hashicorp/raft with its log
// on Pebble (package raftlog). Every write is a command in the Raft log;
// reads are local. A one-node site is a one-voter cluster bootstrapped on
// first start; more nodes join through the leader; writes that reach a
// follower are forwarded to the leader over HTTP.
//
// A node serves its API (forwarded writes, joins, leaves, status under
// /crawldb/) either on its own listener (Options.APIAddr) or through a
// handler the caller mounts on its own server (Options.AdvertiseAPI and
// DB.APIHandler).
//
// With Options.TLS, the Raft transport and the API speak mutual TLS 1.3;
// without it, both are plain TCP and HTTP.
//
// Open runs one group per node. A node that holds replicas of many groups
// (a site's shards) opens a Host (OpenHost) and each replica in it
// (Host.Group): one Raft listener, one Raft log store and one API for all
// of them; each replica is a DB like Open's.
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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	// ErrNotLeader: the call must be made on the leader.
	ErrNotLeader = errors.New("crawldb: not the leader")
	// ErrJoinRefused: the group refused this node's join (its name or Raft
	// address is taken, or the request is malformed); retrying will not help.
	ErrJoinRefused = errors.New("crawldb: join refused")
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
	// RaftAdvertise, if set, is the Raft address the other nodes are given
	// and dial (host:port: a proxy or a NAT in front of RaftAddr); default
	// RaftAddr's bound address.
	RaftAdvertise string
	// APIAddr is where the node serves forwarded writes and joins over HTTP,
	// or HTTPS with TLS ("127.0.0.1:0" picks a port); empty: no listener of
	// its own (see AdvertiseAPI), or no API at all (a single node that will
	// never have followers).
	APIAddr string
	// AdvertiseAPI is the API address of a node whose API the caller serves:
	// crawldb does not listen, the caller mounts APIHandler (or Handler) under
	// /crawldb/ on its own server, and AdvertiseAPI (host:port, reachable by
	// the other nodes) is what the node records for forwarding and sends in
	// its join. Set APIAddr or AdvertiseAPI, not both.
	AdvertiseAPI string
	// Handler, if set, is the handler the node serves its API through, so
	// that a caller can mount it before Open (see NewHandler); it answers 503
	// until the node runs. Default: a new one (see DB.APIHandler).
	Handler *Handler
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
	// TLS, if set, makes every channel between the nodes mutual TLS 1.3:
	// the Raft transport listens and dials with it, the node's own API
	// listener (APIAddr) serves HTTPS with TLS.Server, and its requests to
	// the other nodes' APIs (forwarded writes, joins, leaves) go to https://
	// URLs with TLS.Client. A caller that serves the API itself
	// (AdvertiseAPI) serves it with TLS too: with TLS set, the node calls
	// every other node over https. Nil: everything is plain TCP and HTTP,
	// as for a one-node site on loopback. See TLSConfig.
	TLS *TLSConfig
	// FastTimeouts shortens Raft's heartbeat and election timeouts, and the
	// Raft port's handshake and stall timeouts, for loopback tests.
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
	if o.Join != "" && o.APIAddr == "" && o.AdvertiseAPI == "" {
		errs = append(errs, errors.New("crawldb: a node that joins needs an APIAddr or an AdvertiseAPI"))
	}
	if o.APIAddr != "" && o.AdvertiseAPI != "" {
		errs = append(errs, errors.New("crawldb: set APIAddr (own listener) or AdvertiseAPI (mounted handler), not both"))
	}
	if o.RaftAdvertise != "" {
		if host, port, err := net.SplitHostPort(o.RaftAdvertise); err != nil || port == "" || port == "0" {
			errs = append(errs, fmt.Errorf("crawldb: RaftAdvertise %q must be host:port", o.RaftAdvertise))
		} else if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			errs = append(errs, fmt.Errorf("crawldb: RaftAdvertise %q must name a host the other nodes can reach, not a wildcard", o.RaftAdvertise))
		}
	}
	if o.AdvertiseAPI != "" {
		if host, port, err := net.SplitHostPort(o.AdvertiseAPI); err != nil || port == "" || port == "0" {
			errs = append(errs, fmt.Errorf("crawldb: AdvertiseAPI %q must be host:port", o.AdvertiseAPI))
		} else if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			errs = append(errs, fmt.Errorf("crawldb: AdvertiseAPI %q must name a host the other nodes can reach, not a wildcard", o.AdvertiseAPI))
		}
	}
	if o.TLS != nil {
		errs = append(errs, o.TLS.validate()...)
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
	opts    Options
	log     *slog.Logger
	raft    *raft.Raft
	fsm     *fsm
	logs    *raftlog.Store
	trans   raft.Transport
	tcp     *raft.NetworkTransport // the TCP transport Open made (nil with Options.Transport)
	handler *Handler
	mux     *http.ServeMux
	api     *http.Server // own listener (Options.APIAddr)
	apiLn   net.Listener
	client  *http.Client
	httpTr  *http.Transport
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // goroutines that end after Raft
	bg      sync.WaitGroup // goroutines that use Raft: end before it shuts down
	serving sync.WaitGroup // API requests being served

	traffic  *counters // the node's; a Host's groups share the Host's
	leaders  leadership
	memberMu sync.Mutex // serializes membership changes on the leader
	joinGate atomic.Pointer[func(context.Context) (func(), error)]
	ended    chan struct{} // a connection from another node ended (see failover.go)
	hurried  atomic.Int64  // elections hurried (see failover.go)

	// A group of a Host (see host.go); zero for a node of Open.
	group      string            // the group's ID; "" for Open
	apiPrefix  string            // "/crawldb", or "/crawldb/g/<group>"
	sharedHTTP bool              // client and httpTr are the Host's: Close leaves them
	bootAPIs   map[string]string // API addresses of the bootstrap voters, recorded by the first leader
	bootDone   atomic.Bool       // bootAPIs recorded
	onClose    func()            // tells the Host the group closed

	closeOnce sync.Once
	closeErr  error

	mu struct {
		sync.Mutex
		closed bool
		failed error
	}
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
	httpTr := &http.Transport{ // no proxy: the nodes of a site talk directly
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	if o.TLS != nil {
		httpTr.TLSClientConfig = o.TLS.Client // net/http names the server when ServerName is empty
		httpTr.TLSHandshakeTimeout = 10 * time.Second
	}
	db := &DB{opts: o, log: o.Logger, ctx: bctx, cancel: cancel, handler: o.Handler, httpTr: httpTr,
		client: &http.Client{Timeout: o.ApplyTimeout + 5*time.Second, Transport: httpTr}, traffic: &counters{}, apiPrefix: apiRoot,
		ended: make(chan struct{}, 1)}
	if db.handler == nil {
		db.handler = NewHandler()
	}
	db.mux = db.newMux()
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
		tcp, err := newNetTransport(streamConfig{bind: o.RaftAddr, advertise: o.RaftAdvertise, tls: o.TLS,
			counters: db.traffic, log: o.Logger, fast: o.FastTimeouts, ended: db.streamEnded}, hlog)
		if err != nil {
			return nil, fmt.Errorf("crawldb: raft listen on %s: %w", o.RaftAddr, err)
		}
		db.trans, db.tcp = tcp, tcp
	}
	if o.APIAddr != "" { // the API on the node's own listener, with TLS when set; 503 until Raft runs
		if db.apiLn, db.api, err = serveAPI("api", o.APIAddr, db.handler, o.TLS, db.log, &db.wg); err != nil {
			return nil, err
		}
	}
	cfg := raftConfig(o, hlog)
	has, err := raft.HasExistingState(db.logs, db.logs, snaps)
	if err != nil {
		return nil, fmt.Errorf("crawldb: %w", err)
	}
	db.raft, err = raft.NewRaft(cfg, db.fsm, db.logs, db.logs, snaps, db.trans)
	if err != nil {
		return nil, fmt.Errorf("crawldb: start raft: %w", err)
	}
	db.startWatchers()
	db.handler.bind(db)
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
	ok = true
	return db, nil
}

// raftConfig is the Raft configuration of a node (or a Host's group) with
// options o.
func raftConfig(o Options, hlog hclog.Logger) *raft.Config {
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(o.NodeID)
	cfg.Logger = hlog
	cfg.SnapshotThreshold = o.SnapshotThreshold
	cfg.TrailingLogs = o.TrailingLogs
	cfg.SnapshotInterval = o.SnapshotInterval
	cfg.BatchApplyCh = true
	cfg.MaxAppendEntries = maxAppendEntries
	// A node shares its cores with its fetcher and Pebble's compactions:
	// under load it answers heartbeats late, and Raft's default 500 ms
	// lease made leaders of busy sites step down every minute or two
	// (bench cluster), pausing every node's staging until a new leader
	// was elected. Twice Raft's defaults, as Consul does on small machines.
	cfg.HeartbeatTimeout = heartbeatTimeout(o)
	cfg.ElectionTimeout = electionTimeout(o)
	cfg.LeaderLeaseTimeout = leaseTimeout(o)
	if o.FastTimeouts {
		cfg.CommitTimeout = 5 * time.Millisecond
	}
	return cfg
}

// heartbeatTimeout is Raft's heartbeat timeout for a DB opened with o.
func heartbeatTimeout(o Options) time.Duration {
	if o.FastTimeouts {
		return 300 * time.Millisecond
	}
	return 2 * time.Second
}

// electionTimeout is Raft's election timeout for a DB opened with o.
func electionTimeout(o Options) time.Duration {
	if o.FastTimeouts {
		return 300 * time.Millisecond
	}
	return 2 * time.Second
}

// leaseTimeout is Raft's leader lease for a DB opened with o: the least
// heartbeat timeout Raft accepts (see hurryElection).
func leaseTimeout(o Options) time.Duration {
	if o.FastTimeouts {
		return 150 * time.Millisecond
	}
	return time.Second
}

// RaftAddr is the node's Raft address.
func (db *DB) RaftAddr() string { return string(db.trans.LocalAddr()) }

// APIAddr is the node's API address: its own listener's, or
// Options.AdvertiseAPI when the caller serves the API ("" without one).
func (db *DB) APIAddr() string {
	if db.apiLn == nil {
		return db.opts.AdvertiseAPI
	}
	return db.apiLn.Addr().String()
}

// APIHandler serves the node's API (paths under /crawldb/) for a caller that
// mounts it on its own server (Options.AdvertiseAPI). It is Options.Handler
// when one was given.
func (db *DB) APIHandler() http.Handler { return db.handler }

// Store returns the local state machine, for reads.
func (db *DB) Store() *store.Store { return db.fsm.store() }

// IsLeader reports whether this node leads its group.
func (db *DB) IsLeader() bool { return db.raft.State() == raft.Leader }

// Leader returns the leader's node ID, or "".
func (db *DB) Leader() string {
	_, id := db.raft.LeaderWithID()
	return string(id)
}

// Term is the node's current Raft term.
func (db *DB) Term() uint64 { return db.raft.CurrentTerm() }

// LeaderAPI returns the API address of the current leader; the error wraps
// ErrNoLeader if no leader is known or it has not announced its address.
func (db *DB) LeaderAPI() (string, error) { return db.leaderAPI() }

// Barrier waits until the local store has applied every entry committed
// before the call. It must run on the leader: elsewhere the error wraps
// ErrNotLeader. ctx's deadline bounds the wait to enter the log (default
// Options.ApplyTimeout); once entered, it ends when applied or when
// leadership is lost.
func (db *DB) Barrier(ctx context.Context) error {
	if err := db.usable(); err != nil {
		return err
	}
	if db.raft.State() != raft.Leader {
		return fmt.Errorf("crawldb: barrier: %w", ErrNotLeader)
	}
	timeout := db.opts.ApplyTimeout
	if d, ok := ctx.Deadline(); ok {
		if timeout = min(timeout, time.Until(d)); timeout <= 0 {
			return fmt.Errorf("crawldb: barrier: %w", context.DeadlineExceeded)
		}
	}
	if err := db.raft.Barrier(timeout).Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			return fmt.Errorf("crawldb: barrier: %w: %w", ErrNotLeader, err)
		}
		return fmt.Errorf("crawldb: barrier: %w", err)
	}
	return nil
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
			return fmt.Errorf("%w: %w", ErrNoLeader, ctx.Err())
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

// ApplyCommand is Apply for an encoded command. A command that does not
// decode is rejected whole (Result.Err) by the leader.
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

// applyOnce applies a command at the leader or forwards it there (whose
// handler checks it).
func (db *DB) applyOnce(ctx context.Context, cmd []byte) (*store.Result, error) {
	if db.raft.State() == raft.Leader {
		return db.applyLocal(cmd)
	}
	return db.forward(ctx, db.apiPrefix+"/apply", cmd)
}

// applyLocal checks cmd and applies it at this node, which must lead.
func (db *DB) applyLocal(cmd []byte) (*store.Result, error) {
	if err := store.CheckCommand(cmd); err != nil {
		return &store.Result{Err: err}, nil // refused before it reaches the log
	}
	return db.applyChecked(cmd)
}

// applyChecked applies cmd, which store.CheckCommand accepted, at this
// node, which must lead.
func (db *DB) applyChecked(cmd []byte) (*store.Result, error) {
	if err := db.usable(); err != nil {
		return nil, err
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
		db.mu.failed = fmt.Errorf("%w: %w", ErrFailed, err)
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
	cfg, err := db.configuration()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, s := range cfg.Servers {
		out[string(s.ID)] = string(s.Address)
	}
	return out, nil
}

// Learners returns, sorted, the members of the group that are not voters
// (added by AddVoter and still catching up).
func (db *DB) Learners() ([]string, error) {
	cfg, err := db.configuration()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range cfg.Servers {
		if s.Suffrage != raft.Voter {
			out = append(out, string(s.ID))
		}
	}
	slices.Sort(out)
	return out, nil
}

// configuration is the latest Raft configuration this node knows.
func (db *DB) configuration() (raft.Configuration, error) {
	f := db.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, fmt.Errorf("crawldb: configuration: %w", err)
	}
	return f.Configuration(), nil
}

// RaftStats returns Raft's own statistics.
func (db *DB) RaftStats() map[string]string { return db.raft.Stats() }

// Close stops the node: API, Raft, log and store. It is idempotent. A
// mounted APIHandler answers 503 from then on.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.mu.Lock()
		db.mu.closed = true // no new API requests from here on
		db.mu.Unlock()
		db.handler.unbind(db)
		db.cancel()
		var errs []error
		if db.api != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			db.api.Shutdown(ctx)
			cancel()
		}
		db.bg.Wait()
		db.leaders.close()
		if db.raft != nil {
			if err := db.raft.Shutdown().Error(); err != nil {
				errs = append(errs, fmt.Errorf("crawldb: raft shutdown: %w", err))
			}
		}
		if db.tcp != nil {
			db.tcp.Close()
			db.tcp.CloseStreams()
		} else if c, ok := db.trans.(io.Closer); ok && db.opts.Transport == nil {
			c.Close()
		}
		db.serving.Wait() // requests still in Raft calls ended with its shutdown
		if !db.sharedHTTP {
			db.httpTr.CloseIdleConnections()
		}
		db.wg.Wait()
		if db.logs != nil {
			errs = append(errs, db.logs.Close())
		}
		if db.fsm != nil {
			errs = append(errs, db.fsm.close())
		}
		db.closeErr = errors.Join(errs...)
		if db.onClose != nil {
			db.onClose()
		}
	})
	return db.closeErr
}

// slogWriter routes Raft's hclog lines to slog.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Warn(strings.TrimSpace(string(p)))
	return len(p), nil
}

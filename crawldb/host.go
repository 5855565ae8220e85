package crawldb

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/meridian-crawler/meridian/crawldb/raftlog"
	"github.com/meridian-crawler/meridian/crawldb/store"
)

// A Host is one node's container of Raft groups: a node that holds replicas
// of many groups (a site's shards) serves them all over one Raft listener
// with one TLS identity, keeps all their Raft logs in one Pebble (package
// raftlog's Shared), and serves every group's API through one handler,
// under /crawldb/g/<group>/.
//
// On disk, under HostOptions.Dir:
//
//	raftlog/                   the Raft logs and stable keys of every group
//	store/                     every group's state machine (store.Shared; see openGroupFSM)
//	groups/<id>/snapshots      the group's Raft snapshots
//
// The Raft listener is multiplexed by a group header: a node that dials
// another for group G completes the TCP connection and, with TLS, the
// handshake, then writes
//
//	"MRDG"  magic (4 bytes)
//	0x01    version
//	n       the group ID's length (1 to 32)
//	n bytes the group ID ([a-z0-9-])
//
// and from then on speaks hashicorp/raft's NetworkTransport protocol for
// G, through the same frame guard as a node of Open. The accepting Host
// reads the header (within the handshake timeout) and hands the connection
// to G's transport; a connection whose header is malformed, late, or names
// a group that is not open on the Host is logged and closed.
//
// Every group's Raft address (raft.ServerAddress) is the Host's listener
// address: a group's configuration names each replica by the node's ID and
// the node's one Raft address, and the header says which group a
// connection is for.
type Host struct {
	opts      HostOptions
	log       *slog.Logger
	logs      *raftlog.Shared
	stores    *store.Shared // every group's state machine, in one Pebble
	ln        net.Listener  // the Raft listener
	addr      net.Addr      // its advertised address
	traffic   counters      // the node's: every group's Raft and API bytes
	handshake time.Duration
	stall     time.Duration
	handler   *hostHandler
	api       *http.Server // own API listener (HostOptions.APIAddr)
	apiLn     net.Listener
	client    *http.Client
	httpTr    *http.Transport
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the accept loop, connections being routed, the API server

	closeOnce sync.Once
	closeErr  error

	mu struct {
		sync.Mutex
		closed  bool
		groups  map[string]*hostGroup
		pending map[net.Conn]struct{} // accepted, not yet routed
	}
}

// hostGroup is a group's slot in its Host: reserved while the group opens
// or is removed (db nil or removing), then its replica.
type hostGroup struct {
	db       *DB
	ln       *groupListener // its transport's listener, once made
	removing bool
}

// HostOptions configure a Host. Zero values take the documented defaults
// (those of Options).
type HostOptions struct {
	// Dir holds the node's state (see Host). Required.
	Dir string
	// NodeID names the node in every group. Required.
	NodeID string
	// RaftAddr is the Raft TCP address to listen on ("127.0.0.1:0" picks a
	// port). Required.
	RaftAddr string
	// RaftAdvertise, if set, is the Raft address the other nodes dial; see
	// Options.RaftAdvertise.
	RaftAdvertise string
	// APIAddr is where the Host serves its groups' APIs (own listener);
	// AdvertiseAPI is the API address of a Host whose API the caller serves
	// (it mounts APIHandler under /crawldb/). Set one, not both; neither: no
	// API (groups whose followers never write).
	APIAddr      string
	AdvertiseAPI string
	// TLS, if set, makes the Raft listener, the API listener and the calls
	// to other nodes mutual TLS 1.3, as Options.TLS.
	TLS *TLSConfig
	// SnapshotThreshold, TrailingLogs, SnapshotInterval and ApplyTimeout
	// are every group's (GroupOptions may override the first two); defaults
	// as Options'.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	ApplyTimeout      time.Duration
	// Store options for the groups' state machines.
	Store store.Options
	// NoSync skips fsync of the Raft log (benchmarks and unit tests only).
	NoSync bool
	// OnFatal is called once per group that stops after a storage failure.
	OnFatal func(group string, err error)
	// Logger defaults to discarding.
	Logger *slog.Logger
	// FastTimeouts shortens Raft's and the Raft port's timeouts, for
	// loopback tests.
	FastTimeouts bool
}

// Validate reports every problem with o: Options.Validate's, of the fields
// the two share.
func (o HostOptions) Validate() error { return o.nodeOptions().Validate() }

// nodeOptions are o's fields that Options has too, as Options: the Host's
// settings are validated and take their defaults as a node's of Open.
func (o HostOptions) nodeOptions() Options {
	return Options{Dir: o.Dir, NodeID: o.NodeID, RaftAddr: o.RaftAddr, RaftAdvertise: o.RaftAdvertise,
		APIAddr: o.APIAddr, AdvertiseAPI: o.AdvertiseAPI, TLS: o.TLS,
		SnapshotThreshold: o.SnapshotThreshold, TrailingLogs: o.TrailingLogs,
		SnapshotInterval: o.SnapshotInterval, ApplyTimeout: o.ApplyTimeout,
		Store: o.Store, NoSync: o.NoSync, Logger: o.Logger, FastTimeouts: o.FastTimeouts}
}

// ensureDefaults gives o's zero fields Options' defaults.
func (o *HostOptions) ensureDefaults() {
	d := o.nodeOptions()
	d.ensureDefaults()
	o.SnapshotThreshold, o.TrailingLogs = d.SnapshotThreshold, d.TrailingLogs
	o.SnapshotInterval, o.ApplyTimeout = d.SnapshotInterval, d.ApplyTimeout
	o.Logger, o.Store = d.Logger, d.Store
}

// GroupOptions say which group Host.Group opens and how it starts.
type GroupOptions struct {
	// ID names the group: 1 to 32 of [a-z0-9-]. Required.
	ID string
	// Bootstrap, when the node has no state for the group, makes it
	// bootstrap the group with these voters (this node among them; its
	// RaftAddr may be empty: the Host's). Every node bootstrapping a group
	// must be given the same list. Empty: the node waits to be added by the
	// group's leader (AddVoter), and receives its state by snapshot and log.
	// Ignored when the node has state for the group.
	Bootstrap []Member
	// SnapshotThreshold and TrailingLogs override the Host's when not 0.
	SnapshotThreshold uint64
	TrailingLogs      uint64
}

// groupIDPattern is what a group ID may be.
var groupIDPattern = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// checkGroupID reports what is wrong with a group ID, or nil.
func checkGroupID(id string) error {
	if !groupIDPattern.MatchString(id) {
		return fmt.Errorf("crawldb: group ID %q must be 1 to 32 of [a-z0-9-]", id)
	}
	return nil
}

// validate reports every problem with g for the node self.
func (g GroupOptions) validate(self string) error {
	var errs []error
	if err := checkGroupID(g.ID); err != nil {
		errs = append(errs, err)
	}
	ids, addrs, hasSelf := map[string]bool{}, map[string]bool{}, false
	for i, m := range g.Bootstrap {
		if err := checkNodeID(m.ID); err != nil {
			errs = append(errs, fmt.Errorf("crawldb: group %s: bootstrap voter %d: %w", g.ID, i, err))
		}
		if ids[m.ID] {
			errs = append(errs, fmt.Errorf("crawldb: group %s: bootstrap voter %s is listed twice", g.ID, m.ID))
		}
		ids[m.ID] = true
		if m.ID == self {
			hasSelf = true
			if m.RaftAddr == "" {
				continue
			}
		}
		if err := checkHostPort(m.RaftAddr); err != nil {
			errs = append(errs, fmt.Errorf("crawldb: group %s: bootstrap voter %s: raft_addr %q %w", g.ID, m.ID, m.RaftAddr, err))
		} else if addrs[m.RaftAddr] {
			errs = append(errs, fmt.Errorf("crawldb: group %s: bootstrap voters share the raft address %s", g.ID, m.RaftAddr))
		}
		addrs[m.RaftAddr] = true
		if m.APIAddr != "" {
			if err := checkHostPort(m.APIAddr); err != nil {
				errs = append(errs, fmt.Errorf("crawldb: group %s: bootstrap voter %s: api_addr %q %w", g.ID, m.ID, m.APIAddr, err))
			}
		}
	}
	if len(g.Bootstrap) > 0 && !hasSelf {
		errs = append(errs, fmt.Errorf("crawldb: group %s: the bootstrap voters must include this node, %s", g.ID, self))
	}
	return errors.Join(errs...)
}

// OpenHost starts a node's Host: its Raft log store, its Raft listener and
// its API (HostOptions.APIAddr). It opens no group: see Group.
func OpenHost(ctx context.Context, o HostOptions) (*Host, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.ensureDefaults()
	for _, d := range []string{o.Dir, filepath.Join(o.Dir, "raftlog"), filepath.Join(o.Dir, "groups")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("crawldb: host: %w", err)
		}
	}
	bctx, cancel := context.WithCancel(context.Background())
	httpTr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}
	if o.TLS != nil {
		httpTr.TLSClientConfig = o.TLS.Client
		httpTr.TLSHandshakeTimeout = 10 * time.Second
	}
	h := &Host{opts: o, log: o.Logger, ctx: bctx, cancel: cancel, httpTr: httpTr,
		client:    &http.Client{Timeout: o.ApplyTimeout + 5*time.Second, Transport: httpTr},
		handshake: handshakeTimeout, stall: stallTimeout}
	if o.FastTimeouts {
		h.handshake, h.stall = fastTimeout, fastTimeout
	}
	h.mu.groups = map[string]*hostGroup{}
	h.mu.pending = map[net.Conn]struct{}{}
	h.handler = &hostHandler{h: h}
	ok := false
	defer func() {
		if !ok {
			h.Close()
		}
	}()
	var err error
	if h.logs, err = raftlog.OpenShared(filepath.Join(o.Dir, "raftlog"), raftlog.Options{NoSync: o.NoSync, Logger: o.Logger}); err != nil {
		return nil, fmt.Errorf("crawldb: host: %w", err)
	}
	if h.stores, err = store.OpenShared(filepath.Join(o.Dir, "store"), o.Store); err != nil { // o.Store.Logger set by ensureDefaults
		return nil, fmt.Errorf("crawldb: host: %w", err)
	}
	// The listener and its advertised address, as newStreamLayer makes them.
	probe, err := newStreamLayer(streamConfig{bind: o.RaftAddr, advertise: o.RaftAdvertise, counters: &h.traffic, log: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("crawldb: host: raft listen on %s: %w", o.RaftAddr, err)
	}
	h.ln, h.addr = probe.ln, probe.addr
	h.wg.Add(1)
	go h.acceptLoop()
	if o.APIAddr != "" { // the Host's API on its own listener, with TLS when set
		if h.apiLn, h.api, err = serveAPI("host api", o.APIAddr, h.handler, o.TLS, h.log, &h.wg); err != nil {
			return nil, err
		}
	}
	ok = true
	return h, nil
}

// NodeID is the node's ID in every group.
func (h *Host) NodeID() string { return h.opts.NodeID }

// RaftAddr is the node's Raft address, every group's.
func (h *Host) RaftAddr() string { return h.addr.String() }

// APIAddr is the node's API address: its own listener's, or
// HostOptions.AdvertiseAPI ("" without either).
func (h *Host) APIAddr() string {
	if h.apiLn == nil {
		return h.opts.AdvertiseAPI
	}
	return h.apiLn.Addr().String()
}

// APIHandler serves every group's API (under /crawldb/g/<group>/) and the
// Host's status (GET /crawldb/host/status), for a caller that mounts it
// under /crawldb/ (HostOptions.AdvertiseAPI).
func (h *Host) APIHandler() http.Handler { return h.handler }

// Traffic returns the node's traffic counters: every group's.
func (h *Host) Traffic() Traffic {
	return Traffic{
		RaftSent: h.traffic.raftSent.Load(), RaftReceived: h.traffic.raftReceived.Load(),
		APISent: h.traffic.apiSent.Load(), APIReceived: h.traffic.apiReceived.Load(),
	}
}

// groupDir is where group id keeps its state machine and snapshots.
func (h *Host) groupDir(id string) string { return filepath.Join(h.opts.Dir, "groups", id) }

// Group opens this node's replica of group g.ID, creating its state if it
// has none: the group is bootstrapped (GroupOptions.Bootstrap) or waits to
// be added by its leader. It returns once the replica runs; WaitLeader
// waits for a leader. The DB is closed by its Close (just this group) or
// by the Host's. A group may be open once at a time.
func (h *Host) Group(ctx context.Context, g GroupOptions) (*DB, error) {
	if err := g.validate(h.opts.NodeID); err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := h.mu.groups[g.ID]; ok {
		h.mu.Unlock()
		return nil, fmt.Errorf("crawldb: group %s is already open (or being opened or removed) on node %s", g.ID, h.opts.NodeID)
	}
	slot := &hostGroup{}
	h.mu.groups[g.ID] = slot
	h.mu.Unlock()
	db, err := h.openGroup(g, slot)
	if err != nil {
		h.dropGroup(g.ID, slot)
		return nil, err
	}
	h.mu.Lock()
	closed := h.mu.closed
	if !closed {
		slot.db = db
	}
	h.mu.Unlock()
	if closed {
		db.Close()
		return nil, ErrClosed
	}
	return db, nil
}

// groupOptions are the Options of group g's DB.
func (h *Host) groupOptions(g GroupOptions) Options {
	o := Options{Dir: h.groupDir(g.ID), NodeID: h.opts.NodeID, AdvertiseAPI: h.APIAddr(),
		SnapshotThreshold: h.opts.SnapshotThreshold, TrailingLogs: h.opts.TrailingLogs,
		SnapshotInterval: h.opts.SnapshotInterval, ApplyTimeout: h.opts.ApplyTimeout,
		Store: h.opts.Store, NoSync: h.opts.NoSync, Logger: h.log.With("group", g.ID),
		TLS: h.opts.TLS, FastTimeouts: h.opts.FastTimeouts}
	if g.SnapshotThreshold != 0 {
		o.SnapshotThreshold = g.SnapshotThreshold
	}
	if g.TrailingLogs != 0 {
		o.TrailingLogs = g.TrailingLogs
	}
	if h.opts.OnFatal != nil {
		o.OnFatal = func(err error) { h.opts.OnFatal(g.ID, err) }
	}
	o.Store.Logger = o.Logger
	return o
}

// openGroupFSM opens group g's state machine in dir.
//
// openGroupFSM opens group id's state machine: its store in the Host's one
// Pebble (store.Shared). A store left half-restored by a crash is dropped
// and opened empty: Raft restores the group's snapshot and replays its log
// into it.
func (h *Host) openGroupFSM(db *DB, id string) (*fsm, error) {
	st, err := h.stores.Store(id)
	if errors.Is(err, store.ErrIncomplete) {
		h.log.Warn("crawldb: group's store was left half-restored: dropped; Raft restores it", "group", id)
		if err = h.stores.Drop(id); err == nil {
			st, err = h.stores.Store(id)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("crawldb: group %s: %w", id, err)
	}
	return newGroupFSM(db, st), nil
}

// openGroup starts group g's replica in slot.
func (h *Host) openGroup(g GroupOptions, slot *hostGroup) (*DB, error) {
	o := h.groupOptions(g)
	if err := os.MkdirAll(filepath.Join(o.Dir, "snapshots"), 0o755); err != nil {
		return nil, fmt.Errorf("crawldb: group %s: %w", g.ID, err)
	}
	bctx, cancel := context.WithCancel(context.Background())
	db := &DB{opts: o, log: o.Logger, ctx: bctx, cancel: cancel, handler: NewHandler(),
		httpTr: h.httpTr, client: h.client, sharedHTTP: true, traffic: &h.traffic,
		group: g.ID, apiPrefix: groupPath(g.ID), ended: make(chan struct{}, 1)}
	db.onClose = func() { h.dropGroup(g.ID, slot) }
	db.mux = db.newMux()
	ok := false
	defer func() {
		if !ok {
			db.Close()
		}
	}()
	f, err := h.openGroupFSM(db, g.ID)
	if err != nil {
		return nil, fmt.Errorf("crawldb: group %s: %w", g.ID, err)
	}
	db.fsm = f
	if db.logs, err = h.logs.Group(g.ID); err != nil {
		return nil, fmt.Errorf("crawldb: group %s: %w", g.ID, err)
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: slogWriter{o.Logger}})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(o.Dir, "snapshots"), 2, hlog)
	if err != nil {
		return nil, fmt.Errorf("crawldb: group %s: snapshot store: %w", g.ID, err)
	}
	gl := &groupListener{addr: h.addr, conns: make(chan net.Conn), done: make(chan struct{})}
	sl := &streamLayer{ln: gl, addr: h.addr, c: &h.traffic, tls: h.opts.TLS, log: o.Logger,
		handshake: h.handshake, stall: h.stall, limits: defaultFrameLimits(), conns: map[*raftConn]struct{}{},
		header: groupHeader(g.ID), ended: db.streamEnded}
	h.mu.Lock()
	slot.ln = gl
	h.mu.Unlock()
	db.tcp = newGroupTransport(sl, hlog)
	db.trans = db.tcp
	cfg := raftConfig(o, hlog)
	has, err := raft.HasExistingState(db.logs, db.logs, snaps)
	if err != nil {
		return nil, fmt.Errorf("crawldb: group %s: %w", g.ID, err)
	}
	if !has && len(g.Bootstrap) > 0 {
		db.bootAPIs = map[string]string{}
		for _, m := range g.Bootstrap {
			if m.ID == h.opts.NodeID {
				continue // the leader announces its own
			}
			db.bootAPIs[m.ID] = m.APIAddr
		}
	}
	if db.raft, err = raft.NewRaft(cfg, db.fsm, db.logs, db.logs, snaps, db.trans); err != nil {
		return nil, fmt.Errorf("crawldb: group %s: start raft: %w", g.ID, err)
	}
	db.startWatchers()
	db.handler.bind(db)
	if !has && len(g.Bootstrap) > 0 {
		var boot raft.Configuration
		for _, m := range g.Bootstrap {
			addr := raft.ServerAddress(m.RaftAddr)
			if m.ID == h.opts.NodeID && addr == "" {
				addr = raft.ServerAddress(h.RaftAddr())
			}
			boot.Servers = append(boot.Servers, raft.Server{ID: raft.ServerID(m.ID), Address: addr})
		}
		if err := db.raft.BootstrapCluster(boot).Error(); err != nil {
			return nil, fmt.Errorf("crawldb: group %s: bootstrap: %w", g.ID, err)
		}
	}
	ok = true
	return db, nil
}

// dropGroup frees group id's slot when its replica closed, unless the
// group is being removed (RemoveGroup frees it).
func (h *Host) dropGroup(id string, slot *hostGroup) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.groups[id] == slot && !slot.removing {
		delete(h.mu.groups, id)
	}
}

// Lookup returns the open replica of group id, or nil.
func (h *Host) Lookup(id string) *DB {
	h.mu.Lock()
	defer h.mu.Unlock()
	if g := h.mu.groups[id]; g != nil && !g.removing {
		return g.db
	}
	return nil
}

// Groups returns the IDs of the groups that have state on this node (open
// or not), sorted.
func (h *Host) Groups() ([]string, error) {
	ids, err := h.logs.Groups()
	if err != nil {
		return nil, fmt.Errorf("crawldb: host groups: %w", err)
	}
	ents, err := os.ReadDir(filepath.Join(h.opts.Dir, "groups"))
	if err != nil {
		return nil, fmt.Errorf("crawldb: host groups: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && checkGroupID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// RemoveGroup shuts this node's replica of group id (if open) and deletes
// its state on this node: its Raft log and stable keys, its state machine
// and its snapshots. Call it once the group's leader has removed the node
// from the group (RemoveVoter): a replica that still leads other voters is
// refused. Removing a group without state succeeds.
func (h *Host) RemoveGroup(id string) error {
	if err := checkGroupID(id); err != nil {
		return err
	}
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	slot := h.mu.groups[id]
	switch {
	case slot == nil:
		slot = &hostGroup{}
		h.mu.groups[id] = slot
	case slot.db == nil || slot.removing:
		h.mu.Unlock()
		return fmt.Errorf("crawldb: remove group %s: it is being opened or removed on node %s", id, h.opts.NodeID)
	}
	db := slot.db
	slot.removing = true
	h.mu.Unlock()
	release := func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.mu.groups[id] == slot {
			delete(h.mu.groups, id)
		}
	}
	if db != nil {
		if db.IsLeader() {
			if v, err := db.Voters(); err == nil && len(v) > 1 {
				h.mu.Lock()
				slot.removing = false
				h.mu.Unlock()
				return fmt.Errorf("crawldb: remove group %s: node %s leads it with %d other voters; remove it from the group (RemoveVoter at the leader) first", id, h.opts.NodeID, len(v)-1)
			}
		}
		db.Close() // its errors do not matter: its state goes
	}
	defer release()
	if err := h.logs.DeleteGroup(id); err != nil {
		return fmt.Errorf("crawldb: remove group %s: %w", id, err)
	}
	if err := h.stores.Drop(id); err != nil {
		return fmt.Errorf("crawldb: remove group %s: %w", id, err)
	}
	if err := os.RemoveAll(h.groupDir(id)); err != nil {
		return fmt.Errorf("crawldb: remove group %s: %w", id, err)
	}
	h.log.Info("crawldb: group removed from this node", "group", id, "node", h.opts.NodeID)
	return nil
}

// HostStatus is a Host's view of its groups.
type HostStatus struct {
	NodeID   string   `json:"node_id"`
	RaftAddr string   `json:"raft_addr"`
	APIAddr  string   `json:"api_addr"`
	Groups   []Status `json:"groups"`
	Traffic  Traffic  `json:"traffic"`
}

// Status returns the status of every open group, by ID.
func (h *Host) Status() HostStatus {
	h.mu.Lock()
	var dbs []*DB
	for _, g := range h.mu.groups {
		if g.db != nil && !g.removing {
			dbs = append(dbs, g.db)
		}
	}
	h.mu.Unlock()
	slices.SortFunc(dbs, func(a, b *DB) int { return strings.Compare(a.group, b.group) })
	out := HostStatus{NodeID: h.opts.NodeID, RaftAddr: h.RaftAddr(), APIAddr: h.APIAddr(), Traffic: h.Traffic(), Groups: []Status{}}
	for _, db := range dbs {
		out.Groups = append(out.Groups, db.Status())
	}
	return out
}

// Close closes every open group, the listeners and the Raft log store. It
// is idempotent.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.mu.closed = true
		var dbs []*DB
		for _, g := range h.mu.groups {
			if g.db != nil {
				dbs = append(dbs, g.db)
			}
		}
		h.mu.Unlock()
		errs := make([]error, len(dbs))
		var wg sync.WaitGroup
		for i, db := range dbs {
			wg.Add(1)
			go func() { // each group's Raft shuts down on its own
				defer wg.Done()
				if err := db.Close(); err != nil {
					errs[i] = fmt.Errorf("crawldb: close group %s: %w", db.group, err)
				}
			}()
		}
		wg.Wait()
		if h.api != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			h.api.Shutdown(ctx)
			cancel()
		}
		if h.cancel != nil {
			h.cancel()
		}
		if h.ln != nil {
			h.ln.Close()
		}
		h.mu.Lock()
		for c := range h.mu.pending {
			c.Close()
		}
		h.mu.Unlock()
		h.wg.Wait()
		h.httpTr.CloseIdleConnections()
		if h.logs != nil {
			errs = append(errs, h.logs.Close())
		}
		if h.stores != nil {
			errs = append(errs, h.stores.Close())
		}
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}

// The group header (see Host).
const (
	groupMagic         = "MRDG"
	groupHeaderVersion = 1
)

// groupHeader is the header a dialer writes for group id.
func groupHeader(id string) []byte {
	return append(append([]byte(groupMagic), groupHeaderVersion, byte(len(id))), id...)
}

// readGroupHeader reads a group header from c within timeout and returns
// the group's ID, or what is wrong with the header.
func readGroupHeader(c net.Conn, timeout time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	var hdr [len(groupMagic) + 2]byte
	n, err := io.ReadFull(c, hdr[:])
	if err == nil && string(hdr[:len(groupMagic)]) != groupMagic {
		return "", fmt.Errorf("not a group header: it starts with %q (want %q)", hdr[:n], groupMagic)
	}
	if err == nil && hdr[len(groupMagic)] != groupHeaderVersion {
		return "", fmt.Errorf("group header version %d (this node speaks %d)", hdr[len(groupMagic)], groupHeaderVersion)
	}
	idLen := int(hdr[len(groupMagic)+1])
	if err == nil && (idLen == 0 || idLen > 32) {
		return "", fmt.Errorf("group header names a group ID of %d bytes (1 to 32)", idLen)
	}
	var id []byte
	if err == nil {
		id = make([]byte, idLen)
		if _, err = io.ReadFull(c, id); err == io.EOF {
			err = io.ErrUnexpectedEOF // io.EOF: nothing sent at all (logRefused)
		}
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "", fmt.Errorf("no complete group header within %v", timeout)
	case err != nil:
		return "", fmt.Errorf("closed before its group header was complete: %w", err)
	}
	if err := checkGroupID(string(id)); err != nil {
		return "", fmt.Errorf("group header: %w", err)
	}
	c.SetReadDeadline(time.Time{})
	return string(id), nil
}

// acceptLoop accepts Raft connections and routes each in a goroutine of
// its own. It ends when the listener closes (Close).
func (h *Host) acceptLoop() {
	defer h.wg.Done()
	for {
		conn, err := h.ln.Accept()
		if err != nil {
			if h.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			h.log.Warn("crawldb: raft: accept", "err", err)
			select {
			case <-h.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		wire := &countingConn{Conn: conn, sent: &h.traffic.raftSent, received: &h.traffic.raftReceived}
		h.mu.Lock()
		if h.mu.closed {
			h.mu.Unlock()
			conn.Close()
			return
		}
		h.mu.pending[wire] = struct{}{}
		h.wg.Add(1)
		h.mu.Unlock()
		go h.route(wire)
	}
}

// route completes an accepted connection's TLS handshake, reads its group
// header and hands it to the group's transport; a connection refused at
// any step is logged with the peer's address and closed.
func (h *Host) route(wire *countingConn) {
	defer h.wg.Done()
	delivered := false
	defer func() {
		h.mu.Lock()
		delete(h.mu.pending, wire)
		h.mu.Unlock()
		if !delivered {
			wire.Close()
		}
	}()
	remote := wire.RemoteAddr().String()
	var c net.Conn = wire
	var tc *tls.Conn
	if h.opts.TLS != nil {
		tc = tls.Server(wire, h.opts.TLS.Server)
		ctx, cancel := context.WithTimeout(h.ctx, h.handshake)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			if h.ctx.Err() == nil {
				logRefused(h.log, err, "crawldb: raft: refused a connection", "remote", remote)
			}
			return
		}
		c = tc
	}
	id, err := readGroupHeader(c, h.handshake)
	if err != nil {
		if h.ctx.Err() == nil {
			logRefused(h.log, err, "crawldb: raft: refused a connection: "+err.Error(), "remote", remote, "node", h.opts.NodeID)
		}
		return
	}
	h.mu.Lock()
	var gl *groupListener
	if g := h.mu.groups[id]; g != nil && !g.removing {
		gl = g.ln
	}
	h.mu.Unlock()
	if gl == nil {
		h.log.Warn("crawldb: raft: refused a connection for group "+id+": the group is not open on this node",
			"remote", remote, "group", id, "node", h.opts.NodeID)
		return
	}
	delivered = gl.deliver(&muxedConn{Conn: c, wire: wire, tls: tc}, h.ctx.Done())
}

// muxedConn is a connection the Host accepted, counted, handshaken (with
// TLS) and read the group header of, on its way to the group's stream
// layer (see streamLayer.Accept).
type muxedConn struct {
	net.Conn           // the TLS connection, or wire
	wire     net.Conn  // the counted TCP connection
	tls      *tls.Conn // nil without TLS
}

// groupListener is a group's end of the Host's listener: its Accept
// returns the connections the Host routes to the group.
type groupListener struct {
	addr  net.Addr
	conns chan net.Conn // unbuffered: a connection is the group's once taken
	done  chan struct{}
	once  sync.Once
}

// Accept implements net.Listener.
func (l *groupListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener. It is idempotent.
func (l *groupListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr implements net.Listener: the Host's advertised address.
func (l *groupListener) Addr() net.Addr { return l.addr }

// deliver hands c to the group unless the group or the Host (stop) closes
// first; it reports whether the group took it.
func (l *groupListener) deliver(c net.Conn, stop <-chan struct{}) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
	case <-stop:
	}
	return false
}

// hostHandler serves a Host's API: each group's under /crawldb/g/<group>/
// (the group's own handler), the Host's status at /crawldb/host/status.
type hostHandler struct{ h *Host }

// ServeHTTP implements http.Handler.
func (hh *hostHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := hh.h
	if r.URL.Path == apiRoot+"/host/status" && r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(h.Status())
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, apiRoot+"/g/")
	if !ok {
		http.Error(w, fmt.Sprintf("crawldb: node %s serves its groups under %s/g/<group>/, not %s", h.opts.NodeID, apiRoot, r.URL.Path), http.StatusNotFound)
		return
	}
	id, _, _ := strings.Cut(rest, "/")
	if err := checkGroupID(id); err != nil {
		http.Error(w, fmt.Sprintf("%v (in path %s)", err, r.URL.Path), http.StatusBadRequest)
		return
	}
	db := h.Lookup(id)
	if db == nil {
		http.Error(w, fmt.Sprintf("crawldb: group %s is not open on node %s", id, h.opts.NodeID), http.StatusNotFound)
		return
	}
	db.handler.ServeHTTP(w, r)
}

// peer is the Host's client of the other nodes' APIs.
func (h *Host) peer() peerClient {
	return peerClient{client: h.client, tls: h.opts.TLS != nil, nodeID: h.opts.NodeID, c: &h.traffic}
}

// AddVoterAt asks the node whose API is at api to add nodeID (Raft address
// raftAddr, API address nodeAPI) to group; the node relays the request to
// the group's leader if it does not lead. Errors wrap ErrNotLeader (no
// leader reached: ask again), ErrRefused (the leader refuses), or say what
// failed where.
func (h *Host) AddVoterAt(ctx context.Context, api, group, nodeID, raftAddr, nodeAPI string) error {
	return h.remoteChange(ctx, api, group, "/voters/add", joinRequest{ID: nodeID, RaftAddr: raftAddr, APIAddr: nodeAPI})
}

// RemoveVoterAt asks the node whose API is at api to remove nodeID from
// group (see AddVoterAt and DB.RemoveVoter).
func (h *Host) RemoveVoterAt(ctx context.Context, api, group, nodeID string) error {
	return h.remoteChange(ctx, api, group, "/voters/remove", leaveRequest{ID: nodeID})
}

// TransferLeadershipAt asks the node whose API is at api to have group's
// leader hand its leadership to nodeID (see AddVoterAt and
// DB.TransferLeadershipTo).
func (h *Host) TransferLeadershipAt(ctx context.Context, api, group, nodeID string) error {
	return h.remoteChange(ctx, api, group, "/leadership", transferRequest{ID: nodeID})
}

// remoteChange posts a membership change for group to the node at api.
func (h *Host) remoteChange(ctx context.Context, api, group, path string, req any) error {
	if err := checkGroupID(group); err != nil {
		return err
	}
	body, _ := json.Marshal(req)
	var out map[string]string
	err := h.peer().postHeader(ctx, api, groupPath(group)+path, "", body, &out)
	var he *httpError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &he) && he.code == http.StatusServiceUnavailable:
		return fmt.Errorf("crawldb: group %s: %w: %w", group, ErrNotLeader, err)
	case errors.As(err, &he) && (he.code == http.StatusConflict || he.code == http.StatusBadRequest):
		return fmt.Errorf("crawldb: group %s: %w: %w", group, ErrRefused, err)
	}
	return fmt.Errorf("crawldb: group %s: %w", group, err)
}

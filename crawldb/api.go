package crawldb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// errNotSent: a forwarded write certainly did not reach the leader's log
// (no connection, or the receiver was not the leader): safe to retry.
var errNotSent = errors.New("crawldb: write not sent")

// forwardedHeader marks a write a node forwards, so it is forwarded once at most.
const forwardedHeader = "X-Crawldb-Forwarded"

// memberKey is the store key under which a node's API address is kept.
func memberKey(id string) string { return "member/" + id }

func (db *DB) startAPI() error {
	ln, err := net.Listen("tcp", db.opts.APIAddr)
	if err != nil {
		return fmt.Errorf("crawldb: api listen on %s: %w", db.opts.APIAddr, err)
	}
	db.apiLn = ln
	mux := http.NewServeMux()
	mux.HandleFunc("POST /crawldb/apply", db.handleApply)
	mux.HandleFunc("POST /crawldb/join", db.handleJoin)
	mux.HandleFunc("GET /crawldb/status", db.handleStatus)
	db.api = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	db.wg.Add(1)
	go func() {
		defer db.wg.Done()
		if err := db.api.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			db.log.Error("crawldb: api", "err", err)
		}
	}()
	return nil
}

// wireResult is a Result on the wire.
type wireResult struct {
	Index   uint64           `json:"index"`
	Err     string           `json:"err,omitempty"`
	Skipped bool             `json:"skipped,omitempty"`
	Ops     []store.OpResult `json:"ops,omitempty"`
	// NotLeader: the receiver is not the leader (retry elsewhere).
	NotLeader bool `json:"not_leader,omitempty"`
	// Failure: the write failed (may or may not have been applied).
	Failure string `json:"failure,omitempty"`
}

func (db *DB) handleApply(w http.ResponseWriter, r *http.Request) {
	cmd, err := io.ReadAll(io.LimitReader(r.Body, store.MaxCommandBytes+1))
	if err != nil {
		http.Error(w, "crawldb: read command: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(cmd) > store.MaxCommandBytes {
		http.Error(w, store.ErrCommandTooLarge.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var out wireResult
	var res *store.Result
	switch {
	case db.raft.State() == raft.Leader:
		res, err = db.applyLocal(cmd)
	case r.Header.Get(forwardedHeader) == "":
		res, err = db.forward(r.Context(), "/crawldb/apply", cmd) // one hop at most
	default:
		err = raft.ErrNotLeader
	}
	if err != nil {
		// not_leader only when the write surely did not reach a log.
		out.NotLeader = errors.Is(err, raft.ErrNotLeader) || errors.Is(err, errNotSent) || errors.Is(err, ErrNoLeader)
		if !out.NotLeader {
			out.Failure = err.Error()
		}
	} else {
		out.Index, out.Skipped, out.Ops = res.Index, res.Skipped, res.Ops
		if res.Err != nil {
			out.Err = res.Err.Error()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// rejectedError is a command the leader rejected whole.
type rejectedError struct{ msg string }

func (e rejectedError) Error() string { return e.msg }

// forward sends body to the leader's API path and decodes the result.
func (db *DB) forward(ctx context.Context, path string, body []byte) (*store.Result, error) {
	addr, err := db.leaderAPI()
	if err != nil {
		return nil, err
	}
	var out wireResult
	if err := db.post(ctx, addr, path, body, &out); err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, fmt.Errorf("%w: %v", errNotSent, err)
		}
		return nil, fmt.Errorf("crawldb: forward to leader %s (the write may or may not be applied): %w", addr, err)
	}
	if out.NotLeader {
		return nil, fmt.Errorf("%w: %s is not the leader", errNotSent, addr)
	}
	if out.Failure != "" {
		return nil, fmt.Errorf("crawldb: apply at leader %s: %s", addr, out.Failure)
	}
	res := &store.Result{Index: out.Index, Skipped: out.Skipped, Ops: out.Ops}
	if out.Err != "" {
		res.Err = rejectedError{out.Err}
	}
	return res, nil
}

func (db *DB) post(ctx context.Context, addr, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(forwardedHeader, db.opts.NodeID)
	resp, err := db.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s%s: %s: %s", addr, path, resp.Status, bytes.TrimSpace(b))
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// leaderAPI returns the API address of the current leader.
func (db *DB) leaderAPI() (string, error) {
	_, id := db.raft.LeaderWithID()
	if id == "" {
		return "", ErrNoLeader
	}
	v, err := db.Store().User(memberKey(string(id)))
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return "", fmt.Errorf("%w: leader %s has not announced its API address yet", ErrNoLeader, id)
	}
	return string(v), nil
}

type joinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
}

func (db *DB) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req joinRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil || req.ID == "" || req.RaftAddr == "" || req.APIAddr == "" {
		http.Error(w, "crawldb: join: want JSON {id, raft_addr, api_addr}", http.StatusBadRequest)
		return
	}
	if db.raft.State() != raft.Leader {
		addr, err := db.leaderAPI()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		body, _ := json.Marshal(req)
		var out map[string]string
		if err := db.post(r.Context(), addr, "/crawldb/join", body, &out); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		json.NewEncoder(w).Encode(out)
		return
	}
	if err := db.addVoter(req); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	json.NewEncoder(w).Encode(map[string]string{"leader": db.opts.NodeID})
}

// addVoter adds a node to the group and records its API address.
func (db *DB) addVoter(req joinRequest) error {
	b := store.NewBatch()
	b.PutUser(memberKey(req.ID), []byte(req.APIAddr))
	if _, err := db.Apply(db.ctx, b); err != nil {
		return fmt.Errorf("crawldb: join %s: %w", req.ID, err)
	}
	if err := db.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, db.opts.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("crawldb: join %s: add voter: %w", req.ID, err)
	}
	db.log.Info("crawldb: node joined", "id", req.ID, "raft", req.RaftAddr, "api", req.APIAddr)
	return nil
}

// join asks the member at Options.Join to add this node.
func (db *DB) join(ctx context.Context) error {
	body, _ := json.Marshal(joinRequest{ID: db.opts.NodeID, RaftAddr: db.RaftAddr(), APIAddr: db.APIAddr()})
	var lastErr error
	for attempt := 0; attempt < 50; attempt++ {
		var out map[string]string
		if lastErr = db.post(ctx, db.opts.Join, "/crawldb/join", body, &out); lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crawldb: join through %s: %w (last: %v)", db.opts.Join, ctx.Err(), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("crawldb: join through %s: %w", db.opts.Join, lastErr)
}

// announce records the leader's own API address whenever this node becomes
// leader, so that followers can forward to it.
func (db *DB) announce() {
	defer db.bg.Done()
	if db.opts.APIAddr == "" {
		return
	}
	ch := db.raft.LeaderCh()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		select {
		case <-db.ctx.Done():
			return
		case <-ch:
		case <-check.C:
		}
		if db.raft.State() != raft.Leader {
			continue
		}
		if v, err := db.Store().User(memberKey(db.opts.NodeID)); err == nil && string(v) == db.APIAddr() {
			continue
		}
		b := store.NewBatch()
		b.PutUser(memberKey(db.opts.NodeID), []byte(db.APIAddr()))
		ctx, cancel := context.WithTimeout(db.ctx, 5*time.Second)
		if _, err := db.applyLocalCtx(ctx, b); err != nil {
			db.log.Debug("crawldb: announce", "err", err)
		}
		cancel()
	}
}

func (db *DB) applyLocalCtx(ctx context.Context, b *store.Batch) (*store.Result, error) {
	cmd, err := b.Encode()
	if err != nil {
		return nil, err
	}
	return db.applyLocal(cmd)
}

// Status is a node's view of its group.
type Status struct {
	NodeID   string       `json:"node_id"`
	State    string       `json:"state"`
	Leader   string       `json:"leader"`
	Applied  uint64       `json:"applied"`
	Counts   store.Counts `json:"counts"`
	RaftAddr string       `json:"raft_addr"`
	APIAddr  string       `json:"api_addr"`
}

// Status returns the node's view of its group.
func (db *DB) Status() Status {
	return Status{NodeID: db.opts.NodeID, State: db.raft.State().String(), Leader: db.Leader(),
		Applied: db.Store().AppliedIndex(), Counts: db.Store().Counts(), RaftAddr: db.RaftAddr(), APIAddr: db.APIAddr()}
}

func (db *DB) handleStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(db.Status())
}

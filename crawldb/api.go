package crawldb

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// errNotSent: a forwarded write certainly did not reach the leader's log
// (no connection, or the receiver was not the leader): safe to retry.
var errNotSent = errors.New("crawldb: write not sent")

// forwardedHeader marks a request a node sends to another (its value is the
// sender's ID), so that a forwarded write is forwarded once at most.
const forwardedHeader = "X-Crawldb-Forwarded"

// relayedHeader marks a membership request a follower relays to the leader,
// so that it is relayed once at most.
const relayedHeader = "X-Crawldb-Relayed"

// memberKey is the store key under which a node's API address is kept.
func memberKey(id string) string { return "member/" + id }

// Handler serves a node's API (paths under /crawldb/). A caller that serves
// the API on its own server (Options.AdvertiseAPI) can mount one before Open
// and pass it in Options.Handler: until the node runs, and after it closes,
// it answers 503 "crawldb: starting" or "crawldb: closed". Open binds the
// node to it once Raft runs; a later Open may bind another node to it.
type Handler struct {
	db     atomic.Pointer[DB]
	closed atomic.Bool // the last node bound has closed
}

// NewHandler returns a Handler no node is bound to yet.
func NewHandler() *Handler { return &Handler{} }

func (h *Handler) bind(db *DB) {
	h.closed.Store(false)
	h.db.Store(db)
}

func (h *Handler) unbind(db *DB) {
	if h.db.CompareAndSwap(db, nil) {
		h.closed.Store(true)
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	db := h.db.Load()
	if db == nil || !db.enter() {
		msg := "crawldb: starting"
		if h.closed.Load() || db != nil {
			msg = ErrClosed.Error()
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	defer db.serving.Done()
	body := &countingReader{r: r.Body, n: &db.traffic.apiReceived}
	r.Body = body
	cw := &countingResponseWriter{ResponseWriter: w, n: &db.traffic.apiSent}
	db.mux.ServeHTTP(cw, r)
	io.Copy(io.Discard, io.LimitReader(body, 4096)) // count what the handler left unread
}

// enter admits one API request unless the node is closing; the caller calls
// db.serving.Done when it ends.
func (db *DB) enter() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.mu.closed {
		return false
	}
	db.serving.Add(1)
	return true
}

// requestContext is r's context, also cancelled when the node closes.
func (db *DB) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(db.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// apiRoot is where a node of Open serves its API; a Host serves each
// group's under groupPath.
const apiRoot = "/crawldb"

// groupPath is where a Host serves group id's API.
func groupPath(id string) string { return apiRoot + "/g/" + id }

func (db *DB) newMux() *http.ServeMux {
	mux := http.NewServeMux()
	p := db.apiPrefix
	mux.HandleFunc("POST "+p+"/apply", db.handleApply)
	mux.HandleFunc("POST "+p+"/join", db.handleJoin)
	mux.HandleFunc("POST "+p+"/leave", db.handleLeave)
	mux.HandleFunc("GET "+p+"/status", db.handleStatus)
	mux.HandleFunc("POST "+p+"/voters/add", db.handleAddVoter)
	mux.HandleFunc("POST "+p+"/voters/remove", db.handleRemoveVoter)
	mux.HandleFunc("POST "+p+"/leadership", db.handleTransfer)
	return mux
}

// serveAPI listens on addr and serves handler there, over TLS when tc is
// set: the API of a node of Open or of a Host, which errors and log lines
// call what ("api", "host api"). The goroutine serving it is counted in
// wg; it ends when the caller's Close closes the server.
func serveAPI(what, addr string, handler http.Handler, tc *TLSConfig, lg *slog.Logger, wg *sync.WaitGroup) (net.Listener, *http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("crawldb: %s listen on %s: %w", what, addr, err)
	}
	// ReadHeaderTimeout also bounds a TLS handshake; a refused handshake
	// is logged as a warning ("crawldb: api: http: TLS handshake error from
	// …").
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(apiErrorLog(lg), "", 0)}
	serve := ln
	if tc != nil {
		serve = tls.NewListener(ln, tc.Server)
	}
	wg.Add(1)
	go func() { // owner: the caller, whose Close shuts srv down and waits on wg
		defer wg.Done()
		if err := srv.Serve(serve); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("crawldb: "+what, "err", err)
		}
	}()
	return ln, srv, nil
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

// refuse answers a request the API will not take (a body too large, not a
// command, not the JSON wanted) and logs it with the caller's address: a
// node sending garbage is worth knowing about.
func (db *DB) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	db.log.Warn("crawldb: api: refused a request", "remote", r.RemoteAddr, "path", r.URL.Path, "status", code, "reason", msg)
	http.Error(w, msg, code)
}

// handleApply takes a command (POST /crawldb/apply, the body an encoded
// command). A body that is too large (413), unreadable or not a valid
// command (400) is refused before anything else, with a message; a valid
// one is applied here or forwarded to the leader, and the answer is a
// wireResult.
func (db *DB) handleApply(w http.ResponseWriter, r *http.Request) {
	cmd, code, err := readBody(r, store.MaxCommandBytes)
	if err == nil {
		if cerr := store.CheckCommand(cmd); cerr != nil {
			code, err = http.StatusBadRequest, cerr
		}
	}
	if err != nil {
		db.refuse(w, r, code, "crawldb: apply: "+err.Error())
		return
	}
	var out wireResult
	var res *store.Result
	switch {
	case db.raft.State() == raft.Leader:
		res, err = db.applyChecked(cmd)
	case r.Header.Get(forwardedHeader) == "":
		ctx, cancel := db.requestContext(r)
		res, err = db.forward(ctx, db.apiPrefix+"/apply", cmd) // one hop at most
		cancel()
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
		var he *httpError
		if errors.As(err, &op) && op.Op == "dial" || errors.As(err, &he) && he.notSent() {
			return nil, fmt.Errorf("%w: %w", errNotSent, err)
		}
		if errors.As(err, &he) && (he.code == http.StatusBadRequest || he.code == http.StatusRequestEntityTooLarge) {
			return &store.Result{Err: rejectedError{he.msg}}, nil // refused before it reached a log
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

// post sends body to another node's API and decodes its JSON answer into
// out; an answer other than 200 is an *httpError.
func (db *DB) post(ctx context.Context, addr, path string, body []byte, out any) error {
	return db.postHeader(ctx, addr, path, "", body, out)
}

// postHeader is post that also sets header (if not "") to the node's ID.
func (db *DB) postHeader(ctx context.Context, addr, path, header string, body []byte, out any) error {
	return db.peer().postHeader(ctx, addr, path, header, body, out)
}

// peer is the node's client of the other nodes' APIs.
func (db *DB) peer() peerClient {
	return peerClient{client: db.client, tls: db.opts.TLS != nil, nodeID: db.opts.NodeID, c: db.traffic}
}

// peerClient calls other nodes' APIs (a node's, or a Host's).
type peerClient struct {
	client *http.Client
	tls    bool // https (the client's transport speaks Options.TLS)
	nodeID string
	c      *counters
}

// url is the URL of path on the API of the node at addr.
func (p peerClient) url(addr, path string) string {
	if p.tls {
		return "https://" + addr + path
	}
	return "http://" + addr + path
}

// postHeader sends body to another node's API and decodes its JSON answer
// into out; an answer other than 200 is an *httpError. It sets the
// forwarded header, and header (if not "") too, to the node's ID.
func (p peerClient) postHeader(ctx context.Context, addr, path, header string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url(addr, path), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(forwardedHeader, p.nodeID)
	if header != "" {
		req.Header.Set(header, p.nodeID)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	p.c.apiSent.Add(int64(len(body)))
	defer resp.Body.Close()
	rb := &countingReader{r: resp.Body, n: &p.c.apiReceived}
	defer io.Copy(io.Discard, io.LimitReader(rb, 4096)) // the rest, so the connection is reused
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(rb, 1024))
		return &httpError{addr: addr, path: path, code: resp.StatusCode, msg: string(bytes.TrimSpace(b))}
	}
	return json.NewDecoder(rb).Decode(out)
}

// getJSON asks another node's API for path and decodes its JSON answer
// into out; an answer other than 200 is an *httpError.
func (p peerClient) getJSON(ctx context.Context, addr, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url(addr, path), nil)
	if err != nil {
		return err
	}
	req.Header.Set(forwardedHeader, p.nodeID)
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rb := &countingReader{r: resp.Body, n: &p.c.apiReceived}
	defer io.Copy(io.Discard, io.LimitReader(rb, 4096))
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(rb, 1024))
		return &httpError{addr: addr, path: path, code: resp.StatusCode, msg: string(bytes.TrimSpace(b))}
	}
	return json.NewDecoder(io.LimitReader(rb, 1<<20)).Decode(out)
}

// httpError is an answer other than 200 from a node's API.
type httpError struct {
	addr, path string
	code       int
	msg        string
}

func (e *httpError) Error() string {
	return fmt.Sprintf("%s%s: %d %s: %s", e.addr, e.path, e.code, http.StatusText(e.code), e.msg)
}

// refusal reports whether the receiver refused the request for good: a 4xx
// other than a missing route (the caller's server may mount the API after it
// starts), a timeout or a rate limit.
func (e *httpError) refusal() bool {
	return e.code >= 400 && e.code < 500 && e.code != http.StatusNotFound &&
		e.code != http.StatusRequestTimeout && e.code != http.StatusTooManyRequests
}

// notSent reports whether the receiver certainly did not act on the
// request: no API mounted yet, or a node starting, closed or not leading.
func (e *httpError) notSent() bool {
	return e.code == http.StatusNotFound || e.code == http.StatusServiceUnavailable
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

// Status is a node's view of its group.
type Status struct {
	NodeID   string       `json:"node_id"`
	Group    string       `json:"group,omitempty"` // a Host's group; "" for a node of Open
	State    string       `json:"state"`
	Leader   string       `json:"leader"`
	Applied  uint64       `json:"applied"`
	Counts   store.Counts `json:"counts"`
	RaftAddr string       `json:"raft_addr"`
	APIAddr  string       `json:"api_addr"`
	Traffic  Traffic      `json:"traffic"`
}

// Status returns the node's view of its group.
func (db *DB) Status() Status {
	return Status{NodeID: db.opts.NodeID, Group: db.group, State: db.raft.State().String(), Leader: db.Leader(),
		Applied: db.Store().AppliedIndex(), Counts: db.Store().Counts(), RaftAddr: db.RaftAddr(), APIAddr: db.APIAddr(),
		Traffic: db.Traffic()}
}

// readBody reads a request body of at most limit bytes. It fails with the
// status to answer: 413 for a larger body, 400 for one that cannot be read
// whole (a connection closed before the declared length, say).
func readBody(r *http.Request, limit int64) ([]byte, int, error) {
	if r.ContentLength > limit {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body too large: %d bytes (at most %d)", r.ContentLength, limit)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("body too large: more than %d bytes", limit)
	}
	return b, 0, nil
}

// decodeJSON decodes body, a request's, strictly into v: one JSON object
// with v's fields only, nothing after it.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

func (db *DB) handleStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(db.Status())
}

package crawldb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// errMoved: the leader handed its leadership over instead of removing
// itself; the removal is to be asked of the new leader.
var errMoved = errors.New("crawldb: leadership handed over")

// refusedError is a membership change the leader refuses for good (HTTP 409).
type refusedError struct{ msg string }

func (e refusedError) Error() string { return e.msg }

// Member is a voter of the group.
type Member struct {
	// ID is the node's name in the group.
	ID string `json:"id"`
	// RaftAddr is its Raft address.
	RaftAddr string `json:"raft_addr"`
	// APIAddr is its API address as recorded in the store; "" if unknown.
	APIAddr string `json:"api_addr"`
}

// Voters returns the group's voters as this node knows them, by ID.
func (db *DB) Voters() ([]Member, error) {
	cfg, err := db.configuration()
	if err != nil {
		return nil, err
	}
	var out []Member
	for _, s := range cfg.Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		api, _ := db.Store().User(memberKey(string(s.ID)))
		out = append(out, Member{ID: string(s.ID), RaftAddr: string(s.Address), APIAddr: string(api)})
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

type joinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
}

type leaveRequest struct {
	ID string `json:"id"`
}

// maxMemberBody bounds the body of a join or leave request.
const maxMemberBody = 4096

// validate reports what is wrong with a join request, or nil.
func (req joinRequest) validate() error {
	var errs []error
	if err := checkNodeID(req.ID); err != nil {
		errs = append(errs, err)
	}
	for _, a := range []struct{ name, addr string }{{"raft_addr", req.RaftAddr}, {"api_addr", req.APIAddr}} {
		if err := checkHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q %w", a.name, a.addr, err))
		}
	}
	return errors.Join(errs...)
}

// checkNodeID reports what is wrong with a node ID, or nil.
func checkNodeID(id string) error {
	if id == "" || strings.ContainsAny(id, "/ \t\n") {
		return fmt.Errorf("id %q must be non-empty without spaces or slashes", id)
	}
	return nil
}

// checkHostPort reports what is wrong with an address other nodes are to
// dial, or nil.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" || port == "0" {
		return errors.New("must be host:port")
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return errors.New("must name a host, not a wildcard")
	}
	return nil
}

// readMemberRequest reads and strictly decodes a join or leave request into
// req; on failure it has answered 400 or 413 with a message.
func (db *DB) readMemberRequest(w http.ResponseWriter, r *http.Request, what, want string, req interface{ validate() error }) bool {
	body, code, err := readBody(r, maxMemberBody)
	if err == nil {
		if err = decodeJSON(body, req); err == nil {
			err = req.validate()
		}
		if err != nil {
			code = http.StatusBadRequest
		}
	}
	if err != nil {
		db.refuse(w, r, code, fmt.Sprintf("crawldb: %s: want JSON %s: %v", what, want, err))
		return false
	}
	return true
}

func (db *DB) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req joinRequest
	if !db.readMemberRequest(w, r, "join", "{id, raft_addr, api_addr}", &req) {
		return
	}
	if db.raft.State() != raft.Leader {
		db.relay(w, r, db.apiPrefix+"/join", req)
		return
	}
	if g := db.joinGate.Load(); g != nil {
		// The node above the crawl database may need to settle before the
		// group grows (see SetJoinGate).
		ctx, cancel := db.requestContext(r)
		release, err := (*g)(ctx)
		cancel()
		if err != nil {
			http.Error(w, fmt.Sprintf("crawldb: join %s: %v", req.ID, err), http.StatusServiceUnavailable)
			return
		}
		defer release()
	}
	if err := db.addVoter(req); err != nil {
		http.Error(w, err.Error(), membershipStatus(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"leader": db.opts.NodeID})
}

// validate reports what is wrong with a leave request, or nil.
func (req leaveRequest) validate() error { return checkNodeID(req.ID) }

func (db *DB) handleLeave(w http.ResponseWriter, r *http.Request) {
	var req leaveRequest
	if !db.readMemberRequest(w, r, "leave", "{id}", &req) {
		return
	}
	if db.raft.State() != raft.Leader {
		db.relay(w, r, db.apiPrefix+"/leave", req)
		return
	}
	ctx, cancel := db.requestContext(r)
	defer cancel()
	if err := db.removeLocal(ctx, req.ID); err != nil {
		http.Error(w, err.Error(), membershipStatus(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"removed": req.ID})
}

// relay passes a membership request a follower received on to the leader
// (one hop at most) and its answer back.
func (db *DB) relay(w http.ResponseWriter, r *http.Request, path string, req any) {
	if r.Header.Get(relayedHeader) != "" {
		http.Error(w, ErrNotLeader.Error(), http.StatusServiceUnavailable)
		return
	}
	addr, err := db.leaderAPI()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	body, _ := json.Marshal(req)
	ctx, cancel := db.requestContext(r)
	defer cancel()
	var out json.RawMessage
	if err := db.postHeader(ctx, addr, path, relayedHeader, body, &out); err != nil {
		code, msg := http.StatusBadGateway, err.Error()
		var he *httpError
		if errors.As(err, &he) {
			code, msg = he.code, he.msg
		}
		http.Error(w, msg, code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(out, '\n'))
}

// membershipStatus is the HTTP status for a failed membership change:
// 409 for a refusal, 503 when another leader is to be asked, else 500
// (the change may be retried: it is idempotent).
func membershipStatus(err error) int {
	switch {
	case errors.Is(err, ErrRefused):
		return http.StatusConflict
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, ErrNoLeader),
		errors.Is(err, errNotSent), errors.Is(err, errMoved):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// SetJoinGate sets what a leader calls before it adds a joining node: gate
// returns when the group may grow (release is called once the node is
// added or refused) or an error, and the join is answered 503 so that the
// joining node tries again. nil: no gate.
func (db *DB) SetJoinGate(gate func(ctx context.Context) (release func(), err error)) {
	if gate == nil {
		db.joinGate.Store(nil)
		return
	}
	db.joinGate.Store(&gate)
}

// addVoter adds a node to the group and records its API address. It
// refuses a name that is a member at another Raft address and a Raft
// address a member with another name uses; the same name at the same
// address is a success that changes nothing (but a changed API address).
func (db *DB) addVoter(req joinRequest) error {
	db.memberMu.Lock()
	defer db.memberMu.Unlock()
	srv, member, err := db.member(req)
	if err != nil {
		return err
	}
	if member && srv.Suffrage == raft.Voter {
		return db.putMemberChanged(req.ID, req.APIAddr)
	}
	if err := db.putMember(req.ID, req.APIAddr); err != nil {
		return err
	}
	if err := db.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, db.opts.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("crawldb: join %s: add voter: %w", req.ID, err)
	}
	db.log.Info("crawldb: node joined", "id", req.ID, "raft", req.RaftAddr, "api", req.APIAddr)
	return nil
}

// putMember records (or, with api "", deletes) a node's API address; the
// node must lead.
func (db *DB) putMember(id, api string) error {
	b := store.NewBatch()
	b.PutUser(memberKey(id), []byte(api))
	if _, err := db.applyBatchLocal(b); err != nil {
		return fmt.Errorf("crawldb: member %s: %w", id, err)
	}
	return nil
}

// join asks the member at Options.Join to add this node. A refusal (4xx)
// ends it at once with ErrJoinRefused; anything else is retried.
func (db *DB) join(ctx context.Context) error {
	const attempts = 50
	body, _ := json.Marshal(joinRequest{ID: db.opts.NodeID, RaftAddr: db.RaftAddr(), APIAddr: db.APIAddr()})
	var lastErr error
	for range attempts {
		var out map[string]string
		if lastErr = db.post(ctx, db.opts.Join, db.apiPrefix+"/join", body, &out); lastErr == nil {
			return nil
		}
		var he *httpError
		if errors.As(lastErr, &he) && he.refusal() {
			return fmt.Errorf("%w by %s: %s", ErrJoinRefused, db.opts.Join, he.msg)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crawldb: join through %s: %w (last: %v)", db.opts.Join, ctx.Err(), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("crawldb: join through %s: the join target did not answer with a leader's acceptance in %d attempts: %w",
		db.opts.Join, attempts, lastErr)
}

// Leave removes this node from its group: a leader first hands its
// leadership to another voter and waits until that one leads; then the
// leader removes the node and forgets its API address. It returns once the
// leader has committed the configuration without the node (nil if the node
// is no member). The last voter cannot leave. After Leave the node takes no
// part in the group (its Raft may have shut down): Close it.
func (db *DB) Leave(ctx context.Context) error {
	if err := db.usable(); err != nil {
		return err
	}
	if db.raft.State() == raft.Shutdown {
		return nil // Raft shut down when it applied this node's removal
	}
	cfg, err := db.configuration()
	if err != nil {
		return err
	}
	self := raft.ServerID(db.opts.NodeID)
	member, others := false, 0
	for _, s := range cfg.Servers {
		if s.ID == self {
			member = true
		} else if s.Suffrage == raft.Voter {
			others++
		}
	}
	if !member {
		return nil
	}
	if others == 0 {
		return fmt.Errorf("crawldb: leave: %s is the group's last voter", self)
	}
	if err := db.RemoveNode(ctx, db.opts.NodeID); err != nil {
		return err
	}
	db.log.Info("crawldb: node left its group", "node", db.opts.NodeID)
	return nil
}

// RemoveNode removes the node id from the group (on the leader; any node
// forwards). Removing the leader makes it hand its leadership over first.
// It returns once the leader has committed the configuration without id
// and, for another node than this one, this node's configuration no longer
// has it. Removing a node that is no member succeeds.
func (db *DB) RemoveNode(ctx context.Context, id string) error {
	if err := db.usable(); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := db.removeOnce(ctx, id)
		if err == nil {
			break
		}
		var he *httpError
		var re refusedError
		if errors.As(err, &he) && he.refusal() || errors.As(err, &re) || errors.Is(err, ErrClosed) || errors.Is(err, ErrFailed) {
			return fmt.Errorf("crawldb: remove %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crawldb: remove %s: %w (last: %v)", id, ctx.Err(), err)
		case <-time.After(min(time.Duration(attempt+1)*20*time.Millisecond, 500*time.Millisecond)):
		}
	}
	if id == db.opts.NodeID {
		return nil
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		m, err := db.Members()
		if err != nil {
			return err
		}
		if _, ok := m[id]; !ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crawldb: remove %s: removed, but not yet from this node's configuration: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

// removeOnce makes one attempt at removing id: at the leader itself, or
// through the API of the leader this node knows.
func (db *DB) removeOnce(ctx context.Context, id string) error {
	if err := db.usable(); err != nil {
		return err
	}
	state := db.raft.State()
	if id == db.opts.NodeID && state == raft.Shutdown {
		return nil // Raft shuts down when it applies its own removal
	}
	if state == raft.Leader {
		return db.removeLocal(ctx, id)
	}
	addr, err := db.leaderAPI()
	if err != nil {
		return err
	}
	body, _ := json.Marshal(leaveRequest{ID: id})
	var out map[string]string
	return db.post(ctx, addr, db.apiPrefix+"/leave", body, &out)
}

// removeLocal removes id at the leader. The leader does not remove itself:
// it hands leadership over and answers errMoved, to be asked again at the
// new leader.
func (db *DB) removeLocal(ctx context.Context, id string) error {
	if id == db.opts.NodeID {
		if err := db.handOver(ctx); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s no longer leads; ask the new leader", errMoved, id)
	}
	db.memberMu.Lock()
	defer db.memberMu.Unlock()
	cfg, err := db.configuration()
	if err != nil {
		return err
	}
	if slices.ContainsFunc(cfg.Servers, func(s raft.Server) bool { return string(s.ID) == id }) {
		if err := db.raft.RemoveServer(raft.ServerID(id), 0, db.opts.ApplyTimeout).Error(); err != nil {
			return fmt.Errorf("crawldb: remove %s: %w", id, err)
		}
		db.log.Info("crawldb: node removed", "id", id)
	}
	if v, err := db.Store().User(memberKey(id)); err != nil || len(v) > 0 {
		return db.putMember(id, "")
	}
	return nil
}

// handOver transfers this leader's leadership and waits until another node
// leads.
func (db *DB) handOver(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, db.opts.ApplyTimeout)
	defer cancel()
	if db.raft.State() == raft.Leader {
		if err := db.raft.LeadershipTransfer().Error(); err != nil {
			return fmt.Errorf("crawldb: leadership transfer: %w", err)
		}
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if _, id := db.raft.LeaderWithID(); id != "" && string(id) != db.opts.NodeID {
			return nil
		}
		if db.raft.State() == raft.Leader {
			return fmt.Errorf("crawldb: leadership transfer: %s leads again", db.opts.NodeID)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crawldb: leadership transfer: %w: %w", ErrNoLeader, ctx.Err())
		case <-t.C:
		}
	}
}

// TransferLeadership hands this node's leadership to another voter and
// waits until one leads (a node about to stop does, so the group does not
// wait out an election timeout). On a follower it does nothing.
func (db *DB) TransferLeadership(ctx context.Context) error {
	if db.raft.State() != raft.Leader {
		return nil
	}
	return db.handOver(ctx)
}

// ErrRefused: a membership change the group's leader refuses for good (a
// node name or Raft address taken, a transfer to a node that is no voter);
// retrying will not help.
var ErrRefused = errors.New("crawldb: membership change refused")

// Is makes a refusal match ErrRefused.
func (e refusedError) Is(target error) bool { return target == ErrRefused }

// AddVoter adds the node nodeID, whose Raft listener is raftAddr and whose
// API is apiAddr, to the group as a voter, and records its API address in
// the group (as a join does). It must run on the leader (elsewhere the error
// wraps ErrNotLeader). Adding a voter that is already one at raftAddr
// changes nothing but a changed API address; a name that is a voter at
// another address, or an address another voter uses, is refused (the error
// wraps ErrRefused). The new voter catches up by snapshot and log: its node
// must have the group open (Host.Group without Bootstrap).
//
// The node joins as a learner first (a non-voter: the group's quorum does
// not count it) and is promoted to voter only once its replica has caught
// up, its API reporting an applied index at least the leader's when it was
// added. Adding a voter at once would make a group of one need two for a
// quorum while the new replica is still receiving its snapshot; a starved
// leader then loses its lease and the group elects again (bench cluster,
// R = 3 from one node). A node that has not caught up within ctx stays a
// learner; AddVoter called again waits for it again.
func (db *DB) AddVoter(ctx context.Context, nodeID, raftAddr, apiAddr string) error {
	if err := db.usable(); err != nil {
		return err
	}
	req := joinRequest{ID: nodeID, RaftAddr: raftAddr, APIAddr: apiAddr}
	if err := req.validate(); err != nil {
		return fmt.Errorf("crawldb: add voter to group %s: %w: %w", db.groupName(), ErrRefused, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("crawldb: add voter %s: %w", nodeID, err)
	}
	if db.raft.State() != raft.Leader {
		return fmt.Errorf("crawldb: add voter %s to group %s: %w", nodeID, db.groupName(), ErrNotLeader)
	}
	if err := db.awaitOpen(ctx, req); err != nil {
		return err
	}
	learner, err := db.addLearner(req)
	if err != nil {
		return leaderError(err)
	}
	if !learner {
		return nil
	}
	if err := db.awaitCatchUp(ctx, req); err != nil {
		return err
	}
	return leaderError(db.promote(req))
}

// addLearner adds the node of req to the group as a non-voter (with its
// API address) unless it is one already; it reports whether the node is a
// learner to promote (false: it is a voter at that address already, its
// API address recorded). A name at another address or an address of
// another name is refused, as for a join.
func (db *DB) addLearner(req joinRequest) (bool, error) {
	db.memberMu.Lock()
	defer db.memberMu.Unlock()
	srv, member, err := db.member(req)
	if err != nil {
		return false, err
	}
	if member && srv.Suffrage == raft.Voter {
		return false, db.putMemberChanged(req.ID, req.APIAddr)
	}
	if err := db.putMemberChanged(req.ID, req.APIAddr); err != nil {
		return false, err
	}
	if !member {
		if err := db.raft.AddNonvoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, db.opts.ApplyTimeout).Error(); err != nil {
			return false, fmt.Errorf("crawldb: add %s to group %s as learner: %w", req.ID, db.groupName(), err)
		}
		db.log.Info("crawldb: learner added", "group", db.group, "id", req.ID, "raft", req.RaftAddr)
	}
	return true, nil
}

// awaitOpen waits until the node of req serves this group (its API
// answers the group's status), unless it is a member already: Raft's
// replication to a node that refuses the group's connections backs off
// for seconds at a time, so a learner added before its node has opened
// the group would wait that long for its first entries.
func (db *DB) awaitOpen(ctx context.Context, req joinRequest) error {
	if m, err := db.Members(); err == nil {
		if _, ok := m[req.ID]; ok {
			return nil
		}
	}
	t := time.NewTicker(catchUpPoll)
	defer t.Stop()
	for {
		var st Status
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := db.peer().getJSON(cctx, req.APIAddr, db.apiPrefix+"/status", &st)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crawldb: add voter %s to group %s: its node does not serve the group (open it there first): %w (last: %v)", req.ID, db.groupName(), ctx.Err(), err)
		case <-t.C:
		}
	}
}

// awaitCatchUp waits until the replica of req's node reports (its API's
// status of this group) an applied index at least this leader's now, or
// ctx ends.
func (db *DB) awaitCatchUp(ctx context.Context, req joinRequest) error {
	target := db.Store().AppliedIndex()
	t := time.NewTicker(catchUpPoll)
	defer t.Stop()
	var last Status
	var lastErr error
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		lastErr = db.peer().getJSON(cctx, req.APIAddr, db.apiPrefix+"/status", &last)
		cancel()
		if lastErr == nil && last.Applied >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("crawldb: add voter %s to group %s: its replica has not reported catching up (index %d): %w (last: %v)", req.ID, db.groupName(), target, ctx.Err(), lastErr)
			}
			return fmt.Errorf("crawldb: add voter %s to group %s: its replica is at index %d of %d: %w", req.ID, db.groupName(), last.Applied, target, ctx.Err())
		case <-t.C:
		}
	}
}

// catchUpPoll is how often awaitCatchUp asks a learner how far it is.
const catchUpPoll = 100 * time.Millisecond

// promote makes the learner of req a voter, if it is still a learner at
// req's address (a voter already: nothing to do).
func (db *DB) promote(req joinRequest) error {
	db.memberMu.Lock()
	defer db.memberMu.Unlock()
	srv, member, err := db.member(req)
	if err != nil {
		return err
	}
	if !member {
		return fmt.Errorf("crawldb: promote %s in group %s: it is no longer a member (removed while catching up)", req.ID, db.groupName())
	}
	if srv.Suffrage == raft.Voter {
		return nil
	}
	if err := db.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, db.opts.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("crawldb: promote %s in group %s: %w", req.ID, db.groupName(), err)
	}
	db.log.Info("crawldb: learner promoted", "group", db.group, "id", req.ID)
	return nil
}

// member returns req's node as the group's latest configuration has it at
// req's address (false: not a member); a name at another address or an
// address of another name is refused.
func (db *DB) member(req joinRequest) (raft.Server, bool, error) {
	cfg, err := db.configuration()
	if err != nil {
		return raft.Server{}, false, err
	}
	for _, s := range cfg.Servers {
		id, addr := string(s.ID), string(s.Address)
		switch {
		case id == req.ID && addr == req.RaftAddr:
			return s, true, nil
		case id == req.ID:
			return s, false, refusedError{fmt.Sprintf("crawldb: join: node name %s is already a member at %s; pick another name", req.ID, addr)}
		case addr == req.RaftAddr:
			return s, false, refusedError{fmt.Sprintf("crawldb: join: raft address %s is already used by member %s; remove %s first or use another address", addr, id, id)}
		}
	}
	return raft.Server{}, false, nil
}

// putMemberChanged records a node's API address unless it is recorded
// already.
func (db *DB) putMemberChanged(id, api string) error {
	if v, err := db.Store().User(memberKey(id)); err == nil && string(v) == api {
		return nil
	}
	return db.putMember(id, api)
}

// RemoveVoter removes the node nodeID from the group and forgets its API
// address. It must run on the leader (elsewhere the error wraps
// ErrNotLeader). Removing a node that is no voter succeeds. Removing the
// leader itself hands its leadership to another voter first and returns an
// error wrapping ErrNotLeader: ask the new leader again.
func (db *DB) RemoveVoter(ctx context.Context, nodeID string) error {
	if err := db.usable(); err != nil {
		return err
	}
	if err := checkNodeID(nodeID); err != nil {
		return fmt.Errorf("crawldb: remove voter from group %s: %w: %w", db.groupName(), ErrRefused, err)
	}
	if db.raft.State() != raft.Leader {
		return fmt.Errorf("crawldb: remove voter %s from group %s: %w", nodeID, db.groupName(), ErrNotLeader)
	}
	if err := db.removeLocal(ctx, nodeID); err != nil {
		return leaderError(err)
	}
	return nil
}

// TransferLeadershipTo hands this leader's leadership to the voter nodeID
// (hashicorp/raft's LeadershipTransferToServer) and waits until that node
// leads, as this node sees it, or ctx ends. It must run on the leader
// (elsewhere the error wraps ErrNotLeader); a transfer to the leader itself
// does nothing; one to a node that is no voter is refused (ErrRefused).
// (TransferLeadership, without a target, is what a node about to stop
// calls.)
func (db *DB) TransferLeadershipTo(ctx context.Context, nodeID string) error {
	if err := db.usable(); err != nil {
		return err
	}
	if db.raft.State() != raft.Leader {
		return fmt.Errorf("crawldb: transfer leadership of group %s to %s: %w", db.groupName(), nodeID, ErrNotLeader)
	}
	if nodeID == db.opts.NodeID {
		return nil
	}
	cfg, err := db.configuration()
	if err != nil {
		return err
	}
	i := slices.IndexFunc(cfg.Servers, func(s raft.Server) bool { return string(s.ID) == nodeID && s.Suffrage == raft.Voter })
	if i < 0 {
		return refusedError{fmt.Sprintf("crawldb: transfer leadership of group %s: %q is not a voter of the group", db.groupName(), nodeID)}
	}
	if err := db.raft.LeadershipTransferToServer(cfg.Servers[i].ID, cfg.Servers[i].Address).Error(); err != nil {
		err = fmt.Errorf("crawldb: transfer leadership of group %s to %s: %w", db.groupName(), nodeID, err)
		if verr := db.settleTransfer(ctx); verr != nil {
			if ctx.Err() != nil {
				return errors.Join(err, verr)
			}
			return fmt.Errorf("%w: %w", ErrNotLeader, errors.Join(err, verr))
		}
		return leaderError(err)
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if _, id := db.raft.LeaderWithID(); string(id) == nodeID {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crawldb: transfer leadership of group %s to %s: transferred, but %s does not lead yet here: %w", db.groupName(), nodeID, nodeID, ctx.Err())
		case <-t.C:
		}
	}
}

// settleTransfer runs after a leadership transfer that failed (timed
// out): the target was told to stand (TimeoutNow) and may still win its
// election after this leader gave up, while this node, believing it
// leads, would let its callers go on (a shard's fetcher resumed while the
// target took over: pages fetched by both). It waits an election timeout
// for such a late election to reach the group, then asks a quorum whether
// this node still leads (Raft's VerifyLeader: a leader displaced meanwhile
// learns the newer term and steps down). A nil error: it still leads.
func (db *DB) settleTransfer(ctx context.Context) error {
	t := time.NewTimer(electionTimeout(db.opts))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("crawldb: settle after a failed transfer: %w", ctx.Err())
	case <-t.C:
	}
	if err := db.raft.VerifyLeader().Error(); err != nil {
		return fmt.Errorf("crawldb: leadership of group %s after a failed transfer: %w", db.groupName(), err)
	}
	return nil
}

// leaderError makes an error of a change that this node could not make
// because it does not lead (any longer) wrap ErrNotLeader.
func leaderError(err error) error {
	if !errors.Is(err, ErrNotLeader) && membershipStatus(err) == http.StatusServiceUnavailable {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return err
}

// groupName names the group in messages.
func (db *DB) groupName() string {
	if db.group == "" {
		return "(the node's only group)"
	}
	return db.group
}

// transferRequest asks for a leadership transfer to the node ID.
type transferRequest struct {
	ID string `json:"id"`
}

func (req transferRequest) validate() error { return checkNodeID(req.ID) }

// handleAddVoter serves POST <prefix>/voters/add {id, raft_addr, api_addr}:
// AddVoter at the leader (a follower relays it there once).
func (db *DB) handleAddVoter(w http.ResponseWriter, r *http.Request) {
	var req joinRequest
	if !db.readMemberRequest(w, r, "add voter to group "+db.groupName(), "{id, raft_addr, api_addr}", &req) {
		return
	}
	db.serveChange(w, r, "/voters/add", req, func(ctx context.Context) error {
		return db.AddVoter(ctx, req.ID, req.RaftAddr, req.APIAddr)
	})
}

// handleRemoveVoter serves POST <prefix>/voters/remove {id}.
func (db *DB) handleRemoveVoter(w http.ResponseWriter, r *http.Request) {
	var req leaveRequest
	if !db.readMemberRequest(w, r, "remove voter from group "+db.groupName(), "{id}", &req) {
		return
	}
	db.serveChange(w, r, "/voters/remove", req, func(ctx context.Context) error { return db.RemoveVoter(ctx, req.ID) })
}

// handleTransfer serves POST <prefix>/leadership {id}.
func (db *DB) handleTransfer(w http.ResponseWriter, r *http.Request) {
	var req transferRequest
	if !db.readMemberRequest(w, r, "transfer leadership of group "+db.groupName(), "{id}", &req) {
		return
	}
	db.serveChange(w, r, "/leadership", req, func(ctx context.Context) error { return db.TransferLeadershipTo(ctx, req.ID) })
}

// serveChange makes a membership change at the leader, or relays req to
// it (path under the API prefix), and answers {"leader": ID} or the error:
// 409 refused, 503 ask again (not the leader, no leader, a handed-over
// leadership), 500 otherwise.
func (db *DB) serveChange(w http.ResponseWriter, r *http.Request, path string, req any, change func(context.Context) error) {
	if db.raft.State() != raft.Leader {
		db.relay(w, r, db.apiPrefix+path, req)
		return
	}
	ctx, cancel := db.requestContext(r)
	defer cancel()
	if err := change(ctx); err != nil {
		code := membershipStatus(err)
		if errors.Is(err, ErrNotLeader) {
			code = http.StatusServiceUnavailable
		}
		http.Error(w, err.Error(), code)
		return
	}
	_, leader := db.raft.LeaderWithID()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"leader": string(leader)})
}

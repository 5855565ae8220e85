package crawldb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hasMemberKey(db *DB, id string) bool {
	v, _ := db.Store().User(memberKey(id))
	return len(v) > 0
}

// openGroup opens n nodes n1…nN: n1 bootstraps, each other joins through
// the node before it. They are closed when the test ends.
func openGroup(t *testing.T, n int) []*DB {
	t.Helper()
	root := t.TempDir()
	var nodes []*DB
	for i := 1; i <= n; i++ {
		id, join := fmt.Sprintf("n%d", i), ""
		if i > 1 {
			join = nodes[i-2].APIAddr()
		}
		db := openNode(t, filepath.Join(root, id), id, join)
		t.Cleanup(func() { db.Close() })
		nodes = append(nodes, db)
		if i == 1 {
			waitFor(t, "n1 to announce its API address", func() bool { return hasMemberKey(db, "n1") })
		}
	}
	return nodes
}

func leaderOf(t *testing.T, nodes []*DB) *DB {
	t.Helper()
	var l *DB
	waitFor(t, "a leader", func() bool {
		for _, n := range nodes {
			if n.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func ids(nodes []*DB) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.opts.NodeID)
	}
	slices.Sort(out)
	return out
}

func voterIDs(t *testing.T, db *DB) []string {
	t.Helper()
	vs, err := db.Voters()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vs {
		out = append(out, v.ID)
	}
	return out
}

func httpDo(t *testing.T, method, url string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMountedAPI runs nodes whose API the caller serves: one mounts a
// Handler before Open, one mounts APIHandler after Open, and a third with
// its own listener joins through the second.
func TestMountedAPI(t *testing.T) {
	root := t.TempDir()
	h1 := NewHandler()
	mux1 := http.NewServeMux()
	mux1.Handle("/crawldb/", h1)
	srv1 := httptest.NewServer(mux1)
	defer srv1.Close()
	mux2 := http.NewServeMux()
	srv2 := httptest.NewServer(mux2)
	defer srv2.Close()
	addr1, addr2 := srv1.Listener.Addr().String(), srv2.Listener.Addr().String()

	if code, body := httpDo(t, "GET", srv1.URL+"/crawldb/status", nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "crawldb: starting") {
		t.Fatalf("before Open: %d %s", code, body)
	}
	o := testOptions(t, filepath.Join(root, "n1"), "n1", "")
	o.APIAddr, o.AdvertiseAPI, o.Handler = "", addr1, h1
	n1 := openWith(t, o)
	defer n1.Close()
	if n1.APIAddr() != addr1 || n1.APIHandler() != http.Handler(h1) {
		t.Fatalf("APIAddr %q, handler %p; want %q, %p", n1.APIAddr(), n1.APIHandler(), addr1, h1)
	}
	waitFor(t, "n1 to announce its API address", func() bool { return hasMemberKey(n1, "n1") })

	o = testOptions(t, filepath.Join(root, "n2"), "n2", addr1)
	o.APIAddr, o.AdvertiseAPI = "", addr2
	n2 := openWith(t, o)
	defer n2.Close()
	mux2.Handle("/crawldb/", n2.APIHandler())

	n3 := openNode(t, filepath.Join(root, "n3"), "n3", addr2) // relayed by n2 to n1
	defer n3.Close()

	mustApply(t, n1, upserts(0, 10, 1))
	mustApply(t, n2, upserts(10, 10, 1)) // forwarded to n1 through srv1
	res := mustApply(t, n3, upserts(20, 10, 1))
	want := []Member{{"n1", n1.RaftAddr(), addr1}, {"n2", n2.RaftAddr(), addr2}, {"n3", n3.RaftAddr(), n3.APIAddr()}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n3.WaitApplied(ctx, res.Index); err != nil {
		t.Fatal(err)
	}
	if vs, _ := n3.Voters(); !slices.Equal(vs, want) {
		t.Fatalf("voters %v, want %v", vs, want)
	}
	code, body := httpDo(t, "GET", srv2.URL+"/crawldb/status", nil)
	var st Status
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.NodeID != "n2" || st.APIAddr != addr2 {
		t.Fatalf("status through the mounted handler: %d %s", code, body)
	}

	n2.Close()
	if code, body := httpDo(t, "GET", srv2.URL+"/crawldb/status", nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "crawldb: closed") {
		t.Fatalf("after Close: %d %s", code, body)
	}
}

// TestJoinRefused: a join that takes a member's name or Raft address is
// refused at once with a message naming the problem, and the group stays
// as it was; the same join again is a success that changes nothing.
func TestJoinRefused(t *testing.T) {
	nodes := openGroup(t, 2)
	n1, n2 := nodes[0], nodes[1]
	before, _ := n1.Members()
	n2API, _ := n1.Store().User(memberKey("n2"))

	for _, tc := range []struct {
		name, id, join string
		transport      raft.Transport // nil: TCP on a new port
		want           string
	}{
		{name: "name taken", id: "n2", join: n1.APIAddr(),
			want: fmt.Sprintf("node name n2 is already a member at %s; pick another name", n2.RaftAddr())},
		{name: "name taken, through a follower", id: "n2", join: n2.APIAddr(),
			want: fmt.Sprintf("node name n2 is already a member at %s; pick another name", n2.RaftAddr())},
		{name: "raft address taken", id: "n9", join: n1.APIAddr(), transport: newInmem(n2.RaftAddr()),
			want: fmt.Sprintf("raft address %s is already used by member n2", n2.RaftAddr())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t, t.TempDir(), tc.id, tc.join)
			o.Transport = tc.transport
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			db, err := Open(ctx, o)
			if err == nil {
				db.Close()
				t.Fatal("join accepted")
			}
			if !errors.Is(err, ErrJoinRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v; want ErrJoinRefused with %q", err, tc.want)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("refusal took %v: retried?", d)
			}
			for _, n := range nodes {
				if m, _ := n.Members(); !maps.Equal(m, before) {
					t.Errorf("%s: members %v, want %v", n.opts.NodeID, m, before)
				}
			}
			if v, _ := n1.Store().User(memberKey(tc.id)); tc.id == "n2" && !bytes.Equal(v, n2API) || tc.id != "n2" && len(v) != 0 {
				t.Errorf("member key of %s is %q", tc.id, v)
			}
		})
	}

	t.Run("same join again", func(t *testing.T) {
		body, _ := json.Marshal(joinRequest{ID: "n2", RaftAddr: n2.RaftAddr(), APIAddr: n2.APIAddr()})
		index := n1.Store().AppliedIndex()
		if code, resp := httpDo(t, "POST", "http://"+n1.APIAddr()+"/crawldb/join", body); code != 200 {
			t.Fatalf("rejoin: %d %s", code, resp)
		}
		if m, _ := n1.Members(); !maps.Equal(m, before) {
			t.Errorf("members %v, want %v", m, before)
		}
		if got := n1.Store().AppliedIndex(); got != index {
			t.Errorf("rejoin wrote to the log: applied %d → %d", index, got)
		}
	})

	t.Run("target without crawldb", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler()) // a server that has not mounted the API (yet)
		defer srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		db, err := Open(ctx, testOptions(t, t.TempDir(), "n5", srv.Listener.Addr().String()))
		if err == nil {
			db.Close()
			t.Fatal("join accepted")
		}
		if errors.Is(err, ErrJoinRefused) || !strings.Contains(err.Error(), "404") {
			t.Fatalf("Open: %v; want a retried 404", err)
		}
	})
}

func newInmem(addr string) raft.Transport {
	_, tr := raft.NewInmemTransport(raft.ServerAddress(addr))
	return tr
}

// TestLeave removes one node of three in each way: a follower or the leader
// leaving, or removed through another node. The two others keep a leader and
// take writes.
func TestLeave(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leader bool // whether the node to go leads
		by     int  // -1: it leaves itself; else the index (among the others) of the node that removes it
	}{
		{"follower leaves", false, -1},
		{"leader leaves", true, -1},
		{"follower removed by a follower", false, 1},
		{"leader removed by a follower", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := openGroup(t, 3)
			leader := leaderOf(t, nodes)
			var gone *DB
			var rest []*DB
			for _, n := range nodes {
				if gone == nil && (n == leader) == tc.leader {
					gone = n
				} else {
					rest = append(rest, n)
				}
			}
			slices.SortFunc(rest, func(a, b *DB) int { return boolInt(b.IsLeader()) - boolInt(a.IsLeader()) }) // leader first
			changes, cancelChanges := gone.LeadershipChanges()
			defer cancelChanges()
			if v := <-changes; v != tc.leader {
				t.Fatalf("first leadership value %v, want %v", v, tc.leader)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var err error
			if tc.by < 0 {
				err = gone.Leave(ctx)
			} else {
				err = rest[tc.by].RemoveNode(ctx, gone.opts.NodeID)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.leader {
				select {
				case v := <-changes:
					if v {
						t.Fatal("leadership change: true, want false")
					}
				case <-time.After(5 * time.Second):
					t.Fatal("no leadership change on the old leader")
				}
			}
			want := ids(rest)
			for _, n := range rest {
				waitFor(t, n.opts.NodeID+" to drop "+gone.opts.NodeID, func() bool { return slices.Equal(voterIDs(t, n), want) })
			}
			newLeader := leaderOf(t, rest)
			waitFor(t, "the member key to go", func() bool { return !hasMemberKey(newLeader, gone.opts.NodeID) })
			for _, n := range rest {
				mustApply(t, n, upserts(0, 10, 1))
			}
			if l := rest[0].Leader(); l == gone.opts.NodeID || l == "" {
				t.Fatalf("leader %q after %s went", l, gone.opts.NodeID)
			}
			if err := gone.Leave(ctx); err != nil { // no member: nothing to do
				t.Fatalf("second Leave: %v", err)
			}
			gone.Close()
			for v := range changes { // ends when Close closes it
				if v {
					t.Fatalf("%s leads again", gone.opts.NodeID)
				}
			}
			mustApply(t, rest[1], upserts(10, 10, 1))
		})
	}

	t.Run("last voter", func(t *testing.T) {
		db := openNode(t, t.TempDir(), "n1", "")
		defer db.Close()
		if err := db.Leave(context.Background()); err == nil || !strings.Contains(err.Error(), "last voter") {
			t.Fatalf("Leave of the last voter: %v", err)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestGroupHelpers checks Voters, LeaderAPI, Term, Barrier, LeadershipChanges
// and the traffic counters on three nodes.
func TestGroupHelpers(t *testing.T) {
	nodes := openGroup(t, 3)
	leader := leaderOf(t, nodes)
	for i := range 5 {
		for _, n := range nodes {
			mustApply(t, n, upserts(i*100, 20, 1)) // two of three forwarded
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := leader.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	var want []Member
	for _, n := range nodes {
		want = append(want, Member{n.opts.NodeID, n.RaftAddr(), n.APIAddr()})
	}
	index := leader.Store().AppliedIndex()
	for _, n := range nodes {
		if err := n.WaitApplied(ctx, index); err != nil {
			t.Fatal(err)
		}
		if vs, err := n.Voters(); err != nil || !slices.Equal(vs, want) {
			t.Errorf("%s: voters %v, %v; want %v", n.opts.NodeID, vs, err, want)
		}
		if a, err := n.LeaderAPI(); err != nil || a != leader.APIAddr() {
			t.Errorf("%s: LeaderAPI %q, %v; want %q", n.opts.NodeID, a, err, leader.APIAddr())
		}
		if n.Term() == 0 || n.Term() != leader.Term() {
			t.Errorf("%s: term %d, leader's %d", n.opts.NodeID, n.Term(), leader.Term())
		}
		ch, cancel := n.LeadershipChanges()
		if v := <-ch; v != (n == leader) {
			t.Errorf("%s: leadership %v", n.opts.NodeID, v)
		}
		cancel()
		cancel()
		if _, ok := <-ch; ok {
			t.Errorf("%s: subscription open after cancel", n.opts.NodeID)
		}
		if n == leader {
			continue
		}
		if err := n.Barrier(ctx); !errors.Is(err, ErrNotLeader) {
			t.Errorf("%s: Barrier on a follower: %v", n.opts.NodeID, err)
		}
	}

	// Traffic: every node sent and received on both channels, and what the
	// group sent is what it received (but bytes in flight).
	var sum Traffic
	for _, n := range nodes {
		tr := n.Traffic()
		if tr.RaftSent == 0 || tr.RaftReceived == 0 || tr.APISent == 0 || tr.APIReceived == 0 {
			t.Errorf("%s: traffic %+v", n.opts.NodeID, tr)
		}
		if st := n.Status(); st.Traffic.RaftSent < tr.RaftSent {
			t.Errorf("%s: status traffic %+v, before %+v", n.opts.NodeID, st.Traffic, tr)
		}
		sum.RaftSent += tr.RaftSent
		sum.RaftReceived += tr.RaftReceived
		sum.APISent += tr.APISent
		sum.APIReceived += tr.APIReceived
	}
	t.Logf("group traffic %+v", sum)
	near := func(a, b int64) bool { d := max(a-b, b-a); return d <= max(a, b)/20+512 }
	if !near(sum.RaftSent, sum.RaftReceived) {
		t.Errorf("raft: sent %d, received %d", sum.RaftSent, sum.RaftReceived)
	}
	if !near(sum.APISent, sum.APIReceived) {
		t.Errorf("api: sent %d, received %d", sum.APISent, sum.APIReceived)
	}
	// The followers' requests (forwarded writes, joins) are what the leader
	// received, but n3's join, which n2 relayed.
	var fwd int64
	for _, n := range nodes {
		if n != leader {
			fwd += n.Traffic().APISent
		}
	}
	if got := leader.Traffic().APIReceived; !near(fwd, got) {
		t.Errorf("followers sent %d API bytes, the leader received %d", fwd, got)
	}
}

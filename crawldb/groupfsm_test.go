package crawldb

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// groupNode is one node's replica of a Raft group whose store is a group
// of the node's store.Shared, next to another group's data.
type groupNode struct {
	id     string
	dir    string
	sh     *store.Shared
	st     *store.Store
	fsm    *fsm
	raft   *raft.Raft
	trans  *raft.InmemTransport
	logs   *raft.InmemStore // kept across a restart, as a disk log would be
	snaps  raft.SnapshotStore
	closed bool
}

const fsmTestGroup = "s-03"

func startGroupNode(t *testing.T, n *groupNode) {
	t.Helper()
	var err error
	if n.sh == nil {
		if n.sh, err = store.OpenShared(filepath.Join(n.dir, "db"), store.Options{CacheBytes: 8 << 20, MemTableBytes: 4 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	if n.st, err = n.sh.Store(fsmTestGroup); err != nil {
		t.Fatal(err)
	}
	db := &DB{log: slog.New(slog.DiscardHandler), opts: Options{NodeID: n.id}}
	n.fsm = newGroupFSM(db, n.st)
	cfg := raft.DefaultConfig()
	cfg.LocalID = raft.ServerID(n.id)
	cfg.HeartbeatTimeout = 500 * time.Millisecond
	cfg.ElectionTimeout = 500 * time.Millisecond
	cfg.LeaderLeaseTimeout = 250 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.SnapshotThreshold = 1 << 30 // snapshots are taken by the test only
	cfg.SnapshotInterval = time.Hour
	cfg.TrailingLogs = 4
	cfg.Logger = hclog.NewNullLogger()
	if n.raft, err = raft.NewRaft(cfg, n.fsm, n.logs, n.logs, n.snaps, n.trans); err != nil {
		t.Fatal(err)
	}
	db.raft = n.raft
	n.closed = false
}

func stopGroupNode(t *testing.T, n *groupNode) {
	t.Helper()
	if n.closed {
		return
	}
	n.closed = true
	if err := n.raft.Shutdown().Error(); err != nil {
		t.Error(err)
	}
	if err := n.fsm.close(); err != nil {
		t.Error(err)
	}
	if err := n.sh.Close(); err != nil {
		t.Error(err)
	}
	n.sh = nil
}

func groupBytes(t *testing.T, st *store.Store) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := st.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGroupFSMSnapshotRestore: three replicas of a group over real Raft,
// each in a Shared that holds another group too. The third replica is cut
// off while the leader applies commands, snapshots and compacts its log; on
// reconnection it catches up by InstallSnapshot (newGroupFSM's Restore) and
// the log after it, ends equal to the leader, and its neighbour group is
// untouched. Restarted, it restores the same snapshot again (skipped: it
// holds it) and is still equal.
func TestGroupFSMSnapshotRestore(t *testing.T) {
	nodes := make([]*groupNode, 3)
	var servers []raft.Server
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		_, tr := raft.NewInmemTransport(raft.ServerAddress(id))
		snaps, err := raft.NewFileSnapshotStoreWithLogger(t.TempDir(), 2, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = &groupNode{id: id, dir: t.TempDir(), trans: tr, logs: raft.NewInmemStore(), snaps: snaps}
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id)})
	}
	// n1 and n2 see each other; n3 is cut off.
	nodes[0].trans.Connect(nodes[1].trans.LocalAddr(), nodes[1].trans)
	nodes[1].trans.Connect(nodes[0].trans.LocalAddr(), nodes[0].trans)
	for _, n := range nodes {
		bc := raft.DefaultConfig()
		bc.LocalID = raft.ServerID(n.id)
		if err := raft.BootstrapCluster(bc, n.logs, n.logs, n.snaps, n.trans, raft.Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		startGroupNode(t, n)
		defer stopGroupNode(t, n)
	}
	// n3's Shared holds another group, which must come through untouched.
	other, err := nodes[2].sh.Store("s-04")
	if err != nil {
		t.Fatal(err)
	}
	ob := store.NewBatch()
	ob.UpsertCash("http://other.test/", 1, 0)
	ob.PutUser("k", []byte("other"))
	cmd, err := ob.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Apply(7, cmd); err != nil {
		t.Fatal(err)
	}
	otherBefore := groupBytes(t, other)

	// leaderOf waits for a leader among the running nodes.
	leaderOf := func() *groupNode {
		t.Helper()
		var leader *groupNode
		waitFor(t, "a leader", func() bool {
			for _, n := range nodes {
				if !n.closed && n.raft.State() == raft.Leader {
					leader = n
					return true
				}
			}
			return false
		})
		return leader
	}
	// apply applies commands from..to-1 through the leader, trying a
	// command again (at most 5 times) when leadership moves under it.
	apply := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			b := store.NewBatch()
			for j := range 5 {
				b.UpsertCash(fmt.Sprintf("http://h%d.test/p/%d", j, i), 1, 1)
			}
			b.PutUser(fmt.Sprint("u", i%7), []byte(fmt.Sprint(i)))
			cmd, err := b.Encode()
			if err != nil {
				t.Fatal(err)
			}
			for try := 1; ; try++ {
				f := leaderOf().raft.Apply(cmd, 5*time.Second)
				err := f.Error()
				if err == nil {
					if res, ok := f.Response().(*store.Result); !ok || res.Err != nil {
						t.Fatalf("command %d: %+v", i, f.Response())
					}
					break
				}
				if try == 5 {
					t.Fatalf("command %d: %v", i, err)
				}
			}
		}
	}
	apply(0, 60)
	leader := leaderOf()
	if err := leader.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	apply(60, 70) // after the snapshot: n3 gets these from the log
	if first, _ := leader.logs.FirstIndex(); first <= 2 {
		t.Fatalf("the leader's log starts at %d: not compacted, n3 would not need the snapshot", first)
	}
	// Reconnect n3.
	for _, n := range nodes[:2] {
		n.trans.Connect(nodes[2].trans.LocalAddr(), nodes[2].trans)
		nodes[2].trans.Connect(n.trans.LocalAddr(), n.trans)
	}
	leader = leaderOf()
	want := leader.st.AppliedIndex()
	waitFor(t, "n3 to catch up", func() bool { return nodes[2].st.AppliedIndex() >= want })
	if got, _ := nodes[2].snaps.List(); len(got) == 0 {
		t.Fatal("n3 caught up without installing a snapshot")
	}
	if !bytes.Equal(groupBytes(t, nodes[2].st), groupBytes(t, leader.st)) {
		t.Fatal("n3's group differs from the leader's after catching up")
	}
	if !bytes.Equal(groupBytes(t, other), otherBefore) {
		t.Fatal("installing the snapshot changed another group of n3's Shared")
	}
	if c := nodes[2].st.Counts(); c.URLs != 70*5 {
		t.Fatalf("n3 holds %d URLs, want %d", c.URLs, 70*5)
	}

	// Restart n3: Raft restores its latest snapshot, which the group holds.
	stopGroupNode(t, nodes[2])
	startGroupNode(t, nodes[2])
	waitFor(t, "n3 to apply again", func() bool { return nodes[2].st.AppliedIndex() >= want })
	apply(70, 72)
	leader = leaderOf()
	want = leader.st.AppliedIndex()
	waitFor(t, "n3 to apply the new commands", func() bool { return nodes[2].st.AppliedIndex() >= want })
	if !bytes.Equal(groupBytes(t, nodes[2].st), groupBytes(t, leader.st)) {
		t.Fatal("n3's group differs from the leader's after a restart")
	}
	other, err = nodes[2].sh.Store("s-04")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(groupBytes(t, other), otherBefore) {
		t.Fatal("the restart changed another group of n3's Shared")
	}
}

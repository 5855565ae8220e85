package crawldb

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestHurryTurn: the voters other than the gone leader get distinct turns
// from 0; a node that does not vote (or is the gone leader) gets none; and
// which voter goes first differs between groups.
func TestHurryTurn(t *testing.T) {
	c := raft.Configuration{Servers: []raft.Server{
		{ID: "n1", Suffrage: raft.Voter}, {ID: "n2", Suffrage: raft.Voter},
		{ID: "n3", Suffrage: raft.Voter}, {ID: "n4", Suffrage: raft.Nonvoter},
	}}
	first := map[raft.ServerID]int{}
	for g := range 32 {
		group := fmt.Sprintf("s%d", g)
		seen := map[int]bool{}
		for _, self := range []raft.ServerID{"n2", "n3"} {
			turn, ok := hurryTurn(c, self, "n1", group)
			if !ok || turn < 0 || turn > 1 || seen[turn] {
				t.Fatalf("group %s: %s's turn %d, %v (seen %v); want a distinct turn in {0, 1}", group, self, turn, ok, seen)
			}
			seen[turn] = true
			if turn == 0 {
				first[self]++
			}
		}
		for _, self := range []raft.ServerID{"n1", "n4", "n9"} {
			if turn, ok := hurryTurn(c, self, "n1", group); ok {
				t.Errorf("group %s: %s (gone, non-voter or absent) got turn %d", group, self, turn)
			}
		}
	}
	if first["n2"] == 0 || first["n3"] == 0 {
		t.Errorf("first turns over 32 groups %v: want both survivors first in some", first)
	}
}

// TestLeaderGoneHurriesElection: when the node leading a group dies (its
// Raft port closed, then its connections), the survivors, whose own Raft
// timeouts are made 10 s here, elect a leader without waiting for them
// (they hurry: Hurried counts it), and put Raft's timeouts back once they
// have a leader. A connection that ends while the leader lives hurries
// nothing, and the port probe it causes is not logged by the leader as a
// refused connection. Over a Host's multiplexed listener, plain and TLS,
// and over a node of Open.
func TestLeaderGoneHurriesElection(t *testing.T) {
	slow := func(dbs []*DB) {
		for _, db := range dbs {
			rc := db.raft.ReloadableConfig()
			rc.HeartbeatTimeout, rc.ElectionTimeout = 10*time.Second, 10*time.Second
			if err := db.raft.ReloadConfig(rc); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(t *testing.T, g []*DB, kill func(leader *DB), leaderLog func(leader *DB) []string) {
		leader := groupLeader(t, g)
		applyEventually(t, leader, upserts(0, 10, 1))
		var survivors []*DB
		for _, db := range g {
			if db != leader {
				survivors = append(survivors, db)
			}
		}
		slow(g)
		// A connection that ends while the leader lives: a probe, no hurry.
		for range 3 {
			for _, db := range survivors {
				db.streamEnded()
				time.Sleep(50 * time.Millisecond)
			}
		}
		time.Sleep(300 * time.Millisecond)
		for _, db := range survivors {
			if n := db.Hurried(); n != 0 || db.Leader() != leader.opts.NodeID {
				t.Fatalf("%s hurried %d elections, leader %q, while %s lived", db.opts.NodeID, n, db.Leader(), leader.opts.NodeID)
			}
		}
		if leaderLog != nil {
			for _, l := range leaderLog(leader) {
				if strings.Contains(l, "refused a connection") {
					t.Errorf("the leader logged the followers' probes: %s", l)
				}
			}
		}
		gone := leader.opts.NodeID
		kill(leader)
		next := groupLeader(t, survivors) // within waitFor's 10 s: Raft's own timeouts would take 10–20 s
		if next.opts.NodeID == gone {
			t.Fatal("the dead node still leads")
		}
		var hurried int64
		for _, db := range survivors {
			hurried += db.Hurried()
		}
		if hurried == 0 {
			t.Fatalf("%s elected with no survivor hurrying", next.opts.NodeID)
		}
		for _, db := range survivors {
			waitFor(t, db.opts.NodeID+"'s Raft timeouts restored", func() bool {
				rc := db.raft.ReloadableConfig()
				return rc.HeartbeatTimeout == heartbeatTimeout(db.opts) && rc.ElectionTimeout == electionTimeout(db.opts)
			})
		}
		applyEventually(t, survivors[0], upserts(10, 5, 1))
	}
	for _, mode := range hostModes {
		t.Run("host/"+mode.name, func(t *testing.T) {
			th := newTestHosts(t, mode.tls)
			hosts := map[string]*Host{}
			var list []*Host
			for _, id := range []string{"h1", "h2", "h3"} {
				hosts[id] = th.open(id, nil)
				list = append(list, hosts[id])
			}
			g := openHostGroup(t, "s1", list...)
			check(t, g, func(leader *DB) {
				h := hosts[leader.opts.NodeID]
				h.ln.Close() // as a killed process's: its port refuses before its connections end
				if err := h.Close(); err != nil {
					t.Fatal(err)
				}
			}, func(leader *DB) []string { return th.logs[leader.opts.NodeID].matching("refused a connection") })
		})
	}
	t.Run("open/plain", func(t *testing.T) {
		root := t.TempDir()
		n1 := openNode(t, filepath.Join(root, "n1"), "n1", "")
		defer n1.Close()
		waitFor(t, "n1's API address recorded", func() bool {
			v, _ := n1.Store().User(memberKey("n1"))
			return len(v) > 0
		})
		n2 := openNode(t, filepath.Join(root, "n2"), "n2", n1.APIAddr())
		defer n2.Close()
		n3 := openNode(t, filepath.Join(root, "n3"), "n3", n1.APIAddr())
		defer n3.Close()
		// A node of Open closes its listener before its connections.
		check(t, []*DB{n1, n2, n3}, func(leader *DB) { leader.Close() }, nil)
	})
}

package crawldb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// hostModes are the transports the Host tests run over.
var hostModes = []struct {
	name string
	tls  bool
}{{"plain", false}, {"tls", true}}

// testHosts are Hosts on loopback for a test, with a CA when they speak
// TLS; each records its warnings.
type testHosts struct {
	t    *testing.T
	root string
	ca   *testCA
	logs map[string]*logRecorder
}

func newTestHosts(t *testing.T, withTLS bool) *testHosts {
	th := &testHosts{t: t, root: t.TempDir(), logs: map[string]*logRecorder{}}
	if withTLS {
		th.ca = newTestCA(t, "meridian-test-ca")
	}
	return th
}

// open starts Host id, closed when the test ends.
func (th *testHosts) open(id string, tweak func(*HostOptions)) *Host {
	t := th.t
	t.Helper()
	log, rec := newLogRecorder(t)
	th.logs[id] = rec
	o := HostOptions{Dir: filepath.Join(th.root, id), NodeID: id, RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0",
		FastTimeouts: true, NoSync: true, Logger: log, SnapshotThreshold: 1 << 30, SnapshotInterval: time.Hour}
	if th.ca != nil {
		o.TLS = th.ca.tlsConfig(t, id)
	}
	if tweak != nil {
		tweak(&o)
	}
	h, err := OpenHost(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// group opens group id on each host, bootstrapped with all of them.
func openHostGroup(t *testing.T, id string, hosts ...*Host) []*DB {
	t.Helper()
	var boot []Member
	for _, h := range hosts {
		boot = append(boot, Member{ID: h.NodeID(), RaftAddr: h.RaftAddr(), APIAddr: h.APIAddr()})
	}
	var dbs []*DB
	for _, h := range hosts {
		db, err := h.Group(context.Background(), GroupOptions{ID: id, Bootstrap: boot})
		if err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, db)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, db := range dbs {
		if err := db.WaitLeader(ctx); err != nil {
			t.Fatalf("group %s: %v", id, err)
		}
	}
	return dbs
}

// groupLeader waits until one of dbs leads and every one knows it.
func groupLeader(t *testing.T, dbs []*DB) *DB {
	t.Helper()
	var leader *DB
	waitFor(t, "a leader all replicas agree on", func() bool {
		leader = nil
		for _, db := range dbs {
			if db.IsLeader() {
				leader = db
			}
		}
		if leader == nil {
			return false
		}
		for _, db := range dbs {
			if db.Leader() != leader.opts.NodeID {
				return false
			}
		}
		return true
	})
	return leader
}

// The helpers below tolerate a leadership that moves: on a loaded machine
// FastTimeouts' 300 ms elections happen now and then.

// applyEventually applies b through db until it succeeds (within 20 s).
// The tests' writes are upserts of URLs, which may be applied twice without
// changing what the tests count.
func applyEventually(t *testing.T, db *DB, b *store.Batch) *store.Result {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := db.Apply(ctx, b)
		cancel()
		if err == nil && res.Err != nil {
			t.Fatalf("apply at %s rejected: %v", db.opts.NodeID, res.Err)
		}
		if err == nil {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("apply at %s: %v", db.opts.NodeID, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leaderDo runs f on the replica of dbs that leads until f returns nil
// (within 20 s); an error other than a lost leadership fails the test.
func leaderDo(t *testing.T, dbs []*DB, what string, f func(*DB) error) {
	t.Helper()
	retryNotLeader(t, what, func() error { return f(groupLeader(t, dbs)) })
}

// retryNotLeader runs f until it returns nil (within 20 s); an error other
// than a lost leadership fails the test.
func retryNotLeader(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasURL(t *testing.T, db *DB, url string) bool {
	t.Helper()
	_, ok, err := db.Store().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func testURL(i int) string { return fmt.Sprintf("http://h%d.test/p/%d", i%7, i) }

// TestHostTwoGroups: three Hosts, two groups over the same three
// listeners with different voters (s1: all three, s2: h2 and h3). A
// write to a group reaches its replicas and no other group's; a
// follower's write is forwarded to its group's leader; each group records
// its bootstrap voters' API addresses; the Raft bytes are counted once per
// Host.
func TestHostTwoGroups(t *testing.T) {
	for _, mode := range hostModes {
		t.Run(mode.name, func(t *testing.T) {
			th := newTestHosts(t, mode.tls)
			h1, h2, h3 := th.open("h1", nil), th.open("h2", nil), th.open("h3", nil)
			s1 := openHostGroup(t, "s1", h1, h2, h3)
			s2 := openHostGroup(t, "s2", h2, h3)

			l1, l2 := groupLeader(t, s1), groupLeader(t, s2)
			applyEventually(t, l1, upserts(0, 20, 1))
			applyEventually(t, l2, upserts(1000, 30, 1))
			// A follower's write, forwarded to its group's leader.
			var f1 *DB
			for _, db := range s1 {
				if db != l1 {
					f1 = db
					break
				}
			}
			if res := applyEventually(t, f1, upserts(20, 5, 1)); res.Index == 0 {
				t.Fatalf("forwarded write from %s: index 0", f1.opts.NodeID)
			}
			for _, db := range s1 {
				waitFor(t, db.opts.NodeID+"'s replica of s1 to apply 25 URLs", func() bool { return db.Store().Counts().URLs == 25 })
				if !hasURL(t, db, testURL(24)) || hasURL(t, db, testURL(1000)) {
					t.Errorf("%s/s1: has %s %v, has s2's %s %v; want true, false", db.opts.NodeID, testURL(24), hasURL(t, db, testURL(24)), testURL(1000), hasURL(t, db, testURL(1000)))
				}
			}
			for _, db := range s2 {
				waitFor(t, db.opts.NodeID+"'s replica of s2 to apply 30 URLs", func() bool { return db.Store().Counts().URLs == 30 })
				if hasURL(t, db, testURL(0)) || !hasURL(t, db, testURL(1029)) {
					t.Errorf("%s/s2: holds s1's URL or lacks its own", db.opts.NodeID)
				}
			}
			if h1.Lookup("s2") != nil {
				t.Error("h1 has a replica of s2, which it is no voter of")
			}
			for _, h := range []*Host{h1, h2, h3} {
				got, err := h.Groups()
				if err != nil {
					t.Fatal(err)
				}
				want := []string{"s1", "s2"}
				if h == h1 {
					want = []string{"s1"}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s.Groups() = %q, want %q", h.NodeID(), got, want)
				}
				st := h.Status()
				if len(st.Groups) != len(want) || st.Groups[0].Group != "s1" {
					t.Errorf("%s.Status() groups = %+v, want %q", h.NodeID(), st.Groups, want)
				}
				if tr := h.Traffic(); tr.RaftSent == 0 || tr.RaftReceived == 0 {
					t.Errorf("%s: Raft traffic %+v, want bytes both ways", h.NodeID(), tr)
				}
			}
			// The bootstrap voters' API addresses are recorded in each group.
			waitFor(t, "s1's leader to record every voter's API address", func() bool {
				v, err := f1.Voters()
				if err != nil || len(v) != 3 {
					return false
				}
				for _, m := range v {
					if m.APIAddr == "" || m.RaftAddr == "" {
						return false
					}
				}
				return true
			})
			v, _ := s2[0].Voters()
			if len(v) != 2 || v[0].ID != "h2" || v[0].RaftAddr != h2.RaftAddr() || v[1].ID != "h3" || v[1].RaftAddr != h3.RaftAddr() {
				t.Errorf("s2 voters = %+v, want h2 and h3 at their Hosts' Raft addresses", v)
			}
			// Closing one group leaves the Host's other group running.
			if err := s1[1].Close(); err != nil {
				t.Fatal(err)
			}
			if h2.Lookup("s1") != nil {
				t.Error("h2 still lists s1 after its replica closed")
			}
			applyEventually(t, s2[1], upserts(2000, 3, 1))
			waitFor(t, "s2 on h2 to apply after h2 closed its s1", func() bool { return s2[0].Store().Counts().URLs == 33 })
		})
	}
}

// TestHostMembership: a group bootstrapped on one Host grows to three by
// AddVoter (the new replicas catch up by snapshot), leadership moves by
// TransferLeadershipTo and over the API, a removed voter's state is deleted
// by RemoveGroup, and every call says what is wrong on a follower, with a
// name that is not a voter, or with bad input.
func TestHostMembership(t *testing.T) {
	for _, mode := range hostModes {
		t.Run(mode.name, func(t *testing.T) {
			th := newTestHosts(t, mode.tls)
			small := func(o *HostOptions) { o.SnapshotThreshold, o.TrailingLogs = 32, 8 }
			h1, h2, h3 := th.open("h1", small), th.open("h2", small), th.open("h3", small)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			a, err := h1.Group(ctx, GroupOptions{ID: "s7", Bootstrap: []Member{{ID: "h1"}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			for i := range 40 {
				mustApply(t, a, upserts(i*5, 5, 1))
			}
			if err := a.Snapshot(); err != nil {
				t.Fatal(err)
			}
			if first, _ := a.logs.FirstIndex(); first <= 1 {
				t.Fatalf("leader's log starts at %d after a snapshot: the new replica would not need one", first)
			}
			b, err := h2.Group(ctx, GroupOptions{ID: "s7"})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.AddVoter(ctx, "h2", h2.RaftAddr(), h2.APIAddr()); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("AddVoter on a replica that does not lead = %v, want ErrNotLeader", err)
			}
			if err := a.AddVoter(ctx, "h2", h2.RaftAddr(), h2.APIAddr()); err != nil {
				t.Fatal(err)
			}
			leaderDo(t, []*DB{a, b}, "AddVoter again (idempotent)", func(l *DB) error {
				return l.AddVoter(ctx, "h2", h2.RaftAddr(), h2.APIAddr())
			})
			leaderDo(t, []*DB{a, b}, "AddVoter of another name at h2's address", func(l *DB) error {
				err := l.AddVoter(ctx, "h9", h2.RaftAddr(), h2.APIAddr())
				if errors.Is(err, ErrRefused) && strings.Contains(err.Error(), "already used by member h2") {
					return nil
				}
				return fmt.Errorf("%w, want ErrRefused naming h2", err)
			})
			waitFor(t, "h2's replica to catch up", func() bool { return b.Store().Counts().URLs == 200 })
			// Raft records the installed snapshot just after the store restored it.
			waitFor(t, "h2's replica to have caught up by snapshot", func() bool {
				n, _ := strconv.Atoi(b.RaftStats()["last_snapshot_index"])
				return n > 0
			})
			// h3 is added through h2's API: h2 does not lead, it relays.
			c, err := h3.Group(ctx, GroupOptions{ID: "s7"})
			if err != nil {
				t.Fatal(err)
			}
			retryNotLeader(t, "AddVoterAt through h2", func() error {
				return h3.AddVoterAt(ctx, h2.APIAddr(), "s7", "h3", h3.RaftAddr(), h3.APIAddr())
			})
			waitFor(t, "h3's replica to catch up", func() bool { return c.Store().Counts().URLs == 200 })
			all := []*DB{a, b, c}
			for _, db := range all {
				waitFor(t, db.opts.NodeID+" to see three voters with API addresses", func() bool {
					v, err := db.Voters()
					return err == nil && len(v) == 3 && v[1].APIAddr == h2.APIAddr() && v[2].APIAddr == h3.APIAddr()
				})
			}

			// Leadership moves where it is sent.
			l := groupLeader(t, all)
			f := all[(slices.Index(all, l)+1)%3]
			if err := f.TransferLeadershipTo(ctx, "h3"); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("TransferLeadershipTo on a follower = %v, want ErrNotLeader", err)
			}
			leaderDo(t, all, "TransferLeadershipTo a stranger", func(l *DB) error {
				err := l.TransferLeadershipTo(ctx, "h9")
				if errors.Is(err, ErrRefused) && strings.Contains(err.Error(), `"h9" is not a voter`) {
					return nil
				}
				return fmt.Errorf("%w, want ErrRefused naming h9", err)
			})
			leaderDo(t, all, "TransferLeadershipTo h2", func(l *DB) error { return l.TransferLeadershipTo(ctx, "h2") })
			waitFor(t, "h2 to lead after the transfer to it", b.IsLeader)
			retryNotLeader(t, "TransferLeadershipAt h3 through h1", func() error { // h1 relays to the leader
				return h1.TransferLeadershipAt(ctx, h1.APIAddr(), "s7", "h3")
			})
			waitFor(t, "h3 to lead after the transfer to it over the API", c.IsLeader)
			applyEventually(t, a, upserts(1000, 1, 1)) // forwarded by h1 to the leader

			// Remove h1 (over the API) and delete its replica.
			if err := a.RemoveVoter(ctx, "h1"); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("RemoveVoter on a follower = %v, want ErrNotLeader", err)
			}
			retryNotLeader(t, "RemoveVoterAt h1 through h3", func() error { return h2.RemoveVoterAt(ctx, h3.APIAddr(), "s7", "h1") })
			waitFor(t, "h1 out of s7", func() bool {
				v, err := c.Voters()
				return err == nil && len(v) == 2 && v[0].ID == "h2"
			})
			leaderDo(t, []*DB{b, c}, "RemoveVoter of a node that is no voter", func(l *DB) error { return l.RemoveVoter(ctx, "h1") })
			if err := h1.RemoveGroup("s7"); err != nil {
				t.Fatal(err)
			}
			if got, _ := h1.Groups(); len(got) != 0 {
				t.Errorf("h1.Groups() after RemoveGroup = %q, want none", got)
			}
			if _, err := os.Stat(filepath.Join(th.root, "h1", "groups", "s7")); !os.IsNotExist(err) {
				t.Errorf("h1's s7 directory: %v, want it gone", err)
			}
			if _, err := a.Apply(ctx, upserts(0, 1, 1)); !errors.Is(err, ErrClosed) {
				t.Errorf("Apply on a removed replica = %v, want ErrClosed", err)
			}
			lh := map[*DB]*Host{b: h2, c: h3}[groupLeader(t, []*DB{b, c})]
			if err := lh.RemoveGroup("s7"); err == nil || !strings.Contains(err.Error(), "leads it with 1 other voters") {
				t.Errorf("RemoveGroup of a leading replica = %v, want a refusal", err)
			}
			applyEventually(t, b, upserts(2000, 1, 1))
			waitFor(t, "the two remaining replicas to apply", func() bool {
				return b.Store().Counts().URLs == 202 && c.Store().Counts().URLs == 202
			})
			// A group reopened on h1 starts empty.
			again, err := h1.Group(ctx, GroupOptions{ID: "s7"})
			if err != nil {
				t.Fatal(err)
			}
			if n := again.Store().Counts().URLs; n != 0 {
				t.Errorf("h1's new s7 replica holds %d URLs, want 0", n)
			}

			// The API refuses what is wrong, saying what and where.
			client := http.DefaultClient
			scheme := "http"
			if th.ca != nil {
				client, scheme = httpsClient(th.ca.tlsConfig(t, "probe").Client), "https"
			}
			for _, tc := range []struct {
				path, body string
				code       int
				want       string
			}{
				{"/crawldb/g/s7/voters/add", `{"id":"h4","raft_addr":"nowhere"}`, 400, `raft_addr "nowhere" must be host:port`},
				{"/crawldb/g/s7/voters/add", `{"id":"h4","raft_addr":"127.0.0.1:1","api_addr":"127.0.0.1:2","x":1}`, 400, `unknown field "x"`},
				{"/crawldb/g/s7/leadership", `{"id":"h9"}`, 409, `"h9" is not a voter of the group`},
				{"/crawldb/g/s8/leadership", `{"id":"h2"}`, 404, "group s8 is not open on node h3"},
				{"/crawldb/g/S_8/leadership", `{"id":"h2"}`, 400, `group ID "S_8" must be 1 to 32 of [a-z0-9-]`},
				{"/crawldb/apply", ``, 404, "serves its groups under /crawldb/g/<group>/"},
			} {
				resp, err := client.Post(scheme+"://"+h3.APIAddr()+tc.path, "application/json", strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.want) {
					t.Errorf("POST %s %s = %d %q, want %d with %q", tc.path, tc.body, resp.StatusCode, body, tc.code, tc.want)
				}
			}
			if err := h1.TransferLeadershipAt(ctx, h3.APIAddr(), "s7", "h9"); !errors.Is(err, ErrRefused) {
				t.Errorf("TransferLeadershipAt a stranger = %v, want ErrRefused", err)
			}
		})
	}
}

// TestHostLeaderDies: when the Host that leads a group closes, the
// surviving replicas elect a leader among themselves and take writes, while
// a group the closed Host was no member of carries on.
func TestHostLeaderDies(t *testing.T) {
	th := newTestHosts(t, true)
	hosts := []*Host{th.open("h1", nil), th.open("h2", nil), th.open("h3", nil)}
	g := openHostGroup(t, "s1", hosts...)
	leader := groupLeader(t, g)
	applyEventually(t, leader, upserts(0, 10, 1))
	var dead *Host
	var survivors []*DB
	var others []*Host
	for i, db := range g {
		if db == leader {
			dead = hosts[i]
		} else {
			survivors = append(survivors, db)
			others = append(others, hosts[i])
		}
	}
	other := openHostGroup(t, "s2", others...)
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	next := groupLeader(t, survivors)
	if next.opts.NodeID == dead.NodeID() {
		t.Fatal("the closed Host still leads")
	}
	applyEventually(t, survivors[0], upserts(10, 5, 1))
	applyEventually(t, other[0], upserts(100, 1, 1))
	for _, db := range survivors {
		waitFor(t, "the survivors to apply", func() bool { return db.Store().Counts().URLs == 15 })
	}
}

// TestHostRefusesBadConnections: the Raft listener closes, and logs, a
// connection that sends garbage, a header of an unknown group, a header of
// another version, no header in time, or garbage after a good header (the
// group's frame guard), and keeps serving its groups.
func TestHostRefusesBadConnections(t *testing.T) {
	for _, mode := range hostModes {
		t.Run(mode.name, func(t *testing.T) {
			th := newTestHosts(t, mode.tls)
			h1, h2 := th.open("h1", nil), th.open("h2", nil)
			g := openHostGroup(t, "s1", h1, h2)
			dial := func(t *testing.T) net.Conn {
				c, err := net.DialTimeout("tcp", h1.RaftAddr(), 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if th.ca == nil {
					return c
				}
				tc := tls.Client(c, clientFor(th.ca.tlsConfig(t, "probe").Client, h1.RaftAddr()))
				if err := tc.Handshake(); err != nil {
					t.Fatal(err)
				}
				return tc
			}
			for _, tc := range []struct {
				name string
				send []byte
				want string
			}{
				{"garbage", []byte("GET / HTTP/1.0\r\n\r\n"), `not a group header: it starts with "GET / "`},
				{"raft frame without header", []byte{0, 0x80, 0, 0, 0, 0, 0}, "not a group header"},
				{"unknown group", groupHeader("nope"), "refused a connection for group nope: the group is not open on this node"},
				{"other version", []byte("MRDG\x07\x02s1"), "group header version 7"},
				{"bad group ID", []byte("MRDG\x01\x02S!"), `group ID "S!" must be`},
				{"slow header", []byte("MR"), "no complete group header within"},
				// Past a good header, the group's frame guard reads the frames.
				{"garbage after a header", append(groupHeader("s1"), 0x09, 0xff, 0xff), "unknown RPC type 0x09: not a Raft frame"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					c := dial(t)
					defer c.Close()
					if _, err := c.Write(tc.send); err != nil {
						t.Fatal(err)
					}
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					if n, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
						t.Fatalf("read after %q = %d, %v; want the connection closed", tc.send, n, err)
					}
					th.logs["h1"].waitLogged(t, tc.want, "remote="+c.LocalAddr().String())
				})
			}
			if th.ca != nil {
				t.Run("no TLS", func(t *testing.T) {
					c, err := net.Dial("tcp", h1.RaftAddr())
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					c.Write(groupHeader("s1"))
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					io.Copy(io.Discard, c)
					th.logs["h1"].waitLogged(t, "crawldb: raft: refused a connection", "remote="+c.LocalAddr().String())
				})
			}
			// The listener still serves the group, both ways.
			for i, db := range g {
				applyEventually(t, db, upserts(10*i, 1, 1))
			}
			for _, db := range g {
				waitFor(t, "both replicas to apply both writes", func() bool { return db.Store().Counts().URLs == 2 })
			}
		})
	}
}

// TestHostRestart: a Host reopened on its directory lists its groups and
// reopens each with its data, without bootstrapping again; Group refuses
// a group that is open and options that are wrong, saying what.
func TestHostRestart(t *testing.T) {
	th := newTestHosts(t, false)
	h := th.open("h1", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, id := range []string{"s1", "meta"} {
		db, err := h.Group(ctx, GroupOptions{ID: id, Bootstrap: []Member{{ID: "h1"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		mustApply(t, db, upserts(0, 3+i, 1))
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h = th.open("h1", nil)
	if got, err := h.Groups(); err != nil || !slices.Equal(got, []string{"meta", "s1"}) {
		t.Fatalf("Groups() after a restart = %q, %v; want meta and s1", got, err)
	}
	for i, id := range []string{"s1", "meta"} {
		db, err := h.Group(ctx, GroupOptions{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.WaitLeader(ctx); err != nil {
			t.Fatal(err)
		}
		if n := db.Store().Counts().URLs; n != uint64(3+i) {
			t.Errorf("group %s after a restart holds %d URLs, want %d", id, n, 3+i)
		}
		mustApply(t, db, upserts(100, 1, 1))
	}
	for _, tc := range []struct {
		g    GroupOptions
		want string
	}{
		{GroupOptions{ID: "s1"}, "group s1 is already open"},
		{GroupOptions{ID: "Shard_1"}, `group ID "Shard_1" must be 1 to 32 of [a-z0-9-]`},
		{GroupOptions{ID: strings.Repeat("a", 33)}, "must be 1 to 32"},
		{GroupOptions{ID: "s2", Bootstrap: []Member{{ID: "h2", RaftAddr: "127.0.0.1:1"}}}, "the bootstrap voters must include this node, h1"},
		{GroupOptions{ID: "s2", Bootstrap: []Member{{ID: "h1"}, {ID: "h2", RaftAddr: "nowhere"}}}, `bootstrap voter h2: raft_addr "nowhere" must be host:port`},
		{GroupOptions{ID: "s2", Bootstrap: []Member{{ID: "h1"}, {ID: "h1"}}}, "bootstrap voter h1 is listed twice"},
	} {
		if _, err := h.Group(ctx, tc.g); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Group(%+v) = %v, want an error with %q", tc.g, err, tc.want)
		}
	}
	if got, _ := h.Groups(); !slices.Equal(got, []string{"meta", "s1"}) {
		t.Errorf("refused groups left state: Groups() = %q", got)
	}
	if _, err := OpenHost(ctx, HostOptions{NodeID: "a b", RaftAddr: "127.0.0.1:0"}); err == nil ||
		!strings.Contains(err.Error(), "Dir is required") || !strings.Contains(err.Error(), `NodeID "a b"`) {
		t.Errorf("OpenHost with bad options = %v, want every problem named", err)
	}
}

// A voter is added only once its node serves the group, as a learner
// first, and promoted once its replica has caught up. A node without the
// group open is not added when AddVoter gives up: the group of one keeps a
// quorum of one and goes on writing (a voter added at once would have made
// its quorum two, with the second unable to answer). Once the node opens
// the group, AddVoter catches it up and promotes it, and it holds
// everything written meanwhile.
func TestHostAddVoterLearnsFirst(t *testing.T) {
	th := newTestHosts(t, false)
	h1, h2 := th.open("h1", nil), th.open("h2", nil)
	a := openHostGroup(t, "s1", h1)[0]
	for i := range 10 {
		mustApply(t, a, upserts(i*5, 5, 1))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err := a.AddVoter(ctx, "h2", h2.RaftAddr(), h2.APIAddr())
	cancel()
	if err == nil || !strings.Contains(err.Error(), "does not serve the group") {
		t.Fatalf("AddVoter of a node without the group open = %v, want an error saying it does not serve the group", err)
	}
	if l, err := a.Learners(); err != nil || len(l) != 0 {
		t.Fatalf("learners = %v, %v; want none (not added before its node serves the group)", l, err)
	}
	if v, err := a.Voters(); err != nil || len(v) != 1 || v[0].ID != "h1" {
		t.Fatalf("voters = %v, %v; want h1 alone", v, err)
	}
	// Quorum of one: a write commits at once, without h2.
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Second)
	if _, err := a.Apply(wctx, upserts(50, 1, 1)); err != nil {
		t.Fatalf("write with a learner that cannot answer: %v", err)
	}
	wcancel()

	bdb, err := h2.Group(context.Background(), GroupOptions{ID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	retryNotLeader(t, "AddVoter once h2 has the group", func() error { return a.AddVoter(ctx, "h2", h2.RaftAddr(), h2.APIAddr()) })
	if bdb.Store().AppliedIndex() < a.Store().AppliedIndex()-1 {
		t.Errorf("h2 promoted at index %d, leader at %d", bdb.Store().AppliedIndex(), a.Store().AppliedIndex())
	}
	if l, _ := a.Learners(); len(l) != 0 {
		t.Errorf("learners after promotion = %v, want none", l)
	}
	if v, _ := a.Voters(); len(v) != 2 {
		t.Errorf("voters after promotion = %v, want h1 and h2", v)
	}
	for _, i := range []int{0, 49, 50} {
		if !hasURL(t, bdb, testURL(i)) {
			t.Errorf("h2's replica lacks %s", testURL(i))
		}
	}
}

// TestTransferToDeadNode: a leadership transfer to a voter whose node has
// stopped times out; the leader then settles (an election timeout, then a
// quorum's word) before it answers, and still leads: the error says the
// transfer failed and is not ErrNotLeader, and writes go on.
func TestTransferToDeadNode(t *testing.T) {
	th := newTestHosts(t, false)
	hosts := []*Host{th.open("h1", nil), th.open("h2", nil), th.open("h3", nil)}
	dbs := openHostGroup(t, "s3", hosts...)
	l := groupLeader(t, dbs)
	i := (slices.Index(dbs, l) + 1) % 3
	dead := hosts[i].NodeID()
	if err := hosts[i].Close(); err != nil {
		t.Fatal(err)
	}
	live := slices.Delete(slices.Clone(dbs), i, i+1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	leaderDo(t, live, "TransferLeadershipTo the stopped node", func(l *DB) error {
		err = l.TransferLeadershipTo(ctx, dead)
		if errors.Is(err, ErrNotLeader) {
			return err // an election among the two left: the new leader tries again
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "transfer leadership of group s3 to "+dead) {
		t.Fatalf("TransferLeadershipTo a stopped node = %v, want the failed transfer named", err)
	}
	l = groupLeader(t, live)
	applyEventually(t, l, upserts(0, 3, 1))
	if got := l.Store().Counts().URLs; got != 3 {
		t.Fatalf("after the failed transfer the leader holds %d URLs, want the 3 written", got)
	}
}

package crawldb

import (
	"errors"
	"hash/fnv"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// A follower learns that its leader's node is gone sooner than Raft does:
// the leader's connections to it end (a killed process's sockets close at
// once) and the leader's Raft port refuses a new connection. Raft alone
// waits for its heartbeat timeout, drawn between one and two times 2 s,
// and when two followers stand at once, for a split vote's election
// timeout more: up to about 8 s, and more on starved nodes where several
// groups elect at once (bench/README, "Leaders back after a kill").
//
// A follower that sees this shortens its group's heartbeat and election
// timeouts to the leader lease, the least Raft accepts, from the leader's
// last contact, the group's other voters one hurryStep apart in an order
// drawn from the group's ID (so that they seldom stand at once, and the
// last of them to stand usually wins), and restores them once the group
// has another leader. Nothing else changes: a leader that is in fact alive
// keeps its followers by its heartbeats, which it sends ten times per
// heartbeat timeout.

// Bounds of the hurry.
const (
	// probeTimeout bounds the dial that asks whether the leader's Raft
	// port still listens. Only a refusal counts: a dial that times out
	// says nothing (a starved or partitioned node), and Raft's own
	// timeouts apply.
	probeTimeout = 500 * time.Millisecond
	// hurryStep separates the voters' shortened timeouts.
	hurryStep = 250 * time.Millisecond
	// hurryRestore bounds how long the timeouts stay short without a new
	// leader (a group that lost its quorum with its leader).
	hurryRestore = 30 * time.Second
)

// streamEnded is the stream layer's word that a connection another node
// opened to this one ended from the other side. It never blocks.
func (db *DB) streamEnded() {
	select {
	case db.ended <- struct{}{}:
	default:
	}
}

// startWatchers starts the goroutines that follow the DB's Raft: its
// leadership (watchLeadership) and its leader's node (watchLeaderGone).
// Both end with the DB (bg).
func (db *DB) startWatchers() {
	db.bg.Add(2)
	go db.watchLeadership()
	go db.watchLeaderGone()
}

// watchLeaderGone checks, whenever a connection from another node ended,
// whether this follower's leader is gone, and hurries the election if so.
// It ends with the DB.
func (db *DB) watchLeaderGone() {
	defer db.bg.Done()
	for {
		select {
		case <-db.ctx.Done():
			return
		case <-db.ended:
		}
		if db.raft.State() != raft.Follower {
			continue
		}
		addr, id := db.raft.LeaderWithID()
		if id == "" || string(id) == db.opts.NodeID || !portRefuses(string(addr)) {
			continue
		}
		db.hurryElection(id)
	}
}

// portRefuses reports whether a TCP connection to addr is refused: no
// process listens there.
func portRefuses(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err == nil {
		c.Close() // the Host takes a connection that sends nothing for a probe
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// hurryElection shortens this replica's heartbeat and election timeouts
// to the lease, at its turn (hurryTurn) after the gone leader's last
// contact, until the group has another leader (see the comment at the
// top of this file).
func (db *DB) hurryElection(gone raft.ServerID) {
	f := db.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	turn, ok := hurryTurn(f.Configuration(), raft.ServerID(db.opts.NodeID), gone, db.group)
	if !ok {
		return
	}
	lease := leaseTimeout(db.opts)
	at := db.raft.LastContact().Add(lease + time.Duration(turn)*hurryStep)
	db.log.Warn("crawldb: the leader's node is gone (its connections ended, its Raft port refuses): hurrying the election",
		"group", db.group, "leader", string(gone), "turn", turn, "in", time.Until(at).Round(time.Millisecond).String())
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-db.ctx.Done():
		return
	case <-t.C:
	}
	if _, id := db.raft.LeaderWithID(); id != "" && id != gone {
		return // elected meanwhile
	}
	base := db.raft.ReloadableConfig()
	base.HeartbeatTimeout, base.ElectionTimeout = heartbeatTimeout(db.opts), electionTimeout(db.opts)
	short := base
	short.HeartbeatTimeout, short.ElectionTimeout = lease, lease
	// A shorter heartbeat timeout wakes the follower's timer at once,
	// which finds the leader's last contact older than the lease.
	if err := db.raft.ReloadConfig(short); err != nil {
		db.log.Warn("crawldb: hurry the election", "group", db.group, "err", err)
		return
	}
	db.hurried.Add(1)
	start := time.Now()
	defer func() {
		if err := db.raft.ReloadConfig(base); err != nil {
			db.log.Error("crawldb: restore Raft's timeouts after a hurried election", "group", db.group, "err", err)
		}
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < hurryRestore {
		select {
		case <-db.ctx.Done():
			return
		case <-tick.C:
		}
		if _, id := db.raft.LeaderWithID(); id != "" && id != gone {
			db.log.Warn("crawldb: a leader after the hurried election", "group", db.group, "leader", string(id),
				"after", time.Since(start).Round(time.Millisecond).String())
			return
		}
	}
	db.log.Warn("crawldb: no leader after the hurried election: Raft's timeouts restored", "group", db.group,
		"after", hurryRestore.String())
}

// hurryTurn is self's place among the voters of c other than gone: the
// voters in ID order, rotated by a hash of the group so that the order
// differs between groups. ok is false when self does not vote.
func hurryTurn(c raft.Configuration, self, gone raft.ServerID, group string) (turn int, ok bool) {
	var voters []raft.ServerID
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter && s.ID != gone {
			voters = append(voters, s.ID)
		}
	}
	slices.Sort(voters)
	i := slices.Index(voters, self)
	if i < 0 {
		return 0, false
	}
	h := fnv.New32a()
	h.Write([]byte(group))
	return (i + int(h.Sum32()%uint32(len(voters)))) % len(voters), true
}

// Hurried counts the elections this replica hurried because its leader's
// node was gone.
func (db *DB) Hurried() int64 { return db.hurried.Load() }

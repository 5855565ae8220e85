package bench

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/site"
)

// The --kill-after event of bench cluster: which node is SIGKILLed, and
// how long the site takes to move its parts and lead every shard again.

// killOne SIGKILLs one node, asking every node for its /status first.
// On a sharded site (the /status lists shards, see statusShards) it is the
// node leading the most shards, so that their leaders must move; on a
// site of one Raft group, a follower, the one holding the most parts (so
// that the leader has parts to move). With no such node answering it
// tries again at the next sample.
func (r *clusterRun) killOne(client *http.Client) {
	var victim *clusterNode
	var vst *site.Status
	leader := ""
	var raws [][]byte
	sts := map[*clusterNode]*site.Status{}
	for _, nd := range r.nodes {
		if nd.done() {
			continue
		}
		st, raw := getStatusRaw(client, nd.listen)
		if st == nil {
			continue
		}
		sts[nd], raws = st, append(raws, raw)
		switch st.Role {
		case "leader":
			leader = nd.name
			r.replanBase, r.movesBase = st.Rounds.Replanned, st.Rounds.Moves
		case "follower":
			if vst == nil || st.Rounds.Parts >= vst.Rounds.Parts {
				victim, vst = nd, st
			}
		}
	}
	probe, shards, led := "site leader", 1, 0
	if view, ok := shardView(raws, ""); ok {
		probe, shards, victim, vst = "shards", len(view), nil, nil
		for _, nd := range r.nodes { // the most shards led; ties: the later node
			st := sts[nd]
			if st == nil {
				continue
			}
			n := 0
			for _, l := range view {
				if l == nd.name {
					n++
				}
			}
			if n > 0 && n >= led {
				victim, vst, led = nd, st, n
			}
		}
	} else if victim == nil || leader == "" {
		victim = nil
	}
	if victim == nil {
		return
	}
	r.killAt = time.Now()
	if err := victim.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		r.cfg.Progress("kill %s: %v", victim.name, err)
		return
	}
	victim.killed = true
	<-victim.proc.exit
	victim.exited = time.Now()
	r.killed = &ClusterKill{Node: victim.name, Parts: vst.Rounds.Parts, Leader: leader,
		AfterS: r.killAt.Sub(r.up).Seconds(), ReplanS: -1, ReplanLastS: -1,
		LeaderProbe: probe, Shards: shards, ShardsLed: led, LeadersBackS: -1}
	r.cfg.Progress("SIGKILLed %s (%s, %d parts, %d hosts, leading %d of %d shards) %.1fs after n1 was up; leader %s",
		victim.name, vst.Role, vst.Rounds.Parts, vst.Rounds.Hosts, led, shards, r.killed.AfterS, leader)
}

// watchLeaders looks, after the kill, for the first sample at which every
// shard in the survivors' /status (answered after the kill) has a leader
// other than the killed node; without shard lists, at which a survivor
// leads the site's one Raft group.
func (r *clusterRun) watchLeaders() {
	k := r.killed
	if k.LeadersBackS >= 0 {
		return
	}
	var raws [][]byte
	var at time.Time
	leads := false
	for _, nd := range r.nodes {
		if nd.killed || nd.last == nil || !nd.lastAt.After(r.killAt) {
			continue
		}
		raws = append(raws, nd.lastRaw)
		at = later(at, nd.lastAt)
		leads = leads || nd.last.Role == "leader"
	}
	if len(raws) == 0 {
		return
	}
	if view, ok := shardView(raws, k.Node); ok {
		k.Shards = len(view)
		for _, l := range view {
			if l == "" {
				return
			}
		}
	} else if !leads {
		return
	}
	k.LeadersBackS = at.Sub(r.killAt).Seconds()
	r.cfg.Progress("every shard has a leader %.2fs after the kill of %s (%s, %d shard(s))", k.LeadersBackS, k.Node, k.LeaderProbe, k.Shards)
}

// shardLeader is one shard as a node's /status lists it.
type shardLeader struct {
	ID     string
	Leader string // the leading node's name ("": none)
}

// statusShardsField is the /status field statusShards reads.
const statusShardsField = "shards"

// statusShards is the hook for the sharded site's /status (issue 21): the
// shards a node's /status lists and their leaders, read from the field
// statusShardsField, a list of objects with "id" (a string or a number)
// and "leader" (the leading node's --node name; "" or absent when the
// shard has none). ok is false when the status has no such list or an
// empty one (today's site: one Raft group, led by the node whose role is
// "leader"). When the sharded site names these otherwise, change this
// function (and statusShardsField) only.
func statusShards(raw []byte) (shards []shardLeader, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return nil, false
	}
	list, has := top[statusShardsField]
	if !has {
		return nil, false
	}
	var items []struct {
		ID     json.RawMessage `json:"id"`
		Leader string          `json:"leader"`
	}
	if json.Unmarshal(list, &items) != nil || len(items) == 0 {
		return nil, false
	}
	for _, it := range items {
		shards = append(shards, shardLeader{ID: strings.Trim(string(it.ID), `"`), Leader: it.Leader})
	}
	return shards, true
}

// shardView merges the shard lists of nodes' /status JSON: every shard
// any of them lists, with a leader some of them names that is not dead
// ("" when none does). ok is false when none of them lists shards.
func shardView(raws [][]byte, dead string) (map[string]string, bool) {
	view := map[string]string{}
	any := false
	for _, raw := range raws {
		shards, ok := statusShards(raw)
		if !ok {
			continue
		}
		any = true
		for _, sh := range shards {
			if _, seen := view[sh.ID]; !seen {
				view[sh.ID] = ""
			}
			if sh.Leader != "" && sh.Leader != dead {
				view[sh.ID] = sh.Leader
			}
		}
	}
	return view, any
}

// watchReplan looks at the leader's last status for the first part moves
// after the kill.
func (r *clusterRun) watchReplan() {
	for _, nd := range r.nodes {
		st := nd.last
		if nd.done() || st == nil || st.Role != "leader" {
			continue
		}
		if nd.name != r.killed.Leader { // a new leader: its own counters
			r.replanBase, r.movesBase, r.killed.Leader = "", 0, nd.name
		}
		// A leader's status drops its moves when its lead ends (the crawl
		// finished): the most seen stands.
		r.movesLast = max(r.movesLast, st.Rounds.Moves)
		k := r.killed
		if st.Rounds.Replanned == "" || st.Rounds.Replanned == r.replanBase || st.Rounds.Replanned == k.ReplannedLast {
			continue
		}
		at, err := time.Parse("2006-01-02T15:04:05.000Z07:00", st.Rounds.Replanned)
		if err != nil || at.Before(r.killAt.Add(-time.Millisecond)) {
			continue
		}
		k.ReplannedLast, k.ReplanLastS = st.Rounds.Replanned, at.Sub(r.killAt).Seconds()
		if k.Replanned == "" {
			k.Replanned, k.ReplanS = k.ReplannedLast, k.ReplanLastS
		}
		r.cfg.Progress("leader %s moved parts %.2fs after the kill of %s (%d moves since)", nd.name, k.ReplanLastS, k.Node, st.Rounds.Moves-r.movesBase)
	}
}

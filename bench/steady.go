package bench

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// The steady window of bench cluster (ClusterConfig.Steady): a sharded
// site's rounds are per shard, so the run is not measured over rounds but
// over a fixed window that opens once the site's shards are where the
// placement wants them (each led by the node it names, on the replicas it
// names, no step under way), with every node up. Pages are the requests
// websim answered over the window (a node's fetcher results count jobs
// skipped after their part moved, too), CPU the nodes' cgroups' (or
// processes') CPU over it, bytes between nodes their crawl-database
// traffic over it.

// steadyCounters are a node's counters at one end of the window.
type steadyCounters struct {
	at    time.Time
	done  int64 // fetcher.done
	bytes int64 // raft_sent + api_sent
}

// countersOf reads a node's counters from its last answered /status (ok
// false: none yet).
func countersOf(nd *clusterNode) (steadyCounters, bool) {
	st := nd.last
	if st == nil {
		return steadyCounters{}, false
	}
	return steadyCounters{at: nd.lastAt, done: st.Fetcher.Done, bytes: st.Traffic.RaftSent + st.Traffic.APISent}, true
}

// placedShard is one shard as a node's /status lists it, with what the
// placement wants of it.
type placedShard struct {
	ID           int      `json:"id"`
	Leader       string   `json:"leader"`
	Replicas     []string `json:"replicas"`
	Target       []string `json:"target"`
	TargetLeader string   `json:"target_leader"`
	Step         string   `json:"step"`
}

// settledShards counts the shards that are where the placement wants
// them, from the nodes' /status JSON (node names by index): a shard
// counts when the node leading it lists it led by that node, with the
// placement's leader and replicas and no step under way.
func settledShards(names []string, raws [][]byte) int {
	settled := map[int]bool{}
	for i, raw := range raws {
		if raw == nil {
			continue
		}
		var st struct {
			Shards []placedShard `json:"shards"`
		}
		if json.Unmarshal(raw, &st) != nil {
			continue
		}
		for _, sh := range st.Shards {
			if sh.Leader != names[i] || sh.Leader != sh.TargetLeader || sh.Step != "" {
				continue
			}
			if slices.Equal(slices.Sorted(slices.Values(sh.Replicas)), slices.Sorted(slices.Values(sh.Target))) {
				settled[sh.ID] = true
			}
		}
	}
	return len(settled)
}

// steadyStep advances the steady window at a sample: it opens when the
// shards are settled and Warmup has passed since every node was up (or
// at SettleTimeout after that) and closes
// Steady later; closing stops the nodes. It returns true once closed.
func (r *clusterRun) steadyStep(now time.Time) bool {
	c := r.cfg
	if !r.steadyEnd.IsZero() {
		return true
	}
	if r.steadyStart.IsZero() {
		names := make([]string, len(r.nodes))
		raws := make([][]byte, len(r.nodes))
		for i, nd := range r.nodes {
			names[i] = nd.name
			if !nd.done() {
				raws[i] = nd.lastRaw
			}
		}
		n := settledShards(names, raws)
		if n >= c.Shards && r.settledAt.IsZero() {
			r.settledAt = now
		}
		timedOut := now.Sub(r.allUp) >= c.SettleTimeout
		if (n < c.Shards || now.Sub(r.allUp) < c.Warmup) && !timedOut {
			return false
		}
		r.settleS = r.settledAt.Sub(r.allUp).Seconds()
		if r.settledAt.IsZero() {
			r.settleS = -1
			c.Progress("steady window: %d of %d shards settled %v after every node was up; the window opens anyway", n, c.Shards, c.SettleTimeout)
		} else {
			c.Progress("steady window: every shard settled %.1fs after every node was up (%d settled now); measuring %v from %.1fs", r.settleS, n, c.Steady, now.Sub(r.allUp).Seconds())
		}
		for _, nd := range r.nodes {
			nd.steadyFrom, _ = countersOf(nd)
		}
		r.steadyReqFrom = r.websimRequests()
		r.steadyStart = now
		return false
	}
	if now.Sub(r.steadyStart) < c.Steady {
		return false
	}
	for _, nd := range r.nodes {
		nd.steadyTo, _ = countersOf(nd)
	}
	r.steadyReqTo = r.websimRequests()
	r.steadyEnd = now
	c.Progress("steady window closed: stopping the nodes")
	return true
}

// collectSteady fills out's window figures from the steady window (the
// nodes have exited): pages and bytes are the nodes' counters' deltas,
// CPU their cgroups' (with a quota) and processes' over the window.
func (r *clusterRun) collectSteady(out *ClusterRun) {
	out.SettleS = r.settleS
	if r.steadyEnd.IsZero() {
		out.SteadyNote = "the steady window did not close (the nodes exited or the run was cut first)"
		return
	}
	start, end := r.steadyStart, r.steadyEnd
	out.WindowS = end.Sub(start).Seconds()
	out.Pages, out.NodeBytes = 0, 0
	out.SiteCPUS, out.SiteCgroupCPUS, out.MaxQuotaUse = 0, 0, 0
	for i, nd := range r.nodes {
		cn := &out.NodeList[i]
		cn.Pages = nd.steadyTo.done - nd.steadyFrom.done
		out.Pages += cn.Pages
		out.NodeBytes += nd.steadyTo.bytes - nd.steadyFrom.bytes
		cn.WindowCPUS = (cpuAt(nd.pts, end) - cpuAt(nd.pts, start)).Seconds()
		cn.CPUPerPageUS = 1e6 * ratio(cn.WindowCPUS, float64(cn.Pages))
		out.SiteCPUS += cn.WindowCPUS
		if nd.cg != nil {
			cn.CgroupWindowCPUS = (cpuAt(nd.cgPts, end) - cpuAt(nd.cgPts, start)).Seconds()
			cn.CgroupCPUPerPageUS = 1e6 * ratio(cn.CgroupWindowCPUS, float64(cn.Pages))
			cn.QuotaUse = ratio(cn.CgroupWindowCPUS, out.WindowS*r.cfg.NodeCPUs)
			out.SiteCgroupCPUS += cn.CgroupWindowCPUS
			out.MaxQuotaUse = max(out.MaxQuotaUse, cn.QuotaUse)
		}
	}
	out.FetcherResults = out.Pages
	out.Pages = r.steadyReqTo - r.steadyReqFrom
	out.PagesPerSec = ratio(float64(out.Pages), out.WindowS)
	out.SiteCPUPerPageUS = 1e6 * ratio(out.SiteCPUS, float64(out.Pages))
	out.SiteCgroupCPUPerPageUS = 1e6 * ratio(out.SiteCgroupCPUS, float64(out.Pages))
	out.NodeBytesPerPage = ratio(float64(out.NodeBytes), float64(out.Pages))
	if len(r.simPts) > 0 {
		out.WebsimWindowCPUS = (cpuAt(r.simPts, end) - cpuAt(r.simPts, start)).Seconds()
	}
	out.Exit = "steady"
}

// websimRequests is websim's request count now (-1: no answer).
func (r *clusterRun) websimRequests() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snap, err := fetchSnapshot(ctx, r.sim.admin)
	if err != nil {
		r.cfg.Progress("steady window: %v", err)
		return -1
	}
	return snap.Requests
}

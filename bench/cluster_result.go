package bench

import (
	"fmt"
)

// ClusterRound is one round of a cluster run, from the nodes' rounds.jsonl.
type ClusterRound struct {
	RoundRow
	Parts       int    `json:"parts"`
	StagedBytes int64  `json:"staged_bytes"`
	Leader      string `json:"leader"` // the node that led its update
}

// ClusterNode is what one node of a cluster run did and cost.
type ClusterNode struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Role is the node's role at its last answered /status (a node whose
	// peers exited first may end as a follower or candidate); Roles are
	// the roles its samples saw, in order of first sight.
	Role  string   `json:"role"`
	Roles []string `json:"roles"`
	// Exit is how the process ended ("exit status 0", "signal: killed",
	// ...); ExitCode is -1 for a signal. Killed: by the benchmark's
	// --kill-after; Stopped: by the benchmark at the timeout.
	Exit     string `json:"exit"`
	ExitCode int    `json:"exit_code"`
	Killed   bool   `json:"killed,omitempty"`
	Stopped  bool   `json:"stopped,omitempty"`
	// Pages is the node's fetcher.done at its last answered /status: the
	// page results it delivered, retried ones (Retries) included.
	Pages   int64 `json:"pages"`
	Retries int64 `json:"retries"`
	// WindowCPUS is the node's CPU seconds over the measured window,
	// interpolated between the samples (the last sample stands after the
	// node exits); CPUS over its whole life (rusage). CPUPerPageUS is
	// WindowCPUS over Pages.
	WindowCPUS   float64 `json:"window_cpu_s"`
	CPUS         float64 `json:"cpu_s"`
	CPUPerPageUS float64 `json:"cpu_us_per_page"`
	PeakRSS      int64   `json:"peak_rss_bytes"`
	// Traffic at the last answered /status.
	RaftSent     int64 `json:"raft_sent_bytes"`
	RaftReceived int64 `json:"raft_received_bytes"`
	APISent      int64 `json:"api_sent_bytes"`
	APIReceived  int64 `json:"api_received_bytes"`
	// Cgroup is the node's CPU-quota group ("" uncapped). CgroupWindowCPUS
	// is its CPU over the measured window from the group's own counter
	// (cpuacct.usage or cpu.stat usage_usec: every thread the node ever
	// ran, interpolated between the samples), CgroupCPUS over the group's
	// life, CgroupCPUPerPageUS CgroupWindowCPUS over Pages. QuotaUse is
	// CgroupWindowCPUS over the window × the quota (1: the node used its
	// whole "machine"). Periods, Throttled and ThrottledS: CFS periods in
	// which it ran, in which the quota stopped it, and for how long.
	Cgroup             string  `json:"cgroup,omitempty"`
	CgroupWindowCPUS   float64 `json:"cgroup_window_cpu_s,omitempty"`
	CgroupCPUS         float64 `json:"cgroup_cpu_s,omitempty"`
	CgroupCPUPerPageUS float64 `json:"cgroup_cpu_us_per_page,omitempty"`
	QuotaUse           float64 `json:"quota_use,omitempty"`
	Periods            int64   `json:"cfs_periods,omitempty"`
	Throttled          int64   `json:"cfs_throttled_periods,omitempty"`
	ThrottledS         float64 `json:"cfs_throttled_s,omitempty"`
	// RoundsLed: lines in its rounds.jsonl (rounds whose update it led).
	RoundsLed int `json:"rounds_led"`
	// UpS: the node's start to its status answering (site.json written).
	UpS float64 `json:"up_s"`
}

// ClusterKill is the --kill-after event of a run.
type ClusterKill struct {
	Node   string `json:"node"`
	Parts  int    `json:"parts"`  // parts it held when killed (its /status)
	Leader string `json:"leader"` // the leader when it was killed
	// AfterS: from the first node up; AtWindowS: from the first round's start.
	AfterS    float64 `json:"after_s"`
	AtWindowS float64 `json:"at_window_s"`
	// Replanned is the leader's rounds.replanned (the time of its latest
	// part move) as first seen after the kill; ReplanS is it minus the
	// kill time, -1 when no part moved. ReplanLastS is the same for the
	// last value seen: later moves (a part of the dead node that the first
	// pass did not move, or any other move) push it on. Moves is how many
	// parts the leader moved after the kill.
	Replanned     string  `json:"replanned,omitempty"`
	ReplanS       float64 `json:"replan_s"`
	ReplannedLast string  `json:"replanned_last,omitempty"`
	ReplanLastS   float64 `json:"replan_last_s"`
	Moves         int     `json:"moves"`
	// The crawl's recovery: LeadersBackS is the time from the SIGKILL to
	// the first sample (every SampleEvery) at which every shard listed in
	// the survivors' /status has a leader that is not the killed node, -1
	// if that never happened before the run ended. LeaderProbe says what
	// it read: "shards" (the shard list of a sharded site's /status, see
	// statusShards) or "site leader" (no shard list: the site's one Raft
	// group, led by the node whose role is "leader"). Shards is how many
	// shards the survivors listed (1 for "site leader"); ShardsLed how
	// many of them the killed node led when it was killed.
	LeaderProbe  string  `json:"leader_probe"`
	Shards       int     `json:"shards"`
	ShardsLed    int     `json:"shards_led_by_killed"`
	LeadersBackS float64 `json:"leaders_back_s"`
}

// ClusterRun is one configuration: a site of Nodes nodes crawling the web.
type ClusterRun struct {
	Nodes int `json:"nodes"`
	// Exit: "steady" (the steady window closed), "rounds" (the configured rounds were done), "exhausted",
	// "cut" (the timeout stopped it), "failed" (a node failed) or
	// "exited" (none of these).
	Exit   string         `json:"exit"`
	Rounds []ClusterRound `json:"rounds"`
	// The window runs from the first round's start to the last round's end
	// over every node's rounds.jsonl; Pages is Σ fetched over its rounds.
	WindowS       float64 `json:"window_s"`
	Pages         int64   `json:"pages"`
	Pages2xx      int64   `json:"pages_2xx"`
	PagesPerSec   float64 `json:"pages_per_sec"`
	FirstRoundAtS float64 `json:"first_round_at_s"` // first node's start to the first round's start
	WallS         float64 `json:"wall_s"`           // first node's start to the last node's exit
	// Ratio is PagesPerSec over the mean pages/s of the runs with the
	// fewest nodes (RatioBaseNodes: 1 when the list has 1-node runs; 3 for
	// --nodes 3,6), all from the one invocation (0: no base).
	Ratio          float64 `json:"ratio"`
	RatioBaseNodes int     `json:"ratio_base_nodes,omitempty"`
	// CPU over the window: Σ over the nodes, and per page (from /proc).
	SiteCPUS         float64 `json:"site_window_cpu_s"`
	SiteCPUPerPageUS float64 `json:"site_cpu_us_per_page"`
	// The same from the nodes' cgroups (with a quota), and the largest
	// QuotaUse of a node.
	SiteCgroupCPUS         float64 `json:"site_cgroup_window_cpu_s,omitempty"`
	SiteCgroupCPUPerPageUS float64 `json:"site_cgroup_cpu_us_per_page,omitempty"`
	MaxQuotaUse            float64 `json:"max_quota_use,omitempty"`
	// CgroupNote: a node's group that could not be removed.
	CgroupNote string `json:"cgroup_note,omitempty"`
	// BusyMachines and BusyCores: the busy machines beside the nodes
	// (ClusterConfig.BusyMachines) and the cores they used together.
	BusyMachines int     `json:"busy_machines,omitempty"`
	BusyCores    float64 `json:"busy_cores,omitempty"`
	// Bytes between nodes: Σ over nodes of raft_sent + api_sent at their
	// last /status (crawldb.Traffic: Raft's TCP transport on the wire, TLS
	// included; the crawl database's node API request and response bodies,
	// as client and server; not HTTP headers, not /status or /site/*
	// calls), per page; staged bytes (rounds.jsonl) per page.
	NodeBytes          int64         `json:"node_sent_bytes"`
	NodeBytesPerPage   float64       `json:"node_bytes_per_page"`
	StagedBytes        int64         `json:"staged_bytes"`
	StagedBytesPerPage float64       `json:"staged_bytes_per_page"`
	NodeList           []ClusterNode `json:"node_list"`
	// Websim over the window (interpolated) and over the whole run.
	WebsimWindowCPUS float64 `json:"websim_window_cpu_s"`
	WebsimCPUS       float64 `json:"websim_cpu_s"`
	// websim's statistics, reset before the run.
	Breaches       int      `json:"politeness_breaches"`
	BreachSample   []string `json:"politeness_breach_sample,omitempty"`
	WebsimRequests int64    `json:"websim_requests"`
	UnknownHost    int64    `json:"websim_unknown_host_requests"`
	// DuplicateRounds: round lines found in more than one node's
	// rounds.jsonl (a leader change mid-update); the first is kept.
	DuplicateRounds int          `json:"duplicate_rounds,omitempty"`
	Kill            *ClusterKill `json:"kill,omitempty"`
	KillNote        string       `json:"kill_note,omitempty"` // a kill was due in this run but did not happen
	StatusErrors    int          `json:"status_errors"`       // /status samples of a running node that got no answer
	// With a steady window (ClusterConfig.Steady) the window figures above
	// are over it; SettleS is from every node up to the shards settled (-1:
	// not by SettleTimeout); SteadyNote says why there is no window.
	// Pages is then websim's requests over the window, and FetcherResults
	// the nodes' fetcher results over it.
	SettleS    float64 `json:"settle_s,omitempty"`
	SteadyNote string  `json:"steady_note,omitempty"`
	// Growth: a growth run's figures (ClusterConfig.Grow).
	Growth         *GrowthResult `json:"growth,omitempty"`
	FetcherResults int64         `json:"fetcher_results,omitempty"`
	Error          string        `json:"error,omitempty"`
}

// ClusterTarget is one of the targets and whether the run met it.
type ClusterTarget struct {
	Want string  `json:"want"`
	Got  float64 `json:"got"`
	Met  bool    `json:"met"`
}

// ClusterResult is what RunCluster measured.
type ClusterResult struct {
	Runs   []ClusterRun `json:"runs"`
	Websim ProcStats    `json:"websim"`
	// PrimedFlakyHosts: hosts whose robots.txt answers its first requests
	// with 503 (synth.RobotsFlaky), asked for it that many times before
	// the first run, so that every run sees the same web (websim keeps
	// that count across a statistics reset).
	PrimedFlakyHosts int                      `json:"primed_flaky_robots_hosts"`
	Targets          map[string]ClusterTarget `json:"targets"`
	// Quota is how the nodes' CPU was capped (Mode "off": not asked;
	// "none": asked, but the nodes ran uncapped, Note says why).
	Quota  ClusterQuota `json:"cpu_quota"`
	Dir    string       `json:"dir,omitempty"` // the run directory, when kept
	NumCPU int          `json:"num_cpu"`
}

// ratios sets each run's ratio to the mean pages/s of the runs with the
// fewest nodes that crawled (the 1-node runs when there are some).
func (res *ClusterResult) ratios() {
	base := 0
	for _, r := range res.Runs {
		if r.PagesPerSec > 0 && (base == 0 || r.Nodes < base) {
			base = r.Nodes
		}
	}
	if base == 0 {
		return
	}
	var sum float64
	var n int
	for _, r := range res.Runs {
		if r.Nodes == base && r.PagesPerSec > 0 {
			sum += r.PagesPerSec
			n++
		}
	}
	for i := range res.Runs {
		res.Runs[i].Ratio, res.Runs[i].RatioBaseNodes = res.Runs[i].PagesPerSec/(sum/float64(n)), base
	}
}

// targets: for each configuration of more nodes than the ratios' base
// (the first run of each), its ratio: uncapped (every node on this box),
// at least 0.85; capped (fixed-size machines, scaled),
// at least 0.9 × nodes/base. No politeness breach in any run.
func (res *ClusterResult) targets(capped bool) map[string]ClusterTarget {
	t := map[string]ClusterTarget{}
	breaches := 0
	for _, r := range res.Runs {
		breaches += r.Breaches
		key := fmt.Sprintf("ratio_%d_nodes", r.Nodes)
		if r.RatioBaseNodes != 1 {
			key = fmt.Sprintf("ratio_%d_to_%d_nodes", r.Nodes, r.RatioBaseNodes)
		}
		if r.Kill != nil {
			key += "_killed"
		}
		if _, seen := t[key]; r.Nodes > r.RatioBaseNodes && r.Ratio > 0 && !seen {
			want, desc := clusterRatioTarget, fmt.Sprintf("≥ %.2f", clusterRatioTarget)
			if capped {
				want = clusterScaleTarget * float64(r.Nodes) / float64(r.RatioBaseNodes)
				desc = fmt.Sprintf("≥ %.2f (%.1f × %d/%d)", want, clusterScaleTarget, r.Nodes, r.RatioBaseNodes)
			}
			t[key] = ClusterTarget{desc, r.Ratio, r.Ratio >= want}
		}
	}
	t["politeness_breaches"] = ClusterTarget{"0", float64(breaches), breaches == 0}
	for _, r := range res.Runs {
		if r.Growth != nil {
			growthTargets(r.Growth, t)
			break
		}
	}
	return t
}

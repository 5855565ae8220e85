package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// RunCluster serves the web cfg describes with one websim and crawls it
// with a site of each number of nodes in cfg.Nodes in turn (websim's
// statistics reset in between), every node its own `site up` process.
// A configuration that is cut or has a failed node is reported, and the
// next one runs; the error then joins ErrCrawlCut or ErrNodeFailed for
// each. Setup failures and ctx's end return at once.
func RunCluster(ctx context.Context, cfg ClusterConfig) (ClusterResult, error) {
	res := ClusterResult{NumCPU: runtime.NumCPU()}
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return res, err
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	dir, err := makeRunDir(cfg.Dir, "cluster")
	if err != nil {
		return res, err
	}
	if cfg.Keep {
		res.Dir = dir
	} else {
		defer os.RemoveAll(dir)
	}
	simBin, siteBin, err := buildBinaries(ctx, cfg.ModuleRoot, cfg.WebsimBinary, cfg.SiteBinary, dir, cfg.Progress)
	if err != nil {
		return res, err
	}
	sc := cfg.siteConfig()
	cfg.Progress("starting websim: %d %s hosts × %d pages on %d addresses", cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs)
	sim, web, err := startSim(ctx, &sc, dir, simBin, nil)
	if err != nil {
		return res, err
	}
	defer sim.stop()
	res.Websim.PID = sim.pid
	seeds := filepath.Join(dir, "seeds.txt")
	if err := writeSeeds(seeds, web); err != nil {
		return res, err
	}
	if res.PrimedFlakyHosts, err = primeFlakyRobots(ctx, web); err != nil {
		return res, err
	}
	quota, qinfo := setupCPUQuota(cfg.NodeCPUs)
	res.Quota = qinfo
	switch {
	case quota != nil:
		cfg.Progress("each node in its own CPU quota: %g core (%s, %d µs per %d µs period, under %s); websim and bench outside",
			cfg.NodeCPUs, qinfo.Mode, qinfo.QuotaUS, qinfo.PeriodUS, qinfo.Parent)
		if worst := float64(slices.Max(cfg.Nodes)) * cfg.NodeCPUs; worst >= float64(res.NumCPU) {
			cfg.Progress("warning: %d nodes × %g core = %g cores, not less than this machine's %d: the quotas are not the limit, the box is",
				slices.Max(cfg.Nodes), cfg.NodeCPUs, worst, res.NumCPU)
		}
		if qinfo.Note != "" {
			cfg.Progress("cgroups: %s", qinfo.Note)
		}
	case qinfo.Mode == QuotaNone:
		cfg.Progress("%s", qinfo.Note)
	}
	certsDir := ""
	if cfg.TLS {
		certsDir = filepath.Join(dir, "certs")
		if err := issueClusterCerts(certsDir, slices.Max(cfg.Nodes)); err != nil {
			return res, err
		}
	}
	var errs []error
	for i, n := range cfg.Nodes {
		r := &clusterRun{cfg: &cfg, sim: sim, web: web, bin: siteBin, seeds: seeds, n: n, certs: certsDir,
			dir: filepath.Join(dir, fmt.Sprintf("run%d-%dnodes", i+1, n)), kill: cfg.KillAfter > 0 && n >= 3,
			quota: quota, tag: fmt.Sprintf("run%d", i+1)}
		run, err := r.run(ctx)
		if !cfg.Keep {
			os.RemoveAll(r.dir)
		}
		if err != nil && (ctx.Err() != nil || run == nil) {
			return res, err
		}
		res.Runs = append(res.Runs, *run)
		if err != nil {
			errs = append(errs, fmt.Errorf("%d nodes: %w", n, err))
		}
	}
	sim.cost(&res.Websim)
	res.ratios()
	res.Targets = res.targets(cfg.NodeCPUs > 0 && res.Quota.Capped())
	return res, errors.Join(errs...)
}

// clusterRun is one configuration of RunCluster.
type clusterRun struct {
	cfg   *ClusterConfig
	certs string // the deployment's certificates ("": no TLS)
	sim   *simProc
	web   *synth.Web
	bin   string
	seeds string
	n     int
	dir   string
	kill  bool
	quota *cpuQuota // nil: no CPU quota
	tag   string    // the run's part of its nodes' cgroup names

	nodes   []*clusterNode
	members members // the nodes' processes, in the same order
	simPts  []cpuPoint
	simHWM  int64
	started time.Time // the first node's start
	up      time.Time // the first node up (site.json)
	grace   time.Duration
	killed  *ClusterKill
	killAt  time.Time
	// replanBase is the leader's rounds.replanned when the node was killed.
	replanBase string
	movesBase  int
	movesLast  int
	statusErrs int
	groups     []*nodeCgroup // made, not yet removed
	busy       []*busyMachine
	busyCores  float64 // what they used, once stopped
	// The steady window (steady.go): every node up at allUp; the window
	// from steadyStart to steadyEnd; settleS from allUp to its start (-1:
	// the shards had not settled by SettleTimeout).
	allUp, settledAt, steadyStart, steadyEnd time.Time
	settleS                                  float64
	steadyReqFrom, steadyReqTo               int64  // websim's requests as the window opened and closed
	grow                                     growth // a growth run's state (ClusterConfig.Grow)
}

// clusterNode is one node (a `site up` process) of a clusterRun.
type clusterNode struct {
	*member
	roles []string    // in its samples, in order of first sight
	cg    *nodeCgroup // nil: no quota
	cgPts []cpuPoint  // its cgroup's CPU usage
	// steadyFrom and steadyTo: its counters as the steady window opened
	// and closed.
	steadyFrom, steadyTo steadyCounters
}

// run runs the configuration; run is nil when it could not start at all.
func (r *clusterRun) run(ctx context.Context) (*ClusterRun, error) {
	cfg := r.cfg
	cfg.Progress("%d node(s): starting", r.n)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	begin := time.Now()
	r.grace = min(siteGrace, cfg.Timeout/5)
	defer r.close()
	if err := resetWebsimStats(ctx, r.sim.admin); err != nil {
		return nil, err
	}
	r.samplePoint(time.Now()) // websim's CPU at the start
	out := &ClusterRun{Nodes: r.n}
	// Starting is bounded by the run's timeout; the crawl stops its nodes
	// with the grace left, and what follows is quick.
	sctx, cancel := context.WithDeadline(ctx, begin.Add(cfg.Timeout))
	startErr := r.start(sctx)
	cancel()
	ending := ""
	if startErr == nil {
		var err error
		if ending, err = r.crawl(ctx, begin.Add(cfg.Timeout-r.grace)); err != nil {
			return nil, err
		}
	} else {
		if ctx.Err() != nil {
			return nil, startErr
		}
		r.stopAll()
		ending = "failed"
	}
	r.samplePoint(time.Now())
	if r.kill && r.killed == nil && startErr == nil {
		out.KillNote = "no node was killed: the crawl ended before the kill was due, or no follower answered"
	}
	err := r.collect(ctx, out, ending)
	r.stopAll() // (all have exited already) before their groups go
	out.BusyMachines, out.BusyCores = r.cfg.BusyMachines, r.busyCores
	if gerr := r.removeGroups(); gerr != nil {
		out.CgroupNote = gerr.Error()
		r.cfg.Progress("cgroups: %v", gerr)
	}
	if err != nil {
		return out, err
	}
	if startErr != nil {
		out.Error = startErr.Error()
		return out, startErr
	}
	if err = r.members.failed(); err != nil {
		out.Exit = "failed"
	} else {
		err = endingErr(ending)
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out, err
}

// start starts the first node, waits for it, then starts the others
// (joining through it) and waits for them.
func (r *clusterRun) start(ctx context.Context) error {
	first, err := r.startNode("n1", nil)
	if err != nil {
		return err
	}
	r.started = first.started
	if err := r.waitUp(ctx, first); err != nil {
		return err
	}
	r.up = first.upAt
	for i := 2; i <= r.n; i++ {
		if _, err := r.startNode(fmt.Sprintf("n%d", i), first); err != nil {
			return err
		}
	}
	for _, nd := range r.nodes[1:] {
		if err := r.waitUp(ctx, nd); err != nil {
			return err
		}
	}
	r.cfg.Progress("%d node(s) up: %s", r.n, r.members.upList())
	for i := 1; i <= r.cfg.BusyMachines && r.quota != nil; i++ {
		b, err := r.startBusy(fmt.Sprintf("busy%d", i))
		if err != nil {
			return err
		}
		r.busy = append(r.busy, b)
	}
	if len(r.busy) > 0 {
		r.cfg.Progress("%d busy machine(s) of %g core beside the nodes", len(r.busy), r.cfg.NodeCPUs)
	}
	return nil
}

// busyMachine is a cgroup of a node's quota holding one busy loop
// (ClusterConfig.BusyMachines).
type busyMachine struct {
	cg    *nodeCgroup
	proc  *proc
	start time.Time
}

// startBusy starts one busy machine.
func (r *clusterRun) startBusy(name string) (*busyMachine, error) {
	cg, err := r.quota.create(r.tag, name)
	if err != nil {
		return nil, err
	}
	r.groups = append(r.groups, cg)
	bin, args := cg.command("sh", []string{"-c", "while :; do :; done"})
	p, err := startProc(bin, args, nil, procLogTail, r.grace)
	if err != nil {
		return nil, fmt.Errorf("bench: start busy machine %s: %w", name, err)
	}
	return &busyMachine{cg: cg, proc: p, start: time.Now()}, nil
}

// stopBusy stops the busy machines and returns the cores they used, all
// together, over their lives.
func (r *clusterRun) stopBusy() float64 {
	var cores float64
	for _, b := range r.busy {
		used, _ := b.cg.usage()
		if life := time.Since(b.start).Seconds(); life > 0 {
			cores += used.Seconds() / life
		}
		b.proc.stop()
	}
	r.busy = nil
	return cores
}

// issueClusterCerts makes a CA in dir and the certificates of nodes n1..nN
// of site "bench".
func issueClusterCerts(dir string, n int) error {
	if err := certs.Init(dir); err != nil {
		return fmt.Errorf("bench: certificates: %w", err)
	}
	for i := 1; i <= n; i++ {
		if err := certs.IssueNode(dir, "bench", fmt.Sprintf("n%d", i)); err != nil {
			return fmt.Errorf("bench: certificates: %w", err)
		}
	}
	return nil
}

// nodeArgs are the `site up` flags of node name with data in data; join is
// nil for the first.
func (r *clusterRun) nodeArgs(name, data string, join *clusterNode) []string {
	c := r.cfg
	args := []string{"up", "--region", "bench", "--node", name, "--data", data, "--listen", "127.0.0.1:0",
		"--workers", strconv.Itoa(c.Workers), "--progress", "5s", "--log-level", "info"}
	if c.NoSync {
		args = append(args, "--no-sync")
	}
	if c.Expect && len(r.nodes) < r.n { // not the nodes a growth run adds
		args = append(args, "--expect-nodes", strconv.Itoa(r.n))
	}
	if r.certs != "" {
		args = append(args, "--certs", r.certs)
	}
	if c.Replicas > 0 {
		args = append(args, "--replicas", strconv.Itoa(c.Replicas))
	}
	if c.Shards > 0 && join == nil {
		args = append(args, "--shards", strconv.Itoa(c.Shards))
	}
	if join != nil {
		return append(args, "--join", join.listen)
	}
	args = append(args, "--seeds", r.seeds, "--dns", r.sim.dns, "--allow-private",
		"--rounds", strconv.Itoa(c.Rounds), "--width", strconv.Itoa(c.Width), "--per-host", strconv.Itoa(c.PerHost),
		"--host-delay", c.HostDelay.String(), "--ip-delay", c.IPDelay.String(), "--max-crawl-delay", c.MaxCrawlDelay.String())
	return append(args, c.SiteFlags...)
}

// startNode starts one node process (in its own cgroup with a quota).
func (r *clusterRun) startNode(name string, join *clusterNode) (*clusterNode, error) {
	data := filepath.Join(r.dir, name)
	bin, args := r.bin, r.nodeArgs(name, data, join)
	var cg *nodeCgroup
	if r.quota != nil {
		var err error
		if cg, err = r.quota.create(r.tag, name); err != nil {
			return nil, err
		}
		r.groups = append(r.groups, cg)
		bin, args = cg.command(bin, args)
	}
	m, err := startMember(r.dir, name, "node "+name, data, bin, args, r.grace)
	if err != nil {
		return nil, err
	}
	nd := &clusterNode{member: m, cg: cg}
	if cg != nil {
		nd.cgPts = []cpuPoint{{at: m.started}}
	}
	r.nodes, r.members = append(r.nodes, nd), append(r.members, m)
	return nd, nil
}

// waitUp waits for a node's site.json (written once it is seeded or has
// joined, and serving).
// With a quota, it checks that the node's process is in its group.
func (r *clusterRun) waitUp(ctx context.Context, nd *clusterNode) error {
	if err := nd.waitUp(ctx, "node "+nd.name); err != nil || nd.cg == nil {
		return err
	}
	in, err := nd.cg.holds(nd.proc.pid)
	switch {
	case err != nil:
		return fmt.Errorf("bench: node %s (pid %d): %w", nd.name, nd.proc.pid, err)
	case !in:
		return fmt.Errorf("bench: node %s (pid %d) is not in its cgroup %s: its CPU would not be capped", nd.name, nd.proc.pid, nd.cg.cpu)
	}
	return nil
}

// crawl samples the nodes until every one has exited (or been killed). It
// stops them at deadline (ending "cut") or when the steady window closes
// (ending "steady"), and kills one when the kill is due.
func (r *clusterRun) crawl(ctx context.Context, deadline time.Time) (string, error) {
	client := &http.Client{Timeout: statusTimeout}
	defer client.CloseIdleConnections()
	killDue := false
	r.allUp = time.Now()
	ending, err := crawl(ctx, crawlLoop{every: r.cfg.SampleEvery, deadline: deadline, what: "the nodes", log: r.cfg.Progress,
		done: r.members.allExited, stop: r.stopAll,
		sample: func(at time.Time) string {
			r.sample(client, at)
			ending := ""
			if r.cfg.Grow > 0 && r.growStep(time.Now()) {
				ending = "grown"
				r.stopAll()
			}
			if r.cfg.Steady > 0 && r.steadyStep(time.Now()) {
				// Stopped here, before the kill's watch below (the
				// loop's stop then finds them stopped).
				ending = "steady"
				r.stopAll()
			}
			// The kill is due KillAfter after the first node was up.
			// With a steady window, it is timed from its opening:
			// every shard is then where the placement wants it, so the
			// time until every shard is led again is that of a settled
			// site, not of one still growing.
			due := r.cfg.Steady == 0 && !at.Before(r.up.Add(r.cfg.KillAfter)) ||
				r.cfg.Steady > 0 && !r.steadyStart.IsZero() && time.Since(r.steadyStart) >= r.cfg.KillAfter
			if r.kill && ending == "" && due {
				killDue = true
			}
			if killDue && r.killed == nil {
				r.killOne(client)
			}
			if r.killed != nil {
				r.watchReplan()
				r.watchLeaders()
			}
			return ending
		},
		progress: func(now time.Time) bool {
			r.progress(now)
			return true
		}})
	if err != nil {
		return ending, fmt.Errorf("bench: cluster run: %w", err)
	}
	return ending, nil
}

// sample reads every running node's /status, CPU and memory at now, and
// websim's.
func (r *clusterRun) sample(client *http.Client, now time.Time) {
	r.statusErrs += r.members.sample(client, now, func(i int, st *site.Status) {
		nd := r.nodes[i]
		if nd.cg != nil {
			if cpu, ok := nd.cg.usage(); ok {
				nd.cgPts = append(nd.cgPts, cpuPoint{now, cpu})
			}
		}
		if st != nil && !slices.Contains(nd.roles, st.Role) {
			nd.roles = append(nd.roles, st.Role)
		}
	})
	r.samplePoint(now)
}

// samplePoint takes websim's CPU and memory.
func (r *clusterRun) samplePoint(now time.Time) {
	if cpu, err := procCPU(r.sim.pid); err == nil {
		r.simPts = append(r.simPts, cpuPoint{now, cpu})
	}
	r.simHWM = max(r.simHWM, peakRSS(r.sim.pid))
}

// progress prints one line of the nodes' state.
func (r *clusterRun) progress(now time.Time) {
	var b strings.Builder
	for _, nd := range r.nodes {
		switch {
		case nd.killed:
			fmt.Fprintf(&b, " | %s killed", nd.name)
		case nd.done():
			fmt.Fprintf(&b, " | %s exited", nd.name)
		case nd.last != nil:
			cpu := time.Duration(0)
			if len(nd.pts) > 0 {
				cpu = nd.pts[len(nd.pts)-1].cpu
			}
			fmt.Fprintf(&b, " | %s %s round %d, fetched %d, in flight %d, CPU %.0fs",
				nd.name, nd.last.Role, nd.last.Round, nd.last.Fetcher.Done, nd.last.Fetcher.InFlight, cpu.Seconds())
			if n := len(nd.cgPts); n > 0 {
				fmt.Fprintf(&b, " (cgroup %.0fs)", nd.cgPts[n-1].cpu.Seconds())
			}
		}
	}
	r.cfg.Progress("%5.0fs%s", now.Sub(r.started).Seconds(), b.String())
}

// stopAll stops every node still running: SIGTERM to all, then each is
// killed if it has not exited after the grace.
func (r *clusterRun) stopAll() {
	if len(r.busy) > 0 {
		r.busyCores = r.stopBusy()
	}
	r.members.stop()
}

// close stops the nodes (if any still runs), closes their logs and
// removes their cgroups.
func (r *clusterRun) close() {
	r.stopAll()
	r.members.closeLogs()
	if err := r.removeGroups(); err != nil {
		r.cfg.Progress("cgroups: %v", err)
	}
}

// removeGroups removes the nodes' cgroups (their processes have exited),
// each within cgroupRmBound; a group that will not go is kept in the list
// and named in the error.
func (r *clusterRun) removeGroups() error {
	var errs []error
	var left []*nodeCgroup
	for _, g := range r.groups {
		if err := g.remove(); err != nil {
			errs = append(errs, fmt.Errorf("bench: remove cgroup %s: %w", g.cpu, err))
			left = append(left, g)
		}
	}
	r.groups = left
	return errors.Join(errs...)
}

// collect reads what the stopped nodes left and websim's statistics, and
// fills out.
func (r *clusterRun) collect(ctx context.Context, out *ClusterRun, ending string) error {
	// A round's line is written by the node that led its update: once,
	// unless that node died after writing it and its successor wrote it
	// again (DuplicateRounds). A site of shards has a line per shard's
	// round (each shard's in DATA/shards/GROUP/stats), merged by round
	// number as bench site merges them.
	type roundKey struct {
		shard string // "" for the old design's one crawl database
		round uint64
	}
	byRound := map[roundKey]rounds.RoundStats{}
	led := map[string]int{}
	sharded := false
	for _, nd := range r.nodes {
		files, err := roundFiles(nd.data)
		if err != nil {
			return err
		}
		sharded = sharded || len(files) > 1
		for shard, f := range files {
			stats, err := readRoundStats(f)
			if err != nil {
				return err
			}
			led[nd.name] += len(stats)
			for _, s := range stats {
				k := roundKey{shard, s.Round}
				if _, dup := byRound[k]; dup {
					out.DuplicateRounds++
					continue
				}
				byRound[k] = s
			}
		}
	}
	stats := make([]rounds.RoundStats, 0, len(byRound))
	for _, s := range byRound {
		stats = append(stats, s)
	}
	if sharded {
		stats = mergeRounds(stats)
	}
	sort.Slice(stats, func(i, j int) bool { return stats[i].Round < stats[j].Round })

	var t SiteResult
	start, end := t.table(stats, r.started)
	out.WindowS, out.Pages, out.Pages2xx, out.PagesPerSec, out.FirstRoundAtS = t.WindowS, t.Pages, t.Pages2xx, t.PagesPerSec, t.FirstRoundAtS
	for i, s := range stats {
		out.Rounds = append(out.Rounds, ClusterRound{RoundRow: t.Rounds[i], Parts: s.Parts, StagedBytes: s.StagedBytes, Leader: s.Leader})
		out.StagedBytes += s.StagedBytes
	}
	for _, nd := range r.nodes {
		cn := ClusterNode{Name: nd.name, PID: nd.proc.pid, Roles: nd.roles, Killed: nd.killed, Stopped: nd.stopped,
			PeakRSS: nd.hwm, RoundsLed: led[nd.name]}
		if !nd.upAt.IsZero() {
			cn.UpS = nd.upAt.Sub(nd.started).Seconds()
		}
		cn.Exit, cn.ExitCode, cn.CPUS = nd.proc.ended()
		if st := nd.last; st != nil {
			cn.Role, cn.Pages, cn.Retries = st.Role, st.Fetcher.Done, st.Fetcher.Retries
			cn.RaftSent, cn.RaftReceived = st.Traffic.RaftSent, st.Traffic.RaftReceived
			cn.APISent, cn.APIReceived = st.Traffic.APISent, st.Traffic.APIReceived
		}
		if len(stats) > 0 {
			cn.WindowCPUS = (cpuAt(nd.pts, end) - cpuAt(nd.pts, start)).Seconds()
		}
		cn.CPUPerPageUS = 1e6 * ratio(cn.WindowCPUS, float64(cn.Pages))
		if g := nd.cg; g != nil {
			r.cgroupCPU(nd, &cn, start, end, len(stats) > 0)
			out.SiteCgroupCPUS += cn.CgroupWindowCPUS
			out.MaxQuotaUse = max(out.MaxQuotaUse, cn.QuotaUse)
		}
		out.SiteCPUS += cn.WindowCPUS
		out.NodeBytes += cn.RaftSent + cn.APISent
		out.NodeList = append(out.NodeList, cn)
	}
	out.WallS = r.members.lastExit(r.started).Sub(r.started).Seconds()
	out.SiteCPUPerPageUS = 1e6 * ratio(out.SiteCPUS, float64(out.Pages))
	out.SiteCgroupCPUPerPageUS = 1e6 * ratio(out.SiteCgroupCPUS, float64(out.Pages))
	out.NodeBytesPerPage = ratio(float64(out.NodeBytes), float64(out.Pages))
	out.StagedBytesPerPage = ratio(float64(out.StagedBytes), float64(out.Pages))
	out.StatusErrors = r.statusErrs
	if len(r.simPts) > 0 {
		out.WebsimCPUS = (r.simPts[len(r.simPts)-1].cpu - r.simPts[0].cpu).Seconds()
		if len(stats) > 0 {
			out.WebsimWindowCPUS = (cpuAt(r.simPts, end) - cpuAt(r.simPts, start)).Seconds()
		}
	}
	if k := r.killed; k != nil {
		k.Moves = r.movesLast - r.movesBase
		if len(stats) > 0 {
			k.AtWindowS = r.killAt.Sub(start).Seconds()
		}
		out.Kill = k
	}

	out.Exit = crawlExit(ending, r.members.anyTail(exhaustedLine), r.cfg.Rounds, len(stats))

	if r.cfg.Steady > 0 {
		r.collectSteady(out)
	}
	if r.cfg.Grow > 0 {
		out.Growth = r.growthResult()
		if ending == "grown" {
			out.Exit = "grown"
		}
	}
	snap, err := fetchSnapshot(ctx, r.sim.admin)
	if err != nil {
		return err
	}
	out.WebsimRequests, out.UnknownHost = snap.Requests, snap.UnknownHost
	out.Breaches, out.BreachSample = politenessBreaches(r.web, snap, r.cfg.HostDelay, r.cfg.IPDelay, r.cfg.MaxCrawlDelay)
	return nil
}

// cgroupCPU fills a node's figures from its cgroup (its processes have
// exited: the group's counters are final); window: the run has rounds,
// from start to end.
func (r *clusterRun) cgroupCPU(nd *clusterNode, cn *ClusterNode, start, end time.Time, window bool) {
	g := nd.cg
	cn.Cgroup = g.cpu
	if total, ok := g.usage(); ok {
		cn.CgroupCPUS = total.Seconds()
		if n := len(nd.cgPts); !nd.exited.IsZero() && (n == 0 || nd.exited.After(nd.cgPts[n-1].at)) {
			nd.cgPts = append(nd.cgPts, cpuPoint{nd.exited, total})
		}
	}
	if window {
		cn.CgroupWindowCPUS = (cpuAt(nd.cgPts, end) - cpuAt(nd.cgPts, start)).Seconds()
		cn.CgroupCPUPerPageUS = 1e6 * ratio(cn.CgroupWindowCPUS, float64(cn.Pages))
		cn.QuotaUse = ratio(cn.CgroupWindowCPUS, end.Sub(start).Seconds()*r.cfg.NodeCPUs)
	}
	periods, throttled, d := g.throttling()
	cn.Periods, cn.Throttled, cn.ThrottledS = periods, throttled, d.Seconds()
}

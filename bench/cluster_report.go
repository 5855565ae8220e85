package bench

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Report is a short human report of res: one line per configuration, then
// the nodes, then the rounds.
func (res ClusterResult) Report(cfg ClusterConfig) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	extent := extentOf(cfg.Rounds)
	p("cluster crawl: %d %s hosts × %d pages on %d addresses, %s, width %d, %d per host, %d workers per node\n",
		cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs, extent, cfg.Width, cfg.PerHost, cfg.Workers)
	p("  host delay %v, ip delay %v, max crawl-delay %v, fsync %v; websim and every node in their own processes on %d CPUs\n",
		cfg.HostDelay, cfg.IPDelay, cfg.MaxCrawlDelay, onOff(!cfg.NoSync), res.NumCPU)
	if cfg.Replicas > 0 {
		p("  site up --replicas %d on every node\n", cfg.Replicas)
	}
	q := res.Quota
	switch q.Mode {
	case QuotaV1, QuotaV2:
		p("  CPU quota: %g core per node (%s: %d µs per %d µs period), a cgroup per node under %s; CPU from %s; websim and bench outside\n",
			q.NodeCPUs, q.Mode, q.QuotaUS, q.PeriodUS, q.Parent, q.Accounting)
	case QuotaNone:
		p("  CPU quota: %g core per node asked, NONE APPLIED: %s\n", q.NodeCPUs, q.Note)
	default:
		p("  CPU quota: none (the nodes share the box uncapped)\n")
	}
	if q.Capped() && q.Note != "" {
		p("  cgroups: %s\n", q.Note)
	}
	base := "×base"
	if len(res.Runs) > 0 && res.Runs[0].RatioBaseNodes > 0 {
		base = fmt.Sprintf("×%d node", res.Runs[0].RatioBaseNodes)
	}
	p("\n  nodes  ended      rounds  window s  pages     pages/s  %7s  site CPU s  µs/page  cg µs/page  quota use  node B/page  staged B/page  websim CPU s  breaches\n", base)
	for _, r := range res.Runs {
		rt := "-"
		if r.Ratio > 0 {
			rt = fmt.Sprintf("%.3f", r.Ratio)
		}
		cg, use := "-", "-"
		if r.SiteCgroupCPUS > 0 {
			cg, use = fmt.Sprintf("%.0f", r.SiteCgroupCPUPerPageUS), fmt.Sprintf("%.2f", r.MaxQuotaUse)
		}
		p("  %5d  %-9s  %6d  %8.1f  %8d  %7.0f  %7s  %10.1f  %7.0f  %10s  %9s  %11.0f  %13.0f  %12.1f  %8d\n",
			r.Nodes, r.Exit, len(r.Rounds), r.WindowS, r.Pages, r.PagesPerSec, rt, r.SiteCPUS, r.SiteCPUPerPageUS, cg, use,
			r.NodeBytesPerPage, r.StagedBytesPerPage, r.WebsimWindowCPUS, r.Breaches)
	}
	p("  (µs/page: the nodes' CPU from /proc over the window, per page of the site; cg: the same from their cgroups; quota use: the busiest node's\n")
	p("   cgroup CPU over window × quota; node B/page: Raft on the wire + crawl-database API bodies sent, all nodes)\n")
	p("\n  nodes  node  roles seen                  exit                      pages  share   CPU s (window)  µs/page  cg CPU s  cg µs/page  quota use  throttled s  CPU s (all)  peak RSS  raft sent  api sent   led rounds\n")
	for _, r := range res.Runs {
		var total int64
		for _, n := range r.NodeList {
			total += n.Pages
		}
		for _, n := range r.NodeList {
			role := strings.Join(n.Roles, ">")
			exit := n.Exit
			if n.Killed {
				exit += " (bench)"
			} else if n.Stopped {
				exit += " (stopped)"
			}
			cgs, cgp, use, thr := "-", "-", "-", "-"
			if n.Cgroup != "" {
				cgs, cgp = fmt.Sprintf("%.1f", n.CgroupWindowCPUS), fmt.Sprintf("%.0f", n.CgroupCPUPerPageUS)
				use, thr = fmt.Sprintf("%.2f", n.QuotaUse), fmt.Sprintf("%.1f", n.ThrottledS)
			}
			p("  %5d  %-4s  %-26s  %-24s  %7d  %5.1f%%  %14.1f  %7.0f  %8s  %10s  %9s  %11s  %11.1f  %8s  %9s  %9s  %10d\n",
				r.Nodes, n.Name, role, exit, n.Pages, 100*ratio(float64(n.Pages), float64(total)), n.WindowCPUS, n.CPUPerPageUS,
				cgs, cgp, use, thr, n.CPUS, mib(n.PeakRSS), mibf(n.RaftSent), mibf(n.APISent), n.RoundsLed)
		}
	}
	p("  (roles: in the node's /status samples, in order of first sight; pages: its fetcher.done at its last sample, retries included)\n")
	for _, r := range res.Runs {
		if k := r.Kill; k != nil {
			replan := "no part moved"
			if k.ReplanS >= 0 {
				replan = fmt.Sprintf("re-plan %.2fs after the kill, last move %.2fs after it (leader %s moved %d parts)", k.ReplanS, k.ReplanLastS, k.Leader, k.Moves)
			}
			p("  kill (%d nodes): %s SIGKILLed %.1fs after n1 was up (%.1fs into the window) holding %d parts; %s\n",
				r.Nodes, k.Node, k.AfterS, k.AtWindowS, k.Parts, replan)
			back := "not within the run"
			if k.LeadersBackS >= 0 {
				back = fmt.Sprintf("%.2fs after the kill (sampled every %v)", k.LeadersBackS, cfg.SampleEvery)
			}
			p("  kill (%d nodes): every shard led again %s; probe %q, %d shard(s), %d led by %s when killed\n",
				r.Nodes, back, k.LeaderProbe, k.Shards, k.ShardsLed, k.Node)
		}
		if r.KillNote != "" {
			p("  kill (%d nodes): %s\n", r.Nodes, r.KillNote)
		}
		if r.Error != "" {
			p("  error (%d nodes): %s\n", r.Nodes, firstLine(r.Error))
		}
		if r.BusyMachines > 0 {
			p("  busy machines (%d nodes): %d beside the nodes, using %.2f cores together\n", r.Nodes, r.BusyMachines, r.BusyCores)
		}
		if r.CgroupNote != "" {
			p("  cgroups (%d nodes): %s\n", r.Nodes, r.CgroupNote)
		}
		for _, s := range r.BreachSample[:min(len(r.BreachSample), 10)] {
			p("  breach (%d nodes): %s\n", r.Nodes, s)
		}
	}
	p("\n  rounds  (start/end s from the window's start; fetched; parts; staged bytes; update leader)\n")
	for _, r := range res.Runs {
		var cells []string
		for _, rd := range r.Rounds {
			cells = append(cells, fmt.Sprintf("%d: %.1f–%.1f %d p%d %s %s", rd.Round, rd.StartS, rd.EndS, rd.Fetched, rd.Parts,
				mibf(rd.StagedBytes), rd.Leader))
		}
		p("  %d node(s): %s\n", r.Nodes, strings.Join(cells, " | "))
	}
	p("\n  websim       CPU %.1fs over all runs; peak RSS %s; %d flaky robots.txt hosts primed before the first run (every run sees the same web)\n",
		res.Websim.CPUS, mib(res.Websim.PeakRSS), res.PrimedFlakyHosts)
	for _, r := range res.Runs {
		if g := r.Growth; g != nil {
			writeGrowth(&b, g)
		}
	}
	writeTargets(&b, res.Targets)
	return b.String()
}

// writeTargets writes one line per target, sorted by name.
func writeTargets(b *strings.Builder, targets map[string]ClusterTarget) {
	for _, k := range slices.Sorted(maps.Keys(targets)) {
		t := targets[k]
		verdict := "met"
		if !t.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(b, "  target %-26s want %-8s got %-10.4g %s\n", k, t.Want, t.Got, verdict)
	}
}

// mibf shows a byte count in MiB with a decimal (KiB below 1 MiB).
func mibf(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// writeGrowth writes a growth run's windows and figures.
func writeGrowth(b *strings.Builder, g *GrowthResult) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n  growth %d → %d nodes: joins up at %v s after the first join's start (last %.1f s)%s\n", g.From, g.To, roundAll(g.JoinsS), g.LastJoinS, noteOf(g.Note))
	p("  window (s from the first join)  nodes  pages    pages/s  × before\n")
	for _, w := range g.Windows {
		rt := "-"
		if g.BaseRate > 0 {
			rt = fmt.Sprintf("%.2f", w.PagesPerSec/g.BaseRate)
		}
		p("  %6.0f … %-6.0f                 %5d  %7d  %7.0f  %s\n", w.FromS, w.ToS, w.Nodes, w.Pages, w.PagesPerSec, rt)
	}
	exceed := "never"
	if g.ExceedS >= 0 {
		exceed = fmt.Sprintf("%.0f s after the first join", g.ExceedS)
	}
	p("  before the first join %.0f pages/s; above it %s; 60 s after the last join %.0f (%.2f×); %.0f s after it %.0f (%.2f×)\n",
		g.BaseRate, exceed, g.At60, g.At60Ratio, g.TailS, g.AtTail, g.AtTailRatio)
}

// roundAll rounds each to a tenth.
func roundAll(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Round(x*10) / 10
	}
	return out
}

// noteOf is ": note" or "".
func noteOf(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

package bench

import (
	"fmt"
	"sort"
	"strings"
)

// Report is a short human report of res: one line per run, the
// comparisons, the processes, the cache over the rounds and the targets.
func (res FederationResult) Report(cfg FederationConfig) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	extent := extentOf(cfg.Rounds)
	n := len(FederationSites())
	web := fmt.Sprintf("%d %s hosts × %d pages on %d addresses", cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs)
	if r := res.Replayed; r != nil {
		web = fmt.Sprintf("websim replay of %d WARC files (%d URLs of %d hosts, port %d) on %d addresses", r.Files, r.URLs, r.Hosts, r.Port, min(cfg.IPs, r.Hosts))
	}
	p("federation crawl: %s, %s; %d sites (%s, %d replicas), width %d per site, %d per host, %d workers per process\n",
		web, extent, n, cfg.Partitioner, cfg.Replicas, cfg.Width, cfg.PerHost, cfg.Workers)
	if len(cfg.Stretched) > 0 {
		p("  stretched: one site of %d nodes, width %d, every node-to-node connection (Raft, crawl-database API, reports) through a WAN link\n", n, cfg.Width*n)
	}
	p("  host delay %v, ip delay %v, max crawl-delay %v, fsync %v; websim, every site and node in their own processes, the WAN proxies in this one, all on %d CPUs\n",
		cfg.HostDelay, cfg.IPDelay, cfg.MaxCrawlDelay, onOff(!cfg.NoSync), res.NumCPU)
	p("\n  mode       delay  ended      rounds  window s  pages    pages/s  mean upd s  max upd s  WAN B/page  WAN bytes   counted     cache hit    remote URLs  CPU µs/page  websim CPU s  cores  breaches  load\n")
	for _, r := range res.Runs {
		hit := "-"
		if r.CacheLookups > 0 {
			hit = fmt.Sprintf("%.1f/%.1f%%", 100*r.CacheHitRate, 100*r.CacheHitRateLast)
		}
		p("  %-9s  %3.0fms  %-9s  %6d  %8.1f  %7d  %7.0f  %10.2f  %9.2f  %10.0f  %-10s  %-10s  %11s  %11d  %11.0f  %12.1f  %5.2f  %8d  %.2f\n",
			r.Mode, r.DelayMS, r.Exit, len(r.Rounds), r.WindowS, r.Pages, r.PagesPerSec, r.MeanUpdateS, r.MaxUpdateS,
			r.WANBytesPerPage, mibf(r.WANBytes), mibf(r.CountedBytes), hit, r.RemoteURLs, r.SiteCPUPerPageUS, r.WebsimWindowCPUS,
			ratio(r.SiteCPUS+r.WebsimWindowCPUS, r.WindowS), r.Breaches, r.Load[0])
	}
	p("  (rounds: of every site; WAN: Σ bytes both ways through the proxies; counted: the sites' own TLS byte counts of their federation calls, or the nodes' Raft + API bytes sent;\n")
	p("   cache hit: the URL-sent cache over the run / over each site's last round; cores: the sites' or nodes' and websim's CPU over the window, in cores)\n")
	if res.Loss20to80 >= 0 {
		p("\n  loss from 20 to 80 ms: %.1f%% of pages/s (ratio of two runs of this invocation)\n", 100*res.Loss20to80)
	}
	for _, c := range res.Comparisons {
		p("  federated vs stretched at %gms: %.1f%% less inter-site traffic per page, %.2f× the pages/s\n", c.DelayMS, 100*c.TrafficSaved, c.Speedup)
	}
	p("\n  mode       delay  member  role       exit                      rounds  pages    CPU s (window)  µs/page  peak RSS  sent URLs  recv URLs  cache hit  TLS out    TLS in     raft sent  api sent\n")
	for _, r := range res.Runs {
		for _, m := range r.Members {
			exit := m.Exit
			if m.Stopped {
				exit += " (stopped)"
			}
			hit := "-"
			if m.CacheLookups > 0 {
				hit = fmt.Sprintf("%.2f%%", 100*m.CacheHitRate)
			}
			p("  %-9s  %3.0fms  %-6s  %-9s  %-24s  %6d  %7d  %14.1f  %7.0f  %8s  %9d  %9d  %9s  %-9s  %-9s  %-9s  %s\n",
				r.Mode, r.DelayMS, m.Name, m.Role, exit, m.Rounds, m.Pages, m.WindowCPUS, m.CPUPerPageUS, mib(m.PeakRSS),
				m.SentURLs, m.RecvURLs, hit, mibf(m.TLSBytesOut), mibf(m.TLSBytesIn), mibf(m.RaftSent), mibf(m.APISent))
		}
	}
	p("\n  URL-sent cache hit rate after each round (cumulative, per site; federated runs)\n")
	for _, r := range res.Runs {
		if r.Mode != ModeFederated {
			continue
		}
		bySite := map[string][]string{}
		var names []string
		for _, rd := range r.Rounds {
			if _, ok := bySite[rd.Site]; !ok {
				names = append(names, rd.Site)
			}
			bySite[rd.Site] = append(bySite[rd.Site], fmt.Sprintf("%d:%.1f%%", rd.Round, 100*rd.CacheHitRate))
		}
		sort.Strings(names)
		for _, s := range names {
			p("  %3.0fms %-5s %s\n", r.DelayMS, s, strings.Join(bySite[s], " "))
		}
	}
	for _, r := range res.Runs {
		if r.Error != "" {
			p("  error (%s at %gms): %s\n", r.Mode, r.DelayMS, firstLine(r.Error))
		}
		for _, s := range r.BreachSample[:min(len(r.BreachSample), 10)] {
			p("  breach (%s at %gms): %s\n", r.Mode, r.DelayMS, s)
		}
	}
	p("\n  websim       CPU %.1fs over all runs; peak RSS %s; %d flaky robots.txt hosts primed before the first run\n",
		res.Websim.CPUS, mib(res.Websim.PeakRSS), res.PrimedFlakyHosts)
	writeTargets(&b, res.Targets)
	p("  (%d CPUs shared by every site or node, websim and the proxies: ratios within one invocation mean more than absolute figures)\n", res.NumCPU)
	return b.String()
}

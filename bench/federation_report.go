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
	web := fmt.Sprintf("%d %s hosts × %d pages on %d addresses", cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs)
	if r := res.Replayed; r != nil {
		web = fmt.Sprintf("websim replay of %d WARC files (%d URLs of %d hosts, port %d) on %d addresses", r.Files, r.URLs, r.Hosts, r.Port, min(cfg.IPs, r.Hosts))
	}
	if res.Geo != nil {
		res.geoReport(&b, cfg, web)
	} else {
		res.runsReport(&b, cfg, web)
	}
	p("\n  mode        delay  member  role       exit                      rounds  pages    CPU s (window)  µs/page  peak RSS  sent URLs  recv URLs  cache hit  TLS out    TLS in     raft sent  api sent\n")
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
			p("  %-10s  %3.0fms  %-6s  %-9s  %-24s  %6d  %7d  %14.1f  %7.0f  %8s  %9d  %9d  %9s  %-9s  %-9s  %-9s  %s\n",
				r.label(), r.DelayMS, m.Name, m.Role, exit, m.Rounds, m.Pages, m.WindowCPUS, m.CPUPerPageUS, mib(m.PeakRSS),
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
			p("  %-10s %3.0fms %-5s %s\n", r.label(), r.DelayMS, s, strings.Join(bySite[s], " "))
		}
	}
	for _, r := range res.Runs {
		if r.Error != "" {
			p("  error (%s at %gms): %s\n", r.label(), r.DelayMS, firstLine(r.Error))
		}
		for _, s := range r.BreachSample[:min(len(r.BreachSample), 10)] {
			p("  breach (%s at %gms): %s\n", r.label(), r.DelayMS, s)
		}
	}
	p("\n  websim       CPU %.1fs over all runs; peak RSS %s; %d flaky robots.txt hosts primed before the first run\n",
		res.Websim.CPUS, mib(res.Websim.PeakRSS), res.PrimedFlakyHosts)
	writeTargets(&b, res.Targets)
	p("  (%d CPUs shared by every site or node, websim and the proxies: ratios within one invocation mean more than absolute figures)\n", res.NumCPU)
	return b.String()
}

// label names a run in reports: its geographic mode, or its mode.
func (r FederationRun) label() string {
	if r.Geo != "" {
		return r.Geo
	}
	return r.Mode
}

// runsReport writes the header and the table of the runs of a delay
// sweep and of the stretched runs, the loss and the comparisons.
func (res FederationResult) runsReport(b *strings.Builder, cfg FederationConfig, web string) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	n := len(FederationSites())
	p("federation crawl: %s, %s; %d sites (%s, %d replicas), width %d per site, %d per host, %d workers per process\n",
		web, extentOf(cfg.Rounds), n, cfg.Partitioner, cfg.Replicas, cfg.Width, cfg.PerHost, cfg.Workers)
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
}

// geoReport writes the geographic benchmark's header, the table of its
// four runs, the distance run's comparisons and each client's latency.
func (res FederationResult) geoReport(b *strings.Builder, cfg FederationConfig, web string) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	g := res.Geo
	n := len(FederationSites())
	p("geographic federation crawl (issue 22): %s, each run a fresh crawl to exhaustion; width %d per site, %d per host, %d workers per process\n",
		web, cfg.Width, cfg.PerHost, cfg.Workers)
	var cs []string
	for _, c := range g.Clients {
		cs = append(cs, fmt.Sprintf("%s %s (%.2f, %.2f)", c.Site, c.Addr, c.Lat, c.Lon))
	}
	p("  distance model (websim/geodelay: RTT = 2 × (3 ms + 1.3 × km / 200 km/ms)): each site (node) fetches from its address, at its place: %s;\n", strings.Join(cs, ", "))
	p("   websim holds a connection's first response 2 RTT, every later one 1 RTT, every DNS answer 1 RTT, the RTT to the city of the host's address\n")
	var pairs []string
	for _, pr := range g.Pairs {
		pairs = append(pairs, fmt.Sprintf("%s–%s %.1f ms (%.0f km)", pr.A, pr.B, pr.OneWayMS, pr.KM))
	}
	how := "the mean of the model's one-way delays, rounded to the ms (one delay for every link)"
	if g.DelayMS != g.ModelDelayMS {
		how = fmt.Sprintf("given (the model's mean would be %.0f ms)", g.ModelDelayMS)
	}
	p("  WAN between sites: %.0f ms one-way, %s: %s\n", g.DelayMS, how, strings.Join(pairs, ", "))
	p("  runs: distance: %d federated sites, distance partitioner (hosts %s); consistent: consistent hashing, %d replicas (hosts %s);\n",
		n, shares(g.HostShares[GeoDistance], g.Clients), cfg.Replicas, shares(g.HostShares[GeoConsistent], g.Clients))
	var nodes []string
	for i, s := range FederationSites() {
		nodes = append(nodes, fmt.Sprintf("n%d %s", i+1, s.Name))
	}
	p("   central: one site in %s without federation, with the three sites' resources (width %d, %d workers); stretched: one site of %d nodes,\n",
		FederationSites()[0].Name, cfg.Width*n, cfg.Workers*n, n)
	p("   %s (width %d, %d workers each), every node-to-node connection through a WAN link\n", strings.Join(nodes, ", "), cfg.Width*n, cfg.Workers)
	p("  host delay %v, ip delay %v, max crawl-delay %v, fsync %v; websim, every site and node in their own processes, the WAN proxies in this one, all on %d CPUs\n",
		cfg.HostDelay, cfg.IPDelay, cfg.MaxCrawlDelay, onOff(!cfg.NoSync), res.NumCPU)
	p("\n  run         WAN    ended      rounds  to exhaustion s  floor s  × floor  floor set by                           pages    pages/s  fetch mean ms  p95 ms  DNS ms  WAN B/page  cache hit  breaches  load\n")
	for _, r := range res.Runs {
		floor, by, times := "-", "-", "-"
		if f := r.Floor; f != nil {
			floor = fmt.Sprintf("%.1f", f.S)
			by = fmt.Sprintf("%s, %d × (%.0f + %.1f ms)", f.By, f.URLs, 1000*f.DelayS, f.RTTMS)
			if f.Ratio > 0 {
				times = fmt.Sprintf("%.2f", f.Ratio)
			}
		}
		mean, p95, dns := "-", "-", "-"
		if f := r.Fetch; f != nil && f.Requests > 0 {
			mean, p95, dns = fmt.Sprintf("%.1f", f.MeanMS), fmt.Sprintf("%.0f", f.P95MS), fmt.Sprintf("%.1f", f.MeanDNSMS)
		}
		hit := "-"
		if r.CacheLookups > 0 {
			hit = fmt.Sprintf("%.1f%%", 100*r.CacheHitRate)
		}
		p("  %-10s  %3.0fms  %-9s  %6d  %15.1f  %7s  %7s  %-37s  %7d  %7.0f  %13s  %6s  %6s  %10.0f  %9s  %8d  %.2f\n",
			r.label(), r.DelayMS, r.Exit, len(r.Rounds), r.WindowS, floor, times, by, r.Pages, r.PagesPerSec,
			mean, p95, dns, r.WANBytesPerPage, hit, r.Breaches, r.Load[0])
	}
	p("  (to exhaustion: the first round's start to the last round's end; floor: the distance-aware politeness floor, the slowest host's URLs ×\n")
	p("   (its delay + the RTT from whoever fetches it: its owner site, eu for central, the nearest node for stretched, a lower bound there since\n")
	p("   which node fetches a host is not fixed); fetch and DNS: the delays websim held the run's clients' responses and answers for)\n")
	if len(g.Comparisons) > 0 {
		p("\n  distance against  mean fetch  p95 fetch  time to exhaustion  floors  WAN traffic saved\n")
		for _, c := range g.Comparisons {
			t, saved := "-", "-"
			if c.ExhaustionRatio > 0 {
				t = fmt.Sprintf("%.2f×", c.ExhaustionRatio)
			}
			if c.TrafficSaved != 0 {
				saved = fmt.Sprintf("%.1f%%", 100*c.TrafficSaved)
			}
			p("  %-16s  %9.2f×  %8.2f×  %18s  %5.2f×  %17s\n", c.Versus, c.LatencyRatio, c.P95Ratio, t, c.FloorRatio, saved)
		}
		p("  (the other run's figure over the distance run's; time to exhaustion only where both runs were exhausted)\n")
	}
	var hits []string
	for _, r := range res.Runs {
		if r.CacheLookups > 0 {
			hits = append(hits, fmt.Sprintf("%s %.1f%%", r.label(), 100*r.CacheHitRate))
		}
	}
	if len(hits) > 0 {
		p("  URL-sent cache hit rate over the whole crawl: %s (UniCrawl: %.0f%%)\n", strings.Join(hits, ", "), 100*g.UniCrawlCacheHitRate)
	}
	p("\n  run         client (site, address)  requests  fetch mean ms  p95 ms  DNS answers\n")
	for _, r := range res.Runs {
		if r.Fetch == nil {
			continue
		}
		for _, c := range r.Fetch.Clients {
			p("  %-10s  %-4s %-17s  %8d  %13.1f  %6.0f  %11d\n", r.label(), c.Site, c.Addr, c.Requests, c.MeanMS, c.P95MS, c.DNSAnswers)
		}
	}
}

// shares shows each client's site's share of hosts, in the clients' order.
func shares(s map[string]float64, clients []GeoClient) string {
	var out []string
	for _, c := range clients {
		out = append(out, fmt.Sprintf("%s %.0f%%", c.Site, 100*s[c.Site]))
	}
	return strings.Join(out, ", ")
}

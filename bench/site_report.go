package bench

import (
	"fmt"
	"math"
	"strings"
)

// Report is a short human report of r.
func (r SiteResult) Report(cfg SiteConfig) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	mode := "websim and the site in their own processes"
	if cfg.InProcess {
		mode = "websim and the site in this process"
	}
	extent := extentOf(cfg.Rounds)
	p("site crawl: %d %s hosts × %d pages on %d addresses, %s, width %d, %d per host, %d workers\n",
		cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs, extent, cfg.Width, cfg.PerHost, cfg.Workers)
	p("  host delay %v, ip delay %v, max crawl-delay %v, fsync %v; %s\n",
		cfg.HostDelay, cfg.IPDelay, cfg.MaxCrawlDelay, onOff(!cfg.NoSync), mode)
	p("  ended: %s after %d rounds; site wall %.1fs, first round %.1fs after start\n", r.Exit, len(r.Rounds), r.WallS, r.FirstRoundAtS)
	p("\n  round  start s  gen s  fetch s  upd s  generated  fetched   2xx     new URLs  pages/s (fetch)\n")
	for _, row := range r.Rounds {
		rate := 0.0
		if row.FetchS > 0 {
			rate = float64(row.Fetched) / row.FetchS
		}
		p("  %5d  %7.1f  %5.2f  %7.2f  %5.2f  %9d  %7d  %7d  %8d  %7.0f\n", row.Round, row.StartS, row.GenerateS, row.FetchS, row.UpdateS,
			row.Generated, row.Fetched, row.OK, row.NewURLs, rate)
	}
	p("\n  throughput   %.0f pages/s (%d pages in %.1fs, first round start → last round end); %.0f 2xx/s; %.0f requests/s\n",
		r.PagesPerSec, r.Pages, r.WindowS, r.Pages2xxPerS, r.RequestsPerS)
	p("  fetcher busy %.1f%% of %d samples (in flight > 0; mean in flight %.0f); busy_s / (workers × window) %.1f%%\n",
		100*r.BusyFraction, r.Samples, r.MeanInFlight, 100*r.BusyWorkers)
	if len(r.IdleByPhase) > 0 {
		p("  idle samples by phase %v\n", r.IdleByPhase)
	}
	if cfg.InProcess {
		p("  CPU          %.1fs in the window (this process: websim, site and bench together)\n", r.Site.WindowCPUS)
	} else {
		p("  site         CPU %.1fs in the window (%.2f cores, %.0f µs/page), %.1fs in all; peak RSS %s\n",
			r.Site.WindowCPUS, ratio(r.Site.WindowCPUS, r.WindowS), 1e6*ratio(r.Site.WindowCPUS, float64(r.Pages)), r.Site.CPUS, mib(r.Site.PeakRSS))
		p("  websim       CPU %.1fs in the window (%.2f cores, %.0f µs/page), %.1fs in all; peak RSS %s\n",
			r.Websim.WindowCPUS, ratio(r.Websim.WindowCPUS, r.WindowS), 1e6*ratio(r.Websim.WindowCPUS, float64(r.Pages)), r.Websim.CPUS, mib(r.Websim.PeakRSS))
		p("  CPU ratio    site ÷ websim per page %.2f\n", ratio(r.Site.WindowCPUS, r.Websim.WindowCPUS))
	}
	if h := r.Hog; h != nil {
		p("  CPU hog      %d busy loops beside the crawl for %.1fs: %.1fs of CPU (%.2f cores)\n", h.Threads, h.Seconds, h.CPUS, h.Cores)
	}
	p("  coverage     %.2f%% of %d reachable robots-allowed URLs (%d URLs with a final status; %d robots-disallowed fetched)\n",
		100*r.Coverage.Ratio, r.Coverage.Targets, r.Coverage.Fetched, r.Coverage.Disallow)
	p("  ranking      Spearman OPIC vs PageRank %.3f over %d pages\n", r.Ranking.Spearman, r.Ranking.Pages)
	if n := r.NearDups; n != nil {
		p("  near-dups    precision %.3f (%d of %d verdicts), recall %.3f (%d of %d pairs fetched)\n", n.Precision, n.Correct, n.Verdicts, n.Recall, n.Found, n.Pairs)
	}
	if w := r.Watch; w != nil {
		p("  dashboard    %d updates rendered, %.0f served in %.2fs of CPU (%.2fs wall, lock waits included): %.3f%% of a core, %.3f%% of the site's CPU; %d bytes an update; %d console errors\n",
			w.Polls, w.ServedPolls, w.ServedCPU, w.ServedSeconds, 100*w.ShareOfCore, 100*w.ShareOfSite, w.PayloadBytes, len(w.ConsoleErrors))
	}
	p("  politeness   %d breaches in websim's statistics (%d requests)\n", r.Breaches, r.WebsimRequests)
	if f := r.Floor; f != nil {
		p("  floor        %.1fs: %s, %d robots-allowed URLs × %.2fs", f.S, f.By, f.URLs, f.DelayS)
		if f.Ratio > 0 {
			p("; time to exhaustion %.1fs = %.2f× the floor", r.WindowS, f.Ratio)
		}
		p("\n")
		if tl := f.Timeline; tl != nil {
			p("  floor host   %d responses from %.0fs to %.0fs of the window; %.0fs in %d pauses beyond its delay (longest %.0fs, at %.0fs); per minute: %s\n",
				tl.Fetches, tl.FirstS, tl.LastS, tl.GapS, tl.Gaps, tl.LongestS, tl.LongestAtS, strings.Trim(fmt.Sprint(tl.PerMinute), "[]"))
		}
	}
	for _, s := range r.BreachSample[:min(len(r.BreachSample), 10)] {
		p("               %s\n", s)
	}
	if w := r.WARC; w != nil {
		p("  WARC         %d responses (%d 2xx, %d truncated, %d without a status) for %d URLs in %d files\n",
			w.Responses, w.Responses2xx, w.Truncated, w.NoStatus, w.URLs, w.Files)
		p("               URLs with >1 2xx response: %d (%d not robots.txt or sitemaps; %d with >1 untruncated); with >1 response not 5xx/429: %d\n",
			w.Multi2xx, w.Multi2xxPages, w.MultiComplete2xx, w.MultiAny)
		for _, e := range w.Examples {
			p("               %s\n", e)
		}
	}
	for _, h := range r.Hostile {
		v := "never requested"
		if h.Websim != nil {
			mi := "-"
			if h.Websim.MinIntervalMS != nil {
				mi = fmt.Sprintf("%.0fms", *h.Websim.MinIntervalMS)
			}
			v = fmt.Sprintf("%d requests %v, max %d at once, min interval %s", h.Websim.Requests, h.Websim.Statuses, h.Websim.MaxConcurrent, mi)
		}
		f := "not listed"
		if h.Fate != nil {
			f = fmt.Sprintf("%d rounds: %v retries %d truncated %d, last error %q", h.Rounds, h.Fate.ByStatus, h.Fate.Retries, h.Fate.Truncated, h.Fate.LastError)
		}
		p("  %-14s %-10s websim: %s\n  %25s troubled_hosts: %s\n", h.Host, h.Role, v, "", f)
	}
	return b.String()
}

// extentOf says how far a crawl of rounds rounds goes (0: to exhaustion).
func extentOf(rounds int) string {
	if rounds > 0 {
		return fmt.Sprintf("%d rounds", rounds)
	}
	return "to exhaustion"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(b) {
		return 0
	}
	return a / b
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

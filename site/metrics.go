package site

import (
	"sync"

	"github.com/meridian-crawler/meridian/rounds"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the site's Prometheus metrics: per-round figures as they
// complete, and the fetcher's and crawl database's counters read at scrape
// time.
type metrics struct {
	reg       *prometheus.Registry
	rounds    prometheus.Counter
	pages     *prometheus.CounterVec
	bytes     prometheus.Counter
	newURLs   prometheus.Counter
	revisits  prometheus.Counter
	phaseSecs *prometheus.CounterVec
	lastRound prometheus.Gauge

	// refetches and of them notModified, unchanged and changed: the
	// rounds' refetch results (RoundStats.Refetches…).
	refetches   prometheus.Counter
	notModified prometheus.Counter
	unchanged   prometheus.Counter
	changed     prometheus.Counter
	// nearDups: pages found near-duplicates (RoundStats.NearDups).
	nearDups prometheus.Counter
	// noIndex and canonical: pages that said noindex and that named
	// another canonical URL (RoundStats.NoIndex, Canonical); trapLinks:
	// links refused as spider traps, by rule (RoundStats.Traps).
	noIndex   prometheus.Counter
	canonical prometheus.Counter
	trapLinks *prometheus.CounterVec

	// dashPolls and dashSecs: GET /dashboard.json answered, and the time
	// spent building and writing them (what a watching browser costs).
	dashPolls prometheus.Counter
	dashSecs  prometheus.Counter
	dashCPU   prometheus.Counter

	mu   sync.Mutex
	site *Site
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.rounds = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_rounds_total", Help: "Rounds completed."})
	m.pages = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "meridian_round_pages_total", Help: "Pages fetched in completed rounds, by HTTP status class."}, []string{"class"})
	m.bytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_round_bytes_total", Help: "Body bytes fetched in completed rounds."})
	m.newURLs = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_new_urls_total", Help: "URLs new to the crawl database."})
	m.revisits = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_revisits_total", Help: "Fetched pages whose later cash an update passed on over their stored outlinks."})
	m.refetches = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_refetches_total", Help: "Pages fetched again (--refetch-interval) in completed rounds: final results."})
	m.notModified = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_refetch_not_modified_total", Help: "Refetches answered 304 Not Modified."})
	m.unchanged = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_refetch_unchanged_total", Help: "Refetches answered 2xx with the body fetched before (same fingerprint)."})
	m.changed = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_refetch_changed_total", Help: "Refetches that did not find the page unchanged: a new body, or a redirect, a gone page or an error."})
	m.nearDups = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_near_dups_total", Help: "Fetched pages found near-duplicates of pages fetched before (SimHash within 3 bits; --near-dups)."})
	m.noIndex = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_noindex_total", Help: "Fetched pages that said noindex (meta robots or X-Robots-Tag)."})
	m.canonical = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_canonical_total", Help: "Fetched pages that named another URL as their canonical (rel=canonical)."})
	m.trapLinks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "meridian_trap_links_total", Help: "Links refused as spider traps, by rule (repetition, calendar)."}, []string{"rule"})
	for _, rule := range []string{"repetition", "calendar"} {
		m.trapLinks.WithLabelValues(rule) // 0 from the start
	}
	m.phaseSecs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "meridian_phase_seconds_total", Help: "Time spent in each phase of completed rounds."}, []string{"phase"})
	m.lastRound = prometheus.NewGauge(prometheus.GaugeOpts{Name: "meridian_last_round", Help: "The last completed round."})
	m.dashPolls = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_dashboard_polls_total", Help: "Dashboard updates served (GET /dashboard.json)."})
	m.dashSecs = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_dashboard_seconds_total", Help: "Time spent building and writing dashboard updates (waits for locks included)."})
	m.dashCPU = prometheus.NewCounter(prometheus.CounterOpts{Name: "meridian_dashboard_cpu_seconds_total", Help: "CPU time spent building and writing dashboard updates (Linux; 0 elsewhere)."})
	m.reg.MustRegister(m.rounds, m.pages, m.bytes, m.newURLs, m.revisits, m.phaseSecs, m.lastRound, m.dashPolls, m.dashSecs, m.dashCPU,
		m.refetches, m.notModified, m.unchanged, m.changed, m.nearDups, m.noIndex, m.canonical, m.trapLinks,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// round records a completed round.
func (m *metrics) round(st rounds.RoundStats) {
	m.rounds.Inc()
	for class, n := range st.ByClass {
		m.pages.WithLabelValues(class).Add(float64(n))
	}
	m.bytes.Add(float64(st.Bytes))
	m.newURLs.Add(float64(st.NewURLs))
	m.revisits.Add(float64(st.Revisits))
	m.refetches.Add(float64(st.Refetches))
	m.notModified.Add(float64(st.NotModified))
	m.unchanged.Add(float64(st.Unchanged))
	m.changed.Add(float64(st.Changed))
	m.nearDups.Add(float64(st.NearDups))
	m.noIndex.Add(float64(st.NoIndex))
	m.canonical.Add(float64(st.Canonical))
	m.trapLinks.WithLabelValues("repetition").Add(float64(st.Traps.Repetition))
	m.trapLinks.WithLabelValues("calendar").Add(float64(st.Traps.Calendar))
	m.phaseSecs.WithLabelValues("generate").Add(st.GenerateSeconds)
	m.phaseSecs.WithLabelValues("fetch").Add(st.FetchSeconds)
	m.phaseSecs.WithLabelValues("update").Add(st.UpdateSeconds)
	m.lastRound.Set(float64(st.Round))
}

// attach adds the live gauges and counters read from s at scrape time.
func (m *metrics) attach(s *Site) {
	gauge := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	counter := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
	}
	counter("meridian_fetch_requests_total", "HTTP requests sent (pages, robots.txt, sitemaps).", func() float64 { return float64(s.fetch.Stats().Requests) })
	counter("meridian_fetch_done_total", "Page jobs answered by the fetcher.", func() float64 { return float64(s.fetch.Stats().Done) })
	counter("meridian_fetch_bytes_total", "Body bytes received.", func() float64 { return float64(s.fetch.Stats().Bytes) })
	counter("meridian_fetch_retries_total", "Page results marked for retry.", func() float64 { return float64(s.fetch.Stats().Retries) })
	counter("meridian_fetch_busy_seconds_total", "Sum over fetch workers of time spent on requests.", func() float64 { return s.fetch.Stats().Busy.Seconds() })
	counter("meridian_politeness_wait_seconds_total", "Time ready hosts waited for their host or IP delay.", func() float64 { return s.fetch.Stats().PolitenessWait.Seconds() })
	gauge("meridian_fetch_in_flight", "Requests in flight.", func() float64 { return float64(s.fetch.Stats().InFlight) })
	if s.set != nil {
		gauge("meridian_shards_held", "Shards this node holds a replica of (a sharded site).", func() float64 { return float64(len(s.set.Status())) })
		gauge("meridian_shards_led", "Shards this node leads (a sharded site).", func() float64 { return float64(len(s.set.Leading())) })
		gauge("meridian_shards_under_replicated", "Shards this node leads with fewer replicas than the site's target allows.", func() float64 {
			n := 0
			for _, sh := range s.set.Status() {
				if sh.UnderReplicated && sh.Leader == s.cfg.Node {
					n++
				}
			}
			return float64(n)
		})
	}
	gauge("meridian_fetch_queued", "Jobs queued in the fetcher.", func() float64 { return float64(s.fetch.Stats().Queued) })
	gauge("meridian_fetch_hosts", "Hosts in the fetcher's workbench.", func() float64 { return float64(s.fetch.Stats().Hosts) })
	gauge("meridian_crawldb_urls", "URLs in the crawl database.", func() float64 { return float64(s.counts().URLs) })
	gauge("meridian_crawldb_frontier", "Unfetched URLs in the frontier.", func() float64 { return float64(s.counts().Frontier) })
	gauge("meridian_crawldb_scheduled", "Fetched pages waiting for their refetch (not due yet).", func() float64 { return float64(s.counts().Scheduled) })
	gauge("meridian_round_current", "The newest round generated.", func() float64 {
		if n := s.Rounds().Next; n > 0 {
			return float64(n - 1)
		}
		return 0
	})
	for _, p := range []rounds.Phase{rounds.PhaseGenerate, rounds.PhaseFetch, rounds.PhaseUpdate} {
		p := p
		gauge("meridian_phase_"+string(p), "1 while the crawler is in the "+string(p)+" phase.", func() float64 {
			if s.Rounds().Phase == p {
				return 1
			}
			return 0
		})
	}
	m.mu.Lock()
	m.site = s
	m.mu.Unlock()
}

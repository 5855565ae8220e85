package site

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"runtime"
	"strconv"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/rounds/control"
	"github.com/meridian-crawler/meridian/shardset"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Status is what GET /status returns and `site status` prints.
type Status struct {
	Region  string        `json:"region"`
	Node    string        `json:"node"`
	Role    string        `json:"role"` // leader, follower or candidate (of the crawl database's Raft group)
	PID     int           `json:"pid"`
	Started time.Time     `json:"started"`
	Uptime  float64       `json:"uptime_s"`
	Round   uint64        `json:"round"` // the newest round generated
	Phase   rounds.Phase  `json:"phase"`
	Rounds  rounds.Status `json:"rounds"`
	Fetcher fetcherStatus `json:"fetcher"`
	CrawlDB crawldbStatus `json:"crawldb"`
	Websim  string        `json:"websim_stats,omitempty"`
	// Refetch is the refetch figures of the recent rounds this node led
	// (the dashboard's); absent when they refetched nothing.
	Refetch *RefetchFigures `json:"refetch,omitempty"`
	// Traffic is what this node's crawl database sent and received.
	Traffic crawldb.Traffic `json:"traffic"`
	// Federation is the federation as this node sees it (with --federation).
	Federation *federation.Status `json:"federation,omitempty"`
	// Shards are a sharded node's replicas (leader, replicas, frontier),
	// and Sharding its site's shard count and replication target.
	Shards   []shardset.ShardStatus `json:"shards,omitempty"`
	Sharding *shardset.Settings     `json:"sharding,omitempty"`
	// Site is a sharded site's site-wide view: every shard and node, as
	// gathered from every node (GET /status?site=1 only).
	Site *SiteView `json:"site,omitempty"`
	// Controls are the operator's overrides (site pause, limits, host);
	// absent while there are none.
	Controls *control.Controls `json:"controls,omitempty"`
	// Stopped is set while the node stops on a signal, before the crawl
	// ended: what it leaves (Rounds.Finished says why a crawl ended).
	Stopped *rounds.Finish `json:"stopped,omitempty"`
}

type fetcherStatus struct {
	Queued         int64            `json:"queued"`
	InFlight       int64            `json:"in_flight"`
	Done           int64            `json:"done"`
	Requests       int64            `json:"requests"`
	Bytes          int64            `json:"bytes"`
	Retries        int64            `json:"retries"`
	ByStatus       map[string]int64 `json:"by_status"`
	BusySeconds    float64          `json:"busy_s"`
	PolitenessWait float64          `json:"politeness_wait_s"`
	Hosts          int64            `json:"hosts"`
	// PagesPerSec is the newest dashboard sample's rate (page results per
	// second over the last second); the dashboard shows the same figure.
	PagesPerSec float64 `json:"pages_per_s"`
	PagesAt     int64   `json:"pages_per_s_at"` // the sample's time, Unix milliseconds
	// FetchFrom are the local addresses the node's fetches leave from
	// (--fetch-from); none: the system's choice.
	FetchFrom []netip.Addr `json:"fetch_from,omitempty"`
}

type crawldbStatus struct {
	URLs     uint64 `json:"urls"`
	Frontier uint64 `json:"frontier"`
	// Scheduled counts the fetched pages waiting for their refetch
	// (--refetch-interval).
	Scheduled uint64            `json:"scheduled,omitempty"`
	ByStatus  map[string]uint64 `json:"by_status"`
	Leader    bool              `json:"leader"`
}

func fetcherStatusOf(st fetcher.Stats, from []netip.Addr) fetcherStatus {
	fs := fetcherStatus{Queued: st.Queued, InFlight: st.InFlight, Done: st.Done, Requests: st.Requests,
		Bytes: st.Bytes, Retries: st.Retries, ByStatus: map[string]int64{},
		BusySeconds: st.Busy.Seconds(), PolitenessWait: st.PolitenessWait.Seconds(), Hosts: st.Hosts, FetchFrom: from}
	for k, v := range st.ByStatus {
		fs.ByStatus[k.String()] = v
	}
	return fs
}

// Status returns the site's state now.
func (s *Site) Status() Status {
	return s.shardedStatus()
}

// controlsStatus is the operator's controls, nil while there are none.
func (s *Site) controlsStatus() *control.Controls {
	ctl, err := rounds.ReadControls(s.db.Store())
	if err != nil {
		s.log.Warn("site: status: controls", "err", err)
		return nil
	}
	if ctl.Version == 0 {
		return nil
	}
	return &ctl
}

// refetchStatus is the recent rounds' refetch figures, nil if they
// refetched nothing.
func (s *Site) refetchStatus() *RefetchFigures {
	if rf := s.dash.refetches(); rf.Refetches > 0 {
		return &rf
	}
	return nil
}

// handler serves the status listener (--listen): read-only views of the
// node (status, the dashboard, metrics, the site's info for a joining
// node), and Go's profiles with --pprof. Whatever changes the node or its
// crawl database is on the node API (apiHandler).
func (s *Site) handler() http.Handler {
	mux := http.NewServeMux()
	ready := s.whenReady
	mux.HandleFunc("GET /site/info", ready(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		db := s.dbReady
		s.mu.Unlock()
		members, _ := db.Voters()
		st := SettingsOf(s.cfg)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(SiteInfo{Region: s.cfg.Region, Node: s.cfg.Node, Leader: db.Leader(), API: db.APIAddr(), Members: members, Settings: &st})
	}))
	mux.HandleFunc("GET /status", ready(func(w http.ResponseWriter, r *http.Request) {
		// ?site=1: with a sharded site's site-wide view (which asks the
		// other nodes, each within siteWait).
		site := false
		if v := r.URL.Query().Get("site"); v != "" {
			var err error
			if site, err = strconv.ParseBool(v); err != nil {
				http.Error(w, fmt.Sprintf("site: /status?site=%q: want 1 (with the site-wide view of a sharded site) or 0", v), http.StatusBadRequest)
				return
			}
		}
		st := s.Status()
		if site {
			st.Site = s.SiteView()
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(st)
	}))
	mux.HandleFunc("GET /dashboard.json", ready(func(w http.ResponseWriter, r *http.Request) {
		// Its cost, in CPU: the goroutine keeps its thread meanwhile, so
		// the thread's CPU time is the handler's (waits cost none).
		runtime.LockOSThread()
		start, cpu := time.Now(), threadCPU()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(s.Dashboard())
		s.metrics.dashCPU.Add((threadCPU() - cpu).Seconds())
		runtime.UnlockOSThread()
		s.metrics.dashPolls.Inc()
		s.metrics.dashSecs.Add(time.Since(start).Seconds())
	}))
	// The dashboard page (GET / and its assets).
	page := dashboardPage()
	for _, p := range []string{"GET /{$}", "GET /app.js", "GET /style.css"} {
		mux.Handle(p, page)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	if s.cfg.Pprof {
		// Profiles, for finding where a crawl spends its time; only on
		// request, since they expose the process's internals.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return readOnly(mux)
}

// readOnly refuses every method but GET and HEAD, before any route: the
// status listener changes nothing, whatever is mounted on it.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "site: the status listener is read-only (the node API is on --api)", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// startingMsg is what a node answers (503) until Start is done; a node
// that joins waits while it reads it.
const startingMsg = "site: starting"

// whenReady answers 503 until Start is done.
func (s *Site) whenReady(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			http.Error(w, startingMsg, http.StatusServiceUnavailable)
			return
		}
		h(w, r)
	}
}

// progress prints a line every cfg.Progress until ctx is done.
func (s *Site) progress(ctx context.Context, w io.Writer) {
	t := time.NewTicker(s.cfg.Progress)
	defer t.Stop()
	var last *fetcher.Stats
	lastAt := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			st := s.fetch.Stats()
			s.printProgress(w, now, &progressPrev{st: last, at: lastAt})
			last, lastAt = &st, now
		}
	}
}

type progressPrev struct {
	st *fetcher.Stats
	at time.Time
}

func (s *Site) printProgress(w io.Writer, now time.Time, prev *progressPrev) {
	st := s.fetch.Stats()
	rs := s.Rounds()
	c := s.counts()
	rate := 0.0
	if prev != nil && prev.st != nil {
		if dt := now.Sub(prev.at).Seconds(); dt > 0 {
			rate = float64(st.Done-prev.st.Done) / dt
		}
	}
	round := uint64(0)
	if rs.Next > 0 {
		round = rs.Next - 1
	}
	fmt.Fprintf(w, "%s round %d %-8s fetched %d (%.0f/s) in flight %d queued %d | db %d URLs, frontier %d, fetched %d | rounds done %d\n",
		now.Format("15:04:05"), round, rs.Phase, st.Done, rate, st.InFlight, st.Queued,
		c.URLs, c.Frontier, c.ByStatus[store.StatusFetched], rs.Done)
}

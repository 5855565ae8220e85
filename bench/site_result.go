package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/websim"
)

// RoundRow is one round of the phase table, from the site's rounds.jsonl.
type RoundRow struct {
	Round uint64 `json:"round"`
	// StartS and EndS are offsets from the first round's start.
	StartS    float64 `json:"start_s"`
	EndS      float64 `json:"end_s"`
	GenerateS float64 `json:"generate_s"`
	FetchS    float64 `json:"fetch_s"`
	UpdateS   float64 `json:"update_s"`
	Generated int     `json:"generated"`
	Fetched   int64   `json:"fetched"`
	OK        int64   `json:"fetched_2xx"`
	Requests  int64   `json:"requests"` // pages, retries, robots.txt and sitemaps
	Bytes     int64   `json:"bytes"`
	NewURLs   int64   `json:"new_urls"`
	WaitS     float64 `json:"politeness_wait_s"`
	Troubled  int     `json:"troubled_hosts"`
}

// ProcStats is what one process cost.
type ProcStats struct {
	PID int `json:"pid"`
	// CPUS is user+system CPU seconds over the process's life (websim: up
	// to when it was stopped); WindowCPUS over the measured window.
	CPUS       float64 `json:"cpu_s"`
	WindowCPUS float64 `json:"window_cpu_s"`
	// PeakRSS is VmHWM from /proc/PID/status, last sampled before the
	// process exited (site) or was stopped (websim).
	PeakRSS int64 `json:"peak_rss_bytes"`
}

// WARCStats counts the response records of the site's WARC files by
// WARC-Target-URI.
type WARCStats struct {
	Files        int   `json:"files"`
	Responses    int64 `json:"responses"`
	Responses2xx int64 `json:"responses_2xx"`
	NoStatus     int64 `json:"responses_without_status"` // an HTTP status could not be read
	Truncated    int64 `json:"responses_truncated"`      // with WARC-Truncated
	URLs         int   `json:"urls"`
	// Multi2xx: URLs with more than one 2xx response; Multi2xxPages: of
	// those, the ones that are not robots.txt or sitemaps.
	Multi2xx      int `json:"urls_multi_2xx"`
	Multi2xxPages int `json:"urls_multi_2xx_pages"`
	// MultiComplete2xx: URLs with more than one 2xx response that is not
	// WARC-Truncated (a truncated page is retried, so a slow host's page
	// can have several truncated 2xx records).
	MultiComplete2xx int `json:"urls_multi_complete_2xx"`
	// MultiAny: URLs with more than one response other than 5xx and 429.
	MultiAny int      `json:"urls_multi_non5xx"`
	Examples []string `json:"examples,omitempty"` // "URL statuses…", up to 10
}

// HostileHost is what happened to one host with a hostile role: what
// websim saw and what the site's rounds.jsonl listed for it.
type HostileHost struct {
	Host   string           `json:"host"`
	Role   string           `json:"role"`
	Websim *websim.Visitor  `json:"websim"` // nil: never requested
	Rounds int              `json:"troubled_rounds"`
	Fate   *rounds.HostFate `json:"troubled,omitempty"` // summed over the rounds that list it
}

// SiteResult is what RunSite measured.
type SiteResult struct {
	// Exit says how the crawl ended: "rounds" (the configured number was
	// done), "exhausted", "cut" (Timeout: stopped with SIGTERM), "stalled"
	// (idle for Stall: stopped) or "exited" (none of these, see the log).
	Exit string `json:"exit"`
	// Dir is the run directory when it was kept.
	Dir    string     `json:"dir,omitempty"`
	Rounds []RoundRow `json:"rounds"`
	// The measured window runs from the first round's start to the last
	// round's end, from rounds.jsonl. Pages counts the final page results
	// of its rounds (every status); PagesPerSec is Pages over the window.
	WindowS       float64 `json:"window_s"`
	Pages         int64   `json:"pages"`
	Pages2xx      int64   `json:"pages_2xx"`
	Requests      int64   `json:"requests"`
	Bytes         int64   `json:"bytes"`
	PagesPerSec   float64 `json:"pages_per_sec"`
	Pages2xxPerS  float64 `json:"pages_2xx_per_sec"`
	RequestsPerS  float64 `json:"requests_per_sec"`
	WallS         float64 `json:"wall_s"`           // site start to exit
	FirstRoundAtS float64 `json:"first_round_at_s"` // site start to the first round's start
	// Fetcher busy fraction: of the /status samples in the window, those
	// with requests in flight. IdleByPhase splits the other samples by the
	// crawler's phase. BusyWorkers is Δbusy_s / (Workers × window).
	Samples      int            `json:"samples"`
	BusySamples  int            `json:"busy_samples"`
	BusyFraction float64        `json:"busy_fraction"`
	IdleByPhase  map[string]int `json:"idle_samples_by_phase"`
	BusyWorkers  float64        `json:"busy_worker_fraction"`
	MeanInFlight float64        `json:"mean_in_flight"`
	StatusErrors int            `json:"status_errors"` // samples that got no answer while the site ran
	Site         ProcStats      `json:"site"`
	// Watch is what the dashboard open in a browser cost (with --watch).
	Watch *WatchResult `json:"watch,omitempty"`
	// Hog is what the CPU hog beside the crawl used (SiteConfig.Hog).
	Hog    *HogResult `json:"hog,omitempty"`
	Websim ProcStats  `json:"websim"`
	// The checks, after the site stopped.
	Coverage crawlcheck.Coverage `json:"coverage"`
	Ranking  crawlcheck.Ranking  `json:"ranking"`
	// NearDups scores the near-duplicates the site recorded against the
	// truth's (nil: not checked).
	NearDups       *crawlcheck.NearDupScore `json:"near_dups,omitempty"`
	Breaches       int                      `json:"politeness_breaches"`
	BreachSample   []string                 `json:"politeness_breach_sample,omitempty"`
	WebsimRequests int64                    `json:"websim_requests"`
	UnknownHost    int64                    `json:"websim_unknown_host_requests"`
	WARC           *WARCStats               `json:"warc,omitempty"`
	Hostile        []HostileHost            `json:"hostile,omitempty"`
	// Floor is the web's politeness floor for the crawl's delays, with the
	// crawl's time to exhaustion over it when it ran to exhaustion.
	Floor  *Floor  `json:"floor,omitempty"`
	CheckS float64 `json:"check_s"`
}

// readRoundStats reads the site's stats/rounds.jsonl.
// readSiteRounds reads a stopped node's rounds: DATA/stats/rounds.jsonl,
// and for a sharded node each shard's (DATA/shards/*/stats/rounds.jsonl)
// merged by round number into one line per round, as a site-wide table
// wants it (mergeRounds).
func readSiteRounds(data string) ([]rounds.RoundStats, error) {
	files, err := roundFiles(data)
	if err != nil {
		return nil, err
	}
	var stats []rounds.RoundStats
	for _, p := range files {
		st, err := readRoundStats(p)
		if err != nil {
			return nil, err
		}
		stats = append(stats, st...)
	}
	if len(files) == 1 {
		return stats, nil
	}
	return mergeRounds(stats), nil
}

// roundFiles returns a node's round statistics files by crawl database:
// "" for the old design's one (DATA/stats), each shard's by its group
// (DATA/shards/GROUP/stats). A file may not exist yet.
func roundFiles(data string) (map[string]string, error) {
	files := map[string]string{"": filepath.Join(data, "stats", "rounds.jsonl")}
	paths, err := filepath.Glob(filepath.Join(data, "shards", "*", "stats", "rounds.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	for _, p := range paths {
		files[filepath.Base(filepath.Dir(filepath.Dir(p)))] = p
	}
	return files, nil
}

// mergeRounds merges the lines of the same round (a sharded site's shards
// each run a round r): from the first start to the last end, the phases'
// longest, the counts summed.
func mergeRounds(stats []rounds.RoundStats) []rounds.RoundStats {
	by := map[uint64]*rounds.RoundStats{}
	var order []uint64
	for _, s := range stats {
		m, ok := by[s.Round]
		if !ok {
			c := s
			c.ByClass, c.ByStatus = map[string]int64{}, map[string]int64{}
			for k, v := range s.ByClass {
				c.ByClass[k] = v
			}
			for k, v := range s.ByStatus {
				c.ByStatus[k] = v
			}
			c.Troubled = maps.Clone(s.Troubled)
			by[s.Round] = &c
			order = append(order, s.Round)
			continue
		}
		if s.Started.Before(m.Started) {
			m.Started = s.Started
		}
		if s.Ended.After(m.Ended) {
			m.Ended = s.Ended
		}
		m.GenerateSeconds = max(m.GenerateSeconds, s.GenerateSeconds)
		m.FetchSeconds = max(m.FetchSeconds, s.FetchSeconds)
		m.UpdateSeconds = max(m.UpdateSeconds, s.UpdateSeconds)
		m.Generated += s.Generated
		m.Fetched += s.Fetched
		m.Retries += s.Retries
		m.Robots += s.Robots
		m.Sitemaps += s.Sitemaps
		m.Bytes += s.Bytes
		m.Links += s.Links
		m.Targets += s.Targets
		m.NewURLs += s.NewURLs
		m.WaitSecs += s.WaitSecs
		m.NearDups += s.NearDups
		m.RemoteURLs += s.RemoteURLs
		for k, v := range s.ByClass {
			m.ByClass[k] += v
		}
		for k, v := range s.ByStatus {
			m.ByStatus[k] += v
		}
		if m.Troubled == nil && len(s.Troubled) > 0 {
			m.Troubled = map[string]*rounds.HostFate{}
		}
		maps.Copy(m.Troubled, s.Troubled)
	}
	out := make([]rounds.RoundStats, 0, len(order))
	for _, r := range order {
		out = append(out, *by[r])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Round < out[j].Round })
	return out
}

func readRoundStats(path string) ([]rounds.RoundStats, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	var out []rounds.RoundStats
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for line := 1; sc.Scan(); line++ {
		var s rounds.RoundStats
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("bench: %s:%d: %w", path, line, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Round < out[j].Round })
	return out, nil
}

// table fills the phase table and the throughput figures, and returns the
// measured window.
func (res *SiteResult) table(stats []rounds.RoundStats, siteStart time.Time) (time.Time, time.Time) {
	if len(stats) == 0 {
		return time.Time{}, time.Time{}
	}
	start, end := stats[0].Started, stats[0].Ended
	for _, s := range stats {
		if s.Started.Before(start) {
			start = s.Started
		}
		if s.Ended.After(end) {
			end = s.Ended
		}
	}
	for _, s := range stats {
		row := RoundRow{Round: s.Round, StartS: s.Started.Sub(start).Seconds(), EndS: s.Ended.Sub(start).Seconds(),
			GenerateS: s.GenerateSeconds, FetchS: s.FetchSeconds, UpdateS: s.UpdateSeconds,
			Generated: s.Generated, Fetched: s.Fetched, OK: s.ByClass["2xx"],
			Requests: s.Fetched + s.Retries + s.Robots + s.Sitemaps, Bytes: s.Bytes, NewURLs: s.NewURLs,
			WaitS: s.WaitSecs, Troubled: len(s.Troubled)}
		res.Rounds = append(res.Rounds, row)
		res.Pages += row.Fetched
		res.Pages2xx += row.OK
		res.Requests += row.Requests
		res.Bytes += row.Bytes
	}
	res.WindowS = end.Sub(start).Seconds()
	res.FirstRoundAtS = start.Sub(siteStart).Seconds()
	if res.WindowS > 0 {
		res.PagesPerSec = float64(res.Pages) / res.WindowS
		res.Pages2xxPerS = float64(res.Pages2xx) / res.WindowS
		res.RequestsPerS = float64(res.Requests) / res.WindowS
	}
	return start, end
}

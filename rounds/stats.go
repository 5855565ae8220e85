package rounds

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
)

// RoundStats is one line of stats/rounds.jsonl: what a round did.
type RoundStats struct {
	Round     uint64    `json:"round"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended"`
	Generated int       `json:"generated"`
	// Phase durations. Rounds overlap, so they add up to more than
	// Ended-Started of one round.
	GenerateSeconds float64 `json:"generate_s"`
	FetchSeconds    float64 `json:"fetch_s"`
	UpdateSeconds   float64 `json:"update_s"`
	// Pages fetched (final results), by HTTP status class: "2xx" … "5xx",
	// "none" (no HTTP response: DNS, refused address, robots denied,
	// duplicates are counted under their class too).
	Fetched  int64            `json:"fetched"`
	ByClass  map[string]int64 `json:"by_class"`
	ByStatus map[string]int64 `json:"by_status"`
	Retries  int64            `json:"retries"`
	Robots   int64            `json:"robots_fetches"`
	Sitemaps int64            `json:"sitemap_fetches"`
	Bytes    int64            `json:"bytes"`
	Links    int64            `json:"links"`    // outlinks extracted
	Targets  int64            `json:"targets"`  // distinct URLs the update credited
	NewURLs  int64            `json:"new_urls"` // of which new to the crawl database
	WaitSecs float64          `json:"politeness_wait_s"`
	Virtual  float64          `json:"virtual_cash"` // the virtual page's cash after the round
	// Revisits counts the stored pages whose cash the update passed on
	// over their outlinks without a refetch; RevisitCash is that cash.
	Revisits    int     `json:"revisits"`
	RevisitCash float64 `json:"revisit_cash"`
	// Troubled lists the hosts whose fetches in this round did not all
	// succeed (at most maxTroubled of them): their fate in the round.
	Troubled map[string]*HostFate `json:"troubled_hosts,omitempty"`
	// TroubledCount is len(Troubled), kept when the map is left out (status).
	TroubledCount int `json:"troubled_count"`
}

// HostFate counts what happened to one host's fetches in a round.
type HostFate struct {
	ByStatus  map[string]int64 `json:"by_status,omitempty"`
	Retries   int64            `json:"retries,omitempty"`
	Truncated int64            `json:"truncated,omitempty"`
	LastError string           `json:"last_error,omitempty"`
}

// maxTroubled bounds the hosts listed per round.
const maxTroubled = 1000

// roundCounters count a round's fetch results as they arrive.
type roundCounters struct {
	mu       sync.Mutex
	troubled map[string]*HostFate

	fetched, retries, robots, sitemaps, bytes, links, wait atomic.Int64
	class                                                  [6]atomic.Int64 // none, 1xx … 5xx
	status                                                 [16]atomic.Int64
}

func (r *roundCounters) add(res *fetcher.Result) {
	r.count(res.Kind, res.Retry, res.HTTPStatus, res.Status, res.Bytes, res.Wait, len(res.Links))
	r.fate(res.Host, res.Kind, res.Retry, res.Status, res.Truncated != "", res.Err)
}

func (r *roundCounters) addRecord(f *fetchRecord) {
	r.count(f.Kind, f.Retry, f.HTTPStatus, f.Status, f.Bytes, f.Wait, len(f.Links))
	r.fate(f.Host, f.Kind, f.Retry, f.Status, false, f.Err)
}

// fate notes a host whose fetch did not simply succeed.
func (r *roundCounters) fate(host string, kind fetcher.Kind, retry bool, st store.Status, truncated bool, errText string) {
	if kind != fetcher.KindPage || (!retry && !truncated && (st == store.StatusFetched || st == store.StatusRedirect || st == store.StatusDuplicate)) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.troubled[host]
	if f == nil {
		if len(r.troubled) >= maxTroubled {
			return
		}
		if r.troubled == nil {
			r.troubled = map[string]*HostFate{}
		}
		f = &HostFate{ByStatus: map[string]int64{}}
		r.troubled[host] = f
	}
	switch {
	case retry:
		f.Retries++
	default:
		f.ByStatus[st.String()]++
	}
	if truncated {
		f.Truncated++
	}
	if errText != "" {
		f.LastError = errText
	}
}

func (r *roundCounters) count(kind fetcher.Kind, retry bool, httpStatus int, st store.Status, bytes int64, wait time.Duration, links int) {
	r.bytes.Add(bytes)
	r.wait.Add(int64(wait))
	switch kind {
	case fetcher.KindRobots:
		r.robots.Add(1)
		return
	case fetcher.KindSitemap:
		r.sitemaps.Add(1)
		return
	}
	r.links.Add(int64(links))
	if retry {
		r.retries.Add(1)
		return
	}
	r.fetched.Add(1)
	cl := httpStatus / 100
	if cl < 1 || cl > 5 {
		cl = 0
	}
	r.class[cl].Add(1)
	if int(st) < len(r.status) {
		r.status[st].Add(1)
	}
}

var classNames = [...]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx"}

func (r *roundCounters) fill(s *RoundStats) {
	s.Fetched = r.fetched.Load()
	s.Retries = r.retries.Load()
	s.Robots = r.robots.Load()
	s.Sitemaps = r.sitemaps.Load()
	s.Bytes = r.bytes.Load()
	s.Links = r.links.Load()
	s.WaitSecs = time.Duration(r.wait.Load()).Seconds()
	s.ByClass = map[string]int64{}
	for i := range r.class {
		if n := r.class[i].Load(); n > 0 {
			s.ByClass[classNames[i]] = n
		}
	}
	r.mu.Lock()
	s.Troubled = r.troubled
	r.mu.Unlock()
	s.ByStatus = map[string]int64{}
	for i := range r.status {
		if n := r.status[i].Load(); n > 0 {
			s.ByStatus[store.Status(i).String()] = n
		}
	}
}

// writeStats appends s to stats/rounds.jsonl.
func (c *Crawler) writeStats(s RoundStats) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	if _, err := c.statsF.Write(b); err != nil {
		return fmt.Errorf("rounds: write statistics: %w", err)
	}
	return nil
}

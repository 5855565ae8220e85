package rounds

import (
	"encoding/json"
	"fmt"
	"time"
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
	// Parts is how many parts the round's fetch list was split into.
	Parts int `json:"parts"`
	// StagedBytes is the size of the results the nodes staged for the
	// round's update (what crossed between nodes, before Raft's copies).
	StagedBytes int64 `json:"staged_bytes"`
	// Leader is the node that ran the round's update.
	Leader string `json:"leader"`
	// Unanswered counts the round's URLs that had no result when its update
	// was prepared (sent back to the frontier); 0 unless something went wrong.
	Unanswered int `json:"unanswered,omitempty"`
	// LateResults counts page results fetched but dropped because their
	// node's take of the part was over (the part had moved to another
	// node, or was done); DuplicateResults, second results of one URL in a
	// node's fetch segment, not counted. Both 0 unless something went wrong.
	LateResults      int64 `json:"late_results,omitempty"`
	DuplicateResults int   `json:"duplicate_results,omitempty"`
	// RemoteURLs and RemoteCash: the URLs the update put in other sites'
	// outboxes (a federation), and their cash.
	RemoteURLs int     `json:"remote_urls,omitempty"`
	RemoteCash float64 `json:"remote_cash,omitempty"`
	// SentCacheHits and SentCacheLookups: the URL-sent cache's counts so
	// far on this node (URLs not sent again to their owner), and the rate.
	SentCacheHits    int64   `json:"sent_cache_hits,omitempty"`
	SentCacheLookups int64   `json:"sent_cache_lookups,omitempty"`
	SentCacheHitRate float64 `json:"sent_cache_hit_rate,omitempty"`
	// CashError, with Options.CheckCash, is OPIC's invariant after the
	// round: (cash of all pages + virtual − injected) / injected.
	CashError *float64 `json:"cash_error,omitempty"`
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

var classNames = [...]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx"}

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

package rounds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
	// Refetches counts the final results of refetches (pages fetched
	// again, with a conditional request: --refetch-interval); of which
	// NotModified were answered 304 Not Modified, Unchanged 2xx with the
	// body fetched before, and Changed the rest (a new body, or a
	// redirect, a gone page or an error: the stored copy is not known to
	// be the live one). Refetches = NotModified + Unchanged + Changed;
	// all 0, and left out, without refetch.
	Refetches   int64 `json:"refetches,omitempty"`
	NotModified int64 `json:"not_modified,omitempty"`
	Unchanged   int64 `json:"unchanged,omitempty"`
	Changed     int64 `json:"changed,omitempty"`
	// SitemapDue counts the fetched pages made due at once because a
	// sitemap gave them a <lastmod> newer than their copy.
	SitemapDue int64 `json:"sitemap_due,omitempty"`
	// NearDups counts the fetched pages found near-duplicates of pages
	// fetched before (store.Store.NearDupOf holds what each duplicates).
	NearDups int64 `json:"near_dups,omitempty"`
	// NoIndex counts the fetched pages that said noindex (meta robots or
	// X-Robots-Tag); Canonical, those that named another URL as their
	// canonical (rel=canonical). store.Store.DirectivesOf holds each
	// page's.
	NoIndex   int64 `json:"noindex,omitempty"`
	Canonical int64 `json:"canonical,omitempty"`
	// Traps counts the links (of pages, redirects and sitemaps) that the
	// trap rules refused, by rule.
	Traps TrapStats `json:"traps,omitzero"`
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
	// End is set on the last line only, once the crawl has stopped after
	// this round: why (exhausted, rounds, budget, signal) and the URLs it
	// left (see MarkEnd).
	End *Finish `json:"end,omitempty"`
}

// TrapStats counts links refused as spider traps, by rule (see
// fetcher.TrapCounts).
type TrapStats struct {
	// Repetition: a path segment, or a run of them, repeated too often.
	Repetition int64 `json:"repetition"`
	// Calendar: a calendar-like URL out of the rule's window.
	Calendar int64 `json:"calendar"`
}

// Total returns the links refused by every rule.
func (t TrapStats) Total() int64 { return t.Repetition + t.Calendar }

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

// MarkEnd records on the last line of this node's stats/rounds.jsonl that
// the crawl stopped after that round, and why (the line's "end" field): the
// leader does it when the site's crawl ends, the site when a signal stops
// a one-node site. A line marked already keeps its mark, unless the mark
// is a signal's and the crawl has ended since (resumed, it found nothing
// more to do); with no line (no round done on this node) there is nothing
// to mark. Only the line's closing brace (or its mark) is overwritten: the
// rest of the file is untouched, and readers that do not know the field
// see the line they knew. A crawl stopped by a signal and resumed keeps
// the mark of its stop on the line where it stopped.
func (c *Crawler) MarkEnd(end Finish) error {
	_, err := c.markEnd(0, end)
	return err
}

// markEnd marks the last line of rounds.jsonl with end if its round is
// round (0: whichever round it is); it reports whether the line carries
// the mark now.
func (c *Crawler) markEnd(round uint64, end Finish) (bool, error) {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	path := c.statsF.Name()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("rounds: mark the end: %w", err)
	}
	defer f.Close()
	line, off, err := lastLine(f)
	if err != nil || line == nil {
		return false, err
	}
	var last struct {
		Round uint64  `json:"round"`
		End   *Finish `json:"end"`
	}
	if err := json.Unmarshal(line, &last); err != nil {
		return false, fmt.Errorf("rounds: mark the end: the last line of %s: %w", path, err)
	}
	if round != 0 && last.Round != round {
		return last.End != nil, nil
	}
	// The line ends in "}\n": the field goes in before the brace, or in
	// place of a signal's mark (always the line's last field), padded
	// with blanks to its length so that nothing is left past the line.
	at := int64(len(line)) - 1
	if last.End != nil {
		i := bytes.LastIndex(line, []byte(`,"end":`))
		if last.End.Reason != EndSignal || end.Reason == EndSignal || i < 0 {
			return true, nil
		}
		at = int64(i)
	}
	e, err := json.Marshal(end)
	if err != nil {
		return false, err
	}
	tail := append([]byte(`,"end":`), e...)
	if pad := int(int64(len(line))-1-at) - len(tail); pad > 0 {
		tail = append(tail, bytes.Repeat([]byte(" "), pad)...)
	}
	tail = append(tail, "}\n"...)
	if _, err := f.WriteAt(tail, off+at); err != nil {
		return false, fmt.Errorf("rounds: mark the end in %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("rounds: mark the end in %s: %w", path, err)
	}
	return true, nil
}

// lastLine returns the last line of f (without its newline) and where it
// starts; nil if f is empty. A last line without its newline (a write cut
// short) or not a JSON object is an error.
func lastLine(f *os.File) ([]byte, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("rounds: mark the end: %w", err)
	}
	size := st.Size()
	if size == 0 {
		return nil, 0, nil
	}
	const chunk = 64 << 10
	var buf []byte // the file's tail read so far
	start := size
	for {
		n := min(int64(chunk), start)
		start -= n
		b := make([]byte, n, int(n)+len(buf))
		if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("rounds: mark the end: %w", err)
		}
		buf = append(b, buf...)
		if buf[len(buf)-1] != '\n' {
			return nil, 0, fmt.Errorf("rounds: mark the end: %s does not end with a whole line", f.Name())
		}
		if i := bytes.LastIndexByte(buf[:len(buf)-1], '\n'); i >= 0 || start == 0 {
			line := buf[i+1 : len(buf)-1]
			if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' {
				return nil, 0, fmt.Errorf("rounds: mark the end: the last line of %s is not a JSON object", f.Name())
			}
			return line, start + int64(i+1), nil
		}
	}
}

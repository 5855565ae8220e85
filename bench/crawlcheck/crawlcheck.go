// Package crawlcheck checks a finished crawl against websim's ground truth:
// coverage of the reachable, robots-allowed URLs, politeness as websim saw
// it, how well OPIC importance ranks pages against PageRank computed on
// the truth graph, and the precision and recall of near-duplicate verdicts.
// Tests and benchmarks share it.
package crawlcheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// ReadTruth reads a truth JSONL file.
func ReadTruth(path string) ([]synth.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("crawlcheck: %w", err)
	}
	defer f.Close()
	var recs []synth.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		var r synth.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("crawlcheck: %s:%d: %w", path, line, err)
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}

// Truth collects a web's truth in memory.
func Truth(w *synth.Web) ([]synth.Record, error) {
	var recs []synth.Record
	err := w.Truth(func(r *synth.Record) error {
		c := *r
		c.Outlinks = slices.Clone(r.Outlinks)
		recs = append(recs, c)
		return nil
	})
	return recs, err
}

// Target reports whether a truth record is one a crawl must cover: a
// reachable, robots-allowed URL (robots.txt and sitemap files excluded).
func Target(r *synth.Record) bool {
	return r.Reachable && r.RobotsAllowed && r.Kind != "robots" && r.Kind != "sitemap"
}

// Coverage is how much of the target set a crawl fetched.
type Coverage struct {
	Targets  int      `json:"targets"`
	Covered  int      `json:"covered"`
	Ratio    float64  `json:"ratio"`
	Missing  []string `json:"missing_sample,omitempty"`  // up to 20
	Fetched  int      `json:"fetched"`                   // URLs in the database with a final status
	Unwanted []string `json:"unwanted_sample,omitempty"` // fetched, robots-disallowed in the truth (up to 20)
	Disallow int      `json:"robots_disallowed_fetched"`
}

func final(s store.Status) bool { return s >= store.StatusFetched }

// Reader is what the checks read of a crawl database: a *store.Store, or
// Stores (the shards of a sharded site).
type Reader interface {
	Get(url string) (store.URLRecord, bool, error)
	ScanURLs(fn func(store.URLRecord) error) error
	ScanNearDups(fn func(url, original string) error) error
}

// Stores reads several crawl databases as one (a sharded site's shards:
// each URL is in one of them).
type Stores []*store.Store

// Get returns url's record from the first store that has it.
func (ss Stores) Get(url string) (store.URLRecord, bool, error) {
	for _, st := range ss {
		r, ok, err := st.Get(url)
		if err != nil || ok {
			return r, ok, err
		}
	}
	return store.URLRecord{}, false, nil
}

// ScanNearDups scans every store's near-duplicates.
func (ss Stores) ScanNearDups(fn func(url, original string) error) error {
	for _, s := range ss {
		if err := s.ScanNearDups(fn); err != nil {
			return err
		}
	}
	return nil
}

// ScanURLs scans every store's URL records.
func (ss Stores) ScanURLs(fn func(store.URLRecord) error) error {
	for _, st := range ss {
		if err := st.ScanURLs(fn); err != nil {
			return err
		}
	}
	return nil
}

// Check compares the crawl database with the truth.
func Check(truth []synth.Record, st Reader) (Coverage, error) {
	var c Coverage
	byURL := map[string]*synth.Record{}
	for i := range truth {
		r := &truth[i]
		byURL[r.URL] = r
		if r.Canonical != "" {
			byURL[r.Canonical] = r
		}
	}
	for i := range truth {
		r := &truth[i]
		if !Target(r) {
			continue
		}
		c.Targets++
		u := r.URL
		if r.Canonical != "" {
			u = r.Canonical
		}
		rec, ok, err := st.Get(u)
		if err != nil {
			return c, err
		}
		if ok && final(rec.Status) {
			c.Covered++
		} else if len(c.Missing) < 20 {
			s := "absent"
			if ok {
				s = rec.Status.String()
			}
			c.Missing = append(c.Missing, u+" ("+s+")")
		}
	}
	err := st.ScanURLs(func(rec store.URLRecord) error {
		if !final(rec.Status) {
			return nil
		}
		c.Fetched++
		if t := byURL[rec.URL]; t != nil && !t.RobotsAllowed && rec.Status != store.StatusRobotsDenied {
			c.Disallow++
			if len(c.Unwanted) < 20 {
				c.Unwanted = append(c.Unwanted, rec.URL)
			}
		}
		return nil
	})
	if c.Targets > 0 {
		c.Ratio = float64(c.Covered) / float64(c.Targets)
	}
	return c, err
}

// Politeness lists every breach of politeness in websim's statistics:
// robots.txt violations, two requests at once to a host, host intervals
// under hostDelay (or the host's own minimum from minFor, if larger), IP
// intervals under ipDelay.
func Politeness(snap *websim.Snapshot, hostDelay, ipDelay time.Duration, minFor func(host string) time.Duration) []string {
	var out []string
	if snap.RobotsViolationCount > 0 {
		out = append(out, fmt.Sprintf("%d robots.txt violations, e.g. %v", snap.RobotsViolationCount, snap.RobotsViolations[:min(5, len(snap.RobotsViolations))]))
	}
	hosts := make([]string, 0, len(snap.Hosts))
	for h := range snap.Hosts {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		v := snap.Hosts[h]
		if v.MaxConcurrent > 1 {
			out = append(out, fmt.Sprintf("host %s: %d requests at once", h, v.MaxConcurrent))
		}
		want := hostDelay
		if minFor != nil {
			want = max(want, minFor(h))
		}
		if v.MinIntervalMS != nil && *v.MinIntervalMS < float64(want)/float64(time.Millisecond) {
			out = append(out, fmt.Sprintf("host %s: min interval %.1f ms < %v", h, *v.MinIntervalMS, want))
		}
	}
	for ip, v := range snap.IPs {
		if v.MinIntervalMS != nil && *v.MinIntervalMS < float64(ipDelay)/float64(time.Millisecond) {
			out = append(out, fmt.Sprintf("ip %s: min interval %.1f ms < %v", ip, *v.MinIntervalMS, ipDelay))
		}
	}
	return out
}

// PageRank computes PageRank (damping d) over the truth's pages with status
// 200, following their outlinks to other such pages, with session-id URLs
// taken as their canonical page; dangling pages spread their rank evenly.
// It returns rank by (canonical) URL.
func PageRank(truth []synth.Record, d float64, iters int) map[string]float64 {
	// A URL with a session id is the same page as its canonical form,
	// which is what a crawler keeps: nodes and links use the canonical URL.
	canon := map[string]string{}
	for i := range truth {
		if r := &truth[i]; r.Canonical != "" && r.Canonical != r.URL {
			canon[r.URL] = r.Canonical
		}
	}
	name := func(u string) string {
		if c, ok := canon[u]; ok {
			return c
		}
		return u
	}
	idx := map[string]int{}
	var urls []string
	for i := range truth {
		r := &truth[i]
		if r.Status == 200 && r.Kind != "robots" && r.Kind != "sitemap" {
			u := name(r.URL)
			if _, ok := idx[u]; !ok {
				idx[u] = len(urls)
				urls = append(urls, u)
			}
		}
	}
	n := len(urls)
	out := make([][]int, n)
	for i := range truth {
		r := &truth[i]
		from, ok := idx[name(r.URL)]
		if !ok || out[from] != nil {
			continue
		}
		for _, l := range r.Outlinks {
			if to, ok := idx[name(l)]; ok {
				out[from] = append(out[from], to)
			}
		}
		if out[from] == nil {
			out[from] = []int{}
		}
	}
	pr := make([]float64, n)
	next := make([]float64, n)
	for i := range pr {
		pr[i] = 1 / float64(n)
	}
	for range iters {
		dangling := 0.0
		for i := range next {
			next[i] = 0
		}
		for i, o := range out {
			if len(o) == 0 {
				dangling += pr[i]
				continue
			}
			s := pr[i] / float64(len(o))
			for _, j := range o {
				next[j] += s
			}
		}
		base := (1-d)/float64(n) + d*dangling/float64(n)
		for i := range next {
			next[i] = base + d*next[i]
		}
		pr, next = next, pr
	}
	m := make(map[string]float64, n)
	for i, u := range urls {
		m[u] = pr[i]
	}
	return m
}

// ranks returns the fractional ranks of xs (ties share their mean rank).
func ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	r := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && xs[idx[j+1]] == xs[idx[i]] {
			j++
		}
		mean := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = mean
		}
		i = j + 1
	}
	return r
}

// Spearman is the rank correlation of xs and ys (Pearson correlation of
// their ranks, so ties are handled); NaN with fewer than two points.
func Spearman(xs, ys []float64) float64 {
	if len(xs) != len(ys) || len(xs) < 2 {
		return math.NaN()
	}
	rx, ry := ranks(xs), ranks(ys)
	var mx, my float64
	for i := range rx {
		mx += rx[i]
		my += ry[i]
	}
	mx /= float64(len(rx))
	my /= float64(len(ry))
	var sxy, sxx, syy float64
	for i := range rx {
		dx, dy := rx[i]-mx, ry[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// Ranking compares OPIC importance (history + cash) of the fetched pages
// with their PageRank on the truth graph.
type Ranking struct {
	Pages    int     `json:"pages"`
	Spearman float64 `json:"spearman"`
}

// CompareRanking computes Ranking over the pages fetched with status 200.
func CompareRanking(truth []synth.Record, st Reader) (Ranking, error) {
	pr := PageRank(truth, 0.85, 60)
	var xs, ys []float64
	err := st.ScanURLs(func(rec store.URLRecord) error {
		if rec.Status != store.StatusFetched {
			return nil
		}
		if p, ok := pr[rec.URL]; ok {
			xs = append(xs, rec.History+rec.Cash)
			ys = append(ys, p)
		}
		return nil
	})
	return Ranking{Pages: len(xs), Spearman: Spearman(xs, ys)}, err
}

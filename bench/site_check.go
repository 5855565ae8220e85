package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
	"github.com/nlnwa/gowarc/v3"
)

// politeness checks websim's statistics against the host delay, the
// address delay and each host's robots crawl-delay (capped as the site
// caps it).
func (r *siteRun) politeness(res *SiteResult, snap *websim.Snapshot) {
	res.Breaches, res.BreachSample = politenessBreaches(r.web, snap, r.cfg.HostDelay, r.cfg.IPDelay, r.cfg.MaxCrawlDelay)
}

// politenessBreaches counts the breaches in websim's statistics of web w
// (each robots.txt violation counts) and lists up to maxBreachesKept.
func politenessBreaches(w *synth.Web, snap *websim.Snapshot, hostDelay, ipDelay, maxCrawlDelay time.Duration) (int, []string) {
	delays := map[string]time.Duration{}
	for _, h := range w.Hosts() {
		if h.CrawlDelay > 0 {
			delays[h.Name] = min(time.Duration(h.CrawlDelay)*time.Second, maxCrawlDelay)
		}
	}
	b := crawlcheck.Politeness(snap, hostDelay, ipDelay, func(host string) time.Duration { return delays[host] })
	n := len(b)
	if snap.RobotsViolationCount > 0 { // one line for them all: count each violation
		n += int(snap.RobotsViolationCount) - 1
	}
	return n, b[:min(len(b), maxBreachesKept)]
}

// hostileReport lists the hosts with a hostile role: what websim saw of
// them and what the rounds' troubled_hosts said.
func hostileReport(w *synth.Web, snap *websim.Snapshot, stats []rounds.RoundStats) []HostileHost {
	var out []HostileHost
	for _, h := range w.Hosts() {
		if h.Role == synth.RoleNone {
			continue
		}
		hh := HostileHost{Host: h.Name, Role: h.Role.String(), Websim: snap.Hosts[h.Name]}
		for _, s := range stats {
			for name, f := range s.Troubled {
				if stripPort(name) != h.Name {
					continue
				}
				hh.Rounds++
				if hh.Fate == nil {
					hh.Fate = &rounds.HostFate{ByStatus: map[string]int64{}}
				}
				for k, n := range f.ByStatus {
					hh.Fate.ByStatus[k] += n
				}
				hh.Fate.Retries += f.Retries
				hh.Fate.Truncated += f.Truncated
				if f.LastError != "" {
					hh.Fate.LastError = f.LastError
				}
			}
		}
		out = append(out, hh)
	}
	return out
}

func stripPort(host string) string {
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		return host[:i]
	}
	return host
}

// check opens the stopped site's crawl database and compares it with the
// web's truth; it also scans the WARC files if asked.
func (r *siteRun) check(ctx context.Context, res *SiteResult) error {
	truth, err := compactTruth(r.web)
	if err != nil {
		return err
	}
	st, closeData, err := crawlcheck.OpenData(r.data)
	if err != nil {
		return fmt.Errorf("bench: open the site's crawl database: %w", err)
	}
	defer closeData()
	if res.Coverage, err = crawlcheck.Check(truth, st); err != nil {
		return fmt.Errorf("bench: coverage: %w", err)
	}
	if res.Ranking, err = crawlcheck.CompareRanking(truth, st); err != nil {
		return fmt.Errorf("bench: ranking: %w", err)
	}
	nd, err := crawlcheck.ScoreCrawl(truth, st)
	if err != nil {
		return fmt.Errorf("bench: near-duplicates: %w", err)
	}
	res.NearDups = &nd
	f := PolitenessFloor(r.web, truth, r.cfg.HostDelay, r.cfg.IPDelay, r.cfg.MaxCrawlDelay)
	if res.Exit == "exhausted" && f.S > 0 {
		f.Ratio = res.WindowS / f.S
	}
	res.Floor = &f
	if r.cfg.ScanWARC {
		host := ""
		if !strings.HasPrefix(f.By, "ip ") {
			host = f.By
		}
		w, at, err := scanWARCHost(ctx, filepath.Join(r.data, "warc"), host)
		if err != nil {
			return err
		}
		res.WARC = &w
		if host != "" && !r.winStart.IsZero() {
			f.Timeline = floorTimeline(at, r.winStart, time.Duration(f.DelayS*float64(time.Second)))
		}
	}
	return nil
}

// floorTimeline sums up when the host that sets the floor was fetched
// (at: its responses' WARC-Dates, to the second), from the window's start.
func floorTimeline(at []time.Time, start time.Time, delay time.Duration) *FloorTimeline {
	if len(at) == 0 {
		return nil
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	tl := &FloorTimeline{Fetches: len(at), FirstS: at[0].Sub(start).Seconds(), LastS: at[len(at)-1].Sub(start).Seconds()}
	// WARC-Date is to the second: a gap counts from a second beyond the
	// delay, and only that excess is idle time.
	slack := delay + time.Second
	for i := 1; i < len(at); i++ {
		d := at[i].Sub(at[i-1])
		if d <= slack {
			continue
		}
		excess := (d - delay).Seconds()
		tl.Gaps++
		tl.GapS += excess
		if excess > tl.LongestS {
			tl.LongestS, tl.LongestAtS = excess, at[i-1].Sub(start).Seconds()
		}
	}
	for _, t := range at {
		m := max(0, int(t.Sub(start)/time.Minute))
		for len(tl.PerMinute) <= m {
			tl.PerMinute = append(tl.PerMinute, 0)
		}
		tl.PerMinute[m]++
	}
	return tl
}

// compactTruth is crawlcheck.Truth with every string interned and outlinks
// kept only where PageRank reads them (pages with status 200), so that a
// web of millions of URLs fits in a few hundred MB.
func compactTruth(w *synth.Web) ([]synth.Record, error) {
	strs := map[string]string{}
	intern := func(s string) string {
		if v, ok := strs[s]; ok {
			return v
		}
		strs[s] = s
		return s
	}
	var recs []synth.Record
	err := w.Truth(func(r *synth.Record) error {
		c := *r
		c.URL, c.Canonical, c.Host, c.IP = intern(r.URL), intern(r.Canonical), intern(r.Host), intern(r.IP)
		c.ContentType, c.Kind, c.Role, c.DuplicateOf = intern(r.ContentType), intern(r.Kind), intern(r.Role), intern(r.DuplicateOf)
		c.Outlinks = nil
		if r.Status == http.StatusOK && r.Kind != "robots" && r.Kind != "sitemap" {
			c.Outlinks = make([]string, len(r.Outlinks))
			for i, l := range r.Outlinks {
				c.Outlinks[i] = intern(l)
			}
		}
		recs = append(recs, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: the web's truth: %w", err)
	}
	return recs, nil
}

// scanWARC counts the response records in dir's WARC files by URL.
func scanWARC(ctx context.Context, dir string) (WARCStats, error) {
	st, _, err := scanWARCHost(ctx, dir, "")
	return st, err
}

// scanWARCHost is scanWARC that also returns the WARC-Dates of host's
// responses (none for host "").
func scanWARCHost(ctx context.Context, dir, host string) (WARCStats, []time.Time, error) {
	var st WARCStats
	var at []time.Time
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil {
		return st, nil, fmt.Errorf("bench: %w", err)
	}
	open, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz.open")) // left by a site that was killed
	files = append(files, open...)
	sort.Strings(files)
	st.Files = len(files)
	byURL := map[string][]int{}
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return st, nil, fmt.Errorf("bench: scan WARC files: %w", err)
		}
		if err := scanWARCFile(path, byURL, &st, host, &at); err != nil {
			return st, nil, err
		}
	}
	st.URLs = len(byURL)
	var examples []string
	for u, codes := range byURL {
		ok, complete, other := 0, 0, 0
		shown := make([]string, len(codes))
		for i, c := range codes {
			shown[i] = strconv.Itoa(c)
			if c >= truncatedMark {
				c -= truncatedMark
				shown[i] = strconv.Itoa(c) + "(truncated)"
			} else if c/100 == 2 {
				complete++
			}
			if c/100 == 2 {
				ok++
			}
			if c/100 != 5 && c != http.StatusTooManyRequests {
				other++
			}
		}
		if complete > 1 {
			st.MultiComplete2xx++
		}
		if ok > 1 {
			st.Multi2xx++
			if !strings.HasSuffix(u, "/robots.txt") && !strings.Contains(u, "sitemap") {
				st.Multi2xxPages++
			}
		}
		if other > 1 {
			st.MultiAny++
			examples = append(examples, u+" "+strings.Join(shown, " "))
		}
	}
	sort.Strings(examples)
	st.Examples = examples[:min(len(examples), maxDupExamples)]
	return st, at, nil
}

// warcOptions make gowarc lenient (a torn or odd record still counts) but
// have it parse HTTP response blocks, whose status is what is counted.
var warcOptions = []gowarc.WarcRecordOption{
	gowarc.WithSyntaxErrorPolicy(gowarc.ErrIgnore),
	gowarc.WithSpecViolationPolicy(gowarc.ErrIgnore),
	gowarc.WithUnknownRecordTypePolicy(gowarc.ErrIgnore),
	gowarc.WithBlockErrorPolicy(gowarc.ErrIgnore),
}

// truncatedMark is added to the status of a WARC-Truncated response while
// scanning.
const truncatedMark = 1000

// scanWARCFile adds the statuses of path's response records to byURL
// (-1: no HTTP status could be read; truncatedMark added: truncated), and
// the WARC-Dates of host's responses to at.
func scanWARCFile(path string, byURL map[string][]int, st *WARCStats, host string, at *[]time.Time) error {
	rd, err := gowarc.NewWarcFileReader(path, 0, warcOptions...)
	if err != nil {
		return fmt.Errorf("bench: open %s: %w", path, err)
	}
	defer rd.Close()
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			rec.Close()
			if strings.HasSuffix(path, ".open") { // a torn last record
				return nil
			}
			return fmt.Errorf("bench: read %s at %d: %w", path, rec.Offset, err)
		}
		wr := rec.WarcRecord
		if wr.Type() == gowarc.Response {
			code := -1
			if hb, ok := wr.Block().(gowarc.HttpResponseBlock); ok {
				code = hb.HttpStatusCode()
			}
			u := wr.WarcHeader().Get(gowarc.WarcTargetURI)
			st.Responses++
			switch {
			case code < 0:
				st.NoStatus++
			case code/100 == 2:
				st.Responses2xx++
			}
			if code >= 0 && wr.WarcHeader().Has(gowarc.WarcTruncated) {
				st.Truncated++
				code += truncatedMark
			}
			byURL[u] = append(byURL[u], code)
			if host != "" {
				if pu, err := url.Parse(u); err == nil && pu.Hostname() == host {
					if t, err := time.Parse(time.RFC3339Nano, wr.WarcHeader().Get(gowarc.WarcDate)); err == nil {
						*at = append(*at, t)
					}
				}
			}
		}
		rec.Close()
	}
}

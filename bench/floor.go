package bench

import (
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// Floor is a web's politeness floor: the least time any polite crawler
// needs to crawl it to exhaustion, set by the host (or, with an address
// delay, the address) whose robots-allowed reachable URLs take longest at
// its delay: its URLs × (the host delay, or its robots Crawl-delay capped
// at the crawl's maximum, whichever is longer). robots.txt and sitemap
// requests are not counted, so the floor is a little below what any
// crawler can reach.
//
// With distance (PolitenessFloorRTT), a host is asked one request at a
// time and the next request starts its delay after the previous response
// ends, so each URL also costs a fetch's round trip from where it is
// fetched: the host's time is its URLs × (its delay + its RTT). A
// connection's handshake and DNS answers (one more RTT each) are not
// counted either.
type Floor struct {
	S      float64 `json:"s"`       // the floor, in seconds
	By     string  `json:"by"`      // the host, or "ip ADDR", that sets it
	URLs   int     `json:"urls"`    // its robots-allowed reachable URLs
	DelayS float64 `json:"delay_s"` // its delay between requests
	// RTTMS is the round trip a fetch from it pays, in milliseconds
	// (PolitenessFloorRTT; 0 without distance).
	RTTMS float64 `json:"rtt_ms,omitempty"`
	// Ratio is the crawl's time to exhaustion (first round's start to last
	// round's end) over S; 0 if the crawl did not run to exhaustion.
	Ratio float64 `json:"ratio,omitempty"`
	// Timeline is when the host that sets the floor was fetched (from the
	// WARC files, when they are scanned; not for an address's floor).
	Timeline *FloorTimeline `json:"timeline,omitempty"`
}

// FloorTimeline is when the host that sets the floor was fetched, in
// seconds from the measured window's start: a crawl ends later than its
// floor by the time that host started late, the time it had no URL to
// fetch (its gaps beyond its delay) and the time after its last fetch.
type FloorTimeline struct {
	Fetches int     `json:"fetches"` // its responses in the WARC files
	FirstS  float64 `json:"first_s"` // its first response (WARC-Date: to the second)
	LastS   float64 `json:"last_s"`  // its last
	// Gaps, GapS: the pauses between two of its responses longer than
	// its delay and a second (WARC-Date's resolution), and their time
	// beyond the delay; LongestS and LongestAtS the longest such excess
	// and when its pause began.
	Gaps       int     `json:"gaps"`
	GapS       float64 `json:"gap_s"`
	LongestS   float64 `json:"longest_gap_s"`
	LongestAtS float64 `json:"longest_gap_at_s"`
	// PerMinute counts its responses in each minute of the window.
	PerMinute []int `json:"per_minute"`
}

// PolitenessFloor computes the floor of web w from its truth (URLs counted
// by their canonical form, as a crawler that drops session ids fetches
// them), for a crawl with these delays, whose fetches take no time.
func PolitenessFloor(w *synth.Web, truth []synth.Record, hostDelay, ipDelay, maxCrawlDelay time.Duration) Floor {
	return PolitenessFloorRTT(w, truth, hostDelay, ipDelay, maxCrawlDelay, nil)
}

// PolitenessFloorRTT is PolitenessFloor for a crawl whose fetches of a
// host's URLs each pay rtt(host), the round trip between the host and
// whoever fetches it (nil: none): a host's time is its URLs × (its delay
// + its RTT), an address's its URLs × (the address delay + the smallest
// RTT of its hosts). Floor.RTTMS is the RTT of the host or address that
// sets it.
func PolitenessFloorRTT(w *synth.Web, truth []synth.Record, hostDelay, ipDelay, maxCrawlDelay time.Duration, rtt func(host string) time.Duration) Floor {
	if rtt == nil {
		rtt = func(string) time.Duration { return 0 }
	}
	delay := map[string]time.Duration{}
	for _, h := range w.Hosts() {
		d := hostDelay
		if h.CrawlDelay > 0 {
			d = max(d, min(time.Duration(h.CrawlDelay)*time.Second, maxCrawlDelay))
		}
		delay[h.Name] = d
	}
	perHost := map[string]int{}
	perIP := map[string]int{}
	ipRTT := map[string]time.Duration{} // the smallest RTT of the address's hosts
	eachTarget(truth, func(r *synth.Record) {
		perHost[r.Host]++
		perIP[r.IP]++
		if ipDelay > 0 {
			d := rtt(r.Host)
			if old, ok := ipRTT[r.IP]; !ok || d < old {
				ipRTT[r.IP] = d
			}
		}
	})
	var f Floor
	for h, n := range perHost {
		d, ok := delay[h]
		if !ok {
			d = hostDelay
		}
		r := rtt(h)
		if s := float64(n) * (d + r).Seconds(); s > f.S || s == f.S && h < f.By {
			f = Floor{S: s, By: h, URLs: n, DelayS: d.Seconds(), RTTMS: msOf(r)}
		}
	}
	if ipDelay > 0 {
		for ip, n := range perIP {
			r := ipRTT[ip]
			if s := float64(n) * (ipDelay + r).Seconds(); s > f.S {
				f = Floor{S: s, By: "ip " + ip, URLs: n, DelayS: ipDelay.Seconds(), RTTMS: msOf(r)}
			}
		}
	}
	return f
}

// eachTarget calls fn once for each of truth's robots-allowed reachable
// URLs (crawlcheck.Target), by canonical form: what a crawler that drops
// session ids fetches.
func eachTarget(truth []synth.Record, fn func(r *synth.Record)) {
	seen := map[string]bool{}
	for i := range truth {
		r := &truth[i]
		if !crawlcheck.Target(r) {
			continue
		}
		u := r.URL
		if r.Canonical != "" {
			u = r.Canonical
		}
		if !seen[u] {
			seen[u] = true
			fn(r)
		}
	}
}

// msOf is d in milliseconds.
func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

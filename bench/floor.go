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
type Floor struct {
	S      float64 `json:"s"`       // the floor, in seconds
	By     string  `json:"by"`      // the host, or "ip ADDR", that sets it
	URLs   int     `json:"urls"`    // its robots-allowed reachable URLs
	DelayS float64 `json:"delay_s"` // its delay between requests
	// Ratio is the crawl's time to exhaustion (first round's start to last
	// round's end) over S; 0 if the crawl did not run to exhaustion.
	Ratio float64 `json:"ratio,omitempty"`
}

// PolitenessFloor computes the floor of web w from its truth (URLs counted
// by their canonical form, as a crawler that drops session ids fetches
// them), for a crawl with these delays.
func PolitenessFloor(w *synth.Web, truth []synth.Record, hostDelay, ipDelay, maxCrawlDelay time.Duration) Floor {
	delay := map[string]time.Duration{}
	for _, h := range w.Hosts() {
		d := hostDelay
		if h.CrawlDelay > 0 {
			d = max(d, min(time.Duration(h.CrawlDelay)*time.Second, maxCrawlDelay))
		}
		delay[h.Name] = d
	}
	seen := map[string]bool{}
	perHost := map[string]int{}
	perIP := map[string]int{}
	for i := range truth {
		r := &truth[i]
		if !crawlcheck.Target(r) {
			continue
		}
		u := r.URL
		if r.Canonical != "" {
			u = r.Canonical
		}
		if seen[u] {
			continue
		}
		seen[u] = true
		perHost[r.Host]++
		perIP[r.IP]++
	}
	var f Floor
	for h, n := range perHost {
		d, ok := delay[h]
		if !ok {
			d = hostDelay
		}
		if s := float64(n) * d.Seconds(); s > f.S || s == f.S && h < f.By {
			f = Floor{S: s, By: h, URLs: n, DelayS: d.Seconds()}
		}
	}
	if ipDelay > 0 {
		for ip, n := range perIP {
			if s := float64(n) * ipDelay.Seconds(); s > f.S {
				f = Floor{S: s, By: "ip " + ip, URLs: n, DelayS: ipDelay.Seconds()}
			}
		}
	}
	return f
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/websim/synth"
)

// GeoFloorsConfig is the web of `bench geo-floors`: the geographic
// benchmark's web (bench federation --geo) made from several seeds, to see
// how much of its comparisons the web decides, not the crawler.
type GeoFloorsConfig struct {
	Hosts         int           `json:"hosts"`
	Pages         int           `json:"pages"`
	IPs           int           `json:"ips"`
	Seeds         []uint64      `json:"seeds"`
	Replicas      int           `json:"replicas"` // of the consistent partitioner
	HostDelay     time.Duration `json:"host_delay_ns"`
	MaxCrawlDelay time.Duration `json:"max_crawl_delay_ns"`
	// Progress, if set, is told of each seed.
	Progress func(format string, args ...any) `json:"-"`
}

// DefaultGeoFloorsConfig is the web of `make -C bench federation-geo`
// from seeds 1-12.
func DefaultGeoFloorsConfig() GeoFloorsConfig {
	seeds := make([]uint64, 12)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return GeoFloorsConfig{Hosts: 1000, Pages: 20, IPs: 256, Seeds: seeds, Replicas: 200,
		HostDelay: 100 * time.Millisecond, MaxCrawlDelay: 200 * time.Millisecond}
}

// WithDefaults checks c.
func (c GeoFloorsConfig) WithDefaults() (GeoFloorsConfig, error) {
	var errs []error
	if c.Hosts < 3 || c.Hosts > 100_000 {
		errs = append(errs, fmt.Errorf("bench: geo-floors: hosts must be in [3, 100000], got %d", c.Hosts))
	}
	if c.Pages < 1 || c.Pages > 10_000 {
		errs = append(errs, fmt.Errorf("bench: geo-floors: pages must be in [1, 10000], got %d", c.Pages))
	}
	if c.IPs < 1 || c.IPs > 4096 {
		errs = append(errs, fmt.Errorf("bench: geo-floors: ips must be in [1, 4096], got %d", c.IPs))
	}
	if len(c.Seeds) == 0 || len(c.Seeds) > 1000 {
		errs = append(errs, fmt.Errorf("bench: geo-floors: give 1 to 1000 seeds, got %d", len(c.Seeds)))
	}
	if c.Replicas < 1 || c.Replicas > 100_000 {
		errs = append(errs, fmt.Errorf("bench: geo-floors: replicas must be in [1, 100000], got %d", c.Replicas))
	}
	if c.HostDelay <= 0 || c.MaxCrawlDelay < 0 {
		errs = append(errs, fmt.Errorf("bench: geo-floors: want a positive host delay and a max crawl-delay ≥ 0, got %v and %v", c.HostDelay, c.MaxCrawlDelay))
	}
	return c, errors.Join(errs...)
}

// GeoWebFloors is one web's floors and modelled latencies in each
// geographic run (GeoModes): what the web lets the runs' time to
// exhaustion and mean fetch latency be, whatever the crawler does.
type GeoWebFloors struct {
	Seed uint64 `json:"seed"`
	// Largest is the host with the most robots-allowed reachable URLs,
	// and where it is.
	Largest     string `json:"largest"`
	LargestURLs int    `json:"largest_urls"`
	LargestCity string `json:"largest_city"`
	// Floors are the distance-aware politeness floors per run
	// (PolitenessFloorRTT; stretched: its lower bound, the nearest node).
	Floors map[string]Floor `json:"floors"`
	// MeanRTTMS is, per run, the mean over the web's URLs of the round
	// trip between the host and whoever fetches it: what websim charges
	// each response on a warm connection.
	MeanRTTMS map[string]float64 `json:"mean_rtt_ms"`
	// TimeRatio and LatencyRatio are, per other run, its floor and its
	// mean RTT over the distance run's.
	TimeRatio    map[string]float64 `json:"time_ratio"`
	LatencyRatio map[string]float64 `json:"latency_ratio"`
}

// GeoFloorsResult is `bench geo-floors`' result.
type GeoFloorsResult struct {
	Webs []GeoWebFloors `json:"webs"`
	// Meets counts, per comparison ("time_vs_consistent", …), the webs
	// whose ratio reaches its target (geoExhaustionTarget,
	// geoLatencyTarget): a crawl cannot beat its floor, so a web that
	// misses a time target by its floors misses it in any crawl.
	Meets map[string]int `json:"meets"`
}

// GeoFloors computes, for the web of each seed of c, the floors and mean
// round trips of the geographic benchmark's runs. It starts nothing: the
// webs are made in memory, their hosts placed and owned as the runs do
// (newGeoWeb).
func GeoFloors(ctx context.Context, c GeoFloorsConfig) (GeoFloorsResult, error) {
	var res GeoFloorsResult
	c, err := c.WithDefaults()
	if err != nil {
		return res, err
	}
	res.Meets = map[string]int{}
	for _, seed := range c.Seeds {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if c.Progress != nil {
			c.Progress("seed %d", seed)
		}
		w, err := synth.New(synth.Options{Hosts: c.Hosts, Pages: c.Pages, IPs: c.IPs, Seed: seed, Profile: synth.Realistic})
		if err != nil {
			return res, fmt.Errorf("bench: geo-floors: seed %d: %w", seed, err)
		}
		row, err := geoWebFloors(w, seed, c)
		if err != nil {
			return res, err
		}
		for _, mode := range GeoModes()[1:] {
			if mode == GeoStretched {
				continue // its floor is a lower bound; its comparison is WAN traffic
			}
			if row.TimeRatio[mode] >= geoExhaustionTarget {
				res.Meets["time_vs_"+mode]++
			}
			if row.LatencyRatio[mode] >= geoLatencyTarget {
				res.Meets["latency_vs_"+mode]++
			}
		}
		res.Webs = append(res.Webs, row)
	}
	return res, nil
}

// geoWebFloors is GeoFloors for one web.
func geoWebFloors(w *synth.Web, seed uint64, c GeoFloorsConfig) (GeoWebFloors, error) {
	row := GeoWebFloors{Seed: seed, Floors: map[string]Floor{}, MeanRTTMS: map[string]float64{},
		TimeRatio: map[string]float64{}, LatencyRatio: map[string]float64{}}
	db, err := geoDBOf(w)
	if err != nil {
		return row, err
	}
	g, err := newGeoWeb(w, db, c.Replicas)
	db.Close()
	if err != nil {
		return row, err
	}
	truth, err := compactTruth(w)
	if err != nil {
		return row, err
	}
	perHost := map[string]int{}
	eachTarget(truth, func(r *synth.Record) { perHost[r.Host]++ })
	for h, n := range perHost {
		if n > row.LargestURLs || n == row.LargestURLs && h < row.Largest {
			row.Largest, row.LargestURLs = h, n
		}
	}
	city := map[string]string{}
	for _, e := range w.GeoEntries() {
		city[e.IP.String()] = e.City.Name
	}
	for _, h := range w.Hosts() {
		if h.Name == row.Largest {
			row.LargestCity = city[h.IP.String()]
		}
	}
	for _, mode := range GeoModes() {
		rtt := g.rtt(mode)
		row.Floors[mode] = PolitenessFloorRTT(w, truth, c.HostDelay, 0, c.MaxCrawlDelay, rtt)
		var sum time.Duration
		urls := 0
		for h, n := range perHost {
			sum += time.Duration(n) * rtt(h)
			urls += n
		}
		if urls > 0 {
			row.MeanRTTMS[mode] = msOf(sum) / float64(urls)
		}
	}
	d := GeoDistance
	for _, mode := range GeoModes()[1:] {
		row.TimeRatio[mode] = ratio(row.Floors[mode].S, row.Floors[d].S)
		row.LatencyRatio[mode] = ratio(row.MeanRTTMS[mode], row.MeanRTTMS[d])
	}
	return row, nil
}

// Report is the table of the webs and the count of those that meet each
// target.
func (res GeoFloorsResult) Report(c GeoFloorsConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bench geo-floors: %d realistic hosts × %d pages on %d addresses, host delay %v, max crawl-delay %v; "+
		"what each web lets the geographic runs' time to exhaustion (the distance-aware floor) and mean fetch latency (the mean RTT) be\n\n",
		c.Hosts, c.Pages, c.IPs, c.HostDelay, c.MaxCrawlDelay)
	fmt.Fprintf(&b, "  %4s  %-34s  %8s %8s %8s %8s  %11s %11s  %9s %9s %9s  %11s %11s\n", "seed", "largest host (URLs, city)",
		"dist s", "cons s", "cent s", "str s", "time ×cons", "time ×cent", "RTT dist", "RTT cons", "RTT cent", "lat. ×cons", "lat. ×cent")
	for _, r := range res.Webs {
		largest := fmt.Sprintf("%s (%d, %s)", r.Largest, r.LargestURLs, r.LargestCity)
		fmt.Fprintf(&b, "  %4d  %-34s  %8.1f %8.1f %8.1f %8.1f  %11.2f %11.2f  %9.1f %9.1f %9.1f  %11.2f %11.2f\n", r.Seed, largest,
			r.Floors[GeoDistance].S, r.Floors[GeoConsistent].S, r.Floors[GeoCentral].S, r.Floors[GeoStretched].S,
			r.TimeRatio[GeoConsistent], r.TimeRatio[GeoCentral],
			r.MeanRTTMS[GeoDistance], r.MeanRTTMS[GeoConsistent], r.MeanRTTMS[GeoCentral],
			r.LatencyRatio[GeoConsistent], r.LatencyRatio[GeoCentral])
	}
	n := len(res.Webs)
	fmt.Fprintf(&b, "\n  webs whose floors allow ≥ %.1f× the time to exhaustion: against consistent %d of %d, against central %d of %d\n",
		geoExhaustionTarget, res.Meets["time_vs_"+GeoConsistent], n, res.Meets["time_vs_"+GeoCentral], n)
	fmt.Fprintf(&b, "  webs whose mean RTTs are ≥ %.1f× apart: against consistent %d of %d, against central %d of %d\n",
		geoLatencyTarget, res.Meets["latency_vs_"+GeoConsistent], n, res.Meets["latency_vs_"+GeoCentral], n)
	fmt.Fprintf(&b, "  (time to exhaustion is the slowest host's: its URLs × (delay + the RTT from whoever fetches it), so it is decided by\n"+
		"   where the largest hosts are and who owns them; latency is a mean over every URL)\n")
	return b.String()
}

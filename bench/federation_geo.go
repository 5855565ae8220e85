package bench

import (
	"bytes"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/partition/geoip"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/geodb"
	"github.com/meridian-crawler/meridian/websim/geodelay"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// The geographic benchmark (bench federation --geo, issue 22): websim
// makes each site's fetches pay the round trips between the site and the
// hosts' cities (package geodelay), and one web spread over the world is
// crawled to exhaustion four ways. This file holds its model: the sites'
// client addresses, the WAN delay between sites, where each host is and
// who fetches it, the distance-aware floor's RTTs, and the fetch latency
// read from websim's statistics.

// The geographic runs (FederationRun.Geo), in the order they are made.
const (
	// GeoDistance: three federated sites, the distance partitioner (hosts
	// located with the GeoIP file of websim's addresses).
	GeoDistance = "distance"
	// GeoConsistent: three federated sites, consistent hashing.
	GeoConsistent = "consistent"
	// GeoCentral: one site in eu fetching the whole web, with the three
	// sites' resources (FederationConfig.Width × 3, Workers × 3).
	GeoCentral = "central"
	// GeoStretched: one site of three nodes across the WAN, node n1 in eu,
	// n2 in us and n3 in asia, each fetching the parts it is given.
	GeoStretched = "stretched"
)

// Targets of the geographic benchmark.
const (
	geoLatencyTarget    = 1.5  // the others' mean fetch latency over distance's
	geoExhaustionTarget = 1.5  // the others' time to exhaustion over distance's
	geoTrafficTarget    = 0.95 // WAN bytes per page saved against stretched
	geoSpeedupTarget    = 1.75 // stretched's time to exhaustion over distance's (UniCrawl: 1.75)
)

// GeoModes are the geographic runs, in the order they are made.
func GeoModes() []string { return []string{GeoDistance, GeoConsistent, GeoCentral, GeoStretched} }

// GeoClient is where a site (or a node of the stretched site) fetches
// from: its source address (site up --fetch-from), which websim knows as
// a client at the site's coordinates (websim --clients).
type GeoClient struct {
	Site string  `json:"site"`
	Addr string  `json:"addr"`
	Lat  float64 `json:"lat"`
	Lon  float64 `json:"lon"`
}

// point is where c is.
func (c GeoClient) point() geodelay.Point { return geodelay.Point{Lat: c.Lat, Lon: c.Lon} }

// GeoClients are the benchmark's clients: eu 127.0.2.1, us 127.0.2.2 and
// asia 127.0.2.3, at FederationSites' coordinates (Hamburg, New York,
// Singapore). The stretched site's node nI fetches from the I-th.
func GeoClients() []GeoClient {
	var out []GeoClient
	for i, s := range FederationSites() {
		out = append(out, GeoClient{Site: s.Name, Addr: fmt.Sprintf("127.0.2.%d", i+1), Lat: s.Lat, Lon: s.Lon})
	}
	return out
}

// geoClientList is cs as websim's clients (Options.Clients, and the lines
// of its --clients file).
func geoClientList(cs []GeoClient) ([]geodelay.Client, error) {
	var out []geodelay.Client
	for _, c := range cs {
		a, err := netip.ParseAddr(c.Addr)
		if err != nil {
			return nil, fmt.Errorf("bench: client %s: %w", c.Site, err)
		}
		out = append(out, geodelay.Client{Addr: a, Name: c.Site, Loc: c.point()})
	}
	if err := geodelay.Check(out); err != nil {
		return nil, fmt.Errorf("bench: clients: %w", err)
	}
	return out, nil
}

// GeoSitePair is the modelled distance and one-way delay between two
// sites (geodelay.OneWay).
type GeoSitePair struct {
	A        string  `json:"a"`
	B        string  `json:"b"`
	KM       float64 `json:"km"`
	OneWayMS float64 `json:"one_way_ms"`
}

// GeoSitePairs are the pairs of FederationSites with their modelled
// one-way delays.
func GeoSitePairs() []GeoSitePair {
	sites := FederationSites()
	var out []GeoSitePair
	for i := range sites {
		for j := i + 1; j < len(sites); j++ {
			a := geodelay.Point{Lat: sites[i].Lat, Lon: sites[i].Lon}
			b := geodelay.Point{Lat: sites[j].Lat, Lon: sites[j].Lon}
			out = append(out, GeoSitePair{A: sites[i].Name, B: sites[j].Name,
				KM: geodelay.DistanceKm(a, b), OneWayMS: msOf(geodelay.OneWay(a, b))})
		}
	}
	return out
}

// GeoWANDelay is the geographic benchmark's one-way WAN delay between
// sites, from the same distance model websim uses for fetches: the mean of
// the sites' pairs' geodelay.OneWay, rounded to the millisecond (package
// wan gives every link one delay, so the pairs cannot each have theirs).
func GeoWANDelay() time.Duration {
	pairs := GeoSitePairs()
	sum := 0.0
	for _, p := range pairs {
		sum += p.OneWayMS
	}
	return time.Duration(math.Round(sum/float64(len(pairs)))) * time.Millisecond
}

// geoWeb is where the web's hosts are and who fetches them in each
// geographic run.
type geoWeb struct {
	clients []GeoClient
	loc     map[string]geodelay.Point // host name → its address's city
	// owner is each host's owning site under the distance and consistent
	// partitioners, computed as the sites compute it.
	owner map[string]map[string]string
}

// newGeoWeb places w's hosts at their addresses' cities and computes
// their owners among FederationSites as the sites do: partition.New of the
// federation file's kind, sites and replicas, each host keyed by its
// address (partition.Key) and located through db, the GeoIP database the
// sites read (the distance partitioner's input).
func newGeoWeb(w *synth.Web, db *geoip.DB, replicas int) (*geoWeb, error) {
	g := &geoWeb{clients: GeoClients(), loc: map[string]geodelay.Point{}, owner: map[string]map[string]string{}}
	city := map[netip.Addr]geodelay.Point{}
	for _, e := range w.GeoEntries() {
		city[e.IP] = geodelay.PointOf(e.City)
	}
	var sites []partition.Site
	for _, s := range FederationSites() {
		sites = append(sites, partition.Site{Name: s.Name, Lat: s.Lat, Lon: s.Lon, Capacity: s.Capacity})
	}
	hosts := make([]partition.Host, 0, len(w.Hosts()))
	for _, h := range w.Hosts() {
		if p, ok := city[h.IP]; ok {
			g.loc[h.Name] = p
		}
		loc, err := db.Lookup(h.IP)
		if err != nil {
			return nil, fmt.Errorf("bench: locate %s: %w", h.Name, err)
		}
		hosts = append(hosts, partition.Host{Name: h.Name, Key: partition.Key(h.Name, []netip.Addr{h.IP}), Loc: loc})
	}
	for _, kind := range []string{partition.KindDistance, partition.KindConsistent} {
		p, err := partition.New(kind, sites, replicas)
		if err != nil {
			return nil, fmt.Errorf("bench: %s partitioner: %w", kind, err)
		}
		own := make(map[string]string, len(hosts))
		for _, h := range hosts {
			own[h.Name] = p.Owner(h, nil)
		}
		g.owner[kind] = own
	}
	return g, nil
}

// clientOf returns the client of the named site.
func (g *geoWeb) clientOf(site string) (GeoClient, bool) {
	for _, c := range g.clients {
		if c.Site == site {
			return c, true
		}
	}
	return GeoClient{}, false
}

// hostRTT is the modelled round trip between the named site's client and
// host (0 if either has no place: websim charges nothing then).
func (g *geoWeb) hostRTT(site, host string) time.Duration {
	c, ok := g.clientOf(site)
	p, known := g.loc[host]
	if !ok || !known {
		return 0
	}
	return geodelay.RTT(c.point(), p)
}

// rtt returns, for the floor of the geographic run mode, each host's RTT
// from whoever fetches it: its owner site (distance, consistent), eu
// (central), or the nearest of the three nodes (stretched: which node
// fetches a host is not fixed, so this is a lower bound).
func (g *geoWeb) rtt(mode string) func(host string) time.Duration {
	switch mode {
	case GeoDistance, GeoConsistent:
		own := g.owner[mode]
		return func(host string) time.Duration { return g.hostRTT(own[host], host) }
	case GeoCentral:
		return func(host string) time.Duration { return g.hostRTT(g.clients[0].Site, host) }
	default:
		return func(host string) time.Duration {
			best := time.Duration(-1)
			for _, c := range g.clients {
				if d := g.hostRTT(c.Site, host); best < 0 || d < best {
					best = d
				}
			}
			return max(best, 0)
		}
	}
}

// geoRunClients are the clients a geographic run fetches from: eu's alone
// for the central site, all three otherwise.
func geoRunClients(mode string) []GeoClient {
	cs := GeoClients()
	if mode == GeoCentral {
		return cs[:1]
	}
	return cs
}

// GeoFetch is the fetch latency websim saw from a run's clients: the
// modelled delays it held their responses for (two RTTs for a
// connection's first response, one for each later one) and its DNS
// answers (one RTT each).
type GeoFetch struct {
	// Requests, MeanMS: Σ of the clients' requests and their
	// requests-weighted mean delay; P95MS: the 95th percentile of their
	// histograms added up (1 ms buckets, rounded up, as websim's own).
	Requests int64   `json:"requests"`
	MeanMS   float64 `json:"mean_ms"`
	P95MS    float64 `json:"p95_ms"`
	// DNSAnswers, MeanDNSMS: Σ of the clients' DNS answers and their
	// answers-weighted mean delay.
	DNSAnswers int64   `json:"dns_answers"`
	MeanDNSMS  float64 `json:"mean_dns_ms"`
	// Clients: each client's own figures.
	Clients []GeoClientFetch `json:"clients"`
}

// GeoClientFetch is one client's figures, from websim's statistics.
type GeoClientFetch struct {
	Site       string  `json:"site"`
	Addr       string  `json:"addr"`
	Requests   int64   `json:"requests"`
	MeanMS     float64 `json:"mean_ms"`
	P95MS      float64 `json:"p95_ms"`
	DNSAnswers int64   `json:"dns_answers"`
}

// combineFetch combines the statistics websim kept of clients (keyed by
// address, as Snapshot.Clients) into one run's fetch latency.
func combineFetch(stats map[string]*websim.ClientVisitor, clients []GeoClient) GeoFetch {
	var f GeoFetch
	hist := map[int]int64{}
	var sum, dnsSum float64
	for _, c := range clients {
		cf := GeoClientFetch{Site: c.Site, Addr: c.Addr}
		if v := stats[c.Addr]; v != nil {
			cf.Requests, cf.DNSAnswers = v.Requests, v.DNSAnswers
			if v.MeanDelayMS != nil {
				cf.MeanMS = *v.MeanDelayMS
				sum += cf.MeanMS * float64(v.Requests)
			}
			if v.P95DelayMS != nil {
				cf.P95MS = *v.P95DelayMS
			}
			if v.MeanDNSDelayMS != nil {
				dnsSum += *v.MeanDNSDelayMS * float64(v.DNSAnswers)
			}
			for ms, n := range v.DelayHistMS {
				hist[ms] += n
			}
		}
		f.Requests += cf.Requests
		f.DNSAnswers += cf.DNSAnswers
		f.Clients = append(f.Clients, cf)
	}
	f.MeanMS = ratio(sum, float64(f.Requests))
	f.MeanDNSMS = ratio(dnsSum, float64(f.DNSAnswers))
	f.P95MS = histPercentile(hist, 95)
	return f
}

// histPercentile is the p-th percentile of a histogram of whole
// milliseconds: the smallest bucket whose cumulative count reaches
// ⌈p × n / 100⌉ (websim's rule); 0 for an empty histogram.
func histPercentile(hist map[int]int64, p int64) float64 {
	var n int64
	top := 0
	for ms, c := range hist {
		n += c
		top = max(top, ms)
	}
	if n == 0 {
		return 0
	}
	rank := (p*n + 99) / 100
	var seen int64
	for ms := 0; ms <= top; ms++ {
		if seen += hist[ms]; seen >= rank {
			return float64(ms)
		}
	}
	return float64(top)
}

// hostShares is each site's share of hosts under the partitioner kind
// (GeoDistance or GeoConsistent); nil for another.
func (g *geoWeb) hostShares(kind string) map[string]float64 {
	own := g.owner[kind]
	if len(own) == 0 {
		return nil
	}
	out := map[string]float64{}
	for _, s := range own {
		out[s] += 1 / float64(len(own))
	}
	return out
}

// geoDBOf is w's GeoIP database as websim --geoip writes it, in memory.
func geoDBOf(w *synth.Web) (*geoip.DB, error) {
	var buf bytes.Buffer
	if err := geodb.Write(&buf, w.GeoEntries()); err != nil {
		return nil, fmt.Errorf("bench: GeoIP database: %w", err)
	}
	db, err := geoip.FromBytes(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("bench: GeoIP database: %w", err)
	}
	return db, nil
}

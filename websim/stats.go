package websim

import (
	"encoding/json"
	"math"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/websim/geodelay"
)

// maxViolations bounds the robots violations a Stats keeps (the count goes on).
const maxViolations = 10_000

// maxKeys bounds the distinct hosts and IPs a Stats tracks, so that a client
// inventing Host headers cannot grow it without end; the rest count under "_other".
const maxKeys = 1 << 20

// Visitor is what websim saw of its visitors on one host or one IP.
type Visitor struct {
	Requests      int64         `json:"requests"`
	MaxConcurrent int64         `json:"max_concurrent"`
	MinIntervalMS *float64      `json:"min_interval_ms"` // null below two requests
	InFlight      int64         `json:"in_flight"`
	Statuses      map[int]int64 `json:"statuses,omitempty"`
}

// Snapshot is the body of GET /_websim/stats.
type Snapshot struct {
	Hosts                map[string]*Visitor `json:"hosts"`
	IPs                  map[string]*Visitor `json:"ips"`
	RobotsViolations     []string            `json:"robots_violations"`
	RobotsViolationCount int64               `json:"robots_violation_count"`
	Requests             int64               `json:"requests"`
	UnknownHost          int64               `json:"unknown_host_requests"`
	// Clients has one entry per named client (Options.Clients), keyed by
	// its address; absent from the JSON when there are none.
	Clients map[string]*ClientVisitor `json:"clients,omitempty"`
	// ConditionalRequests counts the GETs of responses with validators
	// (pages of a web with synth.Options.Changes) that carried
	// If-None-Match or If-Modified-Since. Absent from the JSON while zero.
	ConditionalRequests int64 `json:"conditional_requests,omitempty"`
	// NotModified counts the conditional requests answered 304 Not
	// Modified. Absent from the JSON while zero.
	NotModified int64 `json:"not_modified,omitempty"`
	// SimTime is the simulated clock (RFC 3339, to the nanosecond) when the
	// snapshot was taken, for a web with synth.Options.Changes; absent
	// otherwise.
	SimTime string `json:"sim_time,omitempty"`
}

// ClientVisitor is what websim saw of one named client and the delays the
// distance model made it pay (see package geodelay).
type ClientVisitor struct {
	// Name, Lat and Lon are the client's, from the clients file.
	Name string  `json:"name,omitempty"`
	Lat  float64 `json:"lat"`
	Lon  float64 `json:"lon"`
	// Requests counts the HTTP requests from the client's address.
	Requests int64 `json:"requests"`
	// MeanDelayMS is the mean modelled delay added before a response's
	// first byte (one RTT, two on a connection's first request), in
	// milliseconds; null before the first request.
	MeanDelayMS *float64 `json:"mean_delay_ms"`
	// P95DelayMS is the 95th percentile of those delays, to the
	// millisecond above (delays of 2 s or more count as 2 s); null before
	// the first request.
	P95DelayMS *float64 `json:"p95_delay_ms"`
	// DelayHistMS counts the requests by delay, in whole milliseconds
	// rounded up (2000: 2 s or more), for percentiles over several
	// clients; only the delays seen.
	DelayHistMS map[int]int64 `json:"delay_hist_ms,omitempty"`
	// DNSAnswers counts the DNS queries answered to the client's address.
	DNSAnswers int64 `json:"dns_answers"`
	// MeanDNSDelayMS is the mean delay of those answers (one RTT to the
	// host's city, none for names without one), in milliseconds; null
	// before the first answer.
	MeanDNSDelayMS *float64 `json:"mean_dns_delay_ms"`
}

// clientCounter counts what one named client did and paid. Its counters are
// atomic so that the request path takes no lock.
type clientCounter struct {
	client                                    geodelay.Client
	requests, delayNS, dnsAnswers, dnsDelayNS atomic.Int64
	// delayHist counts requests by delay, in whole milliseconds rounded
	// up (the last bucket: delayBuckets−1 ms or more).
	delayHist [delayBuckets]atomic.Int64
}

// delayBuckets is the size of a client's delay histogram (1 ms buckets).
const delayBuckets = 2001

// request records a request that was held for d.
func (c *clientCounter) request(d time.Duration) {
	c.delayNS.Add(int64(d))
	c.requests.Add(1)
	ms := (max(d, 0) + time.Millisecond - 1) / time.Millisecond
	c.delayHist[min(int(ms), delayBuckets-1)].Add(1)
}

// hist returns the non-empty buckets of the delay histogram, nil if none.
func (c *clientCounter) hist() map[int]int64 {
	var h map[int]int64
	for i := range c.delayHist {
		if n := c.delayHist[i].Load(); n > 0 {
			if h == nil {
				h = map[int]int64{}
			}
			h[i] = n
		}
	}
	return h
}

// p95 returns the 95th percentile of the delays recorded, in
// milliseconds, or nil if there are none.
func (c *clientCounter) p95() *float64 {
	var n int64
	for i := range c.delayHist {
		n += c.delayHist[i].Load()
	}
	if n == 0 {
		return nil
	}
	rank := (95*n + 99) / 100 // the smallest count covering 95%
	var seen int64
	for i := range c.delayHist {
		if seen += c.delayHist[i].Load(); seen >= rank {
			ms := float64(i)
			return &ms
		}
	}
	ms := float64(delayBuckets - 1)
	return &ms
}

// dns records a DNS answer that was held for d.
func (c *clientCounter) dns(d time.Duration) {
	c.dnsDelayNS.Add(int64(d))
	c.dnsAnswers.Add(1)
}

func (c *clientCounter) reset() {
	c.requests.Store(0)
	c.delayNS.Store(0)
	c.dnsAnswers.Store(0)
	c.dnsDelayNS.Store(0)
	for i := range c.delayHist {
		c.delayHist[i].Store(0)
	}
}

func (c *clientCounter) visitor() *ClientVisitor {
	mean := func(sum, n int64) *float64 {
		if n <= 0 {
			return nil
		}
		ms := float64(sum) / float64(n) / float64(time.Millisecond)
		ms = math.Round(ms*1000) / 1000
		return &ms
	}
	n, dn := c.requests.Load(), c.dnsAnswers.Load()
	return &ClientVisitor{
		Name: c.client.Name, Lat: c.client.Loc.Lat, Lon: c.client.Loc.Lon,
		Requests: n, MeanDelayMS: mean(c.delayNS.Load(), n), P95DelayMS: c.p95(), DelayHistMS: c.hist(),
		DNSAnswers: dn, MeanDNSDelayMS: mean(c.dnsDelayNS.Load(), dn),
	}
}

type counter struct {
	requests, inFlight, maxConc int64
	last                        time.Time
	minInterval                 time.Duration // -1 until two requests
	statuses                    map[int]int64
}

func (c *counter) start(now time.Time) {
	if c.requests > 0 {
		if d := now.Sub(c.last); c.minInterval < 0 || d < c.minInterval {
			c.minInterval = max(d, 0)
		}
	}
	c.requests++
	c.last = now
	c.inFlight++
	c.maxConc = max(c.maxConc, c.inFlight)
}

func (c *counter) visitor() *Visitor {
	v := &Visitor{Requests: c.requests, MaxConcurrent: c.maxConc, InFlight: c.inFlight}
	if c.requests >= 2 {
		ms := float64(c.minInterval) / float64(time.Millisecond)
		ms = math.Round(ms*1000) / 1000
		v.MinIntervalMS = &ms
	}
	if len(c.statuses) > 0 {
		v.Statuses = make(map[int]int64, len(c.statuses))
		for k, n := range c.statuses {
			v.Statuses[k] = n
		}
	}
	return v
}

// Stats observes websim's visitors: per host and per IP, the number of
// requests, the most at once, and the shortest interval between two request
// starts; and the robots-disallowed URLs that were requested. It is safe for
// concurrent use.
type Stats struct {
	now func() time.Time
	// clients is set by watchClients before serving and never changed
	// after: read without the lock.
	clients map[netip.Addr]*clientCounter
	// simNow, if set, reads the simulated clock; set before serving, like
	// clients.
	simNow func() time.Time
	// conditional and notModified count conditional GETs and their 304s.
	conditional, notModified atomic.Int64
	mu                       struct {
		sync.Mutex
		hosts, ips  map[string]*counter
		violations  []string
		violationN  int64
		requests    int64
		unknownHost int64
		urls        map[string]int64 // 2xx answers per URL, once CountURLs is called
	}
}

// CountURLs makes the Stats count, from now on, the requests for each URL
// answered with a 2xx status (URLRequests): a request log for tests that
// count what was fetched twice (retries of failed requests are not
// counted). It costs a map entry per URL, up to maxKeys URLs.
func (s *Stats) CountURLs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.urls == nil {
		s.mu.urls = map[string]int64{}
	}
}

// URLRequests returns the 2xx answers per URL counted since CountURLs
// (nil before it).
func (s *Stats) URLRequests() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.urls == nil {
		return nil
	}
	out := make(map[string]int64, len(s.mu.urls))
	for u, n := range s.mu.urls {
		out[u] = n
	}
	return out
}

// NewStats returns empty Stats; now defaults to time.Now.
func NewStats(now func() time.Time) *Stats {
	if now == nil {
		now = time.Now
	}
	s := &Stats{now: now}
	s.Reset()
	return s
}

// Reset forgets everything observed so far.
func (s *Stats) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.hosts = map[string]*counter{}
	s.mu.ips = map[string]*counter{}
	s.mu.violations = nil
	s.mu.violationN = 0
	s.mu.requests = 0
	s.mu.unknownHost = 0
	if s.mu.urls != nil {
		s.mu.urls = map[string]int64{}
	}
	for _, c := range s.clients {
		c.reset()
	}
	s.conditional.Store(0)
	s.notModified.Store(0)
}

// countConditional records a conditional GET, answered 304 if notModified.
func (s *Stats) countConditional(notModified bool) {
	s.conditional.Add(1)
	if notModified {
		s.notModified.Add(1)
	}
}

// watchClients makes s count the named clients and returns their counters
// by address. It must be called before s is shared, at most once.
func (s *Stats) watchClients(clients []geodelay.Client) map[netip.Addr]*clientCounter {
	if len(clients) == 0 {
		return nil
	}
	s.clients = make(map[netip.Addr]*clientCounter, len(clients))
	for _, c := range clients {
		s.clients[c.Addr] = &clientCounter{client: c}
	}
	return s.clients
}

func getLocked(m map[string]*counter, key string) *counter {
	c := m[key]
	if c == nil {
		if len(m) >= maxKeys {
			key = "_other"
			if c = m[key]; c != nil {
				return c
			}
		}
		c = &counter{minInterval: -1}
		m[key] = c
	}
	return c
}

// Start records the start of a request to host (known: false for a name the
// web does not serve) on ip, and whether robots.txt disallows it (url names
// it). The returned func records its end with the response status.
func (s *Stats) Start(host string, known bool, ip string, disallowed bool, url string) (end func(status int)) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.requests++
	var hc *counter
	if known {
		hc = getLocked(s.mu.hosts, host)
		hc.start(now)
	} else {
		s.mu.unknownHost++
	}
	ic := getLocked(s.mu.ips, ip)
	ic.start(now)
	if disallowed {
		s.mu.violationN++
		if len(s.mu.violations) < maxViolations {
			s.mu.violations = append(s.mu.violations, url)
		}
	}
	return func(status int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mu.urls != nil && status >= 200 && status < 300 && (len(s.mu.urls) < maxKeys || s.mu.urls[url] > 0) {
			s.mu.urls[url]++
		}
		for _, c := range []*counter{hc, ic} {
			if c == nil {
				continue
			}
			c.inFlight--
			if c.statuses == nil {
				c.statuses = map[int]int64{}
			}
			c.statuses[status]++
		}
	}
}

// Snapshot returns a copy of what has been observed.
func (s *Stats) Snapshot() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := &Snapshot{
		Hosts:                make(map[string]*Visitor, len(s.mu.hosts)),
		IPs:                  make(map[string]*Visitor, len(s.mu.ips)),
		RobotsViolations:     append([]string{}, s.mu.violations...),
		RobotsViolationCount: s.mu.violationN,
		Requests:             s.mu.requests,
		UnknownHost:          s.mu.unknownHost,
	}
	for k, c := range s.mu.hosts {
		snap.Hosts[k] = c.visitor()
	}
	for k, c := range s.mu.ips {
		snap.IPs[k] = c.visitor()
	}
	sort.Strings(snap.RobotsViolations)
	snap.ConditionalRequests, snap.NotModified = s.conditional.Load(), s.notModified.Load()
	if s.simNow != nil {
		snap.SimTime = s.simNow().Format(time.RFC3339Nano)
	}
	if len(s.clients) > 0 {
		snap.Clients = make(map[string]*ClientVisitor, len(s.clients))
		for a, c := range s.clients {
			snap.Clients[a.String()] = c.visitor()
		}
	}
	return snap
}

// MarshalJSON is the stats endpoint's body.
func (s *Stats) MarshalJSON() ([]byte, error) { return json.Marshal(s.Snapshot()) }

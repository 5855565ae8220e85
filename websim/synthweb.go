package websim

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/websim/geodb"
	"github.com/meridian-crawler/meridian/websim/geodelay"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// Options configure a synthetic websim.
type Options struct {
	// Web describes the web. Web.Port is the HTTP port to listen on, the same
	// on every address; 0 picks a free one (and the URLs carry it).
	Web synth.Options
	// DNSAddr is where the DNS server listens ("IP:port", UDP and TCP); empty: no DNS.
	DNSAddr string
	// DNSTTL is the TTL of DNS answers. Default 300s.
	DNSTTL time.Duration
	// AdminAddr is where GET /_websim/stats is served; empty: no admin endpoint.
	AdminAddr string
	// TruthPath, if set, receives the ground truth as JSONL before serving starts.
	TruthPath string
	// GeoIPPath, if set, receives a GeoIP2-City database of the web's addresses.
	GeoIPPath string
	// Limits bound what hostile hosts cost websim.
	Limits Limits
	// Clients names client source addresses and where they are (read them
	// from a clients file with geodelay.ReadFile). A connection or DNS query
	// from one of them pays the modelled network delay to the city of the
	// host it reaches (see package geodelay, and Server.ClientRTT), and
	// Snapshot.Clients reports what each did and paid. Empty (the
	// default): nobody pays anything and nothing changes.
	Clients []geodelay.Client
	// Logger defaults to a discard logger.
	Logger *slog.Logger
	// TimeScale is how fast websim's simulated clock runs (see Clock):
	// simulated time per unit of wall-clock time, in (0, MaxTimeScale].
	// A web with Web.Changes serves every page at its version at the
	// simulated time; 86400 is a simulated day per second. Default 1.
	TimeScale float64
	// Now is the wall clock the simulated clock reads, for tests. Default
	// time.Now.
	Now func() time.Time
}

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	w := o.Web
	port := w.Port
	w.EnsureDefaults()
	if port == 0 {
		w.Port = 80 // any valid value: the real one comes from the listener
	}
	errs := []error{w.Validate()}
	l := o.Limits
	l.ensureDefaults()
	errs = append(errs, l.validate()...)
	if o.DNSTTL < 0 {
		errs = append(errs, fmt.Errorf("websim: dns ttl must not be negative, got %v", o.DNSTTL))
	}
	if ts := o.TimeScale; ts != 0 && !(ts > 0 && ts <= MaxTimeScale) {
		errs = append(errs, fmt.Errorf("websim: time scale must be in (0, %g], got %v", float64(MaxTimeScale), ts))
	}
	if err := geodelay.Check(o.Clients); err != nil {
		errs = append(errs, fmt.Errorf("websim: clients: %w", err))
	}
	for _, a := range []struct{ name, addr string }{{"dns", o.DNSAddr}, {"admin", o.AdminAddr}} {
		if a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("websim: %s address %q: %w", a.name, a.addr, err))
		}
	}
	return errors.Join(errs...)
}

// Start builds the web described by o, writes its truth and GeoIP files,
// and serves it until Close.
func Start(o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.Limits.ensureDefaults()
	wo := o.Web
	wo.EnsureDefaults()
	port := o.Web.Port
	wo.Port = max(port, 1)
	probe, err := synth.New(wo) // the addresses do not depend on the port
	if err != nil {
		return nil, err
	}
	lns, port, err := listenAll(probe.IPs(), port)
	if err != nil {
		return nil, err
	}
	wo.Port = port
	web, err := synth.New(wo)
	if err != nil {
		closeListeners(lns)
		return nil, err
	}
	if o.TruthPath != "" {
		if err := writeFileAtomic(o.TruthPath, web.WriteTruth); err != nil {
			closeListeners(lns)
			return nil, err
		}
	}
	if o.GeoIPPath != "" {
		if err := geodb.WriteFile(o.GeoIPPath, web.GeoEntries()); err != nil {
			closeListeners(lns)
			return nil, fmt.Errorf("websim: %w", err)
		}
	}
	if wo.Profile == synth.Hostile {
		// Built now, not at its first request: compressing it takes long
		// enough on a loaded machine (or under the race detector) that a
		// crawler waiting for the response's headers would time out, and
		// what the bomb tests is its body.
		gzipBomb()
	}
	stats := NewStats(nil)
	wall := o.Now
	if wall == nil {
		wall = time.Now
	}
	scale := o.TimeScale
	if scale == 0 {
		scale = 1
	}
	clock := &Clock{Epoch: web.Options().Epoch, Start: wall(), Scale: scale}
	sw := &synthWeb{web: web, lim: o.Limits, slow: make(chan struct{}, o.Limits.MaxSlow), done: make(chan struct{}),
		stats: stats, changes: wo.Changes, clock: *clock, wall: wall}
	if wo.Changes {
		stats.simNow = func() time.Time { return clock.At(wall()) }
	}
	sw.flaky = make([]int32, len(web.Hosts()))
	var places map[netip.Addr]geodelay.Point // only the distance model needs them
	if len(o.Clients) > 0 {
		places = make(map[netip.Addr]geodelay.Point, len(web.IPs()))
		for _, e := range web.GeoEntries() {
			places[e.IP] = geodelay.PointOf(e.City)
		}
	}
	be := backend{
		ips:     web.IPs(),
		places:  places,
		handler: sw,
		close:   sw.close,
		resolve: sw.resolve, // the web's hosts and its subdomain farm (farm.go)
		disallowed: func(host, pathQuery string) bool {
			h, ok := web.Lookup(host)
			return ok && pathQuery != "/robots.txt" && !web.RobotsAllowed(h, pathQuery)
		},
	}
	s, err := start(common{Port: port, DNSAddr: o.DNSAddr, DNSTTL: o.DNSTTL, AdminAddr: o.AdminAddr, Logger: o.Logger, Clients: o.Clients, Stats: stats}, be, lns, port)
	if err != nil {
		return nil, err
	}
	s.web, s.clock, s.wall = web, clock, wall
	return s, nil
}

func closeListeners(lns []net.Listener) {
	for _, l := range lns {
		l.Close()
	}
}

// writeFileAtomic writes path through a temporary file and a rename.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("websim: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("websim: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("websim: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("websim: write %s: %w", path, err)
	}
	return nil
}

// synthWeb serves a synth.Web over HTTP.
type synthWeb struct {
	web    *synth.Web
	lim    Limits
	done   chan struct{}  // closed when the server closes
	wg     sync.WaitGroup // blackhole readers
	slow   chan struct{}  // semaphore for drip, huge and blackhole responses
	mu     sync.Mutex
	flaky  []int32 // robots.txt requests seen per RobotsFlaky host
	closed bool    // no new blackhole readers once set
	// The simulated clock (read only with changes on) and the counters
	// of conditional requests.
	changes bool
	clock   Clock
	wall    func() time.Time
	stats   *Stats
}

// close ends the blackhole readers and waits for them.
func (sw *synthWeb) close() {
	sw.mu.Lock()
	if !sw.closed {
		sw.closed = true
		close(sw.done)
	}
	sw.mu.Unlock()
	sw.wg.Wait()
}

// respBuf is a pooled response body buffer and link scratch space.
type respBuf struct {
	b     []byte
	links []synth.Link
}

var bufPool = sync.Pool{New: func() any { return &respBuf{b: make([]byte, 0, 32<<10)} }}

func (sw *synthWeb) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr["Date"] = nil // deterministic bytes
	hdr["Server"] = []string{"websim"}
	name := hostOnly(r.Host)
	h, ok := sw.web.Lookup(name)
	if !ok {
		if n, farm := sw.web.FarmHost(name); farm {
			sw.serveFarm(w, r, n) // the hostile profile's subdomain farm (farm.go)
			return
		}
		hdr["Content-Type"] = []string{"text/plain; charset=utf-8"}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "websim: unknown host "+strconv.Quote(name)+"\n")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr["Allow"] = []string{"GET, HEAD"}
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	host := &sw.web.Hosts()[h]
	if r.URL.Path == "/robots.txt" && host.Robots == synth.RobotsFlaky && host.Role == synth.RoleNone {
		sw.mu.Lock()
		n := sw.flaky[h]
		sw.flaky[h]++
		sw.mu.Unlock()
		if n < synth.RobotsFailures {
			hdr["Retry-After"] = []string{"1"}
			http.Error(w, "service unavailable", http.StatusServiceUnavailable)
			return
		}
	}
	rb := bufPool.Get().(*respBuf)
	defer func() {
		if cap(rb.b) <= 1<<20 {
			bufPool.Put(rb)
		}
	}()
	var resp synth.Response
	if sw.changes {
		// The simulated origin's clock dates its answers (RFC 9110
		// §6.6.1), to the second: what a freshness measure reads back
		// from the WARC records (bench fresh).
		now := sw.clock.At(sw.wall())
		hdr["Date"] = []string{now.UTC().Format(http.TimeFormat)}
		resp = sw.web.RespondAt(rb.b[:0], rb.links, h, r.URL.Path, r.URL.RawQuery, now)
	} else {
		resp = sw.web.Respond(rb.b[:0], rb.links, h, r.URL.Path, r.URL.RawQuery)
	}
	rb.b, rb.links = resp.Body[:0], resp.Scratch
	switch resp.Special {
	case synth.SpecialBlackhole:
		sw.blackhole(w, r)
		return
	case synth.SpecialDrip, synth.SpecialHuge:
		select {
		case sw.slow <- struct{}{}:
			defer func() { <-sw.slow }()
		default:
			http.Error(w, "too many slow responses", http.StatusServiceUnavailable)
			return
		}
	}
	if resp.ETag != "" {
		hdr["Etag"] = []string{resp.ETag}
		hdr["Last-Modified"] = []string{resp.LastModified.UTC().Format(http.TimeFormat)}
		if r.Method == http.MethodGet {
			if conditional, unchanged := notModified(r.Header, resp.ETag, resp.LastModified); conditional {
				sw.stats.countConditional(unchanged)
				if unchanged {
					w.WriteHeader(http.StatusNotModified)
					return
				}
			}
		}
	}
	if resp.ContentType != "" {
		hdr["Content-Type"] = []string{resp.ContentType}
	}
	if resp.Location != "" {
		hdr["Location"] = []string{resp.Location}
	}
	body := resp.Body
	switch resp.Special {
	case synth.SpecialHuge:
		hdr["Content-Length"] = []string{strconv.Itoa(synth.HugeBytes)}
	case synth.SpecialBomb:
		body = gzipBomb()
		hdr["Content-Encoding"] = []string{"gzip"}
		hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	default:
		hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(resp.Status)
	if r.Method == http.MethodHead {
		return
	}
	switch resp.Special {
	case synth.SpecialDrip:
		sw.drip(w, r, body)
	case synth.SpecialHuge:
		writeHuge(w, synth.HugeBytes)
	default:
		w.Write(body)
	}
}

// drip writes body a few bytes at a time, and gives up after DripMax.
func (sw *synthWeb) drip(w http.ResponseWriter, r *http.Request, body []byte) {
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(sw.lim.DripMax + time.Second))
	deadline := time.NewTimer(sw.lim.DripMax)
	defer deadline.Stop()
	tick := time.NewTicker(sw.lim.DripInterval)
	defer tick.Stop()
	for len(body) > 0 {
		n := min(sw.lim.DripChunk, len(body))
		if _, err := w.Write(body[:n]); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		body = body[n:]
		if len(body) == 0 {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			panic(http.ErrAbortHandler) // close the connection mid-body
		case <-r.Context().Done():
			return
		}
	}
}

var hugeChunk = bytes.Repeat([]byte("<p>websim huge body, far above any sane size limit.</p>\n"), 1200)

// writeHuge writes n bytes of filler, until the client goes away.
func writeHuge(w io.Writer, n int) {
	for n > 0 {
		c := hugeChunk[:min(n, len(hugeChunk))]
		if _, err := w.Write(c); err != nil {
			return
		}
		n -= len(c)
	}
}

// blackhole takes the connection and never answers, until the client goes
// away, BlackholeHold passes or the server closes.
func (sw *synthWeb) blackhole(w http.ResponseWriter, r *http.Request) {
	select {
	case sw.slow <- struct{}{}:
		defer func() { <-sw.slow }()
	default:
		panic(http.ErrAbortHandler) // over the limit: drop the connection
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(sw.lim.BlackholeHold))
	done := make(chan struct{})
	sw.mu.Lock()
	if sw.closed {
		sw.mu.Unlock()
		return
	}
	sw.wg.Add(1)
	sw.mu.Unlock()
	go func() { // owned by sw: ends when the connection does
		defer sw.wg.Done()
		io.Copy(io.Discard, conn)
		close(done)
	}()
	select {
	case <-done:
	case <-sw.done:
		conn.Close()
		<-done
	}
}

var (
	bombOnce sync.Once
	bombBody []byte
)

// BombInflated is how many bytes the gzip bomb inflates to.
const BombInflated = 1 << 30

// gzipBomb returns a gzip stream (concatenated members) that inflates to
// BombInflated zero bytes; it is built once, ~1 MiB.
func gzipBomb() []byte {
	bombOnce.Do(func() {
		var member bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
		zw.Write(make([]byte, 1<<20))
		zw.Close()
		m := member.Bytes()
		bombBody = bytes.Repeat(m, BombInflated>>20)
	})
	return bombBody
}

// Web returns the synthetic web a Server started by Start serves (nil for replay).
func (s *Server) Web() *synth.Web { return s.web }

// Clock returns the simulated clock of a Server started by Start (ok is
// false for replay). It runs whether or not the web changes; only a web
// with synth.Options.Changes serves by it.
func (s *Server) Clock() (c Clock, ok bool) {
	if s.clock == nil {
		return Clock{}, false
	}
	return *s.clock, true
}

// SimNow returns the simulated time now (the zero time for replay).
func (s *Server) SimNow() time.Time {
	if s.clock == nil {
		return time.Time{}
	}
	return s.clock.At(s.wall())
}

// hostAddr is used by tests: the address of host h.
func hostAddr(ip netip.Addr, port int) string { return netip.AddrPortFrom(ip, uint16(port)).String() }

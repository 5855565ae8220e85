// Package websim serves a synthetic web (package synth), static or changing
// on a simulated clock (Clock), or a recorded one
// (package replay) on many loopback addresses, with its own DNS server, a
// GeoIP database, a ground-truth file and an admin endpoint that reports
// what its visitors did, so that politeness can be checked from outside the
// crawler.
package websim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/websim/dnsserver"
	"github.com/meridian-crawler/meridian/websim/geodelay"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// Sentinel errors.
var (
	// ErrClosed is returned by operations on a closed Server.
	ErrClosed = errors.New("websim: closed")
)

// Limits bound what hostile hosts cost websim itself.
type Limits struct {
	// MaxSlow is the most drip, huge and blackhole responses served at once;
	// requests past it get 503 (blackholes: the connection is dropped).
	// Default 256.
	MaxSlow int
	// DripChunk bytes are written every DripInterval. Defaults 16 and 250ms.
	DripChunk    int
	DripInterval time.Duration
	// DripMax ends a drip (the connection is closed). Default 60s.
	DripMax time.Duration
	// BlackholeHold is how long a blackhole keeps a connection. Default 5m.
	BlackholeHold time.Duration
}

func (l *Limits) ensureDefaults() {
	if l.MaxSlow == 0 {
		l.MaxSlow = 256
	}
	if l.DripChunk == 0 {
		l.DripChunk = 16
	}
	if l.DripInterval == 0 {
		l.DripInterval = 250 * time.Millisecond
	}
	if l.DripMax == 0 {
		l.DripMax = 60 * time.Second
	}
	if l.BlackholeHold == 0 {
		l.BlackholeHold = 5 * time.Minute
	}
}

func (l Limits) validate() []error {
	var errs []error
	if l.MaxSlow < 1 || l.DripChunk < 1 || l.DripInterval <= 0 || l.DripMax <= 0 || l.BlackholeHold <= 0 {
		errs = append(errs, fmt.Errorf("websim: limits must be positive, got %+v", l))
	}
	return errs
}

// backend is what a Server serves: a synthetic or a replayed web.
type backend struct {
	ips     []netip.Addr
	handler http.Handler
	// resolve maps a lower-case host name to its address.
	resolve func(name string) (netip.Addr, bool)
	// disallowed reports whether robots.txt forbids host's pathQuery; nil: never.
	disallowed func(host, pathQuery string) bool
	// close, if set, ends the backend's own goroutines.
	close func()
	// selfObserved: the handler reports its requests itself, through
	// setObserver, because it serves several on a connection it takes over.
	setObserver func(func(*http.Request) func(int))
	// places maps each address to its city, for the distance model; nil:
	// no address has one, and named clients pay nothing.
	places map[netip.Addr]geodelay.Point
}

// common holds the options shared by both kinds of server.
type common struct {
	Port      int
	DNSAddr   string
	DNSTTL    time.Duration
	AdminAddr string
	Logger    *slog.Logger
	Clients   []geodelay.Client
	// Stats, if set, are the statistics to keep (otherwise new ones).
	Stats *Stats
}

// Server is a running websim: HTTP on every address of its web, DNS and
// admin endpoints. Close stops it.
type Server struct {
	log     *slog.Logger
	stats   *Stats
	port    int
	be      backend
	http    *http.Server
	admin   *http.Server
	adminLn net.Listener
	dns     *dnsserver.Server
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	geo     *geo // nil: no named clients

	closeOnce sync.Once
	closeErr  error
	web       *synth.Web
	clock     *Clock           // nil for replay
	wall      func() time.Time // the wall clock the simulated one reads
}

// listenAll binds port on every address; port 0 picks one free on all of
// them. It returns the listeners and the port.
func listenAll(ips []netip.Addr, port int) ([]net.Listener, int, error) {
	const tries = 20
	var lastErr error
	for range tries {
		lns, p, err := tryListenAll(ips, port)
		if err == nil {
			return lns, p, nil
		}
		lastErr = err
		if port != 0 {
			break
		}
	}
	return nil, 0, lastErr
}

func tryListenAll(ips []netip.Addr, port int) ([]net.Listener, int, error) {
	lns := make([]net.Listener, 0, len(ips))
	closeAll := func() {
		for _, l := range lns {
			l.Close()
		}
	}
	for _, ip := range ips {
		addr := netip.AddrPortFrom(ip, uint16(port)).String()
		ln, err := net.Listen("tcp4", addr)
		if err != nil {
			closeAll()
			return nil, 0, fmt.Errorf("websim: listen on %s: %w", addr, err)
		}
		lns = append(lns, ln)
		if port == 0 {
			port = ln.Addr().(*net.TCPAddr).Port
		}
	}
	return lns, port, nil
}

// start brings up the HTTP, DNS and admin endpoints of be on lns.
func start(c common, be backend, lns []net.Listener, port int) (*Server, error) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stats := c.Stats
	if stats == nil {
		stats = NewStats(nil)
	}
	s := &Server{log: c.Logger, stats: stats, port: port, be: be, ctx: ctx, cancel: cancel}
	s.geo = newGeo(s.stats, c.Clients, be.places, be.resolve)
	fail := func(err error) (*Server, error) {
		for _, l := range lns {
			l.Close()
		}
		s.Close()
		return nil, err
	}
	if c.DNSAddr != "" {
		do := dnsserver.Options{Addr: c.DNSAddr, TTL: c.DNSTTL, Lookup: be.resolve, Logger: c.Logger}
		if s.geo != nil {
			do.Delay = s.geo.dnsDelay
		}
		d, err := dnsserver.Start(do)
		if err != nil {
			return fail(fmt.Errorf("websim: dns: %w", err))
		}
		s.dns = d
	}
	if c.AdminAddr != "" {
		ln, err := net.Listen("tcp", c.AdminAddr)
		if err != nil {
			return fail(fmt.Errorf("websim: admin listen on %s: %w", c.AdminAddr, err))
		}
		s.adminLn = ln
		s.admin = &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
		s.goServe(s.admin, ln)
	}
	obs := observer(s.stats, &s.be)
	handler := observe(obs, s.geo, be.handler)
	if be.setObserver != nil {
		if g := s.geo; g != nil {
			inner := obs
			obs = func(r *http.Request) func(int) {
				g.count(r)
				return inner(r)
			}
		}
		be.setObserver(obs)
		handler = be.handler
	}
	if s.geo != nil {
		c.Logger.Info("websim: named clients pay for distance", "clients", len(c.Clients), "places", len(be.places))
	}
	s.http = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(c.Logger.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if s.geo != nil && be.places != nil && be.setObserver == nil {
		s.http.ConnContext = s.geo.connContext
	}
	for _, ln := range lns {
		s.goServe(s.http, ln)
	}
	return s, nil
}

func (s *Server) goServe(srv *http.Server, ln net.Listener) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("websim: serve", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// observer returns the function that records one request in stats and
// returns the func that records its end with the response status.
func observer(stats *Stats, be *backend) func(r *http.Request) (end func(status int)) {
	return func(r *http.Request) func(int) {
		name := hostOnly(r.Host)
		_, known := be.resolve(name)
		ip := ""
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if ta, ok := a.(*net.TCPAddr); ok {
				ip = ta.IP.String()
			}
		}
		disallowed := false
		if known && be.disallowed != nil {
			disallowed = be.disallowed(name, r.URL.RequestURI())
		}
		return stats.Start(name, known, ip, disallowed, "http://"+r.Host+r.URL.RequestURI())
	}
}

// observe wraps h with the visitor statistics and, if g is not nil, the
// distance model's hold after the request is stamped.
func observe(obs func(*http.Request) func(int), g *geo, h http.Handler) http.Handler {
	if g == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			end := obs(r)
			sw := &statusWriter{ResponseWriter: w}
			defer func() { end(sw.code()) }()
			h.ServeHTTP(sw, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		end := obs(r)
		read := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() { end(sw.code()) }()
		g.hold(r, read)
		h.ServeHTTP(sw, r)
	})
}

// hostOnly lower-cases a Host header and strips its port and trailing dot.
func hostOnly(hostport string) string {
	h := hostport
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) code() int { return w.status }

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_websim/stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		if err := enc.Encode(s.stats.Snapshot()); err != nil {
			s.log.Debug("websim: write stats", "err", err)
		}
	})
	mux.HandleFunc("POST /_websim/stats/reset", func(w http.ResponseWriter, r *http.Request) {
		s.stats.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_websim/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "ok port=%d ips=%d\n", s.port, len(s.be.ips))
	})
	return mux
}

// Port returns the HTTP port, the same on every address.
func (s *Server) Port() int { return s.port }

// IPs returns the addresses the web listens on.
func (s *Server) IPs() []netip.Addr { return s.be.ips }

// Addr returns "IP:port" of the host with the given name.
func (s *Server) Addr(host string) (string, bool) {
	ip, ok := s.be.resolve(hostOnly(host))
	if !ok {
		return "", false
	}
	return netip.AddrPortFrom(ip, uint16(s.port)).String(), true
}

// DNSAddr returns the DNS server's address, "" if none.
func (s *Server) DNSAddr() string {
	if s.dns == nil {
		return ""
	}
	return s.dns.Addr()
}

// AdminAddr returns the admin endpoint's address, "" if none.
func (s *Server) AdminAddr() string {
	if s.adminLn == nil {
		return ""
	}
	return s.adminLn.Addr().String()
}

// Stats returns the visitor statistics.
func (s *Server) Stats() *Stats { return s.stats }

// Dialer returns a DialContext that sends every connection for a web host to
// its address, as websim's DNS would: for clients in tests.
func (s *Server) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return s.DialerFrom(netip.Addr{})
}

// DialerFrom is Dialer with the connections' source address set to src (an
// invalid src: the system's choice), so that a test client can be one of
// the named clients of Options.Clients. With src set, only TCP networks can
// be dialled.
func (s *Server) DialerFrom(src netip.Addr) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	if src.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ip, ok := s.be.resolve(strings.ToLower(host))
		if !ok {
			// Only websim's own hosts and loopback literals: never a real resolver.
			a, err := netip.ParseAddr(host)
			if err != nil || !a.IsLoopback() {
				return nil, fmt.Errorf("websim: dial %s: not a host of this web", addr)
			}
			ip = a
		}
		return d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
	}
}

// ClientRTT returns the round-trip time the distance model charges between
// the named client at address client and host (a host name of the web or
// an address literal); ok is false if client is not named in the options'
// Clients or host has no city. A new connection's first response waits two
// RTTs, later ones one; a DNS answer for host's name waits one.
func (s *Server) ClientRTT(client netip.Addr, host string) (rtt time.Duration, ok bool) {
	return s.geo.clientRTT(client, host)
}

// Close stops every endpoint, ends slow responses and waits for its
// goroutines. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		var errs []error
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if s.http != nil {
			if err := s.http.Shutdown(ctx); err != nil {
				s.http.Close()
			}
		}
		if s.admin != nil {
			if err := s.admin.Shutdown(ctx); err != nil {
				s.admin.Close()
			}
		}
		if s.be.close != nil {
			s.be.close()
		}
		if s.dns != nil {
			errs = append(errs, s.dns.Close())
		}
		s.wg.Wait()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// portString is used in messages.
func portString(p int) string { return strconv.Itoa(p) }

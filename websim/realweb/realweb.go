// Package realweb serves a small web whose hosts behave as real servers
// do where they differ from websim's synthetic web: pages in other
// encodings, a robots.txt that redirects to another host, groups for a
// named agent, 429 with Retry-After, an IPv6-only host, a dual-stack
// host whose first addresses refuse, an HTTP/2-only host, spider traps, X-Robots-Tag and meta robots, canonical links,
// refreshes, frames, feeds, text and gzipped sitemaps, compressed
// bodies, certificates that do not verify, session cookies and a proxy.
//
// Every host runs its own real server on loopback (127.88.0.0/16, and
// ::1 for the IPv6 host), its names are served by a websim DNS server,
// its certificates are signed by the web's own CA (written to a file
// for SSL_CERT_FILE or a --tls-ca flag), and every request it receives
// is logged as it arrived (Requests), so that a test judges a crawler
// by what the servers saw, not by what the crawler says it did.
package realweb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/websim/dnsserver"
)

// Options configure a Web. Zero values get the documented defaults.
type Options struct {
	// Dir is where the CA certificate is written (ca.pem). "" → a new
	// temporary directory, removed by Close.
	Dir string
	// RetryAfter is the Retry-After of the busy host's 429 answer, in
	// whole seconds. 0 → 3 s.
	RetryAfter time.Duration
	// Now is the web's clock (calendar pages start at its month). nil →
	// time.Now.
	Now func() time.Time
	// Logger receives the servers' errors. nil → discard.
	Logger *slog.Logger
}

// Web is a running real-behaving web. Start it with Start, stop it with
// Close.
type Web struct {
	o      Options
	ca     *ca
	dir    string
	ownDir bool
	dns    *dnsserver.Server
	log    requestLog
	proxy  *proxy

	mu struct {
		sync.Mutex
		closed bool
	}
	names   map[string][]netip.Addr // host name → its addresses, for DNS and the proxy
	origins map[string]string       // host name → "scheme://name:port" of its main server
	tlsOrig map[string]string       // host name → "https://name:port" where it also serves TLS
	servers []*http.Server
	wg      sync.WaitGroup
}

// Host names of the web, each one behaviour (see hosts.go).
const (
	Zone           = "realweb.test"
	HostEncodings  = "enc." + Zone     // pages in Shift_JIS, windows-1251, UTF-16, a meta charset
	HostRobotsFrom = "example." + Zone // its robots.txt redirects to HostRobotsTo's
	HostRobotsTo   = "www.example." + Zone
	HostAgent      = "agent." + Zone      // robots.txt groups for AgentToken and *
	HostBusy       = "busy." + Zone       // a 429 with Retry-After
	HostIPv6       = "v6." + Zone         // AAAA only, on ::1
	HostHTTP2      = "h2." + Zone         // TLS, HTTP/2 or 505
	HostTraps      = "traps." + Zone      // a page at every path, a calendar
	HostSignals    = "signals." + Zone    // X-Robots-Tag, meta robots, canonical, refresh, frames, feeds, sitemaps
	HostCompressed = "gz." + Zone         // gzip, br and zstd bodies
	HostSecure     = "secure." + Zone     // http → https
	HostSelfSigned = "selfsigned." + Zone // a self-signed certificate
	HostExpired    = "expired." + Zone    // an expired certificate
	HostSession    = "session." + Zone    // pages behind a session cookie
	HostDualStack  = "dual." + Zone       // AAAA ::1 and A 127.88.0.250, where nothing listens, and an A where it serves
)

// AgentToken is the product token HostAgent's robots.txt names; a crawler
// with the User-Agent UserAgent matches it.
const (
	AgentToken = "realwebbot"
	UserAgent  = "RealwebBot/1.0 (+http://contact.realweb.test/)"
)

// Start builds the web and starts its servers, DNS server and proxy.
func Start(o Options) (*Web, error) {
	if o.RetryAfter == 0 {
		o.RetryAfter = 3 * time.Second
	}
	if o.RetryAfter < time.Second || o.RetryAfter%time.Second != 0 {
		return nil, fmt.Errorf("realweb: RetryAfter %v is not a whole number of seconds (at least 1)", o.RetryAfter)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Web{o: o, dir: o.Dir, names: map[string][]netip.Addr{}, origins: map[string]string{}, tlsOrig: map[string]string{}}
	if w.dir == "" {
		d, err := os.MkdirTemp("", "realweb-")
		if err != nil {
			return nil, fmt.Errorf("realweb: %w", err)
		}
		w.dir, w.ownDir = d, true
	}
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	var err error
	if w.ca, err = newCA(o.Now()); err != nil {
		return nil, err
	}
	if err := os.WriteFile(w.CAFile(), w.ca.pem, 0o644); err != nil {
		return nil, fmt.Errorf("realweb: write CA: %w", err)
	}
	// HostSignals' big sitemap's 12 MiB of white space, compressed now:
	// at its first request it could take longer than a crawler waits on
	// a loaded machine.
	bigGzSitemap("")
	if err := w.startHosts(); err != nil {
		return nil, err
	}
	if w.proxy, err = w.startProxy(); err != nil {
		return nil, err
	}
	w.dns, err = dnsserver.Start(dnsserver.Options{
		Addr: "127.0.0.1:0", TTL: time.Minute, Logger: o.Logger,
		LookupAll: func(name string) []netip.Addr { return w.names[name] },
	})
	if err != nil {
		return nil, fmt.Errorf("realweb: DNS: %w", err)
	}
	ok = true
	return w, nil
}

// addr4 returns the i-th loopback address of the web, 127.88.0.(i+2).
func addr4(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 88, 0, byte(i + 2)}) }

// serve starts an HTTP server for host name on addr (port 0: a free one),
// with TLS if cfg is not nil, and returns its origin.
func (w *Web) serve(name string, addr netip.Addr, cfg *tls.Config, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		return "", fmt.Errorf("realweb: listen for %s on %v: %w", name, addr, err)
	}
	srv := &http.Server{
		Handler:           w.log.logged(name, h, proxySource),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(w.o.Logger.Handler(), slog.LevelDebug),
	}
	scheme := "http"
	if cfg != nil {
		srv.TLSConfig = cfg
		scheme = "https"
	}
	w.servers = append(w.servers, srv)
	w.wg.Add(1)
	go func() { // owner: the Web; Close shuts srv down
		defer w.wg.Done()
		var err error
		if cfg != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.o.Logger.Error("realweb: serve", "host", name, "err", err)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	return scheme + "://" + name + ":" + strconv.Itoa(port), nil
}

// tlsConfig is the TLS configuration of a host with a certificate of kind.
func (w *Web) tlsConfig(name string, kind certKind, serial int64, protos ...string) (*tls.Config, error) {
	cert, err := w.ca.leaf(name, kind, serial, w.o.Now())
	if err != nil {
		return nil, err
	}
	if len(protos) == 0 {
		protos = []string{"h2", "http/1.1"}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: protos, MinVersion: tls.VersionTLS12}, nil
}

// DNSAddr returns the "ip:port" of the web's DNS server.
func (w *Web) DNSAddr() string { return w.dns.Addr() }

// CAFile returns the path of the web's CA certificate (PEM).
func (w *Web) CAFile() string { return filepath.Join(w.dir, "ca.pem") }

// CAPool returns a pool holding the web's CA.
func (w *Web) CAPool() *x509.CertPool { return w.ca.pool }

// ProxyURL returns the URL of the web's logging HTTP proxy.
func (w *Web) ProxyURL() string { return w.proxy.url }

// Origin returns "scheme://name:port" of a host's main server ("" for a
// name the web does not have).
func (w *Web) Origin(name string) string { return w.origins[name] }

// URL returns the URL of path on host name's main server.
func (w *Web) URL(name, path string) string { return w.origins[name] + path }

// Seeds returns the front page of every host, in a fixed order.
func (w *Web) Seeds() []string {
	var out []string
	for name, o := range w.origins {
		if name == HostRobotsTo {
			continue // reached through example's robots.txt and links
		}
		out = append(out, o+"/")
	}
	slices.Sort(out)
	return out
}

// Requests returns the requests the host name received (every host's for
// ""), in arrival order.
func (w *Web) Requests(name string) []Request {
	return w.log.all(func(r *Request) bool { return name == "" || r.Host == name })
}

// ProxyRequests returns the requests the proxy received.
func (w *Web) ProxyRequests() []Request { return w.Requests(proxyName) }

// Close stops every server; a second call does nothing.
func (w *Web) Close() error {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return nil
	}
	w.mu.closed = true
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, s := range w.servers {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, s.Close())
		}
	}
	w.wg.Wait()
	if w.proxy != nil {
		w.proxy.close()
	}
	if w.dns != nil {
		errs = append(errs, w.dns.Close())
	}
	if w.ownDir {
		errs = append(errs, os.RemoveAll(w.dir))
	}
	return errors.Join(errs...)
}

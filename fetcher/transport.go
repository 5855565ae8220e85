package fetcher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/meridian-crawler/meridian/fetcher/coding"
	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/meridian-crawler/meridian/fetcher/netguard"
)

// dialKey is the context key of the address a request must be sent to.
type dialKey struct{}

// dialTarget is the address the scheduler chose for one request, the
// host's other addresses, and the proxy it goes through (Options.Proxy;
// nil: direct). It is immutable: the transport may still dial with it
// after the request ended.
type dialTarget struct {
	ip    netip.Addr   // the scheduler's choice
	ips   []netip.Addr // every address of the host in the order to try, ip first; nil: ip alone
	proxy *proxyRoute
}

// connectionAttemptDelay is how long a connection attempt has before the
// next address is tried beside it (RFC 8305 section 5 recommends 250 ms).
const connectionAttemptDelay = 250 * time.Millisecond

// newTransport returns the HTTP transport shared by every worker. It dials
// the address carried by the request's context, never a name, or the
// request's proxy (Options.Proxy; never an environment proxy of its own),
// and speaks
// HTTP/2 where a TLS server offers it by ALPN (h2, else http/1.1): a
// host's requests, one at a time, then share one connection, closed when
// idle as HTTP/1.1 ones are. It decodes no content coding: the fetcher asks
// for gzip, br and zstd itself (acceptEncoding) and decodes them after the
// body is read (bodyReader), so that the WARC gets the bytes as received.
func (f *Fetcher) newTransport() *http.Transport {
	f.dialer = net.Dialer{Timeout: f.o.ConnectTimeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:       nil, // requestProxy with Options.Proxy
		DialContext: f.dial,
		// RootCAs nil: the system's. NextProtos stays unset: the
		// transport adds h2 and http/1.1. With TLSInsecure the worker
		// verifies each connection itself (dialVerify), to mark it.
		TLSClientConfig:        &tls.Config{RootCAs: f.o.TLSRoots, InsecureSkipVerify: f.o.TLSInsecure},
		ForceAttemptHTTP2:      true, // h2 by ALPN despite the custom dial
		TLSHandshakeTimeout:    f.o.ConnectTimeout,
		ResponseHeaderTimeout:  f.o.HeaderTimeout,
		MaxIdleConns:           min(max(32*f.o.Workers, 1024), 8192), // one per host in rotation, ~30 KB each
		MaxIdleConnsPerHost:    1,                                    // one request at a time per host
		IdleConnTimeout:        30 * time.Second,                     // HTTP/2 connections too
		MaxResponseHeaderBytes: 64 << 10,
		ReadBufferSize:         8 << 10,
		DisableCompression:     true, // the fetcher decodes (bodyReader); the body limit counts both sides
	}
	if f.o.Proxy != nil {
		t.Proxy = requestProxy
		// Every http URL through a proxy shares the transport's connections
		// to it: keep one idle per worker, not one in all.
		t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, f.o.Workers)
	}
	if f.o.TLSInsecure {
		t.DialContext = f.dialVerify // verification is done by the worker, once per connection
	}
	return t
}

// acceptEncoding is the Accept-Encoding of every request: the codings
// package coding decodes.
const acceptEncoding = "gzip, br, zstd"

// dial connects to the addresses in ctx (see dialKey) on addr's port, or
// on Options.Port, from the local address localaddr.Pick chooses among
// Options.LocalAddrs (if any), trying them in turn as dialAddrs says; or,
// for a proxied request, to its proxy (dialProxy). The transport detaches
// dials from their request, so the dial is bounded by the connect timeout
// and stopped when Run ends.
func (f *Fetcher) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	dt, ok := ctx.Value(dialKey{}).(*dialTarget)
	if !ok {
		return nil, fmt.Errorf("fetcher: dial %s: no address chosen for the request", addr)
	}
	if dt.proxy != nil {
		return f.dialProxy(ctx, dt, addr)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("fetcher: dial %s: %w", addr, err)
	}
	if f.o.Port != 0 {
		port = strconv.Itoa(f.o.Port)
	}
	return f.dialAddrs(ctx, addr, dt, port)
}

// dialAddrs connects to port on one of dt's addresses as Happy Eyeballs
// (RFC 8305) does: in dt's order, skipping those netguard refuses and,
// with Options.LocalAddrs, those whose family has no local address; the
// first attempt at once, each next one as soon as the one before failed or
// connectionAttemptDelay after it started; the first connection up wins
// and the other attempts are cancelled, or closed if they connect too. The
// connect timeout bounds the whole, and Run's end stops it. When no
// connection is made, the error (a *dialError) names every address and
// why it failed. A host of one address is dialled without a goroutine.
func (f *Fetcher) dialAddrs(ctx context.Context, addr string, dt *dialTarget, port string) (net.Conn, error) {
	ips := dt.ips
	if len(ips) == 0 {
		ips = []netip.Addr{dt.ip}
	}
	if len(ips) == 1 {
		d, err := f.dialerFor(ips[0])
		if err != nil {
			return nil, fmt.Errorf("fetcher: dial %s: %w", addr, err)
		}
		dctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(f.runCtx, cancel)
		defer stop()
		return d.DialContext(dctx, "tcp", net.JoinHostPort(ips[0].String(), port))
	}
	var errs []error
	var dialers []*net.Dialer
	var to []string // "ip:port" of each dialer
	for _, ip := range ips {
		d, err := f.dialerFor(ip)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		dialers, to = append(dialers, d), append(to, net.JoinHostPort(ip.String(), port))
	}
	if len(dialers) == 0 {
		return nil, &dialError{addr: addr, errs: errs}
	}
	dctx, cancel := context.WithTimeout(ctx, f.o.ConnectTimeout)
	defer cancel()
	stop := context.AfterFunc(f.runCtx, cancel)
	defer stop()
	conn, errs := happyEyeballs(dctx, dialers, to, connectionAttemptDelay, errs)
	if conn == nil {
		return nil, &dialError{addr: addr, errs: errs}
	}
	return conn, nil
}

// happyEyeballs dials to[i] with dialers[i], one after the other with
// attempts overlapping: the next starts when the one before fails or delay
// after it started. It returns the first connection made, with the others
// cancelled (or closed), after every attempt it started has ended; or nil
// and errs with the error of every attempt, and of every address not tried
// before ctx ended, appended.
func happyEyeballs(ctx context.Context, dialers []*net.Dialer, to []string, delay time.Duration, errs []error) (net.Conn, []error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		conn net.Conn
		err  error
	}
	results := make(chan result, len(dialers)) // never blocks an attempt
	next, pending := 0, 0
	start := func() {
		d, addr := dialers[next], to[next]
		next++
		pending++
		go func() { // owner: happyEyeballs, which waits for every attempt it starts
			c, err := d.DialContext(ctx, "tcp", addr)
			results <- result{c, err}
		}()
	}
	// more reports whether another attempt may start: none has won and ctx
	// has not ended (an attempt's socket deadline, set from ctx's, can
	// fire before ctx's own timer).
	more := func(won net.Conn) bool {
		dl, ok := ctx.Deadline()
		return won == nil && next < len(dialers) && ctx.Err() == nil && (!ok || time.Now().Before(dl))
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	start()
	var won net.Conn
	for pending > 0 {
		select {
		case r := <-results:
			pending--
			switch {
			case r.err == nil && won == nil:
				won = r.conn
				cancel() // the other attempts lose
			case r.err == nil:
				r.conn.Close() // up too late
			case won == nil:
				errs = append(errs, r.err)
				if more(won) {
					start()
					timer.Reset(delay)
				}
			}
		case <-timer.C:
			if more(won) {
				start()
				timer.Reset(delay)
			}
		}
	}
	if won == nil {
		for _, addr := range to[next:] {
			errs = append(errs, fmt.Errorf("%s: not tried: %w", addr, context.Cause(ctx)))
		}
	}
	return won, errs
}

// dialerFor returns the dialer of a connection to ip: the shared one, or a
// copy bound to the local address localaddr.Pick chooses for ip. It
// refuses an address netguard refuses or whose family no local address
// has.
func (f *Fetcher) dialerFor(ip netip.Addr) (*net.Dialer, error) {
	if err := netguard.Check(ip, f.o.AllowPrivate); err != nil {
		return nil, err
	}
	if len(f.o.LocalAddrs) == 0 {
		return &f.dialer, nil
	}
	local, err := localaddr.Pick(f.o.LocalAddrs, ip)
	if err != nil {
		return nil, err
	}
	bound := f.dialer // a copy: the shared dialer is read by every worker
	bound.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0))
	return &bound, nil
}

// dialError is a dial that made no connection: the error of every address.
type dialError struct {
	addr string // the request's "host:port"
	errs []error
}

// Error reads "fetcher: dial HOST:PORT: every address failed: ERR; ERR".
func (e *dialError) Error() string {
	var b strings.Builder
	b.WriteString("fetcher: dial ")
	b.WriteString(e.addr)
	b.WriteString(": every address failed: ")
	for i, err := range e.errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap returns the error of each address.
func (e *dialError) Unwrap() []error { return e.errs }

// exchange is what one request of a worker sent and received. A worker owns
// one and reuses it; only the worker's goroutine touches it.
type exchange struct {
	sent        bool // the request reached the transport
	gotResponse bool
	start       time.Time
	remote      netip.Addr // the connection's peer
	host        string     // Host header
	requestURI  string
	ifNoneMatch string // If-None-Match sent, if any
	ifModSince  string // If-Modified-Since sent, if any
	status      int
	proto       string // of the response, as net/http says it: "HTTP/1.1", "HTTP/2.0"
	protoMajor  int
	tlsVersion  uint16 // of the connection; 0 without TLS
	statusText  string // "200 OK"
	header      http.Header
	// body is the body the fetcher reads (fingerprints, links, robots.txt,
	// sitemaps): after content decoding, at most the body limit. Empty
	// when the body could not be decoded (decodeErr).
	body []byte
	// raw is the body as received, after transfer decoding and before
	// content decoding, at most the body limit: the WARC record's payload.
	// Without a Content-Encoding (coded false) it is body itself.
	raw       []byte
	rawBuf    []byte      // raw's buffer when coded, kept across exchanges
	coded     bool        // the response has a Content-Encoding other than identity
	codings   coding.List // its codings, when they are all known
	bodyCut   bool        // the decoded body went on past the limit (raw may be whole)
	decodeErr error       // why a whole raw body was not decoded (an unknown or broken coding)
	truncated string      // WARC-Truncated reason: raw was cut
	bodyErr   error       // why the body ended early, for "time" and "disconnect"
	reader    bodyReader
	fp        uint64 // the body's xxhash, once fpDone
	fpDone    bool

	cookie  string // Cookie sent, if any (Options.Cookies)
	proxied bool   // sent through a proxy (Options.Proxy)
	// tlsUnverified is why the TLS connection's certificate did not
	// verify (Options.TLSInsecure); "" if it did or for plain http.
	tlsUnverified string
}

// conditional reports whether the request was conditional.
func (ex *exchange) conditional() bool { return ex.ifNoneMatch != "" || ex.ifModSince != "" }

// unchanged reports whether the exchange is a 2xx answer whose body has
// p's fingerprint.
func (ex *exchange) unchanged(p *Prev) bool {
	return p.ContentFP != 0 && ex.status >= 200 && ex.status < 300 && ex.fingerprint() == p.ContentFP
}

// fingerprint returns the xxhash of the body (0 if it is empty), computing
// it once per exchange; of the body as received if it could not be
// decoded (it is then the same from one fetch to the next, and no two
// undecodable pages look alike).
func (ex *exchange) fingerprint() uint64 {
	if !ex.fpDone {
		ex.fp, ex.fpDone = 0, true
		b := ex.body
		if ex.decodeErr != nil {
			b = ex.raw
		}
		if len(b) > 0 {
			ex.fp = xxhash.Sum64(b)
		}
	}
	return ex.fp
}

// payload returns the body as received, for the WARC record.
func (ex *exchange) payload() []byte {
	if ex.coded {
		return ex.raw
	}
	return ex.body
}

func (ex *exchange) reset() {
	*ex = exchange{body: keepBuf(ex.body), rawBuf: keepBuf(ex.rawBuf)}
}

// keepBuf returns b emptied for reuse, or nil if it is huge: a huge body
// once does not pin its buffer.
func keepBuf(b []byte) []byte {
	if cap(b) > 1<<20 {
		return nil
	}
	return b[:0]
}

// roundTripper is a worker's transport as colly sees it: it records the
// exchange and hands colly a body that stops at MaxBodyBytes (counted
// before and after content decoding) and turns the total timeout into a
// truncated body.
type roundTripper struct {
	w *worker
}

// RoundTrip implements http.RoundTripper.
func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	w := rt.w
	ex := &w.ex
	ex.sent = true
	ex.start = time.Now()
	ex.host = req.Host
	if ex.host == "" {
		ex.host = req.URL.Host
	}
	ex.requestURI = req.URL.RequestURI()
	res, err := w.f.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	w.answered() // the server has the request: its IP delay counts from now
	ex.gotResponse = true
	ex.status = res.StatusCode
	ex.proto, ex.protoMajor = res.Proto, res.ProtoMajor
	if res.TLS != nil {
		ex.tlsVersion = res.TLS.Version
	}
	ex.statusText = res.Status
	ex.header = res.Header
	if ce := res.Header["Content-Encoding"]; ce != nil {
		ex.codings, ex.decodeErr = coding.Parse(ce)
		ex.coded = ex.codings.Len() > 0 || ex.decodeErr != nil
	}
	ex.reader = bodyReader{rc: res.Body, ex: ex, limit: w.bodyLimit(), ctx: req.Context(), run: w.ctx, dec: &w.dec}
	res.Body = &ex.reader
	// The transport decodes no coding, and colly must not gunzip anything
	// (it would do so without a size limit).
	res.Uncompressed = true
	return res, nil
}

// bodyReader reads a response body into the exchange's buffers, up to
// limit bytes, and hands colly none of it: colly's io.ReadAll would copy it
// again into a growing buffer (about three times the body in garbage per
// page) and its charset conversion would change the bytes, while the
// fetcher wants them as received. Past the limit it marks the exchange
// truncated ("length"); if the request's deadline or the connection ends
// the body early it marks it "time" or "disconnect", and colly sees a
// normal end. Only Run's end is passed on as an error.
//
// A body without Content-Encoding is read into ex.body, which is also
// ex.raw: no copy. A body with one is read into ex.raw, then decoded into
// ex.body, also at most limit bytes (ex.bodyCut past it: a decompression
// bomb cannot make it grow). A whole body that does not decode (an unknown
// coding, corrupt data) leaves ex.body empty and says why in
// ex.decodeErr; a body cut short is decoded as far as it goes.
type bodyReader struct {
	rc    io.ReadCloser
	ex    *exchange
	limit int64
	ctx   context.Context // the request's
	run   context.Context // Run's
	dec   *coding.Decoder // the worker's
	done  bool
}

// Read implements io.Reader: the first call reads the whole body.
func (b *bodyReader) Read([]byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	b.done = true
	ex := b.ex
	if !ex.coded {
		var err error
		ex.body, err = b.readAll(ex.body)
		ex.raw = ex.body
		return 0, err
	}
	raw, err := b.readAll(ex.rawBuf)
	ex.rawBuf, ex.raw = raw, raw
	if err != io.EOF || ex.decodeErr != nil {
		return 0, err
	}
	var derr error
	ex.body, ex.bodyCut, derr = b.dec.Decode(ex.body[:0], raw, ex.codings, b.limit)
	if derr != nil && ex.truncated == "" {
		ex.body, ex.decodeErr = ex.body[:0], derr
	}
	return 0, io.EOF
}

// readAll appends the body to buf, at most limit bytes, and marks the
// exchange truncated if it was cut. Its error is io.EOF, or Run's end.
func (b *bodyReader) readAll(buf []byte) ([]byte, error) {
	ex := b.ex
	for {
		room := b.limit - int64(len(buf))
		if room <= 0 {
			var one [1]byte
			if n, _ := io.ReadFull(b.rc, one[:]); n > 0 {
				ex.truncated = "length"
			}
			return buf, io.EOF
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		free := buf[len(buf):cap(buf)]
		if int64(len(free)) > room {
			free = free[:room]
		}
		n, err := b.rc.Read(free)
		buf = buf[:len(buf)+n]
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			return buf, io.EOF
		case b.run.Err() != nil:
			return buf, err
		}
		ex.bodyErr = err
		if b.ctx.Err() != nil {
			ex.truncated = "time"
		} else {
			ex.truncated = "disconnect"
		}
		return buf, io.EOF
	}
}

// Close implements io.Closer.
func (b *bodyReader) Close() error { return b.rc.Close() }

// appendRequestHead appends the request line and headers as the transport
// writes them in HTTP/1.1 (net/http's order: Host, User-Agent, then the
// request's headers sorted); an HTTP/2 request is written in this form
// too, as web archiving tools do (see protocols).
func appendRequestHead(dst []byte, ex *exchange, userAgent string) []byte {
	dst = append(dst, "GET "...)
	dst = append(dst, ex.requestURI...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, ex.host...)
	dst = append(dst, "\r\nUser-Agent: "...)
	dst = append(dst, userAgent...)
	dst = append(dst, "\r\nAccept: */*\r\nAccept-Encoding: "+acceptEncoding+"\r\n"...)
	if ex.cookie != "" {
		dst = append(dst, "Cookie: "...)
		dst = append(dst, ex.cookie...)
		dst = append(dst, "\r\n"...)
	}
	if ex.ifModSince != "" {
		dst = append(dst, "If-Modified-Since: "...)
		dst = append(dst, ex.ifModSince...)
		dst = append(dst, "\r\n"...)
	}
	if ex.ifNoneMatch != "" {
		dst = append(dst, "If-None-Match: "...)
		dst = append(dst, ex.ifNoneMatch...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// appendResponseHead appends the status line and headers as received
// (Content-Encoding and Content-Length as sent; a chunked body loses its
// Transfer-Encoding, as the body is recorded without its chunking). An
// HTTP/2 (or later) response gets an HTTP/1.1 status line: WARC's
// application/http is HTTP/1.x message syntax, and readers of WARC files
// expect it (Nutch's and StormCrawler's WARC writers and browsertrix write
// "HTTP/1.1" for h2 too); its protocol goes into WARC-Protocol (protocols).
func appendResponseHead(dst []byte, ex *exchange) []byte {
	proto := ex.proto
	if proto == "" || ex.protoMajor >= 2 {
		proto = "HTTP/1.1"
	}
	dst = append(dst, proto...)
	dst = append(dst, ' ')
	if ex.statusText != "" {
		dst = append(dst, ex.statusText...)
	} else {
		dst = strconv.AppendInt(dst, int64(ex.status), 10)
	}
	dst = append(dst, "\r\n"...)
	w := appendWriter{b: dst}
	ex.header.Write(&w)
	return append(w.b, "\r\n"...)
}

// protocols returns the WARC-Protocol values of the exchange, as proposed
// for WARC (iipc/warc-specifications issue 42, written by browsertrix,
// Nutch and StormCrawler): the HTTP protocol by its ALPN name ("h2",
// "http/1.1", "http/1.0"), then the TLS version ("tls/1.3"), if any. They
// are appended to dst[:0].
func (ex *exchange) protocols(dst *[2]string) []string {
	p := dst[:0]
	switch {
	case ex.protoMajor == 2:
		p = append(p, "h2")
	case ex.protoMajor == 1 && ex.proto == "HTTP/1.0":
		p = append(p, "http/1.0")
	default:
		p = append(p, "http/1.1")
	}
	switch ex.tlsVersion {
	case tls.VersionTLS13:
		p = append(p, "tls/1.3")
	case tls.VersionTLS12:
		p = append(p, "tls/1.2")
	case tls.VersionTLS11:
		p = append(p, "tls/1.1")
	case tls.VersionTLS10:
		p = append(p, "tls/1.0")
	}
	return p
}

// appendWriter is an io.Writer appending to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// WriteString implements io.StringWriter (http.Header.Write uses it).
func (w *appendWriter) WriteString(s string) (int, error) {
	w.b = append(w.b, s...)
	return len(s), nil
}

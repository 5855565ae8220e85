package fetcher

import (
	"context"
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

	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/meridian-crawler/meridian/fetcher/netguard"
)

// dialKey is the context key of the address a request must be sent to.
type dialKey struct{}

// dialTarget is the address the scheduler chose for one request and the
// host's other addresses. It is immutable: the transport may still dial
// with it after the request ended.
type dialTarget struct {
	ip  netip.Addr   // the scheduler's choice
	ips []netip.Addr // every address of the host in the order to try, ip first; nil: ip alone
}

// connectionAttemptDelay is how long a connection attempt has before the
// next address is tried beside it (RFC 8305 section 5 recommends 250 ms).
const connectionAttemptDelay = 250 * time.Millisecond

// newTransport returns the HTTP transport shared by every worker. It dials
// the address carried by the request's context, never a name.
func (f *Fetcher) newTransport() *http.Transport {
	f.dialer = net.Dialer{Timeout: f.o.ConnectTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                  nil, // never an environment proxy
		DialContext:            f.dial,
		TLSHandshakeTimeout:    f.o.ConnectTimeout,
		ResponseHeaderTimeout:  f.o.HeaderTimeout,
		MaxIdleConns:           min(max(32*f.o.Workers, 1024), 8192), // one per host in rotation, ~30 KB each
		MaxIdleConnsPerHost:    1,                                    // one request at a time per host
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		ReadBufferSize:         8 << 10,
		DisableCompression:     false, // gzip is decoded by the transport; the body limit counts decoded bytes
	}
}

// dial connects to the addresses in ctx (see dialKey) on addr's port, or
// on Options.Port, from the local address localaddr.Pick chooses among
// Options.LocalAddrs (if any), trying them in turn as dialAddrs says. The
// transport detaches dials from their request, so the dial is bounded by
// the connect timeout and stopped when Run ends.
func (f *Fetcher) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	dt, ok := ctx.Value(dialKey{}).(*dialTarget)
	if !ok {
		return nil, fmt.Errorf("fetcher: dial %s: no address chosen for the request", addr)
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
	proto       string
	statusText  string // "200 OK"
	header      http.Header
	body        []byte // the body as received, after content decoding
	truncated   string // WARC-Truncated reason
	bodyErr     error  // why the body ended early, for "time" and "disconnect"
	reader      bodyReader
	fp          uint64 // the body's xxhash, once fpDone
	fpDone      bool
}

// conditional reports whether the request was conditional.
func (ex *exchange) conditional() bool { return ex.ifNoneMatch != "" || ex.ifModSince != "" }

// unchanged reports whether the exchange is a 2xx answer whose body has
// p's fingerprint.
func (ex *exchange) unchanged(p *Prev) bool {
	return p.ContentFP != 0 && ex.status >= 200 && ex.status < 300 && ex.fingerprint() == p.ContentFP
}

// fingerprint returns the xxhash of the body (0 if it is empty), computing
// it once per exchange.
func (ex *exchange) fingerprint() uint64 {
	if !ex.fpDone {
		ex.fp, ex.fpDone = 0, true
		if len(ex.body) > 0 {
			ex.fp = xxhash.Sum64(ex.body)
		}
	}
	return ex.fp
}

func (ex *exchange) reset() {
	body := ex.body[:0]
	if cap(body) > 1<<20 {
		body = nil // a huge body once does not pin its buffer
	}
	*ex = exchange{body: body}
}

// roundTripper is a worker's transport as colly sees it: it records the
// exchange and hands colly a body that stops at MaxBodyBytes (counted after
// content decoding) and turns the total timeout into a truncated body.
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
	ex.proto = res.Proto
	ex.statusText = res.Status
	ex.header = res.Header
	ex.reader = bodyReader{rc: res.Body, ex: ex, limit: w.f.o.MaxBodyBytes, ctx: req.Context(), run: w.ctx}
	res.Body = &ex.reader
	// The transport has already decoded Content-Encoding: gzip; colly must
	// not gunzip anything else (it would do so without a size limit).
	res.Uncompressed = true
	return res, nil
}

// bodyReader reads a response body into the exchange's buffer, up to limit
// bytes, and hands colly none of it: colly's io.ReadAll would copy it again
// into a growing buffer (about three times the body in garbage per page)
// and its charset conversion would change the bytes, while the fetcher
// wants them as received. Past the limit it marks the exchange truncated
// ("length"); if the request's deadline or the connection ends the body
// early it marks it "time" or "disconnect", and colly sees a normal end.
// Only Run's end is passed on as an error.
type bodyReader struct {
	rc    io.ReadCloser
	ex    *exchange
	limit int64
	ctx   context.Context // the request's
	run   context.Context // Run's
	done  bool
}

// Read implements io.Reader: the first call reads the whole body.
func (b *bodyReader) Read([]byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	b.done = true
	ex := b.ex
	for {
		room := b.limit - int64(len(ex.body))
		if room <= 0 {
			var one [1]byte
			if n, _ := io.ReadFull(b.rc, one[:]); n > 0 {
				ex.truncated = "length"
			}
			return 0, io.EOF
		}
		if len(ex.body) == cap(ex.body) {
			ex.body = append(ex.body, 0)[:len(ex.body)] // grow
		}
		free := ex.body[len(ex.body):cap(ex.body)]
		if int64(len(free)) > room {
			free = free[:room]
		}
		n, err := b.rc.Read(free)
		ex.body = ex.body[:len(ex.body)+n]
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			return 0, io.EOF
		case b.run.Err() != nil:
			return 0, err
		}
		ex.bodyErr = err
		if b.ctx.Err() != nil {
			ex.truncated = "time"
		} else {
			ex.truncated = "disconnect"
		}
		return 0, io.EOF
	}
}

// Close implements io.Closer.
func (b *bodyReader) Close() error { return b.rc.Close() }

// appendRequestHead appends the request line and headers as the transport
// writes them (net/http's order: Host, User-Agent, the request's headers
// sorted, then Accept-Encoding, which the transport adds for gzip).
func appendRequestHead(dst []byte, ex *exchange, userAgent string) []byte {
	dst = append(dst, "GET "...)
	dst = append(dst, ex.requestURI...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, ex.host...)
	dst = append(dst, "\r\nUser-Agent: "...)
	dst = append(dst, userAgent...)
	dst = append(dst, "\r\nAccept: */*\r\n"...)
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
	dst = append(dst, "Accept-Encoding: gzip\r\n\r\n"...)
	return dst
}

// appendResponseHead appends the status line and headers as received (after
// the transport's own changes: a decoded gzip body loses its
// Content-Encoding and Content-Length, a chunked one its Transfer-Encoding).
func appendResponseHead(dst []byte, ex *exchange) []byte {
	proto := ex.proto
	if proto == "" {
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

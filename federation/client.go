package federation

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/certs"
)

// Client defaults and bounds.
const (
	// DefaultClientTimeout bounds one request, from dial to the last byte of
	// the response, when ClientOptions.Timeout is zero.
	DefaultClientTimeout = 30 * time.Second
	clientDialTimeout    = 10 * time.Second
	clientTLSTimeout     = 10 * time.Second
	clientIdleTimeout    = 90 * time.Second
	// maxErrorBody bounds how much of an error response is read into the
	// error's message.
	maxErrorBody = 4 << 10
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// Site is this site's name: every batch sent must be From it. Required.
	Site string
	// TLS is the client configuration from certs.Load: this site's
	// certificate and the deployment's CA (RootCAs). Required. It is cloned
	// per peer, with ServerName set to the peer's name.
	TLS *tls.Config
	// Timeout bounds one request, dial and TLS handshake included. Default
	// DefaultClientTimeout.
	Timeout time.Duration
	// Limits are checked before a batch is sent (so an invalid batch fails
	// here with ErrRejected, not at the peer) and bound a probe's reply
	// (MaxBytes). Zero fields take their defaults; use the same Limits as the
	// peers' servers.
	Limits Limits
}

// Validate reports every problem with o at once.
func (o ClientOptions) Validate() error {
	var errs []error
	if err := certs.ValidateName(o.Site); err != nil {
		errs = append(errs, fmt.Errorf("federation: client Site: %w", err))
	}
	if o.TLS == nil {
		errs = append(errs, errors.New("federation: client TLS is required (see certs.Load)"))
	} else {
		if o.TLS.RootCAs == nil {
			errs = append(errs, errors.New("federation: client TLS has no RootCAs: it must trust the deployment's CA only"))
		}
		if o.TLS.InsecureSkipVerify {
			errs = append(errs, errors.New("federation: client TLS must verify servers (InsecureSkipVerify is set)"))
		}
		if len(o.TLS.Certificates) == 0 && o.TLS.GetClientCertificate == nil {
			errs = append(errs, errors.New("federation: client TLS has no certificate to present"))
		}
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("federation: client Timeout %v is negative", o.Timeout))
	}
	if o.Limits.MaxBytes < 0 || o.Limits.MaxPuts < 0 {
		errs = append(errs, fmt.Errorf("federation: client Limits %+v: negative", o.Limits))
	}
	return errors.Join(errs...)
}

// Traffic counts a Client's exchanges with one peer.
type Traffic struct {
	Requests uint64 // requests sent (puts and probes)
	Failures uint64 // requests that returned an error
	Conns    uint64 // TCP connections dialled
	// BodySent and BodyReceived count request and response bodies.
	BodySent, BodyReceived uint64
	// WireSent and WireReceived count the bytes written to and read from
	// the TCP connections to the peer: TLS handshakes and records, HTTP/2
	// framing and headers included (IP and TCP headers not). They are the
	// inter-site traffic.
	WireSent, WireReceived uint64
}

// Client sends batches and probes to other sites. It keeps one connection
// pool per peer (HTTP/2 multiplexes requests over one connection). It is safe
// for concurrent use; Close it when done.
type Client struct {
	o      ClientOptions
	err    error // from o.Validate; every call returns it
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // requests in flight

	mu struct {
		sync.Mutex
		closed bool
		peers  map[string]*peerConn
	}
}

// peerConn is one peer's connection pool and counters.
type peerConn struct {
	name string
	tr   *http.Transport
	hc   *http.Client

	requests, failures, conns              atomic.Uint64
	bodySent, bodyRecv, wireSent, wireRecv atomic.Uint64
}

// NewClient returns a client for o. Invalid options are reported by every
// call.
func NewClient(o ClientOptions) *Client {
	c := &Client{o: o, err: o.Validate()}
	if o.TLS != nil {
		c.o.TLS = o.TLS.Clone()
	}
	if c.o.Timeout == 0 {
		c.o.Timeout = DefaultClientTimeout
	}
	c.o.Limits = o.Limits.withDefaults()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.peers = make(map[string]*peerConn)
	return c
}

// Put sends b to site peer at endpoint (host:port) and waits for it to be
// applied. The server must present a certificate naming site peer; b must be
// From this client's site, To peer, and valid (Batch.Validate). Errors wrap
// ErrRefused (the peer refused it for good: re-route, do not resend),
// ErrRejected (a bug or misconfiguration: log, do not retry blindly),
// ErrUnavailable (retry with back-off) or ErrClosed.
func (c *Client) Put(ctx context.Context, endpoint, peer string, b *Batch) error {
	if c.err != nil {
		return fmt.Errorf("%w: %w", ErrRejected, c.err)
	}
	if b.From != c.o.Site && SiteOfSender(b.From) != c.o.Site {
		return fmt.Errorf("federation: put to %s: %w: batch is from %q, this client is site %q", peer, ErrRejected, b.From, c.o.Site)
	}
	if b.To != peer {
		return fmt.Errorf("federation: put to %s: %w: batch is for %q", peer, ErrRejected, b.To)
	}
	if err := b.Validate(c.o.Limits); err != nil {
		return fmt.Errorf("federation: put to %s: %w: %w", peer, ErrRejected, err)
	}
	body := b.Append(make([]byte, 0, b.Size()))
	_, err := c.do(ctx, "put", endpoint, peer, PutPath, body)
	return err
}

// PutFrame sends a framed batch (AppendFrame) to site peer at endpoint
// and waits for it to be applied, as Put does a batch. The frame must be
// From this client's site (or one of its shards: SenderName), To peer
// and within Limits.MaxBytes; its
// entries are sent as they are (the receiver validates them). Errors are
// classed as for Put.
func (c *Client) PutFrame(ctx context.Context, endpoint, peer string, frame []byte) error {
	if c.err != nil {
		return fmt.Errorf("%w: %w", ErrRejected, c.err)
	}
	if len(frame) > c.o.Limits.MaxBytes {
		return fmt.Errorf("federation: put to %s: %w: frame of %d bytes, limit %d", peer, ErrRejected, len(frame), c.o.Limits.MaxBytes)
	}
	from, to, _, _, err := frameHeader(frame)
	if err != nil {
		return fmt.Errorf("federation: put to %s: %w: %w", peer, ErrRejected, err)
	}
	if from != c.o.Site && SiteOfSender(from) != c.o.Site {
		return fmt.Errorf("federation: put to %s: %w: frame is from %q, this client is site %q", peer, ErrRejected, from, c.o.Site)
	}
	if to != peer {
		return fmt.Errorf("federation: put to %s: %w: frame is for %q", peer, ErrRejected, to)
	}
	_, err = c.do(ctx, "put", endpoint, peer, PutPath, frame)
	return err
}

// Probe sends body (at most MaxProbeBytes) to site peer at endpoint and
// returns the peer's reply (at most Limits.MaxBytes). Errors are classed as
// for Put.
func (c *Client) Probe(ctx context.Context, endpoint, peer string, body []byte) ([]byte, error) {
	if c.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRejected, c.err)
	}
	if len(body) > MaxProbeBytes {
		return nil, fmt.Errorf("federation: probe %s: %w: %w: %d bytes, limit %d", peer, ErrRejected, ErrTooLarge, len(body), MaxProbeBytes)
	}
	return c.do(ctx, "probe", endpoint, peer, ProbePath, body)
}

// Traffic returns the counters of every peer the client has talked to.
func (c *Client) Traffic() map[string]Traffic {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]Traffic, len(c.mu.peers))
	for name, p := range c.mu.peers {
		m[name] = Traffic{
			Requests:     p.requests.Load(),
			Failures:     p.failures.Load(),
			Conns:        p.conns.Load(),
			BodySent:     p.bodySent.Load(),
			BodyReceived: p.bodyRecv.Load(),
			WireSent:     p.wireSent.Load(),
			WireReceived: p.wireRecv.Load(),
		}
	}
	return m
}

// Close ends requests in flight (they return ErrUnavailable), waits for them,
// and closes every connection. Later calls return ErrClosed. It may be called
// more than once; Traffic still works after it.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.mu.peers {
		p.tr.CloseIdleConnections()
	}
	return nil
}

// begin returns peer's pool and counts a request in flight; the caller calls
// c.wg.Done.
func (c *Client) begin(peer string) (*peerConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrClosed
	}
	p := c.mu.peers[peer]
	if p == nil {
		p = c.newPeer(peer)
		c.mu.peers[peer] = p
	}
	c.wg.Add(1)
	return p, nil
}

// newPeer makes peer's pool: TLS that accepts only a server whose
// certificate names site peer, and connections that count their bytes.
func (c *Client) newPeer(peer string) *peerConn {
	p := &peerConn{name: peer}
	want := certs.SiteIdentity(peer)
	cfg := c.o.TLS.Clone()
	cfg.ServerName = peer // the site's DNS SAN, whatever address reaches it
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		id, err := certs.PeerIdentity(cs)
		if err != nil {
			return err
		}
		if id != want {
			return fmt.Errorf("%w: the server's certificate names %s, want %s", certs.ErrIdentity, id, want)
		}
		return nil
	}
	d := &net.Dialer{Timeout: clientDialTimeout, KeepAlive: 30 * time.Second}
	p.tr = &http.Transport{
		Proxy: nil, // never through an environment proxy
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			p.conns.Add(1)
			return &countingConn{Conn: conn, p: p}, nil
		},
		TLSClientConfig:     cfg,
		TLSHandshakeTimeout: clientTLSTimeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     clientIdleTimeout,
		DisableCompression:  true,
	}
	p.hc = &http.Client{
		Transport: p.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a federation peer never redirects
		},
	}
	return p
}

// do sends one request and classes its outcome.
func (c *Client) do(ctx context.Context, op, endpoint, peer, path string, body []byte) ([]byte, error) {
	if err := certs.ValidateName(peer); err != nil {
		return nil, fmt.Errorf("federation: %s: %w: peer: %w", op, ErrRejected, err)
	}
	if err := checkEndpoint(endpoint); err != nil {
		return nil, fmt.Errorf("federation: %s to %s: %w: endpoint %q: %w", op, peer, ErrRejected, endpoint, err)
	}
	p, err := c.begin(peer)
	if err != nil {
		return nil, fmt.Errorf("federation: %s to %s: %w", op, peer, err)
	}
	defer c.wg.Done()
	reply, err := c.roundTrip(ctx, p, op, endpoint, path, body)
	if err != nil {
		p.failures.Add(1)
		return nil, err
	}
	return reply, nil
}

func (c *Client) roundTrip(ctx context.Context, p *peerConn, op, endpoint, path string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel) // Close ends the request
	defer stop()
	where := fmt.Sprintf("federation: %s to %s at %s", op, p.name, endpoint)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+endpoint+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", where, ErrRejected, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	p.requests.Add(1)
	p.bodySent.Add(uint64(len(body)))
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", where, transportClass(err), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		limit := int64(c.o.Limits.MaxBytes)
		reply, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		p.bodyRecv.Add(uint64(len(reply)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w: reading reply: %w", where, ErrUnavailable, err)
		}
		if int64(len(reply)) > limit {
			return nil, fmt.Errorf("%s: %w: %w: reply over %d bytes", where, ErrRejected, ErrTooLarge, limit)
		}
		return reply, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	p.bodyRecv.Add(uint64(len(msg)))
	return nil, fmt.Errorf("%s: %w: %s: %s", where, statusClass(resp.StatusCode), resp.Status, strings.TrimSpace(string(msg)))
}

// checkEndpoint accepts host:port, nothing more.
func checkEndpoint(ep string) error {
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return err
	}
	if host == "" || strings.ContainsAny(host, "/@?#% ") {
		return errors.New("want host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q, want 1 to 65535", port)
	}
	return nil
}

// statusClass classes an HTTP status other than 200.
func statusClass(code int) error {
	switch {
	case code == http.StatusConflict:
		return ErrRefused
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		return ErrUnavailable
	default: // 400, 403, 413, and anything a federation server does not send
		return ErrRejected
	}
}

// transportClass classes an error from the transport: certificates that one
// side refused are a misconfiguration (ErrRejected); anything else (refused
// connections, timeouts, resets) is transient (ErrUnavailable).
func transportClass(err error) error {
	if errors.Is(err, certs.ErrIdentity) {
		return ErrRejected
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return ErrRejected
	}
	// The server refusing our certificate reaches us as a TLS alert, which
	// crypto/tls reports as a net.OpError "remote error" of an unexported
	// type: match its text.
	msg := err.Error()
	if i := strings.Index(msg, "remote error: tls: "); i >= 0 {
		alert := msg[i+len("remote error: tls: "):]
		for _, s := range []string{"certificate", "unknown certificate authority", "access denied", "protocol version"} {
			if strings.Contains(alert, s) {
				return ErrRejected
			}
		}
	}
	return ErrUnavailable
}

// countingConn counts the bytes through a connection to one peer.
type countingConn struct {
	net.Conn
	p *peerConn
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.p.wireRecv.Add(uint64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.p.wireSent.Add(uint64(n))
	return n, err
}

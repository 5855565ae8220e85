package crawldb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// TLSConfig is the mutual TLS a node speaks with the other nodes of its
// site: on the Raft transport (listening and dialing) and on the crawl
// database API (its own listener, Options.APIAddr, and its requests to the
// other nodes: forwarded writes, joins and leaves). Both configurations are
// required, and both must allow TLS 1.3 only (MinVersion tls.VersionTLS13).
//
// Which peers are allowed is the caller's business: crawldb uses the
// configurations as they are, so their verification (ClientCAs, RootCAs and
// any VerifyConnection or VerifyPeerCertificate callback) must already
// enforce the identities a node accepts.
type TLSConfig struct {
	// Server is presented to the nodes that connect to this one. It must
	// require a client certificate: ClientAuth tls.RequireAndVerifyClientCert,
	// or tls.RequireAnyClientCert with a verification callback of its own.
	Server *tls.Config
	// Client is presented to the nodes this one connects to. If its
	// ServerName is empty, crawldb sets it to the host of the address it
	// dials (as tls.Dial and net/http do), so a node's certificate names the
	// host other nodes reach it by, unless Client verifies servers by a
	// callback of its own instead (InsecureSkipVerify with
	// VerifyPeerCertificate or VerifyConnection, as package certs does).
	Client *tls.Config
}

// validate reports every problem with c.
func (c *TLSConfig) validate() []error {
	var errs []error
	if c.Server == nil {
		errs = append(errs, errors.New("crawldb: TLS.Server is required when TLS is set"))
	} else {
		errs = append(errs, tls13Only("TLS.Server", c.Server)...)
		if len(c.Server.Certificates) == 0 && c.Server.GetCertificate == nil && c.Server.GetConfigForClient == nil {
			errs = append(errs, errors.New("crawldb: TLS.Server has no certificate"))
		}
		switch a := c.Server.ClientAuth; {
		case a == tls.RequireAndVerifyClientCert:
		case a == tls.RequireAnyClientCert && (c.Server.VerifyPeerCertificate != nil || c.Server.VerifyConnection != nil):
		default:
			errs = append(errs, fmt.Errorf("crawldb: TLS.Server's ClientAuth is %s: mutual TLS needs tls.RequireAndVerifyClientCert (or tls.RequireAnyClientCert with a verification callback)", a))
		}
	}
	if c.Client == nil {
		errs = append(errs, errors.New("crawldb: TLS.Client is required when TLS is set"))
	} else {
		errs = append(errs, tls13Only("TLS.Client", c.Client)...)
		if len(c.Client.Certificates) == 0 && c.Client.GetClientCertificate == nil {
			errs = append(errs, errors.New("crawldb: TLS.Client has no certificate to present (mutual TLS)"))
		}
		if c.Client.InsecureSkipVerify && c.Client.VerifyPeerCertificate == nil && c.Client.VerifyConnection == nil {
			errs = append(errs, errors.New("crawldb: TLS.Client skips verifying servers (InsecureSkipVerify) without a verification callback of its own"))
		}
	}
	return errs
}

// tls13Only reports a configuration (named name) that allows a version
// other than TLS 1.3.
func tls13Only(name string, c *tls.Config) []error {
	var errs []error
	if c.MinVersion < tls.VersionTLS13 {
		errs = append(errs, fmt.Errorf("crawldb: %s allows %s; set MinVersion to tls.VersionTLS13 (TLS 1.3 only)", name, tlsVersionName(c.MinVersion)))
	}
	if c.MaxVersion != 0 && c.MaxVersion < tls.VersionTLS13 {
		errs = append(errs, fmt.Errorf("crawldb: %s's MaxVersion is below TLS 1.3", name))
	}
	return errs
}

func tlsVersionName(v uint16) string {
	if v == 0 {
		return "TLS 1.2 and above (MinVersion unset)"
	}
	return tls.VersionName(v)
}

// clientFor returns cfg for a connection to addr: cfg itself, or a clone
// naming addr's host if cfg names no server.
func clientFor(cfg *tls.Config, addr string) *tls.Config {
	if cfg.ServerName != "" || cfg.InsecureSkipVerify {
		return cfg
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	c := cfg.Clone()
	c.ServerName = host
	return c
}

// Timeouts of the Raft port.
const (
	// handshakeTimeout bounds the TLS handshake of an accepted Raft
	// connection, and so the time a peer can hold one before its first RPC.
	handshakeTimeout = 10 * time.Second
	// stallTimeout bounds each read in the middle of an RPC frame (see
	// frameGuard); it is the transport's own timeout, within which a sender
	// gives up on an RPC.
	stallTimeout = 10 * time.Second
	// fastTimeout replaces both with Options.FastTimeouts.
	fastTimeout = 2 * time.Second
)

// raftConn is an accepted Raft connection. Raft's accept loop hands every
// connection to a goroutine of its own and reads from it at once; raftConn
// makes that first read do the TLS handshake (with a deadline), so that a
// slow or silent peer never holds the accept loop. A refused handshake is
// logged once with the peer's address and reads as io.EOF, which raft takes
// for a closed connection without logging it again. Every frame the peer
// sends goes through a frameGuard, which refuses (and logs) frames that are
// garbage, larger than any RPC, or that stall.
type raftConn struct {
	net.Conn           // the TLS connection, or wire without TLS
	wire     net.Conn  // the TCP connection, counted
	tls      *tls.Conn // nil without TLS
	s        *streamLayer

	handshake sync.Once
	hsErr     error

	mu       sync.Mutex // guards guard and deadline across Read and Write
	guard    frameGuard
	deadline bool // a read deadline is set
	refused  error
}

// Read implements net.Conn: the handshake on first use, then the peer's
// bytes, checked by the frame guard.
func (c *raftConn) Read(p []byte) (int, error) {
	if err := c.doHandshake(); err != nil {
		return 0, io.EOF // logged once by doHandshake
	}
	c.mu.Lock()
	if c.refused != nil {
		c.mu.Unlock()
		return 0, c.refused
	}
	mid := c.guard.midFrame()
	switch {
	case mid:
		c.Conn.SetReadDeadline(time.Now().Add(c.s.stall))
		c.deadline = true
	case c.deadline:
		c.Conn.SetReadDeadline(time.Time{}) // between frames a pooled connection may idle
		c.deadline = false
	}
	c.mu.Unlock()

	n, err := c.Conn.Read(p)
	if err != nil && c.s.down.Load() {
		return 0, io.EOF // the node is closing: nothing for raft to report
	}
	if err != nil && c.s.ended != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.s.ended() // the peer closed or reset it: its node may be gone (failover.go)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if gerr := c.guard.scan(p[:n]); gerr != nil {
		c.refused = gerr
		c.s.log.Warn("crawldb: raft: refused a frame", "remote", c.RemoteAddr().String(), "err", gerr)
		c.wire.Close()
		return 0, gerr
	}
	if err != nil && mid && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		c.s.log.Warn("crawldb: raft: a peer closed its connection in the middle of a frame", "remote", c.RemoteAddr().String(), "frame", c.guard.describe())
		err = io.ErrUnexpectedEOF
	}
	var ne net.Error
	if err != nil && mid && errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("crawldb: raft: nothing received for %v in the middle of %s: %w", c.s.stall, c.guard.describe(), err)
		c.refused = err
		c.s.log.Warn("crawldb: raft: dropped a stalled connection", "remote", c.RemoteAddr().String(), "err", err)
		c.wire.Close()
	}
	return n, err
}

// Write implements net.Conn.
func (c *raftConn) Write(p []byte) (int, error) {
	if err := c.doHandshake(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.guard.answered()
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// doHandshake completes the TLS handshake once, within the stream layer's
// handshake timeout; a failure is logged and closes the connection.
func (c *raftConn) doHandshake() error {
	if c.tls == nil {
		return nil
	}
	c.handshake.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.s.handshake)
		defer cancel()
		if err := c.tls.HandshakeContext(ctx); err != nil {
			c.hsErr = err
			if !c.s.down.Load() {
				logRefused(c.s.log, err, "crawldb: raft: refused a connection", "remote", c.wire.RemoteAddr().String())
			}
			c.wire.Close()
		}
	})
	return c.hsErr
}

// Close implements net.Conn: it closes the connection and forgets it.
func (c *raftConn) Close() error {
	c.s.forget(c)
	if c.tls != nil {
		return c.tls.Close() // close_notify (with a deadline of its own) if the handshake completed
	}
	return c.wire.Close()
}

// logRefused logs a connection refused with err: at debug level when the
// peer closed it without sending a byte (io.EOF: a probe of the port, as
// portRefuses makes), as a warning otherwise.
func logRefused(log *slog.Logger, err error, msg string, args ...any) {
	level := slog.LevelWarn
	if errors.Is(err, io.EOF) {
		level = slog.LevelDebug
	}
	log.Log(context.Background(), level, msg, append(args, "err", err)...)
}

// dialTLS completes a TLS handshake on conn, a connection to addr, within
// timeout.
func dialTLS(conn net.Conn, cfg *tls.Config, addr string, timeout time.Duration) (*tls.Conn, error) {
	tc := tls.Client(conn, clientFor(cfg, addr))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("crawldb: raft: tls handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// apiErrorLog routes the errors of the API's own http.Server (TLS
// handshakes refused among them) to the node's logger as warnings.
func apiErrorLog(l *slog.Logger) *slogLineWriter {
	return &slogLineWriter{l: l, prefix: "crawldb: api: "}
}

// slogLineWriter logs each line written to it as one warning.
type slogLineWriter struct {
	l      *slog.Logger
	prefix string
}

func (w *slogLineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	w.l.Warn(w.prefix + string(p))
	return n, nil
}

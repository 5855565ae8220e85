package crawldb

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Traffic counts the bytes a node has sent and received since Open.
type Traffic struct {
	// RaftSent and RaftReceived: on the Raft TCP transport, as bytes on
	// the wire (with Options.TLS, TLS records and handshakes included; 0
	// with Options.Transport).
	RaftSent     int64 `json:"raft_sent_bytes"`
	RaftReceived int64 `json:"raft_received_bytes"`
	// APISent and APIReceived: request and response bodies of the crawldb
	// API, as client (forwarded writes, joins, leaves) and as server.
	APISent     int64 `json:"api_sent_bytes"`
	APIReceived int64 `json:"api_received_bytes"`
}

// Traffic returns the node's traffic counters; for a group of a Host, the
// Host's (every group's bytes: they share its listener and its API).
func (db *DB) Traffic() Traffic {
	return Traffic{
		RaftSent: db.traffic.raftSent.Load(), RaftReceived: db.traffic.raftReceived.Load(),
		APISent: db.traffic.apiSent.Load(), APIReceived: db.traffic.apiReceived.Load(),
	}
}

type counters struct {
	raftSent, raftReceived atomic.Int64
	apiSent, apiReceived   atomic.Int64
}

// streamConfig configures the Raft stream layer.
type streamConfig struct {
	bind      string     // address to listen on
	advertise string     // address the other nodes are given; "": the listener's
	tls       *TLSConfig // nil: plain TCP
	counters  *counters
	log       *slog.Logger
	fast      bool   // Options.FastTimeouts: shorter handshake and stall timeouts
	ended     func() // called when an accepted connection ends from the other side (may be nil)
}

// newGroupTransport is newNetTransport for a group of a Host: its stream
// layer accepts what the Host's listener hands it (see groupListener) and
// dials the other nodes' listeners with the group's header.
//
// Its replication is not pipelined (MaxRPCsInFlight 1: one AppendEntries
// in flight per follower, each up to maxAppendEntries entries).
// hashicorp/raft v1.8's pipeline can deadlock when a follower answers
// Success false or a newer term, as after a leadership transfer: its decoder
// returns, and a send that raced with that return waits forever on an
// unbuffered channel, so the old leader's Shutdown never returns (seen in
// TestHostMembership under load; grafana/pyroscope#5518 describes the same
// and disabled the pipeline too). A Host moves leaderships by design.
func newGroupTransport(s *streamLayer, hlog hclog.Logger) *raft.NetworkTransport {
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: s, MaxPool: 4, Timeout: 10 * time.Second, Logger: hlog, MaxRPCsInFlight: 1,
	})
}

// newNetTransport is raft.NewTCPTransportWithLogger (4 pooled connections,
// 10 s timeout) over a stream layer of its own (see newStreamLayer).
func newNetTransport(cfg streamConfig, hlog hclog.Logger) (*raft.NetworkTransport, error) {
	s, err := newStreamLayer(cfg)
	if err != nil {
		return nil, err
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: s, MaxPool: 4, Timeout: 10 * time.Second, Logger: hlog,
	}), nil
}

// newStreamLayer listens on cfg.bind. The layer counts its bytes on the
// wire, speaks mutual TLS when configured, guards the frames it accepts
// (see raftConn) and closes the connections it accepted when it closes. Its
// address, as the other nodes are given it and dial it, is the listener's
// or cfg.advertise (Options.RaftAdvertise: a proxy or a NAT in front of the
// listener), as raft.NewTCPTransport's advertise argument does.
func newStreamLayer(cfg streamConfig) (*streamLayer, error) {
	var adv net.Addr
	if cfg.advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.advertise)
		if err != nil {
			return nil, fmt.Errorf("advertise %s: %w", cfg.advertise, err)
		}
		adv = a
	}
	ln, err := net.Listen("tcp", cfg.bind)
	if err != nil {
		return nil, err
	}
	if adv == nil {
		addr, ok := ln.Addr().(*net.TCPAddr)
		if !ok || addr.IP == nil || addr.IP.IsUnspecified() {
			ln.Close()
			return nil, errors.New("local bind address is not advertisable")
		}
		adv = addr
	}
	s := &streamLayer{ln: ln, addr: adv, c: cfg.counters, tls: cfg.tls, log: cfg.log, ended: cfg.ended,
		handshake: handshakeTimeout, stall: stallTimeout, limits: defaultFrameLimits(), conns: map[*raftConn]struct{}{}}
	if cfg.fast {
		s.handshake, s.stall = fastTimeout, fastTimeout
	}
	return s, nil
}

// streamLayer is raft's TCP stream layer with counted connections, TLS
// and guarded frames (see raftConn). Unlike raft's, it closes the
// connections it accepted when it closes, so that their handlers end with
// the node.
type streamLayer struct {
	ln        net.Listener
	addr      net.Addr // advertised
	c         *counters
	tls       *TLSConfig // nil: plain TCP
	log       *slog.Logger
	handshake time.Duration // bound on an accepted connection's TLS handshake
	stall     time.Duration // bound on a read in the middle of a frame
	limits    frameLimits
	// header, if set, is written on every connection the layer dials
	// before anything else: a Host's group header (see groupHeader).
	header []byte
	// ended, if set, is told when an accepted connection ended from the
	// other side (DB.streamEnded).
	ended func()

	down   atomic.Bool // closed: reads that fail are the layer's doing
	mu     sync.Mutex
	closed bool
	conns  map[*raftConn]struct{}
}

// Accept implements net.Listener. It does not wait for the TLS handshake:
// the connection's first read does it.
func (s *streamLayer) Accept() (net.Conn, error) {
	conn, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	var rc *raftConn
	if mc, ok := conn.(*muxedConn); ok { // counted, handshaken and past its header
		rc = &raftConn{Conn: mc.Conn, wire: mc.wire, tls: mc.tls, s: s, guard: newFrameGuard(s.limits)}
	} else {
		wire := &countingConn{Conn: conn, sent: &s.c.raftSent, received: &s.c.raftReceived}
		rc = &raftConn{Conn: wire, wire: wire, s: s, guard: newFrameGuard(s.limits)}
		if s.tls != nil {
			rc.tls = tls.Server(wire, s.tls.Server)
			rc.Conn = rc.tls
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		conn.Close()
		return nil, net.ErrClosed
	}
	s.conns[rc] = struct{}{}
	return rc, nil
}

// Dial implements raft.StreamLayer: a TCP connection, and with TLS its
// handshake, within timeout.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	start := time.Now()
	conn, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	wire := &countingConn{Conn: conn, sent: &s.c.raftSent, received: &s.c.raftReceived}
	var c net.Conn = wire
	if s.tls != nil {
		if c, err = dialTLS(wire, s.tls.Client, string(address), max(timeout-time.Since(start), time.Millisecond)); err != nil {
			return nil, err
		}
	}
	if s.header != nil {
		c.SetWriteDeadline(time.Now().Add(max(timeout-time.Since(start), time.Millisecond)))
		if _, err := c.Write(s.header); err != nil {
			c.Close()
			return nil, fmt.Errorf("crawldb: raft: group header to %s: %w", address, err)
		}
		c.SetWriteDeadline(time.Time{})
	}
	return c, nil
}

// forget drops an accepted connection that closed.
func (s *streamLayer) forget(c *raftConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Close implements net.Listener: it closes the listener and the accepted
// connections (their sockets, at once: no TLS close_notify).
func (s *streamLayer) Close() error {
	s.down.Store(true)
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	err := s.ln.Close()
	for c := range conns {
		c.wire.Close()
	}
	return err
}

// Addr implements net.Listener: the address the other nodes dial.
func (s *streamLayer) Addr() net.Addr { return s.addr }

// countingConn counts the bytes read from and written to a connection.
type countingConn struct {
	net.Conn
	sent, received *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.received.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.sent.Add(int64(n))
	return n, err
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Close closes the underlying reader if it is a Closer (a request body).
func (c *countingReader) Close() error {
	if rc, ok := c.r.(io.Closer); ok {
		return rc.Close()
	}
	return nil
}

// countingResponseWriter counts the body bytes a handler writes.
type countingResponseWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingResponseWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *countingResponseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

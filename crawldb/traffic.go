package crawldb

import (
	"errors"
	"io"
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
	// RaftSent and RaftReceived: on the Raft TCP transport (0 with
	// Options.Transport).
	RaftSent     int64 `json:"raft_sent_bytes"`
	RaftReceived int64 `json:"raft_received_bytes"`
	// APISent and APIReceived: request and response bodies of the crawldb
	// API, as client (forwarded writes, joins, leaves) and as server.
	APISent     int64 `json:"api_sent_bytes"`
	APIReceived int64 `json:"api_received_bytes"`
}

// Traffic returns the node's traffic counters.
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

// newTCPTransport is raft.NewTCPTransportWithLogger (the listener's address
// advertised, 4 pooled connections, 10 s timeout) over a stream layer that
// counts its bytes.
func newTCPTransport(bindAddr string, c *counters, log hclog.Logger) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, err
	}
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok || addr.IP == nil || addr.IP.IsUnspecified() {
		ln.Close()
		return nil, errors.New("local bind address is not advertisable")
	}
	s := &streamLayer{ln: ln, c: c, conns: map[*trackedConn]struct{}{}}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: s, MaxPool: 4, Timeout: 10 * time.Second, Logger: log,
	}), nil
}

// streamLayer is raft's TCP stream layer with counted connections. Unlike
// raft's, it closes the connections it accepted when it closes, so that
// their handlers end with the node.
type streamLayer struct {
	ln net.Listener
	c  *counters

	mu     sync.Mutex
	closed bool
	conns  map[*trackedConn]struct{}
}

// Accept implements net.Listener.
func (s *streamLayer) Accept() (net.Conn, error) {
	conn, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{countingConn: countingConn{Conn: conn, sent: &s.c.raftSent, received: &s.c.raftReceived}, s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		conn.Close()
		return nil, net.ErrClosed
	}
	s.conns[tc] = struct{}{}
	return tc, nil
}

// Dial implements raft.StreamLayer.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, sent: &s.c.raftSent, received: &s.c.raftReceived}, nil
}

// Close implements net.Listener: it closes the listener and the accepted
// connections.
func (s *streamLayer) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	err := s.ln.Close()
	for c := range conns {
		c.Conn.Close()
	}
	return err
}

// Addr implements net.Listener.
func (s *streamLayer) Addr() net.Addr { return s.ln.Addr() }

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

// trackedConn is an accepted connection its stream layer closes on Close.
type trackedConn struct {
	countingConn
	s *streamLayer
}

func (c *trackedConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
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

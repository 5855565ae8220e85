package federation

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/certs"
)

// The endpoints a Server serves.
const (
	// PutPath takes one encoded Batch (POST).
	PutPath = "/federation/v1/put"
	// ProbePath takes at most MaxProbeBytes of opaque bytes (POST) and
	// answers with the Receiver's reply.
	ProbePath = "/federation/v1/probe"
	// MaxProbeBytes bounds a probe's request body.
	MaxProbeBytes = 64 << 10
)

// Timeouts of the HTTP server. A put's body is at most Limits.MaxBytes; at
// 8 MiB these leave room for a slow WAN link and a slow Receiver.
const (
	serverReadHeaderTimeout = 10 * time.Second
	serverReadTimeout       = 2 * time.Minute
	serverWriteTimeout      = 3 * time.Minute
	serverIdleTimeout       = 2 * time.Minute
	serverMaxHeaderBytes    = 64 << 10
)

// Receiver is what a Server hands accepted requests to. from is the calling
// site, as its verified client certificate names it; for Put it also equals
// b.From. Both methods may be called concurrently; ctx ends when the caller
// goes away or the server closes.
type Receiver interface {
	// Put applies a batch. nil means done (HTTP 200). An error wrapping
	// ErrNotOwner or ErrRefused refuses it for good (409, with the error's
	// message): the sender must re-route, not retry. Any other error is
	// transient (503): the sender retries.
	Put(ctx context.Context, from string, b *Batch) error
	// Probe answers a probe with reply bytes (200). Errors are classed as
	// for Put.
	Probe(ctx context.Context, from string, body []byte) ([]byte, error)
}

// ServerOptions configure a Server.
type ServerOptions struct {
	// Site is this site's name: every batch must be addressed To it.
	// Required.
	Site string
	// TLS is the server configuration from certs.Load. Required; it must
	// require and verify client certificates (tls.RequireAndVerifyClientCert
	// with ClientCAs set). It is cloned.
	TLS *tls.Config
	// Receiver gets every accepted request. Required.
	Receiver Receiver
	// Limits bound a put's body and batch; zero fields take their defaults
	// (DefaultMaxBytes, DefaultMaxPuts).
	Limits Limits
	// Log gets one line per refusal (Warn) and per accepted request
	// (Debug). Default: discard.
	Log *slog.Logger
}

// Validate reports every problem with o at once.
func (o ServerOptions) Validate() error {
	var errs []error
	if err := certs.ValidateName(o.Site); err != nil {
		errs = append(errs, fmt.Errorf("federation: server Site: %w", err))
	}
	if o.TLS == nil {
		errs = append(errs, errors.New("federation: server TLS is required (see certs.Load)"))
	} else {
		if o.TLS.ClientAuth != tls.RequireAndVerifyClientCert || o.TLS.ClientCAs == nil {
			errs = append(errs, errors.New("federation: server TLS must require and verify client certificates (ClientAuth = RequireAndVerifyClientCert, ClientCAs set)"))
		}
		if len(o.TLS.Certificates) == 0 && o.TLS.GetCertificate == nil && o.TLS.GetConfigForClient == nil {
			errs = append(errs, errors.New("federation: server TLS has no certificate"))
		}
	}
	if o.Receiver == nil {
		errs = append(errs, errors.New("federation: server Receiver is required"))
	}
	if o.Limits.MaxBytes < 0 || o.Limits.MaxPuts < 0 {
		errs = append(errs, fmt.Errorf("federation: server Limits %+v: negative", o.Limits))
	}
	return errors.Join(errs...)
}

// ServerStats counts what a Server did since it was made.
type ServerStats struct {
	Puts      uint64 // batches the Receiver accepted
	Probes    uint64 // probes the Receiver answered
	Refused   uint64 // requests refused before reaching the Receiver
	Failed    uint64 // requests the Receiver returned an error for (409 or 503)
	BodyBytes uint64 // request body bytes read
}

// Server serves the federation endpoints over HTTPS with mutual TLS (HTTP/2
// where the client supports it). Make it with NewServer, run it with Serve,
// stop it with Shutdown or Close.
type Server struct {
	o   ServerOptions
	err error // from o.Validate; Serve returns it
	hs  *http.Server
	log *slog.Logger

	stats struct {
		puts, probes, refused, failed, bodyBytes atomic.Uint64
	}
	bufs sync.Pool // *[]byte bodies of puts, reused once decoded
}

// NewServer returns a server for o. Invalid options are reported by Serve.
func NewServer(o ServerOptions) *Server {
	s := &Server{o: o, err: o.Validate()}
	s.o.Limits = o.Limits.withDefaults()
	if o.TLS != nil {
		s.o.TLS = o.TLS.Clone()
	}
	s.log = o.Log
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.hs = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		TLSConfig:         s.o.TLS,
		ReadHeaderTimeout: serverReadHeaderTimeout,
		ReadTimeout:       serverReadTimeout,
		WriteTimeout:      serverWriteTimeout,
		IdleTimeout:       serverIdleTimeout,
		MaxHeaderBytes:    serverMaxHeaderBytes,
		// Handshake failures (no certificate, another CA) are logged here.
		ErrorLog: slog.NewLogLogger(s.log.With("component", "federation server").Handler(), slog.LevelWarn),
	}
	return s
}

// Serve accepts TLS connections on ln (a plain TCP listener: Serve does the
// TLS) until Shutdown or Close, then returns nil. It closes ln. It returns the
// options' validation error, if any, at once.
func (s *Server) Serve(ln net.Listener) error {
	if s.err != nil {
		ln.Close()
		return s.err
	}
	s.log.Info("federation: serving", "site", s.o.Site, "addr", ln.Addr().String())
	err := s.hs.ServeTLS(ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("federation: serve %s: %w", ln.Addr(), err)
}

// Shutdown stops accepting, waits for requests in flight to finish or for
// ctx to end, and closes every connection. It may be called more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	if err := s.hs.Shutdown(ctx); err != nil {
		return fmt.Errorf("federation: shutdown: %w", err)
	}
	return nil
}

// Close closes the listener and every connection at once; requests in flight
// see their context end. It may be called more than once.
func (s *Server) Close() error {
	if err := s.hs.Close(); err != nil {
		return fmt.Errorf("federation: close: %w", err)
	}
	return nil
}

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	return ServerStats{
		Puts:      s.stats.puts.Load(),
		Probes:    s.stats.probes.Load(),
		Refused:   s.stats.refused.Load(),
		Failed:    s.stats.failed.Load(),
		BodyBytes: s.stats.bodyBytes.Load(),
	}
}

// request is what the handler knows about one request, for its log line.
type request struct {
	op   string
	peer string // the caller's site, once its certificate is checked
	size int64  // body bytes: Content-Length, or what was read
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	q := &request{op: "unknown", size: r.ContentLength}
	switch r.URL.Path {
	case PutPath:
		q.op = "put"
	case ProbePath:
		q.op = "probe"
	default:
		s.refuse(w, r, q, http.StatusNotFound, "no such endpoint "+strconv.Quote(r.URL.Path))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.refuse(w, r, q, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed, want POST")
		return
	}
	// The caller is who its verified certificate says, and nothing else.
	peer, err := callerSite(r)
	if err != nil {
		s.refuse(w, r, q, http.StatusForbidden, err.Error())
		return
	}
	q.peer = peer
	if q.op == "put" {
		s.put(w, r, q)
	} else {
		s.probe(w, r, q)
	}
}

// callerSite returns the site that r's client certificate names.
func callerSite(r *http.Request) (string, error) {
	if r.TLS == nil {
		return "", errors.New("not over TLS")
	}
	id, err := certs.PeerIdentity(*r.TLS)
	if err != nil {
		return "", err
	}
	if id.Role != certs.RoleSite {
		return "", fmt.Errorf("certificate names %s: only a site may call the federation", id)
	}
	return id.Site, nil
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, q *request) {
	max := s.o.Limits.MaxBytes
	if r.ContentLength > int64(max) {
		s.refuse(w, r, q, http.StatusRequestEntityTooLarge, fmt.Sprintf("body of %d bytes, limit %d", r.ContentLength, max))
		return
	}
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer s.bufs.Put(bp)
	body, err := readBody(w, r, max, (*bp)[:0])
	*bp = body[:0]
	q.size = int64(len(body))
	s.stats.bodyBytes.Add(uint64(len(body)))
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, ErrTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		s.refuse(w, r, q, code, err.Error())
		return
	}
	b, err := Decode(body, s.o.Limits)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, ErrTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		s.refuse(w, r, q, code, err.Error())
		return
	}
	if b.From != q.peer && SiteOfSender(b.From) != q.peer {
		s.refuse(w, r, q, http.StatusForbidden, fmt.Sprintf("batch is from %q but the certificate names site %q", b.From, q.peer))
		return
	}
	if b.To != s.o.Site {
		s.refuse(w, r, q, http.StatusForbidden, fmt.Sprintf("batch is for %q but this is site %q", b.To, s.o.Site))
		return
	}
	if err := s.o.Receiver.Put(r.Context(), q.peer, b); err != nil {
		s.fail(w, r, q, err)
		return
	}
	s.stats.puts.Add(1)
	s.log.Debug("federation: put", "peer", q.peer, "seq", b.Seq, "puts", len(b.Puts), "hosts", len(b.Hosts), "bytes", q.size)
	w.WriteHeader(http.StatusOK)
}

func (s *Server) probe(w http.ResponseWriter, r *http.Request, q *request) {
	if r.ContentLength > MaxProbeBytes {
		s.refuse(w, r, q, http.StatusRequestEntityTooLarge, fmt.Sprintf("probe of %d bytes, limit %d", r.ContentLength, MaxProbeBytes))
		return
	}
	body, err := readBody(w, r, MaxProbeBytes, nil)
	q.size = int64(len(body))
	s.stats.bodyBytes.Add(uint64(len(body)))
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, ErrTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		s.refuse(w, r, q, code, err.Error())
		return
	}
	reply, err := s.o.Receiver.Probe(r.Context(), q.peer, body)
	if err != nil {
		s.fail(w, r, q, err)
		return
	}
	s.stats.probes.Add(1)
	s.log.Debug("federation: probe", "peer", q.peer, "bytes", q.size, "reply", len(reply))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
	w.WriteHeader(http.StatusOK)
	w.Write(reply)
}

// readBody reads r's body into buf, at most max bytes; more is ErrTooLarge.
func readBody(w http.ResponseWriter, r *http.Request, max int, buf []byte) ([]byte, error) {
	bb := bytes.NewBuffer(buf)
	if n := r.ContentLength; n > 0 && n <= int64(max) {
		bb.Grow(int(n))
	}
	_, err := bb.ReadFrom(http.MaxBytesReader(w, r.Body, int64(max)))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return bb.Bytes(), fmt.Errorf("%w: body over the limit of %d bytes", ErrTooLarge, max)
		}
		return bb.Bytes(), fmt.Errorf("reading body: %w", err)
	}
	return bb.Bytes(), nil
}

// refuse answers a request that must not reach the Receiver, and logs it.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, q *request, code int, reason string) {
	s.stats.refused.Add(1)
	peer := q.peer
	if peer == "" {
		peer = "unknown"
	}
	s.log.Warn("federation: refused", "op", q.op, "peer", peer, "remote", r.RemoteAddr, "status", code, "reason", reason, "bytes", q.size)
	http.Error(w, "federation: "+reason, code)
}

// fail answers a request the Receiver returned err for: 409 if it refused it
// for good, 503 otherwise.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, q *request, err error) {
	s.stats.failed.Add(1)
	code := http.StatusServiceUnavailable
	if errors.Is(err, ErrNotOwner) || errors.Is(err, ErrRefused) {
		code = http.StatusConflict
	}
	s.log.Warn("federation: receiver refused", "op", q.op, "peer", q.peer, "remote", r.RemoteAddr, "status", code, "reason", err.Error(), "bytes", q.size)
	http.Error(w, err.Error(), code)
}

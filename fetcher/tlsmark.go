package fetcher

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"
)

// WARCTLSUnverified is the WARC header field of a response (or revisit)
// record whose exchange went over TLS with a certificate that did not
// verify (Options.TLSInsecure): its value is why, as crypto/x509 says it
// ("x509: certificate has expired or is not yet valid: …", "x509:
// certificate signed by unknown authority", "x509: certificate is valid
// for a.example, not b.example"). A verified connection's records have no
// such field.
const WARCTLSUnverified = "WARC-Meridian-TLS-Unverified"

// maxTLSReason bounds the length of a WARCTLSUnverified value (a
// certificate may list many names).
const maxTLSReason = 512

// verifyConn is a connection dialled with Options.TLSInsecure on: it
// remembers whether the certificate of the TLS connection over it
// verified, so that the verification is done once per connection and not
// once per request.
type verifyConn struct {
	net.Conn
	mu     sync.Mutex
	done   bool
	reason string // "" if the certificate verified
}

// dialVerify is the transport's DialContext with Options.TLSInsecure: dial
// (or dialProxy, through dial's proxy branch), its connection wrapped in a
// verifyConn.
func (f *Fetcher) dialVerify(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := f.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &verifyConn{Conn: c}, nil
}

// unverified returns why tc's certificate does not verify for host
// against roots (nil: the system's) at now, "" if it does. The first
// request over a connection verifies it; later ones get the same answer.
func (c *verifyConn) unverified(tc *tls.Conn, roots *x509.CertPool, host string, now time.Time) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		cs := tc.ConnectionState()
		c.reason, c.done = certReason(&cs, roots, host, now), true
	}
	return c.reason
}

// certReason verifies the certificate chain of cs for host as crypto/tls
// would without InsecureSkipVerify, and returns why it fails ("" if it
// verifies), cut to maxTLSReason bytes with control characters replaced.
func certReason(cs *tls.ConnectionState, roots *x509.CertPool, host string, now time.Time) string {
	if len(cs.PeerCertificates) == 0 {
		return "fetcher: the server sent no certificate"
	}
	opts := x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: now, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	if err == nil {
		return ""
	}
	why := err.Error()
	if len(why) > maxTLSReason {
		why = why[:maxTLSReason]
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '\uFFFD' {
			return '?'
		}
		return r
	}, why)
}

// gotConnVerify is the worker's GotConn hook with Options.TLSInsecure:
// gotConn, and the verification of a TLS connection's certificate noted
// in the exchange (exchange.tlsUnverified) for writeWARC.
func (w *worker) gotConnVerify(info httptrace.GotConnInfo) {
	w.gotConn(info)
	tc, ok := info.Conn.(*tls.Conn)
	if !ok {
		return // plain http
	}
	host := w.ex.host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	vc, ok := tc.NetConn().(*verifyConn)
	if !ok {
		// Not dialled by dialVerify: verify it anyway, each time.
		cs := tc.ConnectionState()
		w.ex.tlsUnverified = certReason(&cs, w.f.o.TLSRoots, host, time.Now())
		return
	}
	w.ex.tlsUnverified = vc.unverified(tc, w.f.o.TLSRoots, host, time.Now())
}

// isCertError reports whether err is a TLS certificate that did not
// verify.
func isCertError(err error) bool {
	var ce *tls.CertificateVerificationError
	return errors.As(err, &ce)
}

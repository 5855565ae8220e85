package fetcher

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// testCA is a certificate authority made in the test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "Meridian test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// leaf returns a server certificate for names valid from notBefore to
// notAfter, signed by ca, or by itself if ca is nil.
func (ca *testCA) leaf(t *testing.T, names []string, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// originReq is one request an origin server received, as it received it.
type originReq struct {
	host, uri, ua, cookie string
	proto                 string // "HTTP/1.1", "HTTP/2.0"
	remote                string // the connection's peer
	at                    time.Time
}

// origin is an HTTP or HTTPS server on 127.0.0.1 that logs every request
// it gets, then answers it with its handler.
type origin struct {
	port string
	mu   sync.Mutex
	reqs []originReq
}

// startOrigin starts an origin; cert nil: plain http. It stops at the
// test's end.
func startOrigin(t *testing.T, cert *tls.Certificate, h http.HandlerFunc) *origin {
	t.Helper()
	return startOriginH2(t, cert, false, h)
}

// startOriginH2 is startOrigin, offering HTTP/2 by ALPN if h2.
func startOriginH2(t *testing.T, cert *tls.Certificate, h2 bool, h http.HandlerFunc) *origin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	o := &origin{port: port}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.reqs = append(o.reqs, originReq{host: r.Host, uri: r.RequestURI, ua: r.UserAgent(), cookie: strings.Join(r.Header["Cookie"], "\n"), proto: r.Proto, remote: r.RemoteAddr, at: time.Now()})
		o.mu.Unlock()
		h(w, r)
	}), ReadHeaderTimeout: 5 * time.Second, ErrorLog: discardLog()}
	if cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}}
		if h2 {
			srv.TLSConfig.NextProtos = []string{"h2", "http/1.1"}
		}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	done := make(chan struct{})
	go func() { // owner: the test; ends with srv.Close
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return o
}

// url returns the URL of path on host (a *.test name) at the origin.
func (o *origin) url(scheme, host, path string) string {
	return scheme + "://" + host + ":" + o.port + path
}

func (o *origin) requests() []originReq {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.reqs)
}

// proxyReq is one request the test proxy received.
type proxyReq struct {
	method, target string // target: "host:port" for CONNECT, the absolute URL otherwise
}

// testProxy is an HTTP proxy on 127.0.0.1 written for the tests: CONNECT
// is tunnelled, an absolute-form request forwarded. It reaches *.test
// names only, all at 127.0.0.1 on the port asked, and refuses anything
// else (502), so nothing leaves loopback. It logs every request and the
// local address of every connection it makes to an origin, so that a test
// can tell, from an origin's own log, which requests came through it.
type testProxy struct {
	addr string
	srv  *http.Server
	tr   *http.Transport
	done chan struct{}
	mu   struct {
		sync.Mutex
		log      []proxyReq
		outbound map[string]bool // local "ip:port" of connections to origins
		conns    []net.Conn      // hijacked and tunnelled ones, closed at the end
	}
	tunnels sync.WaitGroup
}

func startProxy(t *testing.T) *testProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &testProxy{addr: ln.Addr().String(), done: make(chan struct{})}
	p.mu.outbound = map[string]bool{}
	p.tr = &http.Transport{DialContext: p.dialOrigin, DisableCompression: true}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second, ErrorLog: discardLog()}
	go func() { // owner: the test; ends with srv.Close
		defer close(p.done)
		p.srv.Serve(ln)
	}()
	t.Cleanup(p.close)
	return p
}

func (p *testProxy) close() {
	p.srv.Close()
	<-p.done
	p.mu.Lock()
	for _, c := range p.mu.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.tunnels.Wait()
	p.tr.CloseIdleConnections()
}

// dialOrigin connects to a *.test origin at 127.0.0.1 and notes the
// connection's local address.
func (p *testProxy) dialOrigin(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !strings.HasSuffix(host, ".test") {
		return nil, errors.New("test proxy: only *.test origins")
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.mu.outbound[c.LocalAddr().String()] = true
	p.mu.Unlock()
	return c, nil
}

func (p *testProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.RequestURI
	if r.Method == http.MethodConnect {
		target = r.Host
	}
	p.mu.Lock()
	p.mu.log = append(p.mu.log, proxyReq{method: r.Method, target: target})
	p.mu.Unlock()
	switch {
	case r.Method == http.MethodConnect:
		p.tunnel(w, r)
	case r.URL.IsAbs():
		p.forward(w, r)
	default:
		http.Error(w, "test proxy: not a proxy request", http.StatusBadRequest)
	}
}

// tunnel serves a CONNECT: it dials the origin, answers 200 and copies
// bytes both ways until either side closes.
func (p *testProxy) tunnel(w http.ResponseWriter, r *http.Request) {
	up, err := p.dialOrigin(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	down, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	p.mu.Lock()
	p.mu.conns = append(p.mu.conns, up, down)
	p.mu.Unlock()
	io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n")
	p.tunnels.Add(2)
	go func() { // owner: the proxy; ends when the client side closes (or close)
		defer p.tunnels.Done()
		io.Copy(up, rw.Reader) // buffered bytes first
		up.Close()
	}()
	go func() { // owner: the proxy; ends when the origin side closes (or close)
		defer p.tunnels.Done()
		io.Copy(down, up)
		down.Close()
	}()
}

// forward serves an absolute-form request by sending it on to the origin.
func (p *testProxy) forward(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Connection")
	out.Header.Del("Proxy-Authorization")
	res, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	for k, vs := range res.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(res.StatusCode)
	io.Copy(w, res.Body)
}

func (p *testProxy) requests() []proxyReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.mu.log)
}

// viaProxy reports whether a connection whose peer an origin saw as remote
// was made by the proxy.
func (p *testProxy) viaProxy(remote string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.outbound[remote]
}

// discardLog is a log.Logger for servers whose handshake errors are
// expected.
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

// warcByURI returns recs by target URI, in order.
func warcByURI(recs []warcRecord) map[string][]warcRecord {
	out := map[string][]warcRecord{}
	for _, r := range recs {
		out[r.uri] = append(out[r.uri], r)
	}
	return out
}

// recordOf returns the record of type typ of u, failing the test if there
// is not exactly one.
func recordOf(t *testing.T, recs map[string][]warcRecord, u string, typ gowarc.RecordType) warcRecord {
	t.Helper()
	var found []warcRecord
	for _, r := range recs[u] {
		if r.typ == typ {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d %v records, want one", u, len(found), typ)
	}
	return found[0]
}

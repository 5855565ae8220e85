package federation

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLimits are the servers' limits in these tests: small, so that
// oversized requests are cheap to make.
var testLimits = Limits{MaxBytes: 64 << 10, MaxPuts: 100}

// deployment is a certificate directory with sites eu, us and asia, and
// another deployment's directory with eu and us.
type deployment struct{ dir, other string }

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	d := &deployment{dir: t.TempDir(), other: t.TempDir()}
	for dir, sites := range map[string][]string{d.dir: {"eu", "us", "asia"}, d.other: {"eu", "us"}} {
		if err := certs.Init(dir); err != nil {
			t.Fatal(err)
		}
		for _, s := range sites {
			if err := certs.IssueSite(dir, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	return d
}

func load(t *testing.T, dir, site string) (server, client *tls.Config) {
	t.Helper()
	server, client, err := certs.Load(dir, site)
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

// recorder is a Receiver that records its calls.
type recorder struct {
	calls   atomic.Int64
	mu      sync.Mutex
	from    []string
	batches []*Batch
	err     error         // returned by Put and Probe
	block   bool          // Put waits for its context to end
	entered chan struct{} // gets a value when a blocked Put starts
}

func (r *recorder) Put(ctx context.Context, from string, b *Batch) error {
	r.calls.Add(1)
	r.mu.Lock()
	r.from = append(r.from, from)
	r.batches = append(r.batches, b)
	err, block := r.err, r.block
	r.mu.Unlock()
	if block {
		r.entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func (r *recorder) Probe(ctx context.Context, from string, body []byte) ([]byte, error) {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	return append([]byte("pong from "+from+": "), body...), nil
}

func (r *recorder) set(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// testLog is a log that tests can read; every line also goes to t.Log.
type testLog struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func newTestLog(t *testing.T) (*slog.Logger, *testLog) {
	l := &testLog{t: t}
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug})), l
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// served is a running server.
type served struct {
	srv  *Server
	addr string
	rcv  *recorder
	log  *testLog
}

// serve runs a server for site with the certificates of dir until the test
// ends.
func serve(t *testing.T, dir, site string) *served {
	t.Helper()
	srvTLS, _ := load(t, dir, site)
	log, tl := newTestLog(t)
	rcv := &recorder{entered: make(chan struct{}, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(ServerOptions{Site: site, TLS: srvTLS, Receiver: rcv, Limits: testLimits, Log: log})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("second Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &served{srv: srv, addr: ln.Addr().String(), rcv: rcv, log: tl}
}

func newClient(t *testing.T, site string, cfg *tls.Config) *Client {
	t.Helper()
	c := NewClient(ClientOptions{Site: site, TLS: cfg, Timeout: 10 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// rawPost posts body to the server with a plain HTTP client presenting cfg's
// certificate, as a misbehaving peer would.
func rawPost(t *testing.T, cfg *tls.Config, addr, path string, body io.Reader) (*http.Response, string) {
	t.Helper()
	c := cfg.Clone()
	c.ServerName = "eu"
	tr := &http.Transport{TLSClientConfig: c, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp, string(msg)
}

func TestPutReachesReceiver(t *testing.T) {
	d := newDeployment(t)
	s := serve(t, d.dir, "eu")
	_, cliTLS := load(t, d.dir, "us")
	c := newClient(t, "us", cliTLS)
	b := sampleBatch()
	for i := 1; i <= 3; i++ {
		b.First, b.Seq = uint64(i), uint64(i)
		if err := c.Put(context.Background(), s.addr, "eu", b); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.rcv.calls.Load(); n != 3 {
		t.Fatalf("receiver called %d times, want 3", n)
	}
	for i, got := range s.rcv.batches {
		want := *sampleBatch()
		want.First, want.Seq = uint64(i+1), uint64(i+1)
		if s.rcv.from[i] != "us" || !equalBatch(got, &want) {
			t.Fatalf("receiver got %q, %+v\nwant us, %+v", s.rcv.from[i], got, want)
		}
	}
	if st := s.srv.Stats(); st.Puts != 3 || st.Refused != 0 || st.BodyBytes != 3*uint64(b.Size()) {
		t.Errorf("server stats %+v", st)
	}
	tr := c.Traffic()["eu"]
	if tr.Requests != 3 || tr.Failures != 0 || tr.Conns != 1 {
		t.Errorf("traffic %+v: want 3 requests over 1 connection", tr)
	}
	if tr.BodySent != 3*uint64(b.Size()) || tr.WireSent <= tr.BodySent || tr.WireReceived == 0 {
		t.Errorf("traffic %+v: want body %d, wire more than body", tr, 3*b.Size())
	}
	t.Logf("3 puts of %d bytes: %d bytes on the wire out, %d in", b.Size(), tr.WireSent, tr.WireReceived)
}

func TestProbe(t *testing.T) {
	d := newDeployment(t)
	s := serve(t, d.dir, "eu")
	_, cliTLS := load(t, d.dir, "us")
	c := newClient(t, "us", cliTLS)
	reply, err := c.Probe(context.Background(), s.addr, "eu", []byte(`{"idle":true}`))
	if err != nil || string(reply) != `pong from us: {"idle":true}` {
		t.Fatalf("Probe = %q, %v", reply, err)
	}
	_, err = c.Probe(context.Background(), s.addr, "eu", make([]byte, MaxProbeBytes+1))
	if !errors.Is(err, ErrRejected) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized probe: %v, want ErrRejected and ErrTooLarge", err)
	}
	if n := c.Traffic()["eu"].Requests; n != 1 {
		t.Errorf("%d requests sent, want 1 (the oversized probe is refused before sending)", n)
	}
	// Served over HTTP/2.
	resp, msg := rawPost(t, cliTLS, s.addr, ProbePath, strings.NewReader("x"))
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || msg != "pong from us: x" {
		t.Errorf("raw probe: %s %s %q, want 200 over HTTP/2", resp.Proto, resp.Status, msg)
	}
	s.rcv.set(errors.New("state not ready"))
	if _, err := c.Probe(context.Background(), s.addr, "eu", nil); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "state not ready") {
		t.Errorf("failing probe: %v, want ErrUnavailable with the receiver's message", err)
	}
}

// errHandshake stands for ErrRejected or ErrUnavailable.
var errHandshake = errors.New("rejected or unavailable")

// TestRefused sends what must be refused: each case must fail as it says,
// be logged, and never reach the Receiver.
func TestRefused(t *testing.T) {
	d := newDeployment(t)
	s := serve(t, d.dir, "eu")
	_, usTLS := load(t, d.dir, "us")
	us := newClient(t, "us", usTLS)
	ctx := context.Background()

	noCert := usTLS.Clone()
	noCert.Certificates = nil
	noCert.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
	otherCA := usTLS.Clone() // trusts eu, but presents a certificate of another CA
	_, o := load(t, d.other, "us")
	otherCA.Certificates = o.Certificates
	nodeTLS := usTLS.Clone()
	nodeTLS.Certificates = []tls.Certificate{issueNode(t, d.dir, "us", "us-1")}
	otherServer := serve(t, d.other, "eu")

	encoded := func(f func(b *Batch)) io.Reader {
		b := sampleBatch()
		f(b)
		return bytes.NewReader(b.Append(nil))
	}
	many := sampleBatch()
	for len(many.Puts) <= testLimits.MaxPuts {
		many.Puts = append(many.Puts, Put{URL: fmt.Sprintf("http://h%d.example/", len(many.Puts)), Cash: 1})
	}
	big := sampleBatch()
	big.Puts = nil
	for big.Size() <= testLimits.MaxBytes {
		big.Puts = append(big.Puts, Put{URL: "http://big.example/" + strings.Repeat("z", 1000), Cash: 1})
	}

	// Cases through the Client: the error's class.
	for _, tc := range []struct {
		name string
		do   func() error
		want error
		text string
		log  string // in the server's log
	}{
		// The server refuses these at the handshake. In TLS 1.3 the client
		// learns it from an alert, or from a reset when the server's close
		// wins the race: either class may come back.
		{"no client certificate", func() error {
			return newClient(t, "us", noCert).Put(ctx, s.addr, "eu", sampleBatch())
		}, errHandshake, "", "client didn't provide a certificate"},
		{"certificate of another CA", func() error {
			return newClient(t, "us", otherCA).Put(ctx, s.addr, "eu", sampleBatch())
		}, errHandshake, "", "certificate signed by unknown authority"},
		{"server of another CA", func() error {
			return us.Put(ctx, otherServer.addr, "eu", sampleBatch())
		}, ErrRejected, "certificate", ""},
		{"server is not the peer", func() error {
			b := sampleBatch()
			b.To = "asia"
			return us.Put(ctx, s.addr, "asia", b)
		}, ErrRejected, "certificate", ""},
		{"too many puts", func() error { return us.Put(ctx, s.addr, "eu", many) }, ErrRejected, "413", "status=413"},
		{"too many bytes", func() error { return us.Put(ctx, s.addr, "eu", big) }, ErrRejected, "413", "status=413"},
		{"nothing listening", func() error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln.Close()
			return us.Put(ctx, ln.Addr().String(), "eu", sampleBatch())
		}, ErrUnavailable, "refused", ""},
		{"invalid batch", func() error {
			b := sampleBatch()
			b.Puts[1].Cash = -1
			return us.Put(ctx, s.addr, "eu", b)
		}, ErrMalformed, "puts[1].cash", ""},
		{"batch from another site", func() error {
			b := sampleBatch()
			b.From = "asia"
			return us.Put(ctx, s.addr, "eu", b)
		}, ErrRejected, "this client is site", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if tc.want == errHandshake && (errors.Is(err, ErrRejected) || errors.Is(err, ErrUnavailable)) {
				err = fmt.Errorf("%w: %w", errHandshake, err)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %v\nwant %v saying %q", err, tc.want, tc.text)
			}
			t.Logf("client error: %v", err)
			if tc.log != "" {
				eventually(t, "the refusal in the log", func() bool { return strings.Contains(s.log.String(), tc.log) })
			}
		})
	}

	// Cases a misbehaving peer makes with a plain HTTP client: the status.
	before := s.srv.Stats().Refused
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		path string
		body io.Reader
		code int
		text string
	}{
		{"batch from another site", usTLS, PutPath, encoded(func(b *Batch) { b.From = "asia" }), 403, `batch is from "asia" but the certificate names site "us"`},
		{"batch for another site", usTLS, PutPath, encoded(func(b *Batch) { b.To = "asia" }), 403, `batch is for "asia" but this is site "eu"`},
		{"node certificate", nodeTLS, PutPath, encoded(func(*Batch) {}), 403, "only a site may call"},
		{"node certificate probe", nodeTLS, ProbePath, strings.NewReader("x"), 403, "only a site may call"},
		{"garbage", usTLS, PutPath, strings.NewReader("hello, world"), 400, "malformed"},
		{"empty", usTLS, PutPath, nil, 400, "malformed"},
		{"content-length over the limit", usTLS, PutPath, bytes.NewReader(make([]byte, testLimits.MaxBytes+1)), 413, "body of 65537 bytes"},
		{"stream over the limit", usTLS, PutPath, io.MultiReader(bytes.NewReader(make([]byte, testLimits.MaxBytes+1))), 413, "over the limit"},
		{"probe over the limit", usTLS, ProbePath, bytes.NewReader(make([]byte, MaxProbeBytes+1)), 413, "probe of"},
		{"unknown path", usTLS, "/federation/v1/get", strings.NewReader("x"), 404, "no such endpoint"},
	} {
		t.Run("raw "+tc.name, func(t *testing.T) {
			resp, msg := rawPost(t, tc.cfg, s.addr, tc.path, tc.body)
			if resp.StatusCode != tc.code || !strings.Contains(msg, tc.text) {
				t.Fatalf("%s %q, want %d saying %q", resp.Status, msg, tc.code, tc.text)
			}
			want := fmt.Sprintf("status=%d", tc.code)
			eventually(t, "the refusal in the log", func() bool { return strings.Contains(s.log.String(), want) })
		})
	}
	// A GET is refused too.
	c := usTLS.Clone()
	c.ServerName = "eu"
	tr := &http.Transport{TLSClientConfig: c, ForceAttemptHTTP2: true}
	resp, err := (&http.Client{Transport: tr}).Get("https://" + s.addr + PutPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tr.CloseIdleConnections()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %s, want 405", resp.Status)
	}

	if n := s.rcv.calls.Load(); n != 0 {
		t.Fatalf("the receiver was called %d times by refused requests", n)
	}
	if n := s.srv.Stats().Refused - before; n != 11 {
		t.Errorf("server counted %d raw refusals, want 11", n)
	}
	for _, want := range []string{"peer=us", "remote=127.0.0.1:", "bytes=", "reason="} {
		if !strings.Contains(s.log.String(), want) {
			t.Errorf("the log lacks %q", want)
		}
	}
}

// TestReceiverErrors: what the Receiver says reaches the client, classed.
func TestReceiverErrors(t *testing.T) {
	d := newDeployment(t)
	s := serve(t, d.dir, "eu")
	_, usTLS := load(t, d.dir, "us")
	us := newClient(t, "us", usTLS)
	for _, tc := range []struct {
		err  error
		want error
		code string
	}{
		{fmt.Errorf("host a.example belongs to asia: %w", ErrNotOwner), ErrRefused, "409"},
		{fmt.Errorf("seq 3 after 5: %w", ErrRefused), ErrRefused, "409"},
		{errors.New("crawldb: no leader"), ErrUnavailable, "503"},
	} {
		s.rcv.set(tc.err)
		err := us.Put(context.Background(), s.addr, "eu", sampleBatch())
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.err.Error()) || !strings.Contains(err.Error(), tc.code) {
			t.Errorf("receiver error %v: client sees %v, want %v with %s and the message", tc.err, err, tc.want, tc.code)
		}
	}
	if st := s.srv.Stats(); st.Failed != 3 || st.Puts != 0 {
		t.Errorf("server stats %+v, want 3 failed", st)
	}
	if !strings.Contains(s.log.String(), "belongs to asia") {
		t.Error("the receiver's refusal is not logged")
	}
}

// TestClose: Close ends requests in flight, is idempotent, and later calls
// fail with ErrClosed.
func TestClose(t *testing.T) {
	d := newDeployment(t)
	s := serve(t, d.dir, "eu")
	_, usTLS := load(t, d.dir, "us")
	c := NewClient(ClientOptions{Site: "us", TLS: usTLS})
	s.rcv.mu.Lock()
	s.rcv.block = true
	s.rcv.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- c.Put(context.Background(), s.addr, "eu", sampleBatch()) }()
	<-s.rcv.entered
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrUnavailable) {
		t.Errorf("put in flight at Close: %v, want ErrUnavailable", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Put(context.Background(), s.addr, "eu", sampleBatch()); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v, want ErrClosed", err)
	}
	if tr := c.Traffic()["eu"]; tr.Requests != 1 || tr.Failures != 1 {
		t.Errorf("traffic after Close %+v", tr)
	}
}

func TestInvalidOptions(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = NewServer(ServerOptions{Site: "EU", TLS: &tls.Config{}}).Serve(ln)
	for _, want := range []string{"Site", "require and verify client certificates", "no certificate", "Receiver"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Serve with bad options: %v, want it to say %q", err, want)
		}
	}
	if _, err := ln.Accept(); err == nil {
		t.Error("Serve with bad options left the listener open")
	}
	c := NewClient(ClientOptions{Timeout: -1})
	defer c.Close()
	err = c.Put(context.Background(), "127.0.0.1:1", "eu", sampleBatch())
	if !errors.Is(err, ErrRejected) {
		t.Errorf("Put with bad options: %v, want ErrRejected", err)
	}
	for _, want := range []string{"Site", "TLS is required", "Timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Put with bad options: %v, want it to say %q", err, want)
		}
	}
	d := newDeployment(t)
	_, usTLS := load(t, d.dir, "us")
	us := newClient(t, "us", usTLS)
	for _, ep := range []string{"eu", "", "http://x:1"} {
		if err := us.Put(context.Background(), ep, "eu", sampleBatch()); !errors.Is(err, ErrRejected) {
			t.Errorf("endpoint %q: %v, want ErrRejected", ep, err)
		}
	}
}

// issueNode signs, with the CA in dir, a certificate naming node of site: a
// valid certificate of the wrong role for the federation.
func issueNode(t *testing.T, dir, site, node string) tls.Certificate {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		return blk.Bytes
	}
	ca, err := x509.ParseCertificate(read(certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := x509.ParsePKCS8PrivateKey(read(certs.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := certs.Identity{Role: certs.RoleNode, Site: site, Node: node}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: node},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		URIs:         []*url.URL{id.URI()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

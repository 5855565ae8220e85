package crawldb

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/crawldb/store"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
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

// leaf issues a certificate for both server and client auth, valid for
// 127.0.0.1 and localhost.
func (ca *testCA) leaf(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsConfig is a node's mutual TLS with ca: a certificate of its own,
// client certificates required and verified.
func (ca *testCA) tlsConfig(t *testing.T, name string) *TLSConfig {
	t.Helper()
	cert := ca.leaf(t, name)
	return &TLSConfig{
		Server: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool},
		Client: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: ca.pool},
	}
}

// logRecorder is a slog.Handler that keeps the warnings and errors it is
// given (as "msg key=value …" lines) and hands every record on to next.
type logRecorder struct {
	next  slog.Handler
	attrs []slog.Attr
	mu    *sync.Mutex
	lines *[]string
}

func newLogRecorder(t *testing.T) (*slog.Logger, *logRecorder) {
	r := &logRecorder{next: testLogger(t).Handler(), mu: new(sync.Mutex), lines: new([]string)}
	return slog.New(r), r
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRecorder) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		var b strings.Builder
		b.WriteString(rec.Message)
		for _, a := range r.attrs {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		}
		rec.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		r.mu.Lock()
		*r.lines = append(*r.lines, b.String())
		r.mu.Unlock()
	}
	if r.next.Enabled(ctx, rec.Level) {
		return r.next.Handle(ctx, rec)
	}
	return nil
}

func (r *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.attrs = append(slices.Clip(r.attrs), as...)
	c.next = r.next.WithAttrs(as)
	return &c
}

func (r *logRecorder) WithGroup(name string) slog.Handler {
	c := *r
	c.next = r.next.WithGroup(name)
	return &c
}

// matching returns the recorded lines that contain every one of subs.
func (r *logRecorder) matching(subs ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range *r.lines {
		if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(l, s) }) {
			out = append(out, l)
		}
	}
	return out
}

// waitLogged waits until a recorded line contains every one of subs and
// returns the lines that do.
func (r *logRecorder) waitLogged(t *testing.T, subs ...string) []string {
	t.Helper()
	var got []string
	waitFor(t, fmt.Sprintf("a log line with %q", subs), func() bool {
		got = r.matching(subs...)
		return len(got) > 0
	})
	return got
}

// tlsNodeOptions are testOptions with TLS and a logger that records.
func tlsNodeOptions(t *testing.T, dir, id, join string, ca *testCA, log *slog.Logger) Options {
	o := testOptions(t, dir, id, join)
	o.TLS = ca.tlsConfig(t, id)
	o.Logger = log
	o.NoSync = true
	return o
}

// nodeState is what must not change when a node refuses a peer.
type nodeState struct {
	Applied uint64
	Term    uint64
	Leader  string
	URLs    uint64
	Members map[string]string
}

func stateOf(t *testing.T, db *DB) nodeState {
	t.Helper()
	m, err := db.Members()
	if err != nil {
		t.Fatal(err)
	}
	return nodeState{Applied: db.Store().AppliedIndex(), Term: db.Term(), Leader: db.Leader(),
		URLs: db.Store().Counts().URLs, Members: m}
}

func sameState(a, b nodeState) bool {
	return a.Applied == b.Applied && a.Term == b.Term && a.Leader == b.Leader && a.URLs == b.URLs &&
		fmt.Sprint(a.Members) == fmt.Sprint(b.Members)
}

// httpsClient is an HTTP client with cfg and no connection reuse.
func httpsClient(cfg *tls.Config) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

// TestTLSGroup runs three nodes over mutual TLS: n1 with its own API
// listener, n2 with its API served by the caller (an HTTPS server the test
// runs) and n3 behind an advertised Raft address. They form a group through
// https joins (n3's relayed by n2), replicate, and forward writes from the
// followers to the leader over https.
func TestTLSGroup(t *testing.T) {
	root := t.TempDir()
	ca := newTestCA(t, "site CA")
	logger, rec := newLogRecorder(t)

	n1 := openWith(t, tlsNodeOptions(t, filepath.Join(root, "n1"), "n1", "", ca, logger.With("node", "n1")))
	defer n1.Close()
	waitFor(t, "n1 to announce its API address", func() bool { return hasMemberKey(n1, "n1") })

	// n2: the caller serves its API with TLS.
	o2 := tlsNodeOptions(t, filepath.Join(root, "n2"), "n2", n1.APIAddr(), ca, logger.With("node", "n2"))
	mux2 := http.NewServeMux()
	srv2 := httptest.NewUnstartedServer(mux2)
	srv2.TLS = o2.TLS.Server.Clone()
	srv2.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv2.StartTLS()
	defer srv2.Close()
	h2 := NewHandler()
	mux2.Handle("/crawldb/", h2)
	o2.APIAddr, o2.AdvertiseAPI, o2.Handler = "", srv2.Listener.Addr().String(), h2
	n2 := openWith(t, o2)
	defer n2.Close()

	// n3: its Raft address is advertised as localhost:port.
	port := freePort(t)
	o3 := tlsNodeOptions(t, filepath.Join(root, "n3"), "n3", o2.AdvertiseAPI, ca, logger.With("node", "n3"))
	o3.RaftAddr, o3.RaftAdvertise = "127.0.0.1:"+port, "localhost:"+port
	n3 := openWith(t, o3)
	defer n3.Close()
	if n3.RaftAddr() != "127.0.0.1:"+port { // the advertised address, resolved
		t.Fatalf("n3's Raft address %s, want the advertised localhost:%s resolved", n3.RaftAddr(), port)
	}

	nodes := []*DB{n1, n2, n3}
	leader := leaderOf(t, nodes)
	var last *store.Result
	for i, n := range nodes { // two of three forwarded over https
		res := mustApply(t, n, upserts(i*100, 50, 1))
		if len(res.Ops) != 50 || !res.Ops[0].New {
			t.Fatalf("%s: result %d ops", n.opts.NodeID, len(res.Ops))
		}
		last = res
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := n.WaitApplied(ctx, last.Index); err != nil {
			t.Fatal(err)
		}
		if c := n.Store().Counts(); c.URLs != 150 {
			t.Errorf("%s has %d URLs, want 150", n.opts.NodeID, c.URLs)
		}
		tr := n.Traffic()
		if tr.RaftSent == 0 || tr.RaftReceived == 0 {
			t.Errorf("%s: traffic %+v", n.opts.NodeID, tr)
		}
		if n != leader && tr.APISent == 0 {
			t.Errorf("%s forwarded nothing: traffic %+v", n.opts.NodeID, tr)
		}
	}
	want := []Member{{"n1", n1.RaftAddr(), n1.APIAddr()}, {"n2", n2.RaftAddr(), o2.AdvertiseAPI}, {"n3", "127.0.0.1:" + port, n3.APIAddr()}}
	if vs, _ := n3.Voters(); !slices.Equal(vs, want) {
		t.Fatalf("voters %v, want %v", vs, want)
	}

	// The APIs answer https with a client certificate, and nothing else.
	for _, addr := range []string{n1.APIAddr(), o2.AdvertiseAPI, n3.APIAddr()} {
		resp, err := httpsClient(ca.tlsConfig(t, "probe").Client).Get("https://" + addr + "/crawldb/status")
		if err != nil {
			t.Fatalf("status of %s over https: %v", addr, err)
		}
		var st Status
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || st.Leader != leader.opts.NodeID {
			t.Fatalf("status of %s: %d %+v %v", addr, resp.StatusCode, st, err)
		}
		if resp, err := http.Get("http://" + addr + "/crawldb/status"); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest { // Go's answer to plain HTTP on a TLS port
				t.Errorf("plain http to %s: %d", addr, resp.StatusCode)
			}
		}
	}
	if l := rec.matching("refused"); len(l) > 0 {
		t.Errorf("refusals in a healthy group: %q", l)
	}

	// A follower's garbage is refused whole by the leader's API (400).
	var follower *DB
	for _, n := range nodes {
		if n != leader {
			follower = n
		}
	}
	if res, err := follower.ApplyCommand(ctx, []byte("garbage")); err != nil || res.Err == nil || !strings.Contains(res.Err.Error(), "corrupt command") {
		t.Fatalf("garbage through %s: %v, %+v", follower.opts.NodeID, err, res)
	}
	// A follower leaves over https; the others go on.
	if err := follower.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	rest := slices.DeleteFunc(slices.Clone(nodes), func(n *DB) bool { return n == follower })
	for _, n := range rest {
		waitFor(t, n.opts.NodeID+" to drop "+follower.opts.NodeID, func() bool { return slices.Equal(voterIDs(t, n), ids(rest)) })
	}
	mustApply(t, rest[1], upserts(1000, 10, 1))
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestTLSRefusesStrangers connects to a TLS node's Raft and API ports
// without a certificate, with another CA's, trusting another CA, and
// without TLS at all: every connection is refused at the handshake, the
// node logs each refusal once with the peer's address, and its state does
// not change.
func TestTLSRefusesStrangers(t *testing.T) {
	ca, other := newTestCA(t, "site CA"), newTestCA(t, "another CA")
	logger, rec := newLogRecorder(t)
	db := openWith(t, tlsNodeOptions(t, t.TempDir(), "n1", "", ca, logger))
	defer db.Close()
	waitFor(t, "n1 to announce its API address", func() bool { return hasMemberKey(db, "n1") })
	mustApply(t, db, upserts(0, 10, 1))
	before := stateOf(t, db)

	noCert := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca.pool}
	stranger := other.leaf(t, "stranger")
	otherCert := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca.pool, // sent although the node asks for its CA's
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &stranger, nil }}
	otherRoots := other.tlsConfig(t, "stranger").Client
	for _, tc := range []struct {
		name      string
		cfg       *tls.Config // nil: plain TCP
		clientErr string      // what the client is told
		nodeErr   string      // what the node logs on its Raft port
		apiErr    string      // and on its API port, if not nodeErr
	}{
		{"no certificate", noCert, "certificate required", "client didn't provide a certificate", ""},
		{"another CA's certificate", otherCert, "remote error: tls: unknown certificate authority", "certificate signed by unknown authority", ""},
		{"trusting another CA", otherRoots, "certificate signed by unknown authority", "remote error: tls: bad certificate", ""},
		{"plain TCP", nil, "", "first record does not look like a TLS handshake", "client sent an HTTP request to an HTTPS server"},
	} {
		t.Run(tc.name+"/raft", func(t *testing.T) {
			conn, err := net.Dial("tcp", db.RaftAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			local := conn.LocalAddr().String()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			frame := []byte{rpcRequestVote, 0x81, 0xa4, 'T', 'e', 'r', 'm', 0xcd, 0xff, 0xff} // a vote for term 65535
			if tc.cfg == nil {
				conn.Write(frame)
				if _, err := conn.Read(make([]byte, 1)); err == nil {
					t.Fatal("the node answered plain TCP")
				}
			} else {
				tconn := tls.Client(conn, clientFor(tc.cfg, db.RaftAddr()))
				err := tconn.Handshake()
				if err == nil { // TLS 1.3: the server refuses the client's certificate after the client's handshake
					tconn.Write(frame)
					_, err = tconn.Read(make([]byte, 1))
				}
				if err == nil || !strings.Contains(err.Error(), tc.clientErr) {
					t.Fatalf("client: %v; want %q", err, tc.clientErr)
				}
			}
			lines := rec.waitLogged(t, "crawldb: raft: refused a connection", "remote="+local)
			if len(lines) != 1 || !strings.Contains(lines[0], tc.nodeErr) {
				t.Fatalf("node logged %q; want one refusal with %q", lines, tc.nodeErr)
			}
		})
		t.Run(tc.name+"/api", func(t *testing.T) {
			conn, err := net.Dial("tcp", db.APIAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			local := conn.LocalAddr().String()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			body := `{"id":"n9","raft_addr":"127.0.0.1:9","api_addr":"127.0.0.1:9"}`
			req := fmt.Sprintf("POST /crawldb/join HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			if tc.cfg == nil {
				if _, err := fmt.Fprint(conn, req); err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(conn)
				if !strings.Contains(string(b), "400 Bad Request") {
					t.Fatalf("plain HTTP answered %q", b)
				}
			} else {
				tconn := tls.Client(conn, clientFor(tc.cfg, db.APIAddr()))
				err := tconn.Handshake()
				if err == nil {
					fmt.Fprint(tconn, req)
					_, err = tconn.Read(make([]byte, 1))
				}
				if err == nil || !strings.Contains(err.Error(), tc.clientErr) {
					t.Fatalf("client: %v; want %q", err, tc.clientErr)
				}
			}
			want := tc.nodeErr
			if tc.apiErr != "" {
				want = tc.apiErr
			}
			lines := rec.waitLogged(t, "crawldb: api: http: TLS handshake error from "+local)
			if len(lines) != 1 || !strings.Contains(lines[0], want) {
				t.Fatalf("node logged %q; want one refusal with %q", lines, want)
			}
		})
	}
	t.Run("silent/raft", func(t *testing.T) {
		conn, err := net.Dial("tcp", db.RaftAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		conn.SetDeadline(start.Add(10 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read: %v; want the node to close", err)
		}
		if d := time.Since(start); d < fastTimeout/2 || d > fastTimeout+3*time.Second {
			t.Errorf("a silent peer was dropped after %v; the handshake timeout is %v", d, fastTimeout)
		}
		rec.waitLogged(t, "crawldb: raft: refused a connection", "remote="+conn.LocalAddr().String(), "context deadline exceeded")
	})
	if after := stateOf(t, db); !sameState(before, after) {
		t.Fatalf("state changed: %+v → %+v", before, after)
	}
	mustApply(t, db, upserts(10, 10, 1)) // still serving
}

// TestTLSOptionsValidate: TLS needs both configurations, TLS 1.3 only,
// certificates, and a server that requires client certificates.
func TestTLSOptionsValidate(t *testing.T) {
	ca := newTestCA(t, "CA")
	base := Options{Dir: "d", NodeID: "n1", RaftAddr: "127.0.0.1:0"}
	good := ca.tlsConfig(t, "n1")
	for _, tc := range []struct {
		name string
		tls  func(*TLSConfig)
		want []string
	}{
		{"valid", func(*TLSConfig) {}, nil},
		{"verify callback", func(c *TLSConfig) {
			c.Server.ClientAuth = tls.RequireAnyClientCert
			c.Server.VerifyConnection = func(tls.ConnectionState) error { return nil }
		}, nil},
		{"no configs", func(c *TLSConfig) { c.Server, c.Client = nil, nil }, []string{"TLS.Server is required", "TLS.Client is required"}},
		{"TLS 1.2", func(c *TLSConfig) { c.Server.MinVersion, c.Client.MinVersion = tls.VersionTLS12, 0 },
			[]string{"TLS.Server allows TLS 1.2; set MinVersion to tls.VersionTLS13", "TLS.Client allows TLS 1.2 and above (MinVersion unset)"}},
		{"max below 1.3", func(c *TLSConfig) { c.Client.MaxVersion = tls.VersionTLS12 }, []string{"TLS.Client's MaxVersion is below TLS 1.3"}},
		{"no client auth", func(c *TLSConfig) { c.Server.ClientAuth = tls.VerifyClientCertIfGiven }, []string{"ClientAuth is VerifyClientCertIfGiven"}},
		{"any cert unverified", func(c *TLSConfig) { c.Server.ClientAuth = tls.RequireAnyClientCert }, []string{"ClientAuth is RequireAnyClientCert"}},
		{"no certificates", func(c *TLSConfig) { c.Server.Certificates, c.Client.Certificates = nil, nil },
			[]string{"TLS.Server has no certificate", "TLS.Client has no certificate"}},
		{"insecure client", func(c *TLSConfig) { c.Client.InsecureSkipVerify = true }, []string{"TLS.Client skips verifying servers"}},
		{"insecure client with a callback", func(c *TLSConfig) {
			c.Client.InsecureSkipVerify = true
			c.Client.VerifyPeerCertificate = func([][]byte, [][]*x509.Certificate) error { return nil }
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &TLSConfig{Server: good.Server.Clone(), Client: good.Client.Clone()}
			tc.tls(c)
			o := base
			o.TLS = c
			err := o.Validate()
			if len(tc.want) == 0 && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v lacks %q", err, w)
				}
			}
		})
	}
}

// TestTLSWithNodeCertificates runs a group with the configurations package
// certs makes for the nodes of a site: the nodes of site eu form a group,
// and a node of site us is refused on both ports.
func TestTLSWithNodeCertificates(t *testing.T) {
	dir := t.TempDir()
	if err := certs.Init(dir); err != nil {
		t.Fatal(err)
	}
	load := func(site, node string, allow func(certs.Identity) error) *TLSConfig {
		if err := certs.IssueNode(dir, site, node); err != nil {
			t.Fatal(err)
		}
		c, err := certs.LoadNode(dir, site, node)
		if err != nil {
			t.Fatal(err)
		}
		return &TLSConfig{Server: c.Server(allow), Client: c.Client(allow)}
	}
	logger, rec := newLogRecorder(t)
	root := t.TempDir()
	o := testOptions(t, filepath.Join(root, "n1"), "n1", "")
	o.TLS, o.Logger = load("eu", "n1", certs.AllowNodesOf("eu")), logger
	n1 := openWith(t, o)
	defer n1.Close()
	waitFor(t, "n1 to announce its API address", func() bool { return hasMemberKey(n1, "n1") })
	o = testOptions(t, filepath.Join(root, "n2"), "n2", n1.APIAddr())
	o.TLS, o.Logger = load("eu", "n2", certs.AllowNodesOf("eu")), logger
	n2 := openWith(t, o)
	defer n2.Close()
	for _, n := range []*DB{n1, n2} {
		mustApply(t, n, upserts(0, 10, 1))
	}
	before := stateOf(t, n1)

	us := load("us", "n1", func(certs.Identity) error { return nil }).Client // it would talk to anyone
	conn, err := tls.Dial("tcp", n1.RaftAddr(), us)
	if err == nil {
		conn.Write([]byte{rpcRequestVote})
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatal("a node of another site reached the Raft port")
	}
	rec.waitLogged(t, "crawldb: raft: refused a connection", "want a node of site eu")
	if _, err := httpsClient(us).Get("https://" + n1.APIAddr() + "/crawldb/status"); err == nil {
		t.Fatal("a node of another site reached the API")
	}
	rec.waitLogged(t, "crawldb: api: http: TLS handshake error", "want a node of site eu")
	if after := stateOf(t, n1); !sameState(before, after) {
		t.Fatalf("state changed: %+v → %+v", before, after)
	}
}

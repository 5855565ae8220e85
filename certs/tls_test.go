package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// errAny marks a refusal whose error is crypto/tls's own.
var errAny = errors.New("any error")

// peerCert is a certificate a peer presents in the tables below.
type peerCert struct {
	name string
	cert *tls.Certificate // nil: none
	want error            // nil: accepted
	text []string         // in the refusing side's error
}

// peerCerts makes, in a new deployment, node eu/eu-1 (the side under test)
// and the certificates of every kind of peer it meets.
func peerCerts(t *testing.T) (dir string, peers []peerCert) {
	t.Helper()
	eu1, eu2 := NodeIdentity("eu", "eu-1"), NodeIdentity("eu", "eu-2")
	dir = deployment(t, eu1, eu2, SiteIdentity("eu"), NodeIdentity("us", "us-1"), NodeIdentity("eu", "eu-rev"))
	if err := Issue(dir, NodeIdentity("eu", "eu-old"), IssueOptions{NotAfter: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := Revoke(dir, NodeIdentity("eu", "eu-rev")); err != nil {
		t.Fatal(err)
	}
	other := deployment(t, eu2) // another deployment's CA
	self := selfSigned(t, eu2)
	noID := signedWithoutIdentity(t, dir)
	pair := func(dir string, id Identity) *tls.Certificate { p := pairOf(t, dir, id); return &p }
	return dir, []peerCert{
		{"right node", pair(dir, eu2), nil, nil},
		{"another CA", pair(other, eu2), ErrInvalid, []string{"peer meridian://node/eu/eu-2 refused", "does not verify against " + filepath.Join(dir, CAFile), "unknown authority"}},
		{"self-signed", &self, ErrInvalid, []string{"peer meridian://node/eu/eu-2 refused", "unknown authority"}},
		{"expired", pair(dir, NodeIdentity("eu", "eu-old")), ErrInvalid, []string{"peer meridian://node/eu/eu-old refused", "expired"}},
		{"revoked", pair(dir, NodeIdentity("eu", "eu-rev")), ErrRevoked, []string{"peer meridian://node/eu/eu-rev refused: revoked", filepath.Join(dir, CRLFile)}},
		{"site certificate", pair(dir, SiteIdentity("eu")), ErrIdentity, []string{"certs: peer meridian://site/eu refused: site eu, want a node of site eu"}},
		{"node of another site", pair(dir, NodeIdentity("us", "us-1")), ErrIdentity, []string{"certs: peer meridian://node/us/us-1 refused: a node of site us, want a node of site eu"}},
		{"no identity", &noID, ErrIdentity, []string{`peer with certificate "anonymous" refused`, "no meridian:// URI SAN"}},
	}
}

// TestServerRefuses runs TLS.Server against a client presenting each kind
// of certificate, over loopback.
func TestServerRefuses(t *testing.T) {
	dir, peers := peerCerts(t)
	me, err := LoadNode(dir, "eu", "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	server := me.Server(AllowNodesOf("eu"))
	peers = append(peers, peerCert{"no certificate", nil, errAny, []string{"certificate"}})
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			client := &tls.Config{
				MinVersion:         tls.VersionTLS13,
				InsecureSkipVerify: true, // this peer does not check the server
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
					if p.cert == nil {
						return &tls.Certificate{}, nil
					}
					return p.cert, nil
				},
			}
			r := handshake(t, server, client)
			if p.want == nil {
				if r.serverErr != nil || r.clientErr != nil {
					t.Fatalf("refused: server %v, client %v", r.serverErr, r.clientErr)
				}
				id, err := me.PeerIdentity(r.server)
				if err != nil || id != NodeIdentity("eu", "eu-2") {
					t.Errorf("server's PeerIdentity = %v, %v; want node eu-2", id, err)
				}
				return
			}
			checkRefusal(t, r.serverErr, p)
			if r.clientErr == nil {
				t.Error("the client was not told")
			}
		})
	}
}

// TestClientRefuses runs TLS.Client against a server presenting each kind
// of certificate.
func TestClientRefuses(t *testing.T) {
	dir, peers := peerCerts(t)
	me, err := LoadNode(dir, "eu", "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	client := me.Client(AllowNodesOf("eu"))
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			server := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{*p.cert}, ClientAuth: tls.RequireAnyClientCert}
			r := handshake(t, server, client)
			if p.want == nil {
				if r.serverErr != nil || r.clientErr != nil {
					t.Fatalf("refused: server %v, client %v", r.serverErr, r.clientErr)
				}
				id, err := me.PeerIdentity(r.client)
				if err != nil || id != NodeIdentity("eu", "eu-2") {
					t.Errorf("client's PeerIdentity = %v, %v; want node eu-2", id, err)
				}
				return
			}
			checkRefusal(t, r.clientErr, p)
			if r.serverErr == nil {
				t.Error("the server was not told")
			}
		})
	}
	// A server can hardly present no certificate in TLS 1.3; the
	// callbacks refuse one that does all the same.
	if err := client.VerifyPeerCertificate(nil, nil); !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), "no certificate") {
		t.Errorf("VerifyPeerCertificate(none) = %v, want ErrIdentity saying no certificate", err)
	}
	if err := client.VerifyConnection(tls.ConnectionState{DidResume: true}); !errors.Is(err, ErrIdentity) {
		t.Errorf("VerifyConnection(resumed, none) = %v, want ErrIdentity", err)
	}
	if err := client.VerifyPeerCertificate([][]byte{[]byte("junk")}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("VerifyPeerCertificate(junk) = %v, want ErrInvalid", err)
	}
	if _, err := me.PeerIdentity(tls.ConnectionState{}); !errors.Is(err, ErrIdentity) {
		t.Errorf("PeerIdentity of nothing = %v, want ErrIdentity", err)
	}
}

func checkRefusal(t *testing.T, err error, p peerCert) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	if p.want != errAny && !errors.Is(err, p.want) {
		t.Errorf("error %q does not wrap %v", err, p.want)
	}
	for _, s := range p.text {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

// TestSitesAndNodes runs the configurations between real LoadNode and
// LoadSite material both ways: the issue's "a node of site eu cannot join
// site us; a site's certificate cannot act as a node of another site".
func TestSitesAndNodes(t *testing.T) {
	dir := deployment(t, NodeIdentity("eu", "eu-1"), NodeIdentity("eu", "eu-2"), NodeIdentity("us", "us-1"), SiteIdentity("eu"), SiteIdentity("us"), SiteIdentity("asia"))
	load := func(id Identity) *TLS {
		var m *TLS
		var err error
		if id.Role == RoleNode {
			m, err = LoadNode(dir, id.Site, id.Node)
		} else {
			m, err = LoadSite(dir, id.Site)
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Identity() != id {
			t.Fatalf("Identity() = %v, want %v", m.Identity(), id)
		}
		return m
	}
	for _, tc := range []struct {
		server, client Identity
		sAllow, cAllow func(Identity) error
		refused        string // "server", "client" or "" (accepted)
	}{
		{NodeIdentity("eu", "eu-1"), NodeIdentity("eu", "eu-2"), AllowNodesOf("eu"), AllowNodesOf("eu"), ""},
		{NodeIdentity("us", "us-1"), NodeIdentity("eu", "eu-2"), AllowNodesOf("us"), AllowNodesOf("us"), "server"}, // eu-2 joins us
		{NodeIdentity("us", "us-1"), NodeIdentity("eu", "eu-2"), AllowNodesOf("us"), AllowNodesOf("eu"), "client"}, // eu-2 will not join us either
		{NodeIdentity("eu", "eu-1"), SiteIdentity("us"), AllowNodesOf("eu"), AllowSites("eu"), "client"},           // site us acts as a node of eu
		{SiteIdentity("eu"), SiteIdentity("us"), AllowSites("eu"), AllowSites("us"), ""},
		{SiteIdentity("eu"), SiteIdentity("asia"), AllowSites("eu"), AllowSites("asia"), ""},
		{SiteIdentity("eu"), NodeIdentity("eu", "eu-1"), AllowSites("eu"), AllowSites(""), "server"}, // a node in the federation
		{SiteIdentity("eu"), SiteIdentity("eu"), AllowSites("eu"), AllowSites(""), "server"},         // itself
	} {
		t.Run(tc.client.String()+"→"+tc.server.String(), func(t *testing.T) {
			r := handshake(t, load(tc.server).Server(tc.sAllow), load(tc.client).Client(tc.cAllow))
			switch tc.refused {
			case "":
				if r.serverErr != nil || r.clientErr != nil {
					t.Fatalf("refused: server %v, client %v", r.serverErr, r.clientErr)
				}
			case "server":
				if !errors.Is(r.serverErr, ErrIdentity) || r.clientErr == nil {
					t.Fatalf("server %v, client %v; want the server to refuse with ErrIdentity", r.serverErr, r.clientErr)
				}
			case "client":
				if !errors.Is(r.clientErr, ErrIdentity) {
					t.Fatalf("client %v; want the client to refuse with ErrIdentity", r.clientErr)
				}
			}
		})
	}
}

func TestConfigs(t *testing.T) {
	dir := deployment(t, NodeIdentity("eu", "eu-1"))
	me, err := LoadNode(dir, "eu", "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	s, c := me.Server(AllowNodesOf("eu")), me.Client(AllowNodesOf("eu"))
	if s.MinVersion != tls.VersionTLS13 || c.MinVersion != tls.VersionTLS13 {
		t.Error("not TLS 1.3 only")
	}
	if s.ClientAuth != tls.RequireAnyClientCert || s.VerifyPeerCertificate == nil || s.VerifyConnection == nil || !s.SessionTicketsDisabled {
		t.Error("server must require a certificate, verify it itself and issue no session tickets")
	}
	if c.VerifyPeerCertificate == nil || c.VerifyConnection == nil || c.ClientSessionCache != nil {
		t.Error("client must verify the server itself and not resume sessions")
	}
	for name, f := range map[string]func(){
		"Server": func() { me.Server(nil) },
		"Client": func() { me.Client(nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(nil) did not panic", name)
				}
			}()
			f()
		}()
	}
	// Loading needs no CA key, and names what is missing.
	os.Remove(filepath.Join(dir, CAKeyFile))
	if _, err := LoadNode(dir, "eu", "eu-1"); err != nil {
		t.Fatalf("LoadNode without ca-key.pem: %v", err)
	}
	if _, err := LoadNode(dir, "eu", "eu-2"); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "eu.eu-2.pem") || !strings.Contains(err.Error(), "--nodes eu/eu-2") {
		t.Errorf("LoadNode of a missing pair = %v, want not-exist naming eu.eu-2.pem and how to make it", err)
	}
	if _, err := LoadSite(dir, "eu"); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "--sites eu") {
		t.Errorf("LoadSite of a missing pair = %v", err)
	}
	if _, err := LoadNode(dir, "eu", "Bad"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("LoadNode(Bad) = %v, want ErrInvalidName", err)
	}
}

func TestAllow(t *testing.T) {
	eu1, us1 := NodeIdentity("eu", "eu-1"), NodeIdentity("us", "us-1")
	eu, us := SiteIdentity("eu"), SiteIdentity("us")
	for _, tc := range []struct {
		name  string
		allow func(Identity) error
		id    Identity
		want  string // "" accepted, else the error
	}{
		{"node of eu", AllowNodesOf("eu"), eu1, ""},
		{"node of us", AllowNodesOf("eu"), us1, "a node of site us, want a node of site eu"},
		{"site eu as node", AllowNodesOf("eu"), eu, "site eu, want a node of site eu"},
		{"other site", AllowSites("eu"), us, ""},
		{"itself", AllowSites("eu"), eu, "site eu itself, want another site"},
		{"node as site", AllowSites("eu"), us1, "a node of site us, want a site other than eu"},
		{"any site", AllowSites(""), eu, ""},
		{"node as any site", AllowSites(""), eu1, "a node of site eu, want a site"},
	} {
		err := tc.allow(tc.id)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, ErrIdentity)):
			t.Errorf("%s: %v, want ErrIdentity %q", tc.name, err, tc.want)
		}
	}
}

// TestRevocationReload revokes a certificate while a server configuration
// is in use: the same configuration refuses it once it looks at crl.pem
// again (at most once a second), fails closed while crl.pem is unusable,
// and accepts again once it is gone.
func TestRevocationReload(t *testing.T) {
	dir := deployment(t, NodeIdentity("eu", "eu-1"), NodeIdentity("eu", "eu-2"), NodeIdentity("eu", "eu-3"))
	other := deployment(t, NodeIdentity("eu", "eu-2"))
	if err := Revoke(other, NodeIdentity("eu", "eu-2")); err != nil {
		t.Fatal(err)
	}
	me, err := LoadNode(dir, "eu", "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	me.v.now = clock.now
	server := me.Server(AllowNodesOf("eu"))
	eu2, eu3 := rawClient(pairOf(t, dir, NodeIdentity("eu", "eu-2"))), rawClient(pairOf(t, dir, NodeIdentity("eu", "eu-3")))
	expect := func(step string, client *tls.Config, want error, text string) {
		t.Helper()
		r := handshake(t, server, client)
		switch {
		case want == nil && r.serverErr != nil:
			t.Fatalf("%s: refused: %v", step, r.serverErr)
		case want != nil && (!errors.Is(r.serverErr, want) || !strings.Contains(r.serverErr.Error(), text)):
			t.Fatalf("%s: server %v; want %v saying %q", step, r.serverErr, want, text)
		}
	}
	expect("before", eu2, nil, "")
	if err := Revoke(dir, NodeIdentity("eu", "eu-2")); err != nil {
		t.Fatal(err)
	}
	expect("revoked, within the second", eu2, nil, "") // not looked at yet
	clock.advance(crlRecheck)
	expect("revoked", eu2, ErrRevoked, "meridian://node/eu/eu-2 refused: revoked")
	expect("another node", eu3, nil, "")

	crl := filepath.Join(dir, CRLFile)
	good, err := os.ReadFile(crl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crl, []byte("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock.advance(crlRecheck)
	expect("corrupt list", eu3, ErrInvalid, crl)
	copyFile(t, filepath.Join(other, CRLFile), crl)
	clock.advance(crlRecheck)
	expect("another CA's list", eu3, ErrInvalid, "not signed by the CA")
	os.WriteFile(crl, good, 0o644)
	clock.advance(crlRecheck)
	expect("mended", eu3, nil, "")
	expect("mended, revoked", eu2, ErrRevoked, "revoked")
	os.Remove(crl)
	clock.advance(crlRecheck)
	expect("no list", eu2, nil, "")
}

// TestResumedSessionRechecked turns session tickets back on (which Server
// does not) to show that a resumed session is checked all the same, on
// either side.
func TestResumedSessionRechecked(t *testing.T) {
	dir := deployment(t, NodeIdentity("eu", "eu-1"), NodeIdentity("eu", "eu-2"))
	clock := newFakeClock()
	me, err := LoadNode(dir, "eu", "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	me.v.now = clock.now
	peer := pairOf(t, dir, NodeIdentity("eu", "eu-2"))

	server := me.Server(AllowNodesOf("eu"))
	server.SessionTicketsDisabled = false
	// Each handshake listens on a new port: name the server, the session
	// cache's key.
	client := rawClient(peer)
	client.ServerName = "eu-1"
	client.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	if r := handshake(t, server, client); r.serverErr != nil || r.clientErr != nil {
		t.Fatalf("first: %v, %v", r.serverErr, r.clientErr)
	}
	if r := handshake(t, server, client); r.serverErr != nil || !r.server.DidResume {
		t.Fatalf("second: %v, resumed %v; want a resumed session", r.serverErr, r.server.DidResume)
	}

	// And the other way round: me as the client of eu-2.
	cli := me.Client(AllowNodesOf("eu"))
	cli.ServerName = "eu-2"
	cli.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	srv := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{peer}}
	if r := handshake(t, srv, cli); r.clientErr != nil {
		t.Fatalf("client first: %v", r.clientErr)
	}

	if err := Revoke(dir, NodeIdentity("eu", "eu-2")); err != nil {
		t.Fatal(err)
	}
	clock.advance(crlRecheck)
	if r := handshake(t, server, client); !errors.Is(r.serverErr, ErrRevoked) {
		t.Errorf("server, resumed after the revocation: %v, want ErrRevoked", r.serverErr)
	}
	if r := handshake(t, srv, cli); !errors.Is(r.clientErr, ErrRevoked) || !r.client.DidResume {
		t.Errorf("client, resumed (%v) after the revocation: %v, want ErrRevoked", r.client.DidResume, r.clientErr)
	}
	// With session tickets off, as Server makes it, nothing resumes.
	server.SessionTicketsDisabled = true
	fresh := rawClient(pairOf(t, dir, NodeIdentity("eu", "eu-1")))
	fresh.ServerName = "eu-1"
	fresh.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	for i := range 2 {
		if r := handshake(t, server, fresh); r.serverErr != nil || r.server.DidResume {
			t.Errorf("tickets off, handshake %d: %v, resumed %v", i, r.serverErr, r.server.DidResume)
		}
	}
}

// TestRotation replaces a node's pair: the new one loads and is accepted,
// and so is the old one until it is revoked.
func TestRotation(t *testing.T) {
	eu2, eu3 := NodeIdentity("eu", "eu-2"), NodeIdentity("eu", "eu-3")
	dir := deployment(t, NodeIdentity("eu", "eu-1"), eu2, eu3)
	me, err := LoadNode(dir, "eu", "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	me.v.now = clock.now
	server := me.Server(AllowNodesOf("eu"))

	old2 := pairOf(t, dir, eu2)
	if err := Replace(dir, eu2, IssueOptions{}); err != nil {
		t.Fatal(err)
	}
	new2, err := LoadNode(dir, "eu", "eu-2")
	if err != nil {
		t.Fatalf("the new pair does not load: %v", err)
	}
	if new2.pair.Leaf.SerialNumber.Cmp(old2.Leaf.SerialNumber) == 0 || new2.pair.Leaf.PublicKey.(*ecdsa.PublicKey).Equal(old2.Leaf.PublicKey) {
		t.Fatal("Replace kept the serial or the key")
	}
	if r := handshake(t, server, new2.Client(AllowNodesOf("eu"))); r.serverErr != nil || r.clientErr != nil {
		t.Errorf("new pair: %v, %v", r.serverErr, r.clientErr)
	}
	if r := handshake(t, server, rawClient(old2)); r.serverErr != nil {
		t.Errorf("old pair, not revoked: %v", r.serverErr)
	}

	// Retiring a pair: revoke, then replace.
	old3 := pairOf(t, dir, eu3)
	if err := Revoke(dir, eu3); err != nil {
		t.Fatal(err)
	}
	if err := Replace(dir, eu3, IssueOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.advance(crlRecheck)
	if r := handshake(t, server, rawClient(old3)); !errors.Is(r.serverErr, ErrRevoked) {
		t.Errorf("old pair, revoked: %v, want ErrRevoked", r.serverErr)
	}
	if r := handshake(t, server, rawClient(pairOf(t, dir, eu3))); r.serverErr != nil {
		t.Errorf("new pair after a revocation: %v", r.serverErr)
	}

	_, keyFile := PairFiles(dir, eu3)
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("replaced key: %v, %v; want mode 0600", fi, err)
	}
	noTemp(t, dir)
	if err := Replace(dir, NodeIdentity("eu", "eu-9"), IssueOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Replace of a pair never issued = %v, want not-exist", err)
	}
	// A half-replaced pair (new key, old certificate) is mended by
	// replacing again.
	certFile, _ := PairFiles(dir, eu2)
	b, _ := os.ReadFile(certFile)
	if err := Replace(dir, eu2, IssueOptions{}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(certFile, b, 0o644)
	if _, err := LoadNode(dir, "eu", "eu-2"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not the key of") {
		t.Fatalf("half-replaced pair loads: %v", err)
	}
	if err := Replace(dir, eu2, IssueOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadNode(dir, "eu", "eu-2"); err != nil {
		t.Errorf("replaced again: %v", err)
	}
}

// result is what handshake saw on each side.
type result struct {
	serverErr, clientErr error
	server, client       tls.ConnectionState
}

// handshake connects a tls.Client to a tls.Server over loopback. The server
// writes a byte once its handshake is done, and the client reads it: in
// TLS 1.3 the client's handshake ends before the server has checked the
// client's certificate.
func handshake(t *testing.T, server, client *tls.Config) result {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type side struct {
		err error
		cs  tls.ConnectionState
	}
	done := make(chan side, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- side{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		tc := tls.Server(c, server)
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte{1})
		}
		done <- side{err, tc.ConnectionState()}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	tc := tls.Client(c, client)
	var r result
	r.clientErr = tc.Handshake()
	if r.clientErr == nil {
		var b [1]byte
		_, r.clientErr = io.ReadFull(tc, b[:])
	}
	r.client = tc.ConnectionState()
	c.Close()
	s := <-done
	r.serverErr, r.server = s.err, s.cs
	return r
}

// rawClient presents pair and checks nothing of the server.
func rawClient(pair tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		InsecureSkipVerify:   true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil },
	}
}

// deployment makes a CA in a new directory and a pair for each of ids.
func deployment(t *testing.T, ids ...Identity) string {
	t.Helper()
	dir := t.TempDir()
	mustInit(t, dir)
	for _, id := range ids {
		if err := Issue(dir, id, IssueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// pairOf reads id's pair from dir as crypto/tls does, checking nothing.
func pairOf(t *testing.T, dir string, id Identity) tls.Certificate {
	t.Helper()
	certFile, keyFile := PairFiles(dir, id)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// selfSigned makes a certificate that names id and signs itself.
func selfSigned(t *testing.T, id Identity) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: bigOne(),
		Subject:      pkix.Name{CommonName: "self"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{id.URI()},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// signedWithoutIdentity makes a certificate that dir's CA signed but that
// names no Meridian identity.
func signedWithoutIdentity(t *testing.T, dir string) tls.Certificate {
	t.Helper()
	ca, caKey, err := loadCAKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: bigOne(),
		Subject:      pkix.Name{CommonName: "anonymous"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func bigOne() *big.Int { return big.NewInt(1) }

// noTemp fails if a temporary file was left in dir.
func noTemp(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// fakeClock is a verifier's clock that moves only when told.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := new(fakeClock)
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

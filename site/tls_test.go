package site_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/shardset"
	"github.com/meridian-crawler/meridian/site"
)

// syncBuffer is a log sink the test reads while the node writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// dbState is what must not change when a stranger knocks: the applied
// index, the counters and the members.
type dbState struct {
	Applied uint64
	Counts  store.Counts
	Members map[string]string
}

func stateOf(t *testing.T, db *crawldb.DB) dbState {
	t.Helper()
	m, err := db.Members()
	if err != nil {
		t.Fatal(err)
	}
	return dbState{Applied: db.Store().AppliedIndex(), Counts: db.Store().Counts(), Members: m}
}

// clientPair loads id's pair from dir as a client certificate.
func clientPair(t *testing.T, dir string, id certs.Identity) []tls.Certificate {
	t.Helper()
	certFile, keyFile := certs.PairFiles(dir, id)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return []tls.Certificate{pair}
}

// knock connects to addr over TLS 1.3 presenting pair (nil: none), without
// checking the server (the test is about what the server accepts), sends
// payload and reads the answer. It returns the first error met (the
// handshake's, or the alert the server sent after it) and what was read.
func knock(addr string, pair []tls.Certificate, payload []byte) ([]byte, error) {
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, Certificates: pair})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write(payload); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(conn)
	if len(b) == 0 && err == nil {
		err = io.EOF // closed without a word
	}
	return b, err
}

// TestListenersRefuseStrangers starts a one-node site of a federation with
// certificates and knocks on each of its listeners: Raft, the node API and
// the federation endpoint refuse a client without a certificate, one with
// another CA's certificate and one with a valid certificate of the wrong
// role, at the handshake or with an authorization error; the node's own
// kind gets in; the status listener is read-only and serves no profiles
// without --pprof; garbage after a valid handshake is refused; and the
// crawl database is unchanged by all of it.
func TestListenersRefuseStrangers(t *testing.T) {
	w := startFedWeb(t, 20, 5, 4, 3, []string{"eu", "us", "asia"})
	root := t.TempDir()
	fedPath, file := writeFedFile(t, root, "consistent", 30*time.Second)
	cfg := fedConfig(w, root, fedPath, "eu")
	issueNodeCert(w.certs, "eu", "eu-2") // a node the site could have
	issueNodeCert(w.certs, "us", "us-1") // another site's node
	other := filepath.Join(root, "other-ca")
	if err := certs.Init(other); err != nil {
		t.Fatal(err)
	}
	if err := certs.IssueNode(other, "eu", "eu-2"); err != nil { // the right name, the wrong CA
		t.Fatal(err)
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := site.Start(ctx, cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := s.DB()
	before := stateOf(t, db)
	spec, _ := file.Site("eu")

	var (
		none     []tls.Certificate
		otherCA  = clientPair(t, other, certs.NodeIdentity("eu", "eu-2"))
		usNode   = clientPair(t, w.certs, certs.NodeIdentity("us", "us-1"))
		euSite   = clientPair(t, w.certs, certs.SiteIdentity("eu")) // a federation peer's kind of certificate
		euNode   = clientPair(t, w.certs, certs.NodeIdentity("eu", "eu-2"))
		apply, _ = store.NewBatch().Encode()
	)
	httpReq := func(method, path string, body []byte) []byte {
		var b bytes.Buffer
		b.WriteString(method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n")
		if body != nil {
			b.WriteString("Content-Type: application/octet-stream\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n")
		}
		b.WriteString("\r\n")
		b.Write(body)
		return b.Bytes()
	}
	// The site's meta group's crawl database API on the node (its Host
	// serves each group's under /crawldb/g/GROUP).
	metaAPI := "/crawldb/g/" + shardset.MetaGroup
	raftGarbage := []byte{0, 0x81, 0xa4, 'T', 'e', 'r', 'm', 1} // an AppendEntries-type byte and a fragment of a frame

	refused := []struct {
		name, addr string
		pair       []tls.Certificate
		payload    []byte
		status     string // "": refused at the TLS level; else the HTTP status wanted
		plain      bool   // over plain TCP (the status listener), not TLS
	}{
		{"raft/no certificate", db.RaftAddr(), none, raftGarbage, "", false},
		{"raft/another CA", db.RaftAddr(), otherCA, raftGarbage, "", false},
		{"raft/another site's node", db.RaftAddr(), usNode, raftGarbage, "", false},
		{"raft/a federation peer (site certificate)", db.RaftAddr(), euSite, raftGarbage, "", false},
		{"api/no certificate", s.APIAddr(), none, httpReq("POST", "/crawldb/apply", apply), "", false},
		{"api/another CA", s.APIAddr(), otherCA, httpReq("POST", "/crawldb/apply", apply), "", false},
		{"api/another site's node", s.APIAddr(), usNode, httpReq("POST", "/crawldb/apply", apply), "", false},
		{"api/a federation peer (site certificate)", s.APIAddr(), euSite, httpReq("POST", "/crawldb/join", []byte(`{"id":"x","raft_addr":"127.0.0.1:1","api_addr":"127.0.0.1:2"}`)), "", false},
		{"federation/no certificate", spec.ListenAddr(), none, httpReq("POST", federation.ProbePath, []byte("x")), "", false},
		{"federation/another CA", spec.ListenAddr(), otherCA, httpReq("POST", federation.ProbePath, []byte("x")), "", false},
		{"federation/a node, not a site", spec.ListenAddr(), euNode, httpReq("POST", federation.ProbePath, []byte("x")), "403", false},
		// The status listener takes no writes and serves no profiles.
		{"status/a write", s.Addr(), nil, httpReq("POST", "/crawldb/apply", apply), "405", true},
		{"status/pprof without --pprof", s.Addr(), nil, httpReq("GET", "/debug/pprof/", nil), "404", true},
		// A node of the site gets in, but garbage is still garbage.
		{"api/garbage from a node of the site", s.APIAddr(), euNode, httpReq("POST", metaAPI+"/apply", []byte("\x00\xffnot a command")), "400", false},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			got, err := knock(tc.addr, tc.pair, tc.payload)
			if tc.plain {
				got, err = plainHTTP(tc.addr, tc.payload)
			}
			if tc.status == "" {
				if !isTLSRefusal(err) {
					t.Fatalf("refused, but not by TLS: %v (read %q)", err, got)
				}
				return
			}
			if !bytes.HasPrefix(got, []byte("HTTP/1.1 "+tc.status)) {
				t.Fatalf("answer %.120q (err %v), want HTTP %s", got, err, tc.status)
			}
		})
	}

	// The site's own kind gets in: a node of the site reads the crawl
	// database's status over mutual TLS (so the refusals above are the
	// certificates', not a broken listener's).
	got, err := knock(s.APIAddr(), euNode, httpReq("GET", metaAPI+"/status", nil))
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
		t.Fatalf("a node of the site: %.200q (%v), want 200", got, err)
	}
	// The refusals are logged, saying why.
	deadline := time.Now().Add(5 * time.Second)
	for _, want := range []string{"http: TLS handshake error", "crawldb: raft: refused", "crawldb: api: refused a request"} {
		for !strings.Contains(logs.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the node's log:\n%s", want, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if after := stateOf(t, db); !reflect.DeepEqual(before, after) {
		t.Fatalf("the crawl database changed:\nbefore %+v\nafter  %+v", before, after)
	}
	// And it still serves: a write commits.
	b := store.NewBatch()
	b.PutUser("tls-test", []byte("still serving"))
	if _, err := db.Apply(ctx, b); err != nil {
		t.Fatalf("a write after the knocks: %v", err)
	}
}

// plainHTTP sends req to addr over plain TCP and reads the answer.
func plainHTTP(addr string, req []byte) ([]byte, error) {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write(req); err != nil {
		return nil, err
	}
	return io.ReadAll(conn)
}

// isTLSRefusal reports whether err is the server refusing the TLS
// session with an alert (a missing or bad certificate, an unknown CA, or
// the certificate's identity refused), not a connection merely closed.
func isTLSRefusal(err error) bool {
	return err != nil && strings.Contains(err.Error(), "remote error: tls:")
}

// TestCertificateRotation: a node of a two-node site restarted with a new
// certificate from the same CA rejoins and catches up; restarted with its
// certificate revoked it refuses to start, and with a copy of the revoked
// certificate that does not know of the revocation (a stolen one) the
// other node refuses it at the handshake, so it never finds a leader; an
// expired certificate is refused the same two ways.
func TestCertificateRotation(t *testing.T) {
	w := startMultiWeb(t, 10, 3, 2, 5)
	root := t.TempDir()
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg1 := nodeConfig(t, w, root, "n1", "")
	n1, err := site.Start(ctx, cfg1, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	cfg2 := nodeConfig(t, w, root, "n2", n1.Addr())
	start2 := func(ctx context.Context, cfg site.Config) (*site.Site, error) {
		return site.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	}
	n2, err := start2(ctx, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	// write puts key through n1 and waits for n2 to apply it.
	write := func(n2 *site.Site, key string) {
		t.Helper()
		b := store.NewBatch()
		b.PutUser(key, []byte("v"))
		wctx, c := context.WithTimeout(ctx, 20*time.Second)
		defer c()
		if _, err := n1.DB().Apply(wctx, b); err != nil {
			t.Fatalf("write %s: %v", key, err)
		}
		if err := n2.DB().WaitApplied(wctx, n1.DB().Store().AppliedIndex()); err != nil {
			t.Fatalf("n2 applies %s: %v", key, err)
		}
	}
	write(n2, "before-rotation")
	oldCert, err := certs.ReadCertificate(w.certs, certs.NodeIdentity("eu", "n2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n2.Close(); err != nil {
		t.Fatal(err)
	}

	// Rotation: a new key and serial from the same CA.
	if err := certs.Replace(w.certs, certs.NodeIdentity("eu", "n2"), certs.IssueOptions{}); err != nil {
		t.Fatal(err)
	}
	newCert, err := certs.ReadCertificate(w.certs, certs.NodeIdentity("eu", "n2"))
	if err != nil {
		t.Fatal(err)
	}
	if newCert.SerialNumber.Cmp(oldCert.SerialNumber) == 0 || bytes.Equal(newCert.RawSubjectPublicKeyInfo, oldCert.RawSubjectPublicKeyInfo) {
		t.Fatal("Replace kept the serial or the key")
	}
	n2, err = start2(ctx, cfg2)
	if err != nil {
		t.Fatalf("n2 with a rotated certificate: %v", err)
	}
	write(n2, "after-rotation")
	if err := n2.Close(); err != nil {
		t.Fatal(err)
	}

	// Revoked: n2 refuses to start on it; a copy of the directory without
	// the revocation list gets it nowhere either, because n1 refuses it.
	stolen := filepath.Join(root, "stolen")
	copyDir(t, w.certs, stolen)
	if err := certs.Revoke(w.certs, certs.NodeIdentity("eu", "n2")); err != nil {
		t.Fatal(err)
	}
	if _, err := start2(ctx, cfg2); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("n2 started on a revoked certificate: %v", err)
	}
	// A running node looks at crl.pem again at most once a second: the
	// revocation holds for connections made after that.
	time.Sleep(1500 * time.Millisecond)
	before := stateOf(t, n1.DB())
	cfgStolen := cfg2
	cfgStolen.Certs = stolen
	sctx, scancel := context.WithTimeout(ctx, 6*time.Second)
	n2, err = start2(sctx, cfgStolen)
	scancel()
	if err == nil {
		n2.Close()
		t.Fatal("n2 rejoined with a revoked certificate")
	}
	waitFor(t, 5*time.Second, "n1 to log the revoked certificate it refused", func() bool {
		l := logs.String()
		return strings.Contains(l, "refused") && strings.Contains(l, "revoked")
	})
	if after := stateOf(t, n1.DB()); !reflect.DeepEqual(before, after) {
		t.Fatalf("n1's crawl database changed:\nbefore %+v\nafter  %+v", before, after)
	}

	// Expired: refused at load, and by n1 at the handshake.
	expired := filepath.Join(root, "expired")
	copyDir(t, w.certs, expired)
	past := time.Now().Add(-time.Hour)
	if err := certs.Replace(expired, certs.NodeIdentity("eu", "n2"), certs.IssueOptions{NotBefore: past.Add(-time.Hour), NotAfter: past}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(expired, certs.CRLFile)) // only the expiry counts here
	cfgExpired := cfg2
	cfgExpired.Certs = expired
	if _, err := start2(ctx, cfgExpired); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("n2 started on an expired certificate: %v", err)
	}
	got, err := knock(n1.APIAddr(), clientPair(t, expired, certs.NodeIdentity("eu", "n2")), []byte("GET /crawldb/status HTTP/1.1\r\nHost: x\r\n\r\n"))
	if !isTLSRefusal(err) {
		t.Fatalf("n1 took an expired certificate: %v, read %.100q", err, got)
	}
}

// copyDir copies the files of dir into a new directory to.
func copyDir(t *testing.T, dir, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

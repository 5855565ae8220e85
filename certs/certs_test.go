package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"eu", "us-east-1", "a", "0", strings.Repeat("x", 63), "asia"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "EU", "eu_1", "eu.1", "-eu", "eu-", strings.Repeat("x", 64), "é", "ca", "eu-key", "a b", "eu/us"} {
		err := ValidateName(bad)
		if !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidName", bad, err)
		}
	}
}

func TestInitRefusesOverwrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(filepath.Join(dir, CAFile))
	key, _ := os.ReadFile(filepath.Join(dir, CAKeyFile))
	err := Init(dir)
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), filepath.Join(dir, CAFile)) {
		t.Fatalf("second Init = %v, want ErrExists naming ca.pem", err)
	}
	ca2, _ := os.ReadFile(filepath.Join(dir, CAFile))
	key2, _ := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if !bytes.Equal(ca, ca2) || !bytes.Equal(key, key2) {
		t.Fatal("second Init changed the CA")
	}
	// Half a CA is refused too.
	os.Remove(filepath.Join(dir, CAFile))
	if err := Init(dir); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), CAKeyFile) {
		t.Fatalf("Init with only ca-key.pem = %v, want ErrExists naming it", err)
	}
	for _, f := range []string{dir, filepath.Join(dir, CAKeyFile)} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v, want no group or other access", f, fi.Mode().Perm())
		}
	}
}

func TestIssueSite(t *testing.T) {
	dir := t.TempDir()
	if err := IssueSite(dir, "eu"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), CAFile) {
		t.Fatalf("IssueSite without a CA = %v, want not-exist naming ca.pem", err)
	}
	mustInit(t, dir)
	if err := IssueSite(dir, "EU"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("IssueSite(EU) = %v, want ErrInvalidName", err)
	}
	if err := IssueSite(dir, "eu"); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := PairFiles(dir, SiteIdentity("eu"))
	if certFile != filepath.Join(dir, "eu.pem") || keyFile != filepath.Join(dir, "eu-key.pem") {
		t.Fatalf("PairFiles = %s, %s", certFile, keyFile)
	}
	if err := IssueSite(dir, "eu"); !errors.Is(err, ErrExists) {
		t.Fatalf("second IssueSite = %v, want ErrExists", err)
	}
	if fi, _ := os.Stat(keyFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", keyFile, fi.Mode().Perm())
	}
	certs, err := readCerts(certFile)
	if err != nil {
		t.Fatal(err)
	}
	c := certs[0]
	if c.Subject.CommonName != "eu" {
		t.Errorf("CommonName %q", c.Subject.CommonName)
	}
	if len(c.URIs) != 1 || c.URIs[0].String() != "meridian://site/eu" {
		t.Errorf("URI SANs %v, want meridian://site/eu", c.URIs)
	}
	if len(c.DNSNames) != 1 || c.DNSNames[0] != "eu" {
		t.Errorf("DNS SANs %v, want eu", c.DNSNames)
	}
	for _, h := range []string{"eu", "127.0.0.1", "::1"} {
		if err := c.VerifyHostname(h); err != nil {
			t.Errorf("certificate does not verify for %s: %v", h, err)
		}
	}
	var server, client bool
	for _, u := range c.ExtKeyUsage {
		server = server || u == x509.ExtKeyUsageServerAuth
		client = client || u == x509.ExtKeyUsageClientAuth
	}
	if !server || !client || c.IsCA {
		t.Errorf("usages %v (CA %v): want server and client auth, not a CA", c.ExtKeyUsage, c.IsCA)
	}
	if id, err := CertIdentity(c); err != nil || id != SiteIdentity("eu") {
		t.Errorf("CertIdentity = %v, %v", id, err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	mustInit(t, dir)
	for _, s := range []string{"eu", "us"} {
		if err := IssueSite(dir, s); err != nil {
			t.Fatal(err)
		}
	}
	server, client, err := Load(dir, "eu")
	if err != nil {
		t.Fatal(err)
	}
	if server.MinVersion != tls.VersionTLS13 || client.MinVersion != tls.VersionTLS13 {
		t.Error("not TLS 1.3 only")
	}
	if server.ClientAuth != tls.RequireAndVerifyClientCert || server.ClientCAs == nil || client.RootCAs == nil {
		t.Error("server must require and verify client certificates, client must have the CA")
	}
	// Loading needs no CA key.
	os.Remove(filepath.Join(dir, CAKeyFile))
	if _, _, err := Load(dir, "us"); err != nil {
		t.Fatalf("Load without ca-key.pem: %v", err)
	}
}

// TestLoadErrorsNameTheFile breaks one file at a time.
func TestLoadErrorsNameTheFile(t *testing.T) {
	other := t.TempDir() // another deployment
	mustInit(t, other)
	if err := IssueSite(other, "eu"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spoil func(dir string)
		file  string // named in the error
		want  error
		text  string
	}{
		{"no CA", func(d string) { os.Remove(filepath.Join(d, CAFile)) }, CAFile, fs.ErrNotExist, ""},
		{"CA garbage", func(d string) { os.WriteFile(filepath.Join(d, CAFile), []byte("junk"), 0o644) }, CAFile, ErrInvalid, "no PEM CERTIFICATE"},
		{"CA is a leaf", func(d string) { copyFile(t, filepath.Join(d, "us.pem"), filepath.Join(d, CAFile)) }, CAFile, ErrInvalid, "not a CA"},
		{"no cert", func(d string) { os.Remove(filepath.Join(d, "eu.pem")) }, "eu.pem", fs.ErrNotExist, "site certs"},
		{"no key", func(d string) { os.Remove(filepath.Join(d, "eu-key.pem")) }, "eu-key.pem", fs.ErrNotExist, "site certs"},
		{"key garbage", func(d string) {
			os.WriteFile(filepath.Join(d, "eu-key.pem"), []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600)
		}, "eu-key.pem", ErrInvalid, ""},
		{"another site's key", func(d string) { copyFile(t, filepath.Join(d, "us-key.pem"), filepath.Join(d, "eu-key.pem")) }, "eu-key.pem", ErrInvalid, "not the key of"},
		{"another site's pair", func(d string) {
			copyFile(t, filepath.Join(d, "us.pem"), filepath.Join(d, "eu.pem"))
			copyFile(t, filepath.Join(d, "us-key.pem"), filepath.Join(d, "eu-key.pem"))
		}, "eu.pem", ErrIdentity, "meridian://site/us"},
		{"another CA's pair", func(d string) {
			copyFile(t, filepath.Join(other, "eu.pem"), filepath.Join(d, "eu.pem"))
			copyFile(t, filepath.Join(other, "eu-key.pem"), filepath.Join(d, "eu-key.pem"))
		}, "eu.pem", ErrInvalid, "does not verify against"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mustInit(t, dir)
			for _, s := range []string{"eu", "us"} {
				if err := IssueSite(dir, s); err != nil {
					t.Fatal(err)
				}
			}
			tc.spoil(dir)
			_, _, err := Load(dir, "eu")
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), filepath.Join(dir, tc.file)) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Load = %v\nwant %v naming %s and saying %q", err, tc.want, tc.file, tc.text)
			}
		})
	}
	if _, _, err := Load(t.TempDir(), "Bad"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Load(Bad) = %v, want ErrInvalidName", err)
	}
}

func TestParseIdentity(t *testing.T) {
	for in, want := range map[string]Identity{
		"meridian://site/eu":      {Role: RoleSite, Site: "eu"},
		"meridian://node/eu/eu-1": {Role: RoleNode, Site: "eu", Node: "eu-1"},
	} {
		u, _ := url.Parse(in)
		got, err := ParseIdentity(u)
		if err != nil || got != want {
			t.Errorf("ParseIdentity(%s) = %v, %v; want %v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("%v.String() = %s, want %s", got, got.String(), in)
		}
	}
	for _, in := range []string{
		"https://site/eu", "meridian://site/", "meridian://site/EU", "meridian://site/eu/x",
		"meridian://node/eu", "meridian://node/eu/n/x", "meridian://admin/eu", "meridian://site:1/eu",
		"meridian://site/eu?x=1", "meridian://u@site/eu", "meridian://site/eu#f",
	} {
		u, _ := url.Parse(in)
		if id, err := ParseIdentity(u); !errors.Is(err, ErrIdentity) {
			t.Errorf("ParseIdentity(%s) = %v, %v; want ErrIdentity", in, id, err)
		}
	}
}

// TestPeerIdentity runs a real TLS 1.3 handshake between two sites on
// loopback and reads each side's identity of the other.
func TestPeerIdentity(t *testing.T) {
	dir := t.TempDir()
	mustInit(t, dir)
	for _, s := range []string{"eu", "us"} {
		if err := IssueSite(dir, s); err != nil {
			t.Fatal(err)
		}
	}
	srvCfg, _, err := Load(dir, "eu")
	if err != nil {
		t.Fatal(err)
	}
	_, cliCfg, err := Load(dir, "us")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		id  Identity
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			done <- result{err: err}
			return
		}
		id, err := PeerIdentity(tc.ConnectionState())
		done <- result{id, err}
	}()
	// The client dials an IP: the IP SANs make it verify.
	conn, err := tls.Dial("tcp", ln.Addr().String(), cliCfg)
	if err != nil {
		t.Fatal(err)
	}
	id, err := PeerIdentity(conn.ConnectionState())
	if err != nil || id != SiteIdentity("eu") {
		t.Errorf("client sees %v, %v; want site eu", id, err)
	}
	r := <-done
	conn.Close()
	if r.err != nil || r.id != SiteIdentity("us") {
		t.Errorf("server sees %v, %v; want site us", r.id, r.err)
	}

	// An unverified certificate names no one.
	cs := conn.ConnectionState()
	cs.VerifiedChains = nil
	if _, err := PeerIdentity(cs); !errors.Is(err, ErrIdentity) {
		t.Errorf("PeerIdentity without verified chains = %v, want ErrIdentity", err)
	}
	var zero tls.ConnectionState
	if _, err := PeerIdentity(zero); !errors.Is(err, ErrIdentity) {
		t.Errorf("PeerIdentity of nothing = %v, want ErrIdentity", err)
	}
}

func mustInit(t *testing.T, dir string) {
	t.Helper()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestIssueNode(t *testing.T) {
	dir := t.TempDir()
	mustInit(t, dir)
	if err := IssueNode(dir, "eu", "eu_1"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("IssueNode(eu_1) = %v, want ErrInvalidName", err)
	}
	if err := IssueNode(dir, "eu", "eu-1"); err != nil {
		t.Fatal(err)
	}
	id := NodeIdentity("eu", "eu-1")
	certFile, keyFile := PairFiles(dir, id)
	if certFile != filepath.Join(dir, "eu.eu-1.pem") || keyFile != filepath.Join(dir, "eu.eu-1-key.pem") {
		t.Fatalf("PairFiles = %s, %s", certFile, keyFile)
	}
	if err := IssueNode(dir, "eu", "eu-1"); !errors.Is(err, ErrExists) {
		t.Fatalf("second IssueNode = %v, want ErrExists", err)
	}
	if fi, _ := os.Stat(keyFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", keyFile, fi.Mode().Perm())
	}
	c, err := ReadCertificate(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject.CommonName != "eu.eu-1" || len(c.URIs) != 1 || c.URIs[0].String() != "meridian://node/eu/eu-1" {
		t.Errorf("CommonName %q, URI SANs %v", c.Subject.CommonName, c.URIs)
	}
	for _, h := range []string{"eu-1.eu", "127.0.0.1", "::1"} {
		if err := c.VerifyHostname(h); err != nil {
			t.Errorf("certificate does not verify for %s: %v", h, err)
		}
	}
	if got, err := CertIdentity(c); err != nil || got != id {
		t.Errorf("CertIdentity = %v, %v", got, err)
	}
	// A node and a site of the same name do not collide.
	if err := IssueSite(dir, "eu-1"); err != nil {
		t.Fatal(err)
	}
}

func TestIssueOptions(t *testing.T) {
	dir := t.TempDir()
	mustInit(t, dir)
	id := NodeIdentity("eu", "eu-1")
	nb, na := time.Now().Add(-48*time.Hour).Truncate(time.Second), time.Now().Add(-24*time.Hour).Truncate(time.Second)
	if err := Issue(dir, id, IssueOptions{NotBefore: nb, NotAfter: na}); err != nil {
		t.Fatal(err)
	}
	c, err := ReadCertificate(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	if !c.NotBefore.Equal(nb) || !c.NotAfter.Equal(na) {
		t.Errorf("validity %v to %v, want %v to %v", c.NotBefore, c.NotAfter, nb, na)
	}
	if _, err := LoadNode(dir, "eu", "eu-1"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("LoadNode of an expired pair = %v, want ErrInvalid saying expired", err)
	}
	if err := Issue(dir, id, IssueOptions{}); !errors.Is(err, ErrExists) {
		t.Errorf("Issue over a pair = %v, want ErrExists", err)
	}
	// Only NotAfter, long ago: NotBefore comes before it.
	if err := Issue(dir, NodeIdentity("eu", "eu-2"), IssueOptions{NotAfter: na}); err != nil {
		t.Errorf("Issue with NotAfter a day ago: %v", err)
	}
	for name, o := range map[string]IssueOptions{
		"NotAfter before NotBefore": {NotBefore: na, NotAfter: nb},
		"NotAfter after the CA's":   {NotAfter: time.Now().Add(CAValidity + time.Hour)},
	} {
		if err := Issue(dir, NodeIdentity("eu", "eu-3"), o); err == nil || !strings.Contains(err.Error(), "NotAfter") {
			t.Errorf("%s: %v, want an error about NotAfter", name, err)
		}
	}
	// Defaults: LeafValidity from now.
	if err := Issue(dir, SiteIdentity("eu"), IssueOptions{}); err != nil {
		t.Fatal(err)
	}
	c, _ = ReadCertificate(dir, SiteIdentity("eu"))
	if d := time.Until(c.NotAfter) - LeafValidity; d > time.Minute || d < -time.Minute {
		t.Errorf("default NotAfter %v, want about LeafValidity from now", c.NotAfter)
	}
	noTemp(t, dir)
}

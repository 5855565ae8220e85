package certs

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRevoke(t *testing.T) {
	eu1, eu2 := NodeIdentity("eu", "eu-1"), NodeIdentity("eu", "eu-2")
	dir := deployment(t, eu1, eu2, SiteIdentity("us"))
	crl := filepath.Join(dir, CRLFile)
	if _, err := ReadCRL(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadCRL with no list = %v, want not-exist", err)
	}
	serial := func(id Identity) string {
		c, err := ReadCertificate(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		return c.SerialNumber.Text(16)
	}
	listed := func(want int64, ids ...Identity) {
		t.Helper()
		rl, err := ReadCRL(dir)
		if err != nil {
			t.Fatal(err)
		}
		if rl.Number.Int64() != want || len(rl.RevokedCertificateEntries) != len(ids) {
			t.Fatalf("list number %v with %d entries, want %d with %d", rl.Number, len(rl.RevokedCertificateEntries), want, len(ids))
		}
		for i, id := range ids {
			if got := rl.RevokedCertificateEntries[i].SerialNumber.Text(16); got != serial(id) {
				t.Errorf("entry %d is %s, want %s's %s", i, got, id, serial(id))
			}
		}
	}
	if err := Revoke(dir, eu1); err != nil {
		t.Fatal(err)
	}
	listed(1, eu1)
	if err := Revoke(dir, SiteIdentity("us")); err != nil {
		t.Fatal(err)
	}
	listed(2, eu1, SiteIdentity("us"))
	before, _ := os.ReadFile(crl)
	if err := Revoke(dir, eu1); err != nil {
		t.Fatalf("revoking again: %v", err)
	}
	if after, _ := os.ReadFile(crl); !bytes.Equal(before, after) {
		t.Error("revoking a listed certificate changed the list")
	}
	noTemp(t, dir)

	// A revoked pair does not load, by any of the three.
	for name, load := range map[string]func() error{
		"LoadNode": func() error { _, err := LoadNode(dir, "eu", "eu-1"); return err },
		"LoadSite": func() error { _, err := LoadSite(dir, "us"); return err },
		"Load":     func() error { _, _, err := Load(dir, "us"); return err },
	} {
		if err := load(); !errors.Is(err, ErrRevoked) || !strings.Contains(err.Error(), crl) {
			t.Errorf("%s of a revoked pair = %v, want ErrRevoked naming %s", name, err, crl)
		}
	}
	if _, err := LoadNode(dir, "eu", "eu-2"); err != nil {
		t.Errorf("LoadNode of a pair not revoked: %v", err)
	}

	// What Revoke refuses.
	if err := Revoke(dir, NodeIdentity("eu", "eu-9")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Revoke of a pair never issued = %v, want not-exist", err)
	}
	if err := Revoke(dir, NodeIdentity("eu", "EU")); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Revoke of a bad name = %v, want ErrInvalidName", err)
	}
	other := deployment(t, eu2)
	certFile, _ := PairFiles(dir, eu2)
	good, _ := os.ReadFile(certFile)
	copyFile(t, filepath.Join(other, "eu.eu-2.pem"), certFile)
	if err := Revoke(dir, eu2); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not signed by") {
		t.Errorf("Revoke of another CA's certificate = %v, want ErrInvalid", err)
	}
	os.WriteFile(certFile, good, 0o644)
	os.WriteFile(crl, []byte("junk"), 0o644)
	if err := Revoke(dir, eu2); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "unusable") {
		t.Errorf("Revoke over a corrupt list = %v, want ErrInvalid", err)
	}
	if b, _ := os.ReadFile(crl); string(b) != "junk" {
		t.Error("Revoke replaced a corrupt list (and lost its entries)")
	}
	// A corrupt list: nothing loads (fail closed).
	if _, err := LoadNode(dir, "eu", "eu-2"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), crl) {
		t.Errorf("LoadNode with a corrupt list = %v, want ErrInvalid naming it", err)
	}
	os.WriteFile(crl, before, 0o644)
	os.Remove(filepath.Join(dir, CAKeyFile))
	if err := Revoke(dir, eu2); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), CAKeyFile) {
		t.Errorf("Revoke without the CA key = %v, want not-exist naming it", err)
	}
}

// TestLoadRefusesRevokedPeers: Load's configurations, which the federation
// uses, refuse a revoked peer too.
func TestLoadRefusesRevokedPeers(t *testing.T) {
	dir := deployment(t, SiteIdentity("eu"), SiteIdentity("us"))
	us := pairOf(t, dir, SiteIdentity("us"))
	if err := Revoke(dir, SiteIdentity("us")); err != nil {
		t.Fatal(err)
	}
	server, client, err := Load(dir, "eu")
	if err != nil {
		t.Fatal(err)
	}
	if !server.SessionTicketsDisabled {
		t.Error("Load's server issues session tickets")
	}
	if r := handshake(t, server, rawClient(us)); !errors.Is(r.serverErr, ErrRevoked) || !strings.Contains(r.serverErr.Error(), "meridian://site/us") {
		t.Errorf("server: %v, want ErrRevoked naming site us", r.serverErr)
	}
	c := client.Clone()
	c.ServerName = "us"
	r := handshake(t, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{us}}, c)
	if !errors.Is(r.clientErr, ErrRevoked) {
		t.Errorf("client: %v, want ErrRevoked", r.clientErr)
	}
}

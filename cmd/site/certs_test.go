package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/certs"
)

func runCerts(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRoot(&out, &out, nil)
	root.SetArgs(append([]string{"certs"}, args...))
	err := root.Execute()
	return out.String(), err
}

func TestCertsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	out, err := runCerts(t, "--dir", dir, "--sites", "eu,us")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wrote " + filepath.Join(dir, "ca.pem"), "wrote " + filepath.Join(dir, "eu.pem"), "wrote " + filepath.Join(dir, "us.pem")} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	ca, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	eu, _ := os.ReadFile(filepath.Join(dir, "eu.pem"))

	// Again with one more site: the CA and the old pairs are kept.
	out, err = runCerts(t, "--dir", dir, "--sites", "eu, us,asia")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kept " + filepath.Join(dir, "ca.pem"), "kept " + filepath.Join(dir, "eu.pem"), "wrote " + filepath.Join(dir, "asia.pem")} {
		if !strings.Contains(out, want) {
			t.Errorf("second run's output lacks %q:\n%s", want, out)
		}
	}
	ca2, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	eu2, _ := os.ReadFile(filepath.Join(dir, "eu.pem"))
	if !bytes.Equal(ca, ca2) || !bytes.Equal(eu, eu2) {
		t.Error("the second run replaced the CA or a kept pair")
	}
	for _, s := range []string{"eu", "us", "asia"} {
		if _, _, err := certs.Load(dir, s); err != nil {
			t.Errorf("Load %s: %v", s, err)
		}
	}

	// A pair that no longer matches its CA is reported, not kept silently.
	os.WriteFile(filepath.Join(dir, "us-key.pem"), []byte("junk"), 0o600)
	if _, err := runCerts(t, "--dir", dir, "--sites", "us"); err == nil || !strings.Contains(err.Error(), "us-key.pem") {
		t.Errorf("broken pair: %v, want an error naming us-key.pem", err)
	}

	// Bad names: every one reported, nothing written.
	empty := filepath.Join(t.TempDir(), "c")
	_, err = runCerts(t, "--dir", empty, "--sites", "EU,us,us,,a_b")
	for _, want := range []string{`"EU"`, `"us" is listed twice`, `""`, `"a_b"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad names: %v, want it to say %s", err, want)
		}
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Error("bad names still wrote something")
	}
	if _, err := runCerts(t, "--dir", empty); err == nil || !strings.Contains(err.Error(), "sites") {
		t.Errorf("no --sites: %v", err)
	}
}

package main

import (
	"bytes"
	"errors"
	"fmt"
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

func TestParseNodeEntry(t *testing.T) {
	for _, tc := range []struct {
		in         string
		site, node string // want, or
		err        string // in the error
	}{
		{in: "eu-1", site: "eu", node: "eu-1"},
		{in: "us-east-2", site: "us-east", node: "us-east-2"},
		{in: "eu/eu-1", site: "eu", node: "eu-1"},
		{in: "eu/alpha", site: "eu", node: "alpha"},
		{in: "us-east/b", site: "us-east", node: "b"},
		{in: "eu1", err: `"eu1": cannot tell its site`},
		{in: "-1", err: `"-1": cannot tell its site`},
		{in: "", err: `"": cannot tell its site`},
		{in: "eu-", err: `"eu-": certs: invalid name`},
		{in: "eu--1", err: `its site would be "eu-"`},
		{in: "ca-1", err: `its site would be "ca"`},
		{in: "EU-1", err: `"EU-1": certs: invalid name`},
		{in: "eu/", err: `"eu/": certs: no valid identity: node`},
		{in: "/eu-1", err: `"/eu-1": certs: no valid identity: site`},
		{in: "eu/eu/1", err: `"eu/eu/1"`},
		{in: "eu/eu_1", err: `"eu/eu_1"`},
		{in: "eu.x-1", err: `"eu.x-1"`},
	} {
		id, err := parseNodeEntry(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseNodeEntry(%q) = %v, %v; want an error saying %s", tc.in, id, err, tc.err)
			}
			continue
		}
		if err != nil || id != certs.NodeIdentity(tc.site, tc.node) {
			t.Errorf("parseNodeEntry(%q) = %v, %v; want node %s of site %s", tc.in, id, err, tc.node, tc.site)
		}
	}
}

// FuzzParseNodeEntry: whatever parses is a valid node identity that its
// SITE/NODE form gives back, and every error names the entry.
func FuzzParseNodeEntry(f *testing.F) {
	for _, s := range []string{"eu-1", "eu/eu-1", "us-east-2", "eu1", "eu--1", "ca-1", "a/b/c", "", "-", "é-1", "eu/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		id, err := parseNodeEntry(in)
		if err != nil {
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("%q: ", in)) {
				t.Fatalf("parseNodeEntry(%q): error %q does not begin with the entry", in, err)
			}
			return
		}
		if id.Role != certs.RoleNode || id.Validate() != nil {
			t.Fatalf("parseNodeEntry(%q) = %+v, not a valid node", in, id)
		}
		if !strings.Contains(in, "/") && (id.Node != in || !strings.HasPrefix(in, id.Site+"-")) {
			t.Fatalf("parseNodeEntry(%q) = %+v: want node %q of the site before its last '-'", in, id, in)
		}
		back, err := parseNodeEntry(id.Site + "/" + id.Node)
		if err != nil || back != id {
			t.Fatalf("parseNodeEntry(%q) = %+v, but its SITE/NODE form gives %+v, %v", in, id, back, err)
		}
	})
}

func TestCertsNodes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	out, err := runCerts(t, "--dir", dir, "--nodes", "eu-1, eu/eu-2,us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"wrote " + filepath.Join(dir, "ca.pem"),
		"wrote " + filepath.Join(dir, "eu.eu-1.pem") + " and " + filepath.Join(dir, "eu.eu-1-key.pem") + " (node eu-1 of site eu)",
		"wrote " + filepath.Join(dir, "eu.eu-2.pem"),
		"wrote " + filepath.Join(dir, "us-east.us-east-1.pem") + " and " + filepath.Join(dir, "us-east.us-east-1-key.pem") + " (node us-east-1 of site us-east)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Sites and more nodes: the others are kept.
	out, err = runCerts(t, "--dir", dir, "--sites", "eu", "--nodes", "eu-1,eu-3")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kept " + filepath.Join(dir, "ca.pem"), "wrote " + filepath.Join(dir, "eu.pem"), "kept " + filepath.Join(dir, "eu.eu-1.pem"), "(node eu-1 of site eu, valid until ", "wrote " + filepath.Join(dir, "eu.eu-3.pem")} {
		if !strings.Contains(out, want) {
			t.Errorf("second run's output lacks %q:\n%s", want, out)
		}
	}
	for _, n := range []string{"eu-1", "eu-2", "eu-3"} {
		if _, err := certs.LoadNode(dir, "eu", n); err != nil {
			t.Errorf("LoadNode %s: %v", n, err)
		}
	}
	// Bad entries: every one named, nothing written.
	empty := filepath.Join(t.TempDir(), "c")
	_, err = runCerts(t, "--dir", empty, "--sites", "EU", "--nodes", "eu1,eu-1,eu/eu-1,eu/x/y,,ca-2")
	for _, want := range []string{`--sites: certs: invalid name: "EU"`, `--nodes "eu1": cannot tell its site`, `--nodes "eu/eu-1": node eu-1 of site eu is listed twice (also as "eu-1")`, `--nodes "eu/x/y"`, `--nodes "": cannot tell`, `--nodes "ca-2": its site would be "ca"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad entries: %v\nwant it to say %s", err, want)
		}
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Error("bad entries still wrote something")
	}
}

func TestCertsRevokeRotate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if _, err := runCerts(t, "--dir", dir, "--sites", "eu,us,us-east", "--nodes", "eu-1,eu-2,us/us-east"); err != nil {
		t.Fatal(err)
	}
	crl := filepath.Join(dir, "crl.pem")
	serial := func(id certs.Identity) string {
		c, err := certs.ReadCertificate(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		return c.SerialNumber.Text(16)
	}
	eu1 := certs.NodeIdentity("eu", "eu-1")
	old := serial(eu1)
	out, err := runCerts(t, "--dir", dir, "--revoke", "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"wrote " + crl + " (revoked the certificate of node eu-1 of site eu, serial " + old + "; list number 1, 1 revoked in all)",
		"kept " + filepath.Join(dir, "eu.eu-1.pem") + " and " + filepath.Join(dir, "eu.eu-1-key.pem") + " (revoked",
		"--rotate eu/eu-1",
		"copy " + crl + " to every site and node",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--revoke output lacks %q:\n%s", want, out)
		}
	}
	if _, err := certs.LoadNode(dir, "eu", "eu-1"); !errors.Is(err, certs.ErrRevoked) {
		t.Errorf("LoadNode of the revoked pair = %v, want ErrRevoked", err)
	}
	// Again: already revoked; a site; then a second entry.
	if out, err = runCerts(t, "--dir", dir, "--revoke", "eu/eu-1"); err != nil || !strings.Contains(out, "kept "+crl+" (the certificate of node eu-1 of site eu, serial "+old+", is already revoked)") {
		t.Errorf("revoking again: %v\n%s", err, out)
	}
	if out, err = runCerts(t, "--dir", dir, "--revoke", "us"); err != nil || !strings.Contains(out, "(revoked the certificate of site us") || !strings.Contains(out, "list number 2, 2 revoked in all") {
		t.Errorf("--revoke us: %v\n%s", err, out)
	}
	// A kept pair that is revoked is reported, with the way out.
	if _, err := runCerts(t, "--dir", dir, "--nodes", "eu-1"); err == nil || !strings.Contains(err.Error(), "--rotate eu/eu-1") || !errors.Is(err, certs.ErrRevoked) {
		t.Errorf("--nodes with a revoked pair: %v", err)
	}

	// Rotate the revoked pair: a new one that loads.
	out, err = runCerts(t, "--dir", dir, "--rotate", "eu-1")
	if err != nil {
		t.Fatal(err)
	}
	nw := serial(eu1)
	for _, want := range []string{
		"wrote " + filepath.Join(dir, "eu.eu-1.pem") + " and " + filepath.Join(dir, "eu.eu-1-key.pem") + " (node eu-1 of site eu: new key, serial " + nw + ", valid from ",
		"the old certificate, serial " + old + ", is revoked",
		"restart node eu-1 of site eu",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--rotate output lacks %q:\n%s", want, out)
		}
	}
	if nw == old {
		t.Error("--rotate kept the serial")
	}
	if _, err := certs.LoadNode(dir, "eu", "eu-1"); err != nil {
		t.Errorf("LoadNode after --rotate: %v", err)
	}
	// Rotate without revoking: the old one is said to stay valid.
	old2 := serial(certs.NodeIdentity("eu", "eu-2"))
	if out, err = runCerts(t, "--dir", dir, "--rotate", "eu-2"); err != nil || !strings.Contains(out, "the old certificate, serial "+old2+", is not revoked: peers accept it until ") {
		t.Errorf("--rotate eu-2: %v\n%s", err, out)
	}
	// Both: revoke first, then rotate.
	eu2 := serial(certs.NodeIdentity("eu", "eu-2"))
	out, err = runCerts(t, "--dir", dir, "--revoke", "eu-2", "--rotate", "eu-2")
	if err != nil || !strings.Contains(out, "revoked the certificate of node eu-2 of site eu, serial "+eu2) || !strings.Contains(out, "the old certificate, serial "+eu2+", is revoked") {
		t.Errorf("--revoke and --rotate: %v\n%s", err, out)
	}
	if _, err := certs.LoadNode(dir, "eu", "eu-2"); err != nil {
		t.Errorf("LoadNode after --revoke --rotate: %v", err)
	}

	// Names: "us-east" is both site us-east and node us-east of site us.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--revoke", "us-east"}, `--revoke "us-east" is both site us-east and node us-east of site us: say meridian://site/us-east or us/us-east`},
		{[]string{"--rotate", "asia"}, `--rotate "asia": no certificate (looked for ` + filepath.Join(dir, "asia.pem") + ")"},
		{[]string{"--rotate", "eu-9"}, "looked for " + filepath.Join(dir, "eu-9.pem") + " and " + filepath.Join(dir, "eu.eu-9.pem")},
		{[]string{"--revoke", "EU"}, `--revoke "EU": not a site's name`},
		{[]string{"--revoke", "eu/x/y"}, `--revoke "eu/x/y"`},
		{[]string{"--revoke", "meridian://admin/eu"}, `--revoke "meridian://admin/eu"`},
		{[]string{"--revoke", "eu", "--sites", "eu"}, "without --sites and --nodes"},
	} {
		if _, err := runCerts(t, append([]string{"--dir", dir}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v\nwant it to say %s", tc.args, err, tc.want)
		}
	}
	usEast := serial(certs.SiteIdentity("us-east"))
	if out, err := runCerts(t, "--dir", dir, "--rotate", "meridian://site/us-east"); err != nil || !strings.Contains(out, "(site us-east: new key") {
		t.Errorf("--rotate meridian://site/us-east: %v\n%s", err, out)
	}
	if serial(certs.SiteIdentity("us-east")) == usEast {
		t.Error("--rotate meridian://site/us-east did not rotate the site")
	}
	if out, err := runCerts(t, "--dir", dir, "--rotate", "us/us-east"); err != nil || !strings.Contains(out, "(node us-east of site us: new key") {
		t.Errorf("--rotate us/us-east: %v\n%s", err, out)
	}
	// Without the CA's key nothing can be revoked or rotated.
	os.Remove(filepath.Join(dir, "ca-key.pem"))
	if _, err := runCerts(t, "--dir", dir, "--revoke", "eu"); err == nil || !strings.Contains(err.Error(), "ca-key.pem") {
		t.Errorf("--revoke without ca-key.pem: %v", err)
	}
	if _, err := runCerts(t, "--dir", dir, "--rotate", "eu"); err == nil || !strings.Contains(err.Error(), "ca-key.pem") {
		t.Errorf("--rotate without ca-key.pem: %v", err)
	}
}

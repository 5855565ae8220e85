package site

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProxyFunc: --proxy URL sends both schemes through the proxy,
// "env" reads HTTPS_PROXY and HTTP_PROXY, NO_PROXY applies to both, and
// a bad value is refused with what is wrong.
func TestProxyFunc(t *testing.T) {
	tests := []struct {
		name    string
		flag    string
		env     map[string]string
		target  string
		want    string // the proxy URL chosen, "" for direct
		wantErr string
	}{
		{"none", "", nil, "http://a.test/", "", ""},
		{"none, even with the environment's", "", map[string]string{"HTTP_PROXY": "http://127.0.0.9:1"}, "http://a.test/", "", ""},
		{"flag, http", "http://127.0.0.1:3128", nil, "http://a.test/", "http://127.0.0.1:3128", ""},
		{"flag, https", "http://127.0.0.1:3128", nil, "https://a.test/", "http://127.0.0.1:3128", ""},
		{"flag over the environment's", "http://127.0.0.1:3128", map[string]string{"HTTP_PROXY": "http://127.0.0.9:1"}, "http://a.test/", "http://127.0.0.1:3128", ""},
		{"flag and NO_PROXY", "http://127.0.0.1:3128", map[string]string{"NO_PROXY": ".internal.test"}, "http://x.internal.test/", "", ""},
		{"flag, host not in NO_PROXY", "http://127.0.0.1:3128", map[string]string{"NO_PROXY": ".internal.test"}, "http://x.other.test/", "http://127.0.0.1:3128", ""},
		{"env https", "env", map[string]string{"HTTPS_PROXY": "http://127.0.0.2:8080"}, "https://a.test/", "http://127.0.0.2:8080", ""},
		{"env https only: http direct", "env", map[string]string{"HTTPS_PROXY": "http://127.0.0.2:8080"}, "http://a.test/", "", ""},
		{"env lower case", "env", map[string]string{"http_proxy": "http://127.0.0.3:8080"}, "http://a.test/", "http://127.0.0.3:8080", ""},
		{"env unset", "env", nil, "", "", "neither HTTPS_PROXY nor HTTP_PROXY"},
		{"socks", "socks5://127.0.0.1:1080", nil, "", "", "bad proxy"},
		{"bad env value", "env", map[string]string{"HTTPS_PROXY": "socks5://127.0.0.1:1"}, "", "", "HTTPS_PROXY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "REQUEST_METHOD"} {
				t.Setenv(k, tt.env[k])
			}
			f, err := proxyFunc(tt.flag)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("proxyFunc(%q): %v, want an error with %q", tt.flag, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f == nil {
				if tt.want != "" {
					t.Fatalf("no proxy function, want %s", tt.want)
				}
				return
			}
			u, _ := url.Parse(tt.target)
			got, err := f(u)
			if err != nil {
				t.Fatal(err)
			}
			if s := urlString(got); s != tt.want {
				t.Errorf("proxy for %s = %q, want %q", tt.target, s, tt.want)
			}
		})
	}
}

func urlString(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.String()
}

// TestTLSRoots: --tls-ca adds a file's CAs to the system's; a file
// without a certificate, or none at all, is refused.
func TestTLSRoots(t *testing.T) {
	if p, err := tlsRoots(""); p != nil || err != nil {
		t.Errorf("tlsRoots(\"\") = %v, %v; want nil, nil (the system's)", p, err)
	}
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "ca.pem")
	os.WriteFile(good, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	pool, err := tlsRoots(good)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
		t.Errorf("the CA of --tls-ca is not trusted: %v", err)
	}
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("not a certificate"), 0o644)
	if _, err := tlsRoots(bad); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("tlsRoots(bad) = %v", err)
	}
	if _, err := tlsRoots(filepath.Join(dir, "absent.pem")); err == nil {
		t.Error("tlsRoots(absent) gave no error")
	}
}

// TestContactNeeded: a crawl that may reach public addresses (no websim,
// no --allow-private) needs --contact or a --user-agent; the bad forms
// of --contact and --robots-agent are refused.
func TestContactNeeded(t *testing.T) {
	base := DefaultConfig()
	base.Websim, base.Seeds = "off", "seeds.txt"
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{"no contact", func(*Config) {}, "needs --contact"},
		{"contact", func(c *Config) { c.Contact = "https://crawl.example.org/" }, ""},
		{"own user agent", func(c *Config) { c.UserAgent = "OurBot/1 (+mailto:ops@example.org)" }, ""},
		{"private web", func(c *Config) { c.AllowPrivate = true }, ""},
		{"websim", func(c *Config) { c.Websim = "realistic" }, ""},
		{"contact with spaces", func(c *Config) { c.Contact = "call me" }, "--contact"},
		{"robots agent", func(c *Config) { c.Contact, c.RobotsAgent = "https://x.example/", "our-bot" }, ""},
		{"robots agent with a version", func(c *Config) { c.Contact, c.RobotsAgent = "https://x.example/", "ourbot/1.0" }, "--robots-agent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.edit(&c)
			err := errors.Join(c.Validate(), c.checkContact())
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// TestTrapSettings: the trap rules' settings travel to a joining node as
// they were given (default, a value, or off), and a site created before
// them gets the defaults.
func TestTrapSettings(t *testing.T) {
	for _, tt := range []struct{ repeats, past, future int }{
		{2, 60, 12}, // the defaults
		{3, 24, 6},
		{0, 0, 0},  // both rules off
		{2, 0, 12}, // no bound in the past
	} {
		c := DefaultConfig()
		c.TrapRepeats, c.TrapCalendarPast, c.TrapCalendarFuture = tt.repeats, tt.past, tt.future
		var joined Config
		SettingsOf(c).Apply(&joined)
		if joined.TrapRepeats != tt.repeats || joined.TrapCalendarPast != tt.past || joined.TrapCalendarFuture != tt.future {
			t.Errorf("%+v travels as %d, %d, %d", tt, joined.TrapRepeats, joined.TrapCalendarPast, joined.TrapCalendarFuture)
		}
	}
	var old Config
	Settings{}.Apply(&old) // a site created before the trap rules
	d := DefaultConfig()
	if old.TrapRepeats != d.TrapRepeats || old.TrapCalendarPast != d.TrapCalendarPast || old.TrapCalendarFuture != d.TrapCalendarFuture {
		t.Errorf("a site without trap settings gets %d, %d, %d, want the defaults", old.TrapRepeats, old.TrapCalendarPast, old.TrapCalendarFuture)
	}
}

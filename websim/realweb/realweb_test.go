package realweb

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client is an HTTP client that resolves names with the web's DNS server
// (a real query each time) and trusts its CA.
func client(t *testing.T, w *Web, proxy string) *http.Client {
	t.Helper()
	resolve := func(ctx context.Context, host string) (string, error) {
		c := &dns.Client{Timeout: 2 * time.Second}
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(host), qt)
			resp, _, err := c.ExchangeContext(ctx, m, w.DNSAddr())
			if err != nil {
				return "", err
			}
			for _, rr := range resp.Answer {
				switch a := rr.(type) {
				case *dns.A:
					return a.A.String(), nil
				case *dns.AAAA:
					return a.AAAA.String(), nil
				}
			}
		}
		return "", &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if proxy == "" {
				if host, err = resolve(ctx, host); err != nil {
					return nil, err
				}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(host, port))
		},
		TLSClientConfig:    &tls.Config{RootCAs: w.CAPool()},
		ForceAttemptHTTP2:  true,
		DisableCompression: true,
	}
	if proxy != "" {
		u, err := url.Parse(proxy)
		if err != nil {
			t.Fatal(err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", u, err)
	}
	return resp, b
}

func start(t *testing.T, o Options) *Web {
	t.Helper()
	o.Dir = t.TempDir()
	w, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return w
}

// TestHostsBehave checks that each host behaves as its doc says, asked
// by a plain net/http client: the web is only a fair test of the crawler
// if it does.
func TestHostsBehave(t *testing.T) {
	w := start(t, Options{RetryAfter: 2 * time.Second})
	c := client(t, w, "")

	t.Run("encodings", func(t *testing.T) {
		for _, ec := range EncodingCases {
			resp, body := get(t, c, w.URL(HostEncodings, ec.Page))
			if resp.StatusCode != 200 || len(body) < 50 {
				t.Errorf("%s: %s, %d bytes", ec.Page, resp.Status, len(body))
			}
			if bytes.Contains(body, []byte("<a href=\"/")) && strings.Contains(ec.How, "UTF-16") {
				t.Errorf("%s: a UTF-16 page reads as ASCII", ec.Page)
			}
		}
		resp, body := get(t, c, w.URL(HostEncodings, "/sjis.html"))
		if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=Shift_JIS" {
			t.Errorf("sjis Content-Type %q", ct)
		}
		if !bytes.Contains(body, []byte("\x8e\x91\x97\xbf")) {
			t.Errorf("sjis page lacks 資料 in Shift_JIS: %q", body)
		}
	})
	t.Run("robots redirect", func(t *testing.T) {
		resp, _ := get(t, c, w.URL(HostRobotsFrom, "/robots.txt"))
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != w.URL(HostRobotsTo, "/robots.txt") {
			t.Errorf("example robots.txt: %s to %q", resp.Status, resp.Header.Get("Location"))
		}
		_, body := get(t, c, w.URL(HostRobotsTo, "/robots.txt"))
		if !strings.Contains(string(body), "Disallow: /private/") {
			t.Errorf("www robots.txt: %q", body)
		}
	})
	t.Run("busy", func(t *testing.T) {
		resp, _ := get(t, c, w.URL(HostBusy, SlowPath))
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
			t.Errorf("first %s: %s, Retry-After %q", SlowPath, resp.Status, resp.Header.Get("Retry-After"))
		}
		if resp, _ = get(t, c, w.URL(HostBusy, SlowPath)); resp.StatusCode != 200 {
			t.Errorf("second %s: %s", SlowPath, resp.Status)
		}
	})
	t.Run("ipv6", func(t *testing.T) {
		if !strings.Contains(w.Origin(HostIPv6), HostIPv6) {
			t.Fatalf("origin %q", w.Origin(HostIPv6))
		}
		resp, _ := get(t, c, w.URL(HostIPv6, "/"))
		reqs := w.Requests(HostIPv6)
		if resp.StatusCode != 200 || len(reqs) == 0 || !reqs[len(reqs)-1].Remote.Addr().Is6() {
			t.Errorf("v6: %s, log %+v", resp.Status, reqs)
		}
	})
	t.Run("http2 only", func(t *testing.T) {
		resp, _ := get(t, c, w.URL(HostHTTP2, "/"))
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Errorf("h2 over h2: %s %s", resp.Proto, resp.Status)
		}
		h1 := &http.Client{Transport: &http.Transport{
			DialContext:     c.Transport.(*http.Transport).DialContext,
			TLSClientConfig: &tls.Config{RootCAs: w.CAPool(), NextProtos: []string{"http/1.1"}},
		}, Timeout: 10 * time.Second}
		defer h1.CloseIdleConnections()
		if resp, _ = get(t, h1, w.URL(HostHTTP2, "/")); resp.StatusCode != http.StatusHTTPVersionNotSupported {
			t.Errorf("h2 host over HTTP/1.1: %s %s", resp.Proto, resp.Status)
		}
	})
	t.Run("traps", func(t *testing.T) {
		_, body := get(t, c, w.URL(HostTraps, "/trap/a/a/a/a/"))
		if !strings.Contains(string(body), `href="a/"`) {
			t.Errorf("trap page: %q", body)
		}
		_, body = get(t, c, w.URL(HostTraps, "/cal/2026/01/"))
		if !strings.Contains(string(body), "/cal/2025/12/") || !strings.Contains(string(body), "/cal/2026/02/") {
			t.Errorf("calendar page: %q", body)
		}
	})
	t.Run("signals", func(t *testing.T) {
		resp, _ := get(t, c, w.URL(HostSignals, "/xrt-nofollow.html"))
		if resp.Header.Get("X-Robots-Tag") != "nofollow" {
			t.Errorf("X-Robots-Tag %q", resp.Header.Get("X-Robots-Tag"))
		}
		resp, _ = get(t, c, w.URL(HostSignals, CanonicalHeaderPage))
		if !strings.Contains(resp.Header.Get("Link"), `rel="canonical"`) {
			t.Errorf("Link %q", resp.Header.Get("Link"))
		}
		_, body := get(t, c, w.URL(HostSignals, "/sitemap.xml.gz"))
		if len(body) > 1<<20 || len(body) < 100 {
			t.Errorf("gzipped sitemap is %d bytes", len(body))
		}
		_, body = get(t, c, w.URL(HostSignals, FeedAtom))
		if !bytes.Contains(body, []byte("caf\xe9")) {
			t.Errorf("atom feed not in windows-1252: %q", body)
		}
	})
	t.Run("compressed", func(t *testing.T) {
		for _, cc := range CompressedCases {
			resp, _ := get(t, c, w.URL(HostCompressed, cc.Page), "Accept-Encoding", "gzip, br, zstd")
			if resp.Header.Get("Content-Encoding") != cc.Encoding {
				t.Errorf("%s: Content-Encoding %q", cc.Page, resp.Header.Get("Content-Encoding"))
			}
			resp, body := get(t, c, w.URL(HostCompressed, cc.Page), "Accept-Encoding", "identity")
			if resp.Header.Get("Content-Encoding") != "" || !strings.Contains(string(body), cc.Target) {
				t.Errorf("%s without %s: %q", cc.Page, cc.Encoding, body)
			}
		}
	})
	t.Run("secure", func(t *testing.T) {
		resp, _ := get(t, c, w.URL(HostSecure, "/"))
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusMovedPermanently || !strings.HasPrefix(loc, "https://"+HostSecure+":") {
			t.Fatalf("secure: %s to %q", resp.Status, loc)
		}
		if resp, _ = get(t, c, loc); resp.StatusCode != 200 {
			t.Errorf("secure over TLS: %s", resp.Status)
		}
	})
	t.Run("bad certificates", func(t *testing.T) {
		for _, h := range []string{HostSelfSigned, HostExpired} {
			if _, err := c.Get(w.URL(h, "/")); err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Errorf("%s: %v, want a certificate error", h, err)
			}
		}
	})
	t.Run("session", func(t *testing.T) {
		resp, _ := get(t, c, w.URL(HostSession, InsidePage))
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("inside without the cookie: %s", resp.Status)
		}
		jar, _ := cookiejar.New(nil)
		cj := *c
		cj.Jar = jar
		get(t, &cj, w.URL(HostSession, "/"))
		if resp, _ = get(t, &cj, w.URL(HostSession, InsidePage)); resp.StatusCode != 200 {
			t.Errorf("inside with the cookie: %s", resp.Status)
		}
	})
	t.Run("proxy", func(t *testing.T) {
		pc := client(t, w, w.ProxyURL())
		for _, u := range []string{w.URL(HostAgent, "/open.html"), w.URL(HostSecure, "/")} {
			resp, _ := get(t, pc, u)
			if resp.StatusCode >= 400 {
				t.Errorf("%s through the proxy: %s", u, resp.Status)
			}
		}
		tls := w.tlsOrig[HostSecure] + "/secure-page.html"
		if resp, _ := get(t, pc, tls); resp.StatusCode != 200 {
			t.Errorf("%s through the proxy: %s", tls, resp.Status)
		}
		var connects, forwards int
		for _, r := range w.ProxyRequests() {
			switch r.Method {
			case http.MethodConnect:
				connects++
			default:
				forwards++
			}
		}
		if connects != 1 || forwards != 2 {
			t.Errorf("the proxy logged %d CONNECTs and %d forwards, want 1 and 2", connects, forwards)
		}
		via := 0
		for _, r := range append(w.Requests(HostAgent), w.Requests(HostSecure)...) {
			if r.ViaProxy {
				via++
			}
		}
		if via != 3 {
			t.Errorf("%d requests came through the proxy, want 3", via)
		}
	})
}

// TestClose checks that Close stops everything and a second call does
// nothing.
func TestClose(t *testing.T) {
	w, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := w.dir
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(w.Origin(HostAgent), "http://"))
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(w.names[HostAgent][0].String(), port), time.Second); err == nil {
		c.Close()
		t.Error("a host still answers after Close")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("its directory %s is still there: %v", dir, err)
	}
}

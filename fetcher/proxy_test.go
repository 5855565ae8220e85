package fetcher

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
)

// textPage answers every path but robots.txt (404) with a short text.
func textPage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, "page "+r.URL.Path)
}

// TestProxy: with HTTP_PROXY, HTTPS_PROXY and NO_PROXY (ProxyFunc), every
// request to an http and an https origin, robots.txt included, went
// through the test's proxy (absolute form for http, a CONNECT tunnel for
// https), as the origins' own logs show: the peer of each request there is
// a connection the proxy made; the host NO_PROXY lists went direct; each
// host's requests are spaced by the host delay in the origin's log; the
// WARC request records are those of the request to the origin (origin
// form), and a proxied response has no WARC-IP-Address.
func TestProxy(t *testing.T) {
	ca := newTestCA(t)
	cert := ca.leaf(t, []string{"secure.test"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	plain := startOrigin(t, nil, textPage) // plain.test (proxied) and direct.test
	secure := startOrigin(t, &cert, textPage)
	proxy := startProxy(t)
	t.Setenv("REQUEST_METHOD", "")
	t.Setenv("HTTP_PROXY", "http://"+proxy.addr)
	t.Setenv("HTTPS_PROXY", proxy.addr) // no scheme: http://
	t.Setenv("NO_PROXY", "direct.test")
	pf, err := ProxyFunc("", true)
	if err != nil || pf == nil {
		t.Fatalf("ProxyFunc: %v", err)
	}
	dir := t.TempDir()
	wr, err := warcfile.Open(warcfile.Options{Dir: dir, Software: "meridian-test"})
	if err != nil {
		t.Fatal(err)
	}
	const delay = 150 * time.Millisecond
	c := newCollector(1)
	f, err := New(Options{
		Workers: 4, HostDelay: delay, Resolver: testTLDResolver(t), AllowPrivate: true, UserAgent: "meridian-test",
		Proxy: pf, TLSRoots: ca.pool, WARC: wr, OnResult: c.onResult, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	for i := range 3 {
		p := fmt.Sprintf("/p%d", i)
		jobs = append(jobs,
			Job{URL: plain.url("http", "plain.test", p), Host: "plain.test"},
			Job{URL: secure.url("https", "secure.test", p), Host: "secure.test"},
			Job{URL: plain.url("http", "direct.test", p), Host: "direct.test"})
	}
	runCrawl(t, f, c, jobs, 10*time.Millisecond, 20*time.Second)
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if r := c.final[j.URL]; r == nil || r.Status != crawl.StatusFetched || r.HTTPStatus != http.StatusOK {
			t.Errorf("%s: %+v, want fetched", j.URL, r)
		}
	}

	// The origins' logs: who each request came from, and when.
	byHost := map[string][]originReq{}
	for _, r := range append(plain.requests(), secure.requests()...) {
		h, _, _ := net.SplitHostPort(r.host)
		byHost[h] = append(byHost[h], r)
		if via, want := proxy.viaProxy(r.remote), h != "direct.test"; via != want {
			t.Errorf("%s%s from %s: through the proxy %v, want %v", r.host, r.uri, r.remote, via, want)
		}
	}
	for _, h := range []string{"plain.test", "secure.test", "direct.test"} {
		reqs := byHost[h]
		var uris []string
		for _, r := range reqs {
			uris = append(uris, r.uri)
		}
		sort.Strings(uris)
		if want := []string{"/p0", "/p1", "/p2", "/robots.txt"}; !slices.Equal(uris, want) {
			t.Errorf("%s got %q, want %q", h, uris, want)
		}
		sort.Slice(reqs, func(a, b int) bool { return reqs[a].at.Before(reqs[b].at) })
		for i := 1; i < len(reqs); i++ {
			if gap := reqs[i].at.Sub(reqs[i-1].at); gap < delay {
				t.Errorf("%s: %s came %v after %s, under the host delay %v", h, reqs[i].uri, gap, reqs[i-1].uri, delay)
			}
		}
	}

	// The proxy's log: plain.test in absolute form, secure.test tunnelled,
	// nothing of direct.test.
	var gets []string
	connects := 0
	for _, pr := range proxy.requests() {
		switch {
		case pr.method == http.MethodConnect && pr.target == "secure.test:"+secure.port:
			connects++
		case pr.method == http.MethodGet && strings.HasPrefix(pr.target, "http://plain.test:"+plain.port+"/"):
			gets = append(gets, strings.TrimPrefix(pr.target, "http://plain.test:"+plain.port))
		default:
			t.Errorf("the proxy got %s %s", pr.method, pr.target)
		}
	}
	sort.Strings(gets)
	if want := []string{"/p0", "/p1", "/p2", "/robots.txt"}; !slices.Equal(gets, want) {
		t.Errorf("the proxy forwarded %q for plain.test, want %q", gets, want)
	}
	if connects < 1 || connects > 4 {
		t.Errorf("%d CONNECTs to secure.test for 4 requests", connects)
	}

	// The WARC records.
	recs := warcByURI(readWARCs(t, dir))
	for _, j := range jobs {
		req := recordOf(t, recs, j.URL, gowarc.Request)
		resp := recordOf(t, recs, j.URL, gowarc.Response)
		if want := "GET " + urlnorm.PathQuery(j.URL) + " HTTP/1.1\r\n"; !strings.HasPrefix(req.reqHead, want) {
			t.Errorf("%s: request record %q, want it to start %q", j.URL, req.reqHead, want)
		}
		ip, has := resp.warc.Get(gowarc.WarcIPAddress), resp.warc.Has(gowarc.WarcIPAddress)
		switch direct := j.Host == "direct.test"; {
		case direct && ip != "127.0.0.1":
			t.Errorf("%s (direct): WARC-IP-Address %q, want 127.0.0.1", j.URL, ip)
		case !direct && has:
			t.Errorf("%s (proxied): WARC-IP-Address %q, want none", j.URL, ip)
		}
	}
}

// TestProxyUnusable: a request whose proxy the fetcher cannot use (not
// http://) or whose Proxy function fails is not sent: StatusError, not a
// Retry, an Err that says why, and nothing reaches the origin.
func TestProxyUnusable(t *testing.T) {
	o := startOrigin(t, nil, textPage)
	for _, c := range []struct {
		name  string
		proxy func(*url.URL) (*url.URL, error)
		why   string
	}{
		{"socks5", func(*url.URL) (*url.URL, error) { return url.Parse("socks5://127.0.0.1:1080") }, "only http:// proxies are supported"},
		{"https", func(*url.URL) (*url.URL, error) { return url.Parse("https://127.0.0.1:3128") }, "only http:// proxies are supported"},
		{"error", func(*url.URL) (*url.URL, error) { return nil, errors.New("no proxy today") }, "no proxy today"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hosts := newMemHosts()
			hosts.SaveHost("unusable.test", crawl.HostRecord{RobotsStatus: 404, RobotsExpiry: time.Now().Add(time.Hour)})
			col := newCollector(1)
			f, err := New(Options{Workers: 2, HostDelay: time.Millisecond, Resolver: testTLDResolver(t), AllowPrivate: true,
				Hosts: hosts, Proxy: c.proxy, OnResult: col.onResult, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			u := o.url("http", "unusable.test", "/"+c.name)
			runCrawl(t, f, col, []Job{{URL: u, Host: "unusable.test"}}, 10*time.Millisecond, 10*time.Second)
			r := col.final[u]
			if r == nil || r.Status != crawl.StatusError || r.Retry || r.HTTPStatus != 0 || !strings.Contains(r.Err, c.why) {
				t.Errorf("%+v, want a StatusError saying %q", r, c.why)
			}
		})
	}
	if reqs := o.requests(); len(reqs) != 0 {
		t.Errorf("the origin got %d requests: %+v", len(reqs), reqs)
	}
}

// TestProxyFunc: the proxies ProxyFunc builds from a URL and the
// environment, and its errors.
func TestProxyFunc(t *testing.T) {
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
		t.Setenv(k, "")
	}
	type want struct {
		url   string
		proxy string // "" direct
	}
	for _, c := range []struct {
		name     string
		env      map[string]string
		proxyURL string
		useEnv   bool
		err      string // in the error; "" no error
		nilFunc  bool
		wants    []want
	}{
		{name: "none", nilFunc: true},
		{name: "environment unset", useEnv: true, nilFunc: true},
		{name: "proxy URL", proxyURL: "http://proxy.example:3128", wants: []want{
			{"http://a.example/x", "http://proxy.example:3128"}, {"https://a.example/x", "http://proxy.example:3128"},
			{"http://127.0.0.1/", ""}, {"http://localhost:8080/", ""},
		}},
		{name: "no scheme is http", proxyURL: "proxy.example:3128", wants: []want{{"https://a.example/", "http://proxy.example:3128"}}},
		{name: "environment", useEnv: true, env: map[string]string{"HTTP_PROXY": "http://p1.example:1", "HTTPS_PROXY": "http://p2.example:2", "NO_PROXY": "skip.example,10.0.0.0/8"},
			wants: []want{
				{"http://a.example/", "http://p1.example:1"}, {"https://a.example/", "http://p2.example:2"},
				{"https://skip.example/", ""}, {"https://www.skip.example/", ""}, {"http://10.1.2.3/", ""}, {"http://11.1.2.3/", "http://p1.example:1"},
			}},
		{name: "proxy URL over the environment, NO_PROXY kept", useEnv: true, proxyURL: "http://mine.example:8",
			env:   map[string]string{"HTTP_PROXY": "socks5://bad.example:1", "NO_PROXY": "skip.example"},
			wants: []want{{"http://a.example/", "http://mine.example:8"}, {"https://skip.example/", ""}}},
		{name: "socks5", proxyURL: "socks5://proxy.example:1080", err: `scheme "socks5": only http:// proxies are supported`},
		{name: "https proxy", proxyURL: "https://proxy.example:3128", err: "only http:// proxies are supported"},
		{name: "bad port", proxyURL: "http://proxy.example:99999", err: `port "99999"`},
		{name: "no host", proxyURL: "http://:3128", err: "no host"},
		{name: "environment socks5", useEnv: true, env: map[string]string{"HTTP_PROXY": "http://ok.example:1", "HTTPS_PROXY": "socks5://x.example:1"}, err: "HTTPS_PROXY socks5://x.example:1"},
		{name: "password not shown", proxyURL: "ftp://user:secret@proxy.example:21", err: "user:xxxxx@proxy.example"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			pf, err := ProxyFunc(c.proxyURL, c.useEnv)
			switch {
			case c.err != "":
				if !errors.Is(err, ErrBadProxy) || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "secret") {
					t.Fatalf("err %v, want ErrBadProxy saying %q (and no password)", err, c.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			case c.nilFunc != (pf == nil):
				t.Fatalf("func nil %v, want %v", pf == nil, c.nilFunc)
			}
			for _, w := range c.wants {
				u, _ := url.Parse(w.url)
				p, err := pf(u)
				got := ""
				if p != nil {
					got = p.String()
				}
				if err != nil || got != w.proxy {
					t.Errorf("%s: proxy %q, %v; want %q", w.url, got, err, w.proxy)
				}
			}
		})
	}
}

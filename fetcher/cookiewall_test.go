package fetcher

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
)

// consentWall is a site behind a consent wall: /wall answers 302 to /page
// with Set-Cookie consent=yes (and two cookies that must not come back to
// /page: one for another path, one Secure over http); /page answers 200
// only with the consent cookie, 403 without.
func consentWall(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/wall":
		w.Header().Add("Set-Cookie", "consent=yes; Path=/; Max-Age=3600")
		w.Header().Add("Set-Cookie", "elsewhere=1; Path=/other")
		w.Header().Add("Set-Cookie", "secret=1; Path=/; Secure")
		w.Header().Set("Location", "/page")
		w.WriteHeader(http.StatusFound)
	case "/page":
		if c, err := r.Cookie("consent"); err != nil || c.Value != "yes" {
			http.Error(w, "consent first", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "welcome")
	default:
		http.NotFound(w, r)
	}
}

// TestCookiesConsentWall: the consent wall's redirect target is fetched
// later, as the frontier would hand it back. With Options.Cookies, the
// request for it carries the cookie the redirect set, and only that one
// (the origin's log), the page is fetched, and the WARC request record
// shows the Cookie header as sent; without, no request carries a cookie
// and the page is refused.
func TestCookiesConsentWall(t *testing.T) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		t.Run(name, func(t *testing.T) {
			o := startOrigin(t, nil, consentWall)
			dir := t.TempDir()
			wr, err := warcfile.Open(warcfile.Options{Dir: dir, Software: "meridian-test"})
			if err != nil {
				t.Fatal(err)
			}
			c := newCollector(1)
			// The frontier: a redirect's target comes back as a job.
			onResult := func(r *Result) {
				c.onResult(r)
				if r.Kind == KindPage && r.RedirectTo != "" {
					c.mu.Lock()
					c.due = append(c.due, Job{URL: r.RedirectTo, Host: r.Host})
					c.mu.Unlock()
				}
			}
			f, err := New(Options{Workers: 2, HostDelay: 10 * time.Millisecond, Resolver: testTLDResolver(t), AllowPrivate: true,
				Cookies: on, WARC: wr, OnResult: onResult, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			wall, page := o.url("http", "wall.test", "/wall"), o.url("http", "wall.test", "/page")
			runCrawl(t, f, c, []Job{{URL: wall, Host: "wall.test"}}, 10*time.Millisecond, 10*time.Second)
			if err := wr.Close(); err != nil {
				t.Fatal(err)
			}
			if r := c.final[wall]; r == nil || r.Status != crawl.StatusRedirect || r.RedirectTo != page {
				t.Fatalf("%s: %+v, want a redirect to %s", wall, r, page)
			}
			wantStatus, wantCookie := http.StatusForbidden, ""
			if on {
				wantStatus, wantCookie = http.StatusOK, "consent=yes"
			}
			if r := c.final[page]; r == nil || r.HTTPStatus != wantStatus {
				t.Errorf("%s: %+v, want HTTP %d", page, r, wantStatus)
			}
			reqs := o.requests()
			var uris []string
			for _, r := range reqs {
				uris = append(uris, r.uri)
				want := ""
				if r.uri == "/page" {
					want = wantCookie
				}
				if r.cookie != want {
					t.Errorf("%s came with Cookie %q, want %q", r.uri, r.cookie, want)
				}
			}
			if len(uris) != 3 || uris[0] != "/robots.txt" || uris[1] != "/wall" || uris[2] != "/page" {
				t.Errorf("the origin got %q, want robots.txt, /wall, /page", uris)
			}
			recs := warcByURI(readWARCs(t, dir))
			for _, u := range []string{wall, page} {
				want := ""
				if u == page {
					want = wantCookie
				}
				req := recordOf(t, recs, u, gowarc.Request)
				if got := req.reqHdr.Get("Cookie"); got != want || len(req.reqHdr["Cookie"]) > 1 {
					t.Errorf("%s: the WARC request record has Cookie %q, want %q", u, req.reqHdr["Cookie"], want)
				}
			}
		})
	}
}

// TestRequestHeadCookie checks the reconstructed head of a request with a
// Cookie (and the validators around it) against the bytes an
// http.Transport writes for the same request, read off the wire.
func TestRequestHeadCookie(t *testing.T) {
	ex := &exchange{host: "h1.cc.test", requestURI: "/a", cookie: "consent=yes; b=2", ifNoneMatch: `"v1"`, ifModSince: "Wed, 06 May 2026 07:08:09 GMT"}
	ua := DefaultUserAgent("https://ops.example/")
	want := appendRequestHead(nil, ex, ua)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	head := make(chan []byte, 1)
	go func() { // owner: the test; ends after one connection
		c, err := ln.Accept()
		if err != nil {
			head <- nil
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		var b []byte
		buf := make([]byte, 4096)
		for !bytes.Contains(b, []byte("\r\n\r\n")) {
			n, err := c.Read(buf)
			b = append(b, buf[:n]...)
			if err != nil {
				break
			}
		}
		head <- b
		io.WriteString(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
	}()
	tr := &http.Transport{DisableCompression: true} // as the fetcher's: it asks for its codings itself
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/a", nil)
	req.Host = ex.host
	req.Header = http.Header{"User-Agent": {ua}, "Accept": {"*/*"}, "Accept-Encoding": {acceptEncoding}, "Cookie": {ex.cookie}, "If-None-Match": {ex.ifNoneMatch}, "If-Modified-Since": {ex.ifModSince}}
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := <-head; !bytes.Equal(got, want) {
		t.Errorf("reconstructed head\n%q\nthe transport wrote\n%q", want, got)
	}
}

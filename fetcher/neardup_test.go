package fetcher

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/simhash"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
)

// TestNearDup fetches an article, its printer-friendly copy (the same
// text, other navigation, a date and a session id) and another article:
// the copy is found a near-duplicate of the article, keeps its status and
// its links, and has a WARC metadata record; the other article is not one.
func TestNearDup(t *testing.T) {
	var text strings.Builder
	for i := range 300 {
		fmt.Fprintf(&text, "the %s of word %c sentence number which goes on ", []string{"story", "tale", "account"}[i%3], 'a'+i%26)
		if i%20 == 19 {
			text.WriteString("</p><p>")
		}
	}
	other := strings.ReplaceAll(text.String(), "word", "field")
	other = strings.ReplaceAll(other, "the", "a")
	pages := map[string]string{
		"/article":    `<html><body><nav><a href="/a">A</a> <a href="/b">B</a></nav><p>` + text.String() + `</p></body></html>`,
		"/print":      `<html><body><p>Printed 2026-11-28, session 8f3a9c</p><p>` + text.String() + `</p><a href="/article?s=8f3a9c">back</a></body></html>`,
		"/other":      `<html><body><nav><a href="/a">A</a></nav><p>` + other + `</p></body></html>`,
		"/robots.txt": "User-agent: *\nAllow: /\n",
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.URL.Path != "/robots.txt" {
			w.Header().Set("Content-Type", "text/html")
		}
		fmt.Fprint(w, body)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	x, err := simhash.NewIndex[string](simhash.IndexOptions{Capacity: 100})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	wr, err := warcfile.Open(warcfile.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Close()
	c := newCollector(1)
	f, err := New(Options{
		Workers: 2, HostDelay: 10 * time.Millisecond, ConnectTimeout: 2 * time.Second, HeaderTimeout: 2 * time.Second, TotalTimeout: 5 * time.Second,
		AllowPrivate: true, Resolver: testTLDResolver(t), Hosts: newMemHosts(), Normalizer: urlnorm.New(urlnorm.Options{}), Scope: &urlnorm.Scope{},
		OnResult: c.onResult, Logger: testLogger(t), WARC: wr,
		NearDup: func(host, url string, fp uint64) string {
			mu.Lock()
			defer mu.Unlock()
			orig, _, _, found := x.LookupOrAdd(fp, url, host)
			if !found {
				return ""
			}
			return orig
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	u := func(p string) string { return fmt.Sprintf("http://nd.test:%d%s", port, p) }
	// One host: its jobs are fetched one at a time, in order.
	runCrawl(t, f, c, []Job{{URL: u("/article"), Host: "nd.test"}, {URL: u("/print"), Host: "nd.test"}, {URL: u("/other"), Host: "nd.test"}},
		20*time.Millisecond, 20*time.Second)
	got := map[string]*Result{}
	for _, r := range c.results() {
		if r.Kind == KindPage {
			got[r.URL] = r
		}
	}
	if r := got[u("/print")]; r == nil || r.NearDupOf != u("/article") || r.Status != crawl.StatusFetched || len(r.Links) != 1 {
		t.Fatalf("the printer-friendly copy: %+v", r)
	}
	for _, p := range []string{"/article", "/other"} {
		if r := got[u(p)]; r == nil || r.NearDupOf != "" || r.Status != crawl.StatusFetched {
			t.Errorf("%s: %+v", p, r)
		}
	}
	if n := wr.Stats().Metadata; n != 1 {
		t.Errorf("%d WARC metadata records, want 1", n)
	}
}

package fetcher

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// utf16Body returns s in UTF-16 (big-endian if be), with a BOM if bom.
func utf16Body(s string, be, bom bool) string {
	units := utf16.Encode([]rune(s))
	if bom {
		units = append([]uint16{0xfeff}, units...)
	}
	var b []byte
	for _, u := range units {
		if be {
			b = append(b, byte(u>>8), byte(u))
		} else {
			b = append(b, byte(u), byte(u>>8))
		}
	}
	return string(b)
}

// TestEncodingsRequested serves pages in several encodings (the charset
// in the Content-Type, in a <meta>, in an http-equiv, by BOM alone against
// a meta, UTF-16 with and without a BOM, none at all), each linking to a
// non-ASCII path and query, fetches them, then the links they yield, and
// checks from the server's own log that each link was requested with
// exactly the bytes a browser sends: the path percent-encoded from UTF-8,
// the query in the page's encoding. The pages' bytes and the requests are
// written out by hand from the Encoding Standard's indexes.
func TestEncodingsRequested(t *testing.T) {
	type page struct {
		contentType, body string
		want              []string // the RequestURIs its links must be fetched with
	}
	const (
		shiryo  = "%E8%B3%87%E6%96%99"                         // 資料 in UTF-8
		novosti = "%D0%BD%D0%BE%D0%B2%D0%BE%D1%81%D1%82%D0%B8" // новости
		ru1251  = "\xed\xee\xe2\xee\xf1\xf2\xe8"               // новости in windows-1251
		ruKOI8  = "\xce\xcf\xd7\xcf\xd3\xd4\xc9"               // новости in KOI8-R
	)
	pages := map[string]page{
		"/sjis-header": {"text/html; charset=Shift_JIS", "<a href=\"/\x8e\x91\x97\xbf/?q=\x8e\x91\x97\xbf\">x</a>",
			[]string{"/" + shiryo + "/?q=%8E%91%97%BF"}},
		"/cp1251-meta": {"text/html", `<meta charset="windows-1251"><a href="/` + ru1251 + `/?q=` + ru1251 + `">x</a><a href="/ru?q=&#26085;">`,
			[]string{"/" + novosti + "/?q=%ED%EE%E2%EE%F1%F2%E8", "/ru?q=%26%2326085%3B"}},
		"/koi8r-equiv": {"text/html", `<meta http-equiv="Content-Type" content="text/html; charset=KOI8-R"><a href="/koi/` + ruKOI8 + `?q=` + ruKOI8 + `">`,
			[]string{"/koi/" + novosti + "?q=%CE%CF%D7%CF%D3%D4%C9"}},
		"/bom-utf8": {"text/html", "\xef\xbb\xbf<meta charset=\"windows-1251\"><a href=\"/bom/\xd1\x91?q=\xd1\x91\">",
			[]string{"/bom/%D1%91?q=%D1%91"}},
		"/utf16le-bom": {"text/html", utf16Body(`<a href="/u16le/χ?q=χ">`, false, true),
			[]string{"/u16le/%CF%87?q=%CF%87"}},
		"/utf16be-header": {"text/html; charset=utf-16be", utf16Body(`<a href="/u16be/χ?q=χ">`, true, false),
			[]string{"/u16be/%CF%87?q=%CF%87"}},
		"/gbk-header": {"text/html; charset=gb2312", "<a href=\"/zh/\xd6\xd0\xce\xc4?q=\xd6\xd0\xce\xc4\">",
			[]string{"/zh/%E4%B8%AD%E6%96%87?q=%D6%D0%CE%C4"}},
		"/euckr-equiv": {"text/html", "<meta http-equiv=content-type content='text/html; charset=euc-kr'><a href=\"/ko/\xc7\xd1\xb1\xb9?q=\xc7\xd1\xb1\xb9\">",
			[]string{"/ko/%ED%95%9C%EA%B5%AD?q=%C7%D1%B1%B9"}},
		"/no-charset": {"text/html", "<a href=\"/caf\xe9?q=caf\xe9\">",
			[]string{"/caf%C3%A9?q=caf%E9"}},
		"/utf8-header": {"text/html; charset=utf-8", `<a href="/utf8/資料?q=資料">`,
			[]string{"/utf8/" + shiryo + "?q=" + shiryo}},
	}
	var mu sync.Mutex
	var log []string // r.RequestURI of every request, as received
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		log = append(log, r.RequestURI)
		mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if p, ok := pages[r.RequestURI]; ok {
			w.Header().Set("Content-Type", p.contentType)
			fmt.Fprint(w, p.body)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "ok")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	origin := fmt.Sprintf("http://enc.test:%d", ln.Addr().(*net.TCPAddr).Port)

	c := newCollector(1)
	var jobs []Job
	for p := range pages {
		jobs = append(jobs, Job{URL: origin + p, Host: "enc.test"})
	}
	f, err := New(Options{
		Workers: 2, HostDelay: 5 * time.Millisecond, ConnectTimeout: 2 * time.Second, HeaderTimeout: 2 * time.Second, TotalTimeout: 5 * time.Second,
		AllowPrivate: true, Resolver: testTLDResolver(t), Hosts: newMemHosts(), Normalizer: urlnorm.New(urlnorm.Options{}), Scope: &urlnorm.Scope{},
		Logger: testLogger(t),
		OnResult: func(r *Result) {
			c.onResult(r)
			if r.Kind != KindPage || !strings.HasPrefix(r.URL, origin) {
				return
			}
			if _, ok := pages[strings.TrimPrefix(r.URL, origin)]; !ok {
				return
			}
			// Fetch the links found, as the next round would.
			c.mu.Lock()
			for _, l := range r.Links {
				c.due = append(c.due, Job{URL: l, Host: "enc.test"})
			}
			c.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCrawl(t, f, c, jobs, 20*time.Millisecond, 30*time.Second)

	var want []string
	for p, pg := range pages {
		want = append(want, p)
		want = append(want, pg.want...)
	}
	mu.Lock()
	got := slices.Clone(log)
	mu.Unlock()
	got = slices.DeleteFunc(got, func(u string) bool { return u == "/robots.txt" })
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		for _, u := range want {
			if !slices.Contains(got, u) {
				t.Errorf("not requested: %s", u)
			}
		}
		for _, u := range got {
			if !slices.Contains(want, u) {
				t.Errorf("requested, and no browser would: %s", u)
			}
		}
		t.Fatalf("requests\n %q\nwant\n %q", got, want)
	}
}

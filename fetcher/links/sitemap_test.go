package links

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/websim/synth"
)

func TestSitemap(t *testing.T) {
	for _, c := range []struct {
		name  string
		body  string
		limit int
		locs  []string
		index bool
	}{
		{"urlset", `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>http://h/a</loc><lastmod>2024-01-01</lastmod></url>
  <url><loc>
     http://h/b?x=1&amp;y=2
  </loc></url>
  <url><priority>0.5</priority></url>
  <url><loc></loc></url>
</urlset>`, 0, []string{"http://h/a", "http://h/b?x=1&y=2"}, false},
		{"sitemapindex", `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>http://h/s1.xml</loc></sitemap><sitemap><loc>http://h/s2.xml.gz</loc></sitemap>
</sitemapindex>`, 0, []string{"http://h/s1.xml", "http://h/s2.xml.gz"}, true},
		{"limit", `<urlset><url><loc>1</loc></url><url><loc>2</loc></url><url><loc>3</loc></url></urlset>`, 2, []string{"1", "2"}, false},
		{"only url/loc counts", `<urlset><loc>top</loc><url><image:image xmlns:image="x"><image:loc>img</image:loc></image:image><loc>page</loc></url><sitemap><loc>no</loc></sitemap></urlset>`,
			0, []string{"page"}, false},
		{"index takes sitemap/loc only", `<sitemapindex><url><loc>no</loc></url><sitemap><loc>yes</loc></sitemap></sitemapindex>`, 0, []string{"yes"}, true},
		{"cdata and prefix", `<s:urlset xmlns:s="http://www.sitemaps.org/schemas/sitemap/0.9"><s:url><s:loc><![CDATA[http://h/c?a&b]]></s:loc></s:url></s:urlset>`,
			0, []string{"http://h/c?a&b"}, false},
		{"latin-1", "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><urlset><url><loc>http://h/caf\xe9</loc></url></urlset>", 0, []string{"http://h/café"}, false},
		{"empty urlset", `<urlset></urlset>`, 0, nil, false},
		{"html entity", `<urlset><url><loc>http://h/a&nbsp;b</loc></url></urlset>`, 0, []string{"http://h/a\u00a0b"}, false},
		{"overlong loc skipped", `<urlset><url><loc>http://h/` + strings.Repeat("x", maxLocLen) + `</loc></url><url><loc>ok</loc></url></urlset>`, 0, []string{"ok"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			locs, index, err := Sitemap([]byte(c.body), c.limit)
			if err != nil || index != c.index || !slices.Equal(locs, c.locs) {
				t.Fatalf("got %q, index %v, %v; want %q, index %v", locs, index, err, c.locs, c.index)
			}
		})
	}
}

func TestSitemapErrors(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       string // in the error text
		notSitemap bool
		partial    []string
	}{
		{"empty", "", "no root element", true, nil},
		{"html", "<!DOCTYPE html><html><body>hi</body></html>", "root element <html>", true, nil},
		{"rss", `<?xml version="1.0"?><rss><channel/></rss>`, "root element <rss>", true, nil},
		{"mismatched tag", "<urlset>\n<url><loc>a</loc></url>\n<url><loc>b</url>\n</urlset>", "line 3", false, []string{"a"}},
		{"truncated", "<urlset>\n<url><loc>a</loc></url>\n<url><loc>b", "unexpected EOF", false, []string{"a"}},
		{"bad entity", "<urlset><url><loc>a&bogus;</loc></url></urlset>", "offset", false, nil},
		{"binary", "\x00\x01\x02", "line 1", false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			locs, _, err := Sitemap([]byte(c.body), 0)
			if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrNotSitemap) != c.notSitemap {
				t.Fatalf("err %v; want one containing %q (not-a-sitemap %v)", err, c.want, c.notSitemap)
			}
			if !c.notSitemap && !strings.Contains(err.Error(), "line ") {
				t.Fatalf("err %v does not say where", err)
			}
			if !slices.Equal(locs, c.partial) {
				t.Fatalf("locs %q before the error, want %q", locs, c.partial)
			}
		})
	}
}

func TestSitemapGzip(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(`<urlset><url><loc>http://h/z</loc></url></urlset>`))
	_ = zw.Close()
	locs, _, err := Sitemap(b.Bytes(), 0)
	if err != nil || !slices.Equal(locs, []string{"http://h/z"}) {
		t.Fatalf("gzip: %q, %v", locs, err)
	}
	// A bomb: more than the inflated-size bound of one open element.
	const bound = 1 << 20
	b.Reset()
	zw = gzip.NewWriter(&b)
	_, _ = zw.Write([]byte("<urlset><url><loc>"))
	_, _ = zw.Write(bytes.Repeat([]byte{'x'}, 2*bound))
	_ = zw.Close()
	if b.Len() > bound/100 {
		t.Fatalf("bomb of %d bytes does not compress", b.Len())
	}
	if locs, _, err := sitemap(b.Bytes(), 0, bound); !errors.Is(err, ErrSitemapTooLarge) || len(locs) != 0 {
		t.Fatalf("gzip bomb: %q, %v; want ErrSitemapTooLarge at the bound", locs, err)
	}
	if _, _, err := Sitemap([]byte{0x1f, 0x8b, 0, 0}, 0); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Fatalf("bad gzip: %v", err)
	}
}

// TestSitemapWebsim reads every sitemap of a realistic web and compares it
// with the truth.
func TestSitemapWebsim(t *testing.T) {
	w, err := synth.New(synth.Options{Hosts: 50, Pages: 20, Seed: 7, Profile: synth.Realistic, Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = w.Truth(func(r *synth.Record) error {
		if r.Kind != "sitemap" || r.Status != 200 {
			return nil
		}
		u, _ := url.Parse(r.URL)
		h, _ := w.Lookup(u.Hostname())
		resp := w.Respond(nil, nil, h, u.Path, u.RawQuery)
		locs, index, err := Sitemap(resp.Body, 0)
		if err != nil || index || !slices.Equal(locs, r.Outlinks) {
			t.Fatalf("%s: %q, index %v, %v; truth %q", r.URL, locs, index, err, r.Outlinks)
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no sitemap in the web")
	}
}

func FuzzSitemap(f *testing.F) {
	f.Add([]byte(`<urlset><url><loc>a</loc></url></urlset>`), 3)
	f.Add([]byte(`<sitemapindex><sitemap><loc>a</loc></sitemap>`), 1)
	f.Add([]byte("<?xml version=\"1.0\" encoding=\"shift_jis\"?><urlset/>"), 0)
	f.Add([]byte("http://h/a\r\nhttps://h/b\n\nnot a url\n"), 0)
	f.Fuzz(func(t *testing.T, body []byte, limit int) {
		limit %= 100
		locs, _, err := Sitemap(body, limit)
		if limit > 0 && len(locs) > limit {
			t.Fatalf("%d locs over limit %d", len(locs), limit)
		}
		for _, l := range locs {
			if l == "" || strings.TrimSpace(l) != l || len(l) > maxLocLen {
				t.Fatalf("bad loc %q (err %v)", l, err)
			}
		}
	})
}

// TestSitemapLastMod: each <loc> comes with its <lastmod> in any W3C
// Datetime form the protocol allows; one that is not is left zero and its
// <loc> kept.
func TestSitemapLastMod(t *testing.T) {
	body := []byte(`<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc>http://a.test/1</loc><lastmod>2026-11-28T07:30:00+01:00</lastmod><changefreq>daily</changefreq></url>
<url><lastmod>2026-11-27</lastmod><loc> http://a.test/2 </loc></url>
<url><loc>http://a.test/3</loc><lastmod>2026-11-28T06:30:15.5Z</lastmod></url>
<url><loc>http://a.test/4</loc><lastmod>2026-11-28T06:30Z</lastmod></url>
<url><loc>http://a.test/5</loc><lastmod>2026-11</lastmod></url>
<url><loc>http://a.test/6</loc><lastmod>yesterday</lastmod></url>
<url><loc>http://a.test/7</loc></url>
</urlset>`)
	es, index, err := SitemapEntries(body, 0)
	if err != nil || index {
		t.Fatalf("entries %v, index %v, err %v", es, index, err)
	}
	want := []SitemapEntry{
		{"http://a.test/1", time.Date(2026, 11, 28, 6, 30, 0, 0, time.UTC)},
		{"http://a.test/2", time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)},
		{"http://a.test/3", time.Date(2026, 11, 28, 6, 30, 15, 5e8, time.UTC)},
		{"http://a.test/4", time.Date(2026, 11, 28, 6, 30, 0, 0, time.UTC)},
		{"http://a.test/5", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{"http://a.test/6", time.Time{}},
		{"http://a.test/7", time.Time{}},
	}
	if len(es) != len(want) {
		t.Fatalf("%d entries, want %d: %v", len(es), len(want), es)
	}
	for i := range want {
		if es[i].Loc != want[i].Loc || !es[i].LastMod.Equal(want[i].LastMod) {
			t.Errorf("entry %d: %+v, want %+v", i, es[i], want[i])
		}
	}
	// A document cut inside a <url> keeps the <loc> read before the error.
	cut := bytes.Index(body, []byte("<lastmod>2026-11-28T06:30Z"))
	es, _, err = SitemapEntries(body[:cut], 0)
	if err == nil || len(es) != 4 || es[3].Loc != "http://a.test/4" {
		t.Errorf("cut document: %v entries %v, want 4 and an error", err, es)
	}
}

func TestTextSitemap(t *testing.T) {
	for _, c := range []struct {
		name  string
		body  string
		limit int
		locs  []string
	}{
		{"lines", "http://h/a\nhttps://h/b?x=1&y=2\n", 0, []string{"http://h/a", "https://h/b?x=1&y=2"}},
		{"crlf, spaces, blank lines, no final newline", "  http://h/a  \r\n\r\n\t\nHTTP://H/B", 0, []string{"http://h/a", "HTTP://H/B"}},
		{"byte order mark", "\xef\xbb\xbfhttp://h/a\nhttp://h/b", 0, []string{"http://h/a", "http://h/b"}},
		{"leading white space", "\n\n   http://h/a", 0, []string{"http://h/a"}},
		{"lines that are not URLs skipped", "http://h/a\n# comment\n/relative\nftp://h/x\n<url>\nhttps://h/b", 0, []string{"http://h/a", "https://h/b"}},
		{"overlong line skipped", "http://h/a\nhttp://h/" + strings.Repeat("x", 3*maxLocLen) + "\nhttp://h/b", 0, []string{"http://h/a", "http://h/b"}},
		{"limit", "http://h/1\nhttp://h/2\nhttp://h/3\n", 2, []string{"http://h/1", "http://h/2"}},
		{"utf-8 kept as is", "http://h/caf\u00e9\n", 0, []string{"http://h/caf\u00e9"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			locs, index, err := Sitemap([]byte(c.body), c.limit)
			if err != nil || index || !slices.Equal(locs, c.locs) {
				t.Fatalf("got %q, index %v, %v; want %q", locs, index, err, c.locs)
			}
			// Gzipped, the same.
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			_, _ = zw.Write([]byte(c.body))
			_ = zw.Close()
			locs, _, err = Sitemap(b.Bytes(), c.limit)
			if err != nil || !slices.Equal(locs, c.locs) {
				t.Fatalf("gzipped: got %q, %v; want %q", locs, err, c.locs)
			}
		})
	}
	// What is not a text sitemap is read as XML, and fails as such.
	for _, body := range []string{"not a sitemap\nhttp://h/a", "/relative\n", "\x00http://h/a"} {
		if locs, _, err := Sitemap([]byte(body), 0); err == nil || len(locs) != 0 || !strings.Contains(err.Error(), "root element") && !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: %q, %v; want an XML error", body, locs, err)
		}
	}
}

// TestReadSitemapBound: the bound on a sitemap's size applies to its
// inflated bytes and to plain bytes alike, an XML or a text one; at the
// bound exactly, nothing is lost.
func TestReadSitemapBound(t *testing.T) {
	xml := []byte(`<urlset><url><loc>http://h/a</loc></url><url><loc>http://h/b</loc></url></urlset>`)
	text := []byte("http://h/a\nhttp://h/b\n")
	for _, c := range []struct {
		name string
		body []byte
	}{{"xml", xml}, {"text", text}} {
		for _, zipped := range []bool{false, true} {
			body := c.body
			if zipped {
				var b bytes.Buffer
				zw := gzip.NewWriter(&b)
				_, _ = zw.Write(body)
				_ = zw.Close()
				body = b.Bytes()
			}
			n := int64(len(c.body))
			es, _, err := ReadSitemap(body, 0, n)
			if err != nil || len(es) != 2 {
				t.Errorf("%s, gzip %v, bound %d: %v, %v", c.name, zipped, n, es, err)
			}
			cut := int64(bytes.Index(c.body, []byte("http://h/b")) + 8) // in the second URL
			es, _, err = ReadSitemap(body, 0, cut)
			if !errors.Is(err, ErrSitemapTooLarge) || len(es) != 1 || es[0].Loc != "http://h/a" {
				t.Errorf("%s, gzip %v, bound %d: %v, %v; want the first URL and ErrSitemapTooLarge", c.name, zipped, cut, es, err)
			}
		}
	}
}

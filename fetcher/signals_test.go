package fetcher

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
)

// signalPage is a page a signals site serves: its Content-Type, extra
// headers and body.
type signalPage struct {
	ct   string
	hdr  [][2]string
	body string
}

// startSignalSite starts a site on 127.0.0.1 that serves pages (by path;
// robots.txt allows all unless pages has one; ORIGIN in a header or body
// is the site's origin) and 404 for anything else, and logs every request
// it gets.
func startSignalSite(t *testing.T, pages map[string]signalPage) *site {
	return startSite(t, "127.0.0.1", func(s *site, w http.ResponseWriter, r *http.Request) {
		p, ok := pages[r.URL.Path]
		switch {
		case !ok && r.URL.Path == "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
			return
		case !ok:
			http.NotFound(w, r)
			return
		}
		if p.ct != "" {
			w.Header().Set("Content-Type", p.ct)
		}
		for _, h := range p.hdr {
			w.Header().Add(h[0], strings.ReplaceAll(h[1], "ORIGIN", s.origin))
		}
		io.WriteString(w, strings.ReplaceAll(p.body, "ORIGIN", s.origin))
	})
}

// signalOptions are the options of a fetcher for a signals site.
func signalOptions(t *testing.T, c *collector) Options {
	return Options{
		Workers: 4, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: literalResolver(t),
		ConnectTimeout: 2 * time.Second, HeaderTimeout: 5 * time.Second, TotalTimeout: 20 * time.Second,
		OnResult: c.onResult, Logger: testLogger(t),
	}
}

// crawlPaths fetches the pages at paths of s with a new fetcher of o and
// returns the page Results by path.
func crawlPaths(t *testing.T, s *site, o Options, c *collector, paths ...string) map[string]*Result {
	t.Helper()
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	for _, p := range paths {
		jobs = append(jobs, Job{URL: s.origin + p})
	}
	runCrawl(t, f, c, jobs, 10*time.Millisecond, 60*time.Second)
	got := map[string]*Result{}
	for _, r := range c.results() {
		if r.Kind == KindPage {
			got[strings.TrimPrefix(r.URL, s.origin)] = r
		}
	}
	for _, p := range paths {
		if got[p] == nil {
			t.Fatalf("no result for %s", p)
		}
	}
	return got
}

// follow fetches every link of the results, as the next round would, and
// returns the paths the site was asked for in that round.
func follow(t *testing.T, s *site, results map[string]*Result) []string {
	t.Helper()
	var paths []string
	seen := map[string]bool{}
	for _, r := range results {
		for _, l := range r.Links {
			p, ok := strings.CutPrefix(l, s.origin)
			if !ok {
				t.Fatalf("%s: link %s to another site", r.URL, l)
			}
			if !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		}
	}
	before := len(s.requests())
	if len(paths) > 0 {
		c := newCollector(1)
		crawlPaths(t, s, signalOptions(t, c), c, paths...)
	}
	var asked []string
	for _, p := range s.requests()[before:] {
		if p != "/robots.txt" {
			asked = append(asked, p)
		}
	}
	slices.Sort(asked)
	return asked
}

// TestXRobotsTag: X-Robots-Tag nofollow (or none) leaves a page without
// links, HTML or not, so that none of them is requested next; noindex
// marks it; directives for another agent are ignored, ours obeyed; meta
// robots, for every agent or for ours, does the same from the page.
func TestXRobotsTag(t *testing.T) {
	html := func(name string) string {
		return `<html><body><a href="/to/` + name + `/1">1</a><a href="/to/` + name + `/2">2</a></body></html>`
	}
	pages := map[string]signalPage{
		"/nofollow":     {"text/html", [][2]string{{"X-Robots-Tag", "nofollow"}}, html("nofollow")},
		"/none":         {"text/html", [][2]string{{"X-Robots-Tag", "noarchive, none"}}, html("none")},
		"/noindex":      {"text/html", [][2]string{{"X-Robots-Tag", "noindex"}}, html("noindex")},
		"/otherbot":     {"text/html", [][2]string{{"X-Robots-Tag", "otherbot: noindex, nofollow"}}, html("otherbot")},
		"/ours":         {"text/html", [][2]string{{"X-Robots-Tag", "googlebot: noindex"}, {"X-Robots-Tag", "Meridian: nofollow"}}, html("ours")},
		"/pdf":          {"application/pdf", [][2]string{{"X-Robots-Tag", "noindex"}, {"Link", `</to/pdf/canonical>; rel="canonical"`}}, "%PDF-1.4"},
		"/pdf-nofollow": {"application/pdf", [][2]string{{"X-Robots-Tag", "nofollow"}, {"Link", `</to/pdf-nofollow/canonical>; rel="canonical"`}}, "%PDF-1.4"},
		"/meta":         {"text/html", nil, `<meta name="robots" content="noindex">` + html("meta")},
		"/meta-ours":    {"text/html", nil, `<meta name="meridian" content="nofollow">` + html("meta-ours")},
		"/meta-other":   {"text/html", nil, `<meta name="otherbot" content="nofollow, noindex">` + html("meta-other")},
		"/plain":        {"text/html", nil, html("plain")},
	}
	s := startSignalSite(t, pages)
	c := newCollector(1)
	var paths []string
	for p := range pages {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	got := crawlPaths(t, s, signalOptions(t, c), c, paths...)
	for _, w := range []struct {
		path      string
		noIndex   bool
		links     int
		canonical string
	}{
		{"/nofollow", false, 0, ""}, {"/none", true, 0, ""}, {"/noindex", true, 2, ""},
		{"/otherbot", false, 2, ""}, {"/ours", false, 0, ""},
		{"/pdf", true, 1, s.origin + "/to/pdf/canonical"}, {"/pdf-nofollow", false, 0, s.origin + "/to/pdf-nofollow/canonical"},
		{"/meta", true, 2, ""}, {"/meta-ours", false, 0, ""}, {"/meta-other", false, 2, ""}, {"/plain", false, 2, ""},
	} {
		r := got[w.path]
		if r.Status != crawl.StatusFetched || r.NoIndex != w.noIndex || len(r.Links) != w.links || r.Canonical != w.canonical {
			t.Errorf("%s: %v, noindex %v, links %q, canonical %q; want noindex %v, %d links, canonical %q",
				w.path, r.Status, r.NoIndex, r.Links, r.Canonical, w.noIndex, w.links, w.canonical)
		}
	}
	// The next round asks for the links of the pages that did not say
	// nofollow, and for none of the others.
	want := []string{"/to/meta-other/1", "/to/meta-other/2", "/to/meta/1", "/to/meta/2", "/to/noindex/1", "/to/noindex/2",
		"/to/otherbot/1", "/to/otherbot/2", "/to/pdf/canonical", "/to/plain/1", "/to/plain/2"}
	if asked := follow(t, s, got); !slices.Equal(asked, want) {
		t.Errorf("next round asked for\n %q\nwant\n %q", asked, want)
	}
}

// TestNoIndexWARC: a page that says noindex (header or meta) gets a WARC
// metadata record after its response that says so and where; with
// RespectNoIndex it gets only that record (no request, no response),
// while its links are still followed and other pages are archived.
func TestNoIndexWARC(t *testing.T) {
	pages := map[string]signalPage{
		"/header": {"text/html", [][2]string{{"X-Robots-Tag", "noindex"}}, `<a href="/a">a</a>`},
		"/meta":   {"text/html", nil, `<meta name=robots content=noindex><a href="/b">b</a>`},
		"/both":   {"text/html", [][2]string{{"X-Robots-Tag", "noindex"}}, `<meta name=robots content="noindex">`},
		"/plain":  {"text/html", nil, `<a href="/c">c</a>`},
	}
	s := startSignalSite(t, pages)
	o := s.origin
	source := map[string]string{o + "/header": "X-Robots-Tag", o + "/meta": "meta", o + "/both": "X-Robots-Tag, meta"}
	for _, respect := range []bool{false, true} {
		dir := t.TempDir()
		wr, err := warcfile.Open(warcfile.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		c := newCollector(1)
		opt := signalOptions(t, c)
		opt.WARC, opt.RespectNoIndex = wr, respect
		got := crawlPaths(t, s, opt, c, "/header", "/meta", "/both", "/plain")
		if err := wr.Close(); err != nil {
			t.Fatal(err)
		}
		for p, links := range map[string][]string{"/header": {o + "/a"}, "/meta": {o + "/b"}, "/both": nil, "/plain": {o + "/c"}} {
			if r := got[p]; r.NoIndex != (p != "/plain") || !slices.Equal(r.Links, links) {
				t.Errorf("respect %v, %s: noindex %v, links %q; want links %q", respect, p, r.NoIndex, r.Links, links)
			}
		}
		type counts struct{ requests, responses, metadata int }
		n := map[string]*counts{}
		for _, x := range readWARCs(t, dir) {
			if n[x.uri] == nil {
				n[x.uri] = &counts{}
			}
			switch x.typ {
			case gowarc.Request:
				n[x.uri].requests++
			case gowarc.Response:
				n[x.uri].responses++
			case gowarc.Metadata:
				n[x.uri].metadata++
				want := map[string]string{"robots": "noindex", "robots-source": source[x.uri]}
				if respect {
					want["archived"] = "no (respect-noindex)"
				}
				if !maps.Equal(x.fields, want) {
					t.Errorf("respect %v, %s: metadata %q, want %q", respect, x.uri, x.fields, want)
				}
			}
		}
		for u := range source {
			want := counts{1, 1, 1}
			if respect {
				want = counts{0, 0, 1}
			}
			if g := n[u]; g == nil || *g != want {
				t.Errorf("respect %v, %s: records %+v, want %+v", respect, u, g, want)
			}
		}
		if g := n[o+"/plain"]; g == nil || *g != (counts{1, 1, 0}) {
			t.Errorf("respect %v, /plain: records %+v", respect, g)
		}
		if g := n[o+"/robots.txt"]; g == nil || g.responses != 1 {
			t.Errorf("respect %v, robots.txt: records %+v", respect, g)
		}
	}
}

// TestCanonicalRefreshFrames: rel=canonical (element and Link header),
// meta refresh and the Refresh header, iframes and frames are links of
// their pages, each once, and the next round requests them; the
// canonical is in Result.Canonical unless it names the page itself.
func TestCanonicalRefreshFrames(t *testing.T) {
	pages := map[string]signalPage{
		"/c-element": {"text/html", nil, `<html><head><link rel="canonical" href="/canon/element"></head><body><a href="/canon/element">same</a><a href="/x/1">x</a></body></html>`},
		"/c-header": {"text/html", [][2]string{{"Link", `<https://cdn.test/style.css>; rel=preload, </canon/header?a=1>; rel="canonical"`}},
			`<link rel=canonical href="/canon/element-loses"><a href="/canon/header?a=1">same</a>`},
		"/c-self":         {"text/html", [][2]string{{"Link", `<ORIGIN/c-self>; rel=canonical`}}, `<link rel=canonical href="c-self#top"><a href="/x/2">x</a>`},
		"/c-body":         {"text/html", nil, `<body><link rel=canonical href="/canon/in-body"></body>`},
		"/c-header-self":  {"text/html", [][2]string{{"Link", `</c-header-self>; rel=canonical`}}, `<link rel=canonical href="/canon/said-second">`},
		"/refresh-meta":   {"text/html", nil, `<meta http-equiv="refresh" content="5; URL='/refresh/meta'">`},
		"/refresh-header": {"text/html", [][2]string{{"Refresh", "0;url=/refresh/header"}}, `<p>moved</p>`},
		"/refresh-self":   {"text/html", [][2]string{{"Refresh", "30"}}, `<meta http-equiv=refresh content="30; url=/refresh-self">`},
		"/frames":         {"text/html", nil, `<frameset><frame src="/frame/1"><frame src="frame/2"></frameset><noframes><a href="/x/3">x</a></noframes>`},
		"/iframe":         {"text/html", nil, `<p><iframe src="/frame/3" width=1></iframe></p>`},
	}
	s := startSignalSite(t, pages)
	o := s.origin
	c := newCollector(1)
	got := crawlPaths(t, s, signalOptions(t, c), c, "/c-element", "/c-header", "/c-self", "/c-body", "/c-header-self", "/refresh-meta", "/refresh-header", "/refresh-self", "/frames", "/iframe")
	for p, w := range map[string]struct {
		canonical string
		links     []string
	}{
		"/c-element":      {o + "/canon/element", []string{o + "/canon/element", o + "/x/1"}},
		"/c-header":       {o + "/canon/header?a=1", []string{o + "/canon/header?a=1", o + "/canon/element-loses"}},
		"/c-self":         {"", []string{o + "/x/2"}},
		"/c-body":         {"", nil},
		"/c-header-self":  {"", []string{o + "/canon/said-second"}}, // the header said it first
		"/refresh-meta":   {"", []string{o + "/refresh/meta"}},
		"/refresh-header": {"", []string{o + "/refresh/header"}},
		"/refresh-self":   {"", nil},
		"/frames":         {"", []string{o + "/frame/1", o + "/frame/2", o + "/x/3"}},
		"/iframe":         {"", []string{o + "/frame/3"}},
	} {
		if r := got[p]; r.Canonical != w.canonical || !slices.Equal(r.Links, w.links) {
			t.Errorf("%s: canonical %q, links %q; want %q, %q", p, r.Canonical, r.Links, w.canonical, w.links)
		}
	}
	want := []string{"/canon/element", "/canon/element-loses", "/canon/header?a=1", "/canon/said-second", "/frame/1", "/frame/2", "/frame/3",
		"/refresh/header", "/refresh/meta", "/x/1", "/x/2", "/x/3"}
	if asked := follow(t, s, got); !slices.Equal(asked, want) {
		t.Errorf("next round asked for\n %q\nwant\n %q", asked, want)
	}
}

// TestFeeds: a page's <link rel=alternate type=application/atom+xml>
// leads to its feed; an RSS feed served as application/rss+xml, an Atom
// feed declared windows-1252 and an RSS feed served as text/xml give their
// items' links, and the next round requests exactly those bytes.
func TestFeeds(t *testing.T) {
	pages := map[string]signalPage{
		"/blog": {"text/html", nil, `<html><head><link rel="alternate" type="application/atom+xml" title="Atom" href="/feed.atom">` +
			`<link rel="alternate" type="application/rss+xml" href="ORIGIN/feed.rss"></head><body><p>blog</p></body></html>`},
		"/feed.rss": {"application/rss+xml", nil, `<?xml version="1.0"?><rss version="2.0"><channel><title>b</title><link>ORIGIN/blog</link>` +
			`<item><title>1</title><link>ORIGIN/post/1</link><guid isPermaLink="false">1</guid></item>` +
			`<item><title>2</title><guid>ORIGIN/post/2</guid></item>` +
			`<item><title>3</title><link>/post/3?x=1&amp;y=2</link></item></channel></rss>`},
		"/feed.atom": {"application/atom+xml", nil, "<?xml version=\"1.0\" encoding=\"windows-1252\"?>\n" +
			"<feed xmlns=\"http://www.w3.org/2005/Atom\" xml:base=\"ORIGIN/news/\"><title>caf\xe9</title><link rel=\"self\" href=\"/feed.atom\"/>" +
			"<entry><title>\x93quoted\x94</title><link href=\"caf\xe9.html\"/></entry>" +
			"<entry><link rel=\"alternate\" href=\"/news/na\xefve\"/><link rel=\"edit\" href=\"/edit/2\"/></entry></feed>"},
		"/feed.xml": {"text/xml; charset=utf-8", nil, `<?xml version="1.0"?><!-- a feed as text/xml --><rss><channel><item><link>/post/4</link></item></channel></rss>`},
		"/data.xml": {"application/xml", nil, `<?xml version="1.0"?><catalog><item><link>/not/a/feed</link></item></catalog>`},
	}
	s := startSignalSite(t, pages)
	o := s.origin
	c := newCollector(1)
	got := crawlPaths(t, s, signalOptions(t, c), c, "/blog", "/feed.rss", "/feed.atom", "/feed.xml", "/data.xml")
	for p, links := range map[string][]string{
		"/blog":      {o + "/feed.atom", o + "/feed.rss"},
		"/feed.rss":  {o + "/post/1", o + "/post/2", o + "/post/3?x=1&y=2"},
		"/feed.atom": {o + "/news/caf%C3%A9.html", o + "/news/na%C3%AFve"},
		"/feed.xml":  {o + "/post/4"},
		"/data.xml":  nil,
	} {
		if r := got[p]; r.Status != crawl.StatusFetched || !slices.Equal(r.Links, links) {
			t.Errorf("%s: %v, links %q; want %q", p, r.Status, r.Links, links)
		}
	}
	delete(got, "/blog") // its feeds were fetched already
	want := []string{"/news/caf%C3%A9.html", "/news/na%C3%AFve", "/post/1", "/post/2", "/post/3?x=1&y=2", "/post/4"}
	if asked := follow(t, s, got); !slices.Equal(asked, want) {
		t.Errorf("next round asked for\n %q\nwant\n %q", asked, want)
	}
}

// TestLargeSitemaps: a gzipped sitemap of over four times MaxBodyBytes
// once inflated, one served with Content-Encoding: gzip (decoded by the
// fetcher, over twice MaxBodyBytes) and a text sitemap give all their
// URLs, while a page is still cut at MaxBodyBytes.
func TestLargeSitemaps(t *testing.T) {
	const maxBody = 1 << 20
	urlset := func(prefix string, n, size int) ([]string, []byte) {
		var b bytes.Buffer
		var locs []string
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
			`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">` + "\n")
		pad := strings.Repeat("a long caption ", 64)
		for i := range n {
			loc := fmt.Sprintf("ORIGIN/%s/%06d", prefix, i)
			locs = append(locs, loc)
			fmt.Fprintf(&b, "<url><loc>%s</loc><lastmod>2026-11-28</lastmod><image:image><image:loc>%s.jpg</image:loc><image:caption>%s</image:caption></image:image></url>\n",
				loc, loc, pad[:size])
		}
		b.WriteString("</urlset>\n")
		return locs, b.Bytes()
	}
	bigLocs, big := urlset("big", 7_000, 430)
	ceLocs, ce := urlset("ce", 4_000, 430)
	if len(big) < 4*maxBody || len(ce) < 2*maxBody {
		t.Fatalf("sitemaps of %d and %d bytes", len(big), len(ce))
	}
	var text strings.Builder
	var textLocs []string
	for i := range 3000 {
		l := fmt.Sprintf("ORIGIN/text/%d", i)
		textLocs = append(textLocs, l)
		text.WriteString(l + "\r\n")
	}
	zip := func(b []byte) []byte {
		var out bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
		zw.Write(b)
		zw.Close()
		return out.Bytes()
	}
	// The origin is known only once the site runs: serve ORIGIN replaced.
	var bigGz, ceGz []byte
	s := startSite(t, "127.0.0.1", func(s *site, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nAllow: /\nSitemap: %[1]s/big.xml.gz\nSitemap: %[1]s/ce.xml\nSitemap: %[1]s/list.txt\n", s.origin)
		case "/big.xml.gz":
			w.Header().Set("Content-Type", "application/x-gzip")
			w.Write(bigGz)
		case "/ce.xml":
			w.Header().Set("Content-Type", "application/xml")
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(ceGz)
		case "/list.txt":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, strings.ReplaceAll(text.String(), "ORIGIN", s.origin))
		case "/page":
			w.Header().Set("Content-Type", "text/html")
			w.Write(bytes.Repeat([]byte("<p>filler</p>\n"), (maxBody+1<<20)/14))
		default:
			http.NotFound(w, r)
		}
	})
	o := s.origin
	bigGz = zip(bytes.ReplaceAll(big, []byte("ORIGIN"), []byte(o)))
	ceGz = zip(bytes.ReplaceAll(ce, []byte("ORIGIN"), []byte(o)))
	c := newCollector(1)
	opt := signalOptions(t, c)
	opt.MaxBodyBytes = maxBody
	f, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	// Parsing megabytes of XML takes seconds with -race on a busy box.
	runCrawl(t, f, c, []Job{{URL: o + "/page"}}, 10*time.Millisecond, 240*time.Second)
	wantLog := []string{"/robots.txt", "/big.xml.gz", "/ce.xml", "/list.txt", "/page"}
	if got := s.requests(); !slices.Equal(got, wantLog) {
		t.Errorf("requests %q, want %q", got, wantLog)
	}
	with := func(locs []string) []string {
		out := make([]string, len(locs))
		for i, l := range locs {
			out[i] = strings.ReplaceAll(l, "ORIGIN", o)
		}
		return out
	}
	want := map[string][]string{o + "/big.xml.gz": with(bigLocs), o + "/ce.xml": with(ceLocs), o + "/list.txt": with(textLocs)}
	for _, r := range c.results() {
		switch r.Kind {
		case KindSitemap:
			w := want[r.URL]
			if r.Status != crawl.StatusFetched || r.Truncated != "" || !slices.Equal(r.Links, w) {
				t.Errorf("%s: %v, truncated %q, %d links (last %q); want %d (last %q)", r.URL, describe(r), r.Truncated, len(r.Links), last(r.Links), len(w), last(w))
			}
			delete(want, r.URL)
		case KindPage:
			if r.Truncated != "length" || r.Bytes != maxBody {
				t.Errorf("page: truncated %q at %d bytes; want length at %d", r.Truncated, r.Bytes, maxBody)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("no result for the sitemaps %v", slices.Collect(maps.Keys(want)))
	}
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// TestIsFeed: feeds are told by their Content-Type, and XML ones by their
// root element.
func TestIsFeed(t *testing.T) {
	for _, c := range []struct {
		ct, body string
		want     bool
	}{
		{"application/rss+xml", "", true},
		{"Application/Atom+XML; charset=utf-8", "", true},
		{"application/rdf+xml", "<rdf:RDF>", true},
		{"application/xml", `<?xml version="1.0"?><rss>`, true},
		{"text/xml", `<feed xmlns="http://www.w3.org/2005/Atom">`, true},
		{"", `<?xml version="1.0"?><rss>`, true},
		{"application/xml", `<urlset>`, false},
		{"text/xml", `<html>`, false},
		{"text/html", `<rss>`, false},
		{"text/plain", `<rss>`, false},
		{"application/json", `{"version": "https://jsonfeed.org/version/1"}`, false},
	} {
		if got := isFeed(c.ct, []byte(c.body)); got != c.want {
			t.Errorf("isFeed(%q, %q) = %v, want %v", c.ct, c.body, got, c.want)
		}
	}
}

// TestWithHeaderLinks: header links come first, each once, within the cap.
func TestWithHeaderLinks(t *testing.T) {
	for _, c := range []struct {
		found              []string
		canonical, refresh string
		max                int
		want               []string
	}{
		{[]string{"a", "b"}, "", "", 10, []string{"a", "b"}},
		{[]string{"a", "b"}, "c", "", 10, []string{"c", "a", "b"}},
		{[]string{"a", "b"}, "b", "r", 10, []string{"b", "r", "a"}},
		{[]string{"a", "b"}, "c", "c", 10, []string{"c", "a", "b"}},
		{[]string{"a", "b", "d"}, "c", "r", 3, []string{"c", "r", "a"}},
		{nil, "", "r", 1, []string{"r"}},
		{nil, "", "", 1, nil},
	} {
		got := withHeaderLinks(c.found, c.canonical, c.refresh, c.max)
		if !slices.Equal(got, c.want) {
			t.Errorf("withHeaderLinks(%q, %q, %q, %d) = %q, want %q", c.found, c.canonical, c.refresh, c.max, got, c.want)
		}
	}
}

// TestMaxSitemapBytesOption: 0 is the protocol's 50 MiB, and Validate
// refuses a negative or huge bound.
func TestMaxSitemapBytesOption(t *testing.T) {
	o := Options{OnResult: func(*Result) {}}
	o.ensureDefaults()
	if o.MaxSitemapBytes != 50<<20 {
		t.Errorf("default %d", o.MaxSitemapBytes)
	}
	for _, n := range []int64{-1, 1<<30 + 1} {
		err := Options{OnResult: func(*Result) {}, MaxSitemapBytes: n}.Validate()
		if err == nil || !strings.Contains(err.Error(), "max sitemap bytes") {
			t.Errorf("MaxSitemapBytes %d: %v", n, err)
		}
	}
	if err := (Options{OnResult: func(*Result) {}, MaxSitemapBytes: 1 << 20, Scope: &urlnorm.Scope{}}).Validate(); err != nil {
		t.Errorf("1 MiB: %v", err)
	}
}

package links

import (
	"slices"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

const pageURL = "http://h1.us.test/dir/page.html"

func TestExtract(t *testing.T) {
	n := urlnorm.New(urlnorm.Options{})
	x := NewExtractor(n, nil, 0)
	for _, c := range []struct {
		name   string
		body   string
		links  []string
		check  func(p *Page) bool
		expect string // what check asserts, for the message
	}{
		{name: "a and area", body: `<a href="a.html">x</a><map><area href="/b.html"></map><A HREF=c.html>`,
			links: []string{"http://h1.us.test/dir/a.html", "http://h1.us.test/b.html", "http://h1.us.test/dir/c.html"}},
		{name: "other tags ignored", body: `<link href="/style"><link rel=alternate href="/alt"><img src="/i.png"><a name="x">anchor</a><abbr href="/abbr"><frameset src="/fs">`,
			links: nil},
		{name: "frames are pages", body: `<iframe src="/f"></iframe><IFRAME SRC=g.html></IFRAME><frameset><frame src="/h"><frame name=x></frameset><iframe srcdoc="<a href=/no>">`,
			links: []string{"http://h1.us.test/f", "http://h1.us.test/dir/g.html", "http://h1.us.test/h"}},
		{name: "base: first one, resolved against the page", body: `<head><base href="../other/"><base href="http://elsewhere.test/"></head><a href="x">x</a>`,
			links: []string{"http://h1.us.test/other/x"},
			check: func(p *Page) bool { return p.Base == "http://h1.us.test/other/" }, expect: "Base http://h1.us.test/other/"},
		{name: "base without href does not count", body: `<base target="_top"><base href="/b/"><a href="x">`,
			links: []string{"http://h1.us.test/b/x"}},
		{name: "unusable base ignored", body: `<base href="javascript:void(0)"><a href="x">`,
			links: []string{"http://h1.us.test/dir/x"},
			check: func(p *Page) bool { return p.Base == pageURL }, expect: "Base is the page URL"},
		{name: "base on another host", body: `<base href="https://cdn.test:443/p/"><a href="x">1</a><a href="#top">2</a>`,
			links: []string{"https://cdn.test/p/x", "https://cdn.test/p/"}},
		{name: "rel nofollow among tokens", body: `<a href="1" rel="nofollow">1</a><a href="2" rel="NoFollow">2</a><a href="3" rel="noopener  nofollow">3</a>` +
			`<a href="4" rel="external	nofollow ugc">4</a><a href="5" rel="nofollowed">5</a><a href="6" rel="noopener">6</a><area href="7" rel=nofollow>`,
			links: []string{"http://h1.us.test/dir/5", "http://h1.us.test/dir/6"},
			check: func(p *Page) bool { return p.NoFollowLinks == 5 }, expect: "5 nofollow links"},
		{name: "meta robots nofollow", body: `<meta name="robots" content="noindex, nofollow"><a href="x">`,
			links: nil, check: func(p *Page) bool { return p.NoFollow && p.NoIndex }, expect: "NoFollow and NoIndex"},
		{name: "meta robots nofollow after links", body: `<a href="x"><meta name="ROBOTS" content="NOFOLLOW"><a href="y">`,
			links: nil, check: func(p *Page) bool { return p.NoFollow && !p.NoIndex }, expect: "NoFollow only"},
		{name: "meta robots none", body: `<meta content="none" name="robots"><a href="x">`,
			links: nil, check: func(p *Page) bool { return p.NoFollow && p.NoIndex }, expect: "NoFollow and NoIndex"},
		{name: "meta robots noindex only", body: `<meta name="robots" content="noindex,follow"><a href="x">`,
			links: []string{"http://h1.us.test/dir/x"}, check: func(p *Page) bool { return !p.NoFollow && p.NoIndex }, expect: "NoIndex only"},
		{name: "other meta ignored", body: `<meta name="googlebot" content="nofollow"><meta name="description" content="none"><meta charset="utf-8"><a href="x">`,
			links: []string{"http://h1.us.test/dir/x"}, check: func(p *Page) bool { return !p.NoFollow && !p.NoIndex }, expect: "no flags"},
		{name: "duplicates dropped, first kept", body: `<a href="b">1</a><a href="a">2</a><a href="/dir/b#frag">3</a><a href="./a">4</a><a href="HTTP://H1.US.TEST:80/dir/b">5</a>`,
			links: []string{"http://h1.us.test/dir/b", "http://h1.us.test/dir/a"},
			check: func(p *Page) bool { return p.Duplicates == 3 }, expect: "3 duplicates"},
		{name: "self links dropped", body: `<a href="#top">1</a><a href="">2</a><a href="   ">3</a><a href="#">4</a><a href="page.html">5</a><a href="?">6</a><a href="?x">7</a>`,
			links: []string{"http://h1.us.test/dir/page.html?x"},
			check: func(p *Page) bool { return p.Duplicates == 6 }, expect: "6 dropped"},
		{name: "entities decoded", body: `<a href="/q?a=1&amp;b=2">1</a><a href="&#47;slash">2</a><a href="/x&lt;y">3</a><a href="/e&eacute;">4</a>`,
			links: []string{"http://h1.us.test/q?a=1&b=2", "http://h1.us.test/slash", "http://h1.us.test/x%3Cy", "http://h1.us.test/e%C3%A9"}},
		{name: "whitespace in href", body: "<a href=\"\n  /a\n\">1</a><a href=\" b c \">2</a>",
			links: []string{"http://h1.us.test/a", "http://h1.us.test/dir/b%20c"}},
		{name: "bad links counted", body: `<a href="mailto:x@y">1</a><a href="javascript:go()">2</a><a href="http://[::1%25lo]/">3</a><a href="//:0/">4</a><a href="ok">5</a>`,
			links: []string{"http://h1.us.test/dir/ok"}, check: func(p *Page) bool { return p.BadLinks == 4 }, expect: "4 bad links"},
		{name: "session ids stripped", body: `<a href="/p/1.html?PHPSESSID=abc">1</a><a href="/p/1.html;jsessionid=1">2</a>`,
			links: []string{"http://h1.us.test/p/1.html"}},
		{name: "raw text and comments are not markup", body: `<script>var s = '<a href="/s1">';</script><style>a{}</style><!-- <a href="/c"> --><title><a href="/t"></title><textarea><a href="/ta"></textarea><a href="/real">`,
			links: []string{"http://h1.us.test/real"}},
		{name: "noscript and noframes content is markup", body: `<noscript><a href="/ns">x</a></noscript><noframes><a href="/nf2">y</a></noframes>`,
			links: []string{"http://h1.us.test/ns", "http://h1.us.test/nf2"}},
		{name: "broken markup", body: "<div><p>unclosed <a href=/u1>x<a href='/u2'\x00>y</b><a href=\"/u3\" <a href=/u4>\xff\xfe <a href=\"/u5",
			links: []string{"http://h1.us.test/u1", "http://h1.us.test/u2", "http://h1.us.test/u3"}},
		{name: "empty body", body: "", links: nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := x.Extract(pageURL, "", []byte(c.body))
			if p.Err != nil {
				t.Fatal(p.Err)
			}
			if !slices.Equal(p.Links, c.links) {
				t.Errorf("links %q, want %q", p.Links, c.links)
			}
			if c.check != nil && !c.check(p) {
				t.Errorf("want %s, got %+v", c.expect, *p)
			}
		})
	}
}

func TestExtractScopeAndCap(t *testing.T) {
	n := urlnorm.New(urlnorm.Options{})
	var b strings.Builder
	for i := range 100 {
		b.WriteString(`<a href="/p/` + string(rune('a'+i%26)) + `.html">x</a><a href="http://other.test/x.png">y</a>`)
	}
	body := []byte(b.String())
	x := NewExtractor(n, &urlnorm.Scope{HostSuffixes: []string{"us.test"}}, 0)
	p := x.Extract(pageURL, "", body)
	if len(p.Links) != 26 || p.OutOfScope != 1 || p.Duplicates != 200-26-1 || p.Truncated {
		t.Fatalf("scope: %d links, %d out of scope, %d duplicates, truncated %v", len(p.Links), p.OutOfScope, p.Duplicates, p.Truncated)
	}
	capped := NewExtractor(n, nil, 5)
	p = capped.Extract(pageURL, "", body)
	want := []string{"http://h1.us.test/p/a.html", "http://other.test/x.png", "http://h1.us.test/p/b.html", "http://h1.us.test/p/c.html", "http://h1.us.test/p/d.html"}
	if !p.Truncated || !slices.Equal(p.Links, want) {
		t.Fatalf("cap 5: %q, truncated %v", p.Links, p.Truncated)
	}
	p = capped.Extract(pageURL, "", []byte(`<a href="/1"><a href="/2"><a href="/3"><a href="/4"><a href="/5"><p>no more`))
	if p.Truncated || len(p.Links) != 5 {
		t.Fatalf("exactly 5 links: %q, truncated %v", p.Links, p.Truncated)
	}
}

func TestExtractBadPageURL(t *testing.T) {
	x := NewExtractor(urlnorm.New(urlnorm.Options{}), nil, 0)
	for _, u := range []string{"", "HTTP://H/", "h1.us.test/x", "http://h/a#b"} {
		p := x.Extract(u, "", []byte(`<a href="/x">`))
		if p.Err == nil || len(p.Links) != 0 {
			t.Errorf("Extract(%q): err %v, links %q; want an error and no links", u, p.Err, p.Links)
		}
	}
}

// TestExtractReuse checks that a Page's links survive the next call (only
// the Page struct is reused) and that no state leaks between pages.
func TestExtractReuse(t *testing.T) {
	x := NewExtractor(urlnorm.New(urlnorm.Options{}), nil, 0)
	first := x.Extract(pageURL, "", []byte(`<a href="/one">`)).Links
	second := x.Extract("http://h2.us.test/", "", []byte(`<base href="/b/"><a href="two">`))
	if !slices.Equal(first, []string{"http://h1.us.test/one"}) || !slices.Equal(second.Links, []string{"http://h2.us.test/b/two"}) {
		t.Fatalf("first %q, second %q", first, second.Links)
	}
	third := x.Extract(pageURL, "", nil)
	if len(third.Links) != 0 || third.Base != pageURL || third.NoFollow || third.BadLinks != 0 {
		t.Fatalf("state leaked into the next page: %+v", *third)
	}
}

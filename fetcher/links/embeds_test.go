package links

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// TestExtractEmbeds: with requisites on, each embedding form gives its
// URLs, resolved against the page (or its <base>), normalised, each once,
// in document order; links stay what they are without requisites.
func TestExtractEmbeds(t *testing.T) {
	n := urlnorm.New(urlnorm.Options{})
	const d = "http://h1.us.test/dir/"
	for _, c := range []struct {
		name   string
		body   string
		embeds []string
		links  []string
	}{
		{name: "img src and srcset", body: `<img src="a.png" srcset="b.png 2x, /c.png 3x">`,
			embeds: []string{d + "a.png", d + "b.png", "http://h1.us.test/c.png"}},
		{name: "srcset with width descriptors and sizes", body: `<img srcset="s-800.jpg 800w,s-1600.jpg 1600w" sizes="(max-width: 800px) 100vw, 800px">`,
			embeds: []string{d + "s-800.jpg", d + "s-1600.jpg"}},
		{name: "srcset: a comma inside a URL, a URL ending in commas, no descriptor", body: `<img srcset="a,b.png 1x, c.png,, d.png">`,
			embeds: []string{d + "a,b.png", d + "c.png", d + "d.png"}},
		{name: "picture source srcset, not media src", body: `<picture><source srcset="w.webp" type="image/webp"><img src="f.jpg"></picture><video src="v.mp4" poster="p.jpg"><source src="v.webm"></video><audio src="a.mp3"></audio>`,
			embeds: []string{d + "w.webp", d + "f.jpg", d + "p.jpg"}},
		{name: "script src, embed src, object data, input type=image", body: `<script src="/j.js"></script><script>var u = "url(/not.png)"</script><embed src="e.swf"><object data="o.svg"></object><input type="image" src="go.png"><input type="text" src="no.png">`,
			embeds: []string{"http://h1.us.test/j.js", d + "e.swf", d + "o.svg", d + "go.png"}},
		{name: "link rels", body: `<link rel="stylesheet" href="s.css"><link rel="shortcut icon" href="/favicon.ico"><link rel="apple-touch-icon" href="t.png">` +
			`<link rel="preload" as="font" href="f.woff2"><link rel="preload" as="fetch" href="data.json"><link rel="modulepreload" href="m.js">` +
			`<link rel="alternate" href="feed.xml"><link rel="canonical" href="c.html"><link rel="ICON" href="i.ico"><link href="norel.css">`,
			embeds: []string{d + "s.css", "http://h1.us.test/favicon.ico", d + "t.png", d + "f.woff2", d + "m.js", d + "i.ico"},
			links:  []string{d + "c.html"}}, // the canonical is a link, not an embed
		{name: "style element: url(), @import string and url()", body: `<style>@import "a.css"; @import url('b.css') screen; .x { background: URL( "c.png" ) } /* url(d.png) */ .y{content:"url(e.png)"}</style>`,
			embeds: []string{d + "a.css", d + "b.css", d + "c.png"}},
		{name: "style attributes, data: and #id skipped", body: `<div style="background:url(bg.png)"><p style='mask: url(#m); background: url(data:image/png;base64,AAAA)'>` +
			`<span style="background-image: image-set('one.png' 1x, url(two.png) 2x)">`,
			embeds: []string{d + "bg.png", d + "one.png", d + "two.png"}},
		{name: "CSS escapes and quotes", body: `<style>.a{background:url("q\"uote.png")} .b{background:url(sp\ ace.png)} .c{background:url('\62 x.png')}</style>`,
			embeds: []string{d + "q%22uote.png", d + "sp%20ace.png", d + "bx.png"}},
		{name: "base applies to embeds", body: `<base href="http://cdn.test/s/"><img src="i.png"><link rel=stylesheet href="../c.css">`,
			embeds: []string{"http://cdn.test/s/i.png", "http://cdn.test/c.css"}},
		{name: "entities in attributes", body: `<img src="/i?a=1&amp;b=2" srcset="/j?x=1&amp;y=2 2x">`,
			embeds: []string{"http://h1.us.test/i?a=1&b=2", "http://h1.us.test/j?x=1&y=2"}},
		{name: "duplicates once, self dropped, link kept as well", body: `<img src="a.png"><img src="./a.png"><a href="a.png">l</a><img src="page.html">`,
			embeds: []string{d + "a.png"}, links: []string{d + "a.png"}},
		{name: "nofollow does not apply to embeds", body: `<meta name="robots" content="nofollow"><a href="x">x</a><img src="i.png">`,
			embeds: []string{d + "i.png"}},
		{name: "no embeds", body: `<a href="x">x</a><img alt="none"><p style="color: red">`,
			links: []string{d + "x"}},
	} {
		x := NewExtractor(n, nil, 0)
		x.SetRequisites(true)
		p := x.Extract(pageURL, "", []byte(c.body))
		if !slices.Equal(p.Embeds, c.embeds) {
			t.Errorf("%s: embeds\n got %q\nwant %q", c.name, p.Embeds, c.embeds)
		}
		if !slices.Equal(p.Links, c.links) {
			t.Errorf("%s: links\n got %q\nwant %q", c.name, p.Links, c.links)
		}
		off := NewExtractor(n, nil, 0)
		q := off.Extract(pageURL, "", []byte(c.body))
		if q.Embeds != nil || !slices.Equal(q.Links, c.links) {
			t.Errorf("%s: requisites off: embeds %q, links %q", c.name, q.Embeds, q.Links)
		}
	}
}

// TestExtractEmbedsScopeAndCap: embeds are scoped as links, and capped at
// maxLinks (EmbedsTruncated) without cutting the page's links short.
func TestExtractEmbedsScopeAndCap(t *testing.T) {
	n := urlnorm.New(urlnorm.Options{})
	x := NewExtractor(n, &urlnorm.Scope{HostSuffixes: []string{"us.test"}, SkipExts: []string{}}, 2)
	x.SetRequisites(true)
	p := x.Extract(pageURL, "", []byte(`<img src="http://other.test/o.png"><img src=1.png><img src=2.png><img src=3.png><a href=l1></a><a href=l2></a>`))
	if want := []string{"http://h1.us.test/dir/1.png", "http://h1.us.test/dir/2.png"}; !slices.Equal(p.Embeds, want) || !p.EmbedsTruncated {
		t.Errorf("embeds %q (truncated %v), want %q truncated", p.Embeds, p.EmbedsTruncated, want)
	}
	if p.OutOfScope != 1 || len(p.Links) != 2 {
		t.Errorf("%d out of scope, links %q; want 1 and two links", p.OutOfScope, p.Links)
	}
}

// TestExtractCSS: a style sheet's url() and @import references, resolved
// against its URL.
func TestExtractCSS(t *testing.T) {
	x := NewExtractor(nil, nil, 0)
	css := "@charset \"utf-8\";\n@import url(\"theme.css\");\n@import 'print.css' print;\n/* @import \"no.css\"; */\n" +
		"body { background: url(../img/bg.png) } @font-face { src: url(/f.woff2) format(\"woff2\"), url(f.woff) format('woff') }\n" +
		".a:after { content: 'url(not.png)' } .b { background: url( spaced.png ) } .c { background: url(bad url.png) }"
	p := x.ExtractCSS("http://h.test/css/site.css", []byte(css))
	want := []string{"http://h.test/css/theme.css", "http://h.test/css/print.css", "http://h.test/img/bg.png", "http://h.test/f.woff2",
		"http://h.test/css/f.woff", "http://h.test/css/spaced.png"}
	if !slices.Equal(p.Embeds, want) {
		t.Errorf("embeds\n got %q\nwant %q", p.Embeds, want)
	}
	if p := x.ExtractCSS("not a url", []byte(css)); p.Err == nil || p.Embeds != nil {
		t.Errorf("a bad sheet URL: %v, %q", p.Err, p.Embeds)
	}
}

// TestCSSUnescape decodes CSS escapes as CSS Syntax 3 does.
func TestCSSUnescape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`a\"b`, `a"b`}, {`\62 x`, "bx"}, {`\000062x`, "bx"}, {`\0`, "\uFFFD"}, {`\D800 `, "\uFFFD"}, {`\110000`, "\uFFFD"},
		{"a\\\nb", "ab"}, {`\e9 t\E9`, "ét\u00e9"}, {`trail\`, "trail"}, {`\20\20`, "  "},
	} {
		if got := string(cssUnescape(nil, []byte(c.in))); got != c.want {
			t.Errorf("cssUnescape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzCSSRefs: any bytes give references that are slices of the input
// (or decode to valid UTF-8 when escaped from valid UTF-8), never a panic,
// and the scan ends.
func FuzzCSSRefs(f *testing.F) {
	for _, s := range []string{``, `url(a)`, `url("a")`, `url('a\'b')`, `@import "x.css";`, `@import url(y.css)`, `/* url(c) */`, `/* open`,
		`"url(s)"`, `image-set("a" 1x, url(b) 2x)`, `-webkit-image-set('a' 1x)`, `url(a b)`, `url(`, `url("`, `\`, `u\rl(x)`, `src("f")`,
		`url(\61 .png)`, "@import\n'x'", `@importx "no"`, `a{b:url(c)}@import`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cssRefs(b, func(ref []byte, escaped bool) {
			if len(ref) > len(b) || !bytes.Contains(b, ref) {
				t.Fatalf("reference %q is not in the input", ref)
			}
			if escaped != (bytes.IndexByte(ref, '\\') >= 0) {
				t.Fatalf("reference %q: escaped %v", ref, escaped)
			}
			u := cssUnescape(nil, ref)
			if utf8.Valid(ref) && !utf8.Valid(u) {
				t.Fatalf("%q unescapes to invalid UTF-8 %q", ref, u)
			}
		})
	})
}

// FuzzSrcset: every candidate URL is a non-empty slice of the input
// without spaces and without a leading or trailing comma.
func FuzzSrcset(f *testing.F) {
	for _, s := range []string{``, `a.png`, `a.png 1x, b.png 2x`, `a,b.png 1x`, `a.png,,`, `,,,`, `a (x,y) 1x, b`, `a.png 1x (unclosed, b.png`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		srcset(b, func(u []byte) {
			n++
			if len(u) == 0 || !bytes.Contains(b, u) || bytes.ContainsAny(u, " \t\n\r\f") || u[0] == ',' || u[len(u)-1] == ',' {
				t.Fatalf("candidate %q of %q", u, b)
			}
		})
		if n > len(b) {
			t.Fatalf("%d candidates in %d bytes", n, len(b))
		}
		if strings.TrimSpace(strings.Trim(string(b), ", \t\n\r\f")) != "" && n == 0 {
			t.Fatalf("no candidate in %q", b)
		}
	})
}

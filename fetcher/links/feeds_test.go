package links

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

const feedURL = "http://h1.us.test/blog/feed.xml"

func TestExtractFeed(t *testing.T) {
	n := urlnorm.New(urlnorm.Options{})
	for _, c := range []struct {
		name, ct, body string
		links          []string
		err            string // what the error says; "" for none
		notFeed        bool
	}{
		{name: "rss 2.0", ct: "application/rss+xml", body: `<?xml version="1.0"?>
<rss version="2.0"><channel><title>T</title><link>http://h1.us.test/</link>
<item><title>one</title><link>http://h1.us.test/2026/one.html</link><guid isPermaLink="false">tag:h1,1</guid></item>
<item><link> /2026/two.html </link><guid>http://h1.us.test/2026/two.html</guid></item>
<item><guid isPermaLink="true">http://h1.us.test/2026/three.html</guid></item>
<item><guid>four</guid><description>&lt;a href="/no"&gt;</description></item>
<item><guid isPermaLink="TRUE">five.html</guid><enclosure url="http://h1.us.test/a.mp3"/></item>
</channel></rss>`,
			links: []string{"http://h1.us.test/2026/one.html", "http://h1.us.test/2026/two.html", "http://h1.us.test/2026/three.html", "http://h1.us.test/blog/five.html"}},
		{name: "rss 1.0 (rdf)", ct: "application/rdf+xml", body: `<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">
<channel rdf:about="http://h1.us.test/"><link>http://h1.us.test/</link><items><rdf:Seq><rdf:li rdf:resource="http://h1.us.test/a"/></rdf:Seq></items></channel>
<item rdf:about="http://h1.us.test/a"><title>A</title><link>http://h1.us.test/a</link></item>
<item rdf:about="http://h1.us.test/b"><link>http://h1.us.test/b</link></item>
</rdf:RDF>`,
			links: []string{"http://h1.us.test/a", "http://h1.us.test/b"}},
		{name: "atom with xml:base", ct: "application/atom+xml", body: `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:base="http://h1.us.test/news/">
<link rel="self" href="feed.atom"/><link href="/"/>
<entry><title>1</title><link href="2026/1.html"/><link rel="edit" href="/edit/1"/><link rel="enclosure" href="1.mp3"/></entry>
<entry xml:base="archive/"><link rel="alternate" type="text/html" href="2.html"/><link rel="alternate" hreflang="fr" href="2.fr.html"/></entry>
<entry><link xml:base="http://h2.us.test/x/" href="3.html"/><id>urn:x</id></entry>
<entry><link rel="replies" href="/c"/></entry>
</feed>`,
			links: []string{"http://h1.us.test/news/2026/1.html", "http://h1.us.test/news/archive/2.html", "http://h1.us.test/news/archive/2.fr.html", "http://h2.us.test/x/3.html"}},
		{name: "atom, windows-1252 declared", ct: "application/atom+xml", body: "<?xml version=\"1.0\" encoding=\"windows-1252\"?>" +
			"<feed xmlns=\"http://www.w3.org/2005/Atom\"><entry><link href=\"/caf\xe9/\x93q\x94\"/></entry></feed>",
			links: []string{"http://h1.us.test/caf%C3%A9/%E2%80%9Cq%E2%80%9D"}},
		{name: "the Content-Type's charset wins over the declaration", ct: "application/rss+xml; charset=ISO-8859-1",
			body:  "<?xml version=\"1.0\" encoding=\"utf-8\"?><rss><channel><item><link>/\xe9</link></item></channel></rss>",
			links: []string{"http://h1.us.test/%C3%A9"}},
		{name: "a byte order mark", body: "\xef\xbb\xbf<rss><channel><item><link>/bom</link></item></channel></rss>",
			links: []string{"http://h1.us.test/bom"}},
		{name: "atom without its namespace, and the old one", body: `<feed><entry><link href="/a"/></entry></feed>` + ``,
			links: []string{"http://h1.us.test/a"}},
		{name: "atom 0.3", body: `<feed version="0.3" xmlns="http://purl.org/atom/ns#"><entry><link rel="alternate" type="text/html" href="/old"/></entry></feed>`,
			links: []string{"http://h1.us.test/old"}},
		{name: "foreign elements named link are not links", body: `<rss xmlns:atom="http://www.w3.org/2005/Atom"><channel><atom:link rel="self" href="/self"/>` +
			`<item><atom:link href="/atom-in-rss"/><x:link xmlns:x="urn:x">/x</x:link><link>/real</link></item></channel></rss>`,
			links: []string{"http://h1.us.test/real"}},
		{name: "lenient: html entities, unknown entities, a missing end tag", body: `<rss><channel><item><link>/a?x=1&amp;y=2&nbsp;z</link></item><item><link>/b&bogus;</link></item></channel>`,
			links: []string{"http://h1.us.test/a?x=1&y=2%C2%A0z", "http://h1.us.test/b&bogus;"}, err: "unexpected EOF"},
		{name: "duplicates once, the feed itself dropped, bad links counted", body: `<rss><channel><item><link>/a</link><guid>http://h1.us.test/a</guid></item>` +
			`<item><link>feed.xml</link></item><item><link>mailto:x@y</link></item></channel></rss>`,
			links: []string{"http://h1.us.test/a"}},
		{name: "broken xml keeps the links before", body: "<rss><channel><item><link>/a</link></item>\n<item><link>/b</link></item>\n<item <link>/c</link></item>",
			links: []string{"http://h1.us.test/a", "http://h1.us.test/b"}, err: "line 3, column 7"},
		{name: "not a feed", body: `<urlset><url><loc>/x</loc></url></urlset>`, err: "root element <urlset>", notFeed: true},
		{name: "html is not a feed", body: `<!DOCTYPE html><html><a href="/x">`, err: "not a feed", notFeed: true},
		{name: "empty", body: ``, err: "no root element", notFeed: true},
	} {
		x := NewExtractor(n, nil, 0)
		p, err := x.ExtractFeed(feedURL, c.ct, []byte(c.body))
		if !slices.Equal(p.Links, c.links) {
			t.Errorf("%s: links\n got %q\nwant %q", c.name, p.Links, c.links)
		}
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: error %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.err)
		case errors.Is(err, ErrNotFeed) != c.notFeed:
			t.Errorf("%s: error %v, ErrNotFeed %v", c.name, err, c.notFeed)
		}
	}
}

// TestExtractFeedScopeAndCap: a feed's links are scoped and capped as a
// page's are.
func TestExtractFeedScopeAndCap(t *testing.T) {
	var b strings.Builder
	b.WriteString(`<feed xmlns="http://www.w3.org/2005/Atom">`)
	for i := range 20 {
		fmt.Fprintf(&b, `<entry><link href="/e/%d"/></entry><entry><link href="http://other.test/%d"/></entry>`, i, i)
	}
	b.WriteString(`</feed>`)
	n := urlnorm.New(urlnorm.Options{})
	x := NewExtractor(n, &urlnorm.Scope{HostSuffixes: []string{"us.test"}}, 5)
	p, err := x.ExtractFeed(feedURL, "", []byte(b.String()))
	want := []string{"http://h1.us.test/e/0", "http://h1.us.test/e/1", "http://h1.us.test/e/2", "http://h1.us.test/e/3", "http://h1.us.test/e/4"}
	if err != nil || !p.Truncated || !slices.Equal(p.Links, want) || p.OutOfScope != 4 {
		t.Fatalf("links %q, truncated %v, out of scope %d, %v", p.Links, p.Truncated, p.OutOfScope, err)
	}
	if p, err := x.ExtractFeed("not a url", "", []byte(b.String())); err == nil || p.Err == nil || len(p.Links) != 0 {
		t.Fatalf("bad feed URL: %v, %+v", err, *p)
	}
}

func TestIsFeedRoot(t *testing.T) {
	for _, c := range []struct {
		body string
		want bool
	}{
		{`<rss version="2.0">`, true},
		{`<?xml version="1.0"?>` + "\n" + `<?xml-stylesheet href="s.xsl"?><!-- a comment <urlset> --><feed xmlns="http://www.w3.org/2005/Atom">`, true},
		{"\xef\xbb\xbf  <rdf:RDF xmlns:rdf=\"x\">", true},
		{`<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" "x"><rss>`, true},
		{`<!DOCTYPE feed [ <!ENTITY a "<b>"> ]><feed/>`, true},
		{`<RDF>`, true},
		{`<urlset>`, false},
		{`<feeds>`, false},
		{`<html><rss>`, false},
		{`<RSS>`, false},
		{`<!-- unterminated <rss>`, false},
		{`rss`, false},
		{``, false},
		{`<`, false},
		{`<?xml`, false},
		{`<!DOCTYPE [`, false},
	} {
		if got := IsFeedRoot([]byte(c.body)); got != c.want {
			t.Errorf("IsFeedRoot(%q) = %v, want %v", c.body, got, c.want)
		}
	}
}

// FuzzExtractFeed: ExtractFeed never panics, and its links are
// normalised, in scope, each once, not the feed itself and within the cap.
func FuzzExtractFeed(f *testing.F) {
	for _, s := range []string{
		`<rss><channel><item><link>/a</link><guid>http://h1.us.test/b</guid></item></channel></rss>`,
		`<feed xmlns="http://www.w3.org/2005/Atom" xml:base="/x/"><entry xml:base="y/"><link href="z"/></entry></feed>`,
		`<rdf:RDF xmlns:rdf="r" xmlns="http://purl.org/rss/1.0/"><item><link>/r</link></item></rdf:RDF>`,
		"<?xml version=\"1.0\" encoding=\"windows-1252\"?><rss><channel><item><link>/\xe9</link></item></channel></rss>",
		`<rss><item><link>/a&amp;&bogus;&#0;</link><guid isPermaLink="true">x</guid>`, `<feed><entry><link href="javascript:x"/>`,
		`<rss><channel><item><link xml:base="javascript:x">y</link></item></channel></rss>`, `<html>`, ``,
	} {
		f.Add(s, "")
	}
	f.Add(`<rss><channel><item><link>/a</link></item></channel></rss>`, "application/rss+xml; charset=shift_jis")
	n := urlnorm.New(urlnorm.Options{})
	scope := &urlnorm.Scope{}
	x := NewExtractor(n, scope, 20)
	f.Fuzz(func(t *testing.T, body, ct string) {
		p, _ := x.ExtractFeed(feedURL, ct, []byte(body))
		if len(p.Links) > 20 {
			t.Fatalf("%d links", len(p.Links))
		}
		seen := map[string]bool{}
		for _, l := range p.Links {
			if seen[l] || l == feedURL {
				t.Fatalf("link %q repeated or the feed itself", l)
			}
			seen[l] = true
			if again, err := n.NormalizeString(l); err != nil || again != l || !scope.AllowString(l) {
				t.Fatalf("link %q not normalised (%q, %v) or out of scope", l, again, err)
			}
		}
	})
}

// TestExtractFeedAfterLegacyPage: a feed read after a page in another
// encoding writes its links' queries in UTF-8, not in that page's
// encoding (the Extractor's base forgets the page).
func TestExtractFeedAfterLegacyPage(t *testing.T) {
	x := NewExtractor(nil, nil, 0)
	page := x.Extract("http://h.test/p.html", "text/html; charset=windows-1251", []byte("<a href=\"/x?q=\xe4\">"))
	if len(page.Links) != 1 || page.Links[0] != "http://h.test/x?q=%E4" {
		t.Fatalf("the windows-1251 page's link is %q, want the query in windows-1251", page.Links)
	}
	feed := `<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><item><link>http://h.test/y?q=д</link></item></channel></rss>`
	p, err := x.ExtractFeed("http://h.test/feed.rss", "application/rss+xml", []byte(feed))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Links) != 1 || p.Links[0] != "http://h.test/y?q=%D0%B4" {
		t.Errorf("the feed's link is %q, want its query in UTF-8 (%%D0%%B4)", p.Links)
	}
}

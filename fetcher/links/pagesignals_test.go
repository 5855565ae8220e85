package links

import (
	"slices"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// TestExtractSignals: rel=canonical in the head, meta refresh, feed
// discovery and frames, as links and (the canonical) in Page.Canonical.
func TestExtractSignals(t *testing.T) {
	const d = "http://h1.us.test/dir/"
	for _, c := range []struct {
		name      string
		body      string
		links     []string
		canonical string
	}{
		{name: "canonical in the head", body: `<html><head><title>t</title><link rel="canonical" href="/c.html"></head><body><a href="x">`,
			links: []string{"http://h1.us.test/c.html", d + "x"}, canonical: "http://h1.us.test/c.html"},
		{name: "canonical: rel tokens, any case, against the base", body: `<base href="/b/"><LINK REL="Alternate CANONICAL" HREF="c">`,
			links: []string{"http://h1.us.test/b/c"}, canonical: "http://h1.us.test/b/c"},
		{name: "canonical: the first one only", body: `<link rel=canonical href=/one><link rel=canonical href=/two>`,
			links: []string{"http://h1.us.test/one"}, canonical: "http://h1.us.test/one"},
		{name: "canonical to the page itself: none, and no link", body: `<link rel=canonical href="page.html#top"><a href=x>`,
			links: []string{d + "x"}},
		{name: "canonical after the head ends at </head>", body: `<head></head><link rel=canonical href=/late>`},
		{name: "canonical after <body>", body: `<body><link rel=canonical href=/late>`},
		{name: "canonical after a tag that cannot be in a head", body: `<head><div></div><link rel=canonical href=/late></head>`},
		{name: "canonical after an <a> or an <iframe>", body: `<a href=x></a><link rel=canonical href=/late><iframe src=f></iframe>`,
			links: []string{d + "x", d + "f"}},
		{name: "the head stays open through its own tags", body: `<!DOCTYPE html><html><head><meta charset=utf-8><title>x</title><style>a{}</style>` +
			`<script>var a = "<div>";</script><noscript><link rel=stylesheet href=s.css></noscript><template></template><base href="/"><link rel=canonical href=/c>`,
			links: []string{"http://h1.us.test/c"}, canonical: "http://h1.us.test/c"},
		{name: "canonical rel nofollow", body: `<link rel="canonical nofollow" href=/c>`},
		{name: "canonical under meta nofollow: recorded, not a link", body: `<meta name=robots content=nofollow><link rel=canonical href=/c><a href=x>`,
			canonical: "http://h1.us.test/c"},
		{name: "canonical without href", body: `<link rel=canonical><link rel=canonical href=/c>`,
			links: []string{"http://h1.us.test/c"}, canonical: "http://h1.us.test/c"},
		{name: "unusable canonical", body: `<link rel=canonical href="javascript:x"><a href=x>`, links: []string{d + "x"}},
		{name: "meta refresh", body: `<meta http-equiv="refresh" content="5; url=/next"><a href=x>`,
			links: []string{"http://h1.us.test/next", d + "x"}},
		{name: "meta refresh: any case, quoted, in the body, in noscript", body: `<body><noscript><META HTTP-EQUIV="Refresh" CONTENT="0; URL='nojs.html'"></noscript>`,
			links: []string{d + "nojs.html"}},
		{name: "meta refresh: the first one only", body: `<meta http-equiv=refresh content="0;url=/a"><meta http-equiv=refresh content="0;url=/b">`,
			links: []string{"http://h1.us.test/a"}},
		{name: "meta refresh: to itself, without a URL, or bad", body: `<meta http-equiv=refresh content="30">`},
		{name: "meta refresh to the page itself dropped", body: `<meta http-equiv=refresh content="30; url=page.html">`},
		{name: "meta refresh that does not parse", body: `<meta http-equiv=refresh content="soon; url=/x">`},
		{name: "meta refresh with nofollow", body: `<meta name=robots content=nofollow><meta http-equiv=refresh content="0;url=/a">`},
		{name: "feeds named by link rel=alternate", body: `<link rel="alternate" type="application/rss+xml" href="/feed.rss"><link rel=alternate type="Application/Atom+XML; charset=utf-8" href="atom.xml">` +
			`<link rel="alternate" type="application/json" href="/feed.json"><link rel="alternate" hreflang="fr" href="/fr/"><link rel="feed" href="/f"><link rel="alternate nofollow" type="application/rss+xml" href="/nf.rss">`,
			links: []string{"http://h1.us.test/feed.rss", d + "atom.xml"}},
		{name: "frames with meta nofollow", body: `<meta name=robots content=nofollow><iframe src=/f></iframe><frame src=/g>`},
		{name: "frames after meta nofollow in the body too", body: `<iframe src=/f></iframe><meta name=robots content=nofollow><frame src=/g>`},
		{name: "frames, a canonical and a refresh to one URL: once", body: `<link rel=canonical href=/p><meta http-equiv=refresh content="0;url=/p"><iframe src="/p"></iframe>`,
			links: []string{"http://h1.us.test/p"}, canonical: "http://h1.us.test/p"},
	} {
		x := NewExtractor(urlnorm.New(urlnorm.Options{}), nil, 0)
		p := x.Extract(pageURL, "", []byte(c.body))
		if !slices.Equal(p.Links, c.links) || p.Canonical != c.canonical {
			t.Errorf("%s:\n got links %q, canonical %q\nwant links %q, canonical %q", c.name, p.Links, p.Canonical, c.links, c.canonical)
		}
	}
}

// TestExtractSignalsScopeAndCap: a canonical out of scope is no
// canonical; canonical, refresh, feed and frame links count toward the
// cap as <a> links do.
func TestExtractSignalsScopeAndCap(t *testing.T) {
	n := urlnorm.New(urlnorm.Options{})
	x := NewExtractor(n, &urlnorm.Scope{HostSuffixes: []string{"us.test"}}, 0)
	p := x.Extract(pageURL, "", []byte(`<link rel=canonical href="http://other.test/c"><a href=x>`))
	if p.Canonical != "" || p.OutOfScope != 1 || !slices.Equal(p.Links, []string{"http://h1.us.test/dir/x"}) {
		t.Errorf("canonical out of scope: %+v", *p)
	}
	capped := NewExtractor(n, nil, 2)
	for _, body := range []string{
		`<link rel=alternate type=application/rss+xml href=/1><meta http-equiv=refresh content="0;url=/2"><link rel=canonical href=/3>`,
		`<a href=/1><a href=/2><meta http-equiv=refresh content="0;url=/3">`,
		`<a href=/1><a href=/2><link rel=alternate type=application/rss+xml href=/3>`,
		`<a href=/1><a href=/2><iframe src=/3>`,
	} {
		p := capped.Extract(pageURL, "", []byte(body))
		if !p.Truncated || !slices.Equal(p.Links, []string{"http://h1.us.test/1", "http://h1.us.test/2"}) || p.Canonical != "" {
			t.Errorf("%s: links %q, truncated %v, canonical %q", body, p.Links, p.Truncated, p.Canonical)
		}
	}
	// State does not leak into the next page.
	x.Extract(pageURL, "", []byte(`<body><meta http-equiv=refresh content="0;url=/r"><link rel=canonical href=/c>`))
	p = x.Extract(pageURL, "", []byte(`<link rel=canonical href=/c><meta http-equiv=refresh content="0;url=/r">`))
	if p.Canonical != "http://h1.us.test/c" || len(p.Links) != 2 {
		t.Errorf("second page: %+v", *p)
	}
	if strings.Contains(p.Canonical, "#") {
		t.Errorf("canonical %q keeps a fragment", p.Canonical)
	}
}

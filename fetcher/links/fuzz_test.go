package links

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		``, `<a href="x">`, `<base href="../b/"><a href="c">`, `<a href=/u1 rel=nofollow>`, `<meta name=robots content=none>`,
		`<a href="&amp;&#0;&#x110000;&lt">`, "<a href=\"\x00\xff\">", `<script><a href="/s"></script><a href="/t">`,
		`<noscript><a href=/n></noscript>`, `<area href="//other.test:8080/x">`, `<a href="HTTP://X.TEST:80/%7e/../a?sid=1#f">`,
		`<!-- <a href="/c"> --><a href='/q?a&b'>`, `<a href="#top">`, `<base href="javascript:x"><a href=y>`,
		strings.Repeat(`<a href="/p/`, 50), `<svg><a href="/svg"/></svg>`, `<a href=" http://h1.us.test/ ">`,
		`<link rel=canonical href=/c><meta http-equiv=refresh content="0; url='/r'"><iframe src=/i></iframe><frame src=/f>`,
		`<link rel="alternate canonical" type=application/rss+xml href=/feed><body><link rel=canonical href=/late>`,
		`<meta name=meridian content=nofollow><link rel=canonical href=page.html>`,
	} {
		f.Add(pageURL, []byte(s))
	}
	f.Add("https://h.test:8443/a/b?c", []byte(`<a href="d">`))
	n := urlnorm.New(urlnorm.Options{})
	scope := &urlnorm.Scope{}
	x := NewExtractor(n, scope, 50)
	x.SetRobotsAgent("meridian")
	req := NewExtractor(n, scope, 50) // with requisites: the same links, and embeds as clean
	req.SetRequisites(true)
	req.SetRobotsAgent("meridian")
	f.Fuzz(func(t *testing.T, page string, body []byte) {
		r := req.Extract(page, "", body)
		embeds := map[string]bool{}
		for _, l := range r.Embeds {
			if embeds[l] || l == page || len(embeds) >= 50 {
				t.Fatalf("embed %q repeated, the page itself or past the cap", l)
			}
			embeds[l] = true
			if again, err := n.NormalizeString(l); err != nil || again != l || !scope.AllowString(l) {
				t.Fatalf("embed %q not normalised (%q, %v) or out of scope", l, again, err)
			}
		}
		p := x.Extract(page, "", body)
		if !slices.Equal(r.Links, p.Links) {
			t.Fatalf("links with requisites %q, without %q", r.Links, p.Links)
		}
		if p.Err != nil {
			if len(p.Links) != 0 {
				t.Fatalf("error %v with %d links", p.Err, len(p.Links))
			}
			return
		}
		if len(p.Links) > 50 || (p.NoFollow && len(p.Links) > 0) {
			t.Fatalf("%d links, nofollow %v", len(p.Links), p.NoFollow)
		}
		if c := p.Canonical; c != "" {
			if c == page || !scope.AllowString(c) || !p.NoFollow && !slices.Contains(p.Links, c) {
				t.Fatalf("canonical %q is the page, out of scope or not among the links %q", c, p.Links)
			}
		}
		seen := map[string]bool{}
		for _, l := range p.Links {
			if seen[l] || l == page {
				t.Fatalf("link %q repeated or the page itself", l)
			}
			seen[l] = true
			b := store.NewBatch()
			b.UpsertCash(l, 0, 0)
			if _, err := b.Encode(); err != nil {
				t.Fatalf("link %q rejected by the store: %v", l, err)
			}
			if again, err := n.NormalizeString(l); err != nil || again != l {
				t.Fatalf("link %q not normalised: %q, %v", l, again, err)
			}
			if !scope.AllowString(l) {
				t.Fatalf("link %q out of scope", l)
			}
		}
		if p.Base != page {
			if again, err := n.NormalizeString(p.Base); err != nil || again != p.Base {
				t.Fatalf("base %q not normalised", p.Base)
			}
		}
	})
}

// TestPathological feeds inputs built to be slow or large and checks that
// each finishes within a generous time and keeps its bounds.
func TestPathological(t *testing.T) {
	const size = 1 << 20
	x := NewExtractor(urlnorm.New(urlnorm.Options{}), nil, 1000)
	longHref := `<a href="/` + strings.Repeat("x", size) + `">`
	var b strings.Builder
	b.WriteString("<a ")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `x%d="y" `, i)
	}
	manyAttrs := b.String() + `href="/last">`
	b.Reset()
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `<a href="/p/%d">`, i)
	}
	manyLinks := b.String()
	for _, c := range []struct {
		name      string
		body      string
		wantLinks int
	}{
		{"unclosed tags", strings.Repeat("<a href=", size/8), 0},
		{"nested", strings.Repeat("<div><span><b>", size/15), 0},
		{"long href", longHref + `<a href="/ok">`, 1},
		{"many attributes", manyAttrs, 1},
		{"many links", manyLinks, 1000},
		{"many duplicates", strings.Repeat(`<a href="/same">`, size/16), 1},
		{"entities", `<a href="` + strings.Repeat("&amp;&#x41;", size/11) + `">`, 0},
		{"open comment", "<!--" + strings.Repeat("<a href=/x>", size/11), 0},
		{"nul bytes", string(bytes.Repeat([]byte{0}, size)), 0},
		{"many bad links", strings.Repeat(`<a href="mailto:x">`, size/19), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			p := x.Extract(pageURL, "", []byte(c.body))
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
			if len(p.Links) != c.wantLinks {
				t.Errorf("%d links, want %d", len(p.Links), c.wantLinks)
			}
		})
	}
}

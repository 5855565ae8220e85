package fetcher

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// TestClassifyRequisites: with Options.PageRequisites, an HTML page's
// result has its embeds and a style sheet's (text/css, or no Content-Type
// and a .css path) its url() and @import references; other bodies (an
// image, a script, text/plain holding CSS) are not parsed. Off, no result
// has embeds. The Scope's SkipExts apply to embeds as to links.
func TestClassifyRequisites(t *testing.T) {
	const html = `<link rel=stylesheet href="/s.css"><img src="i.png" srcset="i2.png 2x"><a href="next.html">n</a>`
	const css = `@import "more.css"; body { background: url(/bg.gif) }`
	for _, c := range []struct {
		name, url, ct, body string
		embeds              []string
		links               []string
	}{
		{"html", "http://h1.cc.test/d/p.html", "text/html", html,
			[]string{"http://h1.cc.test/s.css", "http://h1.cc.test/d/i.png", "http://h1.cc.test/d/i2.png"}, []string{"http://h1.cc.test/d/next.html"}},
		{"css", "http://h1.cc.test/d/s.css", "text/css; charset=utf-8", css,
			[]string{"http://h1.cc.test/d/more.css", "http://h1.cc.test/bg.gif"}, nil},
		{"css without a content type", "http://h1.cc.test/d/t.CSS?v=2", "", css,
			[]string{"http://h1.cc.test/d/more.css", "http://h1.cc.test/bg.gif"}, nil},
		{"css as text/plain", "http://h1.cc.test/d/u.css", "text/plain", css, nil, nil},
		{"image", "http://h1.cc.test/i.png", "image/png", "\x89PNG url(x.png)", nil, nil},
		{"script", "http://h1.cc.test/j.js", "application/javascript", `x = "url(/y.png)"`, nil, nil},
	} {
		for _, on := range []bool{false, true} {
			f, err := New(Options{OnResult: func(*Result) {}, MaxLinks: 50, PageRequisites: on, Scope: &urlnorm.Scope{SkipExts: []string{}}})
			if err != nil {
				t.Fatal(err)
			}
			w := newWorker(context.Background(), f)
			w.ex.reset()
			w.ex.gotResponse, w.ex.status, w.ex.statusText = true, 200, "OK"
			w.ex.header = http.Header{}
			if c.ct != "" {
				w.ex.header.Set("Content-Type", c.ct)
			}
			w.ex.body = append(w.ex.body[:0], c.body...)
			r := &Result{Job: Job{URL: c.url}}
			w.fill(r)
			w.classify(r)
			want := c.embeds
			if !on {
				want = nil
			}
			if r.Status != crawl.StatusFetched || !slices.Equal(r.Embeds, want) || !slices.Equal(r.Links, c.links) {
				t.Errorf("%s, requisites %v: %v, embeds %q, links %q; want embeds %q, links %q", c.name, on, r.Status, r.Embeds, r.Links, want, c.links)
			}
		}
	}
	// The default scope skips images and style sheets: embeds included.
	f, err := New(Options{OnResult: func(*Result) {}, PageRequisites: true})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(context.Background(), f)
	w.ex.reset()
	w.ex.gotResponse, w.ex.status, w.ex.statusText = true, 200, "OK"
	w.ex.header = http.Header{"Content-Type": {"text/html"}}
	w.ex.body = append(w.ex.body[:0], html...)
	r := &Result{Job: Job{URL: "http://h1.cc.test/d/p.html"}}
	w.fill(r)
	w.classify(r)
	if len(r.Embeds) != 0 {
		t.Errorf("default scope: embeds %q, want none (SkipExts)", r.Embeds)
	}
}

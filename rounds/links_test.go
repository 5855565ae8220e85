package rounds

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestLinksRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		page  string
		links []string
	}{
		{"http://a.test/x", []string{"http://a.test/", "http://a.test/p?q=1", "https://a.test/s", "http://b.test/", "http://a.test:8080/y"}},
		{"http://a.test:8080/x", []string{"http://a.test:8080/y", "http://a.test/y", "http://a.test:80801/z"}},
		{"http://h.test/", []string{"http://h.test", "http://h.testx/", "http://h.test/a/b"}},
	} {
		e := linkEntry{url: tc.page, n: len(tc.links), links: appendLinks(nil, origin(tc.page), tc.links)}
		if got := e.decodeLinks(); !slices.Equal(got, tc.links) {
			t.Errorf("%s: links %q, want %q", tc.page, got, tc.links)
		}
	}
}

// TestLinkStoreKeepsHeaviest: within its budget the store keeps the pages
// of most weight, and picks the ones owed the most.
func TestLinkStoreKeepsHeaviest(t *testing.T) {
	links := []string{"http://a.test/1", "http://a.test/2"}
	one := int64(len("http://a.test/p00")+len(appendLinks(nil, "http://a.test", links))) + linkEntryOverhead
	s := newLinkStore(5 * one)
	for i := range 10 {
		s.offer(fmt.Sprintf("http://a.test/p%02d", i), 1, links, float64(i))
	}
	if n, b := s.size(); n != 5 || b != 5*one {
		t.Fatalf("store holds %d pages, %d bytes; want 5, %d", n, b, 5*one)
	}
	for i := range 10 {
		_, ok := s.byURL[fmt.Sprintf("http://a.test/p%02d", i)]
		if ok != (i >= 5) {
			t.Errorf("page %d (weight %d) kept: %v", i, i, ok)
		}
	}
	// A lighter page does not displace a heavier one.
	s.offer("http://a.test/light", 1, links, 0.5)
	if _, ok := s.byURL["http://a.test/light"]; ok {
		t.Error("a page lighter than all kept was stored")
	}
	s.credit([]target{{url: "http://a.test/p07", credit: credit{cash: 2.5}}, {url: "http://a.test/p05", credit: credit{cash: 0.5}},
		{url: "http://a.test/p09", credit: credit{cash: 1.5}}, {url: "http://a.test/p01", credit: credit{cash: 9}}}, 0.5) // p01 is not stored: ignored
	got := s.pick(2)
	if len(got) != 2 || got[0].url != "http://a.test/p07" || got[1].url != "http://a.test/p09" || !slices.Equal(got[0].links, links) || got[0].depth != 1 {
		t.Fatalf("pick(2) = %+v", got)
	}
	if got := s.pick(5); len(got) != 1 || got[0].url != "http://a.test/p05" {
		t.Fatalf("second pick = %+v, want only p05 (the others were reset)", got)
	}
	// A revisit's weight reorders eviction.
	s.visited("http://a.test/p05", 100)
	s.offer("http://a.test/new", 1, links, 50)
	if _, ok := s.byURL["http://a.test/p05"]; !ok {
		t.Error("p05, weight 100 after its revisit, was evicted")
	}
	if _, ok := s.byURL["http://a.test/p06"]; ok {
		t.Error("p06, the lightest, was kept")
	}
	s.forget("http://a.test/new")
	if n, _ := s.size(); n != 4 {
		t.Fatalf("%d pages after forget, want 4", n)
	}
	var nilStore *linkStore
	nilStore.offer("http://a.test/", 0, links, 1)
	nilStore.credit([]target{{url: "http://a.test/"}}, 1)
	if nilStore.pick(3) != nil {
		t.Fatal("a nil store picked pages")
	}
}

// FuzzLinks: packing a page's absolute links and unpacking them gives them
// back, whatever the page's origin.
func FuzzLinks(f *testing.F) {
	f.Add("http://a.test/x", "http://a.test/\nhttp://b.test/y\nhttp://a.test:81/")
	f.Add("https://a.test:8443/", "https://a.test:8443/a?b\nhttps://a.test:8443")
	f.Fuzz(func(t *testing.T, page, list string) {
		var links []string
		for _, l := range strings.Split(list, "\n") {
			if strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") {
				links = append(links, l)
			}
		}
		e := linkEntry{url: page, n: len(links), links: appendLinks(nil, origin(page), links)}
		if got := e.decodeLinks(); !slices.Equal(got, links) {
			t.Fatalf("page %q: links %q, want %q", page, got, links)
		}
	})
}

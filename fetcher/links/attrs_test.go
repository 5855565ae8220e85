package links

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// tokenizerAttrs returns the attributes of every start tag of s as the
// Tokenizer's TagAttr gives them, and as attrScanner does (nil where the
// scanner declines the tag).
func scanBoth(s []byte) (want, got []string) {
	z := html.NewTokenizer(bytes.NewReader(s))
	for range 10_000 {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		sc, ok := newAttrScanner(z.Raw())
		var g []string
		seen := map[string]bool{}
		for ok {
			k, v, more := sc.next()
			if !more {
				break
			}
			lk := bytes.Clone(k) // ASCII lower-casing, as the Tokenizer's
			for i, c := range lk {
				if c >= 'A' && c <= 'Z' {
					lk[i] = c + 'a' - 'A'
				}
			}
			key := string(lk)
			if !seen[key] { // the Tokenizer keeps the first of repeated names
				seen[key] = true
				g = append(g, fmt.Sprintf("%s=%q", key, v))
			}
		}
		var w []string
		for {
			k, v, more := z.TagAttr()
			if k != nil {
				w = append(w, fmt.Sprintf("%s=%q", k, v))
			}
			if !more {
				break
			}
		}
		if ok {
			want = append(want, strings.Join(w, " "))
			got = append(got, strings.Join(g, " "))
		}
	}
	return want, got
}

func TestAttrScanner(t *testing.T) {
	for _, s := range []string{
		`<a href="x" rel='nofollow'>`, `<a href=x rel=nofollow>`, `<a HREF = "x" REL = y >`, `<a href="x"href="y">`,
		`<a =x href=y>`, `<a / href=/p/ />`, `<a href=x/>`, `<a href="a>b" title='c"d'>`, `<a href>`, `<a href=>`,
		`<a href= >`, "<a\thref\n=\f\"x\">", `<a href="x" href="y" HREF="z">`, `<a ==x>`, `<a x=1 =y href=2>`,
		`<a href='x`, `<a/href=x>`, `<a	/ / / href="x">`, `<A HREF="/p/1.html" REL="NOFOLLOW">`,
	} {
		want, got := scanBoth([]byte(s))
		if len(want) == 0 {
			continue // an unterminated tag: no token
		}
		if fmt.Sprint(want) != fmt.Sprint(got) {
			t.Errorf("%q: scanner %q, tokenizer %q", s, got, want)
		}
	}
	if _, ok := newAttrScanner([]byte(`<a href="&amp;">`)); ok {
		t.Error("scanner accepted a tag with an entity")
	}
}

// FuzzAttrScanner checks attrScanner against Tokenizer.TagAttr.
func FuzzAttrScanner(f *testing.F) {
	for _, s := range []string{`<a href="x" rel='nofollow'>`, `<a =x href=y/>`, "<a\thref\n=\f\"x\" / >", `<meta name=robots content="a b">`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		want, got := scanBoth(s)
		if fmt.Sprint(want) != fmt.Sprint(got) {
			t.Fatalf("%q: scanner %q, tokenizer %q", s, got, want)
		}
	})
}

func TestDedup(t *testing.T) {
	var d dedup
	for round := range 3 {
		d.reset()
		n := 10 + round*1000 // grows past the initial size
		for i := range n {
			h := uint64(i) * 0x9e3779b97f4a7c15
			if _, ok := d.lookup(h); ok {
				t.Fatalf("round %d: %d found before insert", round, i)
			}
			d.insert(h, int32(i))
		}
		for i := range n {
			if idx, ok := d.lookup(uint64(i) * 0x9e3779b97f4a7c15); !ok || idx != int32(i) {
				t.Fatalf("round %d: %d → %d, %v", round, i, idx, ok)
			}
		}
	}
	d.gen = ^uint32(0) // the next reset wraps
	d.reset()
	if _, ok := d.lookup(0); ok || d.gen != 1 {
		t.Fatalf("after wrap: gen %d, stale entry found %v", d.gen, ok)
	}
}

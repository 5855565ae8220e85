package simhash

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// prose returns n words of deterministic text drawn from a vocabulary of
// made-up words, different for every seed.
func prose(seed uint64, n int) string {
	syll := []string{"ka", "lo", "mi", "ren", "to", "sa", "vel", "qu", "dor", "an", "is", "pe", "tra", "gu", "os", "ny"}
	var b strings.Builder
	s := seed*0x9e3779b97f4a7c15 + 1
	for i := range n {
		if i > 0 {
			if i%11 == 0 {
				b.WriteString(". ")
			} else {
				b.WriteByte(' ')
			}
		}
		s = mix(s + 0x9e3779b97f4a7c15)
		for k := range 1 + int(s%3) {
			b.WriteString(syll[s>>(8+4*k)&15])
		}
	}
	return b.String()
}

// page wraps body text in a page with the given navigation, head and foot.
func page(nav, head, text, foot string) []byte {
	return []byte(`<!DOCTYPE html><html><head><title>` + head + `</title>
<script>var tracker = "` + head + `";</script><style>p { color: red }</style></head>
<body><nav>` + nav + `</nav><h1>An article</h1><p>` + text + `</p><footer>` + foot + `</footer></body></html>`)
}

func mustOf(t *testing.T, body []byte) uint64 {
	t.Helper()
	fp, ok := Of(body)
	if !ok {
		t.Fatalf("no fingerprint for %.200q", body)
	}
	return fp
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b uint64
		want int
	}{
		{0, 0, 0}, {0, 1, 1}, {0, ^uint64(0), 64}, {0xf0, 0x0f, 8}, {1 << 63, 1, 2},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%#x, %#x) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestFingerprintNearDuplicates compares an article page with variants of
// it: the same text with other boilerplate is within K bits, other text is
// far.
func TestFingerprintNearDuplicates(t *testing.T) {
	text := prose(1, 600)
	nav := `<a href="/">Home</a> | <a href="/news">News</a> | <a href="/about">About us</a>`
	orig := page(nav, "Article", text, "Posted 2026-03-14 10:22, session 8f3a9c2e11d0")
	for _, c := range []struct {
		name   string
		body   []byte
		lo, hi int // the distance to orig must be in [lo, hi]
	}{
		{"identical", page(nav, "Article", text, "Posted 2026-03-14 10:22, session 8f3a9c2e11d0"), 0, 0},
		{"other date and session id", page(nav, "Article", text, "Posted 2027-11-01 23:59, session 0b77e1aa42c9"), 0, 0},
		{"other navigation", page(`<a href="/print?sid=1">Back to the article</a> · <a href="/">Mirror home page</a> · <a href="/x">Contact the mirror's webmaster</a>`, "Article", text, "Posted 2026-03-14 10:22, session 8f3a9c2e11d0"), 0, K}, // "·" is a word
		{"other title, script and style", page(nav, "Print: Article", text, "Posted 2026-03-14 10:22, session 8f3a9c2e11d0"), 0, 0},
		{"upper case", page(nav, "Article", strings.ToUpper(text), "Posted 2026-03-14 10:22, session 8f3a9c2e11d0"), 0, 0},
		{"other spacing and inline tags", page(nav, "Article", strings.ReplaceAll(text, ". ", ".\n  <span class=s>")+"</span>", "Posted 2026-03-14 10:22, session 8f3a9c2e11d0"), 0, 0},
		{"a comment and a noscript", page(nav, "Article", text+"<!-- rendered by node 7 --><noscript>enable scripts to see the comments</noscript>", "Posted 2026-03-14 10:22, session 8f3a9c2e11d0"), 0, 0},
		{"printer-friendly footer", page(nav, "Article", text, "Printer friendly version, printed 2026-03-15"), 0, K},
		{"one sentence changed", page(nav, "Article", strings.Replace(text, text[1000:1040], "a wholly other phrase", 1), "Posted 2026-03-14 10:22, session 8f3a9c2e11d0"), 0, K},
		{"another article", page(nav, "Article", prose(2, 600), "Posted 2026-03-14 10:22, session 8f3a9c2e11d0"), 16, 64},
		{"a paragraph added", page(nav, "Article", text+"</p><p>Related: the same story in other words", "Posted 2026-03-14 10:22, session 8f3a9c2e11d0"), 0, K},
		{"half the article", page(nav, "Article", text[:len(text)/2], "Posted 2026-03-14 10:22, session 8f3a9c2e11d0"), 8, 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Distance(mustOf(t, orig), mustOf(t, c.body))
			if d < c.lo || d > c.hi {
				t.Errorf("distance %d, want [%d, %d]", d, c.lo, c.hi)
			}
		})
	}
}

// TestFingerprintTooShort: pages with fewer than MinShingles shingles of
// visible text have no fingerprint, whatever else they hold.
func TestFingerprintTooShort(t *testing.T) {
	words := func(n int) string { return prose(3, n) }
	for _, c := range []struct {
		name string
		body string
		ok   bool
	}{
		{"empty", "", false},
		{"not html", "\x00\x01\x02", false},
		{"404 page", "<html><body><h1>404 Not Found</h1><p>nginx</p></body></html>", false},
		{"redirect stub", `<html><body>Moved <a href="/x">here</a></body></html>`, false},
		{"long script", "<script>" + words(500) + "</script><p>short</p>", false},
		{"long link list", "<ul><li><a href=/a>" + strings.Repeat(words(20)+"</a><li><a href=/b>", 20) + "</a></ul>", false},
		{"one word short", "<p>" + words(MinShingles+Shingle-2) + "</p>", false},
		{"just enough", "<p>" + words(MinShingles+Shingle-1) + "</p>", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, ok := Of([]byte(c.body)); ok != c.ok {
				t.Errorf("ok = %v, want %v", ok, c.ok)
			}
		})
	}
}

// TestWords checks what counts as a word: ASCII letters and digits and
// non-ASCII bytes, case folded, words with digits all alike; every tag
// ends a word.
func TestWords(t *testing.T) {
	base := prose(4, 40) + " "
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"Café au LAIT", "café au lait", true},
		{"naïve façade", "naive facade", false},
		{"room 101 on 2026-03-14", "room 7 on 1999", true},
		{"room 101", "room A", false},
		{"page 12 13 of 14", "page 7 of 2", true},
		{"one,two;three", "one two three", true},
		{"fish &amp; chips", "fish & chips", true},
		{"un<b>break</b>able", "un break able", true},
		{"un<b>break</b>able", "unbreakable", false},
	} {
		fa := mustOf(t, []byte("<p>"+base+c.a+" "+base+"</p>"))
		fb := mustOf(t, []byte("<p>"+base+c.b+" "+base+"</p>"))
		if (fa == fb) != c.same {
			t.Errorf("%q and %q: same fingerprint %v, want %v", c.a, c.b, fa == fb, c.same)
		}
	}
}

// TestTokenInExtractorLoop feeds the hasher from a loop like the link
// extractor's, which parses <noscript> as markup and reads tag attributes:
// the fingerprint is Page's.
func TestTokenInExtractorLoop(t *testing.T) {
	text := prose(5, 300)
	body := []byte(`<html><head><title>t</title><noscript><p>` + prose(6, 50) + `<a href="/n">no</a></p></noscript></head><body>
<template><p>` + prose(7, 50) + `</p><template>nested</template><p>still hidden</p></template>
<p>` + text + ` <a href="/a" rel="x">anchor words</a> ` + text[:200] + `</p><script>if (a < b) { document.write("</p>") }</script></body></html>`)
	want, ok := Of(body)
	if !ok {
		t.Fatal("no fingerprint")
	}
	var h Hasher
	h.Reset()
	z := html.NewTokenizer(bytes.NewReader(body))
	hrefs := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		h.Token(z, tt)
		if tt == html.StartTagToken {
			name, hasAttr := z.TagName()
			if string(name) == "noscript" {
				z.NextIsNotRawText()
			}
			for hasAttr {
				var k []byte
				k, _, hasAttr = z.TagAttr()
				if string(k) == "href" {
					hrefs++
				}
			}
		}
	}
	got, ok := h.Sum()
	if !ok || got != want {
		t.Fatalf("fed from the loop: %#x %v, Page: %#x", got, ok, want)
	}
	if hrefs != 2 {
		t.Fatalf("the loop read %d hrefs after Token, want 2", hrefs)
	}
	// The hidden text is hidden: the page without it has the same fingerprint.
	plain := []byte(`<p>` + text + ` ` + text[:200] + `</p>`)
	if fp := mustOf(t, plain); fp != want {
		t.Errorf("hidden text counted: %#x vs %#x", fp, want)
	}
}

// TestHasherIncremental: text fed in pieces, however cut, gives the
// fingerprint of the whole; Sum does not end the page; Reset starts anew.
func TestHasherIncremental(t *testing.T) {
	words := strings.Fields(prose(8, 200))
	for i := range words {
		switch i % 7 {
		case 1:
			words[i] = strings.ToUpper(words[i])
		case 2:
			words[i] += "Ünïcödé"
		case 3:
			words[i] = strings.Repeat(words[i], 4) // 8 bytes and more
		case 4:
			words[i] += "-v" + fmt.Sprint(i) + "!?"
		}
	}
	text := []byte(strings.Join(words, " \t"))
	var h Hasher
	h.Text(text)
	want, ok := h.Sum()
	if !ok {
		t.Fatal("no fingerprint")
	}
	for _, cut := range []int{1, 3, 7, 64, 1000} {
		h.Reset()
		for i := 0; i < len(text); i += cut {
			h.Text(text[i:min(i+cut, len(text))])
			if i == len(text)/2 {
				h.Sum()
			}
		}
		if got, _ := h.Sum(); got != want {
			t.Errorf("cut every %d bytes: %#x, want %#x", cut, got, want)
		}
	}
	h.Reset()
	h.Text(text[:50])
	h.Reset()
	h.Text(text)
	if got, _ := h.Sum(); got != want {
		t.Errorf("after Reset: %#x, want %#x", got, want)
	}
	if n := h.Shingles(); n < 200-Shingle+1 {
		t.Errorf("Shingles() = %d, want ≥ %d", n, 200-Shingle+1)
	}
}

func TestHasherAllocs(t *testing.T) {
	body := []byte("<html><body><p>" + prose(9, 3000) + "</p></body></html>")
	text := []byte(prose(9, 3000))
	var h Hasher
	h.Page(body) // warm the reader
	if a := testing.AllocsPerRun(20, func() {
		h.Reset()
		h.Text(text)
		if _, ok := h.Sum(); !ok {
			t.Fatal("no fingerprint")
		}
	}); a != 0 {
		t.Errorf("Text and Sum: %v allocations, want 0", a)
	}
}

func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{
		"", "<p>" + prose(1, 40) + "</p>", "<script>" + prose(1, 40), "<template><p>" + prose(2, 40),
		"<a>" + prose(3, 40), "<p>\xff\xfe café 東京 " + prose(4, 40) + "&amp;&#x41;&bogus;", "<noscript></noscript>" + prose(5, 30),
	} {
		f.Add([]byte(s))
	}
	var reused Hasher
	f.Fuzz(func(t *testing.T, body []byte) {
		a, okA := Of(body)
		b, okB := reused.Page(body)
		if a != b || okA != okB {
			t.Fatalf("Of %#x %v, a reused Hasher %#x %v", a, okA, b, okB)
		}
		if !okA && a != 0 {
			t.Fatalf("no fingerprint but %#x", a)
		}
		if okA != (reused.Shingles() >= MinShingles) {
			t.Fatalf("ok %v with %d shingles", okA, reused.Shingles())
		}
		// Text whole (8 bytes at a time) and byte by byte agree.
		reused.Reset()
		reused.Text(body)
		whole, okW := reused.Sum()
		reused.Reset()
		for i := range body {
			reused.Text(body[i : i+1])
		}
		if bytewise, okB := reused.Sum(); bytewise != whole || okB != okW {
			t.Fatalf("Text of the whole %#x %v, byte by byte %#x %v", whole, okW, bytewise, okB)
		}
	})
}

// ExampleHasher_Token shows a link extractor's loop feeding a Hasher.
func ExampleHasher_Token() {
	body := []byte("<html><body><p>" + prose(10, 100) + ` <a href="/next">next page</a></p></body></html>`)
	var h Hasher
	h.Reset()
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		h.Token(z, tt)
		// ... the extractor's own work on the token ...
	}
	fp, ok := h.Sum()
	want, _ := Of(body)
	fmt.Println(ok, fp == want)
	// Output: true true
}

// TestMaxShingles: only a page's first MaxShingles shingles count, so two
// pages that agree on them have one fingerprint whatever follows, and one
// shorter than that is read whole (a change in its last words shows).
func TestMaxShingles(t *testing.T) {
	words := func(n int, tag string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "w%c%c%s ", 'a'+i%26, 'a'+i/26%26, tag)
		}
		return b.String()
	}
	head := words(MaxShingles+10, "x")
	a, okA := Of([]byte("<p>" + head + words(500, "y") + "</p>"))
	b, okB := Of([]byte("<p>" + head + words(500, "z") + "</p>"))
	if !okA || !okB || a != b {
		t.Errorf("pages that agree on their first %d shingles: %016x, %016x", MaxShingles, a, b)
	}
	short := words(200, "x")
	c, _ := Of([]byte("<p>" + short + words(100, "y") + "</p>"))
	d, _ := Of([]byte("<p>" + short + words(100, "z") + "</p>"))
	if c == d {
		t.Error("pages of 300 words whose last 100 differ have one fingerprint")
	}
}

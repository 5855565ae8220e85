package urlnorm

import (
	"testing"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
)

// TestResolveDocument resolves references of documents in several
// encodings: the path percent-encoded from UTF-8, the query in the
// document's encoding ("percent-encode after encoding"), a character the
// encoding lacks as "%26%23" NNNN "%3B", ill-formed UTF-8 as U+FFFD. The
// expected bytes are written out by hand from the Encoding Standard's
// indexes (資料 is 8E91 97BF in Shift_JIS, and so on).
func TestResolveDocument(t *testing.T) {
	n := New(Options{})
	const base = "http://h.test/dir/page.html"
	for _, c := range []struct {
		name string
		enc  encoding.Encoding
		ref  string
		want string
	}{
		{"Shift_JIS", japanese.ShiftJIS, "/資料/?q=資料", "http://h.test/%E8%B3%87%E6%96%99/?q=%8E%91%97%BF"},
		{"Shift_JIS: a trail byte that is ASCII", japanese.ShiftJIS, "?q=表", "http://h.test/dir/page.html?q=%95%5C"},
		{"EUC-JP", japanese.EUCJP, "?q=資料", "http://h.test/dir/page.html?q=%BB%F1%CE%C1"},
		{"ISO-2022-JP: one escape a run, '#' escaped", japanese.ISO2022JP, "?q=資料x", "http://h.test/dir/page.html?q=%1B$B;qNA%1B(Bx"},
		{"ISO-2022-JP: fullwidth A is 0x23 0x41", japanese.ISO2022JP, "?q=Ａ", "http://h.test/dir/page.html?q=%1B$B%23A%1B(B"},
		{"ISO-2022-JP: NCR in ASCII mode", japanese.ISO2022JP, "?q=資€", "http://h.test/dir/page.html?q=%1B$B;q%1B(B%26%238364%3B"},
		{"windows-1251", charmap.Windows1251, "/новости/?q=новости", "http://h.test/%D0%BD%D0%BE%D0%B2%D0%BE%D1%81%D1%82%D0%B8/?q=%ED%EE%E2%EE%F1%F2%E8"},
		{"windows-1251: NCR", charmap.Windows1251, "?q=日本&r=д", "http://h.test/dir/page.html?q=%26%2326085%3B%26%2326412%3B&r=%E4"},
		{"windows-1251: an astral character's NCR", charmap.Windows1251, "?q=😀", "http://h.test/dir/page.html?q=%26%23128512%3B"},
		{"KOI8-R", charmap.KOI8R, "?q=новости", "http://h.test/dir/page.html?q=%CE%CF%D7%CF%D3%D4%C9"},
		{"GBK", simplifiedchinese.GBK, "?q=中文€", "http://h.test/dir/page.html?q=%D6%D0%CE%C4%80"},
		{"gb18030", simplifiedchinese.GB18030, "?q=中文€", "http://h.test/dir/page.html?q=%D6%D0%CE%C4%A2%E3"},
		{"Big5", traditionalchinese.Big5, "?q=中文", "http://h.test/dir/page.html?q=%A4%A4%A4%E5"},
		{"EUC-KR", korean.EUCKR, "?q=한국", "http://h.test/dir/page.html?q=%C7%D1%B1%B9"},
		{"ISO-8859-2", charmap.ISO8859_2, "/łódź?q=łódź", "http://h.test/%C5%82%C3%B3d%C5%BA?q=%B3%F3d%BC"},
		{"windows-1252", charmap.Windows1252, "?q=café€“", "http://h.test/dir/page.html?q=caf%E9%80%93"},
		{"escapes and ASCII kept", charmap.Windows1251, "?a=%D0%B4&b=д&c=%zz", "http://h.test/dir/page.html?a=%D0%B4&b=%E4&c=%25zz"},
		{"session parameters still stripped", charmap.Windows1251, "?sid=д&q=д", "http://h.test/dir/page.html?q=%E4"},
		{"an absolute reference", charmap.Windows1251, "http://other.test/д?q=д", "http://other.test/%D0%B4?q=%E4"},
		{"a network-path reference", charmap.Windows1251, "//other.test/?q=д", "http://other.test/?q=%E4"},
		{"ill-formed UTF-8 in the query", charmap.Windows1251, "?q=\xe3\x81z", "http://h.test/dir/page.html?q=%26%2365533%3Bz"},
		{"UTF-8 (nil)", nil, "/новости?q=д", "http://h.test/%D0%BD%D0%BE%D0%B2%D0%BE%D1%81%D1%82%D0%B8?q=%D0%B4"},
		{"UTF-8", unicode.UTF8, "?q=д", "http://h.test/dir/page.html?q=%D0%B4"},
		// Ill-formed UTF-8: one U+FFFD each maximal subpart (Unicode 3.9).
		{"a lone continuation byte", nil, "/a\x80b", "http://h.test/a%EF%BF%BDb"},
		{"a sequence cut short", nil, "/a\xe3\x81b", "http://h.test/a%EF%BF%BDb"},
		{"a sequence cut at the end", nil, "/a\xf0\x9f\x98", "http://h.test/a%EF%BF%BD"},
		{"an overlong form", nil, "/\xc0\xaf", "http://h.test/%EF%BF%BD%EF%BF%BD"},
		{"a surrogate", nil, "/\xed\xa0\x80", "http://h.test/%EF%BF%BD%EF%BF%BD%EF%BF%BD"},
		{"U+FFFD itself", nil, "/\xef\xbf\xbd", "http://h.test/%EF%BF%BD"},
		{"in the query", nil, "?q=\xff", "http://h.test/dir/page.html?q=%EF%BF%BD"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b Base
			if err := b.SetString(base); err != nil {
				t.Fatal(err)
			}
			b.SetDocument(c.enc)
			got, err := n.Resolve(nil, &b, []byte(c.ref))
			if err != nil || string(got) != c.want {
				t.Errorf("Resolve(%q) = %q, %v; want %q", c.ref, got, err, c.want)
			}
			checkNormalised(t, n, c.ref, string(got))
		})
	}
}

// TestBaseDocument checks that Set and Reset keep a Base's document,
// ClearDocument ends it, and a base that is no document's percent-encodes
// bytes as they stand.
func TestBaseDocument(t *testing.T) {
	n := New(Options{})
	var b Base
	resolve := func(ref string) string {
		t.Helper()
		got, err := n.Resolve(nil, &b, []byte(ref))
		if err != nil {
			t.Fatal(err)
		}
		return string(got)
	}
	if err := b.SetString("http://h.test/"); err != nil {
		t.Fatal(err)
	}
	if got, want := resolve("/\xe4?q=\xe4"), "http://h.test/%E4?q=%E4"; got != want {
		t.Errorf("no document: %q, want %q", got, want)
	}
	b.SetDocument(charmap.Windows1251)
	if err := b.SetString("http://h.test/x/"); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := b.SetString("http://h.test/y/"); err != nil {
		t.Fatal(err)
	}
	if got, want := resolve("д?q=д"), "http://h.test/y/%D0%B4?q=%E4"; got != want {
		t.Errorf("after Set and Reset: %q, want %q", got, want)
	}
	b.ClearDocument()
	if got, want := resolve("/\xe4?q=\xe4"), "http://h.test/%E4?q=%E4"; got != want {
		t.Errorf("after ClearDocument: %q, want %q", got, want)
	}
}

// TestResolveDocumentZeroAllocs: a UTF-8 document, or an all-ASCII query
// in another encoding, costs no allocation.
func TestResolveDocumentZeroAllocs(t *testing.T) {
	n := New(Options{})
	dst := make([]byte, 0, 512)
	for _, enc := range []encoding.Encoding{nil, charmap.Windows1251} {
		var b Base
		if err := b.SetString("http://h12.fr.test:8080/p/17.html"); err != nil {
			t.Fatal(err)
		}
		b.SetDocument(enc)
		for _, ref := range []string{"p/3.html", "/p/3.html?view=print", "http://h3.de.test:8080/p/1.html", "../x/./y?b=1"} {
			allocs := testing.AllocsPerRun(100, func() {
				dst, _ = n.Resolve(dst[:0], &b, []byte(ref))
			})
			if allocs != 0 {
				t.Errorf("%v: Resolve(%q): %v allocs, want 0", enc, ref, allocs)
			}
		}
	}
}

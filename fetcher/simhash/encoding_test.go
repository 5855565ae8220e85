package simhash

import (
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/fetcher/links"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// TestDecodedText checks that the text links.Extractor hands a Hasher is
// UTF-8 whatever the page's encoding: the same page in windows-1251 (or
// Shift_JIS, or UTF-16) and in UTF-8 gets the same fingerprint, where the
// raw bytes would give another. The legacy bytes are written out by hand
// (новости is ED EE E2 EE F1 F2 E8 in windows-1251, 資料 8E91 97BF in
// Shift_JIS).
func TestDecodedText(t *testing.T) {
	page := func(words []string) string {
		var b strings.Builder
		b.WriteString("<html><body><p>")
		for i := range 300 {
			b.WriteString(words[(i*7)%len(words)])
			b.WriteByte(' ')
			if i%40 == 39 {
				b.WriteString("</p><p>")
			}
		}
		b.WriteString("</p></body></html>")
		return b.String()
	}
	ru := []string{"новости", "города", "статья", "время", "жизнь", "день"}
	ru1251 := []string{"\xed\xee\xe2\xee\xf1\xf2\xe8", "\xe3\xee\xf0\xee\xe4\xe0", "\xf1\xf2\xe0\xf2\xfc\xff", "\xe2\xf0\xe5\xec\xff", "\xe6\xe8\xe7\xed\xfc", "\xe4\xe5\xed\xfc"}
	ja := []string{"資料", "東京", "検索"}
	jaSJIS := []string{"\x8e\x91\x97\xbf", "\x93\x8c\x8b\x9e", "\x8c\x9f\x8d\xf5"}

	x := links.NewExtractor(urlnorm.New(urlnorm.Options{}), nil, 0)
	var h Hasher
	x.SetText(&h)
	fingerprint := func(ct, body string) uint64 {
		t.Helper()
		h.Reset()
		if p := x.Extract("http://h.test/", ct, []byte(body)); p.Err != nil {
			t.Fatal(p.Err)
		}
		fp, ok := h.Sum()
		if !ok {
			t.Fatalf("%s: no fingerprint", ct)
		}
		return fp
	}
	for _, c := range []struct {
		name          string
		utf8, encoded string
		ct            string
	}{
		{"windows-1251", page(ru), page(ru1251), "text/html; charset=windows-1251"},
		{"windows-1251 by meta", page(ru), "<meta charset=windows-1251>" + page(ru1251), ""},
		{"Shift_JIS", page(ja), page(jaSJIS), "text/html; charset=Shift_JIS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := fingerprint("text/html; charset=utf-8", c.utf8)
			if got := fingerprint(c.ct, c.encoded); got != want {
				t.Errorf("fingerprint %016x, the UTF-8 page's %016x (%d bits apart)", got, want, Distance(got, want))
			}
			// Read as bytes (what the fetcher did before pages were
			// decoded), the page's words differ from the UTF-8 page's.
			raw, _ := Of([]byte(c.encoded))
			if raw == want {
				t.Errorf("the raw bytes' fingerprint equals the UTF-8 page's: the test proves nothing")
			}
		})
	}
	// A UTF-16 page, whose bytes hold no word at all undecoded.
	utf16 := []byte{0xff, 0xfe}
	for _, r := range page(ru) {
		utf16 = append(utf16, byte(r), byte(r>>8))
	}
	if got, want := fingerprint("", string(utf16)), fingerprint("text/html; charset=utf-8", page(ru)); got != want {
		t.Errorf("UTF-16 fingerprint %016x, the UTF-8 page's %016x", got, want)
	}
}

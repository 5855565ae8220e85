package links

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// TestSniff checks the order of the HTML standard's encoding sniffing (a
// BOM, the Content-Type, the meta prescan of the first 1,024 bytes, the
// default) and the details of each step.
func TestSniff(t *testing.T) {
	pad := strings.Repeat("x", prescanLen) // pushes what follows past the prescan
	for _, c := range []struct {
		name, ct, body string
		want           string // Encoding Standard name
		from           int
	}{
		// The order of the steps.
		{"UTF-8 BOM beats header and meta", "text/html; charset=windows-1251", "\xef\xbb\xbf<meta charset=shift_jis>", "UTF-8", fromBOM},
		{"UTF-16LE BOM beats header", "text/html; charset=utf-8", "\xff\xfe<\x00a\x00", "UTF-16LE", fromBOM},
		{"UTF-16BE BOM beats header", "text/html; charset=utf-16le", "\xfe\xff\x00<\x00a", "UTF-16BE", fromBOM},
		{"header beats meta", "text/html; charset=KOI8-R", `<meta charset="windows-1251">`, "KOI8-R", fromHeader},
		{"meta beats default", "text/html", `<meta charset="windows-1251"><p>caf` + "\xc3\xa9", "windows-1251", fromMeta},
		{"no header, no meta, valid UTF-8: UTF-8", "", "<p>caf\xc3\xa9</p>", "UTF-8", fromDefault},
		{"no header, no meta, not UTF-8: windows-1252", "", "<p>caf\xe9</p>", "windows-1252", fromDefault},
		{"no header, no meta, ASCII: windows-1252", "text/html", "<p>cafe</p>", "windows-1252", fromDefault},
		{"UTF-8 after the first 1,024 bytes counts for the default", "", "<p>" + pad + "caf\xc3\xa9", "UTF-8", fromDefault},

		// The Content-Type, as the MIME Sniffing standard parses it.
		{"header label is case-insensitive", "text/html; charset=Shift_JIS", "", "Shift_JIS", fromHeader},
		{"header quoted value", `text/html;charset="euc-kr"`, "", "EUC-KR", fromHeader},
		{"header quoted-pair", `text/html; charset="utf\-8"`, "<p>caf\xe9", "UTF-8", fromHeader},
		{"header first charset counts", "text/html; charset=koi8-r; charset=utf-8", "", "KOI8-R", fromHeader},
		{"header other parameters first", "text/html; q=1; charset=gbk", "", "GBK", fromHeader},
		{"header unknown label: meta", "text/html; charset=x-unknown", "<meta charset=windows-1251>", "windows-1251", fromMeta},
		{"header empty charset: meta", "text/html; charset=", "<meta charset=big5>", "Big5", fromMeta},
		{"header space before '=': no charset", "text/html; charset =koi8-r", "<meta charset=big5>", "Big5", fromMeta},
		{"header without a subtype: no charset", "text; charset=koi8-r", "", "windows-1252", fromDefault},
		{"header utf-16 is UTF-16LE", "text/html; charset=utf-16", "<\x00", "UTF-16LE", fromHeader},
		{"header latin1 is windows-1252", "text/html; charset=latin1", "", "windows-1252", fromHeader},
		{"header x-user-defined stands", "text/html; charset=x-user-defined", "", "x-user-defined", fromHeader},
		{"header iso-2022-kr is replacement", "text/html; charset=ISO-2022-KR", "", "replacement", fromHeader},

		// The meta prescan.
		{"meta http-equiv and content", "", `<meta http-equiv="Content-Type" content="text/html; charset=euc-jp">`, "EUC-JP", fromMeta},
		{"meta content before http-equiv", "", `<meta content="text/html;charset=big5" http-equiv=content-type>`, "Big5", fromMeta},
		{"meta content without http-equiv", "", `<meta content="text/html; charset=euc-jp"><p>x`, "windows-1252", fromDefault},
		{"meta content, http-equiv refresh", "", `<meta http-equiv=refresh content="0; charset=euc-jp"><p>x`, "windows-1252", fromDefault},
		{"meta content, quoted label", "", `<meta http-equiv=content-type content='text/html; charset="iso-8859-2"'>`, "ISO-8859-2", fromMeta},
		{"meta unknown label: the next meta", "", `<meta charset="no-such"><meta charset="gbk">`, "GBK", fromMeta},
		{"meta first charset attribute counts", "", `<meta charset=koi8-r charset=big5>`, "KOI8-R", fromMeta},
		{"meta failed charset attribute blocks content", "", `<meta charset=bogus http-equiv=content-type content="charset=koi8-r"><p>x`, "windows-1252", fromDefault},
		{"meta utf-16 is UTF-8", "", `<meta charset="UTF-16BE">`, "UTF-8", fromMeta},
		{"meta x-user-defined is windows-1252", "", `<meta charset=x-user-defined>`, "windows-1252", fromMeta},
		{"meta iso-2022-kr is replacement", "", `<meta charset=iso-2022-kr>`, "replacement", fromMeta},
		{"meta label with spaces", "", "<meta charset=' \tutf-8 '>", "UTF-8", fromMeta},
		{"meta with slash", "", `<meta/charset=koi8-r>`, "KOI8-R", fromMeta},
		{"upper-case META", "", `<META CHARSET=KOI8-R>`, "KOI8-R", fromMeta},
		{"after the doctype", "", `<!DOCTYPE html><html><head><meta charset=windows-1251>`, "windows-1251", fromMeta},
		{"after a processing instruction", "", `<?xml version="1.0" encoding="koi8-r"?><meta charset=big5>`, "Big5", fromMeta},
		{"in a comment: skipped", "", `<!-- <meta charset=koi8-r> --><meta charset=big5>`, "Big5", fromMeta},
		{"empty comment <!-->", "", `<!--><meta charset=big5>-->`, "Big5", fromMeta},
		{"in another tag's attribute: skipped", "", `<div title="<meta charset=koi8-r>"><meta charset=euc-kr>`, "EUC-KR", fromMeta},
		{"not a meta: <metas>", "", `<metas charset=koi8-r><p>x`, "windows-1252", fromDefault},
		{"not a meta: end tag", "", `</meta charset=koi8-r><p>x`, "windows-1252", fromDefault},
		{"in a script: read all the same", "", `<script>"<meta charset=koi8-r>"</script>`, "KOI8-R", fromMeta},
		{"meta after 1,024 bytes: ignored", "", "<!--" + pad + "--><meta charset=shift_jis>", "windows-1252", fromDefault},
		{"meta across byte 1,024: ignored", "", "<p>" + pad[:prescanLen-20] + `<meta charset="shift_jis">`, "windows-1252", fromDefault},
		{"meta ending at byte 1,024: read", "", "<p>" + pad[:prescanLen-3-len(`<meta charset="shift_jis">`)] + `<meta charset="shift_jis">`, "Shift_JIS", fromMeta},
		{"UTF-16LE <?x without BOM", "", "<\x00?\x00x\x00m\x00l\x00", "UTF-16LE", fromMeta},
		{"UTF-16BE <?x without BOM", "", "\x00<\x00?\x00x\x00m\x00l", "UTF-16BE", fromMeta},

		// XHTML follows XML's rules.
		{"XHTML declaration", "application/xhtml+xml", `<?xml version="1.0" encoding="windows-1251"?><html>`, "windows-1251", fromXMLDecl},
		{"XHTML default UTF-8", "application/xhtml+xml", "<html><meta charset=koi8-r>caf\xe9", "UTF-8", fromDefault},
		{"XHTML header", "application/xhtml+xml; charset=euc-kr", `<?xml version="1.0" encoding="windows-1251"?>`, "EUC-KR", fromHeader},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs, _, from := sniff(c.ct, []byte(c.body))
			if cs.name != c.want || from != c.from {
				t.Errorf("sniff(%q, %q) = %s from step %d, want %s from step %d", c.ct, c.body, cs.name, from, c.want, c.from)
			}
		})
	}
}

// TestLookupLabel checks labels against the Encoding Standard's table.
func TestLookupLabel(t *testing.T) {
	for label, want := range map[string]string{
		"utf-8": "UTF-8", "UTF8": "UTF-8", "unicode-1-1-utf-8": "UTF-8", " utf-8\t\n": "UTF-8",
		"latin1": "windows-1252", "iso-8859-1": "windows-1252", "ascii": "windows-1252", "US-ASCII": "windows-1252", "cp1252": "windows-1252",
		"iso-8859-15": "ISO-8859-15", "l9": "ISO-8859-15", "latin2": "ISO-8859-2", "cp1251": "windows-1251", "koi8": "KOI8-R", "koi8-u": "KOI8-U",
		"x-sjis": "Shift_JIS", "ms932": "Shift_JIS", "windows-31j": "Shift_JIS", "euc-jp": "EUC-JP", "csiso2022jp": "ISO-2022-JP",
		"gb2312": "GBK", "chinese": "GBK", "gb18030": "gb18030", "big5-hkscs": "Big5", "ks_c_5601-1987": "EUC-KR", "windows-949": "EUC-KR",
		"utf-16": "UTF-16LE", "ucs-2": "UTF-16LE", "utf-16be": "UTF-16BE", "iso-2022-kr": "replacement", "hz-gb-2312": "replacement",
		"x-user-defined": "x-user-defined", "x-mac-ukrainian": "x-mac-cyrillic", "dos-874": "windows-874", "logical": "ISO-8859-8-I",
	} {
		if cs := lookupLabel(label); cs == nil || cs.name != want {
			t.Errorf("lookupLabel(%q) = %v, want %s", label, cs, want)
		}
	}
	for _, label := range []string{"", "utf-7", "utf-32", "bogus", "utf-8\v", "ｕｔｆ-8", "\u212aoi8-r", "windows-1252x", strings.Repeat("a", 100)} {
		if cs := lookupLabel(label); cs != nil {
			t.Errorf("lookupLabel(%q) = %s, want none", label, cs.name)
		}
	}
}

// utf16Page returns s in UTF-16, little-endian or big-endian, with a BOM
// if bom.
func utf16Page(s string, bigEndian, bom bool) string {
	var b []byte
	units := utf16.Encode([]rune(s))
	if bom {
		units = append([]uint16{0xfeff}, units...)
	}
	for _, u := range units {
		if bigEndian {
			b = append(b, byte(u>>8), byte(u))
		} else {
			b = append(b, byte(u), byte(u>>8))
		}
	}
	return string(b)
}

// TestExtractEncodings resolves links on pages in every kind of encoding:
// the path percent-encoded from UTF-8, the query in the page's encoding.
// The pages' bytes and the expected URLs are written out by hand from the
// Encoding Standard's indexes (資料 is 8E91 97BF in Shift_JIS and BBF1
// CEC1 in EUC-JP, новости ED EE E2 EE F1 F2 E8 in windows-1251 and CE CF
// D7 CF D3 D4 C9 in KOI8-R, 中文 D6D0 CEC4 in GBK and A4A4 A4E5 in Big5,
// 한국 C7D1 B1B9 in EUC-KR, łódź B3 F3 64 BC in ISO-8859-2).
func TestExtractEncodings(t *testing.T) {
	const (
		shiryo  = "%E8%B3%87%E6%96%99"                         // 資料 in UTF-8
		novosti = "%D0%BD%D0%BE%D0%B2%D0%BE%D1%81%D1%82%D0%B8" // новости in UTF-8
		chinese = "%E4%B8%AD%E6%96%87"                         // 中文
		korean  = "%ED%95%9C%EA%B5%AD"                         // 한국
	)
	ruHref := `<a href="/новости/?q=новости">`
	x := NewExtractor(urlnorm.New(urlnorm.Options{}), nil, 0)
	for _, c := range []struct {
		name, ct, body string
		enc            string
		links          []string
	}{
		{"Shift_JIS by header", "text/html; charset=Shift_JIS", "<a href=\"/\x8e\x91\x97\xbf/?q=\x8e\x91\x97\xbf\">", "Shift_JIS",
			[]string{"http://h.test/" + shiryo + "/?q=%8E%91%97%BF"}},
		{"Shift_JIS: ¥ and − as the standard's encoder writes them", "text/html; charset=sjis", `<a href="?y=&yen;&m=&minus;">`, "Shift_JIS",
			[]string{"http://h.test/dir/page.html?y=%5C&m=%81%7C"}},
		{"EUC-JP by meta", "", "<meta charset=\"EUC-JP\"><a href=\"/\xbb\xf1\xce\xc1/?q=\xbb\xf1\xce\xc1\">", "EUC-JP",
			[]string{"http://h.test/" + shiryo + "/?q=%BB%F1%CE%C1"}},
		{"windows-1251 by header", "text/html; charset=cp1251", "<a href=\"/\xed\xee\xe2\xee\xf1\xf2\xe8/?q=\xed\xee\xe2\xee\xf1\xf2\xe8\">", "windows-1251",
			[]string{"http://h.test/" + novosti + "/?q=%ED%EE%E2%EE%F1%F2%E8"}},
		{"windows-1251: a character it lacks as an NCR", "text/html; charset=windows-1251", `<a href="?q=&#26085;&#26412;x">`, "windows-1251",
			[]string{"http://h.test/dir/page.html?q=%26%2326085%3B%26%2326412%3Bx"}},
		{"windows-1251, all ASCII: an entity's query", "", `<meta charset=windows-1251><a href="/&#1076;?q=&#1076;">`, "windows-1251",
			[]string{"http://h.test/%D0%B4?q=%E4"}},
		{"windows-1251: base href and an absolute link", "text/html; charset=windows-1251",
			"<base href=\"/\xea\xe0\xf2/\"><a href=\"\xe4?q=\xe4\"><a href=\"http://other.test/\xe4?q=\xe4\">", "windows-1251",
			[]string{"http://h.test/%D0%BA%D0%B0%D1%82/%D0%B4?q=%E4", "http://other.test/%D0%B4?q=%E4"}},
		{"KOI8-R by http-equiv", "", "<meta http-equiv=Content-Type content=\"text/html; charset=koi8-r\"><a href=\"/\xce\xcf\xd7\xcf\xd3\xd4\xc9/?q=\xce\xcf\xd7\xcf\xd3\xd4\xc9\">", "KOI8-R",
			[]string{"http://h.test/" + novosti + "/?q=%CE%CF%D7%CF%D3%D4%C9"}},
		{"GBK (gb2312): € is 0x80", "text/html; charset=gb2312", "<a href=\"/\xd6\xd0\xce\xc4?q=\xd6\xd0\xce\xc4\"><a href=\"/\x80?e=\x80\">", "GBK",
			[]string{"http://h.test/" + chinese + "?q=%D6%D0%CE%C4", "http://h.test/%E2%82%AC?e=%80"}},
		{"gb18030: € is A2E3", "text/html; charset=GB18030", "<a href=\"/\xd6\xd0\xce\xc4?q=\xd6\xd0\xce\xc4\"><a href=\"/\xa2\xe3?e=\xa2\xe3\">", "gb18030",
			[]string{"http://h.test/" + chinese + "?q=%D6%D0%CE%C4", "http://h.test/%E2%82%AC?e=%A2%E3"}},
		{"Big5", "text/html; charset=big5", "<a href=\"/\xa4\xa4\xa4\xe5?q=\xa4\xa4\xa4\xe5\">", "Big5",
			[]string{"http://h.test/" + chinese + "?q=%A4%A4%A4%E5"}},
		{"EUC-KR", "", "<meta charset=euc-kr><a href=\"/\xc7\xd1\xb1\xb9?q=\xc7\xd1\xb1\xb9\">", "EUC-KR",
			[]string{"http://h.test/" + korean + "?q=%C7%D1%B1%B9"}},
		{"ISO-8859-2", "", "<meta http-equiv=content-type content=\"text/html;charset=ISO-8859-2\"><a href=\"/\xb3\xf3d\xbc?q=\xb3\xf3d\xbc\">", "ISO-8859-2",
			[]string{"http://h.test/%C5%82%C3%B3d%C5%BA?q=%B3%F3d%BC"}},
		{"windows-1252 by default", "", "<a href=\"/caf\xe9?q=caf\xe9\"><a href=\"/\x93?q=\x93\">", "windows-1252",
			[]string{"http://h.test/caf%C3%A9?q=caf%E9", "http://h.test/%E2%80%9C?q=%93"}},
		{"windows-1252: 0x81 is U+0081 both ways", "text/html; charset=windows-1252", "<a href=\"/\x81?q=\x81\">", "windows-1252",
			[]string{"http://h.test/%C2%81?q=%81"}},
		{"UTF-16LE with BOM", "", utf16Page(ruHref, false, true), "UTF-16LE",
			[]string{"http://h.test/" + novosti + "/?q=" + novosti}},
		{"UTF-16BE with BOM", "", utf16Page(ruHref, true, true), "UTF-16BE",
			[]string{"http://h.test/" + novosti + "/?q=" + novosti}},
		{"UTF-16LE by header, no BOM", "text/html; charset=utf-16le", utf16Page(ruHref, false, false), "UTF-16LE",
			[]string{"http://h.test/" + novosti + "/?q=" + novosti}},
		{"UTF-16BE by header, no BOM", "text/html; charset=UTF-16BE", utf16Page(ruHref, true, false), "UTF-16BE",
			[]string{"http://h.test/" + novosti + "/?q=" + novosti}},
		{"UTF-16 label is little-endian", "text/html; charset=utf-16", utf16Page(`<a href="/x">`, false, false), "UTF-16LE",
			[]string{"http://h.test/x"}},
		{"UTF-8", "text/html; charset=utf-8", ruHref, "UTF-8",
			[]string{"http://h.test/" + novosti + "/?q=" + novosti}},
		{"UTF-8: ill-formed bytes are U+FFFD", "text/html; charset=utf-8", "<a href=\"/a\xff?q=\xe3\x81z\">", "UTF-8",
			[]string{"http://h.test/a%EF%BF%BD?q=%EF%BF%BDz"}},
		{"UTF-8 BOM", "", "\xef\xbb\xbf" + ruHref, "UTF-8",
			[]string{"http://h.test/" + novosti + "/?q=" + novosti}},
		{"replacement: no links", "text/html; charset=iso-2022-kr", `<a href="/x">`, "replacement", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := x.Extract("http://h.test/dir/page.html", c.ct, []byte(c.body))
			if p.Err != nil {
				t.Fatal(p.Err)
			}
			if p.Encoding != c.enc {
				t.Errorf("Encoding %q, want %q", p.Encoding, c.enc)
			}
			if !slices.Equal(p.Links, c.links) {
				t.Errorf("links\n %q\nwant\n %q", p.Links, c.links)
			}
		})
	}
}

// TestExtractEncodingsEmbeds checks that embeds are resolved as links
// are, and that a style sheet after a page is read as bytes again.
func TestExtractEncodingsEmbeds(t *testing.T) {
	x := NewExtractor(urlnorm.New(urlnorm.Options{}), &urlnorm.Scope{SkipExts: []string{}}, 0)
	x.SetRequisites(true)
	p := x.Extract("http://h.test/", "text/html; charset=windows-1251", []byte("<img src=\"/\xe4.png?v=\xe4\">"))
	if want := []string{"http://h.test/%D0%B4.png?v=%E4"}; !slices.Equal(p.Embeds, want) {
		t.Errorf("embeds %q, want %q", p.Embeds, want)
	}
	// A style sheet's bytes are percent-encoded as they stand, whatever
	// the page before it was in.
	p = x.ExtractCSS("http://h.test/s.css", []byte("a{background:url(/\xe4.png?v=\xe4)}"))
	if want := []string{"http://h.test/%E4.png?v=%E4"}; !slices.Equal(p.Embeds, want) {
		t.Errorf("style sheet embeds %q, want %q", p.Embeds, want)
	}
	// And the next page is a document again.
	p = x.Extract("http://h.test/", "text/html; charset=windows-1251", []byte("<a href=\"?q=\xe4\">"))
	if want := []string{"http://h.test/?q=%E4"}; !slices.Equal(p.Links, want) {
		t.Errorf("links %q, want %q", p.Links, want)
	}
}

// TestDecodeFastPath checks that a UTF-8 page, and an all-ASCII page in an
// ASCII-compatible encoding, are tokenised as they stand: decode returns
// the body itself (less a BOM) and leaves the buffer alone.
func TestDecodeFastPath(t *testing.T) {
	x := NewExtractor(nil, nil, 0)
	for _, c := range []struct{ name, ct, body string }{
		{"UTF-8 by header", "text/html; charset=utf-8", "<p>caf\xc3\xa9 <a href=/x>"},
		{"UTF-8 by meta", "", "<meta charset=utf-8><p>caf\xc3\xa9"},
		{"UTF-8 by default", "", "<p>caf\xc3\xa9"},
		{"UTF-8 with BOM", "", "\xef\xbb\xbf<p>caf\xc3\xa9"},
		{"ASCII windows-1251", "text/html; charset=windows-1251", "<p>plain &#1076; <a href=/x>"},
		{"ASCII Shift_JIS", "", "<meta charset=shift_jis><p>plain"},
		{"ASCII default", "", "<p>plain"},
	} {
		t.Run(c.name, func(t *testing.T) {
			x.dec = x.dec[:0]
			body := []byte(c.body)
			out := x.decode(c.ct, body)
			if len(out) == 0 || &out[len(out)-1] != &body[len(body)-1] || string(out) != strings.TrimPrefix(c.body, "\xef\xbb\xbf") {
				t.Errorf("decode returned %q, not the body itself", out)
			}
			if len(x.dec) != 0 {
				t.Errorf("the decoding buffer was written: %q", x.dec)
			}
		})
	}
}

// TestDecodeBuffer checks that a page is decoded into the Extractor's
// buffer, reused from page to page, within maxExpansion bytes a byte, and
// that a buffer grown for a large page is dropped by the next.
func TestDecodeBuffer(t *testing.T) {
	x := NewExtractor(nil, nil, 0)
	out := x.decode("text/html; charset=windows-1251", []byte("<p>\xe4\xe4"))
	if string(out) != "<p>дд" {
		t.Fatalf("decoded %q", out)
	}
	first := &x.dec[:1][0]
	out = x.decode("text/html; charset=windows-1251", []byte("<p>\xe4"))
	if string(out) != "<p>д" || &x.dec[:1][0] != first {
		t.Errorf("decoded %q; buffer reused %v", out, &x.dec[:1][0] == first)
	}
	// Worst cases of expansion: 3 bytes a byte.
	for _, c := range []struct{ ct, body, want string }{
		{"text/html; charset=windows-1252", strings.Repeat("\x80", 1000), strings.Repeat("€", 1000)},
		{"text/html; charset=shift_jis", strings.Repeat("\xb1", 1000), strings.Repeat("ｱ", 1000)},
		{"text/html; charset=shift_jis", strings.Repeat("\xff", 1000), strings.Repeat("\uFFFD", 1000)},
		{"text/html; charset=utf-16le", strings.Repeat("\x00\xd8", 1000), strings.Repeat("\uFFFD", 1000)},
	} {
		out := x.decode(c.ct, []byte(c.body))
		if string(out) != c.want {
			t.Errorf("%s: decoded %d bytes, want %d", c.ct, len(out), len(c.want))
		}
		if cap(x.dec) > decodeLimit(len(c.body)) {
			t.Errorf("%s: buffer of %d bytes for %d", c.ct, cap(x.dec), len(c.body))
		}
	}
	big := strings.Repeat("\xe4", keepDecoded)
	if out := x.decode("text/html; charset=koi8-r", []byte(big)); len(out) != 2*len(big) {
		t.Fatalf("decoded %d bytes, want %d", len(out), 2*len(big))
	}
	x.decode("text/html; charset=koi8-r", []byte("<p>\xc4"))
	if cap(x.dec) > keepDecoded {
		t.Errorf("buffer of %d bytes kept after a small page", cap(x.dec))
	}
}

// TestSingleByteTables checks the single-byte decoders against the
// Encoding Standard's indexes, where x/text differs (the C1 controls).
func TestSingleByteTables(t *testing.T) {
	for _, c := range []struct {
		label string
		in    byte
		want  rune
	}{
		{"windows-1252", 0x80, '€'}, {"windows-1252", 0x81, 0x81}, {"windows-1252", 0x9d, 0x9d}, {"windows-1252", 0x9f, 'Ÿ'},
		{"iso-8859-2", 0x85, 0x85}, {"iso-8859-2", 0xb3, 'ł'}, {"windows-1251", 0x98, 0x98}, {"windows-1251", 0xe4, 'д'},
		{"koi8-r", 0xc4, 'д'}, {"ibm866", 0xa4, 'д'}, {"x-user-defined", 0x80, 0xf780}, {"windows-874", 0xdb, 0xfffd},
	} {
		cs := lookupLabel(c.label)
		out := cs.decodeTo(nil, []byte{'a', c.in, 'b'})
		if want := "a" + string(c.want) + "b"; string(out) != want {
			t.Errorf("%s 0x%02X: %q, want %q", c.label, c.in, out, want)
		}
	}
}

// TestShiftJISDecoder checks the Shift_JIS decoder against the Encoding
// Standard's algorithm, error recovery included (the expected text worked
// out by hand from the algorithm and the jis0208 index).
func TestShiftJISDecoder(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\x8e\x91\x97\xbf", "資料"},
		{"<a href=\"/\x8e\x91\x97\xbf/\">", "<a href=\"/資料/\">"},
		{"\xb1\xdf", "ｱﾟ"},            // half-width katakana
		{"\x80\x5c\x7e", "\u0080\\~"}, // 0x80 is U+0080; 0x5C and 0x7E are ASCII
		{"\x81\x7c", "－"},             // pointer 59, U+FF0D
		{"\xfa\x40", "ⅰ"},             // pointer 10716, past the user-defined range
		{"\xf0\x40\xf9\xfc", "\ue000\ue757"},
		{"\xa0\xfd\xff", "\ufffd\ufffd\ufffd"},
		{"\x81\x22x", "\ufffd\"x"},        // a lead byte and a byte that is no trail: the byte read again
		{"\x85\x40", "\ufffd@"},           // pointer 752 has no character: '@' read again
		{"\x85\x80", "\ufffd"},            // pointer 815 has none either; 0x80 goes with it
		{"\x81\x7f", "\ufffd\x7f"},        // 0x7F is no trail byte
		{"ab\x81", "ab\ufffd"},            // a lead byte at the end
		{"12345678\x8e\x91", "12345678資"}, // after an 8-byte run
	} {
		if got := string(decodeShiftJIS(nil, []byte(c.in))); got != c.want {
			t.Errorf("decode(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

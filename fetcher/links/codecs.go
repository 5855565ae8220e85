package links

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/transform"
)

// Kinds of codec, by how a page in one is read.
const (
	kindUTF8        = iota
	kindASCII       // ASCII-compatible: a page of bytes < 0x80 only reads as it stands
	kindUTF16       // UTF-16LE and UTF-16BE: decoded; URL queries in UTF-8
	kindReplacement // ISO-2022-KR and the like: the page is one U+FFFD
	kindStateful    // ISO-2022-JP: escape sequences switch modes, always decoded
)

// codec is one encoding of the WHATWG Encoding Standard, as a page is
// read in it.
type codec struct {
	id   int    // index in codecs
	name string // as the standard spells it ("Shift_JIS"): Page.Encoding
	kind int
	// decodeTo appends a page in the encoding as UTF-8, for the
	// single-byte encodings and Shift_JIS; nil for the others, which dec
	// decodes.
	decodeTo func(dst, src []byte) []byte
	dec      encoding.Encoding
	// query writes URL queries (urlnorm.Base.SetDocument); nil: UTF-8.
	query encoding.Encoding
}

// sbChar packs the UTF-8 of the code point a byte stands for: its 1 to 3
// bytes from the low byte up, and their number in the top byte, so that a
// decoder writes all four and moves on by the number.
func sbChar(r rune) uint32 {
	var b [4]byte
	n := utf8.EncodeRune(b[:], r)
	b[3] = byte(n)
	return binary.LittleEndian.Uint32(b[:])
}

// numCodecs is the number of encodings of the Encoding Standard.
const numCodecs = 40

// codecs are the encodings of the Encoding Standard, by the name it
// gives them.
var codecs = func() []*codec {
	names := []string{
		"UTF-8", "IBM866", "ISO-8859-2", "ISO-8859-3", "ISO-8859-4", "ISO-8859-5", "ISO-8859-6", "ISO-8859-7",
		"ISO-8859-8", "ISO-8859-8-I", "ISO-8859-10", "ISO-8859-13", "ISO-8859-14", "ISO-8859-15", "ISO-8859-16",
		"KOI8-R", "KOI8-U", "macintosh", "windows-874", "windows-1250", "windows-1251", "windows-1252",
		"windows-1253", "windows-1254", "windows-1255", "windows-1256", "windows-1257", "windows-1258",
		"x-mac-cyrillic", "GBK", "gb18030", "Big5", "EUC-JP", "ISO-2022-JP", "Shift_JIS", "EUC-KR",
		"replacement", "UTF-16BE", "UTF-16LE", "x-user-defined",
	}
	if len(names) != numCodecs {
		panic("links: numCodecs is not the number of encodings")
	}
	out := make([]*codec, len(names))
	for i, name := range names {
		e, err := htmlindex.Get(name)
		if err != nil {
			panic("links: x/text has no encoding " + name) // cannot happen: htmlindex holds the standard's encodings
		}
		cs := &codec{id: i, name: name, kind: kindASCII, dec: e, query: e}
		switch name {
		case "UTF-8":
			cs.kind, cs.query = kindUTF8, nil
		case "UTF-16LE", "UTF-16BE":
			cs.kind, cs.query = kindUTF16, nil
		case "replacement":
			cs.kind, cs.query = kindReplacement, nil
		case "ISO-2022-JP":
			cs.kind = kindStateful
		case "GBK":
			// The standard's GBK decoder is the gb18030 decoder, four-byte
			// sequences included; x/text's GBK decoder has none.
			cs.dec = simplifiedchinese.GB18030
		case "Shift_JIS":
			cs.query = fixEncoding(e, jisFixes(e, true))
			cs.decodeTo = decodeShiftJIS
		case "EUC-JP":
			cs.query = fixEncoding(e, jisFixes(e, false))
		}
		if m, ok := e.(*charmap.Charmap); ok {
			var t *[256]uint32
			t, cs.query = singleByte(m)
			cs.decodeTo = func(dst, src []byte) []byte { return decodeSingleByte(dst, src, t) }
		}
		out[i] = cs
	}
	return out
}()

// byName maps an encoding's name, lower-cased, to it.
var byName = func() map[string]*codec {
	m := make(map[string]*codec, len(codecs))
	for _, cs := range codecs {
		m[strings.ToLower(cs.name)] = cs
	}
	return m
}()

var (
	csUTF8        = byName["utf-8"]
	csUTF16LE     = byName["utf-16le"]
	csUTF16BE     = byName["utf-16be"]
	csWindows1252 = byName["windows-1252"]
	csUserDefined = byName["x-user-defined"]
)

// maxLabel is the longest label looked up: the standard's longest has 19
// characters ("cseucpkdfmtjapanese").
const maxLabel = 32

// lookupLabel returns the encoding that label names, by the Encoding
// Standard's "get an encoding": leading and trailing ASCII whitespace
// removed, compared ASCII case-insensitively with the standard's labels
// ("latin1", "ascii" and "iso-8859-1" are windows-1252, "utf-16"
// UTF-16LE, "iso-2022-kr" replacement). nil if label names none.
func lookupLabel[T string | []byte](label T) *codec {
	for len(label) > 0 && isSpace(label[0]) {
		label = label[1:]
	}
	for len(label) > 0 && isSpace(label[len(label)-1]) {
		label = label[:len(label)-1]
	}
	if len(label) == 0 || len(label) > maxLabel {
		return nil
	}
	var buf [maxLabel]byte
	for i := range len(label) {
		c := label[i]
		if c <= ' ' || c >= utf8.RuneSelf {
			return nil // no label has these (htmlindex would trim \v and fold some non-ASCII letters)
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	lower := buf[:len(label)]
	if string(lower) == "utf-8" || string(lower) == "utf8" {
		return csUTF8 // the common case, without the lookups
	}
	e, err := htmlindex.Get(string(lower))
	if err != nil {
		return nil
	}
	name, err := htmlindex.Name(e)
	if err != nil {
		return nil
	}
	return byName[name]
}

// singleByte returns the decoding table of the single-byte encoding m and
// the encoding its URL queries are written in. x/text decodes the bytes
// 0x80-0x9f that the standard's index maps to the C1 control of the same
// value (0x81 in windows-1252, all of them in the ISO-8859 encodings) as
// U+FFFD; here they are those controls, both ways. So corrected, the
// tables of all single-byte encodings equal the standard's indexes (every
// byte compared with its index files).
func singleByte(m *charmap.Charmap) (*[256]uint32, encoding.Encoding) {
	var t [256]uint32
	inv := make(map[rune]byte, 128)
	for i := range t {
		c := byte(i)
		r := m.DecodeByte(c)
		if r == utf8.RuneError && c >= 0x80 && c <= 0x9f {
			r = rune(c)
		}
		t[i] = sbChar(r)
		if _, dup := inv[r]; c >= 0x80 && r != utf8.RuneError && !dup {
			inv[r] = c // the first byte of a character, as the standard's encoder
		}
	}
	return &t, sbEncoding{m, inv}
}

// sbEncoding is a single-byte encoding whose encoder is the inverse of
// its decoding table (the standard's "index pointer").
type sbEncoding struct {
	encoding.Encoding
	inv map[rune]byte // the non-ASCII characters
}

// NewEncoder returns an encoder by the inverse table.
func (e sbEncoding) NewEncoder() *encoding.Encoder {
	return &encoding.Encoder{Transformer: sbEncoder(e.inv)}
}

// errUnencodable is an encoder's error for a character its encoding lacks.
var errUnencodable = errors.New("links: character not in the encoding")

// sbEncoder writes UTF-8 in a single-byte encoding.
type sbEncoder map[rune]byte

func (sbEncoder) Reset() {}

// Transform implements transform.Transformer.
func (m sbEncoder) Transform(dst, src []byte, atEOF bool) (nDst, nSrc int, err error) {
	for nSrc < len(src) {
		b, size := src[nSrc], 1
		if b >= utf8.RuneSelf {
			if !atEOF && !utf8.FullRune(src[nSrc:]) {
				return nDst, nSrc, transform.ErrShortSrc
			}
			var r rune
			r, size = utf8.DecodeRune(src[nSrc:])
			var ok bool
			if b, ok = m[r]; !ok {
				return nDst, nSrc, errUnencodable
			}
		}
		if nDst == len(dst) {
			return nDst, nSrc, transform.ErrShortDst
		}
		dst[nDst] = b
		nDst, nSrc = nDst+1, nSrc+size
	}
	return nDst, nSrc, nil
}

// jisFixes are the characters the standard's Shift_JIS (sjis) or EUC-JP
// encoder writes and x/text's does not: U+00A5 as 0x5C, U+203E as 0x7E,
// U+2212 as U+FF0D, and in Shift_JIS U+0080 as 0x80.
func jisFixes(e encoding.Encoding, sjis bool) map[rune][]byte {
	minus, err := e.NewEncoder().Bytes([]byte("\uFF0D"))
	if err != nil {
		panic("links: x/text cannot encode U+FF0D in Shift_JIS or EUC-JP") // cannot happen: JIS X 0208 has it
	}
	m := map[rune][]byte{0xa5: {0x5c}, 0x203e: {0x7e}, 0x2212: minus}
	if sjis {
		m[0x80] = []byte{0x80}
	}
	return m
}

// fixEncoding returns e with its encoder writing the characters of fixes
// as given (nil fixes: e).
func fixEncoding(e encoding.Encoding, fixes map[rune][]byte) encoding.Encoding {
	if len(fixes) == 0 {
		return e
	}
	return fixedEncoding{e, fixes}
}

// fixedEncoding is an encoding whose encoder writes some characters
// otherwise than x/text's.
type fixedEncoding struct {
	encoding.Encoding
	fixes map[rune][]byte
}

// NewEncoder returns e's encoder with its fixes.
func (e fixedEncoding) NewEncoder() *encoding.Encoder {
	return &encoding.Encoder{Transformer: &fixedEncoder{inner: e.Encoding.NewEncoder(), fixes: e.fixes}}
}

// fixedEncoder writes the characters of fixes itself and the others with
// inner, a stateless encoder.
type fixedEncoder struct {
	inner transform.Transformer
	fixes map[rune][]byte
}

func (f *fixedEncoder) Reset() { f.inner.Reset() }

// Transform implements transform.Transformer.
func (f *fixedEncoder) Transform(dst, src []byte, atEOF bool) (nDst, nSrc int, err error) {
	for nSrc < len(src) {
		// The run of characters up to the next fixed one goes to inner.
		end := nSrc
		var fixed []byte
		for end < len(src) {
			r, size := rune(src[end]), 1
			if r >= utf8.RuneSelf {
				if !atEOF && !utf8.FullRune(src[end:]) {
					break
				}
				r, size = utf8.DecodeRune(src[end:])
			}
			if b, ok := f.fixes[r]; ok {
				fixed = b
				break
			}
			end += size
		}
		if end > nSrc {
			n, m, err := f.inner.Transform(dst[nDst:], src[nSrc:end], atEOF || fixed != nil)
			nDst, nSrc = nDst+n, nSrc+m
			if err != nil {
				return nDst, nSrc, err
			}
		}
		if fixed == nil {
			if nSrc < len(src) {
				return nDst, nSrc, transform.ErrShortSrc // a partial character at the end
			}
			break
		}
		if len(dst)-nDst < len(fixed) {
			return nDst, nSrc, transform.ErrShortDst
		}
		nDst += copy(dst[nDst:], fixed)
		_, size := utf8.DecodeRune(src[nSrc:])
		nSrc += size
	}
	return nDst, nSrc, nil
}

// Shift_JIS is decoded here rather than by x/text, whose decoder drops
// an ASCII byte after a lead byte that forms no character, where the
// standard reads it again, and is slower. The table of JIS X 0208 (the
// standard's index jis0208) is read out of x/text's decoder, once, when
// the first Shift_JIS page comes.
var (
	sjisOnce  sync.Once
	sjisTable *[sjisPointers]uint32 // pointer → its character (sbChar); 0: none
)

// sjisPointers is the number of Shift_JIS pointers: 60 lead bytes of 188
// trail bytes each.
const sjisPointers = 60 * 188

// sjisPointer returns the pointer of the lead byte lead and the byte b,
// -1 if b is no trail byte.
func sjisPointer(lead, b byte) int {
	if !(b >= 0x40 && b <= 0x7e || b >= 0x80 && b <= 0xfc) {
		return -1
	}
	offset, leadOffset := 0x41, 0xc1
	if b < 0x7f {
		offset = 0x40
	}
	if lead < 0xa0 {
		leadOffset = 0x81
	}
	return (int(lead)-leadOffset)*188 + int(b) - offset
}

// sjisIndex returns the jis0208 index, read out of x/text's decoder, with
// the standard's user-defined range (pointers 8836 to 10715, U+E000 on).
func sjisIndex() *[sjisPointers]uint32 {
	sjisOnce.Do(func() {
		var t [sjisPointers]uint32
		d := japanese.ShiftJIS.NewDecoder()
		var out [8]byte
		for lead := 0x81; lead <= 0xfc; lead++ {
			if lead > 0x9f && lead < 0xe0 {
				continue
			}
			for b := 0x40; b <= 0xfc; b++ {
				p := sjisPointer(byte(lead), byte(b))
				if p < 0 {
					continue
				}
				if p >= 8836 && p <= 10715 {
					t[p] = sbChar(rune(0xe000 - 8836 + p))
					continue
				}
				d.Reset()
				n, _, err := d.Transform(out[:], []byte{byte(lead), byte(b)}, true)
				r, size := utf8.DecodeRune(out[:n])
				if err == nil && size == n && r != utf8.RuneError && r <= 0xffff {
					t[p] = sbChar(r)
				}
			}
		}
		sjisTable = &t
	})
	return sjisTable
}

// Shift_JIS's single-byte characters (sbChar): the ASCII bytes, 0x80 as
// U+0080, 0xA1-0xDF as half-width katakana; 0 for lead bytes, U+FFFD for
// the rest.
var sjisSingle = func() (t [256]uint32) {
	for c := range t {
		switch {
		case c <= 0x80:
			t[c] = sbChar(rune(c))
		case c >= 0xa1 && c <= 0xdf:
			t[c] = sbChar(rune(0xff61 - 0xa1 + c))
		case c >= 0x81 && c <= 0x9f || c >= 0xe0 && c <= 0xfc:
			t[c] = 0
		default:
			t[c] = sbChar(utf8.RuneError)
		}
	}
	return t
}()

// sbFFFD is U+FFFD as an sbChar.
var sbFFFD = sbChar(utf8.RuneError)

// decodeShiftJIS appends src, in Shift_JIS, as UTF-8, by the Encoding
// Standard's Shift_JIS decoder.
func decodeShiftJIS(dst, src []byte) []byte {
	t := sjisIndex()
	if need := len(dst) + decodeLimit(len(src)); cap(dst) < need {
		dst = append(make([]byte, 0, need), dst...)
	}
	w, out := len(dst), dst[:cap(dst)]
	for i := 0; i < len(src); {
		if i+8 <= len(src) {
			if v := binary.LittleEndian.Uint64(src[i:]); v&0x8080808080808080 == 0 {
				binary.LittleEndian.PutUint64(out[w:], v)
				w, i = w+8, i+8
				continue
			}
		}
		c := sjisSingle[src[i]]
		i++
		if c == 0 { // a lead byte
			c = sbFFFD
			if i < len(src) {
				if p := sjisPointer(src[i-1], src[i]); p >= 0 && t[p] != 0 {
					c = t[p]
					i++
				} else if src[i] >= 0x80 {
					i++ // an ASCII byte is read again, another is part of the error
				}
			}
		}
		binary.LittleEndian.PutUint32(out[w:], c)
		w += int(c >> 24)
	}
	return out[:w]
}

package links

import (
	"encoding/binary"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/transform"
)

// keepDecoded is the largest decoding buffer an Extractor keeps between
// pages: a larger one, made for a large page, is dropped by the next.
const keepDecoded = 1 << 20

// decode returns body as the tokenizer reads it, UTF-8, and makes the
// base a document in its encoding. A UTF-8 page, and an all-ASCII page in
// an ASCII-compatible encoding, is returned as it stands (less a BOM);
// another is decoded into e.dec, at most 3 bytes per byte of body.
func (e *Extractor) decode(contentType string, body []byte) []byte {
	if cap(e.dec) > keepDecoded {
		e.dec = nil
	}
	cs, bom, _ := sniff(contentType, body)
	body = body[bom:]
	e.setDocument(cs)
	e.page.Encoding = cs.name
	switch cs.kind {
	case kindUTF8:
		return body
	case kindASCII:
		if !hasNonASCII(body) {
			return body
		}
	case kindReplacement:
		// The replacement decoder's output: one U+FFFD for any input.
		if len(body) == 0 {
			return body
		}
		return replacementChar
	}
	if cs.decodeTo != nil {
		e.dec = cs.decodeTo(e.dec[:0], body)
		return e.dec
	}
	d := e.decs[cs.id]
	if d == nil {
		d = cs.dec.NewDecoder()
		e.decs[cs.id] = d
	}
	e.dec = transcode(e.dec[:0], body, d)
	return e.dec
}

// replacementChar is U+FFFD, what a page in the replacement encoding reads as.
var replacementChar = []byte("\uFFFD")

// setDocument makes the base a document in cs (nil: not a document, as a
// style sheet's references are read).
func (e *Extractor) setDocument(cs *codec) {
	if cs == e.doc && cs != nil {
		return // the encoder made for the last page serves this one
	}
	e.doc = cs
	if cs == nil {
		e.base.ClearDocument()
		return
	}
	e.base.SetDocument(cs.query)
}

// maxExpansion bounds the bytes of UTF-8 a decoder writes per byte of
// input: 3, for a single byte decoded as U+FFFD or as a character of
// U+0800-U+FFFF (€ in windows-1252, a half-width katakana in Shift_JIS).
const maxExpansion = 3

// decodeSlack is the room a decoding buffer has past maxExpansion bytes a
// byte: the single-byte decoder's 8-byte stores, a decoder's last character.
const decodeSlack = 8

// decodeLimit is the largest buffer decoding n bytes may take.
func decodeLimit(n int) int { return maxExpansion*n + decodeSlack }

// decodeSingleByte appends src, in the single-byte encoding t, as UTF-8:
// 8 ASCII bytes at a time, else a table entry (sbChar) a byte.
func decodeSingleByte(dst, src []byte, t *[256]uint32) []byte {
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
		for end := min(i+8, len(src)); i < end; i++ {
			c := t[src[i]]
			binary.LittleEndian.PutUint32(out[w:], c)
			w += int(c >> 24)
		}
	}
	return out[:w]
}

// transcode appends src decoded by d as UTF-8 to dst, growing dst to at
// most decodeLimit(len(src)) bytes more.
func transcode(dst, src []byte, d *encoding.Decoder) []byte {
	d.Reset()
	limit := len(dst) + decodeLimit(len(src))
	if need := len(dst) + 2*len(src) + decodeSlack; cap(dst) < need {
		dst = append(make([]byte, 0, min(need, limit)), dst...)
	}
	for {
		n, m, err := d.Transform(dst[len(dst):cap(dst)], src, true)
		dst, src = dst[:len(dst)+n], src[m:]
		if err != transform.ErrShortDst || cap(dst) >= limit {
			return dst // done; or a decoder past the bound is cut there
		}
		dst = append(make([]byte, 0, min(2*cap(dst), limit)), dst...)
	}
}

// asciiPrefix returns the length of the run of ASCII bytes b starts with.
func asciiPrefix(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:])&0x8080808080808080 != 0 {
			break
		}
	}
	for i < len(b) && b[i] < utf8.RuneSelf {
		i++
	}
	return i
}

// hasNonASCII reports whether b has a byte >= 0x80.
func hasNonASCII(b []byte) bool { return asciiPrefix(b) < len(b) }

package urlnorm

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
)

// Byte classes for the path and query.
const (
	clPass   = iota // copied as is
	clEscape        // percent-encoded
	clPct           // '%': an escape to normalise, or a lone '%' to encode
)

// class is the path/query class of every byte.
var class = func() (t [256]uint8) {
	for c := range 256 {
		if c <= 0x20 || c >= 0x7f {
			t[c] = clEscape
		}
	}
	for _, c := range []byte("\"<>\\^`{|}") {
		t[c] = clEscape
	}
	t['%'] = clPct
	return t
}()

// unreserved marks the RFC 3986 unreserved characters, whose escapes are decoded.
var unreserved = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
	}
	return t
}()

const upperHex = "0123456789ABCDEF"

// unhex returns the value of hex digit c, or 0xff.
func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0xff
}

// appendEscaped appends s to dst with percent-escapes normalised: escapes of
// unreserved characters decoded, other escapes in upper-case hex, bytes of
// class clEscape and lone '%' encoded. If s is text (a document's, see
// Base.SetDocument), each ill-formed UTF-8 subsequence in it is written
// as U+FFFD, %EF%BF%BD, as a decoder would have read it.
func appendEscaped(dst, s []byte, text bool) []byte {
	i := 0
	for i < len(s) {
		j := i
		for j < len(s) && class[s[j]] == clPass {
			j++
		}
		dst = append(dst, s[i:j]...)
		if j == len(s) {
			break
		}
		c := s[j]
		if c == '%' {
			if j+2 < len(s) {
				hi, lo := unhex(s[j+1]), unhex(s[j+2])
				if hi < 16 && lo < 16 {
					v := hi<<4 | lo
					if unreserved[v] {
						dst = append(dst, v)
					} else {
						dst = append(dst, '%', upperHex[hi], upperHex[lo])
					}
					i = j + 3
					continue
				}
			}
			dst = append(dst, '%', '2', '5')
		} else if text && c >= utf8.RuneSelf {
			if r, size := utf8.DecodeRune(s[j:]); r != utf8.RuneError || size > 1 {
				for _, c := range s[j : j+size] {
					dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
				}
				i = j + size
			} else {
				dst = append(dst, "%EF%BF%BD"...)
				i = j + maximalSubpart(s[j:])
			}
			continue
		} else {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		}
		i = j + 1
	}
	return dst
}

// removeDotSegments removes "." and ".." segments from p, which starts with
// '/', in place (RFC 3986 section 5.2.4) and returns the shortened slice.
func removeDotSegments(p []byte) []byte {
	if bytes.Index(p, []byte("/.")) < 0 {
		return p
	}
	w, r, n := 0, 0, len(p)
	for r < n {
		// p[r] == '/'
		e := r + 1
		for e < n && p[e] != '/' {
			e++
		}
		seg := p[r+1 : e]
		switch {
		case len(seg) == 1 && seg[0] == '.':
			if e == n {
				p[w] = '/'
				w++
			}
		case len(seg) == 2 && seg[0] == '.' && seg[1] == '.':
			for w > 0 {
				w--
				if p[w] == '/' {
					break
				}
			}
			if e == n {
				p[w] = '/'
				w++
			}
		default:
			w += copy(p[w:], p[r:e])
		}
		r = e
	}
	if w == 0 {
		p[0] = '/'
		w = 1
	}
	return p[:w]
}

// trimSpace drops leading and trailing bytes <= ' ' (C0 controls and space).
func trimSpace(b []byte) []byte {
	for len(b) > 0 && b[0] <= ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] <= ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// hasTabNL reports whether b contains a tab, CR or LF, which URL parsers
// remove wherever they occur.
func hasTabNL(b []byte) bool {
	for _, c := range b {
		if c <= '\r' && (c == '\t' || c == '\n' || c == '\r') {
			return true
		}
	}
	return false
}

// stripTabNL returns a copy of b without tabs, CRs and LFs.
func stripTabNL(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c != '\t' && c != '\n' && c != '\r' {
			out = append(out, c)
		}
	}
	return out
}

// lowerASCII returns c lower-cased if it is an ASCII upper-case letter.
func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// equalFoldASCII reports whether a equals the lower-case ASCII string lower, ignoring case.
func equalFoldASCII(a []byte, lower string) bool {
	if len(a) != len(lower) {
		return false
	}
	for i := range a {
		if lowerASCII(a[i]) != lower[i] {
			return false
		}
	}
	return true
}

// document is what a Base knows of the document its references come from
// (Base.SetDocument).
type document struct {
	on    bool              // the references are a document's text
	enc   *encoding.Encoder // the query's encoding; nil: UTF-8
	query []byte            // a query written by enc
	// ch holds the character given to enc, out enc's output for it
	// (escapes included): made with enc, so that neither the caller's
	// bytes nor the Base escape through enc.
	ch, out []byte
}

// set makes d a document's whose queries are written in e (nil: UTF-8).
func (d *document) set(e encoding.Encoding) {
	d.on, d.enc = true, nil
	if e != nil && e != unicode.UTF8 && e != encoding.Nop {
		d.enc = e.NewEncoder()
		if d.ch == nil {
			d.ch, d.out = make([]byte, utf8.UTFMax), make([]byte, 32)
		}
	}
}

// maximalSubpart returns the length (>= 1) of the maximal subpart of an
// ill-formed UTF-8 sequence at the start of b (Unicode 3.9, U+FFFD
// substitution of maximal subparts, which the Encoding Standard's UTF-8
// decoder follows): a valid lead byte followed by the continuation bytes
// it can take before the sequence breaks off.
func maximalSubpart(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xbf) // the range of the second byte
	switch {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c >= 0xe1 && c <= 0xec, c == 0xee, c == 0xef:
		need = 2
	case c == 0xed:
		need, hi = 2, 0x9f
	case c == 0xf0:
		need, lo = 3, 0x90
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	case c == 0xf4:
		need, hi = 3, 0x8f
	default:
		return 1 // a continuation byte or a byte that never starts a sequence
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xbf
	}
	return n
}

// hasNonASCII reports whether b holds a byte >= 0x80.
func hasNonASCII(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b)&0x8080808080808080 != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

// appendEncoded appends an encoder's output b to dst, '#' as "%23": the
// query percent-encode set holds '#', which appendEscaped leaves alone (a
// query has none once the fragment is cut), and ISO-2022-JP writes it.
func appendEncoded(dst, b []byte) []byte {
	for _, c := range b {
		if c == '#' {
			dst = append(dst, "%23"...)
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// prepareQuery returns the query q of a reference as appendEscaped is to
// write it, and whether it is text: for a document in UTF-8, or for an
// all-ASCII query, q itself (text if a document's); else q encoded.
func (d *document) prepareQuery(q []byte) ([]byte, bool) {
	if d.enc == nil || !hasNonASCII(q) {
		return q, d.on
	}
	return d.encodeQuery(q), false
}

// encodeQuery returns the query q of a reference (UTF-8 text) with its
// non-ASCII characters written in d's encoding, as the URL Standard's
// "percent-encode after encoding" writes them before escaping: an
// encodable character as its bytes in the encoding (raw: appendEscaped
// escapes them), one the encoding cannot represent as "%26%23NNNN%3B", an
// ill-formed UTF-8 subsequence as U+FFFD would be. The ASCII characters,
// escapes included, are left as they are, so that the result, escaped, is
// the normalisation of what a browser sends.
func (d *document) encodeQuery(q []byte) []byte {
	enc := d.enc
	enc.Reset()
	out := d.query[:0]
	open := false // the encoder may hold state (ISO-2022-JP's mode) to flush
	flush := func() {
		if open {
			n, _, _ := enc.Transform(d.out, nil, true)
			out = appendEncoded(out, d.out[:n])
			enc.Reset()
			open = false
		}
	}
	for i := 0; i < len(q); {
		c := q[i]
		if c < utf8.RuneSelf {
			flush()
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(q[i:])
		if r == utf8.RuneError && size == 1 {
			size = maximalSubpart(q[i:])
		}
		i += size
		n, _, err := enc.Transform(d.out, d.ch[:utf8.EncodeRune(d.ch, r)], false)
		out = appendEncoded(out, d.out[:n])
		open = true
		if err != nil {
			flush()
			out = append(out, "%26%23"...)
			out = strconv.AppendInt(out, int64(r), 10)
			out = append(out, "%3B"...)
		}
	}
	flush()
	d.query = out
	return out
}

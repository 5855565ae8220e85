package urlnorm

import "bytes"

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
// class clEscape and lone '%' encoded.
func appendEscaped(dst, s []byte) []byte {
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

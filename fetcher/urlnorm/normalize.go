package urlnorm

import (
	"bytes"
	"strings"

	"github.com/meridian-crawler/meridian/crawl"
)

// Options configure a Normalizer.
type Options struct {
	// MaxLen is the longest normalised URL kept; longer ones fail with
	// ErrTooLong. 0 means crawl.MaxURLLen; values above it are clamped to it.
	MaxLen int
	// StripParams are the query parameter names (and ";name=" path
	// parameter names) dropped, compared case-insensitively. nil means
	// DefaultStripParams; an empty non-nil slice strips nothing.
	StripParams []string
}

// DefaultStripParams are the session-id parameter names stripped by default.
var DefaultStripParams = []string{"sid", "phpsessid", "jsessionid", "sessionid", "sessid", "aspsessionid", "cfid", "cftoken", "oscsid", "zenid"}

// inputFactor bounds the raw input (fragment excluded) that is looked at:
// inputs longer than inputFactor*MaxLen fail with ErrTooLong at once.
const inputFactor = 4

// Normalizer normalises and resolves URLs. It is immutable and safe for
// concurrent use.
type Normalizer struct {
	maxLen   int
	maxInput int
	strip    []string // lower-case
	lens     uint64   // bit i set: some strip name has length i (< 64)
}

// New returns a Normalizer for o.
func New(o Options) *Normalizer {
	n := &Normalizer{maxLen: o.MaxLen}
	if n.maxLen <= 0 || n.maxLen > crawl.MaxURLLen {
		n.maxLen = crawl.MaxURLLen
	}
	n.maxInput = inputFactor * n.maxLen
	names := o.StripParams
	if names == nil {
		names = DefaultStripParams
	}
	for _, s := range names {
		if s == "" || len(s) >= 64 {
			continue
		}
		n.strip = append(n.strip, strings.ToLower(s))
		n.lens |= 1 << len(s)
	}
	return n
}

// MaxLen returns the longest URL the Normalizer produces.
func (n *Normalizer) MaxLen() int { return n.maxLen }

// Normalize appends the normalised form of the absolute URL raw to dst. On
// error dst is returned unchanged and the error wraps ErrScheme, ErrHost,
// ErrTooLong or ErrSyntax.
func (n *Normalizer) Normalize(dst, raw []byte) ([]byte, error) {
	out, err := n.normalize(dst, raw)
	if err != nil {
		return dst, wrap(err, raw)
	}
	return out, nil
}

// NormalizeString is Normalize for a string, returning a new string.
func (n *Normalizer) NormalizeString(raw string) (string, error) {
	out, err := n.Normalize(make([]byte, 0, len(raw)+8), []byte(raw))
	return string(out), err
}

func (n *Normalizer) normalize(dst, raw []byte) ([]byte, error) {
	ref, err := n.prepare(raw)
	if err != nil {
		return dst, err
	}
	sch, rest := splitScheme(ref)
	switch sch {
	case schemeNone:
		return dst, ErrSyntax
	case schemeOther:
		return dst, ErrScheme
	}
	if len(rest) < 2 || rest[0] != '/' || rest[1] != '/' {
		return dst, ErrHost // "http:x" has no authority
	}
	return n.absolute(dst, sch == schemeHTTPS, rest[2:], nil)
}

// prepare trims the input, cuts the fragment, bounds the length and drops
// tabs and newlines.
func (n *Normalizer) prepare(raw []byte) ([]byte, error) {
	ref := trimSpace(raw)
	if i := bytes.IndexByte(ref, '#'); i >= 0 {
		ref = ref[:i]
	}
	if len(ref) > n.maxInput {
		return nil, ErrTooLong
	}
	if hasTabNL(ref) {
		ref = stripTabNL(ref)
	}
	return ref, nil
}

// Scheme kinds found by splitScheme.
const (
	schemeNone = iota
	schemeHTTP
	schemeHTTPS
	schemeOther
)

// splitScheme finds a leading "scheme:" (RFC 3986: ALPHA *( ALPHA / DIGIT /
// "+" / "-" / "." )) and returns its kind and the rest after the colon.
func splitScheme(b []byte) (int, []byte) {
	if len(b) == 0 || !(b[0] >= 'a' && b[0] <= 'z' || b[0] >= 'A' && b[0] <= 'Z') {
		return schemeNone, b
	}
	for i := 1; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.':
			continue
		case c == ':':
			switch {
			case equalFoldASCII(b[:i], "http"):
				return schemeHTTP, b[i+1:]
			case equalFoldASCII(b[:i], "https"):
				return schemeHTTPS, b[i+1:]
			}
			return schemeOther, b[i+1:]
		}
		break
	}
	return schemeNone, b
}

// absolute appends the normalisation of "scheme://" + rest (fragment and
// tabs already removed). If b is not nil and rest starts with b's authority
// in normal form, b's origin is copied instead of normalised again; if b
// is a document's, the query is written in its encoding.
func (n *Normalizer) absolute(dst []byte, https bool, rest []byte, b *Base) ([]byte, error) {
	start := len(dst)
	end := 0
	for end < len(rest) && rest[end] != '/' && rest[end] != '?' {
		end++
	}
	if b != nil && https == b.https && bytes.Equal(rest[:end], b.authority()) {
		dst = append(dst, b.u[:b.origin]...)
	} else {
		var err error
		if dst, err = appendAuthority(dst, https, rest[:end]); err != nil {
			return dst[:start], err
		}
	}
	path, query, hasQuery := cutByte(rest[end:], '?')
	doc := b != nil && b.doc.on
	ps := len(dst)
	if len(path) == 0 {
		dst = append(dst, '/')
	} else {
		dst = appendEscaped(dst, path, doc)
	}
	dst = n.finishPath(dst, ps)
	if hasQuery {
		text := false
		if doc {
			query, text = b.doc.prepareQuery(query)
		}
		dst = n.appendQuery(dst, query, text)
	}
	if len(dst)-start > n.maxLen {
		return dst[:start], ErrTooLong
	}
	return dst, nil
}

// cutByte splits b around the first c.
func cutByte(b []byte, c byte) (before, after []byte, found bool) {
	if i := bytes.IndexByte(b, c); i >= 0 {
		return b[:i], b[i+1:], true
	}
	return b, nil, false
}

// finishPath strips session path parameters and dot segments from the
// escaped path in dst[ps:].
func (n *Normalizer) finishPath(dst []byte, ps int) []byte {
	p := dst[ps:]
	if len(n.strip) > 0 && bytes.IndexByte(p, ';') >= 0 {
		p = n.stripPathParams(p)
	}
	p = removeDotSegments(p)
	return dst[:ps+len(p)]
}

// appendQuery appends '?' and the normalised query q (text: see
// appendEscaped), without session parameters; nothing if that leaves it
// empty.
func (n *Normalizer) appendQuery(dst, q []byte, text bool) []byte {
	qs := len(dst)
	dst = append(dst, '?')
	dst = appendEscaped(dst, q, text)
	if len(n.strip) > 0 {
		p := n.stripQueryParams(dst[qs+1:])
		dst = dst[:qs+1+len(p)]
	}
	if len(dst) == qs+1 {
		dst = dst[:qs]
	}
	return dst
}

// stripped reports whether the parameter "name[=value]" in p is a session parameter.
func (n *Normalizer) stripped(p []byte) bool {
	name := p
	if i := bytes.IndexByte(p, '='); i >= 0 {
		name = p[:i]
	}
	if len(name) >= 64 || n.lens&(1<<len(name)) == 0 {
		return false
	}
	for _, s := range n.strip {
		if equalFoldASCII(name, s) {
			return true
		}
	}
	return false
}

// stripQueryParams removes session parameters from the '&'-separated query
// q in place.
func (n *Normalizer) stripQueryParams(q []byte) []byte {
	w, first := 0, true
	for r := 0; r <= len(q); {
		e := r
		for e < len(q) && q[e] != '&' {
			e++
		}
		if !n.stripped(q[r:e]) {
			if !first {
				q[w] = '&'
				w++
			}
			w += copy(q[w:], q[r:e])
			first = false
		}
		r = e + 1
	}
	return q[:w]
}

// stripPathParams removes ";name[=value]" path parameters whose name is a
// session parameter from p in place.
func (n *Normalizer) stripPathParams(p []byte) []byte {
	w, r := 0, 0
	for r < len(p) {
		if p[r] != ';' {
			p[w] = p[r]
			w++
			r++
			continue
		}
		e := r + 1
		for e < len(p) && p[e] != ';' && p[e] != '/' {
			e++
		}
		if !n.stripped(p[r+1 : e]) {
			w += copy(p[w:], p[r:e])
		}
		r = e
	}
	return p[:w]
}

package urlnorm

import (
	"bytes"

	"golang.org/x/text/encoding"
)

// Base is a parsed normalised absolute URL that references are resolved
// against. The zero value is unset; Set it before use. A Base can be Set
// again to reuse its buffer. A Base is not safe for concurrent use.
type Base struct {
	u       []byte
	check   []byte // Set's normalisation of its input
	https   bool
	origin  int // end of "scheme://host[:port]"
	dirEnd  int // just after the path's last '/'
	pathEnd int // end of the path: the '?' or len(u)

	doc document // the document the references come from, if any (SetDocument)
}

// Set parses the normalised absolute URL u into b, copying it. It returns an
// error wrapping ErrSyntax (and leaves b unset) if u is not in normal form
// (with session parameters allowed). Set keeps b's document (SetDocument):
// a <base href> changes a document's base URL, not its encoding.
func (b *Base) Set(u []byte) error {
	b.Reset()
	check, err := plain.normalize(b.check[:0], u)
	b.check = check
	if err != nil || !bytes.Equal(check, u) {
		return wrap(ErrSyntax, u)
	}
	b.u = append(b.u[:0], u...)
	rest := b.u[bytes.Index(b.u, []byte("://"))+3:]
	b.https = b.u[4] == 's'
	b.origin = len(b.u) - len(rest) + bytes.IndexByte(rest, '/')
	b.pathEnd = len(b.u)
	if q := bytes.IndexByte(b.u[b.origin:], '?'); q >= 0 {
		b.pathEnd = b.origin + q
	}
	b.dirEnd = b.origin + bytes.LastIndexByte(b.u[b.origin:b.pathEnd], '/') + 1
	return nil
}

// plain checks that a Base is normalised; it strips no parameters.
var plain = New(Options{StripParams: []string{}})

// SetString is Set for a string.
func (b *Base) SetString(u string) error {
	b.Reset()
	b.u = append(b.u[:0], u...)
	return b.Set(b.u) // Set copies b.u onto itself, which is harmless
}

// Reset makes b unset, keeping its buffer and its document (SetDocument).
func (b *Base) Reset() {
	b.u, b.https, b.origin, b.dirEnd, b.pathEnd = b.u[:0], false, 0, 0, 0
}

// authority returns "host[:port]" of b.
func (b *Base) authority() []byte {
	if b.https {
		return b.u[len("https://"):b.origin]
	}
	return b.u[len("http://"):b.origin]
}

// SetDocument makes b the base of a document's references: text in UTF-8
// (an HTML page once decoded) whose queries are written in the encoding
// query, as the URL Standard's parser reads a document's URLs. Resolve
// then reads an ill-formed UTF-8 sequence in a reference as U+FFFD (as a
// decoder would have output it), keeps the path percent-encoded from
// UTF-8, and writes the query's non-ASCII characters in query, then
// percent-encoded ("percent-encode after encoding"): one that query cannot
// represent as "%26%23" + its code point in decimal + "%3B", the escaped
// "&#NNNN;". query nil or UTF-8 is UTF-8, at no cost; a UTF-16 or
// replacement document's output encoding is UTF-8, so pass nil for them.
// query's encoder must report an unrepresentable character as an error,
// as golang.org/x/text's encoders do unless wrapped (by
// encoding.HTMLEscapeUnsupported, say). Each call makes a new encoder.
// Set and Reset keep the document; ClearDocument ends it.
func (b *Base) SetDocument(query encoding.Encoding) { b.doc.set(query) }

// ClearDocument makes b the base of references that are not a document's
// text (the default): Resolve percent-encodes their bytes as they stand.
func (b *Base) ClearDocument() { b.doc.on, b.doc.enc = false, nil }

// IsSet reports whether b holds a URL.
func (b *Base) IsSet() bool { return b.origin > 0 }

// Bytes returns the base URL; it aliases b's buffer until the next Set.
func (b *Base) Bytes() []byte { return b.u }

// String returns the base URL.
func (b *Base) String() string { return string(b.u) }

// Resolve appends the normalised absolute form of ref (an href: absolute,
// network-path, absolute-path or relative reference) resolved against base
// to dst, following RFC 3986 section 5.2. If base is a document's
// (SetDocument), ref is read as that document's text and its query
// written in the document's encoding. On error dst is returned unchanged
// and the error wraps ErrScheme, ErrHost, ErrTooLong or ErrSyntax.
func (n *Normalizer) Resolve(dst []byte, base *Base, ref []byte) ([]byte, error) {
	out, err := n.resolve(dst, base, ref)
	if err != nil {
		return dst, wrap(err, ref)
	}
	return out, nil
}

func (n *Normalizer) resolve(dst []byte, b *Base, raw []byte) ([]byte, error) {
	if !b.IsSet() {
		return dst, ErrSyntax
	}
	ref, err := n.prepare(raw)
	if err != nil {
		return dst, err
	}
	switch sch, rest := splitScheme(ref); sch {
	case schemeOther:
		return dst, ErrScheme
	case schemeHTTP, schemeHTTPS:
		https := sch == schemeHTTPS
		if len(rest) >= 2 && rest[0] == '/' && rest[1] == '/' {
			return n.absolute(dst, https, rest[2:], b)
		}
		if https != b.https {
			return dst, ErrHost // "https:x" against an http base has no authority
		}
		ref = rest // same scheme, no authority: relative (RFC 3986 5.4.2, non-strict)
	}
	if len(ref) >= 2 && ref[0] == '/' && ref[1] == '/' {
		return n.absolute(dst, b.https, ref[2:], b)
	}
	start := len(dst)
	path, query, hasQuery := cutByte(ref, '?')
	dst = append(dst, b.u[:b.origin]...)
	ps := len(dst)
	switch {
	case len(path) == 0:
		if !hasQuery {
			dst = append(dst, b.u[b.origin:]...) // the base itself
			if len(dst)-start > n.maxLen {
				return dst[:start], ErrTooLong
			}
			return dst, nil
		}
		dst = append(dst, b.u[b.origin:b.pathEnd]...)
	case path[0] == '/':
		dst = appendEscaped(dst, path, b.doc.on)
		dst = n.finishPath(dst, ps)
	default:
		dst = append(dst, b.u[b.origin:b.dirEnd]...)
		dst = appendEscaped(dst, path, b.doc.on)
		dst = n.finishPath(dst, ps)
	}
	if hasQuery {
		q, text := b.doc.prepareQuery(query)
		dst = n.appendQuery(dst, q, text)
	}
	if len(dst)-start > n.maxLen {
		return dst[:start], ErrTooLong
	}
	return dst, nil
}

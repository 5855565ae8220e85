package urlnorm

import "bytes"

// Base is a parsed normalised absolute URL that references are resolved
// against. The zero value is unset; Set it before use. A Base can be Set
// again to reuse its buffer.
type Base struct {
	u       []byte
	check   []byte // Set's normalisation of its input
	https   bool
	origin  int // end of "scheme://host[:port]"
	dirEnd  int // just after the path's last '/'
	pathEnd int // end of the path: the '?' or len(u)
}

// Set parses the normalised absolute URL u into b, copying it. It returns an
// error wrapping ErrSyntax (and leaves b unset) if u is not in normal form
// (with session parameters allowed).
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

// Reset makes b unset, keeping its buffer.
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

// IsSet reports whether b holds a URL.
func (b *Base) IsSet() bool { return b.origin > 0 }

// Bytes returns the base URL; it aliases b's buffer until the next Set.
func (b *Base) Bytes() []byte { return b.u }

// String returns the base URL.
func (b *Base) String() string { return string(b.u) }

// Resolve appends the normalised absolute form of ref (an href: absolute,
// network-path, absolute-path or relative reference) resolved against base
// to dst, following RFC 3986 section 5.2. On error dst is returned unchanged
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
		dst = appendEscaped(dst, path)
		dst = n.finishPath(dst, ps)
	default:
		dst = append(dst, b.u[b.origin:b.dirEnd]...)
		dst = appendEscaped(dst, path)
		dst = n.finishPath(dst, ps)
	}
	if hasQuery {
		dst = n.appendQuery(dst, query)
	}
	if len(dst)-start > n.maxLen {
		return dst[:start], ErrTooLong
	}
	return dst, nil
}

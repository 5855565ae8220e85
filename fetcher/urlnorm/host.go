package urlnorm

import (
	"net/netip"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Host name limits (RFC 1035).
const (
	maxHostLen  = 253
	maxLabelLen = 63
)

// hostByte marks the bytes a normalised host may contain.
var hostByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_'
	}
	return t
}()

// appendAuthority appends "scheme://host[:port]" for the raw authority auth
// (userinfo dropped, host normalised, default port dropped). The host is a
// name or an IPv6 literal in brackets.
func appendAuthority(dst []byte, https bool, auth []byte) ([]byte, error) {
	if https {
		dst = append(dst, "https://"...)
	} else {
		dst = append(dst, "http://"...)
	}
	for i := len(auth) - 1; i >= 0; i-- {
		if auth[i] == '@' {
			auth = auth[i+1:]
			break
		}
	}
	host, port := auth, []byte(nil)
	for i := len(auth) - 1; i >= 0; i-- {
		if c := auth[i]; c == ':' {
			host, port = auth[:i], auth[i+1:]
			break
		} else if c < '0' || c > '9' {
			break
		}
	}
	var err error
	if len(host) > 0 && host[0] == '[' {
		dst, err = appendIPv6(dst, host)
	} else {
		dst, err = appendHost(dst, host)
	}
	if err != nil {
		return dst, err
	}
	// Port: digits only (checked above), leading zeros dropped, 1..65535.
	for len(port) > 0 && port[0] == '0' {
		port = port[1:]
		if len(port) == 0 {
			return dst, ErrHost // all zeros: port 0
		}
	}
	if len(port) == 0 {
		return dst, nil // none, or empty: the default
	}
	if len(port) > 5 {
		return dst, ErrHost
	}
	v := 0
	for _, c := range port {
		v = v*10 + int(c-'0')
	}
	if v > 65535 {
		return dst, ErrHost
	}
	if (https && v == 443) || (!https && v == 80) {
		return dst, nil
	}
	dst = append(dst, ':')
	return append(dst, port...), nil
}

// errIPv6 and errIPv6Zone are the ErrHost of a bad IPv6 literal.
var (
	errIPv6     = &hostError{"bad IPv6 literal"}
	errIPv6Zone = &hostError{"IPv6 zone identifiers are not crawled"}
)

// hostError is an ErrHost that says what is wrong with the host.
type hostError struct{ why string }

func (e *hostError) Error() string { return ErrHost.Error() + " (" + e.why + ")" }

// Unwrap returns ErrHost.
func (e *hostError) Unwrap() error { return ErrHost }

// appendIPv6 appends the normal form of the IPv6 literal h ("[...]") as
// the WHATWG URL Standard serialises it (RFC 5952's form): lower-case hex
// without leading zeros, the first longest run of two or more zero groups
// written "::", no dotted IPv4 tail (an IPv4-mapped address is
// "[::ffff:c000:201]"), in brackets. A zone identifier ("%25eth0", RFC
// 6874) is refused, as browsers refuse it, and so is anything the
// Standard's IPv6 parser refuses (percent-escapes, an IPv4 address, bad
// groups).
func appendIPv6(dst, h []byte) ([]byte, error) {
	if len(h) < 2 || h[len(h)-1] != ']' {
		return dst, errIPv6
	}
	in := h[1 : len(h)-1]
	for i, c := range in {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == ':', c == '.':
		case c == '%':
			// "%25eth0" (RFC 6874) or "%eth0" (RFC 4007) is a zone; another
			// escape is just not decoded in a literal.
			if rest := in[i+1:]; len(rest) >= 2 && unhex(rest[0]) < 16 && unhex(rest[1]) < 16 && string(rest[:2]) != "25" {
				return dst, errIPv6
			}
			return dst, errIPv6Zone
		default:
			return dst, errIPv6
		}
	}
	a, err := netip.ParseAddr(string(in))
	if err != nil || !a.Is6() {
		return dst, errIPv6
	}
	return appendIPv6Addr(dst, a), nil
}

// appendIPv6Addr appends a (IPv6, no zone) in brackets, serialised by the
// WHATWG URL Standard's IPv6 serializer.
func appendIPv6Addr(dst []byte, a netip.Addr) []byte {
	b := a.As16()
	var g [8]uint16
	for i := range g {
		g[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
	}
	// The first longest run of two or more zero groups.
	comp, best := -1, 1
	for i := 0; i < len(g); {
		if g[i] != 0 {
			i++
			continue
		}
		j := i
		for j < len(g) && g[j] == 0 {
			j++
		}
		if j-i > best {
			comp, best = i, j-i
		}
		i = j
	}
	const hex = "0123456789abcdef"
	dst = append(dst, '[')
	for i := 0; i < len(g); i++ {
		if i == comp {
			if i == 0 {
				dst = append(dst, ':')
			}
			dst = append(dst, ':')
			i += best - 1
			continue
		}
		v := g[i]
		for shift := 12; shift >= 0; shift -= 4 {
			if v>>shift != 0 || shift == 0 { // no leading zeros
				dst = append(dst, hex[v>>shift&0xf])
			}
		}
		if i != len(g)-1 {
			dst = append(dst, ':')
		}
	}
	return append(dst, ']')
}

// appendHost appends the normalised form of the raw host h.
func appendHost(dst, h []byte) ([]byte, error) {
	start := len(dst)
	i := 0
	for i < len(h) && hostByte[h[i]] {
		i++
	}
	dst = append(dst, h[:i]...) // usually all of it
	for _, c := range h[i:] {
		c = lowerASCII(c)
		if !hostByte[c] {
			if c == '%' || c >= 0x80 {
				return appendHostSlow(dst[:start], h)
			}
			return dst[:start], ErrHost
		}
		dst = append(dst, c)
	}
	return checkHost(dst, start)
}

// appendHostSlow handles hosts with percent-escapes or non-ASCII bytes:
// escapes are decoded once, then IDNA (UTS #46, lookup profile) maps the
// name to ASCII.
func appendHostSlow(dst, h []byte) ([]byte, error) {
	dec := make([]byte, 0, len(h))
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c == '%' {
			if i+2 >= len(h) {
				return dst, ErrHost
			}
			hi, lo := unhex(h[i+1]), unhex(h[i+2])
			if hi > 15 || lo > 15 {
				return dst, ErrHost
			}
			c = hi<<4 | lo
			if c == '%' {
				return dst, ErrHost // decoding twice would not be idempotent
			}
			i += 2
		}
		dec = append(dec, c)
	}
	ascii := string(dec)
	if !isASCII(dec) {
		if !utf8.Valid(dec) {
			return dst, ErrHost
		}
		var err error
		if ascii, err = idna.Lookup.ToASCII(ascii); err != nil {
			return dst, ErrHost
		}
	}
	start := len(dst)
	for i := 0; i < len(ascii); i++ {
		c := lowerASCII(ascii[i])
		if !hostByte[c] {
			return dst[:start], ErrHost
		}
		dst = append(dst, c)
	}
	return checkHost(dst, start)
}

// checkHost validates the host in dst[start:] (lower-case, only host bytes):
// it drops one trailing dot and rejects empty labels, labels over 63 bytes
// and hosts over 253 bytes.
func checkHost(dst []byte, start int) ([]byte, error) {
	if len(dst) > start && dst[len(dst)-1] == '.' {
		dst = dst[:len(dst)-1]
	}
	h := dst[start:]
	if len(h) == 0 || len(h) > maxHostLen {
		return dst[:start], ErrHost
	}
	label := 0
	for _, c := range h {
		if c == '.' {
			if label == 0 {
				return dst[:start], ErrHost
			}
			label = 0
			continue
		}
		if label++; label > maxLabelLen {
			return dst[:start], ErrHost
		}
	}
	if label == 0 {
		return dst[:start], ErrHost // "a.." ends in an empty label
	}
	return dst, nil
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

package links

import (
	"fmt"
	"strings"
)

// HeaderLink is one link of a Link header (RFC 8288): its target as
// written (not resolved) and the parameters the crawler reads. Of a
// parameter given more than once, the first counts (RFC 8288, section 3).
type HeaderLink struct {
	Target string
	Rel    string // the rel parameter: relation types separated by spaces; "" if none
	Type   string // the type parameter; "" if none
	// Anchor is the anchor parameter: the link's context, when it is not
	// the resource itself ("" if none, HasAnchor false).
	Anchor    string
	HasAnchor bool
}

// HasRel reports whether l's rel has the relation type rel (ASCII
// case-insensitive, as RFC 8288 compares registered types).
func (l *HeaderLink) HasRel(rel string) bool {
	for _, r := range strings.Fields(l.Rel) {
		if strings.EqualFold(r, rel) {
			return true
		}
	}
	return false
}

// OfResource reports whether the link is about the resource that carried
// the header: it has no anchor parameter, or an empty one.
func (l *HeaderLink) OfResource() bool { return !l.HasAnchor || l.Anchor == "" }

// ParseLinkHeader parses the values of a response's Link headers (RFC
// 8288, section 3): each is a comma-separated list of link-values
// "<target>; param=value; param="quoted value"", with optional white space
// around the separators. Parameter names are case-insensitive; values are
// tokens or quoted strings (backslash escapes decoded); the "rel*" and
// other extended (RFC 8187) parameters are not decoded. A link-value that
// does not parse (no '<' target, an unterminated target) is skipped up to
// the next comma outside quotes and angle brackets, and the first such
// problem is returned as an error that says which value and byte offset,
// together with the links that did parse. It never panics, and its work is
// linear in the values' length.
func ParseLinkHeader(values []string) ([]HeaderLink, error) {
	var out []HeaderLink
	var first error
	for vi, v := range values {
		p := linkParser{s: v}
		for {
			p.skipOWS()
			for p.i < len(p.s) && p.s[p.i] == ',' { // empty list elements
				p.i++
				p.skipOWS()
			}
			if p.i >= len(p.s) {
				break
			}
			l, what := p.linkValue()
			if what != "" {
				if first == nil {
					first = fmt.Errorf("links: Link header value %d, offset %d: %s", vi, p.i, what)
				}
				p.skipToComma()
				continue
			}
			out = append(out, l)
		}
	}
	return out, first
}

// linkParser reads one Link header value.
type linkParser struct {
	s string
	i int
}

func (p *linkParser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// skipToComma moves past the next comma that is not in a quoted string or
// a <target>, or to the end.
func (p *linkParser) skipToComma() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ',':
			p.i++
			return
		case '"':
			p.quoted()
			continue
		case '<':
			if j := strings.IndexByte(p.s[p.i:], '>'); j >= 0 {
				p.i += j + 1
				continue
			}
			p.i = len(p.s)
			return
		}
		p.i++
	}
}

// linkValue reads one link-value at p.i (after white space); what says
// why it does not parse ("" if it does). It stops after the link-value's
// comma, or at the end.
func (p *linkParser) linkValue() (l HeaderLink, what string) {
	if p.s[p.i] != '<' {
		return l, fmt.Sprintf("want '<' before a link target, got %q", p.s[p.i])
	}
	end := strings.IndexByte(p.s[p.i+1:], '>')
	if end < 0 {
		return l, "link target without its '>'"
	}
	l.Target = strings.TrimSpace(p.s[p.i+1 : p.i+1+end])
	p.i += end + 2
	var seen uint8 // rel, type, anchor
	for {
		p.skipOWS()
		if p.i >= len(p.s) {
			return l, ""
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			return l, ""
		case ';':
			p.i++
		default:
			return l, fmt.Sprintf("want ';' or ',' after a link parameter, got %q", p.s[p.i])
		}
		p.skipOWS()
		start := p.i
		for p.i < len(p.s) && !strings.ContainsRune("=;, \t", rune(p.s[p.i])) {
			p.i++
		}
		name := p.s[start:p.i]
		p.skipOWS()
		val, hasVal := "", false
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			p.skipOWS()
			hasVal = true
			if p.i < len(p.s) && p.s[p.i] == '"' {
				val = p.quoted()
			} else {
				start := p.i
				for p.i < len(p.s) && p.s[p.i] != ';' && p.s[p.i] != ',' {
					p.i++
				}
				val = strings.TrimRight(p.s[start:p.i], " \t")
			}
		}
		switch {
		case strings.EqualFold(name, "rel") && seen&1 == 0:
			seen |= 1
			l.Rel = val
		case strings.EqualFold(name, "type") && seen&2 == 0:
			seen |= 2
			l.Type = val
		case strings.EqualFold(name, "anchor") && seen&4 == 0:
			seen |= 4
			l.Anchor, l.HasAnchor = val, hasVal
		}
	}
}

// quoted reads the quoted string at p.i (a '"'), decoding backslash
// escapes; an unterminated one ends with the value.
func (p *linkParser) quoted() string {
	p.i++ // the opening quote
	start := p.i
	var b []byte // only for a string with escapes
	for p.i < len(p.s) {
		switch c := p.s[p.i]; c {
		case '"':
			p.i++
			if b == nil {
				return p.s[start : p.i-1]
			}
			return string(b)
		case '\\':
			if b == nil {
				b = append(make([]byte, 0, p.i-start+16), p.s[start:p.i]...)
			}
			p.i++
			if p.i < len(p.s) {
				b = append(b, p.s[p.i])
				p.i++
			}
		default:
			if b != nil {
				b = append(b, c)
			}
			p.i++
		}
	}
	if b == nil {
		return p.s[start:]
	}
	return string(b)
}

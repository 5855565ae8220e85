package links

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// Where a page's encoding was found: the steps of the HTML standard's
// encoding sniffing algorithm, in order.
const (
	fromBOM     = iota // a byte order mark
	fromHeader         // the Content-Type's charset
	fromMeta           // <meta charset> or <meta http-equiv> in the first 1,024 bytes
	fromXMLDecl        // an XHTML page's <?xml encoding?>
	fromDefault        // none of these
)

// prescanLen is how much of a page the meta prescan reads, as the HTML
// standard suggests and Chrome and Firefox do: a declaration that does not
// end within it is not seen.
const prescanLen = 1024

// sniff returns the encoding of a page served with Content-Type
// contentType by the HTML standard's encoding sniffing algorithm, and the
// length of its BOM: a BOM (UTF-8, UTF-16BE, UTF-16LE), then the
// Content-Type's charset, then the prescan of the first 1,024 bytes for
// <meta charset> or <meta http-equiv=Content-Type content="...charset=">.
// Without any, where the standard lets a browser guess, the page is UTF-8
// if it has non-ASCII bytes and is valid UTF-8 throughout (Chrome detects
// UTF-8 so; x/net/html/charset does over the first 1,024 bytes only), else
// windows-1252, the standard's default for most locales and
// x/net/html/charset's. An XHTML page (application/xhtml+xml) follows
// XML's rules instead of the prescan: its <?xml encoding?>, else UTF-8.
func sniff(contentType string, body []byte) (cs *codec, bom, from int) {
	switch {
	case len(body) >= 3 && body[0] == 0xef && body[1] == 0xbb && body[2] == 0xbf:
		return csUTF8, 3, fromBOM
	case len(body) >= 2 && body[0] == 0xfe && body[1] == 0xff:
		return csUTF16BE, 2, fromBOM
	case len(body) >= 2 && body[0] == 0xff && body[1] == 0xfe:
		return csUTF16LE, 2, fromBOM
	}
	label, ok, xhtml := headerCharset(contentType)
	if ok {
		if cs := lookupLabel(label); cs != nil {
			return cs, 0, fromHeader
		}
	}
	head := body[:min(len(body), prescanLen)]
	if xhtml {
		if cs := xmlDeclaration(head); cs != nil {
			return cs, 0, fromXMLDecl
		}
		return csUTF8, 0, fromDefault
	}
	if cs := prescan(head); cs != nil {
		return cs, 0, fromMeta
	}
	if hasNonASCII(body) && utf8.Valid(body) {
		return csUTF8, 0, fromDefault
	}
	return csWindows1252, 0, fromDefault
}

// isHTTPSpace reports whether c is HTTP whitespace (tab, LF, CR, space).
func isHTTPSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isTokens reports whether s is a non-empty run of HTTP token code points.
func isTokens(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// trimHTTPSpace drops HTTP whitespace at the end of s.
func trimHTTPSpaceRight(s string) string {
	for s != "" && isHTTPSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// headerCharset returns the charset parameter of the Content-Type ct (ok
// false: none), read as the MIME Sniffing standard's "parse a MIME type"
// reads it: a malformed type or subtype has no parameters, the first
// charset parameter counts, a quoted value is unquoted, a value with
// control characters is skipped. xhtml reports whether the type is
// application/xhtml+xml.
func headerCharset(ct string) (label string, ok, xhtml bool) {
	s := strings.TrimLeft(ct, " \t\n\r")
	slash := strings.IndexByte(s, '/')
	if slash < 0 || !isTokens(s[:slash]) {
		return "", false, false
	}
	typ := s[:slash]
	s = s[slash+1:]
	end := strings.IndexByte(s, ';')
	if end < 0 {
		end = len(s)
	}
	sub := trimHTTPSpaceRight(s[:end])
	if !isTokens(sub) {
		return "", false, false
	}
	xhtml = strings.EqualFold(typ, "application") && strings.EqualFold(sub, "xhtml+xml")
	s = s[end:]
	for s != "" {
		s = strings.TrimLeft(s[1:], " \t\n\r") // past the ';'
		i := strings.IndexAny(s, ";=")
		if i < 0 {
			break // a name with no value ends the parameters
		}
		name := s[:i]
		s = s[i:]
		if s[0] == ';' {
			continue
		}
		s = s[1:] // the '='
		var value string
		if s != "" && s[0] == '"' {
			value, s = quotedString(s)
			if i := strings.IndexByte(s, ';'); i >= 0 {
				s = s[i:]
			} else {
				s = ""
			}
		} else {
			i := strings.IndexByte(s, ';')
			if i < 0 {
				i = len(s)
			}
			value = trimHTTPSpaceRight(s[:i])
			s = s[i:]
			if value == "" {
				continue
			}
		}
		if strings.EqualFold(name, "charset") && isTokens(name) && quotedTokens(value) {
			return value, true, xhtml
		}
	}
	return "", false, xhtml
}

// quotedString reads the HTTP quoted string at the start of s (s[0] is
// '"') and returns its value, with quoted-pairs ("\x") unescaped, and the
// rest of s after its closing quote.
func quotedString(s string) (value, rest string) {
	var b []byte // only if there is a quoted-pair
	start := 1
	for j := 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			b = append(b, s[start:j]...)
			if j+1 < len(s) {
				j++
			}
			start = j
		case '"':
			if b == nil {
				return s[start:j], s[j+1:]
			}
			return string(append(b, s[start:j]...)), s[j+1:]
		}
	}
	if b == nil {
		return s[start:], ""
	}
	return string(append(b, s[start:]...)), ""
}

// quotedTokens reports whether s is all HTTP quoted-string token code
// points (tab, space to '~', 0x80-0xff), as a parameter value must be.
func quotedTokens(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '\t' && (c < ' ' || c == 0x7f) {
			return false
		}
	}
	return true
}

// prescan is the HTML standard's "prescan a byte stream to determine its
// encoding" over head, the first 1,024 bytes of a page: comments, other
// tags and their attributes, "<!", "</" and "<?" are skipped; a <meta>
// gives its charset attribute's encoding, or its content attribute's
// "charset=" if it also has http-equiv="Content-Type"; an unknown label
// leaves the element for the next; a meta declaring UTF-16 means UTF-8
// and one declaring x-user-defined windows-1252. A page that begins as
// "<?x" does in UTF-16 is UTF-16. A tag that runs past head ends the
// prescan with nothing found. nil: no encoding declared.
func prescan(head []byte) *codec {
	switch {
	case bytes.HasPrefix(head, []byte("<\x00?\x00x\x00")):
		return csUTF16LE
	case bytes.HasPrefix(head, []byte("\x00<\x00?\x00x")):
		return csUTF16BE
	}
	for i := 0; i < len(head); i++ {
		j := bytes.IndexByte(head[i:], '<')
		if j < 0 {
			return nil
		}
		i += j
		rest := head[i:]
		switch {
		case bytes.HasPrefix(rest, []byte("<!--")):
			k := bytes.Index(rest[2:], []byte("-->")) // "<!-->" is a whole comment
			if k < 0 {
				return nil
			}
			i += 2 + k + 2 // the '>'
		case len(rest) >= 6 && asciiEqualFold(rest[1:5], "meta") && (isSpace(rest[5]) || rest[5] == '/'):
			cs, next := metaCharset(head, i+6)
			if next < 0 {
				return nil
			}
			if cs != nil {
				return cs
			}
			i = next
		case len(rest) >= 2 && isAlpha(rest[1]), len(rest) >= 3 && rest[1] == '/' && isAlpha(rest[2]):
			k := i + 1
			for k < len(head) && !isSpace(head[k]) && head[k] != '>' {
				k++
			}
			for {
				_, _, next, ok := prescanAttr(head, k)
				if next < 0 {
					return nil
				}
				k = next
				if !ok {
					break
				}
			}
			i = k
		case len(rest) >= 2 && (rest[1] == '!' || rest[1] == '/' || rest[1] == '?'):
			k := bytes.IndexByte(rest[1:], '>')
			if k < 0 {
				return nil
			}
			i += 1 + k
		}
	}
	return nil
}

// isAlpha reports whether c is an ASCII letter.
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// metaCharset reads the attributes of a <meta> from head[i:] and returns
// the encoding it declares (nil: none) and where the prescan goes on
// (next < 0: past head).
func metaCharset(head []byte, i int) (cs *codec, next int) {
	var seenEquiv, seenContent, seenCharset bool
	gotPragma, charsetSet := false, false
	const (
		pragmaUnknown = iota
		pragmaNeeded
		pragmaNotNeeded
	)
	need := pragmaUnknown
	for {
		name, value, n, ok := prescanAttr(head, i)
		if n < 0 {
			return nil, -1
		}
		i = n
		if !ok {
			break
		}
		switch {
		case asciiEqualFold(name, "http-equiv"):
			if !seenEquiv {
				seenEquiv = true
				gotPragma = asciiEqualFold(value, "content-type")
			}
		case asciiEqualFold(name, "content"):
			if !seenContent {
				seenContent = true
				if label, found := metaContentCharset(value); found && !charsetSet {
					if c := lookupLabel(label); c != nil {
						cs, charsetSet, need = c, true, pragmaNeeded
					}
				}
			}
		case asciiEqualFold(name, "charset"):
			if !seenCharset {
				seenCharset = true
				cs, charsetSet, need = lookupLabel(value), true, pragmaNotNeeded
			}
		}
	}
	if need == pragmaUnknown || need == pragmaNeeded && !gotPragma || cs == nil {
		return nil, i
	}
	switch cs {
	case csUTF16LE, csUTF16BE:
		cs = csUTF8
	case csUserDefined:
		cs = csWindows1252
	}
	return cs, i
}

// prescanAttr is the HTML standard's "get an attribute" of the prescan,
// from head[i:]: it returns the attribute's name and value as they stand
// in head (the standard lower-cases them; callers compare them ignoring
// ASCII case) and where it stopped; ok false if there is none (at '>'),
// next < 0 if the attribute runs past head.
func prescanAttr(head []byte, i int) (name, value []byte, next int, ok bool) {
	for i < len(head) && (isSpace(head[i]) || head[i] == '/') {
		i++
	}
	if i >= len(head) {
		return nil, nil, -1, false
	}
	if head[i] == '>' {
		return nil, nil, i, false
	}
	start := i
	for {
		if i >= len(head) {
			return nil, nil, -1, false
		}
		c := head[i]
		if c == '=' && i > start {
			name = head[start:i]
			i++
			break
		}
		if isSpace(c) {
			name = head[start:i]
			for i < len(head) && isSpace(head[i]) {
				i++
			}
			if i >= len(head) {
				return nil, nil, -1, false
			}
			if head[i] != '=' {
				return name, nil, i, true
			}
			i++
			break
		}
		if c == '/' || c == '>' {
			return head[start:i], nil, i, true
		}
		i++
	}
	for i < len(head) && isSpace(head[i]) {
		i++
	}
	if i >= len(head) {
		return nil, nil, -1, false
	}
	switch c := head[i]; c {
	case '"', '\'':
		k := bytes.IndexByte(head[i+1:], c)
		if k < 0 {
			return nil, nil, -1, false
		}
		return name, head[i+1 : i+1+k], i + 2 + k, true
	case '>':
		return name, nil, i, true
	}
	start = i
	for i < len(head) && !isSpace(head[i]) && head[i] != '>' {
		i++
	}
	if i >= len(head) {
		return nil, nil, -1, false
	}
	return name, head[start:i], i, true
}

// metaContentCharset is the HTML standard's "algorithm for extracting a
// character encoding from a meta element" over a content attribute's
// value: the label after the first "charset" (any case) followed by '=',
// quoted or up to whitespace or ';'.
func metaContentCharset(s []byte) (label []byte, ok bool) {
	for {
		i := indexFold(s, "charset")
		if i < 0 {
			return nil, false
		}
		s = s[i+len("charset"):]
		for len(s) > 0 && isSpace(s[0]) {
			s = s[1:]
		}
		if len(s) == 0 || s[0] != '=' {
			continue
		}
		s = s[1:]
		for len(s) > 0 && isSpace(s[0]) {
			s = s[1:]
		}
		if len(s) == 0 {
			return nil, false
		}
		if q := s[0]; q == '"' || q == '\'' {
			k := bytes.IndexByte(s[1:], q)
			if k < 0 {
				return nil, false
			}
			return s[1 : 1+k], true
		}
		k := 0
		for k < len(s) && !isSpace(s[k]) && s[k] != ';' {
			k++
		}
		return s[:k], true
	}
}

// indexFold returns the index of the first match of lower (lower-case
// ASCII) in s, ignoring ASCII case; -1 if none.
func indexFold(s []byte, lower string) int {
	for i := 0; i+len(lower) <= len(s); i++ {
		if asciiEqualFold(s[i:i+len(lower)], lower) {
			return i
		}
	}
	return -1
}

// xmlDeclaration returns the encoding the XML declaration that head
// starts with names; nil if there is none, or it names an unknown
// encoding or UTF-16 (which an ASCII-compatible declaration cannot be in).
func xmlDeclaration(head []byte) *codec {
	if len(head) < 6 || !bytes.HasPrefix(head, []byte("<?xml")) || !isSpace(head[5]) {
		return nil
	}
	end := bytes.Index(head, []byte("?>"))
	if end < 0 {
		return nil
	}
	decl := head[5:end]
	i := bytes.Index(decl, []byte("encoding"))
	if i < 0 {
		return nil
	}
	rest := bytes.TrimLeft(decl[i+len("encoding"):], " \t\r\n")
	if len(rest) == 0 || rest[0] != '=' {
		return nil
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' && rest[0] != '\'' {
		return nil
	}
	q := bytes.IndexByte(rest[1:], rest[0])
	if q < 0 {
		return nil
	}
	cs := lookupLabel(rest[1 : 1+q])
	if cs == csUTF16LE || cs == csUTF16BE {
		return nil
	}
	return cs
}

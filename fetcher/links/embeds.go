package links

import (
	"bytes"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// ExtractCSS returns the requisites of a stylesheet fetched from sheetURL
// (normalised): its url() and @import references, resolved against
// sheetURL, normalised and scoped as Extract's embeds, in Page.Embeds. It
// works whether or not requisites are on. The returned Page is reused by
// the next call; its Embeds slice and strings are not.
func (e *Extractor) ExtractCSS(sheetURL string, css []byte) *Page {
	e.page = Page{}
	e.embeds.reset()
	p := &e.page
	e.pageURL = append(e.pageURL[:0], sheetURL...)
	if err := e.base.Set(e.pageURL); err != nil {
		p.Err = err
		return p
	}
	p.Base = sheetURL
	e.setDocument(nil) // a style sheet is read as bytes: its references as they stand
	e.css(css)
	p.Embeds = e.embeds.strings()
	return p
}

// Embedding tags, by what they embed.
const (
	embNone   = iota
	embImg    // <img src srcset>
	embSource // <source srcset>
	embSrc    // <script src>, <embed src>
	embLink   // <link rel=... href>
	embInput  // <input type=image src>
	embVideo  // <video poster>
	embObject // <object data>
	embStyle  // <style>
)

// embedKind classifies a tag name for embeds.
func embedKind(name []byte) int {
	switch len(name) {
	case 3:
		if asciiEqualFold(name, "img") {
			return embImg
		}
	case 4:
		if asciiEqualFold(name, "link") {
			return embLink
		}
	case 5:
		switch {
		case asciiEqualFold(name, "input"):
			return embInput
		case asciiEqualFold(name, "video"):
			return embVideo
		case asciiEqualFold(name, "embed"):
			return embSrc
		case asciiEqualFold(name, "style"):
			return embStyle
		}
	case 6:
		switch {
		case asciiEqualFold(name, "script"):
			return embSrc
		case asciiEqualFold(name, "source"):
			return embSource
		case asciiEqualFold(name, "object"):
			return embObject
		}
	}
	return embNone
}

// tagName returns the name of a start tag from its raw bytes.
func tagName(raw []byte) []byte {
	if len(raw) < 2 || raw[0] != '<' {
		return nil
	}
	end := 1
	for end < len(raw) && !isSpace(raw[end]) && raw[end] != '/' && raw[end] != '>' {
		end++
	}
	return raw[1:end]
}

// embedAttrs are the attributes embedTag reads (the first of each name).
type embedAttrs struct {
	src, srcset, href, rel, as, typ, poster, data, style []byte
	has                                                  uint16
}

const (
	hasSrc = 1 << iota
	hasSrcset
	hasHref
	hasRel
	hasAs
	hasType
	hasPoster
	hasData
	hasStyle
)

func (a *embedAttrs) take(k, v []byte) {
	set := func(bit uint16, dst *[]byte) {
		if a.has&bit == 0 {
			a.has |= bit
			*dst = v
		}
	}
	switch len(k) {
	case 2:
		if asciiEqualFold(k, "as") {
			set(hasAs, &a.as)
		}
	case 3:
		switch {
		case asciiEqualFold(k, "src"):
			set(hasSrc, &a.src)
		case asciiEqualFold(k, "rel"):
			set(hasRel, &a.rel)
		}
	case 4:
		switch {
		case asciiEqualFold(k, "href"):
			set(hasHref, &a.href)
		case asciiEqualFold(k, "type"):
			set(hasType, &a.typ)
		case asciiEqualFold(k, "data"):
			set(hasData, &a.data)
		}
	case 5:
		if asciiEqualFold(k, "style") {
			set(hasStyle, &a.style)
		}
	case 6:
		switch {
		case asciiEqualFold(k, "srcset"):
			set(hasSrcset, &a.srcset)
		case asciiEqualFold(k, "poster"):
			set(hasPoster, &a.poster)
		}
	}
}

// embedTag takes the embeds of the current start tag (of type tt): its
// embedding attributes, its style attribute, and for <style> the content.
func (e *Extractor) embedTag(z *html.Tokenizer, tt html.TokenType) {
	raw := z.Raw()
	kind := embedKind(tagName(raw))
	if kind == embStyle {
		if tt == html.StartTagToken && z.Next() == html.TextToken {
			e.css(z.Raw()) // raw text: as written
		}
		return
	}
	if kind == embNone && bytes.IndexByte(raw, '(') < 0 {
		return // no embedding tag, no url() in a style attribute
	}
	var a embedAttrs
	a.read(z)
	e.embedAttrs(kind, &a)
}

// read takes the attributes of the current tag. The tokenizer's
// attributes can be read once only.
func (a *embedAttrs) read(z *html.Tokenizer) {
	if s, ok := newAttrScanner(z.Raw()); ok {
		for {
			k, v, more := s.next()
			if !more {
				break
			}
			a.take(k, v)
		}
		return
	}
	for {
		k, v, more := z.TagAttr()
		if k != nil {
			a.take(k, v)
		}
		if !more {
			break
		}
	}
}

// embedAttrs takes the embeds of a tag of this kind with these attributes.
func (e *Extractor) embedAttrs(kind int, a *embedAttrs) {
	switch kind {
	case embImg:
		if a.has&hasSrc != 0 {
			e.embed(a.src)
		}
		if a.has&hasSrcset != 0 {
			srcset(a.srcset, e.embed)
		}
	case embSource:
		if a.has&hasSrcset != 0 {
			srcset(a.srcset, e.embed)
		}
	case embSrc:
		if a.has&hasSrc != 0 {
			e.embed(a.src)
		}
	case embInput:
		if a.has&hasSrc != 0 && asciiEqualFold(bytes.TrimSpace(a.typ), "image") {
			e.embed(a.src)
		}
	case embVideo:
		if a.has&hasPoster != 0 {
			e.embed(a.poster)
		}
	case embObject:
		if a.has&hasData != 0 {
			e.embed(a.data)
		}
	case embLink:
		if a.has&hasHref != 0 && relEmbeds(a.rel, a.as) {
			e.embed(a.href)
		}
	}
	if a.has&hasStyle != 0 {
		e.css(a.style)
	}
}

// relEmbeds reports whether a <link> with these rel tokens (and as, for a
// preload) is a requisite of its page.
func relEmbeds(rel, as []byte) bool {
	preload := false
	for len(rel) > 0 {
		i := 0
		for i < len(rel) && isSpace(rel[i]) {
			i++
		}
		j := i
		for j < len(rel) && !isSpace(rel[j]) {
			j++
		}
		tok := rel[i:j]
		rel = rel[j:]
		switch {
		case asciiEqualFold(tok, "stylesheet"), asciiEqualFold(tok, "icon"),
			asciiEqualFold(tok, "apple-touch-icon"), asciiEqualFold(tok, "apple-touch-icon-precomposed"),
			asciiEqualFold(tok, "mask-icon"):
			return true
		case asciiEqualFold(tok, "preload"), asciiEqualFold(tok, "modulepreload"):
			preload = true
		}
	}
	if !preload {
		return false
	}
	as = bytes.TrimSpace(as)
	return asciiEqualFold(as, "style") || asciiEqualFold(as, "script") || asciiEqualFold(as, "image") ||
		asciiEqualFold(as, "font") || len(as) == 0 // modulepreload's default is a script
}

// embed keeps ref as an embed, unless it is a data: URL or a reference
// within the document, or maxLinks embeds are kept already.
func (e *Extractor) embed(ref []byte) {
	ref = bytes.TrimSpace(ref)
	if len(ref) == 0 || ref[0] == '#' || len(ref) >= 5 && asciiEqualFold(ref[:5], "data:") {
		return
	}
	if e.embeds.kept >= e.maxLinks {
		e.page.EmbedsTruncated = true
		return
	}
	e.addTo(&e.embeds, ref)
}

// css takes the url() and @import references of a style sheet, a <style>
// element's content or a style attribute's value as embeds.
func (e *Extractor) css(b []byte) {
	cssRefs(b, func(ref []byte, escaped bool) {
		if escaped {
			e.unescaped = cssUnescape(e.unescaped[:0], ref)
			ref = e.unescaped
		}
		e.embed(ref)
	})
}

// srcset calls fn with the URL of each image candidate of a srcset
// attribute's value, as the HTML standard parses it: a candidate is a URL
// (a run of non-space characters, trailing commas not included) and
// descriptors up to a comma outside parentheses. A URL may hold commas.
func srcset(s []byte, fn func(url []byte)) {
	i := 0
	for i < len(s) {
		for i < len(s) && (isSpace(s[i]) || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return
		}
		start := i
		for i < len(s) && !isSpace(s[i]) {
			i++
		}
		u := s[start:i]
		if n := len(u); n > 0 && u[n-1] == ',' {
			for len(u) > 0 && u[len(u)-1] == ',' {
				u = u[:len(u)-1]
			}
		} else {
			// Descriptors: up to a comma outside parentheses.
			depth := 0
		desc:
			for i < len(s) {
				switch s[i] {
				case '(':
					depth++
				case ')':
					if depth > 0 {
						depth--
					}
				case ',':
					if depth == 0 {
						i++
						break desc
					}
				}
				i++
			}
		}
		if len(u) > 0 {
			fn(u)
		}
	}
}

// cssRefs calls fn with each URL a style sheet references: the argument of
// every url(...) (quoted or not) and src(...), every string of an
// image-set(...) (-webkit- prefixed too), and the string of an @import
// "...". Comments are skipped, and so are strings elsewhere (a url( in a
// string is text). escaped reports that the reference holds a backslash
// escape (cssUnescape decodes it). The bytes passed are a slice of b.
// Its work is linear in len(b).
func cssRefs(b []byte, fn func(ref []byte, escaped bool)) {
	imageSet := 0 // parenthesis depth inside an image-set(), 0 outside
	importing := false
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				return
			}
			i += 2 + end + 2
			continue
		case c == '"' || c == '\'':
			s, next, esc := cssString(b, i)
			if imageSet > 0 || importing {
				fn(s, esc)
			}
			importing = false
			i = next
			continue
		case c == '\\':
			i += 2 // an escaped character of an identifier
			continue
		case c == '@':
			if i+7 <= len(b) && asciiEqualFold(b[i+1:i+7], "import") && (i+7 == len(b) || !isNameChar(b[i+7])) {
				importing = true
				i += 7
				continue
			}
		case c == '(':
			name := identBefore(b, i)
			switch {
			case asciiEqualFold(name, "url") || asciiEqualFold(name, "src"):
				ref, next, esc, ok := cssURL(b, i+1)
				if ok && (asciiEqualFold(name, "url") || len(ref) > 0) {
					fn(ref, esc)
				}
				importing = false
				i = next
				continue
			case imageSet > 0:
				imageSet++
			case asciiEqualFold(name, "image-set") || asciiEqualFold(name, "-webkit-image-set"):
				imageSet = 1
			}
		case c == ')':
			if imageSet > 0 {
				imageSet--
			}
		case c == ';' || c == '{' || c == '}':
			importing = false
		}
		i++
	}
}

// isNameChar reports whether c may be part of a CSS identifier (ASCII
// letters, digits, '-', '_' and any non-ASCII byte).
func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c >= 0x80
}

// identBefore returns the identifier that ends at b[i] (a function's name
// before its '(').
func identBefore(b []byte, i int) []byte {
	j := i
	for j > 0 && isNameChar(b[j-1]) {
		j--
	}
	return b[j:i]
}

// cssString returns the content of the string that starts with the quote
// at b[i], the index after it, and whether it holds an escape. A string
// ends at its quote, or unterminated at a newline or the end.
func cssString(b []byte, i int) (s []byte, next int, escaped bool) {
	q := b[i]
	j := i + 1
	for j < len(b) {
		switch b[j] {
		case q:
			return b[i+1 : j], j + 1, escaped
		case '\\':
			escaped = true
			j += 2
			continue
		case '\n':
			return b[i+1 : j], j, escaped
		}
		j++
	}
	return b[i+1 : min(j, len(b))], len(b), escaped
}

// cssURL reads the argument of url( that starts at b[i]: a string or an
// unquoted URL, up to the ')'. ok is false for a malformed one.
func cssURL(b []byte, i int) (ref []byte, next int, escaped, ok bool) {
	for i < len(b) && isCSSSpace(b[i]) {
		i++
	}
	if i < len(b) && (b[i] == '"' || b[i] == '\'') {
		ref, i, escaped = cssString(b, i)
		for i < len(b) && isCSSSpace(b[i]) {
			i++
		}
		if i < len(b) && b[i] == ')' {
			return ref, i + 1, escaped, true
		}
		return nil, i, false, false
	}
	start := i
	for i < len(b) {
		switch c := b[i]; {
		case c == ')':
			return b[start:i], i + 1, escaped, true
		case c == '\\':
			escaped = true
			i += 2
			continue
		case isCSSSpace(c):
			ref = b[start:i]
			for i < len(b) && isCSSSpace(b[i]) {
				i++
			}
			if i < len(b) && b[i] == ')' {
				return ref, i + 1, escaped, true
			}
			return nil, i, false, false
		case c == '"' || c == '\'' || c == '(':
			return nil, i, false, false
		}
		i++
	}
	return nil, len(b), false, false
}

func isCSSSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

// cssUnescape appends s with its CSS escapes decoded: a backslash and up
// to six hex digits (and one space after them) is that code point (0,
// surrogates and those past U+10FFFF are U+FFFD); a backslash and a
// newline is nothing; a backslash and any other byte is that byte.
func cssUnescape(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(s) {
			return dst
		}
		h, n := 0, 0
		for n < 6 && i+n < len(s) && hexVal(s[i+n]) >= 0 {
			h = h<<4 | hexVal(s[i+n])
			n++
		}
		if n == 0 {
			if s[i] != '\n' {
				dst = append(dst, s[i])
			}
			continue
		}
		i += n - 1 // the last hex digit
		if i+1 < len(s) && isCSSSpace(s[i+1]) {
			i++ // the one space that ends the escape
		}
		if h == 0 || h > 0x10FFFF || h >= 0xD800 && h <= 0xDFFF {
			h = 0xFFFD
		}
		dst = utf8.AppendRune(dst, rune(h))
	}
	return dst
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

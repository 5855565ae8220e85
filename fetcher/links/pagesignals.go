package links

import (
	"bytes"

	"golang.org/x/net/html"
)

// linkTag handles a <link>: a rel=canonical in the head (Page.Canonical
// and a link), a rel=alternate feed (a link), and with requisites its
// embeds. It returns false if the link cap was reached (Page.Truncated).
func (e *Extractor) linkTag(z *html.Tokenizer) bool {
	var a embedAttrs
	a.read(z)
	if e.requisites {
		e.embedAttrs(embLink, &a)
	}
	if a.has&hasHref == 0 || a.has&hasRel == 0 {
		return true
	}
	canonical := !e.headDone && !e.canonicalSeen && relHas(a.rel, "canonical")
	feed := relHas(a.rel, "alternate") && isFeedType(a.typ)
	if !canonical && !feed {
		return true
	}
	if relNoFollow(a.rel) {
		e.page.NoFollowLinks++
		return true
	}
	if e.kept >= e.maxLinks {
		e.page.Truncated = true
		return false
	}
	if canonical {
		e.canonicalSeen = true
		e.setCanonical(a.href)
	}
	e.add(a.href)
	return true
}

// setCanonical records href, resolved and normalised, as the page's
// canonical URL, unless it is the page itself or out of scope.
func (e *Extractor) setCanonical(href []byte) {
	var err error
	e.scratch, err = e.norm.Resolve(e.scratch[:0], &e.base, href)
	if err != nil || bytes.Equal(e.scratch, e.pageURL) || !e.scope.Allow(e.scratch) {
		return // counted by add, which sees it next
	}
	e.page.Canonical = string(e.scratch)
}

// isFeedType reports whether a <link type> names an RSS or Atom feed.
func isFeedType(t []byte) bool {
	if i := bytes.IndexByte(t, ';'); i >= 0 {
		t = t[:i]
	}
	t = bytes.TrimSpace(t)
	return asciiEqualFold(t, "application/rss+xml") || asciiEqualFold(t, "application/atom+xml")
}

// frameTag handles an <iframe> or <frame>: its src is a link, and with
// requisites its style attribute's url()s are embeds. It returns false if
// the link cap was reached (Page.Truncated).
func (e *Extractor) frameTag(z *html.Tokenizer) bool {
	var a embedAttrs
	a.read(z)
	if e.requisites && a.has&hasStyle != 0 {
		e.css(a.style)
	}
	if a.has&hasSrc == 0 || e.page.NoFollow {
		return true
	}
	if e.kept >= e.maxLinks {
		e.page.Truncated = true
		return false
	}
	e.add(a.src)
	return true
}

// endsHead reports whether an end tag's raw bytes are </head>, </body> or
// </html>.
func endsHead(raw []byte) bool {
	if len(raw) < 4 || raw[0] != '<' || raw[1] != '/' {
		return false
	}
	end := 2
	for end < len(raw) && !isSpace(raw[end]) && raw[end] != '/' && raw[end] != '>' {
		end++
	}
	name := raw[2:end]
	return asciiEqualFold(name, "head") || asciiEqualFold(name, "body") || asciiEqualFold(name, "html")
}

// inHead reports whether a start tag that tagOf classes as tagOther may
// be in a document's head (html, head, title, style, script, template,
// basefont, bgsound); any other ends the head, as the HTML parser's "in
// head" insertion mode has it.
func inHead(raw []byte) bool {
	name := tagName(raw)
	switch len(name) {
	case 4:
		return asciiEqualFold(name, "html") || asciiEqualFold(name, "head")
	case 5:
		return asciiEqualFold(name, "title") || asciiEqualFold(name, "style")
	case 6:
		return asciiEqualFold(name, "script")
	case 7:
		return asciiEqualFold(name, "bgsound")
	case 8:
		return asciiEqualFold(name, "template") || asciiEqualFold(name, "basefont")
	}
	return false
}

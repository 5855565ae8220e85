package links

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"

	"golang.org/x/net/html/charset"
)

// ErrNotFeed: the document's root element is not <rss>, <rdf:RDF> or
// <feed>.
var ErrNotFeed = errors.New("links: not a feed")

// Namespaces of the feed formats.
const (
	nsRSS1   = "http://purl.org/rss/1.0/"
	nsRSS090 = "http://my.netscape.com/rdf/simple/0.9/"
	nsAtom   = "http://www.w3.org/2005/Atom"
	nsAtom03 = "http://purl.org/atom/ns#"
	nsXML    = "http://www.w3.org/XML/1998/namespace" // of xml:base, as encoding/xml names it
)

// feedSniffLen is how far IsFeedRoot looks for the root element.
const feedSniffLen = 16 << 10

// Feed formats, by root element.
const (
	feedNone = iota
	feedRSS  // <rss>: RSS 0.9x and 2.0
	feedRDF  // <rdf:RDF>: RSS 0.90 and 1.0
	feedAtom // <feed>: Atom 1.0 and 0.3
)

// IsFeedRoot reports whether an XML document's root element, found in its
// first 16 KiB past a byte order mark, the XML declaration, processing
// instructions, comments and a doctype, is <rss>, <feed> or <RDF> (of any
// prefix, as in <rdf:RDF>): how a feed served as application/xml or
// text/xml is told from other XML.
func IsFeedRoot(body []byte) bool {
	b := body[:min(len(body), feedSniffLen)]
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	for {
		b = bytes.TrimLeft(b, " \t\r\n")
		switch {
		case len(b) < 2 || b[0] != '<':
			return false
		case b[1] == '?':
			i := bytes.Index(b, []byte("?>"))
			if i < 0 {
				return false
			}
			b = b[i+2:]
		case bytes.HasPrefix(b, []byte("<!--")):
			i := bytes.Index(b[4:], []byte("-->"))
			if i < 0 {
				return false
			}
			b = b[4+i+3:]
		case b[1] == '!': // <!DOCTYPE ...>, perhaps with an internal subset in [...]
			i := bytes.IndexAny(b, "[>")
			if i >= 0 && b[i] == '[' {
				j := bytes.IndexByte(b[i:], ']')
				if j < 0 {
					return false
				}
				i += j
				k := bytes.IndexByte(b[i:], '>')
				if k < 0 {
					return false
				}
				i += k
			}
			if i < 0 {
				return false
			}
			b = b[i+1:]
		default:
			end := 1
			for end < len(b) && !isSpace(b[end]) && b[end] != '/' && b[end] != '>' {
				end++
			}
			name := b[1:end]
			if i := bytes.LastIndexByte(name, ':'); i >= 0 {
				name = name[i+1:]
			}
			return string(name) == "rss" || string(name) == "feed" || string(name) == "RDF"
		}
	}
}

// feedBase is an xml:base in effect from an element at depth on.
type feedBase struct {
	depth int
	url   string // normalised
}

// ExtractFeed reads the links of an RSS 2.0 (and 0.9x), RSS 1.0 (RDF) or
// Atom document fetched from feedURL (normalised), served with the
// Content-Type contentType ("" if none), streaming it with encoding/xml:
// of every RSS <item>, its <link> and its <guid> when it is a permalink
// (isPermaLink="true", or no isPermaLink and an absolute http or https
// URL, as the RSS 2.0 default has it); of every Atom <entry>, the href of
// each <link> whose rel is alternate or absent. They are resolved against
// the feed URL and the xml:base in effect, then normalised, scoped,
// deduplicated and capped as a page's links are, in Page.Links (the links
// of the channel or feed itself are not taken). The document is decoded
// by the charset of the Content-Type if it has one (RFC 7303), else by the
// encoding its XML declaration names. The parser is lenient (encoding/xml
// with Strict off and HTML entities): a missing end tag or an unknown
// entity is passed over. A document whose root is not a feed gives
// ErrNotFeed; XML broken past repair gives an error that says where (line
// and column), with the links read before it. It never panics. The
// returned Page is reused by the next call; its Links slice and strings
// are not.
func (e *Extractor) ExtractFeed(feedURL, contentType string, body []byte) (*Page, error) {
	e.reset()
	e.setDocument(nil) // decoded to UTF-8 by encoding/xml: its links' bytes as they stand
	p := &e.page
	e.pageURL = append(e.pageURL[:0], feedURL...)
	if err := e.base.Set(e.pageURL); err != nil {
		p.Err = err
		return p, err
	}
	p.Base = feedURL
	err := e.feed(feedURL, contentType, body)
	p.Links = e.urlSet.strings() // a feed's links are not subject to meta robots
	return p, err
}

// feed parses the document into e's links.
func (e *Extractor) feed(feedURL, contentType string, body []byte) error {
	p := &e.page
	e.rd.Reset(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")))
	var r io.Reader = &e.rd
	declared := charset.NewReaderLabel
	if _, params, err := mime.ParseMediaType(contentType); err == nil && params["charset"] != "" {
		if cr, err := charset.NewReaderLabel(params["charset"], r); err == nil {
			r = cr // the Content-Type's charset wins over the declaration
			declared = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
		}
	}
	d := xml.NewDecoder(r)
	d.CharsetReader = declared
	d.Strict = false
	d.Entity = xml.HTMLEntity
	var (
		kind      = feedNone
		depth     int
		item      int // depth of the open <item> or <entry>; 0: none
		field     int // the item's child element whose text is collected: fieldLink, fieldGuid
		permalink int // of the <guid>: 0 no isPermaLink, 1 "true", 2 anything else
		text      []byte
		tooLong   bool
		bases     = []feedBase{{0, feedURL}}
	)
	const (
		fieldNone = iota
		fieldLink
		fieldGuid
	)
	for {
		tok, err := d.Token()
		if err == io.EOF {
			if kind == feedNone {
				return fmt.Errorf("%w: no root element", ErrNotFeed)
			}
			return nil
		}
		if err != nil {
			line, col := d.InputPos()
			return fmt.Errorf("links: feed: line %d, column %d: %w", line, col, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if b, ok := xmlBase(t.Attr); ok {
				if u, ok := e.resolveBase(b); ok {
					bases = append(bases, feedBase{depth, u})
				}
			}
			if depth == 1 {
				switch t.Name.Local {
				case "rss":
					kind = feedRSS
				case "RDF":
					kind = feedRDF
				case "feed":
					kind = feedAtom
				default:
					return fmt.Errorf("%w: root element <%s>", ErrNotFeed, t.Name.Local)
				}
				continue
			}
			if item == 0 {
				if (kind == feedAtom && t.Name.Local == "entry" && atomSpace(t.Name.Space)) ||
					(kind != feedAtom && t.Name.Local == "item" && rssSpace(t.Name.Space)) {
					item = depth
				}
				continue
			}
			if depth != item+1 {
				continue
			}
			switch {
			case kind == feedAtom && t.Name.Local == "link" && atomSpace(t.Name.Space):
				href, rel, hasHref := []byte(nil), "", false
				for _, a := range t.Attr {
					switch {
					case a.Name.Space == "" && a.Name.Local == "href":
						href, hasHref = []byte(a.Value), true
					case a.Name.Space == "" && a.Name.Local == "rel":
						rel = strings.TrimSpace(a.Value)
					}
				}
				if hasHref && (rel == "" || strings.EqualFold(rel, "alternate")) {
					if e.kept >= e.maxLinks {
						p.Truncated = true
						return nil
					}
					e.add(href)
				}
			case kind != feedAtom && t.Name.Local == "link" && rssSpace(t.Name.Space):
				field, text, tooLong = fieldLink, text[:0], false
			case kind != feedAtom && t.Name.Local == "guid" && rssSpace(t.Name.Space):
				field, text, tooLong, permalink = fieldGuid, text[:0], false, 0
				for _, a := range t.Attr {
					if a.Name.Space == "" && strings.EqualFold(a.Name.Local, "isPermaLink") {
						permalink = 2
						if strings.EqualFold(strings.TrimSpace(a.Value), "true") {
							permalink = 1
						}
					}
				}
			}
		case xml.EndElement:
			if field != fieldNone && depth == item+1 {
				ref := bytes.TrimSpace(text)
				take := len(ref) > 0 && !tooLong
				if field == fieldGuid {
					take = take && (permalink == 1 || permalink == 0 && isAbsoluteHTTP(ref))
				}
				if take {
					if e.kept >= e.maxLinks {
						p.Truncated = true
						return nil
					}
					e.add(ref)
				}
				field = fieldNone
			}
			if depth == item {
				item = 0
			}
			if top := len(bases) - 1; bases[top].depth == depth {
				bases = bases[:top]
				_ = e.base.SetString(bases[top-1].url) // normalised: cannot fail
			}
			depth--
		case xml.CharData:
			if field != fieldNone && depth == item+1 {
				if len(text)+len(t) > maxLocLen {
					tooLong = true
				} else {
					text = append(text, t...)
				}
			}
		}
	}
}

// xmlBase returns the value of an xml:base attribute.
func xmlBase(attrs []xml.Attr) ([]byte, bool) {
	for _, a := range attrs {
		if a.Name.Space == nsXML && a.Name.Local == "base" {
			return []byte(a.Value), true
		}
	}
	return nil, false
}

// resolveBase resolves an xml:base against the base in effect and makes
// it the base; ok is false (the base unchanged) if it does not resolve.
func (e *Extractor) resolveBase(ref []byte) (string, bool) {
	var err error
	e.scratch, err = e.norm.Resolve(e.scratch[:0], &e.base, ref)
	if err != nil {
		return "", false
	}
	u := string(e.scratch)
	if err := e.base.SetString(u); err != nil {
		return "", false
	}
	return u, true
}

// rssSpace reports whether an element of this namespace is an RSS one: no
// namespace (RSS 0.9x and 2.0), or RSS 1.0's or 0.90's.
func rssSpace(ns string) bool { return ns == "" || ns == nsRSS1 || ns == nsRSS090 }

// atomSpace reports whether an element of this namespace is an Atom one:
// Atom 1.0's, 0.3's, or none (a feed that forgot its xmlns).
func atomSpace(ns string) bool { return ns == nsAtom || ns == nsAtom03 || ns == "" }

// isAbsoluteHTTP reports whether ref starts with "http://" or "https://"
// (case-insensitive).
func isAbsoluteHTTP(ref []byte) bool {
	return len(ref) > 7 && asciiEqualFold(ref[:7], "http://") || len(ref) > 8 && asciiEqualFold(ref[:8], "https://")
}

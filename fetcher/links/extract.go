package links

import (
	"bytes"
	"strings"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/net/html"
	"golang.org/x/text/encoding"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// DefaultMaxLinks is the per-page link cap NewExtractor uses for maxLinks <= 0.
const DefaultMaxLinks = 5000

// Page is what Extract found in one HTML page.
type Page struct {
	Links    []string // normalised, in-scope, followable links, each once, in document order
	NoFollow bool     // <meta name="robots" content="...nofollow..."> (or "none", or name the robots agent): Links is empty
	NoIndex  bool     // <meta name="robots" content="...noindex..."> (or "none", or name the robots agent)
	Base     string   // the effective base URL: the first <base href> resolved, else the page URL
	BadLinks int      // hrefs that failed normalisation (other schemes, bad hosts, too long), skipped

	NoFollowLinks int   // links skipped for rel="nofollow"
	OutOfScope    int   // distinct links (and embeds) the Scope rejected, traps included
	Duplicates    int   // repeats of a link (in scope or not) and links to the page itself, dropped
	Truncated     bool  // maxLinks links were kept and the page had more hrefs, which were not read
	Err           error // pageURL is not a normalised URL; nothing was extracted

	// Encoding is the encoding the page was read in, as the WHATWG
	// Encoding Standard names it ("UTF-8", "Shift_JIS", "windows-1251");
	// "" if nothing was read (Err).
	Encoding string

	// Embeds are the page's requisites (see Extractor.SetRequisites):
	// normalised, in-scope, each once, in document order, whatever the
	// page's or the tag's nofollow says. nil with requisites off.
	Embeds []string
	// EmbedsTruncated: maxLinks embeds were kept and the page had more,
	// which were dropped.
	EmbedsTruncated bool

	// Canonical is the target of the first <link rel=canonical href> in
	// the head, normalised; "" if there is none, or it is the page itself,
	// out of scope or unusable. It is also one of Links (unless NoFollow).
	Canonical string

	// TrapRepetition and TrapCalendar count the links (and embeds) of
	// OutOfScope that the Scope refused as spider traps, by rule
	// (urlnorm.TrapRepetition, urlnorm.TrapCalendar).
	TrapRepetition int
	TrapCalendar   int
	// TrapLinks are those links, in document order, for a log: nil if
	// none. Their bytes are the Extractor's and valid until its next call.
	TrapLinks []TrapLink
}

// TrapLink is a link the Scope refused as a spider trap, and the rule that
// refused it.
type TrapLink struct {
	URL  []byte
	Rule urlnorm.Verdict // urlnorm.TrapRepetition or urlnorm.TrapCalendar
}

// Extractor extracts links from HTML pages (and feeds: ExtractFeed). It
// reuses its buffers between calls, so use one per worker goroutine; it is
// not safe for concurrent use.
type Extractor struct {
	norm     *urlnorm.Normalizer
	scope    *urlnorm.Scope
	maxLinks int

	page    Page
	base    urlnorm.Base
	rd      bytes.Reader
	urlSet         // the page's links
	scratch []byte // <base> resolution
	pageURL []byte

	agent string // the robots agent, lower-case (SetRobotsAgent)
	// Per page: the head has ended (</head>, <body>, or a tag that cannot
	// be in a head); a <link rel=canonical> or a meta refresh was read.
	headDone, canonicalSeen, refreshSeen bool

	requisites bool
	embeds     urlSet // the page's embeds, with requisites on
	text       TextSink
	unescaped  []byte // a CSS reference with escapes, decoded

	dec  []byte                       // a page decoded to UTF-8
	decs [numCodecs]*encoding.Decoder // decoders made so far, by codec id
	doc  *codec                       // the encoding the base is a document in; nil: none
}

// urlSet collects a page's normalised URLs, each once.
type urlSet struct {
	buf  []byte // the normalised URLs, back to back
	ends []int  // end offset in buf of each URL, negated if out of scope
	kept int    // URLs in ends that are in scope
	seen dedup  // xxhash of a URL → its index in ends
}

// NewExtractor returns an Extractor that normalises with n (nil: the
// default Normalizer), keeps the links scope allows (nil: all) and at most
// maxLinks per page (<= 0: DefaultMaxLinks).
func NewExtractor(n *urlnorm.Normalizer, scope *urlnorm.Scope, maxLinks int) *Extractor {
	if n == nil {
		n = urlnorm.New(urlnorm.Options{})
	}
	if maxLinks <= 0 {
		maxLinks = DefaultMaxLinks
	}
	return &Extractor{norm: n, scope: scope, maxLinks: maxLinks}
}

// SetRequisites turns the extraction of page requisites on or off (off by
// default). On, Extract also returns in Page.Embeds what the page needs to
// render: <img src> and the URLs of <img srcset> and <source srcset>,
// <script src>, <link href> with rel stylesheet, icon (and "shortcut
// icon"), apple-touch-icon(-precomposed) or mask-icon, or rel preload or
// modulepreload as style, script, image or font, <input type=image src>,
// <video poster>, <embed src>, <object data>, and the url() and @import
// references of <style> elements and style attributes. Frames, media
// sources (<video src>, <audio src>, <source src>) and <track src> are not
// embeds: frames are pages, and media are large and not needed to render
// the page's first view. data: URLs and same-document references (#id)
// are skipped. Embeds are normalised and scoped as links are; nofollow
// (rel or meta robots) does not apply to them, and a repeat of a link is
// kept among the embeds (it is both).
func (e *Extractor) SetRequisites(on bool) { e.requisites = on }

// TextSink receives every token Extract reads (a page's text for its
// fingerprint, say), so that the page is tokenised once.
type TextSink interface {
	Token(z *html.Tokenizer, tt html.TokenType)
}

// SetText makes Extract pass every token to t (nil: none).
func (e *Extractor) SetText(t TextSink) { e.text = t }

// SetRobotsAgent makes Extract read <meta name=AGENT> (case-insensitive)
// as it reads <meta name=robots>, as Google reads <meta name=googlebot>
// ("": only <meta name=robots>). agent is a robots.txt product token such
// as "meridian".
func (e *Extractor) SetRobotsAgent(agent string) {
	if !strings.EqualFold(agent, e.agent) {
		e.agent = strings.ToLower(agent)
	}
}

// Extract parses an HTML body fetched from pageURL (normalised), served
// with the Content-Type contentType ("" if none), and returns its links.
// The first <base href> (resolved against pageURL) is the base for the
// links after it. Links are <a href> and <area href>; <iframe src> and
// <frame src> (frames are pages); the URL of the first <meta
// http-equiv=refresh> (ParseRefresh); <link rel=alternate href> of type
// application/rss+xml or application/atom+xml (a feed); and the first
// <link rel=canonical href> in the head (also in Page.Canonical). The head
// ends at </head>, at <body> or at the first start tag that cannot be in a
// head (text does not end it here); a canonical link after it is ignored,
// as Google ignores one in the body. Links whose rel contains "nofollow"
// are skipped; a page with meta robots nofollow (<meta name=robots>, or
// <meta name=AGENT> for the robots agent, see SetRobotsAgent) returns no
// links. Links in <noscript> and <noframes> are read. Extract never
// panics, and its work is linear in len(body). The returned Page is
// reused by the next call; its Links slice and strings are not, and stay
// valid.
//
// The body is decoded as browsers decode it: its encoding is the BOM's,
// else the Content-Type's charset, else a <meta> charset in its first
// 1,024 bytes, else UTF-8 if it is valid UTF-8, else windows-1252
// (Page.Encoding; the package doc has the details). A UTF-8 page, and an
// all-ASCII page in an ASCII-compatible encoding, is read as it stands;
// another is decoded into a buffer the Extractor reuses. Links and embeds
// are resolved by the URL Standard's rules: the path percent-encoded from
// UTF-8, the query from the page's encoding. The TextSink sees the
// decoded page.
func (e *Extractor) Extract(pageURL, contentType string, body []byte) *Page {
	e.reset()
	p := &e.page
	e.pageURL = append(e.pageURL[:0], pageURL...)
	if err := e.base.Set(e.pageURL); err != nil {
		p.Err = err
		return p
	}
	p.Base = pageURL
	body = e.decode(contentType, body)
	baseSeen := false
	e.rd.Reset(body)
	z := html.NewTokenizer(&e.rd)
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if e.text != nil {
			e.text.Token(z, tt)
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			if tt == html.EndTagToken && !e.headDone && endsHead(z.Raw()) {
				e.headDone = true
			}
			continue
		}
		tag := tagOf(z.Raw())
		if !e.headDone && (tag == tagA || tag == tagFrame || tag == tagOther && !inHead(z.Raw())) {
			e.headDone = true
		}
		switch tag {
		case tagA:
			if p.NoFollow {
				continue
			}
			href, ok := linkHref(z, p)
			if !ok {
				continue
			}
			if e.kept >= e.maxLinks {
				p.Truncated = true
				return e.finish()
			}
			e.add(href)
		case tagBase:
			if baseSeen {
				continue
			}
			if href, ok := attr(z, "href"); ok {
				baseSeen = true
				e.setBase(href)
			}
		case tagMeta:
			if !e.meta(z) {
				return e.finish()
			}
		case tagLink:
			if !e.linkTag(z) {
				return e.finish()
			}
		case tagFrame:
			if !e.frameTag(z) {
				return e.finish()
			}
		case tagNoRaw:
			z.NextIsNotRawText() // parse <noscript> and <noframes> content as markup
		default:
			if e.requisites {
				e.embedTag(z, tt)
			}
		}
	}
	return e.finish()
}

func (e *Extractor) reset() {
	e.page = Page{}
	e.headDone, e.canonicalSeen, e.refreshSeen = false, false, false
	e.urlSet.reset()
	if e.requisites {
		e.embeds.reset()
	}
}

func (s *urlSet) reset() {
	s.buf, s.ends, s.kept = s.buf[:0], s.ends[:0], 0
	s.seen.reset()
}

// setBase makes the resolution of href against the page URL the base.
func (e *Extractor) setBase(href []byte) {
	var err error
	e.scratch, err = e.norm.Resolve(e.scratch[:0], &e.base, href)
	if err != nil {
		return // an unusable <base>: the page URL stays the base
	}
	if err := e.base.Set(e.scratch); err != nil {
		_ = e.base.Set(e.pageURL) // cannot happen: Resolve's output is normalised
		return
	}
	e.page.Base = string(e.scratch)
}

// add resolves href and keeps the link if it is new, in scope and not the
// page itself.
func (e *Extractor) add(href []byte) { e.addTo(&e.urlSet, href) }

// addTo resolves href and keeps it in s if it is new, in scope and not the
// page itself.
func (e *Extractor) addTo(s *urlSet, href []byte) {
	p := &e.page
	start := len(s.buf)
	var err error
	s.buf, err = e.norm.Resolve(s.buf, &e.base, href)
	if err != nil {
		p.BadLinks++
		return
	}
	link := s.buf[start:]
	if bytes.Equal(link, e.pageURL) {
		p.Duplicates++
		s.buf = s.buf[:start]
		return
	}
	h := xxhash.Sum64(link)
	if i, ok := s.seen.lookup(h); ok {
		if bytes.Equal(s.link(int(i)), link) {
			p.Duplicates++
			s.buf = s.buf[:start]
			return
		}
		h = 0 // a hash collision: keep the link, do not index it
	}
	if h != 0 {
		s.seen.insert(h, int32(len(s.ends)))
	}
	if v := e.scope.Check(link); v != urlnorm.Allowed {
		p.OutOfScope++
		switch v {
		case urlnorm.TrapRepetition:
			p.TrapRepetition++
		case urlnorm.TrapCalendar:
			p.TrapCalendar++
		}
		if v.Trap() {
			p.TrapLinks = append(p.TrapLinks, TrapLink{URL: link[:len(link):len(link)], Rule: v})
		}
		s.ends = append(s.ends, -len(s.buf)) // remembered, so that repeats are not checked again
		return
	}
	s.ends = append(s.ends, len(s.buf))
	s.kept++
}

// link returns the bytes of collected URL i.
func (s *urlSet) link(i int) []byte {
	from := 0
	if i > 0 {
		from = abs(s.ends[i-1])
	}
	return s.buf[from:abs(s.ends[i])]
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// finish turns the kept links (and embeds) into strings: two allocations
// per page and list, one for the bytes and one for the slice, so that
// neither is reused.
func (e *Extractor) finish() *Page {
	p := &e.page
	p.Links = nil
	if !p.NoFollow {
		p.Links = e.urlSet.strings()
	}
	if e.requisites {
		p.Embeds = e.embeds.strings()
	}
	return p
}

// strings returns the kept URLs of s as strings (nil: none).
func (s *urlSet) strings() []string {
	if s.kept == 0 {
		return nil
	}
	all := string(s.buf)
	out := make([]string, 0, s.kept)
	prev := 0
	for _, end := range s.ends {
		if end >= 0 {
			out = append(out, all[prev:end])
		}
		prev = abs(end)
	}
	return out
}

// meta handles <meta name="robots" content="..."> (and name=AGENT) and
// <meta http-equiv=refresh content="...">. It returns false if the link
// cap was reached (Page.Truncated).
func (e *Extractor) meta(z *html.Tokenizer) bool {
	var name, content, equiv []byte
	for {
		k, v, more := z.TagAttr()
		switch string(k) {
		case "name":
			name = v
		case "content":
			content = v
		case "http-equiv":
			equiv = v
		}
		if !more {
			break
		}
	}
	if name = bytes.TrimSpace(name); asciiEqualFold(name, "robots") || e.agent != "" && asciiEqualFold(name, e.agent) {
		t := RobotsTag{NoIndex: e.page.NoIndex, NoFollow: e.page.NoFollow}
		t.metaDirectives(content)
		e.page.NoIndex, e.page.NoFollow = t.NoIndex, t.NoFollow
	}
	if !e.refreshSeen && asciiEqualFold(bytes.TrimSpace(equiv), "refresh") {
		e.refreshSeen = true // browsers act on the first one only
		if _, u, ok := ParseRefresh(content); ok && len(u) > 0 {
			if e.kept >= e.maxLinks {
				e.page.Truncated = true
				return false
			}
			e.add(u)
		}
	}
	return true
}

// linkHref returns the href of an <a> or <area> tag unless the tag has no
// href or its rel contains nofollow (counted in p). Attribute names repeat
// at the Tokenizer's peril: the first occurrence counts.
func linkHref(z *html.Tokenizer, p *Page) ([]byte, bool) {
	var href []byte
	hasHref, hasRel, nofollow := false, false, false
	take := func(k, v []byte) {
		switch {
		case !hasHref && asciiEqualFold(k, "href"):
			href, hasHref = v, true
		case !hasRel && asciiEqualFold(k, "rel"):
			hasRel, nofollow = true, relNoFollow(v)
		}
	}
	if s, ok := newAttrScanner(z.Raw()); ok {
		for {
			k, v, more := s.next()
			if !more {
				break
			}
			take(k, v)
		}
	} else {
		for {
			k, v, more := z.TagAttr()
			if k != nil {
				take(k, v)
			}
			if !more {
				break
			}
		}
	}
	if nofollow && hasHref {
		p.NoFollowLinks++
		return nil, false
	}
	return href, hasHref
}

// attr returns the value of the attribute key of the current tag.
func attr(z *html.Tokenizer, key string) ([]byte, bool) {
	for {
		k, v, more := z.TagAttr()
		if string(k) == key {
			return v, true
		}
		if !more {
			return nil, false
		}
	}
}

// relNoFollow reports whether the space-separated rel tokens include
// "nofollow" (case-insensitive).
func relNoFollow(rel []byte) bool { return relHas(rel, "nofollow") }

// relHas reports whether the space-separated rel tokens include tok (a
// lower-case token; compared case-insensitively).
func relHas(rel []byte, tok string) bool {
	for len(rel) > 0 {
		i := 0
		for i < len(rel) && isSpace(rel[i]) {
			i++
		}
		j := i
		for j < len(rel) && !isSpace(rel[j]) {
			j++
		}
		if asciiEqualFold(rel[i:j], tok) {
			return true
		}
		rel = rel[j:]
	}
	return false
}

// isSpace reports whether c is HTML ASCII whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

// asciiEqualFold reports whether b equals the lower-case ASCII lower, ignoring case.
func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// Tags Extract looks at.
const (
	tagOther = iota
	tagA     // <a> and <area>
	tagBase
	tagMeta
	tagLink
	tagFrame // <iframe>, <frame>
	tagNoRaw // <noscript>, <noframes>
)

// tagOf classifies a start tag from its raw bytes ("<a href=...>") without
// the allocations of Tokenizer.TagName.
func tagOf(raw []byte) int {
	if len(raw) < 3 || raw[0] != '<' {
		return tagOther
	}
	end := 1
	for end < len(raw) && !isSpace(raw[end]) && raw[end] != '/' && raw[end] != '>' {
		end++
	}
	name := raw[1:end]
	switch len(name) {
	case 1:
		if name[0] == 'a' || name[0] == 'A' {
			return tagA
		}
	case 4:
		switch {
		case asciiEqualFold(name, "area"):
			return tagA
		case asciiEqualFold(name, "base"):
			return tagBase
		case asciiEqualFold(name, "meta"):
			return tagMeta
		case asciiEqualFold(name, "link"):
			return tagLink
		}
	case 5:
		if asciiEqualFold(name, "frame") {
			return tagFrame
		}
	case 6:
		if asciiEqualFold(name, "iframe") {
			return tagFrame
		}
	case 8:
		if asciiEqualFold(name, "noscript") || asciiEqualFold(name, "noframes") {
			return tagNoRaw
		}
	}
	return tagOther
}

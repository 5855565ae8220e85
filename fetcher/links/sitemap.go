package links

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/net/html/charset"
)

// Sitemap limits (sitemaps.org protocol).
const (
	// DefaultSitemapLimit is the Sitemap limit used for limit <= 0: the
	// protocol's maximum number of URLs per file.
	DefaultSitemapLimit = 50_000
	// MaxSitemapBytes bounds a gzip-compressed sitemap once inflated (the
	// protocol's 50 MiB), so that a gzip bomb cannot make Sitemap read more.
	MaxSitemapBytes = 50 << 20
	// maxLocLen bounds the text of one <loc>.
	maxLocLen = 8 << 10
)

// Sentinel errors.
var (
	// ErrNotSitemap: the document's root element is not <urlset> or
	// <sitemapindex>.
	ErrNotSitemap = errors.New("links: not a sitemap")
	// ErrSitemapTooLarge: the sitemap is longer than the bound on its
	// (inflated) size; the URLs before the bound were read.
	ErrSitemapTooLarge = errors.New("links: sitemap too large")
)

// Sitemap returns the <loc> URLs of a sitemap (<urlset><url><loc>) or, with
// index true, of a sitemap index (<sitemapindex><sitemap><loc>), trimmed but
// not normalised, at most limit of them (<= 0: DefaultSitemapLimit). A body
// that starts with the gzip magic is inflated first (at most
// MaxSitemapBytes: past them, ErrSitemapTooLarge with the URLs before).
// Element names are matched by local name, whatever their namespace; an
// encoding other than UTF-8 named in the XML declaration is decoded.
// Malformed XML gives an error that says where (line, column and byte
// offset) together with the URLs read before it.
//
// A text sitemap (sitemaps.org: one URL per line, UTF-8) is told from XML
// by its start: past a UTF-8 byte order mark and white space, a body that
// starts with "http://" or "https://" (any case) is one. Its lines are
// trimmed; empty lines and lines that do not start so (or longer than
// 8 KiB) are skipped.
func Sitemap(body []byte, limit int) (locs []string, index bool, err error) {
	entries, index, err := sitemap(body, limit, MaxSitemapBytes)
	locs = make([]string, len(entries))
	for i, e := range entries {
		locs[i] = e.Loc
	}
	return locs, index, err
}

// SitemapEntry is one <url> (or <sitemap>) of a sitemap: its <loc>, and its
// <lastmod> if it has a valid one (zero otherwise).
type SitemapEntry struct {
	Loc     string
	LastMod time.Time
}

// SitemapEntries is Sitemap with each <loc>'s <lastmod> (the W3C Datetime
// forms the protocol allows: YYYY, YYYY-MM, YYYY-MM-DD, and a time with a
// zone, with or without seconds and their fractions). A <lastmod> that is
// not one of them is left zero, the entry kept. <changefreq> and
// <priority> are not read: the protocol calls them hints, and crawlers
// that say what they do (Google) ignore them.
func SitemapEntries(body []byte, limit int) (entries []SitemapEntry, index bool, err error) {
	return sitemap(body, limit, MaxSitemapBytes)
}

// ReadSitemap is SitemapEntries with maxBytes (<= 0: MaxSitemapBytes) as
// the bound on the sitemap's size, inflated or not: past it, the entries
// read before come with an error wrapping ErrSitemapTooLarge. It inflates
// a gzipped body as it parses it, never all at once.
func ReadSitemap(body []byte, limit int, maxBytes int64) (entries []SitemapEntry, index bool, err error) {
	if maxBytes <= 0 {
		maxBytes = MaxSitemapBytes
	}
	return sitemap(body, limit, maxBytes)
}

// lastModLayouts are the W3C Datetime forms of <lastmod>.
var lastModLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02", "2006-01", "2006"}

// parseLastMod reads a <lastmod> (zero if it is not W3C Datetime).
func parseLastMod(s string) time.Time {
	for _, l := range lastModLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// sitemap is SitemapEntries with the inflated-size bound as a parameter.
func sitemap(body []byte, limit int, maxBytes int64) (locs []SitemapEntry, index bool, err error) {
	if limit <= 0 {
		limit = DefaultSitemapLimit
	}
	var r io.Reader = bytes.NewReader(body)
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, false, fmt.Errorf("links: sitemap: gzip: %w", err)
		}
		r = zr
	}
	br := bufio.NewReaderSize(&capReader{r: r, left: maxBytes, max: maxBytes}, maxLocLen+64)
	if isTextSitemap(br) {
		locs, err := textSitemap(br, limit)
		return locs, false, err
	}
	d := xml.NewDecoder(br)
	d.CharsetReader = charset.NewReaderLabel
	d.Entity = xml.HTMLEntity
	var (
		root    bool // the root element was seen
		depth   int  // open elements
		inItem  bool // inside <url> or <sitemap> at depth 2
		inLoc   bool // inside its <loc> at depth 3
		inMod   bool // inside its <lastmod> at depth 3
		loc     []byte
		mod     []byte
		tooLong bool // the current <loc> is longer than maxLocLen: skipped
		entry   SitemapEntry
		hasLoc  bool // entry has its <loc>
	)
	for len(locs) < limit {
		tok, err := d.Token()
		if err == io.EOF {
			if !root {
				return nil, false, fmt.Errorf("%w: no root element", ErrNotSitemap)
			}
			return locs, index, nil
		}
		if err != nil {
			if inItem && hasLoc { // the <loc> read before the error counts
				locs = append(locs, entry)
			}
			line, col := d.InputPos()
			return locs, index, fmt.Errorf("links: sitemap: line %d, column %d, offset %d: %w", line, col, d.InputOffset(), err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch depth {
			case 1:
				root = true
				switch t.Name.Local {
				case "urlset":
				case "sitemapindex":
					index = true
				default:
					return nil, false, fmt.Errorf("%w: root element <%s>", ErrNotSitemap, t.Name.Local)
				}
			case 2:
				inItem = (!index && t.Name.Local == "url") || (index && t.Name.Local == "sitemap")
				entry, hasLoc = SitemapEntry{}, false
			case 3:
				inLoc = inItem && t.Name.Local == "loc"
				inMod = inItem && t.Name.Local == "lastmod"
				loc, mod, tooLong = loc[:0], mod[:0], false
			}
		case xml.EndElement:
			if depth == 3 && inLoc {
				if s := strings.TrimSpace(string(loc)); s != "" && !tooLong && !hasLoc {
					entry.Loc, hasLoc = s, true
				}
				inLoc = false
			}
			if depth == 3 && inMod {
				entry.LastMod = parseLastMod(strings.TrimSpace(string(mod)))
				inMod = false
			}
			if depth == 2 && inItem {
				if hasLoc {
					locs = append(locs, entry)
				}
				inItem = false
			}
			depth--
		case xml.CharData:
			switch {
			case inLoc && depth == 3:
				if len(loc)+len(t) > maxLocLen {
					tooLong = true
				} else {
					loc = append(loc, t...)
				}
			case inMod && depth == 3 && len(mod)+len(t) <= 64:
				mod = append(mod, t...)
			}
		}
	}
	return locs, index, nil
}

// capReader reads r up to max bytes; past them its error wraps
// ErrSitemapTooLarge, at every call (a bufio.Reader's Peek may swallow
// the first).
type capReader struct {
	r    io.Reader
	left int64
	max  int64
	err  error
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left <= 0 {
		var one [1]byte
		n, err := io.ReadFull(c.r, one[:])
		switch {
		case n > 0:
			c.err = fmt.Errorf("%w: more than %d bytes", ErrSitemapTooLarge, c.max)
		case err == nil || errors.Is(err, io.ErrUnexpectedEOF):
			c.err = io.EOF
		default:
			c.err = err
		}
		return 0, c.err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// isTextSitemap reports whether the sitemap br reads is a text one: past
// a UTF-8 byte order mark and white space, it starts with "http://" or
// "https://" (any case). It only peeks.
func isTextSitemap(br *bufio.Reader) bool {
	b, _ := br.Peek(512)
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	b = bytes.TrimLeft(b, " \t\r\n")
	return isAbsoluteHTTP(b)
}

// textSitemap reads a text sitemap's URLs, one a line, at most limit.
func textSitemap(br *bufio.Reader, limit int) ([]SitemapEntry, error) {
	var locs []SitemapEntry
	first := true
	for line := 1; len(locs) < limit; line++ {
		b, err := br.ReadSlice('\n')
		long := false
		for errors.Is(err, bufio.ErrBufferFull) { // longer than the buffer: skipped
			long = true
			_, err = br.ReadSlice('\n')
		}
		if first {
			b, first = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), false
		}
		cut := err != nil && err != io.EOF // a last line cut short is no URL
		if b = bytes.TrimSpace(b); !long && !cut && len(b) <= maxLocLen && isAbsoluteHTTP(b) {
			locs = append(locs, SitemapEntry{Loc: string(b)})
		}
		switch {
		case err == io.EOF:
			return locs, nil
		case err != nil:
			return locs, fmt.Errorf("links: text sitemap: line %d: %w", line, err)
		}
	}
	return locs, nil
}

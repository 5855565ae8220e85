package links

import (
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

// ErrNotSitemap: the document's root element is not <urlset> or <sitemapindex>.
var ErrNotSitemap = errors.New("links: not a sitemap")

// Sitemap returns the <loc> URLs of a sitemap (<urlset><url><loc>) or, with
// index true, of a sitemap index (<sitemapindex><sitemap><loc>), trimmed but
// not normalised, at most limit of them (<= 0: DefaultSitemapLimit). A body
// that starts with the gzip magic is inflated first (at most
// MaxSitemapBytes). Element names are matched by local name, whatever their
// namespace; an encoding other than UTF-8 named in the XML declaration is
// decoded. Malformed XML gives an error that says where (line, column and
// byte offset) together with the URLs read before it.
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
		r = io.LimitReader(zr, maxBytes)
	}
	d := xml.NewDecoder(r)
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

package synth

import (
	"strconv"
	"strings"
	"time"
)

// rule is one Allow/Disallow line of the `*` group.
type rule struct {
	prefix string
	allow  bool
}

var (
	rulesNormal  = []rule{{"/private/", false}, {"/cgi-bin/", false}}
	rulesPartial = []rule{{"/private/", false}, {"/cgi-bin/", false}, {"/p/1", false}, {"/p/1.html", true}}
	rulesNone    = []rule{{"/", false}}
)

func (w *Web) rules(h int) []rule {
	switch w.hosts[h].Robots {
	case RobotsNormal, RobotsDelay, RobotsFlaky:
		return rulesNormal
	case RobotsPartial:
		return rulesPartial
	case RobotsDisallowAll:
		return rulesNone
	}
	return nil
}

// RobotsAllowed reports whether a crawler that obeys host h's robots.txt as
// user-agent `*` may fetch pathQuery (path plus "?query"). The longest
// matching rule wins, Allow on a tie (RFC 9309).
func (w *Web) RobotsAllowed(h int, pathQuery string) bool {
	best, allow := -1, true
	for _, r := range w.rules(h) {
		if strings.HasPrefix(pathQuery, r.prefix) {
			if l := len(r.prefix); l > best || (l == best && r.allow) {
				best, allow = l, r.allow
			}
		}
	}
	return allow
}

// renderRobots appends host h's robots.txt (its eventual 200 body) and
// reports the status it is served with (after any flaky failures).
func (w *Web) renderRobots(dst []byte, h int) ([]byte, int) {
	host := &w.hosts[h]
	if host.Robots == RobotsMissing {
		return append(dst, "not found\n"...), 404
	}
	dst = append(dst, "# robots.txt for "...)
	dst = append(dst, host.Name...)
	dst = append(dst, '\n')
	if host.Robots != RobotsAllowAll && host.Robots != RobotsDisallowAll {
		dst = append(dst, "User-agent: badbot\nDisallow: /\n\n"...)
	}
	dst = append(dst, "User-agent: *\n"...)
	rs := w.rules(h)
	if len(rs) == 0 {
		dst = append(dst, "Disallow:\n"...)
	}
	for _, r := range rs {
		if r.allow {
			dst = append(dst, "Allow: "...)
		} else {
			dst = append(dst, "Disallow: "...)
		}
		dst = append(dst, r.prefix...)
		dst = append(dst, '\n')
	}
	if host.CrawlDelay > 0 {
		dst = append(dst, "Crawl-delay: "...)
		dst = strconv.AppendInt(dst, int64(host.CrawlDelay), 10)
		dst = append(dst, '\n')
	}
	for _, s := range w.sitemaps(h) {
		dst = append(dst, "\nSitemap: "...)
		dst = append(dst, s...)
	}
	if host.Sitemap {
		dst = append(dst, '\n')
	}
	return dst, 200
}

// sitemaps returns the sitemap URLs host h's robots.txt names.
func (w *Web) sitemaps(h int) []string {
	host := &w.hosts[h]
	if !host.Sitemap {
		return nil
	}
	s := []string{w.Origin(h) + "/sitemap.xml"}
	if host.SitemapBad {
		s = append(s, w.Origin(h)+"/sitemap-missing.xml")
	}
	return s
}

// sitemapPages returns the page numbers /sitemap.xml lists: every third page
// (up to 500) and all orphans.
func (w *Web) sitemapPages(h int) []int {
	host := &w.hosts[h]
	var out []int
	for n := 0; n < host.Pages && len(out) < 500; n += 3 {
		out = append(out, n)
	}
	for n := host.Pages; n < host.Pages+host.Orphans; n++ {
		out = append(out, n)
	}
	return out
}

// renderSitemap appends host h's /sitemap.xml at simulated time t: with
// Options.Changes, each <url> has the <lastmod> of its page's last change.
func (w *Web) renderSitemap(dst []byte, h int, t time.Time) []byte {
	dst = append(dst, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n"...)
	origin := w.Origin(h)
	for _, n := range w.sitemapPages(h) {
		dst = append(dst, "<url><loc>"...)
		dst = append(dst, origin...)
		dst = append(dst, pagePath(n)...)
		dst = append(dst, "</loc>"...)
		if w.changes(h, n) {
			dst = append(dst, "<lastmod>"...)
			dst = w.LastChange(h, n, t).UTC().AppendFormat(dst, time.RFC3339)
			dst = append(dst, "</lastmod>"...)
		}
		dst = append(dst, "</url>\n"...)
	}
	return append(dst, "</urlset>\n"...)
}

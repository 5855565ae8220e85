// Package links extracts followable links from HTML pages and feeds, URLs
// from sitemaps, and what pages and servers say of themselves.
//
// An Extractor streams a page through golang.org/x/net/html's Tokenizer
// (no tree is built): it honours the first <base href>, takes <a href>,
// <area href>, <iframe src> and <frame src> (frames are pages), the first
// meta refresh's URL, feeds named by <link rel=alternate> and the head's
// <link rel=canonical> (Page.Canonical), skips rel="nofollow" links and
// pages with <meta name="robots" content="nofollow"> (or the robots
// agent's own meta name, SetRobotsAgent), resolves and normalises every
// href with a urlnorm.Normalizer, filters by a urlnorm.Scope and drops
// duplicates and links to the page itself. With requisites on
// (SetRequisites) it also returns the page's embeds, what it needs to
// render (images and srcset candidates, scripts, style sheets, icons, CSS
// url() and @import in <style> and style attributes), read by small
// byte-level scanners for srcset and CSS; ExtractCSS reads a fetched style
// sheet's references, and ExtractFeed an RSS or Atom feed's item links.
// Sitemap reads a sitemap or sitemap index with encoding/xml, streaming,
// or a text sitemap.
//
// The pure parsers of what a response says of itself are here too:
// ParseXRobotsTag (the X-Robots-Tag header), ParseLinkHeader (the Link
// header, RFC 8288) and ParseRefresh (a Refresh header or meta refresh, by
// the HTML standard).
package links

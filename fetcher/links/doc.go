// Package links extracts followable links from HTML pages and URLs from
// sitemaps.
//
// An Extractor streams a page through golang.org/x/net/html's Tokenizer
// (no tree is built): it honours the first <base href>, takes <a href> and
// <area href>, skips rel="nofollow" links and pages with <meta
// name="robots" content="nofollow">, resolves and normalises every href with
// a urlnorm.Normalizer, filters by a urlnorm.Scope and drops duplicates and
// links to the page itself. With requisites on (SetRequisites) it also
// returns the page's embeds, what it needs to render (images and srcset
// candidates, scripts, style sheets, icons, CSS url() and @import in
// <style> and style attributes), read by small byte-level scanners for
// srcset and CSS; ExtractCSS reads a fetched style sheet's references.
// Sitemap reads a sitemap or sitemap index with encoding/xml, streaming.
package links

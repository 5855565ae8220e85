// Package links extracts followable links from HTML pages and URLs from
// sitemaps.
//
// An Extractor streams a page through golang.org/x/net/html's Tokenizer
// (no tree is built): it honours the first <base href>, takes <a href> and
// <area href>, skips rel="nofollow" links and pages with <meta
// name="robots" content="nofollow">, resolves and normalises every href with
// a urlnorm.Normalizer, filters by a urlnorm.Scope and drops duplicates and
// links to the page itself. Sitemap reads a sitemap or sitemap index with
// encoding/xml, streaming.
package links

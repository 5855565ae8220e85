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
//
// Extract decodes each page as browsers do, by the HTML standard's
// encoding sniffing algorithm and the WHATWG Encoding Standard's
// encodings and labels: a BOM (UTF-8, UTF-16LE, UTF-16BE) first, then the
// Content-Type's charset (parsed as the MIME Sniffing standard parses it),
// then the prescan of the first 1,024 bytes for <meta charset> and <meta
// http-equiv=Content-Type content="...; charset=..."> (comments and other
// tags skipped, a meta declaring UTF-16 read as UTF-8). Where none
// declares an encoding the standard lets a browser guess: a page is UTF-8
// if it has non-ASCII bytes and is valid UTF-8 throughout (Chrome detects
// UTF-8 so, and x/net/html/charset over the first 1,024 bytes), else
// windows-1252, the standard's default for most locales and
// x/net/html/charset's. XHTML (application/xhtml+xml) follows XML instead
// of the prescan: its <?xml encoding?>, else UTF-8. Labels map as the
// standard's table says ("latin1", "ascii" and "iso-8859-1" are
// windows-1252, "utf-16" UTF-16LE, "iso-2022-kr" and its kin the
// replacement encoding, which reads a page as one U+FFFD).
//
// A UTF-8 page, and an all-ASCII page in an ASCII-compatible encoding,
// is tokenised as it stands, with no copy; another is decoded into a
// buffer the Extractor keeps (at most 3 bytes a byte of page; one grown
// past 1 MiB is dropped by the next page). The single-byte encodings are
// decoded by tables equal to the standard's indexes (x/text's, with the
// C1 controls it lacks), Shift_JIS by the standard's decoder over the
// jis0208 index read out of x/text; the other multi-byte encodings by
// golang.org/x/text, a GBK page by the gb18030 decoder as the standard
// says. x/text's decoders differ from the standard in error recovery
// only: after a lead byte, an ASCII letter that forms no character with
// it is lost (the standard reads it again); markup bytes below 0x40 are
// kept.
//
// Links are then resolved by the URL Standard's rules through a
// urlnorm.Base set to the page's encoding (Base.SetDocument): the path
// percent-encoded from UTF-8, the query in the page's encoding (UTF-8 for
// UTF-8 and UTF-16 pages), a character the encoding lacks as
// %26%23NNNN%3B; the Shift_JIS and EUC-JP encoders write U+00A5, U+203E
// and U+2212 as the standard's do. Embeds and <base href> resolve the same
// way; a TextSink sees the decoded text. ExtractCSS reads a style sheet as
// bytes, its references percent-encoded as they stand.
package links

// Package urlnorm normalises URLs on byte slices for the crawl database and
// decides whether a URL is in a crawl's scope.
//
// A normalised URL is what the crawl database accepts: "http://" or
// "https://", a lower-case ASCII host (IDN hosts in punycode, no trailing
// dot; an IPv6 literal in brackets as the WHATWG URL Standard writes it,
// "[2001:db8::1]", without a zone), a port only when it is not the
// scheme's default, a path that starts with '/' and has no dot segments,
// percent-escapes in upper-case hex with escapes of unreserved characters
// decoded, every byte <= 0x20 or >= 0x7f (and " < > \ ^ ` { | })
// percent-encoded, no fragment, no session-id parameters, no empty query,
// and at most crawl.MaxURLLen bytes, the limit package crawl shares with
// the database. Normalisation is idempotent.
//
// Normalizer.Resolve resolves an href against a Base as RFC 3986 section 5.2
// describes, with one choice the RFC leaves open (5.4.2): a reference such
// as "http:g" whose scheme equals the base's is read as relative, as
// browsers do.
//
// Scope.Check says why a URL is refused: out of scope, or a spider trap,
// by one of two rules on by default: a path that repeats a segment, or a
// run of segments, more than twice in a row (TrapRepetition), and a
// calendar-like URL whose date is more than five years back or one year
// ahead of the crawl's clock (TrapCalendar).
package urlnorm

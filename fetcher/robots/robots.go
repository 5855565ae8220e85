// Package robots decides which URLs of a host a crawler may fetch, from the
// host's robots.txt, following RFC 9309 (Robots Exclusion Protocol).
//
// Matching is done by github.com/temoto/robotstxt. Its input is not the raw
// file but a canonical rewrite of it (see parse.go) that works around the
// places where that library departs from RFC 9309: it rejects a whole file
// for one bad line, matches user-agent groups by prefix, leaves wildcard
// rules unanchored, ignores a bare "*" rule, does not prefer Allow on a tie,
// and compares paths without percent-normalisation.
package robots

import (
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/temoto/robotstxt"
)

// Policy is the robots.txt policy of one host, bound to one user-agent group
// (the "*" group until Agent is called). It is immutable and goroutine-safe.
type Policy struct {
	data        *robotstxt.RobotsData // nil: no rules
	group       *robotstxt.Group      // the bound group; nil: allow all
	agents      map[string]bool       // product tokens that have a group
	sitemaps    []string
	unavailable bool  // 5xx or unreachable: disallow all
	truncated   bool  // the body was cut to crawl.MaxRobotsBytes
	parseErr    error // temoto refused the rewrite (never expected)
}

// allowAll is the policy of a missing robots.txt.
var allowAll = &Policy{}

// unreachable is the policy of a robots.txt that could not be fetched.
var unreachable = &Policy{unavailable: true}

// FromResponse builds the policy from a robots.txt fetch (RFC 9309 2.3.1):
//   - 2xx: the body is parsed (truncated to crawl.MaxRobotsBytes, at the last
//     complete line); an empty or unparsable body allows everything;
//   - 3xx: redirects are the caller's business (it follows up to five hops);
//     a 3xx given here means they ran out and allows everything;
//   - 4xx except 429: allow everything;
//   - 429, 5xx, status 0 (unreachable) and anything else: disallow
//     everything, and Unavailable reports true so the caller backs off and
//     fetches robots.txt again later. (RFC 9309 says 4xx; 429 is treated as
//     a server error, as major crawlers do, because it asks us to slow down.)
func FromResponse(status int, body []byte) *Policy {
	switch {
	case status >= 200 && status < 300:
		return parse(body)
	case status >= 300 && status < 400:
		return allowAll
	case status == 429:
		return unreachable
	case status >= 400 && status < 500:
		return allowAll
	}
	return unreachable
}

// Allowed reports whether the bound agent may fetch pathQuery, a URL's path
// and query ("/a/b?c=d"). Percent-escapes are compared after normalisation,
// so "/%7euser" and "/~user" are the same path. /robots.txt is always
// allowed.
func (p *Policy) Allowed(pathQuery string) bool {
	if pathQuery == "/robots.txt" {
		return true
	}
	if p.unavailable {
		return false
	}
	if p.group == nil {
		return true
	}
	var buf [256]byte
	return p.group.Test(string(matchPath(buf[:0], pathQuery)))
}

// CrawlDelay returns the bound group's Crawl-delay (0 if none). The value is
// capped at MaxCrawlDelay; callers apply their own, lower cap.
func (p *Policy) CrawlDelay() time.Duration {
	if p.group == nil {
		return 0
	}
	return p.group.CrawlDelay
}

// Sitemaps returns the Sitemap URLs the file lists, as written, each once, in
// file order, at most MaxSitemaps. The slice must not be modified.
func (p *Policy) Sitemaps() []string { return p.sitemaps }

// Unavailable reports whether robots.txt could not be fetched (5xx, 429 or
// unreachable): everything is disallowed until it is fetched again.
func (p *Policy) Unavailable() bool { return p.unavailable }

// Truncated reports whether the body was longer than crawl.MaxRobotsBytes and
// only its first part was parsed.
func (p *Policy) Truncated() bool { return p.truncated }

// Agent returns the policy bound to the group for the crawler whose product
// token is name ("meridian"; a full User-Agent such as "Meridian/0.1 (...)"
// is cut to its token). Groups are matched case-insensitively and exactly;
// without a matching group the "*" group applies, and without that, nothing
// is disallowed.
func (p *Policy) Agent(name string) *Policy {
	if p.data == nil {
		return p
	}
	q := *p
	tok := ProductToken(name)
	if tok == "" || !p.agents[tok] {
		tok = "*"
	}
	q.group = nil
	if tok == "*" && !p.agents["*"] {
		return &q
	}
	q.group = p.data.FindGroup(tok)
	return &q
}

// MaxCrawlDelay caps the Crawl-delay values a file may give.
const MaxCrawlDelay = 24 * time.Hour

// MaxSitemaps bounds the Sitemap URLs kept from one file.
const MaxSitemaps = 1000

// MaxBytes is the longest body parsed, crawl.MaxRobotsBytes (RFC 9309 asks
// for at least 500 KiB).
const MaxBytes = crawl.MaxRobotsBytes

// ProductToken extracts the product token of a user-agent: the leading run
// of letters, '-' and '_', lower-cased; "*" for a value starting with '*'.
// "Meridian/0.1 (+https://example.org/bot)" gives "meridian".
func ProductToken(s string) string {
	s = strings.TrimLeft(s, " \t")
	if strings.HasPrefix(s, "*") {
		return "*"
	}
	n := 0
	lower := true
	for n < len(s) {
		c := s[n]
		if c >= 'A' && c <= 'Z' {
			lower = false
		} else if !(c >= 'a' && c <= 'z' || c == '-' || c == '_') {
			break
		}
		n++
	}
	if lower {
		return s[:n]
	}
	return strings.ToLower(s[:n])
}

package robots

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/temoto/robotstxt"
)

// The rewrite handed to temoto/robotstxt has one group per product token,
// in first-seen order:
//
//	User-agent: TOKEN
//	Crawl-delay: SECONDS      (always, so that a group without rules exists)
//	Allow: /|PATH             (all Allow rules first: temoto keeps the first
//	Disallow: /|PATH           of equally long matches, RFC 9309 prefers Allow)
//
// Every rule path is percent-normalised (normPath) and prefixed with the
// sentinel "/|"; Allowed prefixes the normalised path it tests the same way.
// '|' never occurs unescaped in a normalised path, so a wildcard rule, which
// temoto compiles to an unanchored regexp, can only match at the start.
// Groups that name the same token are merged (RFC 9309 2.2.1); rules outside
// any group, unknown records and invalid Crawl-delay values are dropped.

// sentinel starts every rule path and every tested path.
const sentinel = "/|"

// ruleLine is one Allow or Disallow record, normalised.
type ruleLine struct {
	allow bool
	path  string // normalised, without the sentinel
}

// agentGroup is everything the file says about one product token.
type agentGroup struct {
	rules    []ruleLine
	delay    float64 // seconds
	hasDelay bool
}

// parse builds the policy of a 2xx robots.txt body.
func parse(body []byte) *Policy {
	p := &Policy{}
	if len(body) > MaxBytes {
		p.truncated = true
		body = body[:MaxBytes]
		if i := bytes.LastIndexAny(body, "\r\n"); i >= 0 {
			body = body[:i]
		} else {
			body = nil
		}
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))

	var (
		order  []string // tokens in first-seen order
		groups = map[string]*agentGroup{}
		cur    []*agentGroup // the groups the current record group feeds
		inUA   bool          // the last group record was a user-agent line
		seen   = map[string]bool{}
	)
	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexAny(body, "\r\n"); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			line, body = body, nil
		}
		key, val, ok := record(line)
		if !ok {
			continue
		}
		switch key {
		case keyUserAgent:
			if !inUA {
				cur = cur[:0:0]
			}
			inUA = true
			tok := ProductToken(val)
			if tok == "" {
				continue // a group no crawler matches
			}
			g := groups[tok]
			if g == nil {
				g = &agentGroup{}
				groups[tok] = g
				order = append(order, tok)
			}
			cur = append(cur, g)
		case keyAllow, keyDisallow:
			inUA = false
			if val == "" {
				continue // "Disallow:" with no path allows everything
			}
			r := ruleLine{allow: key == keyAllow, path: rulePath(val)}
			for _, g := range cur {
				g.rules = append(g.rules, r)
			}
		case keyCrawlDelay:
			inUA = false
			d, ok := parseDelay(val)
			if !ok {
				continue
			}
			for _, g := range cur {
				// The largest delay wins if a token's groups disagree.
				if !g.hasDelay || d > g.delay {
					g.delay, g.hasDelay = d, true
				}
			}
		case keySitemap:
			if val != "" && len(p.sitemaps) < MaxSitemaps && !seen[val] {
				seen[val] = true
				p.sitemaps = append(p.sitemaps, val)
			}
		}
	}
	if len(order) == 0 {
		return p
	}

	var out []byte
	p.agents = make(map[string]bool, len(order))
	for _, tok := range order {
		g := groups[tok]
		p.agents[tok] = true
		out = append(out, "User-agent: "...)
		out = append(out, tok...)
		out = append(out, "\nCrawl-delay: "...)
		out = strconv.AppendFloat(out, g.delay, 'f', -1, 64)
		out = append(out, '\n')
		for _, allow := range []bool{true, false} {
			for _, r := range g.rules {
				if r.allow != allow {
					continue
				}
				if allow {
					out = append(out, "Allow: "...)
				} else {
					out = append(out, "Disallow: "...)
				}
				out = append(out, sentinel...)
				out = append(out, r.path...)
				out = append(out, '\n')
			}
		}
	}
	data, err := robotstxt.FromBytes(out)
	if err != nil {
		// The rewrite only holds records temoto accepts; if it still refuses,
		// the file is treated as unparsable: everything is allowed.
		p.agents, p.parseErr = nil, err
		return p
	}
	p.data = data
	if p.agents["*"] {
		p.group = data.FindGroup("*")
	}
	return p
}

// Record keys.
const (
	keyOther = iota
	keyUserAgent
	keyAllow
	keyDisallow
	keyCrawlDelay
	keySitemap
)

// keys maps lower-case record names, with the common misspellings that
// widely used parsers accept, to record keys.
var keys = map[string]int{
	"user-agent":  keyUserAgent,
	"useragent":   keyUserAgent,
	"user agent":  keyUserAgent,
	"allow":       keyAllow,
	"disallow":    keyDisallow,
	"dissallow":   keyDisallow,
	"dissalow":    keyDisallow,
	"disalow":     keyDisallow,
	"diasllow":    keyDisallow,
	"disallaw":    keyDisallow,
	"crawl-delay": keyCrawlDelay,
	"crawldelay":  keyCrawlDelay,
	"sitemap":     keySitemap,
	"site-map":    keySitemap,
}

// record splits one line into its key and trimmed value, dropping any
// comment. A line without ':' is read as "key value" if it has exactly two
// fields.
func record(line []byte) (key int, val string, ok bool) {
	if i := bytes.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return 0, "", false
	}
	var k, v []byte
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		k, v = line[:i], line[i+1:]
	} else {
		f := bytes.Fields(line)
		if len(f) != 2 {
			return 0, "", false
		}
		k, v = f[0], f[1]
	}
	k = bytes.TrimSpace(k)
	if len(k) > 16 {
		return 0, "", false
	}
	var lk [16]byte
	for i, c := range k {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		lk[i] = c
	}
	key, ok = keys[string(lk[:len(k)])]
	if !ok {
		return 0, "", false
	}
	return key, string(bytes.TrimSpace(v)), true
}

// parseDelay parses a Crawl-delay value in seconds, capped at MaxCrawlDelay.
func parseDelay(s string) (float64, bool) {
	if f := strings.Fields(s); len(f) > 0 {
		s = f[0]
	}
	d, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(d) || d < 0 {
		return 0, false
	}
	return min(d, MaxCrawlDelay.Seconds()), true
}

// rulePath normalises an Allow/Disallow value: a missing leading '/' is
// added, trailing '*'s (which match nothing extra) are dropped, and the rest
// is percent-normalised.
func rulePath(v string) string {
	v = strings.TrimRight(v, "*")
	if v == "" {
		return "/"
	}
	if v[0] != '/' && v[0] != '*' {
		v = "/" + v
	}
	return string(normPath(nil, v))
}

// matchPath appends the string Allowed tests: the sentinel, then pathQuery
// normalised, with a leading '/' added if missing.
func matchPath(dst []byte, pathQuery string) []byte {
	dst = append(dst, sentinel...)
	if !strings.HasPrefix(pathQuery, "/") {
		dst = append(dst, '/')
	}
	return normPath(dst, pathQuery)
}

// rawOK holds the bytes normPath leaves as they are: RFC 3986 unreserved
// and reserved characters. '%' is handled separately.
var rawOK = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~:/?#[]@!$&'()*+,;=" {
		t[c] = true
	}
	return t
}()

// unreserved reports whether c is an RFC 3986 unreserved character.
func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

const hexDigits = "0123456789ABCDEF"

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// normPath appends s percent-normalised (RFC 9309 2.2.2, RFC 3986 6.2.2):
// escapes get upper-case hex, escapes of unreserved characters are decoded,
// a '%' that starts no escape becomes "%25", and every byte that is neither
// reserved nor unreserved (controls, space, non-ASCII, " < > \ ^ ` { | }) is
// escaped. '*' and '$' are reserved, so they pass through unchanged.
func normPath(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case rawOK[c]:
			dst = append(dst, c)
		case c == '%':
			if i+2 < len(s) {
				hi, ok1 := unhex(s[i+1])
				lo, ok2 := unhex(s[i+2])
				if ok1 && ok2 {
					if b := hi<<4 | lo; unreserved(b) {
						dst = append(dst, b)
					} else {
						dst = append(dst, '%', hexDigits[hi], hexDigits[lo])
					}
					i += 2
					continue
				}
			}
			dst = append(dst, "%25"...)
		default:
			dst = append(dst, '%', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	return dst
}

package robots

import (
	"strings"
	"time"
)

// UnreachableLimit is how long a robots.txt may stay unreachable (5xx, 429,
// no answer) before the crawler stops treating the host as disallowed
// (RFC 9309 2.3.1.4): past it, the last good copy applies if one is kept,
// else nothing is disallowed (see Stale), as Google documents for its
// crawlers.
const UnreachableLimit = 30 * 24 * time.Hour

// Stale returns the policy of a robots.txt unreachable for longer than
// UnreachableLimit: that of its last good copy (a fetch answered with
// status and body, as FromResponse takes them) if one is kept (status not
// 0), else a policy that allows everything. It is never Unavailable.
func Stale(status int, body []byte) *Policy {
	if status == 0 {
		return allowAll
	}
	p := FromResponse(status, body)
	if p.Unavailable() {
		return allowAll
	}
	return p
}

// maxDeltaSeconds is the largest max-age taken as it is: RFC 9111 1.2.2
// has a larger one read as 2^31 seconds.
const maxDeltaSeconds = 1 << 31

// MaxAge reads a Cache-Control value (several header lines joined with
// commas) as a private cache does (RFC 9111 5.2.2): ok is false if it has
// no max-age, no-cache or no-store directive, the response's lifetime is
// then the caller's default. Otherwise d is the max-age, or 0 with
// no-cache, no-store, or a max-age that is not a number (RFC 9111 4.2.1
// has such a response stale). Directive names are case-insensitive, a
// quoted max-age is accepted, the first of several max-age directives
// counts and the most restrictive directive wins. A no-cache that names
// header fields only restricts those fields and is ignored.
func MaxAge(cacheControl string) (d time.Duration, ok bool) {
	seenAge := false
	for s := cacheControl; s != ""; {
		var name, val string
		name, val, s = directive(s)
		switch {
		case strings.EqualFold(name, "no-store"), strings.EqualFold(name, "no-cache") && val == "":
			return 0, true
		case strings.EqualFold(name, "max-age") && !seenAge:
			seenAge, ok = true, true
			d = deltaSeconds(val)
		}
	}
	return d, ok
}

// Lifetime returns how long a robots.txt answered with this Cache-Control
// value is trusted: ttl (RFC 9309 2.4 caps it at 24 hours) if the value
// has no max-age, no-cache or no-store (MaxAge), else its max-age within
// [floor, ttl]. A floor above ttl gives ttl.
func Lifetime(cacheControl string, floor, ttl time.Duration) time.Duration {
	d, ok := MaxAge(cacheControl)
	if !ok {
		return ttl
	}
	return min(max(d, floor), ttl)
}

// directive splits the first directive off a Cache-Control value: its
// name and its value (unquoted), and the rest after the next comma outside
// a quoted string.
func directive(s string) (name, val, rest string) {
	i := 0
	for i < len(s) && s[i] != ',' && s[i] != '=' {
		i++
	}
	name = strings.TrimSpace(s[:i])
	if i == len(s) || s[i] == ',' {
		if i < len(s) {
			i++
		}
		return name, "", s[i:]
	}
	i++ // '='
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i < len(s) && s[i] == '"' {
		var b strings.Builder
		for i++; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			b.WriteByte(s[i])
		}
		val = b.String()
		for i < len(s) && s[i] != ',' {
			i++
		}
	} else {
		j := i
		for i < len(s) && s[i] != ',' {
			i++
		}
		val = strings.TrimSpace(s[j:i])
	}
	if i < len(s) {
		i++
	}
	return name, val, s[i:]
}

// deltaSeconds parses a delta-seconds value (RFC 9111 1.2.2): digits only;
// anything else is 0, a value past 2^31 seconds is 2^31 seconds.
func deltaSeconds(v string) time.Duration {
	if v == "" {
		return 0
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0
		}
		if n = 10*n + int64(c-'0'); n > maxDeltaSeconds {
			n = maxDeltaSeconds
		}
	}
	return time.Duration(n) * time.Second
}

package urlnorm

import "strings"

// authorityEnd returns the offsets of the authority of a normalised URL u:
// from just after "://" to the first '/' (or len(u)); ok is false if u has
// no "://".
func authorityEnd(u string) (start, end int, ok bool) {
	i := strings.Index(u, "://")
	if i < 0 {
		return 0, 0, false
	}
	start = i + 3
	end = strings.IndexByte(u[start:], '/')
	if end < 0 {
		return start, len(u), true
	}
	return start, start + end, true
}

// Host returns the host (no port) of a normalised URL: "h1.us.test" for
// "http://h1.us.test:8080/x", "[2001:db8::1]" (brackets kept) for
// "http://[2001:db8::1]:8080/x". It returns "" if u has no "://".
func Host(u string) string {
	s, e, ok := authorityEnd(u)
	if !ok {
		return ""
	}
	h := u[s:e]
	if i := strings.LastIndexByte(h, ':'); i >= 0 && h[len(h)-1] != ']' { // an IPv6 literal's colons are not a port's
		h = h[:i]
	}
	return h
}

// Origin returns "scheme://host[:port]" of a normalised URL, or "" if u has
// no "://".
func Origin(u string) string {
	_, e, ok := authorityEnd(u)
	if !ok {
		return ""
	}
	return u[:e]
}

// PathQuery returns the path and query of a normalised URL ("/a?b"); "/" if
// the path is empty, "" if u has no "://".
func PathQuery(u string) string {
	_, e, ok := authorityEnd(u)
	if !ok {
		return ""
	}
	if e == len(u) {
		return "/"
	}
	return u[e:]
}

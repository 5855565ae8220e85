package websim

import (
	"net/http"
	"strings"
	"time"
)

// notModified evaluates the preconditions of a GET (RFC 9110 §13.2.2,
// steps 3 and 4) against a representation with strong entity tag etag and
// last modification time lastModified. conditional reports whether the
// request carried If-None-Match or If-Modified-Since, and unchanged whether
// it is to be answered 304 Not Modified:
//
//   - If-None-Match (its field lines joined as one list): 304 if it is "*"
//     or names an entity tag that weakly matches etag (§8.8.3.2: the opaque
//     tags are equal, W/ aside). A list websim cannot parse matches nothing.
//   - If-Modified-Since, only when there is no If-None-Match: 304 if
//     lastModified (to the second) is no later than the date. A date that
//     does not parse as an HTTP-date, or more than one field line, is
//     ignored (§13.1.3).
//
// If-Match and If-Unmodified-Since are not evaluated (websim serves only
// GET and HEAD).
func notModified(h http.Header, etag string, lastModified time.Time) (conditional, unchanged bool) {
	if inm := h.Values("If-None-Match"); len(inm) > 0 {
		list := strings.Join(inm, ",")
		if strings.TrimLeft(list, " \t,") != "" {
			return true, etagListMatches(list, etag)
		}
	}
	ims := h.Values("If-Modified-Since")
	if len(ims) == 0 {
		return false, false
	}
	if len(ims) > 1 {
		return true, false
	}
	t, err := http.ParseTime(strings.TrimSpace(ims[0]))
	if err != nil {
		return true, false
	}
	return true, !lastModified.Truncate(time.Second).After(t)
}

// etagListMatches reports whether list, the value of an If-None-Match field
// (#entity-tag, or "*"), has "*" or an entity tag whose opaque tag equals
// that of etag. Members are read left to right; a malformed member ends
// the list, so that it and what follows match nothing.
func etagListMatches(list, etag string) bool {
	want := strings.TrimPrefix(etag, "W/")
	for {
		list = strings.TrimLeft(list, " \t")
		switch {
		case list == "":
			return false
		case list[0] == ',':
			list = list[1:]
			continue
		case list[0] == '*':
			rest := strings.TrimLeft(list[1:], " \t")
			return rest == "" || rest[0] == ','
		}
		opaque, rest, ok := scanETag(list)
		if !ok {
			return false
		}
		if opaque == want {
			return true
		}
		list = strings.TrimLeft(rest, " \t")
		if list != "" && list[0] != ',' {
			return false
		}
	}
}

// scanETag reads the entity-tag at the start of s ([W/] DQUOTE *etagc
// DQUOTE, etagc = %x21 / %x23-7E / obs-text) and returns its opaque tag,
// quotes included, and the rest of s.
func scanETag(s string) (opaque, rest string, ok bool) {
	s = strings.TrimPrefix(s, "W/")
	if len(s) < 2 || s[0] != '"' {
		return "", "", false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return s[:i+1], s[i+1:], true
		case c == 0x21 || (c >= 0x23 && c <= 0x7e) || c >= 0x80:
		default:
			return "", "", false
		}
	}
	return "", "", false
}

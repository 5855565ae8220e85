package cdxj

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// SURT returns the index key of rawURL the way pywb and the Internet
// Archive's surt library (its default options) make it, without the scheme:
//
//	http://www.Example.com:80/A/b/?z=1&a=2#top  →  com,example)/a/b?a=2&z=1
//
// Leading and trailing spaces, tabs and line breaks are dropped; a URL
// without "scheme://" is taken as http. The fragment, user and password go;
// the host is unescaped, lower-cased, stripped of a "www.", "www2." (any
// digits) prefix, of empty labels and of outer dots, and reversed with
// commas (dotted IPv4 addresses included; a host that is a decimal number
// becomes the IPv4 address it stands for); a non-ASCII host is turned into
// its punycode (ASCII) form, which a host that is punycode already keeps.
// The default port of http (80) and https (443) is dropped, any other kept
// as ":port" before the ')'. The path has its "." and ".." segments
// resolved, empty segments dropped, a trailing slash dropped unless it is
// the root "/", and session ids of the forms surt knows removed; path and
// query are percent-unescaped repeatedly, re-escaped minimally (bytes
// outside '!'..'~', '#' and '%' only) and lower-cased. The query's
// arguments are sorted by name, then value (an argument without '=' first),
// and an empty query is dropped.
//
// A URL that has "scheme:" but no "//" (urn:, dns:, mailto:) is returned as
// it is, trimmed, and an empty one as "-", as surt does, but for spaces and
// control characters, percent-escaped: a key never has any, and so never
// breaks a CDXJ line.
func SURT(rawURL string) string {
	return string(AppendSURT(nil, rawURL))
}

// AppendSURT appends SURT(rawURL) to b.
func AppendSURT(b []byte, rawURL string) []byte {
	u := strings.TrimSpace(rawURL)
	if strings.ContainsAny(u, "\t\r\n") {
		u = strings.NewReplacer("\t", "", "\r", "", "\n", "").Replace(u)
	}
	if u == "" {
		return append(b, '-')
	}
	scheme, rest := "http", u
	if i := strings.Index(u, "://"); i > 0 && isScheme(u[:i]) {
		scheme, rest = strings.ToLower(u[:i]), u[i+3:]
	} else if i := strings.IndexByte(u, ':'); i > 0 && isScheme(u[:i]) && !looksLikeHostPort(u) {
		return append(b, escapeSpace(u)...) // urn:, dns:, mailto: ...
	}
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	auth, path, query, hasQuery := rest, "", "", false
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		auth, path = rest[:i], rest[i:]
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path, query, hasQuery = path[:i], path[i+1:], true
	}
	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		auth = auth[i+1:]
	}
	host, port := splitPort(auth)

	b = appendSURTHost(b, host)
	if port != "" && !defaultPort(scheme, port) {
		b = append(b, ':')
		b = append(b, port...)
	}
	b = append(b, ')')
	b = appendPath(b, path)
	if hasQuery {
		if q := canonQuery(query); q != "" {
			b = append(b, '?')
			b = append(b, q...)
		}
	}
	return b
}

// escapeSpace percent-escapes the bytes up to ' ' and DEL.
func escapeSpace(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// looksLikeHostPort tells "example.com:8080/x" (a URL without a scheme)
// from "urn:x" or "mailto:a@b": digits after the colon up to '/' or the end.
func looksLikeHostPort(u string) bool {
	i := strings.IndexByte(u, ':')
	rest := u[i+1:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	if rest == "" {
		return false
	}
	for k := 0; k < len(rest); k++ {
		if rest[k] < '0' || rest[k] > '9' {
			return false
		}
	}
	return true
}

// splitPort splits "host:port" where port is all digits.
func splitPort(auth string) (host, port string) {
	i := strings.LastIndexByte(auth, ':')
	if i < 0 || strings.HasSuffix(auth, "]") {
		return auth, ""
	}
	p := auth[i+1:]
	for k := 0; k < len(p); k++ {
		if p[k] < '0' || p[k] > '9' {
			return auth, ""
		}
	}
	if p == "" {
		return auth[:i], ""
	}
	if n, err := strconv.ParseUint(p, 10, 32); err == nil {
		p = strconv.FormatUint(n, 10) // "080" is port 80
	}
	return auth[:i], p
}

func defaultPort(scheme, port string) bool {
	return scheme == "http" && port == "80" || scheme == "https" && port == "443"
}

// appendSURTHost appends the canonical host reversed with commas.
func appendSURTHost(b []byte, host string) []byte {
	h := unescapeRepeatedly(host)
	if !isASCII(h) {
		if a, err := idna.Lookup.ToASCII(h); err == nil {
			h = a
		}
	}
	for strings.Contains(h, "..") {
		h = strings.ReplaceAll(h, "..", ".")
	}
	h = strings.Trim(h, ".")
	if ip, ok := decimalIPv4(h); ok {
		h = ip
	} else {
		h = strings.ToLower(h)
		if strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '#' || r == '%' }) {
			h = string(escapeOnce(nil, h))
		}
	}
	h = stripWWW(h)
	for i := len(h); ; {
		j := strings.LastIndexByte(h[:i], '.')
		b = append(b, h[j+1:i]...)
		if j < 0 {
			return b
		}
		b = append(b, ',')
		i = j
	}
}

// stripWWW drops a leading "www." or "www<digits>.".
func stripWWW(h string) string {
	if !strings.HasPrefix(h, "www") {
		return h
	}
	i := 3
	for i < len(h) && h[i] >= '0' && h[i] <= '9' {
		i++
	}
	if i < len(h) && h[i] == '.' {
		return h[i+1:]
	}
	return h
}

// decimalIPv4 turns a host made of digits only into the IPv4 address of its
// low 32 bits, as surt does.
func decimalIPv4(h string) (string, bool) {
	if h == "" || len(h) > 19 {
		return "", false
	}
	var n uint64
	for i := 0; i < len(h); i++ {
		if h[i] < '0' || h[i] > '9' {
			return "", false
		}
		n = n*10 + uint64(h[i]-'0')
	}
	n &= 0xffffffff
	return strconv.Itoa(int(n>>24)) + "." + strconv.Itoa(int(n>>16&0xff)) + "." + strconv.Itoa(int(n>>8&0xff)) + "." + strconv.Itoa(int(n&0xff)), true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// appendPath appends the canonical path: never empty, "/" at least.
func appendPath(b []byte, raw string) []byte {
	start := len(b)
	b = escapeOnce(b, normalizePath(unescapeRepeatedly(raw)))
	for i := start; i < len(b); i++ {
		if c := b[i]; c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	if bytes.Contains(b[start:], []byte(".aspx")) {
		p := stripPathSessionID(string(b[start:]))
		b = append(b[:start], p...)
	}
	if len(b)-start > 1 && b[len(b)-1] == '/' {
		b = b[:len(b)-1]
	}
	return b
}

// normalizePath resolves "." and ".." segments and drops empty segments
// but a trailing one.
func normalizePath(p string) string {
	if p == "" {
		return "/"
	}
	if !strings.Contains(p, "//") && !strings.Contains(p, "/.") {
		return p // nothing to do: the common case
	}
	segs := strings.Split(p, "/")[1:]
	kept := segs[:0:0]
	for _, s := range segs {
		switch s {
		case ".":
		case "..":
			if len(kept) > 0 {
				kept = kept[:len(kept)-1]
			} else {
				kept = append(kept, s)
			}
		default:
			kept = append(kept, s)
		}
	}
	var sb strings.Builder
	sb.Grow(len(p))
	sb.WriteByte('/')
	for i, s := range kept {
		if i == len(kept)-1 {
			sb.WriteString(s)
		} else if s != "" {
			sb.WriteString(s)
			sb.WriteByte('/')
		}
	}
	return sb.String()
}

// stripPathSessionID removes an ASP.NET cookieless session segment
// "/(S(xxxxxxxxxxxxxxxxxxxxxxxx))/" or "/(xxxxxxxxxxxxxxxxxxxxxxxx)/"
// before a path to a ".aspx" page. p is lower-case.
func stripPathSessionID(p string) string {
	if !strings.Contains(p, ".aspx") {
		return p
	}
	for i := 0; i+1 < len(p); i++ {
		if p[i] != '/' || p[i+1] != '(' {
			continue
		}
		if end, ok := aspSessionSegment(p[i+1:]); ok {
			rest := p[i+1+end:]
			if strings.Index(rest, ".aspx") > 0 {
				return p[:i+1] + rest
			}
		}
	}
	return p
}

// aspSessionSegment matches "(x(24 alnum))...)/" or "(24 alnum)/" at the
// start of s and returns its length.
func aspSessionSegment(s string) (int, bool) {
	alnum24 := func(t string) bool {
		if len(t) < 24 {
			return false
		}
		for k := 0; k < 24; k++ {
			c := t[k]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				return false
			}
		}
		return true
	}
	if alnum24(s[1:]) && strings.HasPrefix(s[25:], ")/") {
		return 27, true
	}
	i, n := 1, 0
	for i+2 < len(s) && s[i] >= 'a' && s[i] <= 'z' && s[i+1] == '(' && alnum24(s[i+2:]) && i+26 < len(s) && s[i+26] == ')' {
		i += 27
		n++
	}
	if n > 0 && strings.HasPrefix(s[i:], ")/") {
		return i + 2, true
	}
	return 0, false
}

// canonQuery returns the canonical query: unescaped and minimally
// re-escaped, session ids removed, lower-cased, arguments sorted.
func canonQuery(q string) string {
	if q == "" {
		return ""
	}
	q = string(escapeOnce(nil, unescapeRepeatedly(q)))
	q = strings.ToLower(stripQuerySessionID(q))
	if len(q) <= 1 {
		return q
	}
	args := strings.Split(q, "&")
	slices.SortStableFunc(args, compareArg)
	return strings.Join(args, "&")
}

// compareArg orders query arguments as surt does: by name, then an
// argument without '=' before one with, then by value.
func compareArg(a, b string) int {
	an, av, aeq := strings.Cut(a, "=")
	bn, bv, beq := strings.Cut(b, "=")
	if c := strings.Compare(an, bn); c != 0 {
		return c
	}
	if aeq != beq {
		if !aeq {
			return -1
		}
		return 1
	}
	return strings.Compare(av, bv)
}

// stripQuerySessionID removes the session id arguments surt knows:
// jsessionid, phpsessid and sid with 32 alphanumerics, ASPSESSIONIDxxxxxxxx
// with 24 letters, and cfid=...&cftoken=....
func stripQuerySessionID(q string) string {
	lower := strings.ToLower(q)
	for _, name := range []string{"jsessionid=", "phpsessid=", "sid="} {
		q, lower = stripArg(q, lower, name, func(v string) int { return runOf(v, 32, isAlnum) })
	}
	q, lower = stripArg(q, lower, "aspsessionid", func(v string) int {
		if runOf(v, 8, isAlpha) != 8 || len(v) < 9 || v[8] != '=' || runOf(v[9:], 24, isAlpha) != 24 {
			return -1
		}
		return 33
	})
	q, _ = stripArg(q, lower, "cfid=", func(v string) int {
		i := strings.IndexByte(v, '&')
		if i <= 0 || !strings.HasPrefix(strings.ToLower(v[i:]), "&cftoken=") {
			return -1
		}
		j := i + len("&cftoken=")
		k := j
		for k < len(v) && v[k] != '&' {
			k++
		}
		if k == j {
			return -1
		}
		return k
	})
	return q
}

// stripArg removes the last occurrence of name followed by a value that
// valueLen accepts (the length of the value, or -1) and by '&' or the end:
// "a=1&sid=X&b=2" → "a=1&b=2" (the '&' after it goes, the one before stays,
// as in surt).
func stripArg(q, lower, name string, valueLen func(string) int) (string, string) {
	for i := strings.LastIndex(lower, name); i >= 0; i = strings.LastIndex(lower[:i], name) {
		n := valueLen(q[i+len(name):])
		if n < 0 {
			continue
		}
		end := i + len(name) + n
		switch {
		case end == len(q):
			return q[:i], lower[:i]
		case q[end] == '&':
			return q[:i] + q[end+1:], lower[:i] + lower[end+1:]
		}
	}
	return q, lower
}

func runOf(s string, n int, ok func(byte) bool) int {
	if len(s) < n {
		return -1
	}
	for i := 0; i < n; i++ {
		if !ok(s[i]) {
			return -1
		}
	}
	return n
}

func isAlnum(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// unescapeRepeatedly percent-decodes s until nothing changes; malformed
// escapes stay as they are.
func unescapeRepeatedly(s string) string {
	for strings.IndexByte(s, '%') >= 0 {
		u := unescape(s)
		if u == s {
			break
		}
		s = u
	}
	return s
}

func unescape(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			if b == nil {
				b = append(make([]byte, 0, len(s)), s[:i]...)
			}
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		if b != nil {
			b = append(b, s[i])
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// escapeOnce appends s with the bytes outside '!'..'~', '#' and '%'
// percent-escaped (upper-case hex).
func escapeOnce(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '#' || c == '%' {
			b = append(b, '%', hex[c>>4], hex[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}

package fetcher

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// Bounds of the cookie jar (Options.Cookies).
const (
	// defaultMaxCookieHosts is Options.MaxCookieHosts when it is 0.
	defaultMaxCookieHosts = 10_000
	// maxCookiesPerHost is the most cookies kept for one host; past it the
	// least recently used goes (RFC 6265 section 5.3).
	maxCookiesPerHost = 50
	// maxCookieBytes bounds a cookie's name and value together; a longer
	// one is refused (RFC 6265bis section 5.6, as browsers do).
	maxCookieBytes = 4096
	// maxCookieHostBytes bounds the names and values of one host's
	// cookies together, so that the jar holds at most about
	// MaxCookieHosts × 8 KiB; past it the least recently used go. A
	// Cookie header longer than about 8 KiB is refused by nginx and
	// Apache in their default configuration anyway.
	maxCookieHostBytes = 8192
	// maxCookieAge caps Expires and Max-Age (RFC 6265bis section 5.6.1).
	maxCookieAge = 400 * 24 * time.Hour
)

// cookieJar keeps the cookies servers set, per host, in memory, and gives
// back the Cookie header of a request (Options.Cookies). It follows RFC
// 6265 (and 6265bis where that is stricter) with these choices: every
// cookie is host-only, a Domain attribute does not widen it to other
// hosts (a Domain the host does not domain-match refuses the cookie, as
// browsers do); ports are not told apart (RFC 6265 section 8.5); SameSite
// is ignored (every request of a crawler is a top-level one); a session
// cookie lives as long as the jar. At most maxHosts hosts are kept, and
// maxCookiesPerHost cookies and maxCookieHostBytes bytes a host, the least
// recently used dropped first. Time comes in as a parameter. It is safe
// for concurrent use.
type cookieJar struct {
	maxHosts int
	mu       struct {
		sync.Mutex
		hosts map[string]*cookieHost
		lru   cookieHost // sentinel of the ring of hosts, most recent first
		seq   uint64     // creation order of cookies
	}
}

// cookieHost is one host's cookies, in the jar's ring of hosts.
type cookieHost struct {
	name       string
	prev, next *cookieHost
	cookies    []jarCookie
	bytes      int // names and values of cookies
}

// jarCookie is one stored cookie.
type jarCookie struct {
	name, value string // value with its quotes, if it had them
	path        string
	secure      bool
	expires     time.Time // zero: a session cookie
	used        time.Time // last set or sent
	seq         uint64    // creation order
}

// newCookieJar returns an empty jar of at most maxHosts hosts (0 →
// defaultMaxCookieHosts).
func newCookieJar(maxHosts int) *cookieJar {
	if maxHosts <= 0 {
		maxHosts = defaultMaxCookieHosts
	}
	j := &cookieJar{maxHosts: maxHosts}
	j.mu.hosts = map[string]*cookieHost{}
	j.mu.lru.prev, j.mu.lru.next = &j.mu.lru, &j.mu.lru
	return j
}

// setCookies stores the cookies of a response's Set-Cookie lines for a
// request to host (lower case, no port) over https or not, whose URL path
// is reqPath. A line that does not parse, a cookie too large, a Secure
// cookie over http and a Domain host does not domain-match are ignored;
// an expired cookie (Max-Age ≤ 0, Expires not after now) deletes the one
// of its name and path.
func (j *cookieJar) setCookies(host string, https bool, reqPath string, lines []string, now time.Time) {
	if len(lines) == 0 || host == "" {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, line := range lines {
		c, ok := parseCookie(host, https, reqPath, line, now)
		if !ok {
			continue
		}
		h := j.hostLocked(host, c.expires.IsZero() || c.expires.After(now))
		if h == nil {
			continue
		}
		j.storeLocked(h, c, https, now)
	}
}

// parseCookie parses one Set-Cookie line for a request to host; ok is
// false if the cookie is to be ignored. An expired cookie comes back with
// expires at or before now.
func parseCookie(host string, https bool, reqPath, line string, now time.Time) (jarCookie, bool) {
	hc, err := http.ParseSetCookie(line)
	if err != nil || hc.Name == "" || len(hc.Name)+len(hc.Value) > maxCookieBytes {
		return jarCookie{}, false
	}
	if hc.Secure && !https {
		return jarCookie{}, false // RFC 6265bis section 5.6 step 15
	}
	if d := strings.TrimPrefix(strings.ToLower(hc.Domain), "."); d != "" && d != host && !(strings.HasSuffix(host, "."+d) && !isIPHost(host)) {
		return jarCookie{}, false
	}
	c := jarCookie{name: hc.Name, value: hc.Value, path: hc.Path, secure: hc.Secure}
	if hc.Quoted {
		c.value = `"` + c.value + `"`
	}
	if c.path == "" || c.path[0] != '/' {
		c.path = defaultCookiePath(reqPath)
	}
	switch name := hc.Name; {
	case strings.HasPrefix(name, "__Secure-") && !c.secure,
		strings.HasPrefix(name, "__Host-") && (!c.secure || hc.Domain != "" || c.path != "/"):
		return jarCookie{}, false // RFC 6265bis section 4.1.3
	}
	switch {
	case hc.MaxAge < 0:
		c.expires = now // Max-Age=0 or negative: delete
	case hc.MaxAge > 0:
		c.expires = now.Add(maxCookieAge)
		if hc.MaxAge < int(maxCookieAge/time.Second) {
			c.expires = now.Add(time.Duration(hc.MaxAge) * time.Second)
		}
	case !hc.Expires.IsZero():
		c.expires = hc.Expires
		if limit := now.Add(maxCookieAge); c.expires.After(limit) {
			c.expires = limit
		}
	}
	return c, true
}

// isIPHost reports whether host is an IP literal (a Domain attribute
// never widens to it).
func isIPHost(host string) bool {
	if strings.HasPrefix(host, "[") {
		return true
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// hostLocked returns host's entry, made and the least recently used host
// dropped if need be when create; nil if there is none and !create. It
// moves the entry to the front of the ring.
func (j *cookieJar) hostLocked(host string, create bool) *cookieHost {
	h := j.mu.hosts[host]
	switch {
	case h != nil:
		j.unlinkLocked(h)
	case !create:
		return nil
	default:
		if len(j.mu.hosts) >= j.maxHosts {
			j.dropLocked(j.mu.lru.prev)
		}
		h = &cookieHost{name: host}
		j.mu.hosts[host] = h
	}
	h.prev, h.next = &j.mu.lru, j.mu.lru.next
	h.next.prev, j.mu.lru.next = h, h
	return h
}

func (j *cookieJar) unlinkLocked(h *cookieHost) {
	h.prev.next, h.next.prev = h.next, h.prev
	h.prev, h.next = nil, nil
}

// dropLocked removes host entry h.
func (j *cookieJar) dropLocked(h *cookieHost) {
	j.unlinkLocked(h)
	delete(j.mu.hosts, h.name)
}

// storeLocked stores c in h, replacing the cookie of its name and path;
// an expired c deletes it. Past maxCookiesPerHost or maxCookieHostBytes,
// the expired cookies and then the least recently used others go.
func (j *cookieJar) storeLocked(h *cookieHost, c jarCookie, https bool, now time.Time) {
	expired := !c.expires.IsZero() && !c.expires.After(now)
	i := slices.IndexFunc(h.cookies, func(old jarCookie) bool { return old.name == c.name && old.path == c.path })
	switch {
	case i >= 0 && h.cookies[i].secure && !https:
		return // http may not touch a Secure cookie (RFC 6265bis section 5.6 step 16)
	case i >= 0:
		c.seq = h.cookies[i].seq
		h.remove(i)
	case expired:
	default:
		j.mu.seq++
		c.seq = j.mu.seq
	}
	if expired {
		j.dropIfEmptyLocked(h)
		return
	}
	c.used = now
	size := len(c.name) + len(c.value)
	if len(h.cookies) >= maxCookiesPerHost || h.bytes+size > maxCookieHostBytes {
		h.removeExpired(now)
	}
	for len(h.cookies) > 0 && (len(h.cookies) >= maxCookiesPerHost || h.bytes+size > maxCookieHostBytes) {
		lru := 0
		for k := range h.cookies {
			if h.cookies[k].used.Before(h.cookies[lru].used) {
				lru = k
			}
		}
		h.remove(lru)
	}
	h.cookies = append(h.cookies, c)
	h.bytes += size
}

// remove deletes the i-th cookie of h.
func (h *cookieHost) remove(i int) {
	h.bytes -= len(h.cookies[i].name) + len(h.cookies[i].value)
	h.cookies = slices.Delete(h.cookies, i, i+1)
}

func (j *cookieJar) dropIfEmptyLocked(h *cookieHost) {
	if len(h.cookies) == 0 {
		j.dropLocked(h)
	}
}

// removeExpired deletes the cookies of h expired at now.
func (h *cookieHost) removeExpired(now time.Time) {
	h.cookies = slices.DeleteFunc(h.cookies, func(c jarCookie) bool {
		if c.expires.IsZero() || c.expires.After(now) {
			return false
		}
		h.bytes -= len(c.name) + len(c.value)
		return true
	})
}

// appendHeader appends to dst the value of the Cookie header of a request
// to host over https or not for URL path reqPath: "a=1; b=2", the cookies
// with longer paths first, then the older (RFC 6265 section 5.4); it
// appends nothing if no cookie applies. Expired cookies met are deleted.
func (j *cookieJar) appendHeader(dst []byte, host string, https bool, reqPath string, now time.Time) []byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	h := j.mu.hosts[host]
	if h == nil {
		return dst
	}
	h.removeExpired(now)
	if len(h.cookies) == 0 {
		j.dropLocked(h)
		return dst
	}
	j.hostLocked(host, false) // most recently used
	var order [maxCookiesPerHost]uint8
	n := 0
	for i := range h.cookies {
		c := &h.cookies[i]
		if (c.secure && !https) || !cookiePathMatch(reqPath, c.path) {
			continue
		}
		c.used = now
		// Insertion sort: longer paths first, then earlier creation.
		k := n
		for k > 0 && cookieBefore(c, &h.cookies[order[k-1]]) {
			order[k] = order[k-1]
			k--
		}
		order[k] = uint8(i)
		n++
	}
	for k, i := range order[:n] {
		if k > 0 {
			dst = append(dst, "; "...)
		}
		c := &h.cookies[i]
		dst = append(dst, c.name...)
		dst = append(dst, '=')
		dst = append(dst, c.value...)
	}
	return dst
}

// cookieBefore reports whether a goes before b in a Cookie header.
func cookieBefore(a, b *jarCookie) bool {
	if len(a.path) != len(b.path) {
		return len(a.path) > len(b.path)
	}
	return a.seq < b.seq
}

// cookiePathMatch is RFC 6265 section 5.1.4's path-match.
func cookiePathMatch(reqPath, cookiePath string) bool {
	if !strings.HasPrefix(reqPath, cookiePath) {
		return false
	}
	return len(reqPath) == len(cookiePath) || cookiePath[len(cookiePath)-1] == '/' || reqPath[len(cookiePath)] == '/'
}

// defaultCookiePath is RFC 6265 section 5.1.4's default-path of a request
// path: its directory, without the last '/'.
func defaultCookiePath(reqPath string) string {
	i := strings.LastIndexByte(reqPath, '/')
	if i <= 0 || reqPath[0] != '/' {
		return "/"
	}
	return reqPath[:i]
}

// cookiePathOf returns the path of a URL, "/" if it has none.
func cookiePathOf(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return "/"
	}
	rest := u[i+3:]
	j := strings.IndexAny(rest, "/?#")
	if j < 0 || rest[j] != '/' {
		return "/"
	}
	p := rest[j:]
	if k := strings.IndexAny(p, "?#"); k >= 0 {
		p = p[:k]
	}
	return p
}

// len reports the hosts in the jar (tests).
func (j *cookieJar) len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.mu.hosts)
}

// withCookies returns hdr with the Cookie header of the jar's cookies for
// url, noted in the exchange for the WARC request record; hdr itself if
// no cookie applies. The header is new for each request, as the transport
// may still read a request's header after the request has ended.
func (w *worker) withCookies(hdr http.Header, url string) http.Header {
	v := w.f.jar.appendHeader(w.buf[:0], urlnorm.Host(url), strings.HasPrefix(url, "https:"), cookiePathOf(url), time.Now())
	w.buf = v[:0]
	if len(v) == 0 {
		return hdr
	}
	w.ex.cookie = string(v)
	h := make(http.Header, len(hdr)+1)
	for k, vs := range hdr {
		h[k] = vs
	}
	h["Cookie"] = []string{w.ex.cookie}
	return h
}

// keepCookies stores in the jar the cookies the response to url set.
func (w *worker) keepCookies(url string, now time.Time) {
	if lines := w.ex.header["Set-Cookie"]; len(lines) > 0 {
		w.f.jar.setCookies(urlnorm.Host(url), strings.HasPrefix(url, "https:"), cookiePathOf(url), lines, now)
	}
}

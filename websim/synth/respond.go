package synth

import (
	"strconv"
	"strings"
	"time"
)

// Special marks responses that the server must stream or withhold rather
// than send as a body.
type Special uint8

// The special responses of the hostile profile.
const (
	SpecialNone      Special = iota
	SpecialDrip              // send Body a few bytes at a time, slowly
	SpecialHuge              // send HugeBytes bytes of filler
	SpecialBomb              // send BombBody() with Content-Encoding: gzip
	SpecialBlackhole         // read the request, never answer
)

// HugeBytes is the length of /huge.html on a RoleHuge host.
const HugeBytes = 1 << 30

// Response is what websim answers to one request.
type Response struct {
	Status      int
	ContentType string
	Location    string // absolute, for redirects
	Body        []byte // appended to the caller's buffer
	Special     Special
	Kind        Kind
	// Scratch is the link scratch space after use, to pass to the next call.
	Scratch []Link
	// ETag is the response's strong entity tag, quoted, and LastModified
	// the simulated time its content last changed (the epoch if it never
	// did), for the 200 answers of a web with Options.Changes that carry
	// validators: pages (and their print, session and /index.html
	// variants) and news pages. Empty and zero otherwise.
	ETag         string
	LastModified time.Time
}

// maxPathLen bounds the paths the web answers (the deep trap ends there).
const maxPathLen = 4096

// Respond appends the response to a GET of path?query on host h to buf (the
// response's Body aliases it). scratch is reused for link lists. It is
// RespondAt at the epoch: the web as it is without Options.Changes.
func (w *Web) Respond(buf []byte, scratch []Link, h int, path, query string) Response {
	return w.RespondAt(buf, scratch, h, path, query, w.opt.Epoch)
}

// RespondAt is Respond at simulated time t: with Options.Changes, pages are
// at their version at t (PageState) and carry validators, news pages exist
// from their version on, and the sitemap gives each page's last change.
// Without Options.Changes, t does not matter.
func (w *Web) RespondAt(buf []byte, scratch []Link, h int, path, query string, t time.Time) Response {
	host := &w.hosts[h]
	html := w.htmlType(h)
	page := func(n int, private bool) Response {
		var (
			v    int
			last time.Time
		)
		changing := !private && w.changes(h, n)
		if changing {
			v, last = w.PageState(h, n, t)
		}
		body, links := w.renderPage(buf, h, n, private, scratch, v, last)
		resp := Response{Status: 200, ContentType: html, Body: body, Kind: KindPage, Scratch: links}
		if changing {
			resp.ETag, resp.LastModified = w.ETag(h, n, v), last
		}
		if private {
			resp.Kind = KindPrivate
		}
		if host.Role == RoleDrip && n != 0 {
			resp.Special = SpecialDrip
		}
		return resp
	}
	notFound := Response{Status: 404, ContentType: "text/html; charset=utf-8", Body: renderLeaf(buf, "404 not found"), Kind: KindMissing}
	if host.Role == RoleBlackhole {
		return Response{Special: SpecialBlackhole, Kind: KindTrap}
	}
	if len(path) > maxPathLen {
		return notFound
	}
	realistic := w.opt.Profile != Clean
	switch {
	case path == "/":
		return page(0, false)
	case path == "/robots.txt":
		body, status := w.renderRobots(buf, h)
		return Response{Status: status, ContentType: "text/plain; charset=utf-8", Body: body, Kind: KindRobots}
	case path == "/sitemap.xml" && host.Sitemap:
		return Response{Status: 200, ContentType: "application/xml", Body: w.renderSitemap(buf, h, t), Kind: KindSitemap}
	case path == "/index.html" && realistic:
		r := page(0, false)
		r.Kind = KindIndex
		return r
	}
	dir, rest, ok := strings.Cut(path[1:], "/")
	if !ok {
		return w.respondRole(buf, h, path, notFound)
	}
	num := func(suffix string) (int, bool) {
		s, ok := strings.CutSuffix(rest, suffix)
		if !ok || s == "" || len(s) > 9 || (s[0] == '0' && len(s) > 1) {
			return 0, false
		}
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0
	}
	leafNum := func(suffix string) (int, bool) {
		n, ok := num(suffix)
		return n, ok && realistic && n < host.Pages
	}
	switch dir {
	case "p":
		if n, ok := num(".html"); ok && n >= 1 && n < host.Pages+host.Orphans {
			r := page(n, false)
			if query == "view=print" {
				r.Kind = KindPrint
			}
			return r
		}
	case "private":
		if n, ok := leafNum(".html"); ok {
			return page(n, true)
		}
	case "nf":
		if n, ok := leafNum(".html"); ok {
			return Response{Status: 200, ContentType: html, Body: renderLeaf(buf, "nofollow "+strconv.Itoa(n)), Kind: KindNofollow}
		}
	case "r", "t":
		if n, ok := leafNum(""); ok && n >= 1 {
			status := 301
			if dir == "t" {
				status = 302
			}
			return Response{Status: status, ContentType: "text/html; charset=utf-8", Location: w.Origin(h) + pagePath(n), Body: renderLeaf(buf, "moved"), Kind: KindRedirect}
		}
	case "gone":
		if n, ok := leafNum(""); ok {
			return Response{Status: 410, ContentType: "text/html; charset=utf-8", Body: renderLeaf(buf, "410 gone "+strconv.Itoa(n)), Kind: KindGone}
		}
	case "missing":
		if _, ok := leafNum(""); ok {
			return notFound
		}
	case "err":
		if n, ok := leafNum(""); ok {
			return Response{Status: 500, ContentType: "text/html; charset=utf-8", Body: renderLeaf(buf, "500 internal error "+strconv.Itoa(n)), Kind: KindError}
		}
	case "files":
		if n, ok := leafNum(".pdf"); ok {
			return Response{Status: 200, ContentType: "application/pdf", Body: w.renderPDF(buf, h, n), Kind: KindPDF}
		}
	case "img":
		if n, ok := leafNum(".png"); ok {
			return Response{Status: 200, ContentType: "image/png", Body: w.renderPNG(buf, h, n), Kind: KindPNG}
		}
	case "news":
		if resp, ok := w.respondNews(buf, h, rest, t); ok {
			return resp
		}
	case "print", "mirror":
		if resp, ok := w.respondCopy(buf, scratch, h, dir, rest, t); ok {
			return resp
		}
	case "loop":
		if host.Loop && (rest == "a" || rest == "b") {
			to := "/loop/b"
			if rest == "b" {
				to = "/loop/a"
			}
			return Response{Status: 302, ContentType: "text/html; charset=utf-8", Location: w.Origin(h) + to, Body: renderLeaf(buf, "loop"), Kind: KindLoop}
		}
	}
	return w.respondRole(buf, h, path, notFound)
}

// htmlType is the Content-Type of host h's HTML pages.
func (w *Web) htmlType(h int) string {
	host := &w.hosts[h]
	if host.CharsetHdr || host.Charset == UTF8 {
		return "text/html; charset=" + host.Charset.String()
	}
	return "text/html"
}

// respondNews answers /news/N/V (rest is "N/V"): a leaf that exists from
// version V of page N on, with a link back to the page.
func (w *Web) respondNews(buf []byte, h int, rest string, t time.Time) (Response, bool) {
	ns, vs, ok := strings.Cut(rest, "/")
	if !ok {
		return Response{}, false
	}
	n, ok1 := canonicalInt(ns)
	v, ok2 := canonicalInt(vs)
	if !ok1 || !ok2 || v < 1 || !w.changes(h, n) || w.Version(h, n, t) < v {
		return Response{}, false
	}
	since, ok := w.ChangeTime(h, n, v)
	if !ok {
		return Response{}, false
	}
	dst := append(buf, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>news "...)
	dst = append(dst, rest...)
	dst = append(dst, "</title></head><body><p>news "...)
	dst = append(dst, rest...)
	dst = append(dst, " of "...)
	dst = append(dst, w.hosts[h].Name...)
	dst = append(dst, ", "...)
	dst = since.AppendFormat(dst, time.RFC3339)
	dst = append(dst, ": <a href=\""...)
	dst = append(dst, pagePath(n)...)
	dst = append(dst, "\">page "...)
	dst = append(dst, ns...)
	dst = append(dst, "</a></p></body></html>\n"...)
	return Response{Status: 200, ContentType: "text/html; charset=utf-8", Body: dst, Kind: KindNews,
		ETag: w.newsETag(h, n, v), LastModified: since}, true
}

// respondRole answers the paths of a hostile role host.
func (w *Web) respondRole(buf []byte, h int, path string, notFound Response) Response {
	host := &w.hosts[h]
	origin := w.Origin(h)
	switch host.Role {
	case RoleCalendar:
		var y, m int
		if n, _ := parseCal(path, &y, &m); n == 2 {
			prevY, prevM, nextY, nextM := y, m-1, y, m+1
			if prevM == 0 {
				prevY, prevM = y-1, 12
			}
			if nextM == 13 {
				nextY, nextM = y+1, 1
			}
			body := renderLinkList(buf, "calendar "+strconv.Itoa(y)+"/"+strconv.Itoa(m), func(emit func(string)) {
				if prevY >= 1 {
					emit(origin + calPath(prevY, prevM))
				}
				if nextY <= 9999 {
					emit(origin + calPath(nextY, nextM))
				}
			})
			return Response{Status: 200, ContentType: "text/html; charset=utf-8", Body: body, Kind: KindTrap}
		}
	case RoleDeep:
		if rest, ok := strings.CutPrefix(path, "/deep/"); ok && validDeep(rest) {
			body := renderLinkList(buf, "deep", func(emit func(string)) {
				emit(origin + path + "a/")
				emit(origin + path + "b/")
			})
			return Response{Status: 200, ContentType: "text/html; charset=utf-8", Body: body, Kind: KindTrap}
		}
	case RoleManyLinks:
		if path == "/many.html" {
			body := renderLinkList(buf, "many links", func(emit func(string)) {
				for i := range manyLinks {
					emit(origin + "/x/" + strconv.Itoa(i))
				}
			})
			return Response{Status: 200, ContentType: "text/html; charset=utf-8", Body: body, Kind: KindTrap}
		}
		if rest, ok := strings.CutPrefix(path, "/x/"); ok {
			if n, err := strconv.Atoi(rest); err == nil && n >= 0 && n < manyLinks && strconv.Itoa(n) == rest {
				return Response{Status: 200, ContentType: "text/html; charset=utf-8", Body: renderLeaf(buf, "leaf "+rest), Kind: KindLeaf}
			}
		}
	case RoleDrip:
		if path == "/drip.html" {
			return Response{Status: 200, ContentType: "text/html; charset=utf-8", Body: renderLeaf(buf, "drip"), Special: SpecialDrip, Kind: KindTrap}
		}
	case RoleHuge:
		if path == "/huge.html" {
			return Response{Status: 200, ContentType: "text/html; charset=utf-8", Special: SpecialHuge, Kind: KindTrap}
		}
	case RoleBomb:
		if path == "/bomb.html" {
			return Response{Status: 200, ContentType: "text/html; charset=utf-8", Special: SpecialBomb, Kind: KindTrap}
		}
	case RoleWrongType:
		if rest, ok := strings.CutPrefix(path, "/wrong/"); ok {
			if n, ok := strings.CutSuffix(rest, ".html"); ok {
				if k, err := strconv.Atoi(n); err == nil && k >= 0 && k < host.Pages && strconv.Itoa(k) == n {
					body, _ := w.renderPage(buf, h, k, false, nil, 0, time.Time{})
					return Response{Status: 200, ContentType: "image/jpeg", Body: body, Kind: KindWrong}
				}
			}
		}
		if path == "/data.bin" {
			return Response{Status: 200, ContentType: "text/html; charset=utf-8", Body: binary(buf, hash3(w.opt.Seed, tagLeaf+2, uint64(h), 0), 16<<10), Kind: KindBinary}
		}
	case RoleChain:
		if rest, ok := strings.CutPrefix(path, "/chain/"); ok {
			if n, err := strconv.Atoi(rest); err == nil && n >= 0 && n < chainHops && strconv.Itoa(n) == rest {
				to := origin + "/chain/" + strconv.Itoa(n+1)
				if n == chainHops-1 {
					to = origin + "/"
				}
				return Response{Status: 302, ContentType: "text/html; charset=utf-8", Location: to, Body: renderLeaf(buf, "chain"), Kind: KindChain}
			}
		}
	}
	return notFound
}

func calPath(y, m int) string {
	return "/cal/" + strconv.Itoa(y) + "/" + strconv.Itoa(m)
}

// parseCal parses /cal/Y/M with 1 ≤ Y ≤ 9999 and 1 ≤ M ≤ 12; it returns 2 on success.
func parseCal(path string, y, m *int) (int, error) {
	rest, ok := strings.CutPrefix(path, "/cal/")
	if !ok {
		return 0, nil
	}
	ys, ms, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, nil
	}
	yv, err1 := strconv.Atoi(ys)
	mv, err2 := strconv.Atoi(ms)
	if err1 != nil || err2 != nil || yv < 1 || yv > 9999 || mv < 1 || mv > 12 || strconv.Itoa(yv) != ys || strconv.Itoa(mv) != ms {
		return 0, nil
	}
	*y, *m = yv, mv
	return 2, nil
}

// validDeep reports whether rest is a non-empty run of "a/" and "b/" segments.
func validDeep(rest string) bool {
	if rest == "" || len(rest)%2 != 0 {
		return false
	}
	for i := 0; i < len(rest); i += 2 {
		if (rest[i] != 'a' && rest[i] != 'b') || rest[i+1] != '/' {
			return false
		}
	}
	return true
}

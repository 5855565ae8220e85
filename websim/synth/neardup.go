package synth

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Near-duplicates. In the realistic profile, about NearDupShare of the
// pages of the link trees (front pages and orphans excepted) have a
// printer-friendly copy at /print/N.html on their own host, and half of
// those also a copy on another host, their host's mirror:
// /mirror/HOST/N.html, where HOST is the original's host name. A copy has
// the original's text and links (written so that they name the same URLs),
// other navigation, and a footer with a date and, for the printer-friendly
// copy, a session id: what printer-friendly views, session-id URLs and
// mirrors of the real web differ in. The original links its copies at its
// end; a copy links back to the original. The truth names a copy's
// original in Record.NearDupOf.
//
// The clean and hostile profiles have no near-duplicates: their link
// graphs are pinned (TestCleanAndHostileGraphsUnchanged).
const (
	// NearDupShare is the share of a realistic web's tree pages that have
	// near-duplicate copies.
	NearDupShare = 0.03
	// mirrorShare is the share of those whose copies include a mirror.
	mirrorShare = 0.5
)

// hash tags of near-duplicates.
const (
	tagNearDup = 300 + iota
	tagMirror
)

// copyKind is what renderDoc writes: a page, or a copy of one.
type copyKind uint8

const (
	copyNone   copyKind = iota
	copyPrint           // /print/N.html
	copyMirror          // /mirror/HOST/N.html on the mirror host
)

// makeMirrors picks each host's mirror host (realistic webs of two hosts
// or more) and the inverse lists.
func (w *Web) makeMirrors() {
	nh := len(w.hosts)
	if w.opt.Profile != Realistic || nh < 2 {
		return
	}
	w.mirrorOf = make([]int32, nh)
	w.mirrored = make([][]int32, nh)
	for h := range w.hosts {
		m := int(hash3(w.opt.Seed, tagMirror, uint64(h), 0) % uint64(nh-1))
		if m >= h {
			m++ // any host but h
		}
		w.mirrorOf[h] = int32(m)
		w.mirrored[m] = append(w.mirrored[m], int32(h))
	}
}

// nearDups reports whether page n of host h has a printer-friendly copy,
// and the host of its mirror copy (-1 for none).
func (w *Web) nearDups(h, n int) (print bool, mirror int) {
	if w.opt.Profile != Realistic || n < 1 || n >= w.hosts[h].Pages || w.hosts[h].Role != RoleNone {
		return false, -1
	}
	r := newRNG(hash3(w.opt.Seed, tagNearDup, uint64(h), uint64(n)))
	if !r.chance(NearDupShare) {
		return false, -1
	}
	if w.mirrorOf != nil && r.chance(mirrorShare) {
		return true, int(w.mirrorOf[h])
	}
	return true, -1
}

// appendNearDupLinks appends the links page n of host h has to its copies.
func (w *Web) appendNearDupLinks(dst []Link, h, n int) []Link {
	print, mirror := w.nearDups(h, n)
	if !print {
		return dst
	}
	dst = append(dst, Link{host: int32(h), src: int32(h), n: int32(n), kind: KindNearDup, form: formRoot, sid: -1, frag: -1})
	if mirror >= 0 {
		dst = append(dst, Link{host: int32(mirror), src: int32(h), n: int32(n), kind: KindNearDup, form: formAbs, sid: -1, frag: -1, alt: true})
	}
	return dst
}

// nearDupTail returns how many links at the end of links lead to copies.
func nearDupTail(links []Link) int {
	k := 0
	for k < len(links) && links[len(links)-1-k].kind == KindNearDup {
		k++
	}
	return k
}

// nearDupPath returns the path of the copy of page n of host src that host
// h serves: /print/N.html on src itself, /mirror/SRC/N.html on its mirror.
func (w *Web) nearDupPath(h, src, n int) string {
	if h == src {
		return "/print/" + strconv.Itoa(n) + ".html"
	}
	return "/mirror/" + w.hosts[src].Name + "/" + strconv.Itoa(n) + ".html"
}

// copyLinks appends the links of the copy of page n of host src that host
// h serves, in document order: its navigation, then the original's links
// without those to its copies, in forms that name the same URLs from the
// copy (every one absolute on a mirror).
func (w *Web) copyLinks(dst []Link, h, src, n int) (links []Link, nav int) {
	start := len(dst)
	if h == src {
		dst = append(dst, Link{host: int32(src), n: int32(n), kind: KindPage, form: formRoot, sid: -1, frag: -1})
	} else {
		dst = append(dst,
			Link{host: int32(h), kind: KindPage, form: formAbs, sid: -1, frag: -1},
			Link{host: int32(src), n: int32(n), kind: KindPage, form: formAbs, sid: -1, frag: -1})
	}
	nav = len(dst) - start
	dst = w.pageLinks(dst, src, n, false)
	dst = dst[:len(dst)-nearDupTail(dst[start+nav:])]
	if h != src {
		for i := start + nav; i < len(dst); i++ {
			dst[i].form = formAbs
		}
	}
	return dst, nav
}

// copyDir returns the directory the relative links of a copy resolve against.
func (w *Web) copyDir(h, src, n int) string {
	if h != src {
		return "/" // unused: a mirror's links are absolute
	}
	if w.hosts[src].Base {
		return w.pageDir(src, n, false)
	}
	return "/print/"
}

// copyDate returns the date a copy of page n of host src shows.
func (w *Web) copyDate(h, src, n int) time.Time {
	days := hash3(w.opt.Seed, tagNearDup+100, uint64(h)<<32|uint64(src), uint64(n)) % 365
	return w.opt.Epoch.AddDate(0, 0, -int(days))
}

// renderCopy appends the copy of page n of host src that host h serves at
// version v, which began at last (version 0: the static page).
func (w *Web) renderCopy(dst []byte, h, src, n int, scratch []Link, v int, last time.Time) ([]byte, []Link) {
	links, nav := w.copyLinks(scratch[:0], h, src, n)
	ck := copyPrint
	if h != src {
		ck = copyMirror
	}
	dst = w.renderDoc(dst, src, n, false, ck, h, links[:nav], links[nav:], nil, v, last)
	return dst, links
}

// respondCopy answers /print/N.html (dir "print", rest "N.html") and
// /mirror/HOST/N.html (dir "mirror", rest "HOST/N.html") on host h.
func (w *Web) respondCopy(buf []byte, scratch []Link, h int, dir, rest string, t time.Time) (Response, bool) {
	src := h
	if dir == "mirror" {
		name, file, ok := strings.Cut(rest, "/")
		if !ok {
			return Response{}, false
		}
		if src, ok = w.Lookup(name); !ok || name != w.hosts[src].Name || w.mirrorOf == nil || int(w.mirrorOf[src]) != h {
			return Response{}, false
		}
		rest = file
	}
	s, ok := strings.CutSuffix(rest, ".html")
	if !ok {
		return Response{}, false
	}
	n, ok := canonicalInt(s)
	if !ok {
		return Response{}, false
	}
	print, mirror := w.nearDups(src, n)
	if !print || (h != src && mirror != h) {
		return Response{}, false
	}
	var (
		v    int
		last time.Time
	)
	if w.changes(src, n) {
		v, last = w.PageState(src, n, t)
	}
	body, links := w.renderCopy(buf, h, src, n, scratch, v, last)
	return Response{Status: 200, ContentType: w.htmlType(src), Body: body, Kind: KindNearDup, Scratch: links}, true
}

// copyOutlinks resolves the links of the copy of page n of host src that
// host h serves at pageURL.
func (w *Web) copyOutlinks(h, src, n int, pageURL string) []string {
	base, _ := url.Parse(pageURL)
	if h == src && w.hosts[src].Base {
		base, _ = url.Parse(w.Origin(src) + "/p/")
	}
	links, _ := w.copyLinks(nil, h, src, n)
	dir := w.copyDir(h, src, n)
	var (
		out []string
		b   []byte
	)
	for _, l := range links {
		b = w.href(b[:0], l, dir)
		ref, err := url.Parse(string(b))
		if err != nil {
			panic("synth: unparsable href " + string(b))
		}
		out = append(out, base.ResolveReference(ref).String())
	}
	return out
}

// mirrorTruth emits the records of the mirror copies host m serves, after
// its other records: by original host, then page.
func (w *Web) mirrorTruth(m int, bits []uint64, emit func(u, canonical, path, query string) error, reset func(Kind, int, bool), rec *Record) error {
	if w.mirrored == nil {
		return nil
	}
	origin := w.Origin(m)
	for _, s := range w.mirrored[m] {
		src := int(s)
		for n := 1; n < w.hosts[src].Pages; n++ {
			if _, mirror := w.nearDups(src, n); mirror != m {
				continue
			}
			path := w.nearDupPath(m, src, n)
			reachable := w.reached(bits, src, n) && w.hosts[m].Role != RoleBlackhole && w.RobotsAllowed(m, path)
			reset(KindNearDup, -1, reachable)
			u := origin + path
			rec.NearDupOf = w.Origin(src) + pagePath(n)
			rec.Outlinks = append(rec.Outlinks, w.copyOutlinks(m, src, n, u)...)
			rec.ChangeRate = w.ChangeRate(src, n)
			if err := emit(u, u, path, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

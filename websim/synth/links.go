package synth

import "strconv"

// Kind says what a URL of the web is.
type Kind uint8

// URL kinds. Pages carry links; the others are leaves.
const (
	KindPage     Kind = iota // /p/N.html (N = 0 is the front page, /)
	KindPrivate              // /private/N.html, disallowed by robots.txt
	KindNofollow             // /nf/N.html, linked only with rel=nofollow
	KindRedirect             // /r/N (301) and /t/N (302) to /p/N.html
	KindGone                 // /gone/N: 410
	KindMissing              // /missing/N: 404
	KindError                // /err/N: 500
	KindPDF                  // /files/N.pdf
	KindPNG                  // /img/N.png
	KindPrint                // /p/N.html?view=print: the same content as the page
	KindIndex                // /index.html: the same content as /
	KindLoop                 // /loop/a and /loop/b redirect to each other
	KindLeaf                 // /x/N: a small page without links
	KindTrap                 // a hostile role's entry URL
	KindWrong                // /wrong/N.html: HTML served as image/jpeg
	KindBinary               // /data.bin: binary served as text/html
	KindChain                // /chain/N: one hop of a redirect chain
	KindMailto               // a mailto: link
	KindSelf                 // a fragment-only link to the page itself
	KindRobots               // /robots.txt
	KindSitemap              // /sitemap.xml and /sitemap-missing.xml
	KindNews                 // /news/N/V: linked from version V of page N (Options.Changes)
	KindNearDup              // /print/N.html and /mirror/HOST/N.html: near-duplicates of /p/N.html (neardup.go)
)

var kindNames = [...]string{"page", "private", "nofollow", "redirect", "gone", "missing", "error", "pdf", "png", "print", "index", "loop", "leaf", "trap", "wrong-type", "binary", "chain", "mailto", "self", "robots", "sitemap", "news", "near-dup"}

// String names the kind, as in the truth file.
func (k Kind) String() string { return kindNames[k] }

// form is how an href is written.
type form uint8

const (
	formAbs      form = iota // http://host/p/1.html
	formRoot                 // /p/1.html
	formRel                  // 1.html or p/1.html, relative to the base
	formProtoRel             // //host/p/1.html
	formDots                 // /x/../p/1.html
	formUpper                // HTTP://HOST/p/1.html
	formPort                 // http://host:80/p/1.html (default port written out)
)

// Link is one <a> of a page, in structured form. Its fields are internal;
// callers only hand slices of it back to Respond as scratch space.
type Link struct {
	host     int32
	n        int32 // page or leaf number
	kind     Kind
	form     form
	sid      int8 // session id number, -1 for none
	frag     int8 // fragment number, -1 for none
	nofollow bool
	alt      bool  // KindRedirect: 302 (/t/) instead of 301; KindLoop: /loop/b; KindNearDup: the mirror copy
	src      int32 // KindNearDup: the host of the original page
}

const (
	treeFanout  = 8    // children per page in a host's link tree
	meanExtra   = 39.0 // mean random links per page, on top of the tree
	degreeShape = 2.2  // Pareto shape of the out-degree
	maxDegree   = 1000
	// remoteShare is the share of a page's further links (those beyond its
	// tree) that leave its host: 0.15, so that with the tree links 85% of
	// all links stay on their host, between the two figures found for that
	// share: 79.1% of links within a host (83.9% within a domain) in the
	// largest crawl of Kamvar, Haveliwala, Manning and Golub ("Exploiting
	// the block structure of the web for computing PageRank", Stanford
	// technical report 2003: "the vast majority of hyperlinks link pages on
	// a host to other pages on the same host"; the two figures are from
	// memory of their table, the copy checked held only the abstract's
	// words), and about 91% in a crawler
	// of today (Babbar, 3.5 billion pages a day: internal links "outnumber
	// external links by a factor of 10"; "Links, internal links and the web
	// graph hell from a crawler perspective", yourtext.guru). Randall,
	// Stata, Wickremesinghe and Wiener's Link Database (DCC 2002) is built
	// on the same fact: "most hyperlinks on most Web pages point to other
	// pages on the same host". All profiles share it.
	remoteShare = 0.15
	manyLinks   = 10_000
	chainHops   = 30
)

// pagePath returns the path of page n: / or /p/N.html.
func pagePath(n int) string {
	if n == 0 {
		return "/"
	}
	return "/p/" + strconv.Itoa(n) + ".html"
}

// path returns the path and query of the link's target.
func (w *Web) path(l Link) string {
	n := int(l.n)
	s := strconv.Itoa(n)
	switch l.kind {
	case KindPage:
		p := pagePath(n)
		if l.sid >= 0 {
			h := &w.hosts[l.host]
			p += "?" + h.SessionKey + "=" + w.sessionID(int(l.host), int(l.sid))
		}
		return p
	case KindPrivate:
		return "/private/" + s + ".html"
	case KindNofollow:
		return "/nf/" + s + ".html"
	case KindRedirect:
		if l.alt {
			return "/t/" + s
		}
		return "/r/" + s
	case KindGone:
		return "/gone/" + s
	case KindMissing:
		return "/missing/" + s
	case KindError:
		return "/err/" + s
	case KindPDF:
		return "/files/" + s + ".pdf"
	case KindPNG:
		return "/img/" + s + ".png"
	case KindPrint:
		return pagePath(n) + "?view=print"
	case KindIndex:
		return "/index.html"
	case KindLoop:
		if l.alt {
			return "/loop/b"
		}
		return "/loop/a"
	case KindLeaf:
		return "/x/" + s
	case KindTrap:
		return trapEntry(w.hosts[l.host].Role)
	case KindWrong:
		return "/wrong/" + s + ".html"
	case KindBinary:
		return "/data.bin"
	case KindChain:
		return "/chain/" + s
	case KindRobots:
		return "/robots.txt"
	case KindSitemap:
		if l.alt {
			return "/sitemap-missing.xml"
		}
		return "/sitemap.xml"
	case KindNearDup:
		return w.nearDupPath(int(l.host), int(l.src), n)
	}
	return "/"
}

// trapEntry is the URL path a hostile role host's front page links to.
func trapEntry(r Role) string {
	switch r {
	case RoleCalendar:
		return "/cal/2026/11"
	case RoleDeep:
		return "/deep/a/"
	case RoleManyLinks:
		return "/many.html"
	case RoleDrip:
		return "/drip.html"
	case RoleHuge:
		return "/huge.html"
	case RoleBomb:
		return "/bomb.html"
	case RoleWrongType:
		return "/wrong/1.html"
	case RoleBroken:
		return "/p/1.html"
	case RoleBlackhole:
		return "/"
	case RoleChain:
		return "/chain/0"
	}
	return "/"
}

// URL returns the normalised absolute URL of the link's target (lower-case
// host, no default port, no fragment; session ids kept).
func (w *Web) url(l Link) string {
	if l.kind == KindMailto {
		return "mailto:webmaster@" + w.hosts[l.host].Name
	}
	return w.Origin(int(l.host)) + w.path(l)
}

// pageDir returns the directory that relative links of page (h, n, private) resolve against.
func (w *Web) pageDir(h int, n int, private bool) string {
	if w.hosts[h].Base {
		return "/p/"
	}
	if private {
		return "/private/"
	}
	if n == 0 {
		return "/"
	}
	return "/p/"
}

// href writes the link as the page's HTML carries it.
func (w *Web) href(b []byte, l Link, dir string) []byte {
	th := &w.hosts[l.host]
	switch l.kind {
	case KindMailto:
		return append(b, "mailto:webmaster@"+th.Name...)
	case KindSelf:
		return append(b, "#top"...)
	}
	p := w.path(l)
	switch l.form {
	case formAbs:
		b = append(b, "http://"...)
		b = append(b, th.Name...)
		b = append(b, w.portSfx...)
	case formProtoRel:
		b = append(b, "//"...)
		b = append(b, th.Name...)
		b = append(b, w.portSfx...)
	case formUpper:
		b = append(b, "HTTP://"...)
		for i := 0; i < len(th.Name); i++ {
			c := th.Name[i]
			if c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			b = append(b, c)
		}
		b = append(b, w.portSfx...)
	case formPort:
		b = append(b, "http://"...)
		b = append(b, th.Name...)
		b = append(b, ":80"...)
	case formDots:
		b = append(b, "/x/.."...)
	case formRel:
		switch {
		case len(p) > len(dir) && p[:len(dir)] == dir:
			p = p[len(dir):]
		case dir != "/":
			b = append(b, "../"...)
			p = p[1:]
		}
	}
	b = append(b, p...)
	if l.frag >= 0 {
		b = append(b, "#s"...)
		b = strconv.AppendInt(b, int64(l.frag), 10)
	}
	return b
}

// pageLinks appends the links of page n of host h (private: /private/N.html)
// to dst. It is deterministic and allocation-free apart from dst's growth.
func (w *Web) pageLinks(dst []Link, h, n int, private bool) []Link {
	host := &w.hosts[h]
	realistic := w.opt.Profile != Clean
	tag := uint64(tagPage)
	if private {
		tag += 100
	}
	r := newRNG(hash3(w.opt.Seed, tag, uint64(h), uint64(n)))
	sid := int8(-1)
	if host.Session {
		sid = int8(n % 4)
	}
	local := func(kind Kind, m int) Link {
		l := Link{host: int32(h), n: int32(m), kind: kind, sid: -1, frag: -1, form: formRoot}
		if kind == KindPage && m != 0 {
			l.sid = sid
		}
		if !realistic {
			if r.chance(0.5) {
				l.form = formAbs
			}
			return l
		}
		switch u := r.float(); {
		case u < 0.35:
			l.form = formAbs
		case u < 0.60:
			l.form = formRoot
		case u < 0.80:
			if kind == KindPage || kind == KindPrint {
				l.form = formRel
			}
		case u < 0.87:
			l.form = formProtoRel
		case u < 0.93:
			l.form = formDots
		case u < 0.97:
			l.form = formUpper
		default:
			if w.opt.Port == 80 {
				l.form = formPort
			} else {
				l.form = formAbs
			}
		}
		if r.chance(0.05) {
			l.frag = int8(r.intn(10))
		}
		return l
	}
	if !private && n < host.Pages {
		for c := n*treeFanout + 1; c <= n*treeFanout+treeFanout && c < host.Pages; c++ {
			dst = append(dst, local(KindPage, c))
		}
	}
	if n == 0 && !private {
		if host.Role != RoleNone && host.Role != RoleBroken && host.Role != RoleBlackhole {
			l := local(KindTrap, 0)
			l.form, l.frag, l.sid = formRoot, -1, -1
			dst = append(dst, l)
			if host.Role == RoleWrongType {
				dst = append(dst, Link{host: int32(h), kind: KindBinary, sid: -1, frag: -1})
			}
		}
		if realistic {
			dst = append(dst, Link{host: int32(h), kind: KindMailto, sid: -1, frag: -1})
			if !host.Base { // with <base>, "#top" would name the base, not the page
				dst = append(dst, Link{host: int32(h), kind: KindSelf, sid: -1, frag: -1})
			}
			if host.Loop {
				dst = append(dst, local(KindLoop, 0))
			}
			if host.IndexDup {
				dst = append(dst, local(KindIndex, 0))
			}
		}
	}
	extra := min(int(r.pareto(meanExtra, degreeShape)), maxDegree)
	nh := len(w.hosts)
	webShaped := w.opt.Profile == Realistic // see webgraph.go
	for range extra {
		if nh > 1 && r.chance(remoteShare) {
			var t, m int
			if webShaped {
				t, m = w.webRemote(&r, h)
			} else {
				t = r.zipf(nh)
				if t == h {
					t = (t + 1) % nh
				}
				if r.chance(0.4) {
					m = skewed(&r, w.hosts[t].Pages)
				}
			}
			l := Link{host: int32(t), n: int32(m), kind: KindPage, sid: -1, frag: -1, form: formAbs}
			if realistic && r.chance(0.2) {
				l.form = formProtoRel
			}
			dst = append(dst, l)
			continue
		}
		var m int
		if webShaped {
			m = w.webLocal(&r, h)
		} else {
			m = skewed(&r, host.Pages)
		}
		if !realistic {
			dst = append(dst, local(KindPage, m))
			continue
		}
		switch u := r.float(); {
		case u < 0.010:
			l := local(KindRedirect, max(m, 1))
			l.alt = r.chance(0.5)
			dst = append(dst, l)
		case u < 0.013:
			dst = append(dst, local(KindGone, m))
		case u < 0.017:
			dst = append(dst, local(KindMissing, m))
		case u < 0.019:
			dst = append(dst, local(KindError, m))
		case u < 0.032:
			dst = append(dst, local(KindPDF, m))
		case u < 0.040:
			dst = append(dst, local(KindPNG, m))
		case u < 0.050:
			dst = append(dst, local(KindPrint, max(m, 1)))
		case u < 0.065:
			dst = append(dst, local(KindPrivate, m))
		case u < 0.075:
			l := local(KindNofollow, m)
			l.nofollow = true
			dst = append(dst, l)
		default:
			dst = append(dst, local(KindPage, m))
		}
	}
	if webShaped && !private {
		dst = w.appendNearDupLinks(dst, h, n)
	}
	return dst
}

// skewed draws a page number in [0, n) that favours low numbers: P(m) ∝
// 1/sqrt(m), the on-host targets of the clean and hostile profiles.
func skewed(r *rng, n int) int {
	u := r.float()
	return int(float64(n) * u * u)
}

package synth

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Record is one line of the truth file: a URL the web serves and what a
// crawler should know about it.
type Record struct {
	URL           string   `json:"url"`       // normalised: lower-case host, no default port, no fragment
	Canonical     string   `json:"canonical"` // URL without its session id
	Host          string   `json:"host"`
	IP            string   `json:"ip"`
	Status        int      `json:"status"` // 0: never answered
	ContentType   string   `json:"content_type"`
	RobotsAllowed bool     `json:"robots_allowed"` // for user-agent *
	Depth         int      `json:"depth"`          // links from its host's front page, -1 if none lead there
	Outlinks      []string `json:"outlinks"`       // as linked, resolved to absolute; a redirect's target; a robots.txt's sitemaps; a sitemap's pages
	Kind          string   `json:"kind"`
	// Reachable: a crawler seeded with every host's front page that obeys
	// robots.txt, honours rel=nofollow, follows redirects, reads the sitemaps
	// named in robots.txt and parses only HTML would request this URL.
	Reachable   bool   `json:"reachable"`
	DuplicateOf string `json:"duplicate_of,omitempty"` // same content as this URL
	Role        string `json:"role,omitempty"`         // the host's hostile role
	FailFirst   int    `json:"fail_first,omitempty"`   // robots.txt: the first N requests get 503
	Trap        bool   `json:"trap,omitempty"`         // the entry of an unbounded or hostile region
	// NearDupOf is, for a near-duplicate copy of a page (kind "near-dup":
	// a printer-friendly view or a mirror, neardup.go), the URL of the
	// page: the same text and links, other boilerplate. Truth files
	// written before it existed have none.
	NearDupOf string `json:"near_dup_of,omitempty"`
	// ChangeRate is the page's change rate in changes per day (Web.ChangeRate),
	// for the URLs that serve a page (page, orphan, session, print, index
	// and near-dup records) of a web with Options.Changes; 0 (and absent from the
	// JSON) for pages that never change and for everything else. The truth
	// describes the web at the epoch: every page at version 0, no news pages.
	ChangeRate float64 `json:"change_rate,omitempty"`
}

// reach computes, over every page node of the web, which a polite crawler
// seeded with all front pages reaches (see Record.Reachable).
func (w *Web) reach() []uint64 {
	total := w.nodeBase[len(w.hosts)]
	bits := make([]uint64, (total+63)/64)
	type node struct{ h, n int32 }
	var queue []node
	mark := func(h, n int) {
		id := w.nodeBase[h] + n
		if bits[id/64]&(1<<(id%64)) == 0 {
			bits[id/64] |= 1 << (id % 64)
			queue = append(queue, node{int32(h), int32(n)})
		}
	}
	for h := range w.hosts {
		if w.hosts[h].Role == RoleBlackhole {
			continue
		}
		if w.RobotsAllowed(h, "/") {
			mark(h, 0)
		}
		for _, n := range w.sitemapPages(h) {
			if w.RobotsAllowed(h, pagePath(n)) {
				mark(h, n)
			}
		}
	}
	var links []Link
	for len(queue) > 0 {
		nd := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		h, n := int(nd.h), int(nd.n)
		if w.hosts[h].Role == RoleDrip && n != 0 {
			continue // drip pages never arrive within a sane timeout
		}
		links = w.pageLinks(links[:0], h, n, false)
		for _, l := range links {
			if t, m, ok := w.follow(l); ok {
				mark(t, m)
			}
		}
	}
	return bits
}

// follow returns the page node a polite crawler reaches through l, if any.
func (w *Web) follow(l Link) (h, n int, ok bool) {
	t := int(l.host)
	if l.nofollow || w.hosts[t].Role == RoleBlackhole || !w.RobotsAllowed(t, w.path(l)) {
		return 0, 0, false
	}
	switch l.kind {
	case KindPage, KindPrint:
		return t, int(l.n), true
	case KindIndex:
		return t, 0, true
	case KindRedirect:
		if w.RobotsAllowed(t, pagePath(int(l.n))) {
			return t, int(l.n), true
		}
	}
	return 0, 0, false
}

func (w *Web) reached(bits []uint64, h, n int) bool {
	id := w.nodeBase[h] + n
	return bits[id/64]&(1<<(id%64)) != 0
}

// WriteTruth writes the truth file: one JSON object per URL, host by host.
func (w *Web) WriteTruth(out io.Writer) error {
	bw := bufio.NewWriterSize(out, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	err := w.Truth(func(r *Record) error { return enc.Encode(r) })
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("synth: write truth: %w", err)
	}
	return nil
}

// Truth calls fn for every record of the truth file, in file order. The
// record is reused between calls.
func (w *Web) Truth(fn func(*Record) error) error {
	bits := w.reach()
	for h := range w.hosts {
		if err := w.hostTruth(h, bits, fn); err != nil {
			return err
		}
	}
	return w.farmTruth(fn) // the hostile profile's subdomain farm (farm.go)
}

// leafRec gathers what the pages of one host say about a URL that is not one
// of its page nodes.
type leafRec struct {
	l         Link
	depth     int
	reachable bool
}

func (w *Web) hostTruth(h int, bits []uint64, fn func(*Record) error) error {
	host := &w.hosts[h]
	origin := w.Origin(h)
	nPages := host.Pages + host.Orphans
	// Links of every page node, then of every private page.
	links := make([][]Link, nPages+host.Pages)
	for n := range nPages {
		links[n] = w.pageLinks(nil, h, n, false)
	}
	realistic := w.opt.Profile != Clean
	if realistic {
		for n := range host.Pages {
			links[nPages+n] = w.pageLinks(nil, h, n, true)
		}
	}
	// Depth: breadth-first over on-host links, from the front page.
	depth := make([]int32, len(links))
	for i := range depth {
		depth[i] = -1
	}
	depth[0] = 0
	queue := []int{0}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, l := range links[i] {
			if int(l.host) != h {
				continue
			}
			j := -1
			switch l.kind {
			case KindPage, KindPrint, KindRedirect:
				j = int(l.n)
			case KindIndex:
				j = 0
			case KindPrivate:
				j = nPages + int(l.n)
			}
			if j >= 0 && j < len(links) && depth[j] < 0 {
				depth[j] = depth[i] + 1
				queue = append(queue, j)
			}
		}
	}
	var (
		rec     Record
		buf     []byte
		scratch []Link
		hrefBuf []byte
	)
	emit := func(u, canonical, path, query string) error {
		resp := w.Respond(buf[:0], scratch, h, path, query)
		buf = resp.Body[:0]
		rec.URL, rec.Canonical = u, canonical
		rec.Host, rec.IP = host.Name, host.IP.String()
		rec.Status, rec.ContentType = resp.Status, resp.ContentType
		if resp.Special == SpecialBlackhole {
			rec.Status, rec.ContentType = 0, ""
		}
		rec.RobotsAllowed = path == "/robots.txt" || w.RobotsAllowed(h, pathQuery(path, query))
		rec.Role = host.Role.String()
		if resp.Location != "" {
			rec.Outlinks = append(rec.Outlinks[:0], resp.Location)
		}
		return fn(&rec)
	}
	reset := func(kind Kind, depth int, reachable bool) {
		rec = Record{Kind: kind.String(), Depth: depth, Reachable: reachable, Outlinks: rec.Outlinks[:0]}
	}
	// resolve turns the links of a page into absolute URLs as linked.
	resolve := func(base *url.URL, ls []Link, dir string) {
		for _, l := range ls {
			hrefBuf = w.href(hrefBuf[:0], l, dir)
			ref, err := url.Parse(string(hrefBuf))
			if err != nil {
				panic("synth: unparsable href " + string(hrefBuf))
			}
			rec.Outlinks = append(rec.Outlinks, base.ResolveReference(ref).String())
		}
	}
	// robots.txt and sitemaps.
	reset(KindRobots, -1, true)
	rec.Outlinks = append(rec.Outlinks, w.sitemaps(h)...)
	if host.Robots == RobotsFlaky {
		rec.FailFirst = RobotsFailures
	}
	if err := emit(origin+"/robots.txt", origin+"/robots.txt", "/robots.txt", ""); err != nil {
		return err
	}
	for i, s := range w.sitemaps(h) {
		reset(KindSitemap, -1, true)
		if i == 0 {
			for _, n := range w.sitemapPages(h) {
				rec.Outlinks = append(rec.Outlinks, origin+pagePath(n))
			}
		}
		path := strings.TrimPrefix(s, origin)
		if err := emit(s, s, path, ""); err != nil {
			return err
		}
	}
	// Page nodes and private pages, with the URLs their links name.
	leaves := map[string]*leafRec{}
	for i := range links {
		n, private := i, false
		if i >= nPages {
			n, private = i-nPages, true
		}
		path := pagePath(n)
		if private {
			path = "/private/" + strconv.Itoa(n) + ".html"
		}
		srcReach := !private && w.reached(bits, h, n)
		srcParsed := srcReach && !(host.Role == RoleDrip && n != 0)
		kind := KindPage
		if private {
			kind = KindPrivate
		}
		reset(kind, int(depth[i]), srcReach)
		if n >= host.Pages {
			rec.Kind = "orphan"
		}
		if !private {
			rec.ChangeRate = w.ChangeRate(h, n)
		}
		base, _ := url.Parse(origin + path)
		if host.Base {
			base, _ = url.Parse(origin + "/p/")
		}
		resolve(base, links[i], w.pageDir(h, n, private))
		if err := emit(origin+path, origin+path, path, ""); err != nil {
			return err
		}
		for _, l := range links[i] {
			if int(l.host) != h || l.kind == KindMailto || l.kind == KindSelf || (l.kind == KindPage && l.sid < 0) || l.kind == KindPrivate {
				continue
			}
			clean := l
			clean.form, clean.frag, clean.nofollow = formAbs, -1, false
			u := w.url(clean)
			lr := leaves[u]
			if lr == nil {
				lr = &leafRec{l: clean, depth: -1}
				leaves[u] = lr
			}
			if d := int(depth[i]); d >= 0 && (lr.depth < 0 || d+1 < lr.depth) {
				lr.depth = d + 1
			}
			if srcParsed && !l.nofollow && w.RobotsAllowed(h, w.path(clean)) {
				lr.reachable = true
			}
		}
	}
	keys := make([]string, 0, len(leaves))
	for k := range leaves {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, u := range keys {
		lr := leaves[u]
		l := lr.l
		path, query, _ := strings.Cut(w.path(l), "?")
		canonical := u
		reset(l.kind, lr.depth, lr.reachable)
		switch l.kind {
		case KindPage: // a session-id variant
			canonical = origin + pagePath(int(l.n))
			rec.Kind = "session"
			rec.Outlinks = append(rec.Outlinks, w.truthOutlinks(h, int(l.n), u)...)
			rec.ChangeRate = w.ChangeRate(h, int(l.n))
		case KindPrint:
			rec.DuplicateOf = origin + pagePath(int(l.n))
			rec.Outlinks = append(rec.Outlinks, w.truthOutlinks(h, int(l.n), u)...)
			rec.ChangeRate = w.ChangeRate(h, int(l.n))
		case KindIndex:
			rec.DuplicateOf = origin + "/"
			rec.Outlinks = append(rec.Outlinks, w.truthOutlinks(h, 0, u)...)
			rec.ChangeRate = w.ChangeRate(h, 0)
		case KindNearDup: // a printer-friendly copy; mirrors come below
			rec.NearDupOf = origin + pagePath(int(l.n))
			rec.Outlinks = append(rec.Outlinks, w.copyOutlinks(h, h, int(l.n), u)...)
			rec.ChangeRate = w.ChangeRate(h, int(l.n))
		case KindTrap:
			rec.Trap = true
			rec.Outlinks = append(rec.Outlinks, w.trapOutlinks(h, path)...)
		}
		if err := emit(u, canonical, path, query); err != nil {
			return err
		}
		if err := w.roleTruth(h, l, lr, emit, reset); err != nil {
			return err
		}
	}
	return w.mirrorTruth(h, bits, emit, reset, &rec)
}

// truthOutlinks resolves the links of page n of host h against pageURL, an
// address that serves it.
func (w *Web) truthOutlinks(h, n int, pageURL string) []string {
	origin := w.Origin(h)
	base, _ := url.Parse(pageURL)
	if w.hosts[h].Base {
		base, _ = url.Parse(origin + "/p/")
	}
	var out []string
	var b []byte
	for _, l := range w.pageLinks(nil, h, n, false) {
		b = w.href(b[:0], l, w.pageDir(h, n, false))
		ref, _ := url.Parse(string(b))
		out = append(out, base.ResolveReference(ref).String())
	}
	return out
}

// trapOutlinks lists the links of a hostile role's entry page.
func (w *Web) trapOutlinks(h int, path string) []string {
	origin := w.Origin(h)
	switch w.hosts[h].Role {
	case RoleCalendar:
		return []string{origin + "/cal/2026/10", origin + "/cal/2026/12"}
	case RoleDeep:
		return []string{origin + path + "a/", origin + path + "b/"}
	case RoleManyLinks:
		out := make([]string, manyLinks)
		for i := range out {
			out[i] = origin + "/x/" + strconv.Itoa(i)
		}
		return out
	}
	return nil
}

// roleTruth emits the finite regions behind a role's entry: the many-links
// leaves, the redirect chain and the wrong-type files.
func (w *Web) roleTruth(h int, l Link, lr *leafRec, emit func(u, canonical, path, query string) error, reset func(Kind, int, bool)) error {
	origin := w.Origin(h)
	at := func(k int) int {
		if lr.depth < 0 {
			return -1
		}
		return lr.depth + k
	}
	one := func(kind Kind, depth int, path string) error {
		reset(kind, depth, lr.reachable)
		return emit(origin+path, origin+path, path, "")
	}
	switch {
	case l.kind == KindTrap && w.hosts[h].Role == RoleManyLinks:
		for i := range manyLinks {
			if err := one(KindLeaf, at(1), "/x/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	case l.kind == KindTrap && w.hosts[h].Role == RoleChain:
		for i := 1; i < chainHops; i++ {
			if err := one(KindChain, at(i), "/chain/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func pathQuery(path, query string) string {
	if query == "" {
		return path
	}
	return path + "?" + query
}

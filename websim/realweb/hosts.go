package realweb

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/unicode"
)

// EncodingCase is a page of HostEncodings and the request target a
// browser sends for its one link: the path percent-encoded from UTF-8,
// the query from the page's encoding (UTF-8 for UTF-16 pages), a
// character the encoding lacks as its percent-encoded "&#N;".
type EncodingCase struct {
	Page string // the page's path
	How  string // how its encoding is told
	Want string // the request target its link must become
}

// EncodingCases are HostEncodings' pages; the targets were written out
// by hand from the URL and Encoding Standards.
var EncodingCases = []EncodingCase{
	{"/sjis.html", "Content-Type charset Shift_JIS", "/%E8%B3%87%E6%96%99/?q=%8E%91%97%BF"},
	{"/cp1251.html", "Content-Type charset windows-1251", "/%D0%BD%D0%BE%D0%B2%D0%BE%D1%81%D1%82%D0%B8/?q=%ED%EE%E2%EE%F1%F2%E8"},
	{"/cp1251-ncr.html", "Content-Type charset windows-1251, a query character it lacks", "/x/?q=%26%2326085%3B"},
	{"/utf16le.html", "a UTF-16LE BOM only", "/%C3%BC/?q=%C3%BC"},
	{"/utf16be.html", "a UTF-16BE BOM only", "/%C3%9F/?q=%C3%9F"},
	{"/meta-latin1.html", "<meta charset=iso-8859-1> only (windows-1252)", "/caf%C3%A9?q=caf%E9"},
	{"/gb18030.html", "Content-Type charset gb18030", "/%E4%B8%AD%E6%96%87/?q=%D6%D0%CE%C4"},
}

// encodedPage is one page of HostEncodings as served.
type encodedPage struct {
	contentType string
	body        []byte
}

// encodedPages builds HostEncodings' pages.
func encodedPages() (map[string]encodedPage, error) {
	page := func(head, href string) string {
		return "<!DOCTYPE html><html><head>" + head + "<title>" + href + "</title></head><body><p>A link: <a href=\"" + href + "\">" + href + "</a></p></body></html>"
	}
	enc := func(e encoding.Encoding, s string) ([]byte, error) {
		return e.NewEncoder().Bytes([]byte(s))
	}
	type src struct {
		path, ct string
		e        encoding.Encoding
		text     string
	}
	srcs := []src{
		{"/sjis.html", "text/html; charset=Shift_JIS", japanese.ShiftJIS, page("", "/資料/?q=資料")},
		{"/cp1251.html", "text/html; charset=windows-1251", charmap.Windows1251, page("", "/новости/?q=новости")},
		{"/cp1251-ncr.html", "text/html; charset=windows-1251", charmap.Windows1251, page("", "/x/?q=&#26085;")},
		{"/utf16le.html", "text/html", unicode.UTF16(unicode.LittleEndian, unicode.UseBOM), page("", "/ü/?q=ü")},
		{"/utf16be.html", "text/html", unicode.UTF16(unicode.BigEndian, unicode.UseBOM), page("", "/ß/?q=ß")},
		{"/meta-latin1.html", "text/html", charmap.Windows1252, page(`<meta charset="iso-8859-1">`, "/café?q=café")},
		{"/gb18030.html", "text/html; charset=gb18030", simplifiedchinese.GB18030, page("", "/中文/?q=中文")},
	}
	out := map[string]encodedPage{}
	for _, s := range srcs {
		b, err := enc(s.e, s.text)
		if err != nil {
			return nil, fmt.Errorf("realweb: encode %s: %w", s.path, err)
		}
		out[s.path] = encodedPage{contentType: s.ct, body: b}
	}
	return out, nil
}

// html writes a small UTF-8 HTML page with body as its content.
func html(w http.ResponseWriter, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>%s</title></head><body><h1>%s</h1>%s</body></html>", title, title, body)
}

// linksTo returns anchors to each of paths.
func linksTo(paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "<p><a href=\"%s\">%s</a></p>\n", p, p)
	}
	return b.String()
}

// leaf answers any other path with a page without links.
func leaf(w http.ResponseWriter, r *http.Request) { html(w, r.URL.Path, "<p>a leaf</p>") }

// robotsTxt answers robots.txt with text.
func robotsTxt(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprint(w, text)
}

// startHosts starts the server of every host.
func (w *Web) startHosts() error {
	pages, err := encodedPages()
	if err != nil {
		return err
	}
	type spec struct {
		name   string
		addr   netip.Addr
		tls    bool
		cert   certKind
		protos []string
		h      http.HandlerFunc
	}
	specs := []spec{
		{name: HostEncodings, h: func(rw http.ResponseWriter, r *http.Request) {
			if p, ok := pages[r.URL.Path]; ok {
				rw.Header().Set("Content-Type", p.contentType)
				rw.Write(p.body)
				return
			}
			if r.URL.Path == "/" {
				var ps []string
				for _, c := range EncodingCases {
					ps = append(ps, c.Page)
				}
				html(rw, "encodings", linksTo(ps...))
				return
			}
			leaf(rw, r)
		}},
		{name: HostRobotsFrom, h: func(rw http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/robots.txt":
				http.Redirect(rw, r, w.origins[HostRobotsTo]+"/robots.txt", http.StatusMovedPermanently)
			case "/":
				html(rw, "example", linksTo("/private/secret.html", "/public.html"))
			default:
				leaf(rw, r)
			}
		}},
		{name: HostRobotsTo, h: func(rw http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/robots.txt":
				robotsTxt(rw, "User-agent: *\nDisallow: /private/\n")
			case "/":
				html(rw, "www.example", linksTo("/private/www-secret.html", "/www-public.html"))
			default:
				leaf(rw, r)
			}
		}},
		{name: HostAgent, h: func(rw http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/robots.txt":
				robotsTxt(rw, "User-agent: "+AgentToken+"\nDisallow: /bot-only/\n\nUser-agent: *\nDisallow: /everyone/\n")
			case "/":
				html(rw, "agent", linksTo("/bot-only/a.html", "/everyone/a.html", "/open.html"))
			default:
				leaf(rw, r)
			}
		}},
		{name: HostBusy, h: w.busy()},
		{name: HostIPv6, addr: netip.IPv6Loopback(), h: func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				html(rw, "v6", linksTo("/v6-page.html"))
				return
			}
			leaf(rw, r)
		}},
		{name: HostHTTP2, tls: true, h: func(rw http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 2 {
				http.Error(rw, "HTTP/2 only", http.StatusHTTPVersionNotSupported)
				return
			}
			if r.URL.Path == "/" {
				html(rw, "h2", linksTo("/h2-page.html"))
				return
			}
			leaf(rw, r)
		}},
		{name: HostTraps, h: w.traps()},
		{name: HostSignals, h: w.signals()},
		{name: HostCompressed, h: compressed()},
		{name: HostSecure, tls: true, h: func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				html(rw, "secure", linksTo("/secure-page.html"))
				return
			}
			leaf(rw, r)
		}},
		{name: HostSelfSigned, tls: true, cert: certSelfSigned, h: func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				html(rw, "self-signed", linksTo("/selfsigned-page.html"))
				return
			}
			leaf(rw, r)
		}},
		{name: HostExpired, tls: true, cert: certExpired, h: func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				html(rw, "expired", linksTo("/expired-page.html"))
				return
			}
			leaf(rw, r)
		}},
		{name: HostSession, h: session},
		{name: HostDualStack, h: func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				html(rw, "dual stack", linksTo("/dual-page.html"))
				return
			}
			leaf(rw, r)
		}},
	}
	for i, s := range specs {
		addr := s.addr
		if !addr.IsValid() {
			addr = addr4(i)
		}
		w.names[s.name] = []netip.Addr{addr}
		if s.name == HostDualStack {
			// Its IPv6 address comes first (RFC 8305 prefers it), and
			// nothing listens there on its port (a broken IPv6 route),
			// nor on its first IPv4 address (a dead server): only its
			// last address serves.
			w.names[s.name] = []netip.Addr{netip.IPv6Loopback(), deadAddr, addr}
		}
		var cfg *tls.Config
		if s.tls {
			if cfg, err = w.tlsConfig(s.name, s.cert, int64(i+2), s.protos...); err != nil {
				return err
			}
		}
		origin, err := w.serve(s.name, addr, cfg, s.h)
		if err != nil {
			return err
		}
		if s.name == HostSecure {
			// The secure host's main server is plain HTTP redirecting to
			// its TLS one, as most sites' port 80 does.
			w.tlsOrig[s.name] = origin
			origin, err = w.serve(s.name, addr, nil, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				http.Redirect(rw, r, w.tlsOrig[HostSecure]+r.URL.RequestURI(), http.StatusMovedPermanently)
			}))
			if err != nil {
				return err
			}
		}
		w.origins[s.name] = origin
	}
	return nil
}

// deadAddr is an address of the web where nothing listens.
var deadAddr = netip.AddrFrom4([4]byte{127, 88, 0, 250})

// SlowPath is the page of HostBusy whose first request is answered 429
// with Retry-After.
const SlowPath = "/slow/1.html"

// busy is HostBusy: its front page links three pages; the first request
// for SlowPath is answered 429 Too Many Requests with Retry-After.
func (w *Web) busy() http.HandlerFunc {
	var once sync.Once
	return func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			html(rw, "busy", linksTo(SlowPath, "/slow/2.html", "/slow/3.html"))
			return
		case SlowPath:
			first := false
			once.Do(func() { first = true })
			if first {
				rw.Header().Set("Retry-After", strconv.Itoa(int(w.o.RetryAfter/time.Second)))
				http.Error(rw, "slow down", http.StatusTooManyRequests)
				return
			}
		}
		leaf(rw, r)
	}
}

// traps is HostTraps: a page at every path under /trap/ whose one link is
// relative ("a/"), so that it leads ever deeper, and a calendar of months
// under /cal/YYYY/MM/ with links to the month before and after, starting
// at the web's month.
func (w *Web) traps() http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case p == "/":
			now := w.o.Now()
			html(rw, "traps", linksTo("/trap/", fmt.Sprintf("/cal/%04d/%02d/", now.Year(), int(now.Month()))))
		case strings.HasPrefix(p, "/trap/") && strings.HasSuffix(p, "/"):
			html(rw, "trap "+p, linksTo("a/"))
		case strings.HasPrefix(p, "/cal/"):
			var y, m int
			if n, _ := fmt.Sscanf(p, "/cal/%d/%d/", &y, &m); n != 2 || m < 1 || m > 12 {
				http.NotFound(rw, r)
				return
			}
			t := time.Date(y, time.Month(m), 1, 0, 0, 0, 0, time.UTC)
			prev, next := t.AddDate(0, -1, 0), t.AddDate(0, 1, 0)
			html(rw, fmt.Sprintf("calendar %04d-%02d", y, m), linksTo(
				fmt.Sprintf("/cal/%04d/%02d/", prev.Year(), int(prev.Month())),
				fmt.Sprintf("/cal/%04d/%02d/", next.Year(), int(next.Month()))))
		default:
			http.NotFound(rw, r)
		}
	}
}

// Signal pages of HostSignals: what must be requested (a link only the
// signal gives) and what must not.
const (
	NoFollowHeaderTarget  = "/never-from-xrt-nofollow.html" // linked by a page with X-Robots-Tag: nofollow
	AgentNoFollowTarget   = "/never-from-xrt-agent.html"    // linked by a page with X-Robots-Tag: realwebbot: nofollow
	OtherBotTarget        = "/from-xrt-otherbot.html"       // linked by a page with X-Robots-Tag: otherbot: nofollow
	MetaNoIndexPage       = "/meta-noindex.html"            // <meta name=robots content=noindex>
	HeaderNoIndexPage     = "/xrt-noindex.html"             // X-Robots-Tag: noindex
	NoIndexTarget         = "/from-noindex.html"            // linked by MetaNoIndexPage: followed
	CanonicalPage         = "/canonical.html"               // <link rel=canonical href=CanonicalTarget>
	CanonicalTarget       = "/canonical-target.html"
	CanonicalHeaderPage   = "/canonical-header.html" // Link: <CanonicalHeaderTarget>; rel="canonical"
	CanonicalHeaderTarget = "/canonical-header-target.html"
	RefreshTarget         = "/refresh-target.html"        // <meta http-equiv=refresh>
	RefreshHeaderTarget   = "/refresh-header-target.html" // Refresh: header
	FrameTarget           = "/frame-a.html"               // <frame src>
	IFrameTarget          = "/iframe-a.html"              // <iframe src>
	FeedRSS               = "/feed.rss"                   // named by <link rel=alternate> on /feeds.html
	FeedAtom              = "/feed.atom"
	TextSitemapTarget     = "/from-text-sitemap.html" // listed by /sitemap.txt only
	GzSitemapTarget       = "/from-gz-sitemap.html"   // listed by /sitemap.xml.gz only, past 8 MiB inflated
)

// FeedTargets are the item and entry links of HostSignals' feeds (the
// Atom feed declares windows-1252 and links a path with é in it).
var FeedTargets = []string{"/rss-item-1.html", "/rss-item-2.html", "/atom-entry-1.html", "/atom-caf%C3%A9.html"}

// signals is HostSignals.
func (w *Web) signals() http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		origin := w.origins[HostSignals]
		h := rw.Header()
		switch r.URL.Path {
		case "/robots.txt":
			robotsTxt(rw, "User-agent: *\nAllow: /\nSitemap: "+origin+"/sitemap.txt\nSitemap: "+origin+"/sitemap.xml.gz\n")
		case "/":
			html(rw, "signals", linksTo("/xrt-nofollow.html", "/xrt-agent.html", "/xrt-otherbot.html", MetaNoIndexPage, HeaderNoIndexPage,
				CanonicalPage, CanonicalHeaderPage, "/refresh.html", "/refresh-header.html", "/frames.html", "/iframe.html", "/feeds.html"))
		case "/xrt-nofollow.html":
			h.Set("X-Robots-Tag", "nofollow")
			html(rw, "nofollow by header", linksTo(NoFollowHeaderTarget))
		case "/xrt-agent.html":
			h.Set("X-Robots-Tag", AgentToken+": nofollow")
			html(rw, "nofollow for the agent", linksTo(AgentNoFollowTarget))
		case "/xrt-otherbot.html":
			h.Set("X-Robots-Tag", "otherbot: nofollow")
			html(rw, "nofollow for another bot", linksTo(OtherBotTarget))
		case MetaNoIndexPage:
			rw.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(rw, `<!DOCTYPE html><html><head><meta name="robots" content="noindex"><title>noindex</title></head><body>`+linksTo(NoIndexTarget)+`</body></html>`)
		case HeaderNoIndexPage:
			h.Set("X-Robots-Tag", "noindex")
			html(rw, "noindex by header", "<p>not to be indexed</p>")
		case CanonicalPage:
			rw.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(rw, `<!DOCTYPE html><html><head><link rel="canonical" href="`+CanonicalTarget+`"><title>canonical</title></head><body><p>a copy</p></body></html>`)
		case CanonicalHeaderPage:
			h.Set("Link", "<"+CanonicalHeaderTarget+`>; rel="canonical"`)
			html(rw, "canonical by header", "<p>a copy</p>")
		case "/refresh.html":
			rw.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(rw, `<!DOCTYPE html><html><head><meta http-equiv="refresh" content="0; url=`+RefreshTarget+`"><title>moved</title></head><body><p>moved</p></body></html>`)
		case "/refresh-header.html":
			h.Set("Refresh", "5; url="+RefreshHeaderTarget)
			html(rw, "refresh by header", "<p>moving</p>")
		case "/frames.html":
			rw.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(rw, `<!DOCTYPE html><html><head><title>frames</title></head><frameset cols="100%"><frame src="`+FrameTarget+`"></frameset></html>`)
		case "/iframe.html":
			html(rw, "iframe", `<iframe src="`+IFrameTarget+`"></iframe>`)
		case "/feeds.html":
			rw.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(rw, `<!DOCTYPE html><html><head><title>feeds</title><link rel="alternate" type="application/rss+xml" href="`+FeedRSS+`"><link rel="alternate" type="application/atom+xml" href="`+FeedAtom+`"></head><body><p>feeds</p></body></html>`)
		case FeedRSS:
			h.Set("Content-Type", "application/rss+xml")
			fmt.Fprint(rw, `<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>r</title><link>`+origin+`/</link>`+
				`<item><title>1</title><link>`+origin+`/rss-item-1.html</link></item><item><title>2</title><link>`+origin+`/rss-item-2.html</link></item></channel></rss>`)
		case FeedAtom:
			h.Set("Content-Type", "application/atom+xml")
			doc := `<?xml version="1.0" encoding="windows-1252"?><feed xmlns="http://www.w3.org/2005/Atom"><title>a</title>` +
				`<entry><title>1</title><link href="` + origin + `/atom-entry-1.html"/></entry>` +
				`<entry><title>caf` + "\xe9" + `</title><link rel="alternate" href="/atom-caf` + "\xe9" + `.html"/></entry></feed>`
			rw.Write([]byte(doc))
		case "/sitemap.txt":
			h.Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(rw, origin+TextSitemapTarget+"\n")
		case "/sitemap.xml.gz":
			h.Set("Content-Type", "application/x-gzip")
			rw.Write(bigGzSitemap(origin + GzSitemapTarget))
		default:
			leaf(rw, r)
		}
	}
}

// bigGzSitemap returns a gzipped sitemap whose one URL, loc, comes after
// 12 MiB of white space: past a page's 8 MiB body limit once inflated,
// within the protocol's 50 MiB. It is three gzip members (a gzip file may
// be several, RFC 1952 2.2): the head, the white space, built once, and
// the URL.
func bigGzSitemap(loc string) []byte {
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	padOnce.Do(func() { padMember = member(bytes.Repeat([]byte(" "), 12<<20)) }) // Start has made it
	out := member([]byte(`<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`))
	out = append(out, padMember...)
	return append(out, member([]byte("<url><loc>"+loc+"</loc></url></urlset>\n"))...)
}

// padMember is bigGzSitemap's white space, one gzip member.
var (
	padOnce   sync.Once
	padMember []byte
)

// Compressed pages of HostCompressed, each served with its encoding when
// the request accepts it, each linking to one page found only inside it.
var CompressedCases = []struct{ Page, Encoding, Target string }{
	{"/gzip.html", "gzip", "/from-gzip.html"},
	{"/br.html", "br", "/from-br.html"},
	{"/zstd.html", "zstd", "/from-zstd.html"},
}

// compressed is HostCompressed.
func compressed() http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			var ps []string
			for _, c := range CompressedCases {
				ps = append(ps, c.Page)
			}
			html(rw, "compressed", linksTo(ps...))
			return
		}
		for _, c := range CompressedCases {
			if r.URL.Path != c.Page {
				continue
			}
			page := []byte("<!DOCTYPE html><html><head><title>" + c.Encoding + "</title></head><body>" + linksTo(c.Target) + "</body></html>")
			if !accepts(r.Header.Get("Accept-Encoding"), c.Encoding) {
				rw.Header().Set("Content-Type", "text/html; charset=utf-8")
				rw.Write(page)
				return
			}
			var buf bytes.Buffer
			switch c.Encoding {
			case "gzip":
				zw := gzip.NewWriter(&buf)
				zw.Write(page)
				zw.Close()
			case "br":
				bw := brotli.NewWriter(&buf)
				bw.Write(page)
				bw.Close()
			case "zstd":
				zw, _ := zstd.NewWriter(&buf)
				zw.Write(page)
				zw.Close()
			}
			rw.Header().Set("Content-Type", "text/html; charset=utf-8")
			rw.Header().Set("Content-Encoding", c.Encoding)
			rw.Header().Set("Vary", "Accept-Encoding")
			rw.Write(buf.Bytes())
			return
		}
		leaf(rw, r)
	}
}

// accepts reports whether an Accept-Encoding value lists coding (without
// q=0).
func accepts(header, coding string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), coding) {
			continue
		}
		if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if v, err := strconv.ParseFloat(q, 64); err == nil && v == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// The session host's cookie.
const (
	SessionCookie = "sid=RW123"
	InsidePage    = "/inside.html" // answered 200 only with SessionCookie, else 403
	DeeperPage    = "/deeper.html" // linked from InsidePage only
)

// session is HostSession: its front page sets a session cookie, and
// InsidePage is answered only to a request that sends it back.
func session(rw http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/":
		rw.Header().Add("Set-Cookie", SessionCookie+"; Path=/; HttpOnly")
		html(rw, "session", linksTo(InsidePage))
	case InsidePage:
		if c, err := r.Cookie("sid"); err != nil || c.Name+"="+c.Value != SessionCookie {
			http.Error(rw, "no session", http.StatusForbidden)
			return
		}
		html(rw, "inside", linksTo(DeeperPage))
	default:
		leaf(rw, r)
	}
}

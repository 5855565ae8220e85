package fetcher

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/coding"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/links"
	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/meridian-crawler/meridian/fetcher/netguard"
	"github.com/meridian-crawler/meridian/fetcher/robots"
	"github.com/meridian-crawler/meridian/fetcher/simhash"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
)

// worker runs tasks handed out by the scheduler: host setup (HostStore, DNS,
// address check) and requests. Each worker owns a colly Collector (colly
// takes the request's context from the Collector, so a shared one could not
// carry the address to dial per request), a link extractor and buffers.
type worker struct {
	f    *Fetcher
	ctx  context.Context // Run's
	c    *colly.Collector
	cctx *colly.Context // reused: the fetcher stores nothing in it
	hdr  http.Header
	ex   exchange
	cur  *task // the task being run
	tr   *httptrace.ClientTrace
	ext  *links.Extractor
	sh   *simhash.Hasher // the page's fingerprint, fed by ext (Options.NearDup)
	base urlnorm.Base
	buf  []byte // URL scratch
	head []byte // WARC head scratch
	dec  coding.Decoder
	// protos holds the WARC-Protocol values of the exchange being written.
	protos [2]string
	// nearDupFP is the SimHash of the page being classified when it is a
	// near-duplicate (Result.NearDupOf), for its WARC metadata record.
	nearDupFP uint64
	// retryAfter is the Retry-After of the page being classified when it
	// was answered 429 or 503, for its task.
	retryAfter time.Duration
	// noIndexFrom says where the page being classified said noindex
	// (Result.NoIndex), for its WARC metadata record.
	noIndexFrom string
}

func newWorker(ctx context.Context, f *Fetcher) *worker {
	w := &worker{f: f, ctx: ctx, cctx: colly.NewContext(), buf: make([]byte, 0, 512)}
	w.hdr = http.Header{"User-Agent": {f.o.UserAgent}, "Accept": {"*/*"}, "Accept-Encoding": {acceptEncoding}}
	w.ext = links.NewExtractor(f.o.Normalizer, f.o.Scope, f.o.MaxLinks)
	w.ext.SetRequisites(f.o.PageRequisites)
	if f.o.NearDup != nil {
		w.sh = &simhash.Hasher{}
		w.ext.SetText(w.sh)
	}
	w.tr = &httptrace.ClientTrace{GotConn: w.gotConn}
	if f.o.TLSInsecure {
		w.tr.GotConn = w.gotConnVerify
	}
	w.ex.body = make([]byte, 0, 64<<10)
	c := colly.NewCollector(
		colly.UserAgent(f.o.UserAgent),
		colly.AllowURLRevisit(),                    // no visited-URL memory
		colly.IgnoreRobotsTxt(),                    // robots.txt is the scheduler's
		colly.ParseHTTPErrorResponse(),             // a 404 is a response, not an error
		colly.MaxBodySize(int(f.o.MaxBodyBytes)+1), // a backstop: the bodyReader keeps the body and cuts it first, knowing why
	)
	// NewCollector applies COLLY_* environment variables; undo the ones
	// that would change behaviour.
	c.Async, c.CacheDir, c.DetectCharset, c.CheckHead, c.TraceHTTP = false, "", false, false, false
	c.MaxDepth, c.MaxRequests = 0, 0
	c.AllowedDomains, c.DisallowedDomains, c.URLFilters, c.DisallowedURLFilters = nil, nil, nil, nil
	c.DisableCookies()
	c.SetRedirectHandler(func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse })
	// No client timeout: it would cost a timer and a goroutine per request;
	// the request's context carries the total timeout.
	c.SetRequestTimeout(0)
	c.WithTransport(&roundTripper{w: w})
	w.c = c
	return w
}

// run executes tasks until the work channel closes.
func (w *worker) run() {
	for t := range w.f.work {
		if w.ctx.Err() != nil {
			t.stopped = true
			if t.kind != taskSetup {
				w.f.c.inflight.Add(-1)
				t.grp.inflight.Add(-1)
			}
		} else {
			w.do(t)
		}
		w.f.done <- event{t: t}
	}
}

func (w *worker) do(t *task) {
	switch t.kind {
	case taskSetup:
		w.setup(t)
		return
	case taskRobots:
		w.robots(t)
	case taskSitemap:
		w.sitemap(t)
	case taskPage:
		w.page(t)
	}
	if t.outcome == outcomeStopped {
		t.stopped = true
	}
	w.f.c.inflight.Add(-1)
	t.grp.inflight.Add(-1)
}

// get fetches url from t.ip (or the first of t.addrs that connects)
// through colly. The exchange holds the outcome;
// the error is colly's when no response arrived.
func (w *worker) get(t *task, url string) error {
	w.ex.reset()
	hdr := w.hdr
	if t.kind == taskPage && t.job.Prev != (Prev{}) {
		hdr = w.conditional(&t.job.Prev)
	}
	f := w.f
	if f.jar != nil {
		hdr = w.withCookies(hdr, url)
	}
	dt := &dialTarget{ip: t.ip, ips: t.addrs}
	if f.o.Proxy != nil {
		var err error
		if dt.proxy, err = f.proxyFor(url); err != nil {
			t.start = time.Now()
			t.end = t.start
			return err // not sent
		}
		w.ex.proxied = dt.proxy != nil
	}
	t.start = time.Now()
	ctx, cancel := context.WithTimeout(w.ctx, w.f.o.TotalTimeout)
	abort := t.abort
	if abort == nil { // a task not handed out by the scheduler (tests)
		abort = w.f.abortContext()
	}
	stopAbort := context.AfterFunc(abort, cancel)
	defer stopAbort()
	ctx = context.WithValue(ctx, dialKey{}, dt)
	ctx = httptrace.WithClientTrace(ctx, w.tr)
	w.cur = t
	w.c.Context = ctx
	err := w.c.Request(http.MethodGet, url, nil, w.cctx, hdr)
	w.c.Context = w.ctx
	w.cur = nil
	cancel()
	t.end = time.Now()
	if f.jar != nil && w.ex.gotResponse {
		w.keepCookies(url, t.end) // a redirect's too: a consent wall answers 302
	}
	f.c.requests.Add(1)
	f.c.busy.Add(int64(t.end.Sub(t.start)))
	f.c.bytes.Add(int64(len(w.ex.body)))
	if w.ex.gotResponse && w.ctx.Err() == nil && t.kind != taskPage {
		w.writeWARC(url, t) // a page's is written by page, once it is read
	}
	return err
}

// conditional returns the request headers of a refetch with p: w.hdr plus
// If-None-Match and If-Modified-Since from p's validators, noted in the
// exchange; w.hdr itself if p has no validator to send. The header is new
// for each request, as the transport may still read a request's header
// after the request has ended.
func (w *worker) conditional(p *Prev) http.Header {
	ex := &w.ex
	ex.ifNoneMatch, ex.ifModSince = validator(p.ETag), validator(p.LastModified)
	if !ex.conditional() {
		return w.hdr
	}
	h := make(http.Header, 4)
	h["User-Agent"], h["Accept"], h["Accept-Encoding"] = w.hdr["User-Agent"], w.hdr["Accept"], w.hdr["Accept-Encoding"]
	vals := [...]string{ex.ifNoneMatch, ex.ifModSince}
	v := vals[:] // one allocation for both values
	if ex.ifNoneMatch != "" {
		h["If-None-Match"] = v[0:1:1]
	}
	if ex.ifModSince != "" {
		h["If-Modified-Since"] = v[1:2:2]
	}
	return h
}

// gotConn notes the address the current request is sent to. The transport
// calls it in the worker's goroutine, before the request is written.
func (w *worker) gotConn(info httptrace.GotConnInfo) {
	if ta, ok := info.Conn.RemoteAddr().(*net.TCPAddr); ok {
		w.ex.remote = ta.AddrPort().Addr().Unmap()
	}
}

// answered tells the scheduler that the server has answered the current
// request (its response headers are in), so it surely received it: the IP
// delay counts from here. Counting from the connection or the write instead
// would let scheduling delays on either side bring two arrivals at the
// server closer than the delay. It runs in the worker's goroutine.
func (w *worker) answered() {
	if w.cur != nil && w.f.o.IPDelay > 0 {
		select {
		case w.f.done <- event{t: w.cur, started: true, at: time.Now()}:
		case <-w.ctx.Done():
		}
	}
}

// writeWARC records the exchange in the WARC file, if any.
func (w *worker) writeWARC(url string, t *task) {
	wr := w.f.o.WARC
	if wr == nil {
		return
	}
	ex := &w.ex
	req := appendRequestHead(w.head[:0], ex, w.f.o.UserAgent)
	resp := appendResponseHead(req, ex)
	w.head = resp
	x := warcfile.Exchange{
		URL:       url,
		IP:        ex.remote,
		Date:      ex.start,
		Protocols: ex.protocols(&w.protos),
		Request:   resp[:len(req):len(req)],
		Response:  resp[len(req):],
		Body:      ex.payload(),
		Truncated: ex.truncated,
	}
	switch {
	case ex.proxied:
		// The proxy reached the origin at an address of its choosing, and
		// its own address is not where the content came from: none.
		x.IP = netip.Addr{}
	case !x.IP.IsValid():
		x.IP = t.ip
	}
	if ex.tlsUnverified != "" {
		x.Extra = [][2]string{{WARCTLSUnverified, ex.tlsUnverified}}
	}
	if t.kind == taskPage {
		switch p := &t.job.Prev; {
		case ex.status == http.StatusNotModified && ex.conditional():
			x.Revisit, x.RefersToDate = warcfile.RevisitNotModified, p.FetchedAt
		case ex.unchanged(p) && ex.truncated == "" && !ex.coded:
			// Only a body without Content-Encoding: ContentFP is of the
			// decoded body, and the same page coded anew (another gzip
			// level, another mtime in its header) is another payload, its
			// digest not the earlier capture's, which a replay tool looks
			// the revisit up by.
			x.Revisit, x.RefersToDate = warcfile.RevisitIdenticalPayload, p.FetchedAt
		}
	}
	if err := wr.Write(&x); err != nil {
		w.f.log.Warn("fetcher: write warc", "url", url, "err", err)
	}
}

// writeNearDup records in the WARC file, after its response, that the page
// at url is a near-duplicate of original (a metadata record).
func (w *worker) writeNearDup(url, original string, fp uint64) {
	wr := w.f.o.WARC
	if wr == nil {
		return
	}
	fields := [][2]string{{"near-duplicate-of", original}, {"simhash", strconv.FormatUint(fp, 16)}}
	if err := wr.Metadata(url, w.ex.start, fields); err != nil {
		w.f.log.Warn("fetcher: write warc metadata", "url", url, "err", err)
	}
}

// writeNoIndex records in the WARC file that the page at url asked not to
// be indexed (a metadata record: "robots: noindex", where it said so, and
// "archived: no" when its response was not written).
func (w *worker) writeNoIndex(url string, archived bool) {
	wr := w.f.o.WARC
	if wr == nil {
		return
	}
	fields := [][2]string{{"robots", "noindex"}, {"robots-source", w.noIndexFrom}}
	if !archived {
		fields = append(fields, [2]string{"archived", "no (respect-noindex)"})
	}
	if err := wr.Metadata(url, w.ex.start, fields); err != nil {
		w.f.log.Warn("fetcher: write warc metadata", "url", url, "err", err)
	}
}

// outcome classifies an exchange for the host's failure count.
type outcome uint8

const (
	outcomeOK      outcome = iota // a response that says nothing bad about the host
	outcomeFailure                // 429, 502-504, timeout, connection error: counts toward back-off
	outcomeLocal                  // failed before any request (e.g. an unusable URL)
	outcomeStopped                // Run ended
)

// failure classifies the end of an exchange that has no usable response;
// it returns "" if the exchange is usable.
func (w *worker) failure(err error) (outcome, string) {
	ex := &w.ex
	switch {
	case w.ctx.Err() != nil:
		return outcomeStopped, "fetcher: stopped"
	case ex.gotResponse && ex.truncated == "time":
		return outcomeFailure, "fetcher: body cut by the total timeout"
	case ex.gotResponse && ex.truncated == "disconnect":
		return outcomeFailure, "fetcher: connection lost in the body: " + errString(ex.bodyErr)
	case ex.gotResponse:
		return outcomeOK, ""
	case !ex.sent:
		return outcomeLocal, "fetcher: request not sent: " + errString(err)
	case isCertError(err):
		// Not transient, and no fault of the host's load: no retry, no
		// failure counted (Options.TLSInsecure).
		return outcomeLocal, "fetcher: TLS certificate did not verify: " + errString(err)
	}
	return outcomeFailure, "fetcher: " + errString(err)
}

func errString(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// page fetches a page job and reports its Result.
func (w *worker) page(t *task) {
	url := t.job.URL
	err := w.get(t, url)
	r := &Result{Job: t.job, Kind: KindPage, FetchedAt: t.start, Wait: t.wait, Took: t.took()}
	oc, why := w.failure(err)
	t.outcome = oc
	if oc == outcomeStopped {
		return
	}
	w.fill(r)
	w.nearDupFP, w.noIndexFrom = 0, ""
	switch oc {
	case outcomeFailure:
		r.Status, r.Retry, r.Err = crawl.StatusError, true, why
	case outcomeLocal:
		r.Status, r.Err = crawl.StatusError, why
	default:
		t.outcome = w.classify(r)
		t.retryAfter, w.retryAfter = w.retryAfter, 0
	}
	// The page's records are written once it is read: what it says of
	// itself (a near-duplicate, noindex) goes into the records after its
	// response. With RespectNoIndex a noindex page is not archived: its
	// metadata record stands in for its request and response.
	if w.ex.gotResponse && w.ctx.Err() == nil {
		archived := !(r.NoIndex && w.f.o.RespectNoIndex)
		if archived {
			w.writeWARC(url, t)
		}
		if r.NearDupOf != "" {
			w.writeNearDup(url, r.NearDupOf, w.nearDupFP)
		}
		if r.NoIndex {
			w.writeNoIndex(url, archived)
		}
	}
	w.f.deliver(r)
}

// fill copies what every kind of Result reports about the exchange.
func (w *worker) fill(r *Result) {
	ex := &w.ex
	if !ex.gotResponse {
		return
	}
	r.HTTPStatus = ex.status
	r.ContentType = ex.header.Get("Content-Type")
	r.Bytes = int64(len(ex.body))
	r.Truncated = ex.truncated
	if ex.bodyCut && r.Truncated == "" {
		// The response is archived whole; the body read is its decoded
		// prefix.
		r.Truncated = "length"
	}
	if ex.decodeErr != nil {
		r.Err = "fetcher: body archived as received, not read: " + ex.decodeErr.Error()
	}
	r.ContentFP = ex.fingerprint()
	if ex.status == http.StatusOK || ex.status == http.StatusNotModified {
		r.ETag = firstValidator(ex.header["Etag"])
		r.LastModified = firstValidator(ex.header["Last-Modified"])
	}
}

// firstValidator returns the first of a header's values if it is a
// validator the fetcher reports (see validator), "" if not.
func firstValidator(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return validator(vs[0])
}

// classify sets a page Result's status from its HTTP response.
func (w *worker) classify(r *Result) outcome {
	ex := &w.ex
	switch s := ex.status; {
	case s == http.StatusNotModified:
		if !ex.conditional() {
			r.Status, r.Err = crawl.StatusError, "fetcher: HTTP "+ex.statusText+" to a request that was not conditional"
			return outcomeOK
		}
		p := &r.Prev
		r.Status, r.NotModified, r.ContentFP = crawl.StatusFetched, true, p.ContentFP
		if r.ETag == "" {
			r.ETag = validator(p.ETag)
		}
		if r.LastModified == "" {
			r.LastModified = validator(p.LastModified)
		}
	case s >= 200 && s < 300:
		r.Status = crawl.StatusFetched
		r.Unchanged = ex.unchanged(&r.Prev)
		hs := w.headerSignals(r)
		if !isHTML(r.ContentType, ex.body) {
			var found []string
			switch {
			case isFeed(r.ContentType, ex.body):
				found = w.feedLinks(r)
			case w.f.o.PageRequisites && isCSS(r.ContentType, r.URL):
				r.Embeds = w.ext.ExtractCSS(r.URL, ex.body).Embeds
			}
			w.signals(r, &hs, nil, found)
			return outcomeOK
		}
		// An unchanged page is no duplicate of itself; its links are
		// extracted all the same (the crawl's scores need them).
		if seen := w.f.o.Seen; seen != nil && !r.Unchanged && seen(r.ContentFP, r.URL) {
			r.Status = crawl.StatusDuplicate
			return outcomeOK
		}
		if w.sh != nil {
			w.sh.Reset() // Extract feeds it the page's text
		}
		w.ext.SetRobotsAgent(w.f.o.RobotsAgent)
		p := w.ext.Extract(r.URL, r.ContentType, ex.body)
		w.signals(r, &hs, p, p.Links)
		r.Embeds = p.Embeds // nil with requisites off; made anew by each page
		r.Traps = TrapCounts{Repetition: int32(p.TrapRepetition), Calendar: int32(p.TrapCalendar)}
		if len(p.TrapLinks) > 0 && w.f.log.Enabled(w.ctx, slog.LevelDebug) {
			for _, l := range p.TrapLinks {
				w.f.log.Debug("fetcher: link refused as a trap", "rule", l.Rule.String(), "url", string(l.URL), "from", r.URL)
			}
		}
		if nd := w.f.o.NearDup; nd != nil && !r.Unchanged {
			// A near-duplicate keeps its status and its links (a mirror
			// with other navigation still leads somewhere).
			// A page cut at the link cap was not read to its end: its
			// fingerprint would be of its start only.
			if fp, ok := w.sh.Sum(); ok && !p.Truncated {
				if orig := nd(r.Host, r.URL, fp); orig != "" && orig != r.URL {
					r.NearDupOf, w.nearDupFP = orig, fp
				}
			}
		}
	case s >= 300 && s < 400:
		loc := ex.header.Get("Location")
		if loc == "" {
			r.Status, r.Err = crawl.StatusError, "fetcher: redirect without Location"
			return outcomeOK
		}
		to, err := w.resolve(r.URL, loc)
		if err != nil {
			r.Status, r.Err = crawl.StatusError, "fetcher: bad Location: "+err.Error()
			return outcomeOK
		}
		r.Status, r.RedirectTo = crawl.StatusRedirect, to
		// Not followed if the scope (the trap rules, the URL rules)
		// refuses the target as it refuses a link to it.
		switch v := w.f.o.Scope.CheckString(to); {
		case v.Trap():
			w.trap(&r.Traps, v, to, r.URL, "fetcher: redirect target refused as a trap")
			r.RedirectTo, r.Err = "", "fetcher: redirect to "+to+" refused as a "+v.String()
		case v != urlnorm.Allowed:
			r.RedirectTo, r.Err = "", "fetcher: redirect to "+to+" out of scope"
		}
	case s == http.StatusNotFound || s == http.StatusGone:
		r.Status = crawl.StatusGone
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable || s == http.StatusBadGateway || s == http.StatusGatewayTimeout:
		// The server (or what is in front of it) is overloaded or down:
		// retry the URL and count a failure of the host, no request to it
		// before its Retry-After (page hands it to the task).
		r.Status, r.Retry, r.Err = crawl.StatusError, true, "fetcher: HTTP "+ex.statusText
		if s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable {
			w.retryAfter = retryAfter(ex.header, time.Now())
		}
		return outcomeFailure
	case s >= 500:
		// The server answered, with an error of this URL (500 and the
		// like): retry the URL later, but the host is fine.
		r.Status, r.Retry, r.Err = crawl.StatusError, true, "fetcher: HTTP "+ex.statusText
	default:
		r.Status, r.Err = crawl.StatusError, "fetcher: HTTP "+ex.statusText
	}
	return outcomeOK
}

// signals sets what a 2xx page's headers (hs) and, for an HTML page, its
// markup (p, nil for other pages) say of it: r.NoIndex (X-Robots-Tag or
// meta robots, w.noIndexFrom saying which), r.Canonical (a Link header's
// before the markup's: the first said wins, and the header comes first)
// and r.Links: none with nofollow (header or meta), else the header's
// canonical and refresh targets first, then found (the page's or feed's
// links), each once, at most MaxLinks. The canonical is recorded with
// nofollow too, though it is not one of Links then.
func (w *worker) signals(r *Result, hs *headerSignals, p *links.Page, found []string) {
	nofollow, canonical := hs.robots.NoFollow, hs.canonical
	if p != nil {
		nofollow = nofollow || p.NoFollow
		if p.NoIndex {
			w.noIndexFrom = joinSource(w.noIndexFrom, "meta")
			r.NoIndex = true
		}
		if !hs.hasCanonical {
			canonical = p.Canonical
		}
	}
	r.Canonical = canonical
	if !nofollow {
		r.Links = withHeaderLinks(found, hs.canonical, hs.refresh, w.f.o.MaxLinks)
	}
}

// feedLinks returns the links of the feed in the exchange.
func (w *worker) feedLinks(r *Result) []string {
	p, err := w.ext.ExtractFeed(r.URL, r.ContentType, w.ex.body)
	if err != nil {
		w.f.log.Debug("fetcher: feed", "url", r.URL, "err", err)
	}
	return p.Links
}

// joinSource adds what to the sources of a noindex ("" if none yet).
func joinSource(from, what string) string {
	if from == "" {
		return what
	}
	return from + ", " + what
}

// headerSignals are what a 2xx response's headers say of the page.
type headerSignals struct {
	robots    links.RobotsTag // X-Robots-Tag, for the robots agent
	canonical string          // the first Link rel=canonical, normalised and in scope; "" if none (or the page itself)
	refresh   string          // the Refresh target, likewise
	// hasCanonical: a Link rel=canonical was given, even if canonical is
	// "" (it named the page itself): the page's markup is not asked.
	hasCanonical bool
}

// headerSignals reads the X-Robots-Tag, Link and Refresh headers of the
// exchange, the 2xx response of r's page, and sets r.NoIndex if the
// X-Robots-Tag says noindex. They apply to every page, HTML or not (a PDF
// can say noindex).
func (w *worker) headerSignals(r *Result) (s headerSignals) {
	h, pageURL := w.ex.header, r.URL
	if v := h["X-Robots-Tag"]; len(v) > 0 {
		s.robots = links.ParseXRobotsTag(v, w.f.o.RobotsAgent)
		if s.robots.NoIndex {
			r.NoIndex, w.noIndexFrom = true, "X-Robots-Tag"
		}
	}
	if v := h["Link"]; len(v) > 0 {
		hl, err := links.ParseLinkHeader(v)
		if err != nil {
			w.f.log.Debug("fetcher: Link header", "url", pageURL, "err", err)
		}
		for i := range hl {
			if hl[i].OfResource() && hl[i].HasRel("canonical") {
				s.canonical, s.hasCanonical = w.headerLink(pageURL, hl[i].Target), true
				break
			}
		}
	}
	if v := h["Refresh"]; len(v) > 0 {
		if _, u, ok := links.ParseRefresh([]byte(v[0])); ok && len(u) > 0 {
			s.refresh = w.headerLink(pageURL, string(u))
		}
	}
	return s
}

// headerLink returns ref resolved against pageURL and normalised, "" if
// it does not resolve, is the page itself or is out of scope.
func (w *worker) headerLink(pageURL, ref string) string {
	to, err := w.resolve(pageURL, ref)
	if err != nil || to == pageURL || !w.f.o.Scope.AllowString(to) {
		return ""
	}
	return to
}

// withHeaderLinks returns a page's Links: the header's canonical and
// refresh targets ("" if none) first, then the body's links that are
// neither, at most max in all. The slice is new; found is not kept.
func withHeaderLinks(found []string, canonical, refresh string, max int) []string {
	if refresh == canonical {
		refresh = ""
	}
	if canonical == "" && refresh == "" {
		return slices.Clone(found) // the strings stay valid; the slice is the extractor's
	}
	out := make([]string, 0, min(len(found)+2, max))
	for _, l := range [2]string{canonical, refresh} {
		if l != "" && len(out) < max {
			out = append(out, l)
		}
	}
	for _, l := range found {
		if len(out) >= max {
			break
		}
		if l != canonical && l != refresh {
			out = append(out, l)
		}
	}
	return out
}

// resolve returns ref resolved against the normalised URL base, normalised.
func (w *worker) resolve(base, ref string) (string, error) {
	if err := w.base.SetString(base); err != nil {
		return "", err
	}
	out, err := w.f.o.Normalizer.Resolve(w.buf[:0], &w.base, []byte(ref))
	if err != nil {
		return "", err
	}
	w.buf = out[:0]
	return string(out), nil
}

// isHTML reports whether a body with this Content-Type is parsed for links:
// text/html or application/xhtml+xml; without a Content-Type, if it sniffs
// as HTML.
func isHTML(contentType string, body []byte) bool {
	mt := mediaType(contentType)
	if mt == "" {
		mt = mediaType(http.DetectContentType(body))
	}
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// isFeed reports whether a body with this Content-Type is an RSS or Atom
// feed read for links: application/rss+xml, application/atom+xml or
// application/rdf+xml; or application/xml or text/xml (or no Content-Type
// and a body that sniffs as XML) whose root element is rss, feed or
// rdf:RDF (links.IsFeedRoot).
func isFeed(contentType string, body []byte) bool {
	mt := mediaType(contentType)
	if mt == "" {
		mt = mediaType(http.DetectContentType(body))
	}
	switch mt {
	case "application/rss+xml", "application/atom+xml", "application/rdf+xml":
		return true
	case "application/xml", "text/xml":
		return links.IsFeedRoot(body)
	}
	return false
}

// isCSS reports whether a body with this Content-Type is a style sheet
// read for requisites: text/css, or no Content-Type and a URL path that
// ends in .css.
func isCSS(contentType, url string) bool {
	mt := mediaType(contentType)
	if mt == "" {
		if i := strings.IndexAny(url, "?#"); i >= 0 {
			url = url[:i]
		}
		return len(url) > 4 && strings.EqualFold(url[len(url)-4:], ".css")
	}
	return mt == "text/css"
}

// mediaType returns the lower-case media type of a Content-Type value.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	for i := 0; i < len(ct); i++ {
		if c := ct[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(ct)
		}
	}
	return ct
}

// robots fetches robots.txt, or a hop of its redirects. A redirect, to
// any host, is handed back to the scheduler (t.location) to be fetched as
// its own polite request, up to maxRobotsRedirects of them (RFC 9309
// 2.3.1.2); past them robots.txt is unavailable, which allows everything.
// A robots.txt unreachable past robots.UnreachableLimit (t.since) is read
// as its last good copy (robots.Stale).
func (w *worker) robots(t *task) {
	f := w.f
	f.c.robots.Add(1)
	err := w.get(t, t.url)
	oc, why := w.failure(err)
	t.outcome = oc
	if oc == outcomeStopped {
		return
	}
	r := &Result{Job: t.job, Kind: KindRobots, FetchedAt: t.start, Wait: t.wait, Took: t.took()}
	w.fill(r)
	ex := &w.ex
	status := 0
	if oc == outcomeOK {
		status = ex.status
	}
	t.httpStatus = status
	switch {
	case status >= 200 && status < 300:
		r.Status = crawl.StatusFetched
		t.body = bytes.Clone(ex.body[:min(len(ex.body), crawl.MaxRobotsBytes)])
	case status >= 300 && status < 400:
		r.Status = crawl.StatusRedirect
		if loc := ex.header.Get("Location"); loc != "" {
			if to, err := w.resolve(t.url, loc); err == nil {
				r.RedirectTo = to
				if urlnorm.Host(to) != "" && t.hops < maxRobotsRedirects {
					t.location = to
				}
			}
		}
	case status == http.StatusTooManyRequests || status >= 500:
		r.Status, r.Retry, r.Err = crawl.StatusError, true, "fetcher: robots.txt HTTP "+ex.statusText
		t.outcome = outcomeFailure
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			t.retryAfter = retryAfter(ex.header, time.Now())
		}
	case status >= 400:
		r.Status = crawl.StatusGone
	case status == 0 && oc == outcomeLocal:
		// Refused before an answer, for no transient reason (a
		// certificate that does not verify): not unreachable, refused.
		r.Status, r.Err, t.refused = crawl.StatusError, why, why
	case status == 0:
		r.Status, r.Retry, r.Err = crawl.StatusError, true, why
	default:
		r.Status, r.Err = crawl.StatusError, "fetcher: robots.txt HTTP "+ex.statusText
	}
	if t.location == "" {
		t.policy = robots.FromResponse(status, t.body).Agent(f.o.RobotsAgent)
		switch {
		case !t.policy.Unavailable():
			t.cacheControl = strings.Join(ex.header.Values("Cache-Control"), ",")
		case !t.since.IsZero() && t.start.Sub(t.since) > robots.UnreachableLimit:
			t.policy, t.stale = robots.Stale(int(t.lastStatus), t.lastGood).Agent(f.o.RobotsAgent), true
		}
	}
	f.deliver(r)
}

// maxRetryAfter bounds the Retry-After read (the scheduler caps it at
// Options.BackoffMax).
const maxRetryAfter = 1 << 31 * time.Second

// retryAfter returns the wait that the Retry-After of a 429 or 503 answer
// with header h asks for (RFC 9110 10.2.3): delay-seconds, or an HTTP-date
// counted from the answer's Date (the server's own clock, so that a
// server whose clock is off asks for what it means) or, without a valid
// Date, from now. 0: none, not valid, or past.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if c := v[0]; c >= '0' && c <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return maxRetryAfter
		case err != nil:
			return 0
		}
		return time.Duration(min(n, uint64(maxRetryAfter/time.Second))) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	return min(max(at.Sub(now), 0), maxRetryAfter)
}

// sitemap fetches a sitemap and reports its URLs. An index's same-host
// child sitemaps go back to the scheduler (t.children) if t.expand.
func (w *worker) sitemap(t *task) {
	f := w.f
	f.c.sitemaps.Add(1)
	err := w.get(t, t.url)
	oc, why := w.failure(err)
	t.outcome = oc
	if oc == outcomeStopped {
		return
	}
	r := &Result{Job: t.job, Kind: KindSitemap, FetchedAt: t.start, Wait: t.wait, Took: t.took()}
	w.fill(r)
	switch {
	case oc == outcomeFailure:
		r.Status, r.Retry, r.Err = crawl.StatusError, true, why
	case oc == outcomeLocal:
		r.Status, r.Err = crawl.StatusError, why
	default:
		t.outcome = w.sitemapBody(t, r)
	}
	f.deliver(r)
}

// sitemapBody parses a fetched sitemap into r.Links (or t.children).
func (w *worker) sitemapBody(t *task, r *Result) outcome {
	ex := &w.ex
	switch s := ex.status; {
	case s == http.StatusNotFound || s == http.StatusGone:
		r.Status = crawl.StatusGone
		return outcomeOK
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable || s == http.StatusBadGateway || s == http.StatusGatewayTimeout:
		// The server (or what is in front of it) is overloaded or down:
		// retry the URL and count a failure of the host, no request to it
		// before its Retry-After.
		r.Status, r.Retry, r.Err = crawl.StatusError, true, "fetcher: HTTP "+ex.statusText
		if s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable {
			t.retryAfter = retryAfter(ex.header, time.Now())
		}
		return outcomeFailure
	case s >= 500:
		// The server answered, with an error of this URL (500 and the
		// like): retry the URL later, but the host is fine.
		r.Status, r.Retry, r.Err = crawl.StatusError, true, "fetcher: HTTP "+ex.statusText
		return outcomeOK
	case s < 200 || s >= 300:
		r.Status, r.Err = crawl.StatusError, "fetcher: HTTP "+ex.statusText
		return outcomeOK
	}
	// A .xml.gz served as is is inflated as it is parsed; the inflated
	// size is bounded as the fetched size is, by MaxSitemapBytes. XML or
	// text is told by the body's start (links.Sitemap).
	entries, index, err := links.ReadSitemap(ex.body, w.f.o.MaxSitemapURLs, w.f.o.MaxSitemapBytes)
	if err != nil && len(entries) == 0 {
		r.Status, r.Err = crawl.StatusError, "fetcher: sitemap: "+err.Error()
		return outcomeOK
	}
	if err != nil {
		w.f.log.Debug("fetcher: sitemap read in part", "url", r.URL, "entries", len(entries), "err", err)
	}
	r.Status = crawl.StatusFetched
	n := w.f.o.Normalizer
	var out []string
	var mods []time.Time
	for _, e := range entries {
		u, err := n.Normalize(w.buf[:0], []byte(e.Loc))
		if err != nil {
			continue
		}
		w.buf = u[:0]
		if index {
			if t.expand && urlnorm.Host(string(u)) == t.name && len(out) < maxSitemaps {
				out = append(out, string(u))
			}
			continue
		}
		v := w.f.o.Scope.Check(u)
		if v.Trap() {
			w.trap(&r.Traps, v, string(u), t.url, "fetcher: sitemap entry refused as a trap")
		}
		if v == urlnorm.Allowed {
			if !e.LastMod.IsZero() && mods == nil {
				mods = make([]time.Time, len(out), len(entries))
			}
			out = append(out, string(u))
			if mods != nil {
				mods = append(mods, e.LastMod)
			}
		}
	}
	if !index {
		r.LastMods = mods
	}
	if index {
		t.children = out
	} else {
		r.Links = out
	}
	return outcomeOK
}

// bodyLimit is the most body bytes kept of the current request's
// response: MaxSitemapBytes for a sitemap, MaxBodyBytes otherwise.
func (w *worker) bodyLimit() int64 {
	if w.cur != nil && w.cur.kind == taskSitemap {
		return w.f.o.MaxSitemapBytes
	}
	return w.f.o.MaxBodyBytes
}

// setup loads the host's stored state, resolves its name if needed and
// checks its addresses (usableAddrs).
func (w *worker) setup(t *task) {
	f := w.f
	now := time.Now()
	if t.load && f.o.Hosts != nil {
		rec, ok, err := f.o.Hosts.LoadHost(t.name)
		if err != nil {
			f.log.Warn("fetcher: load host", "host", t.name, "err", err)
		} else if ok {
			t.rec, t.recOK = rec, true
			if rec.RobotsStatus != 0 && now.Before(rec.RobotsExpiry) {
				p := robots.FromResponse(int(rec.RobotsStatus), rec.Robots).Agent(f.o.RobotsAgent)
				if !p.Unavailable() {
					t.policy = p
				}
			}
		}
	}
	if t.recOK && len(t.rec.IPs) > 0 && now.Before(t.rec.IPsExpiry) {
		t.ips, t.ipsExpiry = t.rec.IPs, t.rec.IPsExpiry
	} else {
		f.c.dns.Add(1)
		ctx, cancel := context.WithTimeout(w.ctx, f.o.ConnectTimeout)
		ips, exp, err := f.resolver.Lookup(ctx, t.name)
		cancel()
		switch {
		case w.ctx.Err() != nil:
			t.stopped = true
			return
		case err == nil && len(ips) == 0:
			err = dnscache.ErrNotFound
		}
		if err != nil {
			f.c.dnsErr.Add(1)
			t.dnsErr = err
			return
		}
		t.ips, t.ipsExpiry = ips, later(exp, now.Add(minIPsTTL))
	}
	t.ips, t.forbidden = usableAddrs(t.ips, f.o.AllowPrivate, f.o.LocalAddrs)
	if t.forbidden == nil {
		t.forbidden = f.checkContact(t.name, t.ips)
	}
}

// usableAddrs returns the addresses of ips that netguard lets through, in
// the order to connect in: those whose family has a local address (with
// locals) before those that have none, each in ips's order. If netguard
// refuses them all, it returns ips and the first address's error. ips is
// not changed; the result is ips itself when netguard refuses none and
// the first has a local address.
func usableAddrs(ips []netip.Addr, allowPrivate bool, locals []netip.Addr) ([]netip.Addr, error) {
	n := 0
	var first error
	for _, ip := range ips {
		if err := netguard.Check(ip, allowPrivate); err != nil {
			first = cmp.Or(first, err)
		} else {
			n++
		}
	}
	usable := func(ip netip.Addr) bool {
		_, err := localaddr.Pick(locals, ip)
		return err == nil
	}
	switch {
	case n == 0:
		return ips, first
	case n == len(ips) && (len(locals) == 0 || usable(ips[0])):
		return ips, nil // the common case: every address allowed, the first reachable
	}
	out := make([]netip.Addr, 0, n)
	for pass := range 2 {
		for _, ip := range ips {
			if netguard.Check(ip, allowPrivate) == nil && usable(ip) == (pass == 0) {
				out = append(out, ip)
			}
		}
	}
	return out, nil
}

// isNotFound reports whether a resolver error means the name does not exist.
func isNotFound(err error) bool { return errors.Is(err, dnscache.ErrNotFound) }

// trap counts in c a URL (a redirect's target, a sitemap's entry) that the
// scope refused by trap rule v, and logs msg at debug level.
func (w *worker) trap(c *TrapCounts, v urlnorm.Verdict, url, from, msg string) {
	switch v {
	case urlnorm.TrapRepetition:
		c.Repetition++
	case urlnorm.TrapCalendar:
		c.Calendar++
	}
	if w.f.log.Enabled(w.ctx, slog.LevelDebug) {
		w.f.log.Debug(msg, "rule", v.String(), "url", url, "from", from)
	}
}

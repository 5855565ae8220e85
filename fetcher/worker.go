package fetcher

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/links"
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
	// nearDupFP is the SimHash of the page being classified when it is a
	// near-duplicate (Result.NearDupOf), for its WARC metadata record.
	nearDupFP uint64
}

func newWorker(ctx context.Context, f *Fetcher) *worker {
	w := &worker{f: f, ctx: ctx, cctx: colly.NewContext(), buf: make([]byte, 0, 512)}
	w.hdr = http.Header{"User-Agent": {f.o.UserAgent}, "Accept": {"*/*"}}
	w.ext = links.NewExtractor(f.o.Normalizer, f.o.Scope, f.o.MaxLinks)
	w.ext.SetRequisites(f.o.PageRequisites)
	if f.o.NearDup != nil {
		w.sh = &simhash.Hasher{}
		w.ext.SetText(w.sh)
	}
	w.tr = &httptrace.ClientTrace{GotConn: w.gotConn}
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

// get fetches url from t.ip through colly. The exchange holds the outcome;
// the error is colly's when no response arrived.
func (w *worker) get(t *task, url string) error {
	w.ex.reset()
	hdr := w.hdr
	if t.kind == taskPage && t.job.Prev != (Prev{}) {
		hdr = w.conditional(&t.job.Prev)
	}
	t.start = time.Now()
	ctx, cancel := context.WithTimeout(w.ctx, w.f.o.TotalTimeout)
	abort := t.abort
	if abort == nil { // a task not handed out by the scheduler (tests)
		abort = w.f.abortContext()
	}
	stopAbort := context.AfterFunc(abort, cancel)
	defer stopAbort()
	ctx = context.WithValue(ctx, dialKey{}, &dialTarget{ip: t.ip})
	ctx = httptrace.WithClientTrace(ctx, w.tr)
	w.cur = t
	w.c.Context = ctx
	err := w.c.Request(http.MethodGet, url, nil, w.cctx, hdr)
	w.c.Context = w.ctx
	w.cur = nil
	cancel()
	t.end = time.Now()
	f := w.f
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
	h["User-Agent"], h["Accept"] = w.hdr["User-Agent"], w.hdr["Accept"]
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
		Request:   resp[:len(req):len(req)],
		Response:  resp[len(req):],
		Body:      ex.body,
		Truncated: ex.truncated,
	}
	if !x.IP.IsValid() {
		x.IP = t.ip
	}
	if t.kind == taskPage {
		switch p := &t.job.Prev; {
		case ex.status == http.StatusNotModified && ex.conditional():
			x.Revisit, x.RefersToDate = warcfile.RevisitNotModified, p.FetchedAt
		case ex.unchanged(p) && ex.truncated == "":
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
	w.nearDupFP = 0
	switch oc {
	case outcomeFailure:
		r.Status, r.Retry, r.Err = crawl.StatusError, true, why
	case outcomeLocal:
		r.Status, r.Err = crawl.StatusError, why
	default:
		t.outcome = w.classify(r)
	}
	// The page's records are written once it is read: what it says of
	// itself (a near-duplicate, noindex) goes into the records after its
	// response.
	if w.ex.gotResponse && w.ctx.Err() == nil {
		w.writeWARC(url, t)
		if r.NearDupOf != "" {
			w.writeNearDup(url, r.NearDupOf, w.nearDupFP)
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
		if !isHTML(r.ContentType, ex.body) {
			if w.f.o.PageRequisites && isCSS(r.ContentType, r.URL) {
				r.Embeds = w.ext.ExtractCSS(r.URL, ex.body).Embeds
			}
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
		p := w.ext.Extract(r.URL, r.ContentType, ex.body)
		r.Links = slices.Clone(p.Links) // the strings stay valid; the slice is reused
		r.Embeds = p.Embeds             // nil with requisites off; made anew by each page
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
		// retry the URL and count a failure of the host.
		r.Status, r.Retry, r.Err = crawl.StatusError, true, "fetcher: HTTP "+ex.statusText
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

// robots fetches robots.txt. A same-host redirect is handed back to the
// scheduler (t.location) to be fetched as its own polite request.
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
				if urlnorm.Host(to) == t.name && t.hops < maxRobotsRedirects {
					t.location = to
				}
			}
		}
	case status == http.StatusTooManyRequests || status >= 500:
		r.Status, r.Retry, r.Err = crawl.StatusError, true, "fetcher: robots.txt HTTP "+ex.statusText
		t.outcome = outcomeFailure
	case status >= 400:
		r.Status = crawl.StatusGone
	case status == 0:
		r.Status, r.Retry, r.Err = crawl.StatusError, true, why
	default:
		r.Status, r.Err = crawl.StatusError, "fetcher: robots.txt HTTP "+ex.statusText
	}
	if t.location == "" {
		t.policy = robots.FromResponse(status, t.body).Agent(f.o.RobotsAgent)
	}
	f.deliver(r)
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
		// retry the URL and count a failure of the host.
		r.Status, r.Retry, r.Err = crawl.StatusError, true, "fetcher: HTTP "+ex.statusText
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
	body := ex.body
	if len(body) > 2 && body[0] == 0x1f && body[1] == 0x8b { // a .xml.gz served as is
		var err error
		if body, err = gunzip(body, w.f.o.MaxBodyBytes); err != nil {
			r.Status, r.Err = crawl.StatusError, "fetcher: sitemap: "+err.Error()
			return outcomeOK
		}
	}
	entries, index, err := links.SitemapEntries(body, w.f.o.MaxSitemapURLs)
	if err != nil && len(entries) == 0 {
		r.Status, r.Err = crawl.StatusError, "fetcher: sitemap: "+err.Error()
		return outcomeOK
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

// gunzip inflates a gzip body, at most limit bytes.
func gunzip(b []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, limit))
	if err != nil && len(out) == 0 {
		return nil, err
	}
	return out, nil
}

// setup loads the host's stored state, resolves its name if needed and
// checks the address.
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
	if err := netguard.Check(t.ips[0], f.o.AllowPrivate); err != nil {
		t.forbidden = err
	}
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

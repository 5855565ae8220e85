package realweb

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// JudgeOptions say how the crawler judged was run.
type JudgeOptions struct {
	// UserAgent is the User-Agent the crawler was given; every request
	// must carry it. "" → not checked.
	UserAgent string
	// Proxy: the crawler was sent through ProxyURL.
	Proxy bool
	// Cookies: the crawler keeps and sends cookies.
	Cookies bool
	// TLSInsecure: the crawler fetches from servers whose certificate
	// does not verify.
	TLSInsecure bool
	// CalendarPast and CalendarFuture are the years around the web's
	// clock a calendar may be crawled (0: 5 and 1).
	CalendarPast, CalendarFuture int
	// MaxRepeats is how often a path segment may repeat in a row (0: 2).
	MaxRepeats int
}

// Verdict is the judgement of one behaviour from the servers' logs.
type Verdict struct {
	Behaviour string // what a crawler should do
	OK        bool
	Detail    string // what the logs show
}

// String formats v as one line.
func (v Verdict) String() string {
	mark := "FAIL"
	if v.OK {
		mark = "ok  "
	}
	return fmt.Sprintf("%s %-48s %s", mark, v.Behaviour, v.Detail)
}

// judge collects verdicts.
type judge struct {
	w   *Web
	out []Verdict
}

func (j *judge) add(behaviour string, ok bool, format string, args ...any) {
	j.out = append(j.out, Verdict{Behaviour: behaviour, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

// requested reports whether host received a request for path (and, if
// status is not 0, answered it so).
func (j *judge) requested(host, path string, status int) bool {
	for _, r := range j.w.Requests(host) {
		if r.Path() == path && (status == 0 || r.Status == status) {
			return true
		}
	}
	return false
}

// missing returns the paths of host that were not requested.
func (j *judge) missing(host string, paths ...string) []string {
	var out []string
	for _, p := range paths {
		if !j.requested(host, p, 0) {
			out = append(out, p)
		}
	}
	return out
}

// under returns the requests of host whose path starts with prefix.
func (j *judge) under(host, prefix string) []Request {
	var out []Request
	for _, r := range j.w.Requests(host) {
		if strings.HasPrefix(r.Path(), prefix) {
			out = append(out, r)
		}
	}
	return out
}

// Judge reads the servers' logs after a crawl of the web and says, for
// each behaviour of a serious crawler on it, whether the crawler showed
// it.
func (w *Web) Judge(o JudgeOptions) []Verdict {
	if o.CalendarPast == 0 {
		o.CalendarPast = 5
	}
	if o.CalendarFuture == 0 {
		o.CalendarFuture = 1
	}
	if o.MaxRepeats == 0 {
		o.MaxRepeats = 2
	}
	j := &judge{w: w}

	for _, c := range EncodingCases {
		got := false
		var near []string
		for _, r := range w.Requests(HostEncodings) {
			if r.URI == c.Want {
				got = true
			} else if r.URI != "/" && r.URI != "/robots.txt" && !strings.HasSuffix(r.Path(), ".html") {
				near = append(near, r.URI)
			}
		}
		j.add("encoding: "+c.How, got, "want %s; other targets requested: %q", c.Want, near)
	}

	fromRobots := j.requested(HostRobotsFrom, "/robots.txt", 0)
	toRobots := j.requested(HostRobotsTo, "/robots.txt", 0)
	private := append(j.under(HostRobotsFrom, "/private/"), j.under(HostRobotsTo, "/private/")...)
	public := j.requested(HostRobotsFrom, "/public.html", 0)
	j.add("robots.txt redirected to another host obeyed", fromRobots && toRobots && len(private) == 0 && public,
		"robots.txt asked of %s %v and of %s %v; disallowed pages requested %d; allowed page requested %v",
		HostRobotsFrom, fromRobots, HostRobotsTo, toRobots, len(private), public)

	botOnly := j.under(HostAgent, "/bot-only/")
	everyone := j.requested(HostAgent, "/everyone/a.html", 0)
	j.add("robots.txt group of the crawler's own token", len(botOnly) == 0 && everyone,
		"pages only %s may not fetch requested: %d; pages only * may not fetch requested: %v (its own group replaces *)", AgentToken, len(botOnly), everyone)

	j.judgeRetryAfter()

	v6 := j.requested(HostIPv6, "/v6-page.html", 0)
	j.add("IPv6-only host (AAAA on ::1) crawled", v6, "page requested: %v (%d requests in all)", v6, len(w.Requests(HostIPv6)))

	dual := j.requested(HostDualStack, "/dual-page.html", 0)
	j.add("host whose first two addresses refuse crawled", dual, "page requested at its third address after ::1 and %v refused: %v (%d requests in all)", deadAddr, dual, len(w.Requests(HostDualStack)))

	h2ok, h505 := 0, 0
	for _, r := range w.Requests(HostHTTP2) {
		switch {
		case r.Proto == "HTTP/2.0" && r.Status == 200:
			h2ok++
		case r.Status == http.StatusHTTPVersionNotSupported:
			h505++
		}
	}
	h2page := j.requested(HostHTTP2, "/h2-page.html", 200)
	j.add("HTTP/2-only host crawled over HTTP/2", h2page && h505 == 0, "200s over HTTP/2: %d, 505s to HTTP/1.1: %d, page fetched: %v", h2ok, h505, h2page)

	trap := j.under(HostTraps, "/trap/")
	deepest := ""
	for _, r := range trap {
		if len(r.Path()) > len(deepest) {
			deepest = r.Path()
		}
	}
	// /trap/, then "a/" repeated up to MaxRepeats times.
	j.add("path-repetition trap bounded", len(trap) <= o.MaxRepeats+1 && len(trap) > 0,
		"%d requests under /trap/ (at most %d allowed), deepest %s", len(trap), o.MaxRepeats+1, deepest)

	now := w.o.Now()
	cal := j.under(HostTraps, "/cal/")
	outside := 0
	minY, maxY := 10000, 0
	for _, r := range cal {
		var y, m int
		if _, err := fmt.Sscanf(r.Path(), "/cal/%d/%d/", &y, &m); err != nil {
			continue
		}
		minY, maxY = min(minY, y), max(maxY, y)
		if y < now.Year()-o.CalendarPast || y > now.Year()+o.CalendarFuture {
			outside++
		}
	}
	j.add("calendar trap bounded", len(cal) > 0 && outside == 0,
		"%d calendar pages requested, years %d..%d, %d outside %d..%d", len(cal), minY, maxY, outside, now.Year()-o.CalendarPast, now.Year()+o.CalendarFuture)

	nf := j.requested(HostSignals, NoFollowHeaderTarget, 0)
	anf := j.requested(HostSignals, AgentNoFollowTarget, 0)
	other := j.requested(HostSignals, OtherBotTarget, 0)
	j.add("X-Robots-Tag nofollow (all, own token, another's)", !nf && !anf && other,
		"link of a nofollow page requested: %v; of a page nofollow for %s: %v; of a page nofollow for another bot: %v", nf, AgentToken, anf, other)

	j.add("meta robots noindex page: its links followed", j.requested(HostSignals, NoIndexTarget, 0), "%s requested", NoIndexTarget)

	miss := j.missing(HostSignals, CanonicalTarget, CanonicalHeaderTarget)
	j.add("rel=canonical (element, Link header) enqueued", len(miss) == 0, "not requested: %q", miss)
	miss = j.missing(HostSignals, RefreshTarget, RefreshHeaderTarget)
	j.add("refresh (meta http-equiv, Refresh header) followed", len(miss) == 0, "not requested: %q", miss)
	miss = j.missing(HostSignals, FrameTarget, IFrameTarget)
	j.add("frames and iframes followed", len(miss) == 0, "not requested: %q", miss)
	miss = j.missing(HostSignals, append([]string{FeedRSS, FeedAtom}, FeedTargets...)...)
	j.add("feeds (RSS 2.0, Atom in windows-1252) read", len(miss) == 0, "not requested: %q", miss)
	miss = j.missing(HostSignals, TextSitemapTarget)
	j.add("text sitemap read", len(miss) == 0, "not requested: %q", miss)
	miss = j.missing(HostSignals, GzSitemapTarget)
	j.add("gzipped sitemap past 8 MiB inflated read", len(miss) == 0, "not requested: %q", miss)

	var aes []string
	for _, r := range w.Requests(HostCompressed) {
		aes = append(aes, r.Header.Get("Accept-Encoding"))
	}
	slices.Sort(aes)
	aes = slices.Compact(aes)
	all := len(aes) == 1 && accepts(aes[0], "gzip") && accepts(aes[0], "br") && accepts(aes[0], "zstd")
	var targets []string
	for _, c := range CompressedCases {
		targets = append(targets, c.Target)
	}
	miss = j.missing(HostCompressed, targets...)
	j.add("gzip, br and zstd accepted and read", all && len(miss) == 0, "Accept-Encoding sent: %q; links inside not requested: %q", aes, miss)

	sec := false
	for _, r := range w.Requests(HostSecure) {
		if r.TLS && r.Path() == "/secure-page.html" {
			sec = true
		}
	}
	j.add("http → https redirect followed", sec, "the page over TLS requested: %v", sec)

	self, exp := j.requested(HostSelfSigned, "/selfsigned-page.html", 0), j.requested(HostExpired, "/expired-page.html", 0)
	if o.TLSInsecure {
		j.add("--tls-insecure: unverifiable certificates fetched", self && exp, "self-signed host's page requested: %v; expired host's: %v", self, exp)
	} else {
		n := len(w.Requests(HostSelfSigned)) + len(w.Requests(HostExpired))
		j.add("unverifiable certificates refused", n == 0, "%d requests reached hosts whose certificate does not verify", n)
	}

	inside := j.requested(HostSession, InsidePage, 200)
	deeper := j.requested(HostSession, DeeperPage, 0)
	sent := 0
	for _, r := range w.Requests("") {
		if r.Header.Get("Cookie") != "" {
			sent++
		}
	}
	if o.Cookies {
		j.add("--cookies: session cookie sent back", inside && deeper, "page behind the cookie answered 200: %v; its link requested: %v", inside, deeper)
	} else {
		j.add("no cookies kept without --cookies", sent == 0 && !inside, "requests with a Cookie header: %d", sent)
	}

	direct, via := 0, 0
	for _, r := range w.Requests("") {
		switch {
		case r.Host == proxyName:
		case r.ViaProxy:
			via++
		case r.Host != HostIPv6: // ::1 is reached from the proxy's IPv6 source
			direct++
		}
	}
	atProxy := len(w.ProxyRequests())
	if o.Proxy {
		j.add("--proxy: every request through the proxy", direct == 0 && via > 0 && atProxy > 0, "direct requests %d, through the proxy %d, requests at the proxy %d", direct, via, atProxy)
	} else {
		j.add("no proxy without --proxy", atProxy == 0 && via == 0, "requests at the proxy %d", atProxy)
	}

	if o.UserAgent != "" {
		bad := map[string]int{}
		for _, r := range w.Requests("") {
			if r.Host != proxyName && r.Header.Get("User-Agent") != o.UserAgent {
				bad[r.Header.Get("User-Agent")]++
			}
		}
		j.add("User-Agent as given", len(bad) == 0, "other User-Agents sent: %v", bad)
	}
	return j.out
}

// judgeRetryAfter judges HostBusy: no request before the time its 429's
// Retry-After named, and the page fetched after it.
func (j *judge) judgeRetryAfter() {
	reqs := j.w.Requests(HostBusy)
	var first *Request
	for i := range reqs {
		if reqs[i].Status == http.StatusTooManyRequests {
			first = &reqs[i]
			break
		}
	}
	if first == nil {
		j.add("Retry-After on 429 honoured", false, "no 429 was answered (%d requests)", len(reqs))
		return
	}
	until := first.Done.Add(j.w.o.RetryAfter)
	early := 0
	var next time.Duration = -1
	for _, r := range reqs {
		if !r.At.After(first.At) || r.At.Equal(first.At) {
			continue
		}
		if next < 0 {
			next = r.At.Sub(first.Done)
		}
		// 10 ms of slack for the two clocks' reading order.
		if r.At.Before(until.Add(-10 * time.Millisecond)) {
			early++
		}
	}
	again := j.requested(HostBusy, SlowPath, 200)
	j.add("Retry-After on 429 honoured", early == 0 && again,
		"Retry-After %v; next request %v after the 429; requests before then %d; the page fetched later: %v", j.w.o.RetryAfter, next.Round(time.Millisecond), early, again)
}

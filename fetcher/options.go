package fetcher

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/links"
	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/meridian-crawler/meridian/fetcher/robots"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
)

// DefaultUserAgent returns the User-Agent sent when Options.UserAgent is
// empty: "Meridian/0.1 (+CONTACT)", or "Meridian/0.1" without a contact.
func DefaultUserAgent(contact string) string {
	if contact == "" {
		return "Meridian/0.1"
	}
	return "Meridian/0.1 (+" + contact + ")"
}

// RobotsAgent is the product token of the default User-Agent.
const RobotsAgent = "meridian"

// Options configure a Fetcher. Zero values get the documented defaults.
type Options struct {
	// UserAgent is sent with every request. "" → DefaultUserAgent with
	// Contact in it.
	UserAgent string
	// Contact is the URL (or mailto:) where a site owner can reach the
	// crawl's operator; it goes into the default User-Agent. With
	// UserAgent and Contact both "", requests to public addresses (any
	// netguard does not class as loopback, private or link-local) are
	// refused with ErrNoContact: a crawl of the public web must say who
	// runs it. The refusal comes at the host's setup, before any
	// connection: its jobs are answered StatusError, NoRequest, not
	// Retry, with an Err that holds ErrNoContact's text (the host is not
	// backed off; it is set up again after a minute), and the first one
	// is logged. It must be an absolute URL without spaces, control
	// characters, parentheses or backslashes (it goes into a comment of
	// the User-Agent).
	Contact string
	// RobotsAgent is the product token matched (case-insensitively)
	// against robots.txt user-agent lines, "*" being the fallback. "" →
	// the product token of UserAgent (its leading run of letters, '-'
	// and '_': "Meridian/0.1 (...)" → "meridian").
	RobotsAgent string
	// RespectNoIndex: a page that says noindex (Result.NoIndex) is
	// fetched and its links followed, but not archived: its WARC holds
	// a metadata record saying so in place of its response. Off, it is
	// archived as any page, with the metadata record after its response.
	RespectNoIndex bool
	// Proxy, if set, returns the proxy to send a request for a URL
	// through (nil: direct), as golang.org/x/net/http/httpproxy's
	// Config.ProxyFunc does for HTTP_PROXY, HTTPS_PROXY and NO_PROXY:
	// http URLs are sent to it in absolute form, https ones through an
	// HTTP CONNECT tunnel. Politeness stays per target host and address:
	// the fetcher still resolves and checks every host itself (the proxy
	// resolves the name again for its own connection). Only http://
	// proxies are supported (a request whose proxy is another fails,
	// StatusError, not sent); ProxyFunc builds one from a URL and the
	// environment. The WARC records are those of the request to the
	// origin, with no WARC-IP-Address: the fetcher does not know the
	// address the proxy reached, and the proxy's own is not where the
	// content came from. nil → every request is direct.
	Proxy func(*url.URL) (*url.URL, error)
	// TLSRoots are the certificate authorities trusted for https (nil:
	// the system's, which SSL_CERT_FILE and SSL_CERT_DIR change).
	TLSRoots *x509.CertPool
	// TLSInsecure accepts servers whose certificate does not verify
	// (expired, self-signed, another name), as archival crawlers do; the
	// WARC response record of a page fetched so says why it did not
	// verify (field WARCTLSUnverified). The certificate is still
	// verified (against TLSRoots), once per connection, for that mark.
	// Off, such a fetch fails: StatusError, not Retry, no failure of the
	// host counted, Err saying the certificate did not verify; a
	// robots.txt that fails so is unavailable, as when unreachable.
	TLSInsecure bool
	// Cookies keeps the cookies servers set, per host, in memory, and
	// sends them back to that host (consent and session walls), at most
	// MaxCookieHosts hosts (the least recently used go first) and
	// maxCookiesPerHost (50) cookies and 8 KiB of names and values a
	// host (the least recently used go first); a cookie whose name and
	// value pass 4 KiB is refused. A
	// cookie is host-only whatever its Domain; Path, Secure (sent over
	// https only), Expires and Max-Age are honoured; cookies set by any
	// response count, redirects included. The WARC request record shows
	// the Cookie header sent. Off, no cookie is kept or sent.
	Cookies bool
	// MaxCookieHosts bounds the hosts whose cookies are kept. 0 → 10,000.
	MaxCookieHosts int
	// MaxSitemapBytes is the most bytes of a sitemap read, after gzip
	// decoding (the protocol's limit is 50 MiB). 0 → 50 MiB.
	MaxSitemapBytes int64
	// Workers is the number of concurrent fetches (and DNS/host-state
	// lookups). 0 → 256.
	Workers int
	// HostDelay is the least gap between the end of one request to a host and
	// the start of the next. 0 → 1 s.
	HostDelay time.Duration
	// IPDelay is the least gap between the starts of two requests to one IP
	// (an IPv4 address, or an IPv6 /64: one link, one machine's or one
	// customer's). 0 → none.
	IPDelay time.Duration
	// MaxCrawlDelay caps a robots.txt Crawl-delay. 0 → 30 s.
	MaxCrawlDelay time.Duration
	// ConnectTimeout bounds a TCP connect (and a TLS handshake). 0 → 5 s.
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for the response headers once the request
	// is written. 0 → 10 s.
	HeaderTimeout time.Duration
	// TotalTimeout bounds a whole exchange, body included. 0 → 30 s.
	TotalTimeout time.Duration
	// MaxBodyBytes is the most body bytes kept of a page or robots.txt,
	// both as received and once decoded (gzip, br, zstd): longer bodies
	// as received are cut (WARC-Truncated: length); a body that decodes to
	// more is read to it, its record whole. 0 → 8 MiB.
	MaxBodyBytes int64
	// MaxRedirectHops is not used by the fetcher (it never follows page
	// redirects); it is kept for the caller. 0 → 10.
	MaxRedirectHops int
	// RobotsTTL is how long a robots.txt is trusted. 0 → 24 h.
	RobotsTTL time.Duration
	// AllowPrivate allows loopback, private and link-local addresses (tests,
	// websim). Off, such hosts fail with StatusError.
	AllowPrivate bool
	// Resolver resolves host names. nil → a dnscache.Resolver with the
	// system's DNS server, made by New.
	Resolver *dnscache.Resolver
	// Port, if not 0, is dialled instead of the URL's port.
	Port int
	// LocalAddrs are the local addresses HTTP connections (pages,
	// robots.txt, sitemaps) leave from, for a multi-homed crawler or to
	// tell crawlers on one machine apart. A connection to an IP leaves from
	// one of the addresses of its family, always the same for that IP (a
	// hash of it, see localaddr.Pick), so a host sees one crawler address.
	// A connection to an IP whose family none of them has fails (no
	// fallback to the system's choice). Every address must be the
	// machine's (New checks by binding a socket). The resolver is not
	// changed: give it the same addresses (dnscache.Options.LocalAddrs);
	// the one New makes when Resolver is nil gets them. nil → the system
	// chooses.
	LocalAddrs []netip.Addr
	// WARC receives every exchange that got a response. nil → no WARC.
	WARC *warcfile.Writer
	// Hosts persists per-host state (robots, DNS, back-off). nil → memory only.
	Hosts HostStore
	// Normalizer normalises redirect targets, links and sitemap entries.
	// nil → urlnorm.New(urlnorm.Options{}).
	Normalizer *urlnorm.Normalizer
	// Scope filters links and sitemap entries. nil → &urlnorm.Scope{}.
	Scope *urlnorm.Scope
	// MaxLinks caps the links taken from one page, and its embeds. 0 → 5000.
	MaxLinks int
	// PageRequisites makes page results report the page's requisites in
	// Result.Embeds (links.Extractor.SetRequisites: images, scripts,
	// style sheets, icons, CSS url() and @import), and stylesheet results
	// (Content-Type text/css) their url() and @import references. Off,
	// Embeds is always nil and nothing else changes. Embeds pass the
	// Scope as links do: the default SkipExts (urlnorm.DefaultSkipExts)
	// refuse images, scripts and style sheets, so a crawl of requisites
	// gives SkipExts an empty slice.
	PageRequisites bool
	// Seen reports whether a page body with this fingerprint was already seen
	// under another URL; true makes the page StatusDuplicate. It is called
	// from worker goroutines. nil → no deduplication.
	Seen func(contentFP uint64, url string) bool
	// OnResult receives every finished job, robots.txt and sitemap fetch. It
	// is called from worker goroutines and from the scheduler goroutine (for
	// jobs decided without a request), so it must be quick and must not wait
	// for the Fetcher. The Result belongs to the callee.
	OnResult func(*Result)
	// Skip, if set, is asked before a job's request starts, and before its
	// host's setup or robots.txt request; true drops the job: it is
	// answered without a request (Retry, NoRequest) and its caller is
	// expected to ignore that answer (the job's work moved to another
	// node). A host whose jobs are all dropped gets no request. It is
	// called from the scheduler goroutine, possibly several times per job,
	// and must be quick.
	Skip func(*Job) bool
	// NearDup, if set, is asked of every HTML page answered 2xx that is
	// neither an exact duplicate (Seen) nor unchanged since its last
	// fetch, and has text enough for a fingerprint: given the page's
	// SimHash (package simhash, of the text the link extractor reads), it
	// returns the URL of an earlier page this one is a near-duplicate of
	// ("" if none). A near-duplicate keeps its status and links; its
	// Result says what it duplicates (NearDupOf), and a WARC metadata
	// record after its response says so too. It is called from worker
	// goroutines.
	NearDup func(host, url string, fingerprint uint64) (original string)
	// Override, if set, gives an operator's override of a host's
	// politeness: a delay that replaces HostDelay for it (a longer
	// robots.txt Crawl-delay, capped, still applies; 0: none), and
	// whether the host is blocked: a blocked host's jobs are answered
	// without a request (Retry, NoRequest, StatusError) and it gets no
	// request, robots.txt included, while it is. It is called from the
	// scheduler goroutine before each of a host's requests, and must be
	// quick.
	Override func(host string) (delay time.Duration, blocked bool)
	// Logger receives debug and warning messages. nil → discard.
	Logger *slog.Logger

	// BackoffBase is the first back-off of a failing host; each further
	// failure doubles it. 0 → 5 s.
	BackoffBase time.Duration
	// BackoffMax caps a host's back-off. 0 → 10 min.
	BackoffMax time.Duration
	// DeadEndBackoffMax caps the back-off of a host that gave no answer at
	// all: its DNS server failed (SERVFAIL, REFUSED, timeout) or its
	// robots.txt got no HTTP response (connection refused, reset or timed
	// out). Such hosts are transient only in name on the real web, and a
	// crawl must not wait minutes for them to end. 0 → 15 s (never above
	// BackoffMax).
	DeadEndBackoffMax time.Duration
	// MaxFailures consecutive failures (5xx, 429, timeouts, connection
	// errors) put a host in back-off. 0 → 3.
	MaxFailures int
	// HostIdleTTL is how long a host with nothing queued stays in the
	// workbench (at least the longest politeness delay). 0 → 2 min.
	HostIdleTTL time.Duration
	// MaxSitemapURLs caps the URLs taken from one sitemap. 0 → 50,000.
	MaxSitemapURLs int
}

// Option defaults.
const (
	defaultWorkers        = 256
	defaultHostDelay      = time.Second
	defaultMaxCrawlDelay  = 30 * time.Second
	defaultConnectTimeout = 5 * time.Second
	defaultHeaderTimeout  = 10 * time.Second
	defaultTotalTimeout   = 30 * time.Second
	defaultMaxBodyBytes   = 8 << 20
	defaultMaxRedirects   = 10
	defaultRobotsTTL      = 24 * time.Hour
	defaultMaxLinks       = 5000
	defaultBackoffBase    = 5 * time.Second
	defaultBackoffMax     = 10 * time.Minute
	defaultDeadEndBackoff = 15 * time.Second
	defaultMaxFailures    = 3
	defaultHostIdleTTL    = 2 * time.Minute
	defaultSitemapURLs    = 50_000
	defaultSitemapBytes   = links.MaxSitemapBytes

	// maxRobotsRedirects is how many redirects a robots.txt fetch follows,
	// to any host (RFC 9309 2.3.1.2); past them robots.txt is unavailable.
	maxRobotsRedirects = 5
	// maxSitemaps is how many sitemaps are fetched after one robots.txt.
	maxSitemaps = 10
	// negativeTTL is how long a host that does not resolve or resolves to a
	// forbidden address is remembered as such.
	negativeTTL = time.Minute
	// minIPsTTL is the shortest time resolved addresses are trusted.
	minIPsTTL = 5 * time.Second
)

// ensureDefaults fills zero fields with their defaults.
func (o *Options) ensureDefaults() {
	setDur := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent(o.Contact)
	}
	if o.RobotsAgent == "" {
		o.RobotsAgent = robots.ProductToken(o.UserAgent)
	}
	if o.Workers == 0 {
		o.Workers = defaultWorkers
	}
	setDur(&o.HostDelay, defaultHostDelay)
	setDur(&o.MaxCrawlDelay, defaultMaxCrawlDelay)
	setDur(&o.ConnectTimeout, defaultConnectTimeout)
	setDur(&o.HeaderTimeout, defaultHeaderTimeout)
	setDur(&o.TotalTimeout, defaultTotalTimeout)
	setDur(&o.RobotsTTL, defaultRobotsTTL)
	setDur(&o.BackoffBase, defaultBackoffBase)
	setDur(&o.BackoffMax, defaultBackoffMax)
	setDur(&o.DeadEndBackoffMax, defaultDeadEndBackoff)
	setDur(&o.HostIdleTTL, defaultHostIdleTTL)
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = defaultMaxBodyBytes
	}
	if o.MaxRedirectHops == 0 {
		o.MaxRedirectHops = defaultMaxRedirects
	}
	if o.MaxLinks == 0 {
		o.MaxLinks = defaultMaxLinks
	}
	if o.MaxFailures == 0 {
		o.MaxFailures = defaultMaxFailures
	}
	if o.MaxSitemapURLs == 0 {
		o.MaxSitemapURLs = defaultSitemapURLs
	}
	if o.MaxCookieHosts == 0 {
		o.MaxCookieHosts = defaultMaxCookieHosts
	}
	if o.MaxSitemapBytes == 0 {
		o.MaxSitemapBytes = defaultSitemapBytes
	}
	if o.Normalizer == nil {
		o.Normalizer = urlnorm.New(urlnorm.Options{})
	}
	if o.Scope == nil {
		o.Scope = &urlnorm.Scope{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem with o (after defaults) at once.
func (o Options) Validate() error {
	o.ensureDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("fetcher: "+format, args...)) }
	if o.Workers < 1 || o.Workers > 1<<16 {
		bad("workers must be in [1, %d], got %d", 1<<16, o.Workers)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"host delay", o.HostDelay}, {"max crawl delay", o.MaxCrawlDelay},
		{"connect timeout", o.ConnectTimeout}, {"header timeout", o.HeaderTimeout},
		{"total timeout", o.TotalTimeout}, {"robots ttl", o.RobotsTTL},
		{"backoff base", o.BackoffBase}, {"backoff max", o.BackoffMax}, {"dead-end backoff max", o.DeadEndBackoffMax}, {"host idle ttl", o.HostIdleTTL},
	} {
		if d.v < 0 {
			bad("%s must not be negative, got %v", d.name, d.v)
		}
	}
	if o.IPDelay < 0 {
		bad("ip delay must not be negative, got %v", o.IPDelay)
	}
	if o.MaxBodyBytes < 1 || o.MaxBodyBytes > 1<<30 {
		bad("max body bytes must be in [1, %d], got %d", 1<<30, o.MaxBodyBytes)
	}
	if o.MaxSitemapBytes < 1 || o.MaxSitemapBytes > 1<<30 {
		bad("max sitemap bytes must be in [1, %d], got %d", 1<<30, o.MaxSitemapBytes)
	}
	if o.MaxRedirectHops < 0 || o.MaxLinks < 0 || o.MaxFailures < 0 || o.MaxSitemapURLs < 0 {
		bad("max redirect hops, max links, max failures and max sitemap urls must not be negative")
	}
	if o.MaxCookieHosts < 0 {
		bad("max cookie hosts must not be negative, got %d", o.MaxCookieHosts)
	}
	if err := checkContactURL(o.Contact); err != nil {
		bad("contact %q: %w", o.Contact, err)
	}
	if o.Port < 0 || o.Port > 65535 {
		bad("port must be in [0, 65535], got %d", o.Port)
	}
	if o.OnResult == nil {
		bad("OnResult is required")
	}
	for _, a := range o.LocalAddrs {
		if err := localaddr.Check(a); err != nil {
			bad("local address %w", err)
		}
	}
	return errors.Join(errs...)
}

// checkContactURL checks an Options.Contact: "" or an absolute URL that
// can stand in a User-Agent comment.
func checkContactURL(c string) error {
	if c == "" {
		return nil
	}
	if i := strings.IndexFunc(c, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune(`()\`, r) }); i >= 0 {
		return fmt.Errorf("byte %d is %q: no spaces, control characters, parentheses or backslashes", i, c[i])
	}
	u, err := url.Parse(c)
	if err != nil {
		return err
	}
	if u.Scheme == "" || (u.Host == "" && u.Opaque == "") {
		return errors.New("not an absolute URL (https://… or mailto:…)")
	}
	return nil
}

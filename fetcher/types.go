package fetcher

import (
	"errors"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
)

// Sentinel errors.
var (
	// ErrRunning is returned by Run when the Fetcher is already running or
	// has run.
	ErrRunning = errors.New("fetcher: already running")
	// ErrNoContact is the error of a request to a public address by a
	// fetcher with neither a UserAgent nor a Contact (Options.Contact).
	ErrNoContact = errors.New("fetcher: a crawl of public addresses needs a contact (--contact URL) or a --user-agent")
)

// Job is one URL to fetch.
type Job struct {
	URL   string // normalised
	Host  string // the URL's host, without port
	Round uint64
	Depth uint32
	Cash  float64 // carried through to the Result untouched
	// Part is the caller's name for the share of the round the job belongs
	// to; carried through untouched.
	Part uint32
	// Group is the caller's name for the group of jobs the job belongs to
	// (a node's shard): PauseGroup, AbortGroup and GroupStats act on it.
	// A host's jobs are of one group (hosts of different shards never
	// overlap); the host follows the group of its latest job. Carried
	// through untouched, and set on the host's robots.txt and sitemap
	// Results.
	Group uint32
	// Take is the caller's name for the hand-over of the part that the job
	// came with (a part can be taken, moved away and taken again); carried
	// through untouched.
	Take uint64
	// NotBefore, if set, is the earliest start of any request to the job's
	// host (the host was fetched by another node until shortly before).
	NotBefore time.Time
	// FreshRobots asks for the host's robots.txt (and so its sitemaps) to
	// be fetched again rather than taken from the HostStore, unless this
	// fetcher fetched it itself: the node that stored it may have died
	// before the URLs of its sitemaps were kept.
	FreshRobots bool
	// Prev is what the crawl database knows of the URL's last fetch; the
	// zero value means a first fetch. A page job with a valid ETag or
	// Last-Modified in it is sent as a conditional request.
	Prev Prev
}

// Prev is what is known of the last fetch of a URL: a Job with it is a
// refetch. Validators that are empty, longer than MaxValidatorBytes or hold
// control characters or bordering spaces are not sent.
type Prev struct {
	// FetchedAt is when the URL was last fetched (Result.FetchedAt); it
	// becomes WARC-Refers-To-Date of a revisit record. Zero: unknown.
	FetchedAt time.Time
	// ContentFP is the fingerprint of the body last fetched
	// (Result.ContentFP); 0: unknown.
	ContentFP uint64
	// ETag is the ETag the last fetch was answered with (Result.ETag),
	// sent as If-None-Match.
	ETag string
	// LastModified is the Last-Modified the last fetch was answered with
	// (Result.LastModified), sent as If-Modified-Since.
	LastModified string
}

// MaxValidatorBytes is the longest ETag or Last-Modified value the fetcher
// reports in a Result or sends back in a conditional request.
const MaxValidatorBytes = 256

// validator returns v if it is a validator the fetcher reports and sends
// (see Prev), "" if not.
func validator(v string) string {
	if len(v) > MaxValidatorBytes || v == "" || v[0] == ' ' || v[len(v)-1] == ' ' {
		return ""
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f {
			return ""
		}
	}
	return v
}

// Kind says what a Result is about.
type Kind uint8

// The kinds of Result.
const (
	KindPage    Kind = iota // a submitted Job
	KindRobots              // a robots.txt fetch (Job.URL is the robots.txt URL)
	KindSitemap             // a sitemap fetch; Links are its URLs
)

var kindNames = [...]string{"page", "robots", "sitemap"}

// String names the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind?"
}

// Result is the outcome of one job, robots.txt or sitemap fetch.
type Result struct {
	Job
	Kind Kind
	// Status is the final status: StatusFetched, StatusRedirect, StatusGone
	// (404, 410, NXDOMAIN), StatusError, StatusRobotsDenied or
	// StatusDuplicate. With Retry set it is StatusError.
	Status crawl.Status
	// Retry marks a transient failure (timeout, connection error, 5xx, 429,
	// robots.txt unavailable, host backing off): fetch again later.
	Retry       bool
	HTTPStatus  int
	ContentType string
	// RedirectTo is the normalised Location of a 3xx (not followed here).
	RedirectTo string
	// Links are the normalised followable outlinks of an HTML page (its
	// <a>, <area>, frames, refresh, canonical and feed links, and the
	// targets of its Refresh and Link rel=canonical headers), of a feed
	// (its items' and entries' links), or a sitemap's URLs.
	Links []string
	// Embeds are, with Options.PageRequisites, the normalised in-scope
	// requisites of an HTML page or a style sheet (see
	// links.Extractor.SetRequisites), each once; nil otherwise.
	Embeds []string
	// LastMods are a sitemap's <lastmod> of each of Links (zero: none);
	// nil when none of them had one.
	LastMods []time.Time
	// ContentFP is the xxhash of the body; 0 if none. A NotModified page
	// has its Job's Prev.ContentFP.
	ContentFP uint64
	Bytes     int64 // body bytes received (after content decoding)
	FetchedAt time.Time
	// Truncated is the WARC-Truncated reason if the body was cut: "length"
	// (MaxBodyBytes, as received or once decoded: a body that decodes past
	// it is read to it, its WARC record whole), "time" (TotalTimeout) or
	// "disconnect".
	Truncated string
	Err       string // why, for errors and retries
	// NoRequest marks a page job answered without a request for it: robots
	// denied, the host backing off or unreachable, a refused address. A
	// retry of this kind is no fault of the URL's.
	NoRequest bool
	Wait      time.Duration // politeness wait of the request (see Stats.PolitenessWait)
	// Took is the request's time from its start (connection set-up
	// included) to the end of its body; 0 without a request. The host's
	// next request starts no earlier than its end plus the host's delay,
	// so a host's pace is its delay plus what its requests take.
	Took time.Duration
	// ETag and LastModified are the ETag and Last-Modified of a 200 or 304
	// answer, verbatim; "" if absent, longer than MaxValidatorBytes or
	// holding control characters. A 304 that does not repeat one keeps the
	// Job's Prev value (the stored response's validators still hold, as
	// RFC 9111 section 4.3.4 has a cache keep them).
	ETag         string
	LastModified string
	// NotModified marks a page answered 304 Not Modified to a conditional
	// request: Status StatusFetched, HTTPStatus 304, no body, ContentFP the
	// Job's Prev.ContentFP, no Links. Its WARC record is a revisit of the
	// server-not-modified profile. (A 304 to a request that was not
	// conditional is a StatusError.)
	NotModified bool
	// NearDupOf is the URL of the page this one is a near-duplicate of
	// (Options.NearDup; "" if none). The page keeps StatusFetched and
	// its links.
	NearDupOf string
	// NoIndex marks a page that asked not to be indexed: meta robots or
	// X-Robots-Tag noindex (or none), for every agent or for the
	// fetcher's robots agent. It is still fetched, its links followed
	// unless it also said nofollow, and (without Options.RespectNoIndex)
	// archived; a WARC metadata record after its response says so.
	NoIndex bool
	// Canonical is the page's rel=canonical target (a <link
	// rel=canonical> in its head, or a Link header with rel=canonical),
	// normalised; "" if it names none, names the page itself or names a
	// URL that is out of scope. It is also one of Links, unless the page
	// said nofollow.
	Canonical string
	// Traps counts the links of a page, a redirect's target or a
	// sitemap's entries that the trap rules refused (urlnorm.Scope's trap
	// rules).
	Traps TrapCounts
	// Unchanged marks a 2xx page whose body has the Job's Prev.ContentFP
	// (non-zero). It is not checked against Options.Seen (it would be a
	// duplicate of itself), its links are extracted as for any page, and
	// its WARC record is a revisit of the identical-payload-digest profile
	// unless the body was cut (Truncated).
	Unchanged bool
}

// TrapCounts counts links refused as spider traps, by rule.
type TrapCounts struct {
	// Repetition: a path segment, or a run of segments, repeated more
	// than the rule allows (/a/b/a/b/a/b/).
	Repetition int32
	// Calendar: a calendar-like URL whose date is out of the rule's window.
	Calendar int32
}

// Total returns the links refused by every rule.
func (c TrapCounts) Total() int32 { return c.Repetition + c.Calendar }

// Add adds o's counts to c.
func (c *TrapCounts) Add(o TrapCounts) {
	c.Repetition += o.Repetition
	c.Calendar += o.Calendar
}

// HostStore persists per-host state (robots.txt, DNS, back-off) in the crawl
// database.
type HostStore interface {
	// LoadHost returns the stored state of host; ok is false if there is none.
	LoadHost(host string) (rec crawl.HostRecord, ok bool, err error)
	// SaveHost stores the state of host. It must not block for long (the
	// caller batches); the record is not modified afterwards.
	SaveHost(host string, rec crawl.HostRecord)
}

// Stats are the Fetcher's counters.
type Stats struct {
	Queued   int64 // jobs submitted and not yet being fetched or answered
	InFlight int64 // requests (pages, robots.txt, sitemaps) being fetched
	Done     int64 // page jobs answered
	// ByStatus counts page results by status; retries count under
	// StatusError and in Retries as well.
	ByStatus map[crawl.Status]int64
	Retries  int64 // page results with Retry
	// NotModified and Unchanged count the page results with
	// Result.NotModified and Result.Unchanged: refetches that found the
	// page as it was.
	NotModified int64
	Unchanged   int64
	Requests    int64 // HTTP requests sent (pages, robots.txt, sitemaps)
	Bytes       int64 // body bytes received
	// Busy is the sum over workers of the time spent on requests.
	Busy time.Duration
	// PolitenessWait is the sum over requests of the time their host had the
	// request's work ready (something queued, nothing in flight, not backing
	// off) while the host's or its IP's delay did not allow it to start. The
	// time a ready request then waits for a free worker is WorkerWait.
	PolitenessWait time.Duration
	WorkerWait     time.Duration
	RobotsFetches  int64 // robots.txt requests
	RobotsFromDB   int64 // robots.txt policies taken from the HostStore
	SitemapFetches int64 // sitemap requests
	DNSLookups     int64 // resolutions asked of the Resolver
	DNSErrors      int64 // of which failed (NXDOMAIN included)
	Backoffs       int64 // times a host was put in back-off
	Hosts          int64 // hosts in the workbench
	IPs            int64 // IP politeness states in the workbench (an IPv4 address, or an IPv6 /64, each)
}

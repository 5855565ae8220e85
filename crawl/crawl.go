// Package crawl is the vocabulary the crawl database and the fetcher share:
// URL statuses, the per-host politeness record and the limits on URLs and
// robots.txt bodies. It imports nothing outside the standard library.
package crawl

import (
	"fmt"
	"net/netip"
	"time"
)

// Status is where a URL is in its life.
type Status uint8

// URL statuses.
const (
	StatusUnfetched    Status = iota + 1 // in the frontier
	StatusGenerated                      // picked for a round, not yet fetched
	StatusFetched                        // fetched, 2xx
	StatusRedirect                       // fetched, 3xx: its target went through the frontier
	StatusGone                           // fetched, 404/410
	StatusError                          // failed for good (5xx, timeouts) after its retries
	StatusRobotsDenied                   // robots.txt forbids it
	StatusDuplicate                      // fetched, content already seen under another URL

	// StatusCount is one more than the last status: the valid statuses are
	// StatusUnfetched <= s < StatusCount. It is not itself a status.
	StatusCount
)

var statusNames = [StatusCount]string{"", "unfetched", "generated", "fetched", "redirect", "gone", "error", "robots-denied", "duplicate"}

// String names the status, or gives its number ("Status(42)") if it is not a
// valid one.
func (s Status) String() string {
	if int(s) < len(statusNames) && s > 0 {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", s)
}

// HostRecord is what the crawl database keeps per host for politeness.
type HostRecord struct {
	Robots       []byte    // body of the last good robots.txt fetch (2xx or 4xx, after redirects), kept while it is unreachable
	RobotsStatus uint16    // HTTP status of that fetch (0: none)
	RobotsExpiry time.Time // refetch robots.txt after this
	CrawlDelay   time.Duration
	IPs          []netip.Addr
	IPsExpiry    time.Time
	BackoffUntil time.Time // generate skips the host until then
	Failures     uint32    // consecutive failures, for back-off

	// RobotsUnreachableSince is when robots.txt became unreachable (5xx,
	// 429 or no answer: the host is disallowed), the first failed fetch
	// after the last good one; zero while it is reachable. Past
	// robots.UnreachableLimit the last good copy (Robots, RobotsStatus)
	// applies again, or nothing is disallowed without one.
	RobotsUnreachableSince time.Time

	// SitemapsPending: robots.txt, kept in Robots, names sitemaps that
	// were not all fetched when the record was saved. A fetcher that
	// takes the record (a restart, another node) fetches them from the
	// kept robots.txt, so that a kill between the robots.txt record and
	// the sitemaps' results loses none of their URLs.
	SitemapsPending bool
}

// MaxRobotsBytes bounds the robots.txt body kept per host.
const MaxRobotsBytes = 512 << 10

// MaxURLLen is the longest URL the database accepts.
const MaxURLLen = 2048

// HostOf returns the host name of a normalised http(s) URL, without its
// port ("" for any other URL): how the rounds, the federation and the site
// name a URL's host. An IPv6 literal keeps its brackets: "[2001:db8::1]"
// for "http://[2001:db8::1]:8080/".
func HostOf(u string) string {
	i := 0
	switch {
	case len(u) > 8 && u[:8] == "https://":
		i = 8
	case len(u) > 7 && u[:7] == "http://":
		i = 7
	default:
		return ""
	}
	j := i
	if j < len(u) && u[j] == '[' {
		for j < len(u) && u[j] != '/' && u[j] != ']' {
			j++
		}
		if j < len(u) && u[j] == ']' {
			j++
		}
		return u[i:j]
	}
	for j < len(u) && u[j] != '/' && u[j] != ':' {
		j++
	}
	return u[i:j]
}

// Package route holds what the rounds and the routing layer share: where a
// URL belongs (Owner), a URL on its way there with its cash (Remote), and
// the Router the rounds call to send the URLs they do not keep.
//
// One call routes a batch of URLs (Router.Route): the router locates and
// partitions their hosts, gives back the URLs of this shard and writes the
// others into the caller's crawl-database command as outbox entries already
// in their wire encoding, so that they leave atomically with the rest of
// the command and are delivered without being decoded again. A URL's owner
// is a site and a shard of it: a URL of this site's shard is local, one of
// another shard goes to that shard (package shardset), one of another site
// to that site's federation endpoint, which splits it by its own shards
// when it has several.
package route

import (
	"context"
	"fmt"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// Owner is where a host's URLs belong: a site and one of its shards. The
// zero Site is this site; a shard number means something only within its
// site (another site's shards are its own business: a URL for another
// site goes to that site, Shard 0, which routes it further).
type Owner struct {
	Site  string
	Shard int
}

// Here reports whether o is a shard of this site.
func (o Owner) Here() bool { return o.Site == "" }

// String names o for logs: "site", "site/shard N", or "shard N" for this
// site.
func (o Owner) String() string {
	switch {
	case o.Site == "":
		return fmt.Sprintf("shard %d", o.Shard)
	case o.Shard == 0:
		return o.Site
	default:
		return fmt.Sprintf("%s/shard %d", o.Site, o.Shard)
	}
}

// Remote is a URL on its way to the crawl database that owns it, with the
// OPIC cash and the link depth it carries there.
type Remote struct {
	URL   string
	Cash  float64
	Depth uint32
	// Moved: the URL's record moves to its owner (a hand-back of hosts
	// held for a site that was down; later, a shard's hosts moving), so it
	// is sent even if the URL-sent cache has it: the cache says a URL was
	// sent to its owner, and this one may have been taken back here before
	// it was delivered. Without it (a URL found on a page) a URL in the
	// cache is not sent again.
	Moved bool
}

// Sent is what Route wrote into outboxes: the URLs it did not keep and
// their cash in all (URLs already sent before included: their cash still
// travels, to the owner's virtual page).
type Sent struct {
	URLs int
	Cash float64
}

// Router routes the URLs a crawl database does not keep. It does that
// and nothing else; what else the routing layer tells the rounds is in
// the small interfaces below, which a Router may also implement (the
// rounds use each one it does: Inbound, Ending, HandBack).
type Router interface {
	// Route keeps, from urls, those of this shard (returned in their
	// order) and writes the others into b as outbox entries for their
	// owners, so that they leave with b's command. It may locate hosts
	// first (DNS, GeoIP; located once, recorded in the crawl database);
	// the owner it picks for a host must not change with the
	// federation's liveness (the outbox deals with owners that are down),
	// so that a command prepared again is the same. A URL sent before (the
	// URL-sent cache), unless Moved, is not sent again: its cash goes to
	// its owner's virtual page.
	Route(ctx context.Context, urls []Remote, b *store.Batch) (local []Remote, sent Sent, err error)
}

// Inbound counts what others sent a crawl database: a Router whose
// crawl database receives URLs from others (shards, sites) is one, so
// that the rounds count that cash in.
type Inbound interface {
	// Inbound returns the cash others have sent this crawl database so
	// far, in all: on URLs (already in it) and for the virtual page (taken
	// into it by the next update).
	Inbound() (puts, virtual float64, err error)
}

// Ending says when a crawl spread over several crawl databases has
// ended (package termwave): a Router that is one makes the rounds wait
// for it once their own crawl database has nothing left to do.
type Ending interface {
	// Finished reports whether the whole crawl (the site's shards, the
	// federation's sites) has ended; asked while this crawl database has
	// nothing left to do.
	Finished() bool
}

// HandBack is a federation's hand-back of hosts held for a site that was
// down (docs/sharding.md, "Site failures").
type HandBack interface {
	// Returned names, among hosts (this site's frontier), those this site
	// held for their owner while it was down and that the owner has taken
	// back (it is up again), with that owner. Their frontier URLs go to it
	// (generate hands them over, through Route).
	Returned(ctx context.Context, hosts []string) (map[string]Owner, error)
	// Away reports, quickly, whether host is one that Returned would name:
	// the fetcher drops its jobs not yet started (they go back to the
	// frontier, and from there to the owner). It also reports the hosts
	// that are Waiting.
	Away(host string) bool
	// Waiting reports, quickly, whether host is one of this site's that
	// another site held while this site was down and has not yet handed
	// back (the URLs it fetched of it, so that they are not fetched
	// again): generate leaves it in the frontier for now.
	Waiting(host string) bool
}

// Rounds is what the routing layer needs to know of a crawl database's
// rounds (for the federation's hand-back: which rounds may have fetched a
// host): the next round to be generated and the rounds in flight
// (generated and not yet fully updated).
type Rounds struct {
	Next   uint64
	Active []uint64
}

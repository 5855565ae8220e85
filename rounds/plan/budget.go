package plan

import (
	"math"
	"net/netip"
	"time"
)

// Budgets: how many pages a host may have over the crawl, and how many
// URLs a round gives each host and each address.

// HostSpent reports whether a host has used its page budget: the pages
// fetched from it so far and those of rounds generated and not yet
// updated (inFlight) reach budget. At the budget exactly it is spent:
// generate closes it and gives it no more URLs.
func HostSpent(fetched, inFlight int64, budget int) bool {
	return fetched+inFlight >= int64(budget)
}

// RoundBudget is how many URLs a round gives a host whose delay is delay:
// as many as it can serve at its own pace between busyUntil (when the URLs
// it was given before are projected to be done; zero: none) and now +
// span, at least one and at most perHost; 0 if it is busy past now + span.
// A host slowed by its Crawl-delay thus gets few URLs, and only in the
// rounds that come when it runs out, so that it no longer holds every
// round's end while the others wait for the next round (issue 11). Without
// a host delay or a span (hostDelay ≤ 0, span ≤ 0) every host gets
// perHost. A delay below hostDelay counts as hostDelay (no host is
// faster than the site's host delay).
func RoundBudget(perHost int, hostDelay, delay time.Duration, now, busyUntil time.Time, span time.Duration) int {
	if hostDelay <= 0 || span <= 0 {
		return perHost
	}
	if busyUntil.After(now.Add(span)) {
		return 0
	}
	left := span
	if busyUntil.After(now) {
		left -= busyUntil.Sub(now)
	}
	return max(1, min(perHost, 1+int(left/max(delay, hostDelay))))
}

// IPBudget is RoundBudget for an address: the requests it can serve at
// the address delay between busyUntil and now + span, at least one, or 0
// if it is busy past now + span (its hosts share them, best first).
// Without an address delay (ipDelay ≤ 0) an address sets no limit
// (math.MaxInt).
func IPBudget(ipDelay time.Duration, now, busyUntil time.Time, span time.Duration) int {
	if ipDelay <= 0 {
		return math.MaxInt
	}
	left := span
	if busyUntil.After(now) {
		left -= busyUntil.Sub(now)
	}
	if left < 0 {
		return 0
	}
	return 1 + int(left/ipDelay)
}

// Budgets gives the hosts of one read of the frontier their shares of a
// round, one host at a time in the order the frontier offers them (the
// best first, so that the hosts behind one address share its budget best
// first), and keeps what the read saw: the least delay among the hosts
// (RoundSpan's fastest) and the earliest refill of a host left out
// (Refill). The zero value of the unexported fields is ready to use; a
// Budgets serves one read.
type Budgets struct {
	// PerHost is the most URLs a host gets in a round (k).
	PerHost int
	// HostDelay is the site's host delay; IPDelay its address delay (0:
	// none).
	HostDelay, IPDelay time.Duration
	// Now is the time of the read; Span the time the round gives its
	// hosts work for (RoundSpan); Lead how long before a busy host runs
	// out its next URLs are to be generated (Refill).
	Now        time.Time
	Span, Lead time.Duration
	// Tail: the span is widened to the crawl's tail (RoundSpan: only
	// hosts slower than the host delay have URLs): a host gets URLs only
	// once it is about to run out (busy no longer than Lead from now).
	Tail bool

	ipLeft  map[netip.Addr]int // per address: what it can still serve in the span
	fastest time.Duration
	refill  time.Time
}

// HostPace is what Budgets reads of one host.
type HostPace struct {
	// Waiting: the host waits for another site's hand-back; it gets no
	// URLs this round and counts for nothing else (not the fastest delay,
	// not a refill, not its address's budget). The other fields are not
	// read.
	Waiting bool
	// Delay is the time the host gives each URL: its delay (the host
	// delay, or its Crawl-delay up to the cap, or the address delay,
	// whichever is longest) plus what a request to it takes, when known
	// (a far host's round trips: its next request starts its delay after
	// the end of the last).
	Delay time.Duration
	// BusyUntil is when the URLs it was given are projected to be done
	// (zero: none).
	BusyUntil time.Time
	// IP is the address the fetcher keys its politeness by, if IPOK
	// (there is an address delay and the host was resolved); IPBusyUntil
	// is when that address is projected to be free.
	IP          netip.Addr
	IPOK        bool
	IPBusyUntil time.Time
}

// Host returns how many URLs the next host of the read gets this round:
// its RoundBudget (nothing at the tail while it is busy beyond Lead from
// now), and, with an address delay, no more than its address has left
// after the hosts before it behind the same address. A host that gets
// nothing is due a refill at Refill(BusyUntil, Span, Lead).
func (b *Budgets) Host(h HostPace) int {
	if h.Waiting {
		return 0
	}
	if b.fastest == 0 || h.Delay < b.fastest {
		b.fastest = h.Delay
	}
	n := 0
	if !b.Tail || !h.BusyUntil.After(b.Now.Add(b.Lead)) {
		n = RoundBudget(b.PerHost, b.HostDelay, h.Delay, b.Now, h.BusyUntil, b.Span)
	}
	if n == 0 {
		if at := Refill(h.BusyUntil, b.Span, b.Lead); b.refill.IsZero() || at.Before(b.refill) {
			b.refill = at
		}
	}
	if n == 0 || !h.IPOK {
		return n
	}
	if b.ipLeft == nil {
		b.ipLeft = map[netip.Addr]int{}
	}
	left, seen := b.ipLeft[h.IP]
	if !seen {
		left = IPBudget(b.IPDelay, b.Now, h.IPBusyUntil, b.Span)
	}
	n = min(n, left)
	b.ipLeft[h.IP] = left - n
	return n
}

// Fastest is the least delay among the hosts Host saw, busy ones too (0:
// none), for RoundSpan.
func (b *Budgets) Fastest() time.Duration { return b.fastest }

// Refill is the earliest Refill of a host Host gave nothing (zero: none).
func (b *Budgets) Refill() time.Time { return b.refill }

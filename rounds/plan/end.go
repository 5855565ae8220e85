package plan

import "time"

// When a crawl ends.

// Verdict is what the leader does about the crawl's end after a step.
type Verdict uint8

// The verdicts of End.
const (
	// Go on: rounds are in flight, or the frontier may still give URLs.
	Go Verdict = iota
	// EndRounds: the round limit is reached and no round is in flight.
	EndRounds
	// EndExhausted: nothing is in flight, the frontier is empty, no host
	// is backing off and (in a federation) every site is done too.
	EndExhausted
	// Idle: this site has nothing to do but the federation has not ended:
	// URLs may still arrive; look again after a while.
	Idle
	// Backoff: the only URLs left belong to hosts backing off; look again
	// after a while.
	Backoff
	// Waiting: nothing to fetch now, but pages are scheduled for a refetch
	// (a crawl that refetches does not end): look again at NextDue.
	Waiting
)

var verdictNames = [...]string{"go", "rounds", "exhausted", "idle", "backoff", "waiting"}

// String names the verdict (the finish reasons "rounds" and "exhausted"
// are the names rounds.Finish uses).
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "verdict?"
}

// EndState is what End decides from: the round state and the frontier as
// the leader last saw them.
type EndState struct {
	// Active is how many rounds are fetching or updating.
	Active int
	// LimitReached: the round limit (--rounds) is reached: no round is
	// generated any more.
	LimitReached bool
	// FrontierEmpty: the last generate gave no URL, and nothing was
	// fetched or updated since that could give more.
	FrontierEmpty bool
	// Retrying: a look at the frontier again is already scheduled (a host
	// was backing off, or a busy host runs dry soon).
	Retrying bool
	// BackingOff: some frontier URLs belong to hosts backing off. Only
	// read when NeedsBackoff says so (it costs a scan).
	BackingOff bool
	// Federated: the site is one of a federation (or one shard of a site):
	// its crawl ends only when the others' do.
	Federated bool
	// FederationDone: the federation's termination protocol says every
	// member is done and nothing is in transit. Only read when NeedsFederation
	// says so.
	FederationDone bool
	// NextDue is the earliest next fetch of a page scheduled for a refetch
	// (zero: none, or refetch off). Only read when NeedsBackoff says so.
	NextDue time.Time
}

// NeedsBackoff reports whether End needs s.BackingOff: nothing is in
// flight, the frontier gave nothing and no look is scheduled yet.
func NeedsBackoff(s EndState) bool {
	return s.Active == 0 && !s.LimitReached && s.FrontierEmpty && !s.Retrying
}

// NeedsFederation reports whether End needs s.FederationDone: the site is
// done on its own and belongs to a federation.
func NeedsFederation(s EndState) bool {
	return NeedsBackoff(s) && !s.BackingOff && s.NextDue.IsZero() && s.Federated
}

// End decides whether the crawl ends. A round limit ends the crawl once no
// round is in flight; a crawl without URLs to generate ends when no round
// is in flight, no host it waits for is backing off, no page is scheduled
// for a refetch, and, in a federation, when the federation's crawl has
// ended (until then URLs may still arrive).
func End(s EndState) Verdict {
	switch {
	case s.Active > 0:
		return Go
	case s.LimitReached:
		return EndRounds
	case !NeedsBackoff(s):
		return Go
	case s.BackingOff:
		return Backoff
	case !s.NextDue.IsZero():
		return Waiting
	case s.Federated && !s.FederationDone:
		return Idle
	default:
		return EndExhausted
	}
}

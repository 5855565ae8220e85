package rounds

import (
	"math"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/rounds/plan"
)

// rateScanLimit bounds the scheduled pages read to rebuild a leader's
// rate histogram (buildRates).
const rateScanLimit = 200_000

// rateState is the leader's histogram of its pages' estimated change
// rates, for the optimal refetch schedule's multiplier
// (plan.RateHistogram.Mu). It belongs to one leadership: a node that
// leads again rebuilds it from the crawl database.
//
// The histogram is kept by the updates: a page's estimate before its
// fetch is removed and its new one added. It is approximate, which μ can
// afford (a budget, not a per-page decision):
//   - the rebuild reads the refetch index only (DueURLs): the pages due
//     in the frontier or generated at the time are missed, and when their
//     fetch is folded in their old estimate is removed from a bin that
//     did not count them (RateHistogram.Remove stops at empty; pages of
//     rounds generated before the rebuild are not removed, see
//     builtNext);
//   - a page whose refetch ends its schedule (gone, an error) keeps its
//     last estimate;
//   - with more than rateScanLimit scheduled pages the rebuild counts the
//     earliest due, a sample leaning to short intervals, until the
//     updates fold the others in.
//
// Preparing a round's update again (a leader whose update file was
// unreadable) does not count a page twice: the pages counted are kept
// per round. A page whose fetch was already applied (another leader's
// preparation, partly applied) is not counted either: its record is no
// longer generated in that round.
type rateState struct {
	mu    sync.Mutex
	built bool
	// builtNext is the round state's Next at the rebuild: the pages of
	// earlier rounds were generated then, not in the refetch index, so
	// their old estimates were not counted.
	builtNext uint64
	hist      plan.RateHistogram
	// round is the round whose update is being prepared; mult its
	// multiplier μ, computed at its first page from the histogram as it
	// was; counted the pages of that round already counted.
	round   uint64
	mult    float64
	counted map[string]struct{}
}

// optimalNext is a fetched page's next fetch and interval under the
// optimal schedule, and keeps the leader's rate histogram: the page's
// change rate is estimated from its record's counters and this fetch
// (what it found, and watched, the new total time watched), and given
// plan.OptimalInterval at the multiplier of the round's update. Without
// a leadership (no histogram), or without an estimate, it is the
// schedule's interval.
func (c *Crawler) optimalNext(op *store.FetchResult, rec *store.URLRecord, found bool, change plan.Change, watched time.Duration) (time.Time, time.Duration) {
	r := c.o.Refetch
	changed, unchanged := rec.Changed, rec.Unchanged
	switch change {
	case plan.Changed:
		changed = min(changed, math.MaxUint32-1) + 1
	case plan.Unchanged:
		unchanged = min(unchanged, math.MaxUint32-1) + 1
	}
	lambda, ok := plan.EstimateRate(changed, unchanged, watched)
	c.mu.Lock()
	l := c.lead
	c.mu.Unlock()
	if l == nil {
		return r.NextOptimal(op.At, lambda, ok, 0)
	}
	rs := &l.rates
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.built {
		c.buildRates(rs)
	}
	if rs.counted == nil || rs.round != op.Round {
		rs.round, rs.counted = op.Round, map[string]struct{}{}
		rs.mult = rs.hist.Mu(r.Interval, r.Min, r.Max)
	}
	// Only a fetch that will apply changes the page's estimate.
	applies := found && rec.Status == store.StatusGenerated && rec.Round == op.Round
	if _, dup := rs.counted[op.URL]; applies && !dup {
		rs.counted[op.URL] = struct{}{}
		if old, had := plan.EstimateRate(rec.Changed, rec.Unchanged, rec.Watched); had && op.Round >= rs.builtNext {
			rs.hist.Remove(old)
		}
		if ok {
			rs.hist.Add(lambda)
		}
	}
	return r.NextOptimal(op.At, lambda, ok, rs.mult)
}

// buildRates fills the rate histogram from the pages scheduled in the
// crawl database (at most rateScanLimit of them, the earliest due). A
// read that fails leaves the pages read so far: the histogram is an
// estimate, and the updates keep it.
func (c *Crawler) buildRates(rs *rateState) {
	start := time.Now()
	rs.built = true
	c.mu.Lock()
	rs.builtNext = c.state.Next
	c.mu.Unlock()
	due, err := c.st.DueURLs(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), rateScanLimit)
	if err != nil {
		c.log.Warn("rounds: rate histogram: read the scheduled pages", "err", err)
		return
	}
	var n int
	for _, d := range due {
		rec, found, err := c.st.Get(d.URL)
		if err != nil {
			c.log.Warn("rounds: rate histogram: read a scheduled page", "url", d.URL, "err", err)
			return
		}
		if !found {
			continue
		}
		if lambda, ok := plan.EstimateRate(rec.Changed, rec.Unchanged, rec.Watched); ok {
			rs.hist.Add(lambda)
			n++
		}
	}
	c.log.Info("rounds: rate histogram rebuilt", "scheduled", len(due), "estimated", n, "limit", rateScanLimit, "took", time.Since(start))
}

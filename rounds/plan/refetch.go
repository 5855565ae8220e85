package plan

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Refetch schedules (issue 23): when a fetched page is due again, and how
// a due page ranks beside new URLs.

// The adaptive schedule's rates and bounds, Nutch's AdaptiveFetchSchedule
// defaults (db.fetch.schedule.adaptive.inc_rate 0.4, dec_rate 0.2,
// min_interval 60 s, max_interval 365 days): a page found changed is
// due again after its interval × (1 − 0.2), one found unchanged after its
// interval × (1 + 0.4), within [min, max].
const (
	AdaptiveIncRate   = 0.4
	AdaptiveDecRate   = 0.2
	DefaultMinRefetch = time.Minute
	DefaultMaxRefetch = 365 * 24 * time.Hour
)

// ErrRefetch: a refetch schedule that cannot be used.
var ErrRefetch = errors.New("plan: bad refetch schedule")

// Refetch is a site's refetch schedule. The zero value never refetches: a
// crawl ends when its frontier is empty.
type Refetch struct {
	// Interval is the time from a page's fetch to its next; 0: never.
	// With Adaptive it is the first interval of every page.
	Interval time.Duration
	// Adaptive shortens the interval of a page found changed and lengthens
	// that of a page found unchanged (AdaptiveIncRate, AdaptiveDecRate),
	// within [Min, Max].
	Adaptive bool
	// Optimal gives each page with an estimated change rate the interval
	// that maximises the collection's freshness at the budget of the
	// fixed schedule of Interval (NextOptimal, Cho and Garcia-Molina
	// 2003), within [Min, Max]; a page without an estimate gets Interval.
	// It excludes Adaptive.
	Optimal  bool
	Min, Max time.Duration
}

// On reports whether pages are refetched.
func (r Refetch) On() bool { return r.Interval > 0 }

// WithDefaults checks r and fills the bounds of the adaptive and optimal
// schedules: Min 0 → min(DefaultMinRefetch, Interval), Max 0 →
// max(DefaultMaxRefetch, Interval).
func (r Refetch) WithDefaults() (Refetch, error) {
	if r.Interval < 0 || r.Min < 0 || r.Max < 0 {
		return r, fmt.Errorf("%w: negative durations (interval %v, min %v, max %v)", ErrRefetch, r.Interval, r.Min, r.Max)
	}
	if r.Adaptive && r.Optimal {
		return r, fmt.Errorf("%w: the adaptive and optimal schedules exclude each other", ErrRefetch)
	}
	if !r.On() {
		if r.Adaptive || r.Optimal || r.Min > 0 || r.Max > 0 {
			return r, fmt.Errorf("%w: the adaptive and optimal schedules and their bounds need a refetch interval", ErrRefetch)
		}
		return r, nil
	}
	if !r.Adaptive && !r.Optimal {
		if r.Min > 0 || r.Max > 0 {
			return r, fmt.Errorf("%w: refetch bounds (min %v, max %v) are for the adaptive and optimal schedules", ErrRefetch, r.Min, r.Max)
		}
		return r, nil
	}
	if r.Min == 0 {
		r.Min = min(DefaultMinRefetch, r.Interval)
	}
	if r.Max == 0 {
		r.Max = max(DefaultMaxRefetch, r.Interval)
	}
	if r.Min > r.Interval || r.Interval > r.Max {
		return r, fmt.Errorf("%w: want min ≤ interval ≤ max, got %v ≤ %v ≤ %v", ErrRefetch, r.Min, r.Interval, r.Max)
	}
	return r, nil
}

// Change is what a fetch of a page found against its previous fetch.
type Change uint8

// The changes Next takes.
const (
	FirstFetch Change = iota // no previous fetch
	Changed                  // new content
	Unchanged                // the same content (a 304, or the same fingerprint)
)

// Next is a page's next fetch and interval after a fetch at `at` that
// found change, its interval having been `interval` (0 for a first fetch):
// the schedule's interval for a first fetch or a fixed schedule; the
// adaptive one's interval scaled by the change, within [Min, Max]. The
// optimal schedule needs a page's rate (NextOptimal): Next gives its
// Interval. With refetch off it is (zero, 0): never.
func (r Refetch) Next(at time.Time, interval time.Duration, change Change) (time.Time, time.Duration) {
	if !r.On() {
		return time.Time{}, 0
	}
	next := r.Interval
	if r.Adaptive && change != FirstFetch && interval > 0 {
		f := 1 + AdaptiveIncRate
		if change == Changed {
			f = 1 - AdaptiveDecRate
		}
		scaled := float64(interval) * f
		next = time.Duration(math.Min(scaled, float64(r.Max)))
		next = min(max(next, r.Min), r.Max)
	}
	return at.Add(next), next
}

// DueScore is a due page's frontier score: its importance, the OPIC cash
// it has received over the crawl (history + cash), times 1 + how overdue
// it is in intervals (0 at its next fetch time). New URLs rank by their
// cash, so both are in cash units; a page twice its interval overdue
// ranks as if it had received twice its cash. A bad input gives 0.
func DueScore(history, cash float64, nextFetch, now time.Time, interval time.Duration) float64 {
	imp := history + cash
	if !(imp >= 0) || math.IsInf(imp, 0) {
		return 0
	}
	over := 0.0
	if interval > 0 && now.After(nextFetch) {
		over = float64(now.Sub(nextFetch)) / float64(interval)
	}
	return imp * (1 + min(over, 1e6))
}

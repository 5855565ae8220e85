package rounds

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds/plan"
)

// Reports to the leader.

// NodeReport is what this node tells itself, as the crawl database's leader,
// every ReportEvery: that it is alive, how much work it holds, and what its
// hosts' requests took.
type NodeReport struct {
	ID       string    `json:"id"`
	At       time.Time `json:"at"`
	Queued   int64     `json:"queued"`    // jobs not started yet
	InFlight int64     `json:"in_flight"` // requests being fetched
	Done     int64     `json:"done"`      // page results since this node started
	Rate     float64   `json:"pages_per_s"`
	Parts    int       `json:"parts"`    // parts held
	Hosts    int       `json:"hosts"`    // hosts of the parts held
	Unstaged int       `json:"unstaged"` // results not staged yet
	// Took is, per host whose answered requests since the last report took
	// a millisecond or more on average, that mean in microseconds: the
	// leader learns from it what a host's requests take (its round trips,
	// for a far host), part of the host's pace.
	Took map[string]int64 `json:"took_us,omitempty"`
}

// hostTook sums a host's answered requests and what they took.
type hostTook struct {
	n  int64
	us int64
}

// maxTookHosts bounds the hosts one report counts (others wait for the
// next report), and maxTookBytes the size of its Took (host names and
// numbers; the rest are dropped): a node report is read up to 1 MiB.
const (
	maxTookHosts = 8192
	maxTookBytes = 256 << 10
)

// addTook counts res's request in the next report's Took: answered (an
// HTTP status, no retry), with the time it took. n.mu is held.
func (n *nodeSide) addTook(res *fetcher.Result) {
	if res.Took <= 0 || res.HTTPStatus <= 0 || res.Retry {
		return
	}
	t := n.took[res.Host]
	if t == nil {
		if len(n.took) >= maxTookHosts {
			return
		}
		t = &hostTook{}
		n.took[res.Host] = t
	}
	t.n++
	t.us += res.Took.Microseconds()
}

// takeTook returns the report's Took (at most maxTookBytes of it) and
// starts a new count.
func (n *nodeSide) takeTook() map[string]int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out map[string]int64
	size := 0
	for h, t := range n.took {
		if mean := t.us / t.n; mean >= 1000 {
			if size += len(h) + 16; size > maxTookBytes { // JSON: "name":µs,
				break
			}
			if out == nil {
				out = map[string]int64{}
			}
			out[h] = mean
		}
	}
	clear(n.took)
	return out
}

// report builds this node's report.
func (n *nodeSide) report(f Fetcher) NodeReport {
	c := n.c
	now := c.o.Now()
	st := f.Stats()
	r := NodeReport{ID: c.id, At: now, Queued: st.Queued, InFlight: st.InFlight, Done: n.done.Load()}
	r.Rate = n.rate.observe(now, r.Done)
	r.Took = n.takeTook()
	parts := n.heldParts()
	for _, p := range parts {
		if p.revoked.Load() {
			continue
		}
		p.mu.Lock()
		done := p.done
		r.Unstaged += len(p.results)
		p.mu.Unlock()
		if done {
			continue
		}
		r.Parts++
		r.Hosts += len(p.hosts)
	}
	return r
}

// errSoloFollower: a Solo crawler that does not lead fetches nothing.
var errSoloFollower = errors.New("rounds: a replica only (Solo): the leader fetches")

// reportLoop reports to the leader every ReportEvery, and pauses the
// fetcher while no leader has taken a report for half of FailTimeout
// (plan.NodeState.ShouldPause): by FailTimeout the leader may give this
// node's parts to others. It resumes once a leader takes a report again
// and the replica has caught up with it (maybeResume; the run loop's next
// watch then drops the parts moved away).
func (n *nodeSide) reportLoop(ctx context.Context, f Fetcher) {
	c := n.c
	t := time.NewTicker(c.o.ReportEvery)
	defer t.Stop()
	for {
		r := n.report(f)
		var err error
		var reply ReportReply
		if c.db.IsLeader() {
			reply, err = c.heard(r)
		} else if c.o.Solo {
			err = errSoloFollower
		} else {
			err = errors.New("rounds: this node does not lead its crawl database")
		}
		now := c.o.Now()
		if err == nil {
			n.lastOK.Store(now.UnixNano())
			if n.paused.Load() {
				n.resumeAt.Store(max(reply.Index, 1))
			}
		}
		if p, ok := f.(pauser); ok && n.pauseState().ShouldPause(now, c.o.FailTimeout) {
			n.pauseMu.Lock()
			n.paused.Store(true)
			n.resumeAt.Store(0)
			p.Pause(true)
			n.pauseMu.Unlock()
			// The leader moves this node's parts FailTimeout after it last
			// heard of it, and lets their hosts go from then on (plus
			// their delays): requests still in flight must end now, not
			// at the request timeout, or they would overlap the new
			// owner's (a node cut off from the leader is not dead).
			// A deposed Solo leader lets them end and stages their
			// results before it releases its parts (release), and its
			// successor waits for that up to ReleaseWait after its fence:
			// those still in flight half that time after this node last
			// led are aborted.
			abort := !errors.Is(err, errSoloFollower) || now.Sub(time.Unix(0, n.lastOK.Load())) > c.o.ReleaseWait/2
			if a, ok := f.(aborter); ok && abort {
				a.Abort()
			}
			if errors.Is(err, errSoloFollower) {
				c.log.Debug("rounds: not leading: fetching paused", "err", err)
			} else {
				c.log.Warn("rounds: no leader took this node's report: fetching paused, requests in flight aborted", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maybeResume resumes a paused fetcher once the replica has applied what
// the leader had when it took a report again; call it before a watch. A
// node that drains or hands its leadership over stays paused: the
// returned resume checks that again when it runs (after the watch), under
// the lock every pause takes, so that a hand-over that began meanwhile is
// not undone (its results staged, a page fetched after would be lost and
// fetched again by the new leader). A Solo node resumes only while it
// leads. The rules are plan.NodeState's (Resume, Resumable).
func (n *nodeSide) maybeResume(f Fetcher) (resume func()) {
	switch n.pauseState().Resume(n.c.o.Now(), n.c.o.FailTimeout) {
	case plan.StayPaused:
		return func() {}
	case plan.ForgetReply:
		// The reply that set resumeAt is older than the lease: resuming
		// would fetch just as the node should pause.
		n.resumeAt.Store(0)
		return func() {}
	}
	return func() {
		n.pauseMu.Lock()
		defer n.pauseMu.Unlock()
		if !n.pauseState().Resumable() {
			return // resumed, paused anew (the report loop), or held paused
		}
		n.resumeAt.Store(0)
		n.paused.Store(false)
		if p, ok := f.(pauser); ok {
			p.Pause(false)
		}
		n.c.log.Info("rounds: leader reached again: fetching resumed")
	}
}

// pauseState is this node's state as the pause rules read it
// (plan.NodeState).
func (n *nodeSide) pauseState() plan.NodeState {
	c := n.c
	return plan.NodeState{
		Paused:   n.paused.Load(),
		Handing:  n.handing.Load(),
		Solo:     c.o.Solo,
		Leads:    c.db.IsLeader(),
		LastOK:   time.Unix(0, n.lastOK.Load()),
		ResumeAt: n.resumeAt.Load(),
		Applied:  c.st.AppliedIndex(),
	}
}

// rateMeter turns a counter into a rate over the last few seconds.
type rateMeter struct {
	mu    sync.Mutex
	at    [8]time.Time
	count [8]int64
	i     int
}

func (m *rateMeter) observe(now time.Time, count int64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldest := (m.i + 1) % len(m.at)
	m.at[m.i], m.count[m.i] = now, count
	m.i = oldest
	if m.at[oldest].IsZero() {
		oldest = 0
	}
	if dt := now.Sub(m.at[oldest]).Seconds(); dt > 0 {
		return float64(count-m.count[oldest]) / dt
	}
	return 0
}

package fetcher

import (
	"context"
	"sync"
	"sync/atomic"
)

// GroupAborted is the Err of the Result of a queued job that AbortGroup
// answered without a request (Status StatusError, Retry and NoRequest set).
const GroupAborted = "fetcher: job's group aborted"

// GroupStats are the counters of one group of jobs (Job.Group).
type GroupStats struct {
	// Queued are the group's jobs submitted and not yet being fetched or
	// answered.
	Queued int64
	// InFlight are the requests (pages, robots.txt, sitemaps) being
	// fetched for the group's hosts.
	InFlight int64
}

// group is the state of one group of jobs. Groups are made on first use and
// kept (a node has a few dozen shards).
type group struct {
	id               uint32
	paused           atomic.Bool
	queued, inflight atomic.Int64
	// scope is what the group's requests in flight watch: cancelled by
	// AbortGroup, and by Abort through its parent.
	scope atomic.Pointer[groupScope]
}

// groupScope is a group's abort scope, a child of the fetcher's abort scope
// current when it was made.
type groupScope struct {
	parent *abortScope
	ctx    context.Context
	cancel context.CancelFunc
}

// groupAbort is an AbortGroup call not yet applied by the scheduler: the
// group's jobs among the first upto pending ones are dropped.
type groupAbort struct {
	g    uint32
	upto int
}

// groups maps group IDs to their state.
type groups struct {
	m sync.Map // uint32 → *group
}

// get returns the state of group g, made if need be.
func (gs *groups) get(g uint32) *group {
	if v, ok := gs.m.Load(g); ok {
		return v.(*group)
	}
	v, _ := gs.m.LoadOrStore(g, &group{id: g})
	return v.(*group)
}

// groupAbortContext returns the context that cancels gr's requests: done when
// AbortGroup(gr.id) or Abort is called after it returned.
func (f *Fetcher) groupAbortContext(gr *group) context.Context {
	for {
		parent := f.aborts.Load()
		if parent == nil {
			f.abortContext() // makes one
			continue
		}
		sc := gr.scope.Load()
		if sc != nil && sc.parent == parent {
			return sc.ctx
		}
		ctx, cancel := context.WithCancel(parent.ctx)
		if gr.scope.CompareAndSwap(sc, &groupScope{parent: parent, ctx: ctx, cancel: cancel}) {
			if sc != nil {
				sc.cancel() // its parent was aborted: it is done already
			}
			return ctx
		}
		cancel()
	}
}

// PauseGroup stops (true) or resumes (false) the start of new requests for
// the hosts of group g (the group of their jobs); other groups go on. Queued
// jobs wait, requests in flight finish; Pause(true) stops every group. A
// node that loses the lead of a shard pauses the shard's group and aborts it
// (AbortGroup), so that no request of the old leader overlaps the new one's:
// a request handed to a worker before PauseGroup took effect is cancelled by
// the AbortGroup that follows, even if it had not started yet.
func (f *Fetcher) PauseGroup(g uint32, on bool) {
	gr := f.groups.get(g)
	if gr.paused.Swap(on) == on || on {
		return
	}
	f.unpark.Store(true)
	f.poke()
}

// AbortGroup ends group g's requests in flight now (their jobs are answered
// as transient failures, as Abort does) and answers the group's queued jobs
// (those submitted before AbortGroup returned) without a request: Status
// StatusError, Retry and NoRequest set, Err GroupAborted. The group's
// pending robots.txt and sitemap fetches are dropped. Jobs of g submitted
// later, and requests of other groups, are not affected. The answers come
// through OnResult from the scheduler's goroutine soon after AbortGroup
// returns.
func (f *Fetcher) AbortGroup(g uint32) {
	gr := f.groups.get(g)
	if sc := gr.scope.Swap(nil); sc != nil {
		sc.cancel()
	}
	f.mu.Lock()
	f.mu.aborts = append(f.mu.aborts, groupAbort{g: g, upto: len(f.mu.pending)})
	f.mu.Unlock()
	f.poke()
}

// GroupStats returns the counters of group g.
func (f *Fetcher) GroupStats(g uint32) GroupStats {
	gr := f.groups.get(g)
	return GroupStats{Queued: gr.queued.Load(), InFlight: gr.inflight.Load()}
}

// poke wakes the scheduler.
func (f *Fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

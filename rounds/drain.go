package rounds

import (
	"context"
	"fmt"
	"time"

	"github.com/meridian-crawler/meridian/rounds/plan"
)

// Handing over: a Solo leader whose shard moves to another node stages
// everything it holds before the transfer (HandOver).

// unstaged counts the results this node holds and has not staged.
func (n *nodeSide) unstaged() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for _, p := range n.parts {
		p.mu.Lock()
		k += len(p.results)
		p.mu.Unlock()
	}
	return k
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// maxNoRequest is how often a URL goes back to the frontier unrequested
// (its host unavailable) before such returns spend its retries: a host
// whose failures are not counted (its record elsewhere, a moved part)
// must not keep a crawl from ending.
const maxNoRequest = 4

// requeueAgain counts a return of u to the frontier without a request and
// reports whether it may go back once more without spending a retry.
func (c *Crawler) requeueAgain(u string) bool {
	c.noReqMu.Lock()
	defer c.noReqMu.Unlock()
	if c.noReq == nil {
		c.noReq = map[string]int{}
	}
	c.noReq[u]++
	if c.noReq[u] <= maxNoRequest {
		return true
	}
	delete(c.noReq, u)
	return false
}

// HandOver hands a Solo crawler's leadership over cleanly (a shard moving
// to another node): the fetcher stops starting this crawl's requests,
// those in flight end (up to 5 s), every result this node holds is staged
// in the crawl database, and only then is transfer called (the caller's
// leadership transfer), so that the new leader fetches nothing this node
// fetched. Requests still in flight after 5 s are aborted, and the
// transfer waits a host's longest delay after the last request ended, so
// that the new leader's first request to a host keeps its delay (it does
// not know when this node last asked it). The fetcher stays paused until
// the transfer has returned, whatever the node's reports say meanwhile (a
// node that has just begun to lead, its fetcher not yet resumed, may hand
// over at once: a resume then would fetch pages after their part's
// results were staged, and the new leader would fetch them again). If
// transfer fails, fetching resumes (unless the node was paused before);
// if it succeeds, this node stays paused until it leads again.
func (c *Crawler) HandOver(ctx context.Context, f Fetcher, transfer func(context.Context) error) error {
	n := c.node
	p, _ := f.(pauser)
	n.pauseMu.Lock()
	n.handing.Store(true)
	if p != nil {
		p.Pause(true)
	}
	n.pauseMu.Unlock()
	done := false
	defer func() {
		n.pauseMu.Lock()
		defer n.pauseMu.Unlock()
		n.handing.Store(false)
		if !done && p == nil {
			return // no fetcher's pause to lift or hold
		}
		switch plan.HandOverEnd(done, n.pauseState()) {
		case plan.Resumed:
			p.Pause(false)
		case plan.HoldPaused:
			// Transferred, or it drains, or it no longer leads a Solo
			// crawl: paused as the report loop pauses a node that does
			// not lead, resumed by its rules.
			n.resumeAt.Store(0)
			n.paused.Store(true)
			if p != nil {
				p.Pause(true)
			}
		}
	}()
	deadline := c.o.Now().Add(5 * time.Second)
	for f.Stats().InFlight > 0 && c.o.Now().Before(deadline) {
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
	if a, ok := f.(aborter); ok && f.Stats().InFlight > 0 {
		a.Abort() // their results are late: dropped, their URLs fetched again
		for end := c.o.Now().Add(time.Second); f.Stats().InFlight > 0 && c.o.Now().Before(end); {
			if !sleepCtx(ctx, 20*time.Millisecond) {
				return ctx.Err()
			}
		}
	}
	// The last requests ended at most now: the new leader may ask their
	// hosts once their delays have passed.
	if !sleepCtx(ctx, max(c.o.HostDelay, c.o.IPDelay, c.o.MaxCrawlDelay)) {
		return ctx.Err()
	}
	for attempt := 0; ; attempt++ {
		err := n.stage(ctx, true)
		if err == nil && n.unstaged() == 0 {
			break
		}
		if attempt >= 20 {
			return fmt.Errorf("rounds: hand over: results not staged: %v", err)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	if err := transfer(ctx); err != nil {
		return err
	}
	done = true
	return nil
}

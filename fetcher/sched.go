package fetcher

import (
	"container/heap"
	"context"
	"net/netip"
	"slices"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/robots"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// taskKind is what a worker is asked to do.
type taskKind uint8

const (
	taskSetup   taskKind = iota // HostStore load, DNS, address check: no request to the host
	taskRobots                  // GET robots.txt
	taskSitemap                 // GET a sitemap
	taskPage                    // GET a job's URL
)

// task is one unit of work for a worker and, on the way back, its outcome.
// The scheduler fills the inputs; the worker only reads them and fills the
// outputs; the host pointer is only touched by the scheduler.
type task struct {
	kind taskKind
	h    *host
	name string // host name
	url  string // robots.txt or sitemap URL
	job  Job    // the job, or the synthetic job of a robots.txt or sitemap Result
	grp  *group // the group the request counts under (requests only)
	// abort is the group's abort scope when the task was handed out: a
	// request watches it.
	abort  context.Context
	ip     netip.Addr
	hops   int  // robots.txt redirects followed so far
	expand bool // sitemap: an index's children may be fetched
	load   bool // setup: consult the HostStore
	wait   time.Duration
	addrs  []netip.Addr // requests: the host's addresses to connect to, ip first

	start, end time.Time
	outcome    outcome
	stopped    bool

	// setup
	rec       crawl.HostRecord
	recOK     bool
	policy    *robots.Policy // setup: from the stored robots.txt; robots: from the fetch
	ips       []netip.Addr
	ipsExpiry time.Time
	dnsErr    error
	forbidden error
	// robots: asker is the host the robots.txt is for when the request is
	// a redirect hop on another host (h, whose politeness it keeps); nil
	// when it is h's own. since, lastGood and lastStatus are the asker's
	// RobotsUnreachableSince and last good copy, for the 30-day rule.
	asker      *host
	since      time.Time
	lastGood   []byte
	lastStatus uint16
	httpStatus int
	body       []byte // robots.txt body to keep
	location   string // a redirect to follow (any host)
	refused    string // why the request was refused before any answer, not transiently (a certificate)
	// cacheControl is the Cache-Control of a final robots.txt answer;
	// stale marks a policy that is the 30-day rule's (robots.Stale).
	cacheControl string
	stale        bool
	// retryAfter is the Retry-After of a 429 or 503 answer (0: none).
	retryAfter time.Duration
	// sitemap
	children []string
}

// took is the time t's request took, start to end (0 if it made none).
func (t *task) took() time.Duration {
	if t.start.IsZero() || t.end.Before(t.start) {
		return 0
	}
	return t.end.Sub(t.start)
}

// event is a worker's message to the scheduler: a task is done, or (started)
// its request got a connection at the given time.
type event struct {
	t       *task
	started bool
	at      time.Time
}

// host is the workbench entry of one host name. Only the scheduler touches it.
type host struct {
	name     string
	origin   string // "scheme://host[:port]" of its first job: where robots.txt is ("" until then for a host first met as a robots.txt hop's target)
	jobs     jobQueue
	busy     bool   // a task is out
	started  bool   // the request out has reported its start (IP unlocked)
	dirty    bool   // in scheduler.dirty
	parked   bool   // in scheduler.parked
	grp      *group // the group of its latest job
	hidx     int    // index in the ready heap, -1 if not there
	at       time.Time
	eligible time.Time // since when it has had work and nothing in flight; zero if not
	next     time.Time // earliest start allowed by the host delay
	delay    time.Duration
	ip       netip.Addr
	ipst     *ipState
	rec      crawl.HostRecord
	loaded   bool           // setup ran once
	policy   *robots.Policy // nil: robots.txt not known yet
	// robotsHere: this fetcher fetched the host's robots.txt itself;
	// freshRobots: a job asked for it to be fetched again (Job.FreshRobots).
	robotsHere, freshRobots bool

	robotsURL  string // robots.txt URL after redirects; "" → origin + "/robots.txt"
	robotsHops int
	// robotsVia is the host a redirect of h's robots.txt leads to while
	// h waits for that hop (in robotsVia.hops); h is then not scheduled.
	robotsVia *host
	// hops are the hosts whose robots.txt redirects to h, waiting for
	// their hop: requests to h, fetched before h's own work.
	hops []*host

	deadUntil  time.Time // until then every job is answered with deadStatus
	deadStatus crawl.Status
	deadErr    string

	sitemaps       []sitemapRef
	sitemapsQueued int  // sitemaps queued since the last robots.txt fetch
	sitemapsAgain  bool // sitemaps were dropped by a back-off: queue them with the next jobs
	sitemapRound   uint64

	lastUsed time.Time
}

type sitemapRef struct {
	url    string
	expand bool
}

// ipState is the politeness state of one address.
type ipState struct {
	next   time.Time // earliest start allowed by the IP delay
	locked int       // requests dispatched whose start is not known yet
	refs   int       // hosts in the workbench using it
}

// scheduler owns the workbench. It runs in Run's goroutine.
type scheduler struct {
	f       *Fetcher
	o       *Options
	hosts   map[string]*host
	ips     map[netip.Addr]*ipState
	ready   hostHeap
	idle    int // workers without a task
	dirty   []*host
	spare   []Job
	aborts  []groupAbort // spare storage for f.mu.aborts
	parked  []*host      // hosts taken out of the ready heap while their group is paused
	grp     *group       // the last group looked up
	free    []*task
	idleTTL time.Duration
}

func newScheduler(f *Fetcher) *scheduler {
	return &scheduler{
		f:       f,
		o:       &f.o,
		hosts:   map[string]*host{},
		ips:     map[netip.Addr]*ipState{},
		idle:    f.o.Workers,
		idleTTL: max(f.o.HostIdleTTL, f.o.HostDelay+f.o.MaxCrawlDelay),
	}
}

// loop schedules until ctx is done.
func (s *scheduler) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	evictEvery := min(max(s.idleTTL/4, 10*time.Millisecond), 30*time.Second)
	evict := time.NewTicker(evictEvery)
	defer evict.Stop()
	s.takeSubmitted()
	for {
		now := time.Now()
		s.dispatch(now)
		var tc <-chan time.Time
		if s.idle > 0 && len(s.ready) > 0 && !s.f.paused.Load() {
			timer.Reset(s.ready[0].at.Sub(now))
			tc = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-s.f.wake:
			s.takeSubmitted()
		case e := <-s.f.done:
			if e.started {
				s.started(e.t.h, e.at)
			} else {
				s.complete(e.t)
			}
		case <-tc:
		case <-evict.C:
			s.evict(time.Now())
		}
	}
}

// groupOf returns the state of group g.
func (s *scheduler) groupOf(g uint32) *group {
	if s.grp == nil || s.grp.id != g {
		s.grp = s.f.groups.get(g)
	}
	return s.grp
}

// takeSubmitted applies AbortGroup calls and resumed groups, and moves
// submitted jobs into their hosts' queues.
func (s *scheduler) takeSubmitted() {
	f := s.f
	f.mu.Lock()
	jobs := f.mu.pending
	f.mu.pending = s.spare[:0]
	aborts := f.mu.aborts
	f.mu.aborts = s.aborts[:0]
	f.mu.Unlock()
	now := time.Now()
	if f.unpark.Swap(false) {
		s.unparkResumed(now)
	}
	if len(aborts) > 0 {
		s.abortQueued(aborts, now)
	}
	for i := range jobs {
		j := &jobs[i]
		if len(aborts) > 0 && aborted(aborts, j.Group, i) {
			s.answer(*j, crawl.StatusError, true, GroupAborted, now)
			continue
		}
		name := urlnorm.Host(j.URL)
		switch {
		case name == "":
			s.answer(*j, crawl.StatusError, false, "fetcher: not an absolute URL", now)
			continue
		case j.Host != "" && j.Host != name:
			s.answer(*j, crawl.StatusError, false, "fetcher: job host "+j.Host+" is not the URL's", now)
			continue
		}
		h := s.hosts[name]
		if h == nil {
			h = &host{name: name, origin: urlnorm.Origin(j.URL), hidx: -1, delay: s.o.HostDelay}
			s.hosts[name] = h
			f.c.hosts.Add(1)
		}
		h.lastUsed = now
		h.grp = s.groupOf(j.Group)
		if j.NotBefore.After(h.next) {
			h.next = j.NotBefore
		}
		if j.FreshRobots && !h.robotsHere && !h.freshRobots {
			h.freshRobots, h.policy = true, nil
		}
		if h.policy != nil && !s.needsRobots(h, now) && !h.policy.Allowed(urlnorm.PathQuery(j.URL)) {
			s.answer(*j, crawl.StatusRobotsDenied, false, "", now)
			continue
		}
		h.jobs.push(*j)
		if !h.dirty {
			h.dirty = true
			s.dirty = append(s.dirty, h)
		}
	}
	clear(aborts)
	s.aborts = aborts[:0]
	clear(jobs)
	if cap(jobs) <= 1<<16 {
		s.spare = jobs[:0]
	} else {
		s.spare = nil
	}
	for _, h := range s.dirty {
		h.dirty = false
		s.service(h, now)
	}
	clear(s.dirty)
	s.dirty = s.dirty[:0]
}

// answer reports a page job decided without a request.
func (s *scheduler) answer(j Job, status crawl.Status, retry bool, why string, now time.Time) {
	s.f.deliver(&Result{Job: j, Kind: KindPage, Status: status, Retry: retry, Err: why, FetchedAt: now, NoRequest: true})
	s.f.c.queued.Add(-1)
	s.groupOf(j.Group).queued.Add(-1)
}

// aborted reports whether the i-th pending job, of group g, was submitted
// before an AbortGroup(g) in aborts.
func aborted(aborts []groupAbort, g uint32, i int) bool {
	for _, a := range aborts {
		if a.g == g && i < a.upto {
			return true
		}
	}
	return false
}

// abortQueued answers the queued jobs of the groups in aborts and drops
// their hosts' pending sitemaps.
func (s *scheduler) abortQueued(aborts []groupAbort, now time.Time) {
	hit := func(g uint32) bool {
		for _, a := range aborts {
			if a.g == g {
				return true
			}
		}
		return false
	}
	for _, h := range s.hosts {
		n := h.jobs.len()
		if n > 0 {
			h.jobs.filter(func(j *Job) bool {
				if hit(j.Group) {
					s.answer(*j, crawl.StatusError, true, GroupAborted, now)
					return false
				}
				return true
			})
			h.jobs.release()
		}
		if len(h.sitemaps) > 0 && h.grp != nil && hit(h.grp.id) {
			s.dropSitemaps(h)
		}
		if n != h.jobs.len() {
			s.service(h, now)
		}
	}
	for _, h := range s.hosts {
		if len(h.hops) > 0 {
			s.pruneHops(h, now)
		}
	}
}

// park takes h, whose group is paused, out of the schedule until the group
// is resumed.
func (s *scheduler) park(h *host) {
	if !h.parked {
		h.parked = true
		s.parked = append(s.parked, h)
		if s.f.testOnPark != nil {
			s.f.testOnPark(h.name)
		}
	}
}

// unparkResumed puts the parked hosts whose group is no longer paused back
// in the schedule.
func (s *scheduler) unparkResumed(now time.Time) {
	keep := s.parked[:0]
	for _, h := range s.parked {
		if !h.parked { // evicted
			continue
		}
		if h.grp.paused.Load() {
			keep = append(keep, h)
			continue
		}
		h.parked = false
		s.service(h, now)
	}
	clear(s.parked[len(keep):])
	s.parked = keep
}

func (s *scheduler) needsSetup(h *host, now time.Time) bool {
	return !h.loaded || h.ipst == nil || now.After(h.rec.IPsExpiry)
}

func (s *scheduler) needsRobots(h *host, now time.Time) bool {
	return h.policy == nil || now.After(h.rec.RobotsExpiry)
}

// readyAt is the earliest time h's next task may start. While a request to
// its IP has not been answered yet, the IP's next start is not known; such hosts
// look again a quarter of IPDelay later.
func (s *scheduler) readyAt(h *host, now time.Time) time.Time {
	if s.needsSetup(h, now) {
		return now // no request to the host
	}
	at := later(h.next, h.ipst.next)
	if h.ipst.locked > 0 && !at.After(now) {
		at = now.Add(max(s.o.IPDelay/4, 100*time.Microsecond))
	}
	return at
}

// service brings an idle host up to date: answers the jobs of a dead or
// backing-off host, and puts a host with work in the ready heap.
func (s *scheduler) service(h *host, now time.Time) {
	if h.busy || h.robotsVia != nil {
		return
	}
	switch {
	case now.Before(h.deadUntil):
		s.drain(h, h.deadStatus, false, h.deadErr, now)
	case now.Before(h.rec.BackoffUntil):
		s.drain(h, crawl.StatusError, true, "fetcher: host backing off until "+h.rec.BackoffUntil.UTC().Format(time.RFC3339), now)
	}
	if h.jobs.len() == 0 && len(h.sitemaps) == 0 && len(h.hops) == 0 {
		if h.hidx >= 0 {
			heap.Remove(&s.ready, h.hidx)
		}
		h.eligible = time.Time{}
		return
	}
	if h.eligible.IsZero() {
		h.eligible = now
	}
	h.at = s.readyAt(h, now)
	if h.hidx >= 0 {
		heap.Fix(&s.ready, h.hidx)
	} else {
		heap.Push(&s.ready, h)
	}
}

// drain answers every queued job of h, drops its pending sitemaps and
// fails the robots.txt hops waiting for it.
func (s *scheduler) drain(h *host, status crawl.Status, retry bool, why string, now time.Time) {
	for h.jobs.len() > 0 {
		s.answer(h.jobs.pop(), status, retry, why, now)
	}
	h.jobs.release()
	if len(h.sitemaps) > 0 {
		h.sitemapsAgain = true
	}
	s.dropSitemaps(h)
	s.failHops(h, now)
}

func (s *scheduler) dropSitemaps(h *host) {
	s.f.c.internal.Add(-int64(len(h.sitemaps)))
	clear(h.sitemaps)
	h.sitemaps = h.sitemaps[:0]
}

// dispatch hands ready hosts' next tasks to idle workers.
func (s *scheduler) dispatch(now time.Time) {
	if s.f.paused.Load() {
		return
	}
	for s.idle > 0 && len(s.ready) > 0 {
		h := s.ready[0]
		if h.at.After(now) {
			return
		}
		if at := s.readyAt(h, now); at.After(now) { // its IP went meanwhile
			h.at = at
			heap.Fix(&s.ready, 0)
			continue
		}
		heap.Pop(&s.ready)
		// The abort scope first, then the pauses: a Pause or PauseGroup
		// missed here is followed by an Abort or AbortGroup that cancels
		// this scope, so no request starts after they return.
		abort := s.f.groupAbortContext(h.grp)
		if s.f.paused.Load() { // the same for Pause and Abort
			heap.Push(&s.ready, h)
			return
		}
		if h.grp.paused.Load() {
			s.park(h)
			continue
		}
		if t := s.nextTask(h, now); t != nil {
			t.grp, t.abort = h.grp, abort
			if t.kind == taskPage && t.job.Group != h.grp.id {
				t.grp = s.groupOf(t.job.Group)
			}
			s.send(h, t, now)
		} else {
			s.service(h, now)
		}
	}
}

// nextTask returns the next task of a ready host, or nil if it has no work
// left (jobs that robots.txt denies are answered on the way).
func (s *scheduler) nextTask(h *host, now time.Time) *task {
	if s.held(h, now) {
		return nil
	}
	if s.o.Skip != nil && (s.needsSetup(h, now) || s.needsRobots(h, now)) {
		// Jobs the caller dropped must not cost the host a request, not
		// even robots.txt: their host may be another node's by now.
		s.skipDropped(h, now)
		if h.jobs.len() == 0 && len(h.sitemaps) == 0 && len(h.hops) == 0 {
			h.jobs.release()
			return nil
		}
	}
	if s.needsSetup(h, now) {
		t := s.newTask(taskSetup, h)
		t.load = !h.loaded
		return t
	}
	if t := s.nextHop(h, now); t != nil {
		return t
	}
	if s.needsRobots(h, now) {
		if h.jobs.len() == 0 {
			s.dropSitemaps(h)
			return nil
		}
		return s.robotsTask(h, h)
	}
	if h.sitemapsAgain && h.jobs.len() > 0 {
		h.sitemapsAgain = false
		s.queueSitemaps(h, h.jobs.peek().Round)
	}
	for len(h.sitemaps) > 0 {
		sm := h.sitemaps[0]
		h.sitemaps[0] = sitemapRef{}
		h.sitemaps = h.sitemaps[1:]
		if !h.policy.Allowed(urlnorm.PathQuery(sm.url)) {
			s.f.c.internal.Add(-1)
			continue
		}
		t := s.newTask(taskSitemap, h)
		t.url, t.expand = sm.url, sm.expand
		t.job = Job{URL: sm.url, Host: h.name, Round: h.sitemapRound, Depth: 1, Group: h.grp.id}
		return t
	}
	for h.jobs.len() > 0 {
		j := h.jobs.pop()
		if s.o.Skip != nil && s.o.Skip(&j) {
			s.answer(j, crawl.StatusError, true, "fetcher: job dropped by its caller", now)
			continue
		}
		if !h.policy.Allowed(urlnorm.PathQuery(j.URL)) {
			s.answer(j, crawl.StatusRobotsDenied, false, "", now)
			continue
		}
		t := s.newTask(taskPage, h)
		t.job = j
		return t
	}
	h.jobs.release()
	return nil
}

func (s *scheduler) newTask(k taskKind, h *host) *task {
	var t *task
	if n := len(s.free); n > 0 {
		t = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		t = new(task)
	}
	t.kind, t.h, t.name = k, h, h.name
	return t
}

func (s *scheduler) freeTask(t *task) {
	*t = task{}
	if len(s.free) < 4*s.o.Workers {
		s.free = append(s.free, t)
	}
}

// send hands t to a worker. Requests take the host and its IP: the IP's
// next start is now + IPDelay; the host's is set when the request ends.
func (s *scheduler) send(h *host, t *task, now time.Time) {
	c := &s.f.c
	h.busy = true
	if t.kind != taskSetup {
		timers := h.next
		if h.ipst.next.After(timers) {
			timers = h.ipst.next
		}
		if timers.After(h.eligible) {
			t.wait = earlier(now, timers).Sub(h.eligible)
			c.politeness.Add(int64(t.wait))
		}
		c.workerWait.Add(int64(max(0, now.Sub(later(timers, h.eligible)))))
		h.ipst.next = now.Add(s.o.IPDelay)
		if s.o.IPDelay > 0 {
			h.ipst.locked++
			h.started = false
		}
		t.ip, t.addrs = h.ip, h.rec.IPs // applySetup put h.ip first
		c.inflight.Add(1)
		t.grp.inflight.Add(1)
		if t.kind == taskPage {
			c.queued.Add(-1)
			t.grp.queued.Add(-1)
		}
	}
	h.eligible = time.Time{}
	s.idle--
	s.f.work <- t // never blocks: the channel holds Workers tasks and a worker is idle
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// started records that h's request was answered (its response headers
// came) at time at: the server has surely received it, so the IP's next
// start counts from here, whatever the scheduling delays on either side.
func (s *scheduler) started(h *host, at time.Time) {
	if s.o.IPDelay <= 0 || h.ipst == nil {
		return
	}
	if s.f.testOnStart != nil {
		s.f.testOnStart(h.ip, at)
	}
	h.ipst.next = later(h.ipst.next, at.Add(s.o.IPDelay))
	if !h.started {
		h.started = true
		h.ipst.locked--
	}
}

// complete applies a finished task to its host.
func (s *scheduler) complete(t *task) {
	s.idle++
	h := t.h
	h.busy = false
	now := time.Now()
	if t.kind != taskSetup && s.o.IPDelay > 0 && !h.started && h.ipst != nil {
		// No answer came: the request may have reached the server at any
		// time until now.
		h.started = true
		h.ipst.locked--
		h.ipst.next = later(h.ipst.next, now.Add(s.o.IPDelay))
	}
	h.lastUsed = now
	if t.stopped {
		s.freeTask(t)
		return
	}
	switch t.kind {
	case taskSetup:
		s.applySetup(h, t, now)
	case taskRobots:
		if a := t.asker; a != nil {
			// A hop of a's robots.txt: a request to h, whose pace it
			// keeps; what it found is a's.
			h.next = later(h.next, t.end.Add(s.gap(h)))
			s.countOutcome(h, t.outcome, now)
			a.robotsVia = nil
			s.applyRobots(a, t, now)
			s.service(a, now)
			break
		}
		// h.next is past unless a job's NotBefore raised it meanwhile: keep that.
		notBefore := h.next
		s.applyRobots(h, t, now)
		h.next = later(notBefore, t.end.Add(s.gap(h)))
	case taskSitemap:
		h.next = later(h.next, t.end.Add(s.gap(h)))
		if t.expand {
			for _, u := range t.children {
				s.queueSitemap(h, u, false)
			}
		}
		s.f.c.internal.Add(-1)
		s.countOutcome(h, t.outcome, now)
		if len(h.sitemaps) == 0 && h.rec.SitemapsPending {
			// The last of them: its result went to OnResult before
			// this completion.
			h.rec.SitemapsPending = false
			s.save(h)
		}
	case taskPage:
		h.next = later(h.next, t.end.Add(s.gap(h)))
		s.countOutcome(h, t.outcome, now)
	}
	if t.retryAfter > 0 {
		s.retryAfter(h, t)
	}
	s.service(h, now)
	s.freeTask(t)
}

// retryAfter keeps the Retry-After of a 429 or 503 answer from h (RFC
// 9110 10.2.3): no request to h before t's end plus the wait, capped at
// BackoffMax. A wait within the host's usual pace (its delay, or
// MaxCrawlDelay if that is longer: the longest gap the fetcher ever
// holds a host's queue for) moves its next start, and its queued jobs
// wait; a longer one backs the host off until then (saved, so that
// generate skips it and another node honours it), and service answers
// its jobs (Retry, NoRequest) so that the round does not wait for it.
func (s *scheduler) retryAfter(h *host, t *task) {
	d := min(t.retryAfter, s.o.BackoffMax)
	until := t.end.Add(d)
	if d <= max(s.gap(h), s.o.MaxCrawlDelay) {
		h.next = later(h.next, until)
		return
	}
	if until.After(h.rec.BackoffUntil) {
		h.rec.BackoffUntil = until
		s.f.c.backoffs.Add(1)
		s.save(h)
	}
}

// gap is the delay after a request to h: the operator's delay for it
// (Options.Override) in place of HostDelay, if there is one.
func (s *scheduler) gap(h *host) time.Duration {
	if s.o.Override == nil {
		return h.delay
	}
	if d, _ := s.o.Override(h.name); d > 0 {
		return max(d, min(h.rec.CrawlDelay, s.o.MaxCrawlDelay))
	}
	return h.delay
}

// held answers the jobs of a host the operator blocked (Options.Override)
// without a request (Retry, NoRequest: they go back to the frontier) and
// drops its sitemaps; it reports whether it did.
func (s *scheduler) held(h *host, now time.Time) bool {
	if s.o.Override == nil {
		return false
	}
	if _, blocked := s.o.Override(h.name); !blocked {
		return false
	}
	for h.jobs.len() > 0 {
		s.answer(h.jobs.pop(), crawl.StatusError, true, "fetcher: host blocked by the operator", now)
	}
	h.jobs.release()
	s.dropSitemaps(h)
	s.failHops(h, now)
	return true
}

// hostDelay is the delay after a request to a host with this Crawl-delay.
func (s *scheduler) hostDelay(crawlDelay time.Duration) time.Duration {
	return max(s.o.HostDelay, min(crawlDelay, s.o.MaxCrawlDelay))
}

func (s *scheduler) applySetup(h *host, t *task, now time.Time) {
	if t.load {
		h.loaded = true
		if t.recOK {
			h.rec = t.rec
			if t.policy != nil && !h.freshRobots {
				h.policy = t.policy
				h.delay = s.hostDelay(h.rec.CrawlDelay)
				s.f.c.robotsDB.Add(1)
				if h.rec.SitemapsPending && h.jobs.len() > 0 {
					// Saved before its sitemaps were all fetched (a
					// kill, a move): fetch them from the kept copy.
					s.queueSitemaps(h, h.jobs.peek().Round)
				}
			}
		}
	}
	switch {
	case t.dnsErr != nil && isNotFound(t.dnsErr):
		h.deadUntil, h.deadStatus, h.deadErr = now.Add(negativeTTL), crawl.StatusGone, "fetcher: dns: "+t.dnsErr.Error()
		return
	case t.dnsErr != nil:
		h.rec.Failures++
		s.backoffDeadEnd(h, now)
		return
	}
	fresh := !h.rec.IPsExpiry.Equal(t.ipsExpiry)
	h.rec.IPs, h.rec.IPsExpiry = t.ips, t.ipsExpiry
	if t.forbidden != nil {
		h.deadUntil, h.deadStatus, h.deadErr = now.Add(negativeTTL), crawl.StatusError, "fetcher: forbidden address: "+t.forbidden.Error()
		return
	}
	s.setIP(h, t.ips[0]) // in setup's order: the first is the one connected to first
	if fresh {
		s.save(h)
	}
}

// setIP makes ip the address of h, and the politeness state of ip's key
// (ipKey) h's.
func (s *scheduler) setIP(h *host, ip netip.Addr) {
	if h.ipst != nil && h.ip == ip {
		return
	}
	key := ipKey(ip)
	if h.ipst != nil && ipKey(h.ip) == key {
		h.ip = ip // another address of the same key: the same state
		return
	}
	s.unrefIP(h)
	st := s.ips[key]
	if st == nil {
		st = &ipState{}
		s.ips[key] = st
		s.f.c.ips.Add(1)
	}
	st.refs++
	h.ip, h.ipst = ip, st
}

// unrefIP lets go of h's politeness state, dropping it with its last host.
func (s *scheduler) unrefIP(h *host) {
	if h.ipst == nil {
		return
	}
	h.ipst.refs--
	if h.ipst.refs == 0 {
		delete(s.ips, ipKey(h.ip))
		s.f.c.ips.Add(-1)
	}
	h.ipst = nil
}

// ipKey is the key of ip's politeness state: an IPv4 address is its own
// key; an IPv6 address's key is its /64 prefix, as one /64 is one link
// (one machine's, or one customer's), however many addresses it hands out.
func ipKey(ip netip.Addr) netip.Addr {
	if ip = ip.Unmap(); ip.Is4() {
		return ip
	}
	p, err := ip.WithZone("").Prefix(64)
	if err != nil {
		return ip // not an IP address: its own key
	}
	return p.Addr()
}

// robotsTask returns the task that fetches a's robots.txt, or the next
// hop of its redirects, from h (a itself, or the host the hop is on).
func (s *scheduler) robotsTask(h, a *host) *task {
	t := s.newTask(taskRobots, h)
	if a.origin == "" { // a host first seen as a hop's target
		a.origin = urlnorm.Origin(a.jobs.peek().URL)
	}
	t.url = a.robotsURL
	if t.url == "" {
		t.url = a.origin + "/robots.txt"
	}
	t.hops = a.robotsHops
	t.job = Job{URL: t.url, Host: h.name, Round: a.jobs.peek().Round, Group: a.grp.id}
	t.since, t.lastGood, t.lastStatus = a.rec.RobotsUnreachableSince, a.rec.Robots, a.rec.RobotsStatus
	if a != h {
		t.asker = a
	}
	return t
}

// nextHop returns the next robots.txt hop waiting for h, nil if none. A
// host that has no job left (AbortGroup, or Skip, asked here as before
// any robots.txt request) gives its hop up.
func (s *scheduler) nextHop(h *host, now time.Time) *task {
	for len(h.hops) > 0 {
		a := h.hops[0]
		h.hops[0] = nil
		h.hops = h.hops[1:]
		if len(h.hops) == 0 {
			h.hops = nil
		}
		if s.o.Skip != nil {
			s.skipDropped(a, now)
		}
		if a.jobs.len() == 0 {
			s.giveUpHop(a, now)
			continue
		}
		return s.robotsTask(h, a)
	}
	return nil
}

// skipDropped answers the queued jobs of h that the caller drops
// (Options.Skip).
func (s *scheduler) skipDropped(h *host, now time.Time) {
	h.jobs.filter(func(j *Job) bool {
		if s.o.Skip(j) {
			s.answer(*j, crawl.StatusError, true, "fetcher: job dropped by its caller", now)
			return false
		}
		return true
	})
}

// giveUpHop ends the wait of a, left without a job, for a hop of its
// robots.txt: its redirects start again from robots.txt next time.
func (s *scheduler) giveUpHop(a *host, now time.Time) {
	a.robotsVia, a.robotsURL, a.robotsHops = nil, "", 0
	a.jobs.release()
	s.service(a, now)
}

// pruneHops gives up the hops waiting for h of hosts left without a job
// (AbortGroup), so that neither waits for h (whose group may stay paused).
func (s *scheduler) pruneHops(h *host, now time.Time) {
	var gone []*host
	h.hops = slices.DeleteFunc(h.hops, func(a *host) bool {
		if a.jobs.len() > 0 {
			return false
		}
		gone = append(gone, a)
		return true
	})
	for _, a := range gone {
		s.giveUpHop(a, now)
	}
	s.service(h, now)
}

// followRobots follows a redirect of h's robots.txt to the URL to, its
// hops-th. A hop on h is h's next robots.txt request, as any; a hop to
// another host is a request to that host (added to the workbench if it is
// not there, and resolved and checked as any): h waits in its hops, and
// it goes when that host's politeness allows.
func (s *scheduler) followRobots(h *host, to string, hops int, now time.Time) {
	h.robotsURL, h.robotsHops = to, hops
	name := urlnorm.Host(to)
	if name == h.name {
		return
	}
	b := s.hosts[name]
	if b == nil {
		// Its origin is set by its first job, if one comes.
		b = &host{name: name, hidx: -1, delay: s.o.HostDelay, grp: h.grp}
		s.hosts[name] = b
		s.f.c.hosts.Add(1)
	}
	b.lastUsed = now
	b.hops = append(b.hops, h)
	h.robotsVia = b
	s.service(b, now)
}

// failHops ends the robots.txt hops waiting for h, which cannot be
// fetched (h is dead, backing off or blocked): their robots.txt is
// unreachable.
func (s *scheduler) failHops(h *host, now time.Time) {
	hops := h.hops
	h.hops = nil
	for i, a := range hops {
		hops[i] = nil
		a.robotsVia = nil
		a.robotsURL, a.robotsHops = "", 0
		s.robotsUnreachable(a, 0, now)
		s.service(a, now)
	}
}

// robotsUnreachable applies a robots.txt fetch of h that got a 5xx or a
// 429 (status), or no answer (0): h is disallowed and backs off. Its last
// good copy is kept, and since when it has been unreachable noted.
func (s *scheduler) robotsUnreachable(h *host, status int, now time.Time) {
	h.policy, h.rec.RobotsExpiry = nil, time.Time{}
	if h.rec.RobotsUnreachableSince.IsZero() {
		h.rec.RobotsUnreachableSince = now
	}
	h.rec.Failures++
	if status == 0 { // no HTTP answer at all
		s.backoffDeadEnd(h, now)
	} else {
		s.backoff(h, now)
	}
}

// robotsFloorPaces sets the shortest lifetime of a robots.txt: that many
// times its host's pace (its delay plus what the fetch took). A
// robots.txt that asks not to be cached (no-cache, max-age=0) is then at
// most one request in robotsFloorPaces of a host fetched without pause,
// where fetching it before every page would double the load.
const robotsFloorPaces = 100

// applyRobots applies the outcome of a robots.txt request for h (made to
// h, or a hop of its redirects on another host): a redirect to follow, the
// policy found, or robots.txt unreachable.
func (s *scheduler) applyRobots(h *host, t *task, now time.Time) {
	if t.location != "" {
		s.followRobots(h, t.location, t.hops+1, now)
		return
	}
	h.robotsURL, h.robotsHops = "", 0
	if t.refused != "" {
		// As a forbidden address: its jobs are answered without a
		// request, no retry, and no back-off held for a fault that does
		// not pass.
		h.deadUntil, h.deadStatus, h.deadErr = now.Add(negativeTTL), crawl.StatusError, t.refused
		return
	}
	p := t.policy
	if p == nil || p.Unavailable() {
		s.robotsUnreachable(h, t.httpStatus, now)
		return
	}
	h.policy = p
	h.robotsHere, h.freshRobots = true, false
	h.rec.CrawlDelay = p.CrawlDelay()
	h.delay = s.hostDelay(p.CrawlDelay())
	if t.stale {
		// Unreachable past robots.UnreachableLimit: the last good copy (or
		// nothing) rules for RobotsTTL, and robots.txt stays unreachable.
		h.rec.RobotsExpiry = now.Add(s.o.RobotsTTL)
	} else {
		h.rec.Robots, h.rec.RobotsStatus, h.rec.RobotsUnreachableSince = t.body, uint16(t.httpStatus), time.Time{}
		floor := robotsFloorPaces * (s.gap(h) + t.took())
		h.rec.RobotsExpiry = now.Add(robots.Lifetime(t.cacheControl, floor, s.o.RobotsTTL))
		h.rec.Failures, h.rec.BackoffUntil = 0, time.Time{}
	}
	// The record says whether the sitemaps it names are still to fetch
	// (crawl.HostRecord.SitemapsPending): saved with robots.txt, it may
	// be durable before their results are.
	s.queueSitemaps(h, t.job.Round)
	h.rec.SitemapsPending = len(h.sitemaps) > 0
	s.save(h)
	h.jobs.filter(func(j *Job) bool {
		if p.Allowed(urlnorm.PathQuery(j.URL)) {
			return true
		}
		s.answer(*j, crawl.StatusRobotsDenied, false, "", now)
		return false
	})
}

// queueSitemaps queues the same-host sitemaps robots.txt names, for a job
// of round.
func (s *scheduler) queueSitemaps(h *host, round uint64) {
	h.sitemapsQueued, h.sitemapRound, h.sitemapsAgain = 0, round, false
	s.dropSitemaps(h)
	for _, raw := range h.policy.Sitemaps() {
		u, err := s.o.Normalizer.NormalizeString(raw)
		if err != nil || urlnorm.Host(u) != h.name {
			continue
		}
		s.queueSitemap(h, u, true)
	}
}

// queueSitemap queues a sitemap fetch, at most maxSitemaps per robots.txt.
func (s *scheduler) queueSitemap(h *host, u string, expand bool) {
	if h.sitemapsQueued >= maxSitemaps {
		return
	}
	h.sitemapsQueued++
	h.sitemaps = append(h.sitemaps, sitemapRef{url: u, expand: expand})
	s.f.c.internal.Add(1)
}

// countOutcome keeps the count of consecutive failures and backs the host
// off at MaxFailures.
func (s *scheduler) countOutcome(h *host, oc outcome, now time.Time) {
	switch oc {
	case outcomeFailure:
		h.rec.Failures++
		if int(h.rec.Failures) >= s.o.MaxFailures {
			s.backoff(h, now)
		}
	case outcomeOK:
		if h.rec.Failures > 0 {
			h.rec.Failures = 0
			s.save(h)
		}
	}
}

// backoff keeps h from being fetched for BackoffBase × 2^(failures-1),
// capped at BackoffMax. service then answers its jobs with Retry.
func (s *scheduler) backoff(h *host, now time.Time) { s.backoffUpTo(h, now, s.o.BackoffMax) }

// backoffDeadEnd is backoff for a host that gave no answer at all, capped
// at DeadEndBackoffMax.
func (s *scheduler) backoffDeadEnd(h *host, now time.Time) {
	s.backoffUpTo(h, now, min(s.o.BackoffMax, s.o.DeadEndBackoffMax))
}

// backoffUpTo backs h off for BackoffBase × 2^(failures-1), capped at maxD.
func (s *scheduler) backoffUpTo(h *host, now time.Time, maxD time.Duration) {
	h.rec.BackoffUntil = now.Add(backoffFor(s.o.BackoffBase, maxD, h.rec.Failures))
	s.f.c.backoffs.Add(1)
	s.save(h)
}

// backoffFor returns base × 2^(failures-1), capped at maxD.
func backoffFor(base, maxD time.Duration, failures uint32) time.Duration {
	n := max(failures, 1) - 1
	if n >= 32 {
		return maxD
	}
	d := base << n
	if d <= 0 || d > maxD || d>>n != base {
		return maxD
	}
	return d
}

func (s *scheduler) save(h *host) {
	if s.o.Hosts != nil {
		s.o.Hosts.SaveHost(h.name, h.rec)
	}
}

// evict drops hosts that have had nothing to do for idleTTL (parked ones
// included: a group paused for good after AbortGroup leaves its hosts
// there); what matters of them is in the HostStore.
func (s *scheduler) evict(now time.Time) {
	for name, h := range s.hosts {
		if h.busy || h.hidx >= 0 || h.jobs.len() > 0 || len(h.sitemaps) > 0 || h.robotsVia != nil || len(h.hops) > 0 ||
			now.Sub(h.lastUsed) < s.idleTTL || now.Before(h.next) ||
			now.Before(h.rec.BackoffUntil) || now.Before(h.deadUntil) {
			continue
		}
		s.unrefIP(h)
		delete(s.hosts, name)
		s.f.c.hosts.Add(-1)
		h.parked = false // a paused group's host with nothing left (AbortGroup)
	}
	s.parked = slices.DeleteFunc(s.parked, func(h *host) bool { return !h.parked })
}

// jobQueue is a FIFO of jobs.
type jobQueue struct {
	q    []Job
	head int
}

func (q *jobQueue) len() int   { return len(q.q) - q.head }
func (q *jobQueue) push(j Job) { q.q = append(q.q, j) }
func (q *jobQueue) peek() *Job { return &q.q[q.head] }

func (q *jobQueue) pop() Job {
	j := q.q[q.head]
	q.q[q.head] = Job{}
	q.head++
	switch {
	case q.head == len(q.q):
		q.q, q.head = q.q[:0], 0
	case q.head >= 64 && 2*q.head >= len(q.q):
		n := copy(q.q, q.q[q.head:])
		clear(q.q[n:])
		q.q, q.head = q.q[:n], 0
		q.shrink()
	}
	return j
}

// shrink gives back most of the storage of a queue that has emptied a lot.
func (q *jobQueue) shrink() {
	if cap(q.q) > 256 && 4*len(q.q) < cap(q.q) {
		q.q = slices.Clip(slices.Clone(q.q))
	}
}

// release frees the storage of an empty queue.
func (q *jobQueue) release() {
	if q.len() == 0 {
		q.q, q.head = nil, 0
	}
}

// filter keeps the jobs for which keep returns true, in order.
func (q *jobQueue) filter(keep func(*Job) bool) {
	out := q.q[:0]
	for i := q.head; i < len(q.q); i++ {
		if keep(&q.q[i]) {
			out = append(out, q.q[i])
		}
	}
	clear(q.q[len(out):])
	q.q, q.head = out, 0
	q.shrink()
}

// hostHeap orders hosts by the time they may go next.
type hostHeap []*host

func (h hostHeap) Len() int           { return len(h) }
func (h hostHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h hostHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}

func (h *hostHeap) Push(x any) {
	e := x.(*host)
	e.hidx = len(*h)
	*h = append(*h, e)
}

func (h *hostHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.hidx = -1
	*h = old[:n-1]
	return e
}

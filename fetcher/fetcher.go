// Package fetcher is Meridian's polite fetcher. A rounds driver submits the
// jobs (URLs) of a round; the fetcher fetches them and hands back one Result
// per job through Options.OnResult.
//
// It follows BUbiNG's workbench design: one scheduler goroutine owns the
// per-host state (a FIFO of jobs, next allowed start, robots.txt policy,
// addresses, failures, back-off) and the per-IP state (next allowed start;
// an IPv6 /64 is one IP), keeps the hosts that have work in a heap keyed by
// the earliest time they may go, and hands (host, job) pairs to a fixed
// pool of workers. A host has at most one request in flight (robots.txt,
// its redirects to other hosts, and sitemaps included); its next request
// starts at least max(HostDelay, min(Crawl-delay, MaxCrawlDelay)) after the
// end of the previous one, and no earlier than a 429's or 503's
// Retry-After; two requests to one IP start at least IPDelay apart. Before
// its first page a host is resolved (dnscache: A and AAAA), its addresses
// checked (netguard) and its robots.txt fetched (RFC 9309) or loaded from
// the HostStore.
//
// HTTP goes through github.com/gocolly/colly/v2, used as a plain engine: no
// revisit memory, no robots, no redirects followed, no HTML parsing. The
// fetcher's own transport dials every address of a host in turn (Happy
// Eyeballs, RFC 8305) or a proxy, speaks HTTP/2 where a server offers it,
// asks for gzip, br and zstd and decodes them itself (package coding), so
// that the WARC file records each response as received while links are
// read from the decoded body, bounded both ways.
package fetcher

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
)

// Fetcher fetches submitted jobs politely. Make one with New, start it with
// Run.
type Fetcher struct {
	o         Options
	log       *slog.Logger
	resolver  *dnscache.Resolver
	transport *http.Transport
	dialer    net.Dialer
	runCtx    context.Context // set by Run before any goroutine uses it
	started   atomic.Bool
	paused    atomic.Bool
	// aborts is cancelled by Abort: requests in flight watch it.
	aborts atomic.Pointer[abortScope]

	mu struct {
		sync.Mutex
		pending []Job
		aborts  []groupAbort // AbortGroup calls for the scheduler
	}
	wake chan struct{} // a Submit, Pause, PauseGroup or AbortGroup happened
	// groups are the states of the groups of jobs (Job.Group); unpark
	// tells the scheduler that a group was resumed.
	groups groups
	unpark atomic.Bool

	work chan *task // scheduler → workers
	done chan event // workers → scheduler

	c counters

	// testOnStart, if set before Run, sees every request start the
	// scheduler learns of (IPDelay > 0 only), in the scheduler goroutine.
	testOnStart func(ip netip.Addr, at time.Time)
	// testOnPark, if set before Run, sees every host the scheduler takes
	// out of the schedule because its group is paused.
	testOnPark func(host string)

	// jar keeps the cookies servers set (Options.Cookies); nil without.
	jar *cookieJar
	// noContactLogged is set once a request refused with ErrNoContact
	// has been logged.
	noContactLogged atomic.Bool
}

// counters are the atomic counters behind Stats.
type counters struct {
	queued, inflight, internal        atomic.Int64
	done, retries, requests, bytes    atomic.Int64
	notModified, unchanged            atomic.Int64
	busy, politeness, workerWait      atomic.Int64 // nanoseconds
	robots, robotsDB, sitemaps        atomic.Int64
	dns, dnsErr, backoffs, hosts, ips atomic.Int64
	byStatus                          [16]atomic.Int64
}

// New returns a Fetcher for o (copied, defaults filled in).
func New(o Options) (*Fetcher, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.ensureDefaults()
	o.LocalAddrs = slices.Clone(o.LocalAddrs) // the caller's slice stays the caller's
	for i, a := range o.LocalAddrs {
		o.LocalAddrs[i] = a.Unmap()
	}
	f := &Fetcher{o: o, log: o.Logger, resolver: o.Resolver, wake: make(chan struct{}, 1)}
	if f.resolver == nil {
		r, err := dnscache.New(dnscache.Options{LocalAddrs: o.LocalAddrs})
		if err != nil {
			return nil, fmt.Errorf("fetcher: resolver: %w", err)
		}
		f.resolver = r
	}
	f.transport = f.newTransport()
	if o.Cookies {
		f.jar = newCookieJar(o.MaxCookieHosts)
	}
	f.work = make(chan *task, o.Workers)
	f.done = make(chan event, 2*o.Workers) // at most two events per task out: never full
	f.runCtx = context.Background()
	return f, nil
}

// Submit adds jobs to the workbench. It is safe for concurrent use, never
// waits for the scheduler, and may be called before Run.
func (f *Fetcher) Submit(jobs []Job) {
	if len(jobs) == 0 {
		return
	}
	f.c.queued.Add(int64(len(jobs)))
	gr, n := f.groups.get(jobs[0].Group), int64(0)
	for i := range jobs {
		if jobs[i].Group != gr.id {
			gr.queued.Add(n)
			gr, n = f.groups.get(jobs[i].Group), 0
		}
		n++
	}
	gr.queued.Add(n)
	f.mu.Lock()
	f.mu.pending = append(f.mu.pending, jobs...)
	f.mu.Unlock()
	f.poke()
}

// Pause stops (true) or resumes (false) the start of new requests; queued
// jobs wait, requests in flight finish. A node that has lost its site's
// leader pauses, as its work may be given to another node.
func (f *Fetcher) Pause(on bool) {
	if f.paused.Swap(on) != on {
		f.poke()
	}
}

// abortScope is what the requests in flight watch for Abort.
type abortScope struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// abortContext returns the context that Abort cancels.
func (f *Fetcher) abortContext() context.Context {
	for {
		if a := f.aborts.Load(); a != nil {
			return a.ctx
		}
		ctx, cancel := context.WithCancel(context.Background())
		if !f.aborts.CompareAndSwap(nil, &abortScope{ctx, cancel}) {
			cancel()
		}
	}
}

// Abort ends the requests in flight now (their jobs are answered as
// transient failures), those handed to a worker and not started yet
// included; later requests are not affected. After Pause(true) then Abort,
// no request starts until Pause(false). A node that has
// lost its site's leader pauses and aborts: the leader may give its hosts
// to another node once the fail timeout has passed, and a request that
// went on up to TotalTimeout would overlap the new node's.
func (f *Fetcher) Abort() {
	if a := f.aborts.Swap(nil); a != nil {
		a.cancel()
	}
}

// Idle reports whether no job is queued or being fetched and no robots.txt
// or sitemap fetch is pending. A job's counters drop after its OnResult
// returns, so Idle is false inside the last OnResult.
func (f *Fetcher) Idle() bool {
	return f.c.queued.Load() == 0 && f.c.inflight.Load() == 0 && f.c.internal.Load() == 0
}

// Stats returns a snapshot of the counters.
func (f *Fetcher) Stats() Stats {
	c := &f.c
	s := Stats{
		Queued:         c.queued.Load(),
		InFlight:       c.inflight.Load(),
		Done:           c.done.Load(),
		Retries:        c.retries.Load(),
		NotModified:    c.notModified.Load(),
		Unchanged:      c.unchanged.Load(),
		Requests:       c.requests.Load(),
		Bytes:          c.bytes.Load(),
		Busy:           time.Duration(c.busy.Load()),
		PolitenessWait: time.Duration(c.politeness.Load()),
		WorkerWait:     time.Duration(c.workerWait.Load()),
		RobotsFetches:  c.robots.Load(),
		RobotsFromDB:   c.robotsDB.Load(),
		SitemapFetches: c.sitemaps.Load(),
		DNSLookups:     c.dns.Load(),
		DNSErrors:      c.dnsErr.Load(),
		Backoffs:       c.backoffs.Load(),
		Hosts:          c.hosts.Load(),
		IPs:            c.ips.Load(),
		ByStatus:       map[crawl.Status]int64{},
	}
	for i := range c.byStatus {
		if n := c.byStatus[i].Load(); n > 0 {
			s.ByStatus[crawl.Status(i)] = n
		}
	}
	return s
}

// Run runs the scheduler and the workers until ctx is done. Then in-flight
// requests are cancelled (their jobs get no Result), queued jobs are dropped
// (the caller knows them from its generate list), the workers are waited for
// and idle connections closed. It returns nil after such a stop, ErrRunning
// if called twice.
func (f *Fetcher) Run(ctx context.Context) error {
	if !f.started.CompareAndSwap(false, true) {
		return ErrRunning
	}
	f.runCtx = ctx
	var wg sync.WaitGroup
	for range f.o.Workers {
		w := newWorker(ctx, f)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run()
		}()
	}
	s := newScheduler(f)
	s.loop(ctx)
	close(f.work)
	wg.Wait()
	f.transport.CloseIdleConnections()
	return nil
}

// deliver hands r to OnResult and counts it.
func (f *Fetcher) deliver(r *Result) {
	f.o.OnResult(r)
	if r.Kind != KindPage {
		return
	}
	f.c.done.Add(1)
	if r.Retry {
		f.c.retries.Add(1)
	}
	if r.NotModified {
		f.c.notModified.Add(1)
	}
	if r.Unchanged {
		f.c.unchanged.Add(1)
	}
	f.c.byStatus[r.Status&15].Add(1)
}

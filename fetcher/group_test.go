package fetcher

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
)

// hostOf returns the host name of a test URL.
func hostOf(u string) string {
	h, _, _ := strings.Cut(strings.TrimPrefix(u, "http://"), ":")
	return h
}

// TestGroupPause: the jobs of a paused group do not start (no request to
// its hosts, robots.txt included) while another group's are fetched; the
// counts say so; resumed, they are fetched and carry their group through.
func TestGroupPause(t *testing.T) {
	s := startHoServer(t, nil)
	c := &hoResults{}
	f := newHoFetcher(t, s, c, nil)
	f.PauseGroup(1, true)
	runHo(t, f)
	var g1, g2 []Job
	for i := range 3 {
		g1 = append(g1, Job{URL: s.url(fmt.Sprintf("a%d.test", i), "/p"), Group: 1}, Job{URL: s.url(fmt.Sprintf("a%d.test", i), "/q"), Group: 1})
		g2 = append(g2, Job{URL: s.url(fmt.Sprintf("b%d.test", i), "/p"), Group: 2})
	}
	f.Submit(append(append([]Job{}, g1...), g2...))
	waitHo(t, 10*time.Second, "group 2's results", func() bool { return c.count() >= len(g2) })
	time.Sleep(200 * time.Millisecond) // room for a wrong request of group 1
	for _, a := range s.arrivals() {
		if strings.HasPrefix(a.host, "a") {
			t.Errorf("request to %s%s of paused group 1", a.host, a.path)
		}
	}
	for _, j := range g2 {
		if r := c.only(t, j.URL); r.Status != crawl.StatusFetched || r.Group != 2 {
			t.Errorf("%s: %s, group %d", j.URL, describe(r), r.Group)
		}
	}
	if n := c.count(); n != len(g2) {
		t.Errorf("%d results, want group 2's %d only", n, len(g2))
	}
	if st := f.GroupStats(1); st != (GroupStats{Queued: int64(len(g1))}) {
		t.Errorf("paused group 1: %+v, want %d queued", st, len(g1))
	}
	if st := f.GroupStats(2); st != (GroupStats{}) {
		t.Errorf("group 2 done: %+v", st)
	}
	if f.Idle() {
		t.Error("Idle with a paused group's jobs queued")
	}

	f.PauseGroup(1, false)
	waitIdle(t, f, c, len(g1)+len(g2))
	for _, j := range g1 {
		if r := c.only(t, j.URL); r.Status != crawl.StatusFetched || r.Group != 1 {
			t.Errorf("%s: %s, group %d", j.URL, describe(r), r.Group)
		}
	}
	for _, g := range []uint32{1, 2} {
		if st := f.GroupStats(g); st != (GroupStats{}) {
			t.Errorf("group %d at the end: %+v", g, st)
		}
	}
}

// TestGroupAbort: AbortGroup ends its group's request in flight at once
// (as a transient failure) and answers its queued jobs without a request
// (GroupAborted), while the other group's request in flight goes on and its
// queued jobs stay; the counts follow; jobs of the group submitted after the
// abort are fetched.
func TestGroupAbort(t *testing.T) {
	s, c, f := startHangingHo(t)
	hang1, hang2 := s.url("a.test", "/hang"), s.url("b.test", "/hang")
	jobs := []Job{{URL: hang1, Group: 1}, {URL: hang2, Group: 2}}
	// Queued behind the hanging request of their host.
	for i := range 3 {
		jobs = append(jobs, Job{URL: s.url("a.test", fmt.Sprintf("/q%d", i)), Group: 1})
	}
	for i := range 2 {
		jobs = append(jobs, Job{URL: s.url("b.test", fmt.Sprintf("/q%d", i)), Group: 2})
	}
	f.Submit(jobs)
	waitHo(t, 10*time.Second, "both slow requests to arrive", func() bool {
		return s.saw("a.test", "/hang") && s.saw("b.test", "/hang")
	})
	// robots.txt is answered before /hang starts: one request each in flight.
	waitHo(t, 10*time.Second, "the counts", func() bool {
		return f.GroupStats(1) == GroupStats{Queued: 3, InFlight: 1} && f.GroupStats(2) == GroupStats{Queued: 2, InFlight: 1}
	})

	f.PauseGroup(1, true)
	f.AbortGroup(1)
	// Far less than TotalTimeout: only the abort can end it by then.
	waitHo(t, 10*time.Second, "group 1's results", func() bool { return c.count() == 4 })
	if r := c.only(t, hang1); !r.Retry || r.Status == crawl.StatusFetched || r.NoRequest || r.Group != 1 {
		t.Errorf("aborted request: %s, want a transient failure of group 1", describe(r))
	}
	for _, j := range jobs[2:5] {
		r := c.only(t, j.URL)
		if !r.Retry || !r.NoRequest || r.Err != GroupAborted || r.Status != crawl.StatusError || r.Group != 1 {
			t.Errorf("queued job of the aborted group: %s, want %q", describe(r), GroupAborted)
		}
		if s.saw("a.test", strings.TrimPrefix(j.URL, s.url("a.test", ""))) {
			t.Errorf("%s requested after its group was aborted", j.URL)
		}
	}
	time.Sleep(200 * time.Millisecond) // room for a wrong answer of group 2
	if n := c.count(); n != 4 {
		t.Errorf("%d results; group 2's jobs were answered too", n)
	}
	if st := f.GroupStats(1); st != (GroupStats{}) {
		t.Errorf("aborted group 1: %+v", st)
	}
	if st := f.GroupStats(2); st != (GroupStats{Queued: 2, InFlight: 1}) {
		t.Errorf("group 2 after group 1's abort: %+v, want its request in flight and 2 queued", st)
	}

	f.PauseGroup(1, false)
	after := s.url("c.test", "/after")
	f.Submit([]Job{{URL: after, Group: 1}})
	waitHo(t, 10*time.Second, "the job after the abort", func() bool { return c.count() == 5 })
	if r := c.only(t, after); r.Status != crawl.StatusFetched {
		t.Errorf("a job of group 1 after the abort: %s", describe(r))
	}
	f.AbortGroup(2)
	waitIdle(t, f, c, len(jobs)+1)
	if r := c.only(t, hang2); !r.Retry || r.NoRequest {
		t.Errorf("group 2's request after its abort: %s", describe(r))
	}
}

// TestGroupAbortPending: AbortGroup drops the group's jobs submitted before
// it even when the scheduler has not taken them yet (here: before Run), and
// not the jobs of the group submitted after it, nor other groups' jobs.
func TestGroupAbortPending(t *testing.T) {
	s := startHoServer(t, nil)
	c := &hoResults{}
	f := newHoFetcher(t, s, c, nil)
	before := []Job{{URL: s.url("a.test", "/1"), Group: 7}, {URL: s.url("b.test", "/1"), Group: 8}, {URL: s.url("a.test", "/2"), Group: 7}}
	f.Submit(before)
	f.AbortGroup(7)
	later := []Job{{URL: s.url("a.test", "/3"), Group: 7}}
	f.Submit(later)
	if st := f.GroupStats(7); st.Queued != 3 {
		t.Errorf("group 7 before Run: %+v, want 3 queued", st)
	}
	runHo(t, f)
	waitIdle(t, f, c, 4)
	for _, j := range []Job{before[0], before[2]} {
		if r := c.only(t, j.URL); r.Err != GroupAborted || !r.NoRequest || !r.Retry {
			t.Errorf("%s submitted before AbortGroup: %s", j.URL, describe(r))
		}
	}
	for _, j := range []Job{before[1], later[0]} {
		if r := c.only(t, j.URL); r.Status != crawl.StatusFetched {
			t.Errorf("%s: %s, want fetched", j.URL, describe(r))
		}
	}
	if s.saw("a.test", "/1") || s.saw("a.test", "/2") {
		t.Error("a job dropped by AbortGroup was requested")
	}
	for _, g := range []uint32{7, 8} {
		if st := f.GroupStats(g); st != (GroupStats{}) {
			t.Errorf("group %d at the end: %+v", g, st)
		}
	}
}

// TestGroupAbortAll: Abort ends the requests in flight of every group.
func TestGroupAbortAll(t *testing.T) {
	s, c, f := startHangingHo(t)
	jobs := []Job{{URL: s.url("a.test", "/hang"), Group: 1}, {URL: s.url("b.test", "/hang"), Group: 2}, {URL: s.url("d.test", "/hang")}}
	f.Submit(jobs)
	waitHo(t, 10*time.Second, "the slow requests to arrive", func() bool {
		return s.saw("a.test", "/hang") && s.saw("b.test", "/hang") && s.saw("d.test", "/hang")
	})
	f.Abort()
	waitIdle(t, f, c, len(jobs))
	for _, j := range jobs {
		if r := c.only(t, j.URL); !r.Retry || r.Group != j.Group {
			t.Errorf("%s after Abort: %s, group %d", j.URL, describe(r), r.Group)
		}
	}
}

// TestGroupAbortEvicts: the hosts of a group paused for good and aborted
// (a shard led elsewhere now) are evicted once idle, like any other host.
func TestGroupAbortEvicts(t *testing.T) {
	s := startHoServer(t, nil)
	c := &hoResults{}
	f, err := New(Options{Workers: 2, HostDelay: time.Millisecond, MaxCrawlDelay: time.Millisecond,
		HostIdleTTL: 20 * time.Millisecond, AllowPrivate: true, Resolver: s.res, OnResult: c.onResult, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	parked := make(chan string, 4)
	f.testOnPark = func(h string) { parked <- h }
	runHo(t, f)
	f.Submit([]Job{{URL: s.url("a.test", "/1"), Group: 3}})
	waitIdle(t, f, c, 1) // a.test is set up and known
	f.PauseGroup(3, true)
	f.Submit([]Job{{URL: s.url("a.test", "/2"), Group: 3}})
	select {
	case h := <-parked:
		if h != "a.test" {
			t.Fatalf("parked %s, want a.test", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a.test was not parked in 5s")
	}
	f.AbortGroup(3)
	waitIdle(t, f, c, 2)
	waitHo(t, 5*time.Second, "a.test's eviction", func() bool { st := f.Stats(); return st.Hosts == 0 && st.IPs == 0 })
	if r := c.only(t, s.url("a.test", "/2")); r.Err != GroupAborted {
		t.Errorf("parked job after AbortGroup: %s", describe(r))
	}
	// Resuming the group after the eviction brings no stale host back.
	f.PauseGroup(3, false)
	f.Submit([]Job{{URL: s.url("a.test", "/3"), Group: 3}})
	waitIdle(t, f, c, 3)
	if r := c.only(t, s.url("a.test", "/3")); r.Status != crawl.StatusFetched {
		t.Errorf("after resuming: %s", describe(r))
	}
}

package fetcher

import (
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestOverride: a host the operator blocked gets no request, robots.txt
// included, and its jobs are answered without one (Retry, NoRequest, so
// that they go back to the frontier); a host given a longer delay keeps it
// (websim's least interval); the others are fetched at the site's delay.
func TestOverride(t *testing.T) {
	w := startWeb(t, synth.Options{Hosts: 6, Pages: 8, IPs: 6, Seed: 5, Profile: synth.Clean}, websim.Limits{})
	hosts := w.web.Hosts()
	blocked, slowed := hosts[0].Name, hosts[1].Name
	const slow = 150 * time.Millisecond
	c := newCollector(1)
	f, err := New(Options{
		Workers: 8, HostDelay: 20 * time.Millisecond, MaxCrawlDelay: 50 * time.Millisecond,
		ConnectTimeout: 2 * time.Second, HeaderTimeout: 2 * time.Second, TotalTimeout: 5 * time.Second,
		AllowPrivate: true, Resolver: w.res, Hosts: newMemHosts(), Normalizer: urlnorm.New(urlnorm.Options{}), Scope: &urlnorm.Scope{},
		OnResult: c.onResult, Logger: testLogger(t),
		Override: func(host string) (time.Duration, bool) {
			switch host {
			case blocked:
				return 0, true
			case slowed:
				return slow, false
			}
			return 0, false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	jobs := jobsOf(w, func(r *synth.Record) bool { return r.Status != 0 && r.Kind != "robots" })
	runCrawl(t, f, c, jobs, 50*time.Millisecond, 30*time.Second)
	snap := w.srv.Stats().Snapshot()
	if v := snap.Hosts[blocked]; v != nil && v.Requests > 0 {
		t.Errorf("blocked host %s got %d requests", blocked, v.Requests)
	}
	heldJobs := 0
	for _, r := range c.results() {
		if r.Kind != KindPage || r.Host != blocked {
			continue
		}
		heldJobs++
		if !r.Retry || !r.NoRequest || !strings.Contains(r.Err, "blocked by the operator") {
			t.Errorf("a blocked host's job answered %+v", r)
		}
	}
	if heldJobs == 0 {
		t.Error("no job of the blocked host was answered")
	}
	v := snap.Hosts[slowed]
	if v == nil || v.Requests < 3 || v.MinIntervalMS == nil || *v.MinIntervalMS < float64(slow/time.Millisecond) {
		t.Errorf("host %s with a delay of %v: %+v", slowed, slow, v)
	}
	for _, h := range hosts[2:] {
		if v := snap.Hosts[h.Name]; v == nil || v.Requests < 3 {
			t.Errorf("host %s: %+v", h.Name, v)
		}
	}
}

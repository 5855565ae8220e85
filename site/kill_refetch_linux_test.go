//go:build linux

package site_test

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/site"
)

// TestKillRefetch SIGKILLs a site in a fetch phase once it refetches
// pages, and restarts it for its remaining rounds: no fetched page loses
// its schedule (each is waiting for its refetch or due in the frontier),
// pages are still refetched after the restart, and OPIC's cash is
// conserved after every round (testConfig's check).
func TestKillRefetch(t *testing.T) {
	cfg := testConfig(t, "realistic")
	cfg.WebsimHosts, cfg.WebsimPages = 30, 6
	cfg.Workers = 8
	cfg.NoSync = false
	cfg.Refetch = plan.Refetch{Interval: 1500 * time.Millisecond, Adaptive: true, Min: 500 * time.Millisecond, Max: 10 * time.Second}
	cfg.Rounds = 60

	child := startChild(t, cfg)
	killed := false
	defer func() {
		if !killed {
			child.Process.Kill()
			child.Wait()
		}
	}()
	st := waitStatus(t, cfg, child, "refetched with requests in flight", func(st *site.Status) bool {
		return st.Refetch != nil && st.Refetch.Refetches >= 20 && st.Fetcher.InFlight > 0 && st.Phase == rounds.PhaseFetch
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	killed = true
	before := st.Refetch.Refetches
	t.Logf("killed in round %d with %d refetches counted", st.Round, before)

	restartToEnd(t, cfg)

	stores, closeStores := siteStores(t, cfg.Data)
	defer closeStores()
	var fetched, lost, refetched int
	for _, s := range stores {
		err := s.ScanURLs(func(r store.URLRecord) error {
			if r.Status != store.StatusFetched || r.HTTPStatus != http.StatusOK || strings.HasSuffix(r.URL, "/robots.txt") {
				return nil
			}
			fetched++
			if r.NextFetch.IsZero() && !r.Due {
				lost++
				if lost <= 5 {
					t.Errorf("%s: fetched without a schedule after the restart: %+v", r.URL, r)
				}
			}
			if r.Changed+r.Unchanged > 0 {
				refetched++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d fetched pages, %d refetched at least once, %d without a schedule", fetched, refetched, lost)
	if fetched == 0 || lost > 0 {
		t.Fatalf("%d of %d fetched pages lost their schedule", lost, fetched)
	}
	if refetched < fetched/2 {
		t.Errorf("only %d of %d pages refetched over %d rounds", refetched, fetched, cfg.Rounds)
	}
}

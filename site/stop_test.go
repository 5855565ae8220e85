package site_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowWeb serves hosts of pages that each take delay to answer, on their
// own loopback addresses: page N of a host links to pages 4N+1 … 4N+4, up
// to pages in all. It returns the front pages and counts the 2xx
// responses per URL (its own log).
func slowWeb(t *testing.T, hosts, pages int, delay time.Duration) (seeds []string, served func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	count := map[string]int{}
	for h := range hosts {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", 40+h))
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var n int
			if _, err := fmt.Sscanf(r.URL.Path, "/p/%d", &n); err != nil || n >= pages {
				http.NotFound(w, r)
				return
			}
			time.Sleep(delay)
			mu.Lock()
			count[base+r.URL.Path]++
			mu.Unlock()
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<html><head><title>%s p%d</title></head><body>", base, n) // a body of its own: not a duplicate
			for k := 4*n + 1; k <= 4*n+4 && k < pages; k++ {
				fmt.Fprintf(w, "<a href=\"/p/%d\">p%d</a> ", k, k)
			}
			fmt.Fprint(w, "</body></html>")
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		seeds = append(seeds, base+"/p/0")
	}
	return seeds, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(count)
	}
}

// TestCrawlStopResume: a node stopped (as by SIGTERM) while it has
// requests in flight, to hosts whose pages take 300 ms, lets them end
// before its shards stop, so that their results are in the shards' fetch
// segments: started again, it asks no page a second time (the servers'
// own counts), and the crawl ends with every page.
func TestCrawlStopResume(t *testing.T) {
	const hosts, pages = 8, 40
	seeds, served := slowWeb(t, hosts, pages, 300*time.Millisecond)
	cfg := testConfig(t, "off")
	cfg.Websim = "off"
	cfg.Seeds = filepath.Join(t.TempDir(), "seeds.txt")
	if err := os.WriteFile(cfg.Seeds, []byte(strings.Join(seeds, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.AllowPrivate, cfg.Rounds = true, 0 // to the end
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := runSite(t, ctx, cfg)
	inFlight := int64(0)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no requests in flight mid-crawl within 60 s")
		}
		st := r.s.Status()
		if inFlight = st.Fetcher.InFlight; st.Fetcher.Done >= 2*hosts && inFlight >= 3 {
			break
		}
	}
	r.stop()
	r.wait(t, ctx)
	t.Logf("stopped with %d requests in flight; %d pages served", inFlight, len(served()))
	cfg.Seeds = ""
	r = runSite(t, ctx, cfg)
	r.wait(t, ctx)
	got := served()
	twice := 0
	for u, n := range got {
		if n > 1 {
			twice++
			if twice <= 5 {
				t.Errorf("%s served %d times", u, n)
			}
		}
	}
	t.Logf("%d pages served, %d of them twice", len(got), twice)
	if len(got) != hosts*pages {
		t.Errorf("%d pages served of %d", len(got), hosts*pages)
	}
}

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
)

// Watch is a headless chromium showing a site's dashboard for the length
// of a benchmark run, so that the run measures what a watching operator
// costs the site.
type Watch struct {
	base   string
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ctx    context.Context

	mu     sync.Mutex
	errors []string
	polls  int     // the page's, last read
	served float64 // the site's counters, last read
	secs   float64
	cpu    float64
	seen   []string // console errors as of the last read at which the site answered
	bytes  int      // the last update's size
}

// WatchResult is what the watching cost and saw.
type WatchResult struct {
	Polls         int      `json:"polls"`          // updates the page rendered
	ServedPolls   float64  `json:"served_polls"`   // GET /dashboard.json the site answered
	ServedSeconds float64  `json:"served_seconds"` // time the site spent building and writing them
	ServedCPU     float64  `json:"served_cpu_s"`   // CPU time it spent on them
	ConsoleErrors []string `json:"console_errors"` // what the page logged as errors or warnings
	ShareOfCore   float64  `json:"share_of_core"`  // ServedSeconds ÷ the run's wall time
	ShareOfSite   float64  `json:"share_of_site"`  // ServedSeconds ÷ the site's CPU time
	PayloadBytes  int      `json:"payload_bytes"`  // the last update's size
}

// ChromiumOptions are the options that run Debian's chromium headless
// (the dashboard's browser tests and --watch); an error names how to get
// chromium when it is missing.
func ChromiumOptions() ([]chromedp.ExecAllocatorOption, error) {
	path := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		return nil, fmt.Errorf("bench: chromium is not installed (scripts/test, the README's test command, installs Debian's)")
	}
	return append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1400, 1100)), nil
}

// StartWatch opens base (http://host:port of a site's status listener) in
// headless Debian chromium.
func StartWatch(ctx context.Context, base string) (*Watch, error) {
	opts, err := ChromiumOptions()
	if err != nil {
		return nil, err
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(ctx), opts...)
	bctx, cancelTab := chromedp.NewContext(actx)
	w := &Watch{base: base, ctx: bctx, cancel: func() { cancelTab(); cancelAlloc() }}
	msgs := chromedp.Console(bctx)
	w.wg.Go(func() { // owner: Watch; ends when Stop cancels the browser
		for m, err := range msgs {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				w.mu.Lock()
				w.errors = append(w.errors, m.String())
				w.mu.Unlock()
			}
		}
	})
	nctx, cancel := context.WithTimeout(bctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(nctx, chromedp.Navigate(base+"/")); err != nil {
		w.cancel()
		w.wg.Wait()
		return nil, fmt.Errorf("bench: open the dashboard: %w", err)
	}
	w.wg.Go(func() { // owner: Watch; ends when Stop cancels the browser
		t := time.NewTicker(3 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-bctx.Done():
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(bctx, 5*time.Second)
				w.read(rctx)
				cancel()
			}
		}
	})
	return w, nil
}

// read takes what the page rendered and the site's counters (kept from
// the last read at which the site answered: it may have ended since).
func (w *Watch) read(ctx context.Context) {
	polls, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Number(document.getElementById('updated')?.dataset.polls || 0)`))
	served, secs, cpu := dashboardCounters(w.base)
	size := 0
	c := &http.Client{Timeout: 5 * time.Second}
	if resp, err := c.Get(w.base + "/dashboard.json"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			size = len(b)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.polls = max(w.polls, polls)
	}
	if served > 0 {
		w.served, w.secs, w.cpu = served, secs, cpu
	}
	if size > 0 {
		w.bytes = size
		w.seen = append(w.seen[:0], w.errors...)
	}
}

// Stop reads what the page rendered and the site's dashboard counters,
// then closes the browser. wall and siteCPU are the run's, for the
// shares. The figures are those of the last read at which the site still
// answered (the watch reads them every few seconds).
func (w *Watch) Stop(wall, siteCPU time.Duration) WatchResult {
	var r WatchResult
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	w.read(ctx)
	cancel()
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	r.ConsoleErrors = append([]string(nil), w.seen...) // not those of polls after the site ended
	r.Polls, r.ServedPolls, r.ServedSeconds, r.ServedCPU, r.PayloadBytes = w.polls, w.served, w.secs, w.cpu, w.bytes
	w.mu.Unlock()
	if wall > 0 {
		r.ShareOfCore = r.ServedCPU / wall.Seconds()
	}
	if siteCPU > 0 {
		r.ShareOfSite = r.ServedCPU / siteCPU.Seconds()
	}
	return r
}

// dashboardCounters reads meridian_dashboard_polls_total,
// meridian_dashboard_seconds_total and meridian_dashboard_cpu_seconds_total
// from the site's /metrics.
func dashboardCounters(base string) (polls, secs, cpu float64) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		return 0, 0, 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		switch name {
		case "meridian_dashboard_polls_total":
			polls = v
		case "meridian_dashboard_seconds_total":
			secs = v
		case "meridian_dashboard_cpu_seconds_total":
			cpu = v
		}
	}
	return polls, secs, cpu
}

package site_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/meridian-crawler/meridian/site"
)

// pageRate is the pages/s figure as the dashboard shows it.
type pageRate struct {
	Value string `json:"value"`
	T     string `json:"t"`
	Text  string `json:"text"`
}

const readRate = `(() => { const e = document.getElementById('pages-s'); return e ? {value: e.dataset.value || '', t: e.dataset.t || '', text: e.textContent} : {value: '', t: '', text: ''}; })()`

// TestDashboardInChromium opens a crawling site's dashboard in headless
// chromium and checks what it shows against the site: the pages/s figure
// equals /status's for the same sample, the rounds timeline has one bar per
// phase of every finished round (as rounds.jsonl lists them), the payload
// stays within its bounds, and the page logs no error. A screenshot is
// saved among the test's artifacts.
func TestDashboardInChromium(t *testing.T) {
	cfg := testConfig(t, "realistic")
	cfg.WebsimHosts, cfg.WebsimPages = 50, 16
	cfg.HostDelay, cfg.MaxCrawlDelay = 80*time.Millisecond, 250*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := site.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base := "http://" + s.Addr()
	b := startBrowser(t)
	if err := b.do(60*time.Second, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx, nil) }() // owner: the test; ends with the crawl or ctx

	// While the crawl runs: the figure shown is /status's for the same
	// sample, and the crawl shows progress (a non-zero rate).
	matched := 0
	deadline := time.Now().Add(90 * time.Second)
	for matched < 3 && time.Now().Before(deadline) {
		var st site.Status
		if err := getJSON(t, base+"/status", &st); err != nil {
			t.Fatal(err)
		}
		pr, err := eval[pageRate](b, readRate)
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		if pr.T != "" && pr.T == strconv.FormatInt(st.Fetcher.PagesAt, 10) && st.Fetcher.PagesPerSec > 0 {
			v, err := strconv.ParseFloat(pr.Value, 64)
			if err != nil || v != st.Fetcher.PagesPerSec {
				t.Fatalf("the page shows %q pages/s (data-value %q) for sample %s; /status says %v", pr.Text, pr.Value, pr.T, st.Fetcher.PagesPerSec)
			}
			if want := fmt.Sprintf("%.1f", v); pr.Text != want && math.Abs(mustFloat(t, pr.Text)-v) > 0.05+1e-9 {
				t.Fatalf("the page shows %q pages/s for %v", pr.Text, v)
			}
			matched++
		}
		time.Sleep(300 * time.Millisecond)
	}
	if matched < 3 {
		t.Fatalf("the page's pages/s never matched /status's for the same sample with the crawl running (matched %d)", matched)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the crawl did not end")
	}
	// Two more updates after the last round: the timeline is complete.
	p := b.polls()
	waitFor(t, 20*time.Second, "two more dashboard updates", func() bool { return b.polls() >= p+2 })

	ls := readRounds(t, cfg.Data)
	if len(ls) < 2 {
		t.Fatalf("%d rounds: too few to check a timeline", len(ls))
	}
	var want []string
	for _, r := range ls[max(0, len(ls)-60):] {
		for _, ph := range []string{"generate", "fetch", "update"} {
			want = append(want, fmt.Sprintf("%d/%s", r.Round, ph))
		}
	}
	got, err := eval[[]string](b, `Array.from(document.querySelectorAll('rect.phase')).map(r => r.dataset.round + '/' + r.dataset.phase)`)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("timeline bars %v, want one per phase of the finished rounds %v", got, want)
	}
	t.Logf("%d rounds; %d timeline bars", len(ls), len(got))

	// The payload's bounds.
	resp, err := http.Get(base + "/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var d site.Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Series) > 300 || len(d.Rounds) > 60 || len(d.OPIC.Top) > 10 || len(d.Hosts.Slowest) > 10 || len(d.Hosts.Troubled) > 10 || len(d.Hosts.IPs) > 10 {
		t.Errorf("payload over its bounds: %d samples, %d rounds, %d top URLs, %d/%d/%d hosts", len(d.Series), len(d.Rounds), len(d.OPIC.Top), len(d.Hosts.Slowest), len(d.Hosts.Troubled), len(d.Hosts.IPs))
	}
	if d.CrawlDB.Fetched == 0 || d.CrawlDB.Disk == 0 || d.Finished != "exhausted" {
		t.Errorf("dashboard after the crawl: %+v, finished %q", d.CrawlDB, d.Finished)
	}
	t.Logf("dashboard.json: %d bytes", len(raw))
	b.screenshot(t, "dashboard")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("the page logged %d errors or warnings: %v", len(errs), errs)
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return v
}

package bench

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/warcfile"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestRunSiteCorrectnessTiny runs the correctness driver in-process on a
// tiny clean web crawled to exhaustion: everything reachable is fetched,
// politely, and once.
func TestRunSiteCorrectnessTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cfg := SiteConfig{Hosts: 20, Pages: 5, IPs: 4, Seed: 3, Profile: synth.Clean,
		Width: 1000, PerHost: 10, Workers: 32,
		// No per-address delay: websim times a request when it reads it,
		// the fetcher from its side of the connection, so a gap of a few
		// ms between two requests to one address can look shorter to
		// websim by the scheduling jitter of a loaded machine. The host
		// delay counts from the end of the previous response and has no
		// such slack.
		HostDelay: 20 * time.Millisecond, IPDelay: 0, MaxCrawlDelay: 100 * time.Millisecond,
		NoSync: true, SampleEvery: 20 * time.Millisecond, Timeout: 45 * time.Second,
		ScanWARC: true, InProcess: true, Dir: t.TempDir(),
		Progress: func(format string, args ...any) { t.Logf(format, args...) }}
	res, err := RunSite(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", res.Report(cfg))
	if res.Exit != "exhausted" {
		t.Errorf("Exit = %q, want exhausted", res.Exit)
	}
	if res.Coverage.Targets == 0 || res.Coverage.Ratio < 0.99 {
		t.Errorf("coverage %.3f of %d targets, want ≥ 0.99; missing %v", res.Coverage.Ratio, res.Coverage.Targets, res.Coverage.Missing)
	}
	if res.Breaches != 0 {
		t.Errorf("%d politeness breaches: %v", res.Breaches, res.BreachSample)
	}
	if res.WARC == nil || res.WARC.Responses2xx == 0 || res.WARC.NoStatus != 0 || res.WARC.Responses != res.WebsimRequests {
		t.Fatalf("WARC scan: %+v, want every one of websim's %d responses, with a status, some 2xx", res.WARC, res.WebsimRequests)
	}
	if res.WARC.Multi2xx != 0 || res.WARC.MultiAny != 0 {
		t.Errorf("URLs fetched twice: %d with >1 2xx, %d with >1 non-5xx: %v", res.WARC.Multi2xx, res.WARC.MultiAny, res.WARC.Examples)
	}
	// Every page fetched is in a round, and the rounds' count agrees with
	// websim's (one robots.txt per host besides the pages).
	if len(res.Rounds) == 0 || res.Pages == 0 || res.PagesPerSec <= 0 || res.WindowS <= 0 {
		t.Errorf("rounds %d, pages %d, %.1f pages/s over %.2fs: want positive", len(res.Rounds), res.Pages, res.PagesPerSec, res.WindowS)
	}
	if want := res.Requests; res.WebsimRequests != want {
		t.Errorf("websim saw %d requests, the rounds count %d", res.WebsimRequests, want)
	}
	// A sample may or may not catch one of this tiny crawl's ~1 ms
	// requests in flight, so the sampled fraction is only checked for its
	// range; the busy time the fetcher accounts must have grown.
	if res.Samples == 0 || res.BusyFraction < 0 || res.BusyFraction > 1 || res.BusyWorkers <= 0 || res.BusyWorkers > 1 {
		t.Errorf("%d samples, busy fraction %.3f, busy workers %.4f: want samples, a fraction in [0, 1] and busy workers in (0, 1]",
			res.Samples, res.BusyFraction, res.BusyWorkers)
	}
}

// TestRoundTable checks the window, the totals and the offsets that the
// phase table takes from rounds.jsonl, with overlapping rounds.
func TestRoundTable(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	stats := []rounds.RoundStats{
		{Round: 1, Started: at(1), Ended: at(5), Fetched: 100, ByClass: map[string]int64{"2xx": 90, "4xx": 10}, Robots: 20, Retries: 1},
		{Round: 2, Started: at(4), Ended: at(11), Fetched: 300, ByClass: map[string]int64{"2xx": 300}, Sitemaps: 2},
		{Round: 3, Started: at(10), Ended: at(9), Fetched: 0}, // ended before round 2: the window still ends at 11
	}
	var res SiteResult
	start, end := res.table(stats, t0)
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"window", res.WindowS, 10},
		{"first round at", res.FirstRoundAtS, 1},
		{"start", start.Sub(t0).Seconds(), 1},
		{"end", end.Sub(t0).Seconds(), 11},
		{"pages", float64(res.Pages), 400},
		{"2xx", float64(res.Pages2xx), 390},
		{"requests", float64(res.Requests), 400 + 20 + 1 + 2},
		{"pages/s", res.PagesPerSec, 40},
		{"round 2 start", res.Rounds[1].StartS, 3},
		{"round 2 end", res.Rounds[1].EndS, 10},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestSiteConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*SiteConfig)
		ok   bool
	}{
		{"throughput default", func(*SiteConfig) {}, true},
		{"negative rounds", func(c *SiteConfig) { c.Rounds = -1 }, false},
		{"negative delay", func(c *SiteConfig) { c.IPDelay = -time.Second }, false},
		{"huge width", func(c *SiteConfig) { c.Width = 2_000_000 }, false},
		{"tiny sample interval", func(c *SiteConfig) { c.SampleEvery = time.Microsecond }, false},
		{"hostile web too small", func(c *SiteConfig) { c.Profile, c.Hosts = synth.Hostile, 5 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultSiteConfig()
			tc.edit(&c)
			_, err := c.WithDefaults()
			if (err == nil) != tc.ok {
				t.Errorf("WithDefaults() error = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

func TestReadRoundStatsMissing(t *testing.T) {
	st, err := readRoundStats(filepath.Join(t.TempDir(), "none.jsonl"))
	if err != nil || st != nil {
		t.Errorf("readRoundStats(missing) = %v, %v; want nil, nil", st, err)
	}
}

// TestScanWARC writes exchanges with the site's own WARC writer and checks
// what scanWARC counts per URL.
func TestScanWARC(t *testing.T) {
	dir := t.TempDir()
	w, err := warcfile.Open(warcfile.Options{Dir: dir, MaxSize: 2048}) // small files: several of them
	if err != nil {
		t.Fatal(err)
	}
	ex := []struct {
		url   string
		resp  string
		trunc string
	}{
		{"http://a.test/", "HTTP/1.1 200 OK\r\n\r\n", ""},
		{"http://a.test/", "HTTP/1.1 200 OK\r\n\r\n", ""},                   // twice 2xx
		{"http://a.test/x", "HTTP/1.1 503 Service Unavailable\r\n\r\n", ""}, // a retry, then 200: fine
		{"http://a.test/x", "HTTP/1.1 200 OK\r\n\r\n", ""},
		{"http://a.test/y", "HTTP/1.1 404 Not Found\r\n\r\n", ""}, // 404 then 200: twice, not 2xx twice
		{"http://a.test/y", "HTTP/1.1 200 OK\r\n\r\n", ""},
		{"http://a.test/robots.txt", "HTTP/1.1 200 OK\r\n\r\n", ""},
		{"http://a.test/robots.txt", "HTTP/1.1 200 OK\r\n\r\n", ""},
		{"http://a.test/z", "HTTP/1.1 429 Too Many Requests\r\n\r\n", ""},
		{"http://a.test/z", "HTTP/1.1 301 Moved Permanently\r\n\r\n", ""},
		{"http://a.test/slow", "HTTP/1.1 200 OK\r\n\r\n", "time"}, // truncated, retried, truncated again
		{"http://a.test/slow", "HTTP/1.1 200 OK\r\n\r\n", "time"},
		{"http://a.test/slow2", "HTTP/1.1 200 OK\r\n\r\n", "length"}, // truncated, then whole
		{"http://a.test/slow2", "HTTP/1.1 200 OK\r\n\r\n", ""},
	}
	for _, e := range ex {
		x := &warcfile.Exchange{URL: e.url, Request: []byte("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"), Response: []byte(e.resp), Body: []byte("body"), Truncated: e.trunc}
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := scanWARC(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
	for _, tc := range []struct {
		name      string
		got, want int64
	}{
		{"responses", st.Responses, int64(len(ex))},
		{"2xx", st.Responses2xx, 10},
		{"truncated", st.Truncated, 3},
		{"without status", st.NoStatus, 0},
		{"urls", int64(st.URLs), 7},
		{"urls with >1 2xx", int64(st.Multi2xx), 4},
		{"of which pages", int64(st.Multi2xxPages), 3},
		{"urls with >1 untruncated 2xx", int64(st.MultiComplete2xx), 2},
		{"urls with >1 non-5xx/429", int64(st.MultiAny), 5},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	if st.Files < 2 {
		t.Errorf("files = %d, want several (MaxSize 2048)", st.Files)
	}
	for _, tc := range []struct {
		host string
		want int
	}{{"a.test", len(ex)}, {"b.test", 0}, {"", 0}} {
		_, at, err := scanWARCHost(context.Background(), dir, tc.host)
		if err != nil {
			t.Fatal(err)
		}
		if len(at) != tc.want {
			t.Errorf("host %q: %d response dates, want %d", tc.host, len(at), tc.want)
		}
		for _, d := range at {
			if time.Since(d) > time.Hour || time.Until(d) > time.Minute {
				t.Errorf("host %q: response dated %v, not when the test wrote it", tc.host, d)
				break
			}
		}
	}
}

// TestFloorTimeline: the floor host's pauses beyond its delay (and the
// second of WARC-Date's resolution), when it started and ended, and its
// responses per minute of the window.
func TestFloorTimeline(t *testing.T) {
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(secs ...int) []time.Time {
		var out []time.Time
		for _, s := range secs {
			out = append(out, start.Add(time.Duration(s)*time.Second))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		at    []time.Time
		delay time.Duration
		want  *FloorTimeline
	}{
		{"none", nil, 2 * time.Second, nil},
		{"steady at its delay", at(5, 7, 9, 11), 2 * time.Second,
			&FloorTimeline{Fetches: 4, FirstS: 5, LastS: 11, PerMinute: []int{4}}},
		{"a second of jitter is no pause", at(5, 8, 10), 2 * time.Second,
			&FloorTimeline{Fetches: 3, FirstS: 5, LastS: 10, PerMinute: []int{3}}},
		{"two pauses, out of order", at(70, 5, 7, 17, 19), 2 * time.Second,
			&FloorTimeline{Fetches: 5, FirstS: 5, LastS: 70, Gaps: 2, GapS: 8 + 49, LongestS: 49, LongestAtS: 19, PerMinute: []int{4, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := floorTimeline(tc.at, start, tc.delay)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("floorTimeline = %+v, want %+v", got, tc.want)
			}
		})
	}
}

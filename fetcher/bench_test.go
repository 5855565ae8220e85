package fetcher

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWeb is a clean websim in a child process and its page URLs.
type benchWeb struct {
	child *child
	web   *synth.Web
	res   *dnscache.Resolver
	pages []Job
}

func startBenchWeb(b *testing.B, hosts, pages int) *benchWeb {
	ch := startWebsimChild(b, hosts, pages)
	b.Cleanup(func() {
		cpu := ch.stop()
		b.Logf("websim child used %v of CPU", cpu)
	})
	web, err := synth.New(benchWebOptions(hosts, pages, ch.port))
	if err != nil {
		b.Fatal(err)
	}
	res, err := dnscache.New(dnscache.Options{Server: ch.dns})
	if err != nil {
		b.Fatal(err)
	}
	bw := &benchWeb{child: ch, web: web, res: res}
	err = web.Truth(func(r *synth.Record) error {
		if r.Kind == "page" && r.Status == 200 {
			bw.pages = append(bw.pages, Job{URL: r.URL, Host: r.Host})
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return bw
}

// BenchmarkFetch fetches clean-web pages (about 10 KB and 40 links each)
// from a websim in another process, with no politeness delays: pages/s,
// and the fetcher's CPU time and allocations per page, link extraction
// included; "warc" also writes every exchange to a WARC file; "groups48"
// is "plain" with the hosts' jobs in 48 groups (Job.Group, a node leading
// 48 shards).
func BenchmarkFetch(b *testing.B) {
	bw := startBenchWeb(b, 400, 50)
	b.Run("plain", func(b *testing.B) { benchFetch(b, bw, false, 0) })
	b.Run("warc", func(b *testing.B) { benchFetch(b, bw, true, 0) })
	b.Run("groups48", func(b *testing.B) { benchFetch(b, bw, false, 48) })
}

// benchFetch runs BenchmarkFetch; with groups > 0, each host's jobs are in
// group (host index mod groups).
func benchFetch(b *testing.B, bw *benchWeb, warc bool, groups int) {
	var links, bytes atomic.Int64
	var mu sync.Mutex
	bad := 0
	o := Options{
		Workers: 64, HostDelay: time.Nanosecond, MaxCrawlDelay: time.Nanosecond,
		AllowPrivate: true, Resolver: bw.res, RobotsTTL: time.Hour,
		OnResult: func(r *Result) {
			if r.Kind != KindPage {
				return
			}
			if r.HTTPStatus != 200 {
				mu.Lock()
				bad++
				mu.Unlock()
			}
			links.Add(int64(len(r.Links)))
			bytes.Add(r.Bytes)
		},
	}
	if warc {
		wr, err := warcfile.Open(warcfile.Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer wr.Close()
		o.WARC = wr
	}
	f, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	wait := func() {
		for !f.Idle() {
			time.Sleep(200 * time.Microsecond)
		}
	}
	// Warm up: DNS, robots.txt and a connection for every host.
	var front []Job
	group := map[string]uint32{}
	for i := range bw.web.Hosts() {
		name := bw.web.Hosts()[i].Name
		if groups > 0 {
			group[name] = uint32(i % groups)
		}
		front = append(front, Job{URL: bw.web.FrontURL(i), Host: name, Group: group[name]})
	}
	f.Submit(front)
	wait()
	links.Store(0)
	bytes.Store(0)
	jobs := make([]Job, b.N)
	for i := range jobs {
		jobs[i] = bw.pages[i%len(bw.pages)]
		jobs[i].Group = group[jobs[i].Host]
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, t0 := cpuTime(b), time.Now()
	f.Submit(jobs)
	wait()
	cpu, wall := cpuTime(b)-cpu0, time.Since(t0)
	b.StopTimer()
	if bad > 0 {
		b.Fatalf("%d pages did not answer 200", bad)
	}
	n := float64(b.N)
	b.ReportMetric(n/wall.Seconds(), "pages/s")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/page")
	b.ReportMetric(float64(links.Load())/n, "links/page")
	b.ReportMetric(float64(bytes.Load())/n, "B/page")
}

// withoutScheduler readies f for workers run by a benchmark itself, with
// no scheduler: a context that ends with b (as Run's would), and the
// workers' start events dropped.
func withoutScheduler(b *testing.B, f *Fetcher) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	f.runCtx = ctx
	drained := make(chan struct{})
	go func() { // owner: the benchmark; ends with it
		defer close(drained)
		for {
			select {
			case <-f.done:
			case <-ctx.Done():
				return
			}
		}
	}()
	b.Cleanup(func() {
		cancel()
		<-drained
		f.transport.CloseIdleConnections()
	})
	return ctx
}

// BenchmarkGet fetches one page again and again over a kept-alive
// connection, through colly (as the fetcher does) and straight through the
// same transport: the difference is colly's cost per request.
func BenchmarkGet(b *testing.B) {
	bw := startBenchWeb(b, 2, 5)
	f, err := New(Options{Workers: 1, AllowPrivate: true, Resolver: bw.res, OnResult: func(*Result) {}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := withoutScheduler(b, f)
	url := bw.web.FrontURL(0)
	ip := bw.web.Hosts()[0].IP
	run := func(b *testing.B, get func() int) {
		b.ReportAllocs()
		get() // connect
		b.ResetTimer()
		cpu0 := cpuTime(b)
		for range b.N {
			if n := get(); n < 1000 {
				b.Fatalf("body of %d bytes", n)
			}
		}
		b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}
	b.Run("colly", func(b *testing.B) {
		w := newWorker(ctx, f)
		t := &task{kind: taskPage, ip: ip}
		run(b, func() int {
			if err := w.get(t, url); err != nil {
				b.Fatal(err)
			}
			return len(w.ex.body)
		})
	})
	b.Run("direct", func(b *testing.B) {
		buf := make([]byte, 0, 64<<10)
		hdr := http.Header{"User-Agent": {f.o.UserAgent}, "Accept": {"*/*"}}
		run(b, func() int {
			rctx, cancel := context.WithTimeout(ctx, f.o.TotalTimeout)
			defer cancel()
			req, err := http.NewRequestWithContext(context.WithValue(rctx, dialKey{}, &dialTarget{ip: ip}), http.MethodGet, url, nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header = hdr
			res, err := f.transport.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			buf = buf[:0]
			for {
				if len(buf) == cap(buf) {
					buf = append(buf, 0)[:len(buf)]
				}
				n, err := res.Body.Read(buf[len(buf):cap(buf)])
				buf = buf[:len(buf)+n]
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			res.Body.Close()
			return len(buf)
		})
	})
}

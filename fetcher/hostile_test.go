package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"
	"go.uber.org/goleak"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// hostileOptions are short timeouts and limits for the hostile web.
func hostileOptions(t testing.TB, w *web, onResult func(*Result)) Options {
	return Options{
		Workers: 32, HostDelay: 5 * time.Millisecond, MaxCrawlDelay: 10 * time.Millisecond,
		ConnectTimeout: time.Second, HeaderTimeout: 700 * time.Millisecond, TotalTimeout: time.Second,
		MaxBodyBytes: 256 << 10, MaxLinks: 1000,
		AllowPrivate: true, Resolver: w.res, BackoffBase: time.Minute,
		OnResult: onResult, Logger: testLogger(t),
	}
}

// TestHostile fetches every URL of a hostile web once (no resubmission) and
// checks that each trap ends the way it should, with one Result per job.
func TestHostile(t *testing.T) {
	w := startWeb(t, synth.Options{Hosts: 14, Pages: 5, IPs: 4, Seed: 13, Profile: synth.Hostile}, websim.Limits{})
	c := newCollector(1)
	o := hostileOptions(t, w, c.onResult)
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	many := 0
	jobs := jobsOf(w, func(r *synth.Record) bool {
		if r.Kind == "robots" {
			return false
		}
		if r.Kind == "leaf" && r.Role == synth.RoleManyLinks.String() { // 10,000 of them: a few do
			many++
			return many <= 5
		}
		return true
	})
	start := time.Now()
	runCrawl(t, f, c, jobs, 20*time.Millisecond, 30*time.Second)
	t.Logf("%d jobs in %v: %+v", len(jobs), time.Since(start), f.Stats())

	perURL := map[string]int{}
	for _, r := range c.results() {
		if r.Kind == KindPage {
			perURL[r.URL]++
		}
	}
	for _, j := range jobs {
		if perURL[j.URL] != 1 {
			t.Errorf("%s: %d results, want 1", j.URL, perURL[j.URL])
		}
	}
	if st := f.Stats(); st.Done != int64(len(jobs)) || st.Queued != 0 || st.InFlight != 0 {
		t.Errorf("stats %+v after %d jobs", st, len(jobs))
	}
	hosts := w.web.Hosts()
	role := func(r synth.Role) (origin string) {
		for i := range hosts {
			if hosts[i].Role == r {
				return w.web.Origin(i)
			}
		}
		t.Fatalf("no host with role %v", r)
		return ""
	}
	get := func(u string) *Result {
		t.Helper()
		r := c.final[u]
		if r == nil {
			t.Fatalf("%s: no result", u)
		}
		return r
	}
	maxBody := o.MaxBodyBytes
	t.Run("blackhole", func(t *testing.T) {
		origin := role(synth.RoleBlackhole)
		n := 0
		for _, j := range jobs {
			if strings.HasPrefix(j.URL, origin+"/") {
				n++
				if r := get(j.URL); !r.Retry || r.HTTPStatus != 0 || r.Err == "" {
					t.Errorf("%s: %s, want a retry without a response", j.URL, describe(r))
				}
			}
		}
		if n == 0 {
			t.Error("no blackhole jobs")
		}
	})
	t.Run("drip", func(t *testing.T) {
		origin := role(synth.RoleDrip)
		timeCut, backedOff := 0, 0
		for _, j := range jobs {
			if !strings.HasPrefix(j.URL, origin+"/") {
				continue
			}
			r := get(j.URL)
			if r.Retry && strings.Contains(r.Err, "backing off") {
				backedOff++
			}
			if r.Truncated == "time" {
				timeCut++
				if !r.Retry || r.Bytes == 0 || r.Bytes >= 10_000 {
					t.Errorf("%s: %s bytes=%d, want a retry with part of the body", j.URL, describe(r), r.Bytes)
				}
			}
		}
		// Three drips in a row back the host off; its other jobs come
		// back at once.
		if timeCut != defaultMaxFailures || backedOff == 0 {
			t.Errorf("%d drip pages cut by the total timeout, %d jobs answered by the back-off; want %d and some", timeCut, backedOff, defaultMaxFailures)
		}
	})
	t.Run("huge and bomb", func(t *testing.T) {
		for _, u := range []string{role(synth.RoleHuge) + "/huge.html", role(synth.RoleBomb) + "/bomb.html"} {
			r := get(u)
			if r.Status != crawl.StatusFetched || r.Bytes != maxBody || r.Truncated != "length" {
				t.Errorf("%s: %s bytes=%d truncated=%q, want fetched, %d bytes, cut for length", u, describe(r), r.Bytes, r.Truncated, maxBody)
			}
		}
	})
	t.Run("many links", func(t *testing.T) {
		u := role(synth.RoleManyLinks) + "/many.html"
		if r := get(u); r.Status != crawl.StatusFetched || len(r.Links) != o.MaxLinks {
			t.Errorf("%s: %s with %d links, want %d", u, describe(r), len(r.Links), o.MaxLinks)
		}
	})
	t.Run("redirect chain", func(t *testing.T) {
		origin := role(synth.RoleChain)
		for i := range 30 {
			u := fmt.Sprintf("%s/chain/%d", origin, i)
			want := fmt.Sprintf("%s/chain/%d", origin, i+1)
			if i == 29 {
				want = origin + "/"
			}
			if r := get(u); r.Status != crawl.StatusRedirect || r.RedirectTo != want {
				t.Errorf("%s: %s, want a redirect to %s", u, describe(r), want)
			}
		}
	})
	t.Run("wrong type", func(t *testing.T) {
		origin := role(synth.RoleWrongType)
		if r := get(origin + "/wrong/1.html"); r.Status != crawl.StatusFetched || r.Links != nil || r.ContentType != "image/jpeg" {
			t.Errorf("HTML served as JPEG: %s, %d links; want fetched, not parsed", describe(r), len(r.Links))
		}
		if r := get(origin + "/data.bin"); r.Status != crawl.StatusFetched || r.Bytes != 16<<10 {
			t.Errorf("binary served as HTML: %s, %d bytes", describe(r), r.Bytes)
		}
	})
	t.Run("broken html", func(t *testing.T) {
		origin := role(synth.RoleBroken)
		if r := get(origin + "/"); r.Status != crawl.StatusFetched || len(r.Links) == 0 {
			t.Errorf("broken front page: %s, %d links", describe(r), len(r.Links))
		}
	})
	t.Run("memory", func(t *testing.T) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > 256<<20 {
			t.Errorf("heap in use %d MiB after the hostile crawl", ms.HeapInuse>>20)
		}
		t.Logf("heap in use %d MiB", ms.HeapInuse>>20)
	})
}

// TestPrivateRefused: without AllowPrivate, websim's loopback hosts fail
// with StatusError and no request reaches them.
func TestPrivateRefused(t *testing.T) {
	w := startWeb(t, synth.Options{Hosts: 6, Pages: 3, IPs: 2, Seed: 1}, websim.Limits{})
	c := newCollector(1)
	f, err := New(Options{Workers: 4, HostDelay: time.Millisecond, Resolver: w.res, OnResult: c.onResult, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	jobs := jobsOf(w, func(r *synth.Record) bool { return r.Kind == "page" })
	runCrawl(t, f, c, jobs, 10*time.Millisecond, 10*time.Second)
	for _, j := range jobs {
		r := c.final[j.URL]
		if r == nil || r.Status != crawl.StatusError || r.Retry || !strings.Contains(r.Err, "forbidden address") {
			t.Errorf("%s: %+v, want a forbidden-address error", j.URL, r)
		}
	}
	if n := w.srv.Stats().Snapshot().Requests; n != 0 {
		t.Errorf("%d requests reached websim", n)
	}
	if st := f.Stats(); st.Requests != 0 || st.DNSLookups != 6 {
		t.Errorf("stats %+v, want no requests and 6 lookups", st)
	}
}

// TestWARC writes every exchange to WARC files and reads them back.
func TestWARC(t *testing.T) {
	w := startWeb(t, synth.Options{Hosts: 14, Pages: 4, IPs: 3, Seed: 2, Profile: synth.Hostile}, websim.Limits{})
	dir := t.TempDir()
	wr, err := warcfile.Open(warcfile.Options{Dir: dir, Software: "meridian-test"})
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector(1)
	o := hostileOptions(t, w, c.onResult)
	o.WARC = wr
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	huge := ""
	jobs := jobsOf(w, func(r *synth.Record) bool {
		switch {
		case r.Role == synth.RoleHuge.String() && r.Kind == "trap":
			huge = r.URL
			return true
		case r.Role != "" || r.Kind == "robots":
			return false
		}
		return r.Kind == "page" || r.Kind == "redirect" || r.Kind == "missing" || r.Kind == "pdf"
	})
	runCrawl(t, f, c, jobs, 10*time.Millisecond, 20*time.Second)
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}
	type rec struct {
		status    int
		body      int64
		truncated string
		request   bool
	}
	got := map[string]*rec{}
	requests := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) == 0 {
		t.Fatal("no WARC file")
	}
	for _, name := range files {
		r, err := gowarc.NewWarcFileReader(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		for {
			wrec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			wr := wrec.WarcRecord
			uri := wr.WarcHeader().Get(gowarc.WarcTargetURI)
			switch wr.Type() {
			case gowarc.Request:
				requests[uri] = true
			case gowarc.Response:
				b, ok := wr.Block().(gowarc.HttpResponseBlock)
				if !ok {
					t.Fatalf("%s: response block %T", uri, wr.Block())
				}
				p, err := b.PayloadBytes()
				if err != nil {
					t.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, p)
				got[uri] = &rec{status: b.HttpStatusCode(), body: n, truncated: wr.WarcHeader().Get(gowarc.WarcTruncated)}
				if ip := wr.WarcHeader().Get(gowarc.WarcIPAddress); !strings.HasPrefix(ip, "127.77.") {
					t.Errorf("%s: WARC-IP-Address %q", uri, ip)
				}
			}
			wr.Close()
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	exchanges, kinds := 0, map[Kind]int{}
	for _, r := range c.results() {
		if r.HTTPStatus == 0 {
			continue
		}
		exchanges++
		kinds[r.Kind]++
		g := got[r.URL]
		switch {
		case g == nil:
			t.Errorf("%s (%v): not in the WARC files", r.URL, r.Kind)
		case g.status != r.HTTPStatus || g.body != r.Bytes || g.truncated != r.Truncated:
			t.Errorf("%s: WARC has %d, %d bytes, truncated %q; result %d, %d bytes, %q", r.URL, g.status, g.body, g.truncated, r.HTTPStatus, r.Bytes, r.Truncated)
		case !requests[r.URL]:
			t.Errorf("%s: no request record", r.URL)
		}
	}
	if kinds[KindPage] < len(jobs)/2 || kinds[KindRobots] == 0 || len(got) != exchanges {
		t.Errorf("%d exchanges (%v) for %d jobs, %d response records", exchanges, kinds, len(jobs), len(got))
	}
	if g := got[huge]; g == nil || g.truncated != "length" {
		t.Errorf("%s: %+v, want WARC-Truncated: length", huge, g)
	}
	if st := wr.Stats(); st.Exchanges != int64(exchanges) {
		t.Errorf("writer stats %+v for %d exchanges", st, exchanges)
	}
}

// TestStop cancels Run in the middle of a crawl with requests hanging on
// blackholes and drips: Run returns promptly and no goroutine is left.
func TestStop(t *testing.T) {
	w := startWeb(t, synth.Options{Hosts: 30, Pages: 20, IPs: 4, Seed: 9, Profile: synth.Hostile}, websim.Limits{})
	c := newCollector(1)
	o := hostileOptions(t, w, c.onResult)
	o.HeaderTimeout, o.TotalTimeout, o.HostDelay = 30*time.Second, 60*time.Second, 20*time.Millisecond
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.Submit(jobsOf(w, func(r *synth.Record) bool { return r.Kind != "robots" && r.Kind != "leaf" }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(c.results()) < 100 || f.Stats().InFlight < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no progress: %+v", f.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := f.Stats()
	cancel()
	stopped := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("Run did not return 3 s after cancel")
	}
	t.Logf("stopped in %v with %d in flight and %d queued", time.Since(stopped), st.InFlight, st.Queued)
	n := len(c.results())
	if err := f.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
	if st := f.Stats(); st.InFlight != 0 {
		t.Errorf("%d in flight after Run returned", st.InFlight)
	}
	time.Sleep(50 * time.Millisecond)
	if len(c.results()) != n {
		t.Errorf("results after Run returned")
	}
	w.srv.Close()
	goleak.VerifyNone(t)
}

// TestCollyTransportIsOurs guards the assumption the fetcher rests on: colly
// sends its requests through the RoundTripper given to WithTransport, with
// the Collector's context.
func TestCollyTransportIsOurs(t *testing.T) {
	w := startWeb(t, synth.Options{Hosts: 2, Pages: 2, IPs: 1, Seed: 1}, websim.Limits{})
	c := newCollector(1)
	f, err := New(Options{Workers: 1, AllowPrivate: true, Resolver: w.res, OnResult: c.onResult})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.runCtx = ctx
	wk := newWorker(ctx, f)
	tk := &task{kind: taskPage, job: Job{URL: w.web.FrontURL(0)}, ip: w.web.Hosts()[0].IP}
	if err := wk.get(tk, tk.job.URL); err != nil || !wk.ex.gotResponse || wk.ex.status != http.StatusOK || len(wk.ex.body) == 0 {
		t.Fatalf("get: %v, exchange %+v", err, wk.ex)
	}
	f.transport.CloseIdleConnections()
}

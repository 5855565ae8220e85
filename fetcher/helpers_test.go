package fetcher

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// childEnv, when set, makes the test binary serve a websim instead of
// running tests (see startWebsimChild).
const childEnv = "FETCHER_TEST_WEBSIM_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(serveChild(spec))
	}
	goleak.VerifyTestMain(m)
}

// web is a running websim and what the tests know about it.
type web struct {
	srv   *websim.Server
	web   *synth.Web
	res   *dnscache.Resolver
	truth []synth.Record
	byURL map[string]*synth.Record
}

// startWeb starts an in-process websim with its DNS server.
func startWeb(t testing.TB, wo synth.Options, lim websim.Limits) *web {
	t.Helper()
	srv, err := websim.Start(websim.Options{Web: wo, DNSAddr: "127.0.0.1:0", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	res, err := dnscache.New(dnscache.Options{Server: srv.DNSAddr()})
	if err != nil {
		t.Fatal(err)
	}
	w := &web{srv: srv, web: srv.Web(), res: res, byURL: map[string]*synth.Record{}}
	err = w.web.Truth(func(r *synth.Record) error {
		c := *r
		c.Outlinks = slices.Clone(r.Outlinks)
		w.truth = append(w.truth, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range w.truth {
		w.byURL[w.truth[i].URL] = &w.truth[i]
	}
	return w
}

// testLogger routes the fetcher's log to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// collector gathers Results and, as a rounds driver would, resubmits
// Retry jobs after a pause, up to maxAttempts per URL.
type collector struct {
	mu          sync.Mutex
	all         []*Result
	final       map[string]*Result // last page result per URL
	retried     map[string]int     // Retry results per page URL
	attempts    map[string]int
	due         []Job
	maxAttempts int
	f           *Fetcher
}

func newCollector(maxAttempts int) *collector {
	return &collector{final: map[string]*Result{}, retried: map[string]int{}, attempts: map[string]int{}, maxAttempts: maxAttempts}
}

func (c *collector) onResult(r *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, r)
	if r.Kind != KindPage {
		return
	}
	c.final[r.URL] = r
	c.attempts[r.URL]++
	if r.Retry {
		c.retried[r.URL]++
		// Jobs that got no answer (back-off, robots.txt unavailable) are
		// retried up to maxAttempts times; a 5xx or 429 only once more.
		if n := c.attempts[r.URL]; n < c.maxAttempts && (r.HTTPStatus == 0 || n < 2) {
			c.due = append(c.due, r.Job)
		}
	}
}

// results returns a copy of every Result so far.
func (c *collector) results() []*Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

// runCrawl runs f over jobs until every job has a final answer (or ran out of
// attempts), resubmitting retries every retryEvery; it fails the test after
// limit.
func runCrawl(t testing.TB, f *Fetcher, c *collector, jobs []Job, retryEvery, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- f.Run(ctx) }()
	f.Submit(jobs)
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	for {
		<-tick.C
		c.mu.Lock()
		due := c.due
		c.due = nil
		c.mu.Unlock()
		f.Submit(due)
		idle := f.Idle() // before looking at c.due: once idle, no OnResult adds to it
		c.mu.Lock()
		pending := len(c.due)
		c.mu.Unlock()
		if idle && pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-runErr
			t.Fatalf("crawl not finished after %v: %+v", limit, f.Stats())
		}
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// jobsOf returns one job per truth URL that websim answers, in truth order.
func jobsOf(w *web, keep func(*synth.Record) bool) []Job {
	var jobs []Job
	for i := range w.truth {
		r := &w.truth[i]
		if keep != nil && !keep(r) {
			continue
		}
		jobs = append(jobs, Job{URL: r.URL, Host: r.Host, Round: 7, Depth: 2, Cash: float64(i)})
	}
	return jobs
}

// serveChild serves a clean websim for a benchmark in another process: spec
// is "hosts pages"; it prints "port dnsaddr" and serves until stdin closes.
func serveChild(spec string) int {
	var hosts, pages int
	if _, err := fmt.Sscan(spec, &hosts, &pages); err != nil {
		fmt.Fprintln(os.Stderr, "bad spec:", err)
		return 2
	}
	srv, err := websim.Start(websim.Options{Web: benchWebOptions(hosts, pages, 0), DNSAddr: "127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d %s\n", srv.Port(), srv.DNSAddr())
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
	return 0
}

func benchWebOptions(hosts, pages, port int) synth.Options {
	return synth.Options{Hosts: hosts, Pages: pages, Seed: 3, IPs: 32, Port: port, Profile: synth.Clean}
}

// child is a websim in another process, so that the benchmark's CPU time
// is the fetcher's alone.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	port  int
	dns   string
}

func startWebsimChild(tb testing.TB, hosts, pages int) *child {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d", childEnv, hosts, pages))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		c.stop()
		tb.Fatalf("websim child: %v", err)
	}
	if _, err := fmt.Sscan(line, &c.port, &c.dns); err != nil {
		c.stop()
		tb.Fatalf("websim child said %q: %v", line, err)
	}
	return c
}

// stop ends the child and returns its CPU time.
func (c *child) stop() time.Duration {
	c.stdin.Close()
	done := make(chan struct{})
	go func() {
		c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
	if c.cmd.ProcessState == nil {
		return 0
	}
	return c.cmd.ProcessState.UserTime() + c.cmd.ProcessState.SystemTime()
}

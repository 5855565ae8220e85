package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/meridian-crawler/meridian/site"
)

// The process harness of the crawl benchmarks (bench site, cluster and
// federation): a process with the end of its output kept for errors
// (proc), a run's `site up` processes (members), and the loop that samples
// a run until its processes have exited (crawl).

// Sentinel errors of the crawl benchmarks, returned with the figures
// gathered so far.
var (
	// ErrCrawlCut: the crawl had to be stopped because SiteConfig.Timeout
	// (a run's Timeout in RunCluster and RunFederation) ran out.
	ErrCrawlCut = errors.New("bench: the crawl did not finish in time and was stopped")
	// ErrCrawlStalled: the site sat idle for SiteConfig.Stall (every
	// process of a run for FederationConfig.Stall) without finishing, and
	// was stopped.
	ErrCrawlStalled = errors.New("bench: the site stalled (idle, not finished) and was stopped")
	// ErrNodeFailed: a node of a cluster run exited with an error (or failed
	// to start or join) without being stopped or killed by the benchmark.
	ErrNodeFailed = errors.New("bench: a node of the site failed")

	// errExited: a process exited while waitUntil waited for it.
	errExited = errors.New("bench: the process exited")
)

// Bounds of the harness.
const (
	siteGrace      = time.Minute     // SIGTERM to exit, for a site (it closes its crawl database)
	siteStartBound = 3 * time.Minute // a site's start to its status API answering
	statusTimeout  = 2 * time.Second // one GET /status or /_websim/stats
	progressEvery  = 5 * time.Second // progress lines while crawling
	siteLogTail    = 16 << 10        // bytes of a site's output kept for errors
	procLogTail    = 8 << 10         // bytes of another process's output kept for errors
	// exhaustedLine is what a site logs when its crawl is exhausted.
	exhaustedLine = "crawl exhausted"
)

// proc is a process a benchmark runs: a child process, or (bench site
// --in-process) a function on a goroutine of this one. The end of its
// output is kept for errors.
type proc struct {
	cmd    *exec.Cmd // nil: in this process
	pid    int
	cancel context.CancelFunc // a child: SIGTERM, SIGKILL after its grace; in this process: cancels its context
	tail   *tailBuffer        // the end of its output
	exit   chan struct{}      // closed once it has ended (a child: reaped)
	err    error              // how it ended (cmd.Wait's or the function's), set before exit is closed
}

// startProc starts bin with args as a child process that dies with this
// one. Its output goes to log (nil: nowhere) and its last tailMax bytes
// to its tail; stop sends SIGTERM and kills it after grace.
func startProc(bin string, args []string, log io.Writer, tailMax int, grace time.Duration) (*proc, error) {
	p := &proc{tail: &tailBuffer{max: tailMax}, exit: make(chan struct{})}
	out := p.output(log)
	cctx, cancel := context.WithCancel(context.Background()) // ended by stop
	cmd := exec.CommandContext(cctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = grace
	cmd.Stdout, cmd.Stderr = out, out
	setChildAttrs(cmd)
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	p.cmd, p.pid, p.cancel = cmd, cmd.Process.Pid, cancel
	go func() { // owner: p; ends when the process does
		p.err = cmd.Wait()
		close(p.exit)
	}()
	return p, nil
}

// goProc runs run on a goroutine of this process as a proc, with ctx
// (stop cancels it) and an output that goes to log and to its tail.
func goProc(ctx context.Context, log io.Writer, tailMax int, run func(ctx context.Context, out io.Writer) error) *proc {
	p := &proc{pid: os.Getpid(), tail: &tailBuffer{max: tailMax}, exit: make(chan struct{})}
	out := p.output(log)
	ctx, p.cancel = context.WithCancel(ctx)
	go func() { // owner: p; stopped by p.stop
		p.err = run(ctx, out)
		close(p.exit)
	}()
	return p
}

// output is where p's output goes: log (if any) and its tail.
func (p *proc) output(log io.Writer) io.Writer {
	if log == nil {
		return p.tail
	}
	return io.MultiWriter(log, p.tail)
}

// exited reports whether p has ended.
func (p *proc) exited() bool {
	select {
	case <-p.exit:
		return true
	default:
		return false
	}
}

// stop stops p and waits for it to end: a child gets SIGTERM, and SIGKILL
// after its grace. A second call finds it ended.
func (p *proc) stop() {
	p.cancel()
	<-p.exit
}

// said reports whether the end of p's output has s in it.
func (p *proc) said(s string) bool { return strings.Contains(p.tail.String(), s) }

// ended is how a child ended: its state's text ("exit status 0", "signal:
// killed"), its exit code (-1 for a signal) and its CPU seconds; zeros
// while it runs, or in this process.
func (p *proc) ended() (exit string, code int, cpuS float64) {
	if p.cmd == nil || p.cmd.ProcessState == nil {
		return "", 0, 0
	}
	ps := p.cmd.ProcessState
	return ps.String(), ps.ExitCode(), (ps.UserTime() + ps.SystemTime()).Seconds()
}

// waitUntil asks ready every `every` until it reports true, and returns
// nil then; errExited if p ends first, or ctx's error (bounded by bound).
func (p *proc) waitUntil(ctx context.Context, bound, every time.Duration, ready func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if ready() {
			return nil
		}
		select {
		case <-p.exit:
			return errExited
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// member is one `site up` process of a run: a node of bench cluster, a
// site of bench federation or a node of its stretched site.
type member struct {
	name    string
	data    string   // its --data directory
	log     *os.File // its output
	proc    *proc
	listen  string // its status address, once up
	started time.Time
	upAt    time.Time // its site.json seen
	exited  time.Time // its exit seen
	stopped bool      // by the benchmark (timeout, stall, steady window)
	killed  bool      // SIGKILLed by the benchmark (bench cluster --kill-after)
	pts     []cpuPoint
	hwm     int64        // peak RSS
	last    *site.Status // the last answered /status
	lastRaw []byte       // its JSON (for statusShards)
	lastAt  time.Time    // when it answered
}

// startMember starts bin with args as member name of the run in dir (its
// output in dir/NAME.log, its data in data); what names it in errors.
func startMember(dir, name, what, data, bin string, args []string, grace time.Duration) (*member, error) {
	m := &member{name: name, data: data}
	var err error
	if m.log, err = os.Create(filepath.Join(dir, name+".log")); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	m.started = time.Now()
	if m.proc, err = startProc(bin, args, m.log, siteLogTail, grace); err != nil {
		m.log.Close()
		return nil, fmt.Errorf("bench: start %s: %w", what, err)
	}
	m.pts = []cpuPoint{{at: m.started}}
	return m, nil
}

// done reports whether the member's process has exited.
func (m *member) done() bool { return m.proc.exited() }

// waitUp waits until the member has written its site.json (it is seeded
// or has joined, and serving), and notes its status address and when it
// was up; what names it in errors.
func (m *member) waitUp(ctx context.Context, what string) error {
	err := m.proc.waitUntil(ctx, siteStartBound, 20*time.Millisecond, func() bool {
		in, err := site.ReadInfo(m.data)
		if err != nil || in.PID != m.proc.pid {
			return false
		}
		m.listen, m.upAt = in.Listen, time.Now()
		return true
	})
	switch {
	case errors.Is(err, errExited):
		return fmt.Errorf("%w: %s exited before it was up (%w): %s", ErrNodeFailed, what, m.proc.err, m.proc.tail)
	case err != nil:
		return fmt.Errorf("bench: waiting for %s to be up: %w: %s", what, err, m.proc.tail)
	}
	return nil
}

// members are the `site up` processes of a run, in the order they started.
type members []*member

// allExited reports whether every member has exited, noting when each
// exit was first seen.
func (ms members) allExited() bool {
	running := 0
	for _, m := range ms {
		if m.done() {
			if m.exited.IsZero() {
				m.exited = time.Now()
			}
		} else {
			running++
		}
	}
	return running == 0
}

// stop stops every member still running: SIGTERM to all, then each is
// killed if it has not exited after its grace; it waits for all.
func (ms members) stop() {
	for _, m := range ms {
		if !m.done() {
			m.stopped = true
		}
		m.proc.cancel()
	}
	for _, m := range ms {
		<-m.proc.exit
		if m.exited.IsZero() {
			m.exited = time.Now()
		}
	}
}

// closeLogs closes the members' logs (once they have exited).
func (ms members) closeLogs() {
	for _, m := range ms {
		m.log.Close()
	}
}

// sample reads every running member's /status (all at once), CPU time and
// peak RSS at `at`, then gives each running member (by index) and its
// status (nil: no answer) to each, if set. It returns how many running
// members did not answer.
func (ms members) sample(client *http.Client, at time.Time, each func(i int, st *site.Status)) (statusErrs int) {
	sts := make([]*site.Status, len(ms))
	raws := make([][]byte, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		if m.done() {
			continue
		}
		wg.Add(1)
		go func() { // owner: sample, which waits for it
			defer wg.Done()
			sts[i], raws[i] = getStatusRaw(client, m.listen)
		}()
	}
	wg.Wait()
	for i, m := range ms {
		if m.done() {
			continue
		}
		if cpu, err := procCPU(m.proc.pid); err == nil {
			m.pts = append(m.pts, cpuPoint{at, cpu})
		}
		m.hwm = max(m.hwm, peakRSS(m.proc.pid))
		if st := sts[i]; st != nil {
			m.last, m.lastRaw, m.lastAt = st, raws[i], at
		} else if !m.done() { // not answering while it still runs
			statusErrs++
		}
		if each != nil {
			each(i, sts[i])
		}
	}
	return statusErrs
}

// anyTail reports whether the end of some member's output has s in it.
func (ms members) anyTail(s string) bool {
	for _, m := range ms {
		if m.proc.said(s) {
			return true
		}
	}
	return false
}

// upList lists the members and how long each took to be up.
func (ms members) upList() string {
	in := make([]string, len(ms))
	for i, m := range ms {
		in[i] = fmt.Sprintf("%s (pid %d, up in %.1fs)", m.name, m.proc.pid, m.upAt.Sub(m.started).Seconds())
	}
	return strings.Join(in, ", ")
}

// failed is ErrNodeFailed naming every member that exited with an error
// by itself (not stopped or killed by the benchmark), or nil.
func (ms members) failed() error {
	var failed []string
	for _, m := range ms {
		if m.killed || m.stopped {
			continue
		}
		if e := m.proc.err; e != nil {
			failed = append(failed, fmt.Sprintf("%s: %v: %s", m.name, e, m.proc.tail))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNodeFailed, strings.Join(failed, "; "))
}

// lastExit is the latest of from and the members' exits.
func (ms members) lastExit(from time.Time) time.Time {
	for _, m := range ms {
		from = later(from, m.exited)
	}
	return from
}

// getStatusRaw reads a site's /status, decoded and as JSON (nil: no
// answer): the JSON may hold fields site.Status does not have yet (see
// statusShards).
func getStatusRaw(client *http.Client, listen string) (*site.Status, []byte) {
	resp, err := client.Get("http://" + listen + "/status")
	if err != nil {
		return nil, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	var st site.Status
	if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &st) != nil {
		io.Copy(io.Discard, resp.Body)
		return nil, nil
	}
	return &st, raw
}

// crawlLoop is a run as crawl drives it.
type crawlLoop struct {
	every    time.Duration                    // how often to sample
	deadline time.Time                        // when to stop the run: ending "cut"
	what     string                           // what the deadline stops, for its progress line ("the site")
	log      func(format string, args ...any) // progress lines
	// done reports whether every process has exited; it is asked before
	// each wait (nil: never). exit, if set, is closed once they have, and
	// ends the wait at once.
	done func() bool
	exit <-chan struct{}
	// stop tells every process to stop: crawl calls it at the deadline or
	// at the first ending sample returns, and when ctx ends, so a second
	// call must do no harm. It may return before they have exited: crawl
	// samples on until they have.
	stop func()
	// sample samples the run at `at` and returns an ending that stops it
	// ("stalled"), or "".
	sample func(at time.Time) (ending string)
	// progress writes a progress line, at most every progressEvery; false:
	// it had none (it is asked again at the next sample).
	progress func(now time.Time) bool
}

// crawl samples a run until its processes have exited, and returns the
// ending that stopped it ("" when they exited by themselves). When ctx
// ends it stops them, waits for exit (if set) and returns ctx's error.
func crawl(ctx context.Context, l crawlLoop) (ending string, err error) {
	tick := time.NewTicker(l.every)
	defer tick.Stop()
	stopAt := time.NewTimer(time.Until(l.deadline))
	defer stopAt.Stop()
	end := func(why string) {
		if ending == "" {
			ending = why
			l.stop()
		}
	}
	lastProgress := time.Now()
	for {
		if l.done != nil && l.done() {
			return ending, nil
		}
		select {
		case <-l.exit:
			return ending, nil
		case <-ctx.Done():
			l.stop()
			if l.exit != nil {
				<-l.exit
			}
			return ending, ctx.Err()
		case <-stopAt.C:
			l.log("timeout: stopping %s", l.what)
			end("cut")
		case <-tick.C:
			why := l.sample(time.Now())
			now := time.Now()
			if why != "" {
				end(why)
			}
			if now.Sub(lastProgress) >= progressEvery && l.progress(now) {
				lastProgress = now
			}
		}
	}
}

// crawlExit is how a crawl ended (a run's Exit): the ending the benchmark
// gave it, else "exhausted" when a site said so, "rounds" when done of
// the configured rounds are, or "exited".
func crawlExit(ending string, exhausted bool, rounds, done int) string {
	switch {
	case ending != "":
		return ending
	case exhausted:
		return "exhausted"
	case rounds > 0 && done >= rounds:
		return "rounds"
	}
	return "exited"
}

// endingErr is the error of a crawl the benchmark ended: ErrCrawlCut,
// ErrCrawlStalled, or nil.
func endingErr(ending string) error {
	switch ending {
	case "cut":
		return ErrCrawlCut
	case "stalled":
		return ErrCrawlStalled
	}
	return nil
}

// cpuPoint is a process's CPU time at a moment.
type cpuPoint struct {
	at  time.Time
	cpu time.Duration
}

// cpuAt interpolates a process's CPU time at t from its points (the first
// point may be its start, at zero); before the first point it is the first
// point's, after the last the last's.
func cpuAt(pts []cpuPoint, t time.Time) time.Duration {
	if len(pts) == 0 {
		return 0
	}
	if !t.After(pts[0].at) {
		return pts[0].cpu
	}
	i := sort.Search(len(pts), func(i int) bool { return !pts[i].at.Before(t) })
	if i == len(pts) {
		return pts[len(pts)-1].cpu
	}
	a, b := pts[i-1], pts[i]
	span := b.at.Sub(a.at)
	if span <= 0 {
		return b.cpu
	}
	f := float64(t.Sub(a.at)) / float64(span)
	return a.cpu + time.Duration(f*float64(b.cpu-a.cpu))
}

// peakRSS returns VmHWM of process pid in bytes, 0 if it cannot be read.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

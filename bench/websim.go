// Package bench holds Meridian's benchmarks: libraries that measure one
// component each and return their figures, driven by cmd/bench and
// bench/Makefile. They are not part of CI, except for quick smoke tests.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// Defaults and bounds of WebsimConfig.
const (
	DefaultConns       = 32
	DefaultDuration    = 10 * time.Second
	DefaultWarmup      = time.Second
	DefaultMaxRequests = 5_000_000

	maxConns       = 4096             // client connections
	maxDuration    = time.Hour        // measured window
	maxBodyBytes   = 64 << 20         // a larger Content-Length is an error
	maxHeaderLines = 100              // per response
	readBufBytes   = 32 << 10         // per connection
	maxDialErrors  = 5                // consecutive failures end a connection's worker
	buildTimeout   = 5 * time.Minute  // go build of cmd/websim
	readyTimeout   = 60 * time.Second // websim serve writing its ready file
	stopTimeout    = 5 * time.Second  // SIGTERM to exit
)

// WebsimConfig configures RunWebsim. Zero fields take the defaults named
// below; DefaultWebsimConfig also turns Subprocess on.
type WebsimConfig struct {
	// Hosts, Pages, PageBytes, IPs, Profile and Seed describe the synthetic
	// web, as in synth.Options (zero: synth's defaults; Seed 0 is a seed).
	Hosts     int           `json:"hosts"`
	Pages     int           `json:"pages"`
	PageBytes int           `json:"page_bytes"`
	IPs       int           `json:"ips"`
	Profile   synth.Profile `json:"-"`
	Seed      uint64        `json:"seed"`
	// Conns is the number of client keep-alive connections, one goroutine
	// each. Default 32.
	Conns int `json:"conns"`
	// Duration is the measured window, after Warmup. Default 10s.
	Duration time.Duration `json:"duration_ns"`
	// Warmup runs before the measured window and is not counted. Default 1s;
	// negative: none.
	Warmup time.Duration `json:"warmup_ns"`
	// MaxRequests bounds the requests sent, warmup included. Default 5,000,000.
	MaxRequests int64 `json:"max_requests"`
	// Subprocess runs websim as a separate process, built from ./cmd/websim,
	// so that client and server CPU are separate as with a real crawler.
	// When false websim runs in this process.
	Subprocess bool `json:"subprocess"`
	// ModuleRoot is the directory holding Meridian's go.mod, where
	// ./cmd/websim is built; empty: found from this package's source, then
	// from "go env GOMOD". Subprocess mode only.
	ModuleRoot string `json:"-"`
	// WebsimBinary, if set, is a websim binary to run instead of building
	// one. Subprocess mode only.
	WebsimBinary string `json:"-"`
}

// DefaultWebsimConfig returns the configuration of the figure with
// a shorter window: 1000 hosts of 100 pages of ~10 KB, 32 connections, 10 s,
// websim in a subprocess.
func DefaultWebsimConfig() WebsimConfig {
	return WebsimConfig{Hosts: 1000, Pages: 100, PageBytes: 10_000, Conns: DefaultConns,
		Duration: DefaultDuration, Warmup: DefaultWarmup, MaxRequests: DefaultMaxRequests, Seed: 1, Subprocess: true}
}

// WithDefaults returns c with its zero fields filled in, or an error if a
// field is out of bounds.
func (c WebsimConfig) WithDefaults() (WebsimConfig, error) {
	err := c.ensureDefaults()
	return c, err
}

// ensureDefaults fills zero fields and checks the bounds.
func (c *WebsimConfig) ensureDefaults() error {
	if c.Conns == 0 {
		c.Conns = DefaultConns
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Warmup == 0 {
		c.Warmup = DefaultWarmup
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultMaxRequests
	}
	o := c.webOptions(80)
	c.Hosts, c.Pages, c.PageBytes, c.IPs = o.Hosts, o.Pages, o.PageBytes, o.IPs
	var errs []error
	if c.Conns < 1 || c.Conns > maxConns {
		errs = append(errs, fmt.Errorf("bench: conns must be in [1, %d], got %d", maxConns, c.Conns))
	}
	if c.Duration < 0 || c.Duration > maxDuration || c.Warmup > maxDuration {
		errs = append(errs, fmt.Errorf("bench: duration and warmup must be in (0, %v], got %v and %v", maxDuration, c.Duration, c.Warmup))
	}
	if c.MaxRequests < 1 {
		errs = append(errs, fmt.Errorf("bench: max requests must be positive, got %d", c.MaxRequests))
	}
	return errors.Join(errs...)
}

// webOptions returns the synth options of the web, defaults filled in, on port.
func (c *WebsimConfig) webOptions(port int) synth.Options {
	o := synth.Options{Hosts: c.Hosts, Pages: c.Pages, Seed: c.Seed, IPs: c.IPs, Port: port,
		Profile: c.Profile, PageBytes: c.PageBytes}
	o.EnsureDefaults()
	return o
}

// WebsimResult is what RunWebsim measured in its window (after warmup).
type WebsimResult struct {
	// Pages is the number of complete responses; Bytes their body bytes.
	Pages int64 `json:"pages"`
	Bytes int64 `json:"bytes"`
	// Elapsed is the length of the measured window.
	Elapsed time.Duration `json:"elapsed_ns"`
	// PagesPerSec is Pages/Elapsed; MBPerSec is Bytes/Elapsed in 10⁶ bytes/s.
	PagesPerSec float64 `json:"pages_per_sec"`
	MBPerSec    float64 `json:"mb_per_sec"`
	// Errors counts failed dials, reads and malformed responses over the
	// whole run, warmup included; Non200 counts responses other than 200.
	Errors int64 `json:"errors"`
	Non200 int64 `json:"non200"`
	// ServerCPU and ClientCPU are the user+system CPU time of websim and of
	// the load generator in the window. In-process, ClientCPU is the whole
	// process's (client and server together) and ServerCPU is zero.
	ServerCPU time.Duration `json:"server_cpu_ns"`
	ClientCPU time.Duration `json:"client_cpu_ns"`
	// MeanPageBytes is Bytes/Pages.
	MeanPageBytes float64 `json:"mean_page_bytes"`
	// Dials is the number of connections opened over the whole run: Conns
	// when keep-alive held throughout.
	Dials int64 `json:"dials"`
}

// RunWebsim starts websim with the web cfg describes, loads it over
// loopback from cfg.Conns keep-alive connections for cfg.Warmup plus
// cfg.Duration (or until cfg.MaxRequests requests), and reports the
// throughput of the measured window.
func RunWebsim(ctx context.Context, cfg WebsimConfig) (WebsimResult, error) {
	if err := cfg.ensureDefaults(); err != nil {
		return WebsimResult{}, err
	}
	var (
		web    *synth.Web
		port   int
		server serverCPU
		stop   func() error
	)
	if cfg.Subprocess {
		child, err := startChild(ctx, &cfg)
		if err != nil {
			return WebsimResult{}, err
		}
		defer child.stop() // idempotent; stop is called below on success
		web, port, server, stop = child.web, child.port, child, child.stop
	} else {
		srv, err := websim.Start(websim.Options{Web: cfg.webOptions(0)})
		if err != nil {
			return WebsimResult{}, fmt.Errorf("bench: start websim: %w", err)
		}
		defer srv.Close()
		web, port, server, stop = srv.Web(), srv.Port(), noServerCPU{}, srv.Close
	}
	res, err := load(ctx, &cfg, web, port, server)
	if serr := stop(); serr != nil && err == nil {
		err = fmt.Errorf("bench: stop websim: %w", serr)
	}
	return res, err
}

// serverCPU reads the server's CPU time so far.
type serverCPU interface {
	cpu() (time.Duration, error)
}

type noServerCPU struct{}

func (noServerCPU) cpu() (time.Duration, error) { return 0, nil }

// target is a host the load generator may request: its eligible pages are
// / and /p/N.html for 1 ≤ N < pages, which all answer 200.
type target struct {
	hostHdr []byte // "Host: NAME:PORT\r\n\r\n"
	pages   int
}

// plan returns, per address, the hosts to request on it: every host
// without a hostile role (those drip, or never answer).
func plan(web *synth.Web, port int) [][]target {
	idx := make(map[netip.Addr]int, len(web.IPs()))
	for i, ip := range web.IPs() {
		idx[ip] = i
	}
	byIP := make([][]target, len(web.IPs()))
	for _, h := range web.Hosts() {
		if h.Role != synth.RoleNone {
			continue
		}
		hdr := "Host: " + h.Name + ":" + strconv.Itoa(port) + "\r\n\r\n"
		i := idx[h.IP]
		byIP[i] = append(byIP[i], target{hostHdr: []byte(hdr), pages: h.Pages})
	}
	return byIP
}

// counters are one worker's, summed at the end.
type counters struct {
	pages, bytes, errors, non200, dials int64
	_                                   [24]byte // one cache line each
}

// window is the measured window: its start, and the CPU times then.
type window struct {
	mu        sync.Mutex
	started   bool
	start     time.Time
	clientCPU time.Duration
	serverCPU time.Duration
	err       error
}

// load runs the workers against web on port and returns the figures.
func load(ctx context.Context, cfg *WebsimConfig, web *synth.Web, port int, server serverCPU) (WebsimResult, error) {
	byIP := plan(web, port)
	var ips []netip.Addr
	var targets [][]target
	for i, t := range byIP {
		if len(t) > 0 {
			ips = append(ips, web.IPs()[i])
			targets = append(targets, t)
		}
	}
	if len(ips) == 0 {
		return WebsimResult{}, errors.New("bench: the web has no host to request")
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.Warmup+cfg.Duration)
	defer cancel()
	deadline, _ := runCtx.Deadline()

	var (
		measuring atomic.Bool
		win       window
		issued    atomic.Int64
	)
	begin := func() {
		win.mu.Lock()
		defer win.mu.Unlock()
		var err error
		win.clientCPU, err = selfCPU()
		if err == nil {
			win.serverCPU, err = server.cpu()
		}
		win.start, win.started, win.err = time.Now(), true, err
		measuring.Store(true)
	}
	if cfg.Warmup > 0 {
		t := time.AfterFunc(cfg.Warmup, begin)
		defer t.Stop()
	} else {
		begin()
	}

	counts := make([]counters, cfg.Conns)
	var wg sync.WaitGroup
	for i := range cfg.Conns {
		k := i % len(ips)
		w := &worker{
			addr:     netip.AddrPortFrom(ips[k], uint16(port)).String(),
			targets:  targets[k],
			rng:      rng{s: cfg.Seed ^ (uint64(i)+1)*0x9e3779b97f4a7c15},
			issued:   &issued,
			max:      cfg.MaxRequests,
			measure:  &measuring,
			counters: &counts[i],
		}
		wg.Go(func() { w.run(runCtx) })
	}
	wg.Wait()
	end := time.Now()
	clientEnd, cerr := selfCPU()
	serverEnd, serr := server.cpu()
	measuring.Store(false)

	win.mu.Lock()
	defer win.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return WebsimResult{}, fmt.Errorf("bench: websim run: %w", err)
	}
	if !win.started {
		return WebsimResult{}, fmt.Errorf("bench: the run ended (max requests %d) before the %v warmup did", cfg.MaxRequests, cfg.Warmup)
	}
	if end.After(deadline) {
		end = deadline
	}
	var res WebsimResult
	for _, c := range counts {
		res.Pages += c.pages
		res.Bytes += c.bytes
		res.Errors += c.errors
		res.Non200 += c.non200
		res.Dials += c.dials
	}
	res.Elapsed = end.Sub(win.start)
	if s := res.Elapsed.Seconds(); s > 0 {
		res.PagesPerSec = float64(res.Pages) / s
		res.MBPerSec = float64(res.Bytes) / 1e6 / s
	}
	if res.Pages > 0 {
		res.MeanPageBytes = float64(res.Bytes) / float64(res.Pages)
	}
	res.ClientCPU = clientEnd - win.clientCPU
	res.ServerCPU = serverEnd - win.serverCPU
	if err := errors.Join(win.err, cerr, serr); err != nil {
		return res, fmt.Errorf("bench: cpu time: %w", err)
	}
	return res, nil
}

// worker is one keep-alive connection's load generator.
type worker struct {
	addr     string
	targets  []target
	rng      rng
	issued   *atomic.Int64
	max      int64
	measure  *atomic.Bool
	counters *counters

	req []byte
	br  *bufio.Reader
}

// errStop ends a worker without counting an error.
var errStop = errors.New("stop")

// run dials, sends requests one at a time and reads the responses until
// ctx ends, the request bound is reached, or dials keep failing.
func (w *worker) run(ctx context.Context) {
	w.br = bufio.NewReaderSize(nil, readBufBytes)
	w.req = make([]byte, 0, 256)
	d := net.Dialer{Timeout: 5 * time.Second}
	failures := 0
	for ctx.Err() == nil && failures < maxDialErrors {
		c, err := d.DialContext(ctx, "tcp4", w.addr)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.counters.errors++
			failures++
			sleep(ctx, 10*time.Millisecond)
			continue
		}
		w.counters.dials++
		stop := context.AfterFunc(ctx, func() { c.Close() }) // unblocks reads at the deadline
		served, err := w.serve(c)
		stop()
		c.Close()
		if errors.Is(err, errStop) || ctx.Err() != nil {
			return
		}
		if err != nil {
			w.counters.errors++
			if served == 0 {
				failures++
			}
			sleep(ctx, 10*time.Millisecond)
			continue
		}
		failures = 0 // the server closed the connection cleanly: dial again
	}
}

// serve runs requests on c until an error, errStop, or a response asking to
// close (nil error). It returns the number of responses read.
func (w *worker) serve(c net.Conn) (int, error) {
	w.br.Reset(c)
	for n := 0; ; n++ {
		if w.issued.Add(1) > w.max {
			return n, errStop
		}
		t := &w.targets[w.rng.intn(len(w.targets))]
		page := w.rng.intn(t.pages)
		w.req = append(w.req[:0], "GET /"...)
		if page > 0 {
			w.req = append(w.req, "p/"...)
			w.req = strconv.AppendInt(w.req, int64(page), 10)
			w.req = append(w.req, ".html"...)
		}
		w.req = append(w.req, " HTTP/1.1\r\n"...)
		w.req = append(w.req, t.hostHdr...)
		if _, err := c.Write(w.req); err != nil {
			return n, fmt.Errorf("bench: write request: %w", err)
		}
		status, body, closeAfter, err := readResponse(w.br)
		if err != nil {
			return n, err
		}
		if w.measure.Load() {
			w.counters.pages++
			w.counters.bytes += body
			if status != 200 {
				w.counters.non200++
			}
		}
		if closeAfter {
			return n + 1, nil
		}
	}
}

// readResponse reads one HTTP/1.1 response from br and discards its body.
// It reports the status, the body length and whether the server closes
// the connection after it.
func readResponse(br *bufio.Reader) (status int, body int64, closeAfter bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, 0, false, fmt.Errorf("bench: read status line: %w", err)
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, 0, false, fmt.Errorf("bench: bad status line %q", trimCRLF(line))
	}
	status, ok := atoi(line[9:12])
	if !ok {
		return 0, 0, false, fmt.Errorf("bench: bad status line %q", trimCRLF(line))
	}
	body = -1
	for i := 0; ; i++ {
		if i == maxHeaderLines {
			return 0, 0, false, fmt.Errorf("bench: more than %d header lines", maxHeaderLines)
		}
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, 0, false, fmt.Errorf("bench: read header: %w", err)
		}
		line = trimCRLF(line)
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, 0, false, fmt.Errorf("bench: bad header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, ok := atoi(value)
			if !ok || n > maxBodyBytes {
				return 0, 0, false, fmt.Errorf("bench: bad Content-Length %q", value)
			}
			body = int64(n)
		case bytes.EqualFold(name, []byte("Connection")):
			closeAfter = bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, 0, false, fmt.Errorf("bench: unsupported Transfer-Encoding %q", value)
		}
	}
	if body < 0 {
		return 0, 0, false, errors.New("bench: response without Content-Length")
	}
	if _, err := br.Discard(int(body)); err != nil {
		return 0, 0, false, fmt.Errorf("bench: read body: %w", err)
	}
	return status, body, closeAfter, nil
}

func trimCRLF(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// atoi parses a non-negative decimal of at most 9 digits.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// rng is splitmix64: a fixed, cheap, deterministic request sequence.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// intn returns a number in [0, n), n > 0.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// child is websim running as a subprocess.
type child struct {
	p    *proc
	tmp  string // removed by stop ("": none)
	web  *synth.Web
	port int
}

// startChild builds (unless cfg.WebsimBinary is set) and starts websim
// serve, waits until it is ready, and rebuilds its web in-process.
func startChild(ctx context.Context, cfg *WebsimConfig) (_ *child, err error) {
	tmp, err := os.MkdirTemp("", "meridian-bench-websim-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	bin := cfg.WebsimBinary
	if bin == "" {
		if bin, err = buildWebsim(ctx, cfg.ModuleRoot, tmp); err != nil {
			return nil, err
		}
	}
	o := cfg.webOptions(80)
	ready := filepath.Join(tmp, "ready")
	c, err := startWebsim(ctx, "websim", bin, serveArgs(o, ready), ready)
	if err != nil {
		return nil, err
	}
	c.tmp = tmp
	o.Port = c.port
	if c.web, err = synth.New(o); err != nil {
		c.stop()
		return nil, fmt.Errorf("bench: rebuild the web: %w", err)
	}
	return c, nil
}

// serveArgs are the flags of `websim serve` for the web o, every listener
// on port 0 (so that two runs at once do not collide), its ready file
// ready.
func serveArgs(o synth.Options, ready string) []string {
	return []string{"serve", "--port", "0", "--dns", "127.0.0.1:0", "--admin", "127.0.0.1:0",
		"--ready-file", ready, "--log-level", "warn",
		"--hosts", strconv.Itoa(o.Hosts), "--pages", strconv.Itoa(o.Pages), "--page-bytes", strconv.Itoa(o.PageBytes),
		"--ips", strconv.Itoa(o.IPs), "--ip-base", o.IPBase.String(), "--seed", strconv.FormatUint(o.Seed, 10),
		"--profile", o.Profile.String()}
}

// startWebsim starts websim (bin with args, which name its ready file
// ready) and waits until it is ready; on failure it has stopped it. what
// names it in errors ("websim replay").
func startWebsim(ctx context.Context, what, bin string, args []string, ready string) (*child, error) {
	p, err := startProc(bin, args, nil, procLogTail, stopTimeout)
	if err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", what, err)
	}
	c := &child{p: p}
	if c.port, err = c.waitReady(ctx, ready); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// waitReady polls the ready file until it names the port.
func (c *child) waitReady(ctx context.Context, path string) (int, error) {
	port := 0
	var b []byte
	err := c.p.waitUntil(ctx, readyTimeout, 20*time.Millisecond, func() bool {
		var err error
		if b, err = os.ReadFile(path); err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			if v, ok := strings.CutPrefix(f, "port="); ok {
				if p, err := strconv.Atoi(v); err == nil && p > 0 && p < 65536 {
					port = p
					break
				}
			}
		}
		return true
	})
	switch {
	case errors.Is(err, errExited):
		return 0, fmt.Errorf("bench: websim exited before it was ready (%v): %s", c.p.err, c.p.tail)
	case err != nil:
		return 0, fmt.Errorf("bench: waiting for websim to be ready: %w", err)
	case port == 0:
		return 0, fmt.Errorf("bench: websim ready file without a port: %q", b)
	}
	return port, nil
}

// cpu returns the child's CPU time so far.
func (c *child) cpu() (time.Duration, error) { return procCPU(c.p.pid) }

// stop sends SIGTERM, waits (killing after stopTimeout) and removes the
// temporary directory. It is idempotent.
func (c *child) stop() error {
	c.p.stop()
	os.RemoveAll(c.tmp)
	if ps := c.p.cmd.ProcessState; ps != nil && ps.Success() {
		return nil
	}
	if err := c.p.err; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("bench: websim: %w: %s", err, c.p.tail)
	}
	return nil
}

// buildWebsim builds ./cmd/websim of the module at root (found if empty)
// into dir and returns the binary's path.
func buildWebsim(ctx context.Context, root, dir string) (string, error) {
	if root == "" {
		var err error
		if root, err = moduleRoot(ctx); err != nil {
			return "", err
		}
	}
	return buildCmd(ctx, root, dir, "websim")
}

// moduleRoot finds the directory of Meridian's go.mod: the parent of this
// source file's directory when it is still there, else "go env GOMOD".
func moduleRoot(ctx context.Context) (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		root := filepath.Dir(filepath.Dir(file))
		if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/meridian-crawler/meridian\n")) {
			return root, nil
		}
	}
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("bench: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("bench: cannot find the module root; run from the module or set ModuleRoot")
	}
	return filepath.Dir(gomod), nil
}

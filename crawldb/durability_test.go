//go:build linux

package crawldb

// Durability tests (issue 3): every node runs in its own process (this test
// binary re-executed with CRAWLDB_NODE_CHILD set) on a real directory, with
// real TCP on loopback, and is killed with SIGKILL. The parent test is the
// load generator: it posts encoded commands to /crawldb/apply, never resends
// a command whose outcome it does not know, and afterwards opens each node's
// store directly to check that every acknowledged write is there exactly
// once, that every write the API refused is absent, that commands were
// applied whole or not at all, and that the frontier index agrees with the
// URL records.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// Environment of a child node process.
const (
	envChild         = "CRAWLDB_NODE_CHILD"
	envDir           = "CRAWLDB_NODE_DIR"
	envID            = "CRAWLDB_NODE_ID"
	envRaft          = "CRAWLDB_NODE_RAFT"
	envAPI           = "CRAWLDB_NODE_API"
	envJoin          = "CRAWLDB_NODE_JOIN"
	envReady         = "CRAWLDB_NODE_READY"
	envTrailing      = "CRAWLDB_NODE_TRAILING_LOGS"
	envSnapThreshold = "CRAWLDB_NODE_SNAPSHOT_THRESHOLD"
	envSnapInterval  = "CRAWLDB_NODE_SNAPSHOT_INTERVAL"
	// envShowLogs set in the parent prints the children's logs even when
	// a test passes.
	envShowLogs = "CRAWLDB_DURABILITY_LOGS"
)

// Load shape shared by the scenarios.
const (
	durBatchURLs = 50 // UpsertCash operations per command
	durHosts     = 8  // hosts the URLs are spread over
	durCash      = 1.0
	durDepth     = 2
	durWriters   = 3
)

// childStoreOptions returns store options that keep the children's Pebble
// small, so that memtables are flushed during the tests and several
// race-enabled processes fit in memory.
func childStoreOptions() store.Options {
	return store.Options{CacheBytes: 8 << 20, MemTableBytes: 4 << 20}
}

// TestDurabilityChild is the node process of the durability tests; it does
// nothing unless CRAWLDB_NODE_CHILD is set.
func TestDurabilityChild(t *testing.T) {
	if os.Getenv(envChild) == "" {
		t.Skip("only runs as a child process of the durability tests")
	}
	// Exit here: the node's HTTP client may keep connections to other live
	// nodes, which TestMain's leak check would report.
	os.Exit(runChildNode())
}

// readyInfo is what a child writes to its ready file.
type readyInfo struct {
	PID      int    `json:"pid"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
}

// runChildNode runs one node from the environment until SIGTERM and returns
// the process's exit code.
func runChildNode() int {
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s child: "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	level := slog.LevelInfo
	if os.Getenv("CRAWLDB_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	// Die with the parent, whatever Pdeathsig does.
	ppid := os.Getppid()
	go func() {
		for range time.Tick(200 * time.Millisecond) {
			if os.Getppid() != ppid {
				logf("parent %d gone, exiting", ppid)
				os.Exit(4)
			}
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	num := func(name string) (uint64, error) {
		v := os.Getenv(name)
		if v == "" {
			return 0, nil
		}
		return strconv.ParseUint(v, 10, 64)
	}
	trailing, err1 := num(envTrailing)
	threshold, err2 := num(envSnapThreshold)
	var interval time.Duration
	var err3 error
	if v := os.Getenv(envSnapInterval); v != "" {
		interval, err3 = time.ParseDuration(v)
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		logf("bad environment: %v", err)
		return 2
	}
	o := Options{
		Dir: os.Getenv(envDir), NodeID: os.Getenv(envID),
		RaftAddr: os.Getenv(envRaft), APIAddr: os.Getenv(envAPI), Join: os.Getenv(envJoin),
		FastTimeouts: true, TrailingLogs: trailing, SnapshotThreshold: threshold, SnapshotInterval: interval,
		ApplyTimeout: 5 * time.Second, Store: childStoreOptions(), Logger: log,
		OnFatal: func(err error) {
			logf("FATAL storage failure: %v", err)
			os.Exit(3)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	db, err := Open(ctx, o)
	if err != nil {
		logf("open: %v", err)
		return 2
	}
	if err := db.WaitLeader(ctx); err != nil {
		logf("wait for a leader: %v", err)
		db.Close()
		return 2
	}
	info, _ := json.Marshal(readyInfo{PID: os.Getpid(), RaftAddr: db.RaftAddr(), APIAddr: db.APIAddr()})
	ready := os.Getenv(envReady)
	if err := os.WriteFile(ready+".tmp", info, 0o644); err != nil {
		logf("ready file: %v", err)
		return 2
	}
	if err := os.Rename(ready+".tmp", ready); err != nil {
		logf("ready file: %v", err)
		return 2
	}
	logf("ready: %s", info)

	sig := <-sigs
	logf("%v: closing", sig)
	watchdog := time.AfterFunc(20*time.Second, func() {
		logf("Close did not return within 20s")
		os.Exit(5)
	})
	err = db.Close()
	watchdog.Stop()
	if err != nil {
		logf("close: %v", err)
		return 1
	}
	logf("closed")
	return 0
}

// stepf logs a step of a scenario with the wall-clock time.
func stepf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// freeAddrs returns n distinct loopback TCP addresses that were free a
// moment ago and that no earlier call of this process handed out: the
// nodes of a cluster pick theirs one after the other before any binds, and
// the kernel may give a port just released to the next node (CI saw two
// nodes given one API port). A node keeps its addresses across restarts.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	handedOut.Lock()
	defer handedOut.Unlock()
	for len(out) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln) // held until all n are picked
		if a := ln.Addr().String(); !handedOut.m[a] {
			handedOut.m[a] = true
			out = append(out, a)
		}
	}
	return out
}

// handedOut are the addresses freeAddrs has handed out in this process.
var handedOut = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

// durNode is one node process, restartable on the same directory and
// addresses.
type durNode struct {
	t        *testing.T
	id       string
	root     string // the test's directory: logs and ready files
	dir      string // the node's Dir
	raftAddr string
	apiAddr  string
	env      []string // extra environment (snapshot settings)

	gen     int
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	logs    []string
}

// newDurNode prepares a node with fresh addresses under root; it is not
// started. Cleanup kills its process and, on failure, prints its logs.
func newDurNode(t *testing.T, root, id string, env ...string) *durNode {
	t.Helper()
	addrs := freeAddrs(t, 2)
	n := &durNode{t: t, id: id, root: root, dir: filepath.Join(root, id), raftAddr: addrs[0], apiAddr: addrs[1], env: env}
	t.Cleanup(func() {
		if n.running() {
			syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
			select {
			case <-n.done:
			case <-time.After(10 * time.Second):
				t.Errorf("%s: process %d did not die", n.id, n.cmd.Process.Pid)
			}
		}
		n.checkLogs()
		if t.Failed() || os.Getenv(envShowLogs) != "" {
			n.dumpLogs()
		}
	})
	return n
}

// running reports whether the node's process has been started and not exited.
func (n *durNode) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// start runs the node's process (joining through join if it is not empty)
// and waits until it has written its ready file.
func (n *durNode) start(join string) {
	t := n.t
	t.Helper()
	if n.running() {
		t.Fatalf("%s: already running", n.id)
	}
	n.gen++
	ready := filepath.Join(n.root, n.id+".ready")
	os.Remove(ready)
	logPath := filepath.Join(n.root, fmt.Sprintf("%s-%d.log", n.id, n.gen))
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close() // the child has its own descriptor
	n.logs = append(n.logs, logPath)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDurabilityChild$")
	cmd.Env = append(os.Environ(), envChild+"=1", envDir+"="+n.dir, envID+"="+n.id,
		envRaft+"="+n.raftAddr, envAPI+"="+n.apiAddr, envJoin+"="+join, envReady+"="+ready)
	cmd.Env = append(cmd.Env, n.env...)
	// The race detector sleeps a second at exit by default.
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: start: %v", n.id, err)
	}
	done := make(chan struct{})
	n.cmd, n.done = cmd, done
	go func() {
		n.waitErr = cmd.Wait()
		close(done)
	}()
	deadline := time.Now().Add(45 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil {
			var ri readyInfo
			if err := json.Unmarshal(b, &ri); err != nil {
				t.Fatalf("%s: ready file %q: %v", n.id, b, err)
			}
			if ri.PID != cmd.Process.Pid || ri.RaftAddr != n.raftAddr || ri.APIAddr != n.apiAddr {
				t.Fatalf("%s: ready file %+v, want pid %d, raft %s, api %s", n.id, ri, cmd.Process.Pid, n.raftAddr, n.apiAddr)
			}
			stepf(t, "%s ready (start %d, pid %d)", n.id, n.gen, ri.PID)
			return
		}
		select {
		case <-done:
			t.Fatalf("%s: exited before it was ready: %v", n.id, n.waitErr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready after 45s", n.id)
		}
	}
}

// kill sends SIGKILL to the node's process group and waits for it to die.
func (n *durNode) kill() {
	t := n.t
	t.Helper()
	if !n.running() {
		t.Fatalf("%s: kill: not running (exit: %v)", n.id, n.waitErr)
	}
	if err := syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("%s: kill: %v", n.id, err)
	}
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: did not die after SIGKILL", n.id)
	}
}

// stop sends SIGTERM and expects a clean Close and exit status 0.
func (n *durNode) stop() {
	t := n.t
	t.Helper()
	if !n.running() {
		select {
		case <-n.done:
			t.Fatalf("%s: exited before it was stopped: %v", n.id, n.waitErr)
		default:
			t.Fatalf("%s: stop: never started", n.id)
		}
	}
	if err := syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM: %v", n.id, err)
	}
	select {
	case <-n.done:
		if n.waitErr != nil {
			t.Errorf("%s: unclean exit after SIGTERM: %v", n.id, n.waitErr)
		}
		stepf(t, "%s stopped", n.id)
	case <-time.After(30 * time.Second):
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.done
		t.Errorf("%s: still running 30s after SIGTERM; killed", n.id)
	}
}

// checkLogs fails the test if a child reported a data race or a storage failure.
func (n *durNode) checkLogs() {
	for _, p := range n.logs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, bad := range []string{"WARNING: DATA RACE", "FATAL storage failure", "panic:"} {
			if bytes.Contains(b, []byte(bad)) {
				n.t.Errorf("%s: %s contains %q", n.id, filepath.Base(p), bad)
			}
		}
	}
}

// dumpLogs prints the tail of each of the node's log files.
func (n *durNode) dumpLogs() {
	const tail = 80
	for _, p := range n.logs {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if len(lines) > 4*tail {
				lines = append(lines[:0], lines[len(lines)-tail:]...)
			}
		}
		f.Close()
		if len(lines) > tail {
			lines = lines[len(lines)-tail:]
		}
		n.t.Logf("==== %s (last %d lines) ====\n%s", filepath.Base(p), len(lines), strings.Join(lines, "\n"))
	}
}

// currentName is what the node's CURRENT file names ("" if it has none).
func (n *durNode) currentName() string {
	b, err := os.ReadFile(filepath.Join(n.dir, currentFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// maxSnapshotIndex is the highest log index of a finished snapshot in the
// node's Raft snapshot store: raft's file store keeps them under
// Dir/snapshots/snapshots in directories named term-index-msec.
func (n *durNode) maxSnapshotIndex() uint64 {
	ents, _ := os.ReadDir(filepath.Join(n.dir, "snapshots", "snapshots"))
	var best uint64
	for _, e := range ents {
		parts := strings.Split(e.Name(), "-")
		if !e.IsDir() || len(parts) != 3 || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if idx, err := strconv.ParseUint(parts[1], 10, 64); err == nil && idx > best {
			best = idx
		}
	}
	return best
}

// durClient talks to the nodes' HTTP APIs.
type durClient struct {
	hc *http.Client
}

// newDurClient returns a client whose idle connections are closed at cleanup.
func newDurClient(t *testing.T) *durClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * durWriters, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &durClient{hc: &http.Client{Timeout: 10 * time.Second, Transport: tr}}
}

// status fetches GET /crawldb/status.
func (c *durClient) status(addr string) (Status, error) {
	var st Status
	resp, err := c.hc.Get("http://" + addr + "/crawldb/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status %s: %s", addr, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// apply posts one encoded command to addr's /crawldb/apply.
func (c *durClient) apply(addr string, cmd []byte) (wireResult, error) {
	var out wireResult
	resp, err := c.hc.Post("http://"+addr+"/crawldb/apply", "application/octet-stream", bytes.NewReader(cmd))
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return out, fmt.Errorf("apply at %s: %s: %s", addr, resp.Status, bytes.TrimSpace(b))
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// batchKey names one command of the load: writer w's seq-th batch.
type batchKey struct{ w, seq int }

// durURL is URL j of batch k; URLs are never reused.
func durURL(k batchKey, j int) string {
	return fmt.Sprintf("http://h%d.dur.test/w%d/b%d/u%d", j%durHosts, k.w, k.seq, j)
}

// parseDurURL inverts durURL.
func parseDurURL(u string) (k batchKey, j int, host string, ok bool) {
	rest, found := strings.CutPrefix(u, "http://")
	if !found {
		return k, 0, "", false
	}
	host, path, found := strings.Cut(rest, "/")
	if !found {
		return k, 0, "", false
	}
	if _, err := fmt.Sscanf(path, "w%d/b%d/u%d", &k.w, &k.seq, &j); err != nil || durURL(k, j) != u {
		return k, 0, "", false
	}
	return k, j, host, true
}

// outcome is what the load generator knows of a command it sent.
type outcome uint8

const (
	// acked: the node answered with a result: the command is committed.
	acked outcome = iota + 1
	// refused: not_leader without a failure: the command was never proposed.
	refused
	// unknown: anything else (transport error, failure): maybe applied.
	unknown
)

// ledger records the outcome of every command the load generator sent.
type ledger struct {
	mu      sync.Mutex
	batches map[batchKey]outcome
	indexes map[uint64]batchKey // acknowledged log index → command
	counts  [unknown + 1]int
	maxAck  uint64
}

// record notes o for k (and the log index of an acknowledged command).
func (l *ledger) record(t *testing.T, k batchKey, o outcome, index uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.batches == nil {
		l.batches, l.indexes = map[batchKey]outcome{}, map[uint64]batchKey{}
	}
	l.batches[k] = o
	l.counts[o]++
	if o == acked {
		if prev, dup := l.indexes[index]; dup {
			t.Errorf("commands %v and %v were both acknowledged at log index %d", prev, k, index)
		}
		l.indexes[index] = k
		l.maxAck = max(l.maxAck, index)
	}
}

// snapshot returns the number of acknowledged commands and the highest
// acknowledged log index.
func (l *ledger) snapshot() (ackedN int, maxAck uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[acked], l.maxAck
}

// String summarises the ledger.
func (l *ledger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d commands: %d acknowledged, %d refused (not leader), %d unknown; highest acknowledged index %d",
		len(l.batches), l.counts[acked], l.counts[refused], l.counts[unknown], l.maxAck)
}

// loadGen runs writer goroutines that post fresh commands round robin to
// the current target nodes.
type loadGen struct {
	t      *testing.T
	c      *durClient
	led    *ledger
	stopCh chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	targets []string
	rr      int
	writers int
}

// newLoadGen returns a stopped load generator aimed at targets.
func newLoadGen(t *testing.T, c *durClient, targets ...string) *loadGen {
	return &loadGen{t: t, c: c, led: &ledger{}, targets: targets}
}

// setTargets replaces the API addresses the writers post to.
func (g *loadGen) setTargets(addrs ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.targets = append([]string(nil), addrs...)
}

// next returns the next target, round robin ("" if there is none).
func (g *loadGen) next() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.targets) == 0 {
		return ""
	}
	g.rr++
	return g.targets[g.rr%len(g.targets)]
}

// start launches n writers; each stops at stop() or after limit at the latest.
func (g *loadGen) start(n int, limit time.Duration) {
	g.stopCh = make(chan struct{})
	deadline := time.Now().Add(limit)
	for range n {
		g.mu.Lock()
		g.writers++
		w := g.writers
		g.mu.Unlock()
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.writer(w, deadline)
		}()
	}
	g.t.Cleanup(g.stop)
}

// stop stops the writers and waits for them; it is idempotent.
func (g *loadGen) stop() {
	select {
	case <-g.stopCh:
	default:
		close(g.stopCh)
	}
	g.wg.Wait()
}

// writer posts fresh commands until stopped, never resending one.
func (g *loadGen) writer(w int, deadline time.Time) {
	const maxBatches = 1 << 20
	for seq := 0; seq < maxBatches && time.Now().Before(deadline); seq++ {
		select {
		case <-g.stopCh:
			return
		default:
		}
		addr := g.next()
		if addr == "" {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		k := batchKey{w, seq}
		b := store.NewBatch()
		for j := range durBatchURLs {
			b.UpsertCash(durURL(k, j), durCash, durDepth)
		}
		cmd, err := b.Encode()
		if err != nil {
			g.t.Errorf("encode: %v", err)
			return
		}
		res, err := g.c.apply(addr, cmd)
		switch {
		case err != nil || res.Failure != "":
			g.led.record(g.t, k, unknown, 0)
			time.Sleep(25 * time.Millisecond)
		case res.NotLeader:
			g.led.record(g.t, k, refused, 0)
			time.Sleep(2 * time.Millisecond)
		case res.Err != "":
			// Rejected whole: nothing applied. Never expected for these commands.
			g.led.record(g.t, k, refused, 0)
			g.t.Errorf("command %v rejected at %s: %s", k, addr, res.Err)
		default:
			g.led.record(g.t, k, acked, res.Index)
			if res.Index == 0 || res.Skipped || len(res.Ops) != durBatchURLs {
				g.t.Errorf("command %v acknowledged by %s with index %d, skipped %v, %d op results", k, addr, res.Index, res.Skipped, len(res.Ops))
				break
			}
			for j, op := range res.Ops {
				if !op.New || !op.Applied {
					g.t.Errorf("command %v at index %d: op %d on a fresh URL returned %+v", k, res.Index, j, op)
					break
				}
			}
		}
	}
}

// waitAcked waits until at least n commands are acknowledged; it fails the
// test after timeout.
func (g *loadGen) waitAcked(n int, timeout time.Duration) {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, _ := g.led.snapshot()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("only %d of %d commands acknowledged after %v (%v)", got, n, timeout, g.led)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitConverged waits until every node reports the same applied index, at
// least min, and returns it.
func waitConverged(t *testing.T, c *durClient, nodes []*durNode, min uint64, timeout time.Duration) uint64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last []string
	for {
		var applied []uint64
		last = last[:0]
		for _, n := range nodes {
			st, err := c.status(n.apiAddr)
			if err != nil {
				last = append(last, fmt.Sprintf("%s: %v", n.id, err))
				continue
			}
			applied = append(applied, st.Applied)
			last = append(last, fmt.Sprintf("%s: %s applied %d leader %q", n.id, st.State, st.Applied, st.Leader))
		}
		if len(applied) == len(nodes) && applied[0] >= min {
			same := true
			for _, a := range applied {
				same = same && a == applied[0]
			}
			if same {
				return applied[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes did not converge on an applied index >= %d within %v: %s", min, timeout, strings.Join(last, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// findLeader waits until exactly one of nodes says it leads and every other
// one names it, and returns it.
func findLeader(t *testing.T, c *durClient, nodes []*durNode, timeout time.Duration) *durNode {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var views []string
	for {
		var leader *durNode
		leaders, agree := 0, true
		names := map[string]bool{}
		views = views[:0]
		for _, n := range nodes {
			st, err := c.status(n.apiAddr)
			if err != nil {
				agree = false
				views = append(views, fmt.Sprintf("%s: %v", n.id, err))
				continue
			}
			views = append(views, fmt.Sprintf("%s: %s, leader %q", n.id, st.State, st.Leader))
			names[st.Leader] = true
			if st.State == "Leader" {
				leaders++
				leader = n
			}
		}
		if leaders == 1 && agree && len(names) == 1 && names[leader.id] {
			return leader
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agreed leader within %v: %s", timeout, strings.Join(views, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// storeView is what verifyStore read from one node's store.
type storeView struct {
	applied uint64
	present map[batchKey]bool // commands found whole in the store
	urls    int
}

// problems collects check failures, reporting only the first few of each kind.
type problems struct {
	t      *testing.T
	prefix string
	seen   map[string]int
}

// add reports a problem of the given kind.
func (p *problems) add(kind, format string, args ...any) {
	p.t.Helper()
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	p.seen[kind]++
	if p.seen[kind] <= 5 {
		p.t.Errorf("%s: %s: %s", p.prefix, kind, fmt.Sprintf(format, args...))
	}
}

// summary reports how many problems of each kind were suppressed.
func (p *problems) summary() {
	p.t.Helper()
	kinds := make([]string, 0, len(p.seen))
	for k := range p.seen {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		if p.seen[k] > 5 {
			p.t.Errorf("%s: %s: %d problems in all", p.prefix, k, p.seen[k])
		}
	}
}

// verifyStore opens the stopped node's store (the generation CURRENT names,
// or "db") and checks it against the ledger: every acknowledged command
// whole, no refused command, every other command whole or absent, every URL
// unfetched with cash exactly durCash, the running counts, and that the
// frontier index lists exactly the unfetched URLs, once each, with their
// cash as score.
func verifyStore(t *testing.T, n *durNode, led *ledger) storeView {
	t.Helper()
	if n.running() {
		t.Fatalf("%s: verifyStore on a running node", n.id)
	}
	name := n.currentName()
	if name == "" {
		name = "db"
	}
	st, err := store.Open(filepath.Join(n.dir, name), childStoreOptions())
	if err != nil {
		t.Fatalf("%s: open store %s: %v", n.id, name, err)
	}
	defer st.Close()
	p := &problems{t: t, prefix: n.id + "/" + name}
	defer p.summary()

	type rec struct {
		cash  float64
		depth uint32
	}
	urls := map[string]rec{}
	perBatch := map[batchKey]int{}
	perHost := map[string]uint64{}
	err = st.ScanURLs(func(r store.URLRecord) error {
		k, _, host, ok := parseDurURL(r.URL)
		if !ok {
			p.add("foreign URL", "%q", r.URL)
			return nil
		}
		if r.Status != store.StatusUnfetched || r.Cash != durCash || r.Depth != durDepth || r.History != 0 {
			p.add("record", "%s: status %v, cash %v, history %v, depth %d; want unfetched, cash %v (a command applied twice adds it twice), depth %d",
				r.URL, r.Status, r.Cash, r.History, r.Depth, durCash, durDepth)
		}
		if _, dup := urls[r.URL]; dup {
			p.add("scan", "%s listed twice", r.URL)
		}
		urls[r.URL] = rec{r.Cash, r.Depth}
		perBatch[k]++
		perHost[host]++
		return nil
	})
	if err != nil {
		t.Fatalf("%s: scan: %v", n.id, err)
	}

	led.mu.Lock()
	view := storeView{applied: st.AppliedIndex(), present: map[batchKey]bool{}, urls: len(urls)}
	for k, c := range perBatch {
		o, sent := led.batches[k]
		switch {
		case !sent:
			p.add("phantom command", "%v: %d URLs of a command never sent", k, c)
		case c != durBatchURLs:
			p.add("torn command", "%v (%v): %d of %d URLs", k, o, c, durBatchURLs)
		case o == refused:
			p.add("refused command applied", "%v was answered not_leader but is in the store", k)
		}
		if c == durBatchURLs {
			view.present[k] = true
		}
	}
	ackedURLs := 0
	for k, o := range led.batches {
		if o == acked {
			ackedURLs += durBatchURLs
			if perBatch[k] != durBatchURLs {
				p.add("lost acknowledged command", "%v: %d of %d URLs in the store", k, perBatch[k], durBatchURLs)
			}
		}
	}
	maxAck := led.maxAck
	led.mu.Unlock()

	if view.applied < maxAck {
		p.add("applied index", "%d, below the highest acknowledged index %d", view.applied, maxAck)
	}
	c := st.Counts()
	if c.URLs != uint64(len(urls)) || c.Frontier != uint64(len(urls)) || c.ByStatus[store.StatusUnfetched] != uint64(len(urls)) || len(c.ByStatus) > 1 {
		p.add("counts", "%+v, but the scan found %d unfetched URLs", c, len(urls))
	}
	if c.URLs < uint64(ackedURLs) {
		p.add("counts", "%d URLs, fewer than the %d acknowledged", c.URLs, ackedURLs)
	}

	// The frontier index must list exactly the unfetched URLs. Width and
	// PerHost one more than that, so that any extra entry shows.
	width := len(urls) + 1
	fr, err := st.Frontier(store.FrontierQuery{Width: width, PerHost: width})
	if err != nil {
		t.Fatalf("%s: frontier: %v", n.id, err)
	}
	if len(fr) != len(urls) {
		p.add("frontier", "%d entries, want the %d unfetched URLs", len(fr), len(urls))
	}
	inFrontier := make(map[string]bool, len(fr))
	for _, e := range fr {
		r, ok := urls[e.URL]
		switch {
		case !ok:
			p.add("frontier", "entry %s has no unfetched record", e.URL)
		case inFrontier[e.URL]:
			p.add("frontier", "entry %s listed twice", e.URL)
		case e.Score != r.cash || e.Depth != r.depth:
			p.add("frontier", "entry %s: score %v depth %d, record cash %v depth %d", e.URL, e.Score, e.Depth, r.cash, r.depth)
		}
		if _, _, host, _ := parseDurURL(e.URL); ok && e.Host != host {
			p.add("frontier", "entry %s: host %q", e.URL, e.Host)
		}
		inFrontier[e.URL] = true
	}
	for u := range urls {
		if !inFrontier[u] {
			p.add("frontier", "unfetched %s missing from the frontier", u)
		}
	}
	for j := range durHosts {
		host := fmt.Sprintf("h%d.dur.test", j)
		hs, err := st.HostStats(host)
		if err != nil {
			t.Fatalf("%s: host stats %s: %v", n.id, host, err)
		}
		want := perHost[host]
		if hs.Frontier != want || (want > 0 && hs.Best != durCash) {
			p.add("host stats", "%s: %+v, want frontier %d best %v", host, hs, want, durCash)
		}
	}
	stepf(t, "%s: store %s: applied %d, %d URLs (%d commands), %d acknowledged URLs", n.id, name, view.applied, len(urls), len(view.present), ackedURLs)
	return view
}

// sameContents fails the test unless the views (of nodes at the same
// applied index) hold the same commands.
func sameContents(t *testing.T, names []string, views []storeView) {
	t.Helper()
	for i := 1; i < len(views); i++ {
		a, b := views[0], views[i]
		if a.applied != b.applied {
			t.Errorf("%s applied %d, %s applied %d", names[0], a.applied, names[i], b.applied)
			continue
		}
		diff := 0
		for k := range a.present {
			if !b.present[k] {
				diff++
			}
		}
		for k := range b.present {
			if !a.present[k] {
				diff++
			}
		}
		if diff > 0 || a.urls != b.urls {
			t.Errorf("%s and %s at index %d differ: %d vs %d URLs, %d commands in only one", names[0], names[i], a.applied, a.urls, b.urls, diff)
		}
	}
}

// TestDurabilitySingleNodeKill: a one-node site is SIGKILLed twice under
// load and restarted on the same directory; every acknowledged write must
// survive exactly once.
func TestDurabilitySingleNodeKill(t *testing.T) {
	start := time.Now()
	root := t.TempDir()
	c := newDurClient(t)
	n1 := newDurNode(t, root, "n1")
	n1.start("")
	g := newLoadGen(t, c, n1.apiAddr)
	g.start(durWriters, 40*time.Second)

	for cycle := 1; cycle <= 2; cycle++ {
		before, _ := g.led.snapshot()
		g.waitAcked(before+30, 15*time.Second)
		time.Sleep(300 * time.Millisecond) // keep the load on for a while
		n1.kill()
		atKill, maxAtKill := g.led.snapshot()
		stepf(t, "cycle %d: killed n1 with %d acknowledged commands (index <= %d)", cycle, atKill, maxAtKill)
		time.Sleep(150 * time.Millisecond) // writers hit a dead node meanwhile
		n1.start("")
		// The restarted node must take new writes and replay everything it
		// acknowledged before the kill.
		g.waitAcked(atKill+20, 15*time.Second)
		_, maxAck := g.led.snapshot()
		waitConverged(t, c, []*durNode{n1}, max(maxAck, maxAtKill), 15*time.Second)
		st, err := c.status(n1.apiAddr)
		if err != nil {
			t.Fatal(err)
		}
		if ackedN, _ := g.led.snapshot(); st.Counts.URLs < uint64(atKill*durBatchURLs) {
			t.Errorf("cycle %d: %d URLs after restart, fewer than the %d acknowledged before the kill (now %d commands acknowledged)",
				cycle, st.Counts.URLs, atKill*durBatchURLs, ackedN)
		}
	}
	g.stop()
	_, maxAck := g.led.snapshot()
	waitConverged(t, c, []*durNode{n1}, maxAck, 15*time.Second)
	stepf(t, "%v", g.led)
	n1.stop()
	verifyStore(t, n1, g.led)
	stepf(t, "took %v", time.Since(start).Round(time.Millisecond))
}

// cluster is three nodes started in order, n1 bootstrapping and the others
// joining through n1.
type cluster struct {
	nodes []*durNode
}

// startCluster starts n1..n3 with env and waits for an agreed leader.
func startCluster(t *testing.T, root string, c *durClient, env ...string) *cluster {
	t.Helper()
	cl := &cluster{}
	for i := 1; i <= 3; i++ {
		cl.nodes = append(cl.nodes, newDurNode(t, root, fmt.Sprintf("n%d", i), env...))
	}
	cl.nodes[0].start("")
	cl.nodes[1].start(cl.nodes[0].apiAddr)
	cl.nodes[2].start(cl.nodes[0].apiAddr)
	findLeader(t, c, cl.nodes, 15*time.Second)
	return cl
}

// except returns the cluster's nodes other than x.
func (cl *cluster) except(x *durNode) []*durNode {
	var out []*durNode
	for _, n := range cl.nodes {
		if n != x {
			out = append(out, n)
		}
	}
	return out
}

// apiAddrs returns the API addresses of nodes.
func apiAddrs(nodes []*durNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.apiAddr)
	}
	return out
}

// killLeaderUnderLoad loads the cluster through every node, SIGKILLs the
// leader mid-load, keeps loading through the survivors until another node
// leads and minAfter more commands are acknowledged, and returns the killed
// node and an upper bound of the last log index it can hold.
func killLeaderUnderLoad(t *testing.T, cl *cluster, c *durClient, g *loadGen, minAfter int) (killed *durNode, killBound uint64) {
	t.Helper()
	g.waitAcked(40, 20*time.Second)
	old := findLeader(t, c, cl.nodes, 10*time.Second)
	time.Sleep(100 * time.Millisecond)
	old.kill()
	survivors := cl.except(old)
	g.setTargets(apiAddrs(survivors)...)
	time.Sleep(100 * time.Millisecond) // let answers already sent by the dead node arrive
	atKill, maxAtKill := g.led.snapshot()
	// The dead leader's log ends at most one entry per outstanding request
	// (one per writer), its no-op and an announcement past what it acknowledged.
	killBound = maxAtKill + durWriters + 8
	stepf(t, "killed leader %s with %d commands acknowledged (index <= %d)", old.id, atKill, maxAtKill)

	g.waitAcked(atKill+minAfter, 30*time.Second)
	nl := findLeader(t, c, survivors, 10*time.Second)
	if nl == old {
		t.Fatalf("the killed node %s still leads", old.id)
	}
	st, err := c.status(nl.apiAddr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader != nl.id || st.Leader == old.id {
		t.Fatalf("new leader reports leader %q (killed %s)", st.Leader, old.id)
	}
	stepf(t, "new leader %s", nl.id)
	return old, killBound
}

// stopAndVerify stops the load, waits until nodes agree on an applied index
// covering every acknowledged command, stops them and checks their stores.
func stopAndVerify(t *testing.T, c *durClient, g *loadGen, nodes []*durNode) {
	t.Helper()
	g.stop()
	_, maxAck := g.led.snapshot()
	waitConverged(t, c, nodes, maxAck, 20*time.Second)
	stepf(t, "%v", g.led)
	var names []string
	var views []storeView
	for _, n := range nodes {
		n.stop()
	}
	for _, n := range nodes {
		names = append(names, n.id)
		views = append(views, verifyStore(t, n, g.led))
	}
	sameContents(t, names, views)
}

// TestDurabilityLeaderKilled: three nodes under load through every node;
// the leader is SIGKILLed mid-load; the survivors must elect another leader,
// take more writes, and both hold every acknowledged write exactly once.
func TestDurabilityLeaderKilled(t *testing.T) {
	start := time.Now()
	root := t.TempDir()
	c := newDurClient(t)
	cl := startCluster(t, root, c)
	g := newLoadGen(t, c, apiAddrs(cl.nodes)...)
	g.start(durWriters, 45*time.Second)
	killed, _ := killLeaderUnderLoad(t, cl, c, g, 40)
	stopAndVerify(t, c, g, cl.except(killed))
	stepf(t, "took %v", time.Since(start).Round(time.Millisecond))
}

// restartAndCatchUp restarts the killed node (same directory and addresses,
// no join) while the load goes on and adds it back to the targets. Under
// load the leader keeps moving, so "caught up" means: the node's applied
// index reaches what the leader had applied when the node came back, and
// then what the leader had applied once that happened (the node keeps up).
func restartAndCatchUp(t *testing.T, cl *cluster, c *durClient, g *loadGen, killed *durNode) {
	t.Helper()
	killed.start("")
	g.setTargets(apiAddrs(cl.nodes)...)
	leader := findLeader(t, c, cl.nodes, 10*time.Second)
	for round := 1; round <= 2; round++ {
		ls, err := c.status(leader.apiAddr)
		if err != nil {
			t.Fatal(err)
		}
		target := ls.Applied
		// Each round has its own bound: under the load generator, a node
		// that installs a snapshot may need a second one for the next
		// round's target, and installs under -race on a loaded machine
		// take seconds each.
		deadline := time.Now().Add(30 * time.Second)
		for {
			ks, err := c.status(killed.apiAddr)
			if err != nil {
				t.Fatal(err)
			}
			if ks.Applied >= target {
				stepf(t, "%s at index %d reached %s's index %d of round %d", killed.id, ks.Applied, leader.id, target, round)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s at index %d did not reach %s's index %d within 30s", killed.id, ks.Applied, leader.id, target)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Writes keep flowing with the node back.
	before, _ := g.led.snapshot()
	g.waitAcked(before+20, 15*time.Second)
}

// TestDurabilityCatchUpByLog: after the leader is killed under load, it is
// restarted while the load continues and catches up from the new leader's
// log (no snapshot); then all three stores must hold every acknowledged
// write exactly once and agree.
func TestDurabilityCatchUpByLog(t *testing.T) {
	start := time.Now()
	root := t.TempDir()
	c := newDurClient(t)
	cl := startCluster(t, root, c)
	g := newLoadGen(t, c, apiAddrs(cl.nodes)...)
	g.start(durWriters, 50*time.Second)
	killed, _ := killLeaderUnderLoad(t, cl, c, g, 40)
	before, _ := g.led.snapshot()
	g.waitAcked(before+40, 20*time.Second) // more writes it must replicate
	restartAndCatchUp(t, cl, c, g, killed)
	stopAndVerify(t, c, g, cl.nodes)
	for _, n := range cl.nodes {
		if cur := n.currentName(); cur != "" {
			t.Errorf("%s installed a snapshot (CURRENT %q); with the default thresholds it must catch up by log", n.id, cur)
		}
	}
	stepf(t, "took %v", time.Since(start).Round(time.Millisecond))
}

// TestDurabilityCatchUpBySnapshot: as TestDurabilityCatchUpByLog, with small
// snapshot thresholds, and enough writes while the killed node is down that
// the new leader compacts its log past the dead node's end: the restarted
// node must install a snapshot (CURRENT names db-<index>) and then hold
// every acknowledged write exactly once.
func TestDurabilityCatchUpBySnapshot(t *testing.T) {
	const trailing = 64
	start := time.Now()
	root := t.TempDir()
	c := newDurClient(t)
	cl := startCluster(t, root, c, envTrailing+"="+strconv.Itoa(trailing), envSnapThreshold+"=256", envSnapInterval+"=200ms")
	g := newLoadGen(t, c, apiAddrs(cl.nodes)...)
	g.start(durWriters, 55*time.Second)
	killed, killBound := killLeaderUnderLoad(t, cl, c, g, 40)
	if cur := killed.currentName(); cur != "" {
		t.Fatalf("%s had installed a snapshot before it was killed: CURRENT %q", killed.id, cur)
	}
	// Write until a survivor's snapshot is far enough past the dead node's
	// last index that the log it would need is compacted away.
	survivors := cl.except(killed)
	deadline := time.Now().Add(40 * time.Second)
	for {
		leader := findLeader(t, c, survivors, 10*time.Second)
		if s := leader.maxSnapshotIndex(); s > killBound+trailing+16 {
			stepf(t, "leader %s has a snapshot at index %d; %s's log ends at or before %d", leader.id, s, killed.id, killBound)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader %s has no snapshot past index %d after 40s (newest %d; %v)", leader.id, killBound+trailing+16, leader.maxSnapshotIndex(), g.led)
		}
		time.Sleep(50 * time.Millisecond)
	}
	restartAndCatchUp(t, cl, c, g, killed)
	cur := killed.currentName()
	idx, err := strconv.ParseUint(strings.TrimPrefix(cur, "db-"), 10, 64)
	switch {
	case !strings.HasPrefix(cur, "db-") || err != nil:
		// Go on: the store check shows what the node lacks.
		t.Errorf("%s did not install a snapshot: CURRENT %q", killed.id, cur)
	case idx <= killBound-durWriters-8:
		t.Errorf("%s installed snapshot %d, not past its own log (ends at or before %d)", killed.id, idx, killBound)
	}
	if cur != "" {
		if _, err := os.Stat(filepath.Join(killed.dir, cur)); err != nil {
			t.Errorf("CURRENT names %s: %v", cur, err)
		}
	}
	stopAndVerify(t, c, g, cl.nodes)
	stepf(t, "took %v", time.Since(start).Round(time.Millisecond))
}

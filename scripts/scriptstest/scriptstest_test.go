// Package scriptstest_test runs the operator scripts under scripts/ end to
// end, as a user would: scripts/federation.sh crawls a tiny websim with
// three sites across the WAN proxy, ends by itself, and leaves nothing
// running; on SIGINT it stops everything. It also checks the repository
// itself: the README lists the licence of every module go.mod requires.
package scriptstest_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/internal/loopport"
)

// repoRoot is the module's root: this package is scripts/scriptstest.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binaries builds site, websim and wanproxy once per test binary, into a
// directory the script takes as MERIDIAN_BIN.
func binaries(t *testing.T, root string) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "meridian-scriptstest-bin-")
		if binErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+string(os.PathSeparator), "./cmd/site", "./cmd/websim", "./cmd/wanproxy")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func needTools(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a federation crawl end to end (-short)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the scripts read /proc and use setsid: Linux only")
	}
	for _, tool := range []string{"bash", "go", "setsid", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
}

// freePorts returns the first of three consecutive loopback ports that are
// free now, below the kernel's ephemeral range (package loopport), so that
// no other test's socket takes one before the script binds it.
func freePorts(t *testing.T) int {
	t.Helper()
	base, err := loopport.Free(3)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// script is one run of scripts/federation.sh.
type script struct {
	cmd *exec.Cmd
	dir string // its --dir: every process it starts names it
	mu  sync.Mutex
	out bytes.Buffer
	// lines receives each line of its output as it comes.
	lines chan string
	done  chan struct{} // closed when its output has ended
	// exited is closed when it has exited, with its exit code in code.
	exited chan struct{}
	code   int
}

func startFederation(t *testing.T, args ...string) *script {
	t.Helper()
	root := repoRoot(t)
	bin := binaries(t, root)
	s := &script{dir: t.TempDir(), lines: make(chan string, 1024), done: make(chan struct{}), exited: make(chan struct{})}
	args = append([]string{filepath.Join(root, "scripts", "federation.sh"), "--dir", s.dir,
		"--port", strconv.Itoa(freePorts(t))}, args...)
	s.cmd = exec.Command("bash", args...)
	s.cmd.Dir = root
	s.cmd.Env = append(os.Environ(), "MERIDIAN_BIN="+bin)
	// Its own process group, so that a test that gives up can stop the
	// script and what it runs in the foreground.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A process that kept the output open must not hold the test up.
	s.cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = pw, pw
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			select {
			case s.lines <- sc.Text():
			default:
			}
		}
		close(s.done)
	}()
	go func() {
		s.cmd.Wait()
		s.code = s.cmd.ProcessState.ExitCode()
		close(s.exited)
		pw.Close()
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		}
		<-s.exited
		<-s.done
		killLeftovers(t, s.dir)
	})
	return s
}

func (s *script) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// wait waits up to limit for the script to end and returns its exit code;
// past the limit it stops the script (SIGTERM, then SIGKILL) and fails the
// test.
func (s *script) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(limit):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
		t.Fatalf("scripts/federation.sh did not end within %v; output:\n%s", limit, s.output())
	}
	<-s.exited
	return s.code
}

// leftovers lists the processes whose command line names dir, and those of
// pids that still run.
func leftovers(dir string, pids []int) []string {
	var out []string
	seen := map[int]bool{}
	check := func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(b) == 0 {
			return // gone, or a zombie
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
				return
			}
		}
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		if strings.Contains(cmdline, dir) {
			out = append(out, fmt.Sprintf("pid %d: %s", pid, cmdline))
		}
	}
	for _, pid := range pids {
		check(pid)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			check(pid)
		}
	}
	return out
}

// killLeftovers kills, by process id, what a failed run left behind: the
// processes whose command line names the run's own directory.
func killLeftovers(t *testing.T, dir string) {
	for _, l := range leftovers(dir, nil) {
		var pid int
		fmt.Sscanf(l, "pid %d:", &pid)
		if pid > 0 {
			t.Logf("killing a leftover process: %s", l)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// printedPIDs are the process ids the script announced ("pid N").
func printedPIDs(out string) []int {
	var pids []int
	for _, m := range regexp.MustCompile(`\bpid (\d+)\b`).FindAllStringSubmatch(out, -1) {
		if n, err := strconv.Atoi(m[1]); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// noLeftovers fails the test if anything the script started still runs,
// allowing a moment for the last exits to be reaped.
func noLeftovers(t *testing.T, s *script) {
	t.Helper()
	pids := printedPIDs(s.output())
	if len(pids) < 6 {
		t.Errorf("the script announced %d process ids, want websim, wan.sh, wanproxy and three sites: %v", len(pids), pids)
	}
	var left []string
	for range 20 {
		if left = leftovers(s.dir, pids); len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("processes left running after the script ended:\n%s", strings.Join(left, "\n"))
}

// TestFederationScript runs scripts/federation.sh on a tiny web with 10 ms
// between the sites: it must end by itself, exit 0, report pages for every
// site, bytes through the WAN proxies and each site's fetch latency (the
// script runs with distance by default), and leave nothing running.
func TestFederationScript(t *testing.T) {
	needTools(t)
	start := time.Now()
	s := startFederation(t, "--hosts", "30", "--pages", "5", "--ips", "8", "--delay", "10ms", "--jitter", "1ms",
		"--every", "3s", "--timeout", "80s")
	code := s.wait(t, 90*time.Second)
	out := s.output()
	t.Logf("scripts/federation.sh ended in %v with status %d; output:\n%s", time.Since(start).Round(time.Millisecond), code, out)
	if code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	for _, want := range []string{"WAN mode: PROXY", "every site exited 0 by itself", "== summary"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^\s+\d+s \| .* pg `).MatchString(out) {
		t.Errorf("no progress line in the output")
	}
	summary := out[strings.Index(out, "== summary"):]
	for _, site := range []string{"eu", "us", "asia"} {
		m := regexp.MustCompile(`(?m)^\s+` + site + `\s+(\d+)\s+(\d+)\s+(\d+)\s`).FindStringSubmatch(summary)
		if m == nil {
			t.Errorf("the summary has no line for site %s", site)
			continue
		}
		if pages, _ := strconv.Atoi(m[1]); pages == 0 {
			t.Errorf("site %s: 0 pages in the summary", site)
		}
		if warcs, _ := strconv.Atoi(m[3]); warcs == 0 {
			t.Errorf("site %s: no WARC file in the summary", site)
		}
		// Distance is on by default: websim made every fetch wait at
		// least the model's least round trip (2 × its 3 ms base).
		lat := regexp.MustCompile(`(?m)^\s+` + site + `\s.*\s(\d+) \((\d+)\)$`).FindStringSubmatch(summary)
		if lat == nil {
			t.Errorf("site %s: no fetch latency in the summary", site)
			continue
		}
		mean, _ := strconv.Atoi(lat[1])
		p95, _ := strconv.Atoi(lat[2])
		if mean < 6 || p95 < mean {
			t.Errorf("site %s: fetch latency %d ms (p95 %d ms): want at least the model's 6 ms, p95 at least the mean", site, mean, p95)
		}
	}
	m := regexp.MustCompile(`bytes that crossed between the sites[^:]*: (\d+)`).FindStringSubmatch(summary)
	if m == nil {
		t.Errorf("the summary does not say how many bytes crossed between the sites")
	} else if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("no bytes crossed between the sites")
	}
	noLeftovers(t, s)
}

// TestFederationScriptInterrupt sends SIGINT (Ctrl-C) to the script while
// the sites crawl: it stops the sites, websim and the WAN within bounded
// time, exits 130 and leaves nothing running.
func TestFederationScriptInterrupt(t *testing.T) {
	needTools(t)
	s := startFederation(t, "--hosts", "60", "--pages", "10", "--ips", "8", "--delay", "10ms", "--every", "1s")
	deadline := time.After(60 * time.Second)
	for crawling := false; !crawling; {
		select {
		case line := <-s.lines:
			crawling = strings.Contains(line, " pg ")
		case <-s.done:
			t.Fatalf("the script ended before it was interrupted; output:\n%s", s.output())
		case <-deadline:
			t.Fatalf("no progress line within 60 s; output:\n%s", s.output())
		}
	}
	sent := time.Now()
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	code := s.wait(t, 45*time.Second)
	out := s.output()
	t.Logf("stopped %v after SIGINT, status %d; output:\n%s", time.Since(sent).Round(time.Millisecond), code, out)
	if code != 130 {
		t.Errorf("exit status %d after SIGINT, want 130", code)
	}
	if !strings.Contains(out, "== stopped") {
		t.Errorf("the output does not say that everything stopped")
	}
	noLeftovers(t, s)
}

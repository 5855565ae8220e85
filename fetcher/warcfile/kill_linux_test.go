//go:build linux

package warcfile

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// killChildEnv names the directory a re-executed test binary writes to.
const killChildEnv = "WARCFILE_KILL_CHILD_DIR"

// killExchange is exchange i of the kill test.
func killExchange(i int) *Exchange {
	body := bytes.Repeat(fmt.Appendf(nil, "<p>page %d of the kill test</p>\n", i), 20+i%50)
	x := exchange(fmt.Sprintf("http://www.k%d.test/p/%d.html?b=%d&a=1", i%9, i, i), body, i)
	switch i % 4 {
	case 1:
		notModified(x)
	case 2:
		x.Revisit = RevisitIdenticalPayload
	}
	return x
}

// killChild writes killExchange(0), killExchange(1), ... (and a metadata
// record after every third) with an index into small files, printing i on
// stdout after exchange i (and its metadata) was written. It stops by
// itself after 10 s or 100,000 exchanges.
func killChild(dir string) int {
	w, err := Open(Options{Dir: dir, Prefix: "kill", MaxSize: 48 << 10, Index: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 100_000 && time.Now().Before(deadline); i++ {
		x := killExchange(i)
		if err := w.Write(x); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if i%3 == 0 {
			if err := w.Metadata(x.URL, x.Date, [][2]string{{"simhash", fmt.Sprintf("%016x", i)}}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
		}
		if _, err := fmt.Fprintln(os.Stdout, i); err != nil {
			return 2
		}
	}
	return 0
}

// TestIndexSurvivesSIGKILL kills a writing process (SIGKILL) mid-write, at
// a different point each round, then Opens its directory: every file must
// read back, hold every exchange the child reported, and have an index
// whose every line points at its record and that misses none.
func TestIndexSurvivesSIGKILL(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for round, after := range []int{40, 150, 333} {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("round%d", round))
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill once the child has reported `after` exchanges; it keeps
		// writing meanwhile, so the kill lands mid-write.
		reached := make(chan struct{})
		reported := make(chan int, 1)
		go func() {
			br := bufio.NewReader(out)
			last := -1
			for {
				s, err := br.ReadString('\n')
				if err != nil {
					break
				}
				n, perr := strconv.Atoi(s[:len(s)-1])
				if perr != nil || n != last+1 {
					t.Errorf("child printed %q after %d", s, last)
					break
				}
				last = n
				if n == after {
					close(reached)
				}
			}
			_, _ = io.Copy(io.Discard, out)
			reported <- last
		}()
		select {
		case <-reached:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-reported
			_ = cmd.Wait()
			t.Fatalf("child did not write %d exchanges; stderr: %s", after, stderr.String())
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		last := <-reported
		_ = cmd.Wait()
		if last < after {
			t.Fatalf("child reported %d", last)
		}

		opens, _ := filepath.Glob(filepath.Join(dir, "*.open"))
		w := openWriter(t, Options{Dir: dir, Prefix: "kill", Index: true})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, files := readDir(t, dir, "kill")
		for i := 0; i <= last; i++ {
			checkExchange(t, got, killExchange(i))
		}
		lines := checkIndex(t, dir)
		t.Logf("round %d: killed after exchange %d; %d open files at the kill (%v); %d files, %d exchanges, %d index lines after Open",
			round, last, len(opens), opens, len(files), len(got), lines)
		if len(got) < last+1 {
			t.Fatalf("%d exchanges after recovery, child reported %d", len(got), last+1)
		}
	}
}

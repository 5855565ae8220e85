//go:build linux

package segment

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// killChildEnv names the file a re-executed test binary appends to.
const killChildEnv = "SEGMENT_KILL_CHILD_PATH"

func TestMain(m *testing.M) {
	if path := os.Getenv(killChildEnv); path != "" {
		os.Exit(killChild(path))
	}
	os.Exit(m.Run())
}

// killChild appends testRecord(0), testRecord(1), ... to path in a tight
// loop, printing each index on stdout after Append (or the AppendBatch
// holding it) returned. It stops by itself after 10 s or 2M records.
func killChild(path string) int {
	w, err := Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	deadline := time.Now().Add(10 * time.Second)
	var line []byte
	for i := 0; i < 2_000_000 && time.Now().Before(deadline); {
		first := i
		if i%10 == 9 {
			err = w.AppendBatch([][]byte{testRecord(i), testRecord(i + 1), testRecord(i + 2)})
			i += 3
		} else {
			err = w.Append(testRecord(i))
			i++
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		line = line[:0]
		for j := first; j < i; j++ {
			line = strconv.AppendInt(line, int64(j), 10)
			line = append(line, '\n')
		}
		if _, err := os.Stdout.Write(line); err != nil {
			return 2
		}
	}
	return 0
}

// TestSurvivesSIGKILL kills a writer process in the middle of its append
// loop: the file must read back cleanly, hold every record the child
// reported, and accept appends after OpenAppend.
func TestSurvivesSIGKILL(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("seg%d", round))
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), killChildEnv+"="+path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Read reported indexes until the pipe closes; only complete lines count.
		reported := make(chan int, 1)
		started := make(chan struct{})
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
				if last == -1 {
					close(started)
				}
				last = n
			}
			_, _ = io.Copy(io.Discard, out)
			reported <- last
		}()
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("child did not start appending; stderr: %s", stderr.String())
		}
		time.Sleep(time.Duration(50+round*75) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		last := <-reported
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.Exited() {
			t.Fatalf("child was not killed: %v; stderr: %s", err, stderr.String())
		}

		got, tail, err := readAll(t, path)
		if err != nil {
			t.Fatalf("round %d: read after kill: %v", round, err)
		}
		n := len(got)
		for i, rec := range got {
			if !bytes.Equal(rec, testRecord(i)) {
				t.Fatalf("round %d: record %d is %d bytes starting %x", round, i, len(rec), rec[:min(8, len(rec))])
			}
		}
		if n <= last {
			t.Fatalf("round %d: file holds %d records, child reported record %d appended", round, n, last)
		}
		t.Logf("round %d: child reported %d records, file holds %d, torn tail %d bytes", round, last+1, n, tail)

		w, dropped, err := OpenAppend(path)
		if err != nil {
			t.Fatal(err)
		}
		if dropped != tail {
			t.Fatalf("OpenAppend dropped %d bytes, Read ignored %d", dropped, tail)
		}
		if err := w.Append(testRecord(n)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, tail, err = readAll(t, path)
		if err != nil || tail != 0 || len(got) != n+1 || !bytes.Equal(got[n], testRecord(n)) {
			t.Fatalf("after reopen: %d records, tail %d, err %v; want %d, 0, nil", len(got), tail, err, n+1)
		}
	}
}

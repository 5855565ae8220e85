package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func run(args ...string) (string, error) {
	var out bytes.Buffer
	root := newRoot(&out, &out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestBadInput(t *testing.T) {
	l, err := net.Listen("tcp", "127.77.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.warc")
	os.WriteFile(garbage, []byte("WARC/1.1\r\nnonsense\r\n\r\n"), 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"serve", "--bogus"}, "unknown flag: --bogus"},
		{"not a number", []string{"serve", "--hosts", "many"}, "invalid argument \"many\" for \"--hosts\""},
		{"negative hosts", []string{"serve", "--hosts", "-3", "--port", "0"}, "hosts must be in [1,"},
		{"bad profile", []string{"serve", "--profile", "nasty"}, "unknown profile \"nasty\""},
		{"bad port", []string{"serve", "--port", "70000"}, "--port must be in [0, 65535]"},
		{"bad ip base", []string{"serve", "--ip-base", "10.0.0.1", "--port", "0"}, "127.0.0.0/8"},
		{"bad log level", []string{"serve", "--log-level", "loud"}, "--log-level"},
		{"port in use", []string{"serve", "--port", busy, "--ips", "1", "--hosts", "3"}, "address already in use"},
		{"bad dns addr", []string{"serve", "--port", "0", "--dns", "nowhere"}, "dns address \"nowhere\""},
		{"replay without files", []string{"replay"}, "at least one file"},
		{"unreadable warc", []string{"replay", "--warc", filepath.Join(dir, "missing.warc.gz")}, "missing.warc.gz"},
		{"garbage warc", []string{"replay", "--warc", garbage, "--port", "0"}, "garbage.warc"},
		{"unknown command", []string{"crawl"}, "unknown command \"crawl\""},
		{"time scale not a number", []string{"serve", "--changes", "--time-scale", "fast"}, "invalid argument \"fast\" for \"--time-scale\""},
		{"negative time scale", []string{"serve", "--changes", "--time-scale", "-86400"}, "--time-scale must be a positive number of simulated seconds per second, at most 1e+08, got -86400"},
		{"zero time scale", []string{"serve", "--changes", "--time-scale", "0"}, "--time-scale must be a positive number"},
		{"NaN time scale", []string{"serve", "--changes", "--time-scale", "NaN"}, "got NaN"},
		{"huge time scale", []string{"serve", "--changes", "--time-scale", "1e9"}, "at most 1e+08, got 1e+09"},
		{"time scale without changes", []string{"serve", "--time-scale", "86400"}, "--time-scale and --epoch need --changes"},
		{"bad epoch", []string{"serve", "--changes", "--epoch", "2026-13-01"}, "--epoch: want an RFC 3339 time"},
		{"epoch without changes", []string{"serve", "--epoch", "2027-01-01T00:00:00Z"}, "need --changes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(c.args...)
			if err == nil {
				t.Fatalf("%v: no error (output %q)", c.args, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: error %q lacks %q", c.args, err, c.want)
			}
		})
	}
}

// TestBinary builds websim and runs it as an operator would: a bad flag
// exits non-zero with a message; serve answers and stops on SIGTERM.
func TestBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "websim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "serve", "--hosts", "0x").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.HasPrefix(string(out), "websim: invalid argument") {
		t.Fatalf("bad flag: %v, output %q", err, out)
	}

	ready := filepath.Join(dir, "ready")
	var stdout bytes.Buffer
	cmd := exec.Command(bin, "serve", "--hosts", "5", "--pages", "3", "--port", "0", "--ips", "2",
		"--dns", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--ready-file", ready, "--truth", filepath.Join(dir, "t.jsonl"))
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var info string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			info = string(b)
			break
		}
	}
	var port int
	var dns, admin string
	if _, err := fmt.Sscanf(info, "ready port=%d dns=%s admin=%s", &port, &dns, &admin); err != nil {
		t.Fatalf("ready file %q: %v\n%s", info, err, stdout.String())
	}
	resp, err := http.Get("http://" + admin + "/_websim/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(b), fmt.Sprintf("ok port=%d", port)) {
		t.Fatalf("health: %q", b)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "websim: stopping") {
		t.Fatalf("output: %s", stdout.String())
	}
}

// TestClientsFlag checks that --clients refuses a bad file naming the file
// and the line, for serve and replay, and that a good one reaches the stats.
func TestClientsFlag(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad-clients.txt")
	os.WriteFile(bad, []byte("# test clients\n127.0.2.1 Frankfurt\n127.0.2.2 Frankfort\n"), 0o644)
	dup := filepath.Join(dir, "dup-clients.txt")
	os.WriteFile(dup, []byte("127.0.2.1 Frankfurt\n127.0.2.1 50 8\n"), 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown city", []string{"serve", "--port", "0", "--clients", bad}, "--clients: " + bad + ":3: geodelay: unknown city \"Frankfort\""},
		{"duplicate", []string{"serve", "--port", "0", "--clients", dup}, dup + ":2: geodelay: duplicate address 127.0.2.1 (first on line 1)"},
		{"missing file", []string{"serve", "--port", "0", "--clients", filepath.Join(dir, "none.txt")}, "none.txt"},
		{"replay", []string{"replay", "--warc", "x.warc", "--clients", bad}, bad + ":3:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: error %v, want %q (output %q)", c.args, err, c.want, out)
			}
		})
	}

	good := filepath.Join(dir, "clients.txt")
	os.WriteFile(good, []byte("127.0.2.1 Frankfurt\n127.0.2.2 39.04 -77.49 Ashburn # us-east-1\n127.0.2.3 singapore\n"), 0o644)
	ready := filepath.Join(dir, "ready")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	root := newRoot(&out, io.Discard)
	root.SetArgs([]string{"serve", "--hosts", "3", "--pages", "2", "--ips", "1", "--port", "0", "--dns", "",
		"--admin", "127.0.0.1:0", "--progress", "0", "--ready-file", ready, "--clients", good})
	errc := make(chan error, 1)
	go func() { errc <- root.ExecuteContext(ctx) }()
	var admin string
	for deadline := time.Now().Add(10 * time.Second); admin == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil {
			if i := strings.Index(string(b), "admin="); i >= 0 {
				admin = strings.TrimSpace(string(b)[i+len("admin="):])
			}
		}
	}
	if admin == "" {
		cancel()
		t.Fatalf("not ready: %v", <-errc)
	}
	resp, err := http.Get("http://" + admin + "/_websim/stats")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "websim: 3 named clients from "+good+" pay for distance") {
		t.Errorf("output: %s", out.String())
	}
	for _, want := range []string{`"127.0.2.2": {`, `"name": "Ashburn"`, `"name": "Singapore"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("stats lack %s:\n%s", want, b)
		}
	}
}

// TestChangesFlags serves a changing web at a simulated day per second and
// reads back, over HTTP, validators on a page and a simulated clock that
// runs at that pace.
func TestChangesFlags(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	truth := filepath.Join(dir, "truth.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	root := newRoot(&out, io.Discard)
	root.SetArgs([]string{"serve", "--hosts", "20", "--pages", "5", "--ips", "1", "--port", "0", "--dns", "",
		"--admin", "127.0.0.1:0", "--progress", "0", "--ready-file", ready, "--truth", truth,
		"--changes", "--time-scale", "86400", "--epoch", "2027-06-01T00:00:00Z"})
	errc := make(chan error, 1)
	go func() { errc <- root.ExecuteContext(ctx) }()
	var port int
	var admin string
	for deadline := time.Now().Add(10 * time.Second); admin == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil {
			fmt.Sscanf(string(b), "ready port=%d dns= admin=%s", &port, &admin)
		}
	}
	if admin == "" {
		cancel()
		t.Fatalf("not ready: %v", <-errc)
	}
	stats := func() (snap struct {
		SimTime string `json:"sim_time"`
	}) {
		resp, err := http.Get("http://" + admin + "/_websim/stats")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
			t.Fatal(err)
		}
		return snap
	}
	s1 := stats()
	time.Sleep(300 * time.Millisecond)
	s2 := stats()
	t1, err1 := time.Parse(time.RFC3339Nano, s1.SimTime)
	t2, err2 := time.Parse(time.RFC3339Nano, s2.SimTime)
	if err1 != nil || err2 != nil || t1.Before(time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)) || t2.Sub(t1) < 6*time.Hour {
		t.Errorf("simulated times %q then %q 300 ms later, want ≥ 7.2 h apart from 2027-06-01", s1.SimTime, s2.SimTime)
	}
	// The front page of host 0 (the truth's first record is its
	// robots.txt) through its address, as a crawler would.
	tb, err := os.ReadFile(truth)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tb), `"change_rate":`) {
		t.Error("the truth of a changing web has no change_rate")
	}
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.77.0.1:%d/", port), nil)
	var first struct{ Host string }
	json.Unmarshal([]byte(strings.SplitN(string(tb), "\n", 2)[0]), &first)
	req.Host = first.Host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("ETag") == "" || resp.Header.Get("Last-Modified") == "" {
		t.Errorf("front page of %s: %d, ETag %q, Last-Modified %q", first.Host, resp.StatusCode, resp.Header.Get("ETag"), resp.Header.Get("Last-Modified"))
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "simulated clock from 2027-06-01T00:00:00Z at 86400× (a simulated day every 1s)") {
		t.Errorf("output: %s", out.String())
	}
}

// syncBuffer is a bytes.Buffer safe to write from the command's goroutine
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// asMainEnv makes the test binary run as wanproxy itself, so that the
// script's tests need no separate build.
const asMainEnv = "WANPROXY_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// startEcho serves a line echo on loopback until the test ends: each line
// received is sent back.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// echoRoundTrip sends a line to addr over a new connection and returns the
// time until the line came back.
func echoRoundTrip(t *testing.T, addr string) time.Duration {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	rtt := time.Since(start)
	if err != nil || line != "ping\n" {
		t.Fatalf("echo through %s: %q, %v", addr, line, err)
	}
	return rtt
}

// waitForFile waits up to 10 s for path to exist and returns its content.
func waitForFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err == nil && len(data) > 0 {
			return string(data)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// field returns the second word of the first line of text whose first word
// is kind, and the third.
func field(text, kind string) (string, string) {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == kind {
			return f[1], f[2]
		}
		if len(f) == 2 && f[0] == kind {
			return f[1], ""
		}
	}
	return "", ""
}

// runCmd runs wanproxy's command with args until cancel is called, and
// returns its output once it has returned.
func runCmd(t *testing.T, args ...string) (cancel func() (string, error)) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var out strings.Builder
	cmd := newRoot(ctx, &out, &out)
	cmd.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- cmd.Execute() }()
	var once sync.Once
	var err error
	cancel = func() (string, error) {
		once.Do(func() {
			stop()
			err = <-done
		})
		return out.String(), err
	}
	t.Cleanup(func() { _, _ = cancel() })
	return cancel
}

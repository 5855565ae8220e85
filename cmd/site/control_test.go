package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/rounds/control"
)

func TestParseUntil(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{"", time.Time{}, false},
		{"forever", time.Time{}, false},
		{"2h", now.Add(2 * time.Hour), false},
		{"2026-12-01T08:00:00Z", time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), false},
		{"-5m", time.Time{}, true},
		{"tomorrow", time.Time{}, true},
	} {
		got, err := parseUntil(c.in, now)
		if (err != nil) != c.bad || !c.bad && !got.Equal(c.want) {
			t.Errorf("parseUntil(%q) = %v, %v", c.in, got, err)
		}
	}
}

// TestControlCommands runs the real `site up` and steers it with the
// operator's commands: each prints the controls it made, inject reports
// its bad lines by file and line, and changes that cannot be made are
// refused with a message before the site is asked.
func TestControlCommands(t *testing.T) {
	data := t.TempDir()
	done := make(chan error, 1)
	go func() {
		root := newRoot(io.Discard, io.Discard, upSite)
		root.SetArgs([]string{"up", "--data", data, "--listen", "127.0.0.1:0", "--websim", "clean", "--websim-hosts", "4",
			"--websim-pages", "30", "--host-delay", "50ms", "--progress", "0", "--log-level", "warn"})
		done <- root.Execute()
	}()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := newRoot(&out, io.Discard, upSite)
		root.SetArgs(append(args, "--data", data))
		err := root.Execute()
		return out.String(), err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := run("status"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the site did not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	controls := func(out string, err error) control.Controls {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var c control.Controls
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			t.Fatalf("not the controls: %v\n%s", err, out)
		}
		return c
	}
	out, err := run("pause")
	if err != nil || !controls(out, err).Paused {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	out, err = run("limits", "--width", "7", "--per-host", "2", "--pld-budget", "40")
	if c := controls(out, err); err != nil || c.Width != 7 || c.PerHost != 2 || c.HostBudget != 0 || c.PLDBudget != 40 {
		t.Fatalf("limits: %v\n%s", err, out)
	}
	out, err = run("host", "h0.zz.test", "--block", "10m")
	if c := controls(out, err); err != nil || !c.Blocked("h0.zz.test", time.Now()) || c.Blocked("h0.zz.test", time.Now().Add(11*time.Minute)) {
		t.Fatalf("host --block 10m: %v\n%s", err, out)
	}
	out, err = run("host", "H0.zz.test", "--unblock", "--delay", "80ms")
	if c := controls(out, err); err != nil || c.Blocked("h0.zz.test", time.Now()) || c.Delay("h0.zz.test") != 80*time.Millisecond {
		t.Fatalf("host --unblock --delay: %v\n%s", err, out)
	}
	seeds := filepath.Join(t.TempDir(), "more.txt")
	os.WriteFile(seeds, []byte("http://h0.zz.test/injected\nnot a url\n"), 0o644)
	out, err = run("inject", seeds)
	// The URL is new to its shard: added by the shard that took the
	// inject, or sent to its own (a site of shards).
	if err != nil || !strings.Contains(out, seeds+":2: ") ||
		!strings.Contains(out, "injected: 1 new, 0 known, 0 sent to their owner, 1 bad lines") && !strings.Contains(out, "injected: 0 new, 0 known, 1 sent to their owner, 1 bad lines") {
		t.Fatalf("inject: %v\n%s", err, out)
	}
	for _, bad := range [][]string{
		{"host", "h0.zz.test"},
		{"host", "h0.zz.test", "--block", "soon"},
		{"limits", "--width", "-1"},
		{"limits", "--pld-budget", "-1"},
		{"host", "http://h0.zz.test/", "--unblock"},
	} {
		if out, err := run(bad...); err == nil {
			t.Errorf("%v: accepted\n%s", bad, out)
		}
	}
	out, err = run("limits")
	if c := controls(out, err); err != nil || c.Version != 4 || !c.Paused {
		t.Fatalf("limits (print): %v\n%s", err, out)
	}
	sum, err := run("status")
	if err != nil || !strings.Contains(sum, "controls  PAUSED") || !strings.Contains(sum, "width 7") || !strings.Contains(sum, "pld budget 40") {
		t.Errorf("status: %v\n%s", err, sum)
	}
	if out, err = run("resume"); err != nil || controls(out, err).Paused {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("up: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the resumed crawl did not end")
	}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestProc starts a child that prints two lines and waits: its tail keeps
// the end of its output, stop ends it (SIGTERM) and a second stop finds it
// ended; a child that exits by itself ends waitUntil with errExited and
// its exit code.
func TestProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs sh")
	}
	ctx := context.Background()
	p, err := startProc("sh", []string{"-c", "echo hello; echo crawl exhausted; exec sleep 30"}, nil, 16, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.waitUntil(ctx, 10*time.Second, 5*time.Millisecond, func() bool { return p.said(exhaustedLine) }); err != nil {
		t.Fatalf("waiting for the child's output: %v (tail %q)", err, p.tail)
	}
	if p.exited() {
		t.Fatal("exited before stop")
	}
	p.stop()
	p.stop()
	if !p.exited() {
		t.Fatal("not exited after stop")
	}
	if exit, code, _ := p.ended(); exit != "signal: terminated" || code != -1 {
		t.Errorf("ended %q, code %d; want signal: terminated, -1", exit, code)
	}
	if got := p.tail.String(); got != exhaustedLine {
		t.Errorf("tail %q, want the last 16 bytes trimmed: %q", got, exhaustedLine)
	}

	q, err := startProc("sh", []string{"-c", "echo bye; exit 3"}, nil, procLogTail, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.waitUntil(ctx, 10*time.Second, 5*time.Millisecond, func() bool { return false }); !errors.Is(err, errExited) {
		t.Fatalf("waitUntil = %v, want errExited", err)
	}
	if _, code, _ := q.ended(); code != 3 || q.err == nil || q.tail.String() != "bye" {
		t.Errorf("exit code %d, err %v, tail %q; want 3, an error, bye", code, q.err, q.tail)
	}
	q.stop()
}

// fakeRun is a run for crawl: its processes exit once exitAfter samples
// have passed since stop (or since the start, with exitAfter < 0 and no
// stop: never), and sample returns endAt's ending from that sample on.
type fakeRun struct {
	samples, stops, stoppedAt int
	exitAfter                 int
	endAt                     int
	ending                    string
	logs                      []string
}

func (f *fakeRun) loop(deadline time.Time) crawlLoop {
	return crawlLoop{every: time.Millisecond, deadline: deadline, what: "the fakes",
		log:  func(format string, args ...any) { f.logs = append(f.logs, fmt.Sprintf(format, args...)) },
		done: func() bool { return f.stops > 0 && f.samples-f.stoppedAt >= f.exitAfter },
		stop: func() {
			if f.stops == 0 {
				f.stoppedAt = f.samples
			}
			f.stops++
		},
		sample: func(time.Time) string {
			f.samples++
			if f.endAt > 0 && f.samples >= f.endAt {
				return f.ending
			}
			return ""
		},
		progress: func(time.Time) bool { return true }}
}

// TestCrawlLoop drives crawl with fake runs: an ending from sample stops
// the run once however often it is returned, and crawl samples on until
// the processes have exited; the deadline cuts a run, with its progress
// line; ctx's end stops the run and waits for exit.
func TestCrawlLoop(t *testing.T) {
	far := time.Now().Add(time.Hour)
	f := &fakeRun{exitAfter: 3, endAt: 2, ending: "stalled"}
	ending, err := crawl(context.Background(), f.loop(far))
	if err != nil || ending != "stalled" || f.stops != 1 || f.samples != f.stoppedAt+3 {
		t.Errorf("stalled run: ending %q, err %v, %d stops, %d samples (stopped at %d); want stalled, nil, 1 stop, 3 samples after it",
			ending, err, f.stops, f.samples, f.stoppedAt)
	}

	f = &fakeRun{exitAfter: 0}
	ending, err = crawl(context.Background(), f.loop(time.Now().Add(20*time.Millisecond)))
	if err != nil || ending != "cut" || f.stops != 1 || len(f.logs) != 1 || f.logs[0] != "timeout: stopping the fakes" {
		t.Errorf("cut run: ending %q, err %v, %d stops, logs %q; want cut, nil, 1 stop, the timeout line", ending, err, f.stops, f.logs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	f = &fakeRun{exitAfter: 0}
	exit := make(chan struct{})
	l := f.loop(far)
	l.done, l.exit = nil, exit
	l.stop = func() {
		f.stops++
		go close(exit) // owner: this test; crawl waits for it
	}
	cancel()
	ending, err = crawl(ctx, l)
	if !errors.Is(err, context.Canceled) || ending != "" || f.stops != 1 {
		t.Errorf("cancelled run: ending %q, err %v, %d stops; want \"\", context.Canceled, 1 stop", ending, err, f.stops)
	}
	select {
	case <-exit:
	default:
		t.Error("crawl returned before exit was closed")
	}
}

// TestCrawlExit checks how a crawl's Exit is named, and the error of an
// ending.
func TestCrawlExit(t *testing.T) {
	for _, tc := range []struct {
		ending       string
		exhausted    bool
		rounds, done int
		want         string
		wantErr      error
	}{
		{"cut", true, 3, 3, "cut", ErrCrawlCut},
		{"stalled", false, 0, 0, "stalled", ErrCrawlStalled},
		{"steady", false, 0, 0, "steady", nil},
		{"", true, 3, 3, "exhausted", nil},
		{"", false, 3, 3, "rounds", nil},
		{"", false, 3, 2, "exited", nil},
		{"", false, 0, 5, "exited", nil},
	} {
		if got := crawlExit(tc.ending, tc.exhausted, tc.rounds, tc.done); got != tc.want {
			t.Errorf("crawlExit(%q, %v, %d, %d) = %q, want %q", tc.ending, tc.exhausted, tc.rounds, tc.done, got, tc.want)
		}
		if err := endingErr(tc.ending); err != tc.wantErr {
			t.Errorf("endingErr(%q) = %v, want %v", tc.ending, err, tc.wantErr)
		}
	}
}

package fetcher

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

func TestNextLimit(t *testing.T) {
	const target = 100 * time.Millisecond
	cases := []struct {
		name           string
		limit, workers int
		lat            time.Duration
		want           int
	}{
		{"slow: a quarter fewer", 64, 64, 2 * target, 48},
		{"slow, small: one fewer", 3, 64, 2 * target, 2},
		{"slow: never below two", 2, 64, time.Second, 2},
		{"slow, one worker: one", 1, 1, time.Second, 1},
		{"between: unchanged", 10, 64, target * 3 / 4, 10},
		{"at target: unchanged", 10, 64, target, 10},
		{"quick: one more", 10, 64, target / 4, 11},
		{"quick: never above workers", 64, 64, 0, 64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := nextLimit(c.limit, c.workers, c.lat, target); got != c.want {
				t.Errorf("nextLimit(%d, %d, %v) = %d, want %d", c.limit, c.workers, c.lat, got, c.want)
			}
		})
	}
}

// TestSchedLatency: the quantile of the scheduler's waits moves with the
// process's load: goroutines that spin on every P make a goroutine that
// wakes every millisecond wait, and the latency read after them is above
// the one read while idle.
func TestSchedLatency(t *testing.T) {
	sl := newSchedLatency()
	wakeFor := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
	}
	wakeFor(200 * time.Millisecond)
	idle, n := sl.quantile(admitQuantile)
	if n == 0 {
		t.Fatal("no scheduling waits counted over 200 ms of sleeps")
	}
	var stop atomic.Bool
	for range 4 * runtime.GOMAXPROCS(0) {
		go func() { // owner: this test; ends at stop
			for !stop.Load() {
				for i := 0; i < 1_000_000 && !stop.Load(); i++ {
				}
			}
		}()
	}
	wakeFor(500 * time.Millisecond)
	busy, _ := sl.quantile(admitQuantile)
	stop.Store(true)
	if busy <= idle {
		t.Errorf("p99 scheduling latency %v under 4 spinners per P, %v idle: want it higher", busy, idle)
	}
	t.Logf("p99 scheduling latency: idle %v, busy %v", idle, busy)
}

// TestAdmissionLimits: with a latency target no scheduler can meet, the
// fetcher comes down to admitMin requests out at once and still answers
// every job; without a target the limit stays at Workers and more go out
// at once.
func TestAdmissionLimits(t *testing.T) {
	w := startWeb(t, synth.Options{Hosts: 30, Pages: 4, IPs: 30, Seed: 5, Profile: synth.Realistic}, websim.Limits{})
	jobs := jobsOf(w, func(r *synth.Record) bool { return r.Status != 0 && r.Kind != "robots" })
	for _, tc := range []struct {
		name      string
		target    time.Duration
		wantLimit int64
	}{{"target", time.Nanosecond, admitMin}, {"none", 0, 32}} {
		t.Run(tc.name, func(t *testing.T) {
			var results atomic.Int64
			f, err := New(Options{
				Workers: 32, HostDelay: time.Millisecond, MaxCrawlDelay: time.Millisecond, AdmitLatency: tc.target,
				AllowPrivate: true, Resolver: w.res, HostIdleTTL: 100 * time.Millisecond,
				OnResult: func(r *Result) {
					if r.Kind == KindPage {
						results.Add(1)
					}
				},
				Logger: testLogger(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			runErr := make(chan error, 1)
			go func() { runErr <- f.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-runErr; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			if tc.target > 0 {
				waitHo(t, 20*time.Second, "the admission limit to come down", func() bool { return f.Stats().AdmitLimit == admitMin })
			}
			f.Submit(jobs)
			var most int64
			for deadline := time.Now().Add(30 * time.Second); results.Load() < int64(len(jobs)) || !f.Idle(); time.Sleep(200 * time.Microsecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d jobs answered after 30 s: %+v", results.Load(), len(jobs), f.Stats())
				}
				most = max(most, f.Stats().InFlight)
			}
			st := f.Stats()
			if st.AdmitLimit != tc.wantLimit {
				t.Errorf("admission limit %d, want %d", st.AdmitLimit, tc.wantLimit)
			}
			if tc.target > 0 && most > admitMin {
				t.Errorf("%d requests out at once under a limit of %d", most, admitMin)
			}
			if tc.target == 0 && most <= admitMin {
				t.Errorf("at most %d requests out at once without a limit: the test cannot tell a limit from none", most)
			}
			t.Logf("%d jobs, at most %d out at once, limit %d", len(jobs), most, st.AdmitLimit)
		})
	}
}

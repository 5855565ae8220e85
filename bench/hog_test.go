package bench

import (
	"context"
	"testing"
	"time"
)

// TestHog: the busy loops burn CPU while they run and are gone after stop.
func TestHog(t *testing.T) {
	h, err := startHog(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	r := h.stop()
	if r.Threads != 1 || r.Seconds < 0.3 {
		t.Errorf("hog result %+v: want 1 loop that ran at least 0.3 s", r)
	}
	if r.CPUS < 0.05 || r.Cores <= 0 {
		t.Errorf("hog used %.3f s of CPU (%.2f cores) in %.2f s: want a busy loop", r.CPUS, r.Cores, r.Seconds)
	}
	for _, c := range h.cmds {
		if c.ProcessState == nil { // Wait never returned
			t.Errorf("loop %d not reaped", c.Process.Pid)
		}
	}
}

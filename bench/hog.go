package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// HogResult is what the CPU hog beside a crawl used (SiteConfig.Hog).
type HogResult struct {
	Threads int     `json:"threads"`
	Seconds float64 `json:"seconds"` // from the hog's start to its stop
	CPUS    float64 `json:"cpu_s"`   // CPU time of all its busy loops
	Cores   float64 `json:"cores"`   // CPUS / Seconds
}

// hog is a set of busy-loop processes that keep the machine's CPU saturated
// while a crawl runs: an overloaded box, where the site should slow down
// instead of giving pages up or fetching them twice. Each loop is a shell
// spinning on the builtin ':', so it does nothing but burn CPU; all are
// killed by stop or when ctx ends (RunSite's ctx carries its timeout).
type hog struct {
	cmds  []*exec.Cmd
	start time.Time
}

// startHog starts n busy loops.
func startHog(ctx context.Context, n int) (*hog, error) {
	h := &hog{start: time.Now()}
	for range n {
		cmd := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			h.stop()
			return nil, fmt.Errorf("bench: start the CPU hog: %w", err)
		}
		h.cmds = append(h.cmds, cmd)
	}
	return h, nil
}

// stop kills the loops and reports their CPU time.
func (h *hog) stop() HogResult {
	r := HogResult{Threads: len(h.cmds), Seconds: time.Since(h.start).Seconds()}
	for _, c := range h.cmds {
		_ = c.Process.Kill()
	}
	for _, c := range h.cmds {
		var ee *exec.ExitError
		if err := c.Wait(); err != nil && !errors.As(err, &ee) {
			continue
		}
		if ps := c.ProcessState; ps != nil {
			r.CPUS += (ps.UserTime() + ps.SystemTime()).Seconds()
		}
	}
	if r.Seconds > 0 {
		r.Cores = r.CPUS / r.Seconds
	}
	return r
}

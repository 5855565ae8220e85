//go:build linux

package links

import "syscall"

// threadCPU returns the CPU time the calling thread has used, in
// nanoseconds (RUSAGE_THREAD), or 0 if it cannot be read. Benchmarks lock
// their goroutine to a thread and report it beside the wall time, which
// on a shared machine counts the time the thread waited for a core.
func threadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

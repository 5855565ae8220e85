package site

import (
	"syscall"
	"time"
)

// threadCPU is the CPU time of the calling OS thread (the caller locks its
// goroutine to the thread around what it measures).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

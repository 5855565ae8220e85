//go:build unix

package warcfile

import (
	"os"
	"syscall"
)

// lockFile takes the advisory lock that marks f as being written.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// tryLockFile takes f's lock if no one holds it (the lock goes with f.Close).
func tryLockFile(f *os.File) error { return lockFile(f) }

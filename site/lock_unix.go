//go:build unix

package site

import (
	"os"
	"syscall"
)

// lockFile takes the advisory lock that keeps a second node off a data
// directory (released when f is closed, or the process dies).
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

//go:build !unix

package warcfile

import "os"

// lockFile is a no-op where flock is unavailable: Open then repairs every
// leftover file, so only one Writer may use a Dir and Prefix at a time.
func lockFile(*os.File) error { return nil }

func tryLockFile(*os.File) error { return nil }

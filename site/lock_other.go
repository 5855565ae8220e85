//go:build !unix

package site

import "os"

// lockFile takes no lock where flock is unavailable: nothing then keeps a
// second node off a data directory, and the operator must.
func lockFile(*os.File) error { return nil }

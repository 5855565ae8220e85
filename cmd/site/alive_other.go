//go:build !unix

package main

import "os"

// alive reports whether process pid can still be found: where a process
// cannot be sent signal 0, as close as os offers.
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}

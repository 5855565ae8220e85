//go:build unix

package main

import "syscall"

// alive reports whether process pid still exists (signal 0).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

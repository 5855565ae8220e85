//go:build !linux

package links

// threadCPU is not available here: 0.
func threadCPU() int64 { return 0 }

// Package loopport finds free loopback TCP ports for tests that must
// name a port before another process (or a later call) binds it: a site's
// federation endpoint written into a federation file, a script's base
// port. It picks them below the kernel's ephemeral range, which ":0" and
// every outgoing connection draw from, so that no other test's socket can
// take the port between the check and the bind.
package loopport

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
)

// lowest is the lowest port Free hands out.
const lowest = 10000

// next walks the ports from a point of each process's own, so that two
// test processes rarely try the same ones.
var next atomic.Int64

func init() { next.Store(int64(os.Getpid()) * 97) }

// Free returns the first of n consecutive loopback ports that are free
// now, all below the ephemeral range.
func Free(n int) (int, error) {
	top := EphemeralLow()
	if n < 1 || top-lowest < n {
		return 0, fmt.Errorf("loopport: no run of %d ports between %d and %d", n, lowest, top)
	}
	for range 2000 {
		base := lowest + int(next.Add(int64(n)))%(top-lowest-n+1)
		if free(base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("loopport: no %d free consecutive ports between %d and %d", n, lowest, top)
}

// Addr returns a free loopback address (127.0.0.1:PORT) below the
// ephemeral range.
func Addr() (string, error) {
	p, err := Free(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// free reports whether ports base … base+n-1 can all be listened on now.
func free(base, n int) bool {
	for i := range n {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
		if err != nil {
			return false
		}
		ln.Close()
	}
	return true
}

// EphemeralLow is the lowest port of the kernel's ephemeral range (Linux:
// /proc/sys/net/ipv4/ip_local_port_range), or 32768 (the Linux default)
// where it cannot be read or leaves too little room below it.
func EphemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if k, _ := fmt.Sscan(string(b), &lo, &hi); k != 2 || lo < lowest+1000 {
		return 32768
	}
	return lo
}

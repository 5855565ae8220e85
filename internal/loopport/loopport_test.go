package loopport

import (
	"net"
	"strconv"
	"testing"
)

// TestFree: the ports are free, consecutive and below the ephemeral
// range, and a port in use is not handed out.
func TestFree(t *testing.T) {
	low := EphemeralLow()
	for _, n := range []int{1, 3} {
		base, err := Free(n)
		if err != nil {
			t.Fatal(err)
		}
		if base < lowest || base+n > low {
			t.Errorf("Free(%d) = %d: want %d ≤ ports < %d", n, base, lowest, low)
		}
		for i := range n {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				t.Fatalf("Free(%d) = %d, but port %d is not free: %v", n, base, base+i, err)
			}
			ln.Close()
		}
	}
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	held, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("Addr() = %s, not free: %v", a, err)
	}
	defer held.Close()
	_, p, _ := net.SplitHostPort(a)
	port, _ := strconv.Atoi(p)
	if free(port, 1) {
		t.Errorf("port %d, listened on, is reported free", port)
	}
	if _, err := Free(0); err == nil {
		t.Error("Free(0) gave a port")
	}
}

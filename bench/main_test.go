package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every process
// the harness starts is stopped and reaped, every in-process server
// closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

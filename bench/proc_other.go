//go:build !linux

package bench

import (
	"errors"
	"os"
	"os/exec"
	"time"
)

var errNoCPU = errors.New("bench: CPU times are only measured on Linux")

func selfCPU() (time.Duration, error) { return 0, errNoCPU }

func procCPU(int) (time.Duration, error) { return 0, errNoCPU }

func setChildAttrs(*exec.Cmd) {}

func maxRSS(*os.ProcessState) int64 { return 0 }

// pidAlive reports true: without cgroups there are no leftovers to sweep.
func pidAlive(int) bool { return true }

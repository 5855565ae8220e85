package websim

import (
	"math"
	"time"
)

// MaxTimeScale is the largest Options.TimeScale: about three simulated
// years per wall-clock second.
const MaxTimeScale = 1e8

// Clock is websim's simulated clock: Epoch + (wall − Start) × Scale, and
// never before Epoch. A web with synth.Options.Changes serves every page
// at its version at the clock's time. Clocks are values; the zero Clock
// is not valid.
type Clock struct {
	// Epoch is the simulated time when serving began (synth.Options.Epoch).
	Epoch time.Time
	// Start is the wall-clock time when serving began.
	Start time.Time
	// Scale is the simulated time that passes per unit of wall-clock time
	// (Options.TimeScale): 86400 is a simulated day per second.
	Scale float64
}

// At returns the simulated time at wall-clock time wall. It saturates at
// Epoch plus the largest time.Duration (about 292 years).
func (c Clock) At(wall time.Time) time.Time {
	d := float64(wall.Sub(c.Start)) * c.Scale
	switch {
	case !(d > 0): // also NaN
		return c.Epoch
	case d >= math.MaxInt64:
		return c.Epoch.Add(math.MaxInt64)
	}
	return c.Epoch.Add(time.Duration(d))
}

// Wall returns the wall-clock time at which the clock reads sim, the
// inverse of At (Start for times at or before Epoch).
func (c Clock) Wall(sim time.Time) time.Time {
	d := float64(sim.Sub(c.Epoch)) / c.Scale
	if !(d > 0) {
		return c.Start
	}
	return c.Start.Add(time.Duration(min(d, math.MaxInt64)))
}

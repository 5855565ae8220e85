// Package termwave tells when a crawl spread over participants that send
// each other URLs has ended (the sites of a federation, the shards of a
// site), by Mattern's four-counter method: a wave reads every
// participant's state, and the crawl has ended when two consecutive waves
// find every participant passive, every batch one sent another received,
// and the same counters in both, each state read anew between them (a
// batch sent and received between two readings changes a counter).
//
// It holds no goroutine, no lock and no I/O: its users read the states (a
// federation's probes, the shards' records in a site's meta group) and
// hand them in.
package termwave

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// State is one participant's state as a wave read it.
type State struct {
	// Passive: it has nothing to do and nothing waiting to be sent.
	Passive bool
	// Sent and Recv count, per other participant, the batches it sent
	// there (delivered, or on their way) and the batches it applied from
	// there. A batch sent that its receiver has not applied keeps the wave
	// from being quiet.
	Sent, Recv map[string]uint64
	// Counters are the participant's other counts that must not change
	// between the two waves (totals over participants the wave does not
	// name, for instance).
	Counters map[string]uint64
}

// Wave is one reading of every participant's state.
type Wave struct {
	// Quiet: every participant passive, every batch sent received.
	Quiet bool
	// Key holds every counter, in one order, to compare two waves.
	Key string
	// Seqs is, per source of the states (a node that writes records of
	// them), the number of its record the wave read; nil where every
	// reading is new (a probe's answer).
	Seqs map[string]uint64
}

// Read sums up the states of every participant into a wave; seqs (nil for
// probes) numbers the records they were read from (Wave.Seqs).
func Read(states map[string]State, seqs map[string]uint64) Wave {
	w := Wave{Quiet: true, Seqs: seqs}
	var key strings.Builder
	names := slices.Sorted(maps.Keys(states))
	for _, a := range names {
		sa := states[a]
		if !sa.Passive {
			w.Quiet = false
		}
		fmt.Fprintf(&key, "%s{", a)
		for _, b := range names {
			if a == b {
				continue
			}
			sent, recv := sa.Sent[b], states[b].Recv[a]
			if sent != recv {
				w.Quiet = false
			}
			if sent != 0 || recv != 0 {
				fmt.Fprintf(&key, ">%s=%d/%d,", b, sent, recv)
			}
		}
		for _, c := range slices.Sorted(maps.Keys(sa.Counters)) {
			fmt.Fprintf(&key, "%s=%d,", c, sa.Counters[c])
		}
		key.WriteString("};")
	}
	w.Key = key.String()
	return w
}

// fresher reports whether every source's record in w is newer than the
// one p read from it (a source new in w, or gone from it, is fresh).
func (p Wave) fresher(w Wave) bool {
	for n, q := range w.Seqs {
		if ps, ok := p.Seqs[n]; ok && q <= ps {
			return false
		}
	}
	return true
}

// Detector keeps the last wave and tells when two consecutive waves show
// the crawl's end. Its zero value is ready; it is not safe for concurrent
// use (one coordinator runs the waves).
type Detector struct {
	last *Wave
}

// Observe records w and reports whether it and the wave before it show
// the end: both quiet, the same counters, and w's states read anew.
func (d *Detector) Observe(w Wave) bool {
	prev := d.last
	d.last = &w
	return prev != nil && prev.Quiet && w.Quiet && prev.Key == w.Key && prev.fresher(w)
}

// Reset forgets the last wave: the coordinator could not read every
// participant, or handed its role on, and the next wave starts anew.
func (d *Detector) Reset() { d.last = nil }

// Last returns the last wave observed, if any.
func (d *Detector) Last() (Wave, bool) {
	if d.last == nil {
		return Wave{}, false
	}
	return *d.last, true
}

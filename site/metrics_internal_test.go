package site

import (
	"testing"

	"github.com/meridian-crawler/meridian/rounds"
)

// TestMetricsSignals: the rounds' noindex, canonical and trap figures add
// up in their counters, the trap links by rule, both rules exported from
// the start.
func TestMetricsSignals(t *testing.T) {
	m := newMetrics()
	// gather returns the counters of the registry by name and rule label.
	gather := func() map[string]float64 {
		t.Helper()
		fams, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range fams {
			for _, mt := range f.GetMetric() {
				name := f.GetName()
				for _, l := range mt.GetLabel() {
					if l.GetName() == "rule" {
						name += "/" + l.GetValue()
					}
				}
				if c := mt.GetCounter(); c != nil {
					out[name] = c.GetValue()
				}
			}
		}
		return out
	}
	before := gather()
	for _, k := range []string{"meridian_trap_links_total/repetition", "meridian_trap_links_total/calendar", "meridian_noindex_total", "meridian_canonical_total"} {
		if v, ok := before[k]; !ok || v != 0 {
			t.Errorf("%s before any round: %v (exported %v), want 0", k, v, ok)
		}
	}
	m.round(rounds.RoundStats{Round: 1, NoIndex: 2, Canonical: 1, Traps: rounds.TrapStats{Repetition: 5}})
	m.round(rounds.RoundStats{Round: 2, NoIndex: 3, Traps: rounds.TrapStats{Repetition: 1, Calendar: 4}})
	got := gather()
	for k, want := range map[string]float64{"meridian_noindex_total": 5, "meridian_canonical_total": 1,
		"meridian_trap_links_total/repetition": 6, "meridian_trap_links_total/calendar": 4} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

package termwave

import "testing"

func passive(sent, recv map[string]uint64) State {
	return State{Passive: true, Sent: sent, Recv: recv}
}

// TestRead: a wave is quiet only when every participant is passive and
// every batch sent was received; its key changes with any counter.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		states map[string]State
		quiet  bool
	}{
		{"none", map[string]State{}, true},
		{"one passive", map[string]State{"a": passive(nil, nil)}, true},
		{"one active", map[string]State{"a": {}}, false},
		{"balanced", map[string]State{
			"a": passive(map[string]uint64{"b": 3}, map[string]uint64{"b": 2}),
			"b": passive(map[string]uint64{"a": 2}, map[string]uint64{"a": 3}),
		}, true},
		{"a batch in flight", map[string]State{
			"a": passive(map[string]uint64{"b": 4}, map[string]uint64{"b": 2}),
			"b": passive(map[string]uint64{"a": 2}, map[string]uint64{"a": 3}),
		}, false},
		{"a receiver ahead of the sender's report", map[string]State{
			"a": passive(map[string]uint64{"b": 3}, nil),
			"b": passive(nil, map[string]uint64{"a": 4}),
		}, false},
		{"one of two active", map[string]State{
			"a": passive(nil, nil),
			"b": {Passive: false},
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if w := Read(tc.states, nil); w.Quiet != tc.quiet {
				t.Errorf("Read(%v).Quiet = %v, want %v (key %q)", tc.states, w.Quiet, tc.quiet, w.Key)
			}
		})
	}
	base := map[string]State{
		"a": {Passive: true, Sent: map[string]uint64{"b": 1}, Counters: map[string]uint64{"acked": 5}},
		"b": {Passive: true, Recv: map[string]uint64{"a": 1}},
	}
	k := Read(base, nil).Key
	if again := Read(base, nil).Key; again != k {
		t.Errorf("the same states gave keys %q and %q", k, again)
	}
	changed := map[string]State{
		"a": {Passive: true, Sent: map[string]uint64{"b": 1}, Counters: map[string]uint64{"acked": 6}},
		"b": base["b"],
	}
	if Read(changed, nil).Key == k {
		t.Errorf("a counter moved and the key %q stayed", k)
	}
	moved := map[string]State{
		"a": {Passive: true, Sent: map[string]uint64{"b": 2}, Counters: map[string]uint64{"acked": 5}},
		"b": {Passive: true, Recv: map[string]uint64{"a": 2}},
	}
	if Read(moved, nil).Key == k {
		t.Errorf("a batch sent and received between the waves left the key %q as it was", k)
	}
}

// TestDetector: the end takes two consecutive quiet waves with the same
// counters, the second read from newer records; a reset or any change
// starts the count again.
func TestDetector(t *testing.T) {
	quiet := func(key string, seqs map[string]uint64) Wave { return Wave{Quiet: true, Key: key, Seqs: seqs} }
	for _, tc := range []struct {
		name  string
		waves []Wave // nil: Reset
		want  []bool
	}{
		{"one quiet wave", []Wave{quiet("k", nil)}, []bool{false}},
		{"two quiet waves", []Wave{quiet("k", nil), quiet("k", nil)}, []bool{false, true}},
		{"counters moved", []Wave{quiet("k", nil), quiet("k2", nil), quiet("k2", nil)}, []bool{false, false, true}},
		{"an active wave between", []Wave{quiet("k", nil), {Key: "k"}, quiet("k", nil)}, []bool{false, false, false}},
		{"reset between", []Wave{quiet("k", nil), {}, quiet("k", nil)}, []bool{false, false, false}},
		{"a record not written anew", []Wave{quiet("k", map[string]uint64{"n1": 4, "n2": 7}), quiet("k", map[string]uint64{"n1": 5, "n2": 7})}, []bool{false, false}},
		{"every record anew", []Wave{quiet("k", map[string]uint64{"n1": 4, "n2": 7}), quiet("k", map[string]uint64{"n1": 5, "n2": 8})}, []bool{false, true}},
		{"a source new in the second wave", []Wave{quiet("k", map[string]uint64{"n1": 4}), quiet("k", map[string]uint64{"n1": 5, "n2": 1})}, []bool{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d Detector
			for i, w := range tc.waves {
				if w.Key == "" && !w.Quiet {
					d.Reset()
					if _, ok := d.Last(); ok {
						t.Fatalf("wave %d: a wave is left after Reset", i)
					}
					continue
				}
				if got := d.Observe(w); got != tc.want[i] {
					t.Errorf("wave %d: Observe = %v, want %v", i, got, tc.want[i])
				}
				if last, ok := d.Last(); !ok || last.Key != w.Key {
					t.Errorf("wave %d: Last = %+v, %v; want the wave observed", i, last, ok)
				}
			}
		})
	}
}

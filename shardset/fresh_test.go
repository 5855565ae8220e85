package shardset

import (
	"log/slog"
	"testing"
	"time"
)

// TestFresh: a node counts as fresh for a leadership transfer only while
// its state record keeps changing: within transferFresh of the last
// change this node saw (exactly at it included), never before its first
// record, and again at once when it writes a new one (a restarted node's
// sequence starts over: any change counts).
func TestFresh(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	type obs struct {
		at  time.Duration // after t0
		seq uint64
	}
	for _, tc := range []struct {
		name  string
		seen  []obs
		check time.Duration // after t0
		want  bool
	}{
		{"first seen just now", []obs{{0, 7}}, 0, true},
		{"writing every half second", []obs{{0, 1}, {500 * time.Millisecond, 2}, {time.Second, 3}}, 1500 * time.Millisecond, true},
		{"silent exactly transferFresh", []obs{{0, 4}}, transferFresh, true},
		{"silent a nanosecond longer", []obs{{0, 4}}, transferFresh + 1, false},
		{"the same record seen again does not refresh", []obs{{0, 4}, {time.Second, 4}, {2 * time.Second, 4}}, 2*time.Second + 1, false},
		{"dead, then restarted: its sequence starts over", []obs{{0, 9}, {5 * time.Second, 1}}, 6 * time.Second, true},
		{"no record yet (starting)", []obs{{0, 0}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Set{heard: map[string]heard{}}
			var h heard
			for _, o := range tc.seen {
				h = s.observe("n3", o.seq, t0.Add(o.at))
			}
			now := t0.Add(tc.check)
			h = s.observe("n3", h.seq, now) // what fresh does: the record as it is now
			if got := freshAt(h, now); got != tc.want {
				t.Errorf("fresh after %v = %v, want %v (last change seen at %v)", tc.check, got, tc.want, h.at.Sub(t0))
			}
		})
	}
}

// TestPlacementNode: another node is alive while its state record keeps
// changing; silent for DeadAfter it is down (it keeps its replicas and
// leads none), silent for ReplaceAfter it is given up (its replicas go
// elsewhere); a new record brings it back at once; a node that has
// written no record yet gets six times as long; this node is alive
// whatever its record says.
func TestPlacementNode(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const dead, replace = 5 * time.Second, time.Minute
	type obs struct {
		at  time.Duration // after t0
		seq uint64
	}
	for _, tc := range []struct {
		name        string
		id          string
		seen        []obs
		check       time.Duration // after t0, the record as last seen
		alive, down bool
	}{
		{"writing", "n3", []obs{{0, 1}, {time.Second, 2}}, time.Second, true, false},
		{"silent DeadAfter exactly", "n3", []obs{{0, 4}}, dead, true, false},
		{"silent past DeadAfter: down, keeps its replicas", "n3", []obs{{0, 4}}, dead + 1, true, true},
		{"silent ReplaceAfter exactly: still down", "n3", []obs{{0, 4}}, replace, true, true},
		{"silent past ReplaceAfter: given up", "n3", []obs{{0, 4}}, replace + 1, false, true},
		{"back after a minute: alive at once", "n3", []obs{{0, 4}, {replace + time.Second, 1}}, replace + time.Second, true, false},
		{"no record yet: six times DeadAfter", "n3", []obs{{0, 0}}, 6 * dead, true, false},
		{"no record yet, past six times DeadAfter", "n3", []obs{{0, 0}}, 6*dead + 1, true, true},
		{"this node, silent", "n1", []obs{{0, 4}}, 10 * replace, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Set{self: "n1", heard: map[string]heard{}, log: slog.New(slog.DiscardHandler),
				o: Options{DeadAfter: dead, ReplaceAfter: replace}}
			var seq uint64
			for _, o := range tc.seen {
				s.observe(tc.id, o.seq, t0.Add(o.at))
				seq = o.seq
			}
			n := s.placementNode(tc.id, seq, t0.Add(tc.check), false)
			if n.ID != tc.id || n.Alive != tc.alive || n.Down != tc.down || n.Leaving {
				t.Errorf("after %v: %+v, want alive %v, down %v", tc.check, n, tc.alive, tc.down)
			}
		})
	}
}

package plan

import (
	"testing"
	"time"
)

// ---------------------------------------------------------------- Pause

// failTimeout is the fail timeout of the pause tests: the lease is half.
const failTimeout = 3 * time.Second

func TestLeaseLost(t *testing.T) {
	half := failTimeout / 2
	tests := []struct {
		name string
		now  time.Time
		want bool
	}{
		{"a report just taken", t0, false},
		{"a clock behind the last report", t0.Add(-time.Second), false},
		{"a nanosecond before half the fail timeout", t0.Add(half - 1), false},
		{"exactly half the fail timeout", t0.Add(half), false},
		{"a nanosecond past half", t0.Add(half + 1), true},
		{"past the fail timeout", t0.Add(failTimeout), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NodeState{LastOK: t0}
			if got := s.LeaseLost(tt.now, failTimeout); got != tt.want {
				t.Errorf("LeaseLost(t0%+v) = %v, want %v", tt.now.Sub(t0), got, tt.want)
			}
		})
	}
}

func TestShouldPause(t *testing.T) {
	lost := t0.Add(failTimeout/2 + time.Millisecond)
	tests := []struct {
		name string
		s    NodeState
		now  time.Time
		want bool
	}{
		{"running, lease lost", NodeState{LastOK: t0}, lost, true},
		{"running, within the lease", NodeState{LastOK: t0}, t0.Add(time.Second), false},
		{"running, exactly at half the fail timeout", NodeState{LastOK: t0}, t0.Add(failTimeout / 2), false},
		{"already paused", NodeState{Paused: true, LastOK: t0}, lost, false},
		{"a Solo node that does not lead, lease lost", NodeState{Solo: true, LastOK: t0}, lost, true},
		{"handing over, lease lost: paused by the rules too", NodeState{Handing: true, LastOK: t0}, lost, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.ShouldPause(tt.now, failTimeout); got != tt.want {
				t.Errorf("%+v.ShouldPause = %v, want %v", tt.s, got, tt.want)
			}
		})
	}
}

func TestMayResume(t *testing.T) {
	tests := []struct {
		name string
		s    NodeState
		want bool
	}{
		{"nothing holds it", NodeState{}, true},
		{"handing over", NodeState{Handing: true}, false},
		{"a Solo node that leads", NodeState{Solo: true, Leads: true}, true},
		{"a Solo node that does not lead", NodeState{Solo: true}, false},
		{"not Solo, not leading: any node fetches", NodeState{}, true},
		{"a Solo leader handing over", NodeState{Solo: true, Leads: true, Handing: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.MayResume(); got != tt.want {
				t.Errorf("%+v.MayResume = %v, want %v", tt.s, got, tt.want)
			}
		})
	}
}

func TestResume(t *testing.T) {
	// paused: a node paused, a leader's reply at index 10 taken at t0.
	paused := NodeState{Paused: true, LastOK: t0, ResumeAt: 10, Applied: 10}
	with := func(f func(*NodeState)) NodeState {
		s := paused
		f(&s)
		return s
	}
	within, lost := t0.Add(time.Second), t0.Add(failTimeout/2+1)
	tests := []struct {
		name string
		s    NodeState
		now  time.Time
		want ResumeVerdict
		// resumable is what the check right before the resume says.
		resumable bool
	}{
		{"replica at the leader's index", paused, within, Unpause, true},
		{"replica past the leader's index", with(func(s *NodeState) { s.Applied = 11 }), within, Unpause, true},
		{"replica one behind", with(func(s *NodeState) { s.Applied = 9 }), within, StayPaused, true},
		{"exactly at half the fail timeout", paused, t0.Add(failTimeout / 2), Unpause, true},
		{"the reply is older than the lease", paused, lost, ForgetReply, true},
		{"replica behind and the reply old: waits for the replica first", with(func(s *NodeState) { s.Applied = 9 }), lost, StayPaused, true},
		{"not paused", with(func(s *NodeState) { s.Paused = false }), within, StayPaused, false},
		{"no reply since the pause", with(func(s *NodeState) { s.ResumeAt = 0 }), within, StayPaused, false},
		{"handing over", with(func(s *NodeState) { s.Handing = true }), within, StayPaused, false},
		{"a Solo node that does not lead", with(func(s *NodeState) { s.Solo = true }), within, StayPaused, false},
		{"a Solo node that does not lead, reply old", with(func(s *NodeState) { s.Solo = true }), lost, StayPaused, false},
		{"a Solo node that leads", with(func(s *NodeState) { s.Solo, s.Leads = true, true }), within, Unpause, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Resume(tt.now, failTimeout); got != tt.want {
				t.Errorf("%+v.Resume(t0%+v) = %v, want %v", tt.s, tt.now.Sub(t0), got, tt.want)
			}
			if got := tt.s.Resumable(); got != tt.resumable {
				t.Errorf("%+v.Resumable() = %v, want %v", tt.s, got, tt.resumable)
			}
		})
	}
}

func TestHandOverEnd(t *testing.T) {
	tests := []struct {
		name        string
		transferred bool
		s           NodeState
		want        HandOverVerdict
	}{
		{"transferred", true, NodeState{Solo: true, Leads: false}, HoldPaused},
		{"transferred, and it still leads for now", true, NodeState{Solo: true, Leads: true}, HoldPaused},
		{"transferred, paused before", true, NodeState{Paused: true, ResumeAt: 7}, HoldPaused},
		{"failed, running before", false, NodeState{Solo: true, Leads: true}, Resumed},
		{"failed, the hand-over's own flag is not read", false, NodeState{Solo: true, Leads: true, Handing: true}, Resumed},
		{"failed, paused before", false, NodeState{Paused: true, Solo: true, Leads: true}, AsBefore},
		{"failed, paused before and no longer leading", false, NodeState{Paused: true, Solo: true}, AsBefore},
		{"failed, a Solo node that no longer leads", false, NodeState{Solo: true}, HoldPaused},
		{"failed, not Solo", false, NodeState{}, Resumed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HandOverEnd(tt.transferred, tt.s); got != tt.want {
				t.Errorf("HandOverEnd(%v, %+v) = %v, want %v", tt.transferred, tt.s, got, tt.want)
			}
		})
	}
}

// TestPauseVerdictNames: every verdict has its own name, and an unknown
// one says so.
func TestPauseVerdictNames(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range []ResumeVerdict{StayPaused, ForgetReply, Unpause} {
		seen[v.String()] = true
	}
	for _, v := range []HandOverVerdict{AsBefore, Resumed, HoldPaused} {
		seen[v.String()] = true
	}
	if len(seen) != 6 {
		t.Errorf("verdict names %v: want 6 distinct", seen)
	}
	if got := ResumeVerdict(99).String(); got != "resume verdict?" {
		t.Errorf("ResumeVerdict(99) = %q", got)
	}
	if got := HandOverVerdict(99).String(); got != "hand-over verdict?" {
		t.Errorf("HandOverVerdict(99) = %q", got)
	}
}

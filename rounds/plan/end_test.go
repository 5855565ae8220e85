package plan

import (
	"testing"
	"time"
)

func TestEnd(t *testing.T) {
	due := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		s    EndState
		want Verdict
		// what End may read: the caller reads BackingOff and FederationDone
		// only when these say so.
		needsBackoff, needsFed bool
	}{
		{"a round in flight", EndState{Active: 1, FrontierEmpty: true}, Go, false, false},
		{"a round in flight at the limit", EndState{Active: 2, LimitReached: true}, Go, false, false},
		{"limit reached, nothing in flight", EndState{LimitReached: true}, EndRounds, false, false},
		{"limit wins over an empty frontier", EndState{LimitReached: true, FrontierEmpty: true, BackingOff: true}, EndRounds, false, false},
		{"frontier may give more", EndState{}, Go, false, false},
		{"a look is scheduled", EndState{FrontierEmpty: true, Retrying: true}, Go, false, false},
		{"hosts backing off", EndState{FrontierEmpty: true, BackingOff: true}, Backoff, true, false},
		{"exhausted alone", EndState{FrontierEmpty: true}, EndExhausted, true, false},
		{"exhausted, federation on", EndState{FrontierEmpty: true, Federated: true}, Idle, true, true},
		{"exhausted, federation done", EndState{FrontierEmpty: true, Federated: true, FederationDone: true}, EndExhausted, true, true},
		{"backing off in a federation", EndState{FrontierEmpty: true, Federated: true, BackingOff: true, FederationDone: true}, Backoff, true, false},
		{"federation done but a round in flight", EndState{Active: 1, FrontierEmpty: true, Federated: true, FederationDone: true}, Go, false, false},
		{"pages scheduled for a refetch", EndState{FrontierEmpty: true, NextDue: due}, Waiting, true, false},
		{"refetches wait in a federation", EndState{FrontierEmpty: true, Federated: true, NextDue: due}, Waiting, true, false},
		{"backing off before a refetch", EndState{FrontierEmpty: true, BackingOff: true, NextDue: due}, Backoff, true, false},
		{"a refetch due but a round in flight", EndState{Active: 1, FrontierEmpty: true, NextDue: due}, Go, false, false},
		{"the limit ends a crawl that refetches", EndState{LimitReached: true, FrontierEmpty: true, NextDue: due}, EndRounds, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := End(tt.s); got != tt.want {
				t.Errorf("End(%+v) = %v, want %v", tt.s, got, tt.want)
			}
			if got := NeedsBackoff(tt.s); got != tt.needsBackoff {
				t.Errorf("NeedsBackoff(%+v) = %v, want %v", tt.s, got, tt.needsBackoff)
			}
			if got := NeedsFederation(tt.s); got != tt.needsFed {
				t.Errorf("NeedsFederation(%+v) = %v, want %v", tt.s, got, tt.needsFed)
			}
		})
	}
}

// TestEndReadsOnlyWhatItNeeds: End's verdict does not depend on
// BackingOff when NeedsBackoff is false, nor on FederationDone when
// NeedsFederation is false, so a caller that skips those reads decides
// the same.
func TestEndReadsOnlyWhatItNeeds(t *testing.T) {
	for mask := range 1 << 7 {
		s := EndState{
			Active: mask & 1, LimitReached: mask&2 != 0, FrontierEmpty: mask&4 != 0, Retrying: mask&8 != 0,
			BackingOff: mask&16 != 0, Federated: mask&32 != 0, FederationDone: mask&64 != 0,
		}
		if !NeedsBackoff(s) {
			o := s
			o.BackingOff = !s.BackingOff
			if End(o) != End(s) {
				t.Errorf("%+v: the verdict depends on BackingOff although NeedsBackoff is false", s)
			}
		}
		if !NeedsFederation(s) {
			o := s
			o.FederationDone = !s.FederationDone
			if End(o) != End(s) {
				t.Errorf("%+v: the verdict depends on FederationDone although NeedsFederation is false", s)
			}
		}
	}
}

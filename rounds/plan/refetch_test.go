package plan

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestRefetchWithDefaults(t *testing.T) {
	h := time.Hour
	for _, tc := range []struct {
		name    string
		in      Refetch
		want    Refetch
		errText bool
	}{
		{"off", Refetch{}, Refetch{}, false},
		{"fixed", Refetch{Interval: h}, Refetch{Interval: h}, false},
		{"adaptive, default bounds", Refetch{Interval: h, Adaptive: true}, Refetch{Interval: h, Adaptive: true, Min: time.Minute, Max: 365 * 24 * h}, false},
		{"adaptive, a short interval", Refetch{Interval: time.Second, Adaptive: true}, Refetch{Interval: time.Second, Adaptive: true, Min: time.Second, Max: 365 * 24 * h}, false},
		{"adaptive, bounds given", Refetch{Interval: h, Adaptive: true, Min: 10 * time.Minute, Max: 10 * h}, Refetch{Interval: h, Adaptive: true, Min: 10 * time.Minute, Max: 10 * h}, false},
		{"negative", Refetch{Interval: -h}, Refetch{}, true},
		{"adaptive without interval", Refetch{Adaptive: true}, Refetch{}, true},
		{"bounds without adaptive", Refetch{Interval: h, Min: time.Minute}, Refetch{}, true},
		{"interval below min", Refetch{Interval: time.Minute, Adaptive: true, Min: h}, Refetch{}, true},
		{"interval above max", Refetch{Interval: 2 * h, Adaptive: true, Max: h}, Refetch{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.WithDefaults()
			if tc.errText {
				if !errors.Is(err, ErrRefetch) {
					t.Fatalf("WithDefaults() error %v, want ErrRefetch", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("WithDefaults() = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestRefetchNext(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	h := time.Hour
	adaptive, err := Refetch{Interval: 10 * h, Adaptive: true, Min: 5 * h, Max: 20 * h}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		r        Refetch
		interval time.Duration
		change   Change
		want     time.Duration // the next interval; 0: never
	}{
		{"off", Refetch{}, h, Changed, 0},
		{"fixed, first", Refetch{Interval: 3 * h}, 0, FirstFetch, 3 * h},
		{"fixed, changed", Refetch{Interval: 3 * h}, 3 * h, Changed, 3 * h},
		{"fixed, unchanged", Refetch{Interval: 3 * h}, 3 * h, Unchanged, 3 * h},
		{"adaptive, first", adaptive, 0, FirstFetch, 10 * h},
		{"adaptive, changed", adaptive, 10 * h, Changed, 8 * h},
		{"adaptive, unchanged", adaptive, 10 * h, Unchanged, 14 * h},
		{"adaptive, changed at the floor", adaptive, 5 * h, Changed, 5 * h},
		{"adaptive, unchanged at the ceiling", adaptive, 18 * h, Unchanged, 20 * h},
		{"adaptive, a lost interval", adaptive, 0, Unchanged, 10 * h},
		{"adaptive, a huge interval", adaptive, time.Duration(math.MaxInt64), Unchanged, 20 * h},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, iv := tc.r.Next(at, tc.interval, tc.change)
			if iv != tc.want || tc.want == 0 && !next.IsZero() || tc.want > 0 && !next.Equal(at.Add(tc.want)) {
				t.Fatalf("Next(%v, %v) = %v, %v; want interval %v", tc.interval, tc.change, next, iv, tc.want)
			}
		})
	}
	// Unchanged again and again climbs to the ceiling and stays; changed
	// again and again falls to the floor and stays.
	iv := adaptive.Interval
	for range 20 {
		_, iv = adaptive.Next(at, iv, Unchanged)
	}
	if iv != adaptive.Max {
		t.Errorf("after 20 unchanged fetches the interval is %v, want the max %v", iv, adaptive.Max)
	}
	for range 20 {
		_, iv = adaptive.Next(at, iv, Changed)
	}
	if iv != adaptive.Min {
		t.Errorf("after 20 changed fetches the interval is %v, want the min %v", iv, adaptive.Min)
	}
}

func TestDueScore(t *testing.T) {
	next := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	h := time.Hour
	for _, tc := range []struct {
		name          string
		history, cash float64
		now           time.Time
		interval      time.Duration
		want          float64
	}{
		{"on time", 2, 1, next, h, 3},
		{"before its time", 2, 1, next.Add(-h), h, 3},
		{"one interval overdue", 2, 1, next.Add(h), h, 6},
		{"half an interval overdue", 2, 0, next.Add(h / 2), h, 3},
		{"no interval", 2, 1, next.Add(h), 0, 3},
		{"NaN", math.NaN(), 1, next, h, 0},
		{"infinite", math.Inf(1), 1, next, h, 0},
		{"negative", -5, 1, next, h, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DueScore(tc.history, tc.cash, next, tc.now, tc.interval); got != tc.want {
				t.Fatalf("DueScore = %v, want %v", got, tc.want)
			}
		})
	}
}

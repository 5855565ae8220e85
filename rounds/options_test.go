package rounds

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
)

// TestOptionsValidate: zero fields are valid (they take defaults); every
// negative count, size or duration, a damping outside [0, 1] and a
// missing DB or Dir are refused by name, all at once, with ErrBadOptions.
func TestOptionsValidate(t *testing.T) {
	ok := Options{DB: &crawldb.DB{}, Dir: "d"}
	tests := []struct {
		name string
		set  func(o *Options)
		want []string // "" → valid
	}{
		{"zero fields", func(o *Options) {}, nil},
		{"set fields", func(o *Options) {
			o.Width, o.PerHost, o.Damping, o.Revisits, o.HostDelay = 100, 2, 1, -1, time.Second
		}, nil},
		{"no DB, no Dir", func(o *Options) { o.DB, o.Dir = nil, "" }, []string{"no DB", "no Dir"}},
		{"negative width", func(o *Options) { o.Width = -1 }, []string{"Width -1"}},
		{"negative budgets", func(o *Options) { o.HostBudget, o.PLDBudget = -5, -6 }, []string{"HostBudget -5", "PLDBudget -6"}},
		{"negative memory", func(o *Options) { o.MemoryBudget, o.LinkMemory = -1, -2 }, []string{"MemoryBudget -1", "LinkMemory -2"}},
		{"negative durations", func(o *Options) { o.FailTimeout, o.StageEvery = -time.Second, -time.Millisecond },
			[]string{"FailTimeout -1s", "StageEvery -1ms"}},
		{"damping above 1", func(o *Options) { o.Damping = 1.5 }, []string{"Damping 1.5"}},
		{"damping negative", func(o *Options) { o.Damping = -0.1 }, []string{"Damping -0.1"}},
		{"damping NaN", func(o *Options) { o.Damping = math.NaN() }, []string{"Damping NaN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.set(&o)
			err := o.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrBadOptions) {
				t.Fatalf("Validate: %v, want ErrBadOptions", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %q, want it to name %q", err, w)
				}
			}
			if got := strings.Count(err.Error(), "rounds: bad options"); got != len(tt.want) {
				t.Errorf("Validate: %d errors in %q, want %d", got, err, len(tt.want))
			}
		})
	}
}

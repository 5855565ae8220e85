package shard

import (
	"fmt"
	"math"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// testKeys returns n politeness keys shaped like partition.Key's (host names
// and addresses).
func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		if i%3 == 0 {
			keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		} else {
			keys[i] = fmt.Sprintf("www.host-%d.example", i)
		}
	}
	return keys
}

// checkSpread fails if any of the shards holds more than 4.5 standard
// deviations of a uniform spread away from an even share of keys, or if the
// counts fail a chi-square test at p = 0.001.
func checkSpread(t *testing.T, name string, keys []string, shards int) {
	t.Helper()
	p := 1 / float64(shards)
	tol := 4.5 * math.Sqrt(float64(len(keys))*p*(1-p)) / (float64(len(keys)) * p)
	count := make([]int, shards)
	for _, k := range keys {
		s := Of(k, shards)
		if s < 0 || s >= shards {
			t.Fatalf("%s: Of(%q, %d) = %d, out of range", name, k, shards, s)
		}
		count[s]++
	}
	want := float64(len(keys)) / float64(shards)
	chi2, worst := 0.0, 0.0
	for _, c := range count {
		d := float64(c) - want
		chi2 += d * d / want
		worst = max(worst, math.Abs(d)/want)
	}
	// Wilson–Hilferty approximation of the chi-square quantile at p = 0.001.
	k := float64(shards - 1)
	crit := k * math.Pow(1-2/(9*k)+3.09*math.Sqrt(2/(9*k)), 3)
	t.Logf("%s: %d keys over %d shards: worst %.2f%% from even (limit %.2f%%), chi2 %.1f (p=0.001 limit %.1f)", name, len(keys), shards, 100*worst, 100*tol, chi2, crit)
	if worst > tol {
		t.Errorf("%s: a shard is %.2f%% from an even share, want at most %.2f%%", name, 100*worst, 100*tol)
	}
	if chi2 > crit {
		t.Errorf("%s: chi2 %.1f over %d shards exceeds %.1f: not uniform", name, chi2, shards, crit)
	}
}

// TestOfSpread: 100,000 keys spread within a few percent of even over 16
// (±5.5%) and 48 (±9.8%: 4.5 standard deviations of a uniform spread)
// shards, and so do the keys one site of a federation owns (a quarter
// of the xxhash space, as partition's ring gives a site arcs of it).
func TestOfSpread(t *testing.T) {
	keys := testKeys(100_000)
	var quarter []string
	for _, k := range keys {
		if xxhash.Sum64String(k)>>62 == 0 {
			quarter = append(quarter, k)
		}
	}
	cases := []struct {
		name   string
		keys   []string
		shards int
	}{
		{"all/16", keys, 16},
		{"all/48", keys, 48},
		{"all/7", keys, 7},
		{"quarter/16", quarter, 16},
		{"quarter/48", quarter, 48},
	}
	for _, c := range cases {
		checkSpread(t, c.name, c.keys, c.shards)
	}
}

// TestOfStability: going from n to n+1 shards, a key stays in its shard or
// moves to the new shard n, never elsewhere, and about 1/(n+1) of the keys
// move (within 5 standard deviations). One shard holds every key.
func TestOfStability(t *testing.T) {
	keys := testKeys(20_000)
	prev := make([]int, len(keys))
	for i, k := range keys {
		if got := Of(k, 1); got != 0 {
			t.Fatalf("Of(%q, 1) = %d", k, got)
		}
		prev[i] = 0
	}
	for n := 1; n < 100; n++ {
		moved := 0
		for i, k := range keys {
			s := Of(k, n+1)
			switch {
			case s == prev[i]:
			case s == n:
				moved++
			default:
				t.Fatalf("Of(%q): %d shards → %d, %d shards → %d: moved to an old shard", k, n, prev[i], n+1, s)
			}
			prev[i] = s
		}
		p := 1 / float64(n+1)
		want := p * float64(len(keys))
		sd := math.Sqrt(float64(len(keys)) * p * (1 - p))
		if math.Abs(float64(moved)-want) > 5*sd {
			t.Errorf("%d → %d shards moved %d keys, want %.0f ± %.0f", n, n+1, moved, want, 5*sd)
		}
	}
}

// TestOfBadCount: a shard count below 1 is a programming error, and says so.
func TestOfBadCount(t *testing.T) {
	for _, n := range []int{0, -1} {
		func() {
			defer func() {
				r := recover()
				if r == nil || fmt.Sprint(r) != fmt.Sprintf("shard: Of: shard count %d, want at least 1", n) {
					t.Errorf("Of(k, %d) panicked with %v", n, r)
				}
			}()
			Of("k", n)
		}()
	}
}

func BenchmarkOf(b *testing.B) {
	keys := testKeys(1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Of(keys[i&1023], DefaultShards)
	}
}

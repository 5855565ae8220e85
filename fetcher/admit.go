package fetcher

import (
	"context"
	"runtime/metrics"
	"time"
)

// Admission keeps a starved process responsive. A node whose fetch and
// parse work wants more CPU than it has (a small machine, or a CPU quota)
// lets every runnable goroutine wait its turn: with hundreds of workers
// parsing, the goroutines that answer Raft's heartbeats and leadership
// transfers wait seconds, leaders lose their lease and elections follow
// (bench cluster at 0.25 core a node). The fetcher therefore watches the
// Go scheduler's latency (runtime/metrics /sched/latencies:seconds: how
// long goroutines wait between becoming runnable and running) and lets
// fewer requests out at once while its AdmitQuantile over the last
// interval is above AdmitLatency, more again once it is well below. A
// CPU-bound node loses no throughput by it (its CPU stays busy); its
// other work gets the CPU sooner.

// admitInterval is how often the admission limit is revised.
const admitInterval = 250 * time.Millisecond

// admitQuantile is the share of the interval's scheduling waits that must
// be under AdmitLatency.
const admitQuantile = 0.99

// admitMin is the fewest requests let out at once.
const admitMin = 2

// schedLatency reads the scheduler's latency histogram.
type schedLatency struct {
	sample []metrics.Sample
	prev   []uint64
}

func newSchedLatency() *schedLatency {
	s := &schedLatency{sample: []metrics.Sample{{Name: "/sched/latencies:seconds"}}}
	s.quantile(admitQuantile) // the baseline
	return s
}

// quantile returns the q-quantile of the scheduling waits since the last
// call (the upper bound of its bucket), and how many waits there were.
func (s *schedLatency) quantile(q float64) (time.Duration, uint64) {
	metrics.Read(s.sample)
	if s.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0
	}
	h := s.sample[0].Value.Float64Histogram()
	if len(s.prev) != len(h.Counts) {
		s.prev = make([]uint64, len(h.Counts))
	}
	var total uint64
	for i, c := range h.Counts {
		total += c - s.prev[i]
	}
	var at time.Duration
	if total > 0 {
		want := uint64(q * float64(total))
		var n uint64
		for i, c := range h.Counts {
			n += c - s.prev[i]
			if n >= want {
				at = time.Duration(h.Buckets[i+1] * float64(time.Second))
				if h.Buckets[i+1] > 1e9 { // the +Inf bucket
					at = time.Duration(h.Buckets[i] * float64(time.Second))
				}
				break
			}
		}
	}
	copy(s.prev, h.Counts)
	return at, total
}

// nextLimit is the admission limit after an interval whose scheduling
// latency was lat: a quarter fewer while lat is above target, one more
// while it is under half of it, within [admitMin, workers].
func nextLimit(limit, workers int, lat, target time.Duration) int {
	switch {
	case lat > target:
		limit -= max(limit/4, 1)
	case lat < target/2:
		limit++
	}
	return min(max(limit, min(admitMin, workers)), workers)
}

// admit revises the admission limit every admitInterval until ctx is done.
func (f *Fetcher) admit(ctx context.Context) {
	sl := newSchedLatency()
	t := time.NewTicker(admitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lat, n := sl.quantile(admitQuantile)
		if n == 0 {
			continue
		}
		f.schedP99.Store(int64(lat))
		old := int(f.admitLimit.Load())
		next := nextLimit(old, f.o.Workers, lat, f.o.AdmitLatency)
		if next == old {
			continue
		}
		f.admitLimit.Store(int64(next))
		if next > old {
			select { // the scheduler may have work held back by the limit
			case f.wake <- struct{}{}:
			default:
			}
		}
	}
}

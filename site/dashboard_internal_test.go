package site

import (
	"maps"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/shardset"
)

// TestShardRates: a shard's pages/s is the results its crawl database
// recorded (URLs − frontier) between the oldest sample kept and the
// newest, over that span; samples older than the window are dropped but
// for the one at its start; a shard opened since has the span of its own
// samples; a count that went down (a replica made anew) gives 0, not a
// negative rate; a sample not after the last one is ignored.
func TestShardRates(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type smp struct {
		at     time.Duration // after t0
		shards []shardset.ShardStatus
	}
	st := func(sh int, urls, frontier uint64) shardset.ShardStatus {
		return shardset.ShardStatus{Shard: sh, URLs: urls, Frontier: frontier}
	}
	var long []smp
	for i := range 90 {
		long = append(long, smp{time.Duration(i) * time.Second, []shardset.ShardStatus{st(0, 1000, 1000-2*uint64(i))}})
	}
	tests := []struct {
		name    string
		samples []smp
		want    map[int]float64
		window  float64
		kept    int
	}{
		{"one sample", []smp{{0, []shardset.ShardStatus{st(0, 50, 40)}}}, map[int]float64{}, 0, 1},
		{"two samples", []smp{{0, []shardset.ShardStatus{st(0, 50, 40)}}, {2 * time.Second, []shardset.ShardStatus{st(0, 80, 40)}}},
			map[int]float64{0: 15}, 2, 2},
		{"a shard opened since", []smp{
			{0, []shardset.ShardStatus{st(0, 10, 10)}},
			{4 * time.Second, []shardset.ShardStatus{st(0, 30, 10), st(1, 5, 5)}},
			{5 * time.Second, []shardset.ShardStatus{st(0, 30, 5), st(1, 10, 5)}}},
			map[int]float64{0: 5, 1: 5}, 5, 3},
		{"a count that went down", []smp{{0, []shardset.ShardStatus{st(0, 100, 0)}}, {time.Second, []shardset.ShardStatus{st(0, 10, 5)}}},
			map[int]float64{0: 0}, 1, 2},
		{"a sample not after the last", []smp{
			{0, []shardset.ShardStatus{st(0, 10, 10)}},
			{time.Second, []shardset.ShardStatus{st(0, 20, 10)}},
			{time.Second, []shardset.ShardStatus{st(0, 90, 10)}}},
			map[int]float64{0: 10}, 1, 2},
		{"longer than the window", long, map[int]float64{0: 2}, shardWindow.Seconds(), int(shardWindow/time.Second) + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d dashState
			for _, s := range tt.samples {
				d.sampleShards(s.shards, t0.Add(s.at))
			}
			got, window := d.shardRates()
			if !maps.Equal(got, tt.want) || window != tt.window || len(d.shardHist) != tt.kept {
				t.Errorf("rates %v over %vs, %d samples kept; want %v over %vs, %d kept", got, window, len(d.shardHist), tt.want, tt.window, tt.kept)
			}
		})
	}
}

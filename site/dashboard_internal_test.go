package site

import (
	"maps"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/rounds"
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

// TestDashboardRefetchFigures: the refetch figures of the recent rounds
// are their counts summed, per second over the span from the first
// round's start to the last one's end (rounds that overlap, as a sharded
// node's shards' do, counted once in the span); the 304 share and the
// estimated freshness are shares of the refetches (0 without any); only
// the last dashRounds rounds count.
func TestDashboardRefetchFigures(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	rr := func(start, end time.Duration, refetches, notModified, unchanged int64) rounds.RoundStats {
		return rounds.RoundStats{Started: t0.Add(start), Ended: t0.Add(end), Refetches: refetches, NotModified: notModified,
			Unchanged: unchanged, Changed: refetches - notModified - unchanged}
	}
	var many []rounds.RoundStats
	for i := range dashRounds + 10 {
		r := rr(time.Duration(i)*time.Second, time.Duration(i+1)*time.Second, 10, 5, 3)
		if i < 10 {
			r.Refetches, r.NotModified, r.Unchanged, r.Changed = 1000, 0, 0, 1000 // dropped
		}
		many = append(many, r)
	}
	tests := []struct {
		name   string
		rounds []rounds.RoundStats
		want   RefetchFigures
	}{
		{"no round", nil, RefetchFigures{}},
		{"no refetch", []rounds.RoundStats{rr(0, 4*time.Second, 0, 0, 0)}, RefetchFigures{Rounds: 1, Window: 4}},
		{"one round", []rounds.RoundStats{rr(0, 4*time.Second, 20, 10, 5)},
			RefetchFigures{Rounds: 1, Window: 4, Refetches: 20, NotModified: 10, Unchanged: 5, Changed: 5, Rate: 5, NotModifiedShare: 0.5, Freshness: 0.75}},
		{"overlapping rounds", []rounds.RoundStats{rr(0, 4*time.Second, 20, 10, 5), rr(2*time.Second, 10*time.Second, 30, 0, 10), rr(time.Second, 3*time.Second, 0, 0, 0)},
			RefetchFigures{Rounds: 3, Window: 10, Refetches: 50, NotModified: 10, Unchanged: 15, Changed: 25, Rate: 5, NotModifiedShare: 0.2, Freshness: 0.5}},
		{"the last rounds only", many, RefetchFigures{Rounds: dashRounds, Window: dashRounds, Refetches: 10 * dashRounds, NotModified: 5 * dashRounds,
			Unchanged: 3 * dashRounds, Changed: 2 * dashRounds, Rate: 10, NotModifiedShare: 0.5, Freshness: 0.8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d dashState
			for _, r := range tt.rounds {
				d.round(-1, r)
			}
			if got := d.refetches(); got != tt.want {
				t.Errorf("figures %+v, want %+v", got, tt.want)
			}
		})
	}
}

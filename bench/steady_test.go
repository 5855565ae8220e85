package bench

import "testing"

func TestSettledShards(t *testing.T) {
	names := []string{"n1", "n2"}
	tests := []struct {
		name string
		raws []string
		want int
	}{
		{"led where placed", []string{
			`{"shards":[{"id":0,"leader":"n1","replicas":["n1"],"target":["n1"],"target_leader":"n1"}]}`,
			`{"shards":[{"id":1,"leader":"n2","replicas":["n2","n1"],"target":["n1","n2"],"target_leader":"n2"}]}`,
		}, 2},
		{"a step under way", []string{
			`{"shards":[{"id":0,"leader":"n1","replicas":["n1"],"target":["n1"],"target_leader":"n1","step":"add n2"}]}`,
			`{}`,
		}, 0},
		{"led by another than the placement's leader", []string{
			`{"shards":[{"id":0,"leader":"n1","replicas":["n1","n2"],"target":["n1","n2"],"target_leader":"n2"}]}`,
			`{}`,
		}, 0},
		{"replicas not the target's", []string{
			`{"shards":[{"id":0,"leader":"n1","replicas":["n1"],"target":["n2"],"target_leader":"n1"}]}`,
			`{}`,
		}, 0},
		{"a follower's entry does not count", []string{
			`{}`,
			`{"shards":[{"id":0,"leader":"n1","replicas":["n1","n2"],"target":["n1","n2"],"target_leader":"n1"}]}`,
		}, 0},
		{"one shard listed twice counts once; garbage ignored", []string{
			`{"shards":[{"id":3,"leader":"n1","replicas":["n1"],"target":["n1"],"target_leader":"n1"},{"id":3,"leader":"n1","replicas":["n1"],"target":["n1"],"target_leader":"n1"}]}`,
			`not json`,
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raws := make([][]byte, len(tt.raws))
			for i, r := range tt.raws {
				raws[i] = []byte(r)
			}
			if got := settledShards(names, raws); got != tt.want {
				t.Errorf("settledShards = %d, want %d", got, tt.want)
			}
		})
	}
}

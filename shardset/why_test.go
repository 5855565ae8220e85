package shardset

import (
	"testing"

	"github.com/meridian-crawler/meridian/shard"
)

// TestPlacementWhy: a new placement says which nodes made it differ from
// the one before.
func TestPlacementWhy(t *testing.T) {
	prev := shard.Placement{Shards: []shard.Shard{
		{Replicas: []string{"n1", "n2", "n3"}, Leader: "n1"},
		{Replicas: []string{"n1", "n2", "n3"}, Leader: "n2"},
	}}
	up := func(id string) shard.Node { return shard.Node{ID: id, Alive: true} }
	tests := []struct {
		name  string
		prev  shard.Placement
		nodes []shard.Node
		want  string
	}{
		{"first", shard.Placement{}, []shard.Node{up("n1")}, "the site created"},
		{"same nodes", prev, []shard.Node{up("n1"), up("n2"), up("n3")}, "rebalance"},
		{"two joined", prev, []shard.Node{up("n1"), up("n2"), up("n3"), up("n5"), up("n4")}, "n4, n5 joined"},
		{"silent, given up, leaving", prev, []shard.Node{up("n1"),
			{ID: "n2", Alive: true, Down: true}, {ID: "n3", Alive: false}, {ID: "n4", Alive: true, Leaving: true}},
			"n2 silent; n3 given up; n4 leaving"},
		{"joined and silent", prev, []shard.Node{up("n1"), up("n2"), {ID: "n3", Alive: true, Down: true}, up("n6")}, "n6 joined; n3 silent"},
	}
	for _, tt := range tests {
		if got := placementWhy(tt.prev, tt.nodes); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

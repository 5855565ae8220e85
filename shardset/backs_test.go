package shardset

import (
	"maps"
	"testing"

	"github.com/meridian-crawler/meridian/federation"
)

// TestHandBacks: the site's hand-back of a site is the merge of its
// shards' (pending while any shard's is; else every shard's last entry by
// sender), and while a wave missed some shard's state every site any
// shard has a record for is pending (the missing shard may hold its
// hosts); a node that does not run the waves gives none.
func TestHandBacks(t *testing.T) {
	done := func(sender string, seq uint64) federation.HandBack {
		return federation.HandBack{Senders: map[string]uint64{sender: seq}}
	}
	pending := federation.HandBack{Pending: true}
	tests := []struct {
		name   string
		shards []map[string]federation.HandBack
		all    bool
		want   map[string]federation.HandBack
	}{
		{"every shard done", []map[string]federation.HandBack{{"us": done("eu--s000", 4)}, {"us": done("eu--s001", 9)}, nil}, true,
			map[string]federation.HandBack{"us": {Senders: map[string]uint64{"eu--s000": 4, "eu--s001": 9}}}},
		{"one pending", []map[string]federation.HandBack{{"us": done("eu--s000", 4), "asia": done("eu--s000", 2)}, {"us": pending}}, true,
			map[string]federation.HandBack{"us": pending, "asia": done("eu--s000", 2)}},
		{"a shard's state missing", []map[string]federation.HandBack{{"us": done("eu--s000", 4)}}, false,
			map[string]federation.HandBack{"us": pending}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Set{}
			merged := map[string]federation.HandBack{}
			for _, backs := range tt.shards {
				for site, hb := range backs {
					merged[site] = mergeBack(merged[site], hb)
				}
			}
			s.setBacks(merged, tt.all)
			got := s.HandBacks()
			if len(got) != len(tt.want) {
				t.Fatalf("hand-backs %+v, want %+v", got, tt.want)
			}
			for site, w := range tt.want {
				if g := got[site]; g.Pending != w.Pending || !maps.Equal(g.Senders, w.Senders) {
					t.Errorf("%s: %+v, want %+v", site, g, w)
				}
			}
		})
	}
	s := &Set{}
	s.setBacks(nil, true) // a node that does not lead the meta group
	if got := s.HandBacks(); len(got) != 0 {
		t.Errorf("off the meta leader: %+v, want none", got)
	}
}

package store

import (
	"fmt"
	"testing"
)

// TestOutboxHeads: one pass gives each owner's first entries under the
// prefix, at most limit each, acked entries gone, owners without entries
// and owners outside the prefix absent; it agrees with Outbox per owner.
func TestOutboxHeads(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	owners := []string{"~s001", "~s0010", "~s002", "eu"}
	b := NewBatch()
	for i := range 5 {
		for _, o := range owners {
			b.OutboxEnqueue(o, []byte(fmt.Sprint(o, i)))
		}
	}
	applyT(t, s, 1, b)
	// ~s002's entries all acked: it has none left.
	ack := NewBatch()
	for _, e := range must(s.Outbox("~s002", 0, 100)) {
		ack.OutboxAck("~s002", e.Seq)
	}
	applyT(t, s, 2, ack)
	for _, limit := range []int{1, 3, 10} {
		heads, err := s.OutboxHeads("~", limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(heads) != 2 {
			t.Fatalf("limit %d: owners %v, want ~s001 and ~s0010", limit, keys(heads))
		}
		for _, o := range []string{"~s001", "~s0010"} {
			want := must(s.Outbox(o, 0, limit))
			got := heads[o]
			if len(got) != len(want) || len(got) != min(limit, 5) {
				t.Fatalf("limit %d, %s: %d entries, Outbox gives %d", limit, o, len(got), len(want))
			}
			for i := range got {
				if got[i].Seq != want[i].Seq || string(got[i].Payload) != string(want[i].Payload) {
					t.Fatalf("limit %d, %s entry %d: %d %q, want %d %q", limit, o, i, got[i].Seq, got[i].Payload, want[i].Seq, want[i].Payload)
				}
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

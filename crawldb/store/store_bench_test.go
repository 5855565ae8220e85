package store

import (
	"fmt"
	"testing"
)

// BenchmarkApplyUpserts applies commands of 1,000 upserts of new URLs over
// 1,000 hosts (no Raft): the state machine's share of the write path.
func BenchmarkApplyUpserts(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := NewBatch()
	idx := uint64(0)
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		batch.Reset()
		for j := 0; j < 1000; j++ {
			batch.UpsertCash(fmt.Sprintf("http://h%d.us.test/p/%d.html", (n*7919)%10000, n), 1.0/float64(1+n%7), 1)
			n++
		}
		cmd, err := batch.Encode()
		if err != nil {
			b.Fatal(err)
		}
		idx++
		if _, err := s.Apply(idx, cmd); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "upserts/s")
}

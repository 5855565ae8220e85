package store

import (
	"fmt"
	"testing"
)

// benchOpen opens the store a benchmark runs on: a store of its own.
func benchOpen(b *testing.B) *Store {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchOpenGroup opens the only group of a Shared: against benchOpen, the
// cost of the keyspace's prefix.
func benchOpenGroup(b *testing.B) *Store { return openBenchGroup(b, false) }

// benchOpenGroupNeighbour opens a group of a Shared whose other group
// holds 100,000 URLs of the same hosts.
func benchOpenGroupNeighbour(b *testing.B) *Store { return openBenchGroup(b, true) }

func openBenchGroup(b *testing.B, neighbour bool) *Store {
	sh, err := OpenShared(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sh.Close() })
	if neighbour {
		other, err := sh.Store("s-00")
		if err != nil {
			b.Fatal(err)
		}
		benchFill(b, other)
	}
	s, err := sh.Store("s-01")
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkApplyUpserts applies commands of 1,000 upserts of new URLs over
// 1,000 hosts (no Raft): the state machine's share of the write path.
func BenchmarkApplyUpserts(b *testing.B) { benchApplyUpserts(b, benchOpen(b)) }

// BenchmarkGroupApplyUpserts is BenchmarkApplyUpserts on a group of a Shared.
func BenchmarkGroupApplyUpserts(b *testing.B) { benchApplyUpserts(b, benchOpenGroup(b)) }

func benchApplyUpserts(b *testing.B, s *Store) {
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

// benchFill applies 100 commands of 1,000 upserts over 1,000 hosts and
// returns the URLs and the last index.
func benchFill(b *testing.B, s *Store) ([]string, uint64) {
	b.Helper()
	var urls []string
	batch := NewBatch()
	idx := uint64(0)
	for i := 0; i < 100; i++ {
		batch.Reset()
		for j := 0; j < 1000; j++ {
			n := i*1000 + j
			u := fmt.Sprintf("http://h%d.us.test/p/%d.html", (n*7919)%1000, n)
			urls = append(urls, u)
			batch.UpsertCash(u, 1.0/float64(1+n%7), 1)
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
	return urls, idx
}

// BenchmarkApplyKnown applies commands of 1,000 cash credits to URLs the
// store holds (the update phase's common case: read the record, move its
// frontier entry, rewrite the host's state).
func BenchmarkApplyKnown(b *testing.B) { benchApplyKnown(b, benchOpen(b)) }

// BenchmarkGroupApplyKnown is BenchmarkApplyKnown on a group of a Shared.
func BenchmarkGroupApplyKnown(b *testing.B) { benchApplyKnown(b, benchOpenGroup(b)) }

// BenchmarkGroupNeighbourApplyKnown is BenchmarkApplyKnown on a group of a
// Shared whose other group holds as many URLs.
func BenchmarkGroupNeighbourApplyKnown(b *testing.B) {
	benchApplyKnown(b, benchOpenGroupNeighbour(b))
}

func benchApplyKnown(b *testing.B, s *Store) {
	urls, idx := benchFill(b, s)
	batch := NewBatch()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		batch.Reset()
		for j := 0; j < 1000; j++ {
			batch.UpsertCash(urls[(n*7919)%len(urls)], 0.5, 1)
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
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "credits/s")
}

// BenchmarkGet reads URL records by URL.
func BenchmarkGet(b *testing.B) { benchGet(b, benchOpen(b)) }

// BenchmarkGroupGet is BenchmarkGet on a group of a Shared.
func BenchmarkGroupGet(b *testing.B) { benchGet(b, benchOpenGroup(b)) }

func benchGet(b *testing.B, s *Store) {
	urls, _ := benchFill(b, s)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok, err := s.Get(urls[(i*7919)%len(urls)]); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkFrontier reads the top 1,000 URLs of the frontier, 10 per host.
func BenchmarkFrontier(b *testing.B) { benchFrontier(b, benchOpen(b)) }

// BenchmarkGroupFrontier is BenchmarkFrontier on a group of a Shared.
func BenchmarkGroupFrontier(b *testing.B) { benchFrontier(b, benchOpenGroup(b)) }

func benchFrontier(b *testing.B, s *Store) {
	benchFill(b, s)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := s.Frontier(FrontierQuery{Width: 1000, PerHost: 10})
		if err != nil || len(out) != 1000 {
			b.Fatal(len(out), err)
		}
	}
}

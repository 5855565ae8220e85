package store

import (
	"testing"
	"time"
)

// TestDomainFetched checks that a domain's fetched pages are those of the
// domain's own host and of every host under it, and of no other host: not
// of a host that only ends in the same letters, nor of the domain's parent.
func TestDomainFetched(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	fetched := map[string]int{
		"spam.test":           2,
		"a.spam.test":         3,
		"b.spam.test":         1,
		"x.b.spam.test":       4,
		"notspam.test":        5, // ends in "spam.test", not under it
		"spam.test.evil":      6, // under another domain
		"other.test":          7,
		"h1.fr.test":          1,
		"spam.test-x.test":    8, // the byte after the domain's last label is not '.'
		"unfetched.spam.test": 0,
	}
	idx := uint64(0)
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for host, n := range fetched {
		for i := range max(n, 1) {
			u := "http://" + host + "/p/" + string(rune('a'+i))
			b := NewBatch()
			b.UpsertCash(u, 1, 0)
			b.MarkGenerated(u, 1)
			idx++
			applyT(t, s, idx, b)
			if n == 0 {
				continue // in the frontier: state, no fetch
			}
			b = NewBatch()
			b.RecordRoundFetch(FetchResult{URL: u, Status: StatusFetched, HTTPStatus: 200, At: at, Round: 1, Spend: 1})
			idx++
			applyT(t, s, idx, b)
		}
	}
	tests := []struct {
		domain string
		want   uint64
	}{
		{"spam.test", 2 + 3 + 1 + 4},
		{"b.spam.test", 1 + 4},
		{"notspam.test", 5},
		{"other.test", 7},
		{"fr.test", 1},
		{"test", 2 + 3 + 1 + 4 + 5 + 7 + 1 + 8},
		{"nothing.test", 0},
		{"", 0},
	}
	for _, tt := range tests {
		t.Run(tt.domain, func(t *testing.T) {
			got, err := s.DomainFetched(tt.domain)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("DomainFetched(%q) = %d, want %d", tt.domain, got, tt.want)
			}
		})
	}
	// The sum is the hosts' own counts.
	var sum uint64
	for _, h := range []string{"spam.test", "a.spam.test", "b.spam.test", "x.b.spam.test", "unfetched.spam.test"} {
		st, err := s.HostStats(h)
		if err != nil {
			t.Fatal(err)
		}
		sum += st.Fetched
	}
	if got, _ := s.DomainFetched("spam.test"); got != sum {
		t.Errorf("DomainFetched(spam.test) = %d, the hosts' HostStats sum to %d", got, sum)
	}
}

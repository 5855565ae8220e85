package shardset

import (
	"fmt"
	"testing"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/route"
)

// TestEntriesFitTheOutbox: however many URLs an update sends one shard,
// and however long they are, every outbox entry the router cuts is one
// the crawl database takes (issue 36: 4,096 URLs to one shard made a
// 66 KiB entry, the store refused the update, and the shard's crawl
// stopped at that round), with its hosts' keys, and together they carry
// every URL once, in order.
func TestEntriesFitTheOutbox(t *testing.T) {
	tests := []struct {
		name   string
		urls   int
		hosts  int
		suffix int // bytes of path after the page number
	}{
		{"few URLs", 3, 2, 0},
		{"many short URLs on few hosts", 20_000, 3, 0},
		{"many long URLs on many hosts", 12_000, 2_000, 120},
		{"very long URLs", 500, 50, 2_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Router{sh: 1}
			// Every other host placed on the globe (in a federation): the
			// entries carry the place as well as the key.
			keys := map[string]federation.HostLoc{}
			var urls []route.Remote
			pad := make([]byte, tt.suffix)
			for i := range pad {
				pad[i] = 'a' + byte(i%26)
			}
			first := 0 // bytes of the URLs an entry of 4,096 would hold
			for i := 0; i < tt.urls; i++ {
				h := fmt.Sprintf("h%d.example.test", i%tt.hosts)
				l := federation.HostLoc{Key: "key-" + h}
				if i%tt.hosts%2 == 1 {
					l.Lat, l.Lon, l.Known = 48.85, 2.35, true
				}
				keys[h] = l
				u := route.Remote{URL: fmt.Sprintf("http://%s/p/%d/%s", h, i, pad), Cash: 1 / float64(i+1), Depth: uint32(i % 7)}
				urls = append(urls, u)
				if i < 4096 {
					first += len(u.URL)
				}
			}
			entries := r.entries(2, urls, keys)
			if tt.urls > 4096 && first < 64<<10 {
				t.Fatalf("the first 4,096 URLs have %d bytes: the case does not test the byte bound", first)
			}
			next := 0
			for i, e := range entries {
				b := store.NewBatch()
				b.OutboxEnqueue(outboxOwner(2), e)
				if _, err := b.Encode(); err != nil {
					t.Fatalf("entry %d of %d (%d bytes): %v", i, len(entries), len(e), err)
				}
				eb, err := federation.Decode(e, federation.Limits{})
				if err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
				if eb.From != GroupID(1) || eb.To != GroupID(2) {
					t.Errorf("entry %d: from %q to %q, want %q to %q", i, eb.From, eb.To, GroupID(1), GroupID(2))
				}
				located := map[string]federation.HostLoc{}
				for _, hl := range eb.Hosts {
					located[hl.Host] = hl
				}
				for _, p := range eb.Puts {
					if next >= len(urls) {
						t.Fatalf("entry %d: more URLs than were routed", i)
					}
					want := urls[next]
					if p.URL != want.URL || p.Cash != want.Cash || p.Depth != want.Depth {
						t.Fatalf("entry %d: put %+v, want URL %d %+v", i, p, next, want)
					}
					h := crawl.HostOf(p.URL)
					wantLoc := keys[h]
					wantLoc.Host = h
					if located[h] != wantLoc {
						t.Fatalf("entry %d: host %s located %+v, want %+v", i, h, located[h], wantLoc)
					}
					next++
				}
			}
			if next != len(urls) {
				t.Errorf("the entries carry %d URLs, %d were routed", next, len(urls))
			}
			t.Logf("%d URLs in %d entries", len(urls), len(entries))
		})
	}
}

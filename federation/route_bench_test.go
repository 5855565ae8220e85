package federation

import (
	"context"
	"fmt"
	"testing"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/route"
)

// benchURLs returns n URLs over hosts (located in f), 40 bytes of path each.
func benchURLs(b *testing.B, f *Fed, hosts []string, n int) []route.Remote {
	b.Helper()
	if _, err := f.locateAll(context.Background(), hosts); err != nil {
		b.Fatal(err)
	}
	urls := make([]route.Remote, n)
	for i := range urls {
		urls[i] = route.Remote{URL: fmt.Sprintf("http://%s/a/path/page-%06d.html", hosts[i%len(hosts)], i), Cash: 0.001, Depth: 3}
	}
	return urls
}

// BenchmarkRoute: one update's routing of 10,000 URLs over 500 hosts of a
// three-site federation (about two thirds another site's): owners, the
// URL-sent cache lookups (all misses: the batch is not applied), the
// outbox entries and the command's encoding.
func BenchmarkRoute(b *testing.B) {
	f := newTestFed(b, "eu")
	var hosts []string
	for i := 0; i < 500; i++ {
		hosts = append(hosts, fmt.Sprintf("h%d.example.test", i))
	}
	urls := benchURLs(b, f, hosts, 10000)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		bt := store.NewBatch()
		if _, _, err := f.Route(ctx, urls, bt); err != nil {
			b.Fatal(err)
		}
		if _, err := bt.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDeliver: one delivery's batch of a peer's outbox holding 10,000
// URLs: reading the entries and framing them for the wire.
func BenchmarkDeliver(b *testing.B) {
	f := newTestFed(b, "eu")
	var hosts []string
	for i := 0; len(hosts) < 200; i++ {
		h := fmt.Sprintf("h%d.example.test", i)
		if f.primary(h, location{key: h}) == "us" {
			hosts = append(hosts, h)
		}
	}
	urls := benchURLs(b, f, hosts, 10000)
	ctx := context.Background()
	bt := store.NewBatch()
	if _, _, err := f.Route(ctx, urls, bt); err != nil {
		b.Fatal(err)
	}
	if err := f.apply(ctx, bt); err != nil {
		b.Fatal(err)
	}
	p := f.peers["us"]
	b.ResetTimer()
	for range b.N {
		pd, err := f.nextBatch(p)
		if err != nil || pd == nil || pd.urls != len(urls) {
			b.Fatalf("%+v %v", pd, err)
		}
	}
}

// BenchmarkSend: an update's 10,000 URLs (new ones each time, about two
// thirds another site's) from routing to acknowledged delivery: Route,
// the command applied, the outbox framed and acknowledged (the sender's
// whole cost but the network's).
func BenchmarkSend(b *testing.B) {
	f := newTestFed(b, "eu")
	ctx := context.Background()
	var hosts []string
	for i := 0; i < 500; i++ {
		hosts = append(hosts, fmt.Sprintf("h%d.example.test", i))
	}
	if _, err := f.locateAll(ctx, hosts); err != nil {
		b.Fatal(err)
	}
	urls := make([]route.Remote, 10000)
	remote := 0
	b.ResetTimer()
	for n := range b.N {
		b.StopTimer()
		for i := range urls {
			urls[i] = route.Remote{URL: fmt.Sprintf("http://%s/a/path/%d/page-%06d.html", hosts[i%len(hosts)], n, i), Cash: 0.001, Depth: 3}
		}
		b.StartTimer()
		bt := store.NewBatch()
		_, sent, err := f.Route(ctx, urls, bt)
		if err != nil {
			b.Fatal(err)
		}
		remote += sent.URLs
		if err := f.apply(ctx, bt); err != nil {
			b.Fatal(err)
		}
		for _, p := range []*peer{f.peers["us"], f.peers["asia"]} {
			for i := 0; i < 100 && f.st.Counts().Outbox > 0; i++ {
				pd, err := f.nextBatch(p)
				if err != nil {
					b.Fatal(err)
				}
				if pd == nil {
					break
				}
				if _, _, _, _, err := frameHeader(pd.frame); err != nil {
					b.Fatal(err)
				}
				if err := f.acked(ctx, p, pd); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(remote), "ns/remote-url")
}

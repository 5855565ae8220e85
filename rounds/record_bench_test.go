package rounds

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
)

// benchResult is a typical page's result: 40 links, no signals.
func benchResult() *fetcher.Result {
	r := &fetcher.Result{Job: fetcher.Job{URL: "http://www.example.test/section/page-123.html", Host: "www.example.test", Depth: 3, Cash: 0.01},
		Status: store.StatusFetched, HTTPStatus: 200, ContentFP: 42, Bytes: 20_000, FetchedAt: time.UnixMilli(1_700_000_000_000), Wait: time.Second}
	for i := range 40 {
		r.Links = append(r.Links, fmt.Sprintf("http://www.example.test/section/page-%d.html", i))
	}
	return r
}

// BenchmarkAppendResult encodes a page's fetch segment record (once a
// result, on the node's OnResult path).
func BenchmarkAppendResult(b *testing.B) {
	r := benchResult()
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = appendResult(buf[:0], r)
	}
}

// BenchmarkDecodeFetch decodes it (a restart, a local part's update).
func BenchmarkDecodeFetch(b *testing.B) {
	rec := appendResult(nil, benchResult())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeFetch(rec); err != nil {
			b.Fatal(err)
		}
	}
}

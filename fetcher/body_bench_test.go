package fetcher

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// benchPage is an HTML page of about 30 KB with 200 links, the size of a
// typical page on the web.
func benchPage() []byte {
	var b bytes.Buffer
	b.WriteString("<!doctype html><html><head><meta charset=utf-8><title>bench</title></head><body>\n")
	for i := range 200 {
		fmt.Fprintf(&b, "<p>Paragraph %d of the page, with some words in it. <a href=\"/p/%d.html\">link %d</a></p>\n", i, i, i)
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

// BenchmarkBodyPath fetches one page again and again through a worker's
// get (colly, the transport wrapper, the body reader and, for "gzip",
// content decoding) over a kept-alive loopback connection: "plain" is the
// page without Content-Encoding, "gzip" the same page gzip-encoded (to
// clients that accept gzip). The server writes bytes it prepared once.
func BenchmarkBodyPath(b *testing.B) {
	page := benchPage()
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed)
	zw.Write(page)
	zw.Close()
	gz := zb.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/gzip" && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Length", fmt.Sprint(len(gz)))
			w.Write(gz)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(page)))
		w.Write(page)
	}))
	defer srv.Close()
	ap := netip.MustParseAddrPort(srv.Listener.Addr().(*net.TCPAddr).String())
	f, err := New(Options{Workers: 1, AllowPrivate: true, OnResult: func(*Result) {}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := withoutScheduler(b, f)
	for _, path := range []string{"plain", "gzip"} {
		b.Run(path, func(b *testing.B) {
			w := newWorker(ctx, f)
			t := &task{kind: taskPage, ip: ap.Addr()}
			url := fmt.Sprintf("http://bench.test:%d/%s", ap.Port(), path)
			get := func() {
				if err := w.get(t, url); err != nil {
					b.Fatal(err)
				}
				if !bytes.Equal(w.ex.body, page) {
					b.Fatalf("body of %d bytes, want the page's %d", len(w.ex.body), len(page))
				}
			}
			get() // connect
			b.ReportAllocs()
			b.SetBytes(int64(len(page)))
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for range b.N {
				get()
			}
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

package bench

import (
	"bufio"
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

func TestRunWebsimInProcess(t *testing.T) {
	const pageBytes = 10_000
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := RunWebsim(ctx, WebsimConfig{Hosts: 10, Pages: 20, PageBytes: pageBytes, Conns: 2,
		Duration: 300 * time.Millisecond, Warmup: 100 * time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.Pages <= 0 {
		t.Errorf("Pages = %d, want > 0", res.Pages)
	}
	if res.Errors != 0 || res.Non200 != 0 {
		t.Errorf("Errors = %d, Non200 = %d, want 0 and 0", res.Errors, res.Non200)
	}
	if d := math.Abs(res.MeanPageBytes-pageBytes) / pageBytes; d > 0.3 {
		t.Errorf("MeanPageBytes = %.0f, more than 30%% from %d", res.MeanPageBytes, pageBytes)
	}
	if res.Dials != 2 {
		t.Errorf("Dials = %d, want 2 (keep-alive)", res.Dials)
	}
	if res.Elapsed <= 0 || res.PagesPerSec <= 0 || res.MBPerSec <= 0 {
		t.Errorf("Elapsed %v, %.0f pages/s, %.1f MB/s: want positive", res.Elapsed, res.PagesPerSec, res.MBPerSec)
	}
}

func TestRunWebsimMaxRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := RunWebsim(ctx, WebsimConfig{Hosts: 10, Pages: 5, PageBytes: 1000, Conns: 3,
		Duration: 5 * time.Second, Warmup: -1, MaxRequests: 50})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pages > 50 || res.Pages == 0 || res.Errors != 0 {
		t.Errorf("Pages = %d, Errors = %d: want 1..50 pages and no error", res.Pages, res.Errors)
	}
	if res.Elapsed > 4*time.Second {
		t.Errorf("Elapsed = %v: the request bound did not end the run", res.Elapsed)
	}
}

func TestReadResponse(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\ncontent-length: 5\r\n\r\nhello" +
		"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nConnection: close\r\n\r\nnop" +
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	br := bufio.NewReader(strings.NewReader(in))
	for _, want := range []struct {
		status int
		body   int64
		close  bool
	}{{200, 5, false}, {404, 3, true}} {
		status, body, closeAfter, err := readResponse(br)
		if err != nil || status != want.status || body != want.body || closeAfter != want.close {
			t.Errorf("readResponse = %d, %d, %v, %v; want %d, %d, %v", status, body, closeAfter, err, want.status, want.body, want.close)
		}
	}
	if _, _, _, err := readResponse(br); err == nil {
		t.Error("chunked response: want an error")
	}
}

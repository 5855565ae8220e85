package fetcher

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

func TestBackoffFor(t *testing.T) {
	const base, maxD = 5 * time.Second, 10 * time.Minute
	for _, c := range []struct {
		failures uint32
		want     time.Duration
	}{
		{0, 5 * time.Second}, {1, 5 * time.Second}, {2, 10 * time.Second}, {3, 20 * time.Second},
		{7, 320 * time.Second}, {8, maxD}, {40, maxD}, {1 << 31, maxD},
	} {
		if got := backoffFor(base, maxD, c.failures); got != c.want {
			t.Errorf("backoffFor(%d) = %v, want %v", c.failures, got, c.want)
		}
	}
	if got := backoffFor(time.Duration(1<<62), time.Hour, 3); got != time.Hour {
		t.Errorf("overflowing back-off = %v, want the cap", got)
	}
}

// TestJobQueue compares jobQueue with a plain slice under random operations.
func TestJobQueue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var q jobQueue
	var ref []Job
	next := 0
	for step := range 20000 {
		switch op := r.IntN(10); {
		case op < 5:
			j := Job{URL: "u" + strconv.Itoa(next)}
			next++
			q.push(j)
			ref = append(ref, j)
		case op < 9 && len(ref) > 0:
			if got := q.pop(); got != ref[0] {
				t.Fatalf("step %d: pop %v, want %v", step, got, ref[0])
			}
			ref = ref[1:]
		case op == 9:
			q.filter(func(j *Job) bool { return len(j.URL)%2 == 0 })
			ref = slices.DeleteFunc(ref, func(j Job) bool { return len(j.URL)%2 != 0 })
		}
		if q.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, q.len(), len(ref))
		}
		if len(ref) > 0 && *q.peek() != ref[0] {
			t.Fatalf("step %d: peek %v, want %v", step, *q.peek(), ref[0])
		}
		if cap(q.q) > 4*len(ref)+512 {
			t.Fatalf("step %d: capacity %d for %d jobs", step, cap(q.q), len(ref))
		}
	}
}

func TestIsHTML(t *testing.T) {
	for _, c := range []struct {
		ct   string
		body string
		want bool
	}{
		{"text/html", "", true},
		{"text/html; charset=iso-8859-1", "", true},
		{" TEXT/HTML ;charset=utf-8", "", true},
		{"application/xhtml+xml", "", true},
		{"application/xml", "<html>", false},
		{"image/jpeg", "<!DOCTYPE html><html>", false},
		{"text/plain", "<html>", false},
		{"", "<!DOCTYPE html><html><body>x</body></html>", true},
		{"", "%PDF-1.4", false},
		{"text/htmlx", "", false},
	} {
		if got := isHTML(c.ct, []byte(c.body)); got != c.want {
			t.Errorf("isHTML(%q, %q) = %v, want %v", c.ct, c.body, got, c.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := func(*Result) {}
	for _, c := range []struct {
		name string
		o    Options
		want []string // substrings of the error; none: valid
	}{
		{"defaults", Options{OnResult: ok}, nil},
		{"no OnResult", Options{}, []string{"OnResult"}},
		{"negative", Options{OnResult: ok, HostDelay: -1, IPDelay: -1, TotalTimeout: -1}, []string{"host delay", "ip delay", "total timeout"}},
		{"body", Options{OnResult: ok, MaxBodyBytes: 2 << 30}, []string{"max body bytes"}},
		{"workers and port", Options{OnResult: ok, Workers: -3, Port: 70000}, []string{"workers", "port"}},
	} {
		err := c.o.Validate()
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: valid, want %v", c.name, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v does not mention %q", c.name, err, w)
			}
		}
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New accepted invalid options")
	}
}

// newTestWorker is a worker that is not connected to any network, for
// classifying exchanges.
func newTestWorker(t testing.TB, seen func(uint64, string) bool) *worker {
	f, err := New(Options{OnResult: func(*Result) {}, Seen: seen, MaxLinks: 50})
	if err != nil {
		t.Fatal(err)
	}
	return newWorker(context.Background(), f)
}

func TestClassify(t *testing.T) {
	const page = "http://h1.cc.test/dir/page.html"
	html := `<html><head><title>x</title></head><body><a href="other.html">o</a> <a href="/x" rel="nofollow">n</a> <a href="mailto:a@b">m</a></body></html>`
	seenFP := map[uint64]bool{}
	w := newTestWorker(t, func(fp uint64, u string) bool {
		if seenFP[fp] {
			return true
		}
		seenFP[fp] = true
		return false
	})
	for _, c := range []struct {
		name     string
		status   int
		header   map[string]string
		body     string
		want     crawl.Status
		retry    bool
		failure  bool
		links    []string
		redirect string
	}{
		{"html", 200, map[string]string{"Content-Type": "text/html; charset=utf-8"}, html, crawl.StatusFetched, false, false, []string{"http://h1.cc.test/dir/other.html"}, ""},
		{"same html again", 200, map[string]string{"Content-Type": "text/html"}, html, crawl.StatusDuplicate, false, false, nil, ""},
		{"xhtml", 200, map[string]string{"Content-Type": "application/xhtml+xml"}, html + " ", crawl.StatusFetched, false, false, []string{"http://h1.cc.test/dir/other.html"}, ""},
		{"pdf", 200, map[string]string{"Content-Type": "application/pdf"}, "%PDF-1.4 <a href=x>", crawl.StatusFetched, false, false, nil, ""},
		{"204", 204, nil, "", crawl.StatusFetched, false, false, nil, ""},
		{"301 relative", 301, map[string]string{"Location": "../new/./p.html?b=1#frag"}, "", crawl.StatusRedirect, false, false, nil, "http://h1.cc.test/new/p.html?b=1"},
		{"302 absolute upper", 302, map[string]string{"Location": "HTTP://H2.CC.TEST:80/a?sid=123"}, "", crawl.StatusRedirect, false, false, nil, "http://h2.cc.test/a"},
		{"307 bad location", 307, map[string]string{"Location": "http://[::1/"}, "", crawl.StatusError, false, false, nil, ""},
		{"301 other scheme", 301, map[string]string{"Location": "ftp://h1.cc.test/x"}, "", crawl.StatusError, false, false, nil, ""},
		{"302 no location", 302, nil, "", crawl.StatusError, false, false, nil, ""},
		{"404", 404, nil, "gone", crawl.StatusGone, false, false, nil, ""},
		{"410", 410, nil, "", crawl.StatusGone, false, false, nil, ""},
		{"403", 403, nil, "", crawl.StatusError, false, false, nil, ""},
		{"451", 451, nil, "", crawl.StatusError, false, false, nil, ""},
		{"429", 429, nil, "", crawl.StatusError, true, true, nil, ""},
		{"500 (the URL's error, not the host's)", 500, nil, "", crawl.StatusError, true, false, nil, ""},
		{"501", 501, nil, "", crawl.StatusError, true, false, nil, ""},
		{"502", 502, nil, "", crawl.StatusError, true, true, nil, ""},
		{"503", 503, nil, "", crawl.StatusError, true, true, nil, ""},
		{"504", 504, nil, "", crawl.StatusError, true, true, nil, ""},
	} {
		w.ex.reset()
		w.ex.gotResponse, w.ex.status, w.ex.statusText = true, c.status, http.StatusText(c.status)
		w.ex.header = http.Header{}
		for k, v := range c.header {
			w.ex.header.Set(k, v)
		}
		w.ex.body = append(w.ex.body[:0], c.body...)
		r := &Result{Job: Job{URL: page}}
		w.fill(r)
		oc := w.classify(r)
		if r.Status != c.want || r.Retry != c.retry || (oc == outcomeFailure) != c.failure || r.RedirectTo != c.redirect || !slices.Equal(r.Links, c.links) {
			t.Errorf("%s: %s links=%q failure=%v", c.name, describe(r), r.Links, oc == outcomeFailure)
		}
		if (r.Status == crawl.StatusError) != (r.Err != "") {
			t.Errorf("%s: status %v with error %q", c.name, r.Status, r.Err)
		}
	}
}

// FuzzClassify: any response is classified without panicking, and what it
// reports is consistent.
func FuzzClassify(f *testing.F) {
	f.Add(200, "text/html", "", []byte(`<a href="/x">x</a><base href="//h9.cc.test/"><a href=y>`))
	f.Add(301, "", "//evil.test/%zz", []byte(nil))
	f.Add(302, "text/html", "\x00\r\n", []byte(nil))
	f.Add(200, "", "", []byte("<html><meta name=robots content=nofollow><a href=/a>"))
	f.Add(599, "x/y", "/", []byte("\xff\xfe"))
	w := newTestWorker(f, nil)
	n := urlnorm.New(urlnorm.Options{})
	f.Fuzz(func(t *testing.T, status int, ct, loc string, body []byte) {
		w.ex.reset()
		w.ex.gotResponse, w.ex.status, w.ex.statusText = true, status, "x"
		w.ex.header = http.Header{"Content-Type": {ct}, "Location": {loc}}
		w.ex.body = append(w.ex.body[:0], body...)
		r := &Result{Job: Job{URL: "http://h1.cc.test/a/b"}}
		w.fill(r)
		w.classify(r)
		if r.Status == 0 || r.Retry && r.Status != crawl.StatusError {
			t.Fatalf("status %v retry %v", r.Status, r.Retry)
		}
		if r.RedirectTo != "" {
			again, err := n.NormalizeString(r.RedirectTo)
			if err != nil || again != r.RedirectTo || r.Status != crawl.StatusRedirect {
				t.Fatalf("redirect %q (%v): renormalised %q, %v", r.RedirectTo, r.Status, again, err)
			}
		}
		if len(r.Links) > 50 || (len(r.Links) > 0 && r.Status != crawl.StatusFetched) {
			t.Fatalf("%d links with status %v", len(r.Links), r.Status)
		}
		if (len(body) > 0) != (r.ContentFP != 0) && r.ContentFP != 0 {
			t.Fatalf("fingerprint %x for %d bytes", r.ContentFP, len(body))
		}
	})
}

// FuzzBodyReader: the body reader keeps exactly the first limit bytes,
// whatever the chunking, and says "length" exactly when there were more.
func FuzzBodyReader(f *testing.F) {
	f.Add([]byte("hello world"), 5, false)
	f.Add([]byte("hello"), 5, true)
	f.Add([]byte(""), 1, false)
	f.Add(bytes.Repeat([]byte("x"), 70000), 65536, true)
	f.Fuzz(func(t *testing.T, body []byte, limit int, oneByte bool) {
		if limit < 1 || limit > 1<<20 {
			return
		}
		var r io.Reader = bytes.NewReader(body)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		ex := &exchange{}
		b := &bodyReader{rc: io.NopCloser(r), ex: ex, limit: int64(limit), ctx: context.Background(), run: context.Background()}
		got, err := io.ReadAll(b)
		if err != nil || len(got) != 0 {
			t.Fatalf("ReadAll: %d bytes, %v", len(got), err)
		}
		want := body[:min(len(body), limit)]
		if !bytes.Equal(ex.body, want) {
			t.Fatalf("kept %d bytes, want %d", len(ex.body), len(want))
		}
		if (ex.truncated == "length") != (len(body) > limit) {
			t.Fatalf("truncated %q for %d bytes at limit %d", ex.truncated, len(body), limit)
		}
	})
}

// TestBodyReaderErrors: a deadline in the body is "time", a broken
// connection "disconnect", and Run's end is an error.
func TestBodyReaderErrors(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	stopped, stop := context.WithCancel(context.Background())
	stop()
	for _, c := range []struct {
		name      string
		ctx, run  context.Context
		truncated string
		err       bool
	}{
		{"deadline", expired, context.Background(), "time", false},
		{"reset", context.Background(), context.Background(), "disconnect", false},
		{"stopped", context.Background(), stopped, "", true},
	} {
		ex := &exchange{}
		b := &bodyReader{rc: io.NopCloser(io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(errors.New("boom")))), ex: ex, limit: 100, ctx: c.ctx, run: c.run}
		_, err := io.ReadAll(b)
		if (err != nil) != c.err || ex.truncated != c.truncated || string(ex.body) != "partial" {
			t.Errorf("%s: err %v, truncated %q, body %q", c.name, err, ex.truncated, ex.body)
		}
	}
}

func TestMediaType(t *testing.T) {
	for in, want := range map[string]string{
		"text/html":                  "text/html",
		"Text/HTML; charset=UTF-8":   "text/html",
		"  application/xml  ; x=y":   "application/xml",
		"":                           "",
		";":                          "",
		"image/svg+xml;charset=utf8": "image/svg+xml",
	} {
		if got := mediaType(in); got != want {
			t.Errorf("mediaType(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRequestHead checks the reconstructed request head against what
// net/http writes for the same request.
func TestRequestHead(t *testing.T) {
	ex := &exchange{host: "h1.cc.test:8080", requestURI: "/a?b=c"}
	got := appendRequestHead(nil, ex, DefaultUserAgent(""))
	req, _ := http.NewRequest("GET", "http://h1.cc.test:8080/a?b=c", nil)
	req.Header = http.Header{"User-Agent": {DefaultUserAgent("")}, "Accept": {"*/*"}, "Accept-Encoding": {acceptEncoding}}
	var buf bytes.Buffer
	if err := req.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, buf.Bytes()) {
		t.Errorf("request head\n%q\nnet/http writes\n%q", got, buf.Bytes())
	}
}

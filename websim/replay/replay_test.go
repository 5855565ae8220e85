package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is one recorded response and what a client should see of it.
type fixture struct {
	url    string // WARC-Target-URI
	block  string // HTTP response block as recorded
	status int
	ctype  string
	body   string // body as a client sees it (de-chunked)
}

var pngBody = func() string {
	b := []byte("\x89PNG\r\n\x1a\n")
	for i := range 2000 {
		b = append(b, byte(i*7+i/256))
	}
	return string(b)
}()

func withLength(head, body string) string {
	return fmt.Sprintf("%sContent-Length: %d\r\n\r\n%s", head, len(body), body)
}

// fixtures are written in this order; the second /page?q=1 replaces the first.
var fixtures = []fixture{
	{
		url:    "http://a.example/",
		block:  withLength("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nx-lower-case: yes\r\nX-Custom: First\r\n", "<html>hello</html>"),
		status: 200, ctype: "text/html; charset=utf-8", body: "<html>hello</html>",
	},
	{
		url:    "http://b.example/page?q=1",
		block:  withLength("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n", "old version"),
		status: 200, ctype: "text/plain", body: "old version",
	},
	{
		url:    "http://a.example/img.png",
		block:  withLength("HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n", pngBody),
		status: 200, ctype: "image/png", body: pngBody,
	},
	{
		url:    "http://a.example/chunked",
		block:  "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
		status: 200, ctype: "text/plain", body: "hello world",
	},
	{
		url:    "http://B.Example:80/missing",
		block:  withLength("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n", "gone"),
		status: 404, ctype: "text/plain", body: "gone",
	},
	{
		url:    "http://b.example/close",
		block:  "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nread until EOF",
		status: 200, ctype: "text/plain", body: "read until EOF",
	},
	{
		url:    "https://c.example/secure",
		block:  withLength("HTTP/1.1 200 Fine Thanks\r\nContent-Type: text/plain\r\n", "secure"),
		status: 200, ctype: "text/plain", body: "secure",
	},
	{
		url:    "http://a.example/empty",
		block:  "HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n",
		status: 204, body: "",
	},
	{
		url:    "http://b.example/page?q=1",
		block:  withLength("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n", "new version"),
		status: 200, ctype: "text/plain; charset=utf-8", body: "new version",
	},
}

// final returns the fixtures that should be served: the last one per URL.
func final() []fixture {
	var out []fixture
	for i, f := range fixtures {
		later := slices.ContainsFunc(fixtures[i+1:], func(g fixture) bool { return g.url == f.url })
		if !later {
			out = append(out, f)
		}
	}
	return out
}

// fixedName is a gowarc.WarcFileNameGenerator with a fixed file name.
type fixedName struct{ dir, name string }

func (g fixedName) NewWarcfileName() (string, string) { return g.dir, g.name }

func record(t *testing.T, typ gowarc.RecordType, url, contentType, block string) gowarc.WarcRecord {
	t.Helper()
	rb := gowarc.NewRecordBuilder(typ)
	if url != "" {
		rb.AddWarcHeader(gowarc.WarcTargetURI, url)
	}
	rb.AddWarcHeaderTime(gowarc.WarcDate, time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	rb.AddWarcHeader(gowarc.ContentType, contentType)
	if _, err := rb.WriteString(block); err != nil {
		t.Fatal(err)
	}
	r, _, err := rb.Build()
	if err != nil {
		t.Fatalf("build %s record for %s: %v", typ, url, err)
	}
	return r
}

// writeWARC writes the fixtures, with request records, a metadata record and
// a warcinfo record, to dir/name (plus ".gz" if compress). It returns the
// path and the file offsets of the response records, in fixture order.
func writeWARC(t *testing.T, dir, name string, compress bool) (string, []int64) {
	path, offsets, _ := writeWARCEnds(t, dir, name, compress)
	return path, offsets
}

// writeWARCEnds is writeWARC that also returns where each response record
// ends (where the next record starts).
func writeWARCEnds(t *testing.T, dir, name string, compress bool) (string, []int64, []int64) {
	t.Helper()
	w := gowarc.NewWarcFileWriter(
		gowarc.WithFileNameGenerator(fixedName{dir, name}),
		gowarc.WithCompression(compress),
		gowarc.WithMaxFileSize(0),
		gowarc.WithWarcInfoFunc(func(rb gowarc.WarcRecordBuilder) error {
			_, err := rb.WriteString("software: meridian replay test\r\nformat: WARC File Format 1.1\r\n")
			return err
		}),
	)
	var offsets, ends []int64
	for i, f := range fixtures {
		path := f.url[strings.Index(f.url[8:], "/")+8:]
		req := record(t, gowarc.Request, f.url, "application/http;msgtype=request",
			"GET "+path+" HTTP/1.1\r\nHost: "+strings.Split(f.url, "/")[2]+"\r\nUser-Agent: test\r\n\r\n")
		resp := record(t, gowarc.Response, f.url, "application/http;msgtype=response", f.block)
		res := w.Write(req, resp)
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		offsets = append(offsets, res[1].FileOffset)
		if i > 0 {
			ends = append(ends, res[0].FileOffset)
		}
	}
	meta := record(t, gowarc.Metadata, "http://a.example/", "application/warc-fields", "via: test\r\n")
	only := record(t, gowarc.Request, "http://a.example/requested-only", "application/http;msgtype=request",
		"GET /requested-only HTTP/1.1\r\nHost: a.example\r\n\r\n")
	res := w.Write(meta, only)
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	ends = append(ends, res[0].FileOffset)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if compress {
		path += ".gz"
	}
	return path, offsets, ends
}

func open(t *testing.T, paths ...string) *Archive {
	t.Helper()
	a, err := Open(paths...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	})
	return a
}

// server serves h on loopback and returns a client whose connections all go
// to it, whatever host the URL names, and a counter of accepted connections.
func server(t *testing.T, h http.Handler, configure func(*http.Server)) (*httptest.Server, *http.Client, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	addr := srv.Listener.Addr().String()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		DisableCompression: true,
	}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return srv, &http.Client{Transport: tr}, &conns
}

// httpURL is the URL to request for f: the scheme is always http.
func httpURL(f fixture) string {
	return "http://" + strings.TrimPrefix(strings.TrimPrefix(f.url, "http://"), "https://")
}

func get(t *testing.T, c *http.Client, method, url string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	return resp, body
}

func checkResponse(t *testing.T, f fixture, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != f.status {
		t.Errorf("%s: status %d, want %d", f.url, resp.StatusCode, f.status)
	}
	if got := resp.Header.Get("Content-Type"); got != f.ctype {
		t.Errorf("%s: Content-Type %q, want %q", f.url, got, f.ctype)
	}
	if !bytes.Equal(body, []byte(f.body)) {
		t.Errorf("%s: body %q, want %q", f.url, trim(body), trim([]byte(f.body)))
	}
}

func trim(b []byte) []byte {
	if len(b) > 60 {
		return b[:60]
	}
	return b
}

func TestIndex(t *testing.T) {
	path, _ := writeWARC(t, t.TempDir(), "x.warc", true)
	a := open(t, path)
	if a.Len() != len(final()) {
		t.Errorf("Len %d, want %d", a.Len(), len(final()))
	}
	var want []string
	for _, f := range final() {
		want = append(want, f.url)
	}
	slices.Sort(want)
	if got := a.URLs(); !slices.Equal(got, want) {
		t.Errorf("URLs\n got %q\nwant %q", got, want)
	}
	if got, want := a.Hosts(), []string{"a.example", "b.example", "c.example"}; !slices.Equal(got, want) {
		t.Errorf("Hosts %q, want %q", got, want)
	}
}

func TestResponse(t *testing.T) {
	for _, compress := range []bool{true, false} {
		t.Run(fmt.Sprintf("gzip=%v", compress), func(t *testing.T) {
			path, _ := writeWARC(t, t.TempDir(), "x.warc", compress)
			a := open(t, path)
			for _, f := range final() {
				got, err := a.Response(f.url)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != f.block {
					t.Errorf("%s: Response\n got %q\nwant %q", f.url, trim(got), trim([]byte(f.block)))
				}
			}
			// Scheme and host case and the default port do not matter.
			for _, u := range []string{"HTTP://A.EXAMPLE:80/", "http://a.example", "http://b.example/missing", "https://c.example:443/secure"} {
				if _, err := a.Response(u); err != nil {
					t.Errorf("Response(%q): %v", u, err)
				}
			}
			for _, u := range []string{"http://a.example/nope", "http://a.example/requested-only", "http://a.example/page?q=1", "ftp://a.example/", "junk"} {
				if _, err := a.Response(u); !errors.Is(err, ErrNotFound) {
					t.Errorf("Response(%q): error %v, want ErrNotFound", u, err)
				}
			}
		})
	}
}

func TestServeClient(t *testing.T) {
	path, _ := writeWARC(t, t.TempDir(), "x.warc", true)
	a := open(t, path)
	_, c, _ := server(t, a, nil)
	for _, f := range final() {
		resp, body := get(t, c, http.MethodGet, httpURL(f))
		checkResponse(t, f, resp, body)
	}
	// The raw recorded form of a URL works too.
	resp, body := get(t, c, http.MethodGet, "http://B.Example:80/missing")
	if resp.StatusCode != 404 || string(body) != "gone" {
		t.Errorf("B.Example:80: %d %q", resp.StatusCode, body)
	}
	// A port other than 80 in Host falls back to the host alone.
	resp, body = get(t, c, http.MethodGet, "http://a.example:8080/")
	if resp.StatusCode != 200 || string(body) != "<html>hello</html>" {
		t.Errorf("a.example:8080: %d %q", resp.StatusCode, body)
	}
	resp, body = get(t, c, http.MethodGet, "http://a.example/nope")
	if resp.StatusCode != 404 || !strings.Contains(string(body), "replay: not found: http://a.example/nope") {
		t.Errorf("unknown URL: %d %q", resp.StatusCode, body)
	}
	resp, body = get(t, c, http.MethodHead, "http://a.example/img.png")
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(pngBody)) || len(body) != 0 {
		t.Errorf("HEAD: %d, length %d, body %d bytes", resp.StatusCode, resp.ContentLength, len(body))
	}
	resp, body = get(t, c, http.MethodGet, "http://a.example/img.png")
	checkResponse(t, fixtures[2], resp, body)
}

func TestPlainWARC(t *testing.T) {
	path, _ := writeWARC(t, t.TempDir(), "x.warc", false)
	if strings.HasSuffix(path, ".gz") {
		t.Fatal(path)
	}
	a := open(t, path)
	_, c, _ := server(t, a, nil)
	for _, f := range final() {
		resp, body := get(t, c, http.MethodGet, httpURL(f))
		checkResponse(t, f, resp, body)
	}
}

// TestWholeFileGzip reads a WARC compressed as one gzip stream rather than
// per record.
func TestWholeFileGzip(t *testing.T) {
	dir := t.TempDir()
	plain, _ := writeWARC(t, dir, "x.warc", false)
	data, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(data)
	_ = zw.Close()
	path := filepath.Join(dir, "whole.warc.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o666); err != nil {
		t.Fatal(err)
	}
	a := open(t, path)
	if a.Len() != len(final()) {
		t.Fatalf("Len %d, want %d", a.Len(), len(final()))
	}
	for _, f := range final() {
		got, err := a.Response(f.url)
		if err != nil || string(got) != f.block {
			t.Errorf("%s: %q, %v", f.url, trim(got), err)
		}
	}
}

// TestLastWinsAcrossFiles checks that a later file replaces an earlier one.
func TestLastWinsAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	first, _ := writeWARC(t, dir, "1.warc", true)
	w := gowarc.NewWarcFileWriter(gowarc.WithFileNameGenerator(fixedName{dir, "2.warc"}), gowarc.WithMaxFileSize(0))
	block := withLength("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n", "recrawled")
	for _, r := range w.Write(record(t, gowarc.Response, "http://a.example/", "application/http; msgtype=response", block)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a := open(t, first, filepath.Join(dir, "2.warc.gz"))
	got, err := a.Response("http://a.example/")
	if err != nil || string(got) != block {
		t.Errorf("got %q, %v; want %q", got, err, block)
	}
	if a.Len() != len(final()) {
		t.Errorf("Len %d, want %d", a.Len(), len(final()))
	}
}

// rawRequest writes req to c and reads n bytes of response from br.
func rawRequest(t *testing.T, c net.Conn, br *bufio.Reader, req string, n int) string {
	t.Helper()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		t.Fatalf("%q: read %q: %v", req, buf, err)
	}
	return string(buf)
}

func dialRaw(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func TestServeRaw(t *testing.T) {
	path, _ := writeWARC(t, t.TempDir(), "x.warc", true)
	a := open(t, path)
	srv, _, conns := server(t, a, nil)
	c, br := dialRaw(t, srv.Listener.Addr().String())
	byURL := map[string]fixture{}
	for _, f := range final() {
		byURL[f.url] = f
	}
	img, root, chunked := byURL["http://a.example/img.png"], byURL["http://a.example/"], byURL["http://a.example/chunked"]
	missing, empty, closing := byURL["http://B.Example:80/missing"], byURL["http://a.example/empty"], byURL["http://b.example/close"]

	// Verbatim bytes, several requests on one connection, the first two
	// pipelined before the connection is taken over.
	two := "GET /img.png HTTP/1.1\r\nHost: a.example\r\n\r\nGET / HTTP/1.1\r\nHost: A.Example\r\n\r\n"
	if got := rawRequest(t, c, br, two, len(img.block)+len(root.block)); got != img.block+root.block {
		t.Errorf("img + root: got %q", trim([]byte(got)))
	}
	if got := rawRequest(t, c, br, "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", len(root.block)); got != root.block {
		t.Errorf("root: got %q", got)
	}
	// Pipelined requests, one with a body.
	pipelined := "GET /chunked HTTP/1.1\r\nHost: a.example\r\n\r\n" +
		"POST /missing HTTP/1.1\r\nHost: b.example:80\r\nContent-Length: 5\r\n\r\nabcde" +
		"GET /empty HTTP/1.1\r\nHost: a.example\r\n\r\n"
	want := chunked.block + missing.block + empty.block
	if got := rawRequest(t, c, br, pipelined, len(want)); got != want {
		t.Errorf("pipelined: got %q\nwant %q", got, want)
	}
	// An unknown URL on the taken-over connection.
	if _, err := io.WriteString(c, "GET /nope HTTP/1.1\r\nHost: a.example\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 404 || !strings.Contains(string(body), "not found") || resp.Close {
		t.Errorf("unknown: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	// A HEAD request gets the header section only.
	head := img.block[:strings.Index(img.block, "\r\n\r\n")+4]
	if got := rawRequest(t, c, br, "HEAD /img.png HTTP/1.1\r\nHost: a.example\r\n\r\n", len(head)); got != head {
		t.Errorf("HEAD: got %q", got)
	}
	// A response without length is followed by the end of the connection.
	if _, err := io.WriteString(c, "GET /close HTTP/1.1\r\nHost: b.example\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != closing.block {
		t.Errorf("close: got %q", rest)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestServeRawClose checks the Connection: close and HTTP/1.0 requests end
// the connection after a verbatim response.
func TestServeRawClose(t *testing.T) {
	path, _ := writeWARC(t, t.TempDir(), "x.warc", true)
	a := open(t, path)
	srv, _, _ := server(t, a, nil)
	root := final()[0]
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.0\r\nHost: a.example\r\n\r\n",
	} {
		c, br := dialRaw(t, srv.Listener.Addr().String())
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(br)
		if err != nil || string(got) != root.block {
			t.Errorf("%q: got %q, %v", req, got, err)
		}
	}
}

func TestKeepAlive(t *testing.T) {
	path, _ := writeWARC(t, t.TempDir(), "x.warc", true)
	a := open(t, path)
	var seen atomic.Int32
	// wrapped hides Hijack the way a status-recording middleware does.
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		a.ServeHTTP(unwrapper{w}, r)
	})
	for name, h := range map[string]http.Handler{"verbatim": a, "parsed": http.HandlerFunc(a.ServeParsed), "wrapped": wrapped} {
		t.Run(name, func(t *testing.T) {
			seen.Store(0)
			_, c, conns := server(t, h, nil)
			requests := int32(0)
			// The client pools connections per host: after the first round
			// there is one per host, later rounds reuse them.
			var first int32
			for round := range 3 {
				if round == 1 {
					first = conns.Load()
				}
				for _, f := range final() {
					if f.url == "http://b.example/close" {
						continue
					}
					resp, body := get(t, c, http.MethodGet, httpURL(f))
					checkResponse(t, f, resp, body)
					requests++
				}
			}
			if name == "wrapped" && seen.Load() != requests {
				t.Errorf("wrapper saw %d of %d requests", seen.Load(), requests)
			}
			if n := conns.Load(); n != first || n > 4 {
				t.Errorf("%d connections, %d after the first round", n, first)
			}
		})
	}
}

func TestServeParsed(t *testing.T) {
	path, _ := writeWARC(t, t.TempDir(), "x.warc", true)
	a := open(t, path)
	for _, f := range final() {
		// A ResponseRecorder cannot be hijacked: ServeHTTP falls back to
		// ServeParsed.
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, httpURL(f), nil))
		checkResponse(t, f, rec.Result(), rec.Body.Bytes())
		if rec.Result().Header.Get("Date") != "" {
			t.Errorf("%s: Date header added", f.url)
		}
	}
	rec := httptest.NewRecorder()
	a.ServeParsed(rec, httptest.NewRequest(http.MethodGet, "http://a.example/", nil))
	if got := rec.Header().Get("X-Custom"); got != "First" {
		t.Errorf("X-Custom %q", got)
	}
	rec = httptest.NewRecorder()
	a.ServeParsed(rec, httptest.NewRequest(http.MethodGet, "http://a.example/nope", nil))
	if rec.Code != 404 {
		t.Errorf("unknown: %d", rec.Code)
	}
}

func TestConcurrent(t *testing.T) {
	path, _ := writeWARC(t, t.TempDir(), "x.warc", true)
	a := open(t, path)
	_, c, _ := server(t, a, nil)
	fxs := final()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				f := fxs[(g+i)%len(fxs)]
				resp, err := c.Get(httpURL(f))
				if err != nil {
					t.Error(err)
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != f.status || string(body) != f.body {
					t.Errorf("%s: %d %q %v", f.url, resp.StatusCode, trim(body), err)
					return
				}
				if got, err := a.Response(f.url); err != nil || string(got) != f.block {
					t.Errorf("Response(%s): %v", f.url, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	gz, gzOffsets := writeWARC(t, dir, "good.warc", true)
	plain, plainOffsets, plainEnds := writeWARCEnds(t, dir, "good-plain.warc", false)
	gzData, _ := os.ReadFile(gz)
	plainData, _ := os.ReadFile(plain)

	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o666); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

	missing := filepath.Join(dir, "missing.warc.gz")
	_, err := Open(gz, missing)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("directory: %v", err)
	}

	garbage := []byte("this is not a WARC file\n")
	for i := range 256 {
		garbage = append(garbage, byte(i))
	}
	cut := gzOffsets[3] + 30      // inside the gzip member of the fourth response
	plainCut := plainEnds[3] - 10 // in the fourth response's block
	cases := []struct {
		name   string
		data   []byte
		offset int64
	}{
		{"garbage.warc.gz", garbage, 0},
		{"garbage.warc", garbage[:3], 0},
		{"truncated.warc.gz", gzData[:cut], gzOffsets[3]},
		{"truncated.warc", plainData[:plainCut], plainOffsets[3]},
		{"junk-between.warc.gz", cat(gzData[:gzOffsets[2]], garbage, gzData[gzOffsets[2]:]), gzOffsets[2]},
		{"junk-between.warc", cat(plainData[:plainOffsets[2]], []byte("junk"), plainData[plainOffsets[2]:]), plainOffsets[2]},
		{"junk-after.warc.gz", cat(gzData, []byte("xyz")), int64(len(gzData))},
		{"bad-crc.warc.gz", cat(gzData[:gzOffsets[1]-6], []byte{0, 0}, gzData[gzOffsets[1]-4:]), 0},
	}
	for _, c := range cases {
		p := write(c.name, c.data)
		a, err := Open(p)
		if err == nil {
			_ = a.Close()
			t.Errorf("%s: no error", c.name)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		if c.name == "bad-crc.warc.gz" {
			// The member before the second response's is a request record.
			if !strings.Contains(err.Error(), p+": record at offset ") || !errors.Is(err, gzip.ErrChecksum) {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		want := fmt.Sprintf("replay: %s: record at offset %d: ", p, c.offset)
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %q, want prefix %q", c.name, err, want)
		}
	}

	// Blank lines between records and an empty file are fine.
	a := open(t,
		write("blank-lines.warc", cat([]byte("\r\n"), plainData[:plainOffsets[2]], []byte("\r\n\n"), plainData[plainOffsets[2]:], []byte("\r\n"))),
		write("empty.warc", nil))
	if a.Len() != len(final()) {
		t.Errorf("blank lines: Len %d", a.Len())
	}
}

func TestClose(t *testing.T) {
	path, _ := writeWARC(t, t.TempDir(), "x.warc", true)
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, _, _ := server(t, a, nil)
	// A connection that ServeHTTP took over is closed by Close.
	c, br := dialRaw(t, srv.Listener.Addr().String())
	root := final()[0]
	if got := rawRequest(t, c, br, "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", len(root.block)); got != root.block {
		t.Fatalf("got %q", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("connection still open after Close: %d, %v", n, err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := a.Response(root.url); !errors.Is(err, ErrClosed) {
		t.Errorf("Response after Close: %v", err)
	}
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, root.url, nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("ServeHTTP after Close: %d", rec.Code)
	}
}

func TestIdleTimeout(t *testing.T) {
	path, _ := writeWARC(t, t.TempDir(), "x.warc", true)
	a := open(t, path)
	srv, _, _ := server(t, a, func(s *http.Server) { s.IdleTimeout = 100 * time.Millisecond })
	c, br := dialRaw(t, srv.Listener.Addr().String())
	root := final()[0]
	rawRequest(t, c, br, "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", len(root.block))
	start := time.Now()
	if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("read %d, %v", n, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("closed after %v", d)
	}
}

func TestCanonical(t *testing.T) {
	for _, c := range []struct{ in, key, host string }{
		{"http://Example.COM", "http://example.com/", "example.com"},
		{"HTTP://example.com:80/A?b=C#frag", "http://example.com/A?b=C", "example.com"},
		{"https://example.com:443?q", "https://example.com/?q", "example.com"},
		{"http://example.com:8080/x", "http://example.com:8080/x", "example.com"},
		{"<http://user:pw@example.com/>", "http://example.com/", "example.com"},
		{"http://[::1]:80/", "http://[::1]/", "::1"},
		{"http://[::1]:8080/", "http://[::1]:8080/", "::1"},
	} {
		key, host, ok := canonical(c.in)
		if !ok || key != c.key || host != c.host {
			t.Errorf("canonical(%q) = %q, %q, %v; want %q, %q", c.in, key, host, ok, c.key, c.host)
		}
	}
	for _, in := range []string{"", "example.com/", "ftp://example.com/", "http:///path", "dns:example.com"} {
		if key, _, ok := canonical(in); ok {
			t.Errorf("canonical(%q) = %q, want not ok", in, key)
		}
	}
}

// unwrapper wraps a ResponseWriter without exposing Hijack, but with Unwrap
// for http.ResponseController.
type unwrapper struct{ http.ResponseWriter }

func (u unwrapper) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// writeRecords writes recs to dir/name.gz and returns the path.
func writeRecords(t *testing.T, dir, name string, recs ...gowarc.WarcRecord) string {
	t.Helper()
	w := gowarc.NewWarcFileWriter(gowarc.WithFileNameGenerator(fixedName{dir, name}), gowarc.WithMaxFileSize(0))
	for _, r := range w.Write(recs...) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name+".gz")
}

// TestFraming checks that stored responses whose length a client cannot
// find where the stored bytes end are sent verbatim and then the connection
// is closed, and that well-framed ones keep it open.
func TestFraming(t *testing.T) {
	const ct = "application/http;msgtype=response"
	closing := map[string]string{
		"/long":      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nmore than three",
		"/short":     "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
		"/badchunk":  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nnot chunked at all",
		"/extra":     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nextra",
		"/http10":    "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"/nolength":  "HTTP/1.1 200 OK\r\n\r\nno length",
		"/nocontent": "HTTP/1.1 204 No Content\r\n\r\nbody of a 204",
	}
	trailer := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: 1\r\n\r\n"
	var recs []gowarc.WarcRecord
	for path, block := range closing {
		recs = append(recs, record(t, gowarc.Response, "http://d.example"+path, ct, block))
	}
	recs = append(recs, record(t, gowarc.Response, "http://d.example/trailer", ct, trailer))

	// A revisit record does not replace the response.
	rb := gowarc.NewRecordBuilder(gowarc.Revisit)
	rb.AddWarcHeader(gowarc.WarcTargetURI, "http://d.example/trailer")
	rb.AddWarcHeaderTime(gowarc.WarcDate, time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))
	rb.AddWarcHeader(gowarc.ContentType, ct)
	rb.AddWarcHeader(gowarc.WarcProfile, gowarc.ProfileIdenticalPayloadDigestV1_1)
	rb.AddWarcHeader(gowarc.WarcRefersToTargetURI, "http://d.example/trailer")
	rb.AddWarcHeader(gowarc.WarcRefersToDate, "2024-05-06T07:08:09Z")
	_, _ = rb.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n")
	revisit, _, err := rb.Build()
	if err != nil {
		t.Fatal(err)
	}
	recs = append(recs, revisit)

	a := open(t, writeRecords(t, t.TempDir(), "framing.warc", recs...))
	if a.Len() != len(closing)+1 {
		t.Fatalf("Len %d", a.Len())
	}
	srv, _, _ := server(t, a, nil)
	addr := srv.Listener.Addr().String()
	for path, block := range closing {
		c, br := dialRaw(t, addr)
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: d.example\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(br)
		if err != nil || string(got) != block {
			t.Errorf("%s: got %q, %v; want %q and EOF", path, got, err, block)
		}
	}
	c, br := dialRaw(t, addr)
	for range 2 {
		if got := rawRequest(t, c, br, "GET /trailer HTTP/1.1\r\nHost: d.example\r\n\r\n", len(trailer)); got != trailer {
			t.Errorf("trailer: got %q", got)
		}
	}
}

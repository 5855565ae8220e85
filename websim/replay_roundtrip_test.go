package websim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/websim/synth"
)

type fixedName struct{ dir, name string }

func (g fixedName) NewWarcfileName() (string, string) { return g.dir, g.name }

func warcRecord(t *testing.T, typ gowarc.RecordType, url, contentType string, block []byte) gowarc.WarcRecord {
	t.Helper()
	rb := gowarc.NewRecordBuilder(typ)
	rb.AddWarcHeader(gowarc.WarcTargetURI, url)
	rb.AddWarcHeaderTime(gowarc.WarcDate, time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC))
	rb.AddWarcHeader(gowarc.ContentType, contentType)
	if _, err := rb.Write(block); err != nil {
		t.Fatal(err)
	}
	r, _, err := rb.Build()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReplayRoundTrip records responses of a synthetic web into a gzip WARC
// with gowarc, replays the WARC, and checks that every response comes back
// byte for byte, on keep-alive connections, with visitor statistics.
func TestReplayRoundTrip(t *testing.T) {
	src := startWeb(t, Options{Web: synth.Options{Hosts: 12, Pages: 6, Seed: 21, IPs: 3, Profile: synth.Realistic}})
	web := src.Web()
	type rec struct{ host, path string }
	var recs []rec
	for _, h := range web.Hosts() {
		for _, p := range []string{"/", "/robots.txt", "/p/1.html", "/p/2.html", "/missing/0", "/r/1"} {
			recs = append(recs, rec{h.Name, p})
		}
	}
	dir := t.TempDir()
	w := gowarc.NewWarcFileWriter(gowarc.WithFileNameGenerator(fixedName{dir, "crawl.warc"}), gowarc.WithCompression(true), gowarc.WithMaxFileSize(0))
	want := map[string][]byte{}
	for _, r := range recs {
		raw := rawKeepAlive(t, src, r.host, r.path)
		url := fmt.Sprintf("http://%s:%d%s", r.host, src.Port(), r.path)
		req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", r.path, r.host, src.Port())
		for _, res := range w.Write(warcRecord(t, gowarc.Request, url, "application/http;msgtype=request", []byte(req)),
			warcRecord(t, gowarc.Response, url, "application/http;msgtype=response", raw)) {
			if res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		want[url] = raw
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	port := src.Port()
	src.Close() // the replay takes the same port, so URLs match

	rs, err := StartReplay(ReplayOptions{WARCs: []string{filepath.Join(dir, "crawl.warc.gz")}, IPs: 4, Port: port, AdminAddr: "127.0.0.1:0", DNSAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for url, body := range want {
		host := strings.Split(strings.TrimPrefix(url, "http://"), ":")[0]
		path := url[strings.Index(url[7:], "/")+7:]
		if got := rawGet(t, rs, host, path); !bytes.Equal(got, body) {
			t.Fatalf("%s: replayed bytes differ\n got %.200q\nwant %.200q", url, got, body)
		}
	}
	// Keep-alive: three requests on one connection.
	h0 := web.Hosts()[0].Name
	addr, _ := rs.Addr(h0)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i, p := range []string{"/", "/p/1.html", "/nope"} {
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", p, h0, port)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on one connection: %v", i, err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if wantCode := map[bool]int{true: 404, false: 200}[p == "/nope"]; resp.StatusCode != wantCode {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
	}
	snap := fetchStats(t, rs)
	if hs := snap.Hosts[h0]; hs == nil || hs.Requests != int64(6+3) || hs.Statuses[404] != 2 {
		t.Fatalf("replay stats for %s: %+v", h0, hs)
	}
}

// rawKeepAlive sends one keep-alive request and returns the response's bytes
// exactly as they came.
func rawKeepAlive(t *testing.T, s *Server, host, path string) []byte {
	t.Helper()
	addr, _ := s.Addr(host)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", path, host, s.Port())
	var raw bytes.Buffer
	resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(c, &raw)), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return raw.Bytes()
}

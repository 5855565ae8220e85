package main

import (
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/warcfile"
	"github.com/meridian-crawler/meridian/fetcher/warcfile/cdxj"
	gowarc "github.com/nlnwa/gowarc/v3"
)

// runWARCIndex runs `site warc-index args...`.
func runWARCIndex(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut, nil)
	root.SetArgs(append([]string{"warc-index"}, args...))
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// gowarcFile writes a WARC file with gowarc's own writer (another tool's
// file: its names, its framing, its digests), compressed one gzip member
// per record or not at all, and returns its path and what it wrote: the
// target URI of each indexed record.
func gowarcFile(t *testing.T, dir string, compress bool) (string, []string) {
	t.Helper()
	w := gowarc.NewWarcFileWriter(
		gowarc.WithCompression(compress),
		gowarc.WithMaxConcurrentWriters(1),
		gowarc.WithFileNameGenerator(&gowarc.PatternNameGenerator{Directory: dir, Prefix: fmt.Sprintf("other-%v-", compress)}),
		gowarc.WithWarcInfoFunc(func(rb gowarc.WarcRecordBuilder) error {
			_, err := rb.WriteString("software: another tool\r\n")
			return err
		}),
		gowarc.WithRecordOptions(gowarc.WithAddMissingDigest(true), gowarc.WithDefaultDigestAlgorithm("sha1")),
	)
	date := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	build := func(typ gowarc.RecordType, uri, ct, block string) gowarc.WarcRecord {
		rb := gowarc.NewRecordBuilder(typ, gowarc.WithAddMissingDigest(true), gowarc.WithDefaultDigestAlgorithm("sha1"), gowarc.WithAddMissingRecordId(true))
		rb.AddWarcHeader(gowarc.WarcTargetURI, uri)
		rb.AddWarcHeaderTime(gowarc.WarcDate, date)
		rb.AddWarcHeader(gowarc.ContentType, ct)
		rb.WriteString(block)
		r, _, err := rb.Build()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var uris []string
	for i := range 4 {
		u := fmt.Sprintf("https://WWW.Other.example:443/Page%d?z=1&a=%d", i, i)
		body := strings.Repeat(fmt.Sprintf("<p>page %d</p>", i), 50+i)
		req := build(gowarc.Request, u, "application/http;msgtype=request", "GET /Page HTTP/1.1\r\nHost: www.other.example\r\n\r\n")
		resp := build(gowarc.Response, u, "application/http;msgtype=response", "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"+body)
		res := build(gowarc.Resource, u+"&res", "text/plain", "resource "+body)
		for _, r := range w.Write(req, resp, res) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		uris = append(uris, u, u+"&res")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	m, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("other-%v-*", compress)))
	if len(m) != 1 {
		t.Fatalf("gowarc wrote %v", m)
	}
	return m[0], uris
}

// checkCDXJ checks the indexes of the WARC file path: sorted lines, each
// pointing at a record gowarc reads back with the line's URL and payload
// digest (the record's, or computed from its payload, without "sha1:"),
// metadata records in the side index and the others in the replay index;
// it returns the URLs of the replay index's lines, then of the side
// index's.
func checkCDXJ(t *testing.T, path string) (captures, meta []string) {
	t.Helper()
	captures = checkCDXJFile(t, path, path+".cdxj", false)
	meta = checkCDXJFile(t, path, path+".cdxj-meta", true)
	return captures, meta
}

// checkCDXJFile checks the index at index of the WARC file path (see
// checkCDXJ): the side index if meta.
func checkCDXJFile(t *testing.T, path, index string, meta bool) []string {
	t.Helper()
	data, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-1]
	for i, raw := range lines {
		if i > 0 && bytes.Compare(lines[i-1], raw) >= 0 {
			t.Errorf("%s: lines out of order:\n%s%s", path, lines[i-1], raw)
		}
		l, err := cdxj.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if l.Filename != filepath.Base(path) || l.Key != cdxj.SURT(l.URL) {
			t.Errorf("line %+v", l)
		}
		r, err := gowarc.NewWarcFileReader(path, l.Offset)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("%s: record at %d: %v", path, l.Offset, err)
		}
		h := rec.WarcRecord.WarcHeader()
		digest := h.Get(gowarc.WarcPayloadDigest)
		if digest == "" {
			var pr io.Reader
			if pb, ok := rec.WarcRecord.Block().(gowarc.PayloadBlock); ok {
				pr, err = pb.PayloadBytes()
			} else {
				pr, err = rec.WarcRecord.Block().RawBytes()
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(pr)
			sum := sha1.Sum(b)
			digest = "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
		}
		if rec.Offset != l.Offset || rec.Size != l.Length || h.Get(gowarc.WarcTargetURI) != l.URL || "sha1:"+l.Digest != digest {
			t.Errorf("line %+v: record at %d of %d bytes, of %s, digest %s", l, rec.Offset, rec.Size, h.Get(gowarc.WarcTargetURI), digest)
		}
		if isMeta := rec.WarcRecord.Type() == gowarc.Metadata; isMeta != meta {
			t.Errorf("%s: line %+v of a %v record", index, l, rec.WarcRecord.Type())
		}
		rec.Close()
		r.Close()
		urls = append(urls, l.URL)
	}
	return urls
}

// TestWARCIndexCommand indexes WARC files of another tool (gowarc's writer,
// compressed per record and uncompressed) and of ours, leaves an open file
// alone, and reports a broken file while still indexing the others.
func TestWARCIndexCommand(t *testing.T) {
	dir := t.TempDir()
	gz, gzURIs := gowarcFile(t, dir, true)
	plain, plainURIs := gowarcFile(t, dir, false)
	if !strings.HasSuffix(gz, ".warc.gz") || !strings.HasSuffix(plain, ".warc") {
		t.Fatalf("gowarc's names %s, %s", gz, plain)
	}
	ww, err := warcfile.Open(warcfile.Options{Dir: dir, Prefix: "ours"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ww.Write(&warcfile.Exchange{URL: "http://a.test/", Response: []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"), Body: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	if err := ww.Metadata("http://a.test/", time.Time{}, [][2]string{{"simhash", "0123456789abcdef"}}); err != nil {
		t.Fatal(err)
	}
	if err := ww.Close(); err != nil {
		t.Fatal(err)
	}
	ours, _ := filepath.Glob(filepath.Join(dir, "ours-*.warc.gz"))
	os.WriteFile(filepath.Join(dir, "live.warc.gz.open"), []byte("being written"), 0o644)

	stdout, stderr, err := runWARCIndex(t, dir)
	if err != nil {
		t.Fatalf("warc-index: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "skipping "+filepath.Join(dir, "live.warc.gz.open")) {
		t.Errorf("no message about the open file: %q", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "live.warc.gz.open.cdxj")); err == nil {
		t.Error("an open file was indexed")
	}
	for _, c := range []struct {
		path       string
		uris, meta []string
	}{{gz, gzURIs, nil}, {plain, plainURIs, nil}, {ours[0], []string{"http://a.test/"}, []string{"http://a.test/"}}} {
		got, meta := checkCDXJ(t, c.path)
		if len(got) != len(c.uris) || len(meta) != len(c.meta) {
			t.Errorf("%s: lines of %v and %v, want one per record of %v and %v", c.path, got, meta, c.uris, c.meta)
		}
		if !strings.Contains(stdout, fmt.Sprintf("%s.cdxj: %d lines; %s.cdxj-meta: %d lines\n", c.path, len(c.uris), c.path, len(c.meta))) {
			t.Errorf("stdout %q does not name %s", stdout, c.path)
		}
	}

	// A broken file: cut inside its third record. The others are
	// indexed all the same; the error names the file and the offset.
	data, _ := os.ReadFile(plain)
	r, _ := gowarc.NewWarcFileReader(plain, 0)
	var third gowarc.Record
	for i := range 3 {
		if third, err = r.Next(); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			third.Close()
		}
	}
	third.Close()
	r.Close()
	broken := filepath.Join(dir, "broken.warc")
	os.WriteFile(broken, data[:third.Offset+third.Size/2], 0o644)
	os.Remove(gz + ".cdxj")
	stdout, stderr, err = runWARCIndex(t, dir)
	if err == nil || !strings.Contains(err.Error(), "1 of 4") {
		t.Fatalf("warc-index with a broken file: %v", err)
	}
	if want := fmt.Sprintf("%s: cdxj: read record at offset %d of broken.warc", broken, third.Offset); !strings.Contains(stderr, want) {
		t.Errorf("stderr %q lacks %q", stderr, want)
	}
	if _, err := os.Stat(broken + ".cdxj"); err == nil {
		t.Error("the broken file got an index")
	}
	checkCDXJ(t, gz)
	if !strings.Contains(stdout, gz+".cdxj: ") {
		t.Errorf("stdout %q", stdout)
	}

	if _, _, err := runWARCIndex(t, filepath.Join(dir, "missing")); err == nil {
		t.Error("missing directory accepted")
	}
	if _, _, err := runWARCIndex(t); err == nil {
		t.Error("no DIR accepted")
	}
}

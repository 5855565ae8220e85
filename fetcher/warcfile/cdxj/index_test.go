package cdxj

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// sha1Digest is the WARC digest of b: "sha1:" and its base32 SHA-1.
func sha1Digest(b string) string { return "sha1:" + lineDigest(b) }

// lineDigest is the digest of b as an index line has it, without "sha1:".
func lineDigest(b string) string {
	s := sha1.Sum([]byte(b))
	return base32.StdEncoding.EncodeToString(s[:])
}

// record returns a WARC/1.1 record with the header fields (CRLF-terminated
// lines) and block.
func record(typ, uri, fields, block string) string {
	h := "WARC/1.1\r\nWARC-Type: " + typ + "\r\nWARC-Record-ID: <urn:uuid:" + fmt.Sprintf("%08x", len(uri)+len(block)) + "-0000-4000-8000-000000000000>\r\nWARC-Date: 2026-03-04T05:06:07Z\r\n"
	if uri != "" {
		h += "WARC-Target-URI: " + uri + "\r\n"
	}
	return h + fields + "Content-Length: " + fmt.Sprint(len(block)) + "\r\n\r\n" + block + "\r\n\r\n"
}

// handWARC is a WARC of one record of each type, written by hand, and the
// lines (and their kinds) of its records from the third on.
func handWARC() (records []string, want []Line, kinds []Kind) {
	body := "<p>hello</p>"
	resp := "HTTP/1.1 200 OK\r\nContent-Type: Text/HTML ; charset=utf-8\r\n\r\n" + body
	rv := "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"
	fields := "near-duplicate-of: http://example.com/a\r\nsimhash: 0123abcd89ef4567\r\n"
	records = []string{
		record("warcinfo", "", "Content-Type: application/warc-fields\r\n", "software: hand\r\n"),
		record("request", "http://www.Example.com/a?b=1&a=2", "Content-Type: application/http;msgtype=request\r\n", "GET /a?b=1&a=2 HTTP/1.1\r\nHost: www.example.com\r\n\r\n"),
		record("response", "http://www.Example.com/a?b=1&a=2", "Content-Type: application/http;msgtype=response\r\nWARC-Payload-Digest: "+sha1Digest(body)+"\r\n", resp),
		record("revisit", "http://example.com/b", "Content-Type: application/http;msgtype=response\r\nWARC-Profile: http://netpreserve.org/warc/1.1/revisit/server-not-modified\r\n", rv),
		record("resource", "file:///tmp/x.txt", "Content-Type: text/plain\r\n", "plain text"),
		record("metadata", "http://example.com/a", "Content-Type: application/warc-fields\r\n", fields),
		record("resource", "http://example.com/c", "Content-Type: application/warc-fields\r\n", fields),
		record("response", "http://example.com/d", "Content-Type: application/http;msgtype=response\r\nWARC-Payload-Digest: sha256:ABCDEF\r\n", resp),
	}
	want = []Line{
		{Key: "com,example)/a?a=2&b=1", URL: "http://www.Example.com/a?b=1&a=2", Mime: "Text/HTML", Status: "200", Digest: lineDigest(body)},
		{Key: "com,example)/b", URL: "http://example.com/b", Mime: "warc/revisit", Status: "304", Digest: lineDigest("")},
		{Key: ")/tmp/x.txt", URL: "file:///tmp/x.txt", Mime: "text/plain", Digest: lineDigest("plain text")},
		{Key: "com,example)/a", URL: "http://example.com/a", Mime: "application/warc-fields", Digest: lineDigest(fields)},
		{}, // the resource record of warc-fields gets no line
		{Key: "com,example)/d", URL: "http://example.com/d", Mime: "Text/HTML", Status: "200", Digest: "ABCDEF"},
	}
	kinds = []Kind{Capture, Capture, Capture, Meta, None, Capture}
	return records, want, kinds
}

// TestIndexHandWritten indexes the same records uncompressed and one gzip
// member per record, and reads every record back at its line's offset.
func TestIndexHandWritten(t *testing.T) {
	records, want, kinds := handWARC()
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			var data []byte
			var offsets, lengths []int64
			for _, r := range records {
				start := len(data)
				if gz {
					var b bytes.Buffer
					zw := gzip.NewWriter(&b)
					zw.Write([]byte(r))
					zw.Close()
					data = append(data, b.Bytes()...)
				} else {
					data = append(data, r...)
				}
				offsets, lengths = append(offsets, int64(start)), append(lengths, int64(len(data)-start))
			}
			var got []Line
			var gotKinds []Kind
			err := Index(bytes.NewReader(data), "x.warc", func(k Kind, l Line) error {
				got, gotKinds = append(got, l), append(gotKinds, k)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			j := 0
			for i, w := range want {
				if kinds[i] == None {
					continue
				}
				if j >= len(got) {
					t.Fatalf("%d lines, want more: %+v", len(got), got)
				}
				w.Timestamp, w.Filename = "20260304050607", "x.warc"
				w.Offset, w.Length = offsets[i+2], lengths[i+2] // after warcinfo and request
				if got[j] != w || gotKinds[j] != kinds[i] {
					t.Errorf("line %d:\n%v %+v\nwant\n%v %+v", j, gotKinds[j], got[j], kinds[i], w)
				}
				checkAt(t, data, got[j])
				j++
			}
			if j != len(got) {
				t.Fatalf("%d lines, want %d: %+v", len(got), j, got)
			}

			// Cut inside the metadata record: the lines before it, then
			// an error naming the file and the record's offset.
			cut := data[:offsets[5]+lengths[5]/2]
			n := 0
			err = Index(bytes.NewReader(cut), "x.warc", func(Kind, Line) error { n++; return nil })
			if !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d of x.warc", offsets[5])) || n != 3 {
				t.Fatalf("truncated file: %d lines, %v", n, err)
			}
		})
	}
}

// checkAt reads the record at l's offset with gowarc and compares it with l.
func checkAt(t *testing.T, data []byte, l Line) {
	t.Helper()
	r, err := gowarc.NewWarcFileReaderFromStream(bytes.NewReader(data), l.Offset)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatalf("record at %d: %v", l.Offset, err)
	}
	defer rec.Close()
	h := rec.WarcRecord.WarcHeader()
	if rec.Offset != l.Offset || rec.Size != l.Length || h.Get(gowarc.WarcTargetURI) != l.URL {
		t.Errorf("line %+v: record at %d, %d bytes, of %s", l, rec.Offset, rec.Size, h.Get(gowarc.WarcTargetURI))
	}
}

// TestIndexFile: the capture lines in the replay index, sorted, the
// metadata line alone in the side index.
func TestIndexFile(t *testing.T) {
	records, want, kinds := handWARC()
	dir := t.TempDir()
	path := filepath.Join(dir, "x.warc")
	if err := os.WriteFile(path, []byte(strings.Join(records, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := IndexFile(path, "x.warc", path+".cdxj")
	if err != nil || n != (Counts{Captures: 4, Meta: 1}) {
		t.Fatalf("IndexFile = %+v, %v", n, err)
	}
	for _, ix := range []struct {
		path string
		kind Kind
		n    int
	}{{path + ".cdxj", Capture, 4}, {path + ".cdxj-meta", Meta, 1}} {
		data, err := os.ReadFile(ix.path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(string(data), "\n")
		if lines[len(lines)-1] != "" || len(lines)-1 != ix.n {
			t.Fatalf("%s: index %q", ix.path, data)
		}
		for i := 1; i < len(lines)-1; i++ {
			if lines[i-1] >= lines[i] {
				t.Errorf("lines %d and %d out of order:\n%s%s", i-1, i, lines[i-1], lines[i])
			}
		}
		urls := map[string]bool{}
		for _, raw := range lines[:len(lines)-1] {
			l, err := Parse([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			urls[l.URL] = true
		}
		for i, w := range want {
			if kinds[i] == ix.kind && !urls[w.URL] {
				t.Errorf("%s: no line of %s", ix.path, w.URL)
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("files left: %v", ents)
	}
	// A file that does not read: an error, no index.
	bad := filepath.Join(dir, "bad.warc")
	os.WriteFile(bad, []byte("WARC/1.1\r\nWARC-Type: response\r\nContent-Length: 99\r\n\r\nshort"), 0o644)
	if _, err := IndexFile(bad, "bad.warc", bad+".cdxj"); !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), "offset 0 of bad.warc") {
		t.Fatalf("bad file: %v", err)
	}
	for _, p := range []string{bad + ".cdxj", MetaPath(bad + ".cdxj")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("index of a bad file written: %v", err)
		}
	}
}

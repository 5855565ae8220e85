package cdxj

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestLineLayout pins the bytes of a line: those cdxj-indexer writes for
// the same record (Python's json.dumps).
func TestLineLayout(t *testing.T) {
	tests := []struct {
		name string
		l    Line
		want string
	}{
		{"response", Line{Key: "com,example)/", Timestamp: "20260304050607", URL: "http://example.com/", Mime: "text/html", Status: "200", Digest: "sha1:AAAA", Length: 1234, Offset: 0, Filename: "a.warc.gz"},
			`com,example)/ 20260304050607 {"url": "http://example.com/", "mime": "text/html", "status": "200", "digest": "sha1:AAAA", "length": "1234", "offset": "0", "filename": "a.warc.gz"}` + "\n"},
		{"metadata: no status", Line{Key: "com,example)/", Timestamp: "20260304050607", URL: "http://example.com/", Mime: "application/warc-fields", Digest: "sha1:B", Length: 5, Offset: 77, Filename: "a.warc.gz"},
			`com,example)/ 20260304050607 {"url": "http://example.com/", "mime": "application/warc-fields", "digest": "sha1:B", "length": "5", "offset": "77", "filename": "a.warc.gz"}` + "\n"},
		{"escapes", Line{Key: "k", Timestamp: "1", URL: "http://e.com/\"q\"\\é😀\x01\x7f", Length: 1, Offset: 2, Filename: "f\n"},
			`k 1 {"url": "http://e.com/\"q\"\\\u00e9\ud83d\ude00\u0001\u007f", "length": "1", "offset": "2", "filename": "f\n"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(tt.l.Append(nil))
			if got != tt.want {
				t.Fatalf("line\n%s\nwant\n%s", got, tt.want)
			}
			back, err := Parse([]byte(got))
			if err != nil {
				t.Fatal(err)
			}
			if back != tt.l {
				t.Fatalf("parsed back %+v, want %+v", back, tt.l)
			}
		})
	}
}

func TestTimestamp(t *testing.T) {
	ts := time.Date(2026, 3, 4, 5, 6, 7, 999, time.FixedZone("X", 3600))
	if got := Timestamp(ts); got != "20260304040607" {
		t.Fatalf("Timestamp = %s", got)
	}
	for in, want := range map[string]string{
		"2026-03-04T05:06:07Z":        "20260304050607",
		"2026-03-04T05:06:07.123456Z": "20260304050607",
		"2026-03-04T06:06:07+01:00":   "20260304050607",
		"2026-03-04":                  "20260304000000",
	} {
		if got := warcDateTimestamp(in); got != want {
			t.Errorf("warcDateTimestamp(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"key",
		"key 2026",
		"key 2026x {}",
		`key 2026 {"length": "1"}`,
		`key 2026 {"length": "-1", "offset": "0"}`,
		`key 2026 {"length": "1", "offset": "x"}`,
		`key 2026 {"length": 1, "offset": 2`,
		`key 2026 []`,
	} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax", in, err)
		}
	}
	l, err := Parse([]byte(`k 20260304050607 {"url": "u", "length": 12, "offset": 34, "status": 200, "extra": [1]}`))
	if err != nil || l.Length != 12 || l.Offset != 34 || l.Status != "200" || l.URL != "u" {
		t.Fatalf("numbers: %+v, %v", l, err)
	}
}

// FuzzParse: any input parses or fails with ErrSyntax; what parses comes
// back the same from its own line.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`com,example)/ 20260304050607 {"url": "http://example.com/", "mime": "text/html", "status": "200", "digest": "sha1:AAAA", "length": "1234", "offset": "0", "filename": "a.warc.gz"}`))
	f.Add([]byte(`k 1 {"url": "\u00e9\ud83d\ude00", "length": 1, "offset": 2}`))
	f.Add([]byte("k 1 {}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		l, err := Parse(in)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) = %v, not ErrSyntax", in, err)
			}
			return
		}
		if strings.ContainsAny(l.Key, " \n") || strings.ContainsAny(l.Timestamp, " \n") {
			return // a key with a newline cannot be written back as one line
		}
		for _, s := range []string{l.URL, l.Mime, l.Status, l.Digest, l.Filename} {
			if !utf8.ValidString(s) {
				return // written back as U+FFFD
			}
		}
		again, err := Parse(l.Append(nil))
		if err != nil || again != l {
			t.Fatalf("Parse(%q) = %+v; its line %q parses as %+v, %v", in, l, l.Append(nil), again, err)
		}
	})
}

// BenchmarkAppendLine measures the line of one record: its key and its
// JSON, appended to a reused buffer.
func BenchmarkAppendLine(b *testing.B) {
	l := Line{Timestamp: "20260304050607", URL: "http://www.h1.fr.test/p/1.html?b=2&a=1", Mime: "text/html", Status: "200",
		Digest: "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ", Length: 4321, Offset: 123456789, Filename: "meridian-eu-1-20260304050607-00001-1234.warc.gz"}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendSURT(buf[:0], l.URL)
		buf = append(buf, ' ')
		buf = append(buf, l.Timestamp...)
		buf = l.AppendHead(buf)
		buf = AppendTail(buf, l.Filename)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/line")
}

func TestStatusOf(t *testing.T) {
	for in, want := range map[string]string{
		"HTTP/1.1 200 OK\r\n":          "200",
		"HTTP/1.0 304\r\n":             "304",
		"HTTP/2 404 Not Found\r\nX: y": "404",
		"HTTP/1.1 20 OK\r\n":           "",
		"HTTP/1.1 2000 OK\r\n":         "",
		"HTTP/1.1 abc OK\r\n":          "",
		"GET / HTTP/1.1\r\n":           "",
		"HTTP/1.1 200":                 "200",
		"":                             "",
	} {
		if got := StatusOf([]byte(in)); got != want {
			t.Errorf("StatusOf(%q) = %q, want %q", in, got, want)
		}
	}
}

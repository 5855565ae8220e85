package warcfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/meridian-crawler/meridian/fetcher/warcfile/cdxj"
	gowarc "github.com/nlnwa/gowarc/v3"
)

// checkIndex checks the indexes of every WARC file in dir and returns the
// number of lines in both: each line points at a record that gowarc reads
// back under strict validation with the line's URL, key, timestamp and
// payload digest (without its "sha1:"); every response and revisit record
// has its line in the replay index, every metadata record in the side
// index, and no record a line in the other; the lines are sorted, and are
// the bytes cdxj.IndexFile makes from the WARC file alone. No partial index
// is left.
func checkIndex(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, ent := range ents {
		name := ent.Name()
		switch {
		case strings.HasSuffix(name, openSuffix) || strings.Contains(name, ".tmp"):
			t.Fatalf("%s left in %s", name, dir)
		case !strings.HasSuffix(name, ".warc.gz"):
			continue
		}
		path := filepath.Join(dir, name)
		rebuilt := filepath.Join(t.TempDir(), name+indexSuffix)
		if _, err := cdxj.IndexFile(path, name, rebuilt); err != nil {
			t.Fatal(err)
		}
		at := map[int64]cdxj.Kind{}
		for _, ix := range []struct {
			suffix, rebuilt string
			kind            cdxj.Kind
		}{{indexSuffix, rebuilt, cdxj.Capture}, {metaSuffix, cdxj.MetaPath(rebuilt), cdxj.Meta}} {
			data, err := os.ReadFile(path + ix.suffix)
			if err != nil {
				t.Fatalf("%s: no index: %v", name, err)
			}
			lines := bytes.SplitAfter(data, []byte("\n"))
			if len(lines[len(lines)-1]) != 0 {
				t.Fatalf("%s: index does not end with a newline", name+ix.suffix)
			}
			lines = lines[:len(lines)-1]
			for i, raw := range lines {
				if i > 0 && bytes.Compare(lines[i-1], raw) >= 0 {
					t.Errorf("%s: lines %d and %d out of order:\n%s%s", name+ix.suffix, i-1, i, lines[i-1], raw)
				}
				l, err := cdxj.Parse(raw)
				if err != nil {
					t.Fatalf("%s: line %d: %v", name+ix.suffix, i, err)
				}
				if l.Filename != name {
					t.Errorf("%s: line names file %q", name+ix.suffix, l.Filename)
				}
				checkLine(t, path, l, ix.kind)
				at[l.Offset] = ix.kind
			}
			// The same bytes as an index made from the WARC file alone.
			if want, _ := os.ReadFile(ix.rebuilt); !bytes.Equal(data, want) {
				t.Errorf("%s: index differs from the one made from the file:\n%s\nwant\n%s", name+ix.suffix, data, want)
			}
			total += len(lines)
		}
		// Every indexed record has its line, in its index.
		r, err := gowarc.NewWarcFileReader(path, 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		indexed := 0
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			want := map[gowarc.RecordType]cdxj.Kind{gowarc.Response: cdxj.Capture, gowarc.Revisit: cdxj.Capture, gowarc.Metadata: cdxj.Meta}[rec.WarcRecord.Type()]
			if want != cdxj.None {
				indexed++
			}
			if got := at[rec.Offset]; got != want {
				t.Errorf("%s: %v record at %d of %s: line of kind %v, want %v", name, rec.WarcRecord.Type(), rec.Offset, rec.WarcRecord.WarcHeader().Get(gowarc.WarcTargetURI), got, want)
			}
			rec.Close()
		}
		r.Close()
		if indexed != len(at) {
			t.Errorf("%s: %d indexed records, %d lines", name, indexed, len(at))
		}
	}
	return total
}

// checkLine opens path, reads the record at l.Offset with gowarc under
// strict validation and compares it with l, a line of an index of kind.
func checkLine(t *testing.T, path string, l cdxj.Line, kind cdxj.Kind) {
	t.Helper()
	r, err := gowarc.NewWarcFileReader(path, l.Offset, gowarc.WithStrictValidation())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatalf("%s: record at offset %d: %v", path, l.Offset, err)
	}
	defer rec.Close()
	wr := rec.WarcRecord
	h := wr.WarcHeader()
	if rec.Offset != l.Offset || rec.Size != l.Length {
		t.Errorf("line %+v: record at %d of %d bytes", l, rec.Offset, rec.Size)
	}
	if k := cdxj.KindOf(wr.Type().String(), h.Get(gowarc.ContentType)); k != kind {
		t.Errorf("line %+v: a %v record (%v) in an index of %v", l, wr.Type(), k, kind)
	}
	u := h.Get(gowarc.WarcTargetURI)
	if l.URL != u || l.Key != cdxj.SURT(u) {
		t.Errorf("line %+v: record of %s", l, u)
	}
	if d, _ := time.Parse(time.RFC3339, h.Get(gowarc.WarcDate)); l.Timestamp != cdxj.Timestamp(d) {
		t.Errorf("line %+v: record of %s", l, h.Get(gowarc.WarcDate))
	}
	want := h.Get(gowarc.WarcPayloadDigest)
	switch {
	case want != "":
	case wr.Type() == gowarc.Metadata:
		want = h.Get(gowarc.WarcBlockDigest) // its block is its payload
	case wr.Type() == gowarc.Revisit:
		want = sha1Digest(nil) // no payload
	}
	if l.Digest != strings.TrimPrefix(want, "sha1:") || strings.Contains(l.Digest, ":") {
		t.Errorf("line %+v: digest %q, want %q without its sha1:", l, l.Digest, want)
	}
	wantMime := map[gowarc.RecordType]string{gowarc.Revisit: "warc/revisit", gowarc.Metadata: "application/warc-fields", gowarc.Response: "text/html"}[wr.Type()]
	if l.Mime != wantMime {
		t.Errorf("line %+v: mime, want %q", l, wantMime)
	}
}

// writeMixed writes exchanges of every kind and metadata records from
// several goroutines and returns what it wrote.
func writeMixed(t *testing.T, w *Writer, goroutines, each int) (xs []*Exchange, metas int) {
	t.Helper()
	bodies := pages(t, 20)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				k := g*each + i
				x := exchange(fmt.Sprintf("http://www.h%d.fr.test/p/%d.html?z=%d&a=%d", k%7, k, g, i), bodies[k%len(bodies)], k)
				switch k % 5 {
				case 1:
					notModified(x)
				case 2:
					x.Revisit, x.RefersToDate = RevisitIdenticalPayload, x.Date.Add(-time.Hour)
				}
				if err := w.Write(x); err != nil {
					t.Error(err)
					return
				}
				n := 0
				if k%3 == 0 {
					err := w.Metadata(x.URL, x.Date, [][2]string{{"near-duplicate-of", "http://h1.fr.test/p/0.html"}, {"simhash", fmt.Sprintf("%016x", k)}})
					if err != nil {
						t.Error(err)
						return
					}
					n++
				}
				mu.Lock()
				xs, metas = append(xs, x), metas+n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return xs, metas
}

// TestIndex writes into rotating files with an index and checks every
// index against its file.
func TestIndex(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, Prefix: "ix", MaxSize: 60 << 10, Index: true})
	xs, metas := writeMixed(t, w, 4, 30)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, files := readDir(t, dir, "ix")
	for _, x := range xs {
		checkExchange(t, got, x)
	}
	if len(files) < 3 {
		t.Fatalf("%d files: no rotation", len(files))
	}
	if n := checkIndex(t, dir); n != len(xs)+metas {
		t.Fatalf("%d lines for %d exchanges and %d metadata records", n, len(xs), metas)
	}
	if st := w.Stats(); st.Metadata != int64(metas) {
		t.Fatalf("stats %+v, want %d metadata records", st, metas)
	}
}

// TestIndexOff: without Options.Index there is no index.
func TestIndexOff(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, Prefix: "ix"})
	writeMixed(t, w, 1, 5)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*"+indexSuffix+"*")); len(m) != 0 {
		t.Fatalf("index files without Index: %v", m)
	}
}

// TestIndexWhileOpen: the lines of an open file are in its ".cdxj.open"
// (captures) and ".cdxj-meta.open" (metadata) as soon as Write and
// Metadata return.
func TestIndexWhileOpen(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, Prefix: "ix", Index: true})
	defer w.Close()
	count := func(suffix string) int {
		m, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"+suffix+openSuffix))
		if len(m) != 1 {
			t.Fatalf("open index files %v", m)
		}
		data, _ := os.ReadFile(m[0])
		return bytes.Count(data, []byte("\n"))
	}
	for i := range 3 {
		u := fmt.Sprintf("http://a.test/%d", i)
		if err := w.Write(exchange(u, []byte("<p>x</p>"), i)); err != nil {
			t.Fatal(err)
		}
		if c, m := count(indexSuffix), count(metaSuffix); c != i+1 || m != i {
			t.Fatalf("after %d writes the open indexes have %d and %d lines", i+1, c, m)
		}
		if err := w.Metadata(u, time.Time{}, [][2]string{{"simhash", "1"}}); err != nil {
			t.Fatal(err)
		}
		if c, m := count(indexSuffix), count(metaSuffix); c != i+1 || m != i+1 {
			t.Fatalf("after %d metadata records the open indexes have %d and %d lines", i+1, c, m)
		}
	}
}

// TestMetadata reads metadata records back with gowarc under strict
// validation, and checks the arguments Metadata refuses.
func TestMetadata(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, Prefix: "md", Index: true})
	date := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	fields := [][2]string{{"near-duplicate-of", "http://a.test/x?y=1"}, {"simhash", "0123abcd89ef4567"}, {"note", "tab\there, ünïcode"}}
	if err := w.Metadata("http://a.test/y", date, fields); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		uri    string
		fields [][2]string
	}{
		{"", fields},
		{"http://a.test/a b", fields},
		{"http://a.test/", nil},
		{"http://a.test/", [][2]string{{"", "x"}}},
		{"http://a.test/", [][2]string{{"a:b", "x"}}},
		{"http://a.test/", [][2]string{{"a b", "x"}}},
		{"http://a.test/", [][2]string{{"a", "x\r\nWARC-Type: evil"}}},
	} {
		if err := w.Metadata(bad.uri, date, bad.fields); !errors.Is(err, ErrInvalid) {
			t.Errorf("Metadata(%q, %q) = %v, want ErrInvalid", bad.uri, bad.fields, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	r, err := gowarc.NewWarcFileReader(files[0], 0, gowarc.WithStrictValidation())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Validation) > 0 {
			t.Fatalf("validation %v", rec.Validation)
		}
		wr := rec.WarcRecord
		if _, err := wr.ValidateDigest(); err != nil {
			t.Fatal(err)
		}
		if wr.Type() == gowarc.Metadata {
			n++
			h := wr.WarcHeader()
			if h.Get(gowarc.WarcTargetURI) != "http://a.test/y" || h.Get(gowarc.WarcDate) != "2026-05-06T07:08:09Z" || h.Get(gowarc.ContentType) != "application/warc-fields" {
				t.Errorf("metadata header %v", h)
			}
			raw, err := wr.Block().RawBytes()
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(raw)
			want := "near-duplicate-of: http://a.test/x?y=1\r\nsimhash: 0123abcd89ef4567\r\nnote: tab\there, ünïcode\r\n"
			if string(body) != want {
				t.Errorf("metadata block %q, want %q", body, want)
			}
			wf, ok := wr.Block().(gowarc.WarcFieldsBlock)
			if !ok || wf.WarcFields().Get("simhash") != "0123abcd89ef4567" {
				t.Errorf("block %T does not read as warc-fields", wr.Block())
			}
		}
		rec.Close()
	}
	if n != 1 {
		t.Fatalf("%d metadata records, want 1", n)
	}
	if lines := checkIndex(t, dir); lines != 1 {
		t.Fatalf("%d lines, want 1", lines)
	}
	if st := w.Stats(); st.Metadata != 1 || st.Records != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestIndexRecoveryAfterRename: a crash after a file was renamed but before
// its indexes were leaves "<name>.cdxj.open" and "<name>.cdxj-meta.open",
// or the latter alone; Open builds both indexes from the file. An index
// left without its file goes; a file without any index (one written
// without Options.Index) is left as it is.
func TestIndexRecoveryAfterRename(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, Prefix: "rn", Index: true, MaxSize: 20 << 10})
	writeMixed(t, w, 1, 20)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) < 3 {
		t.Fatalf("files %v", files)
	}
	// File 0: the index was not renamed yet: a partial unsorted one.
	os.Remove(files[0] + indexSuffix)
	os.Remove(files[0] + metaSuffix)
	os.WriteFile(files[0]+indexSuffix+openSuffix, []byte("com,x)/ 2026 {\"url\": \"http://x/\", \"len"), 0o644)
	os.WriteFile(files[0]+metaSuffix+openSuffix, []byte("com,x)/ 2026 {\"url\": \"http://x/\", \"len"), 0o644)
	// File 2: only its side index was left unfinished.
	os.Rename(files[2]+metaSuffix, files[2]+metaSuffix+openSuffix)
	// Orphan indexes.
	os.WriteFile(filepath.Join(dir, "rn-20260101000000-00009-1.warc.gz"+indexSuffix+openSuffix), []byte("x\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "rn-20260101000000-00010-1.warc.gz"+metaSuffix+openSuffix), []byte("x\n"), 0o644)
	// File 1 was written without an index.
	os.Remove(files[1] + indexSuffix)
	os.Remove(files[1] + metaSuffix)

	w = openWriter(t, Options{Dir: dir, Prefix: "rn", Index: true})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{indexSuffix, metaSuffix} {
		if _, err := os.Stat(files[1] + suffix); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a file without an index got one at Open: %v", err)
		}
	}
	os.Rename(files[1], filepath.Join(t.TempDir(), "moved")) // checkIndex wants an index for every file
	checkIndex(t, dir)
	for _, suffix := range []string{indexSuffix, metaSuffix} {
		if _, err := os.Stat(files[0] + suffix); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIndexLiveFileLeftAlone: Open leaves the index of a file that another
// Writer is writing.
func TestIndexLiveFileLeftAlone(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, Prefix: "lv", Index: true})
	if err := w.Write(exchange("http://a.test/", []byte("x"), 0)); err != nil {
		t.Fatal(err)
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*"+indexSuffix+openSuffix))
	if len(m) != 1 {
		t.Fatalf("open index %v", m)
	}
	before, _ := os.ReadFile(m[0])
	w2 := openWriter(t, Options{Dir: dir, Prefix: "lv", Index: true})
	w2.Close()
	if after, err := os.ReadFile(m[0]); err != nil || !bytes.Equal(before, after) {
		t.Fatalf("live index touched: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, dir)
}

// BenchmarkIndex measures the cost of the index: one exchange with a 10 KB
// HTML body (request and response records, one line), with and without
// Options.Index.
func BenchmarkIndex(b *testing.B) {
	for _, index := range []bool{false, true} {
		b.Run(fmt.Sprintf("index=%v", index), func(b *testing.B) {
			w, err := Open(Options{Dir: b.TempDir(), Index: index, Level: gzip.BestSpeed})
			if err != nil {
				b.Fatal(err)
			}
			x := exchange("http://www.h1.fr.test/p/1.html?b=2&a=1", benchBody(b), 1)
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Write(x); err != nil {
					b.Fatal(err)
				}
			}
			reportPerExchange(b)
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

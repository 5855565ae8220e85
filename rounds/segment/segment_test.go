package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// testRecord is record i of a deterministic sequence: an 8-byte index
// followed by i%700 bytes derived from it.
func testRecord(i int) []byte {
	rec := binary.LittleEndian.AppendUint64(nil, uint64(i))
	for j := 0; j < i%700; j++ {
		rec = append(rec, byte(i*31+j))
	}
	return rec
}

// readAll returns the file's records (copied) and Read's other results.
func readAll(t *testing.T, path string) ([][]byte, int64, error) {
	t.Helper()
	var recs [][]byte
	n, tail, err := Read(path, func(rec []byte) error {
		recs = append(recs, bytes.Clone(rec))
		return nil
	})
	if n != len(recs) {
		t.Fatalf("Read reported %d records, called fn %d times", n, len(recs))
	}
	return recs, tail, err
}

func writeFile(t *testing.T, path string, recs [][]byte) {
	t.Helper()
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func equalRecords(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: got %d bytes %q..., want %d bytes", i, len(got[i]), got[i][:min(len(got[i]), 16)], len(want[i]))
		}
	}
}

func TestRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20+3)
	tests := []struct {
		name  string
		recs  [][]byte
		batch bool
	}{
		{name: "empty file"},
		{name: "one empty record", recs: [][]byte{{}}},
		{name: "mixed sizes", recs: [][]byte{[]byte("a"), {}, testRecord(127), testRecord(128), testRecord(699), big}},
		{name: "batch", recs: [][]byte{[]byte("a"), {}, testRecord(300), big}, batch: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "seg")
			w, err := Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.batch {
				err = w.AppendBatch(tc.recs)
			} else {
				for _, r := range tc.recs {
					if err = w.Append(r); err != nil {
						break
					}
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			size := w.Size()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if st, err := os.Stat(path); err != nil || st.Size() != size {
				t.Fatalf("file size %v (%v), Writer.Size %d", st.Size(), err, size)
			}
			got, tail, err := readAll(t, path)
			if err != nil || tail != 0 {
				t.Fatalf("Read: tail %d, err %v", tail, err)
			}
			equalRecords(t, got, tc.recs)
		})
	}
}

func TestCreateExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	writeFile(t, path, nil)
	if _, err := Create(path); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create over an existing file: %v, want ErrExist", err)
	}
}

func TestWriterErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tooBig := make([]byte, MaxRecord+1)
	if err := w.Append(tooBig); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Append too large: %v", err)
	}
	if err := w.AppendBatch([][]byte{{1}, tooBig}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("AppendBatch too large: %v", err)
	}
	if w.Size() != 0 {
		t.Fatalf("rejected records changed the size to %d", w.Size())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := w.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
}

// TestTornTail cuts the file at every byte of its last frame, then checks
// that Read ignores the torn frame and that OpenAppend drops it and appends
// after the intact records.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	recs := [][]byte{testRecord(1), testRecord(2), testRecord(300)} // the last one has a 2-byte length
	full := filepath.Join(dir, "full")
	writeFile(t, full, recs)
	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	lastStart := len(data) - len(appendFrame(nil, recs[2]))
	more := []byte("appended after recovery")
	for cut := lastStart; cut < len(data); cut++ {
		path := filepath.Join(dir, fmt.Sprintf("cut%d", cut))
		if err := os.WriteFile(path, data[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		got, tail, err := readAll(t, path)
		if err != nil || tail != int64(cut-lastStart) {
			t.Fatalf("cut %d: Read tail %d err %v, want tail %d, nil", cut, tail, err, cut-lastStart)
		}
		equalRecords(t, got, recs[:2])

		w, dropped, err := OpenAppend(path)
		if err != nil {
			t.Fatalf("cut %d: OpenAppend: %v", cut, err)
		}
		if dropped != int64(cut-lastStart) {
			t.Fatalf("cut %d: dropped %d, want %d", cut, dropped, cut-lastStart)
		}
		if err := w.Append(more); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, tail, err = readAll(t, path)
		if err != nil || tail != 0 {
			t.Fatalf("cut %d: after append: tail %d, err %v", cut, tail, err)
		}
		equalRecords(t, got, [][]byte{recs[0], recs[1], more})
	}
}

// TestCorruption flips one bit in the middle frame: Read must stop there
// with ErrCorrupt and the frame's offset, and OpenAppend must cut it off.
func TestCorruption(t *testing.T) {
	// The long last record keeps a middle frame whose length grew a little
	// inside the file, so it fails its CRC.
	recs := [][]byte{testRecord(1), testRecord(200), testRecord(3), testRecord(699)}
	frames := make([][]byte, len(recs))
	var data []byte
	for i, r := range recs {
		frames[i] = appendFrame(nil, r)
		data = append(data, frames[i]...)
	}
	midStart := len(frames[0])
	midLen := len(frames[1])
	tests := []struct {
		name string
		at   int // byte within the middle frame
		bit  byte
		torn bool // the damaged length runs past the end: indistinguishable from a torn tail
	}{
		{name: "magic", at: 0, bit: 0x01},
		{name: "length low bit", at: 1, bit: 0x01},
		{name: "length high byte", at: 2, bit: 0x02},
		{name: "length continuation bit", at: 2, bit: 0x80, torn: true},
		{name: "payload start", at: 3, bit: 0x10},
		{name: "payload middle", at: midLen / 2, bit: 0x04},
		{name: "crc", at: midLen - 2, bit: 0x80},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := bytes.Clone(data)
			bad[midStart+tc.at] ^= tc.bit
			path := filepath.Join(t.TempDir(), "seg")
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			got, tail, err := readAll(t, path)
			if tc.torn {
				if err != nil {
					t.Fatalf("Read err %v, want nil (torn)", err)
				}
			} else {
				var ce *CorruptError
				if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
					t.Fatalf("Read err %v, want a CorruptError", err)
				}
				if ce.Offset != int64(midStart) {
					t.Fatalf("offset %d, want %d", ce.Offset, midStart)
				}
			}
			if tail != int64(len(bad)-midStart) {
				t.Fatalf("tail %d, want %d", tail, len(bad)-midStart)
			}
			equalRecords(t, got, recs[:1])

			w, dropped, err := OpenAppend(path)
			if err != nil {
				t.Fatal(err)
			}
			if dropped != int64(len(bad)-midStart) {
				t.Fatalf("dropped %d, want %d", dropped, len(bad)-midStart)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got, tail, err = readAll(t, path)
			if err != nil || tail != 0 {
				t.Fatalf("after recovery: tail %d err %v", tail, err)
			}
			equalRecords(t, got, recs[:1])
		})
	}
}

func TestReadCallbackError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	writeFile(t, path, [][]byte{testRecord(1), testRecord(2), testRecord(3)})
	stop := errors.New("stop")
	calls := 0
	n, _, err := Read(path, func([]byte) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if err != stop || n != 1 || calls != 2 {
		t.Fatalf("got n=%d calls=%d err=%v, want 1, 2, stop", n, calls, err)
	}
	if _, _, err := Read(filepath.Join(t.TempDir(), "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Read of a missing file: %v", err)
	}
}

// TestConcurrentAppend appends from several goroutines, single records and
// batches: every record must come back whole, each goroutine's in order.
func TestConcurrentAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, perG = 8, 300
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < perG; {
				rec := func(i int) []byte {
					return fmt.Appendf(nil, "%d/%d/%s", g, i, bytes.Repeat([]byte{'p'}, rng.IntN(500)))
				}
				var err error
				if i%5 == 0 && i+3 <= perG {
					err = w.AppendBatch([][]byte{rec(i), rec(i + 1), rec(i + 2)})
					i += 3
				} else {
					err = w.Append(rec(i))
					i++
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, goroutines)
	got, tail, err := readAll(t, path)
	if err != nil || tail != 0 {
		t.Fatalf("Read: tail %d err %v", tail, err)
	}
	for _, r := range got {
		var g, i int
		if _, err := fmt.Sscanf(string(r), "%d/%d/", &g, &i); err != nil {
			t.Fatalf("record %q: %v", r, err)
		}
		if next[g] != i {
			t.Fatalf("goroutine %d: record %d after %d", g, i, next[g]-1)
		}
		next[g]++
	}
	for g, n := range next {
		if n != perG {
			t.Fatalf("goroutine %d: %d records, want %d", g, n, perG)
		}
	}
}

// FuzzRead checks that Read never panics and that the records it returns
// re-encode to exactly the readable prefix of the input.
func FuzzRead(f *testing.F) {
	var valid []byte
	for i := range 4 {
		valid = appendFrame(valid, testRecord(i*50))
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add([]byte{})
	f.Add([]byte{magic, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Add([]byte{magic, 0xff, 0xff, 0xff, 0x7f})
	f.Add(append(bytes.Clone(valid), 0, 0, 0, 0))
	dir := f.TempDir()
	var seq int
	f.Fuzz(func(t *testing.T, data []byte) {
		seq++
		path := filepath.Join(dir, fmt.Sprintf("f%d", seq))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		var re []byte
		n, tail, err := Read(path, func(rec []byte) error {
			re = appendFrame(re, rec)
			return nil
		})
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("unexpected error %v", err)
		}
		end := int64(len(data)) - tail
		if tail < 0 || end < 0 || !bytes.Equal(re, data[:end]) {
			t.Fatalf("n=%d tail=%d: records re-encode to %d bytes, readable prefix is %d", n, tail, len(re), end)
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	path := filepath.Join(b.TempDir(), "seg")
	w, err := Create(path)
	if err != nil {
		b.Fatal(err)
	}
	rec := bytes.Repeat([]byte("r"), 300)
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Append(rec); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

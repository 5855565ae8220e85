package coding

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

func list(cs ...Coding) List {
	var l List
	for _, c := range cs {
		l.c[l.n] = c
		l.n++
	}
	return l
}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name   string
		values []string
		want   List
		err    error
	}{
		{"none", nil, List{}, nil},
		{"gzip", []string{"gzip"}, list(Gzip), nil},
		{"case and spaces", []string{" GZip\t"}, list(Gzip), nil},
		{"x-gzip is gzip", []string{"x-gzip"}, list(Gzip), nil},
		{"br", []string{"br"}, list(Brotli), nil},
		{"zstd", []string{"ZSTD"}, list(Zstd), nil},
		{"chain in one line", []string{"gzip, br"}, list(Gzip, Brotli), nil},
		{"chain over lines", []string{"zstd", "gzip"}, list(Zstd, Gzip), nil},
		{"identity skipped", []string{"identity, gzip, identity"}, list(Gzip), nil},
		{"empty elements skipped", []string{",gzip,,", ""}, list(Gzip), nil},
		{"only identity", []string{"identity"}, List{}, nil},
		{"five", []string{"gzip, br, zstd, gzip, br"}, list(Gzip, Brotli, Zstd, Gzip, Brotli), nil},
		{"six", []string{"gzip, br, zstd, gzip, br, zstd"}, List{}, ErrTooMany},
		{"deflate unknown", []string{"deflate"}, List{}, ErrUnknown},
		{"compress unknown", []string{"gzip", "compress"}, List{}, ErrUnknown},
		{"parameters unknown", []string{"gzip;q=1"}, List{}, ErrUnknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.values)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("Parse(%q) = %v, %v; want %v, %v", tt.values, got, err, tt.want, tt.err)
			}
			if err != nil && !strings.Contains(err.Error(), "Content-Encoding") {
				t.Errorf("error %q does not say what it read", err)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { Parse([]string{"gzip, br"}) }); n != 0 {
		t.Errorf("Parse allocates %v times", n)
	}
}

// encode applies the codings of l, in order, to b.
func encode(t testing.TB, b []byte, l List) []byte {
	t.Helper()
	for _, c := range l.c[:l.n] {
		var out bytes.Buffer
		var w io.WriteCloser
		switch c {
		case Gzip:
			w = gzip.NewWriter(&out)
		case Brotli:
			w = brotli.NewWriterLevel(&out, 5)
		case Zstd:
			zw, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1))
			if err != nil {
				t.Fatal(err)
			}
			w = zw
		}
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b = out.Bytes()
	}
	return b
}

func page(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "<p>paragraph %d <a href=/x/%d>x</a></p>\n", i, i*i)
	}
	return b.Bytes()[:n]
}

func TestDecode(t *testing.T) {
	body := page(100_000)
	var d Decoder
	for _, l := range []List{
		list(Gzip), list(Brotli), list(Zstd),
		list(Gzip, Brotli), list(Zstd, Gzip), list(Gzip, Gzip), list(Brotli, Zstd, Gzip),
	} {
		enc := encode(t, body, l)
		t.Run(l.String(), func(t *testing.T) {
			for _, c := range []struct {
				name  string
				limit int64
				want  []byte
				cut   bool
			}{
				{"whole", int64(len(body)), body, false},
				{"room to spare", 1 << 20, body, false},
				{"cut", 4096, body[:4096], true},
				{"cut at one", 1, body[:1], true},
			} {
				prefix := []byte("kept:")
				got, cut, err := d.Decode(bytes.Clone(prefix), enc, l, c.limit)
				if err != nil || cut != c.cut || !bytes.Equal(got, append(prefix, c.want...)) {
					t.Errorf("%s: %d bytes, cut %v, %v; want %d bytes, cut %v", c.name, len(got)-len(prefix), cut, err, len(c.want), c.cut)
				}
			}
			// Cut short: what was decoded, and io.ErrUnexpectedEOF.
			got, cut, err := d.Decode(nil, enc[:len(enc)/2], l, 1<<20)
			if !errors.Is(err, io.ErrUnexpectedEOF) || cut || !bytes.HasPrefix(body, got) {
				t.Errorf("half the body: %d bytes (a prefix: %v), cut %v, %v; want a prefix and an unexpected EOF", len(got), bytes.HasPrefix(body, got), cut, err)
			}
		})
	}
}

func TestDecodeEdges(t *testing.T) {
	var d Decoder
	body := page(5000)
	gz := encode(t, body, list(Gzip))
	for _, c := range []struct {
		name    string
		src     []byte
		l       List
		want    []byte
		wantErr bool
	}{
		{"no codings appends", body, List{}, body, false},
		{"empty body, any coding", nil, list(Zstd, Brotli), nil, false},
		{"gzip: bytes after the first member ignored", append(bytes.Clone(gz), "trailing garbage"...), list(Gzip), body, false},
		{"gzip: a second member ignored", append(bytes.Clone(gz), encode(t, []byte("more"), list(Gzip))...), list(Gzip), body, false},
		{"zstd: two frames", append(encode(t, body, list(Zstd)), encode(t, []byte("more"), list(Zstd))...), list(Zstd), append(bytes.Clone(body), "more"...), false},
		{"gzip: not gzip", body, list(Gzip), nil, true},
		{"zstd: not zstd", body, list(Zstd), nil, true},
		{"br: not brotli", body, list(Brotli), nil, true},
		{"gzip: corrupt", corrupt(gz), list(Gzip), nil, true},
		{"chain in the wrong order", encode(t, body, list(Gzip, Zstd)), list(Zstd, Gzip), nil, true},
	} {
		got, cut, err := d.Decode(nil, c.src, c.l, 1<<20)
		if (err != nil) != c.wantErr || cut || !c.wantErr && !bytes.Equal(got, c.want) {
			t.Errorf("%s: %d bytes, cut %v, %v", c.name, len(got), cut, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "coding: ") {
			t.Errorf("%s: error %q does not name the package", c.name, err)
		}
	}
}

// corrupt returns b with bytes in its middle flipped.
func corrupt(b []byte) []byte {
	b = bytes.Clone(b)
	for i := len(b) / 3; i < len(b)/3+16; i++ {
		b[i] ^= 0xa5
	}
	return b
}

// TestZstdWindowBounded: a frame whose window is larger than RFC 9659
// allows is refused, before its history is allocated.
func TestZstdWindowBounded(t *testing.T) {
	var out bytes.Buffer
	zw, err := zstd.NewWriter(&out, zstd.WithWindowSize(32<<20), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(page(1 << 20)) // more than a block: the frame declares its window
	zw.Close()
	var d Decoder
	_, _, err = d.Decode(nil, out.Bytes(), list(Zstd), 1<<30)
	if !errors.Is(err, zstd.ErrWindowSizeExceeded) {
		t.Fatalf("32 MiB window: %v, want %v", err, zstd.ErrWindowSizeExceeded)
	}
}

// bombs returns, for each coding, a small body that inflates to n zero
// bytes.
func bombs(t testing.TB, n int) map[Coding][]byte {
	zeros := make([]byte, n)
	m := map[Coding][]byte{}
	for _, c := range []Coding{Gzip, Brotli, Zstd} {
		m[c] = encode(t, zeros, list(c))
	}
	return m
}

// TestBombBounded: bodies of a few KiB to 1 MiB that inflate to 256 MiB are
// cut at the limit, and decoding them allocates a bounded amount, far below
// what they inflate to.
func TestBombBounded(t *testing.T) {
	const inflated, limit = 32 << 20, 1 << 20 // 32 times the limit, 4 times what a decode may allocate
	var d Decoder
	for c, bomb := range bombs(t, inflated) {
		t.Run(c.String(), func(t *testing.T) {
			if len(bomb) > 1<<20 {
				t.Fatalf("bomb of %d bytes", len(bomb))
			}
			d.Decode(nil, bomb, list(c), limit) // the pools' decompressors made
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			got, cut, err := d.Decode(make([]byte, 0, 64<<10), bomb, list(c), limit)
			runtime.ReadMemStats(&after)
			if err != nil || !cut || len(got) != limit || bytes.ContainsFunc(got, func(r rune) bool { return r != 0 }) {
				t.Fatalf("%d-byte bomb: %d bytes, cut %v, %v; want %d zero bytes, cut", len(bomb), len(got), cut, err, limit)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*limit {
				t.Errorf("%d-byte bomb cut at %d bytes: %d bytes allocated", len(bomb), limit, alloc)
			}
		})
	}
}

// TestPoolBounded: the pools keep at most maxIdle decompressors, however
// many Decoders used them at once.
func TestPoolBounded(t *testing.T) {
	var p pool[*int]
	for range 3 * maxIdle() {
		p.put(new(int))
	}
	if len(p.free) != maxIdle() {
		t.Fatalf("%d idle, want %d", len(p.free), maxIdle())
	}
	for range maxIdle() {
		if p.get() == nil {
			t.Fatal("an idle one missing")
		}
	}
	if p.get() != nil {
		t.Fatal("more than were kept")
	}
}

// TestDecoderReuse: a Decoder decodes body after body, each coding after
// an error in another, and a steady gzip decode allocates nothing but the
// growth of its output.
func TestDecoderReuse(t *testing.T) {
	var d Decoder
	body := page(30_000)
	encs := map[Coding][]byte{}
	for _, c := range []Coding{Gzip, Brotli, Zstd} {
		encs[c] = encode(t, body, list(c))
	}
	for i := range 20 {
		c := Coding(i%3 + 1)
		if i%4 == 0 {
			d.Decode(nil, corrupt(encs[c]), list(c), 1<<20)
		}
		got, _, err := d.Decode(nil, encs[c], list(c), 1<<20)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("round %d, %v: %d bytes, %v", i, c, len(got), err)
		}
	}
	buf := make([]byte, 0, len(body))
	if n := testing.AllocsPerRun(50, func() { d.Decode(buf[:0], encs[Gzip], list(Gzip), 1<<20) }); n > 1 {
		t.Errorf("gzip decode into a big enough buffer: %v allocations", n)
	}
}

// FuzzParse: any header gives a List or an error, never a panic; a List
// prints as a header that parses back to it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"gzip", "x-gzip, br", "identity", " zstd ,, gzip", "gzip, br, zstd, gzip, br, zstd", "deflate", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := Parse(strings.Split(s, "\n"))
		if err != nil {
			if !errors.Is(err, ErrUnknown) && !errors.Is(err, ErrTooMany) {
				t.Fatalf("Parse(%q): unexpected error %v", s, err)
			}
			return
		}
		if l.Len() > MaxCodings {
			t.Fatalf("Parse(%q): %d codings", s, l.Len())
		}
		if back, err := Parse([]string{l.String()}); err != nil || back != l {
			t.Fatalf("Parse(%q) = %v, which parses back to %v, %v", s, l, back, err)
		}
	})
}

// FuzzDecode: any bytes under any chain decode without a panic to at most
// the limit, and a body encoded by the chain decodes back to itself.
func FuzzDecode(f *testing.F) {
	for _, l := range []List{list(Gzip), list(Brotli), list(Zstd), list(Gzip, Zstd)} {
		f.Add(encode(f, []byte("<p>hello</p>"), l), uint8(l.n), uint8(l.c[0]), uint8(l.c[1]), uint16(100))
	}
	f.Add([]byte("not encoded"), uint8(1), uint8(Brotli), uint8(0), uint16(3))
	var d Decoder
	f.Fuzz(func(t *testing.T, src []byte, n, c0, c1 uint8, limit uint16) {
		l := list(Coding(c0%3+1), Coding(c1%3+1))
		l.n = n % 3
		got, cut, err := d.Decode(nil, src, l, int64(limit))
		if len(got) > int(limit) || cut && err != nil {
			t.Fatalf("%v: %d bytes at limit %d, cut %v, %v", l, len(got), limit, cut, err)
		}
		plain := src
		if len(plain) > 200 {
			plain = plain[:200]
		}
		enc := encode(t, plain, l)
		back, _, err := d.Decode(nil, enc, l, 1<<10)
		if err != nil || !bytes.Equal(back, plain) && len(plain) > 0 {
			t.Fatalf("%v: %q came back as %q, %v", l, plain, back, err)
		}
	})
}

package store

import (
	"bytes"
	"errors"
	"maps"
	"testing"
)

// TestDirectives: a page's directives record holds its noindex flag and
// its canonical URL, reads back by URL and in a scan, is replaced by a
// later fetch's and removed by the zero Directives, survives a snapshot,
// leaves the URL's own record alone, and bad URLs are refused with
// nothing written.
func TestDirectives(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	const (
		page  = "http://a.test/p?id=1"
		other = "https://b.test:8443/x"
		plain = "http://a.test/plain"
	)
	b := NewBatch()
	b.UpsertCash(page, 1, 0)
	b.SetDirectives(page, Directives{NoIndex: true, Canonical: "http://a.test/p"})
	b.SetDirectives(other, Directives{NoIndex: true})
	b.SetDirectives("http://c.test/", Directives{Canonical: "https://c.test/"})
	b.SetDirectives(plain, Directives{}) // no record to remove: nothing happens
	applyT(t, s, 1, b)
	scan := func(s *Store) map[string]Directives {
		t.Helper()
		m := map[string]Directives{}
		if err := s.ScanDirectives(func(u string, d Directives) error { m[u] = d; return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	want := map[string]Directives{
		page:             {NoIndex: true, Canonical: "http://a.test/p"},
		other:            {NoIndex: true},
		"http://c.test/": {Canonical: "https://c.test/"},
	}
	check := func(when string, s *Store, want map[string]Directives) {
		t.Helper()
		if got := scan(s); !maps.Equal(got, want) {
			t.Errorf("%s: scan %v, want %v", when, got, want)
		}
		for _, u := range []string{page, other, plain, "http://c.test/"} {
			d, ok, err := s.DirectivesOf(u)
			if w, has := want[u]; err != nil || ok != has || d != w {
				t.Errorf("%s: DirectivesOf(%s) = %+v, %v, %v; want %+v, %v", when, u, d, ok, err, w, has)
			}
		}
	}
	check("set", s, want)
	if rec, ok, err := s.Get(page); err != nil || !ok || rec.Cash != 1 || rec.Status != StatusUnfetched {
		t.Errorf("the record beside the directives: %+v, %v, %v", rec, ok, err)
	}

	// A refetch: the page names another canonical and no longer says
	// noindex; another says nothing any more; a third says noindex now.
	b = NewBatch()
	b.SetDirectives(page, Directives{Canonical: "http://a.test/q"})
	b.SetDirectives(other, Directives{})
	b.SetDirectives(plain, Directives{NoIndex: true})
	applyT(t, s, 2, b)
	want = map[string]Directives{
		page:             {Canonical: "http://a.test/q"},
		plain:            {NoIndex: true},
		"http://c.test/": {Canonical: "https://c.test/"},
	}
	check("refetched", s, want)

	var snap bytes.Buffer
	if err := s.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	r := openT(t, t.TempDir(), Options{})
	defer r.Close()
	if err := r.RestoreSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	check("restored", r, want)

	for _, c := range []struct {
		url string
		d   Directives
	}{
		{"http://A.test/x", Directives{NoIndex: true}},
		{"http://a.test/x", Directives{Canonical: "ftp://a.test/1"}},
		{"http://a.test/x", Directives{Canonical: "http://a.test/#top"}},
		{"", Directives{}},
	} {
		b := NewBatch()
		b.SetDirectives(c.url, c.d)
		if _, err := b.Encode(); !errors.Is(err, ErrBadURL) {
			t.Errorf("SetDirectives(%q, %+v): %v, want ErrBadURL", c.url, c.d, err)
		}
	}
	check("after refused batches", s, want)
}

// TestDirectivesCorruptOp: a command whose directives value is not one
// SetDirectives writes is refused whole, before anything is applied.
func TestDirectivesCorruptOp(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	for i, v := range [][]byte{
		{0},                        // no flag, no canonical: the zero value is written as nothing
		{0x80},                     // an unknown flag
		append([]byte{1}, "x"...),  // a canonical that is not a URL
		append([]byte{0}, "ht"...), // the same without noindex
		append([]byte{3}, "http://a.test/"...),
	} {
		b := NewBatch()
		b.UpsertCash("http://a.test/", 1, 0)
		b.op(OpDirectives)
		b.buf = appendBytes(b.buf, []byte("http://a.test/"))
		b.buf = appendBytes(b.buf, v)
		cmd, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckCommand(cmd); !errors.Is(err, ErrCorruptCommand) {
			t.Errorf("value %q: CheckCommand %v, want ErrCorruptCommand", v, err)
		}
		res, err := s.Apply(uint64(i+1), cmd)
		if err != nil || !errors.Is(res.Err, ErrCorruptCommand) {
			t.Errorf("value %q: Apply %+v, %v; want the command refused as corrupt", v, res, err)
		}
	}
	if _, ok, _ := s.Get("http://a.test/"); ok {
		t.Error("a refused command wrote the URL's record")
	}
	if d, ok, err := s.DirectivesOf("http://a.test/"); ok || err != nil {
		t.Errorf("a refused command wrote directives %+v (%v)", d, err)
	}
}

// FuzzDecodeDirectives: any value decodes to directives or is refused,
// never a panic, and what decodes encodes back to the same bytes.
func FuzzDecodeDirectives(f *testing.F) {
	f.Add(appendDirectives(nil, Directives{NoIndex: true}))
	f.Add(appendDirectives(nil, Directives{NoIndex: true, Canonical: "http://a.test/c"}))
	f.Add(appendDirectives(nil, Directives{Canonical: "https://a.test:8443/c?x=1"}))
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{0xff, 'h'})
	f.Fuzz(func(t *testing.T, v []byte) {
		d, ok := decodeDirectives(v)
		if !ok {
			if d != (Directives{}) {
				t.Fatalf("refused value %q decoded to %+v", v, d)
			}
			return
		}
		if d == (Directives{}) {
			t.Fatalf("value %q decoded to the zero Directives", v)
		}
		if again := appendDirectives(nil, d); !bytes.Equal(again, v) {
			t.Fatalf("value %q decoded to %+v, which encodes as %q", v, d, again)
		}
	})
}

package store

import (
	"bytes"
	"errors"
	"testing"
)

// TestNearDup: a near-duplicate's record holds its original, reads back
// by URL and in a scan, survives a snapshot, and bad URLs are refused
// with nothing written.
func TestNearDup(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	b := NewBatch()
	b.UpsertCash("http://a.test/print/1", 1, 0)
	b.NearDup("http://a.test/print/1", "http://a.test/1")
	b.NearDup("http://mirror.b.test/x?s=9", "http://a.test/1")
	applyT(t, s, 1, b)
	for _, c := range []struct{ url, want string }{
		{"http://a.test/print/1", "http://a.test/1"},
		{"http://mirror.b.test/x?s=9", "http://a.test/1"},
		{"http://a.test/1", ""},
	} {
		got, ok, err := s.NearDupOf(c.url)
		if err != nil || ok != (c.want != "") || got != c.want {
			t.Errorf("NearDupOf(%s) = %q, %v, %v; want %q", c.url, got, ok, err, c.want)
		}
	}
	// The URL's own record is untouched by its near-duplicate record.
	if rec, ok, err := s.Get("http://a.test/print/1"); err != nil || !ok || rec.Cash != 1 {
		t.Errorf("record beside the near-duplicate: %+v, %v, %v", rec, ok, err)
	}
	scan := func(s *Store) map[string]string {
		m := map[string]string{}
		if err := s.ScanNearDups(func(u, o string) error { m[u] = o; return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := scan(s); len(m) != 2 || m["http://mirror.b.test/x?s=9"] != "http://a.test/1" {
		t.Errorf("scan: %v", m)
	}
	var snap bytes.Buffer
	if err := s.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	r := openT(t, t.TempDir(), Options{})
	defer r.Close()
	if err := r.RestoreSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if m := scan(r); len(m) != 2 || m["http://a.test/print/1"] != "http://a.test/1" {
		t.Errorf("after a snapshot: %v", m)
	}
	for _, c := range [][2]string{{"http://A.test/x", "http://a.test/1"}, {"http://a.test/x", "ftp://a.test/1"}, {"", ""}} {
		b := NewBatch()
		b.NearDup(c[0], c[1])
		if _, err := b.Encode(); !errors.Is(err, ErrBadURL) {
			t.Errorf("NearDup(%q, %q): %v, want ErrBadURL", c[0], c[1], err)
		}
	}
}

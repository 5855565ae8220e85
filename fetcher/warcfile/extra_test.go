package warcfile

import (
	"errors"
	"path/filepath"
	"testing"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// TestExtraFields: Exchange.Extra lands in the response and revisit
// records (not the request record), in order, read back by gowarc under
// strict validation; an exchange without Extra gets none; bad names and
// values are refused with ErrInvalid before anything is written.
func TestExtraFields(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, Prefix: "ex"})
	bodies := pages(t, 3)
	extra := [][2]string{{"WARC-Test-One", "x509: certificate has expired\tor is not yet valid"}, {"WARC-Test-Two", "2"}}
	marked := exchange("http://h1.test/marked", bodies[0], 0)
	marked.Extra = extra
	revisit := exchange("http://h1.test/revisit", nil, 1)
	notModified(revisit)
	revisit.Extra = extra[:1]
	plain := exchange("http://h1.test/plain", bodies[2], 2)
	for _, x := range []*Exchange{marked, revisit, plain} {
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		field [2]string
	}{
		{"empty name", [2]string{"", "v"}},
		{"name with colon", [2]string{"WARC-A:B", "v"}},
		{"name with space", [2]string{"WARC A", "v"}},
		{"value with CR LF", [2]string{"WARC-A", "v\r\nWARC-Type: response"}},
		{"value with NUL", [2]string{"WARC-A", "v\x00"}},
	} {
		x := exchange("http://h1.test/bad", bodies[1], 3)
		x.Extra = [][2]string{c.field}
		if err := w.Write(x); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Write = %v, want ErrInvalid", c.name, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) != 1 {
		t.Fatalf("files %v, want one", files)
	}
	r, err := gowarc.NewWarcFileReader(files[0], 0, gowarc.WithStrictValidation())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := map[string]gowarc.RecordType{}
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Validation) > 0 {
			t.Errorf("validation: %v", rec.Validation)
		}
		wr := rec.WarcRecord
		h := wr.WarcHeader()
		u := h.Get(gowarc.WarcTargetURI)
		want := [][2]string(nil)
		switch {
		case u == marked.URL && wr.Type() == gowarc.Response:
			want = extra
		case u == revisit.URL && wr.Type() == gowarc.Revisit:
			want = extra[:1]
		}
		if wr.Type() == gowarc.Response || wr.Type() == gowarc.Revisit {
			seen[u] = wr.Type()
		}
		for _, name := range []string{"WARC-Test-One", "WARC-Test-Two"} {
			got, has := h.Get(name), h.Has(name)
			wantV, wantHas := "", false
			for _, f := range want {
				if f[0] == name {
					wantV, wantHas = f[1], true
				}
			}
			if got != wantV || has != wantHas {
				t.Errorf("%s %v: %s = %q (present %v), want %q (present %v)", u, wr.Type(), name, got, has, wantV, wantHas)
			}
		}
		wr.Close()
	}
	if seen[marked.URL] != gowarc.Response || seen[revisit.URL] != gowarc.Revisit || seen[plain.URL] != gowarc.Response || len(seen) != 3 {
		t.Errorf("records %v, want the three exchanges and nothing of the refused ones", seen)
	}
}

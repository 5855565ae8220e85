package geodelay

import (
	"errors"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	fra := Client{Addr: netip.MustParseAddr("127.0.2.1"), Name: "Frankfurt", Loc: Point{50.11, 8.68}}
	for _, c := range []struct {
		name string
		in   string
		want []Client
		err  error  // wrapped sentinel, nil: success
		msg  string // in the error text
	}{
		{"empty", "", nil, nil, ""},
		{"comments and blanks", "# clients\n\n   \t\n# more\n", nil, nil, ""},
		{"city", "127.0.2.1 Frankfurt\n", []Client{fra}, nil, ""},
		{"city any case, comment", "127.0.2.1   fRANKFURT   # main office\n", []Client{fra}, nil, ""},
		{"city with spaces", "127.0.2.2 new   york\n127.0.2.3 São Paulo", []Client{
			{netip.MustParseAddr("127.0.2.2"), "New York", Point{40.71, -74.01}},
			{netip.MustParseAddr("127.0.2.3"), "São Paulo", Point{-23.55, -46.63}},
		}, nil, ""},
		{"coordinates", "127.0.2.4 39.04 -77.49 Ashburn VA\n", []Client{{netip.MustParseAddr("127.0.2.4"), "Ashburn VA", Point{39.04, -77.49}}}, nil, ""},
		{"coordinates without name", "127.0.2.5 -33.87 151.21", []Client{{netip.MustParseAddr("127.0.2.5"), "", Point{-33.87, 151.21}}}, nil, ""},
		{"coordinates at the limits", "127.0.2.6 90 -180\n127.0.2.7 -90 180\n", []Client{
			{netip.MustParseAddr("127.0.2.6"), "", Point{90, -180}},
			{netip.MustParseAddr("127.0.2.7"), "", Point{-90, 180}},
		}, nil, ""},
		{"IPv6 and mapped", "::1 Tokyo\n::ffff:127.0.2.8 Tokyo\n", []Client{
			{netip.MustParseAddr("::1"), "Tokyo", Point{35.69, 139.69}},
			{netip.MustParseAddr("127.0.2.8"), "Tokyo", Point{35.69, 139.69}},
		}, nil, ""},
		{"CRLF", "127.0.2.1 Frankfurt\r\n", []Client{fra}, nil, ""},

		{"address only", "127.0.2.1\n", nil, ErrSyntax, "f:1: geodelay: syntax error: \"127.0.2.1\" needs a city or LAT LON"},
		{"bad address", "# x\n127.0.2.300 Frankfurt\n", nil, ErrBadAddr, "f:2: geodelay: bad address \"127.0.2.300\""},
		{"host name", "localhost Frankfurt\n", nil, ErrBadAddr, "f:1:"},
		{"zone", "fe80::1%eth0 Frankfurt\n", nil, ErrBadAddr, "has a zone"},
		{"unknown city", "127.0.2.1 Frankfort\n", nil, ErrUnknownCity, "f:1: geodelay: unknown city \"Frankfort\""},
		{"Ashburn is not a city", "127.0.2.1 Ashburn\n", nil, ErrUnknownCity, "\"Ashburn\""},
		{"latitude without longitude", "127.0.2.1 50.11\n", nil, ErrSyntax, "latitude 50.11 needs a longitude"},
		{"latitude out of range", "127.0.2.1 91 8\n", nil, ErrBadCoord, "f:1: geodelay: bad coordinates: 91 8"},
		{"longitude out of range", "127.0.2.1 50 -180.5\n", nil, ErrBadCoord, "f:1:"},
		{"NaN", "127.0.2.1 NaN 8\n", nil, ErrBadCoord, "f:1:"},
		{"infinite", "127.0.2.1 50 Inf\n", nil, ErrBadCoord, "f:1:"},
		{"overflow", "127.0.2.1 1e999 8\n", nil, ErrBadCoord, "latitude \"1e999\""},
		{"comma", "127.0.2.1 50.11, 8.68\n", nil, ErrBadCoord, "latitude \"50.11,\""},
		{"bad longitude", "127.0.2.1 50.11 east\n", nil, ErrBadCoord, "longitude \"east\""},
		{"duplicate", "127.0.2.1 Frankfurt\n127.0.2.2 London\n127.0.2.1 London\n", nil, ErrDuplicate, "f:3: geodelay: duplicate address 127.0.2.1 (first on line 1)"},
		{"duplicate mapped", "127.0.2.1 Frankfurt\n::ffff:127.0.2.1 London\n", nil, ErrDuplicate, "f:2:"},
		{"control character", "127.0.2.1 1 2 a\x00b\n", nil, ErrSyntax, "control character"},
		{"not UTF-8", "127.0.2.1 1 2 \xff\n", nil, ErrSyntax, "not UTF-8"},
		{"long line", "127.0.2.1 1 2 " + strings.Repeat("x", maxLine) + "\n", nil, ErrSyntax, "f:1: geodelay: syntax error: line longer than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(c.in), "f")
			if c.err == nil {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				if !reflect.DeepEqual(got, c.want) {
					t.Fatalf("got %+v\nwant %+v", got, c.want)
				}
				if err := Check(got); err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, got %+v", got)
			}
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q, want %v containing %q", err, c.err, c.msg)
			}
			var le *LineError
			if !errors.As(err, &le) || le.File != "f" || le.Line < 1 {
				t.Fatalf("error %v is not a *LineError naming file f", err)
			}
		})
	}
}

// TestParseReportsEveryLine checks that every bad line is reported, up to a
// bound, each with its line number.
func TestParseReportsEveryLine(t *testing.T) {
	_, err := Parse(strings.NewReader("127.0.2.1 Nowhere\n127.0.2.2 London\n127.0.2.x London\n"), "c.txt")
	for _, want := range []string{"c.txt:1: geodelay: unknown city", "c.txt:3: geodelay: bad address"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v lacks %q", err, want)
		}
	}
	_, err = Parse(strings.NewReader(strings.Repeat("x y\n", 100)), "c.txt")
	if n := strings.Count(err.Error(), "\n") + 1; n != maxErrors+1 || !strings.Contains(err.Error(), "too many errors, stopped at line 20") {
		t.Fatalf("%d lines of error:\n%v", n, err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "clients.txt")
	if err := os.WriteFile(p, []byte("127.0.2.1 Frankfurt\n127.0.2.2 39.04 -77.49 Ashburn\n127.0.2.3 Singapore\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := ReadFile(p)
	if err != nil || len(cs) != 3 || cs[1].Name != "Ashburn" || cs[2].Loc != (Point{1.29, 103.85}) {
		t.Fatalf("ReadFile: %+v, %v", cs, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.txt")); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestCheck(t *testing.T) {
	ok := Client{Addr: netip.MustParseAddr("127.0.2.1"), Loc: Point{1, 2}}
	if err := Check([]Client{ok}); err != nil {
		t.Fatal(err)
	}
	err := Check([]Client{
		ok,
		{Loc: Point{1, 2}},
		{Addr: netip.MustParseAddr("::ffff:127.0.2.2"), Loc: Point{1, 2}},
		{Addr: netip.MustParseAddr("127.0.2.3"), Loc: Point{math.NaN(), 2}},
		ok,
	})
	for _, want := range []error{ErrBadAddr, ErrBadCoord, ErrDuplicate} {
		if !errors.Is(err, want) {
			t.Errorf("Check error %v lacks %v", err, want)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("%d problems reported, want 4:\n%v", n, err)
	}
}

// FuzzParse checks that Parse never panics, that what it accepts passes
// Check, and that clients written back with String parse to the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"127.0.2.1 Frankfurt\n127.0.2.2 39.04 -77.49 Ashburn\n# c\n",
		"::1 new york # x\n", "127.0.2.1 1e999 0", "127.0.2.1 -0 -0 a b  c\r\n",
		"127.0.2.1 Frankfurt\n127.0.2.1 London\n", "1.2.3.4 0x1p-2 +5 \u00a0name", "127.0.2.1\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		cs, err := Parse(strings.NewReader(in), "fuzz")
		if err != nil {
			if cs != nil {
				t.Fatalf("clients %v with error %v", cs, err)
			}
			var le *LineError
			if !errors.As(err, &le) && !strings.Contains(err.Error(), "geodelay:") {
				t.Fatalf("error without line or prefix: %v", err)
			}
			return
		}
		if err := Check(cs); err != nil {
			t.Fatalf("accepted clients fail Check: %v", err)
		}
		var b strings.Builder
		for _, c := range cs {
			b.WriteString(c.String())
			b.WriteByte('\n')
		}
		again, err := Parse(strings.NewReader(b.String()), "again")
		if err != nil {
			t.Fatalf("written back %q: %v", b.String(), err)
		}
		if !reflect.DeepEqual(again, cs) {
			t.Fatalf("round trip:\n%+v\n%+v", cs, again)
		}
	})
}

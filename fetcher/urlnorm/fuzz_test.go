package urlnorm

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
)

var fuzzSeeds = []string{
	"http://e.com/", "HTTP://E.COM:80", "https://ü.de./%7euser/%2f?x=1&SID=2#f", "http://u:p@h:8080?",
	"http://h/a;jsessionid=33/b;x?PHPSESSID=1&a=%zz", "http://a/b/c/./../../g", "mailto:x@y", "javascript:void(0)",
	"http://[::1]/", "http://a..b/", "http://e.com./", "http://%62%C3%BCcher.example/", "http://e.com/%2E%2e/x",
	"http://e.com/a/..;sid=1/b", "http://e.com/?&&sid=1&", "http://ｅｘａｍｐｌｅ.com/", "  http://e.\tcom/a\nb ",
	"http://e.com:0080/", "http://e.com/\"<>\\^`{|}\x7f\xff", "http://xn--bcher-kva.example/", "http://e%2541.com/",
	"http://e.com/a%", "http://e.com/a%4", "http://1.2.3.4:65535/?q", "http:g", "//h/x", "p/1.html", "#top", "",
	// IPv6 literals: normal forms, ports, mapped and compatible IPv4, zones, bad groups.
	"http://[2001:DB8::1]:8080/", "https://[2001:db8:0:0:1:0:0:1]:443/a", "http://[0:0:0:0:0:0:0:0]/",
	"http://[::ffff:192.0.2.1]/", "http://[::192.0.2.1]:80", "http://[1:2:3:4:5:6:7::]/", "http://u@[::1]:/x",
	"http://[fe80::1%25eth0]/", "http://[::1/", "http://[::1]x/", "http://[1.2.3.4]/", "http://[::1::2]/", "//[::1]:8080/x",
}

func FuzzNormalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	n := New(Options{})
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := n.Normalize(nil, []byte(raw))
		if err != nil {
			if !errors.Is(err, ErrScheme) && !errors.Is(err, ErrHost) && !errors.Is(err, ErrTooLong) && !errors.Is(err, ErrSyntax) {
				t.Fatalf("Normalize(%q): error %v wraps no sentinel", raw, err)
			}
			if out != nil {
				t.Fatalf("Normalize(%q) failed but returned %q", raw, out)
			}
			return
		}
		checkNormalised(t, n, raw, string(out))
	})
}

// checkNormalised asserts what every output must satisfy: the store
// accepts it, it is a fixed point, it fits MaxLen, Base accepts it.
func checkNormalised(t *testing.T, n *Normalizer, in, out string) {
	t.Helper()
	if len(out) > n.MaxLen() {
		t.Fatalf("%q -> %d bytes, over MaxLen", in, len(out))
	}
	if err := storeAccepts(out); err != nil {
		t.Fatalf("%q -> %q, rejected by the store: %v", in, out, err)
	}
	again, err := n.Normalize(nil, []byte(out))
	if err != nil || string(again) != out {
		t.Fatalf("not idempotent: %q -> %q -> %q, %v", in, out, again, err)
	}
	var b Base
	if err := b.SetString(out); err != nil {
		t.Fatalf("%q -> %q, not a valid Base: %v", in, out, err)
	}
	self, err := n.Resolve(nil, &b, nil)
	if err != nil || string(self) != out {
		t.Fatalf("Resolve(%q, \"\") = %q, %v", out, self, err)
	}
}

func FuzzResolve(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(fuzzSeeds[(i*7)%len(fuzzSeeds)], s)
	}
	f.Add("http://a/b/c/d;p?q", "../../../g")
	f.Add("http://h/p/", "g?y/./x#s/../z")
	n := New(Options{})
	f.Fuzz(func(t *testing.T, base, ref string) {
		bu, err := n.Normalize(nil, []byte(base))
		if err != nil {
			bu = []byte("http://a/b/c/d;p?q")
		}
		var b Base
		if err := b.Set(bu); err != nil {
			t.Fatalf("Set(%q): %v", bu, err)
		}
		out, err := n.Resolve(nil, &b, []byte(ref))
		if err != nil {
			if !errors.Is(err, ErrScheme) && !errors.Is(err, ErrHost) && !errors.Is(err, ErrTooLong) && !errors.Is(err, ErrSyntax) {
				t.Fatalf("Resolve(%q, %q): error %v wraps no sentinel", bu, ref, err)
			}
			return
		}
		checkNormalised(t, n, ref, string(out))
		// An absolute http(s) reference resolves to its normalisation.
		if r := strings.ToLower(strings.TrimLeft(ref, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")); strings.HasPrefix(r, "http://") || strings.HasPrefix(r, "https://") {
			norm, err := n.Normalize(nil, []byte(ref))
			if err != nil || string(norm) != string(out) {
				t.Fatalf("Resolve(%q, %q) = %q, Normalize = %q, %v", bu, ref, out, norm, err)
			}
		}
	})
}

// FuzzResolveDocument resolves references as a document's, in one of
// several encodings: the output is normalised whatever the input, and for
// a UTF-8 document and a well-formed reference it is what a base that is
// no document's gives.
func FuzzResolveDocument(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint8(i), s)
	}
	for i, s := range []string{"/資料/?q=資料", "?q=новости&sid=д", "?q=Ａ#x", "//h/?\xe3\x81", "?q=%E4&r=😀", "?\x1b$B"} {
		f.Add(uint8(i), s)
	}
	encs := []encoding.Encoding{nil, japanese.ShiftJIS, japanese.ISO2022JP, charmap.Windows1251, simplifiedchinese.GB18030, korean.EUCKR}
	n := New(Options{})
	var plainBase Base
	if err := plainBase.SetString("http://h.test/dir/page.html?x"); err != nil {
		f.Fatal(err)
	}
	bases := make([]*Base, len(encs))
	for i, e := range encs {
		bases[i] = new(Base)
		if err := bases[i].SetString("http://h.test/dir/page.html?x"); err != nil {
			f.Fatal(err)
		}
		bases[i].SetDocument(e)
	}
	f.Fuzz(func(t *testing.T, which uint8, ref string) {
		b := bases[int(which)%len(bases)]
		out, err := n.Resolve(nil, b, []byte(ref))
		if err != nil {
			if !errors.Is(err, ErrScheme) && !errors.Is(err, ErrHost) && !errors.Is(err, ErrTooLong) && !errors.Is(err, ErrSyntax) {
				t.Fatalf("Resolve(%q): error %v wraps no sentinel", ref, err)
			}
			return
		}
		checkNormalised(t, n, ref, string(out))
		if b == bases[0] && utf8.ValidString(ref) {
			plain, err := n.Resolve(nil, &plainBase, []byte(ref))
			if err != nil || string(plain) != string(out) {
				t.Fatalf("Resolve(%q) = %q as a UTF-8 document's, %q, %v as no document's", ref, out, plain, err)
			}
		}
	})
}

package urlnorm

import (
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// rfcBase is the base URI of RFC 3986 section 5.4.
const rfcBase = "http://a/b/c/d;p?q"

// TestResolveRFC3986 runs the examples of RFC 3986 sections 5.4.1 (normal)
// and 5.4.2 (abnormal). The RFC's results are adapted to normalised http
// URLs: fragments are dropped, an empty path becomes "/", and "g:h" (a
// non-http scheme) is rejected. For "http:g" the RFC allows two readings;
// Resolve takes the non-strict one.
func TestResolveRFC3986(t *testing.T) {
	n := New(Options{})
	var b Base
	if err := b.Set([]byte(rfcBase)); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{
		// 5.4.1 normal examples
		{"g", "http://a/b/c/g"},
		{"./g", "http://a/b/c/g"},
		{"g/", "http://a/b/c/g/"},
		{"/g", "http://a/g"},
		{"//g", "http://g/"}, // RFC: "http://g"
		{"?y", "http://a/b/c/d;p?y"},
		{"g?y", "http://a/b/c/g?y"},
		{"#s", "http://a/b/c/d;p?q"},  // RFC: ...#s
		{"g#s", "http://a/b/c/g"},     // RFC: ...#s
		{"g?y#s", "http://a/b/c/g?y"}, // RFC: ...#s
		{";x", "http://a/b/c/;x"},
		{"g;x", "http://a/b/c/g;x"},
		{"g;x?y#s", "http://a/b/c/g;x?y"}, // RFC: ...#s
		{"", "http://a/b/c/d;p?q"},
		{".", "http://a/b/c/"},
		{"./", "http://a/b/c/"},
		{"..", "http://a/b/"},
		{"../", "http://a/b/"},
		{"../g", "http://a/b/g"},
		{"../..", "http://a/"},
		{"../../", "http://a/"},
		{"../../g", "http://a/g"},
		// 5.4.2 abnormal examples
		{"../../../g", "http://a/g"},
		{"../../../../g", "http://a/g"},
		{"/./g", "http://a/g"},
		{"/../g", "http://a/g"},
		{"g.", "http://a/b/c/g."},
		{".g", "http://a/b/c/.g"},
		{"g..", "http://a/b/c/g.."},
		{"..g", "http://a/b/c/..g"},
		{"./../g", "http://a/b/g"},
		{"./g/.", "http://a/b/c/g/"},
		{"g/./h", "http://a/b/c/g/h"},
		{"g/../h", "http://a/b/c/h"},
		{"g;x=1/./y", "http://a/b/c/g;x=1/y"},
		{"g;x=1/../y", "http://a/b/c/y"},
		{"g?y/./x", "http://a/b/c/g?y/./x"},
		{"g?y/../x", "http://a/b/c/g?y/../x"},
		{"g#s/./x", "http://a/b/c/g"},  // RFC: ...g#s/./x
		{"g#s/../x", "http://a/b/c/g"}, // RFC: ...g#s/../x
		{"http:g", "http://a/b/c/g"},   // RFC: "http:g" (strict) or this (non-strict)
	} {
		got, err := n.Resolve(nil, &b, []byte(c[0]))
		if err != nil || string(got) != c[1] {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q", rfcBase, c[0], got, err, c[1])
			continue
		}
		if err := storeAccepts(string(got)); err != nil {
			t.Errorf("Resolve(%q) = %q, rejected by the store: %v", c[0], got, err)
		}
	}
	if _, err := n.Resolve(nil, &b, []byte("g:h")); !errors.Is(err, ErrScheme) {
		t.Errorf(`Resolve("g:h"): %v, want ErrScheme`, err)
	}
}

// TestResolveMatchesNetURL compares Resolve with net/url's RFC 3986
// resolution (followed by the normalisation net/url does not do) on
// references it handles the same way.
func TestResolveMatchesNetURL(t *testing.T) {
	n := New(Options{})
	bases := []string{"http://a/b/c/d;p?q", "https://h1.us.test:8443/", "http://h/p/1.html", "http://h/dir/sub/"}
	refs := []string{"x", "../x", "../../../../x", "/x/./y/../z", "//other/p", "?q=1", "x?y", "./", "..", "a/b/c/../../d",
		"HTTP://UP.example/X", "//up.EXAMPLE:80/", "%7Ex", "https://s/"}
	for _, bs := range bases {
		var b Base
		if err := b.Set([]byte(bs)); err != nil {
			t.Fatal(err)
		}
		bu, _ := url.Parse(bs)
		for _, r := range refs {
			ru, err := url.Parse(r)
			if err != nil {
				t.Fatal(err)
			}
			want, err := n.NormalizeString(bu.ResolveReference(ru).String())
			if err != nil {
				t.Fatalf("%s + %s: %v", bs, r, err)
			}
			got, err := n.Resolve(nil, &b, []byte(r))
			if err != nil || string(got) != want {
				t.Errorf("Resolve(%q, %q) = %q, %v; want %q", bs, r, got, err, want)
			}
		}
	}
}

func TestResolveCases(t *testing.T) {
	n := New(Options{})
	for _, c := range []struct{ base, ref, want string }{
		{"http://h/p/1.html", "2.html", "http://h/p/2.html"},
		{"http://h/p/1.html", "  2.html\n", "http://h/p/2.html"},
		{"http://h/p/1.html", "#top", "http://h/p/1.html"},
		{"http://h/p/1.html?x=1", "#top", "http://h/p/1.html?x=1"},
		{"http://h/p/1.html", "?", "http://h/p/1.html"},
		{"http://h/p/1.html", "?sid=1", "http://h/p/1.html"},
		{"http://h/p/1.html", "x.html?PHPSESSID=1&a=b", "http://h/p/x.html?a=b"},
		{"http://h/p/1.html", "x.html;jsessionid=1", "http://h/p/x.html"},
		{"http://h/p/1.html", "a b.html", "http://h/p/a%20b.html"},
		{"http://h/p/1.html", "/x/../p/2.html#s3", "http://h/p/2.html"},
		{"http://h:8080/p/1.html", "//h2.us.test:8080/p/1.html", "http://h2.us.test:8080/p/1.html"},
		{"https://h/p/1.html", "//H2/x", "https://h2/x"},
		{"https://h/p/1.html", "//h2:443/x", "https://h2/x"},
		{"http://h/p/1.html", "HTTP://H2.US.TEST:80/p/1.html", "http://h2.us.test/p/1.html"},
		{"http://h/p/1.html", "https://h2/", "https://h2/"},
		{"https://h/a/b", "https:c", "https://h/a/c"},
		{"http://h/a/b", "http:/c", "http://h/c"},
		{"http://h/a/b", "bücher", "http://h/a/b%C3%BCcher"},
		{"http://h/a/b", "&amp;", "http://h/a/&amp;"},
	} {
		var b Base
		if err := b.SetString(c.base); err != nil {
			t.Fatalf("Set(%q): %v", c.base, err)
		}
		got, err := n.Resolve(nil, &b, []byte(c.ref))
		if err != nil || string(got) != c.want {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q", c.base, c.ref, got, err, c.want)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	n := New(Options{})
	var b Base
	if _, err := n.Resolve(nil, &b, []byte("x")); !errors.Is(err, ErrSyntax) {
		t.Errorf("unset base: %v, want ErrSyntax", err)
	}
	if err := b.SetString("http://h/p/1.html"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref  string
		want error
	}{
		{"mailto:webmaster@h1.us.test", ErrScheme},
		{" javascript:void(0)", ErrScheme},
		{"data:image/png;base64,AAAA", ErrScheme},
		{"ftp://h/x", ErrScheme},
		{"c:\\windows", ErrScheme},
		{"https:x", ErrHost},
		{"//", ErrHost},
		{"///x", ErrHost},
		{"//[::1%25lo]/", ErrHost},
		{"//h:99999/", ErrHost},
		{"//h\x01/", ErrHost},
		{"http://a b/", ErrHost},
		{"/" + strings.Repeat("x", 2048), ErrTooLong},
		{strings.Repeat("../", 10000), ErrTooLong},
	} {
		got, err := n.Resolve([]byte("keep"), &b, []byte(c.ref))
		if !errors.Is(err, c.want) || string(got) != "keep" {
			t.Errorf("Resolve(%.40q) = %q, %v; want %v and dst unchanged", c.ref, got, err, c.want)
		}
	}
}

func TestBaseSet(t *testing.T) {
	for _, c := range []struct {
		u  string
		ok bool
	}{
		{"http://h/", true},
		{"https://h1.us.test:8080/p/1.html?x=1", true},
		{"http://h", false},
		{"HTTP://h/", false},
		{"http://H/", false},
		{"ftp://h/", false},
		{"http:///x", false},
		{"http://h/a b", false},
		{"http://h/a#b", false},
		{"http://h/\x7f", false},
		{"http://:8080/", false},
		{"http://0./", false},
		{"http://h:80/", false},
		{"https://h:443/", false},
		{"http://h:080/", false},
		{"http://h/a/../b", false},
		{"http://h/%7e", false},
		{"http://h/\"", false},
		{"http://h/?", false},
		{"http://h/?sid=1", true},
		{"", false},
	} {
		var b Base
		err := b.SetString(c.u)
		if (err == nil) != c.ok || b.IsSet() != c.ok {
			t.Errorf("Set(%q) = %v, IsSet %v; want ok %v", c.u, err, b.IsSet(), c.ok)
		}
		if !c.ok && !errors.Is(err, ErrSyntax) {
			t.Errorf("Set(%q) = %v, want ErrSyntax", c.u, err)
		}
		if c.ok && b.String() != c.u {
			t.Errorf("Set(%q): String() = %q", c.u, b.String())
		}
	}
	// Reuse: Set again, then Reset.
	var b Base
	_ = b.SetString("http://a/b/c")
	_ = b.SetString("http://x/y/")
	got, _ := New(Options{}).Resolve(nil, &b, []byte("z"))
	if string(got) != "http://x/y/z" || string(b.Bytes()) != "http://x/y/" {
		t.Fatalf("after re-Set: %q, base %q", got, b.Bytes())
	}
	b.Reset()
	if b.IsSet() {
		t.Fatal("Reset base still set")
	}
}

func TestResolveZeroAllocs(t *testing.T) {
	n := New(Options{})
	var b Base
	if err := b.SetString("http://h12.fr.test:8080/p/17.html"); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 0, 512)
	for _, ref := range []string{"p/3.html", "/p/3.html?view=print", "http://h3.de.test:8080/p/1.html", "../x/./y", "#top"} {
		allocs := testing.AllocsPerRun(100, func() {
			dst, _ = n.Resolve(dst[:0], &b, []byte(ref))
		})
		if allocs != 0 {
			t.Errorf("Resolve(%q): %v allocs, want 0", ref, allocs)
		}
	}
}

// TestConcurrentUse shares one Normalizer among goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	n := New(Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b Base
			if err := b.SetString("http://h" + string(rune('0'+g)) + ".test/p/"); err != nil {
				errs <- err
				return
			}
			for range 200 {
				got, err := n.Resolve(nil, &b, []byte("../x?sid=1&a"))
				if err != nil || string(got) != "http://h"+string(rune('0'+g))+".test/x?a" {
					errs <- errors.New("wrong result " + string(got))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

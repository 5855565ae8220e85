package links

import (
	"bytes"
	"strconv"
	"testing"
)

func TestParseRefresh(t *testing.T) {
	for _, c := range []struct {
		in    string
		delay int
		url   string
		ok    bool
	}{
		{"5", 5, "", true},
		{"0;url=/next", 0, "/next", true},
		{"0; URL='/next'", 0, "/next", true},
		{`0; url="http://a.test/x?y" `, 0, "http://a.test/x?y", true},
		{"  3 ;  Url  =  next.html ", 3, "next.html ", true},
		{"3, /next", 3, "/next", true},
		{"3 /next", 3, "/next", true},
		{"1.5; url=/f", 1, "/f", true},
		{".5; url=/f", 0, "/f", true},
		{"0;'/quoted' trailing", 0, "/quoted", true},
		{"0; url='/unterminated", 0, "/unterminated", true},
		{"0; url=", 0, "", true},
		{"0; url = ", 0, "", true},
		{"0;", 0, "", true},
		{"0; u", 0, "u", true},
		{"0; uri=/x", 0, "uri=/x", true},
		{"0; url /x", 0, "url /x", true},
		{"0; urlx=/y", 0, "urlx=/y", true},
		{"0; /a 'b'", 0, "/a 'b'", true},
		{"99999999999999999999; url=/x", maxRefreshDelay, "/x", true},
		{"", 0, "", false},
		{"   ", 0, "", false},
		{"url=/x", 0, "", false},
		{"-1; url=/x", 0, "", false},
		{"5x; url=/x", 0, "", false},
		{"; url=/x", 0, "", false},
	} {
		delay, u, ok := ParseRefresh([]byte(c.in))
		if delay != c.delay || string(u) != c.url || ok != c.ok {
			t.Errorf("ParseRefresh(%q) = %d, %q, %v; want %d, %q, %v", c.in, delay, u, ok, c.delay, c.url, c.ok)
		}
	}
}

// FuzzRefresh: ParseRefresh never panics; its URL is a part of its input
// that ends where the input ends or before a quote; a delay and a URL
// written in the standard's form parse back to themselves.
func FuzzRefresh(f *testing.F) {
	for _, s := range []string{"5", "0;url=/next", "0; URL='/next'", "3, /next", ".5", "0; u", "x", "1;url=\"a\"b", "\t\n0 ,\f url\t=\t'x'"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		delay, u, ok := ParseRefresh(v)
		if !ok {
			if delay != 0 || u != nil {
				t.Fatalf("failed with %d, %q", delay, u)
			}
			return
		}
		if delay < 0 || delay > maxRefreshDelay {
			t.Fatalf("delay %d", delay)
		}
		if len(u) > 0 {
			i := bytes.Index(v, u)
			if i < 0 {
				t.Fatalf("url %q not in %q", u, v)
			}
		}
		// Written as the standard's serialisation, with a quote that is
		// not in the URL, it reads back.
		if len(u) > 0 && bytes.IndexByte(u, '\'') < 0 {
			w := []byte(strconv.Itoa(delay) + "; url='" + string(u) + "'")
			d2, u2, ok2 := ParseRefresh(w)
			if !ok2 || d2 != delay || !bytes.Equal(u2, u) {
				t.Fatalf("%q gave %d, %q; %q gives %d, %q, %v", v, delay, u, w, d2, u2, ok2)
			}
		}
	})
}

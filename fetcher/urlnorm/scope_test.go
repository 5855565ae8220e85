package urlnorm

import (
	"bytes"
	"strconv"
	"sync"
	"testing"
)

func TestScope(t *testing.T) {
	deep := "http://e.com"
	for i := range 64 { // distinct segments: the repetition rule stays out of it
		deep += "/s" + strconv.Itoa(i)
	}
	deeper := deep + "/s"
	for _, c := range []struct {
		name  string
		scope *Scope
		cases map[string]bool
	}{
		{"nil scope allows all", nil, map[string]bool{
			"http://e.com/x.png": true,
		}},
		{"host suffixes", &Scope{HostSuffixes: []string{"example.com", ".Test"}}, map[string]bool{
			"http://example.com/":          true,
			"http://www.example.com/":      true,
			"http://a.b.example.com:8/":    true,
			"http://badexample.com/":       false,
			"http://example.com.evil.net/": false,
			"http://h1.us.test/p/1.html":   true,
			"http://test/":                 true,
			"http://attest/":               false,
			"http://other.org/":            false,
		}},
		{"deny hosts", &Scope{DenyHosts: []string{"bad.example", "Evil.Example"}}, map[string]bool{
			"http://bad.example/":       false,
			"https://bad.example:8443/": false,
			"http://evil.example/x":     false,
			"http://sub.bad.example/":   true,
			"http://good.example/":      true,
		}},
		{"default skip extensions", &Scope{}, map[string]bool{
			"http://e.com/img/1.png":                false,
			"http://e.com/img/1.PNG":                false,
			"http://e.com/a/b.tar.gz":               false,
			"http://e.com/font.woff2":               false,
			"http://e.com/v.mp4?x=1":                false,
			"http://e.com/files/1.pdf":              true,
			"http://e.com/p/1.html":                 true,
			"http://e.com/png":                      true,
			"http://e.com/x.png/":                   true,
			"http://e.com/page?img=x.png":           true,
			"http://e.com/a.png.html":               true,
			"http://e.com/.png":                     false,
			"http://e.com/x.averylongextensionname": true,
		}},
		{"custom skip extensions", &Scope{SkipExts: []string{".PDF", "html"}}, map[string]bool{
			"http://e.com/files/1.pdf": false,
			"http://e.com/p/1.html":    false,
			"http://e.com/img/1.png":   true,
		}},
		{"no skip extensions", &Scope{SkipExts: []string{}}, map[string]bool{
			"http://e.com/img/1.png": true,
		}},
		{"default segment limit", &Scope{}, map[string]bool{
			deep:                 true,
			deeper:               false,
			deep + "?q=/a/a/a/a": true,
		}},
		{"segment limit", &Scope{MaxPathSegments: 3}, map[string]bool{
			"http://e.com/":        true,
			"http://e.com/a/b/c":   true,
			"http://e.com/a/b/c/":  false,
			"http://e.com/a/b/c/d": false,
		}},
		{"not a url", &Scope{}, map[string]bool{
			"e.com/x": false,
			"":        false,
		}},
		{"filter has the last word", &Scope{HostSuffixes: []string{"e.com"}, Filter: func(u []byte) bool { return !bytes.Contains(u, []byte("/private/")) }}, map[string]bool{
			"http://e.com/a":         true,
			"http://e.com/private/a": false,
			"http://x.org/a":         false, // out of scope before the filter
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for u, want := range c.cases {
				if got := c.scope.Allow([]byte(u)); got != want {
					t.Errorf("Allow(%q) = %v, want %v", u, got, want)
				}
				if got := c.scope.AllowString(u); got != want {
					t.Errorf("AllowString(%q) = %v, want %v", u, got, want)
				}
			}
		})
	}
}

func TestScopeConcurrent(t *testing.T) {
	s := &Scope{HostSuffixes: []string{"test"}}
	var wg sync.WaitGroup
	results := make([]bool, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.Allow([]byte("http://h1.us.test/")) && !s.Allow([]byte("http://x.org/"))
		}()
	}
	wg.Wait()
	for i, ok := range results {
		if !ok {
			t.Fatalf("goroutine %d got a wrong answer", i)
		}
	}
}

func TestParts(t *testing.T) {
	for _, c := range []struct{ u, host, origin, pq string }{
		{"http://h1.us.test/p/1.html?x=1", "h1.us.test", "http://h1.us.test", "/p/1.html?x=1"},
		{"https://h:8443/", "h", "https://h:8443", "/"},
		{"http://h", "h", "http://h", "/"},
		{"http://[2001:db8::1]:8080/x", "[2001:db8::1]", "http://[2001:db8::1]:8080", "/x"},
		{"https://[::1]/", "[::1]", "https://[::1]", "/"},
		{"http://[::]", "[::]", "http://[::]", "/"},
		{"no-scheme", "", "", ""},
	} {
		if got := Host(c.u); got != c.host {
			t.Errorf("Host(%q) = %q, want %q", c.u, got, c.host)
		}
		if got := Origin(c.u); got != c.origin {
			t.Errorf("Origin(%q) = %q, want %q", c.u, got, c.origin)
		}
		if got := PathQuery(c.u); got != c.pq {
			t.Errorf("PathQuery(%q) = %q, want %q", c.u, got, c.pq)
		}
	}
}

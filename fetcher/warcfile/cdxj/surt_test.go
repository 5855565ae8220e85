package cdxj

import (
	"strings"
	"testing"
)

// TestSURT compares keys with what the Internet Archive's surt library
// (pywb's and cdxj-indexer's key maker) gives for the same URLs.
func TestSURT(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"root", "http://example.com/", "com,example)/"},
		{"root without slash", "http://example.com", "com,example)/"},
		{"www dropped", "http://www.example.com/", "com,example)/"},
		{"www2 dropped", "http://www2.example.com/a", "com,example)/a"},
		{"www prefix of a label kept", "http://wwwexample.com/", "com,wwwexample)/"},
		{"www inside kept", "http://a.www.example.com/", "com,example,www,a)/"},
		{"uppercase host and path", "HTTP://WWW.Example.COM/Index.HTML", "com,example)/index.html"},
		{"https scheme dropped", "https://example.com/x", "com,example)/x"},
		{"default http port", "http://example.com:80/a", "com,example)/a"},
		{"default https port", "https://example.com:443/a", "com,example)/a"},
		{"other port kept", "http://example.com:8080/a", "com,example:8080)/a"},
		{"http port on https kept", "https://example.com:80/", "com,example:80)/"},
		{"query sorted", "http://example.com/p?b=2&a=1&c=3", "com,example)/p?a=1&b=2&c=3"},
		{"query sorted by name then value", "http://example.com/p?x=1&x&x=&a-b=1&a=2", "com,example)/p?a=2&a-b=1&x&x=&x=1"},
		{"query lower-cased", "http://example.com/p?Q=AbC", "com,example)/p?q=abc"},
		{"empty query dropped", "http://example.com/p?", "com,example)/p"},
		{"fragment dropped", "http://example.com/p#Top", "com,example)/p"},
		{"trailing slash dropped", "http://example.com/dir/", "com,example)/dir"},
		{"dot segments", "http://example.com/a/./b/../c//d", "com,example)/a/c/d"},
		{"escapes normalised", "http://example.com/%7Euser/a%20b/%2541", "com,example)/~user/a%20b/a"},
		{"hash escaped", "http://example.com/ab%23cd", "com,example)/ab%23cd"},
		{"user and password dropped", "http://user:pw@example.com/", "com,example)/"},
		{"IDN punycode kept", "http://xn--bcher-kva.ch/", "ch,xn--bcher-kva)/"},
		{"IDN to punycode", "http://Bücher.ch/", "ch,xn--bcher-kva)/"},
		{"IPv4 reversed", "http://127.0.0.1:8080/x", "1,0,0,127:8080)/x"},
		{"decimal host", "http://3279880203/blah", "11,0,127,195)/blah"},
		{"outer dots", "http://example.com./", "com,example)/"},
		{"no scheme", "example.com/x", "com,example)/x"},
		{"no scheme with port", "example.com:8080/x", "com,example:8080)/x"},
		{"spaces and newlines", " http://example.com/a\tb\n ", "com,example)/ab"},
		{"jsessionid stripped", "http://example.com/x?jsessionid=0123456789abcdef0123456789ABCDEF&a=1", "com,example)/x?a=1"},
		{"aspx session stripped", "http://example.com/(S(abcdefghijklmnopqrstuvwx))/page.aspx", "com,example)/page.aspx"},
		{"urn kept", "urn:x-meridian:crawl 1", "urn:x-meridian:crawl%201"},
		{"empty", "", "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SURT(tt.in); got != tt.want {
				t.Errorf("SURT(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzSURT checks that any input gives a key without spaces or control
// characters (it starts a CDXJ line), the same key twice, and for a URL
// with a host a key with the host's ')'.
func FuzzSURT(f *testing.F) {
	for _, s := range []string{"http://www.example.com:8080/a/../b?z=1&a#x", "example.com", "https://Bücher.ch/%zz%2", "urn:a b", "http://[::1]:80/", "http://a/(s(abcdefghijklmnopqrstuvwx))/x.aspx?cfid=1&cftoken=2", "//", "http://?&&="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		k := SURT(u)
		if k == "" || strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			t.Fatalf("SURT(%q) = %q: empty, or spaces or control characters", u, k)
		}
		if k2 := SURT(u); k2 != k {
			t.Fatalf("SURT(%q) = %q, then %q", u, k, k2)
		}
		if strings.HasPrefix(u, "http://") && !strings.Contains(k, ")") {
			t.Fatalf("SURT(%q) = %q: no ')'", u, k)
		}
	})
}

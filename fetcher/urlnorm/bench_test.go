package urlnorm

import "testing"

// BenchmarkResolve resolves typical hrefs of a websim page against its URL
// into a buffer with capacity.
func BenchmarkResolve(b *testing.B) {
	n := New(Options{})
	var base Base
	if err := base.SetString("http://h12.fr.test:8080/p/17.html"); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, ref string }{
		{"relative", "23.html"},
		{"root", "/p/23.html"},
		{"absolute-same-host", "http://h12.fr.test:8080/p/1.html"},
		{"absolute", "http://h3.de.test:8080/p/1.html"},
		{"dots", "/x/../p/23.html#s4"},
	} {
		b.Run(c.name, func(b *testing.B) {
			ref := []byte(c.ref)
			dst := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = n.Resolve(dst[:0], &base, ref); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNormalize normalises absolute URLs as found in hrefs.
func BenchmarkNormalize(b *testing.B) {
	n := New(Options{})
	for _, c := range []struct{ name, raw string }{
		{"clean", "http://h12.fr.test:8080/p/17.html"},
		{"messy", "HTTP://H12.FR.TEST:80/x/../p/%7e17.html?sid=00ff00ff00ff00ff&view=print#s3"},
		{"idn", "http://bücher.example/p/1.html"},
	} {
		b.Run(c.name, func(b *testing.B) {
			raw := []byte(c.raw)
			dst := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = n.Normalize(dst[:0], raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScope checks URLs against a default scope with suffixes: the
// kinds of link a page has, and the trap shapes the trap rules look at.
func BenchmarkScope(b *testing.B) {
	s := &Scope{HostSuffixes: []string{"test"}, DenyHosts: []string{"bad.test"}, Now: fixed(clock)}
	for _, c := range benchURLs {
		b.Run(c.name, func(b *testing.B) {
			u := []byte(c.u)
			b.ReportAllocs()
			for b.Loop() {
				if !s.Allow(u) {
					b.Fatal("not allowed")
				}
			}
		})
	}
}

// benchURLs are BenchmarkScope's URLs: the kinds of link a page has, and
// the trap shapes the trap rules look at (all allowed).
var benchURLs = []struct{ name, u string }{
	{"typical", "http://h12.fr.test:8080/p/17.html"},
	{"root", "http://h12.fr.test/"},
	{"article", "http://news.test/2024/05/17/the-story-of-the-day.html"},
	{"deep", "http://docs.test/en/guide/v2/reference/api/net/http/client/transport/round-tripper.html"},
	{"query", "http://shop.test/search?q=shoes&size=42&colour=red&page=3"},
	{"calendar", "http://events.test/cal/2026/11/"},
	{"calendar-query", "http://events.test/index.php?view=month&year=2026&month=11"},
	{"repeats", "http://h.test/trap/a/b/a/b/a/"},
}

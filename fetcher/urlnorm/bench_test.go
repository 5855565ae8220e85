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

// BenchmarkScope checks a typical URL against a scope with suffixes.
func BenchmarkScope(b *testing.B) {
	s := &Scope{HostSuffixes: []string{"test"}, DenyHosts: []string{"bad.test"}}
	u := []byte("http://h12.fr.test:8080/p/17.html")
	b.ReportAllocs()
	for b.Loop() {
		if !s.Allow(u) {
			b.Fatal("not allowed")
		}
	}
}

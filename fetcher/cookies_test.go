package fetcher

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// jarStep is one step of a cookie jar scenario: Set-Cookie lines answered
// to a request (set), or the Cookie header a request must carry (want).
type jarStep struct {
	at    time.Duration // after t0
	url   string
	set   []string
	want  string // checked when set is nil
	hosts int    // if not 0, the hosts the jar must hold after the step (-1: none)
}

func runJarSteps(t *testing.T, j *cookieJar, steps []jarStep) {
	t.Helper()
	t0 := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	for i, s := range steps {
		host, https, path := urlnorm.Host(s.url), strings.HasPrefix(s.url, "https:"), cookiePathOf(s.url)
		now := t0.Add(s.at)
		if s.set != nil {
			j.setCookies(host, https, path, s.set, now)
		} else if got := string(j.appendHeader(nil, host, https, path, now)); got != s.want {
			t.Errorf("step %d: %s at +%v: Cookie %q, want %q", i, s.url, s.at, got, s.want)
		}
		if want := max(s.hosts, 0); s.hosts != 0 && j.len() != want {
			t.Errorf("step %d: %d hosts in the jar, want %d", i, j.len(), want)
		}
	}
}

func TestCookieJar(t *testing.T) {
	big := strings.Repeat("v", maxCookieBytes-1)
	for _, c := range []struct {
		name  string
		steps []jarStep
	}{
		{"host-only", []jarStep{
			{url: "http://a.test/", set: []string{"a=1"}},
			{url: "http://a.test/x", want: "a=1"},
			{url: "http://a.test:8080/x", want: "a=1"}, // ports are not told apart
			{url: "http://b.test/", want: ""},
			{url: "http://sub.a.test/", want: ""},
		}},
		{"domain does not widen", []jarStep{
			{url: "http://a.test/", set: []string{"a=1; Domain=a.test"}},
			{url: "http://www.a.test/", set: []string{"w=1; Domain=.a.test"}},
			{url: "http://sub.a.test/", want: ""},
			{url: "http://a.test/", want: "a=1"},
			{url: "http://www.a.test/", want: "w=1"},
		}},
		{"foreign domain refused", []jarStep{
			{url: "http://a.test/", set: []string{"a=1; Domain=evil.test", "b=2; Domain=b.a.test"}},
			{url: "http://a.test/", want: "", hosts: -1},
		}},
		{"path", []jarStep{
			{url: "http://a.test/", set: []string{"p=1; Path=/docs"}},
			{url: "http://a.test/docs", want: "p=1"},
			{url: "http://a.test/docs/x?q=1", want: "p=1"},
			{url: "http://a.test/docsx", want: ""},
			{url: "http://a.test/", want: ""},
		}},
		{"default path", []jarStep{
			{url: "http://a.test/dir/page?x=1", set: []string{"d=1", "e=2; Path=relative"}},
			{url: "http://a.test/dir/other", want: "d=1; e=2"},
			{url: "http://a.test/", want: ""},
		}},
		{"order: longer path, then older", []jarStep{
			{url: "http://a.test/", set: []string{"a=1; Path=/", "c=3; Path=/"}},
			{at: time.Second, url: "http://a.test/", set: []string{"b=2; Path=/x"}},
			{url: "http://a.test/x/y", want: "b=2; a=1; c=3"},
		}},
		{"secure", []jarStep{
			{url: "https://a.test/", set: []string{"s=1; Secure", "p=2"}},
			{url: "http://a.test/", set: []string{"t=1; Secure"}}, // refused over http
			{url: "https://a.test/", want: "s=1; p=2"},
			{url: "http://a.test/", want: "p=2"},
		}},
		{"http does not overwrite secure", []jarStep{
			{url: "https://a.test/", set: []string{"s=1; Secure"}},
			{url: "http://a.test/", set: []string{"s=2"}},
			{url: "https://a.test/", want: "s=1"},
		}},
		{"max-age", []jarStep{
			{url: "http://a.test/", set: []string{"m=1; Max-Age=60", "e=1; Expires=Wed, 06 May 2026 07:08:39 GMT"}},
			{at: 29 * time.Second, url: "http://a.test/", want: "m=1; e=1"},
			{at: 30 * time.Second, url: "http://a.test/", want: "m=1"},
			{at: 59 * time.Second, url: "http://a.test/", want: "m=1"},
			{at: 60 * time.Second, url: "http://a.test/", want: "", hosts: -1},
		}},
		{"max-age wins over expires", []jarStep{
			{url: "http://a.test/", set: []string{"m=1; Max-Age=10; Expires=Wed, 06 May 2026 08:00:00 GMT"}},
			{at: 11 * time.Second, url: "http://a.test/", want: ""},
		}},
		{"huge max-age is capped", []jarStep{
			{url: "http://a.test/", set: []string{"m=1; Max-Age=9223372036854775807"}},
			{at: maxCookieAge - time.Second, url: "http://a.test/", want: "m=1"},
			{at: maxCookieAge + time.Second, url: "http://a.test/", want: ""},
		}},
		{"expired deletes", []jarStep{
			{url: "http://a.test/", set: []string{"e=1", "f=1", "g=1"}},
			{at: time.Second, url: "http://a.test/", set: []string{"e=; Expires=Thu, 01 Jan 1970 00:00:00 GMT", "f=; Max-Age=0", "g=; Max-Age=-5"}},
			{at: time.Second, url: "http://a.test/", want: "", hosts: -1},
		}},
		{"expired unknown cookie makes no host", []jarStep{
			{url: "http://a.test/", set: []string{"e=; Max-Age=0"}, hosts: -1},
		}},
		{"replace keeps order", []jarStep{
			{url: "http://a.test/", set: []string{"r=1", "s=1"}},
			{at: time.Second, url: "http://a.test/", set: []string{"r=2"}},
			{url: "http://a.test/", want: "r=2; s=1"},
		}},
		{"size", []jarStep{
			{url: "http://a.test/", set: []string{"k=" + big, "kk=" + big}},
			{url: "http://a.test/", want: "k=" + big},
		}},
		{"prefixes", []jarStep{
			{url: "https://a.test/d/", set: []string{
				"__Secure-a=1; Secure", "__Secure-b=1",
				"__Host-c=1; Secure; Path=/", "__Host-d=1; Secure", "__Host-e=1; Secure; Path=/; Domain=a.test", "__Host-f=1; Path=/",
			}},
			{url: "https://a.test/d/", want: "__Secure-a=1; __Host-c=1"},
		}},
		{"unparsable lines", []jarStep{
			{url: "http://a.test/", set: []string{"", "novalue", "=1", "a b=1", "ok=1", "bad=\x01"}},
			{url: "http://a.test/", want: "ok=1"},
		}},
		{"quoted value", []jarStep{
			{url: "http://a.test/", set: []string{`q="abc"`}},
			{url: "http://a.test/", want: `q="abc"`},
		}},
		{"ip host", []jarStep{
			{url: "http://127.0.0.1/", set: []string{"a=1; Domain=0.0.1", "b=1; Domain=127.0.0.1"}},
			{url: "http://127.0.0.1/", want: "b=1"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runJarSteps(t, newCookieJar(0), c.steps)
		})
	}
}

// TestCookieJarBounds: at most maxCookiesPerHost cookies and
// maxCookieHostBytes bytes a host, the least recently used going first,
// and at most MaxCookieHosts hosts, the least recently used going first.
func TestCookieJarBounds(t *testing.T) {
	t.Run("bytes per host", func(t *testing.T) {
		v := strings.Repeat("v", 3000)
		runJarSteps(t, newCookieJar(0), []jarStep{
			{url: "http://a.test/", set: []string{"a=" + v, "b=" + v}},
			{at: time.Second, url: "http://a.test/", set: []string{"a=" + v}}, // a used last
			{at: 2 * time.Second, url: "http://a.test/", set: []string{"c=" + v}},
			{at: 2 * time.Second, url: "http://a.test/", want: "a=" + v + "; c=" + v},
			{at: 3 * time.Second, url: "http://a.test/", set: []string{"d=1", "e=1"}}, // room left: nothing goes
			{at: 3 * time.Second, url: "http://a.test/", want: "a=" + v + "; c=" + v + "; d=1; e=1"},
		})
	})
	t.Run("per host", func(t *testing.T) {
		j := newCookieJar(0)
		var lines []string
		for i := range maxCookiesPerHost {
			lines = append(lines, fmt.Sprintf("c%d=%d", i, i))
		}
		steps := []jarStep{
			{url: "http://a.test/", set: lines},
			{at: time.Second, url: "http://a.test/", set: []string{"c0=again"}},                   // c0 used last
			{at: 2 * time.Second, url: "http://a.test/", set: []string{"new=1"}},                  // c1 goes
			{at: 3 * time.Second, url: "http://a.test/", set: []string{"c7=; Max-Age=0", "n2=1"}}, // room made, nothing else goes
		}
		runJarSteps(t, j, steps)
		got := string(j.appendHeader(nil, "a.test", false, "/", time.Date(2026, 5, 6, 7, 8, 19, 0, time.UTC)))
		names := map[string]bool{}
		for _, kv := range strings.Split(got, "; ") {
			names[strings.SplitN(kv, "=", 2)[0]] = true
		}
		if len(names) != maxCookiesPerHost || names["c1"] || names["c7"] || !names["c0"] || !names["new"] || !names["n2"] || !names["c2"] || !names["c49"] {
			t.Errorf("%d cookies %q: want %d, without c1 (least recently used) and c7 (deleted)", len(names), got, maxCookiesPerHost)
		}
	})
	t.Run("hosts", func(t *testing.T) {
		j := newCookieJar(3)
		runJarSteps(t, j, []jarStep{
			{url: "http://h1.test/", set: []string{"a=1"}},
			{url: "http://h2.test/", set: []string{"a=2"}},
			{url: "http://h3.test/", set: []string{"a=3"}, hosts: 3},
			{url: "http://h1.test/", want: "a=1"}, // h1 used: h2 is now the least recent
			{url: "http://h4.test/", set: []string{"a=4"}, hosts: 3},
			{url: "http://h2.test/", want: ""},
			{url: "http://h1.test/", want: "a=1"},
			{url: "http://h3.test/", want: "a=3"},
			{url: "http://h4.test/", want: "a=4"},
			{url: "http://h5.test/", set: []string{"a=5"}, hosts: 3}, // h1 is the least recent now
			{url: "http://h1.test/", want: ""},
			{url: "http://h3.test/", want: "a=3"},
		})
	})
}

func TestCookiePaths(t *testing.T) {
	for _, c := range []struct{ url, path, dflt string }{
		{"http://a.test", "/", "/"},
		{"http://a.test/", "/", "/"},
		{"http://a.test?x=1", "/", "/"},
		{"http://a.test/a", "/a", "/"},
		{"http://a.test/a/b?c/d#e", "/a/b", "/a"},
		{"http://a.test:80/a/b/", "/a/b/", "/a/b"},
		{"no-scheme", "/", "/"},
	} {
		if p := cookiePathOf(c.url); p != c.path {
			t.Errorf("cookiePathOf(%q) = %q, want %q", c.url, p, c.path)
		}
		if d := defaultCookiePath(cookiePathOf(c.url)); d != c.dflt {
			t.Errorf("default path of %q = %q, want %q", c.url, d, c.dflt)
		}
	}
	for _, c := range []struct {
		req, cookie string
		match       bool
	}{
		{"/", "/", true}, {"/a", "/", true}, {"/a", "/a", true}, {"/a/b", "/a", true},
		{"/a/b", "/a/", true}, {"/ab", "/a", false}, {"/a", "/a/", false}, {"/", "/a", false},
	} {
		if m := cookiePathMatch(c.req, c.cookie); m != c.match {
			t.Errorf("cookiePathMatch(%q, %q) = %v", c.req, c.cookie, m)
		}
	}
}

// FuzzCookieJar: whatever the Set-Cookie lines, the jar does not panic,
// keeps its bounds, and gives a Cookie header with no control characters
// made of cookies within the size limit.
func FuzzCookieJar(f *testing.F) {
	for _, s := range []string{
		"a=1", "a=1; Path=/x; Secure; HttpOnly", "a=; Max-Age=0", `q="x"`, "__Host-a=1; Secure; Path=/",
		"a=1; Domain=.a.test", "a=1; Expires=Wed, 06 May 2026 07:09:09 GMT", "a=1\r\nX: y", "=", ";;;", "a=1; Max-Age=-1",
		"big=" + strings.Repeat("v", 4000), "huge=" + strings.Repeat("v", 5000),
	} {
		f.Add(s, "/x/y", true)
	}
	f.Fuzz(func(t *testing.T, line, path string, https bool) {
		j := newCookieJar(2)
		now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
		for i, host := range []string{"a.test", "b.a.test", "c.test"} {
			j.setCookies(host, https, path, []string{line, line + "; Path=/", fmt.Sprintf("n%d=1", i)}, now)
		}
		if j.len() > 2 {
			t.Fatalf("%d hosts in a jar of 2", j.len())
		}
		for _, host := range []string{"a.test", "b.a.test", "c.test"} {
			h := j.appendHeader(nil, host, https, path, now)
			if strings.ContainsFunc(string(h), func(r rune) bool { return r < ' ' || r == 0x7f }) {
				t.Fatalf("Cookie header %q has a control character", h)
			}
			for _, kv := range strings.Split(string(h), "; ") {
				if len(kv) > maxCookieBytes+1 {
					t.Fatalf("cookie of %d bytes sent", len(kv))
				}
			}
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		for name, h := range j.mu.hosts {
			if len(h.cookies) > maxCookiesPerHost || len(h.cookies) == 0 {
				t.Fatalf("host %s has %d cookies", name, len(h.cookies))
			}
			n := 0
			for _, c := range h.cookies {
				n += len(c.name) + len(c.value)
			}
			if n != h.bytes || n > maxCookieHostBytes {
				t.Fatalf("host %s has %d bytes of cookies, counted %d (limit %d)", name, n, h.bytes, maxCookieHostBytes)
			}
		}
	})
}

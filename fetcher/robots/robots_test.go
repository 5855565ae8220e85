package robots

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestSynthAgreement checks every URL of a realistic synthetic web against
// websim's own robots verdict, with robots.txt as websim serves it.
func TestSynthAgreement(t *testing.T) {
	w, err := synth.New(synth.Options{Hosts: 200, Pages: 20, Seed: 3, Profile: synth.Realistic, Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	hosts := w.Hosts()
	policies := make([]*Policy, len(hosts))
	kinds := map[synth.RobotsKind]int{}
	var buf []byte
	for h := range hosts {
		resp := w.Respond(buf[:0], nil, h, "/robots.txt", "")
		buf = resp.Body[:0]
		p := FromResponse(resp.Status, resp.Body)
		if p.Unavailable() {
			t.Fatalf("host %d: status %d gives an unavailable policy", h, resp.Status)
		}
		policies[h] = p.Agent("meridian")
		kinds[hosts[h].Robots]++
		if got, want := policies[h].CrawlDelay(), time.Duration(hosts[h].CrawlDelay)*time.Second; got != want {
			t.Errorf("host %s: CrawlDelay = %v, want %v\n%s", hosts[h].Name, got, want, resp.Body)
		}
		var wantMaps []string
		if hosts[h].Sitemap {
			wantMaps = append(wantMaps, w.Origin(h)+"/sitemap.xml")
			if hosts[h].SitemapBad {
				wantMaps = append(wantMaps, w.Origin(h)+"/sitemap-missing.xml")
			}
		}
		if got := p.Sitemaps(); strings.Join(got, " ") != strings.Join(wantMaps, " ") {
			t.Errorf("host %s: Sitemaps = %q, want %q", hosts[h].Name, got, wantMaps)
		}
	}
	for _, k := range []synth.RobotsKind{synth.RobotsNormal, synth.RobotsPartial, synth.RobotsDelay, synth.RobotsMissing, synth.RobotsFlaky, synth.RobotsDisallowAll} {
		if kinds[k] == 0 {
			t.Errorf("the web has no host with robots kind %d; the test covers less than it should", k)
		}
	}
	var n, denied int
	err = w.Truth(func(r *synth.Record) error {
		h, ok := w.Lookup(r.Host)
		if !ok {
			t.Fatalf("truth host %q unknown", r.Host)
		}
		pq := strings.TrimPrefix(r.URL, w.Origin(h))
		if pq == r.URL || !strings.HasPrefix(pq, "/") {
			t.Fatalf("truth URL %q is not under %q", r.URL, w.Origin(h))
		}
		n++
		if !r.RobotsAllowed {
			denied++
		}
		if got := policies[h].Allowed(pq); got != r.RobotsAllowed {
			t.Errorf("%s: Allowed(%q) = %v, truth says %v", r.Host, pq, got, r.RobotsAllowed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 || denied == 0 || denied == n {
		t.Fatalf("truth has %d records, %d denied: too few to test", n, denied)
	}
	t.Logf("%d truth records, %d denied by robots.txt", n, denied)
}

func TestFromResponseStatus(t *testing.T) {
	body := []byte("User-agent: *\nDisallow: /x\n")
	tests := []struct {
		status      int
		unavailable bool
		allowX      bool // /x
		allowY      bool // /y
	}{
		{200, false, false, true},
		{204, false, false, true},
		{299, false, false, true},
		{301, false, true, true},
		{399, false, true, true},
		{400, false, true, true},
		{401, false, true, true},
		{403, false, true, true},
		{404, false, true, true},
		{410, false, true, true},
		{429, true, false, false},
		{499, false, true, true},
		{500, true, false, false},
		{503, true, false, false},
		{599, true, false, false},
		{0, true, false, false},
		{-1, true, false, false},
		{100, true, false, false},
		{600, true, false, false},
	}
	for _, tt := range tests {
		p := FromResponse(tt.status, body).Agent("meridian")
		if p.Unavailable() != tt.unavailable || p.Allowed("/x") != tt.allowX || p.Allowed("/y") != tt.allowY {
			t.Errorf("status %d: Unavailable %v Allowed(/x) %v Allowed(/y) %v, want %v %v %v",
				tt.status, p.Unavailable(), p.Allowed("/x"), p.Allowed("/y"), tt.unavailable, tt.allowX, tt.allowY)
		}
		if !p.Allowed("/robots.txt") {
			t.Errorf("status %d: /robots.txt not allowed", tt.status)
		}
	}
}

// check is one Allowed expectation.
type check struct {
	pq    string
	allow bool
}

func TestAllowedTable(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		agent  string // "" → unbound
		checks []check
		delay  time.Duration
	}{
		{name: "empty body", body: "", checks: []check{{"/", true}, {"/a?b", true}}},
		{name: "whitespace body", body: " \n\r\n\t\n", checks: []check{{"/", true}}},
		{name: "garbage bytes", body: "\x00\xff\xfe<html><body>Not a robots file\x80\x81</body></html>\n:::\n\x1b[2J",
			checks: []check{{"/", true}, {"/private/", true}}},
		{name: "html error page served as 200", body: "<!DOCTYPE html>\n<html><head><title>Welcome</title></head>\n<body>Disallow: /</body></html>",
			checks: []check{{"/", true}}},
		{name: "BOM", body: "\xef\xbb\xbfUser-agent: *\nDisallow: /private/\n",
			checks: []check{{"/private/1.html", false}, {"/public", true}}},
		{name: "CR only line ends", body: "User-agent: *\rDisallow: /a\rAllow: /a/b\r",
			checks: []check{{"/a", false}, {"/a/b", true}, {"/b", true}}},
		{name: "CRLF and comments", body: "# hello\r\nUser-agent: * # all\r\nDisallow: /a # not /b\r\n",
			checks: []check{{"/a", false}, {"/b", true}}},
		{name: "longest match wins", body: "User-agent: *\nDisallow: /p/1\nAllow: /p/1.html\n",
			checks: []check{{"/p/1", false}, {"/p/10.html", false}, {"/p/1.html", true}, {"/p/1.htmlx", true}, {"/p/2.html", true}}},
		{name: "longest match regardless of order", body: "User-agent: *\nAllow: /a/b\nDisallow: /a\n",
			checks: []check{{"/a/b/c", true}, {"/a/c", false}}},
		{name: "allow wins a tie", body: "User-agent: *\nDisallow: /a\nAllow: /a\n",
			checks: []check{{"/a", true}, {"/ab", true}}},
		{name: "allow wins a tie, allow first", body: "User-agent: *\nAllow: /a\nDisallow: /a\n",
			checks: []check{{"/a", true}}},
		{name: "disallow all", body: "User-agent: *\nDisallow: /\n",
			checks: []check{{"/", false}, {"/x", false}, {"/robots.txt", true}}},
		{name: "disallow all but the front page", body: "User-agent: *\nDisallow: /\nAllow: /$\n",
			checks: []check{{"/", true}, {"/x", false}, {"/?q", false}}},
		{name: "empty disallow", body: "User-agent: *\nDisallow:\n",
			checks: []check{{"/", true}, {"/x", true}}},
		{name: "dollar anchors", body: "User-agent: *\nDisallow: /*.php$\n",
			checks: []check{{"/a.php", false}, {"/a/b.php", false}, {"/a.php?x=1", true}, {"/a.phps", true}, {"/php", true}}},
		{name: "star in the middle", body: "User-agent: *\nDisallow: /a*/b\n",
			checks: []check{{"/a/b", false}, {"/axx/b", false}, {"/axx/bc", false}, {"/x/a/b", true}, {"/b", true}}},
		{name: "wildcard rules are anchored at the start", body: "User-agent: *\nDisallow: /foo*bar\n",
			checks: []check{{"/foobar", false}, {"/foo/x/bar", false}, {"/x/foo/bar", true}, {"/xfoobar", true}}},
		{name: "leading star", body: "User-agent: *\nDisallow: *.gif\n",
			checks: []check{{"/a.gif", false}, {"/x/y.gif?z", false}, {"/a.png", true}}},
		{name: "bare star", body: "User-agent: *\nDisallow: *\n",
			checks: []check{{"/", false}, {"/anything", false}}},
		{name: "trailing stars", body: "User-agent: *\nDisallow: /a***\n",
			checks: []check{{"/a", false}, {"/ab", false}, {"/b", true}}},
		{name: "query in rule", body: "User-agent: *\nDisallow: /search?\nDisallow: /*?sid=\n",
			checks: []check{{"/search", true}, {"/search?q=1", false}, {"/p?sid=1", false}, {"/p?x=1&sid=1", true}, {"/p", true}}},
		{name: "missing leading slash", body: "User-agent: *\nDisallow: private\n",
			checks: []check{{"/private", false}, {"/x", true}}},
		{name: "percent normalisation", body: "User-agent: *\nDisallow: /%7euser\nDisallow: /caf\xc3\xa9\nDisallow: /a%2fb\nDisallow: /with space\n",
			checks: []check{{"/~user", false}, {"/%7Euser/x", false}, {"/caf%C3%A9", false}, {"/caf%c3%a9", false}, {"/a%2Fb", false}, {"/a/b", true}, {"/with%20space", false}, {"/with", true}}},
		{name: "rules before any group are ignored", body: "Disallow: /\nCrawl-delay: 9\nUser-agent: *\nDisallow: /x\n",
			checks: []check{{"/", true}, {"/x", false}}},
		{name: "unknown records do not break parsing", body: "User-agent: *\nNoindex: /a\nHost: example.com\nRequest-rate: 1/5\nDisallow: /b\n",
			checks: []check{{"/a", true}, {"/b", false}}},
		{name: "invalid crawl-delay ignored", body: "User-agent: *\nCrawl-delay: soon\nDisallow: /b\n",
			checks: []check{{"/b", false}}},
		{name: "crawl-delay fraction", body: "User-agent: *\nCrawl-delay: 2.5\n", checks: []check{{"/", true}}, delay: 2500 * time.Millisecond},
		{name: "crawl-delay huge is capped", body: "User-agent: *\nCrawl-delay: 1e300\n", checks: []check{{"/", true}}, delay: MaxCrawlDelay},
		{name: "crawl-delay negative ignored", body: "User-agent: *\nCrawl-delay: -5\n", checks: []check{{"/", true}}},
		{name: "missing colon", body: "User-agent *\nDisallow /x\n", checks: []check{{"/x", false}, {"/y", true}}},
		{name: "key case and spacing", body: "USER-AGENT :*\n  DISALLOW   :   /x  \n", checks: []check{{"/x", false}}},
		{name: "misspelt disallow", body: "User-agent: *\nDissallow: /x\n", checks: []check{{"/x", false}}},
		{name: "only other agents", body: "User-agent: badbot\nDisallow: /\n",
			agent: "meridian", checks: []check{{"/", true}}},
		{name: "own group overrides star", body: "User-agent: *\nDisallow: /\n\nUser-agent: meridian\nDisallow:\n",
			agent: "meridian", checks: []check{{"/", true}, {"/x", true}}},
		{name: "own group overrides star, unbound sees star", body: "User-agent: *\nDisallow: /\n\nUser-agent: meridian\nDisallow:\n",
			checks: []check{{"/", false}}},
		{name: "agent case", body: "User-agent: MeRiDiAn\nDisallow: /m\n\nUser-agent: *\nDisallow: /s\n",
			agent: "MERIDIAN", checks: []check{{"/m", false}, {"/s", true}}},
		{name: "agent full UA string", body: "User-agent: meridian\nDisallow: /m\n",
			agent: "Meridian/0.1 (+https://example.invalid/meridian)", checks: []check{{"/m", false}}},
		{name: "agent line with version", body: "User-agent: Meridian/2.0\nDisallow: /m\n",
			agent: "meridian", checks: []check{{"/m", false}}},
		{name: "no prefix match of agent", body: "User-agent: meri\nDisallow: /\n\nUser-agent: *\nDisallow: /s\n",
			agent: "meridian", checks: []check{{"/", true}, {"/s", false}}},
		{name: "no prefix match the other way", body: "User-agent: meridianbot\nDisallow: /\n",
			agent: "meridian", checks: []check{{"/", true}}},
		{name: "groups with several agents", body: "User-agent: a\nUser-agent: meridian\nUser-agent: b\nDisallow: /x\n\nUser-agent: *\nDisallow: /\n",
			agent: "meridian", checks: []check{{"/x", false}, {"/y", true}}},
		{name: "groups for one agent merge", body: "User-agent: meridian\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n\nUser-agent: meridian\nDisallow: /b\nCrawl-delay: 3\n",
			agent: "meridian", checks: []check{{"/a", false}, {"/b", false}, {"/c", true}}, delay: 3 * time.Second},
		{name: "sitemap between agent lines keeps the group", body: "User-agent: a\nSitemap: http://x.test/s.xml\nUser-agent: meridian\nDisallow: /x\n",
			agent: "meridian", checks: []check{{"/x", false}}},
		{name: "unnamed agent does not capture rules", body: "User-agent: *\nDisallow: /a\n\nUser-agent: 123\nDisallow: /\n",
			checks: []check{{"/a", false}, {"/b", true}}},
		{name: "crawl-delay per group", body: "User-agent: *\nCrawl-delay: 7\n\nUser-agent: meridian\nDisallow: /x\n",
			agent: "meridian", checks: []check{{"/x", false}}, delay: 0},
		{name: "empty path query", body: "User-agent: *\nDisallow: /\n", checks: []check{{"", false}}},
		{name: "relative path query", body: "User-agent: *\nDisallow: /a\n", checks: []check{{"a", false}, {"b", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := FromResponse(200, []byte(tt.body))
			if tt.agent != "" {
				p = p.Agent(tt.agent)
			}
			for _, c := range tt.checks {
				if got := p.Allowed(c.pq); got != c.allow {
					t.Errorf("Allowed(%q) = %v, want %v", c.pq, got, c.allow)
				}
			}
			if got := p.CrawlDelay(); got != tt.delay {
				t.Errorf("CrawlDelay = %v, want %v", got, tt.delay)
			}
			if p.Unavailable() {
				t.Errorf("Unavailable for a 200")
			}
		})
	}
}

func TestSitemaps(t *testing.T) {
	body := "Sitemap: http://a.test/1.xml\nUser-agent: *\nsitemap:http://a.test/2.xml\nSitemap: http://a.test/1.xml\nSITEMAP : https://a.test/3.xml?x=1 # c\nSitemap:\n"
	got := FromResponse(200, []byte(body)).Agent("meridian").Sitemaps()
	want := []string{"http://a.test/1.xml", "http://a.test/2.xml", "https://a.test/3.xml?x=1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Sitemaps = %q, want %q", got, want)
	}
	var b strings.Builder
	for i := range MaxSitemaps + 50 {
		b.WriteString("Sitemap: http://a.test/s" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + ".xml\n")
	}
	if n := len(FromResponse(200, []byte(b.String())).Sitemaps()); n != MaxSitemaps {
		t.Fatalf("%d sitemaps kept, want %d", n, MaxSitemaps)
	}
}

func TestHugeBody(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("User-agent: *\nDisallow: /early\n")
	for b.Len() < 2*crawl.MaxRobotsBytes {
		b.WriteString("Disallow: /filler/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n")
	}
	b.WriteString("Disallow: /late\n")
	start := time.Now()
	p := FromResponse(200, b.Bytes())
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("parsing a %d-byte body took %v", b.Len(), el)
	}
	if !p.Truncated() {
		t.Error("Truncated = false for a body over MaxRobotsBytes")
	}
	if p.Allowed("/early") || !p.Allowed("/late") || p.Allowed("/filler/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab") {
		t.Errorf("truncated body: Allowed(/early) %v, (/late) %v", p.Allowed("/early"), p.Allowed("/late"))
	}
	// A body cut in the middle of a line drops that partial line.
	body := "User-agent: *\nDisallow: /x\n" + strings.Repeat("#", crawl.MaxRobotsBytes-len("User-agent: *\nDisallow: /x\n")-3) + "\nDisallow: /abcdef\n"
	p = FromResponse(200, []byte(body))
	if !p.Allowed("/abc") || p.Allowed("/x") {
		t.Errorf("partial last line: Allowed(/abc) %v Allowed(/x) %v", p.Allowed("/abc"), p.Allowed("/x"))
	}
	if FromResponse(200, []byte(strings.Repeat("a", crawl.MaxRobotsBytes+1))).Allowed("/") != true {
		t.Error("one huge line: not allowed")
	}
}

func TestNormPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/a/b?c=d&e", "/a/b?c=d&e"},
		{"/%7e%7E%41", "/~~A"},
		{"/%2f%2F", "/%2F%2F"},
		{"/%zz%4", "/%25zz%254"},
		{"/%", "/%25"},
		{"/ \"<>\\^`{|}", "/%20%22%3C%3E%5C%5E%60%7B%7C%7D"},
		{"/\x00\x7f\xff", "/%00%7F%FF"},
		{"/*$!'()+,;=:@[]", "/*$!'()+,;=:@[]"},
	}
	for _, tt := range tests {
		if got := string(normPath(nil, tt.in)); got != tt.want {
			t.Errorf("normPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestProductToken(t *testing.T) {
	tests := []struct{ in, want string }{
		{"meridian", "meridian"},
		{"Meridian/0.1 (+x)", "meridian"},
		{"  Googlebot-Image", "googlebot-image"},
		{"*", "*"},
		{"*bot", "*"},
		{"my_bot2", "my_bot"},
		{"123", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := ProductToken(tt.in); got != tt.want {
			t.Errorf("ProductToken(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzFromResponse(f *testing.F) {
	f.Add(200, []byte("User-agent: *\nDisallow: /private/\nAllow: /private/ok\nCrawl-delay: 2\nSitemap: http://a.test/s.xml\n"), "/private/x?y", "meridian")
	f.Add(200, []byte("User-agent: meridian\nDisallow: /*.php$\n\nUser-agent: *\nDisallow: /\n"), "/a.php", "Meridian/0.1")
	f.Add(200, []byte("\xef\xbb\xbfuser-agent:*\rdisallow:*\r"), "", "")
	f.Add(200, []byte("Disallow: /\nUser-agent\nAllow\n:\n::\nCrawl-delay: NaN\nCrawl-delay: Inf\n"), "/%zz", "*")
	f.Add(200, []byte("User-agent: *\nDisallow: /a$b*c$\nDisallow: /(x)[y]{z}.+?\\\n"), "/(x)[y]{z}.+?\\", "x")
	f.Add(404, []byte(""), "/", "meridian")
	f.Add(503, []byte("User-agent: *\nAllow: /\n"), "/", "meridian")
	f.Add(0, []byte(nil), "/robots.txt", "")
	f.Fuzz(func(t *testing.T, status int, body []byte, pq, agent string) {
		p := FromResponse(status, body)
		q := p.Agent(agent)
		a1 := q.Allowed(pq)
		if a2 := q.Allowed(pq); a1 != a2 {
			t.Fatalf("Allowed(%q) not deterministic", pq)
		}
		if !q.Allowed("/robots.txt") {
			t.Fatal("/robots.txt disallowed")
		}
		if q.Unavailable() && a1 && pq != "/robots.txt" {
			t.Fatalf("unavailable policy allows %q", pq)
		}
		if d := q.CrawlDelay(); d < 0 || d > MaxCrawlDelay {
			t.Fatalf("CrawlDelay = %v", d)
		}
		if len(q.Sitemaps()) > MaxSitemaps {
			t.Fatalf("%d sitemaps", len(q.Sitemaps()))
		}
		if p.parseErr != nil {
			t.Fatalf("temoto refused the rewrite: %v", p.parseErr)
		}
	})
}

func BenchmarkAllowed(b *testing.B) {
	p := FromResponse(200, []byte("User-agent: badbot\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\nDisallow: /cgi-bin/\nDisallow: /p/1\nAllow: /p/1.html\nDisallow: /*?sid=\n")).Agent("meridian")
	paths := []string{"/p/12.html", "/private/3.html", "/a/b/c/d.html?x=1", "/p/1.html"}
	for i := 0; b.Loop(); i++ {
		p.Allowed(paths[i%len(paths)])
	}
}

func BenchmarkFromResponse(b *testing.B) {
	body := []byte("# robots.txt for h1.fr.test\nUser-agent: badbot\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\nDisallow: /cgi-bin/\nDisallow: /p/1\nAllow: /p/1.html\nCrawl-delay: 2\n\nSitemap: http://h1.fr.test/sitemap.xml\n")
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		FromResponse(200, body).Agent("meridian")
	}
}

package urlnorm

import (
	"errors"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// storeAccepts returns the crawl database's verdict on u.
func storeAccepts(u string) error {
	b := store.NewBatch()
	b.UpsertCash(u, 0, 0)
	_, err := b.Encode()
	return err
}

// checkOK normalises in, compares with want, and checks that the result is
// accepted by the store and is a fixed point.
func checkOK(t *testing.T, n *Normalizer, in, want string) {
	t.Helper()
	got, err := n.Normalize(nil, []byte(in))
	if err != nil {
		t.Errorf("Normalize(%q): %v, want %q", in, err, want)
		return
	}
	if string(got) != want {
		t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
	}
	if err := storeAccepts(string(got)); err != nil {
		t.Errorf("Normalize(%q) = %q, rejected by the store: %v", in, got, err)
	}
	again, err := n.Normalize(nil, got)
	if err != nil || string(again) != string(got) {
		t.Errorf("Normalize(%q) = %q, then %q, %v: not idempotent", in, got, again, err)
	}
}

func TestNormalizeRules(t *testing.T) {
	n := New(Options{})
	for _, group := range []struct {
		rule  string
		cases [][2]string
	}{
		{"scheme and host lower-cased", [][2]string{
			{"HTTP://EXAMPLE.COM/", "http://example.com/"},
			{"HttpS://Www.Example.Com/A/B", "https://www.example.com/A/B"},
			{"http://h1.us.test/p/1.html", "http://h1.us.test/p/1.html"},
			{"http://under_score.example/", "http://under_score.example/"},
			{"http://127.0.0.1:8080/x", "http://127.0.0.1:8080/x"},
		}},
		{"idn to punycode", [][2]string{
			{"http://bücher.example/", "http://xn--bcher-kva.example/"},
			{"http://BÜCHER.example/", "http://xn--bcher-kva.example/"},
			{"http://%62%C3%BCcher.example/", "http://xn--bcher-kva.example/"},
			{"http://ｅｘａｍｐｌｅ.com/", "http://example.com/"},
			{"http://xn--bcher-kva.example/", "http://xn--bcher-kva.example/"},
			{"http://東京.jp/", "http://xn--1lqs71d.jp/"},
		}},
		{"trailing dot dropped", [][2]string{
			{"http://example.com./", "http://example.com/"},
			{"http://example.com.:8080/", "http://example.com:8080/"},
		}},
		{"userinfo dropped", [][2]string{
			{"http://user:pass@example.com/", "http://example.com/"},
			{"http://a@b@example.com/x", "http://example.com/x"},
			{"http://@example.com/", "http://example.com/"},
		}},
		{"default port dropped", [][2]string{
			{"http://example.com:80/", "http://example.com/"},
			{"https://example.com:443/", "https://example.com/"},
			{"http://example.com:443/", "http://example.com:443/"},
			{"https://example.com:80/", "https://example.com:80/"},
			{"http://example.com:0080/", "http://example.com/"},
			{"http://example.com:08080/", "http://example.com:8080/"},
			{"http://example.com:/", "http://example.com/"},
			{"http://example.com:65535/", "http://example.com:65535/"},
		}},
		{"empty path is /", [][2]string{
			{"http://example.com", "http://example.com/"},
			{"http://example.com?q=1", "http://example.com/?q=1"},
			{"http://example.com#frag", "http://example.com/"},
		}},
		{"dot segments removed", [][2]string{
			{"http://e.com/a/b/../c", "http://e.com/a/c"},
			{"http://e.com/a/./b/.", "http://e.com/a/b/"},
			{"http://e.com/../../x", "http://e.com/x"},
			{"http://e.com/a/..", "http://e.com/"},
			{"http://e.com/a/%2E%2e/b", "http://e.com/b"},
			{"http://e.com/a/.b/..c/", "http://e.com/a/.b/..c/"},
			{"http://e.com/x/..?a/../b", "http://e.com/?a/../b"},
			{"http://e.com//a/../b", "http://e.com//b"},
		}},
		{"percent-escapes", [][2]string{
			{"http://e.com/%7euser/%7Efoo", "http://e.com/~user/~foo"},
			{"http://e.com/%41%62%2d%5F%30", "http://e.com/Ab-_0"},
			{"http://e.com/a%2fb%3Fc%3d", "http://e.com/a%2Fb%3Fc%3D"},
			{"http://e.com/100%", "http://e.com/100%25"},
			{"http://e.com/%zz%4", "http://e.com/%25zz%254"},
			{"http://e.com/%25", "http://e.com/%25"},
			{"http://e.com/?q=%e2%82%ac", "http://e.com/?q=%E2%82%AC"},
		}},
		{"bytes percent-encoded", [][2]string{
			{"http://e.com/a b", "http://e.com/a%20b"},
			{"http://e.com/é", "http://e.com/%C3%A9"},
			{"http://e.com/\x7f\x01x", "http://e.com/%7F%01x"},
			{"http://e.com/\"<>\\^`{|}", "http://e.com/%22%3C%3E%5C%5E%60%7B%7C%7D"},
			{"http://e.com/?q=a b&r=<x>", "http://e.com/?q=a%20b&r=%3Cx%3E"},
			{"http://e.com/[x]!$&'()*+,;=:@", "http://e.com/[x]!$&'()*+,;=:@"},
		}},
		{"whitespace trimmed, tabs and newlines removed", [][2]string{
			{"  http://e.com/x \n", "http://e.com/x"},
			{"http://e.\tcom/a\nb\r", "http://e.com/ab"},
		}},
		{"fragment dropped", [][2]string{
			{"http://e.com/a#b", "http://e.com/a"},
			{"http://e.com/a?q#b?c", "http://e.com/a?q"},
			{"http://e.com/#", "http://e.com/"},
		}},
		{"session parameters removed", [][2]string{
			{"http://e.com/a?sid=123", "http://e.com/a"},
			{"http://e.com/a?x=1&PHPSESSID=ab&y=2", "http://e.com/a?x=1&y=2"},
			{"http://e.com/a?JSessionID=1&sessid=2&x", "http://e.com/a?x"},
			{"http://e.com/a?x=1&cfid=2&cftoken=3", "http://e.com/a?x=1"},
			{"http://e.com/a?sidx=1&xsid=2", "http://e.com/a?sidx=1&xsid=2"},
			{"http://e.com/a?%73id=1&b", "http://e.com/a?b"},
			{"http://e.com/a;jsessionid=0A1B?x=1", "http://e.com/a?x=1"},
			{"http://e.com/a;JSESSIONID=0A1B/b;v=1", "http://e.com/a/b;v=1"},
			{"http://e.com/a;x=1;sid=2;y", "http://e.com/a;x=1;y"},
			{"http://e.com/a/..;sid=1/b", "http://e.com/b"},
		}},
		{"empty query dropped", [][2]string{
			{"http://e.com/a?", "http://e.com/a"},
			{"http://e.com/?#x", "http://e.com/"},
			{"http://e.com/a?&", "http://e.com/a?&"},
		}},
	} {
		t.Run(group.rule, func(t *testing.T) {
			for _, c := range group.cases {
				checkOK(t, n, c[0], c[1])
			}
		})
	}
}

func TestNormalizeErrors(t *testing.T) {
	n := New(Options{})
	long := "http://e.com/" + strings.Repeat("a", crawl.MaxURLLen)
	for _, c := range []struct {
		in   string
		want error
	}{
		{"mailto:webmaster@example.com", ErrScheme},
		{"javascript:void(0)", ErrScheme},
		{"JavaScript:alert(1)", ErrScheme},
		{"data:text/html,<p>", ErrScheme},
		{"ftp://example.com/", ErrScheme},
		{"tel:+123", ErrScheme},
		{"/relative/path", ErrSyntax},
		{"//example.com/x", ErrSyntax},
		{"", ErrSyntax},
		{"   ", ErrSyntax},
		{"1http://x/", ErrSyntax},
		{"http://", ErrHost},
		{"http:///x", ErrHost},
		{"http:x", ErrHost},
		{"http:/x", ErrHost},
		{"http://:80/", ErrHost},
		{"http://user@/", ErrHost},
		{"http://[fe80::1%25eth0]/", ErrHost},
		{"http://[::1/", ErrHost},
		{"http://e.com:0/", ErrHost},
		{"http://e.com:000/", ErrHost},
		{"http://e.com:65536/", ErrHost},
		{"http://e.com:123456/", ErrHost},
		{"http://e.com:8o/", ErrHost},
		{"http://e.com:-1/", ErrHost},
		{"http://e.com:80:80/", ErrHost},
		{"http://a..b/", ErrHost},
		{"http://.e.com/", ErrHost},
		{"http://./", ErrHost},
		{"http://e.com../", ErrHost},
		{"http://e\x00.com/", ErrHost},
		{"http://e\x01x.com/", ErrHost},
		{"http://e\x7f.com/", ErrHost},
		{"http://e com/", ErrHost},
		{"http://e<.com/", ErrHost},
		{"http://e%20x.com/", ErrHost},
		{"http://e%2.com/", ErrHost},
		{"http://e%2541.com/", ErrHost},
		{"http://e\xff.com/", ErrHost},
		{"http://" + strings.Repeat("a", 64) + ".com/", ErrHost},
		{"http://" + strings.Repeat("a.", 127) + "aa/", ErrHost},
		{"http://e.com\\x/", ErrHost},
		{long, ErrTooLong},
		{"http://e.com/" + strings.Repeat("%41", 4*crawl.MaxURLLen), ErrTooLong},
		{"http://e.com/" + strings.Repeat("\x01x", crawl.MaxURLLen/2), ErrTooLong},
	} {
		dst := []byte("keep")
		got, err := n.Normalize(dst, []byte(c.in))
		if !errors.Is(err, c.want) {
			t.Errorf("Normalize(%.60q) = %q, %v; want error %v", c.in, got, err, c.want)
			continue
		}
		if string(got) != "keep" {
			t.Errorf("Normalize(%.60q) failed but changed dst to %q", c.in, got)
		}
		var e *Error
		if !errors.As(err, &e) || len(e.Input) > maxErrInput+3 || !strings.HasPrefix(c.in, strings.TrimSuffix(e.Input, "...")) {
			t.Errorf("Normalize(%.60q): error %v does not name the input", c.in, err)
		}
	}
}

func TestNormalizeAppends(t *testing.T) {
	n := New(Options{})
	dst := make([]byte, 0, 256)
	dst = append(dst, "prefix "...)
	out, err := n.Normalize(dst, []byte("HTTP://E.COM/x"))
	if err != nil || string(out) != "prefix http://e.com/x" {
		t.Fatalf("got %q, %v", out, err)
	}
}

func TestOptions(t *testing.T) {
	short := New(Options{MaxLen: 20})
	if _, err := short.Normalize(nil, []byte("http://e.com/0123456")); err != nil {
		t.Fatalf("20 bytes: %v", err)
	}
	if _, err := short.Normalize(nil, []byte("http://e.com/01234567")); !errors.Is(err, ErrTooLong) {
		t.Fatalf("21 bytes: %v, want ErrTooLong", err)
	}
	if got := New(Options{MaxLen: 1 << 20}).MaxLen(); got != crawl.MaxURLLen {
		t.Fatalf("MaxLen clamped to %d, want %d", got, crawl.MaxURLLen)
	}
	none := New(Options{StripParams: []string{}})
	checkOK(t, none, "http://e.com/a;jsessionid=1?sid=2", "http://e.com/a;jsessionid=1?sid=2")
	custom := New(Options{StripParams: []string{"UTM_Source", "ref"}})
	checkOK(t, custom, "http://e.com/?utm_source=x&sid=1&REF=2&a", "http://e.com/?sid=1&a")
}

// TestWebsimSessionParams checks that every session-id parameter websim
// uses is stripped by default, in query and path form.
func TestWebsimSessionParams(t *testing.T) {
	n := New(Options{})
	params := synth.SessionParams()
	if len(params) == 0 {
		t.Fatal("websim names no session parameters")
	}
	for _, p := range params {
		checkOK(t, n, "http://h1.us.test/p/1.html?"+p+"=00ff00ff00ff00ff", "http://h1.us.test/p/1.html")
		checkOK(t, n, "http://h1.us.test/p/1.html?view=print&"+p+"=1", "http://h1.us.test/p/1.html?view=print")
		checkOK(t, n, "http://h1.us.test/p/1.html;"+p+"=1", "http://h1.us.test/p/1.html")
	}
}

func TestNormalizeString(t *testing.T) {
	n := New(Options{})
	if s, err := n.NormalizeString("HTTP://E.com"); err != nil || s != "http://e.com/" {
		t.Fatalf("got %q, %v", s, err)
	}
	if _, err := n.NormalizeString("mailto:x@y"); !errors.Is(err, ErrScheme) {
		t.Fatalf("mailto: %v", err)
	}
}

package urlrules

import (
	"errors"
	"strings"
	"testing"
)

const sample = `# a crawl of example.com's docs, without its spam or PDFs
-suffix:.pdf
+host:docs.example.com
-host-suffix:spam.test
+prefix:https://example.com/a/
-regex:[?&]sessionid=
-[?&]sid=
-host:example.com
+.
`

// TestRules: what the sample file accepts and refuses, and which line
// decides.
func TestRules(t *testing.T) {
	rs, err := ParseString("sample", sample)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Len() != 8 {
		t.Fatalf("%d rules, want 8", rs.Len())
	}
	for _, tc := range []struct {
		url    string
		accept bool
		line   int // the deciding rule's line; 0: none
	}{
		{"https://docs.example.com/guide.pdf", false, 2}, // the first match wins
		{"https://docs.example.com/guide.html", true, 3},
		{"https://docs.example.com:8443/x", true, 3}, // the port is not the host's
		{"https://spam.test/", false, 4},
		{"https://a.b.spam.test/x", false, 4},
		{"https://notspam.test/", true, 9}, // a host suffix is a whole label
		{"https://example.com/a/page", true, 5},
		{"https://example.com/b/page", false, 8},
		{"https://other.test/x?sessionid=7", false, 6},
		{"https://other.test/x?a=1&sid=7", false, 7},
		{"https://other.test/x", true, 9},
		{"http://user@docs.example.com/x", true, 3},
	} {
		r, matched := rs.Match([]byte(tc.url))
		got := rs.Allow([]byte(tc.url))
		if got != tc.accept || matched != (tc.line != 0) || r.Line != tc.line {
			t.Errorf("%s: accept %v by line %d, want %v by line %d", tc.url, got, r.Line, tc.accept, tc.line)
		}
	}
	// No rule matches: refused, as in Nutch.
	only, err := ParseString("only", "+host:a.test\n")
	if err != nil {
		t.Fatal(err)
	}
	if !only.Allow([]byte("http://a.test/")) || only.Allow([]byte("http://b.test/")) {
		t.Error("a URL no rule matches should be refused, one that +host matches accepted")
	}
	var none *Rules
	if !none.Allow([]byte("http://anything.test/")) || none.Len() != 0 {
		t.Error("nil rules should accept everything")
	}
}

// TestParseErrors: every bad line is reported with its number, and no
// rules are returned.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"no sign", "host:a.test\n", []string{"rules.txt:1:", "starts with + (accept) or - (reject)"}},
		{"bad regex", "+.\n\n-regex:a(b\n", []string{"rules.txt:3:", "missing closing )"}},
		{"bad nutch regex", "# c\n-[\n", []string{"rules.txt:2:"}},
		{"empty pattern", "+prefix:\n", []string{"rules.txt:1:", "empty pattern"}},
		{"bad host", "-host:a.test/x\n", []string{"rules.txt:1:", "not a host name"}},
		{"two bad lines", "x\n+.\ny\n", []string{"rules.txt:1:", "rules.txt:3:"}},
		{"long line", "+" + strings.Repeat("a", MaxLineLen+10) + "\n", []string{"rules.txt:1:", "longer than"}},
	} {
		rs, err := ParseString("rules.txt", tc.text)
		if err == nil || rs != nil || !errors.Is(err, ErrRules) {
			t.Errorf("%s: rules %v, error %v; want ErrRules", tc.name, rs, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
	}
	rs, err := ParseString("empty", "# nothing\n\n")
	if err != nil || rs.Len() != 0 || rs.Allow([]byte("http://a.test/")) {
		t.Errorf("an empty file: %v, %v; want no rules, every URL refused", rs, err)
	}
}

// FuzzParse: any text parses or is refused with ErrRules, never a panic;
// a parsed file's verdict on a URL is its first matching rule's.
func FuzzParse(f *testing.F) {
	f.Add(sample, "https://docs.example.com/x")
	f.Add("+host:[::1]\n-.\n", "http://[::1]:80/")
	f.Add("-regex:(\n", "x")
	f.Fuzz(func(t *testing.T, text, u string) {
		rs, err := ParseString("fuzz", text)
		if err != nil {
			if !errors.Is(err, ErrRules) {
				t.Fatalf("error %v is not ErrRules", err)
			}
			return
		}
		r, ok := rs.Match([]byte(u))
		if rs.Allow([]byte(u)) != (ok && r.Accept) {
			t.Fatal("Allow disagrees with Match")
		}
		if ok && (r.Line < 1 || r.Pattern == "") {
			t.Fatalf("matched rule %+v", r)
		}
	})
}

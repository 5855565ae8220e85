package crawl_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/crawl"
)

func TestStatusString(t *testing.T) {
	tests := []struct {
		s    crawl.Status
		want string
	}{
		{crawl.StatusUnfetched, "unfetched"},
		{crawl.StatusGenerated, "generated"},
		{crawl.StatusFetched, "fetched"},
		{crawl.StatusRedirect, "redirect"},
		{crawl.StatusGone, "gone"},
		{crawl.StatusError, "error"},
		{crawl.StatusRobotsDenied, "robots-denied"},
		{crawl.StatusDuplicate, "duplicate"},
		{0, "Status(0)"},
		{crawl.StatusCount, "Status(9)"},
		{255, "Status(255)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Status(%d).String() = %q, want %q", uint8(tt.s), got, tt.want)
		}
	}
	// Every valid status has a name of its own.
	seen := map[string]crawl.Status{}
	for s := crawl.StatusUnfetched; s < crawl.StatusCount; s++ {
		name := s.String()
		if strings.HasPrefix(name, "Status(") {
			t.Errorf("status %d has no name", uint8(s))
		}
		if prev, ok := seen[name]; ok {
			t.Errorf("statuses %d and %d are both named %q", uint8(prev), uint8(s), name)
		}
		seen[name] = s
	}
}

// TestDependencies keeps the fetcher runnable on a node without a crawl
// database, and this package free of anything outside the standard library.
func TestDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	root := moduleRoot(t, goBin)
	const module = "github.com/meridian-crawler/meridian"

	tests := []struct {
		name     string
		pattern  string
		format   string // -f template for go list
		mustHave string // a package the output must list, so an empty answer fails
		bad      func(importPath string) bool
	}{
		{
			name:     "fetcher has no crawl database",
			pattern:  "./fetcher/...",
			format:   "{{.ImportPath}}",
			mustHave: module + "/fetcher",
			bad: func(p string) bool {
				return under(p, module+"/crawldb") || under(p, "github.com/cockroachdb/pebble")
			},
		},
		{
			name:     "crawl imports only the standard library",
			pattern:  "./crawl",
			format:   "{{if not .Standard}}{{.ImportPath}}{{end}}",
			mustHave: module + "/crawl",
			bad:      func(p string) bool { return p != module+"/crawl" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(goBin, "list", "-deps", "-f", tt.format, tt.pattern)
			cmd.Dir = root
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", tt.pattern, err, stderr.Bytes())
			}
			found := false
			for _, p := range strings.Fields(string(out)) {
				if p == tt.mustHave {
					found = true
					continue
				}
				if tt.bad(p) {
					t.Errorf("%s depends on %s", tt.pattern, p)
				}
			}
			if !found {
				t.Errorf("go list -deps %s does not list %s:\n%s", tt.pattern, tt.mustHave, out)
			}
		})
	}
}

// under reports whether import path p is prefix or a package below it.
func under(p, prefix string) bool {
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// moduleRoot returns the directory holding the module's go.mod.
func moduleRoot(t *testing.T, goBin string) string {
	t.Helper()
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == "/dev/null" || gomod == "NUL" {
		t.Fatalf("not inside a module (GOMOD=%q)", gomod)
	}
	return filepath.Dir(gomod)
}

func TestHostOf(t *testing.T) {
	for _, c := range []struct{ u, want string }{
		{"http://h1.us.test/p", "h1.us.test"},
		{"https://h1.us.test:8443/p", "h1.us.test"},
		{"http://h", "h"},
		{"http://[2001:db8::1]:8080/", "[2001:db8::1]"},
		{"https://[::1]/x:y", "[::1]"},
		{"http://[::1]", "[::1]"},
		{"http://[::1/x", "[::1"}, // not normalised: up to the path
		{"ftp://h/", ""},
		{"h/p", ""},
	} {
		if got := crawl.HostOf(c.u); got != c.want {
			t.Errorf("HostOf(%q) = %q, want %q", c.u, got, c.want)
		}
	}
}

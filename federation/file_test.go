package federation

import (
	"errors"
	"strings"
	"testing"
)

// TestParseFile: a federation file is read, or refused with a message
// that names the file and what is wrong where.
func TestParseFile(t *testing.T) {
	site := func(name, extra string) string {
		return `{"name":"` + name + `","lat":50,"lon":8,"endpoint":"127.0.0.1:1"` + extra + `}`
	}
	file := func(part string, sites ...string) string {
		return `{"partitioner":"` + part + `","sites":[` + strings.Join(sites, ",") + `]}`
	}
	tests := []struct {
		name, body, want string // want: "" for a good file, else in the error
	}{
		{"good", file("consistent", site("eu", ""), site("us", "")), ""},
		{"distance", file("distance", site("eu", "")), ""},
		{"partitioner", file("ring", site("eu", "")), `partitioner "ring"`},
		{"no sites", file("consistent"), "no sites"},
		{"repeated", file("consistent", site("eu", ""), site("eu", "")), `sites[1] ("eu"): the name is empty or repeated`},
		{"local outbox name", file("consistent", site("~s001", "")), `sites[0] ("~s001"): a site's name may not begin with "~"`},
		{"coordinates", file("consistent", `{"name":"eu","lat":91,"lon":8,"endpoint":"127.0.0.1:1"}`), "coordinates 91,8 out of range"},
		{"endpoint", file("consistent", `{"name":"eu","lat":1,"lon":8,"endpoint":"nowhere"}`), `endpoint "nowhere": want host:port`},
		{"not JSON", `{"partitioner":`, "fed.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFile([]byte(tt.body), "fed.json")
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "":
			case err == nil || !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "fed.json"):
				t.Fatalf("error %v; want ErrBadFile naming fed.json and %q", err, tt.want)
			}
		})
	}
}

package site

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// SeedError is a seed line that was skipped, with its place and reason.
type SeedError struct {
	Line int
	Text string
	Err  error
}

func (e *SeedError) Error() string {
	return fmt.Sprintf("line %d: %.200q: %v", e.Line, e.Text, e.Err)
}

// ReadSeeds reads one URL a line (blank lines and # comments skipped),
// normalises each, and returns the good ones in order, once each, with a
// SeedError for each bad line; bad lines do not stop the rest.
func ReadSeeds(r io.Reader, n *urlnorm.Normalizer, scope *urlnorm.Scope) ([]string, []*SeedError, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var urls []string
	var bad []*SeedError
	seen := map[string]bool{}
	line := 0
	var buf []byte
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' {
			continue
		}
		var err error
		buf, err = n.Normalize(buf[:0], []byte(t))
		if err != nil {
			bad = append(bad, &SeedError{Line: line, Text: t, Err: err})
			continue
		}
		if scope != nil && !scope.Allow(buf) {
			bad = append(bad, &SeedError{Line: line, Text: t, Err: fmt.Errorf("out of scope")})
			continue
		}
		u := string(buf)
		if !seen[u] {
			seen[u] = true
			urls = append(urls, u)
		}
	}
	if err := sc.Err(); err != nil {
		return urls, bad, fmt.Errorf("site: read seeds at line %d: %w", line+1, err)
	}
	return urls, bad, nil
}

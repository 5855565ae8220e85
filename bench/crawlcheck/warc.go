package crawlcheck

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nlnwa/gowarc/v3"
)

// Responses reads every WARC file in dir (complete ".warc.gz" files) and
// returns the HTTP status of each response record, by target URI.
func Responses(dir string) (map[string][]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("crawlcheck: %w", err)
	}
	out := map[string][]int{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".warc.gz") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		r, err := gowarc.NewWarcFileReader(path, 0)
		if err != nil {
			return nil, fmt.Errorf("crawlcheck: %s: %w", path, err)
		}
		for rec, err := range r.Records() {
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("crawlcheck: %s: %w", path, err)
			}
			wr := rec.WarcRecord
			if wr.Type() == gowarc.Response {
				status := 0
				if ph, ok := wr.Block().(gowarc.ProtocolHeaderBlock); ok {
					status = statusOf(ph.ProtocolHeaderBytes())
				}
				u := wr.WarcHeader().Get(gowarc.WarcTargetURI)
				out[u] = append(out[u], status)
			}
			rec.Close()
		}
		r.Close()
	}
	return out, nil
}

// statusOf reads the status code of an HTTP status line.
func statusOf(hdr []byte) int {
	line, _, _ := bytes.Cut(hdr, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(string(f[1]))
	return n
}

// Refetched counts the URIs with more than one response of a status for
// which want is true.
func Refetched(resp map[string][]int, want func(status int) bool) (n int, sample []string) {
	for u, sts := range resp {
		k := 0
		for _, s := range sts {
			if want(s) {
				k++
			}
		}
		if k > 1 {
			n++
			if len(sample) < 10 {
				sample = append(sample, u)
			}
		}
	}
	return n, sample
}

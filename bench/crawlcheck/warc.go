package crawlcheck

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nlnwa/gowarc/v3"
)

// Responses reads every WARC file in dir (complete ".warc.gz" files) and
// returns the HTTP status of each response record, by target URI.
func Responses(dir string) (map[string][]int, error) {
	recs, err := ResponseRecords(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]int{}
	for _, r := range recs {
		out[r.URL] = append(out[r.URL], r.Status)
	}
	return out, nil
}

// Fetch is one response record of a WARC file.
type Fetch struct {
	URL    string
	Status int
	Date   time.Time // WARC-Date: when the response was received
	File   string    // the WARC file's name (a node's files start with meridian-NODE-)
}

// ResponseRecords reads every WARC file in dir (complete ".warc.gz" files)
// and returns their response records in file order.
func ResponseRecords(dir string) ([]Fetch, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("crawlcheck: %w", err)
	}
	var out []Fetch
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
				f := Fetch{URL: wr.WarcHeader().Get(gowarc.WarcTargetURI), File: e.Name()}
				if ph, ok := wr.Block().(gowarc.ProtocolHeaderBlock); ok {
					f.Status = StatusOf(ph.ProtocolHeaderBytes())
				}
				f.Date, _ = time.Parse(time.RFC3339Nano, wr.WarcHeader().Get(gowarc.WarcDate))
				out = append(out, f)
			}
			rec.Close()
		}
		r.Close()
	}
	return out, nil
}

// StatusOf reads the status code of the HTTP status line that starts hdr
// (0: none).
func StatusOf(hdr []byte) int {
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

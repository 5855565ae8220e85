package site_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/fetcher/warcfile/cdxj"
	"github.com/meridian-crawler/meridian/site"
)

// TestNearDupsRealistic crawls a realistic websim, whose printer-friendly
// copies and mirrors are near-duplicates of their originals (the truth
// says which): the near-duplicates the site records in its crawl database
// score precision ≥ 0.95 and recall ≥ 0.9 against the truth, each has a
// WARC metadata record in the CDXJ side index (X.warc.gz.cdxj-meta), and
// the replay indexes (X.warc.gz.cdxj) have no metadata line. (fetcher's
// TestNearDup checks that a near-duplicate keeps its links.)
func TestNearDupsRealistic(t *testing.T) {
	cfg := testConfig(t, "realistic")
	cfg.WebsimHosts, cfg.WebsimPages = 40, 20
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := site.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Run(ctx, nil); err != nil {
		t.Fatalf("run: %v", err)
	}
	truth, err := crawlcheck.Truth(s.Websim().Web())
	if err != nil {
		t.Fatal(err)
	}
	st := crawlcheck.Stores(s.Stores())
	sc, err := crawlcheck.ScoreCrawl(truth, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d verdicts, %d correct: precision %.3f; %d pairs, %d found: recall %.3f; wrong %v; missed %v",
		sc.Verdicts, sc.Correct, sc.Precision, sc.Pairs, sc.Found, sc.Recall, sc.Wrong, sc.Missed)
	if sc.Pairs < 20 || sc.Precision < 0.95 || sc.Recall < 0.9 {
		t.Errorf("near-duplicates: precision %.3f, recall %.3f over %d pairs; want ≥ 0.95, ≥ 0.9 over 20 or more", sc.Precision, sc.Recall, sc.Pairs)
	}
	// Each near-duplicate's metadata record, in the side index (sorted
	// when its WARC file is closed), and none in the replay index.
	var dups []string
	if err := st.ScanNearDups(func(u, _ string) error { dups = append(dups, u); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	meta := map[string]bool{}
	replay, _ := filepath.Glob(filepath.Join(cfg.Data, "warc", "*.warc.gz.cdxj"))
	side, _ := filepath.Glob(filepath.Join(cfg.Data, "warc", "*.warc.gz.cdxj-meta"))
	if len(replay) == 0 || len(side) != len(replay) {
		t.Fatalf("replay indexes %v, side indexes %v: want one of each per WARC file", replay, side)
	}
	for _, p := range append(replay, side...) {
		inSide := strings.HasSuffix(p, "-meta")
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			l, err := cdxj.Parse(sc.Bytes())
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if isMeta := l.Mime == "application/warc-fields"; isMeta != inSide {
				t.Errorf("%s: line %+v", p, l)
			} else if isMeta {
				meta[l.URL] = true
			}
		}
		f.Close()
	}
	for _, u := range dups {
		if !meta[u] {
			t.Errorf("near-duplicate %s has no metadata record in the CDXJ side index", u)
		}
	}
}

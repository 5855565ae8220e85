package crawlcheck

import (
	"context"
	"fmt"
	"github.com/meridian-crawler/meridian/websim/synth"
	"os"
	"path/filepath"
	"strings"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
)

// Report is a finished crawl checked against the truth.
type Report struct {
	Coverage Coverage `json:"coverage"`
	Ranking  Ranking  `json:"ranking"`
	// NearDups scores the near-duplicates the crawl recorded against the
	// truth's (a web without them: no pairs, recall 1).
	NearDups NearDupScore `json:"near_dups"`
}

// CheckData opens the crawl database of a stopped node's data directory
// (any node of the site)
// and checks it against the truth file (default DATA/websim-truth.jsonl).
func CheckData(ctx context.Context, data, truthPath string) (Report, error) {
	var rep Report
	if truthPath == "" {
		truthPath = filepath.Join(data, "websim-truth.jsonl")
	}
	truth, err := ReadTruth(truthPath)
	if err != nil {
		return rep, err
	}
	st, closeData, err := OpenData(data)
	if err != nil {
		return rep, err
	}
	defer closeData()
	if rep.Coverage, err = Check(truth, st); err != nil {
		return rep, err
	}
	if rep.Ranking, err = CompareRanking(truth, st); err != nil {
		return rep, err
	}
	rep.NearDups, err = ScoreCrawl(truth, st)
	return rep, err
}

// OpenData opens the crawl database of a stopped node's data directory
// for reading: an unsharded node's store, or a sharded node's replicas of
// its site's shards read as one (Stores). close releases it.
func OpenData(data string) (st Reader, close func(), err error) {
	shared := filepath.Join(data, "crawldb", "store")
	if !dirExists(shared) {
		s, err := crawldb.OpenStore(filepath.Join(data, "crawldb"), store.Options{})
		if err != nil {
			return nil, nil, fmt.Errorf("crawlcheck: open crawl database: %w", err)
		}
		return s, func() { s.Close() }, nil
	}
	sh, err := store.OpenShared(shared, store.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("crawlcheck: open crawl database: %w", err)
	}
	groups, err := sh.Groups()
	if err != nil {
		sh.Close()
		return nil, nil, err
	}
	var ss Stores
	for _, g := range groups {
		if !strings.HasPrefix(g, "s") {
			continue // the meta group
		}
		s, err := sh.Store(g)
		if err != nil {
			sh.Close()
			return nil, nil, fmt.Errorf("crawlcheck: shard %s: %w", g, err)
		}
		ss = append(ss, s)
	}
	return ss, func() { sh.Close() }, nil
}

// ScoreCrawl scores the near-duplicates a crawl database recorded
// (store.Store.ScanNearDups) against the truth, over the pages it fetched.
func ScoreCrawl(truth []synth.Record, st Reader) (NearDupScore, error) {
	fetched := map[string]bool{}
	err := st.ScanURLs(func(r store.URLRecord) error {
		if r.Status == store.StatusFetched {
			fetched[r.URL] = true
		}
		return nil
	})
	if err != nil {
		return NearDupScore{}, err
	}
	verdicts := map[string]string{}
	if err := st.ScanNearDups(func(u, o string) error { verdicts[u] = o; return nil }); err != nil {
		return NearDupScore{}, err
	}
	return ScoreNearDups(truth, func(u string) bool { return fetched[u] }, verdicts), nil
}

// dirExists reports whether dir is a directory.
func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

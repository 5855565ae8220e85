package crawlcheck

import (
	"context"
	"fmt"
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
	var st Reader
	if shared := filepath.Join(data, "crawldb", "store"); dirExists(shared) {
		// A sharded node: its replicas of the site's shards.
		sh, err := store.OpenShared(shared, store.Options{})
		if err != nil {
			return rep, fmt.Errorf("crawlcheck: open crawl database: %w", err)
		}
		defer sh.Close()
		groups, err := sh.Groups()
		if err != nil {
			return rep, err
		}
		var ss Stores
		for _, g := range groups {
			if !strings.HasPrefix(g, "s") {
				continue // the meta group
			}
			s, err := sh.Store(g)
			if err != nil {
				return rep, fmt.Errorf("crawlcheck: shard %s: %w", g, err)
			}
			ss = append(ss, s)
		}
		st = ss
	} else {
		s, err := crawldb.OpenStore(filepath.Join(data, "crawldb"), store.Options{})
		if err != nil {
			return rep, fmt.Errorf("crawlcheck: open crawl database: %w", err)
		}
		defer s.Close()
		st = s
	}
	if rep.Coverage, err = Check(truth, st); err != nil {
		return rep, err
	}
	rep.Ranking, err = CompareRanking(truth, st)
	return rep, err
}

// dirExists reports whether dir is a directory.
func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

package crawlcheck

import (
	"context"
	"fmt"
	"path/filepath"

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
	st, err := crawldb.OpenStore(filepath.Join(data, "crawldb"), store.Options{})
	if err != nil {
		return rep, fmt.Errorf("crawlcheck: open crawl database: %w", err)
	}
	defer st.Close()
	if rep.Coverage, err = Check(truth, st); err != nil {
		return rep, err
	}
	rep.Ranking, err = CompareRanking(truth, st)
	return rep, err
}

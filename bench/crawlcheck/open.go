package crawlcheck

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/site"
)

// Report is a finished crawl checked against the truth.
type Report struct {
	Coverage Coverage `json:"coverage"`
	Ranking  Ranking  `json:"ranking"`
}

// CheckData opens the crawl database of a stopped site's data directory
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
	in, err := site.ReadInfo(data)
	if err != nil {
		return rep, err
	}
	db, err := crawldb.Open(ctx, crawldb.Options{Dir: filepath.Join(data, "crawldb"), NodeID: in.Region + "-1", RaftAddr: in.RaftAddr})
	if err != nil {
		return rep, fmt.Errorf("crawlcheck: open crawl database: %w", err)
	}
	defer db.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := db.WaitLeader(wctx); err != nil {
		return rep, err
	}
	if rep.Coverage, err = Check(truth, db.Store()); err != nil {
		return rep, err
	}
	rep.Ranking, err = CompareRanking(truth, db.Store())
	return rep, err
}

package rounds

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds/segment"
)

// Recovery: what a round's write-ahead fetch segment held when the node
// started, reused by every take of a part in that round.

// recoveredRound is what a round's write-ahead segment held when this node
// started, not yet used by a take: page results by URL (the first of each:
// a URL has one result per round) and sitemap results.
type recoveredRound struct {
	pages    map[string]*fetcher.Result
	sitemaps []*fetcher.Result
}

// openWAL opens (once per start) the write-ahead segment of a round,
// keeping the results it already holds for the round's takes.
func (n *nodeSide) openWAL(round uint64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.wal[round] != nil {
		return nil
	}
	dir := n.c.roundDir(round)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	path := filepath.Join(dir, fetchFile)
	if _, err := os.Stat(path); err == nil && !n.recover[round] {
		rr := &recoveredRound{pages: map[string]*fetcher.Result{}}
		_, _, err := segment.Read(path, func(rec []byte) error {
			fr, err := decodeFetch(rec)
			if err != nil {
				return err
			}
			switch fr.Kind {
			case fetcher.KindPage:
				if rr.pages[fr.URL] == nil {
					rr.pages[fr.URL] = fr.result(round)
				}
			case fetcher.KindSitemap:
				rr.sitemaps = append(rr.sitemaps, fr.result(round))
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rounds: round %d: read fetch segment: %w", round, err)
		}
		if len(rr.pages)+len(rr.sitemaps) > 0 {
			n.recovered[round] = rr
		}
	}
	n.recover[round] = true
	w, dropped, err := segment.OpenAppend(path)
	if errors.Is(err, fs.ErrNotExist) {
		w, err = segment.Create(path)
	}
	if err != nil {
		return fmt.Errorf("rounds: round %d: open fetch segment: %w", round, err)
	}
	if dropped > 0 {
		n.c.log.Warn("rounds: fetch segment had a torn tail", "round", round, "bytes", dropped)
	}
	n.wal[round] = w
	return nil
}

// takeRecovered hands a take the results recovered at this start for the
// URLs it wants (and, to the round's first take, its sitemap results); each
// is handed once.
func (n *nodeSide) takeRecovered(round uint64, want map[string]*genEntry) []*fetcher.Result {
	n.mu.Lock()
	defer n.mu.Unlock()
	rr := n.recovered[round]
	if rr == nil {
		return nil
	}
	out := rr.sitemaps
	rr.sitemaps = nil
	for u := range want {
		if r := rr.pages[u]; r != nil {
			out = append(out, r)
			delete(rr.pages, u)
		}
	}
	if len(rr.pages) == 0 {
		delete(n.recovered, round)
	}
	return out
}

// result turns a fetch segment record back into the fetcher's result.
func (f *fetchRecord) result(round uint64) *fetcher.Result {
	return &fetcher.Result{Job: fetcher.Job{URL: f.URL, Host: f.Host, Round: round, Depth: f.Depth, Cash: f.Cash, Prev: f.Prev},
		Kind: f.Kind, Status: f.Status, Retry: f.Retry, NoRequest: f.NoRequest, HTTPStatus: f.HTTPStatus,
		RedirectTo: f.RedirectTo, Links: f.Links, Embeds: f.Embeds, NearDupOf: f.NearDupOf, ContentFP: f.ContentFP, Bytes: f.Bytes, FetchedAt: f.At, Err: f.Err, Wait: f.Wait, Truncated: f.Truncated,
		ETag: f.ETag, LastModified: f.LastModified, NotModified: f.NotModified, Unchanged: f.Unchanged, LastMods: f.LastMods,
		NoIndex: f.NoIndex, Canonical: f.Canonical, Traps: f.Traps}
}

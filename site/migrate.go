package site

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/shardset"
)

// A data directory of the old design (one crawl database on every node,
// parts of each round moved between nodes; retired) is migrated once, when
// site up first opens it, into a site of one shard on this node: the old
// crawl database becomes shard 0's Raft group whole (its Raft snapshot,
// installed by Raft when the group opens), its round files and statistics
// become the shard's, and the crawl goes on where it stopped. The old
// crawl database is kept beside, in crawldb-unsharded/, until the
// operator deletes it. The site keeps one shard: its hosts cannot be
// split without moving each host's records, so to spread a crawl over
// many machines start a new site.

// unshardedKept is where a migrated data directory keeps its old crawl
// database.
const unshardedKept = "crawldb-unsharded"

// ErrMigrate is wrapped by the errors of a migration that did not finish;
// the data directory is left so that the next start migrates it again.
var ErrMigrate = errors.New("site: migrate the old design's data directory")

// needsMigration reports whether data holds a node of the old design, or
// one whose migration began and did not finish (prev.Migrated unset).
func needsMigration(data string, prev Info) bool {
	if prev.Migrated.IsZero() {
		if _, err := os.Stat(filepath.Join(data, unshardedKept)); err == nil {
			return true
		}
	}
	if entries, err := os.ReadDir(filepath.Join(data, "crawldb", "raft")); err == nil && len(entries) > 0 && !isSharded(data) {
		return true
	}
	return false
}

// migrateUnsharded migrates the old design's data directory in s.cfg.Data
// into a one-shard site's (see above) whose node's Raft address is
// raftAddr. It can be run again after a crash at any step: the old crawl
// database is moved aside first, and what a step before made is made again.
func (s *Site) migrateUnsharded(ctx context.Context, raftAddr string) error {
	cfg := s.cfg
	old, cur := filepath.Join(cfg.Data, unshardedKept), filepath.Join(cfg.Data, "crawldb")
	if _, err := os.Stat(old); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(cur, old); err != nil {
			return fmt.Errorf("%w: %w", ErrMigrate, err)
		}
	} else if err != nil {
		return fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	// What an earlier try made of the new layout goes.
	if err := os.RemoveAll(cur); err != nil {
		return fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	s.log.Warn("site: the data directory holds a node of the old design (one crawl database on every node), retired: migrating it once into a site of one shard; the old crawl database stays in "+old+" (delete it when the crawl goes on)", "data", cfg.Data)
	m, err := crawldb.MigrateToGroup(ctx, crawldb.MigrateOptions{From: old, HostDir: cur, Group: shardset.GroupID(0),
		NodeID: cfg.Node, RaftAddr: raftAddr, Logger: slog.New(quietHandler{s.log.Handler()}).With("part", "migrate")})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	// The old crawl's round files (fetch segments a round not updated yet
	// needs) and statistics are shard 0's.
	shardDir := filepath.Join(cfg.Data, "shards", shardset.GroupID(0))
	if err := os.MkdirAll(shardDir, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrMigrate, err)
	}
	for _, d := range []string{"rounds", "stats"} {
		from, to := filepath.Join(cfg.Data, d), filepath.Join(shardDir, d)
		if _, err := os.Stat(from); errors.Is(err, fs.ErrNotExist) {
			continue // moved by an earlier try, or none
		}
		if err := os.RemoveAll(to); err != nil {
			return fmt.Errorf("%w: %w", ErrMigrate, err)
		}
		if err := os.Rename(from, to); err != nil {
			return fmt.Errorf("%w: %w", ErrMigrate, err)
		}
	}
	s.log.Info("site: migrated the old crawl database into shard 0", "applied_index", m.Index, "bytes", m.Bytes, "log_replayed", m.Replays)
	return nil
}

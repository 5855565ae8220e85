package site_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/site"
)

// unshardedData is testdata/unsharded-v1.tgz: the data directory of a node
// of the old design (one crawl database on every node), retired, as
// `site up --unsharded` made it at efcca91: an in-process realistic websim
// of 30 hosts × 12 pages (seed 1, 16 addresses), --width 120 --check-cash,
// stopped by SIGINT in round 2's fetch (72 pages fetched, round 2's
// results in its fetch segment, not yet updated). Its websim-port keeps
// the web's port (33083 on loopback), as a restart of that node would.
const unshardedData = "testdata/unsharded-v1.tgz"

// extractTo unpacks the tar.gz at path into dir.
func extractTo(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(name), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(name, b, 0o644)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// migrateConfig is a node of the old data directory in data, crawling the
// web it crawled.
func migrateConfig(t *testing.T, data string) site.Config {
	cfg := testConfig(t, "realistic")
	cfg.Data = data
	cfg.Region, cfg.Node = "local", ""
	cfg.WebsimHosts, cfg.WebsimPages, cfg.WebsimSeed, cfg.WebsimIPs = 30, 12, 1, 16
	cfg.Shards = 0
	return cfg
}

// TestCrawlMigratesUnshardedData: a data directory of the old design is
// migrated once, when a node first opens it, into a site of one shard (the
// old crawl database becomes shard 0's Raft group through a Raft snapshot;
// its round files and statistics the shard's). The crawl goes on from its
// round in flight to exhaustion: every target fetched, no page fetched
// before the stop fetched again, OPIC's cash conserved in every round
// before and after; the old crawl database is kept beside. A migration
// cut short (the old crawl database moved aside, the new layout half
// made) is done again at the next start. --shards 4 on an old directory is
// refused, and a migrated site restarts as the site of one shard it is.
func TestCrawlMigratesUnshardedData(t *testing.T) {
	for _, tc := range []struct {
		name        string
		interrupted bool
	}{{"first start", false}, {"after a cut-short migration", true}} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			extractTo(t, unshardedData, data)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			before, err := crawlcheck.Responses(filepath.Join(data, "warc"))
			if err != nil {
				t.Fatal(err)
			}
			if len(before) == 0 {
				t.Fatal("the old data directory has no responses in its WARC")
			}
			cfg := migrateConfig(t, data)
			if tc.interrupted {
				// As a crash after the first steps leaves it: the old crawl
				// database moved aside, a new one begun.
				if err := os.Rename(filepath.Join(data, "crawldb"), filepath.Join(data, "crawldb-unsharded")); err != nil {
					t.Fatal(err)
				}
				junk := filepath.Join(data, "crawldb", "groups", "s000", "snapshots")
				if err := os.MkdirAll(junk, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(junk, "half"), []byte("cut short"), 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				bad := cfg
				bad.Shards = 4
				if _, err := site.Start(ctx, bad, nil); !errors.Is(err, site.ErrWrongSite) {
					t.Fatalf("--shards 4 on an old data directory: %v, want ErrWrongSite", err)
				}
			}
			r := runSite(t, ctx, cfg)
			st := r.s.Status()
			for end := time.Now().Add(10 * time.Second); len(st.Shards) == 0 && time.Now().Before(end); st = r.s.Status() {
				time.Sleep(50 * time.Millisecond) // until the shard is placed
			}
			if st.Sharding == nil || st.Sharding.Shards != 1 || len(st.Shards) != 1 {
				t.Errorf("the migrated site's status: sharding %+v, %d shards; want a site of one shard", st.Sharding, len(st.Shards))
			}
			r.wait(t, ctx)
			in, err := site.ReadInfo(data)
			if err != nil || in.Migrated.IsZero() {
				t.Fatalf("site.json after the migration: migrated %v (err %v)", in.Migrated, err)
			}
			if _, err := os.Stat(filepath.Join(data, "crawldb-unsharded", "db")); err != nil {
				t.Errorf("the old crawl database is not kept: %v", err)
			}
			rep, err := crawlcheck.CheckData(ctx, data, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("coverage %d/%d", rep.Coverage.Covered, rep.Coverage.Targets)
			if rep.Coverage.Covered != rep.Coverage.Targets {
				t.Errorf("coverage %d/%d after the migration; missing e.g. %v", rep.Coverage.Covered, rep.Coverage.Targets, rep.Coverage.Missing)
			}
			after, err := crawlcheck.Responses(filepath.Join(data, "warc"))
			if err != nil {
				t.Fatal(err)
			}
			ok2xx := func(s int) bool { return s >= 200 && s < 300 }
			again := 0
			for u, sts := range after {
				if strings.HasSuffix(u, "/robots.txt") || strings.Contains(u, "sitemap") {
					continue
				}
				if n, _ := crawlcheck.Refetched(map[string][]int{u: sts}, ok2xx); n > 0 {
					again++
					t.Errorf("%s: 2xx responses %v (before the migration %v)", u, sts, before[u])
				}
			}
			t.Logf("%d URLs answered before the migration, %d after; %d pages fetched twice", len(before), len(after), again)
			if len(after) <= len(before) {
				t.Errorf("%d URLs answered after the migration, %d before: the crawl did not go on", len(after), len(before))
			}
			rs := readRounds(t, data)
			if len(rs) < 3 || rs[0].Round != 1 {
				t.Errorf("shard 0's rounds.jsonl has %d rounds: want the old crawl's first and the new ones", len(rs))
			}
			checkCashEveryRound(t, data)

			// A restart: the site of one shard it now is, not migrated again.
			cfg.Rounds = 1
			r = runSite(t, ctx, cfg)
			if st := r.s.Status(); st.Sharding == nil || st.Sharding.Shards != 1 {
				t.Errorf("the restart's sharding %+v, want one shard", st.Sharding)
			}
			r.wait(t, ctx)
			if in2, err := site.ReadInfo(data); err != nil || !in2.Migrated.Equal(in.Migrated) {
				t.Errorf("the restart migrated again: %v then %v (err %v)", in.Migrated, in2.Migrated, err)
			}
		})
	}
}

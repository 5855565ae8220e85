package bench

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRunCrawldbQuick runs the whole crawldb benchmark at a tiny scale and
// checks that every figure is there and sane.
func TestRunCrawldbQuick(t *testing.T) {
	start := time.Now()
	// A bound on a hung run, not a figure: under -race beside the other
	// packages' tests the run has taken more than 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := CrawldbConfig{
		Dir: t.TempDir(), Seed: 3,
		Upserts: 20_000, BatchSize: 1000, Writers: []int{1, 4}, UpsertHosts: 500,
		FrontierHosts: 2000, URLsSmall: 20_000, URLsLarge: 60_000, Width: 5000, PerHost: []int{10, 100},
		Calls: 3, LoadWriters: 2, SettleMax: -1, FastTimeouts: true,
	}
	res, err := RunCrawldb(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = cfg.WithDefaults(); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", res.Report(cfg))

	if len(res.Upserts) != 4 {
		t.Fatalf("%d upsert runs, want 4 (fsync and nosync × 1 and 4 writers)", len(res.Upserts))
	}
	for _, u := range res.Upserts {
		if u.Upserts != 20_000 || u.Batches != 20 || u.UpsertsPerSec <= 0 || u.Elapsed <= 0 || u.MeanApply <= 0 {
			t.Errorf("%s, %d writers: %+v: want 20,000 upserts in 20 commands at a positive rate", u.Sync, u.Writers, u)
		}
		// About 20% known, except in each writer's first command.
		if known := float64(u.Upserts-u.New) / float64(u.Upserts); known < 0.1 || known > 0.25 {
			t.Errorf("%s, %d writers: %.2f of the upserts were of known URLs, want about 0.2", u.Sync, u.Writers, known)
		}
		if u.StoreURLs != uint64(u.New) {
			t.Errorf("%s, %d writers: store holds %d URLs, %d new upserted", u.Sync, u.Writers, u.StoreURLs, u.New)
		}
	}

	f := res.Frontier
	if f == nil {
		t.Fatal("no frontier result")
	}
	if f.Small.URLs != 20_000 || f.Large.URLs != 60_000 {
		t.Errorf("URLs %d and %d, want 20,000 and 60,000", f.Small.URLs, f.Large.URLs)
	}
	if f.Large.LargestHost <= 10*f.Large.MedianHost {
		t.Errorf("host sizes: largest %d, median %d: not heavy-tailed", f.Large.LargestHost, f.Large.MedianHost)
	}
	for _, sc := range []FrontierScale{f.Small, f.Large} {
		if len(sc.Reads) != 2 {
			t.Fatalf("%d URLs: %d reads, want 2", sc.URLs, len(sc.Reads))
		}
		for _, r := range sc.Reads {
			if r.Entries != 5000 || r.MaxPerHost > r.PerHost || !r.Sorted || r.Median <= 0 || len(r.Times) != 3 {
				t.Errorf("%d URLs, k=%d: %+v: want 5000 entries, ≤ k per host in score order, 3 timed calls",
					sc.URLs, r.PerHost, r)
			}
		}
	}
	if len(f.Ratios) != 2 || f.Ratios[0].Ratio <= 0 || f.Ratios[1].Ratio <= 0 {
		t.Errorf("ratios %+v, want two positive", f.Ratios)
	}
	if f.Memory.Err == "" && (f.Memory.RSS == 0 || f.Memory.Peak < f.Memory.RSS) {
		t.Errorf("memory %+v: want RSS > 0 and peak ≥ RSS", f.Memory)
	}
	if f.Memory.GoHeapInuse == 0 {
		t.Errorf("memory %+v: no Go heap", f.Memory)
	}
	if st := res.Settings; st.CacheBytes <= 0 || st.MemTableBytes == 0 || st.BlockSize <= 0 || st.Compression == "" {
		t.Errorf("settings %+v: the store's Pebble settings were not read", st)
	}
	d := f.Disk
	if d.Store <= 0 || d.RaftLog <= 0 || d.Total < d.Store+d.RaftLog+d.Snapshots || d.PerURL <= d.StorePerURL {
		t.Errorf("disk %+v: want store and log sizes within the total", d)
	}
	if _, err := json.Marshal(res); err != nil {
		t.Error(err)
	}
	if !strings.Contains(res.Report(cfg), "ratio") {
		t.Error("the report has no ratio")
	}
	t.Logf("smoke run took %v", time.Since(start)) // reported, never asserted: this machine is noisy
}

func TestCrawldbConfigDefaults(t *testing.T) {
	c := DefaultCrawldbConfig()
	if c.URLsSmall != 1_000_000 || c.URLsLarge != 10_000_000 || c.Width != 50_000 || c.BatchSize != 1000 ||
		len(c.Writers) != 3 || len(c.Syncs) != 2 || c.LoadSync != LogNoSync || c.KnownFraction != 0.2 {
		t.Errorf("defaults %+v", c)
	}
	for _, bad := range []CrawldbConfig{
		{URLsSmall: 10, URLsLarge: 5},
		{Writers: []int{0}},
		{Syncs: []LogSync{"sometimes"}},
		{KnownFraction: 1},
		{SkipUpserts: true, SkipFrontier: true},
	} {
		if _, err := bad.WithDefaults(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestCrawldbURLs(t *testing.T) {
	g := cdbURLs{seed: 1, hosts: 1000}
	u := string(g.appendURL(nil, 42))
	if !strings.HasPrefix(u, "http://h") || !strings.HasSuffix(u, ".cc.test/p/42.html") {
		t.Errorf("URL 42 = %q", u)
	}
	if u2 := string(g.appendURL(nil, 42)); u2 != u {
		t.Errorf("URL 42 is %q, then %q", u, u2)
	}
	sizes := g.hostSizes(100_000)
	if len(sizes) < 900 || sizes[len(sizes)-1] < 20*sizes[len(sizes)/2] {
		t.Errorf("%d hosts, largest %d, median %d: want nearly all hosts and a heavy tail",
			len(sizes), sizes[len(sizes)-1], sizes[len(sizes)/2])
	}
}

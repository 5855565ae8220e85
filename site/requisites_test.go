package site_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/replay"
)

// wgetWARCDir holds wget.warc.gz: GNU wget's WARC of the small web in
// web/ (made by make-wget-warc.go, which can make it again), mirrored with
// --page-requisites. Its URLs name port wgetPort.
const (
	wgetWARCDir = "testdata/requisites"
	wgetPort    = 18411
	wgetFront   = "http://www.wget.test:18411/"
)

// TestCrawlWgetWARCRequisites replays the WARC file GNU wget wrote when it
// mirrored a small web of two hosts with --page-requisites (pages with
// img, srcset-only images, scripts, a favicon and
// a touch icon, style sheets that @import others, url() in <style>, in
// style attributes and in style sheets three @imports deep, SVG, GIF,
// JPEG, PNG, ICO) and crawls the replay with --max-depth 1, the depth of
// the pages linked from the front page: a crawl without --page-requisites
// fetches the pages and none of the resources; a crawl with it fetches
// every URL wget archived (pages, images, scripts, style sheets, icons),
// each once (websim's request log), writes each to its WARC files, and
// keeps OPIC's cash conserved after every round (testConfig's check). The
// resources of the pages at --max-depth, and those reached only through a
// style sheet or a srcset, are fetched: embeds are as deep as their page,
// as the crawl database's records show.
func TestCrawlWgetWARCRequisites(t *testing.T) {
	arc, err := replay.Open(filepath.Join(wgetWARCDir, "wget.warc.gz"))
	if err != nil {
		t.Fatal(err)
	}
	archived := arc.URLs()
	arc.Close()
	var want, pages []string
	for _, u := range archived {
		u = strings.Trim(u, "<>") // wget writes WARC-Target-URI as WARC/1.0's grammar had it: <url>
		want = append(want, u)
		if strings.HasSuffix(u, "/") || strings.HasSuffix(u, ".html") {
			pages = append(pages, u)
		}
	}
	slices.Sort(want)
	if len(want) < 20 || len(pages) != 3 {
		t.Fatalf("wget's WARC holds %d responses, %d of them pages: not the web of make-wget-warc.go", len(want), len(pages))
	}
	rs, err := websim.StartReplay(websim.ReplayOptions{
		WARCs: []string{filepath.Join(wgetWARCDir, "wget.warc.gz")}, IPs: 2, Port: wgetPort,
		IPBase: netip.MustParseAddr("127.77.41.1"), DNSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	seeds := filepath.Join(t.TempDir(), "seeds.txt")
	if err := os.WriteFile(seeds, []byte(wgetFront+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	crawl := func(requisites bool) (map[string]int64, *site.Site, site.Config) {
		t.Helper()
		cfg := testConfig(t, "off")
		cfg.Seeds, cfg.DNS, cfg.AllowPrivate = seeds, rs.DNSAddr(), true
		cfg.MaxDepth = 1
		cfg.PageRequisites = requisites
		rs.Stats().Reset()
		rs.Stats().CountURLs()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := site.Start(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Run(ctx, nil); err != nil {
			t.Fatalf("run (--page-requisites %v): %v", requisites, err)
		}
		return rs.Stats().URLRequests(), s, cfg
	}

	// Without --page-requisites: the pages, none of their resources.
	got, _, _ := crawl(false)
	for _, u := range want {
		isPage := slices.Contains(pages, u)
		switch n := got[u]; {
		case isPage && n != 1:
			t.Errorf("without --page-requisites: page %s requested %d times, want 1", u, n)
		case !isPage && n != 0:
			t.Errorf("without --page-requisites: resource %s requested %d times, want 0", u, n)
		}
	}

	// With it: every URL wget archived, once.
	got, s, cfg := crawl(true)
	for _, u := range want {
		if n := got[u]; n != 1 {
			t.Errorf("with --page-requisites: %s requested %d times, want 1", u, n)
		}
	}
	for u, n := range got {
		if !slices.Contains(want, u) && !strings.HasSuffix(u, "/robots.txt") {
			t.Errorf("with --page-requisites: %s (not in wget's WARC) requested %d times", u, n)
		}
	}
	// Embeds are as deep as their page: those of the front page (and
	// what its style sheets reference, @imports deep) at 0, those only
	// the linked pages need at 1, --max-depth.
	depth1 := []string{"about.html", "contact.html", "/js/lib.js", "/img/photo.jpg", "/img/photo-800.jpg", "/img/photo-1600.jpg", "/img/map.png"}
	err = crawlcheck.Stores(s.Stores()).ScanURLs(func(r store.URLRecord) error {
		wantDepth := uint32(0)
		for _, sfx := range depth1 {
			if strings.HasSuffix(r.URL, sfx) {
				wantDepth = 1
			}
		}
		if r.Status != store.StatusFetched || r.Depth != wantDepth {
			t.Errorf("%s: %v at depth %d, want fetched at depth %d", r.URL, r.Status, r.Depth, wantDepth)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	written, err := crawlcheck.ResponseRecords(filepath.Join(cfg.Data, "warc"))
	if err != nil {
		t.Fatal(err)
	}
	inWARC := map[string]int{}
	for _, r := range written {
		if r.Status == 200 {
			inWARC[r.URL]++
		}
	}
	for _, u := range want {
		if inWARC[u] != 1 {
			t.Errorf("the site's WARC files hold %d responses 200 of %s, want 1", inWARC[u], u)
		}
	}
	t.Logf("wget archived %d URLs (%d pages); the crawl with --page-requisites requested %d URLs", len(want), len(pages), len(got))
}

// TestPageRequisitesSetting: --page-requisites travels with the site's
// crawl settings to a joining node (whatever the joining node was given),
// and the settings of a site created before it (no page_requisites in
// their JSON) leave it off.
func TestPageRequisitesSetting(t *testing.T) {
	cfg := site.DefaultConfig()
	cfg.PageRequisites = true
	joiner := site.DefaultConfig()
	site.SettingsOf(cfg).Apply(&joiner)
	if !joiner.PageRequisites {
		t.Error("a node joining a --page-requisites site did not take the setting")
	}
	b, err := json.Marshal(site.SettingsOf(site.DefaultConfig()))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "page_requisites") {
		t.Errorf("settings without --page-requisites mention it: %s", b)
	}
	var old site.Settings
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	joiner.PageRequisites = true
	old.Apply(&joiner)
	if joiner.PageRequisites {
		t.Error("joining a site without the setting left --page-requisites on")
	}
}

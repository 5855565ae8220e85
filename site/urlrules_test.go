package site_test

import (
	"context"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestCrawlURLRules crawls a realistic websim with URL rules that refuse
// one host and one kind of path: no URL they refuse is fetched, or even
// recorded, and the rest of the web is crawled.
func TestCrawlURLRules(t *testing.T) {
	cfg := testConfig(t, "realistic")
	web, err := synth.New(synth.Options{Hosts: cfg.WebsimHosts, Pages: cfg.WebsimPages, Seed: cfg.WebsimSeed, IPs: cfg.WebsimIPs, Profile: synth.Realistic})
	if err != nil {
		t.Fatal(err)
	}
	blocked := web.Hosts()[3].Name
	cfg.URLRules = "# refuse one host and the pages numbered ...5\n-host:" + blocked + "\n-regex:/p/[0-9]*5\\.html$\n+.\n"
	cfg.URLRulesFile = "test-rules"
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
	refused := regexp.MustCompile(`/p/[0-9]*5\.html$`)
	var fetched, kept int
	err = crawlcheck.Stores(s.Stores()).ScanURLs(func(r store.URLRecord) error {
		u, err := url.Parse(r.URL)
		if err != nil {
			return err
		}
		if u.Hostname() == blocked || refused.MatchString(r.URL) {
			t.Errorf("%s (%v) is in the crawl database though the rules refuse it", r.URL, r.Status)
		}
		kept++
		if r.Status == store.StatusFetched {
			fetched++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d URLs recorded, %d fetched; %s and /p/…5.html refused", kept, fetched, blocked)
	if fetched < 100 {
		t.Errorf("only %d pages fetched: the rules refused more than they say", fetched)
	}
	if h := s.Websim().Stats().Snapshot().Hosts[blocked]; h != nil && h.Requests > 0 {
		t.Errorf("websim saw %d requests to %s", h.Requests, blocked)
	}
}

package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestCrawlColly runs the peers benchmark's colly crawler on a small
// realistic websim: it crawls the web through websim's DNS, asks for
// robots.txt, and stops at its page budget.
func TestCrawlColly(t *testing.T) {
	srv, err := websim.Start(websim.Options{Web: synth.Options{Hosts: 20, Pages: 8, IPs: 4, Seed: 7, Profile: synth.Realistic},
		DNSAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var seeds []string
	for h := range srv.Web().Hosts() {
		seeds = append(seeds, srv.Web().FrontURL(h))
	}
	srv.Stats().CountURLs()
	ctx := context.Background()
	res, err := CrawlColly(ctx, CollyOptions{Seeds: seeds, DNS: srv.DNSAddr(), Workers: 16, Duration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pages < 100 || res.OK == 0 || res.PagesPerSec <= 0 || res.Cut {
		t.Fatalf("colly crawled %+v", res)
	}
	robots := 0
	for u, n := range srv.Stats().URLRequests() {
		if strings.HasSuffix(u, "/robots.txt") {
			robots += int(n)
		}
	}
	if robots == 0 {
		t.Fatal("colly fetched no robots.txt")
	}
	// colly's robots.txt handling is its own (websim's realistic hosts
	// include some whose robots.txt fails, which RFC 9309 and Meridian
	// treat as disallowing all): bench peers reports what it fetched
	// against the rules rather than asserting none.
	t.Logf("colly: %d pages, %d robots.txt answered, %d robots-disallowed fetched", res.Pages, robots, srv.Stats().Snapshot().RobotsViolationCount)
	capped, err := CrawlColly(ctx, CollyOptions{Seeds: seeds, DNS: srv.DNSAddr(), Workers: 4, Max: 30, Duration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Requests already handed to colly finish after the budget is reached.
	if !capped.Cut || capped.Pages < 30 || capped.Pages >= res.Pages {
		t.Fatalf("with a budget of 30 pages colly crawled %+v", capped)
	}
	if _, err := CrawlColly(ctx, CollyOptions{Seeds: seeds, Workers: 4}); err == nil {
		t.Fatal("no error without a DNS server")
	}
}

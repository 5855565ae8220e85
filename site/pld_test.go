package site_test

import (
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// hostilePLDBudget is a --pld-budget that every registrable domain of the
// hostile web cfg crawls, but its subdomain farm, lives with: websim's
// hosts are under .test, which the public-suffix list does not name, so
// each country's hosts share one domain (h3.fr.test and h9.fr.test are
// under fr.test). For each such domain it sums what its hosts can use: a
// role host its --host-budget (its trap is endless), any other host the
// URLs the truth lists for it (more than it serves pages), at most its
// host budget; the budget is the largest sum.
func hostilePLDBudget(t *testing.T, cfg site.Config) int {
	t.Helper()
	web, err := synth.New(synth.Options{Hosts: cfg.WebsimHosts, Pages: cfg.WebsimPages, Seed: cfg.WebsimSeed, IPs: cfg.WebsimIPs, Profile: synth.Hostile})
	if err != nil {
		t.Fatal(err)
	}
	truth, err := crawlcheck.Truth(web)
	if err != nil {
		t.Fatal(err)
	}
	urls := map[string]int{}
	for _, r := range truth {
		urls[r.Host]++
	}
	perDomain := map[string]int{}
	for _, h := range web.Hosts() {
		use := min(urls[h.Name], cfg.HostBudget)
		if h.Role != synth.RoleNone {
			use = cfg.HostBudget
		}
		perDomain[plan.Registrable(h.Name)] += use
	}
	if _, ok := perDomain[synth.FarmDomain]; ok {
		t.Fatalf("a host of the web is under the farm's domain %s", synth.FarmDomain)
	}
	most := 0
	for _, n := range perDomain {
		most = max(most, n)
	}
	t.Logf("--pld-budget %d: the most the web's %d registrable domains (its countries) can use", most, len(perDomain))
	return most
}

// checkFarm checks a finished crawl of the hostile web with --pld-budget:
// its subdomain farm (synth.FarmDomain) was entered and held to the
// budget, counting the farm's pages as websim served them (2xx answers;
// a farm host's robots.txt is a 404), with no overshoot: generate gives a
// domain no more new URLs than its budget has room for, those in flight
// counted; the crawl's end names --pld-budget; and every other host was
// crawled as without the budget: all its targets in the truth fetched.
func checkFarm(t *testing.T, cfg site.Config, s *site.Site) {
	t.Helper()
	snap := s.Websim().Stats().Snapshot()
	farmPages, farmHosts := int64(0), 0
	for name, v := range snap.Hosts {
		if !strings.HasSuffix(name, "."+synth.FarmDomain) {
			continue
		}
		farmHosts++
		for status, n := range v.Statuses {
			if status/100 == 2 {
				farmPages += n
			}
		}
	}
	t.Logf("subdomain farm: %d pages fetched from %d hosts, --pld-budget %d", farmPages, farmHosts, cfg.PLDBudget)
	if farmPages > int64(cfg.PLDBudget) {
		t.Errorf("the subdomain farm gave %d pages, over its --pld-budget %d", farmPages, cfg.PLDBudget)
	}
	if farmPages <= synth.FarmFanout {
		t.Errorf("the subdomain farm gave %d pages: the crawl did not go into it", farmPages)
	}
	if fin := s.Status().Rounds.Finished; fin == nil || fin.Reason != rounds.EndBudget || !strings.Contains(fin.String(), "--pld-budget") {
		t.Errorf("the crawl ended %+v, want at its budgets, naming --pld-budget", fin)
	}
	truth, err := crawlcheck.Truth(s.Websim().Web())
	if err != nil {
		t.Fatal(err)
	}
	var plain []synth.Record // the hosts without a hostile role
	for _, r := range truth {
		if r.Role == "" {
			plain = append(plain, r)
		}
	}
	cov, err := crawlcheck.Check(plain, crawlcheck.Stores(s.Stores()))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("coverage of the hosts without a role %d/%d = %.4f", cov.Covered, cov.Targets, cov.Ratio)
	if cov.Covered != cov.Targets || cov.Targets < 50 {
		t.Errorf("coverage of the hosts without a role %d of %d targets; missing e.g. %v", cov.Covered, cov.Targets, cov.Missing)
	}
}

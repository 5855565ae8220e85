package rounds

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestPLDBudgetHoldsFarm crawls the hostile web with its subdomain farm
// (synth.FarmDomain: endless, one page a host, so no host budget holds
// it) under a registrable-domain budget: every domain, the farm's and
// the countries' websim hosts share (h3.fr.test is under fr.test), ends
// within it, the farm exactly at it (it is endless, and pick gives a
// domain no more new URLs than its room, those in flight counted); the
// farm's hosts are not closed, their URLs parked; the crawl ends at its
// budgets, its end naming --pld-budget; and OPIC's cash is conserved.
func TestPLDBudgetHoldsFarm(t *testing.T) {
	const budget = 60
	ts := startSite(t, synth.Hostile, synth.HostileRoles+2, 4)
	newCrawler(t, ts, Options{Width: 200, PerHost: 10, HostBudget: 25, PLDBudget: budget, MaxRedirects: 3, CheckCash: true})
	defer ts.c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	web := ts.sim.Web()
	if _, err := ts.c.Seed(ctx, append(ts.seeds(), web.FarmFront())); err != nil {
		t.Fatal(err)
	}
	if err := ts.run(t, ctx, 0); err != nil {
		t.Fatalf("run: %v", err)
	}
	fin := ts.c.Status().Finished
	if fin == nil || fin.Reason != EndBudget || fin.Parked == 0 || !strings.Contains(fin.String(), "--pld-budget") {
		t.Errorf("the crawl ended %+v (%v), want at its budgets with URLs parked, naming --pld-budget", fin, fin)
	}
	st := ts.c.st
	domains := map[string]bool{synth.FarmDomain: true}
	for _, h := range web.Hosts() {
		domains[plan.Registrable(h.Name)] = true
	}
	for d := range domains {
		n, err := st.DomainFetched(d)
		if err != nil {
			t.Fatal(err)
		}
		if n > budget {
			t.Errorf("%s: %d pages fetched, --pld-budget %d", d, n, budget)
		}
		if d == synth.FarmDomain && n != budget {
			t.Errorf("the subdomain farm: %d pages fetched, want its budget %d", n, budget)
		}
	}
	served := int64(0) // the farm's pages as websim saw them
	for name, v := range ts.sim.Stats().Snapshot().Hosts {
		if strings.HasSuffix(name, "."+synth.FarmDomain) {
			served += v.Statuses[200]
		}
	}
	if served != budget {
		t.Errorf("websim served %d farm pages, want %d", served, budget)
	}
	parkedFarm := 0
	err := st.ScanURLs(func(rec store.URLRecord) error {
		host := hostOf(rec.URL)
		if !rec.Parked || !strings.HasSuffix(host, "."+synth.FarmDomain) {
			return nil
		}
		parkedFarm++
		if h, _, err := st.Host(host); err != nil || h.BackoffUntil.Equal(closedUntil) {
			t.Errorf("farm host %s closed (%v): a domain's budget parks its URLs instead", host, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if parkedFarm < budget {
		t.Errorf("%d farm URLs parked, want the links of its %d pages beyond them", parkedFarm, budget)
	}
	if c := st.Counts(); c.Frontier != 0 && fin != nil && c.Frontier != fin.Frontier {
		t.Errorf("frontier %d at the end, the end says %d", c.Frontier, fin.Frontier)
	}
	if cashOff, histOff := conservation(t, ts.c); math.Abs(cashOff) > 1e-6 || math.Abs(histOff) > 1e-6 {
		t.Errorf("cash off by %g, history by %g", cashOff, histOff)
	}
	t.Logf("end: %v; %d farm URLs parked", fin, parkedFarm)
}

// TestFinishBudgets: an end at the budgets names --pld-budget, with the
// URLs it set aside, only when that budget parked some.
func TestFinishBudgets(t *testing.T) {
	tests := []struct {
		name   string
		f      Finish
		want   string
		absent string
	}{
		{"host budget alone", Finish{Reason: EndBudget, Rounds: 7, Frontier: 12},
			"crawl stopped after 7 rounds: the 12 URLs left in the frontier are all of hosts that have used their page budget (--host-budget)", "--pld-budget"},
		{"both budgets", Finish{Reason: EndBudget, Rounds: 7, Frontier: 12, Parked: 400},
			"the 12 URLs left in the frontier are all of hosts that have used their page budget (--host-budget), and 400 more left unfetched of hosts whose registrable domain has used its (--pld-budget)", ""},
		{"the domain budget alone", Finish{Reason: EndBudget, Rounds: 7, Parked: 400},
			"crawl stopped after 7 rounds: the 400 URLs left unfetched are all of hosts whose registrable domain has used its page budget (--pld-budget)", "--host-budget"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.f.String()
			if !strings.Contains(got, tt.want) || tt.absent != "" && strings.Contains(got, tt.absent) {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRefetchPLDBudget: in a crawl that refetches, the hosts of a
// registrable domain whose fetched pages use its budget stay open for
// their refetches, and their other URLs leave the frontier (parked), as
// for a host over its own budget (TestRefetchHostBudget).
func TestRefetchPLDBudget(t *testing.T) {
	const budget = 10
	ts := refetchCrawl(t, synth.Options{Hosts: 6, Pages: 12, Seed: 5, IPs: 4, Profile: synth.Clean},
		Options{Width: 1000, PerHost: 10, HostDelay: 10 * time.Millisecond, CheckCash: true, PLDBudget: budget,
			Refetch: plan.Refetch{Interval: 300 * time.Millisecond}}, 30)
	st := ts.c.st
	hosts := map[string][]string{} // by registrable domain
	for _, h := range ts.sim.Web().Hosts() {
		d := plan.Registrable(h.Name)
		hosts[d] = append(hosts[d], h.Name)
	}
	refetched := map[string]int{} // pages refetched at least once, by domain
	parked := 0
	err := st.ScanURLs(func(rec store.URLRecord) error {
		if rec.Parked {
			parked++
		}
		if rec.Status == store.StatusFetched && rec.Changed+rec.Unchanged > 0 {
			refetched[plan.Registrable(hostOf(rec.URL))]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	full := 0
	for d, hs := range hosts {
		n, err := st.DomainFetched(d)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%d hosts): %d pages, %d refetched", d, len(hs), n, refetched[d])
		if n > budget {
			t.Errorf("%s: %d pages fetched, --pld-budget %d", d, n, budget)
		}
		if n == budget {
			full++
			if refetched[d] == 0 {
				t.Errorf("%s used its budget and none of its pages was refetched after", d)
			}
		}
		for _, h := range hs {
			if rec, _, _ := st.Host(h); rec.BackoffUntil.Equal(closedUntil) {
				t.Errorf("%s closed: its pages cannot be refetched", h)
			}
		}
	}
	if full == 0 || parked == 0 {
		t.Errorf("%d domains used their budget, %d URLs parked: the budget held nothing", full, parked)
	}
}

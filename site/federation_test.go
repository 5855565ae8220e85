package site_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/internal/loopport"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/partition/geoip"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/shardset"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/wan"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// fedWeb is a websim for a federation test, with its GeoIP database, a
// seeds file of every front page, and the federation's certificates.
type fedWeb struct {
	*multiWeb
	geoip string
	certs string
}

func startFedWeb(t *testing.T, hosts, pages, ips int, seed uint64, sites []string) *fedWeb {
	t.Helper()
	dir := t.TempDir()
	w := &fedWeb{multiWeb: &multiWeb{truth: filepath.Join(dir, "truth.jsonl"), certs: filepath.Join(dir, "certs")}, geoip: filepath.Join(dir, "geoip.mmdb"), certs: filepath.Join(dir, "certs")}
	sim, err := websim.Start(websim.Options{Web: synth.Options{Hosts: hosts, Pages: pages, Seed: seed, IPs: ips, Profile: synth.Realistic},
		DNSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", TruthPath: w.truth, GeoIPPath: w.geoip})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.Stats().CountURLs() // the request log: what is fetched twice
	w.sim = sim
	var b strings.Builder
	for h := range sim.Web().Hosts() {
		b.WriteString(sim.Web().FrontURL(h) + "\n")
	}
	w.seeds = filepath.Join(dir, "seeds.txt")
	if err := os.WriteFile(w.seeds, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := certs.Init(w.certs); err != nil {
		t.Fatal(err)
	}
	for _, s := range sites {
		if err := certs.IssueSite(w.certs, s); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// fedSites are the three test sites, where UniCrawl's were.
var fedSites = []federation.SiteSpec{
	{Name: "eu", Lat: 53.55, Lon: 9.99},
	{Name: "us", Lat: 40.71, Lon: -74.01},
	{Name: "asia", Lat: 1.35, Lon: 103.82},
}

// writeFedFile writes a federation file with a free loopback endpoint per
// site.
func writeFedFile(t *testing.T, dir, kind string, grace time.Duration) (string, federation.File) {
	t.Helper()
	return writeFedFileOf(t, dir, kind, grace, fedSites)
}

// writeFedFileOf writes a federation file of sites with a free loopback
// endpoint each.
func writeFedFileOf(t *testing.T, dir, kind string, grace time.Duration, sites []federation.SiteSpec) (string, federation.File) {
	t.Helper()
	f := federation.File{Partitioner: kind, Replicas: 200, Grace: federation.Duration(grace)}
	for _, s := range sites {
		ln, err := netListen()
		if err != nil {
			t.Fatal(err)
		}
		s.Endpoint = ln
		f.Sites = append(f.Sites, s)
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	path := filepath.Join(dir, "federation.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, f
}

func fedConfig(w *fedWeb, root, fedFile, name string) site.Config {
	cfg := nodeConfig(nil, w.multiWeb, root, name+"-1", "")
	cfg.Region = name
	issueNodeCert(w.certs, name, name+"-1")
	cfg.Data = filepath.Join(root, name)
	cfg.Federation, cfg.Certs, cfg.GeoIP = fedFile, w.certs, w.geoip
	cfg.FailTimeout = 3 * time.Second
	return cfg
}

// owners computes each host's owner the way the federation must: its
// smallest address is its key; GeoIP locates it for the distance
// partitioner; with site down, its hosts go to the next site on the ring
// (sharded or not).
func owners(t *testing.T, w *fedWeb, f federation.File, down string) map[string]string {
	t.Helper()
	var sites []partition.Site
	for _, s := range f.Sites {
		sites = append(sites, partition.Site{Name: s.Name, Lat: s.Lat, Lon: s.Lon, Capacity: s.Capacity})
	}
	p, err := partition.New(f.Partitioner, sites, f.Replicas)
	if err != nil {
		t.Fatal(err)
	}
	db, err := geoip.Open(w.geoip)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	for _, h := range w.sim.Web().Hosts() {
		loc := db.Locate(h.IP)
		ph := partition.Host{Name: h.Name, Key: partition.Key(h.Name, []netip.Addr{h.IP}), Loc: loc}
		o := p.Owner(ph, nil)
		if o == down { // its next owner
			o = p.Owner(ph, func(s string) bool { return s == down })
		}
		out[h.Name] = o
	}
	return out
}

// TestFederation crawls one realistic web with three sites, once per
// partitioner: every URL is fetched by the site that owns its host and by
// no other, the web is covered, politeness holds across the sites, OPIC's
// cash is conserved federation-wide, and every site exits by itself when
// the federation's crawl has ended.
func TestFederation(t *testing.T) {
	for _, kind := range []string{"consistent", "distance"} {
		t.Run(kind, func(t *testing.T) {
			w := startFedWeb(t, 45, 10, 12, 11, []string{"eu", "us", "asia"})
			root := t.TempDir()
			fedFile, file := writeFedFile(t, root, kind, 30*time.Second)
			var cfgs []site.Config
			for _, s := range fedSites {
				cfgs = append(cfgs, fedConfig(w, root, fedFile, s.Name))
			}
			var watched func() // the dashboard's view of the federation, checked after the crawl
			if kind == "consistent" {
				watched = watchFederation(t, cfgs[0])
			}
			runFederation(t, cfgs)
			checkFederation(t, w, file, cfgs, fedFaults{})
			if watched != nil {
				watched()
			}
		})
	}
}

// TestFederationSharded: two sites crawl one realistic web, "eu" a
// sharded site (one node, four shards, R = 1) and "us" a site of one crawl
// database, over real TCP with mutual TLS. The sharded site's shards send
// the URLs of us's hosts under their own names, and its endpoint splits
// what us sends by shard; then both sites sharded. Checked as
// TestFederation: each URL fetched by
// its host's owner only and once (WARC files, websim's request log),
// coverage ≥ 99%, no politeness breach, OPIC's cash conserved over both
// sites (every shard's crawl database and us's; and after every round of
// every shard), every crawl database's
// crawl ended as exhausted with an empty outbox, both sites sent URLs to
// the other, and both exited by themselves.
func TestFederationSharded(t *testing.T) {
	for _, c := range []struct {
		name        string
		shards      []int // per site: 0, one crawl database
		partitioner string
	}{
		{"sharded-and-not", []int{4, 0}, "consistent"},
		{"both-sharded", []int{4, 3}, "consistent"},
		// By distance, a host's owner depends on its place, which a
		// shard's batches to the other shards must carry: with the key
		// alone the shard that took a host placed it nowhere, its
		// federation gave it to the site of its hash, and the host was
		// handed back and forth between the sites (issue 36's federation
		// that did not end) or crawled by the wrong one.
		{"both-sharded-distance", []int{4, 3}, "distance"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sites := fedSites[:2]
			w := startFedWeb(t, 45, 10, 12, 13, []string{sites[0].Name, sites[1].Name})
			root := t.TempDir()
			fedFile, file := writeFedFileOf(t, root, c.partitioner, 30*time.Second, sites)
			var cfgs []site.Config
			for i, s := range sites {
				cfg := fedConfig(w, root, fedFile, s.Name)
				if c.shards[i] > 0 {
					cfg.Shards, cfg.Replicas = c.shards[i], 1
				}
				cfgs = append(cfgs, cfg)
			}
			runFederation(t, cfgs)
			checkFederation(t, w, file, cfgs, fedFaults{})
		})
	}
}

// runFederation starts the sites and waits until every one has exited by
// itself.
func runFederation(t *testing.T, cfgs []site.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(cfgs))
	start := time.Now()
	for i, cfg := range cfgs {
		wg.Go(func() {
			errs[i] = site.Up(ctx, cfg, testLogger(t, cfg.Region), nil)
		})
	}
	wg.Wait()
	t.Logf("federation crawl took %v", time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("the sites did not all end within the test's time: %v", errs)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("site %s: %v", cfgs[i].Region, err)
		}
	}
}

// fedFaults are the faults a federation test caused: a site killed and
// restarted (its own pages in flight may be fetched again), a site gone
// for good (its hosts went to their next owners, which fetch again what it
// had fetched).
type fedFaults struct {
	killed string
	gone   string
	// returned came back after its hosts had moved; from back (when the
	// others saw it up) plus handBackWindow, no other site fetches them.
	returned string
	back     time.Time
	// goneHad is websim's request log a second after the site gone was
	// killed: what it had fetched, or had in flight, by then.
	goneHad map[string]int64
}

// handBackWindow is how long after the others see a returning site up
// they may still fetch its hosts: requests already started, and jobs
// between the fetcher's Skip check and their request.
const handBackWindow = 3 * time.Second

// maxRefetched bounds the URLs a returning site fetches again after an
// interim owner fetched them (issue 20: 580 of 765 in one run before the
// fetched-elsewhere hand-back).
const maxRefetched = 0

func checkFederation(t *testing.T, w *fedWeb, file federation.File, cfgs []site.Config, faults fedFaults) {
	t.Helper()
	own := owners(t, w, file, "")
	hostsOf := map[string]int{}
	for _, o := range own {
		hostsOf[o]++
	}
	t.Logf("hosts per site (%s): %v", file.Partitioner, hostsOf)
	after := own
	if faults.gone != "" {
		after = owners(t, w, file, faults.gone)
	}
	if faults.returned != "" {
		after = owners(t, w, file, faults.returned)
	}
	interim, late := 0, 0 // pages of the returning site's hosts the others fetched; after the window
	// The returning site's hosts' URLs: when an interim owner first
	// fetched each, and when the returning site did.
	interimAt, backAt := map[string]time.Time{}, map[string][]time.Time{}
	// WARC files: every response by its host's owner, no URL by two sites.
	by := map[string]string{}
	perSite := map[string]int{}
	again, handedOver, returnOverlap := 0, 0, 0
	for _, cfg := range cfgs {
		recs, err := crawlcheck.ResponseRecords(filepath.Join(cfg.Data, "warc"))
		if err != nil {
			t.Fatal(err)
		}
		perSite[cfg.Region] = len(recs)
		wrong := 0
		for _, r := range recs {
			h := hostName(r.URL)
			if o := own[h]; o != cfg.Region && after[h] != cfg.Region {
				if wrong++; wrong <= 5 {
					t.Errorf("site %s fetched %s, a URL of site %s's host", cfg.Region, r.URL, o)
				}
			}
			if faults.returned != "" && own[h] == faults.returned && !strings.HasSuffix(r.URL, "/robots.txt") && !isSitemap(r.URL) {
				// (robots.txt and the sitemaps it names are read by
				// every site that takes a host up: they are not URL
				// records.)
				if cfg.Region == faults.returned {
					backAt[r.URL] = append(backAt[r.URL], r.Date)
				} else if at, ok := interimAt[r.URL]; (!ok || r.Date.Before(at)) && r.Status < 500 && r.Status != 429 {
					// (A 5xx or 429 is a retry: the URL goes back to
					// the frontier, to be fetched again by its owner.)
					interimAt[r.URL] = r.Date
				}
			}
			if faults.returned != "" && own[h] == faults.returned && cfg.Region != faults.returned {
				interim++
				if r.Date.After(faults.back.Add(handBackWindow)) {
					if late++; late <= 5 {
						t.Errorf("site %s fetched %s of returned site %s's host at %v, %v after it was seen back", cfg.Region, r.URL, faults.returned, r.Date, r.Date.Sub(faults.back))
					}
				}
			}
			if r.Status < 200 || r.Status >= 300 {
				continue
			}
			if prev, ok := by[r.URL]; ok && prev != cfg.Region && faults.killed == "" && faults.gone == "" && faults.returned == "" {
				t.Errorf("%s fetched by %s and by %s (WARC)", r.URL, prev, cfg.Region)
			}
			by[r.URL] = cfg.Region
		}
	}
	// What was fetched twice, from websim's request log (2xx answers per
	// URL; WARC files lose their unwritten end to a SIGKILL): only URLs of
	// the faulty site's hosts may be.
	twice := 0
	for u, n := range w.sim.Stats().URLRequests() {
		if n < 2 || strings.HasSuffix(u, "/robots.txt") {
			continue
		}
		switch o := own[hostName(u)]; {
		case faults.killed != "" && o == faults.killed:
			again++
		case faults.gone != "" && o == faults.gone:
			handedOver++
			if faults.goneHad[u] == 0 {
				if twice++; twice <= 5 {
					t.Errorf("%s fetched %d times, although the site gone had not fetched it", u, n)
				}
			}
		case faults.returned != "" && o == faults.returned:
			returnOverlap++
		default:
			if twice++; twice <= 5 {
				t.Errorf("%s fetched %d times (websim's request log), a URL of site %s's host", u, n, o)
			}
		}
	}
	t.Logf("WARC responses per site: %v; fetched twice (websim): by the killed site %d, after the hand-over of the site gone %d", perSite, again, handedOver)
	if faults.returned != "" {
		heldBy := map[string]int{}
		for h, o := range own {
			if o == faults.returned {
				heldBy[after[h]]++
			}
		}
		t.Logf("%s's hosts by the site that held them while it was down: %v", faults.returned, heldBy)
		t.Logf("pages of %s's hosts fetched by the others: %d; fetched by both: %d", faults.returned, interim, returnOverlap)
		if interim == 0 {
			t.Errorf("no other site fetched a page of %s's hosts while it was down", faults.returned)
		}
		if returnOverlap > interim {
			t.Errorf("%d URLs fetched by both %s and an interim owner, more than the %d the interim owners fetched", returnOverlap, faults.returned, interim)
		}
		// What the returning site fetched again after an interim owner
		// had fetched it: the interim owners send it those URLs with
		// the hand-back, and it waits for them before crawling its
		// hosts again. (URLs it fetched before it went down and an
		// interim owner fetched again are not counted: nobody could
		// tell the interim owner.)
		var refetched []string
		for u, at := range interimAt {
			for _, b := range backAt[u] {
				if b.After(at) {
					refetched = append(refetched, u)
					break
				}
			}
		}
		slices.Sort(refetched)
		t.Logf("URLs of %s's hosts it fetched again after an interim owner had: %d of the %d the interim owners fetched", faults.returned, len(refetched), len(interimAt))
		if len(refetched) > maxRefetched {
			t.Errorf("%s fetched %d URLs an interim owner had fetched before (at most %d), e.g. %v", faults.returned, len(refetched), maxRefetched, refetched[:min(5, len(refetched))])
		}
	}
	if faults.gone != "" {
		// Bounded by what the site gone had fetched or had in flight when
		// it was killed (websim's log a second later).
		had := 0
		for u := range faults.goneHad {
			if own[hostName(u)] == faults.gone && !strings.HasSuffix(u, "/robots.txt") {
				had++
			}
		}
		t.Logf("the site gone had fetched or had in flight %d URLs; fetched again by the next owners: %d", had, handedOver)
		if handedOver > had {
			t.Errorf("%d URLs fetched again after the hand-over, more than the %d the site gone had fetched or had in flight", handedOver, had)
		}
	}
	for _, cfg := range cfgs {
		if perSite[cfg.Region] == 0 && cfg.Region != faults.gone {
			t.Errorf("site %s fetched nothing", cfg.Region)
		}
	}
	if faults.gone != "" { // its crawl database is gone with it
		var kept []site.Config
		for _, c := range cfgs {
			if c.Region != faults.gone {
				kept = append(kept, c)
			}
		}
		cfgs = kept
	}
	// Coverage: a target is covered if any site fetched it.
	truth, err := crawlcheck.ReadTruth(w.truth)
	if err != nil {
		t.Fatal(err)
	}
	// Every crawl database: a site's one, or a sharded site's shards.
	var stores []*store.Store
	var storeSite []string
	for _, cfg := range cfgs {
		sts, closeStores := siteStores(t, cfg.Data)
		defer closeStores() // before the caller opens them again
		for _, st := range sts {
			stores = append(stores, st)
			storeSite = append(storeSite, cfg.Region)
		}
	}
	targets, covered := 0, 0
	var missing []string
	for i := range truth {
		r := &truth[i]
		if !crawlcheck.Target(r) {
			continue
		}
		targets++
		u := r.URL
		if r.Canonical != "" {
			u = r.Canonical
		}
		found := false
		for _, st := range stores {
			if rec, ok, err := st.Get(u); err != nil {
				t.Fatal(err)
			} else if ok && rec.Status >= store.StatusFetched {
				found = true
			}
		}
		if found {
			covered++
		} else if len(missing) < 10 {
			missing = append(missing, u)
		}
	}
	ratio := float64(covered) / float64(max(targets, 1))
	t.Logf("coverage %d/%d = %.4f", covered, targets, ratio)
	if ratio < 0.99 || targets < 100 {
		t.Errorf("coverage %.4f of %d targets; missing e.g. %v", ratio, targets, missing)
	}
	snap := w.sim.Stats().Snapshot()
	if b := crawlcheck.Politeness(snap, cfgs[0].HostDelay, cfgs[0].IPDelay, crawlDelays(w.sim.Web(), cfgs[0].MaxCrawlDelay)); len(b) > 0 {
		t.Errorf("politeness breaches across the federation: %v", b)
	}
	// OPIC's cash, federation-wide: what the seeds injected is in pages
	// and virtual pages (every outbox is empty).
	var cash, injected opic.Sum
	sentBy := map[string]bool{}
	for i, st := range stores {
		if n := st.Counts().Outbox; n != 0 {
			t.Errorf("site %s (crawl database %d) ended with %d outbox entries", storeSite[i], i, n)
		}
		state, err := rounds.ReadState(st)
		if err != nil {
			t.Fatal(err)
		}
		if state.Finished == nil || state.Finished.Reason != "exhausted" {
			t.Errorf("site %s (crawl database %d): the crawl did not end as exhausted: %+v", storeSite[i], i, state.Finished)
		}
		st.ScanURLs(func(r store.URLRecord) error { cash.Add(r.Cash); return nil })
		cash.Add(state.Virtual)
		injected.Add(state.Injected)
		// Cash for the virtual page received after the last update.
		pending := 0.0
		st.UserScan("fed/in/", func(k string, v []byte) error {
			pending += inboundVirtual(t, v)
			return nil
		})
		cash.Add(pending - state.VirtualIn)
		if state.Sent > 0 {
			sentBy[storeSite[i]] = true
		}
	}
	sent := len(sentBy)
	if off := (cash.Value() - injected.Value()) / injected.Value(); faults.gone == "" && math.Abs(off) > 1e-9 {
		t.Errorf("federation-wide cash off by %g of the %v injected", off, injected.Value())
	}
	if sent < len(cfgs)-1 {
		t.Errorf("only %d sites sent URLs to others", sent)
	}
	for _, cfg := range cfgs {
		if cfg.Shards > 0 {
			n, shards := checkShardCash(t, cfg.Data)
			t.Logf("site %s: %d rounds over %d shards", cfg.Region, n, shards)
			if n == 0 {
				t.Errorf("site %s: no shard has a rounds.jsonl", cfg.Region)
			}
			continue
		}
		ls := readRounds(t, cfg.Data)
		if len(ls) == 0 {
			t.Errorf("site %s has no rounds.jsonl", cfg.Region)
			continue
		}
		last := ls[len(ls)-1]
		t.Logf("site %s: %d rounds; URL-sent cache %d/%d hits", cfg.Region, len(ls), last.SentCacheHits, last.SentCacheLookups)
	}
}

// siteStores opens a stopped site's crawl databases, and returns them
// with what closes them: its one, or on a sharded node its replicas of the
// shards.
func siteStores(t *testing.T, data string) ([]*store.Store, func()) {
	t.Helper()
	shared := filepath.Join(data, "crawldb", "store")
	if _, err := os.Stat(shared); err != nil {
		st, err := crawldb.OpenStore(filepath.Join(data, "crawldb"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return []*store.Store{st}, func() { st.Close() }
	}
	sh, err := store.OpenShared(shared, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	groups, err := sh.Groups()
	if err != nil {
		sh.Close()
		t.Fatal(err)
	}
	var out []*store.Store
	for _, g := range groups {
		if g == shardset.MetaGroup {
			continue
		}
		st, err := sh.Store(g)
		if err != nil {
			sh.Close()
			t.Fatal(err)
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		sh.Close()
		t.Fatalf("%s: a sharded node with no shard", data)
	}
	return out, func() { sh.Close() }
}

// inboundVirtual reads the virtual-page cash of a fed/in/ record (its last
// 8 bytes).
func inboundVirtual(t *testing.T, v []byte) float64 {
	t.Helper()
	if len(v) < 16 {
		t.Fatalf("inbound record of %d bytes", len(v))
	}
	return math.Float64frombits(uint64(v[len(v)-8])<<56 | uint64(v[len(v)-7])<<48 | uint64(v[len(v)-6])<<40 | uint64(v[len(v)-5])<<32 |
		uint64(v[len(v)-4])<<24 | uint64(v[len(v)-3])<<16 | uint64(v[len(v)-2])<<8 | uint64(v[len(v)-1]))
}

func hostName(u string) string {
	u = strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	if i := strings.IndexAny(u, "/:?#"); i >= 0 {
		u = u[:i]
	}
	return u
}

var _ = fmt.Sprint

// netListen returns a free loopback address.
func netListen() (string, error) {
	// Below the ephemeral range: a port from ":0" may be taken by any of
	// CI's other tests between this check and the site's bind
	// (TestFederationOverWAN failed once on "bind: address already in use").
	return loopport.Addr()
}

// testLogger logs a site's warnings and errors to the test's log.
func testLogger(t *testing.T, name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("site", name)
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func readFedFile(t *testing.T, path string) federation.File {
	t.Helper()
	f, err := federation.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFederationOverWAN runs the three sites with a latency proxy in front
// of every federation endpoint (40 ms each way, jitter 5 ms), so that the
// WAN path (TLS through a proxy, slow answers, probes timing out) is
// exercised on every change; the crawl must be as complete and exact as
// on loopback.
func TestFederationOverWAN(t *testing.T) {
	w := startFedWeb(t, 40, 10, 12, 13, []string{"eu", "us", "asia"})
	root := t.TempDir()
	f := federation.File{Partitioner: "consistent", Replicas: 200, Grace: federation.Duration(30 * time.Second)}
	var links []wan.Link
	for _, s := range fedSites {
		addr, err := netListen()
		if err != nil {
			t.Fatal(err)
		}
		s.Listen = addr
		links = append(links, wan.Link{Name: s.Name, Listen: "127.0.0.1:0", Upstream: addr, Delay: 40 * time.Millisecond, Jitter: 5 * time.Millisecond})
		f.Sites = append(f.Sites, s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	emu, err := wan.Start(ctx, links)
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	for i := range f.Sites {
		f.Sites[i].Endpoint = emu.Addr(f.Sites[i].Name)
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	fedFile := filepath.Join(root, "federation.json")
	if err := os.WriteFile(fedFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var cfgs []site.Config
	for _, s := range fedSites {
		cfgs = append(cfgs, fedConfig(w, root, fedFile, s.Name))
	}
	runFederation(t, cfgs)
	checkFederation(t, w, f, cfgs, fedFaults{})
	var crossed int64
	for _, s := range fedSites {
		st, err := emu.Stats(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		crossed += st.Upstream + st.Downstream
	}
	t.Logf("%d bytes crossed the WAN", crossed)
	if crossed == 0 {
		t.Error("nothing crossed the emulated WAN")
	}
}

// fedView is what the dashboard's federation map shows.
type fedView struct {
	Sites   []string `json:"sites"`
	Traffic int      `json:"traffic"` // links with URLs both sent and received
	Links   int      `json:"links"`
}

const readFedView = `(() => ({
	sites: Array.from(document.querySelectorAll('circle.site')).map(c => c.dataset.name),
	links: document.querySelectorAll('line.link').length,
	traffic: Array.from(document.querySelectorAll('line.link')).filter(l => Number(l.dataset.sent) > 0 && Number(l.dataset.recv) > 0).length,
}))()`

// watchFederation opens cfg's site's dashboard in headless chromium while
// the federation crawls; the func it returns (called after the crawl)
// checks that the map showed the three sites with URLs sent and received
// on both of this site's links, with no console error, and saves a
// screenshot.
func watchFederation(t *testing.T, cfg site.Config) func() {
	b := startBrowser(t)
	client := nodeClientFrom(t, cfg.Certs, cfg.Region, cfg.Node) // the node API admits the site's nodes only
	var (
		mu   sync.Mutex
		best fedView
		err  error
		errs []string
	)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	done := make(chan struct{})
	go func() { // owner: watchFederation's check; ends when the map shows it all or ctx ends
		defer close(done)
		var addr, api string
		for ctx.Err() == nil && addr == "" {
			if in, e := site.ReadInfo(cfg.Data); e == nil && in.Listen != "" {
				addr, api = in.Listen, in.API
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		}
		// The state the site's other nodes ask its leader for (a node
		// serving the endpoint without leading).
		var ls struct {
			Site string `json:"site"`
		}
		var e error
		for try := 0; try < 50; try++ {
			if e = getJSONWith(client, "https://"+api+"/site/federation/state", &ls); e == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if e != nil || ls.Site != cfg.Region {
			mu.Lock()
			err = fmt.Errorf("GET /site/federation/state on %s's leader: %v, site %q", cfg.Region, e, ls.Site)
			mu.Unlock()
			return
		}
		if e := b.do(60*time.Second, chromedp.Navigate("http://"+addr+"/")); e != nil {
			mu.Lock()
			err = e
			mu.Unlock()
			return
		}
		for ctx.Err() == nil {
			v, e := eval[fedView](b, readFedView)
			if e == nil && len(v.Sites) == 3 && v.Traffic == 2 {
				b.screenshot(t, "federation")
				mu.Lock()
				best = v
				errs = b.consoleErrors() // before the sites end (the page's polls then fail)
				mu.Unlock()
				return
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	return func() {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("open %s's dashboard: %v", cfg.Region, err)
		}
		slices.Sort(best.Sites)
		if !slices.Equal(best.Sites, []string{"asia", "eu", "us"}) || best.Links != 2 || best.Traffic != 2 {
			t.Errorf("%s's dashboard never showed the three sites with traffic both ways on its two links: %+v", cfg.Region, best)
		}
		if len(errs) > 0 {
			t.Errorf("%s's dashboard logged %d errors or warnings: %v", cfg.Region, len(errs), errs)
		}
	}
}

// checkShardCash checks the cash check of every round of every shard of
// the sharded node in data (its shards' rounds.jsonl), and returns how
// many rounds and shards it read.
func checkShardCash(t *testing.T, data string) (rounds, shards int) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(data, "shards", "*", "stats", "rounds.jsonl"))
	for _, f := range files {
		for _, l := range readRoundsFile(t, f) {
			rounds++
			if l.CashError == nil || math.Abs(*l.CashError) > 1e-9 {
				t.Errorf("%s round %d: cash check %s", f, l.Round, fmtCashError(l.CashError))
			}
		}
	}
	return rounds, len(files)
}

// fmtCashError formats a round's cash check: its value, or "missing".
func fmtCashError(e *float64) string {
	if e == nil {
		return "missing"
	}
	return fmt.Sprint(*e)
}

// isSitemap reports whether u is one of the sitemaps websim's robots.txt
// names (/sitemap.xml, and /sitemap-missing.xml, which answers 404).
func isSitemap(u string) bool {
	return strings.HasSuffix(u, "/sitemap.xml") || strings.HasSuffix(u, "/sitemap-missing.xml")
}

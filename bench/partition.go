package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/partition/geoip"
	"github.com/meridian-crawler/meridian/websim/geodb"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// partitionTarget is issue 10's balance target: at most 4.5% deviation from
// the fair share at 200 replicas (UbiCrawler's figure).
const partitionTarget = 4.5

// PartitionSiteSet is one federation measured by RunPartition: its sites,
// a site that joins it and the name of a site that leaves it.
type PartitionSiteSet struct {
	Name  string           `json:"name"`
	Sites []partition.Site `json:"sites"`
	Join  partition.Site   `json:"join"`
	Leave string           `json:"leave"`
}

// PartitionSites3 is the three-site federation of issue 10 (eu Hamburg, us
// New York, asia Singapore); sa (São Paulo) joins it, asia leaves it.
func PartitionSites3() PartitionSiteSet {
	return PartitionSiteSet{Name: "3 sites", Sites: []partition.Site{
		{Name: "eu", Lat: 53.55, Lon: 9.99},
		{Name: "us", Lat: 40.71, Lon: -74.01},
		{Name: "asia", Lat: 1.35, Lon: 103.82},
	}, Join: partition.Site{Name: "sa", Lat: -23.55, Lon: -46.63}, Leave: "asia"}
}

// PartitionSites10 is a ten-site federation, the three of PartitionSites3
// and seven more; me (Dubai) joins it, us leaves it.
func PartitionSites10() PartitionSiteSet {
	s := PartitionSites3()
	s.Name = "10 sites"
	s.Sites = append(s.Sites,
		partition.Site{Name: "us-west", Lat: 47.61, Lon: -122.33}, // Seattle
		partition.Site{Name: "sa", Lat: -23.55, Lon: -46.63},      // São Paulo
		partition.Site{Name: "oc", Lat: -33.87, Lon: 151.21},      // Sydney
		partition.Site{Name: "af", Lat: -26.20, Lon: 28.05},       // Johannesburg
		partition.Site{Name: "in", Lat: 19.08, Lon: 72.88},        // Mumbai
		partition.Site{Name: "jp", Lat: 35.69, Lon: 139.69},       // Tokyo
		partition.Site{Name: "eu-west", Lat: 53.35, Lon: -6.26},   // Dublin
	)
	s.Join, s.Leave = partition.Site{Name: "me", Lat: 25.20, Lon: 55.27}, "us"
	return s
}

// PartitionConfig configures RunPartition: a synthetic web built in memory
// (no server), partitioned among the sites of each set.
type PartitionConfig struct {
	// Hosts, Pages, IPs, Seed and Profile describe the web, as in SiteConfig.
	Hosts   int           `json:"hosts"`
	Pages   int           `json:"pages"`
	IPs     int           `json:"ips"`
	Seed    uint64        `json:"seed"`
	Profile synth.Profile `json:"-"`
	// Replicas are the ring's points per unit of capacity to measure
	// (default 100, 200, 1000). The distance partitioner's fallback ring
	// uses 200 if listed, else the last.
	Replicas []int `json:"replicas"`
	// Sets are the federations (default PartitionSites3 and PartitionSites10).
	Sets []PartitionSiteSet `json:"sets"`
	// Unlocated is the share of the web's addresses left out of the GeoIP
	// database, so that their hosts fall back to hashing (default 0:
	// websim's database places every address).
	Unlocated float64 `json:"unlocated"`
	// Trials is the number of random federations (sites named at random)
	// of each set's size over which the ring's balance is also measured,
	// so that one set of names is not the only sample. Default 200;
	// negative: none.
	Trials int `json:"trials"`
	// Progress, if set, receives a line per federation and replica count.
	Progress func(format string, args ...any) `json:"-"`
}

// DefaultPartitionConfig is bench site's web (10,000 realistic hosts of 50
// pages on 64 addresses, seed 1), the sets of 3 and 10 sites, 100, 200 and
// 1000 replicas, 200 random federations.
func DefaultPartitionConfig() PartitionConfig {
	s := DefaultSiteConfig()
	return PartitionConfig{Hosts: s.Hosts, Pages: s.Pages, IPs: s.IPs, Seed: s.Seed, Profile: s.Profile,
		Replicas: []int{100, 200, 1000}, Sets: []PartitionSiteSet{PartitionSites3(), PartitionSites10()}, Trials: 200}
}

// WithDefaults returns c with its zero fields filled in, or every problem
// with it.
func (c PartitionConfig) WithDefaults() (PartitionConfig, error) {
	c.Replicas, c.Sets = slices.Clone(c.Replicas), slices.Clone(c.Sets)
	if len(c.Replicas) == 0 {
		c.Replicas = []int{100, 200, 1000}
	}
	if len(c.Sets) == 0 {
		c.Sets = []PartitionSiteSet{PartitionSites3(), PartitionSites10()}
	}
	if c.Trials == 0 {
		c.Trials = 200
	}
	o := c.webOptions()
	c.Hosts, c.Pages, c.IPs = o.Hosts, o.Pages, o.IPs
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("bench: "+format, args...)) }
	if err := o.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, k := range c.Replicas {
		if k < 1 || k > partition.MaxReplicas {
			bad("replicas must be in [1, %d], got %d", partition.MaxReplicas, k)
		}
	}
	if math.IsNaN(c.Unlocated) || c.Unlocated < 0 || c.Unlocated > 1 {
		bad("unlocated must be a share in [0, 1], got %v", c.Unlocated)
	}
	for i, s := range c.Sets {
		c.Sets[i].Sites = slices.Clone(s.Sites)
		names := make([]string, len(s.Sites))
		for j, site := range s.Sites {
			names[j] = site.Name
		}
		if !slices.Contains(names, s.Leave) {
			bad("set %q: the leaving site %q is not one of %q", s.Name, s.Leave, names)
		}
		if slices.Contains(names, s.Join.Name) || s.Join.Name == "" {
			bad("set %q: the joining site %q must be a new, named site", s.Name, s.Join.Name)
		}
		if len(s.Sites) < 2 {
			bad("set %q: want at least 2 sites (one of them leaves)", s.Name)
		}
	}
	return c, errors.Join(errs...)
}

// webOptions returns the synth options of the web, defaults filled in.
func (c *PartitionConfig) webOptions() synth.Options {
	o := synth.Options{Hosts: c.Hosts, Pages: c.Pages, IPs: c.IPs, Seed: c.Seed, Profile: c.Profile}
	o.EnsureDefaults()
	return o
}

// fallbackReplicas is the replica count of the distance partitioner's ring.
func (c *PartitionConfig) fallbackReplicas() int {
	if slices.Contains(c.Replicas, 200) {
		return 200
	}
	return c.Replicas[len(c.Replicas)-1]
}

// PartitionResult is what RunPartition measured. Deviations are in percent
// of the fair share: 100 × max over sites of |share / fair share − 1|,
// where a site's fair share is its capacity over the total.
type PartitionResult struct {
	Hosts        int                  `json:"hosts"`
	Pages        int                  `json:"pages"` // pages of all hosts (tree and sitemap-only)
	IPs          int                  `json:"ips"`   // addresses with at least one host
	UnlocatedIPs int                  `json:"unlocated_ips"`
	Sets         []PartitionSetResult `json:"sets"`
	Elapsed      time.Duration        `json:"elapsed_ns"`
}

// PartitionSetResult is one federation's figures.
type PartitionSetResult struct {
	Name       string                  `json:"name"`
	Sites      []string                `json:"sites"`
	Consistent []PartitionRingResult   `json:"consistent"` // one per replica count
	Distance   PartitionDistanceResult `json:"distance"`
	IPGap      PartitionIPGap          `json:"ip_gap"`
	Trials     []PartitionTrialsResult `json:"trials,omitempty"` // one per replica count
}

// PartitionRingResult is the consistent partitioner at one replica count.
type PartitionRingResult struct {
	Replicas int `json:"replicas"`
	// Max deviations: of the exact shares of the hash space, of hosts and
	// pages when host names are hashed, and when Keys (addresses) are.
	RingDev        float64 `json:"ring_max_dev_pct"`
	HostsByNameDev float64 `json:"hosts_by_name_max_dev_pct"`
	PagesByNameDev float64 `json:"pages_by_name_max_dev_pct"`
	HostsByKeyDev  float64 `json:"hosts_by_key_max_dev_pct"`
	PagesByKeyDev  float64 `json:"pages_by_key_max_dev_pct"`
	// Shares are each site's shares, in the set's order.
	Shares []PartitionShare `json:"shares"`
	// Join and Leave: hosts keyed by address, a site joins, one leaves.
	Join  PartitionChurn `json:"join"`
	Leave PartitionChurn `json:"leave"`
}

// PartitionShare is one site's share (fractions of the whole).
type PartitionShare struct {
	Site        string  `json:"site"`
	Fair        float64 `json:"fair"`
	Ring        float64 `json:"ring,omitempty"`
	HostsByName float64 `json:"hosts_by_name,omitempty"`
	Hosts       float64 `json:"hosts"` // by Key
	Pages       float64 `json:"pages"` // by Key
}

// PartitionChurn is what moves when one site joins or leaves.
type PartitionChurn struct {
	Site string `json:"site"`
	// Moved and MovedPages are the shares of hosts and of pages whose owner
	// changed; SiteShare is the share of hosts of the joining site after
	// it joined, or of the leaving site before it left. Contravariance
	// makes Moved equal SiteShare.
	Moved      float64 `json:"moved"`
	MovedPages float64 `json:"moved_pages"`
	SiteShare  float64 `json:"site_share"`
	// Elsewhere counts the hosts that moved but not to the joining site, or
	// not from the leaving site: 0 when the assignment is contravariant.
	Elsewhere int `json:"elsewhere"`
	// DownMismatch (leave) counts the hosts whose owner with the leaving
	// site marked down differs from their owner once it is gone: 0.
	DownMismatch int `json:"down_mismatch"`
	// NotSuccessor (leave, consistent hashing) counts the leaving site's
	// hosts that did not go to their next successor (Ring.Successors): 0.
	NotSuccessor int `json:"not_successor"`
}

// PartitionIPGap counts the addresses whose hosts more than one site owns,
// so that no one site can keep the address's politeness.
type PartitionIPGap struct {
	IPs int `json:"ips"`
	// SplitByName: consistent hashing of host names (at the last replica
	// count measured; the count matters little). HostsOnSplitByName are the hosts
	// on those addresses.
	SplitByName        int `json:"split_by_name"`
	HostsOnSplitByName int `json:"hosts_on_split_by_name"`
	// SplitByKey: consistent hashing of Keys, every replica count; and
	// SplitDistance: the distance partitioner. Both must be 0.
	SplitByKey    int `json:"split_by_key"`
	SplitDistance int `json:"split_distance"`
}

// PartitionDistanceResult is the distance partitioner (fallback ring at
// PartitionConfig's fallback replica count).
type PartitionDistanceResult struct {
	Replicas int              `json:"fallback_replicas"`
	Shares   []PartitionShare `json:"shares"`
	Located  int              `json:"located_hosts"`
	Fallback int              `json:"fallback_hosts"` // hosts not located: hashed
	Join     PartitionChurn   `json:"join"`
	Leave    PartitionChurn   `json:"leave"`
}

// PartitionTrialsResult is the distribution of the ring's max deviation
// over random federations of the set's size and capacities.
type PartitionTrialsResult struct {
	Replicas int     `json:"replicas"`
	N        int     `json:"n"`
	Mean     float64 `json:"mean_pct"`
	P50      float64 `json:"p50_pct"`
	P95      float64 `json:"p95_pct"`
	Max      float64 `json:"max_pct"`
	// WithinTarget is the share of federations at or under 4.5%.
	WithinTarget float64 `json:"within_target"`
}

// partitionWeb is the web as the partitioners see it.
type partitionWeb struct {
	hosts    []partition.Host // Key by address, Loc from the GeoIP database
	names    []partition.Host // Key by name, Loc unknown
	pages    []float64
	ipOf     []int // index of each host's address
	nIPs     int
	total    float64 // pages
	fallback int     // hosts not located
}

// RunPartition measures the partitioners on cfg's web: the balance of
// consistent hashing, what moves when a site joins or leaves, the distance
// partitioner's shares and fallbacks, and how many addresses have hosts on
// more than one site. It is pure computation, no I/O but memory.
func RunPartition(ctx context.Context, cfg PartitionConfig) (PartitionResult, error) {
	start := time.Now()
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return PartitionResult{}, err
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	cfg.Progress("building the web: %d %s hosts on %d addresses", cfg.Hosts, cfg.Profile, cfg.IPs)
	w, res, err := buildPartitionWeb(cfg)
	if err != nil {
		return res, err
	}
	for _, set := range cfg.Sets {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		sr, err := runPartitionSet(ctx, cfg, set, w)
		if err != nil {
			return res, fmt.Errorf("bench: partition %s: %w", set.Name, err)
		}
		res.Sets = append(res.Sets, sr)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// buildPartitionWeb builds cfg's web and locates its hosts through a GeoIP
// database written in memory, as websim --geoip writes it.
func buildPartitionWeb(cfg PartitionConfig) (*partitionWeb, PartitionResult, error) {
	var res PartitionResult
	web, err := synth.New(cfg.webOptions())
	if err != nil {
		return nil, res, fmt.Errorf("bench: partition web: %w", err)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9a17))
	var entries []geodb.Entry
	for _, e := range web.GeoEntries() {
		if rng.Float64() < cfg.Unlocated {
			res.UnlocatedIPs++
			continue
		}
		entries = append(entries, e)
	}
	var buf bytes.Buffer
	if err := geodb.Write(&buf, entries); err != nil {
		return nil, res, fmt.Errorf("bench: partition GeoIP database: %w", err)
	}
	db, err := geoip.FromBytes(buf.Bytes())
	if err != nil {
		return nil, res, fmt.Errorf("bench: partition GeoIP database: %w", err)
	}
	defer db.Close()

	hosts := web.Hosts()
	w := &partitionWeb{hosts: make([]partition.Host, len(hosts)), names: make([]partition.Host, len(hosts)),
		pages: make([]float64, len(hosts)), ipOf: make([]int, len(hosts))}
	ipIndex := map[netip.Addr]int{}
	locs := map[netip.Addr]partition.Location{}
	for i, h := range hosts {
		loc, ok := locs[h.IP]
		if !ok {
			if loc, err = db.Lookup(h.IP); err != nil {
				return nil, res, fmt.Errorf("bench: partition: %w", err)
			}
			locs[h.IP] = loc
			ipIndex[h.IP] = len(ipIndex)
		}
		w.hosts[i] = partition.Host{Name: h.Name, Key: partition.Key(h.Name, []netip.Addr{h.IP}), Loc: loc}
		w.names[i] = partition.Host{Name: h.Name, Key: partition.Key(h.Name, nil)}
		w.pages[i] = float64(h.Pages + h.Orphans)
		w.ipOf[i] = ipIndex[h.IP]
		w.total += w.pages[i]
		if !loc.Known {
			w.fallback++
		}
	}
	w.nIPs = len(ipIndex)
	res.Hosts, res.Pages, res.IPs = len(hosts), int(w.total), w.nIPs
	return w, res, nil
}

// owners returns each host's owner under p, with the sites in down down.
func (w *partitionWeb) owners(p partition.Partitioner, byName bool, down ...string) []string {
	hosts := w.hosts
	if byName {
		hosts = w.names
	}
	var isDown func(string) bool
	if len(down) > 0 {
		isDown = func(s string) bool { return slices.Contains(down, s) }
	}
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = p.Owner(h, isDown)
	}
	return out
}

// shares returns each site's share of hosts and of pages under owners.
func (w *partitionWeb) shares(owners []string) (hosts, pages map[string]float64) {
	hosts, pages = map[string]float64{}, map[string]float64{}
	for i, o := range owners {
		hosts[o] += 1 / float64(len(owners))
		pages[o] += w.pages[i] / w.total
	}
	return hosts, pages
}

// splitIPs counts the addresses whose hosts have more than one owner, and
// the hosts on them.
func (w *partitionWeb) splitIPs(owners []string) (ips, hosts int) {
	first := make([]string, w.nIPs)
	split := make([]bool, w.nIPs)
	count := make([]int, w.nIPs)
	for i, o := range owners {
		ip := w.ipOf[i]
		count[ip]++
		if first[ip] == "" {
			first[ip] = o
		} else if first[ip] != o {
			split[ip] = true
		}
	}
	for ip, s := range split {
		if s {
			ips++
			hosts += count[ip]
		}
	}
	return ips, hosts
}

// churn compares owners before and after site joined (join) or left.
func (w *partitionWeb) churn(before, after []string, site string, join bool) PartitionChurn {
	c := PartitionChurn{Site: site}
	n := float64(len(before))
	for i := range before {
		if (join && after[i] == site) || (!join && before[i] == site) {
			c.SiteShare += 1 / n
		}
		if before[i] == after[i] {
			continue
		}
		c.Moved += 1 / n
		c.MovedPages += w.pages[i] / w.total
		if (join && after[i] != site) || (!join && before[i] != site) {
			c.Elsewhere++
		}
	}
	return c
}

// partFairShares returns each site's capacity over the total.
func partFairShares(sites []partition.Site) map[string]float64 {
	total := 0.0
	for _, s := range sites {
		total += partCapacity(s)
	}
	out := map[string]float64{}
	for _, s := range sites {
		out[s.Name] = partCapacity(s) / total
	}
	return out
}

// partCapacity is s's capacity with partition's default (0 means 1).
func partCapacity(s partition.Site) float64 {
	if s.Capacity == 0 {
		return 1
	}
	return s.Capacity
}

// partMaxDev is the largest |share/fair − 1| over the sites, in percent.
func partMaxDev(share, fair map[string]float64) float64 {
	d := 0.0
	for s, f := range fair {
		d = max(d, math.Abs(share[s]/f-1))
	}
	return 100 * d
}

// partWithout returns sites without the named one.
func partWithout(sites []partition.Site, name string) []partition.Site {
	return slices.DeleteFunc(slices.Clone(sites), func(s partition.Site) bool { return s.Name == name })
}

// runPartitionSet measures one federation.
func runPartitionSet(ctx context.Context, cfg PartitionConfig, set PartitionSiteSet, w *partitionWeb) (PartitionSetResult, error) {
	sr := PartitionSetResult{Name: set.Name, IPGap: PartitionIPGap{IPs: w.nIPs}}
	for _, s := range set.Sites {
		sr.Sites = append(sr.Sites, s.Name)
	}
	fair := partFairShares(set.Sites)
	joined := append(slices.Clone(set.Sites), set.Join)
	left := partWithout(set.Sites, set.Leave)
	for _, k := range cfg.Replicas {
		if err := ctx.Err(); err != nil {
			return sr, err
		}
		cfg.Progress("%s: consistent hashing, %d replicas", set.Name, k)
		rings, err := partRings(k, set.Sites, joined, left)
		if err != nil {
			return sr, err
		}
		ring := rings[0]
		p, pJoin, pLeave := partition.Consistent{Ring: ring}, partition.Consistent{Ring: rings[1]}, partition.Consistent{Ring: rings[2]}
		byKey, byName := w.owners(p, false), w.owners(p, true)
		hk, pk := w.shares(byKey)
		hn, pn := w.shares(byName)
		rs := ring.Shares()
		rr := PartitionRingResult{Replicas: k, RingDev: partMaxDev(rs, fair),
			HostsByNameDev: partMaxDev(hn, fair), PagesByNameDev: partMaxDev(pn, fair),
			HostsByKeyDev: partMaxDev(hk, fair), PagesByKeyDev: partMaxDev(pk, fair)}
		for _, s := range set.Sites {
			rr.Shares = append(rr.Shares, PartitionShare{Site: s.Name, Fair: fair[s.Name], Ring: rs[s.Name],
				HostsByName: hn[s.Name], Hosts: hk[s.Name], Pages: pk[s.Name]})
		}
		rr.Join = w.churn(byKey, w.owners(pJoin, false), set.Join.Name, true)
		afterLeave := w.owners(pLeave, false)
		rr.Leave = w.churn(byKey, afterLeave, set.Leave, false)
		rr.Leave.DownMismatch = partMismatches(w.owners(p, false, set.Leave), afterLeave)
		for i, h := range w.hosts {
			if byKey[i] == set.Leave && afterLeave[i] != ring.Successors(h.Key)[1] {
				rr.Leave.NotSuccessor++
			}
		}
		sr.Consistent = append(sr.Consistent, rr)

		ipsKey, _ := w.splitIPs(byKey)
		sr.IPGap.SplitByKey = max(sr.IPGap.SplitByKey, ipsKey)
		sr.IPGap.SplitByName, sr.IPGap.HostsOnSplitByName = w.splitIPs(byName) // the last k's stays

		if cfg.Trials > 0 {
			cfg.Progress("%s: %d random federations, %d replicas", set.Name, cfg.Trials, k)
			sr.Trials = append(sr.Trials, partTrials(set.Sites, k, cfg.Trials, fair))
		}
	}

	k := cfg.fallbackReplicas()
	cfg.Progress("%s: distance partitioner (fallback ring of %d replicas)", set.Name, k)
	dists, err := partDistances(k, set.Sites, joined, left)
	if err != nil {
		return sr, err
	}
	owners := w.owners(dists[0], false)
	hd, pd := w.shares(owners)
	dr := PartitionDistanceResult{Replicas: k, Located: len(w.hosts) - w.fallback, Fallback: w.fallback}
	for _, s := range set.Sites {
		dr.Shares = append(dr.Shares, PartitionShare{Site: s.Name, Fair: fair[s.Name], Hosts: hd[s.Name], Pages: pd[s.Name]})
	}
	dr.Join = w.churn(owners, w.owners(dists[1], false), set.Join.Name, true)
	afterLeave := w.owners(dists[2], false)
	dr.Leave = w.churn(owners, afterLeave, set.Leave, false)
	dr.Leave.DownMismatch = partMismatches(w.owners(dists[0], false, set.Leave), afterLeave)
	sr.Distance = dr
	sr.IPGap.SplitDistance, _ = w.splitIPs(owners)
	return sr, nil
}

// partRings builds a ring of k replicas for each list of sites.
func partRings(k int, lists ...[]partition.Site) ([]*partition.Ring, error) {
	var out []*partition.Ring
	for _, sites := range lists {
		r, err := partition.NewRing(sites, k)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// partDistances builds a distance partitioner, with a fallback ring of k
// replicas, for each list of sites.
func partDistances(k int, lists ...[]partition.Site) ([]*partition.Distance, error) {
	rings, err := partRings(k, lists...)
	if err != nil {
		return nil, err
	}
	var out []*partition.Distance
	for i, sites := range lists {
		d, err := partition.NewDistance(sites, rings[i])
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// partMismatches counts the positions where a and b differ.
func partMismatches(a, b []string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// partTrials measures the ring's max deviation over n federations of
// random names with the capacities of sites.
func partTrials(sites []partition.Site, k, n int, fair map[string]float64) PartitionTrialsResult {
	tr := PartitionTrialsResult{Replicas: k}
	var devs []float64
	for t := range n {
		renamed := make([]partition.Site, len(sites))
		trialFair := map[string]float64{}
		for i, s := range sites {
			renamed[i] = partition.Site{Name: fmt.Sprintf("trial%d-site%d", t, i), Capacity: s.Capacity}
			trialFair[renamed[i].Name] = fair[s.Name]
		}
		r, err := partition.NewRing(renamed, k)
		if err != nil {
			continue // a replica collision: UbiCrawler renames the site; one sample fewer
		}
		devs = append(devs, partMaxDev(r.Shares(), trialFair))
	}
	if len(devs) == 0 {
		return tr
	}
	slices.Sort(devs)
	tr.N = len(devs)
	for _, d := range devs {
		tr.Mean += d / float64(len(devs))
		if d <= partitionTarget {
			tr.WithinTarget += 1 / float64(len(devs))
		}
	}
	tr.P50, tr.P95, tr.Max = devs[len(devs)/2], devs[min(len(devs)-1, len(devs)*95/100)], devs[len(devs)-1]
	return tr
}

// Broken lists the invariants the run found broken; none when the
// partitioners are contravariant and keying by address keeps every
// address on one site.
func (r PartitionResult) Broken() []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	churn := func(set, what string, c PartitionChurn) {
		if c.Elsewhere != 0 {
			bad("%s, %s, %s: %d hosts moved between other sites", set, what, c.Site, c.Elsewhere)
		}
		if c.DownMismatch != 0 {
			bad("%s, %s, %s: %d hosts have another owner with %s down than with %s gone", set, what, c.Site, c.DownMismatch, c.Site, c.Site)
		}
		if c.NotSuccessor != 0 {
			bad("%s, %s, %s: %d hosts did not go to their next successor", set, what, c.Site, c.NotSuccessor)
		}
	}
	for _, s := range r.Sets {
		for _, c := range s.Consistent {
			churn(s.Name, fmt.Sprintf("consistent %d replicas, join", c.Replicas), c.Join)
			churn(s.Name, fmt.Sprintf("consistent %d replicas, leave", c.Replicas), c.Leave)
		}
		churn(s.Name, "distance, join", s.Distance.Join)
		churn(s.Name, "distance, leave", s.Distance.Leave)
		if s.IPGap.SplitByKey != 0 || s.IPGap.SplitDistance != 0 {
			bad("%s: addresses split among sites: %d hashing Keys, %d by distance", s.Name, s.IPGap.SplitByKey, s.IPGap.SplitDistance)
		}
	}
	return out
}

// Report is the human-readable summary of r.
func (r PartitionResult) Report(cfg PartitionConfig) string {
	var sb strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&sb, format, a...) }
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
	p("partition: %d %s hosts (seed %d) on %d addresses, %d pages; %d addresses left out of the GeoIP database\n",
		r.Hosts, cfg.Profile, cfg.Seed, r.IPs, r.Pages, r.UnlocatedIPs)
	p("deviations: max over sites of |share / fair share − 1|, %% (UbiCrawler: < 6%% at 100 replicas, < 4.5%% at 200)\n")
	for _, s := range r.Sets {
		p("\n%s (%s)\n", s.Name, strings.Join(s.Sites, ", "))
		p("  consistent hashing: max deviation, %%\n")
		p("    %8s %6s %11s %11s %10s %10s", "replicas", "ring", "hosts/name", "pages/name", "hosts/key", "pages/key")
		if len(s.Trials) > 0 {
			p("   | ring over %d random federations: mean p50 p95 max, ≤%.1f%%", s.Trials[0].N, partitionTarget)
		}
		p("\n")
		for i, c := range s.Consistent {
			p("    %8d %6.1f %11.1f %11.1f %10.1f %10.1f", c.Replicas, c.RingDev, c.HostsByNameDev, c.PagesByNameDev, c.HostsByKeyDev, c.PagesByKeyDev)
			if i < len(s.Trials) {
				t := s.Trials[i]
				p("   | %.1f %.1f %.1f %.1f, %s", t.Mean, t.P50, t.P95, t.Max, pct(t.WithinTarget))
			}
			p("\n")
		}
		for _, c := range s.Consistent {
			p("  %d replicas, shares (fair, ring, hosts by name, hosts by key, pages by key):", c.Replicas)
			for _, sh := range c.Shares {
				p(" %s %s/%s/%s/%s/%s", sh.Site, pct(sh.Fair), pct(sh.Ring), pct(sh.HostsByName), pct(sh.Hosts), pct(sh.Pages))
			}
			p("\n")
		}
		churn := func(indent string, c PartitionChurn, join, ring bool) {
			verb, whose := "leaves", "had"
			if join {
				verb, whose = "joins", "gets"
			}
			p("%s%s %s: %s of hosts move (%s of pages); %s %s %s; %d moved elsewhere", indent, c.Site, verb,
				pct(c.Moved), pct(c.MovedPages), c.Site, whose, pct(c.SiteShare), c.Elsewhere)
			if !join {
				p(", %d differ when down", c.DownMismatch)
			}
			if !join && ring {
				p(", %d not to the next successor", c.NotSuccessor)
			}
			p("\n")
		}
		for _, c := range s.Consistent {
			p("  churn at %d replicas (hosts keyed by address):\n", c.Replicas)
			churn("    ", c.Join, true, true)
			churn("    ", c.Leave, false, true)
		}
		d := s.Distance
		p("  distance partitioner (fallback ring of %d replicas): %d hosts located, %d hashed\n    shares (hosts, pages):", d.Replicas, d.Located, d.Fallback)
		for _, sh := range d.Shares {
			p(" %s %s/%s", sh.Site, pct(sh.Hosts), pct(sh.Pages))
		}
		p("\n")
		churn("    ", d.Join, true, false)
		churn("    ", d.Leave, false, false)
		g := s.IPGap
		p("  IP gap: of %d addresses, %d (%d hosts) are split among sites hashing host names; %d hashing Keys; %d by distance\n",
			g.IPs, g.SplitByName, g.HostsOnSplitByName, g.SplitByKey, g.SplitDistance)
	}
	if b := r.Broken(); len(b) > 0 {
		p("\nBROKEN INVARIANTS:\n  %s\n", strings.Join(b, "\n  "))
	} else {
		p("\ninvariants hold: moves only to a joining site or from a leaving one, down = gone, no address split when hashing Keys\n")
	}
	p("elapsed %.2fs\n", r.Elapsed.Seconds())
	return sb.String()
}

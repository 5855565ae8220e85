package partition

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// testSites are the three sites of issue 10's examples.
var testSites = []Site{
	{Name: "eu", Lat: 53.55, Lon: 9.99},
	{Name: "us", Lat: 40.71, Lon: -74.01},
	{Name: "asia", Lat: 1.35, Lon: 103.82},
}

func mustRing(t testing.TB, sites []Site, replicas int) *Ring {
	t.Helper()
	r, err := NewRing(sites, replicas)
	if err != nil {
		t.Fatalf("NewRing(%v, %d): %v", sites, replicas, err)
	}
	return r
}

// keys returns n host-like keys.
func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("h%d.example.test", i)
	}
	return out
}

// downSet returns a down func for the named sites and counts its calls.
func downSet(names ...string) (down func(string) bool, calls map[string]int) {
	calls = map[string]int{}
	return func(s string) bool {
		calls[s]++
		return slices.Contains(names, s)
	}, calls
}

// refOwner is the simple reference of Ring.Owner: the site, not down, with
// the point at the least clockwise distance from any of key's probes (the
// first probe on a tie).
func refOwner(r *Ring, key string, down func(string) bool) string {
	h := hashKey(key)
	best, bestDist := "", uint64(math.MaxUint64)
	for pr := range Probes {
		x := probe(h, pr)
		for i, p := range r.points {
			s := r.sites[r.owner[i]]
			if down != nil && down(s) {
				continue
			}
			if d := p - x; best == "" || d < bestDist { // p - x wraps: the clockwise distance
				best, bestDist = s, d
			}
		}
	}
	return best
}

func TestSplitMix64Reference(t *testing.T) {
	// The first outputs of SplitMix64 seeded with 0, from the reference C code.
	g := splitmix64{}
	for i, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		if got := g.next(); got != want {
			t.Errorf("output %d = %#016x, want %#016x", i, got, want)
		}
	}
}

func TestNewRingInvalid(t *testing.T) {
	tests := []struct {
		name     string
		sites    []Site
		replicas int
		want     []string // substrings of the error
	}{
		{"no sites", nil, 100, []string{"no sites"}},
		{"empty name", []Site{{Name: "a"}, {Name: ""}}, 100, []string{"empty name"}},
		{"duplicate", []Site{{Name: "a"}, {Name: "b"}, {Name: "a"}}, 100, []string{`"a" is listed twice`}},
		{"negative capacity", []Site{{Name: "a", Capacity: -1}}, 100, []string{`"a": capacity`}},
		{"NaN capacity", []Site{{Name: "a", Capacity: math.NaN()}}, 100, []string{`"a": capacity`}},
		{"infinite capacity", []Site{{Name: "a", Capacity: math.Inf(1)}}, 100, []string{`"a": capacity`}},
		{"zero replicas", []Site{{Name: "a"}}, 0, []string{"replicas must be"}},
		{"negative replicas", []Site{{Name: "a"}}, -5, []string{"replicas must be"}},
		{"too many replicas", []Site{{Name: "a"}}, MaxReplicas + 1, []string{"replicas must be"}},
		{"capacity rounds to no point", []Site{{Name: "a"}, {Name: "b", Capacity: 0.001}}, 100, []string{`"b": 100 replicas`}},
		{"capacity too large", []Site{{Name: "a", Capacity: 1e9}}, 100, []string{`"a": 100 replicas`}},
		{"every problem at once", []Site{{Name: ""}, {Name: "x", Capacity: -2}, {Name: "x"}}, 0,
			[]string{"empty name", `"x" is listed twice`, `"x": capacity`, "replicas must be"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRing(tt.sites, tt.replicas)
			if err == nil {
				t.Fatalf("NewRing = %v, nil; want an error", r)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestRingDeterministic(t *testing.T) {
	shuffled := []Site{testSites[2], testSites[0], testSites[1]}
	a, b := mustRing(t, testSites, 200), mustRing(t, shuffled, 200)
	if !slices.Equal(a.points, b.points) || !slices.Equal(a.owner, b.owner) {
		t.Fatal("rings of the same sites in different orders differ")
	}
	for _, k := range keys(5000) {
		if x, y := a.Owner(k, nil), b.Owner(k, nil); x != y {
			t.Fatalf("Owner(%q) = %q and %q", k, x, y)
		}
	}
	// Pinned values: a change here moves hosts between sites of a running
	// federation whose members run different builds. Only change them with
	// a format version.
	if got := sitePoints("eu")(); got != pinnedFirstPointEU {
		t.Errorf("first point of site eu = %#016x, want %#016x", got, pinnedFirstPointEU)
	}
	if got := probe(1, 1); got != pinnedProbe {
		t.Errorf("probe(1, 1) = %#016x, want %#016x", got, pinnedProbe)
	}
	for k, want := range pinnedOwners {
		if got := a.Owner(k, nil); got != want {
			t.Errorf("Owner(%q) = %q, want %q (pinned)", k, got, want)
		}
	}
}

// Pinned outputs of the generator and of the three-site ring at 200 replicas.
const pinnedFirstPointEU uint64 = 0xb38526dffb3717dc

var pinnedOwners = map[string]string{
	"h0.example.test": "us",
	"h2.example.test": "eu",
	"h3.example.test": "asia",
	"h5.example.test": "eu",
	"127.77.0.1":      "us",
	"www.example.org": "eu",
}

// pinnedProbe is probe(1, 1): a key's probes are part of the assignment.
const pinnedProbe uint64 = 0x910a2dec89025cc1

func TestRingMatchesReference(t *testing.T) {
	// Random federations (fixed seed): Owner and Successors against the
	// reference, with random sets of sites down.
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 40 {
		n := 1 + rng.IntN(8)
		var sites []Site
		for i := range n {
			sites = append(sites, Site{Name: fmt.Sprintf("s%d-%d", trial, i), Capacity: 0.25 + 2*rng.Float64()})
		}
		r := mustRing(t, sites, 1+rng.IntN(300))
		for _, k := range keys(80) {
			var downNames []string
			for _, s := range sites {
				if rng.IntN(3) == 0 {
					downNames = append(downNames, s.Name)
				}
			}
			down, calls := downSet(downNames...)
			got := r.Owner(k, down)
			for s, c := range calls {
				if c > 1 {
					t.Fatalf("down(%q) called %d times", s, c)
				}
			}
			if want := refOwner(r, k, down); got != want {
				t.Fatalf("trial %d: Owner(%q, down %v) = %q, reference %q", trial, k, downNames, got, want)
			}
			succ := r.Successors(k)
			if len(succ) != n || succ[0] != r.Owner(k, nil) {
				t.Fatalf("Successors(%q) = %v: want all %d sites, the owner %q first", k, succ, n, r.Owner(k, nil))
			}
			firstUp := ""
			for _, s := range succ {
				if !slices.Contains(downNames, s) {
					firstUp = s
					break
				}
			}
			if firstUp != got {
				t.Fatalf("Owner with %v down = %q, but the first successor up is %q (%v)", downNames, got, firstUp, succ)
			}
		}
	}
}

func TestRingAllDown(t *testing.T) {
	r := mustRing(t, testSites, 50)
	down, calls := downSet("eu", "us", "asia")
	if got := r.Owner("h1.example.test", down); got != "" {
		t.Errorf("Owner with every site down = %q, want \"\"", got)
	}
	if len(calls) != 3 {
		t.Errorf("down called for %v, want each of the 3 sites once", calls)
	}
	var nilRing *Ring
	if got := nilRing.Owner("x", nil); got != "" {
		t.Errorf("nil ring's Owner = %q", got)
	}
}

// TestRingContravariance checks UbiCrawler's contravariance: a site that
// joins only takes hosts from the others; a site that leaves only gives its
// own hosts away, each to its next successor; a site that is down
// loses exactly the hosts it would lose by leaving, to the same sites.
func TestRingContravariance(t *testing.T) {
	ks := keys(20000)
	withSA := append(slices.Clone(testSites), Site{Name: "sa", Lat: -23.55, Lon: -46.63})
	for _, replicas := range []int{1, 10, 100, 200} {
		t.Run(fmt.Sprint(replicas), func(t *testing.T) {
			before, after := mustRing(t, testSites, replicas), mustRing(t, withSA, replicas)
			moved := 0
			for _, k := range ks {
				a, b := before.Owner(k, nil), after.Owner(k, nil)
				if a != b {
					moved++
					if b != "sa" {
						t.Fatalf("join: %q moved from %q to %q, not to the joining site", k, a, b)
					}
				}
			}
			if moved == 0 {
				t.Error("join: no host moved to the joining site")
			}

			without := mustRing(t, []Site{testSites[0], testSites[2]}, replicas) // us leaves
			down, _ := downSet("us")
			for _, k := range ks {
				a, b := before.Owner(k, nil), without.Owner(k, nil)
				switch {
				case a != "us" && a != b:
					t.Fatalf("leave: %q moved from %q to %q, but only us left", k, a, b)
				case a == "us" && b != before.Successors(k)[1]:
					t.Fatalf("leave: %q went to %q, not to its next successor %q", k, b, before.Successors(k)[1])
				}
				if d := before.Owner(k, down); d != b {
					t.Fatalf("us down: %q goes to %q, but to %q when us leaves", k, d, b)
				}
			}
		})
	}
}

func TestRingCollision(t *testing.T) {
	same := func(string) func() uint64 { g := splitmix64{s: 7}; return g.next }
	constant := func(string) func() uint64 { return func() uint64 { return 42 } }
	// b's third point is a's fifth; every other point is its own.
	oneShared := func(site string) func() uint64 {
		a := splitmix64{s: 7}
		if site == "a" {
			return a.next
		}
		var shared uint64
		for range 5 {
			shared = a.next()
		}
		b, i := splitmix64{s: 99}, 0
		return func() uint64 {
			if i++; i == 3 {
				return shared
			}
			return b.next()
		}
	}
	tests := []struct {
		name string
		gen  pointGen
		want string
	}{
		{"two sites with the same generator", same, `sites "a" and "b"`},
		{"one point in common", oneShared, `sites "a" and "b" both have a replica at`},
		{"a site with itself", constant, `sites "a" and "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newRing([]Site{{Name: "b"}, {Name: "a"}}, 10, tt.gen)
			if !errors.Is(err, ErrCollision) {
				t.Fatalf("newRing: %v, want ErrCollision", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
	if _, err := newRing([]Site{{Name: "b"}, {Name: "a"}}, 10, sitePoints); err != nil {
		t.Errorf("the real generator: %v", err)
	}
}

func TestRingCapacity(t *testing.T) {
	sites := []Site{{Name: "small", Capacity: 0.5}, {Name: "one"}, {Name: "big", Capacity: 2}, {Name: "huge", Capacity: 4}}
	total := 0.5 + 1 + 2 + 4
	r := mustRing(t, sites, 1000)
	for _, s := range sites {
		n := 0
		for _, o := range r.owner {
			if r.sites[o] == s.Name {
				n++
			}
		}
		if want := int(math.Round(1000 * s.capacity())); n != want {
			t.Errorf("site %s has %d points, want %d", s.Name, n, want)
		}
	}
	shares := r.Shares()
	sum := 0.0
	counts := map[string]int{}
	ks := keys(100000)
	for _, k := range ks {
		counts[r.Owner(k, nil)]++
	}
	for _, s := range sites {
		fair := s.capacity() / total
		sum += shares[s.Name]
		// σ of a share is about √((1-fair)/points): ≤ 4.5% here; allow 4σ.
		if dev := math.Abs(shares[s.Name]/fair - 1); dev > 0.18 {
			t.Errorf("site %s: ring share %.4f, fair %.4f (deviation %.1f%%)", s.Name, shares[s.Name], fair, 100*dev)
		}
		hostShare := float64(counts[s.Name]) / float64(len(ks))
		if d := math.Abs(hostShare - shares[s.Name]); d > 0.01 {
			t.Errorf("site %s: %.4f of the hosts, but %.4f of the ring", s.Name, hostShare, shares[s.Name])
		}
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("shares sum to %v, want 1", sum)
	}
	if got := mustRing(t, []Site{{Name: "solo"}}, 1).Shares(); got["solo"] != 1 {
		t.Errorf("one point's share = %v, want 1", got)
	}
}

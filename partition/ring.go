package partition

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Ring is identifier-seeded consistent hashing (UbiCrawler): each site has
// round(replicas × capacity) points on a 64-bit ring, drawn from a
// generator seeded by the site's name, and a key belongs to the site of the
// first point at or clockwise after the key's hash. A Ring is immutable and
// safe for concurrent use.
type Ring struct {
	sites  []string // names, sorted
	points []uint64 // sorted ascending; no two equal
	owner  []int32  // owner[i] indexes sites: the site of points[i]
}

// NewRing builds the ring of sites with replicas points per unit of
// capacity. It returns an error wrapping ErrInvalid for no sites, an empty
// or duplicate name, a negative or non-finite capacity, replicas < 1, or a
// site whose point count would round to 0 or exceed MaxReplicas; and one
// wrapping ErrCollision, naming both sites, if two points coincide. The
// order of sites does not matter.
func NewRing(sites []Site, replicas int) (*Ring, error) {
	return newRing(sites, replicas, sitePoints)
}

// newRing is NewRing with the generator of each site's points.
func newRing(sites []Site, replicas int, gen pointGen) (*Ring, error) {
	sorted, err := sortedSites(sites)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if replicas < 1 || replicas > MaxReplicas {
		errs = append(errs, fmt.Errorf("%w: replicas must be in [1, %d], got %d", ErrInvalid, MaxReplicas, replicas))
	}
	counts := make([]int, len(sorted))
	for i, s := range sorted {
		n := math.Round(float64(replicas) * s.capacity())
		if replicas >= 1 && !math.IsNaN(n) && (n < 1 || n > MaxReplicas) {
			errs = append(errs, fmt.Errorf("%w: site %q: %d replicas × capacity %v gives %v points, want 1 to %d",
				ErrInvalid, s.Name, replicas, s.capacity(), n, MaxReplicas))
		}
		counts[i] = int(n)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	type point struct {
		pos  uint64
		site int32
	}
	var all []point
	r := &Ring{sites: make([]string, len(sorted))}
	for i, s := range sorted {
		r.sites[i] = s.Name
		next := gen(s.Name)
		for range counts[i] {
			all = append(all, point{next(), int32(i)})
		}
	}
	slices.SortFunc(all, func(a, b point) int {
		return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.site, b.site))
	})
	seen := map[[2]int32]bool{}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.pos != b.pos || seen[[2]int32{a.site, b.site}] {
			continue
		}
		seen[[2]int32{a.site, b.site}] = true
		errs = append(errs, fmt.Errorf("%w: sites %q and %q both have a replica at %#016x (rename one of them)",
			ErrCollision, r.sites[a.site], r.sites[b.site], a.pos))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r.points = make([]uint64, len(all))
	r.owner = make([]int32, len(all))
	for i, p := range all {
		r.points[i], r.owner[i] = p.pos, p.site
	}
	return r, nil
}

// Sites returns the names of the ring's sites, sorted.
func (r *Ring) Sites() []string { return slices.Clone(r.sites) }

// start returns the index of the first point at or clockwise after key's hash.
func (r *Ring) start(key string) int {
	h := hashKey(key)
	i := sort.Search(len(r.points), func(j int) bool { return r.points[j] >= h })
	if i == len(r.points) {
		i = 0
	}
	return i
}

// Owner returns the site that owns key: the site of the first point at or
// clockwise after hash(key) whose site is not down. down may be nil (no site
// is down); it is called at most once per site. Owner returns "" when every
// site is down. Marking a site down gives exactly the owners of the ring
// built without it.
func (r *Ring) Owner(key string, down func(site string) bool) string {
	if r == nil || len(r.points) == 0 {
		return ""
	}
	i := r.start(key)
	if down == nil {
		return r.sites[r.owner[i]]
	}
	var isDown []bool // lazily: sites found down so far
	nDown := 0
	for step := range len(r.points) {
		s := r.owner[(i+step)%len(r.points)]
		if isDown != nil && isDown[s] {
			continue
		}
		if !down(r.sites[s]) {
			return r.sites[s]
		}
		if isDown == nil {
			isDown = make([]bool, len(r.sites))
		}
		isDown[s] = true
		if nDown++; nDown == len(r.sites) {
			break
		}
	}
	return ""
}

// Successors returns every site of the ring, each once, in the order their
// first point is met going clockwise from hash(key): the owner first, then
// the site that would own key if the owner were down, and so on.
func (r *Ring) Successors(key string) []string {
	if r == nil || len(r.points) == 0 {
		return nil
	}
	i := r.start(key)
	out := make([]string, 0, len(r.sites))
	met := make([]bool, len(r.sites))
	for step := 0; step < len(r.points) && len(out) < len(r.sites); step++ {
		s := r.owner[(i+step)%len(r.points)]
		if !met[s] {
			met[s] = true
			out = append(out, r.sites[s])
		}
	}
	return out
}

// Shares returns the fraction of the 64-bit hash space each site owns when
// no site is down: the share of hosts it would get from infinitely many
// keys. The fractions sum to 1.
func (r *Ring) Shares() map[string]float64 {
	out := make(map[string]float64, len(r.sites))
	for _, s := range r.sites {
		out[s] = 0
	}
	if len(r.points) == 1 {
		out[r.sites[r.owner[0]]] = 1
		return out
	}
	for i, p := range r.points {
		prev := r.points[(i+len(r.points)-1)%len(r.points)]
		out[r.sites[r.owner[i]]] += float64(p-prev) / (1 << 64) // wraps correctly for i == 0
	}
	return out
}

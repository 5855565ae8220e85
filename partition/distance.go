package partition

import (
	"errors"
	"fmt"
	"slices"

	"github.com/golang/geo/s2"
)

// Distance is the distance-based partitioner of UniCrawl: a host whose
// location is known belongs to the nearest site (great-circle distance,
// ties to the smallest name) that is not down; any other host belongs to
// its owner on a fallback Ring. A Distance is immutable and safe for
// concurrent use.
type Distance struct {
	sites    []string    // names, sorted
	at       []s2.LatLng // at[i] is where sites[i] is
	fallback *Ring
}

// NewDistance builds the distance partitioner of sites, with fallback for
// the hosts that cannot be located. It returns an error wrapping ErrInvalid
// for the problems NewRing reports, for coordinates out of range, for a nil
// fallback, and for a fallback whose sites are not the same as sites (a
// host that cannot be located must still go to a site of this federation).
func NewDistance(sites []Site, fallback *Ring) (*Distance, error) {
	sorted, err := sortedSites(sites)
	errs := []error{err, validateCoordinates(sorted)}
	d := &Distance{fallback: fallback}
	for _, s := range sorted {
		d.sites = append(d.sites, s.Name)
		d.at = append(d.at, s2.LatLngFromDegrees(s.Lat, s.Lon))
	}
	switch {
	case fallback == nil:
		errs = append(errs, fmt.Errorf("%w: the distance partitioner needs a fallback ring", ErrInvalid))
	case !slices.Equal(fallback.sites, d.sites):
		errs = append(errs, fmt.Errorf("%w: the fallback ring's sites %q are not the distance partitioner's %q",
			ErrInvalid, fallback.sites, d.sites))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return d, nil
}

// Sites returns the names of the partitioner's sites, sorted.
func (d *Distance) Sites() []string { return slices.Clone(d.sites) }

// Owner returns the site that owns h: if h.Loc is valid, the nearest site
// by great-circle distance that is not down; otherwise the fallback ring's
// owner of h's key. down may be nil (no site is down). Owner returns "" when
// every site is down.
func (d *Distance) Owner(h Host, down func(site string) bool) string {
	if d == nil {
		return ""
	}
	if !h.Loc.Valid() {
		return d.fallback.Owner(h.key(), down)
	}
	return d.Nearest(h.Loc.Lat, h.Loc.Lon, down)
}

// Nearest returns the site nearest to (lat, lon) in degrees that is not
// down (down may be nil), ties going to the smallest name; "" when every
// site is down.
func (d *Distance) Nearest(lat, lon float64, down func(site string) bool) string {
	p := s2.LatLngFromDegrees(lat, lon)
	best := -1
	var bestDist float64
	for i, at := range d.at {
		if down != nil && down(d.sites[i]) {
			continue
		}
		// Sites are sorted by name, so a strict < keeps the smallest name on a tie.
		if dist := float64(p.Distance(at)); best < 0 || dist < bestDist {
			best, bestDist = i, dist
		}
	}
	if best < 0 {
		return ""
	}
	return d.sites[best]
}

package partition

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// MaxReplicas bounds the replicas of one site (replicas × capacity,
// rounded), so that a typo cannot ask for an absurd ring.
const MaxReplicas = 1 << 20

// sortedSites returns a copy of sites sorted by name, or every problem with
// their names and capacities at once. A partitioner built from the same
// sites in any order is the same partitioner.
func sortedSites(sites []Site) ([]Site, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if len(sites) == 0 {
		bad("no sites")
	}
	out := slices.Clone(sites)
	slices.SortStableFunc(out, func(a, b Site) int { return strings.Compare(a.Name, b.Name) })
	for i, s := range out {
		switch {
		case s.Name == "":
			bad("a site has an empty name")
		case i > 0 && out[i-1].Name == s.Name:
			bad("site %q is listed twice", s.Name)
		}
		if c := s.Capacity; math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
			bad("site %q: capacity must be a finite number ≥ 0 (0 means 1), got %v", s.Name, c)
		}
	}
	return out, errors.Join(errs...)
}

// validateCoordinates reports every site whose coordinates are not finite
// degrees in range.
func validateCoordinates(sites []Site) error {
	var errs []error
	for _, s := range sites {
		if !(Location{Lat: s.Lat, Lon: s.Lon, Known: true}).Valid() {
			errs = append(errs, fmt.Errorf("%w: site %q: coordinates (%v, %v) are not a latitude in [-90, 90] and a longitude in [-180, 180]",
				ErrInvalid, s.Name, s.Lat, s.Lon))
		}
	}
	return errors.Join(errs...)
}

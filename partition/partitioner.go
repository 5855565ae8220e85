package partition

import "fmt"

// Partitioner decides which site owns a host. Implementations are pure and
// deterministic: every site given the same configuration computes the same
// owner. down, which may be nil, reports the sites to skip (suspected or
// gone); Owner returns "" when every site is down.
type Partitioner interface {
	Owner(h Host, down func(site string) bool) string
}

// The kinds New accepts, as the federation file spells them.
const (
	KindConsistent = "consistent" // identifier-seeded consistent hashing (Ring)
	KindDistance   = "distance"   // nearest site, Ring for hosts not located (Distance)
)

// Consistent is the Partitioner of a Ring: a host belongs to the ring's
// owner of its key.
type Consistent struct {
	Ring *Ring
}

// Owner returns the ring's owner of h's key (see Ring.Owner).
func (c Consistent) Owner(h Host, down func(site string) bool) string {
	return c.Ring.Owner(h.key(), down)
}

// New builds the partitioner of kind (KindConsistent or KindDistance) over
// sites, with replicas points per unit of capacity on the ring (the
// distance partitioner's fallback). An unknown kind gives an error wrapping
// ErrUnknownKind; bad sites or replicas, the errors of NewRing and
// NewDistance.
func New(kind string, sites []Site, replicas int) (Partitioner, error) {
	if kind != KindConsistent && kind != KindDistance {
		return nil, fmt.Errorf("%w %q (want %q or %q)", ErrUnknownKind, kind, KindConsistent, KindDistance)
	}
	ring, err := NewRing(sites, replicas)
	if err != nil {
		return nil, err // already says "partition: ..." and what is wrong
	}
	if kind == KindConsistent {
		return Consistent{Ring: ring}, nil
	}
	d, err := NewDistance(sites, ring)
	if err != nil {
		return nil, err
	}
	return d, nil
}

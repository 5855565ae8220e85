// Package partition decides which site of a federation owns a host.
//
// Two partitioners are offered, both pure and deterministic, so that every
// site computes the same owner locally, with no communication:
//
//   - Ring: identifier-seeded consistent hashing, as in UbiCrawler (Boldi et
//     al.). Each site puts a number of points (replicas), proportional to its
//     capacity, on a 64-bit ring; the points come from a pseudo-random
//     generator seeded by the site's name. A host's key is hashed to
//     Probes points (multi-probe consistent hashing, Appleton and O'Reilly),
//     and the host belongs to the site of the point nearest clockwise to any
//     of them: 21 probes bring 200 replicas per site within ~3% of a fair
//     share, where one probe leaves ~7%. The assignment is contravariant: a
//     site that joins only takes hosts from the others, a site that leaves
//     (or is down) only gives its own hosts away, each to the site that
//     would own it without the leaving one (its next successor).
//   - Distance: the nearest site by great-circle distance to the host's
//     coordinates (from a GeoIP database, see package geoip), falling back
//     to a Ring for hosts that cannot be located.
//
// Both implement Partitioner; New builds either from a kind name. What is
// hashed is a host's Key, its smallest IP address when it has one, so that
// all hosts behind one address share an owner and per-IP politeness holds
// across the federation.
package partition

import "errors"

// Sentinel errors, wrapped with context by the functions that return them.
var (
	// ErrCollision: two replicas (points on the ring) of the sites coincide.
	// UbiCrawler's remedy is to rename one of the sites; the error names both.
	ErrCollision = errors.New("partition: replica collision")
	// ErrInvalid: the sites or parameters given to a constructor are not
	// usable (empty or duplicate names, bad capacity, coordinates or
	// replica count).
	ErrInvalid = errors.New("partition: invalid configuration")
	// ErrUnknownKind: New was asked for a partitioner it does not know.
	ErrUnknownKind = errors.New("partition: unknown partitioner kind")
)

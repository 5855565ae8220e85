package partition

import "github.com/cespare/xxhash/v2"

// seedDomain prefixes a site's name before it is hashed into the seed of
// its replica generator, so that the seed of site "x" is not the hash of
// a host key "x".
const seedDomain = "meridian/partition/site\x00"

// splitmix64 is the SplitMix64 generator (Steele, Lea, Flood 2014): a
// 64-bit counter stepped by the golden ratio and passed through a
// finaliser. It is defined here, not taken from math/rand, so that a site's
// replicas are the same on every machine and with every Go version.
type splitmix64 struct{ s uint64 }

// next returns the generator's next value.
func (g *splitmix64) next() uint64 {
	g.s += 0x9e3779b97f4a7c15
	z := g.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// pointGen returns the generator of a site's replica points. NewRing uses
// sitePoints; tests substitute generators that collide.
type pointGen func(site string) func() uint64

// sitePoints is the generator of NewRing: SplitMix64 seeded with the
// xxhash of the site's name.
func sitePoints(site string) func() uint64 {
	g := splitmix64{s: xxhash.Sum64String(seedDomain + site)}
	return g.next
}

// hashKey maps a host key to a point on the ring.
func hashKey(key string) uint64 { return xxhash.Sum64String(key) }

package partition

import (
	"math"
	"net/netip"
	"strings"
)

// Site is one member of a federation, as the partitioners see it.
type Site struct {
	// Name identifies the site; it seeds the site's replicas on the ring,
	// so renaming a site moves its hosts. Must be non-empty and unique.
	Name string
	// Lat and Lon are the site's coordinates in degrees (WGS 84), used by
	// the distance partitioner.
	Lat, Lon float64
	// Capacity scales the site's number of replicas, and so its share of
	// hosts, relative to the other sites. 0 means 1; negative is invalid.
	Capacity float64
}

// capacity returns the site's capacity with its default applied.
func (s Site) capacity() float64 {
	if s.Capacity == 0 {
		return 1
	}
	return s.Capacity
}

// Location is where a host is on the map, as far as it is known.
type Location struct {
	// Lat and Lon are in degrees (WGS 84).
	Lat, Lon float64
	// Known reports whether Lat and Lon mean anything.
	Known bool
}

// Valid reports whether l is known and its coordinates are finite and in
// range (latitude in [-90, 90], longitude in [-180, 180]). Partitioners
// treat a location that is not valid as unknown.
func (l Location) Valid() bool {
	return l.Known && !math.IsNaN(l.Lat) && !math.IsNaN(l.Lon) &&
		l.Lat >= -90 && l.Lat <= 90 && l.Lon >= -180 && l.Lon <= 180
}

// Host is what a partitioner needs to know about a host.
type Host struct {
	// Name is the host name, e.g. "www.example.org".
	Name string
	// Key is what consistent hashing hashes, normally Key(Name, addresses);
	// when empty, Key(Name, nil) (the lower-cased name) is used.
	Key string
	// Loc is the host's location, for the distance partitioner.
	Loc Location
}

// key returns the key to hash for h.
func (h Host) key() string {
	if h.Key != "" {
		return h.Key
	}
	return Key(h.Name, nil)
}

// Key returns the partition key of a host: the smallest of its IP addresses
// (in netip order, IPv4-mapped IPv6 addresses unmapped and zones dropped,
// as a string) when it has any valid one, else its name lower-cased and
// without a trailing dot.
//
// Keying by address rather than by name puts every host behind one address
// on the same site, so that the per-IP politeness a site enforces holds for
// the whole federation: were hosts sharing an address owned by different
// sites, each site would be polite on its own and together they could exceed
// the address's budget (the gap BUbiNG's documentation admits for several
// agents). websim's hosts share addresses, as virtual hosts do on the real
// web. Taking the smallest address makes the key independent of the order
// in which a resolver returns them. A host whose address set changes may
// change owner; a host name that is itself an address literal gets the same
// key as the hosts on that address.
func Key(host string, ips []netip.Addr) string {
	var best netip.Addr
	for _, ip := range ips {
		if !ip.IsValid() {
			continue
		}
		ip = ip.Unmap().WithZone("")
		if !best.IsValid() || ip.Less(best) {
			best = ip
		}
	}
	if best.IsValid() {
		return best.String()
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

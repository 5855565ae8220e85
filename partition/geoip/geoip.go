// Package geoip locates IP addresses for the distance partitioner: it reads
// a GeoIP2 or GeoLite2 City database (MaxMind DB format, such as the file
// websim writes with --geoip) through github.com/oschwald/geoip2-golang.
package geoip

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/oschwald/geoip2-golang"

	"github.com/meridian-crawler/meridian/partition"
)

// ErrClosed is returned by Lookup after Close.
var ErrClosed = errors.New("geoip: closed")

// DB is an open City database. It is safe for concurrent use.
type DB struct {
	name string // for errors: the path, or "bytes"
	mu   sync.RWMutex
	r    *geoip2.Reader // nil once closed
}

// Open opens the City database at path. It fails if the file is not a
// MaxMind DB or not a City (or Enterprise) database.
func Open(path string) (*DB, error) {
	r, err := geoip2.Open(path)
	if err != nil {
		return nil, fmt.Errorf("geoip: open %s: %w", path, err)
	}
	return newDB(path, r)
}

// FromBytes opens a City database held in memory (b must not change while
// the DB is open).
func FromBytes(b []byte) (*DB, error) {
	r, err := geoip2.FromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("geoip: open database bytes: %w", err)
	}
	return newDB("database bytes", r)
}

// newDB checks that r answers City lookups.
func newDB(name string, r *geoip2.Reader) (*DB, error) {
	if _, err := r.City(net.IPv4zero); err != nil {
		r.Close()
		return nil, fmt.Errorf("geoip: %s (type %q) is not a City database: %w", name, r.Metadata().DatabaseType, err)
	}
	return &DB{name: name, r: r}, nil
}

// Lookup returns where ip is. The location is not Known when ip is invalid,
// not in the database, or its record has no coordinates: a record whose
// latitude, longitude and accuracy radius are all zero counts as having
// none (geoip2-golang reads absent fields as zero). The error is that of a
// corrupt database, or ErrClosed.
func (db *DB) Lookup(ip netip.Addr) (partition.Location, error) {
	if !ip.IsValid() {
		return partition.Location{}, nil
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.r == nil {
		return partition.Location{}, ErrClosed
	}
	rec, err := db.r.City(net.IP(ip.Unmap().AsSlice()))
	if err != nil {
		return partition.Location{}, fmt.Errorf("geoip: %s: look up %v: %w", db.name, ip, err)
	}
	l := rec.Location
	loc := partition.Location{Lat: l.Latitude, Lon: l.Longitude}
	loc.Known = l.Latitude != 0 || l.Longitude != 0 || l.AccuracyRadius != 0
	if loc.Known && !loc.Valid() {
		loc = partition.Location{}
	}
	return loc, nil
}

// Locate is Lookup without the error: a failed lookup is an unknown
// location, which the distance partitioner hashes instead.
func (db *DB) Locate(ip netip.Addr) partition.Location {
	loc, _ := db.Lookup(ip)
	return loc
}

// Close releases the database. Closing twice is harmless; lookups after
// Close find nothing.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.r == nil {
		return nil
	}
	err := db.r.Close()
	db.r = nil
	if err != nil {
		return fmt.Errorf("geoip: close %s: %w", db.name, err)
	}
	return nil
}

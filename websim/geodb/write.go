package geodb

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// DatabaseType is the metadata database type of files written by Write.
const DatabaseType = "GeoIP2-City"

// BuildEpoch is the fixed build time (2025-01-01T00:00:00Z) stored in the
// metadata, so that the same entries always give the same bytes.
const BuildEpoch int64 = 1735689600

// AccuracyRadius is the location.accuracy_radius, in km, of every record.
const AccuracyRadius = 20

// ErrInvalidEntry is wrapped by the errors Write and WriteFile return for an
// entry they refuse.
var ErrInvalidEntry = errors.New("invalid entry")

// continentGeoNameIDs maps GeoIP2 continent codes to their GeoNames ids.
var continentGeoNameIDs = map[string]uint32{
	"AF": 6255146,
	"AS": 6255147,
	"EU": 6255148,
	"NA": 6255149,
	"SA": 6255150,
	"OC": 6255151,
	"AN": 6255152,
}

// Entry places one IPv4 address in a city.
type Entry struct {
	IP   netip.Addr // must be IPv4 (not IPv4-mapped IPv6)
	City City
}

// Write writes a GeoIP2-City database holding one /32 record per entry to w.
//
// The database is an IPv6 tree (as MaxMind's own files are) with the IPv4
// space under ::/96, so both a.b.c.d and ::ffff:a.b.c.d look up the record;
// reserved networks such as 127.0.0.0/8 are allowed. Each record has city,
// continent, country, registered_country (same as country) and location.
// Country geoname ids are synthetic, derived from the ISO code. The output
// depends only on the set of entries, not on their order or the clock.
func Write(w io.Writer, entries []Entry) error {
	tree, err := build(entries)
	if err != nil {
		return fmt.Errorf("geodb: %w", err)
	}
	if _, err := tree.WriteTo(w); err != nil {
		return fmt.Errorf("geodb: %w", err)
	}
	return nil
}

// WriteFile writes the database for entries to path, like Write. It writes a
// temporary file in the same directory and renames it over path, so readers
// never see a partial file. Errors name path.
func WriteFile(path string, entries []Entry) (err error) {
	tree, err := build(entries)
	if err != nil {
		return fmt.Errorf("geodb: %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("geodb: writing %s: %w", path, err)
		}
	}()

	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()

	if _, err = tree.WriteTo(f); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// build validates entries and returns the filled tree. Its errors carry no
// "geodb: " prefix; the callers add it.
func build(entries []Entry) (*mmdbwriter.Tree, error) {
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		BuildEpoch:              BuildEpoch,
		DatabaseType:            DatabaseType,
		Description:             map[string]string{"en": "websim synthetic GeoIP2-City database"},
		IncludeReservedNetworks: true,
		IPVersion:               6,
		Languages:               []string{"en"},
		RecordSize:              28,
	})
	if err != nil {
		return nil, fmt.Errorf("creating tree: %w", err)
	}

	seen := make(map[netip.Addr]int, len(entries))
	for i, e := range entries {
		if err := validate(e); err != nil {
			return nil, fmt.Errorf("entry %d: %w: %s", i, ErrInvalidEntry, err)
		}
		if j, dup := seen[e.IP]; dup {
			return nil, fmt.Errorf("entry %d: %w: duplicate IP %s (also entry %d)", i, ErrInvalidEntry, e.IP, j)
		}
		seen[e.IP] = i

		ip := e.IP.As4()
		network := &net.IPNet{IP: net.IP(ip[:]), Mask: net.CIDRMask(32, 32)}
		if err := tree.Insert(network, record(e.City)); err != nil {
			return nil, fmt.Errorf("entry %d: inserting %s: %w", i, e.IP, err)
		}
	}
	return tree, nil
}

// validate reports what is wrong with e, or nil.
func validate(e Entry) error {
	c := e.City
	switch {
	case !e.IP.IsValid():
		return errors.New("IP is not set")
	case !e.IP.Is4():
		return fmt.Errorf("IP %s is not IPv4", e.IP)
	case c.Name == "":
		return errors.New("empty city name")
	case !(c.Lat >= -90 && c.Lat <= 90):
		return fmt.Errorf("latitude %v outside [-90, 90]", c.Lat)
	case !(c.Lon >= -180 && c.Lon <= 180):
		return fmt.Errorf("longitude %v outside [-180, 180]", c.Lon)
	case !isISOCode(c.CountryISO):
		return fmt.Errorf("country ISO code %q is not two letters A-Z", c.CountryISO)
	case continentGeoNameIDs[c.ContinentCode] == 0:
		return fmt.Errorf("unknown continent code %q", c.ContinentCode)
	case c.GeoNameID > math.MaxUint32:
		return fmt.Errorf("geoname id %d does not fit in 32 bits", c.GeoNameID)
	}
	return nil
}

func isISOCode(s string) bool {
	return len(s) == 2 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z'
}

// countryGeoNameID returns websim's synthetic geoname id for a valid ISO code.
func countryGeoNameID(iso string) uint32 {
	return 9_000_000 + uint32(iso[0]-'A')*26 + uint32(iso[1]-'A') + 1
}

// names returns a GeoIP2 names map holding the English name.
func names(en string) mmdbtype.Map {
	return mmdbtype.Map{"en": mmdbtype.String(en)}
}

// record returns the GeoLite2-City-shaped record for c, which must be valid.
func record(c City) mmdbtype.Map {
	country := mmdbtype.Map{
		"geoname_id": mmdbtype.Uint32(countryGeoNameID(c.CountryISO)),
		"iso_code":   mmdbtype.String(c.CountryISO),
		"names":      names(c.CountryName),
	}
	location := mmdbtype.Map{
		"accuracy_radius": mmdbtype.Uint16(AccuracyRadius),
		"latitude":        mmdbtype.Float64(c.Lat),
		"longitude":       mmdbtype.Float64(c.Lon),
	}
	if c.TimeZone != "" {
		location["time_zone"] = mmdbtype.String(c.TimeZone)
	}
	return mmdbtype.Map{
		"city": mmdbtype.Map{
			"geoname_id": mmdbtype.Uint32(uint32(c.GeoNameID)),
			"names":      names(c.Name),
		},
		"continent": mmdbtype.Map{
			"code":       mmdbtype.String(c.ContinentCode),
			"geoname_id": mmdbtype.Uint32(continentGeoNameIDs[c.ContinentCode]),
			"names":      names(c.ContinentName),
		},
		"country":            country,
		"location":           location,
		"registered_country": country.Copy(),
	}
}

package geoip

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/websim/geodb"
)

// writeWebsimDB writes a database the way websim --geoip does and returns
// its path and entries.
func writeWebsimDB(t *testing.T) (string, []geodb.Entry) {
	t.Helper()
	var entries []geodb.Entry
	for i, c := range []string{"Paris", "New York", "Singapore", "Sydney", "Buenos Aires"} {
		for _, city := range geodb.Cities {
			if city.Name == c {
				entries = append(entries, geodb.Entry{IP: netip.AddrFrom4([4]byte{127, 77, 0, byte(i + 1)}), City: city})
			}
		}
	}
	path := filepath.Join(t.TempDir(), "websim.mmdb")
	if err := geodb.WriteFile(path, entries); err != nil {
		t.Fatal(err)
	}
	return path, entries
}

// writeTree writes a hand-made MaxMind DB of type dbType with one record per
// network and returns its path.
func writeTree(t *testing.T, dbType string, records map[string]mmdbtype.Map) string {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: dbType, IncludeReservedNetworks: true, IPVersion: 6, RecordSize: 28})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, rec := range records {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Insert(n, rec); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), dbType+".mmdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLocateWebsimDB(t *testing.T) {
	path, entries := writeWebsimDB(t)
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, e := range entries {
		want := partition.Location{Lat: e.City.Lat, Lon: e.City.Lon, Known: true}
		if got := db.Locate(e.IP); got != want {
			t.Errorf("Locate(%v) = %+v, want %+v (%s)", e.IP, got, want, e.City.Name)
		}
		mapped := netip.AddrFrom16(e.IP.As16())
		if got := db.Locate(mapped); got != want {
			t.Errorf("Locate(%v) = %+v, want %+v", mapped, got, want)
		}
	}
	for _, ip := range []netip.Addr{netip.MustParseAddr("127.77.0.99"), netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("2001:db8::1"), {}} {
		if got, err := db.Lookup(ip); err != nil || got.Known {
			t.Errorf("Lookup(%v) = %+v, %v: want unknown, no error", ip, got, err)
		}
	}

	// The same through FromBytes.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := FromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if got := mem.Locate(entries[2].IP); got.Lat != entries[2].City.Lat || !got.Known {
		t.Errorf("FromBytes: Locate = %+v, want %s", got, entries[2].City.Name)
	}
}

func TestLocateFeedsDistance(t *testing.T) {
	path, entries := writeWebsimDB(t)
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sites := []partition.Site{{Name: "eu", Lat: 53.55, Lon: 9.99}, {Name: "us", Lat: 40.71, Lon: -74.01}, {Name: "asia", Lat: 1.35, Lon: 103.82}}
	p, err := partition.New(partition.KindDistance, sites, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"eu", "us", "asia", "asia", "us"} // Paris, New York, Singapore, Sydney, Buenos Aires
	for i, e := range entries {
		h := partition.Host{Name: "h.test", Key: partition.Key("h.test", []netip.Addr{e.IP}), Loc: db.Locate(e.IP)}
		if got := p.Owner(h, nil); got != want[i] {
			t.Errorf("%s: Owner = %q, want %q", e.City.Name, got, want[i])
		}
	}
}

func TestRecordsWithoutCoordinates(t *testing.T) {
	path := writeTree(t, "GeoIP2-City", map[string]mmdbtype.Map{
		"10.0.0.1/32": {"country": mmdbtype.Map{"iso_code": mmdbtype.String("FR")}},
		"10.0.0.2/32": {"location": mmdbtype.Map{"latitude": mmdbtype.Float64(0), "longitude": mmdbtype.Float64(0),
			"accuracy_radius": mmdbtype.Uint16(100)}},
		"10.0.0.3/32": {"location": mmdbtype.Map{"latitude": mmdbtype.Float64(123), "longitude": mmdbtype.Float64(0),
			"accuracy_radius": mmdbtype.Uint16(5)}},
	})
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tests := []struct {
		ip   string
		want partition.Location
	}{
		{"10.0.0.1", partition.Location{}},                            // a country, no location
		{"10.0.0.2", partition.Location{Lat: 0, Lon: 0, Known: true}}, // (0, 0) with an accuracy radius is a place
		{"10.0.0.3", partition.Location{}},                            // latitude out of range
	}
	for _, tt := range tests {
		if got := db.Locate(netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("Locate(%s) = %+v, want %+v", tt.ip, got, tt.want)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.mmdb")
	if err := os.WriteFile(garbage, []byte("not a maxmind db"), 0o644); err != nil {
		t.Fatal(err)
	}
	asn := writeTree(t, "GeoLite2-ASN", map[string]mmdbtype.Map{
		"10.0.0.0/8": {"autonomous_system_number": mmdbtype.Uint32(64500)},
	})
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "missing.mmdb"), "missing.mmdb"},
		{"garbage", garbage, "garbage.mmdb"},
		{"not a City database", asn, "not a City database"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(tt.path)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %v, want it to say %q", err, tt.want)
			}
		})
	}
	if _, err := FromBytes([]byte("nope")); err == nil {
		t.Error("FromBytes(garbage) succeeded")
	}
}

func TestClose(t *testing.T) {
	path, entries := writeWebsimDB(t)
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := db.Lookup(entries[0].IP); !errors.Is(err, ErrClosed) {
		t.Errorf("Lookup after Close: %v, want ErrClosed", err)
	}
	if got := db.Locate(entries[0].IP); got.Known {
		t.Errorf("Locate after Close = %+v, want unknown", got)
	}
}

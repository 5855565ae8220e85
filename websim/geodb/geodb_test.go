package geodb

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oschwald/geoip2-golang"
)

// testEntries places 127.77.0.1..127.77.0.20 in cities spread over the
// table, so every region appears.
func testEntries(t *testing.T) []Entry {
	t.Helper()
	var entries []Entry
	for i := range 20 {
		ip := netip.AddrFrom4([4]byte{127, 77, 0, byte(i + 1)})
		entries = append(entries, Entry{IP: ip, City: Cities[(i*7)%len(Cities)]})
	}
	return entries
}

func mustWrite(t *testing.T, entries []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, entries); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

func openDB(t *testing.T, b []byte) *geoip2.Reader {
	t.Helper()
	db, err := geoip2.FromBytes(b)
	if err != nil {
		t.Fatalf("geoip2.FromBytes: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestRoundTrip(t *testing.T) {
	entries := testEntries(t)
	db := openDB(t, mustWrite(t, entries))

	if got := db.Metadata().DatabaseType; got != "GeoIP2-City" {
		t.Errorf("DatabaseType = %q, want GeoIP2-City", got)
	}
	if got := db.Metadata().BuildEpoch; got != uint(BuildEpoch) {
		t.Errorf("BuildEpoch = %d, want %d", got, BuildEpoch)
	}

	type lookup struct {
		name string
		ip   string
		want City
	}
	var tests []lookup
	for _, e := range entries {
		tests = append(tests, lookup{"v4 " + e.IP.String(), e.IP.String(), e.City})
	}
	tests = append(tests, lookup{"v4-mapped", "::ffff:127.77.0.3", entries[2].City})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := db.City(net.ParseIP(tt.ip))
			if err != nil {
				t.Fatalf("City(%s): %v", tt.ip, err)
			}
			w := tt.want
			checks := []struct {
				field     string
				got, want any
			}{
				{"city name", rec.City.Names["en"], w.Name},
				{"city geoname_id", rec.City.GeoNameID, w.GeoNameID},
				{"country iso", rec.Country.IsoCode, w.CountryISO},
				{"country name", rec.Country.Names["en"], w.CountryName},
				{"country geoname_id set", rec.Country.GeoNameID != 0, true},
				{"registered country iso", rec.RegisteredCountry.IsoCode, w.CountryISO},
				{"registered country geoname_id", rec.RegisteredCountry.GeoNameID, rec.Country.GeoNameID},
				{"continent code", rec.Continent.Code, w.ContinentCode},
				{"continent name", rec.Continent.Names["en"], w.ContinentName},
				{"continent geoname_id set", rec.Continent.GeoNameID != 0, true},
				{"latitude", rec.Location.Latitude, w.Lat},
				{"longitude", rec.Location.Longitude, w.Lon},
				{"time zone", rec.Location.TimeZone, w.TimeZone},
				{"accuracy radius", rec.Location.AccuracyRadius, uint16(AccuracyRadius)},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
				}
			}
		})
	}

	for _, ip := range []string{"127.77.0.21", "127.0.0.1", "8.8.8.8", "2001:4860::1"} {
		t.Run("absent "+ip, func(t *testing.T) {
			rec, err := db.City(net.ParseIP(ip))
			if err != nil {
				t.Fatalf("City(%s): %v", ip, err)
			}
			if rec.City.Names != nil || rec.Country.IsoCode != "" || rec.Location.Latitude != 0 {
				t.Errorf("City(%s) = %+v, want empty record", ip, rec)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	entries := testEntries(t)
	reversed := slices.Clone(entries)
	slices.Reverse(reversed)

	want := mustWrite(t, entries)
	tests := []struct {
		name    string
		entries []Entry
	}{
		{"same entries", entries},
		{"same entries again", entries},
		{"reversed order", reversed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustWrite(t, tt.entries); !bytes.Equal(got, want) {
				t.Errorf("bytes differ from first write (%d vs %d bytes)", len(got), len(want))
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	db := openDB(t, mustWrite(t, nil))
	rec, err := db.City(net.ParseIP("127.77.0.1"))
	if err != nil {
		t.Fatalf("City: %v", err)
	}
	if rec.City.Names != nil {
		t.Errorf("got %+v, want empty record", rec)
	}
}

func TestCitiesTable(t *testing.T) {
	continentOf := map[string]string{
		"na": "NA", "eu": "EU", "as": "AS", "sa": "SA", "oc": "OC", "af": "AF",
	}
	if len(RegionWeights) != len(RegionNames) {
		t.Fatalf("len(RegionWeights) = %d, len(RegionNames) = %d", len(RegionWeights), len(RegionNames))
	}
	sum := 0.0
	for _, w := range RegionWeights {
		sum += w
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("RegionWeights sum to %v, want 1", sum)
	}

	for _, r := range RegionNames {
		if n := len(CitiesIn(r)); n < 5 {
			t.Errorf("region %q has %d cities, want >= 5", r, n)
		}
	}
	if got := CitiesIn("xx"); got != nil {
		t.Errorf("CitiesIn(unknown) = %v, want nil", got)
	}

	names := map[string]bool{}
	ids := map[uint]bool{}
	regionIndex := map[string]int{}
	for i, r := range RegionNames {
		regionIndex[r] = i
	}
	for i, c := range Cities {
		t.Run(c.Name, func(t *testing.T) {
			if names[c.Name] {
				t.Errorf("duplicate name")
			}
			names[c.Name] = true
			if c.GeoNameID == 0 || ids[c.GeoNameID] {
				t.Errorf("GeoNameID %d is zero or duplicate", c.GeoNameID)
			}
			ids[c.GeoNameID] = true
			if c.Lat < -90 || c.Lat > 90 || c.Lon < -180 || c.Lon > 180 {
				t.Errorf("coordinates %v,%v out of range", c.Lat, c.Lon)
			}
			want, ok := continentOf[c.Region]
			if !ok {
				t.Fatalf("region %q not in RegionNames", c.Region)
			}
			if c.ContinentCode != want {
				t.Errorf("continent %q, want %q for region %q", c.ContinentCode, want, c.Region)
			}
			if c.CountryISO == "" || c.CountryName == "" || c.ContinentName == "" || c.TimeZone == "" {
				t.Errorf("missing field in %+v", c)
			}
			if err := validate(Entry{IP: netip.MustParseAddr("127.0.0.1"), City: c}); err != nil {
				t.Errorf("city is not a valid entry: %v", err)
			}
			if i > 0 {
				p := Cities[i-1]
				pr, cr := regionIndex[p.Region], regionIndex[c.Region]
				if pr > cr || (pr == cr && p.Name >= c.Name) {
					t.Errorf("out of order after %q (%s)", p.Name, p.Region)
				}
			}
		})
	}
}

func TestBadEntries(t *testing.T) {
	paris := Cities[slices.IndexFunc(Cities, func(c City) bool { return c.Name == "Paris" })]
	ip := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	with := func(f func(*City)) City {
		c := paris
		f(&c)
		return c
	}
	good := Entry{IP: ip("127.77.0.1"), City: paris}

	tests := []struct {
		name string
		bad  Entry
		want string
	}{
		{"zero IP", Entry{City: paris}, "IP is not set"},
		{"IPv6", Entry{IP: ip("2001:db8::1"), City: paris}, "not IPv4"},
		{"IPv4-mapped", Entry{IP: ip("::ffff:127.77.0.9"), City: paris}, "not IPv4"},
		{"empty name", Entry{IP: ip("127.77.0.9"), City: with(func(c *City) { c.Name = "" })}, "empty city name"},
		{"lat high", Entry{IP: ip("127.77.0.9"), City: with(func(c *City) { c.Lat = 90.5 })}, "latitude"},
		{"lat NaN", Entry{IP: ip("127.77.0.9"), City: with(func(c *City) { c.Lat = math.NaN() })}, "latitude"},
		{"lon low", Entry{IP: ip("127.77.0.9"), City: with(func(c *City) { c.Lon = -180.01 })}, "longitude"},
		{"bad ISO", Entry{IP: ip("127.77.0.9"), City: with(func(c *City) { c.CountryISO = "fra" })}, "country ISO"},
		{"bad continent", Entry{IP: ip("127.77.0.9"), City: with(func(c *City) { c.ContinentCode = "XX" })}, "continent"},
		{"duplicate IP", Entry{IP: ip("127.77.0.1"), City: paris}, "duplicate IP 127.77.0.1 (also entry 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := []Entry{
				{IP: ip("127.77.0.2"), City: paris},
				good,
				tt.bad,
			}
			err := Write(&bytes.Buffer{}, entries)
			if err == nil {
				t.Fatal("Write succeeded, want error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "geodb: entry 2: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want prefix %q and %q", msg, "geodb: entry 2: ", tt.want)
			}
			if !errors.Is(err, ErrInvalidEntry) {
				t.Errorf("error %q does not wrap ErrInvalidEntry", msg)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	entries := testEntries(t)
	path := filepath.Join(dir, "city.mmdb")

	// Write twice: the second write replaces the first.
	for range 2 {
		if err := WriteFile(path, entries); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, mustWrite(t, entries)) {
		t.Error("file differs from Write output")
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 {
		t.Errorf("directory holds %d files, want only city.mmdb", len(left))
	}
	db, err := geoip2.Open(path)
	if err != nil {
		t.Fatalf("geoip2.Open: %v", err)
	}
	defer db.Close()
	rec, err := db.City(net.ParseIP("127.77.0.1"))
	if err != nil || rec.City.Names["en"] != entries[0].City.Name {
		t.Errorf("City(127.77.0.1) = %v, %v; want %s", rec.City.Names, err, entries[0].City.Name)
	}
}

func TestWriteFileErrors(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := []Entry{{IP: netip.MustParseAddr("::1"), City: Cities[0]}}

	tests := []struct {
		name    string
		path    string
		entries []Entry
		want    []string
	}{
		{"under regular file", filepath.Join(regular, "city.mmdb"), testEntries(t), nil},
		{"missing dir", filepath.Join(dir, "no", "such", "city.mmdb"), testEntries(t), nil},
		{"bad entry", filepath.Join(dir, "bad.mmdb"), bad, []string{"entry 0", "not IPv4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteFile(tt.path, tt.entries)
			if err == nil {
				t.Fatal("WriteFile succeeded, want error")
			}
			msg := err.Error()
			for _, want := range append([]string{"geodb: ", tt.path}, tt.want...) {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
			if _, err := os.Stat(tt.path); err == nil {
				t.Errorf("%s exists after failed write", tt.path)
			}
		})
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("directory holds %d files, want only the regular file", len(left))
	}
}

func ExampleWrite() {
	var buf bytes.Buffer
	err := Write(&buf, []Entry{{IP: netip.MustParseAddr("127.77.0.1"), City: CitiesIn("eu")[0]}})
	if err != nil {
		panic(err)
	}
	db, _ := geoip2.FromBytes(buf.Bytes())
	rec, _ := db.City(net.ParseIP("127.77.0.1"))
	fmt.Println(rec.City.Names["en"], rec.Country.IsoCode, rec.Location.TimeZone)
	// Output: Amsterdam NL Europe/Amsterdam
}

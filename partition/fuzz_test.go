package partition

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// fuzzAddrs turns b into addresses: 4-byte chunks are IPv4, a chunk
// starting with 0xff is the next 16 bytes as IPv6.
func fuzzAddrs(b []byte) []netip.Addr {
	var out []netip.Addr
	for len(b) >= 4 {
		if b[0] == 0xff && len(b) >= 17 {
			out = append(out, netip.AddrFrom16([16]byte(b[1:17])))
			b = b[17:]
			continue
		}
		out = append(out, netip.AddrFrom4([4]byte(b[:4])))
		b = b[4:]
	}
	return out
}

func FuzzKey(f *testing.F) {
	f.Add("www.Example.org.", []byte{127, 77, 0, 9, 10, 0, 0, 1})
	f.Add("", []byte{})
	f.Add("x", []byte{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1})
	f.Fuzz(func(t *testing.T, host string, b []byte) {
		ips := fuzzAddrs(b)
		k := Key(host, ips)
		rev := slices.Clone(ips)
		slices.Reverse(rev)
		if k2 := Key(host, rev); k2 != k {
			t.Fatalf("Key depends on the order of the addresses: %q and %q", k, k2)
		}
		if len(ips) == 0 {
			if want := strings.ToLower(strings.TrimSuffix(host, ".")); k != want {
				t.Fatalf("Key(%q, none) = %q, want %q", host, k, want)
			}
			return
		}
		a, err := netip.ParseAddr(k)
		if err != nil {
			t.Fatalf("Key = %q, not an address: %v", k, err)
		}
		found := false
		for _, ip := range ips {
			u := ip.Unmap()
			found = found || u == a
			if u.Less(a) {
				t.Fatalf("Key = %v, but %v is smaller", a, u)
			}
		}
		if !found {
			t.Fatalf("Key = %v, not one of %v", a, ips)
		}
		if Key("other", ips) != k {
			t.Fatal("with addresses, Key depends on the name")
		}
	})
}

func FuzzOwner(f *testing.F) {
	sites := []Site{
		{Name: "eu", Lat: 53.55, Lon: 9.99},
		{Name: "us", Lat: 40.71, Lon: -74.01, Capacity: 2},
		{Name: "asia", Lat: 1.35, Lon: 103.82},
		{Name: "sa", Lat: -23.55, Lon: -46.63, Capacity: 0.5},
		{Name: "oc", Lat: -33.87, Lon: 151.21},
	}
	ring := mustRing(f, sites, 40)
	dist, err := NewDistance(sites, ring)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("h1.example.test", uint8(0), 48.86, 2.35, true)
	f.Add("", uint8(31), 0.0, 0.0, false)
	f.Add("127.77.0.1", uint8(5), math.NaN(), 200.0, true)
	f.Fuzz(func(t *testing.T, key string, mask uint8, lat, lon float64, known bool) {
		var downNames []string
		for i, s := range sites {
			if mask&(1<<i) != 0 {
				downNames = append(downNames, s.Name)
			}
		}
		down := func(s string) bool { return slices.Contains(downNames, s) }
		got := ring.Owner(key, down)
		if want := refOwner(ring, key, down); got != want {
			t.Fatalf("Owner(%q, down %v) = %q, reference %q", key, downNames, got, want)
		}
		if (got == "") != (len(downNames) == len(sites)) || (got != "" && down(got)) {
			t.Fatalf("Owner(%q, down %v) = %q", key, downNames, got)
		}
		h := Host{Key: key, Loc: Location{Lat: lat, Lon: lon, Known: known}}
		d := dist.Owner(h, down)
		if (d == "") != (len(downNames) == len(sites)) || (d != "" && down(d)) {
			t.Fatalf("distance Owner(%+v, down %v) = %q", h, downNames, d)
		}
		if !h.Loc.Valid() && d != got {
			t.Fatalf("distance Owner(%+v) = %q, not the ring's %q", h, d, got)
		}
	})
}

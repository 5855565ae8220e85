package partition

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustDistance(t testing.TB, sites []Site) *Distance {
	t.Helper()
	d, err := NewDistance(sites, mustRing(t, sites, 100))
	if err != nil {
		t.Fatalf("NewDistance: %v", err)
	}
	return d
}

// haversine is the reference great-circle distance in radians.
func haversine(lat1, lon1, lat2, lon2 float64) float64 {
	rad := math.Pi / 180
	dLat, dLon := (lat2-lat1)*rad, (lon2-lon1)*rad
	a := math.Pow(math.Sin(dLat/2), 2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Pow(math.Sin(dLon/2), 2)
	return 2 * math.Asin(math.Min(1, math.Sqrt(a)))
}

func at(lat, lon float64) Location { return Location{Lat: lat, Lon: lon, Known: true} }

func TestDistanceNearest(t *testing.T) {
	d := mustDistance(t, testSites) // eu Hamburg, us New York, asia Singapore
	tests := []struct {
		name string
		loc  Location
		down []string
		want string
	}{
		{"Hamburg itself", at(53.55, 9.99), nil, "eu"},
		{"Paris", at(48.86, 2.35), nil, "eu"},
		{"Nairobi", at(-1.29, 36.82), nil, "eu"},
		{"Chicago", at(41.88, -87.63), nil, "us"},
		{"São Paulo", at(-23.55, -46.63), nil, "us"},
		{"Seattle", at(47.61, -122.33), nil, "us"},
		{"Tokyo", at(35.69, 139.69), nil, "asia"},
		{"Sydney", at(-33.87, 151.21), nil, "asia"},
		{"Mumbai", at(19.08, 72.88), nil, "asia"},
		{"across the antimeridian: Auckland", at(-36.85, 174.76), nil, "asia"},
		{"Paris, eu down", at(48.86, 2.35), []string{"eu"}, "us"},
		{"Tokyo, asia down: Hamburg is nearer than New York", at(35.69, 139.69), []string{"asia"}, "eu"},
		{"Tokyo, asia and eu down", at(35.69, 139.69), []string{"asia", "eu"}, "us"},
		{"every site down", at(35.69, 139.69), []string{"asia", "us", "eu"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			down, _ := downSet(tt.down...)
			if got := d.Owner(Host{Name: "x.test", Loc: tt.loc}, down); got != tt.want {
				t.Errorf("Owner = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDistanceTies(t *testing.T) {
	// Two sites at the same place: the smaller name wins, in any order.
	for _, sites := range [][]Site{
		{{Name: "b", Lat: 10, Lon: 10}, {Name: "a", Lat: 10, Lon: 10}, {Name: "c", Lat: -50, Lon: 100}},
		{{Name: "c", Lat: -50, Lon: 100}, {Name: "a", Lat: 10, Lon: 10}, {Name: "b", Lat: 10, Lon: 10}},
	} {
		d := mustDistance(t, sites)
		if got := d.Owner(Host{Loc: at(11, 11)}, nil); got != "a" {
			t.Errorf("sites %v: Owner = %q, want a", sites, got)
		}
		down, _ := downSet("a")
		if got := d.Owner(Host{Loc: at(11, 11)}, down); got != "b" {
			t.Errorf("sites %v, a down: Owner = %q, want b", sites, got)
		}
	}
}

func TestDistanceMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var sites []Site
	for i := range 12 {
		sites = append(sites, Site{Name: fmt.Sprintf("s%02d", i), Lat: rng.Float64()*180 - 90, Lon: rng.Float64()*360 - 180})
	}
	d := mustDistance(t, sites)
	for range 20000 {
		lat, lon := rng.Float64()*180-90, rng.Float64()*360-180
		best, second := -1, -1
		dist := make([]float64, len(sites))
		for i, s := range sites {
			dist[i] = haversine(lat, lon, s.Lat, s.Lon)
			switch {
			case best < 0 || dist[i] < dist[best]:
				best, second = i, best
			case second < 0 || dist[i] < dist[second]:
				second = i
			}
		}
		if dist[second]-dist[best] < 1e-9 {
			continue // too close to call between two formulas
		}
		if got := d.Owner(Host{Loc: at(lat, lon)}, nil); got != sites[best].Name {
			t.Fatalf("(%v, %v): Owner = %q, reference %q", lat, lon, got, sites[best].Name)
		}
	}
}

func TestDistanceFallback(t *testing.T) {
	ring := mustRing(t, testSites, 100)
	d, err := NewDistance(testSites, ring)
	if err != nil {
		t.Fatal(err)
	}
	hosts := []Host{
		{Name: "unknown.test", Key: "127.77.0.9"},
		{Name: "Named-Only.TEST."},
		{Name: "latitude out of range", Key: "k1", Loc: Location{Lat: 91, Lon: 0, Known: true}},
		{Name: "longitude out of range", Key: "k2", Loc: Location{Lat: 0, Lon: -181, Known: true}},
		{Name: "NaN", Key: "k3", Loc: Location{Lat: math.NaN(), Lon: 0, Known: true}},
		{Name: "coordinates but not known", Key: "k4", Loc: Location{Lat: 53.55, Lon: 9.99}},
	}
	for _, h := range hosts {
		t.Run(h.Name, func(t *testing.T) {
			want := ring.Owner(h.key(), nil)
			if got := d.Owner(h, nil); got != want {
				t.Errorf("Owner = %q, want the ring's %q", got, want)
			}
			for _, s := range testSites {
				down, _ := downSet(s.Name)
				if got, want := d.Owner(h, down), ring.Owner(h.key(), down); got != want {
					t.Errorf("%s down: Owner = %q, want the ring's %q", s.Name, got, want)
				}
			}
		})
	}
	if got, want := d.Owner(Host{Name: "Named-Only.TEST."}, nil), ring.Owner("named-only.test", nil); got != want {
		t.Errorf("a host without key is hashed by its lower-cased name: %q, want %q", got, want)
	}
}

func TestDistanceContravariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	full := mustDistance(t, testSites)
	without := mustDistance(t, []Site{testSites[0], testSites[1]}) // asia leaves
	down, _ := downSet("asia")
	for i := range 5000 {
		h := Host{Key: fmt.Sprint(i)}
		if i%4 != 0 { // a quarter unknown, hashed
			h.Loc = at(rng.Float64()*180-90, rng.Float64()*360-180)
		}
		a, b := full.Owner(h, nil), without.Owner(h, nil)
		if a != "asia" && a != b {
			t.Fatalf("%+v moved from %s to %s when asia left", h, a, b)
		}
		if c := full.Owner(h, down); c != b {
			t.Fatalf("%+v: %s with asia down, %s with asia gone", h, c, b)
		}
	}
}

func TestNewDistanceInvalid(t *testing.T) {
	ring := mustRing(t, testSites, 10)
	other := mustRing(t, []Site{{Name: "eu"}, {Name: "us"}}, 10)
	tests := []struct {
		name     string
		sites    []Site
		fallback *Ring
		want     string
	}{
		{"nil fallback", testSites, nil, "needs a fallback ring"},
		{"fallback of other sites", testSites, other, "fallback ring's sites"},
		{"latitude", []Site{{Name: "eu", Lat: 95}, testSites[1], testSites[2]}, ring, `site "eu": coordinates`},
		{"longitude", []Site{testSites[0], {Name: "us", Lon: 200}, testSites[2]}, ring, `site "us": coordinates`},
		{"NaN", []Site{testSites[0], testSites[1], {Name: "asia", Lat: math.NaN()}}, ring, `site "asia": coordinates`},
		{"no sites", nil, ring, "no sites"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewDistance(tt.sites, tt.fallback)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewDistance: %v, want ErrInvalid saying %q", err, tt.want)
			}
		})
	}
}

package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/bench"
)

// TestFederationFlags checks how bench federation's flags become a
// configuration, --geo's defaults above all: the model's WAN delay, no
// stretched delay, rounds 0, unless given.
func TestFederationFlags(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name      string
		args      []string
		geo       bool
		delays    []time.Duration
		stretched []time.Duration
		rounds    int
		errText   string
	}{
		{"the delay sweep", nil, false, []time.Duration{0, 20 * ms, 40 * ms, 80 * ms}, nil, 24, ""},
		{"geo", []string{"--geo", "--hosts", "1000", "--pages", "20", "--ips", "256", "--host-delay", "100ms"}, true,
			[]time.Duration{bench.GeoWANDelay()}, nil, 0, ""},
		{"geo at a given delay", []string{"--geo", "--delays", "40ms"}, true, []time.Duration{40 * ms}, nil, 0, ""},
		{"geo without WAN delay", []string{"--geo", "--delays", "0"}, true, []time.Duration{0}, nil, 0, ""},
		{"geo with rounds", []string{"--geo", "--rounds", "8"}, true, nil, nil, 0, "rounds must be 0"},
		{"geo with stretched delays", []string{"--geo", "--stretched", "40ms"}, true, nil, nil, 0, "makes its own stretched run"},
		{"geo with two delays", []string{"--geo", "--delays", "20ms,40ms"}, true, nil, nil, 0, "one WAN delay"},
		{"geo, some runs", []string{"--geo", "--geo-runs", "distance,central"}, true, []time.Duration{bench.GeoWANDelay()}, nil, 0, ""},
		{"geo, an unknown run", []string{"--geo", "--geo-runs", "distance,centre"}, true, nil, nil, 0, `run "centre"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := federationFlags(tc.args, io.Discard)
			if tc.errText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("error %v, want one saying %q", err, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Geo != tc.geo || !slices.Equal(cfg.Delays, tc.delays) || !slices.Equal(cfg.Stretched, tc.stretched) || cfg.Rounds != tc.rounds {
				t.Errorf("geo %v, delays %v, stretched %v, rounds %d: want %v, %v, %v, %d",
					cfg.Geo, cfg.Delays, cfg.Stretched, cfg.Rounds, tc.geo, tc.delays, tc.stretched, tc.rounds)
			}
		})
	}
}

// TestGeoFloorsCommand runs bench geo-floors on two small webs and checks
// its seeds flag: ranges and lists, and a clear error otherwise.
func TestGeoFloorsCommand(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"geo-floors", "--seeds", "3-4", "--hosts", "60", "--pages", "5", "--ips", "16"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n     3  h", "\n     4  h", `"benchmark":"geo-floors"`, `"seeds":[3,4]`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output has no %q:\n%s", want, out.String())
		}
	}
	for _, tc := range []struct {
		in   string
		want []uint64
	}{{"1-3", []uint64{1, 2, 3}}, {"5", []uint64{5}}, {"1,4-5", []uint64{1, 4, 5}}, {"x", nil}, {"3-1", nil}, {"1-5000", nil}} {
		got, err := parseSeeds(tc.in)
		if tc.want == nil {
			if err == nil || !strings.Contains(err.Error(), "--seeds") {
				t.Errorf("parseSeeds(%q) = %v, %v: want an error naming --seeds", tc.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseSeeds(%q) = %v, %v: want %v", tc.in, got, err, tc.want)
		}
	}
}

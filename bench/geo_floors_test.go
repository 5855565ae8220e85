package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestGeoFloors checks the webs' floors and mean round trips: the distance
// partitioner gives each host its nearest site, so its floor and mean RTT
// are the least of the runs and the stretched site's lower bound equals
// them; ratios are the others over distance's; the counts of webs meeting
// the targets agree with the rows; the report names every seed.
func TestGeoFloors(t *testing.T) {
	c := GeoFloorsConfig{Hosts: 150, Pages: 8, IPs: 32, Seeds: []uint64{1, 2, 3}, Replicas: 200, HostDelay: DefaultGeoFloorsConfig().HostDelay,
		MaxCrawlDelay: DefaultGeoFloorsConfig().MaxCrawlDelay}
	res, err := GeoFloors(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Webs) != len(c.Seeds) {
		t.Fatalf("%d webs, want %d", len(res.Webs), len(c.Seeds))
	}
	meets := map[string]int{}
	for i, w := range res.Webs {
		if w.Seed != c.Seeds[i] || w.Largest == "" || w.LargestURLs <= 0 || w.LargestCity == "" {
			t.Errorf("web %d: seed %d, largest %q (%d URLs, %q)", i, w.Seed, w.Largest, w.LargestURLs, w.LargestCity)
		}
		d := w.Floors[GeoDistance]
		if d.S <= 0 || d.URLs > w.LargestURLs {
			t.Errorf("seed %d: distance floor %+v (largest host %d URLs)", w.Seed, d, w.LargestURLs)
		}
		if s := w.Floors[GeoStretched]; s.S != d.S || w.MeanRTTMS[GeoStretched] != w.MeanRTTMS[GeoDistance] {
			t.Errorf("seed %d: stretched floor %v and mean RTT %v, want distance's %v and %v", w.Seed, s.S, w.MeanRTTMS[GeoStretched], d.S, w.MeanRTTMS[GeoDistance])
		}
		for _, m := range []string{GeoConsistent, GeoCentral} {
			if w.Floors[m].S < d.S || w.MeanRTTMS[m] < w.MeanRTTMS[GeoDistance] {
				t.Errorf("seed %d: %s floor %v, mean RTT %v: below distance's %v, %v", w.Seed, m, w.Floors[m].S, w.MeanRTTMS[m], d.S, w.MeanRTTMS[GeoDistance])
			}
			if got, want := w.TimeRatio[m], w.Floors[m].S/d.S; got != want {
				t.Errorf("seed %d: time ratio against %s %v, want %v", w.Seed, m, got, want)
			}
			if got, want := w.LatencyRatio[m], w.MeanRTTMS[m]/w.MeanRTTMS[GeoDistance]; got != want {
				t.Errorf("seed %d: latency ratio against %s %v, want %v", w.Seed, m, got, want)
			}
			if w.TimeRatio[m] >= geoExhaustionTarget {
				meets["time_vs_"+m]++
			}
			if w.LatencyRatio[m] >= geoLatencyTarget {
				meets["latency_vs_"+m]++
			}
		}
		if w.MeanRTTMS[GeoDistance] <= 0 {
			t.Errorf("seed %d: distance mean RTT %v: the web's hosts pay nothing", w.Seed, w.MeanRTTMS[GeoDistance])
		}
	}
	if fmt.Sprint(meets) != fmt.Sprint(res.Meets) {
		t.Errorf("meets %v, want %v (counted from the rows)", res.Meets, meets)
	}
	report := res.Report(c)
	for _, s := range c.Seeds {
		if !strings.Contains(report, fmt.Sprintf("\n  %4d  ", s)) {
			t.Errorf("the report has no row for seed %d:\n%s", s, report)
		}
	}
}

func TestGeoFloorsConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*GeoFloorsConfig)
		errText string
	}{
		{"default", func(*GeoFloorsConfig) {}, ""},
		{"no seeds", func(c *GeoFloorsConfig) { c.Seeds = nil }, "give 1 to 1000 seeds"},
		{"no hosts", func(c *GeoFloorsConfig) { c.Hosts = 0 }, "hosts must be in"},
		{"no delay", func(c *GeoFloorsConfig) { c.HostDelay = 0 }, "positive host delay"},
		{"no replicas", func(c *GeoFloorsConfig) { c.Replicas = 0 }, "replicas must be in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultGeoFloorsConfig()
			tc.edit(&c)
			_, err := c.WithDefaults()
			if tc.errText == "" && err != nil || tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)) {
				t.Fatalf("WithDefaults() error %v, want %q", err, tc.errText)
			}
		})
	}
}

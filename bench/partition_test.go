package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/partition"
)

func TestRunPartitionSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := PartitionConfig{Hosts: 600, Pages: 10, IPs: 40, Seed: 3, Replicas: []int{20, 200}, Trials: 5, Unlocated: 0.25,
		Progress: func(format string, args ...any) { t.Logf(format, args...) }}
	res, err := RunPartition(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Report(cfg))
	if b := res.Broken(); len(b) > 0 {
		t.Errorf("broken invariants:\n%s", strings.Join(b, "\n"))
	}
	if res.Hosts != 600 || res.IPs != 40 || len(res.Sets) != 2 {
		t.Fatalf("%d hosts on %d addresses, %d sets: want 600, 40 and 2", res.Hosts, res.IPs, len(res.Sets))
	}
	for _, s := range res.Sets {
		if s.IPGap.SplitByKey != 0 || s.IPGap.SplitDistance != 0 {
			t.Errorf("%s: addresses split hashing Keys %d, by distance %d: want 0", s.Name, s.IPGap.SplitByKey, s.IPGap.SplitDistance)
		}
		if s.IPGap.SplitByName == 0 {
			t.Errorf("%s: no address split hashing 15 hosts per address by name: the measure is broken", s.Name)
		}
		// A joining site may be nearest to no address of a small web: only
		// the distance partitioner's leave is sure to move hosts.
		churns := []PartitionChurn{s.Distance.Leave}
		if d := s.Distance.Join; math.Abs(d.Moved-d.SiteShare) > 1e-9 {
			t.Errorf("%s, distance, %s joins: moved %.4f of hosts, its share %.4f: want equal", s.Name, d.Site, d.Moved, d.SiteShare)
		}
		for _, c := range s.Consistent {
			churns = append(churns, c.Join, c.Leave)
			sum := 0.0
			for _, sh := range c.Shares {
				sum += sh.Hosts
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Errorf("%s, %d replicas: host shares sum to %v", s.Name, c.Replicas, sum)
			}
		}
		for _, c := range churns {
			// Contravariance: what moves is exactly the joining site's share, or the leaving one's.
			if c.Moved == 0 || math.Abs(c.Moved-c.SiteShare) > 1e-9 {
				t.Errorf("%s, %s: moved %.4f of hosts, its share %.4f: want equal and > 0", s.Name, c.Site, c.Moved, c.SiteShare)
			}
		}
		d := s.Distance
		if d.Fallback == 0 || d.Located == 0 || d.Fallback+d.Located != res.Hosts {
			t.Errorf("%s: %d hosts located, %d hashed: want both > 0, %d in all", s.Name, d.Located, d.Fallback, res.Hosts)
		}
		if len(s.Trials) != 2 || s.Trials[0].N != 5 {
			t.Errorf("%s: trials %+v, want 2 of 5 federations", s.Name, s.Trials)
		}
	}
}

func TestPartitionConfigInvalid(t *testing.T) {
	set := PartitionSites3()
	badLeave, badJoin := set, set
	badLeave.Leave = "mars"
	badJoin.Join = partition.Site{Name: "eu"}
	_, err := PartitionConfig{Replicas: []int{0}, Unlocated: 2, Sets: []PartitionSiteSet{badLeave, badJoin}}.WithDefaults()
	for _, want := range []string{"replicas must be", "unlocated must be", `leaving site "mars"`, `joining site "eu"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("WithDefaults: %v, want it to say %q", err, want)
		}
	}
}

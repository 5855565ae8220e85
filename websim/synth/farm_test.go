package synth

import (
	"strings"
	"testing"
)

func TestFarmHost(t *testing.T) {
	w, err := New(Options{Hosts: HostileRoles + 4, Seed: 3, Profile: Hostile})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		n    uint64
		ok   bool
	}{
		{"s0.linkfarm.test", 0, true},
		{"s17.linkfarm.test", 17, true},
		{"S17.LinkFarm.Test.", 17, true},
		{"s017.linkfarm.test", 0, false}, // not canonical: one name per host
		{"s.linkfarm.test", 0, false},
		{"x1.linkfarm.test", 0, false},
		{"linkfarm.test", 0, false},
		{"s1.a.linkfarm.test", 0, false},
		{"s1.linkfarm.test.evil", 0, false},
		{"s1099511627776.linkfarm.test", 0, false}, // past farmMax
		{"h1.fr.test", 0, false},
	}
	for _, tt := range tests {
		n, ok := w.FarmHost(tt.name)
		if ok != tt.ok || ok && n != tt.n {
			t.Errorf("FarmHost(%q) = %d, %v; want %d, %v", tt.name, n, ok, tt.n, tt.ok)
		}
		if ip, ok := w.FarmIP(tt.name); ok != tt.ok || ok && !ip.IsLoopback() {
			t.Errorf("FarmIP(%q) = %v, %v", tt.name, ip, ok)
		}
	}
	if _, ok := w.Lookup("s0.linkfarm.test"); ok {
		t.Error("a farm host is one of the web's hosts")
	}
	// Its pages link to new farm hosts only, each once over the farm.
	seen := map[string]bool{}
	for n := range uint64(50) {
		resp := w.RespondFarm(nil, n, "/")
		if resp.Status != 200 || resp.Kind != KindTrap {
			t.Fatalf("farm host %d: %d %v", n, resp.Status, resp.Kind)
		}
		links := strings.Count(string(resp.Body), "<a href=")
		if links != FarmFanout {
			t.Fatalf("farm host %d: %d links, want %d", n, links, FarmFanout)
		}
		for i := uint64(1); i <= FarmFanout; i++ {
			u := "http://" + FarmHostName(n*FarmFanout+i) + ":80/"
			if w.opt.Port == 80 {
				u = "http://" + FarmHostName(n*FarmFanout+i) + "/"
			}
			if !strings.Contains(string(resp.Body), `href="`+u+`"`) || seen[u] {
				t.Fatalf("farm host %d: link %s missing or linked before:\n%s", n, u, resp.Body)
			}
			seen[u] = true
		}
	}
	if r := w.RespondFarm(nil, 3, "/robots.txt"); r.Status != 404 {
		t.Errorf("farm robots.txt: %d, want 404 (everything allowed)", r.Status)
	}
	if r := w.RespondFarm(nil, 3, "/p/1.html"); r.Status != 404 {
		t.Errorf("farm /p/1.html: %d, want 404", r.Status)
	}
}

// TestFarmTruth: the hostile web's truth has the farm's entry as a trap,
// and nothing behind it; the other profiles have no farm.
func TestFarmTruth(t *testing.T) {
	for _, p := range []Profile{Clean, Realistic, Hostile} {
		w, err := New(Options{Hosts: HostileRoles + 4, Pages: 4, Seed: 5, Profile: p})
		if err != nil {
			t.Fatal(err)
		}
		var farm []Record
		err = w.Truth(func(r *Record) error {
			if strings.HasSuffix(r.Host, "."+FarmDomain) {
				farm = append(farm, *r)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if p != Hostile {
			if len(farm) != 0 || w.FarmFront() != "" || w.HasFarm() {
				t.Errorf("%v web: farm records %+v, front %q", p, farm, w.FarmFront())
			}
			if _, ok := w.FarmHost("s0." + FarmDomain); ok {
				t.Errorf("%v web answers for the farm", p)
			}
			continue
		}
		if len(farm) != 1 {
			t.Fatalf("hostile web: %d farm records, want the entry alone: %+v", len(farm), farm)
		}
		r := farm[0]
		if r.URL != w.FarmFront() || !r.Trap || r.Role != FarmRole || r.Kind != "trap" || !r.Reachable || len(r.Outlinks) != FarmFanout || r.Status != 200 {
			t.Errorf("farm entry %+v", r)
		}
	}
}

package websim

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestFarmServed: the hostile web's subdomain farm answers through
// websim's DNS (any s<N> of its domain, a wildcard) and HTTP, its
// requests counted per host; the realistic web has no farm.
func TestFarmServed(t *testing.T) {
	for _, tt := range []struct {
		profile synth.Profile
		farm    bool
	}{{synth.Hostile, true}, {synth.Realistic, false}} {
		t.Run(tt.profile.String(), func(t *testing.T) {
			s := startWeb(t, Options{Web: synth.Options{Hosts: synth.HostileRoles + 4, Seed: 2, IPs: 4, Profile: tt.profile}, DNSAddr: "127.0.0.1:0"})
			r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, s.DNSAddr())
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			name := synth.FarmHostName(123456)
			addrs, err := r.LookupHost(ctx, name)
			if !tt.farm {
				if err == nil {
					t.Fatalf("%s resolves to %v in a web without the farm", name, addrs)
				}
				return
			}
			want, _ := s.Web().FarmIP(name)
			if err != nil || len(addrs) != 1 || addrs[0] != want.String() {
				t.Fatalf("%s: %v %v, want %v", name, addrs, err, want)
			}
			c := client(s)
			front := s.Web().FarmFront()
			resp, body := get(t, c, front)
			if resp.StatusCode != 200 || !strings.Contains(string(body), synth.FarmHostName(1)) {
				t.Fatalf("%s: %d %s", front, resp.StatusCode, body)
			}
			resp, _ = get(t, c, "http://"+name+":"+portString(s.Port())+"/robots.txt")
			if resp.StatusCode != 404 {
				t.Fatalf("farm robots.txt: %d, want 404", resp.StatusCode)
			}
			snap := s.Stats().Snapshot()
			if v := snap.Hosts[synth.FarmHostName(0)]; v == nil || v.Statuses[200] != 1 {
				t.Errorf("stats of %s: %+v", synth.FarmHostName(0), v)
			}
			if v := snap.Hosts[name]; v == nil || v.Statuses[404] != 1 || snap.UnknownHost != 0 {
				t.Errorf("stats of %s: %+v, unknown-host requests %d", name, v, snap.UnknownHost)
			}
		})
	}
}

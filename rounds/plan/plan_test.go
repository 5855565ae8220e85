package plan

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// t0 is the time every test counts from.
var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func ips(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, ip(s))
	}
	return out
}

// ---------------------------------------------------------------- Units

func TestUnits(t *testing.T) {
	tests := []struct {
		name  string
		hosts []Host
		byIP  bool
		want  []Unit
	}{
		{
			name: "no hosts",
			byIP: true,
			want: []Unit{},
		},
		{
			name:  "hosts without addresses are alone",
			hosts: []Host{{Name: "b", URLs: 2}, {Name: "a", URLs: 1}},
			byIP:  true,
			want:  []Unit{{Hosts: []string{"a"}, URLs: 1}, {Hosts: []string{"b"}, URLs: 2}},
		},
		{
			name: "an IPv6 /64 is one address; another /64 is not",
			hosts: []Host{
				{Name: "a.example", URLs: 1, IPs: ips("2001:db8:1:2::10")},
				{Name: "b.example", URLs: 2, IPs: ips("2001:db8:1:2:ffff::1")},
				{Name: "c.example", URLs: 3, IPs: ips("2001:db8:1:3::10")},
			},
			byIP: true,
			want: []Unit{
				{Hosts: []string{"a.example", "b.example"}, URLs: 3},
				{Hosts: []string{"c.example"}, URLs: 3},
			},
		},
		{
			name: "a shared address makes one unit, URLs summed, hosts sorted",
			hosts: []Host{
				{Name: "z.example", URLs: 3, IPs: ips("10.0.0.1")},
				{Name: "m.example", URLs: 4, IPs: ips("10.0.0.1")},
				{Name: "n.example", URLs: 5, IPs: ips("10.0.0.2")},
			},
			byIP: true,
			want: []Unit{
				{Hosts: []string{"m.example", "z.example"}, URLs: 7},
				{Hosts: []string{"n.example"}, URLs: 5},
			},
		},
		{
			name: "a chain a-b-c is one unit",
			hosts: []Host{
				{Name: "a", URLs: 1, IPs: ips("10.0.0.1")},
				{Name: "b", URLs: 10, IPs: ips("10.0.0.1", "10.0.0.2")},
				{Name: "c", URLs: 100, IPs: ips("10.0.0.2")},
				{Name: "d", URLs: 1000, IPs: ips("10.0.0.3")},
			},
			byIP: true,
			want: []Unit{
				{Hosts: []string{"a", "b", "c"}, URLs: 111},
				{Hosts: []string{"d"}, URLs: 1000},
			},
		},
		{
			name: "the link comes last: two groups already formed are merged",
			hosts: []Host{
				{Name: "a", URLs: 1, IPs: ips("10.0.0.1")},
				{Name: "c", URLs: 2, IPs: ips("10.0.0.2")},
				{Name: "e", URLs: 4, IPs: ips("10.0.0.3")},
				{Name: "d", URLs: 8, IPs: ips("10.0.0.2", "10.0.0.3")},
				{Name: "b", URLs: 16, IPs: ips("10.0.0.1", "10.0.0.2")},
			},
			byIP: true,
			want: []Unit{{Hosts: []string{"a", "b", "c", "d", "e"}, URLs: 31}},
		},
		{
			name: "IPv6 addresses link too; hosts without addresses stay alone",
			hosts: []Host{
				{Name: "a", URLs: 1, IPs: ips("2001:db8::1")},
				{Name: "b", URLs: 1},
				{Name: "c", URLs: 1, IPs: ips("2001:db8::1", "10.0.0.9")},
				{Name: "d", URLs: 1},
			},
			byIP: true,
			want: []Unit{
				{Hosts: []string{"a", "c"}, URLs: 2},
				{Hosts: []string{"b"}, URLs: 1},
				{Hosts: []string{"d"}, URLs: 1},
			},
		},
		{
			name: "without byIP every host is its own unit",
			hosts: []Host{
				{Name: "b", URLs: 2, IPs: ips("10.0.0.1")},
				{Name: "a", URLs: 1, IPs: ips("10.0.0.1")},
				{Name: "c", URLs: 3, IPs: ips("10.0.0.1")},
			},
			byIP: false,
			want: []Unit{
				{Hosts: []string{"a"}, URLs: 1},
				{Hosts: []string{"b"}, URLs: 2},
				{Hosts: []string{"c"}, URLs: 3},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Units(tt.hosts, tt.byIP)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Units:\n got %v\nwant %v", got, tt.want)
			}
			for _, u := range got {
				if u.Key() != u.Hosts[0] || slices.Min(u.Hosts) != u.Key() {
					t.Errorf("Key() = %q, want first and least host of %v", u.Key(), u.Hosts)
				}
			}
		})
	}
}

func TestUnitKey(t *testing.T) {
	u := Unit{Hosts: []string{"a.example", "b.example"}}
	if got := u.Key(); got != "a.example" {
		t.Fatalf("Key() = %q, want a.example", got)
	}
}

// refUnits is the reference for Units: start with one group per host and
// merge any two groups that share an address until none do.
func refUnits(hosts []Host, byIP bool) []Unit {
	type group struct {
		hosts []string
		urls  int
		ips   map[netip.Addr]bool
	}
	var gs []*group
	for _, h := range hosts {
		g := &group{hosts: []string{h.Name}, urls: h.URLs, ips: map[netip.Addr]bool{}}
		for _, a := range h.IPs {
			g.ips[a] = true
		}
		gs = append(gs, g)
	}
	for merged := byIP; merged; {
		merged = false
	scan:
		for i := range gs {
			for j := i + 1; j < len(gs); j++ {
				for a := range gs[j].ips {
					if gs[i].ips[a] {
						gs[i].hosts = append(gs[i].hosts, gs[j].hosts...)
						gs[i].urls += gs[j].urls
						for b := range gs[j].ips {
							gs[i].ips[b] = true
						}
						gs = slices.Delete(gs, j, j+1)
						merged = true
						break scan
					}
				}
			}
		}
	}
	out := []Unit{}
	for _, g := range gs {
		slices.Sort(g.hosts)
		out = append(out, Unit{Hosts: g.hosts, URLs: g.urls})
	}
	slices.SortFunc(out, func(a, b Unit) int { return strings.Compare(a.Hosts[0], b.Hosts[0]) })
	return out
}

// randHosts makes n hosts with addresses drawn from a pool of pool, so
// that some share; some hosts have none.
func randHosts(r *rand.Rand, n, pool int) []Host {
	hosts := make([]Host, n)
	for i := range hosts {
		hosts[i] = Host{Name: fmt.Sprintf("h%02d.example", i), URLs: 1 + r.IntN(100)}
		if r.IntN(8) == 0 {
			hosts[i].URLs += r.IntN(1000)
		}
		for k := r.IntN(3); k > 0; k-- {
			a := ip(fmt.Sprintf("10.0.0.%d", 1+r.IntN(pool)))
			if !slices.Contains(hosts[i].IPs, a) {
				hosts[i].IPs = append(hosts[i].IPs, a)
			}
		}
	}
	return hosts
}

func TestUnitsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for iter := range 500 {
		hosts := randHosts(r, 1+r.IntN(30), 1+r.IntN(20))
		byIP := r.IntN(4) != 0
		want := refUnits(hosts, byIP)
		got := Units(hosts, byIP)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("iter %d: Units(%v, %v):\n got %v\nwant %v", iter, hosts, byIP, got, want)
		}
		// The same hosts in any order give the same units.
		for range 3 {
			shuffled := slices.Clone(hosts)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if again := Units(shuffled, byIP); !reflect.DeepEqual(again, got) {
				t.Fatalf("iter %d: shuffled input changed Units:\n got %v\nwant %v", iter, again, got)
			}
		}
	}
}

// ---------------------------------------------------------------- Split scenarios

// splitScenarios are Split's scenarios as data, one block per scenario:
//
//	scenario NAME...
//	byip off                       units made per host (default: per IP)
//	opts maxparts=N minpart=N slack=N
//	node ID [load=N] [dead]
//	host NAME URLS [IP...]
//	hold NODE HOST|IP
//	last HOST NODE [+DUR]          fetched last by NODE, free at t0+DUR
//	part NODE UNIT...              an expected part; UNIT is h1,h2[@+DUR]
//	                               with its NotBefore (none: zero)
//	defer UNIT...                  expected deferred units
//	err nonode                     Split fails with ErrNoNode
//
// Parts are compared as a set per node, so how cut orders one node's
// parts does not matter. Every scenario is also checked for the general
// invariants (checkSplit).
const splitScenarios = `
scenario held by host: goes to its holder, not to the less loaded node
node A
node B load=1000
host a.com 10
host b.com 10
hold B a.com
part B a.com
part A b.com

scenario held by IP: goes to its holder
node A
node B load=1000
host a.com 10 10.0.0.1
hold B 10.0.0.1
part B a.com

scenario held by IP of another host of the unit
node A
node B load=1000
host a.com 10 10.0.0.1
host b.com 10 10.0.0.1 10.0.0.2
hold B 10.0.0.2
part B a.com,b.com

scenario a held unit adds to its holder's load
node A
node B load=5
host a.com 100
host b.com 10
hold A a.com
part A a.com
part B b.com

scenario held by dead nodes: deferred
node A
node B dead
node C dead
host a.com 10
host b.com 10 10.0.0.2
host c.com 10
hold B a.com
hold C 10.0.0.2
defer a.com b.com
part A c.com

scenario held by a node not in the site: deferred
node A
host a.com 10
hold Z a.com
defer a.com

scenario held by two nodes: deferred
node A
node B load=5
host a.com 10 10.0.0.1
host b.com 10 10.0.0.1
host c.com 10
host d.com 10 10.0.0.9
hold A a.com
hold B b.com
hold A d.com
hold B 10.0.0.9
defer a.com,b.com d.com
part A c.com

scenario affinity keeps a unit on its last node within the slack, NotBefore zero
opts slack=10
node A load=10
node B
host a.com 5
last a.com A +5s
part A a.com

scenario affinity gives way beyond the slack, NotBefore is the last node's FreeAt
opts slack=10
node A load=11
node B
host a.com 5
last a.com A +5s
part B a.com@+5s

scenario affinity to dead nodes: least loaded, NotBefore from the last node
node A dead
node B load=10
node C
node D dead
host a.com 5
host b.com 5
last a.com A +7s
last b.com D +2s
part C a.com@+7s b.com@+2s

scenario affinity follows most of a unit's hosts; NotBefore from the hosts that move
opts slack=100
node A
node B
host a.com 1 10.0.0.1
host b.com 1 10.0.0.1
host c.com 1 10.0.0.1
last a.com A +2s
last b.com B +8s
last c.com B +9s
part B a.com,b.com,c.com@+2s

scenario unit with no last node: NotBefore zero
node A
node B load=1
host a.com 5
part A a.com

scenario default slack is a tenth of an even share: kept
node A load=10
node B
host a.com 200
last a.com A +1s
part A a.com

scenario default slack is a tenth of an even share: moved
node A load=11
node B
host a.com 200
last a.com A +1s
part B a.com@+1s

scenario no node takes work
node A dead
node B dead
node C dead
host a.com 1
err nonode

scenario no nodes at all
host a.com 1
err nonode

scenario greedy: largest unit first to the least loaded node
node A
node B
host a 50
host b 40
host c 30
host d 20
part A a d
part B b c

scenario starting load counts
node A load=100
node B
host a 50
host b 40
part B a b

scenario without byIP hosts sharing an address are split freely
byip off
node A
node B
host a 10 10.0.0.1
host b 10 10.0.0.1
part A a
part B b

scenario at most MaxParts parts per node
opts maxparts=2 minpart=1
node A
host a 10
host b 10
host c 10
host d 10
host e 10
part A a c e
part A b d

scenario parts of at least MinPartURLs
opts minpart=150
node A
host a 100
host b 100
host c 100
host d 100
part A a c
part A b d

scenario a node with fewer URLs than MinPartURLs gets one part
opts minpart=256
node A
host a 10
host b 20
host c 30
part A a b c

scenario a large unit leaves no part under MinPartURLs
opts minpart=100
node A
host a 200
host b 150
host c 10
host d 10
host e 10
host f 10
host g 10
part A a
part A b c d e f g

scenario no units
node A
`

type splitScenario struct {
	name       string
	line       int
	byIP       bool
	opts       SplitOptions
	nodes      []Node
	hosts      []Host
	holds      Holds
	last       map[string]Last
	wantParts  []string
	wantDefer  []string
	wantNoNode bool
}

func parseScenarios(t *testing.T, text string) []*splitScenario {
	t.Helper()
	var out []*splitScenario
	var sc *splitScenario
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		bad := func() { t.Fatalf("scenario line %d: cannot read %q", i+1, line) }
		atoi := func(s string) int {
			n, err := strconv.Atoi(s)
			if err != nil {
				bad()
			}
			return n
		}
		if f[0] == "scenario" {
			sc = &splitScenario{name: strings.Join(f[1:], " "), line: i + 1, byIP: true, holds: NewHolds(), last: map[string]Last{}}
			out = append(out, sc)
			continue
		}
		if sc == nil {
			bad()
		}
		switch f[0] {
		case "byip":
			sc.byIP = f[1] != "off"
		case "opts":
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "maxparts":
					sc.opts.MaxParts = atoi(v)
				case "minpart":
					sc.opts.MinPartURLs = atoi(v)
				case "slack":
					sc.opts.Slack = atoi(v)
				default:
					bad()
				}
			}
		case "node":
			n := Node{ID: f[1], Alive: true}
			for _, a := range f[2:] {
				switch {
				case a == "dead":
					n.Alive = false
				case strings.HasPrefix(a, "load="):
					n.Load = atoi(strings.TrimPrefix(a, "load="))
				default:
					bad()
				}
			}
			sc.nodes = append(sc.nodes, n)
		case "host":
			h := Host{Name: f[1], URLs: atoi(f[2])}
			for _, a := range f[3:] {
				h.IPs = append(h.IPs, ip(a))
			}
			sc.hosts = append(sc.hosts, h)
		case "hold":
			if a, err := netip.ParseAddr(f[2]); err == nil {
				sc.holds.IPs[a] = f[1]
			} else {
				sc.holds.Hosts[f[2]] = f[1]
			}
		case "last":
			l := Last{Node: f[2]}
			if len(f) > 3 {
				d, err := time.ParseDuration(strings.TrimPrefix(f[3], "+"))
				if err != nil {
					bad()
				}
				l.FreeAt = t0.Add(d)
			}
			sc.last[f[1]] = l
		case "part":
			sc.wantParts = append(sc.wantParts, partString(f[1], f[2:]))
		case "defer":
			sc.wantDefer = append(sc.wantDefer, f[1:]...)
		case "err":
			sc.wantNoNode = f[1] == "nonode"
		default:
			bad()
		}
	}
	return out
}

// partString is the canonical form of a part: its node and its units in
// order.
func partString(node string, units []string) string {
	units = slices.Clone(units)
	slices.Sort(units)
	return node + ": " + strings.Join(units, " ")
}

func unitString(u Unit, notBefore time.Time) string {
	s := strings.Join(u.Hosts, ",")
	if !notBefore.IsZero() {
		s += "@+" + notBefore.Sub(t0).String()
	}
	return s
}

func hostIPs(hosts []Host) map[string][]netip.Addr {
	m := map[string][]netip.Addr{}
	for _, h := range hosts {
		if len(h.IPs) > 0 {
			m[h.Name] = h.IPs
		}
	}
	return m
}

func TestSplitScenarios(t *testing.T) {
	for _, sc := range parseScenarios(t, splitScenarios) {
		t.Run(sc.name, func(t *testing.T) {
			units := Units(sc.hosts, sc.byIP)
			addrs := hostIPs(sc.hosts)
			if !sc.byIP {
				addrs = nil // per-IP politeness off: addresses play no part
			}
			parts, deferred, err := Split(units, sc.nodes, sc.holds, sc.last, addrs, sc.opts)
			if sc.wantNoNode {
				if !errors.Is(err, ErrNoNode) {
					t.Fatalf("line %d: err = %v, want ErrNoNode", sc.line, err)
				}
				if parts != nil || deferred != nil {
					t.Fatalf("line %d: with ErrNoNode got parts %v, deferred %v", sc.line, parts, deferred)
				}
				return
			}
			if err != nil {
				t.Fatalf("line %d: Split: %v", sc.line, err)
			}
			var gotParts []string
			for _, p := range parts {
				var us []string
				for _, u := range p.Units {
					us = append(us, unitString(u.Unit, u.NotBefore))
				}
				gotParts = append(gotParts, partString(p.Node, us))
			}
			var gotDefer []string
			for _, u := range deferred {
				gotDefer = append(gotDefer, unitString(u, time.Time{}))
			}
			slices.Sort(gotParts)
			slices.Sort(gotDefer)
			wantParts, wantDefer := slices.Clone(sc.wantParts), slices.Clone(sc.wantDefer)
			slices.Sort(wantParts)
			slices.Sort(wantDefer)
			if !slices.Equal(gotParts, wantParts) {
				t.Errorf("line %d: parts:\n got %q\nwant %q", sc.line, gotParts, wantParts)
			}
			if !slices.Equal(gotDefer, wantDefer) {
				t.Errorf("line %d: deferred:\n got %q\nwant %q", sc.line, gotDefer, wantDefer)
			}
			checkSplit(t, units, sc.nodes, sc.holds, sc.last, addrs, sc.opts, parts, deferred)
		})
	}
}

// checkSplit checks what holds for any Split's result, against references
// computed here from the rules in the package comment.
func checkSplit(t *testing.T, units []Unit, nodes []Node, holds Holds, last map[string]Last, addrs map[string][]netip.Addr, o SplitOptions, parts []Part, deferred []Unit) {
	t.Helper()
	takes := map[string]bool{}
	for _, n := range nodes {
		if n.TakesWork() {
			takes[n.ID] = true
		}
	}
	maxParts := o.MaxParts
	if maxParts <= 0 {
		maxParts = 8
	}
	minPart := o.MinPartURLs
	if minPart <= 0 {
		minPart = 256
	}

	// Every unit placed exactly once (whole, in one part) or deferred.
	want := map[string]Unit{}
	total := 0
	for _, u := range units {
		want[u.Key()] = u
		total += u.URLs
	}
	seen := map[string]string{} // unit key → "part N" or "deferred"
	place := func(u Unit, where string) {
		if prev, ok := seen[u.Key()]; ok {
			t.Errorf("unit %v both in %s and %s", u.Hosts, prev, where)
		}
		seen[u.Key()] = where
		if w, ok := want[u.Key()]; !ok || !reflect.DeepEqual(w, u) {
			t.Errorf("%s has unit %v (%d URLs), not one of the round's", where, u.Hosts, u.URLs)
		}
	}
	sum := 0
	nodeURLs := map[string]int{}
	nodeParts := map[string]int{}
	hostNode := map[string]string{}
	ipNode := map[netip.Addr]string{}
	for i, p := range parts {
		where := fmt.Sprintf("part %d (%s)", i, p.Node)
		if !takes[p.Node] {
			t.Errorf("%s: node takes no work", where)
		}
		if i > 0 && parts[i-1].Node > p.Node {
			t.Errorf("parts not ordered by node: %s after %s", p.Node, parts[i-1].Node)
		}
		if len(p.Units) == 0 {
			t.Errorf("%s is empty", where)
		}
		urls := 0
		for _, u := range p.Units {
			place(u.Unit, where)
			urls += u.URLs
			for _, h := range u.Hosts {
				if n, ok := hostNode[h]; ok && n != p.Node {
					t.Errorf("host %s in parts of %s and %s", h, n, p.Node)
				}
				hostNode[h] = p.Node
				for _, a := range addrs[h] {
					if n, ok := ipNode[a]; ok && n != p.Node {
						t.Errorf("address %s in parts of %s and %s", a, n, p.Node)
					}
					ipNode[a] = p.Node
				}
			}
		}
		if urls != p.URLs {
			t.Errorf("%s: URLs = %d, its units sum to %d", where, p.URLs, urls)
		}
		sum += p.URLs
		nodeURLs[p.Node] += p.URLs
		nodeParts[p.Node]++
	}
	for _, u := range deferred {
		place(u, "deferred")
		sum += u.URLs
	}
	for k, u := range want {
		if _, ok := seen[k]; !ok {
			t.Errorf("unit %v neither placed nor deferred", u.Hosts)
		}
	}
	if sum != total {
		t.Errorf("URLs in parts and deferred = %d, round has %d", sum, total)
	}

	// Parts per node: at most MaxParts, each at least MinPartURLs unless
	// the node has fewer in all (then one part).
	for node, n := range nodeParts {
		if n > maxParts {
			t.Errorf("node %s has %d parts, MaxParts %d", node, n, maxParts)
		}
		if nodeURLs[node] < minPart && n != 1 {
			t.Errorf("node %s has %d URLs (< MinPartURLs %d) in %d parts, want 1", node, nodeURLs[node], minPart, n)
		}
	}
	for i, p := range parts {
		if nodeURLs[p.Node] >= minPart && p.URLs < minPart {
			t.Errorf("part %d (%s) has %d URLs < MinPartURLs %d (node has %d)", i, p.Node, p.URLs, minPart, nodeURLs[p.Node])
		}
	}

	// Holds (reference): a unit held by one node that takes work is in
	// that node's parts; held by one that does not, or by two, deferred;
	// held by none, placed.
	for _, u := range units {
		holders := map[string]bool{}
		for _, h := range u.Hosts {
			if n := holds.Hosts[h]; n != "" {
				holders[n] = true
			}
			for _, a := range addrs[h] {
				if n := holds.IPs[a]; n != "" {
					holders[n] = true
				}
			}
		}
		where := seen[u.Key()]
		switch {
		case len(holders) == 0:
			if where == "deferred" {
				t.Errorf("unit %v held by no node was deferred", u.Hosts)
			}
		case len(holders) > 1:
			if where != "deferred" {
				t.Errorf("unit %v held by %v was placed in %s, want deferred", u.Hosts, holders, where)
			}
		default:
			var holder string
			for n := range holders {
				holder = n
			}
			if !takes[holder] {
				if where != "deferred" {
					t.Errorf("unit %v held by %s (takes no work) placed in %s, want deferred", u.Hosts, holder, where)
				}
			} else if hostNode[u.Key()] != holder {
				t.Errorf("unit %v held by %s placed in %s", u.Hosts, holder, where)
			}
		}
	}

	// NotBefore (reference): zero for a held unit; else the latest FreeAt
	// of the hosts last fetched by another node than the unit's.
	for _, p := range parts {
		for _, u := range p.Units {
			held := false
			var nb time.Time
			for _, h := range u.Hosts {
				if holds.Hosts[h] != "" {
					held = true
				}
				for _, a := range addrs[h] {
					if holds.IPs[a] != "" {
						held = true
					}
				}
				if l, ok := last[h]; ok && l.Node != p.Node && l.FreeAt.After(nb) {
					nb = l.FreeAt
				}
			}
			if held {
				nb = time.Time{}
			}
			if !u.NotBefore.Equal(nb) {
				t.Errorf("unit %v on %s: NotBefore %v, want %v", u.Hosts, p.Node, u.NotBefore, nb)
			}
		}
	}
}

// ---------------------------------------------------------------- Split property

// randRound is one random round as Split sees it.
type randRound struct {
	units []Unit
	nodes []Node
	holds Holds
	last  map[string]Last
	addrs map[string][]netip.Addr
	opts  SplitOptions
}

func genRound(r *rand.Rand) randRound {
	hosts := randHosts(r, 1+r.IntN(25), 1+r.IntN(15))
	var rr randRound
	rr.units = Units(hosts, true)
	rr.addrs = hostIPs(hosts)
	ids := []string{"gone"} // a node no longer in the site
	for i := range 1 + r.IntN(5) {
		n := Node{ID: fmt.Sprintf("n%d", i), Alive: r.IntN(5) != 0, Load: r.IntN(300)}
		rr.nodes = append(rr.nodes, n)
		ids = append(ids, n.ID)
	}
	r.Shuffle(len(rr.nodes), func(i, j int) { rr.nodes[i], rr.nodes[j] = rr.nodes[j], rr.nodes[i] })
	rr.holds = NewHolds()
	rr.last = map[string]Last{}
	for _, h := range hosts {
		if r.IntN(7) == 0 {
			rr.holds.Hosts[h.Name] = ids[r.IntN(len(ids))]
		}
		for _, a := range h.IPs {
			if r.IntN(12) == 0 {
				rr.holds.IPs[a] = ids[r.IntN(len(ids))]
			}
		}
		if r.IntN(2) == 0 {
			rr.last[h.Name] = Last{Node: ids[r.IntN(len(ids))], FreeAt: t0.Add(time.Duration(r.IntN(10)) * time.Second)}
		}
	}
	rr.opts = SplitOptions{MaxParts: r.IntN(5), Slack: r.IntN(50)}
	if r.IntN(3) != 0 {
		rr.opts.MinPartURLs = 1 + r.IntN(200)
	}
	return rr
}

func TestSplitProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(2024, 3))
	for iter := range 3000 {
		rr := genRound(r)
		anyLive := slices.ContainsFunc(rr.nodes, Node.TakesWork)
		holdsBefore := Holds{Hosts: maps.Clone(rr.holds.Hosts), IPs: maps.Clone(rr.holds.IPs)}

		parts, deferred, err := Split(rr.units, rr.nodes, rr.holds, rr.last, rr.addrs, rr.opts)
		if !anyLive {
			if !errors.Is(err, ErrNoNode) {
				t.Fatalf("iter %d: no node takes work, err = %v", iter, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("iter %d: Split: %v", iter, err)
		}
		ok := t.Run(fmt.Sprintf("iter%d", iter), func(t *testing.T) {
			checkSplit(t, rr.units, rr.nodes, rr.holds, rr.last, rr.addrs, rr.opts, parts, deferred)
		})
		if !ok {
			t.Fatalf("iter %d failed: units %v nodes %v holds %v last %v opts %+v\nparts %v\ndeferred %v",
				iter, rr.units, rr.nodes, rr.holds, rr.last, rr.opts, parts, deferred)
		}
		if !reflect.DeepEqual(rr.holds, holdsBefore) {
			t.Fatalf("iter %d: Split changed the holds", iter)
		}

		// (e) Deterministic: the same input again, and the nodes in another
		// order, give the same output.
		nodes := slices.Clone(rr.nodes)
		r.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		parts2, deferred2, err2 := Split(rr.units, nodes, rr.holds, rr.last, rr.addrs, rr.opts)
		if err2 != nil || !reflect.DeepEqual(parts2, parts) || !reflect.DeepEqual(deferred2, deferred) {
			t.Fatalf("iter %d: Split not deterministic:\n%v %v\n%v %v", iter, parts, deferred, parts2, deferred2)
		}

		// (d) Greedy's bound with no holds and no affinity. A node given
		// work was the least loaded when it got its last unit, so it ends
		// at most the largest unit above the least loaded; a node given
		// nothing keeps its starting load. Hence the spread ends within
		// max(largest unit, starting spread), and within the largest unit
		// whenever the nodes start that close.
		parts, deferred, err = Split(rr.units, rr.nodes, NewHolds(), nil, rr.addrs, rr.opts)
		if err != nil || len(deferred) != 0 {
			t.Fatalf("iter %d: with no holds: err %v, deferred %v", iter, err, deferred)
		}
		load := map[string]int{}
		got := map[string]bool{}
		startMin, startMax := int(^uint(0)>>1), -1
		for _, n := range rr.nodes {
			if n.TakesWork() {
				load[n.ID] = n.Load
				startMin, startMax = min(startMin, n.Load), max(startMax, n.Load)
			}
		}
		for _, p := range parts {
			load[p.Node] += p.URLs
			got[p.Node] = true
		}
		largest := 0
		for _, u := range rr.units {
			largest = max(largest, u.URLs)
		}
		lo, hi := int(^uint(0)>>1), -1
		for _, l := range load {
			lo, hi = min(lo, l), max(hi, l)
		}
		for id, l := range load {
			if got[id] && l-lo > largest {
				t.Fatalf("iter %d: node %s ends at %d, least loaded %d, largest unit %d; loads %v", iter, id, l, lo, largest, load)
			}
		}
		if hi-lo > max(largest, startMax-startMin) {
			t.Fatalf("iter %d: spread %d > max(largest unit %d, starting spread %d); loads %v", iter, hi-lo, largest, startMax-startMin, load)
		}
		if startMax-startMin <= largest && hi-lo > largest {
			t.Fatalf("iter %d: spread %d > largest unit %d; loads %v", iter, hi-lo, largest, load)
		}
	}
}

// ---------------------------------------------------------------- Reassign

func TestReassign(t *testing.T) {
	addrs := map[string][]netip.Addr{
		"a.com": ips("10.0.0.1"),
		"b.com": ips("10.0.0.1"), // shares a.com's address
		"c.com": ips("10.0.0.3"),
	}
	seen := map[string]time.Time{"A": t0.Add(-time.Minute), "B": t0.Add(-2 * time.Minute), "D": t0.Add(-30 * time.Second)}
	live := func(id string, load int) Node { return Node{ID: id, Alive: true, Load: load} }
	dead := func(id string) Node { return Node{ID: id} }

	tests := []struct {
		name  string
		held  []Held
		nodes []Node
		want  []Move
	}{
		{
			name:  "a dead node's part moves to the least loaded live node, after lastSeen+Delay",
			held:  []Held{{Round: 3, ID: 1, Node: "D", Hosts: []string{"x.com"}, URLs: 10, Delay: 5 * time.Second}},
			nodes: []Node{live("A", 50), live("B", 20), dead("D")},
			want:  []Move{{Round: 3, ID: 1, From: "D", To: "B", NotBefore: t0.Add(-25 * time.Second)}},
		},
		{
			name: "a part goes to the live node that holds one of its hosts",
			held: []Held{
				{Round: 3, ID: 1, Node: "A", Hosts: []string{"x.com"}, URLs: 10},
				{Round: 3, ID: 2, Node: "D", Hosts: []string{"y.com", "x.com"}, URLs: 10, Delay: time.Second},
			},
			nodes: []Node{live("A", 1000), live("B", 0), dead("D")},
			want:  []Move{{Round: 3, ID: 2, From: "D", To: "A", NotBefore: t0.Add(-29 * time.Second)}},
		},
		{
			name: "a part goes to the live node that holds one of its addresses",
			held: []Held{
				{Round: 3, ID: 1, Node: "A", Hosts: []string{"a.com"}, URLs: 10},
				{Round: 4, ID: 1, Node: "D", Hosts: []string{"b.com"}, URLs: 10},
			},
			nodes: []Node{live("A", 1000), live("B", 0), dead("D")},
			want:  []Move{{Round: 4, ID: 1, From: "D", To: "A", NotBefore: t0.Add(-30 * time.Second)}},
		},
		{
			name: "two orphaned parts of one unit (rounds r and r+1) go to one node",
			held: []Held{ // listed out of order on purpose
				{Round: 8, ID: 2, Node: "D", Hosts: []string{"x.com"}, URLs: 100},
				{Round: 7, ID: 5, Node: "D", Hosts: []string{"x.com"}, URLs: 100},
			},
			nodes: []Node{live("A", 0), live("B", 1), dead("D")},
			want: []Move{
				{Round: 7, ID: 5, From: "D", To: "A", NotBefore: t0.Add(-30 * time.Second)},
				{Round: 8, ID: 2, From: "D", To: "A", NotBefore: t0.Add(-30 * time.Second)},
			},
		},
		{
			name: "two orphaned parts sharing only an address go to one node",
			held: []Held{
				{Round: 7, ID: 1, Node: "D", Hosts: []string{"a.com"}, URLs: 100},
				{Round: 7, ID: 2, Node: "B", Hosts: []string{"b.com"}, URLs: 100},
			},
			nodes: []Node{live("A", 0), live("C", 1), dead("D"), dead("B")},
			want: []Move{
				{Round: 7, ID: 1, From: "D", To: "A", NotBefore: t0.Add(-30 * time.Second)},
				{Round: 7, ID: 2, From: "B", To: "A", NotBefore: t0.Add(-2 * time.Minute)},
			},
		},
		{
			name: "unrelated orphans spread by load",
			held: []Held{
				{Round: 1, ID: 1, Node: "D", Hosts: []string{"x.com"}, URLs: 100},
				{Round: 1, ID: 2, Node: "D", Hosts: []string{"y.com"}, URLs: 100},
			},
			nodes: []Node{live("A", 0), live("B", 1), dead("D")},
			want: []Move{
				{Round: 1, ID: 1, From: "D", To: "A", NotBefore: t0.Add(-30 * time.Second)},
				{Round: 1, ID: 2, From: "D", To: "B", NotBefore: t0.Add(-30 * time.Second)},
			},
		},
		{
			name: "an orphan whose hosts two live nodes hold stays",
			held: []Held{
				{Round: 1, ID: 1, Node: "A", Hosts: []string{"x.com"}, URLs: 1},
				{Round: 1, ID: 2, Node: "B", Hosts: []string{"c.com"}, URLs: 1},
				{Round: 1, ID: 3, Node: "D", Hosts: []string{"x.com", "c.com"}, URLs: 1},
			},
			nodes: []Node{live("A", 0), live("B", 0), dead("D")},
			want:  nil,
		},
		{
			name: "nothing moves when no node takes work",
			held: []Held{
				{Round: 1, ID: 1, Node: "A", Hosts: []string{"x.com"}, URLs: 1},
				{Round: 1, ID: 2, Node: "D", Hosts: []string{"y.com"}, URLs: 1},
			},
			nodes: []Node{dead("A"), dead("B"), dead("D")},
			want:  nil,
		},
		{
			name: "parts of live nodes never move",
			held: []Held{
				{Round: 1, ID: 1, Node: "A", Hosts: []string{"x.com"}, URLs: 1000},
				{Round: 1, ID: 2, Node: "A", Hosts: []string{"y.com"}, URLs: 1000},
				{Round: 2, ID: 1, Node: "B", Hosts: []string{"z.com"}, URLs: 1},
			},
			nodes: []Node{live("A", 5000), live("B", 0)},
			want:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Reassign(tt.held, tt.nodes, seen, addrs)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Reassign:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestReassignProperties: random sites where each unit's parts sit on one
// node (as Split leaves them). After the moves every orphan is on a node
// that takes work, no live part moved, no host or address is on two nodes,
// and NotBefore is lastSeen+Delay.
func TestReassignProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(99, 1))
	for iter := range 2000 {
		hosts := randHosts(r, 1+r.IntN(20), 1+r.IntN(10))
		addrs := hostIPs(hosts)
		units := Units(hosts, true)
		var nodes []Node
		seen := map[string]time.Time{}
		for i := range 1 + r.IntN(5) {
			n := Node{ID: fmt.Sprintf("n%d", i), Alive: r.IntN(3) != 0, Load: r.IntN(300)}
			nodes = append(nodes, n)
			seen[n.ID] = t0.Add(-time.Duration(r.IntN(60)) * time.Second)
		}
		var held []Held
		for _, u := range units {
			if r.IntN(3) == 0 {
				continue
			}
			node := nodes[r.IntN(len(nodes))].ID
			for k := range 1 + r.IntN(3) { // parts of rounds k of one unit
				h := Held{Round: uint64(10 + k), ID: len(held), Node: node, URLs: 1 + r.IntN(50),
					Delay: time.Duration(r.IntN(5)) * time.Second}
				for _, name := range u.Hosts {
					if len(h.Hosts) == 0 || r.IntN(2) == 0 {
						h.Hosts = append(h.Hosts, name)
					}
				}
				held = append(held, h)
			}
		}
		takes := map[string]bool{}
		for _, n := range nodes {
			takes[n.ID] = n.TakesWork()
		}
		moves := Reassign(held, nodes, seen, addrs)

		if !slices.ContainsFunc(nodes, Node.TakesWork) {
			if len(moves) != 0 {
				t.Fatalf("iter %d: no node takes work, yet moves %v", iter, moves)
			}
			continue
		}
		byKey := map[[2]uint64]*Held{}
		for i := range held {
			byKey[[2]uint64{held[i].Round, uint64(held[i].ID)}] = &held[i]
		}
		moved := map[[2]uint64]bool{}
		after := map[[2]uint64]string{}
		for _, h := range held {
			after[[2]uint64{h.Round, uint64(h.ID)}] = h.Node
		}
		for _, m := range moves {
			k := [2]uint64{m.Round, uint64(m.ID)}
			h := byKey[k]
			switch {
			case h == nil:
				t.Fatalf("iter %d: move %+v of no part", iter, m)
			case moved[k]:
				t.Fatalf("iter %d: part %v moved twice", iter, k)
			case m.From != h.Node:
				t.Fatalf("iter %d: move %+v from %s, part on %s", iter, m, m.From, h.Node)
			case takes[h.Node]:
				t.Fatalf("iter %d: part %v of live node %s moved", iter, k, h.Node)
			case !takes[m.To]:
				t.Fatalf("iter %d: part %v moved to %s, which takes no work", iter, k, m.To)
			}
			want := seen[h.Node].Add(h.Delay)
			if !m.NotBefore.Equal(want) {
				t.Fatalf("iter %d: move %+v: NotBefore %v, want %v", iter, m, m.NotBefore, want)
			}
			moved[k] = true
			after[k] = m.To
		}
		hostAt := map[string]string{}
		ipAt := map[netip.Addr]string{}
		for _, h := range held {
			k := [2]uint64{h.Round, uint64(h.ID)}
			if !takes[h.Node] && !moved[k] {
				t.Fatalf("iter %d: orphan %+v not moved though nothing conflicts", iter, h)
			}
			at := after[k]
			for _, name := range h.Hosts {
				if n, ok := hostAt[name]; ok && n != at {
					t.Fatalf("iter %d: host %s on %s and %s after moves %v", iter, name, n, at, moves)
				}
				hostAt[name] = at
				for _, a := range addrs[name] {
					if n, ok := ipAt[a]; ok && n != at {
						t.Fatalf("iter %d: address %s on %s and %s after moves %v", iter, a, n, at, moves)
					}
					ipAt[a] = at
				}
			}
		}
		// Deterministic, whatever the order of held.
		shuffled := slices.Clone(held)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if again := Reassign(shuffled, nodes, seen, addrs); !reflect.DeepEqual(again, moves) {
			t.Fatalf("iter %d: Reassign not deterministic:\n%v\n%v", iter, moves, again)
		}
	}
}

// ---------------------------------------------------------------- Generate

func TestGenerate(t *testing.T) {
	tests := []struct {
		name     string
		pace     Pace
		dry      bool
		generate bool
	}{
		{"nothing fetching", Pace{Width: 1000, Queued: 0}, true, true},
		{"nothing fetching, much queued", Pace{Width: 1000, Queued: 5000}, false, true},
		{"limit reached", Pace{Width: 1000, LimitReached: true}, true, false},
		{"limit reached, one fetching and dry", Pace{Fetching: 1, Width: 1000, LimitReached: true}, true, false},
		{"an update in flight", Pace{Updating: 1, Width: 1000}, true, true},
		{"an update in flight, much queued (another node's)", Pace{Updating: 1, Width: 1000, Queued: 5000}, false, false},
		{"MaxFetching updates in flight", Pace{Updating: MaxFetching, Width: 1000}, true, false},
		{"an update in flight, one fetching and dry", Pace{Fetching: 1, Updating: 1, Width: 1000}, true, false},
		{"one fetching, at the threshold Width/4", Pace{Fetching: 1, Width: 1000, Queued: 250}, true, true},
		{"one fetching, just over Width/4", Pace{Fetching: 1, Width: 1000, Queued: 251}, false, false},
		{"one fetching, small width: threshold 64", Pace{Fetching: 1, Width: 100, Queued: 64}, true, true},
		{"one fetching, small width: over 64", Pace{Fetching: 1, Width: 100, Queued: 65}, false, false},
		{"one fetching, no width: threshold 64", Pace{Fetching: 1, Queued: 64}, true, true},
		{"one fetching, Width/4 just above 64", Pace{Fetching: 1, Width: 260, Queued: 65}, true, true},
		{"MaxFetching rounds fetching, dry", Pace{Fetching: MaxFetching, Width: 1000, Queued: 0}, true, false},
		{"more than MaxFetching fetching", Pace{Fetching: MaxFetching + 1, Width: 1000}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.pace.Dry(); got != tt.dry {
				t.Errorf("Dry() = %v, want %v", got, tt.dry)
			}
			if got := Generate(tt.pace); got != tt.generate {
				t.Errorf("Generate() = %v, want %v", got, tt.generate)
			}
		})
	}
}

func TestRoundSpan(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name                     string
		perHost                  int
		hostDelay, fastest, lead time.Duration
		want                     time.Duration
	}{
		{"a host at the host delay: k of it", 10, 50 * ms, 50 * ms, 400 * ms, 450 * ms},
		{"nothing seen: the host delay's", 10, 50 * ms, 0, 400 * ms, 450 * ms},
		{"fastest under the host delay counts as it", 10, 50 * ms, 10 * ms, 400 * ms, 450 * ms},
		{"only a 1s host left: its k, and the lead", 10, 50 * ms, time.Second, 400 * ms, 9*time.Second + 400*ms},
		{"only slow hosts: the fastest of them", 20, 200 * ms, 500 * ms, 300 * ms, 19*500*ms + 300*ms},
		{"a negative lead counts as none", 4, 50 * ms, time.Second, -time.Second, 3 * time.Second},
		{"no host delay: no budgets", 10, 0, time.Second, 400 * ms, 0},
		{"k of one: no budgets", 1, 50 * ms, time.Second, 400 * ms, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RoundSpan(tt.perHost, tt.hostDelay, tt.fastest, tt.lead); got != tt.want {
				t.Errorf("RoundSpan(%d, %v, %v, %v) = %v, want %v", tt.perHost, tt.hostDelay, tt.fastest, tt.lead, got, tt.want)
			}
		})
	}
}

func TestRefill(t *testing.T) {
	const ms = time.Millisecond
	busy := t0.Add(10 * time.Second)
	tests := []struct {
		name       string
		span, lead time.Duration
		want       time.Time
	}{
		{"lead before it runs out", 9 * time.Second, 400 * ms, busy.Add(-400 * ms)},
		{"a lead longer than the span: when one URL fits", 150 * ms, 400 * ms, busy.Add(-150 * ms)},
		{"no lead: when it runs out", 9 * time.Second, 0, busy},
		{"negative lead and span count as none", -time.Second, -time.Second, busy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Refill(busy, tt.span, tt.lead); !got.Equal(tt.want) {
				t.Errorf("Refill(busy, %v, %v) = %v, want %v", tt.span, tt.lead, got, tt.want)
			}
		})
	}
}

// ---------------------------------------------------------------- Detector

func TestDetector(t *testing.T) {
	const timeout = 10 * time.Second
	d := NewDetector(timeout, t0)

	// Never heard of: counted as heard at start.
	if got := d.LastSeen("a"); !got.Equal(t0) {
		t.Fatalf("LastSeen before any report = %v, want start", got)
	}
	for _, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {timeout - 1, true}, {timeout, true}, {timeout + 1, false}, {time.Hour, false}} {
		if got := d.Alive("a", t0.Add(c.at)); got != c.want {
			t.Errorf("never heard: Alive(start+%v) = %v, want %v", c.at, got, c.want)
		}
	}

	// Heard moves the deadline.
	d.Heard("a", t0.Add(5*time.Second))
	if got := d.LastSeen("a"); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("LastSeen after Heard(+5s) = %v", got)
	}
	if !d.Alive("a", t0.Add(15*time.Second)) || d.Alive("a", t0.Add(15*time.Second+1)) {
		t.Errorf("heard at +5s: want alive until +15s exactly")
	}
	if d.Alive("b", t0.Add(15*time.Second)) {
		t.Errorf("b, never heard, alive at +15s")
	}

	// An older report does not move it back.
	d.Heard("a", t0.Add(3*time.Second))
	if got := d.LastSeen("a"); !got.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("LastSeen after an older report = %v, want start+5s", got)
	}
	d.Heard("a", t0.Add(20*time.Second))
	if got := d.LastSeen("a"); !got.Equal(t0.Add(20 * time.Second)) {
		t.Errorf("LastSeen after Heard(+20s) = %v", got)
	}

	// A report from before start (a clock behind, a stale message): never
	// before start.
	d.Heard("c", t0.Add(-time.Minute))
	if got := d.LastSeen("c"); !got.Equal(t0) {
		t.Errorf("LastSeen after a report before start = %v, want start", got)
	}
	if !d.Alive("c", t0.Add(timeout)) || d.Alive("c", t0.Add(timeout+1)) {
		t.Errorf("c heard before start: want alive until start+timeout exactly")
	}

	// Forget drops what was heard: back to start.
	d.Forget("a")
	if got := d.LastSeen("a"); !got.Equal(t0) {
		t.Errorf("LastSeen after Forget = %v, want start", got)
	}
	if d.Alive("a", t0.Add(20*time.Second)) {
		t.Errorf("forgotten node alive at +20s")
	}
	d.Forget("never-there") // no panic
}

// Package plan is the round planner's deterministic core: when the next
// round is generated, how a round's URLs are grouped into politeness units
// and split over a site's nodes, what becomes of the parts of a node that
// died or is leaving, when a node counts as dead, when the crawl ends
// (End), how many URLs a round gives each host and address and when a host
// has used its page budget (Budgets, HostSpent), a Solo leader's fence
// (Lead), when a node's fetcher pauses and resumes (NodeState), and when
// a fetched page is due again and how it ranks then (Refetch, DueScore). It
// starts no goroutines and reads no clock: callers pass the time and the
// site's state and carry out the plan they get back (package rounds does,
// on the leader and on every node).
//
// The rules it keeps:
//   - a host is fetched by one node at a time, and so are all the hosts
//     behind one IP address (when per-IP politeness is on): such hosts form a
//     unit, and a unit is never split between nodes;
//   - a unit that a node still holds (a part of an earlier round not yet done)
//     goes to that node again;
//   - a unit that moves to another node may start there only when the node
//     that last fetched it would have allowed its next request (NotBefore);
//   - otherwise work goes where it went last time (warm connections, cached
//     robots.txt) unless that node is loaded well beyond the least loaded one.
package plan

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// ErrNoNode: no node of the site can take work.
var ErrNoNode = errors.New("plan: no live node to take work")

// Host is one host of a round's list as the planner sees it.
type Host struct {
	Name string
	URLs int
	// IPs are the host's addresses (nil: not known). Hosts that share one
	// are one unit when units are made by IP.
	IPs []netip.Addr
}

// Unit is a set of hosts that one node at a time may fetch.
type Unit struct {
	Hosts []string // sorted
	URLs  int
}

// politenessKey is the address ip's politeness counts under: an IPv4
// address itself, an IPv6 address's /64 (fetcher's ipKey).
func politenessKey(ip netip.Addr) netip.Addr {
	if ip = ip.Unmap(); ip.Is4() {
		return ip
	}
	if p, err := ip.WithZone("").Prefix(64); err == nil {
		return p.Addr()
	}
	return ip
}

// Key names the unit: its first host.
func (u Unit) Key() string { return u.Hosts[0] }

// Units groups hosts into units. With byIP, hosts that share an address
// (directly or through other hosts) form one unit, an IPv6 /64 counting as
// one address as the fetcher's IP politeness counts it; otherwise each host
// is its own. Units come in a deterministic order (by first host).
func Units(hosts []Host, byIP bool) []Unit {
	parent := make([]int, len(hosts))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	if byIP {
		owner := map[netip.Addr]int{}
		for i, h := range hosts {
			for _, ip := range h.IPs {
				ip = politenessKey(ip)
				if j, ok := owner[ip]; ok {
					a, b := find(i), find(j)
					if a != b {
						parent[a] = b
					}
				} else {
					owner[ip] = i
				}
			}
		}
	}
	groups := map[int]*Unit{}
	var order []int
	for i, h := range hosts {
		r := find(i)
		u := groups[r]
		if u == nil {
			u = &Unit{}
			groups[r] = u
			order = append(order, r)
		}
		u.Hosts = append(u.Hosts, h.Name)
		u.URLs += h.URLs
	}
	out := make([]Unit, 0, len(order))
	for _, r := range order {
		u := groups[r]
		slices.Sort(u.Hosts)
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b Unit) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

// Node is one node of the site as the leader sees it.
type Node struct {
	ID string
	// Alive: heard from within the failure timeout (see Detector).
	Alive bool
	// Load is the URLs it holds without a result yet.
	Load int
}

// TakesWork reports whether n may be given work.
func (n Node) TakesWork() bool { return n.Alive }

// Holds says which node holds which hosts and addresses: those of parts
// not done yet. Work on them goes to their holder and nowhere else.
type Holds struct {
	Hosts map[string]string
	IPs   map[netip.Addr]string
}

// NewHolds returns empty holds.
func NewHolds() Holds {
	return Holds{Hosts: map[string]string{}, IPs: map[netip.Addr]string{}}
}

// Add records that node holds hosts (and their addresses from ips).
func (h Holds) Add(node string, hosts []string, ips map[string][]netip.Addr) {
	for _, name := range hosts {
		h.Hosts[name] = node
		for _, ip := range ips[name] {
			h.IPs[ip] = node
		}
	}
}

// holder returns the node holding any of hosts (or their addresses), and
// whether two different nodes hold some of them (a conflict).
func (h Holds) holder(hosts []string, ips map[string][]netip.Addr) (node string, conflict bool) {
	see := func(n string) {
		if n == "" {
			return
		}
		if node == "" {
			node = n
		} else if n != node {
			conflict = true
		}
	}
	for _, name := range hosts {
		see(h.Hosts[name])
		for _, ip := range ips[name] {
			see(h.IPs[ip])
		}
	}
	return node, conflict
}

// Last is where a host was fetched last and when that node would have
// allowed its next request.
type Last struct {
	Node   string
	FreeAt time.Time
}

// SplitOptions tune Split.
type SplitOptions struct {
	// MaxParts is the most parts one node gets per round; 0 → 8.
	MaxParts int
	// MinPartURLs is the least URLs a part is cut to (a node with fewer
	// gets one part); 0 → 256.
	MinPartURLs int
	// Slack is how many more URLs than the least loaded node a node may
	// have and still keep the units it fetched last; 0 → a tenth of an
	// even share of the round.
	Slack int
}

func (o *SplitOptions) defaults(total, nodes int) {
	if o.MaxParts <= 0 {
		o.MaxParts = 8
	}
	if o.MinPartURLs <= 0 {
		o.MinPartURLs = 256
	}
	if o.Slack <= 0 {
		o.Slack = max(total/max(nodes, 1)/10, 1)
	}
}

// Part is a share of a round given to one node.
type Part struct {
	Node  string
	Units []Placed
	URLs  int
}

// Hosts lists the part's hosts.
func (p Part) Hosts() []string {
	var out []string
	for _, u := range p.Units {
		out = append(out, u.Hosts...)
	}
	return out
}

// Placed is a unit with the time it may start on its node.
type Placed struct {
	Unit
	// NotBefore is when the unit's first request may start: zero when it
	// stays on the node that fetched it last.
	NotBefore time.Time
}

// Split gives a round's units to the nodes that take work: a held unit to
// its holder, any other to the node that fetched most of it last unless
// that node is loaded beyond the least loaded by more than the slack,
// else to the least loaded. Units that cannot be placed (held by a node
// that takes no work, or by two nodes) are returned as deferred: they stay
// in the frontier. Parts come out ordered by node.
func Split(units []Unit, nodes []Node, holds Holds, last map[string]Last, ips map[string][]netip.Addr, o SplitOptions) (parts []Part, deferred []Unit, err error) {
	load := map[string]int{}
	var live []string
	for _, n := range nodes {
		if n.TakesWork() {
			live = append(live, n.ID)
			load[n.ID] = n.Load
		}
	}
	if len(live) == 0 {
		return nil, nil, ErrNoNode
	}
	slices.Sort(live)
	total := 0
	for _, u := range units {
		total += u.URLs
	}
	o.defaults(total, len(live))
	order := slices.Clone(units)
	slices.SortStableFunc(order, func(a, b Unit) int { return b.URLs - a.URLs })
	least := func() string {
		best := live[0]
		for _, id := range live[1:] {
			if load[id] < load[best] {
				best = id
			}
		}
		return best
	}
	byNode := map[string][]Placed{}
	for _, u := range order {
		holder, conflict := holds.holder(u.Hosts, ips)
		if conflict {
			deferred = append(deferred, u)
			continue
		}
		var to string
		if holder != "" {
			if _, ok := load[holder]; !ok {
				deferred = append(deferred, u) // its holder takes no work: wait for it
				continue
			}
			to = holder
		} else {
			to = least()
			if aff := affinity(u, last); aff != "" && aff != to {
				if l, ok := load[aff]; ok && l <= load[to]+o.Slack {
					to = aff
				}
			}
		}
		p := Placed{Unit: u}
		if holder == "" {
			p.NotBefore = notBefore(u.Hosts, to, last)
		}
		byNode[to] = append(byNode[to], p)
		load[to] += u.URLs
	}
	for _, id := range live {
		parts = append(parts, cut(id, byNode[id], o)...)
	}
	return parts, deferred, nil
}

// affinity returns the node that fetched the most of u's hosts last.
func affinity(u Unit, last map[string]Last) string {
	count := map[string]int{}
	best := ""
	for _, h := range u.Hosts {
		n := last[h].Node
		if n == "" {
			continue
		}
		count[n]++
		if best == "" || count[n] > count[best] || (count[n] == count[best] && n < best) {
			best = n
		}
	}
	return best
}

// notBefore is when hosts may start on node to: the latest time another
// node that fetched one of them last would have allowed its next request.
func notBefore(hosts []string, to string, last map[string]Last) time.Time {
	var t time.Time
	for _, h := range hosts {
		if l, ok := last[h]; ok && l.Node != to && l.FreeAt.After(t) {
			t = l.FreeAt
		}
	}
	return t
}

// cut splits one node's units into at most MaxParts parts of at least
// MinPartURLs URLs each (one part if the node has fewer), balanced by URLs.
func cut(node string, units []Placed, o SplitOptions) []Part {
	if len(units) == 0 {
		return nil
	}
	total := 0
	for _, u := range units {
		total += u.URLs
	}
	// Units cannot be cut: a large one can leave the others too few URLs
	// for n parts of MinPartURLs, so take fewer parts until none is short.
	for n := min(o.MaxParts, max(1, total/o.MinPartURLs), len(units)); ; n-- {
		parts := make([]Part, n)
		for i := range parts {
			parts[i].Node = node
		}
		// units come largest first: each goes to the smallest part so far.
		for _, u := range units {
			j := 0
			for i := 1; i < n; i++ {
				if parts[i].URLs < parts[j].URLs {
					j = i
				}
			}
			parts[j].Units = append(parts[j].Units, u)
			parts[j].URLs += u.URLs
		}
		short := false
		for _, p := range parts {
			short = short || p.URLs < o.MinPartURLs
		}
		if n == 1 || !short {
			return parts
		}
	}
}

// Held is a part of an active round that is not done.
type Held struct {
	Round uint64
	ID    int
	Node  string
	Hosts []string
	URLs  int
	// Delay is the longest politeness delay among its hosts: how long
	// after a dead holder was last heard of its hosts may be fetched again.
	Delay time.Duration
}

// Move gives a part to another node.
type Move struct {
	Round     uint64
	ID        int
	From, To  string
	NotBefore time.Time
}

// Reassign moves the parts held by nodes that take no work (dead) to nodes
// that do. A part goes to a node that already holds one of its hosts or
// addresses, if one does; else to the least loaded node.
// lastSeen gives when each node was last heard of. Parts that cannot move
// yet (no node takes work, or two hold their hosts) are left where they are.
func Reassign(held []Held, nodes []Node, lastSeen map[string]time.Time, ips map[string][]netip.Addr) []Move {
	load := map[string]int{}
	var live []string
	for _, n := range nodes {
		if n.TakesWork() {
			live = append(live, n.ID)
			load[n.ID] = n.Load
		}
	}
	if len(live) == 0 {
		return nil
	}
	slices.Sort(live)
	holds := NewHolds()
	var orphans []Held
	for _, p := range held {
		if _, ok := load[p.Node]; ok {
			holds.Add(p.Node, p.Hosts, ips)
		} else {
			orphans = append(orphans, p)
		}
	}
	slices.SortFunc(orphans, func(a, b Held) int {
		if a.Round != b.Round {
			if a.Round < b.Round {
				return -1
			}
			return 1
		}
		return a.ID - b.ID
	})
	var moves []Move
	for _, p := range orphans {
		to, conflict := holds.holder(p.Hosts, ips)
		if conflict {
			continue // its hosts are with two nodes: later
		}
		if to == "" {
			to = live[0]
			for _, id := range live[1:] {
				if load[id] < load[to] {
					to = id
				}
			}
		}
		moves = append(moves, Move{Round: p.Round, ID: p.ID, From: p.Node, To: to, NotBefore: lastSeen[p.Node].Add(p.Delay)})
		holds.Add(to, p.Hosts, ips)
		load[to] += p.URLs
	}
	return moves
}

// MaxFetching is the most rounds in flight (fetching or updating) at once.
const MaxFetching = 2

// Pace is what the generate rule looks at.
type Pace struct {
	Fetching int   // rounds in their fetch phase
	Updating int   // rounds fetched and waiting for or in their update
	Queued   int64 // URLs handed to nodes and not yet started, site-wide
	Width    int
	// LimitReached: the site has generated the rounds it was asked for.
	LimitReached bool
}

// Dry reports whether the fetchers are running out of work: few URLs wait
// to start, so the hosts still busy are finishing their politeness tails.
func (p Pace) Dry() bool { return p.Queued <= int64(max(p.Width/4, 64)) }

// Generate reports whether the next round should be generated now: when
// no earlier round is in flight, or when the one round in flight is down to
// its tail (fetching with few URLs left to start) or done fetching and in
// its update. A round so lags the crawl database by one round at most: the
// round before it may not be in yet, every earlier one is. (More rounds in
// flight, from an older frontier, made small rounds of leftovers and a
// worse fetch order for OPIC: bench/README.md, "rounds in flight".)
func Generate(p Pace) bool {
	inFlight := p.Fetching + p.Updating
	if p.LimitReached || inFlight >= MaxFetching {
		return false
	}
	return inFlight == 0 || p.Dry()
}

// RoundSpan is the time a round gives its hosts work for. fastest is the
// least delay among the hosts generate saw in the frontier (busy ones too).
// While a host at the site's host delay has URLs (fastest ≤ hostDelay) it
// is what such a host takes for k = perHost URLs ((k − 1) × hostDelay after
// its first), and every slower host gets what it can serve in that time
// (issue 11: a slow host no longer holds every round's end while the fast
// ones wait for their next URLs).
//
// Once only slower hosts are left (a crawl's tail: one host with a
// Crawl-delay holding most of the last pages) nobody waits on them, and the
// span is the fastest one's k URLs, plus lead, the time its next URLs take
// to reach its fetcher (issue 20), so that a host refilled lead before it
// runs out (Refill) gets k again. Fewer, longer rounds there, rather than
// budgets stretched over the turnover alone: with the host delay's span a
// host whose delay exceeds it got one URL a round, so every one of its URLs
// paid a round's update and turnover (one web took 568 rounds where k a
// host a round took 73, and ended at 1.26× its politeness floor); now it
// gets k a round, as in a width-limited crawl.
// Zero hostDelay or perHost ≤ 1 gives 0 (no per-host budgets).
func RoundSpan(perHost int, hostDelay, fastest, lead time.Duration) time.Duration {
	if perHost <= 1 || hostDelay <= 0 {
		return 0
	}
	if fastest <= hostDelay {
		return time.Duration(perHost-1) * hostDelay
	}
	return time.Duration(perHost-1)*fastest + max(lead, 0)
}

// Refill is when generate should offer URLs again to a host whose URLs
// given so far are projected to keep it busy until busyUntil (it got none
// this time for being busy past the span): lead before it runs out, lead
// being what a generate and its part's take need to put URLs in front of
// its fetcher, but no earlier than its budget allows one URL (busyUntil −
// span). A round generated then keeps the host busy across the turnover
// instead of waiting for an update that may come after it ran dry, and
// gives it nearly the span's worth of URLs, not one.
func Refill(busyUntil time.Time, span, lead time.Duration) time.Time {
	return busyUntil.Add(-min(max(lead, 0), max(span, 0)))
}

// Detector decides when a node is dead: when it has not been heard of for
// Timeout. It is driven by the times passed to it.
type Detector struct {
	timeout time.Duration
	start   time.Time
	last    map[string]time.Time
}

// NewDetector returns a detector that counts every node as heard of at
// start (a new leader gives each node a full timeout to report).
func NewDetector(timeout time.Duration, start time.Time) *Detector {
	return &Detector{timeout: timeout, start: start, last: map[string]time.Time{}}
}

// Heard records that node id reported at now.
func (d *Detector) Heard(id string, now time.Time) {
	if now.After(d.last[id]) {
		d.last[id] = now
	}
}

// LastSeen returns when id was last heard of (the detector's start if never).
func (d *Detector) LastSeen(id string) time.Time {
	if t, ok := d.last[id]; ok && t.After(d.start) {
		return t
	}
	return d.start
}

// Alive reports whether id was heard of within the timeout before now.
func (d *Detector) Alive(id string, now time.Time) bool {
	return now.Sub(d.LastSeen(id)) <= d.timeout
}

// Forget drops a node (it left the site).
func (d *Detector) Forget(id string) { delete(d.last, id) }

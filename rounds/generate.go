package rounds

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/route"
)

const fetchFile = "fetched"

// generate picks the next round from the top of the frontier, splits it
// over the nodes that take work, writes the plan and marks its URLs
// generated. It returns the round's number, 0 if the frontier had nothing
// to give.
func (l *leader) generate(ctx context.Context, nodes []plan.Node) (uint64, error) {
	c := l.c
	c.mu.Lock()
	round := c.state.Next
	c.mu.Unlock()
	start := c.o.Now()
	entries, err := l.pick(ctx)
	if err == nil && len(l.pldWant) > 0 {
		// Domains at this shard's cap with URLs left: ask the site's
		// other shards for more (they give it back within yieldEvery).
		err = c.o.Domains.Ask(ctx, c.limits().pldBudget, slices.Sorted(maps.Keys(l.pldWant)))
	}
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	// Hosts in frontier order, with their URLs.
	perHost := map[string]int{}
	var hosts []plan.Host
	for _, e := range entries {
		if perHost[e.Host] == 0 {
			hosts = append(hosts, plan.Host{Name: e.Host})
		}
		perHost[e.Host]++
	}
	live := 0
	for _, n := range nodes {
		if n.TakesWork() {
			live++
		}
	}
	byIP := c.o.IPDelay > 0 && len(nodes) > 1
	var ips map[string][]netip.Addr
	names := make([]string, len(hosts))
	for i := range hosts {
		hosts[i].URLs = perHost[hosts[i].Name]
		names[i] = hosts[i].Name
	}
	holds := plan.NewHolds()
	if byIP {
		var heldHosts []string
		for _, rp := range l.plans {
			for _, p := range rp.parts {
				if !p.done {
					heldHosts = append(heldHosts, p.hosts...)
				}
			}
		}
		ips = l.resolve(ctx, append(heldHosts, names...))
		for i := range hosts {
			hosts[i].IPs = ips[hosts[i].Name]
		}
	}
	for _, rp := range l.plans {
		for _, p := range rp.parts {
			if !p.done && p.owner.Node != "" {
				holds.Add(p.owner.Node, p.hosts, ips)
			}
		}
	}
	last := map[string]plan.Last{}
	now := c.o.Now()
	for _, h := range names {
		if v, ok := l.last[h]; ok {
			last[h] = v
		}
		for _, ip := range ips[h] { // an address another node fetched last is busy until its FreeAt
			if v, ok := l.lastIP[ip]; ok && v.FreeAt.After(last[h].FreeAt) {
				last[h] = v
			}
		}
		if _, ok := last[h]; ok {
			continue
		}
		// Fetched before, but not by a node this leader has heard of:
		// wherever it goes, it waits out its delay first. (With one node
		// there is nowhere else to go.)
		if live > 1 && l.fetched[h] > 0 {
			last[h] = plan.Last{Node: "?", FreeAt: now.Add(c.hostDelay(h))}
		}
	}
	units := plan.Units(hosts, byIP)
	parts, deferred, err := plan.Split(units, nodes, holds, last, ips, plan.SplitOptions{})
	if err != nil {
		return 0, fmt.Errorf("rounds: generate %d: %w", round, err) // plan.ErrNoNode: the caller waits
	}
	if len(deferred) > 0 {
		skip := map[string]bool{}
		for _, u := range deferred {
			for _, h := range u.Hosts {
				skip[h] = true
			}
		}
		kept := entries[:0]
		for _, e := range entries {
			if !skip[e.Host] {
				kept = append(kept, e)
			}
		}
		entries = kept
		c.log.Info("rounds: hosts held by a node that takes no work wait for a later round", "units", len(deferred))
		if len(entries) == 0 {
			return 0, nil
		}
	}
	byHost := map[string][]genEntry{}
	for _, e := range entries {
		byHost[e.Host] = append(byHost[e.Host], e)
	}
	// The plan: parts and owners, then its header, each command fenced by
	// the leader's token.
	rp := &roundPlan{parts: map[int]*planPart{}, perHost: perHost}
	b := c.newBatch()
	flush := func() error {
		if _, err := c.applyLeader(ctx, b); err != nil {
			return fmt.Errorf("rounds: generate %d: write plan: %w", round, err)
		}
		b = c.newBatch()
		return nil
	}
	size := 0
	for id, p := range parts {
		var pp partPlan
		for _, u := range p.Units {
			for _, h := range u.Hosts {
				pp.Hosts = append(pp.Hosts, partHost{Name: h, NotBefore: u.NotBefore})
				pp.Entries = append(pp.Entries, byHost[h]...)
			}
		}
		o := partOwner{Node: p.Node}
		v := pp.encode()
		b.PutUser(partKey(round, id), v)
		b.PutUser(ownKey(round, id), o.encode())
		size += len(v)
		rp.parts[id] = &planPart{id: id, hosts: p.Hosts(), urls: len(pp.Entries), ownerRaw: o.encode(), owner: o}
		if size >= 4<<20 {
			if err := flush(); err != nil {
				return 0, err
			}
			size = 0
		}
	}
	head := planHead{Round: round, Parts: len(parts), URLs: len(entries), LinkThreshold: c.links.threshold(), Created: start}
	hb, _ := json.Marshal(head)
	b.PutUser(headKey(round), hb)
	if err := flush(); err != nil {
		return 0, err
	}
	if err := c.markGenerated(ctx, round, entries, len(parts), start); err != nil {
		return 0, err
	}
	l.plans[round] = rp
	l.mu.Lock()
	sent := c.o.Now()
	l.genTook = sent.Sub(start)
	for _, p := range rp.parts {
		l.sent = append(l.sent, assignment{node: p.owner.Node, at: sent, urls: p.urls})
	}
	l.mu.Unlock()
	c.mu.Lock()
	c.genDur[round] = c.o.Now().Sub(start)
	c.mu.Unlock()
	c.log.Info("rounds: generated", "round", round, "urls", len(entries), "parts", len(parts), "nodes", live)
	return round, nil
}

// pick reads the top of the frontier, closing hosts that have used their
// budget (their URLs are left where they are; generate skips the host), and
// parking the URLs of hosts whose registrable domain has used its
// (--pld-budget).
func (l *leader) pick(ctx context.Context) ([]genEntry, error) {
	c := l.c
	inFlight := map[string]int{} // URLs generated in rounds not yet updated
	for _, rp := range l.plans {
		for h, n := range rp.perHost {
			inFlight[h] += n
		}
	}
	if c.o.Refetch.On() {
		if err := c.makeDue(ctx, c.o.Now()); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refillAt = time.Time{}
	handed := 0
	lim := c.limits()
	var inFlightPLD map[string]int // inFlight per registrable domain, with --pld-budget
	l.pldWant, l.pldWaiting = nil, false
	if lim.pldBudget > 0 {
		inFlightPLD = map[string]int{}
		for _, rp := range l.plans {
			for d, n := range rp.domains() {
				inFlightPLD[d] += n
			}
		}
	}
	for attempt := 0; attempt < 4; attempt++ {
		now := c.o.Now()
		span := c.roundSpan()
		rd, err := l.readFrontier(now, span, false)
		if err != nil {
			return nil, err
		}
		if wide := plan.RoundSpan(lim.perHost, c.o.HostDelay, rd.fastest, l.refillLead()); wide > span {
			// Only hosts slower than the host delay have URLs: the
			// span is the fastest one's k URLs (plan.RoundSpan).
			span = wide
			if rd, err = l.readFrontier(now, span, true); err != nil {
				return nil, err
			}
		}
		fr, paces := rd.fr, rd.paces
		if returned, err := c.returned(ctx, fr); err != nil {
			return nil, err
		} else if len(returned) > 0 && handed < 8 {
			// Hosts their owner has taken back leave this site's
			// frontier first; then the frontier is read again.
			l.mu.Unlock()
			err = c.handBack(ctx, returned)
			l.mu.Lock()
			if err != nil {
				return nil, err
			}
			handed++
			attempt--
			continue
		}
		entries := make([]genEntry, 0, len(fr))
		closed := 0
		var parks []string
		lastHost := ""
		over := false
		var room int64 // new pages the host may still be given
		// The registrable domains' budgets, with --pld-budget: the room
		// each domain has left in this read, shared by its hosts.
		var domRoom map[string]int64
		var domCap map[string]domainCap // this crawl database's cap of each domain (Options.Domains)
		if lim.pldBudget > 0 {
			domRoom, domCap = map[string]int64{}, map[string]domainCap{}
		}
		dom := ""
		for _, e := range fr {
			if e.Host != lastHost {
				lastHost = e.Host
				used, ok := l.fetched[e.Host]
				if !ok {
					st, err := c.st.HostStats(e.Host)
					if err != nil {
						return nil, fmt.Errorf("rounds: generate: %w", err)
					}
					used = int64(st.Fetched)
					l.fetched[e.Host] = used
				}
				hostOver := plan.HostSpent(used, int64(inFlight[e.Host]), lim.hostBudget)
				room = int64(lim.hostBudget) - used - int64(inFlight[e.Host])
				spent := plan.HostSpent(used, 0, lim.hostBudget) // by its fetched pages alone
				domOver, domSpent := false, false
				if domRoom != nil {
					dom = plan.Registrable(e.Host)
					domUsed, err := l.domainFetched(dom)
					if err != nil {
						return nil, err
					}
					dc, ok := domCap[dom]
					if !ok {
						if dc, err = l.domainCap(dom, lim.pldBudget); err != nil {
							return nil, err
						}
						domCap[dom] = dc
						domRoom[dom] = dc.cap - domUsed - int64(inFlightPLD[dom])
					}
					// Over for the domain only if its cap was used before
					// this read: what this read gives its other hosts may
					// yet be left out of the round. Spent, its URLs left
					// for good, once its fetched pages alone use a cap
					// that cannot grow.
					if domUsed+int64(inFlightPLD[dom]) >= dc.cap {
						domOver, domSpent = true, domUsed >= dc.cap && dc.full
						if !domSpent {
							l.wantDomain(dom, dc)
						}
					}
				}
				over = hostOver || domOver
				switch {
				case over && c.o.Refetch.On():
					// The host stays open for its refetches. Once its
					// fetched pages alone use the budget (not pages in
					// flight, which may fail), its unfetched URLs leave
					// the frontier for good.
					if spent || domSpent {
						var err error
						if parks, err = c.parkable(parks, e.Host); err != nil {
							return nil, err
						}
					}
				case hostOver:
					if err := c.hosts.close(e.Host); err != nil {
						return nil, fmt.Errorf("rounds: close host %s: %w", e.Host, err)
					}
					closed++
				case domSpent:
					// Its domain's fetched pages use --pld-budget: its
					// URLs leave the frontier for good (parked), and it
					// is not closed. A farm of subdomains has thousands
					// of hosts; closed, they would stay at the top of
					// the frontier, and a read skips only so many closed
					// hosts (FrontierQuery.MaxSkips) before it gives up,
					// hiding every host below them. Until then (pages in
					// flight, which may fail) the host gets nothing.
					var err error
					if parks, err = c.parkable(parks, e.Host); err != nil {
						return nil, err
					}
				}
			}
			if !e.Refetch && !over {
				// The budget counts pages, not requests: a new URL
				// takes room, a refetch none; with --pld-budget, room
				// of its domain's too.
				if room <= 0 {
					continue
				}
				if domRoom != nil && domRoom[dom] <= 0 {
					if dc := domCap[dom]; !dc.full {
						l.wantDomain(dom, dc) // given all its cap: more is wanted
					}
					continue
				}
				room--
				if domRoom != nil {
					domRoom[dom]--
				}
			}
			if !over || e.Refetch {
				ge := genEntry{URL: e.URL, Host: e.Host, Cash: e.Score, Depth: e.Depth}
				if e.Refetch {
					// Its score is its due score: its job carries its
					// cash, and what its last fetch found.
					rec, ok, err := c.st.Get(e.URL)
					if err != nil {
						return nil, fmt.Errorf("rounds: generate: %w", err)
					}
					if !ok {
						continue
					}
					ge.Cash = rec.Cash
					ge.Prev = fetcher.Prev{FetchedAt: rec.FetchedAt, ContentFP: rec.ContentFP, ETag: rec.ETag, LastModified: rec.LastModified}
				}
				entries = append(entries, ge)
			}
		}
		if len(parks) > 0 {
			l.mu.Unlock()
			err = c.park(ctx, parks)
			l.mu.Lock()
			if err != nil {
				return nil, err
			}
		}
		if closed == 0 && len(parks) == 0 || len(entries) > 0 {
			l.project(entries, now, paces)
			if len(entries) == 0 {
				l.refillAt = rd.refill
			}
			return entries, nil
		}
		// Every host was over budget: write the closures so the
		// frontier skips them (the parked URLs have left it), and look
		// again.
		l.mu.Unlock()
		err = c.hosts.flush(ctx)
		l.mu.Lock()
		if err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// fetchedAll corrects the projections of a round's hosts once every URL
// of it is fetched: a host in no other round still fetching is busy at most
// its delay from now. URLs that end without a request (robots-denied,
// given up, redirects to a URL seen) take none of a host's time, so the
// projection of one that had them kept it waiting for URLs until a time it
// had long been idle (at a crawl's tail, a refill came 6-8 s late). It
// reports whether a projection moved.
func (l *leader) fetchedAll(round uint64, now time.Time) bool {
	c := l.c
	rp := l.plans[round]
	if rp == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	moved := false
	for h := range rp.perHost {
		t, ok := l.busyUntil[h]
		if !ok || !t.After(now.Add(c.o.HostDelay)) {
			continue
		}
		held := false
		for r, other := range l.plans {
			if r != round && other.perHost[h] > 0 && !other.allDone() {
				held = true
				break
			}
		}
		if free := now.Add(c.hostDelay(h)); !held && t.After(free) {
			l.busyUntil[h] = free
			moved = true
		}
	}
	return moved
}

// frontierRead is one read of the frontier's top with the round budgets of
// a span.
type frontierRead struct {
	fr      []store.FrontierEntry
	paces   map[string]hostPace // the hosts' paces, read once for the budgets and the projection
	fastest time.Duration       // the least delay of the hosts the budgets saw (busy ones too); 0: none
	refill  time.Time           // the earliest plan.Refill of a host left out for being busy; zero: none
}

// readFrontier reads the top of the frontier at now, each host limited to
// its round budget for span (and, with an address delay, its address's:
// plan.Budgets decides, from the hosts' paces and projections read here).
// At a crawl's tail (the span widened by plan.RoundSpan) a host gets
// nothing until it is about to run out (plan.Refill), and then a full
// span's worth: topped up whenever an update let generate look, it got
// the rest of the span, often one URL, and a round of its own for it.
// l.mu is held.
func (l *leader) readFrontier(now time.Time, span time.Duration, tail bool) (frontierRead, error) {
	c := l.c
	rd := frontierRead{paces: map[string]hostPace{}}
	lim := c.limits()
	b := plan.Budgets{PerHost: lim.perHost, HostDelay: c.o.HostDelay, IPDelay: c.o.IPDelay, Now: now, Span: span, Lead: l.refillLead(), Tail: tail}
	r := c.backs
	budget := func(host string) int {
		// A host that waits for another site's hand-back (see
		// route.HandBack.Waiting) gets nothing: its record is not read.
		if c.blocked(host) {
			return 0 // the operator's block (control.Host)
		}
		h := plan.HostPace{Waiting: r != nil && r.Waiting(host)}
		if !h.Waiting {
			p := l.hostPace(host)
			rd.paces[host] = p
			h.Delay, h.BusyUntil = p.each(), l.busyUntil[host]
			h.IP, h.IPOK, h.IPBusyUntil = p.ip, p.ipOK, l.busyUntilIP[p.ip]
		}
		return b.Host(h)
	}
	fr, err := c.st.Frontier(store.FrontierQuery{Width: lim.width, PerHost: lim.perHost, Now: now, PerHostFor: budget})
	if err != nil {
		return rd, fmt.Errorf("rounds: generate: read frontier: %w", err)
	}
	rd.fr, rd.fastest, rd.refill = fr, b.Fastest(), b.Refill()
	return rd, nil
}

// refillLead is how long before a busy host runs out its next URLs are to
// be generated (plan.Refill): what the last generate took, a node's take
// of its part (takeDelay) and two of the leader's step ticks. l.mu is
// held.
func (l *leader) refillLead() time.Duration {
	return l.genTook + takeDelay + 2*stepTick
}

// handBackChunk is how many URLs one hand-over command carries.
const handBackChunk = 2048

// returned asks the router which hosts of the frontier entries their owner
// has taken back.
func (c *Crawler) returned(ctx context.Context, fr []store.FrontierEntry) (map[string]route.Owner, error) {
	if c.backs == nil || len(fr) == 0 {
		return nil, nil
	}
	var hosts []string
	for i, e := range fr {
		if i == 0 || e.Host != fr[i-1].Host {
			hosts = append(hosts, e.Host)
		}
	}
	m, err := c.backs.Returned(ctx, hosts)
	if err != nil {
		return nil, fmt.Errorf("rounds: generate: hosts taken back: %w", err)
	}
	return m, nil
}

// handBack gives every frontier URL of hosts their owner has taken back to
// that owner: each command takes a chunk of URLs out of this site's crawl
// database with their cash (store.Batch.HandOver), routes them to their
// owner's outbox with that cash (route.Router.Route; Moved: sent even if
// the URL-sent cache has them, as a URL this site took over from the
// owner's outbox while it was down does), and counts the cash
// as sent in the round state, so that cash stays conserved
// federation-wide. URLs of those hosts in rounds already generated finish
// here; their links go to the owner.
func (c *Crawler) handBack(ctx context.Context, hosts map[string]route.Owner) error {
	urls := 0
	for _, h := range slices.Sorted(maps.Keys(hosts)) {
		owner := hosts[h]
		for {
			fr, err := c.st.HostFrontier(h, handBackChunk)
			if err != nil {
				return fmt.Errorf("rounds: hand %s back: %w", h, err)
			}
			if len(fr) == 0 {
				break
			}
			b := c.newBatch()
			puts := make([]route.Remote, len(fr))
			for i, e := range fr {
				puts[i] = route.Remote{URL: e.URL, Cash: e.Score, Depth: e.Depth, Moved: true}
			}
			local, sent, err := c.o.Router.Route(ctx, puts, b)
			if err != nil {
				return fmt.Errorf("rounds: hand %s back to %s: %w", h, owner, err)
			}
			if len(local) > 0 {
				// The router's owner of a host taken back is never this
				// site: routing and Returned disagree.
				return fmt.Errorf("rounds: hand %s back to %s: the router keeps %d of its URLs here", h, owner, len(local))
			}
			for _, e := range fr {
				b.HandOver(e.URL, e.Score)
			}
			c.stateMu.Lock() // held until the new state is written: writers take turns
			c.mu.Lock()
			s := c.state.clone()
			c.mu.Unlock()
			s.Sent += sent.Cash
			s.HandedBack += uint64(len(fr))
			err = c.putState(ctx, b, s)
			c.stateMu.Unlock()
			if err != nil {
				return fmt.Errorf("rounds: hand %s back to %s: %w", h, owner, err)
			}
			urls += len(fr)
		}
	}
	c.log.Info("rounds: hosts taken back by their owner: their frontier URLs went to it", "hosts", len(hosts), "urls", urls)
	return nil
}

// markGenerated applies MarkGenerated for the round's URLs in batches, the
// last one with the new round state. It is idempotent, so a new leader that
// finds a complete plan and no state for it simply runs it again.
func (c *Crawler) markGenerated(ctx context.Context, round uint64, entries []genEntry, parts int, started time.Time) error {
	b := c.newBatch()
	for i := range entries {
		b.MarkGenerated(entries[i].URL, round)
		if b.Len() >= c.o.BatchOps && i < len(entries)-1 {
			if _, err := c.applyLeader(ctx, b); err != nil {
				return fmt.Errorf("rounds: generate %d: %w", round, err)
			}
			b = c.newBatch()
		}
	}
	c.stateMu.Lock() // held until the new state is written: writers take turns
	defer c.stateMu.Unlock()
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	s.Next = round + 1
	s.Active = append(s.Active, Active{Round: round, Phase: PhaseFetch, Generated: len(entries), Started: started, Parts: parts})
	return c.putState(ctx, b, s)
}

// resumeGenerate finishes a generate cut short: a plan whose header is
// written but whose round is not in the state is marked and entered; a
// plan without its header is deleted.
func (l *leader) resumeGenerate(ctx context.Context) error {
	c := l.c
	c.mu.Lock()
	next := c.state.Next
	c.mu.Unlock()
	hb, err := c.st.User(headKey(next))
	if err != nil {
		return fmt.Errorf("rounds: read plan of round %d: %w", next, err)
	}
	if hb == nil {
		any := false
		if err := c.st.UserScan(roundPrefix(next), func(string, []byte) error { any = true; return nil }); err != nil {
			return err
		}
		if any {
			b := c.newBatch()
			b.DeleteUserPrefix(roundPrefix(next))
			if _, err := c.applyLeader(ctx, b); err != nil {
				return fmt.Errorf("rounds: drop the unfinished plan of round %d: %w", next, err)
			}
		}
		return nil
	}
	var head planHead
	if err := decodeJSON(hb, &head); err != nil {
		return fmt.Errorf("rounds: plan of round %d: %w", next, err)
	}
	var entries []genEntry
	err = c.st.UserScan(roundPrefix(next)+"part/", func(k string, v []byte) error {
		pp, err := decodePart(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		entries = append(entries, pp.Entries...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("rounds: read plan of round %d: %w", next, err)
	}
	c.log.Info("rounds: finishing the generate of a round cut short", "round", next, "urls", len(entries))
	return c.markGenerated(ctx, next, entries, head.Parts, head.Created)
}

// project records, for each host of a round's entries, when the URLs it
// was given are projected to be done at its own pace (plan.RoundBudget's
// busyUntil). paces are the hosts' paces as the budgets read them. Hosts
// whose projection has passed are forgotten once there are many.
func (l *leader) project(entries []genEntry, now time.Time, paces map[string]hostPace) {
	c := l.c
	n := map[string]int{}
	for _, e := range entries {
		n[e.Host]++
	}
	if len(l.busyUntil) > 2*len(n)+4096 {
		for h, t := range l.busyUntil {
			if !t.After(now) {
				delete(l.busyUntil, h)
			}
		}
	}
	perIP := map[netip.Addr]int{}
	ipHosts := map[netip.Addr]int{}
	for h, k := range n {
		from := now
		if t := l.busyUntil[h]; t.After(from) {
			from = t
		}
		p, ok := paces[h]
		if !ok {
			p = l.hostPace(h)
		}
		l.busyUntil[h] = from.Add(time.Duration(k) * p.each())
		if p.ipOK {
			perIP[p.ip] += k
			ipHosts[p.ip]++
		}
	}
	l.ipHosts = ipHosts
	if len(l.busyUntilIP) > 2*len(perIP)+4096 {
		for ip, t := range l.busyUntilIP {
			if !t.After(now) {
				delete(l.busyUntilIP, ip)
			}
		}
	}
	for ip, k := range perIP {
		from := now
		if t := l.busyUntilIP[ip]; t.After(from) {
			from = t
		}
		l.busyUntilIP[ip] = from.Add(time.Duration(k) * c.o.IPDelay)
	}
}

// maxTook bounds the hosts whose fetch time the leader keeps: beyond it,
// learnTook forgets an arbitrary half (they are learned again from the
// next reports that name them).
const maxTook = 1 << 17

// learnTook learns what a request to each host takes from a node's
// report (host → mean µs of its requests since the node's last report):
// averaged with what was known (an exponentially weighted mean of weight
// 1/2, so that a host that turned slow or fast is followed within a few
// reports). l.mu is held.
func (l *leader) learnTook(took map[string]int64) {
	for h, us := range took {
		if us <= 0 {
			continue
		}
		mean := time.Duration(us) * time.Microsecond
		if old, ok := l.took[h]; ok {
			mean = (old + mean) / 2
		}
		if mean < time.Millisecond {
			delete(l.took, h)
			continue
		}
		if _, ok := l.took[h]; !ok && len(l.took) >= maxTook {
			n := 0
			for k := range l.took {
				if n++; n > maxTook/2 {
					break
				}
				delete(l.took, k)
			}
		}
		l.took[h] = mean
	}
}

// hostPace is c.hostPace with what a request to host takes, as learned
// (learnTook). l.mu is held.
func (l *leader) hostPace(host string) hostPace {
	p := l.c.hostPace(host)
	p.took = l.took[host]
	return p
}

// maxParkPerHost bounds the unfetched URLs of one host over its budget
// that one generate parks.
const maxParkPerHost = 1000

// parkable appends to urls the unfetched URLs (at most maxParkPerHost) of
// host, a host whose fetched pages use its budget in a crawl that
// refetches: they leave the frontier (store.Batch.Park), and the host
// stays open for its pages' refetches. A closure (hostStore.close) would
// stop those too.
func (c *Crawler) parkable(urls []string, host string) ([]string, error) {
	fr, err := c.st.HostFrontier(host, maxParkPerHost)
	if err != nil {
		return urls, fmt.Errorf("rounds: generate: %w", err)
	}
	for _, e := range fr {
		if !e.Refetch {
			urls = append(urls, e.URL)
		}
	}
	return urls, nil
}

// park parks urls (parkable's) in commands of BatchOps.
func (c *Crawler) park(ctx context.Context, urls []string) error {
	for len(urls) > 0 {
		n := min(len(urls), max(c.o.BatchOps, 1))
		b := c.newBatch()
		for _, u := range urls[:n] {
			b.Park(u)
		}
		if _, err := c.applyLeader(ctx, b); err != nil {
			return fmt.Errorf("rounds: park: %w", err)
		}
		urls = urls[n:]
	}
	return nil
}

// maxDueSweep bounds the due URLs one generate puts back in the frontier.
const maxDueSweep = 100_000

// makeDue puts the fetched URLs whose next fetch has come (DueURLs) back
// in the frontier, each with its due score (plan.DueScore), in commands
// of BatchOps: they then rank with new URLs in the frontier's read, under
// the same budgets and politeness. At most max(Width, 1) × 2 URLs a
// generate (and maxDueSweep), the earliest first.
func (c *Crawler) makeDue(ctx context.Context, now time.Time) error {
	due, err := c.st.DueURLs(now, min(max(c.limits().width, 1)*2, maxDueSweep))
	if err != nil || len(due) == 0 {
		return err
	}
	b, n := c.newBatch(), 0
	for i, d := range due {
		rec, ok, err := c.st.Get(d.URL)
		if err != nil {
			return fmt.Errorf("rounds: due %s: %w", d.URL, err)
		}
		if ok {
			b.MakeDue(d.URL, now, plan.DueScore(rec.History, rec.Cash, rec.NextFetch, now, rec.Interval))
			n++
		}
		if n >= c.o.BatchOps || i == len(due)-1 && n > 0 {
			if _, err := c.applyLeader(ctx, b); err != nil {
				return fmt.Errorf("rounds: make due: %w", err)
			}
			b, n = c.newBatch(), 0
		}
	}
	return nil
}

// domainCap is a crawl database's cap of a registrable domain's
// --pld-budget: the whole budget, or its share on a site of shards
// (Options.Domains), and whether the share cannot grow (the budget all
// given out).
type domainCap struct {
	cap  int64
	full bool
}

// domainCap returns this crawl database's cap of dom under budget.
func (l *leader) domainCap(dom string, budget int) (domainCap, error) {
	if l.c.o.Domains == nil {
		return domainCap{cap: int64(budget), full: true}, nil
	}
	cp, full, err := l.c.o.Domains.Share(dom, budget)
	if err != nil {
		return domainCap{}, fmt.Errorf("rounds: generate: %w", err)
	}
	return domainCap{cap: cp, full: full}, nil
}

// wantDomain notes that the pick found dom at this crawl database's cap
// with URLs left: asked for more after the pick. l.mu is held.
func (l *leader) wantDomain(dom string, dc domainCap) {
	if l.c.o.Domains == nil {
		return
	}
	if l.pldWant == nil {
		l.pldWant = map[string]bool{}
	}
	l.pldWant[dom] = true
	l.pldWaiting = l.pldWaiting || !dc.full
}

// domainFetched is the page budget registrable domain dom has used, as of
// the updates applied: read from the crawl database (store.DomainFetched)
// the first time this leadership meets the domain, then counted from the
// updates' fetch results (l.fetched's twin). l.mu is held.
func (l *leader) domainFetched(dom string) (int64, error) {
	if n, ok := l.pldFetched[dom]; ok {
		return n, nil
	}
	n, err := l.c.st.DomainFetched(dom)
	if err != nil {
		return 0, fmt.Errorf("rounds: generate: %w", err)
	}
	l.pldFetched[dom] = int64(n)
	return int64(n), nil
}

// domains is the URLs of the round per registrable domain (its perHost by
// plan.Registrable), worked out the first time --pld-budget asks.
func (rp *roundPlan) domains() map[string]int {
	if rp.perPLD == nil {
		rp.perPLD = map[string]int{}
		for h, n := range rp.perHost {
			rp.perPLD[plan.Registrable(h)] += n
		}
	}
	return rp.perPLD
}

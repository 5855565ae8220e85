package federation

// The hand-back of a returning site's fetched URLs, and the wait for it.
//
// While site X is down past the grace period, its hosts go to their next
// owners (the interim owners), which crawl them. When X answers again,
// each interim owner P
//
//   - drops the jobs of X's hosts not yet started (Fed.Away) and, at its
//     next generates, gives X the frontier URLs of those hosts with their
//     cash (rounds: Crawler.handBack);
//   - once every round it had generated before it saw X back has been
//     updated (so that every fetch of X's hosts it made is recorded), sends
//     X a "fetched elsewhere" record (Batch.Fetched) for every URL of X's
//     hosts it recorded with a final status: they carry no cash, and X
//     records them with store.Batch.FetchedElsewhere instead of fetching
//     them again;
//   - then marks the hand-back done in fed/back/X with the sequence number
//     of its last outbox entry for X, and says so in its probe state
//     (probeMsg.HandBack).
//
// X, from its start, leaves its own hosts alone (generate skips them,
// Fed.Away drops their jobs) while some peer may still hold them: a peer
// it has not heard from yet (until the peer is suspect), one whose
// hand-back to X is pending, or one whose hand-back is done at a sequence
// number X has not applied yet (its inbound record from that peer). This
// is the per-peer marker: X waits for exactly what each peer queued for it
// up to the end of its hand-back, and not for later traffic. A host whose
// generated URLs were marked as fetched elsewhere (a round of X was in
// flight when the record came) also waits, until that round gives them
// back: they then take the other site's status instead of returning to the
// frontier (store.Batch.FetchedElsewhere).

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/route"
)

// backPrefix keys, per site, this site's hand-back of that site's hosts
// (backRecord), in the crawl database's node table.
const backPrefix = "fed/back/"

// Bounds of the hand-back.
const (
	// backCheckEvery is how often a pending hand-back looks at the rounds
	// it waits for.
	backCheckEvery = 200 * time.Millisecond
	// backEntriesPerCommand bounds the outbox entries one hand-back
	// command enqueues (each at most maxEntryBytes).
	backEntriesPerCommand = 16
	// maxMarked bounds the marked URLs the gate looks at.
	maxMarked = 1 << 16
)

// backRecord is this site's hand-back of one site's hosts.
type backRecord struct {
	// Pending: this site took over some of the site's hosts when it went
	// down, and has not yet sent back the URLs it fetched of them.
	Pending bool
	// Seq, once done: the last outbox entry of the hand-back (0: it sent
	// nothing).
	Seq uint64
}

func (r backRecord) encode() []byte {
	b := []byte{0}
	if r.Pending {
		b[0] = 1
	}
	return binary.AppendUvarint(b, r.Seq)
}

func decodeBack(b []byte) (backRecord, error) {
	if len(b) < 2 || b[0] > 1 {
		return backRecord{}, fmt.Errorf("federation: hand-back record of %d bytes", len(b))
	}
	seq, n := binary.Uvarint(b[1:])
	if n <= 0 || 1+n != len(b) {
		return backRecord{}, fmt.Errorf("federation: hand-back record: bad sequence number")
	}
	return backRecord{Pending: b[0] == 1, Seq: seq}, nil
}

// HandBack is a site's hand-back of another site's hosts, as its probe
// answers say: pending, or done up to its last outbox entry, Seq; a
// sharded site's shards each send under their own name and numbers, so
// its hand-back done gives each shard's last entry (Senders, by sender
// name; Seq is then 0).
type HandBack struct {
	Pending bool              `json:"pending,omitempty"`
	Seq     uint64            `json:"seq,omitempty"`
	Senders map[string]uint64 `json:"senders,omitempty"`
}

// backRecords returns this site's hand-back records, by site.
func (f *Fed) backRecords() (map[string]backRecord, error) {
	out := map[string]backRecord{}
	err := f.st.UserScan(backPrefix, func(k string, v []byte) error {
		r, err := decodeBack(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		out[strings.TrimPrefix(k, backPrefix)] = r
		return nil
	})
	return out, err
}

// holding records, once per down period, that this site may now hold
// hosts of p (down past the grace period): their fetched URLs are to go
// back to p when it returns.
func (f *Fed) holding(ctx context.Context, p *peer) error {
	if p.holding {
		return nil
	}
	b := store.NewBatch()
	b.PutUser(backPrefix+p.name, backRecord{Pending: true}.encode())
	if err := f.apply(ctx, b); err != nil {
		return fmt.Errorf("federation: record the hosts of %s held here: %w", p.name, err)
	}
	p.holding, p.backLoaded, p.backPending, p.backAfter = true, true, true, 0
	return nil
}

// handBackStep moves on this site's hand-back to p, up again, if one is
// pending: once the rounds generated before this site saw p back are
// updated, it sends p the fetched URLs of its hosts and marks the
// hand-back done. It runs on the leader (Run), between deliveries.
func (f *Fed) handBackStep(ctx context.Context, p *peer, now time.Time) error {
	p.holding = false
	if !p.backLoaded {
		v, err := f.st.User(backPrefix + p.name)
		if err != nil {
			return err
		}
		if v != nil {
			r, err := decodeBack(v)
			if err != nil {
				return err
			}
			p.backPending = r.Pending
		}
		p.backLoaded = true
	}
	if !p.backPending || now.Before(p.backNext) {
		return nil
	}
	p.backNext = now.Add(backCheckEvery)
	s, err := f.rounds()
	if err != nil {
		return err
	}
	if p.backAfter == 0 {
		// The rounds generated from now on leave p's hosts alone (they
		// are p's again): those before may have fetched some.
		p.backAfter = max(s.Next, 1)
		f.log.Info("federation: site back: its hosts' fetched URLs go back to it once this site's rounds in flight are updated", "site", p.name, "rounds_before", p.backAfter)
	}
	for _, a := range s.Active {
		if a < p.backAfter {
			return nil // not yet updated
		}
	}
	seq, urls, hosts, err := f.sendFetched(ctx, p.name)
	if err != nil {
		return err
	}
	b := store.NewBatch()
	b.PutUser(backPrefix+p.name, backRecord{Seq: seq}.encode())
	if err := f.apply(ctx, b); err != nil {
		return err
	}
	p.backPending, p.backAfter = false, 0
	f.log.Info("federation: fetched URLs of a returned site's hosts handed back", "site", p.name, "urls", urls, "hosts", hosts, "last_entry", seq)
	return nil
}

// heldFor reports whether this site is the owner of host h, primarily
// site's, while site is down.
func (f *Fed) heldFor(h string, l location, site string) bool {
	ph := partition.Host{Name: h, Key: l.key, Loc: l.loc}
	if f.part.Owner(ph, f.isDown) != site {
		return false
	}
	return f.part.Owner(ph, func(s string) bool { return s == site || f.isDown(s) }) == f.o.Self
}

// sendFetched puts in site's outbox a fetched-elsewhere record of every URL
// this site recorded with a final status on the hosts it held for site
// (Batch.Fetched, no cash), and returns the last entry's sequence number
// (0 if there was none) with the URLs and hosts sent.
func (f *Fed) sendFetched(ctx context.Context, site string) (last uint64, urls, hosts int, err error) {
	held := map[string]location{}
	err = f.st.UserScan(locPrefix, func(k string, v []byte) error {
		l, err := decodeLocation(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if l.unplaced {
			return nil // not placed: routed to no other site yet
		}
		if h := strings.TrimPrefix(k, locPrefix); f.heldFor(h, l, site) {
			held[h] = l
		}
		return nil
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("federation: hand back to %s: hosts held: %w", site, err)
	}
	var recs []FetchedURL
	var payloads [][]byte
	flush := func(all bool) error {
		if len(recs) > 0 && (all || len(recs) >= maxPutsPerEntry) {
			payloads = append(payloads, f.fetchedEntries(site, recs, held)...)
			recs = recs[:0]
		}
		if len(payloads) == 0 || !all && len(payloads) < backEntriesPerCommand {
			return nil
		}
		b := store.NewBatch()
		for _, p := range payloads {
			b.OutboxEnqueue(site, p)
		}
		res, err := f.o.DB.Apply(ctx, b)
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if err != nil {
			return fmt.Errorf("federation: hand back to %s: %w", site, err)
		}
		for _, r := range res.Ops {
			last = max(last, r.Seq)
		}
		payloads = payloads[:0]
		return nil
	}
	for _, h := range slices.Sorted(maps.Keys(held)) {
		n := 0
		err := f.st.ScanHostURLs(h, func(r store.URLRecord) error {
			if r.Status < crawl.StatusFetched {
				return nil
			}
			recs = append(recs, FetchedURL{URL: r.URL, Status: r.Status})
			n++
			return flush(false)
		})
		if err != nil {
			return 0, 0, 0, err
		}
		if n > 0 {
			urls += n
			hosts++
		}
	}
	return last, urls, hosts, flush(true)
}

// fetchedEntries cuts fetched-elsewhere records for owner into encoded
// outbox entries (as entries does puts), each with its hosts' locations.
func (f *Fed) fetchedEntries(owner string, recs []FetchedURL, locs map[string]location) [][]byte {
	return f.cutEntries(owner, len(recs), func(i int) string { return recs[i].URL }, 8, locs,
		func(b *Batch, lo, hi int) { b.Fetched = slices.Clone(recs[lo:hi]) })
}

// gate is what this site's own hosts wait for before it crawls them again.
type gate struct {
	// peers whose hand-back this site waits for: the hosts they would own
	// without this site wait.
	peers map[string]bool
	// hosts with URLs marked as fetched elsewhere while generated in a
	// round in flight.
	hosts map[string]bool
}

// updateGate works out the gate from the peers' last states and this
// site's crawl database, and publishes it (every node, every tick of Run).
func (f *Fed) updateGate() error {
	g := &gate{peers: map[string]bool{}, hosts: map[string]bool{}}
	type view struct {
		name string
		hb   HandBack
		has  bool
	}
	var check []view
	f.mu.Lock()
	for name, p := range f.peers {
		switch {
		case p.down || p.suspect:
			// It cannot deliver now: what it held is lost or comes later.
		case !p.heard:
			g.peers[name] = true // it may hold this site's hosts
		default:
			hb, ok := p.state.HandBack[f.o.Self]
			if ok && hb.Pending {
				g.peers[name] = true
			} else if ok && (hb.Seq > 0 || len(hb.Senders) > 0) {
				check = append(check, view{name, hb, ok})
			}
		}
	}
	f.mu.Unlock()
	for _, v := range check {
		// What the peer (or each of its shards) queued for this site up
		// to the end of its hand-back must be applied here.
		upTo := v.hb.Senders
		if v.hb.Seq > 0 {
			upTo = map[string]uint64{v.name: v.hb.Seq}
		}
		for sender, seq := range upTo {
			if SiteOfSender(sender) != v.name && sender != v.name {
				continue // not the peer's: ignored
			}
			raw, err := f.st.User(inPrefix + sender)
			if err != nil {
				return err
			}
			in, err := decodeInbound(raw)
			if err != nil {
				return err
			}
			if in.Seq < seq {
				g.peers[v.name] = true
			}
		}
	}
	var err error
	if g.hosts, err = f.markedHosts(); err != nil {
		return err
	}
	old := f.gate.Swap(g)
	if !maps.Equal(old.peers, g.peers) {
		if len(g.peers) > 0 {
			f.log.Info("federation: this site's hosts wait for the peers that may hold them to hand them back", "peers", slices.Sorted(maps.Keys(g.peers)))
		} else {
			f.log.Info("federation: no peer holds this site's hosts: they are crawled here again")
		}
	}
	if len(old.hosts) != len(g.hosts) {
		f.log.Debug("federation: hosts with generated URLs fetched elsewhere", "hosts", len(g.hosts))
	}
	return nil
}

// markedHosts returns the hosts with URLs marked as fetched elsewhere
// while generated in a round still in flight (the gate's hosts).
func (f *Fed) markedHosts() (map[string]bool, error) {
	hosts := map[string]bool{}
	marked, err := f.st.MarkedURLs(maxMarked)
	if err != nil || len(marked) == 0 {
		return hosts, err
	}
	// Only rounds in flight give marked URLs back: a URL left generated by
	// a round no longer in flight would hold its host for ever.
	s, err := f.rounds()
	if err != nil {
		return nil, err
	}
	active := map[uint64]bool{}
	for _, a := range s.Active {
		active[a] = true
	}
	for _, m := range marked {
		if active[m.Round] {
			hosts[m.Host] = true
		}
	}
	return hosts, nil
}

// Waiting reports whether host, this site's, waits for the peer that held
// it while this site was down to hand back the URLs it fetched of it (see
// route.HandBack): generate leaves it in the frontier, and Away drops its
// jobs. A host this site never located waits while any peer is waited for.
// A shard's view (Fed.Shard) waits for the peers its site waits for, and
// for its own marked hosts.
func (f *Fed) Waiting(host string) bool {
	g := f.gate.Load()
	peers := g.peers
	if f.site != nil {
		peers = f.site.gate.Load().peers
	}
	if g.hosts[host] {
		return true
	}
	if len(peers) == 0 {
		return false
	}
	l, ok, err := f.cachedLoc(host)
	if err != nil || !ok {
		return true
	}
	ph := partition.Host{Name: host, Key: l.key, Loc: l.loc}
	if f.part.Owner(ph, f.isDown) != f.o.Self || f.part.Owner(ph, nil) != f.o.Self {
		return false // not this site's own host
	}
	return peers[f.part.Owner(ph, func(s string) bool { return s == f.o.Self || f.isDown(s) })]
}

// rounds reads the rounds' state (Options.Rounds); with none, round 1 is
// next and none is in flight.
func (f *Fed) rounds() (route.Rounds, error) {
	if f.o.Rounds == nil {
		return route.Rounds{Next: 1}, nil
	}
	s, err := f.o.Rounds()
	if err != nil {
		return s, fmt.Errorf("federation: the rounds' state: %w", err)
	}
	return s, nil
}

package federation

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/route"
)

// A sharded site in a federation (docs/sharding.md). Each shard sends its
// own batches to the other sites, under its own sender name (SenderName)
// and its own outbox sequence numbers, from its own crawl database (the
// URL-sent cache, the outbox, the outbound records: Fed.Shard). The
// site's Fed runs on its meta group (Options.DB): it probes the peers,
// takes part in the termination waves, and receives: a batch is split by
// shard, entry by entry, each part applied to its shard (ApplyPart, once
// per sender and sequence number), and the site's own inbound record of
// the sender moves on only when every part is applied; only then is the
// sender answered.
//
// Site failures: a sharded site is an interim owner as any other. It takes
// a down site's hosts (each in its shard); each shard (Shard.Step, on its
// leader) records that it may hold them (fed/back/SITE in its own crawl
// database), reseeds the down site's seeds of its hosts, and hands its
// outbox for the down site over to the next owners, keeping those its own
// site now owns through the site's routing between shards (Shard.Keep).
// When the site is back each shard hands back what it held (frontier URLs
// through generate, Shard.Returned; fetched-elsewhere records, under its
// own sender name) and records it done; the site's probe answer merges
// the shards' records (ShardedSite.HandBacks: pending while any shard's
// is, else each shard's last entry by sender, HandBack.Senders). A sharded
// site back from a failure waits, as an unsharded one does, for the
// interim owners to hand its hosts back: each shard's router asks its
// site's gate (Shard.Waiting).

// ShardedSite is what a sharded site's Fed needs of its shards.
type ShardedSite interface {
	// ShardOf names the shard of a host by its politeness key.
	ShardOf(key string) int
	// ApplyPart applies part, a frame (AppendFrame) from sender from
	// split off a batch received, to shard sh (ApplyPart on its leader),
	// and returns once it is applied.
	ApplyPart(ctx context.Context, sh int, from string, part []byte) error
	// Quiet reports whether every shard is passive, nothing is in transit
	// between them and nothing waits in their outboxes for another site,
	// as the site's last two state waves found (on the node that runs
	// them); per peer site, the last outbox entry each shard had
	// acknowledged, summed over the shards; and since, the meta group's
	// (Options.DB's) applied index before the shards' states were read:
	// a batch received whose site record is at a later index may not be
	// in them, and the site is not passive.
	Quiet() (passive bool, sent map[string]uint64, since uint64)
	// HandBacks returns the site's hand-backs of other sites' hosts its
	// shards held, by site, as the last state waves found the shards'
	// records (Shard.HandBacks): pending while any shard's is (or while
	// some shard's is not known), else each shard's last entry.
	HandBacks() map[string]HandBack
}

// shardSep separates a site's name from its shard's in a sender's name.
const shardSep = "--s"

// SenderName is the name shard sh of site sends its batches under.
func SenderName(site string, sh int) string { return fmt.Sprintf("%s%s%03d", site, shardSep, sh) }

// splitSender splits a shard's sender name (SenderName) into its site and
// shard; ok is false for a name that names no shard.
func splitSender(name string) (site string, shard int, ok bool) {
	i := strings.LastIndex(name, shardSep)
	if i <= 0 || len(name) == i+len(shardSep) {
		return "", -1, false
	}
	for _, c := range name[i+len(shardSep):] {
		if c < '0' || c > '9' {
			return "", -1, false
		}
	}
	n, err := strconv.Atoi(name[i+len(shardSep):])
	if err != nil {
		return "", -1, false
	}
	return name[:i], n, true
}

// shardOfSender returns the shard a sender name (SenderName) is of, or -1.
func shardOfSender(name string) int {
	_, sh, _ := splitSender(name)
	return sh
}

// SiteOfSender returns the site a shard's sender name (SenderName) is of,
// or "" if name names no shard.
func SiteOfSender(name string) string {
	site, _, _ := splitSender(name)
	return site
}

// putSharded applies batch b from sender to the site's shards: split
// entry by entry by the shard of each host, each part applied to its
// shard, then the site's inbound record of sender moved on (in the meta
// group: what the probes tell the sender and the waves count).
func (f *Fed) putSharded(ctx context.Context, sender string, b *Batch, locs map[string]location) error {
	v, err := f.st.User(inPrefix + sender)
	if err != nil {
		return fmt.Errorf("federation: inbound state of %s: %w", sender, err)
	}
	in, err := decodeInbound(v)
	if err != nil {
		return err
	}
	if b.Seq <= in.Seq {
		f.stats.dupBatches.Add(1)
		return nil // applied before
	}
	ends := b.ends
	if len(ends) == 0 {
		ends = []entryEnd{{puts: len(b.Puts), fetched: len(b.Fetched), virtual: b.Virtual}}
	}
	parts := map[int][]*Batch{} // shard → one batch per entry of b
	part := func(sh, i int) *Batch {
		p := parts[sh]
		if p == nil {
			p = make([]*Batch, len(ends))
			for j := range p {
				p[j] = &Batch{From: sender, To: f.o.Self}
			}
			parts[sh] = p
		}
		return p[i]
	}
	hostSeen := map[*Batch]map[string]bool{}
	addHost := func(e *Batch, h string) {
		if hostSeen[e] == nil {
			hostSeen[e] = map[string]bool{}
		}
		if !hostSeen[e][h] {
			hostSeen[e][h] = true
			e.Hosts = append(e.Hosts, locs[h].hostLoc(h))
		}
	}
	p0, q0 := 0, 0
	for i, end := range ends {
		for _, p := range b.Puts[p0:end.puts] {
			h := hostOf(p.URL)
			e := part(f.o.Sharded.ShardOf(locs[h].key), i)
			e.Puts = append(e.Puts, p)
			addHost(e, h)
		}
		for _, r := range b.Fetched[q0:end.fetched] {
			h := hostOf(r.URL)
			e := part(f.o.Sharded.ShardOf(locs[h].key), i)
			e.Fetched = append(e.Fetched, r)
			addHost(e, h)
		}
		if end.virtual != 0 {
			part(0, i).Virtual += end.virtual // the virtual page's cash: shard 0's
		}
		p0, q0 = end.puts, end.fetched
	}
	for _, sh := range slices.Sorted(maps.Keys(parts)) {
		entries := make([][]byte, len(parts[sh]))
		size := 64
		for i, e := range parts[sh] {
			entries[i] = e.Append(nil)
			size += len(entries[i]) + 8
		}
		frame := AppendFrame(make([]byte, 0, size), sender, f.o.Self, b.Seq, b.First, entries)
		if err := f.o.Sharded.ApplyPart(ctx, sh, sender, frame); err != nil {
			return fmt.Errorf("federation: batch %d from %s, part of shard %d: %w", b.Seq, sender, sh, err)
		}
	}
	// Every part is applied: the site's record moves on (the cash is
	// counted in the shards').
	res, err := applyInbound(ctx, f.o.DB, sender, &Batch{From: sender, To: f.o.Self, Seq: b.Seq, First: b.First}, func(string) (bool, error) { return true, nil }, false)
	if err != nil || res == nil {
		return err
	}
	for h, l := range locs {
		f.remember(h, l)
	}
	f.noteReceived(res.Index, len(b.Puts))
	return nil
}

// partPrefix keys, per sender, the frame a shard last applied a part of:
// its first entry and its number of entries, so that a frame sent again
// with more entries after it (the sender did not learn the first was
// applied) is applied from the entries the shard has not seen.
const partPrefix = "fed/part/"

// ApplyPart applies part, a frame a sharded site's endpoint split off a
// batch from sender from (one entry per entry of the batch, empty where
// the shard has nothing), to db, a shard's crawl database, once: entries
// of a frame applied before are skipped (by sequence number, and by the
// frame's first entry when a frame sent again covers more), the rest
// applied as ApplyFrame applies a frame, the cash counted in db's
// inbound record of from.
func ApplyPart(ctx context.Context, db *crawldb.DB, from string, part []byte) error {
	b, err := Decode(part, Limits{})
	if err != nil {
		return fmt.Errorf("federation: part from %s: %w: %w", from, ErrRejected, err)
	}
	if b.From != from {
		return fmt.Errorf("federation: part from %s: %w: it says it is from %q", from, ErrRejected, b.From)
	}
	st := db.Store()
	key, pkey := inPrefix+from, partPrefix+from
	known := placedIn(st) // a part of another site's batch
	for attempt := 0; ; attempt++ {
		old, err := st.User(key)
		if err != nil {
			return fmt.Errorf("federation: inbound state of %s: %w", from, err)
		}
		in, err := decodeInbound(old)
		if err != nil {
			return err
		}
		if b.Seq <= in.Seq {
			return nil // applied before
		}
		skip := 0
		if b.First != 0 && b.First <= in.Seq {
			pv, err := st.User(pkey)
			if err != nil {
				return fmt.Errorf("federation: part state of %s: %w", from, err)
			}
			first, n := decodePart(pv)
			if first != b.First || n > len(b.ends) {
				return fmt.Errorf("%w: part %d..%d from %s overlaps what was applied (up to %d, frame %d of %d entries)", ErrRefused, b.First, b.Seq, from, in.Seq, first, n)
			}
			skip = n
		}
		sub := *b
		if skip > 0 {
			e := b.ends[skip-1]
			sub.Puts, sub.Fetched = b.Puts[e.puts:], b.Fetched[e.fetched:]
			sub.Virtual = 0
			for _, e := range b.ends[skip:] {
				sub.Virtual += e.virtual
			}
		}
		cmd := store.NewBatch()
		cmd.Guard(key, old)
		if err := fillInbound(cmd, key, in, &sub, known, false); err != nil {
			return err
		}
		cmd.PutUser(pkey, encodePart(b.First, len(b.ends)))
		res, err := db.Apply(ctx, cmd)
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if errors.Is(err, store.ErrGuard) && attempt < 5 {
			continue
		}
		if errors.Is(err, store.ErrBadOp) {
			return fmt.Errorf("%w: %w", ErrRefused, err)
		}
		if err != nil {
			return fmt.Errorf("federation: apply part %d from %s: %w", b.Seq, from, err)
		}
		return nil
	}
}

func encodePart(first uint64, n int) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(nil, first), uint64(n))
}

func decodePart(v []byte) (first uint64, n int) {
	first, k := binary.Uvarint(v)
	if k <= 0 {
		return 0, 0
	}
	m, j := binary.Uvarint(v[k:])
	if j <= 0 {
		return 0, 0
	}
	return first, int(m)
}

// SentTotals returns, per peer site, the last outbox entry of st's that
// peer acknowledged (a shard's outbound records).
func SentTotals(st *store.Store) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := st.UserScan(outPrefix, func(k string, v []byte) error {
		o, err := decodeOutbound(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		out[k[len(outPrefix):]] = o.Acked
		return nil
	})
	return out, err
}

// Shard is one shard's part in its sharded site's federation: its router
// for the URLs of other sites (Route: located, the URL-sent cache in the
// shard's crawl database, the shard's outbox) and its sender (Step).
type Shard struct {
	site   *Fed // the site's (on the meta group): the peers, the end
	f      *Fed // the shard's view: its crawl database, its sender name
	lead   bool // Step: this node led the shard at the last step
	forgot bool // Step: forgetRemoved done
}

// Shard returns shard db's part in f's federation (f a sharded site's),
// sending under name (SenderName); rounds reads the shard's rounds (nil:
// none in flight).
func (f *Fed) Shard(db *crawldb.DB, name string, rounds func() (route.Rounds, error)) *Shard {
	o := f.o
	o.DB, o.Sharded, o.Rounds = db, nil, rounds
	sf := &Fed{o: o, st: db.Store(), part: f.part, client: f.client, log: f.log.With("sender", name),
		peers: map[string]*peer{}, locs: locations{m: map[string]location{}}, name: name, site: f, shardNo: shardOfSender(name)}
	sf.down.Store(&map[string]bool{})
	sf.gate.Store(&gate{peers: map[string]bool{}})
	for _, s := range o.File.Sites {
		if s.Name != o.Self {
			sf.peers[s.Name] = &peer{name: s.Name, spec: s}
		}
	}
	sh := &Shard{site: f, f: sf}
	f.shards.Store(name, sh)
	return sh
}

// Local routes URLs of a sharded site's own hosts between its shards for
// one shard (shardset's Router): it returns those of the shard and writes
// the others into b as entries for their shards.
type Local func(ctx context.Context, urls []route.Remote, b *store.Batch) ([]route.Remote, error)

// Keep sets how the shard keeps URLs that a re-route finds its own site
// owns (a site removed from the federation file: its hosts' new owner may
// be this one); without it they wait in the outbox. Call it before Step.
func (s *Shard) Keep(local Local) { s.f.keep = local }

// addShards adds to s, a sharded site's Status, the figures of the shards
// this node leads (a shard's outboxes for other sites, URL-sent cache and
// outbound and inbound records are in its own crawl database): on each
// node, its share of the site's.
func (f *Fed) addShards(s *Status) {
	peer := make(map[string]*PeerStatus, len(s.Peers))
	for i := range s.Peers {
		peer[s.Peers[i].Name] = &s.Peers[i]
	}
	f.shards.Range(func(_, v any) bool {
		sf := v.(*Shard).f
		if !sf.o.DB.IsLeader() {
			return true
		}
		s.SentCache += sf.st.Counts().Sent
		s.CacheHits += sf.stats.hits.Load()
		s.CacheLookup += sf.stats.lookups.Load()
		s.SentURLs += sf.stats.sentURLs.Load()
		s.SentBatches += sf.stats.sentBatches.Load()
		for name, ps := range peer {
			outbox, sent, recv := sf.peerFigures(name)
			ps.Outbox += outbox
			s.Outbox += uint64(outbox)
			ps.SentURLs += sent
			ps.RecvURLs += recv
		}
		return true
	})
	s.CacheRate = 0
	if s.CacheLookup > 0 {
		s.CacheRate = float64(s.CacheHits) / float64(s.CacheLookup)
	}
}

// peerFigures returns a shard's durable counters for peer (its crawl
// database's, the same on every replica): outbox entries waiting (up to a
// scan's worth), URLs delivered to it and applied from it (or from its
// shards), in all. A record that cannot be read counts nothing.
func (sf *Fed) peerFigures(peer string) (outbox int, sent, recv uint64) {
	if e, err := sf.st.Outbox(peer, 0, outboxScan); err == nil {
		outbox = len(e)
	}
	if out, err := sf.outboundOf(peer); err == nil {
		sent = out.URLs
	}
	sf.st.UserScan(inPrefix+peer, func(k string, v []byte) error {
		if from := k[len(inPrefix):]; from == peer || SiteOfSender(from) == peer {
			if in, err := decodeInbound(v); err == nil {
				recv += in.URLs
			}
		}
		return nil
	})
	return outbox, sent, recv
}

// ShardFigures are a shard's durable federation counters, from its crawl
// database (the same on every replica), for a site-wide view that sums
// them over the shards: unlike a node's Status, which counts the shards
// it leads, with its own process's counters.
type ShardFigures struct {
	Outbox    uint64 `json:"outbox_entries"` // entries waiting for other sites (a scan's worth per peer at most)
	SentCache uint64 `json:"sent_cache_size"`
	SentURLs  uint64 `json:"sent_urls"`     // delivered to other sites, in all
	RecvURLs  uint64 `json:"received_urls"` // applied from other sites, in all
}

// Add adds o's counters to s's.
func (s *ShardFigures) Add(o ShardFigures) {
	s.Outbox += o.Outbox
	s.SentCache += o.SentCache
	s.SentURLs += o.SentURLs
	s.RecvURLs += o.RecvURLs
}

// ShardFigures returns the figures of the shard that sends under name
// (SenderName) from this node's replica of it; false when this node has
// none.
func (f *Fed) ShardFigures(name string) (ShardFigures, bool) {
	v, ok := f.shards.Load(name)
	if !ok {
		return ShardFigures{}, false
	}
	sf := v.(*Shard).f
	fig := ShardFigures{SentCache: sf.st.Counts().Sent}
	for _, p := range f.o.File.Sites {
		if p.Name == f.o.Self {
			continue
		}
		outbox, sent, recv := sf.peerFigures(p.Name)
		fig.Outbox += uint64(outbox)
		fig.SentURLs += sent
		fig.RecvURLs += recv
	}
	return fig, true
}

// Route keeps, from urls, those of this site's hosts, and writes the
// others into b as entries of the shard's outboxes for their sites (see
// Fed.Route): a host's site is its primary owner.
func (s *Shard) Route(ctx context.Context, urls []route.Remote, b *store.Batch) ([]route.Remote, route.Sent, error) {
	return s.f.Route(ctx, urls, b)
}

// Finished reports whether the federation's crawl has ended.
func (s *Shard) Finished() bool { return s.site.Finished() }

// Waiting reports whether host, this site's, waits for a hand-back (see
// route.HandBack): while a peer that may hold it has not handed it back (the
// site's gate, fed by the probes), or while URLs of it that this shard
// generated in a round in flight are marked as fetched elsewhere (the
// shard's own, looked at by Step).
func (s *Shard) Waiting(host string) bool { return s.f.Waiting(host) }

// Away reports whether the fetcher drops host's jobs (Fed.Away): a host of
// a site back that the shard held, or one of this site's that waits.
func (s *Shard) Away(host string) bool { return s.f.Away(host) }

// Returned names, among hosts, those the shard held for a site that is
// back (see route.HandBack, Fed.Returned).
func (s *Shard) Returned(ctx context.Context, hosts []string) (map[string]route.Owner, error) {
	return s.f.Returned(ctx, hosts)
}

// HandBacks returns the shard's hand-back records, by site: pending, or
// done up to the shard's last entry (under its sender name, Senders).
func (s *Shard) HandBacks() (map[string]HandBack, error) {
	backs, err := s.f.backRecords()
	if err != nil || len(backs) == 0 {
		return nil, err
	}
	out := make(map[string]HandBack, len(backs))
	for site, r := range backs {
		hb := HandBack{Pending: r.Pending}
		if !r.Pending && r.Seq > 0 {
			hb.Senders = map[string]uint64{s.f.name: r.Seq}
		}
		out[site] = hb
	}
	return out, nil
}

// BackPending reports whether the shard has a hand-back to do to a site
// that is up: work left, so the shard is not passive.
func (s *Shard) BackPending() (bool, error) {
	backs, err := s.f.backRecords()
	if err != nil {
		return false, err
	}
	for site, r := range backs {
		if r.Pending && !s.site.isDown(site) {
			return true, nil
		}
	}
	return false, nil
}

// Step, on the node that leads the shard, moves each peer's outbox on:
// entries the peer has applied (as its answers to the site's probes say)
// acknowledged, then one batch delivered. The outbox for a peer down past
// its grace period, and the URLs delivered to it before, go to the next
// owners of its hosts (Fed.handOver: never this site, which is sharded;
// with no site to take them they wait), a batch in doubt without its cash
// until the peer is back (then settled by sync). On another node it
// forgets what it was sending.
func (s *Shard) Step(ctx context.Context) {
	if !s.f.o.DB.IsLeader() {
		if s.lead {
			for _, p := range s.f.peers {
				p.pend, p.synced = nil, false
				p.holding, p.backLoaded, p.backAfter = false, false, 0 // read again by the next leadership
			}
			s.lead = false
		}
		return
	}
	s.lead = true
	if !s.forgot {
		if err := s.f.forgetRemoved(ctx); err != nil {
			s.f.log.Error("federation: hand over what the shard holds for sites removed from the federation file", "err", err)
		} else {
			s.forgot = true
		}
	}
	if hosts, err := s.f.markedHosts(); err != nil {
		s.f.log.Warn("federation: shard's hosts marked as fetched elsewhere", "err", err)
	} else {
		s.f.gate.Store(&gate{hosts: hosts})
	}
	now := time.Now()
	for _, name := range slices.Sorted(maps.Keys(s.f.peers)) {
		p := s.f.peers[name]
		s.site.mu.Lock()
		sp := s.site.peers[name]
		down, heard, applied, asked := sp.down, sp.heard, sp.state.RecvFrom[s.f.name], sp.askedAt
		s.site.mu.Unlock()
		if down != p.down {
			// Gone, or back: what it applied is learnt anew.
			p.down, p.pend, p.synced, p.handedOver, p.reseeded = down, nil, false, false, false
		}
		if !down {
			// The hand-back of its hosts, if it returned, goes on beside
			// the deliveries (as Fed.tend's).
			if err := s.f.handBackStep(ctx, p, now); err != nil && ctx.Err() == nil {
				s.f.log.Warn("federation: shard's hand-back", "peer", name, "err", err)
			}
		}
		switch {
		case down:
			// This site may hold its hosts now (the shard writes its own
			// record of it), and its seeds of this shard's hosts.
			if err := s.f.holding(ctx, p); err != nil {
				s.f.log.Warn("federation: shard's hand-over", "peer", name, "err", err)
				continue
			}
			if err := s.handOver(ctx, p); err != nil && ctx.Err() == nil {
				s.f.log.Warn("federation: shard hand-over to the next owners", "peer", name, "err", err)
			}
			if !p.reseeded && ctx.Err() == nil {
				if err := s.f.reseed(ctx, p); err != nil {
					s.f.log.Warn("federation: shard's seeds of a site down", "peer", name, "err", err)
				} else {
					p.reseeded = true
				}
			}
		case !p.synced:
			if heard {
				if err := s.f.resync(ctx, p, applied, asked); err != nil && ctx.Err() == nil {
					s.f.log.Warn("federation: shard sync with peer", "peer", name, "err", err)
				}
			}
		default:
			s.f.deliver(ctx, p, now)
		}
	}
}

// handOver moves the shard's outbox for p, down, to the next owners, and
// the URLs it had delivered to p, until none is left or no site takes them.
func (s *Shard) handOver(ctx context.Context, p *peer) error {
	steps := 0
	defer func() {
		if steps == 0 {
			return
		}
		level := slog.LevelDebug // what the shard routes for p meanwhile follows
		if !p.handedOver {
			level, p.handedOver = slog.LevelInfo, true
		}
		s.f.log.Log(ctx, level, "federation: a shard's URLs for a site down handed over to its hosts' next owners", "site", p.name, "steps", steps)
	}()
	for ctx.Err() == nil {
		did, err := s.f.handOver(ctx, p)
		if errors.Is(err, errNoInterim) {
			return nil // they wait for a site to take them, or for p
		}
		if err != nil || !did {
			return err
		}
		steps++
	}
	return nil
}

// InDoubt reports whether the shard holds outbox entries in doubt for a
// peer that is up (Fed.settle has not yet run): the shard is not passive.
func (s *Shard) InDoubt() (bool, error) {
	doubts, err := s.f.doubted()
	if err != nil || len(doubts) == 0 {
		return false, err
	}
	for name := range doubts {
		if !s.site.isDown(name) {
			return true, nil
		}
	}
	return false, nil
}

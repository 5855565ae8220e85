package federation

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/route"
)

const (
	// outPrefix keys, per peer, what this site delivered to it: the last
	// outbox entry it acknowledged and the totals.
	outPrefix = "fed/out/"
	// sentPrefix keys the outbox entries delivered to a peer, kept so that
	// their URLs can go to the peer's hosts' next owners if it is gone for
	// good (fed/sent/PEER/SEQ).
	sentPrefix = "fed/sent/"
	// doubtPrefix keys the outbox entries of a batch that was on its way
	// to a peer when the peer went down (fed/doubt/PEER/SEQ): the peer may
	// have applied them. Their URLs went to the next owners without cash;
	// the cash waits here until the peer is back: those it applied are
	// delivered, the others go to it again, with their cash (Fed.settle).
	doubtPrefix = "fed/doubt/"
	// maxBatchPuts bounds a batch on the wire (several outbox entries).
	maxBatchPuts = 16384
	// maxFrameBytes bounds a framed batch on the wire, under the
	// receiver's DefaultMaxBytes.
	maxFrameBytes = 4 << 20
	// outboxScan is how many outbox entries a delivery looks at.
	outboxScan = 64
)

// outbound is what this site delivered to one peer so far.
type outbound struct {
	Acked   uint64 // the last outbox entry acknowledged
	Batches uint64
	URLs    uint64
	Hits    uint64 // no longer counted (the sent cache applies in Route: Fed.CacheStats); kept for the record's layout
	// Tried is the last outbox entry sent in a batch, answered or not:
	// the entries up to it that are still in the outbox may have been
	// applied by the peer.
	Tried uint64
}

func (o outbound) encode() []byte {
	b := binary.AppendUvarint(nil, o.Acked)
	b = binary.AppendUvarint(b, o.Batches)
	b = binary.AppendUvarint(b, o.URLs)
	b = binary.AppendUvarint(b, o.Hits)
	return binary.AppendUvarint(b, o.Tried)
}

// decodeOutbound reads an outbound record; one written before Tried was
// kept has four counters (Tried then is Acked).
func decodeOutbound(b []byte) (outbound, error) {
	var vals [5]uint64
	if len(b) == 0 {
		return outbound{}, nil
	}
	for i := range vals {
		if i == 4 && len(b) == 0 {
			vals[4] = vals[0]
			break
		}
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return outbound{}, fmt.Errorf("federation: outbound record: bad counter %d", i)
		}
		vals[i], b = v, b[n:]
	}
	if len(b) != 0 {
		return outbound{}, fmt.Errorf("federation: outbound record: %d bytes after the counters", len(b))
	}
	return outbound{vals[0], vals[1], vals[2], vals[3], vals[4]}, nil
}

func (f *Fed) outboundOf(peer string) (outbound, error) {
	v, err := f.st.User(outPrefix + peer)
	if err != nil {
		return outbound{}, fmt.Errorf("federation: outbound state of %s: %w", peer, err)
	}
	return decodeOutbound(v)
}

func sentKey(peer string, seq uint64) string { return fmt.Sprintf("%s%s/%020d", sentPrefix, peer, seq) }

func doubtKey(peer string, seq uint64) string {
	return fmt.Sprintf("%s%s/%020d", doubtPrefix, peer, seq)
}

// pending is a batch on its way to a peer: retried as it is until the peer
// answers, so that a batch the peer applied but whose answer was lost is
// recognised as applied (same sequence number).
type pending struct {
	frame      []byte // AppendFrame of the entries
	seq, first uint64
	entries    []store.OutboxEntry
	urls       int  // puts in the entries
	doubt      bool // the entries are in doubt (fed/doubt/), not in the outbox
}

// deliver sends one batch of peer p's outbox, if it has one and its
// back-off allows, by the transport to p (Fed.transport). It reports
// whether it did anything.
func (f *Fed) deliver(ctx context.Context, p *peer, now time.Time) bool {
	if now.Before(p.nextTry) {
		return false
	}
	to := route.Owner{Site: p.name}
	tr, err := f.transport(to)
	if err != nil {
		f.log.Error("federation: outbox", "peer", p.name, "err", err)
		p.backoff(now, 10*time.Second)
		return false
	}
	if p.pend == nil {
		pd, err := f.nextBatch(p)
		if err != nil {
			f.log.Error("federation: outbox", "peer", p.name, "err", err)
			p.backoff(now, 5*time.Second)
			return false
		}
		if pd == nil {
			return false
		}
		if err := f.tried(ctx, p, pd); err != nil {
			f.log.Error("federation: outbox", "peer", p.name, "err", err)
			p.backoff(now, time.Second)
			return false
		}
		f.mu.Lock()
		p.pend = pd
		f.mu.Unlock()
	}
	pd := p.pend
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, f.o.Timeout)
	err = tr.Deliver(cctx, to, pd.frame)
	cancel()
	switch {
	case err == nil:
		if err := f.acked(ctx, p, pd); err != nil {
			f.log.Error("federation: acknowledge delivered batch", "peer", p.name, "seq", pd.seq, "err", err)
			p.backoff(now, time.Second)
			return false
		}
		f.mu.Lock()
		p.pend = nil
		f.mu.Unlock()
		p.ok(now)
		f.stats.observe(time.Since(start))
		return true
	case errors.Is(err, ErrRefused):
		// The peer does not own some of these URLs (its view of the
		// federation differs: a site it still sees down, or one it
		// sees back before this site does) or has applied part of
		// them: learn what it applied, re-route what it will not take
		// as this site sees the federation then, and send the rest
		// again a second later.
		f.log.Warn("federation: batch refused", "peer", p.name, "seq", pd.seq, "err", err)
		f.mu.Lock()
		p.pend = nil
		p.refusedAt = f.o.Now()
		f.mu.Unlock()
		p.synced = false
		p.backoff(now, time.Second)
	case errors.Is(err, ErrRejected):
		f.log.Error("federation: batch rejected (a bug or a misconfiguration)", "peer", p.name, "seq", pd.seq, "err", err)
		p.backoff(now, 10*time.Second)
	default:
		p.fail(now)
		f.mu.Lock()
		p.lastErr = err.Error()
		f.mu.Unlock()
	}
	return false
}

// nextBatch frames the oldest outbox entries for p, as they are stored
// (AppendFrame): at most maxBatchPuts records and about maxFrameBytes.
// The URL-sent cache was applied when they were enqueued (Route).
func (f *Fed) nextBatch(p *peer) (*pending, error) {
	// Entries in doubt since p went down go again first (settle), in a
	// batch of their own: sequence numbers in a frame follow each other.
	entries, err := f.doubts(p.name)
	if err != nil {
		return nil, err
	}
	doubt := len(entries) > 0
	for i := 1; i < len(entries); i++ {
		if entries[i].Seq != entries[i-1].Seq+1 {
			entries = entries[:i]
			break
		}
	}
	if !doubt {
		if entries, err = f.st.Outbox(p.name, 0, outboxScan); err != nil || len(entries) == 0 {
			return nil, err
		}
	}
	pd := &pending{first: entries[0].Seq, doubt: doubt}
	payloads := make([][]byte, 0, len(entries))
	records, size := 0, 64
	for _, e := range entries {
		n, puts, err := entryCount(e.Payload)
		if err != nil {
			return nil, fmt.Errorf("outbox entry %d for %s: %w", e.Seq, p.name, err)
		}
		if len(pd.entries) > 0 && (records+n > maxBatchPuts || size+len(e.Payload)+8 > maxFrameBytes) {
			break
		}
		records += n
		size += len(e.Payload) + 8
		pd.urls += puts
		pd.seq = e.Seq
		pd.entries = append(pd.entries, e)
		payloads = append(payloads, e.Payload)
	}
	pd.frame = AppendFrame(make([]byte, 0, size), f.sender(), p.name, pd.seq, pd.first, payloads)
	return pd, nil
}

// tried records, before batch pd first leaves for p, that its entries may
// reach p (outbound.Tried), so that a hand-over after a crash or a change
// of leader knows them in doubt.
func (f *Fed) tried(ctx context.Context, p *peer, pd *pending) error {
	out, err := f.outboundOf(p.name)
	if err != nil || out.Tried >= pd.seq {
		return err
	}
	out.Tried = pd.seq
	b := store.NewBatch()
	b.PutUser(outPrefix+p.name, out.encode())
	return f.apply(ctx, b)
}

// acked records a delivered batch: its entries leave the outbox (kept
// under fed/sent/ for a handover).
func (f *Fed) acked(ctx context.Context, p *peer, pd *pending) error {
	out, err := f.outboundOf(p.name)
	if err != nil {
		return err
	}
	b := store.NewBatch()
	for _, e := range pd.entries {
		if pd.doubt {
			b.PutUser(doubtKey(p.name, e.Seq), nil)
		} else {
			b.OutboxAck(p.name, e.Seq)
		}
		b.PutUser(sentKey(p.name, e.Seq), e.Payload)
	}
	out.Acked = max(out.Acked, pd.seq)
	out.Batches++
	out.URLs += uint64(pd.urls)
	b.PutUser(outPrefix+p.name, out.encode())
	if err := f.apply(ctx, b); err != nil {
		return err
	}
	f.stats.sentURLs.Add(int64(pd.urls))
	f.stats.sentBatches.Add(1)
	return nil
}

// sync learns from p's answer to a probe which of this site's batches it
// has applied (applied, the last one): it settles the batch that was in
// doubt when p went down (settle), acknowledges the outbox entries they
// covered (a batch applied whose answer was lost, before a restart or a
// change of leader), and moves the outbound record's Acked up to applied,
// so that the termination waves' counters agree even when the entries
// were handed over.
func (f *Fed) sync(ctx context.Context, p *peer, applied uint64) error {
	if err := f.settle(ctx, p, applied); err != nil {
		return err
	}
	for {
		entries, err := f.st.Outbox(p.name, 0, outboxScan)
		if err != nil {
			return err
		}
		b := store.NewBatch()
		n := 0
		for _, e := range entries {
			if e.Seq > applied {
				break
			}
			b.OutboxAck(p.name, e.Seq)
			b.PutUser(sentKey(p.name, e.Seq), e.Payload)
			n++
		}
		out, err := f.outboundOf(p.name)
		if err != nil {
			return err
		}
		if n == 0 && out.Acked >= applied {
			p.synced = true
			return nil
		}
		out.Acked = max(out.Acked, applied)
		out.Tried = max(out.Tried, applied)
		b.PutUser(outPrefix+p.name, out.encode())
		if err := f.apply(ctx, b); err != nil {
			return err
		}
		if n > 0 {
			f.log.Info("federation: outbox entries the peer had applied acknowledged", "peer", p.name, "entries", n, "applied", applied)
		}
	}
}

// resync syncs with p (sync) once an answer to a probe sent after its last
// refusal (asked: when the probe that got its last answer was sent) says
// what it applied, and then re-routes what it refused that it will not
// take (rerouteStray). Before such an answer it does nothing.
func (f *Fed) resync(ctx context.Context, p *peer, applied uint64, asked time.Time) error {
	f.mu.Lock()
	refused := p.refusedAt
	f.mu.Unlock()
	if !refused.IsZero() && !asked.After(refused) {
		return nil // wait for an answer after the refusal
	}
	if err := f.sync(ctx, p, applied); err != nil || refused.IsZero() {
		return err
	}
	n, err := f.rerouteStray(ctx, p, applied)
	if err != nil {
		p.synced = false
		return fmt.Errorf("re-route what %s refused: %w", p.name, err)
	}
	if n > 0 {
		f.log.Info("federation: outbox entries the peer refused re-routed", "peer", p.name, "entries", n)
	}
	f.mu.Lock()
	p.refusedAt = time.Time{}
	f.mu.Unlock()
	return nil
}

// rerouteStray re-routes, with their cash, the outbox entries for p after
// applied (what p has applied, as an answer to a probe sent after its last
// refusal says: none of them is at p) that hold URLs p will not take as
// this site sees the federation: hosts of a site back that went to p as
// their interim owner, for instance. It returns how many it re-routed.
func (f *Fed) rerouteStray(ctx context.Context, p *peer, applied uint64) (int, error) {
	moved := 0
	after := applied
	for {
		entries, err := f.st.Outbox(p.name, after, outboxScan)
		if err != nil || len(entries) == 0 {
			return moved, err
		}
		var self inbound
		b := store.NewBatch()
		for _, e := range entries {
			after = e.Seq
			stray, err := f.strayFor(p.name, e.Payload)
			if err != nil {
				return moved, fmt.Errorf("outbox entry %d for %s: %w", e.Seq, p.name, err)
			}
			if !stray {
				continue
			}
			if err := f.reroute(ctx, b, e.Payload, withCash, &self); err != nil {
				return moved, fmt.Errorf("re-route outbox entry %d for %s: %w", e.Seq, p.name, err)
			}
			b.OutboxAck(p.name, e.Seq)
			moved++
		}
		if b.Len() > 0 {
			if err := f.applySelf(ctx, b, self); err != nil {
				return moved, err
			}
		}
	}
}

// strayFor reports whether an outbox payload for site holds a URL that
// site would refuse as this site sees the federation (Fed.takes).
func (f *Fed) strayFor(site string, payload []byte) (bool, error) {
	eb, err := Decode(payload, Limits{})
	if err != nil {
		return false, err
	}
	locs := make(map[string]location, len(eb.Hosts))
	for _, h := range eb.Hosts {
		locs[h.Host] = location{key: h.Key, loc: locOf(h)}
	}
	for _, p := range eb.Puts {
		if h := hostOf(p.URL); !f.takes(site, h, locs[h]) {
			return true, nil
		}
	}
	for _, r := range eb.Fetched {
		if h := hostOf(r.URL); !f.takes(site, h, locs[h]) {
			return true, nil
		}
	}
	return false, nil
}

// settle ends the doubt over the entries that were on their way to p when
// it went down (handOver), now that p, back, says it has applied its
// batches up to applied: the cash of those it applied is at p, and they
// are kept as delivered (for a later hand-over). The others stay in doubt
// and are delivered to p again, first, with their own sequence numbers
// (nextBatch): p applies each entry once, so an entry it applied in part
// (a sharded site applies a batch shard by shard, and its record of the
// sender moves on only when every part is applied: a site killed in
// between says it applied none of it) is completed, not doubled. Their
// URLs went to the next owners without cash; now p gets them with it.
func (f *Fed) settle(ctx context.Context, p *peer, applied uint64) error {
	ds, err := f.doubts(p.name)
	if err != nil || len(ds) == 0 {
		return err
	}
	b := store.NewBatch()
	done := 0
	for _, d := range ds {
		if d.Seq <= applied {
			b.PutUser(doubtKey(p.name, d.Seq), nil)
			b.PutUser(sentKey(p.name, d.Seq), d.Payload)
			done++
		}
	}
	if done == 0 {
		return nil
	}
	if err := f.apply(ctx, b); err != nil {
		return err
	}
	f.log.Info("federation: entries in doubt when the peer went down settled", "peer", p.name, "entries", len(ds), "applied_there", done, "to_deliver_again", len(ds)-done)
	return nil
}

// doubts returns the entries in doubt for peer (handOver), oldest first.
func (f *Fed) doubts(peer string) ([]store.OutboxEntry, error) {
	return f.records(doubtPrefix+peer+"/", math.MaxInt)
}

// handOver moves p's outbox, and the URLs delivered to it before, to the
// next owners of its hosts: p has been suspect past the grace period. URLs
// delivered before go with no cash (p had it); they are new to their next
// owner unless it found them itself. Entries that were on their way to p
// (up to outbound.Tried) may have been applied there: their URLs go
// without cash, and the entries wait under doubtPrefix until p returns
// (settle: delivered again, with their cash, unless p applied them).
func (f *Fed) handOver(ctx context.Context, p *peer) (bool, error) {
	entries, err := f.st.Outbox(p.name, 0, 16)
	if err != nil {
		return false, err
	}
	var self inbound // what comes back to this site
	if len(entries) > 0 {
		out, err := f.outboundOf(p.name)
		if err != nil {
			return false, err
		}
		b := store.NewBatch()
		for _, e := range entries {
			mode := withCash
			if e.Seq <= out.Tried {
				mode = noCash
				b.PutUser(doubtKey(p.name, e.Seq), e.Payload)
			}
			if err := f.reroute(ctx, b, e.Payload, mode, &self); err != nil {
				return false, fmt.Errorf("hand over outbox entry %d of %s: %w", e.Seq, p.name, err)
			}
			b.OutboxAck(p.name, e.Seq)
		}
		return true, f.applySelf(ctx, b, self)
	}
	sent, err := f.records(sentPrefix+p.name+"/", handOverChunk)
	if err != nil || len(sent) == 0 {
		return false, err
	}
	drop := func(b *store.Batch, e store.OutboxEntry) { b.PutUser(sentKey(p.name, e.Seq), nil) }
	if err := f.moveRecords(ctx, sent, noCash, drop); err != nil {
		return false, fmt.Errorf("hand over what was delivered to %s: %w", p.name, err)
	}
	return true, nil
}

// applySelf applies b with what it gives back to this site added to the
// site's own inbound record (cash it had counted as sent).
func (f *Fed) applySelf(ctx context.Context, b *store.Batch, self inbound) error {
	if self.URLs > 0 || self.Cash > 0 || self.Virtual > 0 {
		key := inPrefix + f.o.Self
		old, err := f.st.User(key)
		if err != nil {
			return err
		}
		in, err := decodeInbound(old)
		if err != nil {
			return err
		}
		in.URLs += self.URLs
		in.Cash += self.Cash
		in.Virtual += self.Virtual
		b.Guard(key, old)
		b.PutUser(key, in.encode())
	}
	return f.apply(ctx, b)
}

// errNoInterim: a shard's reroute found a URL no site takes now (every
// site that could is down or sharded); its entry stays where it is.
var errNoInterim = errors.New("federation: no site takes these URLs now")

// rerouteMode says what of an outbox payload reroute sends on.
type rerouteMode int

const (
	withCash rerouteMode = iota // URLs, their cash, fetched-elsewhere records
	noCash                      // URLs and fetched-elsewhere records: the cash was delivered, or is in doubt
)

// reroute adds to b what re-sends an outbox payload to its hosts' owners
// as this site sees the federation now (what of it: mode): new outbox
// entries, or puts into this site's own crawl database for hosts it now
// owns (a shard's: those of the shard; those of its other shards go to
// their outboxes, Shard.Keep). The virtual page's share goes with the
// cash, and stays here.
func (f *Fed) reroute(ctx context.Context, b *store.Batch, payload []byte, mode rerouteMode, self *inbound) error {
	eb, err := Decode(payload, Limits{})
	if err != nil {
		return err
	}
	locs := map[string]location{}
	for _, h := range eb.Hosts {
		locs[h.Host] = location{key: h.Key, loc: locOf(h)}
	}
	by := map[string][]Put{}
	var virtual float64
	for _, p := range eb.Puts {
		if mode == noCash {
			p.Cash = 0
		}
		h := hostOf(p.URL)
		o := f.owner(h, locs[h])
		switch {
		case o == "" && f.site != nil, o == f.o.Self && f.site != nil && f.keep == nil:
			return errNoInterim // a shard keeps it: no site takes it now
		case o == "":
			o = f.o.Self // every site down: keep it here
		}
		by[o] = append(by[o], p)
	}
	if mode != noCash {
		virtual = eb.Virtual
	}
	// Fetched-elsewhere records follow their hosts too; those of hosts
	// this site now owns are dropped (it fetched them: they came from here).
	done := map[string][]FetchedURL{}
	for _, r := range eb.Fetched {
		h := hostOf(r.URL)
		if o := f.owner(h, locs[h]); o != "" && o != f.o.Self {
			done[o] = append(done[o], r)
		}
	}
	for o, recs := range done {
		for _, e := range f.fetchedEntries(o, recs, locs) {
			b.OutboxEnqueue(o, e)
		}
	}
	for o, puts := range by {
		if o == f.o.Self {
			if f.keep != nil {
				// A shard: the URLs of its own, the others to their
				// shards (still sent, by this shard's count).
				urls := make([]route.Remote, len(puts))
				for i, p := range puts {
					urls[i] = route.Remote{URL: p.URL, Cash: p.Cash, Depth: p.Depth}
				}
				kept, err := f.keep(ctx, urls, b)
				if err != nil {
					return err
				}
				puts = puts[:0]
				for _, u := range kept {
					puts = append(puts, Put{URL: u.URL, Cash: u.Cash, Depth: u.Depth})
				}
			}
			for _, p := range puts {
				b.UpsertCash(p.URL, p.Cash, p.Depth)
				self.Cash += p.Cash
			}
			self.URLs += uint64(len(puts))
			continue
		}
		for _, e := range f.entries(o, puts, 0, locs) {
			b.OutboxEnqueue(o, e)
		}
	}
	self.Virtual += virtual // the virtual share stays here
	return nil
}

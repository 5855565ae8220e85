package federation

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
}

func (o outbound) encode() []byte {
	b := binary.AppendUvarint(nil, o.Acked)
	b = binary.AppendUvarint(b, o.Batches)
	b = binary.AppendUvarint(b, o.URLs)
	return binary.AppendUvarint(b, o.Hits)
}

func decodeOutbound(b []byte) (outbound, error) {
	var vals [4]uint64
	if len(b) == 0 {
		return outbound{}, nil
	}
	for i := range vals {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return outbound{}, fmt.Errorf("federation: outbound record: bad counter %d", i)
		}
		vals[i], b = v, b[n:]
	}
	return outbound{vals[0], vals[1], vals[2], vals[3]}, nil
}

func (f *Fed) outboundOf(peer string) (outbound, error) {
	v, err := f.st.User(outPrefix + peer)
	if err != nil {
		return outbound{}, fmt.Errorf("federation: outbound state of %s: %w", peer, err)
	}
	return decodeOutbound(v)
}

func sentKey(peer string, seq uint64) string { return fmt.Sprintf("%s%s/%020d", sentPrefix, peer, seq) }

// pending is a batch on its way to a peer: retried as it is until the peer
// answers, so that a batch the peer applied but whose answer was lost is
// recognised as applied (same sequence number).
type pending struct {
	frame      []byte // AppendFrame of the entries
	seq, first uint64
	entries    []store.OutboxEntry
	urls       int // puts in the entries
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
		// federation differs) or has applied part of them: learn what it
		// applied, and send again later, re-routed.
		f.log.Warn("federation: batch refused", "peer", p.name, "seq", pd.seq, "err", err)
		f.mu.Lock()
		p.pend = nil
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
	entries, err := f.st.Outbox(p.name, 0, outboxScan)
	if err != nil || len(entries) == 0 {
		return nil, err
	}
	pd := &pending{first: entries[0].Seq}
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

// acked records a delivered batch: its entries leave the outbox (kept
// under fed/sent/ for a handover).
func (f *Fed) acked(ctx context.Context, p *peer, pd *pending) error {
	out, err := f.outboundOf(p.name)
	if err != nil {
		return err
	}
	b := store.NewBatch()
	for _, e := range pd.entries {
		b.OutboxAck(p.name, e.Seq)
		if f.name == "" { // a shard hands nothing over: it keeps no copy
			b.PutUser(sentKey(p.name, e.Seq), e.Payload)
		}
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
// has applied, and acknowledges the outbox entries they covered (a batch
// applied whose answer was lost, before a restart or a change of leader).
func (f *Fed) sync(ctx context.Context, p *peer, applied uint64) error {
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
			if f.name == "" {
				b.PutUser(sentKey(p.name, e.Seq), e.Payload)
			}
			n++
		}
		if n == 0 {
			p.synced = true
			return nil
		}
		out, err := f.outboundOf(p.name)
		if err != nil {
			return err
		}
		out.Acked = max(out.Acked, applied)
		b.PutUser(outPrefix+p.name, out.encode())
		if err := f.apply(ctx, b); err != nil {
			return err
		}
		f.log.Info("federation: outbox entries the peer had applied acknowledged", "peer", p.name, "entries", n, "applied", applied)
	}
}

// handOver moves p's outbox, and the URLs delivered to it before, to the
// next owners of its hosts: p has been suspect past the grace period. URLs
// delivered before go with no cash (p had it); they are new to their next
// owner unless it found them itself.
func (f *Fed) handOver(ctx context.Context, p *peer) (bool, error) {
	entries, err := f.st.Outbox(p.name, 0, 16)
	if err != nil {
		return false, err
	}
	var self inbound // what comes back to this site
	if len(entries) > 0 {
		b := store.NewBatch()
		for _, e := range entries {
			if err := f.reroute(b, e.Payload, false, &self); err != nil {
				return false, fmt.Errorf("hand over outbox entry %d of %s: %w", e.Seq, p.name, err)
			}
			b.OutboxAck(p.name, e.Seq)
		}
		return true, f.applySelf(ctx, b, self)
	}
	var keys []string
	var payloads [][]byte
	err = f.st.UserScan(sentPrefix+p.name+"/", func(k string, v []byte) error {
		if len(keys) < 16 {
			keys = append(keys, k)
			payloads = append(payloads, append([]byte(nil), v...))
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return false, err
	}
	b := store.NewBatch()
	for i, k := range keys {
		if err := f.reroute(b, payloads[i], true, &self); err != nil {
			return false, fmt.Errorf("hand over %s: %w", k, err)
		}
		b.PutUser(k, nil)
	}
	return true, f.applySelf(ctx, b, self)
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

// reroute adds to b what re-sends an outbox payload to its hosts' owners
// as this site sees the federation now: new outbox entries, or puts into
// this site's own crawl database for hosts it now owns. noCash sends the
// URLs without their cash (it was delivered already).
func (f *Fed) reroute(b *store.Batch, payload []byte, noCash bool, self *inbound) error {
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
		if noCash {
			p.Cash = 0
		}
		h := hostOf(p.URL)
		o := f.owner(h, locs[h])
		if o == "" {
			o = f.o.Self // every site down: keep it here
		}
		by[o] = append(by[o], p)
	}
	if !noCash {
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

package federation

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/partition"
)

// inPrefix keys, per sending site, what it has delivered here: the last
// batch applied (batches are applied in their sequence order, once) and
// the totals, in the crawl database's node table.
const inPrefix = "fed/in/"

// inbound is what one site has delivered here so far.
type inbound struct {
	Seq     uint64  // the last batch applied
	Batches uint64  // batches applied
	URLs    uint64  // puts received
	Cash    float64 // cash on the puts
	Virtual float64 // cash for the virtual page
}

func (in inbound) encode() []byte {
	b := binary.AppendUvarint(nil, in.Seq)
	b = binary.AppendUvarint(b, in.Batches)
	b = binary.AppendUvarint(b, in.URLs)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(in.Cash))
	return binary.BigEndian.AppendUint64(b, math.Float64bits(in.Virtual))
}

func decodeInbound(b []byte) (inbound, error) {
	var in inbound
	if len(b) == 0 {
		return in, nil
	}
	var vals [3]uint64
	for i := range vals {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return in, fmt.Errorf("federation: inbound record: bad counter %d", i)
		}
		vals[i], b = v, b[n:]
	}
	if len(b) != 16 {
		return in, errors.New("federation: inbound record: bad cash")
	}
	in.Seq, in.Batches, in.URLs = vals[0], vals[1], vals[2]
	in.Cash = math.Float64frombits(binary.BigEndian.Uint64(b))
	in.Virtual = math.Float64frombits(binary.BigEndian.Uint64(b[8:]))
	return in, nil
}

// Put applies a batch another site sent (see Receiver): the URLs this site
// does not know are inserted with their cash, the cash of known ones is
// added, and the virtual page's share is counted for the next update; the
// URLs the sender fetched for this site while it was down (Fetched) are
// recorded as fetched elsewhere, with no cash (store.Batch.FetchedElsewhere). A
// batch whose URLs this site does not own is refused whole (ErrNotOwner),
// as is one from a site not in the federation file; a batch applied before
// (a retry) is acknowledged without a change.
func (f *Fed) Put(ctx context.Context, from string, b *Batch) error {
	if _, ok := f.o.File.Site(from); !ok || from == f.o.Self {
		return fmt.Errorf("%w: site %q is not a peer in the federation file", ErrRefused, from)
	}
	sender := from // or one of its shards (the server checked the name)
	if b.From != "" && SiteOfSender(b.From) == from {
		sender = b.From
	}
	locs := make(map[string]location, len(b.Hosts))
	for _, h := range b.Hosts {
		locs[h.Host] = location{key: h.Key, loc: locOf(h)}
	}
	for i, p := range b.Puts {
		if err := f.mine(locs, "put", i, p.URL); err != nil {
			return err
		}
	}
	for i, r := range b.Fetched {
		if err := f.mine(locs, "fetched record", i, r.URL); err != nil {
			return err
		}
	}
	if f.o.Sharded != nil {
		return f.putSharded(ctx, sender, b, locs)
	}
	res, err := applyInbound(ctx, f.o.DB, sender, b, func(h string) (bool, error) {
		_, placed, err := f.cachedLoc(h)
		return placed, err // a record of the key alone gets the sender's place
	}, false)
	if err != nil || res == nil {
		if err == nil {
			f.stats.dupBatches.Add(1)
		}
		return err
	}
	for h, l := range locs {
		f.remember(h, l)
	}
	f.noteReceived(res.Index, len(b.Puts))
	if len(b.Fetched) > 0 {
		marked := 0
		for _, r := range res.Ops {
			if r.Marked {
				marked++
			}
		}
		f.log.Info("federation: URLs fetched by a site that held this site's hosts recorded", "from", from, "batch", b.Seq, "urls", len(b.Fetched), "generated_here", marked)
	}
	return nil
}

// applyInbound applies batch b from sender from to db, once: the URLs db
// does not know are inserted with their cash, the cash of known ones is
// added, the fetched-elsewhere records are recorded, the locations of the
// hosts not known (known) are recorded, and the sender's inbound record
// (fed/in/FROM: the last batch applied and the totals) moves on, all in
// one command guarded by that record. A batch applied before (a retry)
// changes nothing: the result is nil. A batch part of which was applied is
// refused (ErrRefused): the sender learns what from a probe.
func applyInbound(ctx context.Context, db *crawldb.DB, from string, b *Batch, known func(host string) (bool, error), fromShard bool) (*store.Result, error) {
	key := inPrefix + from
	st := db.Store()
	for attempt := 0; ; attempt++ {
		old, err := st.User(key)
		if err != nil {
			return nil, fmt.Errorf("federation: inbound state of %s: %w", from, err)
		}
		in, err := decodeInbound(old)
		if err != nil {
			return nil, err
		}
		if b.Seq <= in.Seq {
			return nil, nil // applied before: the sender missed the answer
		}
		if b.First != 0 && b.First <= in.Seq {
			// Part of it was applied in an earlier batch: the sender
			// learns what from a probe and sends the rest.
			return nil, fmt.Errorf("%w: batch %d..%d from %s overlaps what was applied (up to %d)", ErrRefused, b.First, b.Seq, from, in.Seq)
		}
		cmd := store.NewBatch()
		cmd.Guard(key, old)
		if err := fillInbound(cmd, key, in, b, known, fromShard); err != nil {
			return nil, err
		}
		res, err := db.Apply(ctx, cmd)
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if errors.Is(err, store.ErrGuard) && attempt < 5 {
			continue // the same sender's retry raced this one
		}
		if errors.Is(err, store.ErrBadOp) {
			return nil, fmt.Errorf("%w: %w", ErrRefused, err)
		}
		if err != nil {
			return nil, fmt.Errorf("federation: apply batch %d from %s: %w", b.Seq, from, err)
		}
		return res, nil
	}
}

// fillInbound adds to cmd what applies b on top of in, the inbound
// record at key: the puts, the fetched-elsewhere records, the locations of
// hosts not known (known), and the record moved on to b.Seq. A batch from
// another shard of this site (fromShard) places on the globe only the
// hosts it says are on it: the others are recorded by their key alone
// (a shard outside a federation knows no more), for a Fed to place later.
func fillInbound(cmd *store.Batch, key string, in inbound, b *Batch, known func(host string) (bool, error), fromShard bool) error {
	var cash float64
	for _, p := range b.Puts {
		cmd.UpsertCash(p.URL, p.Cash, p.Depth)
		cash += p.Cash
	}
	for _, r := range b.Fetched {
		cmd.FetchedElsewhere(r.URL, r.Status)
	}
	for _, h := range b.Hosts {
		if ok, err := known(h.Host); err != nil {
			return err
		} else if !ok {
			cmd.PutUser(locPrefix+h.Host, encodeLocation(location{key: h.Key, loc: locOf(h), unplaced: fromShard && !h.Known}))
		}
	}
	in.Seq, in.Batches, in.URLs = b.Seq, in.Batches+1, in.URLs+uint64(len(b.Puts))
	in.Cash += cash
	in.Virtual += b.Virtual
	cmd.PutUser(key, in.encode())
	return nil
}

// placedIn reports whether st has a record of host that places it (a
// site's batch replaces a record of the key alone).
func placedIn(st *store.Store) func(host string) (bool, error) {
	return func(h string) (bool, error) {
		l, ok, err := recordOf(st, h)
		return ok && !l.unplaced, err
	}
}

// recordedIn reports whether st has any record of host (a shard's batch
// replaces none): one read, nothing decoded, on every shard batch's hosts.
func recordedIn(st *store.Store) func(host string) (bool, error) {
	return func(h string) (bool, error) {
		v, err := st.User(locPrefix + h)
		return v != nil, err
	}
}

// mine checks that the i-th URL u of a batch (a put or a fetched record)
// is of a host this site owns, located in the batch (locs).
func (f *Fed) mine(locs map[string]location, what string, i int, u string) error {
	h := hostOf(u)
	l, ok := locs[h]
	if !ok {
		return fmt.Errorf("%w: %s %d (%.200s): no location for host %q in the batch", ErrRefused, what, i, u, h)
	}
	if !f.takes(f.o.Self, h, l) {
		return fmt.Errorf("%w: %s %d: %.200s belongs to site %s", ErrNotOwner, what, i, u, f.owner(h, l))
	}
	return nil
}

// takes reports whether site takes URLs of host h (located at
// l) as this site sees the federation: it owns h now, or is its primary
// owner (a batch sent before the sites' views of who is down agreed).
func (f *Fed) takes(site, h string, l location) bool {
	return f.owner(h, l) == site || f.primary(h, l) == site
}

func locOf(h HostLoc) partition.Location {
	return partition.Location{Lat: h.Lat, Lon: h.Lon, Known: h.Known}
}

// Inbound returns the cash other sites have sent here so far (see
// route.Inbound).
func (f *Fed) Inbound() (puts, virtual float64, err error) {
	err = f.st.UserScan(inPrefix, func(k string, v []byte) error {
		in, err := decodeInbound(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		puts += in.Cash
		virtual += in.Virtual
		return nil
	})
	return puts, virtual, err
}

// received returns the batches applied here so far, from every site.
func (f *Fed) received() (uint64, error) {
	var n uint64
	err := f.st.UserScan(inPrefix, func(k string, v []byte) error {
		in, err := decodeInbound(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		n += in.Batches
		return nil
	})
	return n, err
}

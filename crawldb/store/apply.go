package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/cockroachdb/pebble/v2"
)

// Apply applies cmd, the command at log index (> AppliedIndex). A command
// that does not decode is rejected in Result.Err and changes nothing but the
// applied index. An error return means Pebble failed: the store refuses
// every later command, and the caller must stop the node.
//
// The URLs a command touches are read in key order through one iterator,
// changed in memory in operation order, and written once each in a single
// batch with the frontier and host index changes and the log index.
func (s *Store) Apply(index uint64, cmd []byte) (*Result, error) {
	res, err := s.ApplyBatch([]Entry{{Index: index, Cmd: cmd}})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// Entry is one command of the log with its index.
type Entry struct {
	Index uint64
	Cmd   []byte
}

// ApplyBatch applies consecutive log entries as Apply does, all in one
// Pebble batch: the URLs and hosts they share are read and written once.
// Entries at or below AppliedIndex are skipped. Results are in entry order.
func (s *Store) ApplyBatch(entries []Entry) ([]*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	if s.mu.failed != nil {
		return nil, s.mu.failed
	}
	results := make([]*Result, len(entries))
	bufs := getApplyBufs()
	ops := bufs.ops[:0]
	var user userOverlay // node-layer keys written by the batch's earlier commands, for guards
	var bounds []int     // bounds[i]: end of entry i's ops
	size := 256
	last := s.applied.Load()
	for i, e := range entries {
		res := &Result{Index: e.Index}
		results[i] = res
		if e.Index <= last {
			res.Skipped = true
			bounds = append(bounds, len(ops))
			continue
		}
		last = e.Index
		n := len(ops)
		var derr error
		ops, derr = decodeCommand(e.Cmd, ops)
		if derr == nil {
			derr = user.check(s, ops[n:])
		}
		if derr != nil {
			ops = ops[:n] // a rejected command contributes nothing
			res.Err = derr
		}
		bounds = append(bounds, len(ops))
		size += len(e.Cmd) * 3
	}
	bufs.ops = ops[:0]
	if last == s.applied.Load() {
		applyBufPool.Put(bufs)
		return results, nil // all skipped
	}
	c := s.mu.counts
	b := s.ks.newBatch(s.db, size, s.mu.kbuf)
	defer b.Close()
	a := applier{s: s, b: &b, c: &c, writes: bufs.writes[:0], pool: bufs.slots[:0], slots: bufs.slotMap, hosts: bufs.hostMap}
	if len(ops) > 0 {
		opRes, err := a.run(ops)
		if err != nil {
			s.hostCache.reset()
			return nil, s.fail(last, err)
		}
		from := 0
		for i, res := range results {
			if !res.Skipped && res.Err == nil {
				res.Ops = opRes[from:bounds[i]:bounds[i]]
			}
			from = bounds[i]
		}
	}
	var ib [8]byte
	binary.BigEndian.PutUint64(ib[:], last)
	if err := b.Set(keyApplied, ib[:], nil); err != nil {
		return nil, s.fail(last, err)
	}
	if err := b.Set(keyCounts, c.appendTo(s.mu.vbuf[:0]), nil); err != nil {
		return nil, s.fail(last, err)
	}
	if c.scheduled != s.mu.counts.scheduled || c.parked != s.mu.counts.parked {
		if err := b.Set(keyRefetch, c.appendRefetch(nil), nil); err != nil {
			return nil, s.fail(last, err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return nil, s.fail(last, err)
	}
	s.mu.kbuf = b.kbuf
	s.mu.counts = c
	for _, h := range a.newHosts {
		s.hostCache.put(h.rev, h.st)
	}
	s.applied.Store(last)
	// Reused by the next batch: only the part this batch used is zeroed
	// (the buffers keep the capacity of the largest command, and most
	// commands are small: zeroing all of it cost a sharded node ~8% of
	// its CPU).
	bufs.writes = clearUsed(a.writes, max(a.writesHigh, len(a.writes)))
	bufs.slots = clearUsed(a.pool, len(a.pool))
	clear(a.slots)
	clear(a.hosts)
	bufs.slotMap, bufs.hostMap = a.slots, a.hosts
	applyBufPool.Put(bufs)
	return results, nil
}

// applyBufs are the buffers a batch's apply reuses, sized by the largest
// command seen (an update's 10,000 operations: a few MB). They are shared
// by every store of the process through applyBufPool, not kept per store:
// a node holding 48 shards kept 48 sets (~480 MB of its heap), where only
// as many as apply at once are needed. A batch that fails drops its set.
type applyBufs struct {
	ops     []op
	writes  []write
	slots   []slot
	slotMap map[string]*slot
	hostMap map[string]*hostDelta
}

var applyBufPool = sync.Pool{New: func() any { return new(applyBufs) }}

// getApplyBufs takes a set of apply buffers from the pool.
func getApplyBufs() *applyBufs { return applyBufPool.Get().(*applyBufs) }

// slot is one URL a command touches: its state before and as changed.
type slot struct {
	key       []byte
	parts     urlParts
	raw       []byte
	orig, cur URLRecord
	origFound bool
	curFound  bool
	dirty     bool
	// The URL's fetched-elsewhere mark (0: none), once read (markKnown);
	// markDirty: changed by this batch.
	mark                 Status
	markKnown, markDirty bool
}

// hostDelta is what a command did to one host's frontier.
type hostDelta struct {
	rev      []byte
	fetched  uint64
	nAdded   int      // frontier entries the command adds
	maxAdded float64  // and the best of their scores
	deleted  [][]byte // frontier keys the command deletes
	maxDel   float64
	anyDel   bool
}

type applier struct {
	s     *Store
	b     *batch
	c     *counts
	slots map[string]*slot
	hosts map[string]*hostDelta
	sent  map[uint64]uint64 // fingerprints added by this command → seq
	seqFP map[uint64]uint64 // and back
	out   map[string]bool   // outbox keys added (true) or removed (false) by this command
	// newHosts are the host states this command writes, for the cache once it commits.
	newHosts []cachedHost
	writes   []write
	// writesHigh is the most writes buffered at once (flush and a prefix
	// deletion shorten writes): what the next batch must zero.
	writesHigh int
	pool       []slot // the slots load used (its length), in a buffer reused by batches
}

// clearUsed zeroes the first used elements of a reused buffer (dropping
// references to the last batch's commands) and returns it empty.
func clearUsed[T any](s []T, used int) []T {
	clear(s[:used])
	return s[:0]
}

func (a *applier) run(ops []op) ([]OpResult, error) {
	if cap(a.writes) < 3*len(ops)+16 {
		a.writes = make([]write, 0, 3*len(ops)+16)
	}
	if err := a.load(ops); err != nil {
		return nil, err
	}
	results := make([]OpResult, len(ops))
	for i := range ops {
		r, err := a.apply(&ops[i])
		if err != nil {
			return nil, err
		}
		results[i] = r
	}
	if err := a.writeURLs(); err != nil {
		return nil, err
	}
	if err := a.writeHosts(); err != nil {
		return nil, err
	}
	return results, a.flush()
}

// load reads every URL record the command touches, in key order.
func (a *applier) load(ops []op) error {
	if a.slots == nil {
		a.slots = make(map[string]*slot, len(ops))
	}
	if cap(a.pool) < len(ops) { // one allocation for the records; never grown while slots point into it
		a.pool = make([]slot, 0, len(ops))
	}
	pool := a.pool[:0]
	var order []*slot
	for i := range ops {
		o := &ops[i]
		if o.rawURL == nil {
			continue
		}
		key := o.url.urlKey(nil)
		sl := a.slots[string(key)]
		if sl == nil {
			pool = append(pool, slot{key: key, parts: o.url, raw: o.rawURL})
			sl = &pool[len(pool)-1]
			a.slots[string(key)] = sl
			order = append(order, sl)
		}
		o.slot = sl
	}
	a.pool = pool
	if len(order) == 0 {
		return nil
	}
	slices.SortFunc(order, func(x, y *slot) int { return bytes.Compare(x.key, y.key) })
	it, err := a.s.ks.newIter([]byte{pURL}, []byte{pURL + 1})
	if err != nil {
		return err
	}
	for _, sl := range order {
		if !a.s.urls.mayContain(sl.key) {
			continue // surely new
		}
		if it.SeekPrefixGE(sl.key) && bytes.Equal(it.Key(), sl.key) {
			if err := decodeRecord(it.Value(), &sl.orig); err != nil {
				it.Close()
				return fmt.Errorf("record %q: %w", sl.key, err)
			}
			sl.origFound = true
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, sl := range order {
		sl.cur, sl.curFound = sl.orig, sl.origFound
	}
	return nil
}

func (a *applier) host(p *urlParts) *hostDelta {
	if a.hosts == nil {
		a.hosts = map[string]*hostDelta{}
	}
	hd := a.hosts[p.host]
	if hd == nil {
		hd = &hostDelta{rev: appendRevHost(nil, p.host)}
		a.hosts[p.host] = hd
	}
	return hd
}

func (a *applier) move(rec *URLRecord, to Status) {
	a.c.byStatus[rec.Status]--
	a.c.byStatus[to]++
	rec.Status = to
	if to != StatusUnfetched {
		rec.Parked = false
	}
}

func (a *applier) apply(o *op) (OpResult, error) {
	var res OpResult
	if o.rawURL != nil {
		sl := o.slot
		rec := &sl.cur
		switch o.t {
		case OpUpsertCash, OpPutIfAbsent:
			if !sl.curFound {
				*rec = URLRecord{Status: StatusUnfetched, Cash: o.cash, Depth: o.depth, FP: xxhash.Sum64(o.raw())}
				sl.curFound, sl.dirty = true, true
				a.c.urls++
				a.c.byStatus[StatusUnfetched]++
				res.New, res.Applied = true, true
				return res, nil
			}
			if o.t == OpPutIfAbsent {
				return res, nil
			}
			rec.Cash += o.cash
			rec.Depth = min(rec.Depth, o.depth)
			sl.dirty, res.Applied = true, true
		case OpHandOver:
			if !sl.curFound || rec.Status != StatusUnfetched {
				return res, nil
			}
			rec.Cash -= min(o.cash, rec.Cash)
			sl.dirty, res.Applied = true, true
			if rec.Cash == 0 {
				a.c.urls--
				a.c.byStatus[StatusUnfetched]--
				sl.curFound = false
			}
		case OpMarkGenerated:
			if !sl.curFound || !rec.inFrontier() {
				return res, nil
			}
			a.move(rec, StatusGenerated)
			rec.Round = o.round
			sl.dirty, res.Applied = true, true
			return res, a.set(genKey(nil, o.round, &sl.parts), nil, nil)
		case OpRequeue:
			if !sl.curFound || rec.Status != StatusGenerated {
				return res, nil
			}
			m, err := a.markOf(sl)
			if err != nil {
				return res, err
			}
			switch {
			case m != 0:
				a.fetchedElsewhere(sl, m) // fetched by another site meanwhile
			case rec.Due:
				a.move(rec, StatusFetched) // a refetch: due again
			default:
				a.move(rec, StatusUnfetched)
			}
			sl.dirty, res.Applied = true, true
			return res, a.del(genKey(nil, rec.Round, &sl.parts), nil)
		case OpFetchedElsewhere:
			if !sl.curFound {
				*rec = URLRecord{Status: o.status, FP: xxhash.Sum64(o.raw())}
				sl.curFound, sl.dirty = true, true
				a.c.urls++
				a.c.byStatus[o.status]++
				a.host(&sl.parts).fetched++
				res.New, res.Applied = true, true
				return res, nil
			}
			switch rec.Status {
			case StatusUnfetched:
				a.fetchedElsewhere(sl, o.status)
				sl.dirty, res.Applied = true, true
			case StatusGenerated:
				m, err := a.markOf(sl)
				if err != nil {
					return res, err
				}
				if m == 0 {
					a.setMark(sl, o.status)
					res.Applied = true
				}
				res.Marked = true
			}
		case OpRevisit:
			if !sl.curFound || rec.Status != StatusFetched {
				return res, nil
			}
			moved := min(o.cash, rec.Cash)
			rec.History += moved
			rec.Cash -= moved
			sl.dirty, res.Applied = true, true
		case OpPark:
			if !sl.curFound || rec.Status != StatusUnfetched || rec.Parked {
				return res, nil
			}
			rec.Parked = true
			sl.dirty, res.Applied = true, true
		case OpMakeDue:
			if !sl.curFound || !rec.scheduled() || rec.NextFetch.UnixMilli() > o.at {
				return res, nil
			}
			rec.Due, rec.DueScore = true, o.cash
			sl.dirty, res.Applied = true, true
		case OpFetchResult, OpRoundFetch, OpRoundFetchSched:
			if !sl.curFound {
				return res, nil
			}
			if o.t != OpFetchResult && (rec.Status != StatusGenerated || rec.Round != o.round) {
				return res, nil
			}
			if rec.Status == StatusGenerated {
				if err := a.del(genKey(nil, rec.Round, &sl.parts), nil); err != nil {
					return res, err
				}
				m, err := a.markOf(sl)
				if err != nil {
					return res, err
				}
				if m != 0 && o.status == StatusUnfetched {
					// A retry of a URL another site fetched meanwhile:
					// it takes that site's status, with its cash.
					a.fetchedElsewhere(sl, m)
					sl.dirty, res.Applied = true, true
					return res, nil
				}
				if m != 0 {
					a.setMark(sl, 0) // fetched here too: this fetch counts
				}
			}
			rec.HTTPStatus = o.http
			if o.at != 0 {
				rec.FetchedAt = time.UnixMilli(o.at).UTC()
			}
			if o.status == StatusUnfetched { // a retry: back to the frontier with its cash
				if rec.Retries < math.MaxUint16 {
					rec.Retries++
				}
				if rec.Due {
					a.move(rec, StatusFetched) // a refetch: due again
				} else {
					a.move(rec, StatusUnfetched)
				}
			} else {
				moved := rec.Cash
				if o.t != OpFetchResult {
					moved = min(o.cash, rec.Cash)
				}
				rec.History += moved
				rec.Cash -= moved
				rec.ContentFP = o.fp
				a.move(rec, o.status)
				if !rec.Due { // a refetch uses none of the host's page budget
					a.host(&sl.parts).fetched++
				}
				rec.Due, rec.DueScore = false, 0
				if o.t == OpRoundFetchSched {
					applySchedule(rec, &o.sched)
				}
			}
			sl.dirty, res.Applied = true, true
		}
		return res, nil
	}
	switch o.t {
	case OpPutHost:
		key := append([]byte{pHost}, appendRevHost(nil, string(o.name))...)
		res.Applied = true
		return res, a.set(key, appendHost(nil, &o.host), nil)
	case OpSentCheckAdd:
		present, err := a.sentHas(o.fp)
		if err != nil || present {
			res.Present = present
			return res, err
		}
		if a.sent == nil {
			a.sent, a.seqFP = map[uint64]uint64{}, map[uint64]uint64{}
		}
		c := a.c
		c.sentSeq++
		c.sentSize++
		a.sent[o.fp], a.seqFP[c.sentSeq] = c.sentSeq, o.fp
		if err := a.set(fpKey(nil, pSent, o.fp), binary.BigEndian.AppendUint64(nil, c.sentSeq), nil); err != nil {
			return res, err
		}
		if err := a.set(fpKey(nil, pSentSeq, c.sentSeq), binary.BigEndian.AppendUint64(nil, o.fp), nil); err != nil {
			return res, err
		}
		for c.sentSize > o.seq { // evict the oldest: sequence numbers are contiguous
			oldest := c.sentSeq - c.sentSize + 1
			fp, ok := a.seqFP[oldest]
			if !ok {
				v, err := a.s.value(fpKey(nil, pSentSeq, oldest))
				if err != nil || len(v) != 8 {
					return res, fmt.Errorf("sent cache entry %d: %v", oldest, err)
				}
				fp = binary.BigEndian.Uint64(v)
			}
			delete(a.seqFP, oldest)
			a.sent[fp] = 0 // 0: removed by this command
			if err := a.del(fpKey(nil, pSentSeq, oldest), nil); err != nil {
				return res, err
			}
			if err := a.del(fpKey(nil, pSent, fp), nil); err != nil {
				return res, err
			}
			c.sentSize--
		}
		res.Applied = true
		return res, nil
	case OpOutboxEnqueue:
		a.c.outSeq++
		a.c.outbox++
		key := outboxKey(o.name, a.c.outSeq)
		a.outMark(key, true)
		res.Seq, res.Applied = a.c.outSeq, true
		return res, a.set(key, o.payload, nil)
	case OpOutboxAck:
		key := outboxKey(o.name, o.seq)
		present, ok := a.out[string(key)]
		if !ok {
			var err error
			if present, err = a.s.has(key); err != nil {
				return res, err
			}
		}
		if !present {
			return res, nil
		}
		a.outMark(key, false)
		a.c.outbox--
		res.Applied = true
		return res, a.del(key, nil)
	case OpPutRound:
		res.Applied = true
		return res, a.set(keyRound, o.payload, nil)
	case OpNearDup:
		p, _ := splitURL(string(o.name)) // checked by decodeCommand
		res.Applied = true
		return res, a.set(nearDupKey(&p), o.payload, nil)
	case OpDirectives:
		p, _ := splitURL(string(o.name)) // checked by decodeCommand
		res.Applied = true
		if len(o.payload) == 0 {
			return res, a.del(directivesKey(&p), nil)
		}
		return res, a.set(directivesKey(&p), o.payload, nil)
	case OpPutDomain:
		v := binary.BigEndian.AppendUint64(nil, math.Float64bits(o.lat))
		v = binary.BigEndian.AppendUint64(v, math.Float64bits(o.lon))
		res.Applied = true
		return res, a.set(append([]byte{pDomain}, o.name...), v, nil)
	case OpPutUser:
		key := append([]byte{pUser}, o.name...)
		res.Applied = true
		if len(o.payload) == 0 {
			return res, a.del(key, nil)
		}
		return res, a.set(key, o.payload, nil)
	case OpGuard:
		res.Applied = true // checked before the command was accepted (userOverlay.check)
		return res, nil
	case OpDeleteUserPrefix:
		start := append([]byte{pUser}, o.name...)
		end := prefixEnd(start)
		// Changes buffered by earlier operations to keys in the range
		// would be written after the range deletion: drop them here.
		a.writesHigh = max(a.writesHigh, len(a.writes))
		kept := a.writes[:0]
		for _, w := range a.writes {
			if bytes.Compare(w.key, start) >= 0 && (end == nil || bytes.Compare(w.key, end) < 0) {
				continue
			}
			kept = append(kept, w)
		}
		a.writes = kept
		res.Applied = true
		return res, a.b.DeleteRange(start, end, nil)
	}
	return res, fmt.Errorf("unknown op %d", o.t)
}

func (o *op) raw() []byte { return o.rawURL }

// applySchedule sets rec's refetch schedule from a fetch's.
func applySchedule(rec *URLRecord, sc *opSchedule) {
	rec.NextFetch = time.Time{}
	if sc.next != 0 {
		rec.NextFetch = time.UnixMilli(sc.next).UTC()
	}
	rec.Interval = time.Duration(sc.interval)
	rec.ETag, rec.LastModified = string(sc.etag), string(sc.lastMod)
	rec.Watched = time.Duration(sc.watched)
	switch sc.change {
	case ChangeChanged:
		if rec.Changed < math.MaxUint32 {
			rec.Changed++
		}
	case ChangeUnchanged:
		if rec.Unchanged < math.MaxUint32 {
			rec.Unchanged++
		}
	}
}

// fetchedElsewhere gives an unfetched or generated URL the final status
// another site recorded for it, keeping its cash, and drops its mark.
func (a *applier) fetchedElsewhere(sl *slot, status Status) {
	a.move(&sl.cur, status)
	a.host(&sl.parts).fetched++
	if sl.mark != 0 {
		a.setMark(sl, 0)
	}
}

// markOf returns the fetched-elsewhere mark of a URL (0: none), reading
// it only while the store holds marks.
func (a *applier) markOf(sl *slot) (Status, error) {
	if sl.markKnown {
		return sl.mark, nil
	}
	sl.markKnown = true
	if a.c.marks == 0 {
		return 0, nil
	}
	v, err := a.s.value(markKey(sl.key))
	if err != nil {
		return 0, err
	}
	switch {
	case v == nil:
	case len(v) == 1 && Status(v[0]) >= StatusFetched && Status(v[0]) < statusCount:
		sl.mark = Status(v[0])
	default:
		return 0, fmt.Errorf("fetched-elsewhere mark of %q: %w", sl.key, errBadValue)
	}
	return sl.mark, nil
}

// setMark sets (status) or drops (0) a URL's fetched-elsewhere mark; the
// mark must have been read (markOf).
func (a *applier) setMark(sl *slot, status Status) {
	switch {
	case sl.mark == 0 && status != 0:
		a.c.marks++
	case sl.mark != 0 && status == 0:
		a.c.marks--
	}
	sl.mark, sl.markDirty = status, true
}

func (a *applier) sentHas(fp uint64) (bool, error) {
	if seq, ok := a.sent[fp]; ok {
		return seq != 0, nil
	}
	return a.s.has(fpKey(nil, pSent, fp))
}

func (a *applier) outMark(key []byte, present bool) {
	if a.out == nil {
		a.out = map[string]bool{}
	}
	a.out[string(key)] = present
}

// writeURLs writes each changed record once, with its frontier entries.
func (a *applier) writeURLs() error {
	var vbuf []byte
	for _, sl := range a.slots {
		if sl.markDirty {
			var err error
			if sl.mark != 0 {
				err = a.set(markKey(sl.key), []byte{byte(sl.mark)}, nil)
			} else {
				err = a.del(markKey(sl.key), nil)
			}
			if err != nil {
				return err
			}
		}
		if !sl.dirty {
			continue
		}
		switch {
		case sl.curFound:
			if !sl.origFound {
				a.s.urls.add(sl.key) // before the commit: a key of a failed batch is only a false positive
			}
			vbuf = sl.cur.appendTo(make([]byte, 0, 64))
			if err := a.set(sl.key, vbuf, nil); err != nil {
				return err
			}
		case sl.origFound: // forgotten (HandOver)
			if err := a.del(sl.key, nil); err != nil {
				return err
			}
		default: // new and forgotten in one command
			continue
		}
		if err := a.writeDue(sl); err != nil {
			return err
		}
		if was, is := sl.origFound && sl.orig.Parked, sl.curFound && sl.cur.Parked; was != is {
			if is {
				a.c.parked++
			} else {
				a.c.parked--
			}
		}
		wasIn := sl.origFound && sl.orig.inFrontier()
		isIn := sl.curFound && sl.cur.inFrontier()
		origScore, curScore := sl.orig.frontierScore(), sl.cur.frontierScore()
		same := wasIn && isIn && origScore == curScore && sl.orig.Due == sl.cur.Due
		if same && sl.orig.Depth == sl.cur.Depth {
			continue
		}
		hd := a.host(&sl.parts)
		if wasIn && !same {
			k := sl.parts.frontierKey(nil, origScore)
			if err := a.del(k, nil); err != nil {
				return err
			}
			hd.deleted = append(hd.deleted, k)
			if !hd.anyDel || origScore > hd.maxDel {
				hd.maxDel = origScore
			}
			hd.anyDel = true
		}
		if isIn {
			k := sl.parts.frontierKey(nil, curScore)
			v := binary.AppendUvarint(nil, uint64(sl.cur.Depth))
			if sl.cur.Due {
				v = append(v, frontierRefetch)
			}
			if err := a.set(k, v, nil); err != nil {
				return err
			}
			if !same {
				hd.maxAdded = max(hd.maxAdded, curScore)
				hd.nAdded++
			}
		}
	}
	return nil
}

// frontierRefetch, after the depth in a frontier entry's value, marks a
// URL due for a refetch (FrontierEntry.Refetch).
const frontierRefetch = 1

// writeDue keeps a URL's entry in the refetch index (pDue) and the
// refetch counts in step with its record.
func (a *applier) writeDue(sl *slot) error {
	was := sl.origFound && sl.orig.scheduled()
	is := sl.curFound && sl.cur.scheduled()
	if was && is && sl.orig.NextFetch.UnixMilli() == sl.cur.NextFetch.UnixMilli() {
		return nil
	}
	c := a.c
	if was {
		c.scheduled--
		if err := a.del(sl.parts.dueKey(nil, sl.orig.NextFetch), nil); err != nil {
			return err
		}
	}
	if is {
		c.scheduled++
		if err := a.set(sl.parts.dueKey(nil, sl.cur.NextFetch), nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// writeHosts updates each touched host's frontier state and its place in
// the host priority index.
func (a *applier) writeHosts() error {
	for _, hd := range a.hosts {
		xkey := append([]byte{pHostFr}, hd.rev...)
		st, ok := a.s.hostCache.get(hd.rev)
		if !ok {
			v, err := a.s.value(xkey)
			if err != nil {
				return err
			}
			if v != nil {
				if st, err = decodeHostState(v); err != nil {
					return fmt.Errorf("host state %q: %w", hd.rev, err)
				}
			}
		}
		had := st.frontier > 0
		oldBest := st.best
		in, newBest := false, 0.0
		if hd.nAdded > 0 {
			newBest, in = hd.maxAdded, true
		}
		switch {
		case !had:
		case !hd.anyDel || hd.maxDel < oldBest:
			newBest, in = max(newBest, oldBest), true // the old best entry is still there
		case in && newBest >= oldBest:
			// every surviving entry scores at most oldBest: an added one is best
		default:
			best, found, err := a.firstSurvivor(hd)
			if err != nil {
				return err
			}
			if found {
				newBest, in = max(newBest, best), true
			}
		}
		if !in {
			newBest = 0
		}
		if had && (!in || newBest != oldBest) {
			if err := a.del(hostPrioKey(nil, oldBest, hd.rev), nil); err != nil {
				return err
			}
		}
		if in && (!had || newBest != oldBest) {
			if err := a.set(hostPrioKey(nil, newBest, hd.rev), nil, nil); err != nil {
				return err
			}
		}
		if in == had && newBest == oldBest && hd.fetched == 0 {
			continue // nothing of the host's state changed: no write
		}
		st.best = newBest
		st.frontier = 0
		if in {
			st.frontier = 1
		}
		st.fetched += hd.fetched
		if err := a.set(xkey, st.appendTo(nil), nil); err != nil {
			return err
		}
		a.newHosts = append(a.newHosts, cachedHost{rev: hd.rev, st: st})
	}
	return nil
}

// firstSurvivor returns the best score among the host's stored frontier
// entries that this command does not delete.
func (a *applier) firstSurvivor(hd *hostDelta) (float64, bool, error) {
	prefix := append(append([]byte{pFrontier}, hd.rev...), 0)
	it, err := a.s.ks.newIter(prefix, prefixEnd(prefix))
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	deleted := make(map[string]bool, len(hd.deleted))
	for _, d := range hd.deleted {
		deleted[string(d)] = true
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if deleted[string(k)] {
			continue
		}
		if len(k) < len(prefix)+8 {
			return 0, false, fmt.Errorf("frontier key %q too short", k)
		}
		return scoreFromBits(binary.BigEndian.Uint64(k[len(prefix):])), true, nil
	}
	return 0, false, it.Error()
}

type cachedHost struct {
	rev []byte
	st  hostState
}

// hostCache keeps the per-host frontier state of recently touched hosts in
// memory, so that a command does not read it back from Pebble. It mirrors
// committed state only (filled after a commit), and is dropped whole when
// full: it is a cache, never the truth.
type hostCache struct {
	m   map[string]hostState
	max int
}

const hostCacheMax = 1 << 20

func (c *hostCache) get(rev []byte) (hostState, bool) {
	st, ok := c.m[string(rev)]
	return st, ok
}

func (c *hostCache) put(rev []byte, st hostState) {
	if c.m == nil || len(c.m) >= hostCacheMax {
		c.m = make(map[string]hostState)
	}
	c.m[string(rev)] = st
}

func (c *hostCache) reset() { c.m = nil }

// write is one buffered change of a command.
type write struct {
	key, val []byte
	seq      int // order of the change, so that a later change of a key wins
	del      bool
}

// set and del buffer a change; flush writes them to the batch in key order,
// so that Pebble's memtable inserts walk forward instead of seeking from
// the top for every key. Values must not be reused before flush.
func (a *applier) set(key, val []byte, _ *pebble.WriteOptions) error {
	a.writes = append(a.writes, write{key: key, val: val, seq: len(a.writes)})
	return nil
}

func (a *applier) del(key []byte, _ *pebble.WriteOptions) error {
	a.writes = append(a.writes, write{key: key, del: true, seq: len(a.writes)})
	return nil
}

func (a *applier) flush() error {
	slices.SortFunc(a.writes, func(x, y write) int {
		if c := bytes.Compare(x.key, y.key); c != 0 {
			return c
		}
		return x.seq - y.seq
	})
	for _, w := range a.writes {
		var err error
		if w.del {
			err = a.b.Delete(w.key, nil)
		} else {
			err = a.b.Set(w.key, w.val, nil)
		}
		if err != nil {
			return err
		}
	}
	a.writesHigh = max(a.writesHigh, len(a.writes))
	a.writes = a.writes[:0]
	return nil
}

// userOverlay is what the earlier commands of one ApplyBatch did to the
// node layer's keys, so that a later command's guards see it.
type userOverlay struct {
	vals    map[string][]byte // nil value: deleted
	deleted []string          // prefixes deleted, for keys not in vals
}

func (u *userOverlay) get(s *Store, key string) ([]byte, error) {
	if v, ok := u.vals[key]; ok {
		return v, nil
	}
	for _, p := range u.deleted {
		if strings.HasPrefix(key, p) {
			return nil, nil
		}
	}
	return s.value(append([]byte{pUser}, key...))
}

// check evaluates a decoded command's guards in operation order, against
// the store as the batch's earlier commands and the command's own earlier
// operations leave it; if they hold, the command's node-layer writes are
// added to the overlay.
func (u *userOverlay) check(s *Store, ops []op) error {
	guarded := false
	for i := range ops {
		if ops[i].t == OpGuard {
			guarded = true
			break
		}
	}
	if !guarded && u.vals == nil && u.deleted == nil {
		// No guard here and none could be affected yet: record writes only
		// if a later command might guard on them (cheap: user ops are few).
		u.record(ops)
		return nil
	}
	// Work on a copy so a failed guard leaves the overlay as it was.
	tmp := userOverlay{vals: make(map[string][]byte, len(u.vals)), deleted: append([]string(nil), u.deleted...)}
	for k, v := range u.vals {
		tmp.vals[k] = v
	}
	for i := range ops {
		o := &ops[i]
		switch o.t {
		case OpGuard:
			v, err := tmp.get(s, string(o.name))
			if err != nil {
				return err
			}
			if !bytes.Equal(v, o.payload) {
				return fmt.Errorf("%w: %.200q holds %.100q, not %.100q", ErrGuard, o.name, v, o.payload)
			}
		default:
			tmp.record(ops[i : i+1])
		}
	}
	*u = tmp
	return nil
}

// record notes the node-layer writes of ops.
func (u *userOverlay) record(ops []op) {
	for i := range ops {
		o := &ops[i]
		switch o.t {
		case OpPutUser:
			if u.vals == nil {
				u.vals = map[string][]byte{}
			}
			if len(o.payload) == 0 {
				u.vals[string(o.name)] = nil
			} else {
				u.vals[string(o.name)] = o.payload
			}
		case OpDeleteUserPrefix:
			p := string(o.name)
			for k := range u.vals {
				if strings.HasPrefix(k, p) {
					u.vals[k] = nil
				}
			}
			u.deleted = append(u.deleted, p)
		}
	}
}

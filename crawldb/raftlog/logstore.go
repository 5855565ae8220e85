package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

var _ raft.LogStore = (*Store)(nil)

// FirstIndex returns the smallest log index stored, 0 if there are none. It
// reads an in-memory cache and does not touch Pebble.
func (s *Store) FirstIndex() (uint64, error) {
	if err := s.checkFast(); err != nil {
		return 0, err
	}
	return s.first.Load(), nil
}

// LastIndex returns the largest log index stored, 0 if there are none. It
// reads an in-memory cache and does not touch Pebble.
func (s *Store) LastIndex() (uint64, error) {
	if err := s.checkFast(); err != nil {
		return 0, err
	}
	return s.last.Load(), nil
}

// checkFast is check without taking mu, for the cached index getters.
func (s *Store) checkFast() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if f := s.e.failed.Load(); f != nil {
		return fmt.Errorf("%w: %s", ErrFailed, f.msg)
	}
	return nil
}

// GetLog reads log index into l (overwriting every field). It returns
// raft.ErrLogNotFound, unwrapped, when the index is absent, and an error
// wrapping ErrCorrupt and naming the index when the value cannot be decoded.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	s.e.mu.RLock()
	defer s.e.mu.RUnlock()
	if err := s.check(); err != nil {
		return err
	}
	var kb [64]byte
	v, closer, err := s.e.db.Get(s.logKey(kb[:0], index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("raftlog: get log %d: %w", index, err)
	}
	err = decodeLog(index, v, l)
	_ = closer.Close()
	return err
}

// StoreLog stores one log entry, synced; see StoreLogs.
func (s *Store) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores logs in one Pebble batch, fsynced before returning unless
// Options.NoSync. Either all entries are written or, on error, none are. An
// entry with an existing index replaces it. Gaps are allowed.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for _, l := range logs {
		if l.Index == 0 {
			return ErrInvalidIndex
		}
		lo, hi = min(lo, l.Index), max(hi, l.Index)
	}

	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.e.mu.RLock()
	defer s.e.mu.RUnlock()
	if err := s.check(); err != nil {
		return err
	}

	b := s.writeBatch()
	for _, l := range logs {
		// Encode straight into the batch's buffer: no intermediate copy.
		op := b.SetDeferred(len(s.prefix)+logKeyLen, encodedLen(l))
		copy(op.Key, s.prefix)
		putLogKey((*[logKeyLen]byte)(op.Key[len(s.prefix):]), l.Index)
		enc := appendLog(op.Value[:0:len(op.Value)], l)
		if len(enc) != len(op.Value) {
			s.dropBatch()
			return fmt.Errorf("raftlog: store log %d: internal error: encoded %d bytes, sized %d", l.Index, len(enc), len(op.Value))
		}
		if err := op.Finish(); err != nil {
			s.dropBatch()
			return fmt.Errorf("raftlog: store log %d: %w", l.Index, err)
		}
	}
	if err := s.e.commit(b); err != nil {
		s.dropBatch()
		return fmt.Errorf("raftlog: store logs %d..%d in %s: %w", lo, hi, s.where(), err)
	}
	b.Reset()

	// Publish last before first so that a concurrent reader of an empty store
	// sees (0, hi) rather than (lo, 0) in the window between the two stores.
	if hi > s.last.Load() {
		s.last.Store(hi)
	}
	if f := s.first.Load(); f == 0 || lo < f {
		s.first.Store(lo)
	}
	return nil
}

// DeleteRange deletes logs lo..hi inclusive with one Pebble range deletion,
// fsynced unless Options.NoSync, and updates the cached first/last index.
func (s *Store) DeleteRange(lo, hi uint64) error {
	if lo > hi {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.e.mu.RLock()
	defer s.e.mu.RUnlock()
	if err := s.check(); err != nil {
		return err
	}
	first, last := s.first.Load(), s.last.Load()
	if first == 0 || hi < first || lo > last {
		return nil // no stored index lies in the range
	}
	// Clamp to what is stored; afterwards first <= lo <= hi <= last.
	lo, hi = max(lo, first), min(hi, last)

	newFirst, newLast := first, last
	var err error
	switch {
	case lo == first && hi == last:
		newFirst, newLast = 0, 0
	case lo == first: // prefix, e.g. compaction after a snapshot
		newFirst, err = s.seek(hi+1, true)
	case hi == last: // suffix, e.g. conflict truncation
		newLast, err = s.seek(lo, false)
	}
	if err != nil {
		return fmt.Errorf("raftlog: delete logs %d..%d: %w", lo, hi, err)
	}
	if newFirst == 0 || newLast == 0 { // nothing remains
		newFirst, newLast = 0, 0
	}

	start := s.logKey(nil, lo)
	endKey := s.logHi
	if hi != math.MaxUint64 {
		endKey = s.logKey(nil, hi+1)
	}
	b := s.writeBatch()
	if err := b.DeleteRange(start, endKey, nil); err != nil {
		s.dropBatch()
		return fmt.Errorf("raftlog: delete logs %d..%d: %w", lo, hi, err)
	}
	if err := s.e.commit(b); err != nil {
		s.dropBatch()
		return fmt.Errorf("raftlog: delete logs %d..%d in %s: %w", lo, hi, s.where(), err)
	}
	b.Reset()
	// Same publication order as StoreLogs: an emptied store goes through
	// (0, last) rather than (first, 0).
	s.first.Store(newFirst)
	s.last.Store(newLast)
	return nil
}

// seek returns the smallest stored index >= from (forward) or the largest
// stored index < from (!forward); 0 if there is none. Callers hold wmu, so
// no write races with the scan.
func (s *Store) seek(from uint64, forward bool) (uint64, error) {
	k := s.logKey(nil, from)
	o := &pebble.IterOptions{LowerBound: k, UpperBound: s.logHi}
	if !forward {
		o = &pebble.IterOptions{LowerBound: s.logLo, UpperBound: k}
	}
	it, err := s.e.db.NewIter(o)
	if err != nil {
		return 0, err
	}
	var idx, ok = uint64(0), false
	if forward {
		ok = it.First()
	} else {
		ok = it.Last()
	}
	if ok {
		idx, err = s.parseKey(it.Key())
	}
	return idx, errors.Join(err, it.Error(), it.Close())
}

// writeBatch returns the reusable write batch. Callers hold wmu and mu.
func (s *Store) writeBatch() *pebble.Batch {
	if s.batch == nil {
		s.batch = s.e.db.NewBatch(pebble.WithMaxRetainedSizeBytes(maxRetainedBatch))
	}
	return s.batch
}

// dropBatch discards the reusable batch after a failure. Callers hold wmu.
func (s *Store) dropBatch() {
	if s.batch != nil {
		_ = s.batch.Close()
		s.batch = nil
	}
}

// logKey appends the Store's key of log index idx to dst.
func (s *Store) logKey(dst []byte, idx uint64) []byte {
	var k [logKeyLen]byte
	putLogKey(&k, idx)
	return append(append(dst, s.prefix...), k[:]...)
}

// parseKey returns the index in one of the Store's log keys.
func (s *Store) parseKey(k []byte) (uint64, error) {
	if !bytes.HasPrefix(k, s.prefix) {
		return 0, fmt.Errorf("%w: log key %x outside group %q", ErrCorrupt, k, s.group)
	}
	return parseLogKey(k[len(s.prefix):])
}

// where names the store in messages: its directory, and its group.
func (s *Store) where() string {
	if s.group == "" {
		return s.e.dir
	}
	return fmt.Sprintf("%s (group %s)", s.e.dir, s.group)
}

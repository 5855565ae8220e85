package raftlog

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

var _ raft.StableStore = (*Store)(nil)

// Set stores val under key, fsynced unless Options.NoSync. An empty val is
// stored as a present, empty value.
func (s *Store) Set(key, val []byte) error {
	if err := s.put(key, val); err != nil {
		return fmt.Errorf("raftlog: set %q in %s: %w", key, s.where(), err)
	}
	return nil
}

// Get returns a copy of the value under key. A missing key returns
// (nil, ErrKeyNotFound); ErrKeyNotFound.Error() is "not found", which raft
// treats as "no value yet".
func (s *Store) Get(key []byte) ([]byte, error) {
	v, err := s.get(key)
	if err != nil {
		return nil, err
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// SetUint64 stores val under key as 8 big-endian bytes, fsynced unless
// Options.NoSync.
func (s *Store) SetUint64(key []byte, val uint64) error {
	if err := s.put(key, encodeUint64(val)); err != nil {
		return fmt.Errorf("raftlog: set %q in %s: %w", key, s.where(), err)
	}
	return nil
}

// GetUint64 returns the value stored by SetUint64. A missing key returns
// (0, ErrKeyNotFound), which raft accepts as "0 / never set" (it checks
// err.Error() == "not found").
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.get(key)
	if err != nil {
		return 0, err
	}
	return decodeUint64(key, v)
}

// put writes one stable key in its own batch.
func (s *Store) put(key, val []byte) error {
	s.e.mu.RLock()
	defer s.e.mu.RUnlock()
	if err := s.check(); err != nil {
		return err
	}
	b := s.e.db.NewBatch()
	defer b.Close()
	if err := b.Set(append(append([]byte(nil), s.prefix...), stableKey(key)...), val, nil); err != nil {
		return err
	}
	return s.e.commit(b)
}

// get returns a copy of the stored value (nil for an empty value) or
// ErrKeyNotFound, unwrapped.
func (s *Store) get(key []byte) ([]byte, error) {
	s.e.mu.RLock()
	defer s.e.mu.RUnlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	v, closer, err := s.e.db.Get(append(append([]byte(nil), s.prefix...), stableKey(key)...))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("raftlog: get %q in %s: %w", key, s.where(), err)
	}
	var out []byte
	if len(v) > 0 {
		out = append([]byte(nil), v...)
	}
	_ = closer.Close()
	return out, nil
}

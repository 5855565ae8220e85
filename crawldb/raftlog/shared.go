package raftlog

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// prefixGroup starts every key of a group view (see Shared).
const prefixGroup = 'g'

// MaxGroupIDLen is the longest group ID a Shared accepts.
const MaxGroupIDLen = 255

// Shared is one Pebble database that holds the logs and stable keys of many
// Raft groups, for a node that is a member of many. Each group is a Store
// (Group) whose keys are those of the package layout behind a prefix of the
// group's own:
//
//	'g' + byte(len(id)) + id + 'l' + big-endian uint64 index -> encoded raft.Log
//	'g' + byte(len(id)) + id + 's' + stable key              -> raw value
//
// The length byte keeps one group's keys from being a prefix of another's
// ("a" and "ab"). Every view keeps its own writer lock and index cache, so
// the groups' writes do not wait for each other: their synced commits reach
// Pebble's commit pipeline together, which shares one WAL fsync among the
// commits that are waiting for it.
type Shared struct {
	e *engine

	mu     sync.Mutex
	open   map[string]*Store
	closed bool
}

// OpenShared opens (creating if needed) the shared store in dir. Do not open
// a directory Open uses, or the reverse.
func OpenShared(dir string, o Options) (*Shared, error) {
	e, err := openEngine(dir, o)
	if err != nil {
		return nil, err
	}
	return &Shared{e: e, open: map[string]*Store{}}, nil
}

// groupPrefix is the key prefix of group id.
func groupPrefix(id string) []byte {
	return append([]byte{prefixGroup, byte(len(id))}, id...)
}

func checkGroupID(id string) error {
	if id == "" || len(id) > MaxGroupIDLen {
		return fmt.Errorf("raftlog: group ID %q must have 1 to %d bytes", id, MaxGroupIDLen)
	}
	return nil
}

// Group returns the Store of group id, creating it if it has no keys yet.
// One view of a group may be open at a time: Close it before asking again.
func (sh *Shared) Group(id string) (*Store, error) {
	if err := checkGroupID(id); err != nil {
		return nil, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return nil, ErrClosed
	}
	if _, ok := sh.open[id]; ok {
		return nil, fmt.Errorf("raftlog: group %q in %s is already open", id, sh.e.dir)
	}
	s := newView(sh.e, id, groupPrefix(id))
	sh.e.mu.RLock()
	err := s.loadBounds()
	sh.e.mu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("raftlog: open group %q in %s: %w", id, sh.e.dir, err)
	}
	s.release = func() {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if sh.open[id] == s {
			delete(sh.open, id)
		}
	}
	sh.open[id] = s
	return s, nil
}

// Groups returns the IDs of the groups that have keys, sorted by their
// prefix (the ID's length, then its bytes).
func (sh *Shared) Groups() ([]string, error) {
	sh.e.mu.RLock()
	defer sh.e.mu.RUnlock()
	if sh.e.db == nil {
		return nil, ErrClosed
	}
	it, err := sh.e.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixGroup}, UpperBound: []byte{prefixGroup + 1}})
	if err != nil {
		return nil, fmt.Errorf("raftlog: list groups in %s: %w", sh.e.dir, err)
	}
	var ids []string
	var bad error
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) < 3 || len(k) < 2+int(k[1]) || k[1] == 0 {
			bad = fmt.Errorf("%w: malformed group key %x", ErrCorrupt, k)
			break
		}
		id := string(k[2 : 2+int(k[1])])
		ids = append(ids, id)
		ok = it.SeekGE(append(groupPrefix(id), 0xff)) // past the group's 'l' and 's' keys
	}
	if err := errors.Join(bad, it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("raftlog: list groups in %s: %w", sh.e.dir, err)
	}
	return ids, nil
}

// DeleteGroup deletes every key of group id, synced unless Options.NoSync.
// The group's Store must be closed.
func (sh *Shared) DeleteGroup(id string) error {
	if err := checkGroupID(id); err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.closed {
		return ErrClosed
	}
	if _, ok := sh.open[id]; ok {
		return fmt.Errorf("raftlog: delete group %q in %s: its store is open; close it first", id, sh.e.dir)
	}
	sh.e.mu.RLock()
	defer sh.e.mu.RUnlock()
	if sh.e.db == nil {
		return ErrClosed
	}
	if f := sh.e.failed.Load(); f != nil {
		return fmt.Errorf("%w: %s", ErrFailed, f.msg)
	}
	p := groupPrefix(id)
	b := sh.e.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(p, append(p, 0xff), nil); err != nil {
		return fmt.Errorf("raftlog: delete group %q in %s: %w", id, sh.e.dir, err)
	}
	if err := sh.e.commit(b); err != nil {
		return fmt.Errorf("raftlog: delete group %q in %s: %w", id, sh.e.dir, err)
	}
	return nil
}

// Close closes every open group Store and the database. It is idempotent.
func (sh *Shared) Close() error {
	sh.mu.Lock()
	sh.closed = true
	views := make([]*Store, 0, len(sh.open))
	for _, s := range sh.open {
		views = append(views, s)
	}
	sh.mu.Unlock()
	for _, s := range views {
		_ = s.Close()
	}
	return sh.e.close()
}

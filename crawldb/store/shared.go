package store

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Shared is one Pebble DB holding the stores of many groups: on a node of a
// sharded site, the replicas of its Raft groups share one WAL, one group
// commit, one memtable and one block cache. Each group's keys live under its
// own prefix (keyspace.go), so that a group is opened, snapshotted, restored
// and dropped without touching the others.
type Shared struct {
	dir  string
	opts Options
	db   *pebble.DB

	mu struct {
		sync.Mutex
		closed bool
		stores map[string]*Store // the groups' open stores
	}
}

// OpenShared opens (creating if needed) the shared store in dir. A
// directory that holds a store of its own (Open) is refused.
func OpenShared(dir string, o Options) (*Shared, error) {
	o.ensureDefaults()
	db, err := openPebble(dir, o)
	if err != nil {
		return nil, err
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: ownLo, UpperBound: ownHi})
	if err == nil {
		if it.First() {
			err = fmt.Errorf("%w: %s holds a store of its own (key %q): open it with Open", ErrLayout, dir, it.Key())
		}
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open shared %s: %w", dir, err)
	}
	sh := &Shared{dir: dir, opts: o, db: db}
	sh.mu.stores = map[string]*Store{}
	return sh, nil
}

// ValidGroup reports whether group is a valid group name, [a-z0-9-]{1,32}.
func ValidGroup(group string) error {
	if len(group) == 0 || len(group) > maxGroupLen {
		return fmt.Errorf("%w: %q is %d bytes, not 1 to %d", ErrBadGroup, group, len(group), maxGroupLen)
	}
	for i := 0; i < len(group); i++ {
		if c := group[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%w: %q has %q at byte %d (allowed: a-z, 0-9, -)", ErrBadGroup, group, c, i)
		}
	}
	return nil
}

// Dir returns the shared store's directory.
func (sh *Shared) Dir() string { return sh.dir }

// Store returns the store of group, opening it (empty if the group has no
// data yet). Asking for an open group again returns the same *Store. A group
// whose restore was interrupted is refused with ErrIncomplete: Drop it and
// ask again for an empty store, into which Raft restores its latest
// snapshot when the group starts.
func (sh *Shared) Store(group string) (*Store, error) {
	if err := ValidGroup(group); err != nil {
		return nil, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.mu.closed {
		return nil, fmt.Errorf("%w: shared store %s", ErrClosed, sh.dir)
	}
	if s := sh.mu.stores[group]; s != nil {
		return s, nil
	}
	s := &Store{
		dir: sh.dir, group: group, shared: sh, opts: sh.opts, db: sh.db,
		ks: groupKeyspace(sh.db, group), log: sh.opts.Logger.With(slog.String("group", group)),
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	sh.mu.stores[group] = s
	return s, nil
}

// forget removes a closed store from the open ones.
func (sh *Shared) forget(s *Store) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.mu.stores[s.group] == s {
		delete(sh.mu.stores, s.group)
	}
}

// Groups returns the groups that have data, in name order (whether their
// stores are open or not).
func (sh *Shared) Groups() ([]string, error) {
	gs, err := listGroups(sh.db, 0)
	if err != nil {
		return nil, fmt.Errorf("store: groups of %s: %w", sh.dir, err)
	}
	return gs, nil
}

// listGroups returns up to limit (0: all) groups with keys in db, one seek
// per group.
func listGroups(db pebble.Reader, limit int) ([]string, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{groupMark}, UpperBound: []byte{groupMark + 1}})
	if err != nil {
		return nil, err
	}
	var out []string
	for ok := it.First(); ok && (limit <= 0 || len(out) < limit); {
		k := it.Key()
		if len(k) < 2 || k[1] == 0 || int(k[1]) > maxGroupLen || len(k) < 2+int(k[1]) {
			it.Close()
			return nil, fmt.Errorf("bad group key %q", k)
		}
		p := k[:2+int(k[1])]
		out = append(out, string(p[2:]))
		ok = it.SeekGE(prefixEnd(p))
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, err
	}
	return out, it.Close()
}

// Drop deletes every key of group (its replica left this node), closing its
// store if open: its later Applies fail with ErrClosed. The deletion is
// durable when Drop returns. Dropping a group without data does nothing.
func (sh *Shared) Drop(group string) error {
	if err := ValidGroup(group); err != nil {
		return err
	}
	sh.mu.Lock()
	if sh.mu.closed {
		sh.mu.Unlock()
		return fmt.Errorf("%w: shared store %s", ErrClosed, sh.dir)
	}
	s := sh.mu.stores[group]
	delete(sh.mu.stores, group)
	sh.mu.Unlock()
	if s != nil {
		s.markClosed() // waits for an Apply or a restore in progress
	}
	p := groupPrefix(group)
	if err := sh.db.DeleteRange(p, prefixEnd(p), pebble.Sync); err != nil {
		return fmt.Errorf("store: drop group %s of %s: %w", group, sh.dir, err)
	}
	sh.opts.FS.Remove(sh.opts.FS.PathJoin(sh.dir, spoolName(group)))
	return nil
}

// Close closes every group's store and the Pebble DB. A second call does
// nothing and returns nil.
func (sh *Shared) Close() error {
	sh.mu.Lock()
	if sh.mu.closed {
		sh.mu.Unlock()
		return nil
	}
	sh.mu.closed = true
	stores := sh.mu.stores
	sh.mu.stores = nil
	sh.mu.Unlock()
	for _, s := range stores {
		s.markClosed()
	}
	if err := sh.db.Close(); err != nil {
		return fmt.Errorf("store: close shared %s: %w", sh.dir, err)
	}
	return nil
}

// spoolName is the file in the Pebble directory that holds a snapshot
// being restored into group ("" for a store of its own) while it is
// checked. Pebble ignores files of names it does not know.
func spoolName(group string) string {
	if group == "" {
		return "restore.spool"
	}
	return "restore-" + group + ".spool"
}

// removeSpools removes the spools a crash left behind.
func removeSpools(fs vfs.FS, dir string, log *slog.Logger) {
	names, err := fs.List(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if strings.HasPrefix(n, "restore") && strings.HasSuffix(n, ".spool") {
			if err := fs.Remove(fs.PathJoin(dir, n)); err != nil {
				log.Warn("store: remove a restore's spool", "dir", dir, "file", n, "err", err)
			}
		}
	}
}

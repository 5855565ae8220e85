// Package store is the crawl database's state machine: URL records, the
// frontier index, host records and the site-wide tables, kept in Pebble and
// changed only by commands (Batch) applied in log order. A store has a
// Pebble of its own (Open), or is one group of a Pebble that holds the
// stores of many Raft groups (OpenShared, Shared.Store); a group's store is
// snapshotted and restored as a stream of its keys (Snapshot,
// RestoreSnapshot) without touching the other groups. It knows nothing of
// Raft: package crawldb feeds it the Raft log. Each command is applied in one
// atomic Pebble batch together with its log index, so replaying the log after
// a crash never applies a command twice.
package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configure a Store. Zero values take the documented defaults.
type Options struct {
	// FS is the filesystem; default the OS's. Tests inject errors through it.
	FS vfs.FS
	// CacheBytes is Pebble's block cache. Default 256 MiB: the bloom
	// filters and index blocks of the URL table must stay in it for
	// seen-checks to cost no disk reads.
	CacheBytes int64
	// MemTableBytes is Pebble's memtable size. Default 64 MiB: a crawl
	// rewrites its URL records round after round (cash, status), and a
	// larger memtable absorbs more of those rewrites before they are flushed
	// and compacted. On bench site it cut the site's CPU per page by 6-12%
	// against 16 MiB (bench/README.md, "half the CPU per page"), although
	// bench crawldb's upserts alone, all distinct keys, prefer 16 MiB.
	MemTableBytes uint64
	// Logger defaults to discarding.
	Logger *slog.Logger
}

func (o *Options) ensureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = 256 << 20
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// counts are the store's running totals, kept in the same batches as the data.
type counts struct {
	urls     uint64
	byStatus [statusCount]uint64
	sentSeq  uint64
	sentSize uint64
	outSeq   uint64
	outbox   uint64
	// marks counts the fetched-elsewhere marks (pMark). It is not in the
	// stored counters (their layout predates it): Open counts the marks,
	// which are few and short-lived.
	marks uint64
	// scheduled counts the URLs with a refetch schedule in the refetch
	// index (pDue). It is stored under keyRefetch, written only when it
	// changes (a crawl without refetch never writes it).
	scheduled uint64
	// parked counts the unfetched URLs out of the frontier (Batch.Park),
	// stored with scheduled once there is one.
	parked uint64
}

// appendRefetch encodes the refetch counters: scheduled, then parked if
// any (8 bytes as before parking existed, else 16).
func (c *counts) appendRefetch(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, c.scheduled)
	if c.parked != 0 {
		dst = binary.BigEndian.AppendUint64(dst, c.parked)
	}
	return dst
}

const countsLen = 8 * (5 + int(statusCount))

func (c *counts) appendTo(dst []byte) []byte {
	for _, v := range []uint64{c.urls, c.sentSeq, c.sentSize, c.outSeq, c.outbox} {
		dst = binary.BigEndian.AppendUint64(dst, v)
	}
	for _, v := range c.byStatus {
		dst = binary.BigEndian.AppendUint64(dst, v)
	}
	return dst
}

func (c *counts) decode(b []byte) error {
	if len(b) != countsLen {
		return errBadValue
	}
	v := func(i int) uint64 { return binary.BigEndian.Uint64(b[8*i:]) }
	c.urls, c.sentSeq, c.sentSize, c.outSeq, c.outbox = v(0), v(1), v(2), v(3), v(4)
	for i := range c.byStatus {
		c.byStatus[i] = v(5 + i)
	}
	return nil
}

var (
	keyApplied = []byte{pMeta, 'a'}
	keyCounts  = []byte{pMeta, 'c'}
	keyRefetch = []byte{pMeta, 'f'}
	keyRound   = []byte{pRound}
	// keyRestoring is set by the first batch of a restore and deleted by its
	// last: a store that holds it is incomplete (ErrIncomplete).
	keyRestoring = []byte{pMeta, 'R'}
)

// Store is the crawl database state machine over one keyspace of a Pebble
// DB: a Pebble of its own (Open), or one group of a Shared (Shared.Store).
// Apply must be called from one goroutine at a time (the Raft FSM); reads
// are safe from any goroutine.
type Store struct {
	dir     string
	group   string  // "" for a store of its own
	shared  *Shared // nil for a store of its own, which owns db
	opts    Options
	db      *pebble.DB
	ks      keyspace // every read and write goes through it
	log     *slog.Logger
	applied atomic.Uint64
	// hostCache and urls are used by Apply only (under mu).
	hostCache hostCache
	urls      *urlFilter

	mu struct {
		sync.Mutex
		closed bool
		failed error
		counts counts
		kbuf   []byte // buffers Apply reuses (the larger ones: applyBufPool)
		vbuf   []byte
	}
}

// openPebble opens (creating if needed) the Pebble DB in dir.
func openPebble(dir string, o Options) (*pebble.DB, error) {
	cache := pebble.NewCache(o.CacheBytes)
	popts := &pebble.Options{
		FS:                          newReportingFS(o.FS, o.Logger, dir),
		Cache:                       cache,
		MemTableSize:                o.MemTableBytes,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       4,
		L0StopWritesThreshold:       24,
		LBaseMaxBytes:               256 << 20,
		CompactionConcurrencyRange:  func() (int, int) { return 1, 2 },
		Logger:                      pebbleLogger{o.Logger},
	}
	for i := range popts.Levels {
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	popts.EnsureDefaults()
	db, err := pebble.Open(dir, popts)
	cache.Unref()
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	removeSpools(o.FS, dir, o.Logger)
	return db, nil
}

// Open opens (creating if needed) the store in dir, a Pebble of its own.
// A directory that holds a Shared's groups is refused (open it with
// OpenShared), and so is a store whose last restore did not finish
// (ErrIncomplete).
func Open(dir string, o Options) (*Store, error) {
	o.ensureDefaults()
	db, err := openPebble(dir, o)
	if err != nil {
		return nil, err
	}
	groups, err := listGroups(db, 1)
	if err == nil && len(groups) > 0 {
		err = fmt.Errorf("%w: %s holds the groups of a shared store (%s, …): open it with OpenShared", ErrLayout, dir, groups[0])
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	s := &Store{dir: dir, opts: o, db: db, ks: ownKeyspace(db), log: o.Logger}
	if err := s.load(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// where names the store in errors: its directory, and its group if any.
func (s *Store) where() string {
	if s.shared == nil {
		return s.dir
	}
	return s.dir + " group " + s.group
}

// load reads the store's applied index and counters and builds its URL
// filter: at open and after a restore. It refuses a store whose restore
// was interrupted (ErrIncomplete).
func (s *Store) load() error {
	switch _, closer, err := s.ks.get(keyRestoring); {
	case err == nil:
		closer.Close()
		return fmt.Errorf("%w: %s", ErrIncomplete, s.where())
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("store: open %s: read restore marker: %w", s.where(), err)
	}
	s.applied.Store(0)
	if v, closer, err := s.ks.get(keyApplied); err == nil {
		if len(v) == 8 {
			s.applied.Store(binary.BigEndian.Uint64(v))
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("store: open %s: read applied index: %w", s.where(), err)
	}
	s.mu.counts = counts{}
	if v, closer, err := s.ks.get(keyCounts); err == nil {
		derr := s.mu.counts.decode(v)
		closer.Close()
		if derr != nil {
			return fmt.Errorf("store: open %s: counters: %w", s.where(), derr)
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("store: open %s: read counters: %w", s.where(), err)
	}
	if v, closer, err := s.ks.get(keyRefetch); err == nil {
		ok := len(v) == 8 || len(v) == 16
		if ok {
			s.mu.counts.scheduled = binary.BigEndian.Uint64(v)
			if len(v) == 16 {
				s.mu.counts.parked = binary.BigEndian.Uint64(v[8:])
			}
		}
		closer.Close()
		if !ok {
			return fmt.Errorf("store: open %s: refetch counter: %w", s.where(), errBadValue)
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("store: open %s: read refetch counter: %w", s.where(), err)
	}
	var err error
	if s.mu.counts.marks, err = countPrefix(&s.ks, pMark); err != nil {
		return fmt.Errorf("store: open %s: count fetched-elsewhere marks: %w", s.where(), err)
	}
	f, err := buildURLFilter(&s.ks, s.mu.counts.urls)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", s.where(), err)
	}
	s.urls = f
	s.hostCache.reset()
	return nil
}

// countPrefix counts the keys that start with the one-byte prefix p.
func countPrefix(ks *keyspace, p byte) (uint64, error) {
	it, err := ks.newIter([]byte{p}, []byte{p + 1})
	if err != nil {
		return 0, err
	}
	var n uint64
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, errors.Join(it.Error(), it.Close())
}

// Dir returns the store's directory: for a group's store, its Shared's.
func (s *Store) Dir() string { return s.dir }

// Group returns the store's group; "" for a store of its own.
func (s *Store) Group() string { return s.group }

// AppliedIndex is the log index of the last command applied.
func (s *Store) AppliedIndex() uint64 { return s.applied.Load() }

// Close closes the store; a second call does nothing and returns nil.
// A group's store leaves its Shared's Pebble open (Shared.Close closes
// it); Shared.Store opens the group again afresh.
func (s *Store) Close() error {
	if !s.markClosed() {
		return nil
	}
	if s.shared != nil {
		s.shared.forget(s)
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.dir, err)
	}
	return nil
}

// markClosed makes Apply refuse every later command, waiting for one in
// progress; it reports whether the store was open.
func (s *Store) markClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	s.mu.closed = true
	return true
}

// OpResult is the outcome of one operation.
type OpResult struct {
	New     bool   // Upsert/PutIfAbsent: the URL was new
	Applied bool   // the operation changed something (found its URL in the right state, …)
	Present bool   // SentCheckAdd: the fingerprint was already in the cache
	Seq     uint64 // OutboxEnqueue: the entry's sequence number
	Marked  bool   // FetchedElsewhere: the URL is generated here and was marked
}

// Result is the outcome of one command.
type Result struct {
	Index uint64
	// Err is set when the command was rejected as a whole (corrupt,
	// oversized, a bad URL): nothing but the applied index changed.
	Err error
	// Skipped: the index had been applied already (log replay).
	Skipped bool
	Ops     []OpResult
}

// Sync makes everything applied so far durable in Pebble's WAL.
func (s *Store) Sync() error {
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("store: sync %s: %w", s.where(), err)
	}
	return nil
}

// Checkpoint writes a consistent copy of the store to dir (which must not
// exist), as of the last applied command. It must not run concurrently with
// Apply (the Raft FSM guarantees this for snapshots).
// A group's store has no checkpoint of its own (a checkpoint would copy
// every group): it is refused; use Snapshot.
func (s *Store) Checkpoint(dir string) error {
	if s.shared != nil {
		return fmt.Errorf("%w: checkpoint of %s: a group's store is copied by Snapshot", ErrBadOp, s.where())
	}
	if err := s.Sync(); err != nil {
		return err
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("store: checkpoint %s to %s: %w", s.dir, dir, err)
	}
	return nil
}

type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) { p.l.Debug(fmt.Sprintf(format, args...)) }
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
	panic(fmt.Sprintf(format, args...))
}

func (s *Store) fail(index uint64, err error) error {
	s.mu.failed = fmt.Errorf("%w: applying log index %d in %s: %w (the batch was not written; stop this node)", ErrStorage, index, s.where(), err)
	s.log.Error("store: storage failure", "index", index, "dir", s.dir, "group", s.group, "err", err)
	return s.mu.failed
}

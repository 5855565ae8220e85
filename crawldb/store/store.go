// Package store is the crawl database's state machine: URL records, the
// frontier index, host records and the site-wide tables, kept in Pebble and
// changed only by commands (Batch) applied in log order. It knows nothing of
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
	keyRound   = []byte{pRound}
)

// Store is the crawl database state machine over one Pebble DB.
// Apply must be called from one goroutine at a time (the Raft FSM); reads
// are safe from any goroutine.
type Store struct {
	dir     string
	opts    Options
	db      *pebble.DB
	cache   *pebble.Cache
	log     *slog.Logger
	applied atomic.Uint64
	// hostCache and urls are used by Apply only (under mu).
	hostCache hostCache
	urls      *urlFilter

	mu struct {
		sync.Mutex
		closed  bool
		failed  error
		counts  counts
		ops     []op
		kbuf    []byte
		vbuf    []byte
		writes  []write // buffers Apply reuses
		slots   []slot
		slotMap map[string]*slot
		hostMap map[string]*hostDelta
	}
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, o Options) (*Store, error) {
	o.ensureDefaults()
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
	s := &Store{dir: dir, opts: o, db: db, log: o.Logger}
	if v, closer, err := db.Get(keyApplied); err == nil {
		if len(v) == 8 {
			s.applied.Store(binary.BigEndian.Uint64(v))
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		db.Close()
		return nil, fmt.Errorf("store: open %s: read applied index: %w", dir, err)
	}
	if v, closer, err := db.Get(keyCounts); err == nil {
		derr := s.mu.counts.decode(v)
		closer.Close()
		if derr != nil {
			db.Close()
			return nil, fmt.Errorf("store: open %s: counters: %w", dir, derr)
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		db.Close()
		return nil, fmt.Errorf("store: open %s: read counters: %w", dir, err)
	}
	if s.mu.counts.marks, err = countPrefix(db, pMark); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: count fetched-elsewhere marks: %w", dir, err)
	}
	f, err := buildURLFilter(db, s.mu.counts.urls)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.urls = f
	return s, nil
}

// countPrefix counts the keys that start with the one-byte prefix p.
func countPrefix(db *pebble.DB, p byte) (uint64, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
	if err != nil {
		return 0, err
	}
	var n uint64
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, errors.Join(it.Error(), it.Close())
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// AppliedIndex is the log index of the last command applied.
func (s *Store) AppliedIndex() uint64 { return s.applied.Load() }

// Close closes the store; it is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil
	}
	s.mu.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.dir, err)
	}
	return nil
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
		return fmt.Errorf("store: sync %s: %w", s.dir, err)
	}
	return nil
}

// Checkpoint writes a consistent copy of the store to dir (which must not
// exist), as of the last applied command. It must not run concurrently with
// Apply (the Raft FSM guarantees this for snapshots).
func (s *Store) Checkpoint(dir string) error {
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
	s.mu.failed = fmt.Errorf("%w: applying log index %d in %s: %v (the batch was not written; stop this node)", ErrStorage, index, s.dir, err)
	s.log.Error("store: storage failure", "index", index, "dir", s.dir, "err", err)
	return s.mu.failed
}

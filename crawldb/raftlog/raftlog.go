// Package raftlog is a durable hashicorp/raft LogStore and StableStore on Pebble.
//
// A Store owns one Pebble database in its own directory (never share it with
// the state machine's database). Keys are laid out as
//
//	'l' + big-endian uint64 index  -> encoded raft.Log (see codec.go)
//	's' + stable key               -> raw value (SetUint64: 8 bytes big-endian)
//
// A node that is a member of many Raft groups keeps all their logs in one
// Pebble database: OpenShared, then Shared.Group for each group's Store, whose
// keys are this layout behind a prefix of the group's (see Shared).
//
// Every StoreLogs, DeleteRange, Set and SetUint64 is one Pebble batch committed
// with fsync (unless Options.NoSync), so a write is either wholly durable when
// the call returns or, after a crash, wholly absent.
//
// Missing keys: Get and GetUint64 return ErrKeyNotFound, whose text is exactly
// "not found" — the string raft's NewRaft, HasExistingState and requestVote
// compare against — together with a nil value / 0. GetLog of an absent index
// returns raft.ErrLogNotFound unwrapped (raft compares it with ==).
//
// Gaps: the Store tolerates gaps between indexes (FirstIndex and LastIndex are
// the smallest and largest index present), so it deliberately does not
// implement raft.MonotonicLogStore and raft keeps its default behaviour of
// compacting with TrailingLogs after a snapshot install.
//
// Fatal Pebble errors: Pebble reports an unrecoverable commit error (a failed
// WAL write or fsync) through Logger.Fatalf, which by default exits the
// process. The Store installs its own Pebble logger whose Fatalf panics with a
// private value that the write path recovers: the write returns an error
// wrapping ErrFailed, and from then on every call except Close returns
// ErrFailed. Reopen the directory to recover; only synced data is then visible.
// A Fatalf raised on a Pebble background goroutine still crashes the process,
// as Pebble intends.
package raftlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrKeyNotFound is returned by Get and GetUint64 for a missing key. Its
	// text is exactly "not found" because raft matches on err.Error().
	ErrKeyNotFound = errors.New("not found")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("raftlog: store closed")
	// ErrFailed is returned after Pebble reported a fatal write error; the
	// Store must be closed and reopened.
	ErrFailed = errors.New("raftlog: store failed")
	// ErrCorrupt is wrapped by errors about undecodable stored data.
	ErrCorrupt = errors.New("raftlog: corrupt data")
	// ErrInvalidIndex is returned by StoreLogs for a log with Index 0, which
	// raft never uses and which would be indistinguishable from "empty".
	ErrInvalidIndex = errors.New("raftlog: invalid log index 0")
)

const (
	memTableSize = 16 << 20 // 16 MiB
	cacheSize    = 8 << 20  // 8 MiB block cache
	// maxRetainedBatch bounds the memory the reused write batch keeps
	// between StoreLogs calls.
	maxRetainedBatch = 8 << 20
	// diskSlowThreshold is when a stuck filesystem operation is logged.
	diskSlowThreshold = 5 * time.Second
)

// Options configures Open. The zero value is a synced store on the OS
// filesystem logging to slog.Default().
type Options struct {
	// FS, if set, is the filesystem (pebble vfs.FS) — lets tests inject errors
	// with pebble's vfs/errorfs or use vfs.NewMem().
	FS vfs.FS
	// NoSync: skip fsync of log writes (tests/benchmarks only; default false:
	// every StoreLogs and Set is synced before returning).
	NoSync bool
	// Logger receives Pebble's messages (info at Debug level) and store
	// errors. Nil means slog.Default().
	Logger *slog.Logger
}

// Store is a raft.LogStore and raft.StableStore backed by Pebble. It is safe
// for concurrent use; writes are serialized. A Store from Open owns its
// Pebble database; one from Shared.Group is a view of one group's keys in a
// database shared with other groups.
type Store struct {
	e     *engine
	owned bool   // Close closes e (Open); a group view only detaches
	group string // the group's ID ("" for Open)
	// prefix is put before every key: "" for Open (the layout above), a
	// group prefix for a view (see Shared).
	prefix []byte
	// logLo and logHi bound the Store's log keys (inclusive, exclusive).
	logLo, logHi []byte
	// release tells the Shared a view closed; nil for Open.
	release func()

	// first and last cache the smallest and largest log index present
	// (0, 0 when there are no logs). Written only with wmu held, after the
	// corresponding batch committed.
	first atomic.Uint64
	last  atomic.Uint64

	closed atomic.Bool // set by Close; read by FirstIndex/LastIndex

	// wmu serializes the Store's writers; it guards batch and the index
	// cache updates. Writers of different group views of one Shared do not
	// wait for each other, so that Pebble's commit pipeline can share one
	// fsync among their concurrent commits. Lock order: wmu before e.mu.
	wmu   sync.Mutex
	batch *pebble.Batch // reused write batch; nil until first use
}

// engine is one Pebble database and what its users share.
type engine struct {
	dir   string
	log   *slog.Logger
	wopts *pebble.WriteOptions

	// failed holds the *fatalError once Pebble reported a fatal error.
	failed atomic.Pointer[fatalError]

	// mu guards db against Close: every operation touching db holds it for
	// reading, Close for writing.
	mu       sync.RWMutex
	db       *pebble.DB // nil once closed
	fsCloser io.Closer  // stops the disk-health checker
}

// Open opens (creating if needed) the store in dir and loads the first and
// last log index.
func Open(dir string, o Options) (*Store, error) {
	e, err := openEngine(dir, o)
	if err != nil {
		return nil, err
	}
	s := newView(e, "", nil)
	s.owned = true
	if err := s.loadBounds(); err != nil {
		_ = e.close()
		return nil, fmt.Errorf("raftlog: open %s: %w", dir, err)
	}
	return s, nil
}

// newView returns a Store over e whose keys start with prefix.
func newView(e *engine, group string, prefix []byte) *Store {
	s := &Store{e: e, group: group, prefix: prefix}
	s.logLo = append(append([]byte(nil), prefix...), logLower[:]...)
	s.logHi = append(append([]byte(nil), prefix...), logUpper[:]...)
	return s
}

// loadBounds reads the first and last log index from Pebble into the cache.
func (s *Store) loadBounds() error {
	first, last, err := s.scanBounds()
	if err != nil {
		return err
	}
	s.first.Store(first)
	s.last.Store(last)
	return nil
}

// openEngine opens the Pebble database in dir.
func openEngine(dir string, o Options) (*engine, error) {
	lg := o.Logger
	if lg == nil {
		lg = slog.Default()
	}
	lg = lg.With("component", "raftlog", "dir", dir)
	// Wrap the filesystem in Pebble's disk-health checker ourselves (Pebble
	// does it only for a nil FS, and leaks the checker's goroutine when Open
	// fails); we close it on every path.
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	fs, fsCloser := vfs.WithDiskHealthChecks(fs, diskSlowThreshold, nil, func(info vfs.DiskSlowInfo) {
		lg.Warn("raftlog: slow disk", "info", info.String())
	})
	popts := &pebble.Options{
		FS:           fs,
		MemTableSize: memTableSize,
		CacheSize:    cacheSize,
		Logger:       pebbleLogger{lg},
		EventListener: &pebble.EventListener{
			WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
				lg.Warn("raftlog: write stall", "reason", info.Reason)
			},
		},
	}
	db, err := openPebble(dir, popts)
	if err != nil {
		_ = fsCloser.Close()
		return nil, fmt.Errorf("raftlog: open %s: %w", dir, err)
	}
	e := &engine{dir: dir, log: lg, db: db, fsCloser: fsCloser, wopts: pebble.Sync}
	if o.NoSync {
		e.wopts = pebble.NoSync
	}
	return e, nil
}

// openPebble is pebble.Open with a Fatalf during Open turned into an error.
func openPebble(dir string, o *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			db, err = nil, fmt.Errorf("%w: %s", ErrFailed, f.msg)
		}
	}()
	return pebble.Open(dir, o)
}

// scanBounds reads the smallest and largest log index from Pebble.
func (s *Store) scanBounds() (first, last uint64, err error) {
	it, err := s.e.db.NewIter(&pebble.IterOptions{LowerBound: s.logLo, UpperBound: s.logHi})
	if err != nil {
		return 0, 0, err
	}
	if it.First() {
		if first, err = s.parseKey(it.Key()); err == nil && it.Last() {
			last, err = s.parseKey(it.Key())
		}
	}
	return first, last, errors.Join(err, it.Error(), it.Close())
}

// Close closes the store. A Store from Open closes its Pebble database,
// waiting for its background work; a group view only stops serving (the
// Shared keeps the database). It is idempotent: calls after the first
// return nil.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	if s.batch != nil {
		_ = s.batch.Close()
		s.batch = nil
	}
	if s.release != nil {
		s.release()
	}
	if !s.owned {
		return nil
	}
	return s.e.close()
}

// close closes the Pebble database. It is idempotent.
func (e *engine) close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.db == nil {
		return nil
	}
	err := e.db.Close()
	e.db = nil
	_ = e.fsCloser.Close() // after the DB: stops the disk-health goroutine
	if err != nil {
		return fmt.Errorf("raftlog: close %s: %w", e.dir, err)
	}
	return nil
}

// check returns the error an operation must fail with, if any. The caller
// holds e.mu for reading.
func (s *Store) check() error {
	if s.closed.Load() || s.e.db == nil {
		return ErrClosed
	}
	if f := s.e.failed.Load(); f != nil {
		return fmt.Errorf("%w: %s", ErrFailed, f.msg)
	}
	return nil
}

// commit commits b with the engine's write options, converting a Pebble
// Fatalf (see package doc) into an error and marking the engine failed.
// On success the batch is left applied; the caller resets or closes it.
func (e *engine) commit(b *pebble.Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			e.failed.CompareAndSwap(nil, f)
			e.log.Error("raftlog: fatal pebble error, store disabled until reopened", "error", f.msg)
			err = fmt.Errorf("%w: %s", ErrFailed, f.msg)
		}
	}()
	return b.Commit(e.wopts)
}

// fatalError is the panic value of pebbleLogger.Fatalf.
type fatalError struct{ msg string }

// pebbleLogger adapts slog to pebble.Logger.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(fmt.Sprintf(format, args...))
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...))
}

// Fatalf logs and panics with a *fatalError; see the package doc.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble fatal: " + msg)
	panic(&fatalError{msg: msg})
}

var _ io.Closer = (*Store)(nil)

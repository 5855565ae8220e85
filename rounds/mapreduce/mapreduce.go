// Package mapreduce is the crawler's small map-reduce executor: Map runs a
// function over input partitions in parallel, and a Shuffle collects the
// (key, value) pairs they emit, combines the values of equal keys as they
// arrive, and hands each distinct key to a reduce function, in ascending
// key order within each of its partitions. Past a memory budget the
// shuffle spills sorted runs to disk and merges them back during Reduce.
//
// A round uses it as:
//
//	s, err := mapreduce.NewShuffle(mapreduce.Options[float64]{Combine: add, Codec: f64})
//	defer s.Close()
//	err = mapreduce.Map(ctx, 2, inputs, func(ctx context.Context, in In) error {
//		return s.Emit(key, value) // for each pair derived from in
//	})
//	err = s.Reduce(ctx, 2, func(part int, key []byte, v float64) error { ... })
package mapreduce

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Sentinel errors.
var (
	// ErrClosed: the shuffle is closed.
	ErrClosed = errors.New("mapreduce: shuffle closed")
	// ErrSpent: Reduce already ran (or is running) on the shuffle.
	ErrSpent = errors.New("mapreduce: shuffle already reduced")
	// ErrCorrupt: a spill run could not be read back.
	ErrCorrupt = errors.New("mapreduce: corrupt spill run")
	// ErrFull: a partition holds 4 GiB of distinct keys in memory (only
	// reachable without a Codec, or with a huge MemoryBudget).
	ErrFull = errors.New("mapreduce: partition key space full")
)

// Codec encodes values for spilling.
type Codec[V any] interface {
	// Append appends v's encoding to dst.
	Append(dst []byte, v V) []byte
	// Decode decodes what Append produced. b is valid only during the call.
	Decode(b []byte) (V, error)
}

// Defaults for zero Options fields.
const (
	DefaultPartitions   = 16
	DefaultMemoryBudget = 256 << 20
)

// EntryOverhead is the estimated in-memory cost of one distinct key beyond
// its bytes and its value: its hash table slot at the average load, and
// the slack of the doubling slot table and key arena.
const EntryOverhead = 48

// Options configure a Shuffle. Zero values take the documented defaults.
type Options[V any] struct {
	// Partitions is the number of reduce partitions; 0 means 16.
	Partitions int
	// MemoryBudget bounds the estimated bytes held in memory across all
	// partitions; past it the largest partitions are spilled until half the
	// budget is left. Each distinct key costs len(key) + ValueSize +
	// EntryOverhead. 0 means 256 MiB. Ignored if Codec is nil.
	MemoryBudget int64
	// ValueSize is the estimated in-memory bytes of one value; 0 means
	// the size of V itself (right for values without pointers).
	ValueSize int
	// TempDir is where spill files go: the shuffle creates TempDir if
	// needed and, at the first spill, a private subdirectory in it, which
	// Close removes. "" means os.TempDir().
	TempDir string
	// Combine merges two values of one key; a was emitted before b where
	// that order is defined. It must be associative and commutative
	// (emits from different goroutines interleave in any order), fast (it
	// runs under a partition lock) and must not call Emit. Required.
	Combine func(a, b V) V
	// Codec encodes values for spilling. If nil, the shuffle never spills
	// and MemoryBudget is ignored.
	Codec Codec[V]
}

// Validate reports every problem with o at once.
func (o *Options[V]) Validate() error {
	var errs []error
	if o.Partitions < 0 {
		errs = append(errs, fmt.Errorf("mapreduce: Partitions %d is negative", o.Partitions))
	}
	if o.Partitions > 1<<16 {
		errs = append(errs, fmt.Errorf("mapreduce: Partitions %d is over 65536", o.Partitions))
	}
	if o.MemoryBudget < 0 {
		errs = append(errs, fmt.Errorf("mapreduce: MemoryBudget %d is negative", o.MemoryBudget))
	}
	if o.ValueSize < 0 {
		errs = append(errs, fmt.Errorf("mapreduce: ValueSize %d is negative", o.ValueSize))
	}
	if o.Combine == nil {
		errs = append(errs, errors.New("mapreduce: Combine is required"))
	}
	return errors.Join(errs...)
}

func (o Options[V]) withDefaults() Options[V] {
	if o.Partitions == 0 {
		o.Partitions = DefaultPartitions
	}
	if o.MemoryBudget == 0 {
		o.MemoryBudget = DefaultMemoryBudget
	}
	if o.ValueSize == 0 {
		var zero V
		o.ValueSize = int(unsafe.Sizeof(zero))
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	return o
}

// Stats is a snapshot of a shuffle's counters.
type Stats struct {
	Keys       int64 // as Keys()
	MemBytes   int64 // estimated bytes held in memory
	Runs       int   // sorted runs spilled to disk
	SpillBytes int64 // bytes written to spill files
}

// Shuffle groups emitted values by key. Emit is safe for concurrent use;
// Reduce and Close must not run concurrently with Emit or each other.
type Shuffle[V any] struct {
	opts      Options[V]
	entrySize int64 // ValueSize + EntryOverhead
	parts     []partition[V]

	mem    atomic.Int64 // estimated bytes in memory, all partitions
	keys   atomic.Int64
	broken atomic.Bool // a spill failed; spill.err says why

	spill struct {
		sync.Mutex
		dir   string // private spill directory, "" until the first spill
		err   error  // sticky spill failure
		buf   *bufio.Writer
		rec   []byte // one encoded entry
		val   []byte // one encoded value
		runs  int
		bytes int64
	}
	state struct {
		sync.Mutex
		closed, reduced bool
	}
}

// partition holds the keys of one hash partition.
type partition[V any] struct {
	mu      sync.Mutex
	doneErr error        // non-nil once reduced or closed: Emit returns it
	t       table[V]     // keys and combined values in memory
	bytes   atomic.Int64 // estimated memory (written under mu)

	// Spilled runs, appended to one file per partition (guarded by mu).
	file     *os.File
	fileSize int64
	runs     []run
}

// run is one sorted run in a partition's spill file.
type run struct {
	off, size int64
	keys      int
}

const (
	spillBuffer = 256 << 10
	readBuffer  = 64 << 10
	ctxEvery    = 1024 // keys between context checks in Reduce
)

// NewShuffle returns an empty shuffle. o is copied.
func NewShuffle[V any](o Options[V]) (*Shuffle[V], error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	s := &Shuffle[V]{
		opts:      o,
		entrySize: int64(o.ValueSize) + EntryOverhead,
		parts:     make([]partition[V], o.Partitions),
	}
	return s, nil
}

// Partition returns the reduce partition of key, in [0, Partitions). It
// depends only on the key and the number of partitions.
func (s *Shuffle[V]) Partition(key []byte) int {
	return s.partitionOf(xxhash.Sum64(key))
}

// partitionOf maps the top 32 bits of a key's hash onto the partitions
// (the table uses the low bits).
func (s *Shuffle[V]) partitionOf(h uint64) int {
	return int((h >> 32) * uint64(len(s.parts)) >> 32)
}

// Emit adds v under key, combining it with the value already held for
// key. key is copied. Emit is safe for concurrent use; it returns
// ErrSpent or ErrClosed once the shuffle is reduced or closed, and a spill
// error (which also fails every later Emit and Reduce).
func (s *Shuffle[V]) Emit(key []byte, v V) error {
	if s.broken.Load() {
		return s.spillErr()
	}
	h := xxhash.Sum64(key)
	p := &s.parts[s.partitionOf(h)]
	p.mu.Lock()
	if p.doneErr != nil {
		err := p.doneErr
		p.mu.Unlock()
		return err
	}
	p.t.reserve()
	hs := h | 1
	sl, found := p.t.find(hs, key)
	if found {
		sl.v = s.opts.Combine(sl.v, v)
		p.mu.Unlock()
		return nil
	}
	if len(p.t.arena)+len(key) > maxArena {
		p.mu.Unlock()
		return fmt.Errorf("mapreduce: emit %d-byte key: %w", len(key), ErrFull)
	}
	p.t.insert(sl, hs, key, v)
	size := int64(len(key)) + s.entrySize
	p.bytes.Add(size)
	p.mu.Unlock()
	s.keys.Add(1)
	if s.mem.Add(size) > s.opts.MemoryBudget && s.opts.Codec != nil {
		return s.spillLargest()
	}
	return nil
}

func (s *Shuffle[V]) spillErr() error {
	s.spill.Lock()
	defer s.spill.Unlock()
	return s.spill.err
}

// Keys returns the number of distinct keys emitted so far. A key that
// reappears after its partition was spilled is counted again, so after
// spills this is an upper bound.
func (s *Shuffle[V]) Keys() int64 { return s.keys.Load() }

// Stats returns a snapshot of the shuffle's counters.
func (s *Shuffle[V]) Stats() Stats {
	s.spill.Lock()
	defer s.spill.Unlock()
	return Stats{Keys: s.keys.Load(), MemBytes: s.mem.Load(), Runs: s.spill.runs, SpillBytes: s.spill.bytes}
}

// spillLargest spills the largest partitions until memory is at half the
// budget. Only one goroutine spills at a time; other emitters that cross
// the budget wait for it.
func (s *Shuffle[V]) spillLargest() error {
	s.spill.Lock()
	defer s.spill.Unlock()
	if s.spill.err != nil {
		return s.spill.err
	}
	for s.mem.Load() > s.opts.MemoryBudget/2 {
		largest, most := -1, int64(0)
		for i := range s.parts {
			if b := s.parts[i].bytes.Load(); b > most {
				largest, most = i, b
			}
		}
		if largest < 0 {
			return nil
		}
		spilled, err := s.spillPartitionLocked(largest)
		if err != nil {
			s.spill.err = err
			s.broken.Store(true)
			return err
		}
		if !spilled { // reduced or closed under us
			return nil
		}
	}
	return nil
}

// spillPartitionLocked writes partition i's entries as one sorted run and
// empties it; false if there was nothing to spill. The caller holds
// s.spill. After an error the partition's table is unusable (the shuffle
// is broken anyway).
//
// A run is a sequence of entries, each uvarint(len(key)) key
// uvarint(len(value)) value, where value is the Codec encoding.
func (s *Shuffle[V]) spillPartitionLocked(i int) (bool, error) {
	p := &s.parts[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.doneErr != nil || p.t.used == 0 {
		return false, nil
	}
	if p.file == nil {
		if s.spill.dir == "" {
			if err := os.MkdirAll(s.opts.TempDir, 0o755); err != nil {
				return false, fmt.Errorf("mapreduce: create spill directory: %w", err)
			}
			dir, err := os.MkdirTemp(s.opts.TempDir, "shuffle-")
			if err != nil {
				return false, fmt.Errorf("mapreduce: create spill directory: %w", err)
			}
			s.spill.dir = dir
		}
		f, err := os.OpenFile(filepath.Join(s.spill.dir, fmt.Sprintf("part-%05d.run", i)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return false, fmt.Errorf("mapreduce: create spill file: %w", err)
		}
		p.file = f
	}
	es := p.t.sorted()
	cw := &countingWriter{w: p.file, off: p.fileSize}
	if s.spill.buf == nil {
		s.spill.buf = bufio.NewWriterSize(cw, spillBuffer)
	} else {
		s.spill.buf.Reset(cw)
	}
	bw := s.spill.buf
	rec, val := s.spill.rec, s.spill.val
	for j := range es {
		e := &es[j]
		val = s.opts.Codec.Append(val[:0], e.v)
		rec = binary.AppendUvarint(rec[:0], uint64(e.n))
		rec = append(rec, p.t.key(e)...)
		rec = binary.AppendUvarint(rec, uint64(len(val)))
		rec = append(rec, val...)
		if _, err := bw.Write(rec); err != nil {
			return false, fmt.Errorf("mapreduce: write spill run: %w", err)
		}
	}
	s.spill.rec, s.spill.val = rec, val
	if err := bw.Flush(); err != nil {
		return false, fmt.Errorf("mapreduce: write spill run: %w", err)
	}
	bw.Reset(nil)
	written := cw.off - p.fileSize
	p.runs = append(p.runs, run{off: p.fileSize, size: written, keys: len(es)})
	p.fileSize = cw.off
	s.spill.runs++
	s.spill.bytes += written
	p.t.reset()
	s.mem.Add(-p.bytes.Swap(0))
	return true, nil
}

// countingWriter writes at increasing offsets of a file.
type countingWriter struct {
	w   *os.File
	off int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.WriteAt(b, c.off)
	c.off += int64(n)
	return n, err
}

// Reduce calls fn once per distinct key with its combined value. The
// partitions are reduced in parallel on workers goroutines (0 means
// GOMAXPROCS); within a partition fn sees the keys in ascending byte order,
// one call at a time, so fn must be safe for concurrent use across
// partitions only. key is valid only during the call and must not be
// modified. The first error (fn's, returned unchanged, or a spill read
// error) stops the other workers and is returned; so is ctx's error if it
// is cancelled first. Afterwards the shuffle is spent: Emit and Reduce
// return ErrSpent. Spill files of reduced partitions are removed as soon
// as each partition is done.
func (s *Shuffle[V]) Reduce(ctx context.Context, workers int, fn func(part int, key []byte, v V) error) error {
	s.state.Lock()
	switch {
	case s.state.closed:
		s.state.Unlock()
		return ErrClosed
	case s.state.reduced:
		s.state.Unlock()
		return ErrSpent
	}
	s.state.reduced = true
	s.state.Unlock()

	if err := s.spillErr(); err != nil {
		return err
	}
	parts := make([]int, len(s.parts))
	for i := range parts {
		parts[i] = i
		p := &s.parts[i]
		p.mu.Lock()
		p.doneErr = ErrSpent
		p.mu.Unlock()
	}
	return Map(ctx, workers, parts, func(ctx context.Context, i int) error {
		return s.reducePartition(ctx, i, fn)
	})
}

// reducePartition reduces partition i: its memory entries merged with its
// spilled runs.
func (s *Shuffle[V]) reducePartition(ctx context.Context, i int, fn func(int, []byte, V) error) error {
	p := &s.parts[i]
	p.mu.Lock()
	t, runs, file := p.t, p.runs, p.file
	p.t, p.runs, p.file = table[V]{}, nil, nil
	s.mem.Add(-p.bytes.Swap(0))
	p.mu.Unlock()
	if file != nil {
		defer func() {
			file.Close()
			os.Remove(file.Name())
		}()
	}
	es := t.sorted()
	if len(runs) == 0 {
		for j := range es {
			if j%ctxEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if err := fn(i, t.key(&es[j]), es[j].v); err != nil {
				return err
			}
		}
		// A cancellation during the partition's last keys (after its last
		// check) still ends the reduce with the context's error.
		return ctx.Err()
	}
	return s.merge(ctx, i, &t, es, runs, file, fn)
}

// merge is reducePartition's k-way heap merge of the sorted runs (in spill
// order) and the sorted memory entries (last).
func (s *Shuffle[V]) merge(ctx context.Context, part int, t *table[V], es []slot[V], runs []run, file *os.File, fn func(int, []byte, V) error) error {
	h := make(cursorHeap[V], 0, len(runs)+1)
	for j, r := range runs {
		c := &cursor[V]{
			order: j,
			run:   r,
			name:  file.Name(),
			br:    newRunReader(file, r),
			codec: s.opts.Codec,
		}
		h = append(h, c)
	}
	h = append(h, &cursor[V]{order: len(runs), mem: es, t: t})
	live := h[:0]
	for _, c := range h {
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			live = append(live, c)
		}
	}
	h = live
	h.init()
	var scratch []byte
	for n := 0; len(h) > 0; n++ {
		if n%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		scratch = append(scratch[:0], h[0].key...)
		v := h[0].val
		for {
			if err := h.advance(); err != nil {
				return err
			}
			if len(h) == 0 || !bytes.Equal(h[0].key, scratch) {
				break
			}
			v = s.opts.Combine(v, h[0].val)
		}
		if err := fn(part, scratch, v); err != nil {
			return err
		}
	}
	return nil
}

// newRunReader returns a buffered reader of run r in file f.
func newRunReader(f *os.File, r run) *bufio.Reader {
	return bufio.NewReaderSize(&sectionReader{f: f, off: r.off, end: r.off + r.size}, int(min(r.size, readBuffer)))
}

// sectionReader reads [off, end) of a file.
type sectionReader struct {
	f        *os.File
	off, end int64
}

func (r *sectionReader) Read(b []byte) (int, error) {
	if r.off >= r.end {
		return 0, errEOS
	}
	if int64(len(b)) > r.end-r.off {
		b = b[:r.end-r.off]
	}
	n, err := r.f.ReadAt(b, r.off)
	r.off += int64(n)
	if n > 0 {
		err = nil
	}
	return n, err
}

// errEOS: a run's entries go past its section.
var errEOS = errors.New("entries past the end of the run")

// cursor walks one sorted source: a spilled run or the memory entries.
type cursor[V any] struct {
	order int // spill order; memory is last
	key   []byte
	val   V

	mem []slot[V] // sorted
	t   *table[V]

	run   run
	name  string
	br    *bufio.Reader
	codec Codec[V]
	read  int // keys read from the run
	kbuf  []byte
	vbuf  []byte
}

// next moves to the source's next entry; false at its end.
func (c *cursor[V]) next() (bool, error) {
	if c.br == nil {
		if len(c.mem) == 0 {
			return false, nil
		}
		e := &c.mem[0]
		c.key = c.t.key(e)
		c.val = e.v
		c.mem = c.mem[1:]
		return true, nil
	}
	if c.read == c.run.keys {
		return false, nil
	}
	var err error
	if c.kbuf, err = c.readField(c.kbuf); err != nil {
		return false, c.corrupt("key", err)
	}
	if c.vbuf, err = c.readField(c.vbuf); err != nil {
		return false, c.corrupt("value", err)
	}
	v, err := c.codec.Decode(c.vbuf)
	if err != nil {
		return false, fmt.Errorf("mapreduce: %s: run at %d: entry %d: decode value: %w", c.name, c.run.off, c.read, err)
	}
	c.key, c.val = c.kbuf, v
	c.read++
	return true, nil
}

// readField reads a uvarint length and that many bytes into buf.
func (c *cursor[V]) readField(buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(c.br)
	if err != nil {
		return buf, err
	}
	if n > uint64(c.run.size) {
		return buf, fmt.Errorf("length %d exceeds the run's %d bytes", n, c.run.size)
	}
	buf = slices.Grow(buf[:0], int(n))[:n]
	if _, err := io.ReadFull(c.br, buf); err != nil {
		return buf, err
	}
	return buf, nil
}

func (c *cursor[V]) corrupt(what string, err error) error {
	return fmt.Errorf("%w: %s: run at %d: entry %d: %s: %w", ErrCorrupt, c.name, c.run.off, c.read, what, err)
}

// cursorHeap is a min-heap of cursors by (key, order).
type cursorHeap[V any] []*cursor[V]

func (h cursorHeap[V]) less(i, j int) bool {
	if c := bytes.Compare(h[i].key, h[j].key); c != 0 {
		return c < 0
	}
	return h[i].order < h[j].order
}

func (h cursorHeap[V]) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h cursorHeap[V]) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// advance moves the top cursor on, dropping it when it is exhausted.
func (h *cursorHeap[V]) advance() error {
	ok, err := (*h)[0].next()
	if err != nil {
		return err
	}
	if !ok {
		old := *h
		old[0] = old[len(old)-1]
		old[len(old)-1] = nil
		*h = old[:len(old)-1]
	}
	h.down(0)
	return nil
}

// Close releases the shuffle's memory and removes its spill files. Calling
// it again returns nil; Emit and Reduce afterwards return ErrClosed.
func (s *Shuffle[V]) Close() error {
	s.state.Lock()
	if s.state.closed {
		s.state.Unlock()
		return nil
	}
	s.state.closed = true
	s.state.Unlock()

	var errs []error
	for i := range s.parts {
		p := &s.parts[i]
		p.mu.Lock()
		p.doneErr = ErrClosed
		if p.file != nil {
			if err := p.file.Close(); err != nil {
				errs = append(errs, fmt.Errorf("mapreduce: close spill file: %w", err))
			}
			p.file = nil
		}
		p.t, p.runs = table[V]{}, nil
		s.mem.Add(-p.bytes.Swap(0))
		p.mu.Unlock()
	}
	s.spill.Lock()
	if s.spill.dir != "" {
		if err := os.RemoveAll(s.spill.dir); err != nil {
			errs = append(errs, fmt.Errorf("mapreduce: remove spill directory: %w", err))
		}
		s.spill.dir = ""
	}
	s.spill.buf = nil
	s.spill.Unlock()
	return errors.Join(errs...)
}

// Map runs fn over inputs on workers goroutines (0 means GOMAXPROCS),
// each input once. The first error fn returns cancels the context the
// others see and is returned unchanged; no further inputs are started. If
// ctx is cancelled before every input ran, Map returns ctx's error. Map
// returns only after every fn call has returned.
func Map[In any](ctx context.Context, workers int, inputs []In, fn func(ctx context.Context, in In) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(inputs))
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next, done atomic.Int64
		once       sync.Once
		first      error
		wg         sync.WaitGroup
	)
	n := int64(len(inputs))
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				if err := fn(ctx, inputs[i]); err != nil {
					once.Do(func() { first = err })
					cancel()
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if done.Load() < n {
		return parent.Err()
	}
	return nil
}

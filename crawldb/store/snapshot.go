package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A store's snapshot stream: every key and value of one store (a group's,
// or a store of its own) as of its applied index, without the group prefix,
// so that it restores into any group of any Shared.
//
//	magic    "MRDNSNAP" (8 bytes)
//	version  1 (1 byte)
//	index    uint64, big-endian: the applied index of the data
//	record*  0x01, uvarint len(key), key, uvarint len(value), value
//	         (keys strictly ascending; 1 ≤ len(key) ≤ 64 KiB, first byte
//	         0x01..0xfe; len(value) ≤ MaxCommandBytes)
//	end      0x00, uvarint records, CRC-32C (4 bytes, big-endian) of every
//	         byte before it; then the stream ends
//
// The data's applied-index key must hold index (absent when index is 0).
const (
	snapMagic      = "MRDNSNAP"
	snapVersion    = 1
	snapTagRecord  = 0x01
	snapTagEnd     = 0x00
	maxSnapKey     = 64 << 10
	maxSnapValue   = MaxCommandBytes
	snapReadChunk  = 64 << 10
	snapWriterSize = 256 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// snapWriter encodes a snapshot stream.
type snapWriter struct {
	w   *bufio.Writer
	crc uint32
	n   uint64
	buf []byte
	err error
}

func newSnapWriter(w io.Writer, index uint64) *snapWriter {
	sw := &snapWriter{w: bufio.NewWriterSize(w, snapWriterSize)}
	sw.buf = append(sw.buf[:0], snapMagic...)
	sw.buf = append(sw.buf, snapVersion)
	sw.buf = binary.BigEndian.AppendUint64(sw.buf, index)
	sw.write(sw.buf)
	return sw
}

func (sw *snapWriter) write(b []byte) {
	if sw.err != nil {
		return
	}
	sw.crc = crc32.Update(sw.crc, castagnoli, b)
	_, sw.err = sw.w.Write(b)
}

func (sw *snapWriter) record(key, val []byte) {
	sw.buf = append(sw.buf[:0], snapTagRecord)
	sw.buf = binary.AppendUvarint(sw.buf, uint64(len(key)))
	sw.write(sw.buf)
	sw.write(key)
	sw.buf = binary.AppendUvarint(sw.buf[:0], uint64(len(val)))
	sw.write(sw.buf)
	sw.write(val)
	sw.n++
}

func (sw *snapWriter) end() error {
	sw.buf = append(sw.buf[:0], snapTagEnd)
	sw.buf = binary.AppendUvarint(sw.buf, sw.n)
	sw.write(sw.buf)
	sw.write(binary.BigEndian.AppendUint32(sw.buf[:0], sw.crc))
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	return sw.err
}

// snapReader decodes a snapshot stream, checking it as it goes.
type snapReader struct {
	r        *bufio.Reader
	crc      uint32
	off      int64
	key, val []byte
}

func (sr *snapReader) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrCorruptSnapshot, sr.off, fmt.Sprintf(format, args...))
}

func (sr *snapReader) readByte(what string) (byte, error) {
	c, err := sr.r.ReadByte()
	if err != nil {
		return 0, sr.short(what, err)
	}
	sr.crc = crc32.Update(sr.crc, castagnoli, []byte{c})
	sr.off++
	return c, nil
}

func (sr *snapReader) short(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return sr.corrupt("cut short in %s", what)
	}
	return fmt.Errorf("store: snapshot: reading %s at byte %d: %w", what, sr.off, err)
}

func (sr *snapReader) uvarint(what string) (uint64, error) {
	var x uint64
	for shift := uint(0); ; shift += 7 {
		c, err := sr.readByte(what)
		if err != nil {
			return 0, err
		}
		if shift == 63 && c > 1 {
			return 0, sr.corrupt("%s overflows", what)
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			if c == 0 && shift > 0 {
				return 0, sr.corrupt("%s not in its shortest form", what)
			}
			return x, nil
		}
	}
}

// read reads n bytes into dst[:0], growing it as the bytes arrive (a
// corrupt length costs no more memory than the stream holds).
func (sr *snapReader) read(dst []byte, n int, what string) ([]byte, error) {
	dst = dst[:0]
	for len(dst) < n {
		m := min(n-len(dst), snapReadChunk)
		dst = slices.Grow(dst, m)
		chunk := dst[len(dst) : len(dst)+m]
		if _, err := io.ReadFull(sr.r, chunk); err != nil {
			return nil, sr.short(what, err)
		}
		sr.crc = crc32.Update(sr.crc, castagnoli, chunk)
		sr.off += int64(m)
		dst = dst[:len(dst)+m]
	}
	return dst, nil
}

// decodeSnapshot reads a whole snapshot stream, calling fn (if not nil) for
// each record in order, and returns its applied index. Any fault of the
// stream is an ErrCorruptSnapshot that says what and where; fn is called
// before the stream is known to be whole, so a caller that must not act on
// a corrupt stream decodes it twice (RestoreSnapshot).
func decodeSnapshot(r io.Reader, fn func(key, val []byte) error) (uint64, error) {
	sr := &snapReader{r: bufio.NewReaderSize(r, snapWriterSize)}
	head, err := sr.read(nil, len(snapMagic)+1+8, "header")
	if err != nil {
		return 0, err
	}
	if string(head[:len(snapMagic)]) != snapMagic {
		return 0, fmt.Errorf("%w: not a store snapshot (starts %q)", ErrCorruptSnapshot, head[:len(snapMagic)])
	}
	if v := head[len(snapMagic)]; v != snapVersion {
		return 0, fmt.Errorf("%w: version %d, this store reads %d", ErrCorruptSnapshot, v, snapVersion)
	}
	index := binary.BigEndian.Uint64(head[len(snapMagic)+1:])
	var prev []byte
	var n uint64
	sawApplied := false
	for {
		tag, err := sr.readByte("record tag")
		if err != nil {
			return 0, err
		}
		if tag == snapTagEnd {
			break
		}
		if tag != snapTagRecord {
			return 0, sr.corrupt("record %d: tag %#x", n, tag)
		}
		kl, err := sr.uvarint("key length")
		if err != nil {
			return 0, err
		}
		if kl == 0 || kl > maxSnapKey {
			return 0, sr.corrupt("record %d: key length %d (1 to %d)", n, kl, maxSnapKey)
		}
		prev, sr.key = sr.key, prev
		if sr.key, err = sr.read(sr.key, int(kl), "key"); err != nil {
			return 0, err
		}
		k := sr.key
		switch {
		case k[0] < ownLo[0] || k[0] >= ownHi[0]:
			return 0, sr.corrupt("record %d: key %.100q outside a store's keys", n, k)
		case n > 0 && bytes.Compare(k, prev) <= 0:
			return 0, sr.corrupt("record %d: key %.100q not above the previous %.100q", n, k, prev)
		case bytes.Equal(k, keyRestoring):
			return 0, sr.corrupt("record %d: a restore marker (snapshot of an incomplete store)", n)
		}
		vl, err := sr.uvarint("value length")
		if err != nil {
			return 0, err
		}
		if vl > maxSnapValue {
			return 0, sr.corrupt("record %d: value length %d (at most %d)", n, vl, maxSnapValue)
		}
		if sr.val, err = sr.read(sr.val, int(vl), "value"); err != nil {
			return 0, err
		}
		if bytes.Equal(k, keyApplied) {
			if len(sr.val) != 8 || binary.BigEndian.Uint64(sr.val) != index {
				return 0, sr.corrupt("applied index %x in the data, %d in the header", sr.val, index)
			}
			sawApplied = true
		}
		if fn != nil {
			if err := fn(k, sr.val); err != nil {
				return 0, err
			}
		}
		n++
	}
	count, err := sr.uvarint("record count")
	if err != nil {
		return 0, err
	}
	want := sr.crc
	sum, err := sr.read(nil, 4, "checksum")
	if err != nil {
		return 0, err
	}
	switch {
	case count != n:
		return 0, sr.corrupt("%d records, the end says %d", n, count)
	case binary.BigEndian.Uint32(sum) != want:
		return 0, sr.corrupt("checksum %08x, computed %08x", binary.BigEndian.Uint32(sum), want)
	case index != 0 && !sawApplied:
		return 0, sr.corrupt("header index %d, no applied index in the data", index)
	}
	if _, err := sr.r.ReadByte(); err == nil {
		return 0, sr.corrupt("bytes after the end")
	} else if !errors.Is(err, io.EOF) {
		return 0, sr.short("the end", err)
	}
	return index, nil
}

// Snapshot is a consistent view of one store as of its applied index, for
// a Raft snapshot: taken while no command is applied (the FSM's Snapshot),
// written while commands go on (Persist), closed when done (Release). It is
// a Pebble snapshot of the store's key range only (eventually file-only),
// so that a long Persist does not keep the other groups' overwritten
// values from being compacted away.
type Snapshot struct {
	s     *Store
	snap  *pebble.EventuallyFileOnlySnapshot
	index uint64
}

// Snapshot takes a snapshot of the store as of the last command applied.
func (s *Store) Snapshot() (*Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, fmt.Errorf("%w: snapshot of %s", ErrClosed, s.where())
	}
	snap := s.db.NewEventuallyFileOnlySnapshot([]pebble.KeyRange{{Start: s.ks.lo, End: s.ks.hi}})
	return &Snapshot{s: s, snap: snap, index: s.applied.Load()}, nil
}

// Index is the applied index the snapshot holds.
func (sn *Snapshot) Index() uint64 { return sn.index }

// WriteTo writes the snapshot as a stream (see the layout above) to w. It
// may be called more than once.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	sk := sn.s.ks.withEFOS(sn.snap)
	it, err := sk.newIter(ownLo, ownHi)
	if err != nil {
		return 0, fmt.Errorf("store: snapshot of %s: %w", sn.s.where(), err)
	}
	sw := newSnapWriter(cw, sn.index)
	for ok := it.First(); ok && sw.err == nil; ok = it.Next() {
		sw.record(it.Key(), it.Value())
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return cw.n, fmt.Errorf("store: snapshot of %s: %w", sn.s.where(), err)
	}
	if err := sw.end(); err != nil {
		return cw.n, fmt.Errorf("store: snapshot of %s: write: %w", sn.s.where(), err)
	}
	return cw.n, nil
}

// Close releases the snapshot; a second call does nothing.
func (sn *Snapshot) Close() error {
	if sn.snap == nil {
		return nil
	}
	err := sn.snap.Close()
	sn.snap = nil
	return err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteSnapshot writes a snapshot of the store as of the last command
// applied to w: Snapshot, WriteTo and Close in one call.
func (s *Store) WriteSnapshot(w io.Writer) error {
	sn, err := s.Snapshot()
	if err != nil {
		return err
	}
	defer sn.Close()
	_, err = sn.WriteTo(w)
	return err
}

// Test hooks: restoreBatchBytes is the size of a restore's batches;
// restoreHook, if set, is called after each committed batch of data and
// stops the restore where it is if it returns an error (as a crash would).
var (
	restoreBatchBytes = 4 << 20
	restoreHook       func(batch int) error
)

// RestoreSnapshot replaces every key of the store with those of a snapshot
// stream (WriteSnapshot, from any store), and reloads its applied index and
// counters from them. It reads the whole stream into a spool file beside
// the Pebble and checks it before it changes anything: a corrupt or short
// stream is refused with ErrCorruptSnapshot and the store is unchanged.
//
// The store is then rewritten in batches: the first deletes its keys and
// sets a restore marker (durably), the last deletes the marker (durably).
// A crash in between leaves the marker, and the next open of the store
// reports ErrIncomplete instead of serving part of a state. An I/O error in
// between makes this store refuse every command (ErrIncomplete) until a
// restore succeeds. Commands must not be applied meanwhile (Raft does not);
// reads made meanwhile may see part of the new state.
func (s *Store) RestoreSnapshot(r io.Reader) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return fmt.Errorf("%w: restore of %s", ErrClosed, s.where())
	}
	if s.mu.failed != nil && !errors.Is(s.mu.failed, ErrIncomplete) {
		return s.mu.failed
	}
	fs := s.opts.FS
	path := fs.PathJoin(s.dir, spoolName(s.group))
	defer fs.Remove(path)
	index, err := s.spool(r, path)
	if err != nil {
		return fmt.Errorf("store: restore %s: %w", s.where(), err)
	}
	if err := s.rewrite(path); err != nil {
		s.mu.failed = fmt.Errorf("%w: %s: restore of snapshot %d stopped in its middle: %w", ErrIncomplete, s.where(), index, err)
		s.log.Error("store: restore failed in its middle; the store refuses commands until a restore succeeds", "dir", s.dir, "group", s.group, "index", index, "err", err)
		return s.mu.failed
	}
	if err := s.load(); err != nil {
		s.mu.failed = fmt.Errorf("%w: %s: reload after restoring snapshot %d: %w", ErrStorage, s.where(), index, err)
		return s.mu.failed
	}
	s.mu.failed = nil
	s.log.Info("store: restored snapshot", "dir", s.dir, "group", s.group, "index", index)
	return nil
}

// spool copies the stream to the file path while checking it; it returns
// the stream's applied index.
func (s *Store) spool(r io.Reader, path string) (uint64, error) {
	f, err := s.opts.FS.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	bw := bufio.NewWriterSize(f, snapWriterSize)
	index, err := decodeSnapshot(io.TeeReader(r, bw), nil)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return index, err
}

// rewrite replaces the store's keys with the spooled stream's.
func (s *Store) rewrite(path string) error {
	f, err := s.opts.FS.Open(path)
	if err != nil {
		return fmt.Errorf("open spool: %w", err)
	}
	defer f.Close()
	b := s.ks.newBatch(s.db, 1<<10, nil)
	if err := errors.Join(b.deleteAll(), b.Set(keyRestoring, nil, nil), b.Commit(pebble.Sync), b.Close()); err != nil {
		return err
	}
	b = s.ks.newBatch(s.db, restoreBatchBytes, nil)
	defer func() { b.Close() }()
	batches := 0
	_, err = decodeSnapshot(f, func(key, val []byte) error {
		if err := b.Set(key, val, nil); err != nil {
			return err
		}
		if b.Len() < restoreBatchBytes {
			return nil
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return err
		}
		b.Close()
		b = s.ks.newBatch(s.db, restoreBatchBytes, b.kbuf)
		batches++
		if restoreHook != nil {
			return restoreHook(batches)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := b.Delete(keyRestoring, nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

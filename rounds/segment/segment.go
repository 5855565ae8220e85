// Package segment stores append-only files of records that survive a
// SIGKILL of the writing process at any moment.
//
// Each record is one frame:
//
//	magic byte 0xD7 | uvarint payload length | payload | CRC-32C (little endian)
//
// where the CRC covers the length bytes and the payload. A Writer hands
// each Append to the kernel as one write(2) with no user-space buffering,
// so a record is in the page cache (and survives a process kill) once
// Append returns; it reaches the disk only on Sync or Close. A kill during
// a write leaves at most one torn frame at the end of the file, which Read
// ignores and OpenAppend truncates away.
package segment

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// MaxRecord is the largest record payload, in bytes.
const MaxRecord = 64 << 20

const (
	magic = 0xD7
	// maxHeader is the magic byte plus the longest uvarint of MaxRecord.
	maxHeader = 1 + 4
	crcLen    = 4
	// keepBuf is the largest frame buffer a Writer keeps between appends.
	keepBuf = 1 << 20
)

// Sentinel errors.
var (
	// ErrCorrupt: a frame inside the file is damaged (bad magic byte,
	// impossible length or CRC mismatch). Read returns a *CorruptError.
	ErrCorrupt = errors.New("segment: corrupt frame")
	// ErrClosed: the Writer is closed.
	ErrClosed = errors.New("segment: writer closed")
	// ErrTooLarge: a record is longer than MaxRecord.
	ErrTooLarge = errors.New("segment: record too large")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CorruptError reports where the readable part of a file ends because of
// a damaged frame. It matches ErrCorrupt under errors.Is.
type CorruptError struct {
	Path   string // the file
	Offset int64  // byte offset of the first damaged frame
	Reason string // what is wrong with it
}

// Error implements error.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("segment: %s: corrupt frame at offset %d: %s", e.Path, e.Offset, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// Writer appends records to one file. It is safe for concurrent use;
// each record (or batch) lands contiguously.
type Writer struct {
	path string

	mu struct {
		sync.Mutex
		f       *os.File
		size    int64  // bytes of intact frames in the file
		buf     []byte // frame buffer reused across appends
		err     error  // sticky: the file may hold a partial frame we could not remove
		dirSync bool   // the parent directory still needs an fsync (new file)
		closed  bool
	}
}

// Create creates a new segment file at path, which must not exist.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("segment: create: %w", err)
	}
	w := &Writer{path: path}
	w.mu.f = f
	w.mu.dirSync = true
	return w, nil
}

// OpenAppend opens the existing segment file at path for appending. It
// first recovers the file: everything from the first torn or damaged frame
// on (a partial frame, a bad CRC, and any frames after it) is truncated
// away, and dropped reports how many bytes that removed.
func OpenAppend(path string) (w *Writer, dropped int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("segment: open: %w", err)
	}
	fail := func(err error) (*Writer, int64, error) {
		f.Close()
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return fail(fmt.Errorf("segment: stat %s: %w", path, err))
	}
	res, err := scan(f, st.Size(), nil)
	if err != nil {
		return fail(fmt.Errorf("segment: recover %s: %w", path, err))
	}
	if res.end < st.Size() {
		if err := f.Truncate(res.end); err != nil {
			return fail(fmt.Errorf("segment: truncate %s: %w", path, err))
		}
		if err := f.Sync(); err != nil {
			return fail(fmt.Errorf("segment: sync %s: %w", path, err))
		}
	}
	w = &Writer{path: path}
	w.mu.f = f
	w.mu.size = res.end
	return w, st.Size() - res.end, nil
}

// Path returns the file's path.
func (w *Writer) Path() string { return w.path }

// Size returns the length of the file's intact frames, in bytes.
func (w *Writer) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.size
}

// Append writes rec (at most MaxRecord bytes) as one frame with a single
// write(2). It does not fsync.
func (w *Writer) Append(rec []byte) error {
	if len(rec) > MaxRecord {
		return fmt.Errorf("segment: append %d bytes: %w", len(rec), ErrTooLarge)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usableLocked(); err != nil {
		return err
	}
	w.mu.buf = appendFrame(w.mu.buf[:0], rec)
	return w.writeLocked()
}

// AppendBatch writes recs as consecutive frames with a single write(2).
// Either all of them are appended or, on error, none (unless the file is
// killed mid-write, which leaves a prefix of whole frames and a torn one).
func (w *Writer) AppendBatch(recs [][]byte) error {
	for _, r := range recs {
		if len(r) > MaxRecord {
			return fmt.Errorf("segment: append batch record of %d bytes: %w", len(r), ErrTooLarge)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usableLocked(); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	buf := w.mu.buf[:0]
	for _, r := range recs {
		buf = appendFrame(buf, r)
	}
	w.mu.buf = buf
	return w.writeLocked()
}

func (w *Writer) usableLocked() error {
	if w.mu.closed {
		return ErrClosed
	}
	return w.mu.err
}

// writeLocked writes w.mu.buf. On a failed or short write it cuts the file
// back to the last intact frame; if even that fails, the Writer is broken.
func (w *Writer) writeLocked() error {
	buf := w.mu.buf
	if cap(buf) > keepBuf {
		w.mu.buf = nil
	}
	n, err := w.mu.f.Write(buf)
	if err == nil {
		w.mu.size += int64(n)
		return nil
	}
	err = fmt.Errorf("segment: write %s: %w", w.path, err)
	if n > 0 {
		if terr := w.mu.f.Truncate(w.mu.size); terr != nil {
			w.mu.err = fmt.Errorf("%w (and truncating the partial frame failed: %v)", err, terr)
			return w.mu.err
		}
	}
	return err
}

// Sync flushes the file (and, for a file made by Create, its directory
// entry) to stable storage.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return ErrClosed
	}
	return w.syncLocked()
}

func (w *Writer) syncLocked() error {
	if err := w.mu.f.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", w.path, err)
	}
	if w.mu.dirSync {
		if err := syncDir(filepath.Dir(w.path)); err != nil {
			return fmt.Errorf("segment: sync directory of %s: %w", w.path, err)
		}
		w.mu.dirSync = false
	}
	return nil
}

// Close syncs and closes the file. Closing again returns nil.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return nil
	}
	w.mu.closed = true
	w.mu.buf = nil
	serr := w.syncLocked()
	if err := w.mu.f.Close(); err != nil && serr == nil {
		serr = fmt.Errorf("segment: close %s: %w", w.path, err)
	}
	return serr
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// appendFrame appends rec's frame to dst.
func appendFrame(dst, rec []byte) []byte {
	dst = append(dst, magic)
	lenAt := len(dst)
	dst = binary.AppendUvarint(dst, uint64(len(rec)))
	crc := crc32.Update(0, castagnoli, dst[lenAt:])
	crc = crc32.Update(crc, castagnoli, rec)
	dst = append(dst, rec...)
	return binary.LittleEndian.AppendUint32(dst, crc)
}

// Read calls fn with each intact record of the file at path, in order.
// rec is valid only during the call. Reading stops at the first frame that
// is not intact:
//
//   - a frame that runs past the end of the file is a torn tail (what a
//     killed writer leaves): Read returns err == nil;
//   - a damaged frame inside the file (bad magic byte, length over
//     MaxRecord, CRC mismatch) returns a *CorruptError (matching
//     ErrCorrupt) holding its offset.
//
// In both cases tail is the number of bytes from that frame to the end of
// the file (so the readable part ends at size-tail) and records counts the
// records before it. A torn length field that still fits in the file shows
// up as corruption: a reader cannot tell a damaged length from a torn one.
// If fn returns an error, Read stops and returns it unchanged.
func Read(path string, fn func(rec []byte) error) (records int, tail int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("segment: read: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("segment: stat %s: %w", path, err)
	}
	res, err := scan(f, st.Size(), fn)
	if err != nil {
		return res.records, st.Size() - res.end, err
	}
	if res.bad != "" {
		return res.records, st.Size() - res.end, &CorruptError{Path: path, Offset: res.end, Reason: res.bad}
	}
	return res.records, st.Size() - res.end, nil
}

// scanResult is what scan found.
type scanResult struct {
	records int
	end     int64  // offset just past the last intact frame
	bad     string // why the frame at end is damaged; "" if the file ends there or with a torn frame
}

// scan reads the first size bytes of r frame by frame, calling fn (if not
// nil) for each intact record. It returns an error only for I/O errors and
// fn's errors.
func scan(r io.Reader, size int64, fn func([]byte) error) (scanResult, error) {
	var res scanResult
	bufSize := 256 << 10
	if size < int64(bufSize) {
		bufSize = max(int(size), 16)
	}
	br := bufio.NewReaderSize(io.LimitReader(r, size), bufSize)
	var payload []byte
	var hdr [maxHeader]byte
	for {
		remaining := size - res.end
		if remaining == 0 {
			return res, nil
		}
		// Header: magic and a uvarint of at most 4 bytes.
		b, err := br.ReadByte()
		if err != nil {
			return res, ioErr(err)
		}
		if b != magic {
			res.bad = fmt.Sprintf("bad magic byte %#x", b)
			return res, nil
		}
		hdr[0] = b
		n := 1
		var length uint64
		for shift := 0; ; shift += 7 {
			if n == maxHeader {
				res.bad = "length field too long"
				return res, nil
			}
			c, err := br.ReadByte()
			if err == io.EOF {
				return res, nil // torn inside the length field
			}
			if err != nil {
				return res, ioErr(err)
			}
			hdr[n] = c
			n++
			length |= uint64(c&0x7f) << shift
			if c < 0x80 {
				break
			}
		}
		if length > MaxRecord {
			res.bad = fmt.Sprintf("length %d over the limit", length)
			return res, nil
		}
		frameLen := int64(n) + int64(length) + crcLen
		if frameLen > remaining {
			return res, nil // torn: the frame runs past the end
		}
		if cap(payload) < int(length)+crcLen {
			payload = make([]byte, int(length)+crcLen)
		}
		p := payload[:int(length)+crcLen]
		if _, err := io.ReadFull(br, p); err != nil {
			return res, ioErr(err)
		}
		rec := p[:length]
		want := binary.LittleEndian.Uint32(p[length:])
		crc := crc32.Update(crc32.Update(0, castagnoli, hdr[1:n]), castagnoli, rec)
		if crc != want {
			res.bad = "CRC mismatch"
			return res, nil
		}
		if fn != nil {
			if err := fn(rec); err != nil {
				return res, err
			}
		}
		res.records++
		res.end += frameLen
	}
}

// ioErr maps an early end of data (the file shrank under us) to an error.
func ioErr(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("segment: read: %w", err)
}

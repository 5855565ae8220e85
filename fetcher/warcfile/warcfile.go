// Package warcfile writes fetched exchanges to gzip-compressed WARC 1.1 files.
//
// Every exchange becomes a request and a response record, each its own gzip
// member, linked by WARC-Concurrent-To; a refetch that found the page
// unchanged becomes a request and a revisit record instead (see Revisit).
// Metadata writes a metadata record (application/warc-fields) about a URL.
// Records are serialised and compressed in the calling goroutine, outside
// any lock; only the append to the file is serialised, so concurrent
// writers compress in parallel. A file is written under the name
// "<name>.open", starts with a warcinfo record, and is renamed when it is
// full or the Writer is closed. Open repairs ".open" files
// left behind by a crash. The output reads back with
// github.com/nlnwa/gowarc/v3's WarcFileReader under strict validation.
//
// # Index
//
// With Options.Index, every file "<name>" (name ending ".warc.gz") gets two
// CDXJ indexes beside it, in the format pywb reads (see package cdxj), each
// line with the offset and length of a record's gzip member and "<name>" as
// the file name: the replay index "<name>.cdxj", one line per response and
// revisit record (mime type "warc/revisit"), and the side index
// "<name>.cdxj-meta", one line per metadata record (mime type
// "application/warc-fields"), kept out of the replay index where a replay
// tool would take them for captures. While the file is "<name>.open", its
// indexes are "<name>.cdxj.open" and "<name>.cdxj-meta.open": the lines in
// the order of the records, each written (one write per Write or Metadata
// call) after the records it points at. When the file is finished and
// renamed, the lines of each are sorted by their bytes (as LC_ALL=C sort)
// into "<name>.cdxj-meta" and "<name>.cdxj", each written to a temporary
// file and renamed, and the ".open" ones are removed. The indexes are
// written from what the Writer appends; the file is not read back, but if
// a line cannot be written both are built from the finished file instead.
//
// After a crash, Open rebuilds the indexes of every file it repairs from
// the repaired file itself (so every line points at a complete record and
// every indexed record has its line), replacing its ".open" indexes; and a
// "<name>.cdxj.open" or "<name>.cdxj-meta.open" whose file was already
// renamed (a crash between the renames) gets both indexes built from
// "<name>". Without Options.Index, Open removes such partial indexes and
// builds none; a file written without an index keeps none (`site
// warc-index` builds them).
package warcfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/meridian-crawler/meridian/fetcher/warcfile/cdxj"
)

// Sentinel errors.
var (
	// ErrClosed is returned by Write after Close.
	ErrClosed = errors.New("warcfile: writer closed")
	// ErrInvalid is wrapped by Write's error for an exchange it cannot record.
	ErrInvalid = errors.New("warcfile: invalid exchange")
)

// Options configure a Writer. Zero fields get the documented defaults.
type Options struct {
	// Dir holds the files; it is created if missing. Required.
	Dir string
	// Prefix starts every file name. Default "meridian".
	Prefix string
	// MaxSize is the size a file may reach: an exchange that would take a
	// file past it goes to a new file (a single larger exchange still gets
	// written, alone). Default 1 GiB.
	MaxSize int64
	// Software is the warcinfo "software" field. Default "meridian".
	Software string
	// Level is the gzip level, from gzip.HuffmanOnly (-2) to
	// gzip.BestCompression (9). Default gzip.BestSpeed (1); 0 means default.
	Level int
	// Logger receives file rotations and crash recoveries. Nil discards.
	Logger *slog.Logger
	// Index, if set, keeps a CDXJ index beside every file (see the package
	// documentation). Off by default; the site turns it on.
	Index bool
}

// The defaults of Options.
const (
	DefaultPrefix   = "meridian"
	DefaultMaxSize  = 1 << 30
	DefaultSoftware = "meridian"
	DefaultLevel    = gzip.BestSpeed
)

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.MaxSize == 0 {
		o.MaxSize = DefaultMaxSize
	}
	if o.Software == "" {
		o.Software = DefaultSoftware
	}
	if o.Level == 0 {
		o.Level = DefaultLevel
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem with o (after EnsureDefaults) at once.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("warcfile: "+format, args...)) }
	if o.Dir == "" {
		bad("Dir is required")
	}
	if strings.ContainsAny(o.Prefix, `/\`) || o.Prefix == "." || o.Prefix == ".." || strings.ContainsFunc(o.Prefix, isCtl) {
		bad("prefix %q is not a plain file name", o.Prefix)
	}
	if o.MaxSize < 0 {
		bad("max size %d is negative", o.MaxSize)
	}
	if strings.ContainsFunc(o.Software, isCtl) {
		bad("software %q has control characters", o.Software)
	}
	if o.Level < gzip.HuffmanOnly || o.Level > gzip.BestCompression {
		bad("gzip level %d is not in [%d, %d]", o.Level, gzip.HuffmanOnly, gzip.BestCompression)
	}
	return errors.Join(errs...)
}

func isCtl(r rune) bool { return r < 0x20 || r == 0x7f }

// Exchange is one HTTP request and its response, as sent and received.
type Exchange struct {
	URL       string     // WARC-Target-URI; no spaces or control characters
	IP        netip.Addr // WARC-IP-Address; omitted if invalid
	Date      time.Time  // when the request was sent; zero means now
	Request   []byte     // request line and headers as sent, ending CRLF CRLF; empty: no request record
	Response  []byte     // status line and headers as received, ending CRLF CRLF; required
	Body      []byte     // the payload as received, after transfer decoding
	Truncated string     // "" or the WARC-Truncated reason: "length", "time", "disconnect" (anything else is written as "unspecified")
	// Revisit, if not NoRevisit, records the response as a revisit record
	// of that profile instead of a response record (see Revisit).
	Revisit Revisit
	// RefersToDate is the WARC-Date of the earlier capture that a revisit
	// record refers to (WARC-Refers-To-Date); zero: the field is omitted.
	// Ignored without Revisit.
	RefersToDate time.Time
	// Extra are fields of the crawler's own (e.g. the fetcher's
	// WARC-Meridian-TLS-Unverified) added to the response or revisit
	// record, in order, after the standard ones. A name must be a token,
	// a value must have no control characters but tabs; errors for these
	// wrap ErrInvalid.
	Extra [][2]string
	// Protocols are the WARC-Protocol values of the request and response
	// (or revisit) records, one field each, in order: the HTTP protocol
	// and the TLS version, e.g. "h2", "tls/1.3" (the field proposed for
	// WARC in iipc/warc-specifications issue 42). Each is a token: no
	// spaces, control characters or separators but '/' and '.'. nil: none.
	Protocols []string
}

// Revisit says how the response of an Exchange is recorded: as a response
// record, or as a revisit record (WARC 1.1, section 6.7) of a profile.
//
// A revisit record has the response record's fields (WARC-Target-URI,
// WARC-IP-Address, WARC-Concurrent-To its request record) and, in this
// order, WARC-Profile, WARC-Refers-To-Target-URI (the Exchange's URL),
// WARC-Refers-To-Date (RefersToDate, if set) and WARC-Block-Digest; its
// Content-Type is "application/http;msgtype=response" and its block is the
// Exchange's Response (the HTTP status line and headers) alone.
type Revisit uint8

// The ways of recording a response.
const (
	// NoRevisit writes a response record: Response and Body.
	NoRevisit Revisit = iota
	// RevisitNotModified writes a revisit record of the profile
	// ProfileServerNotModified, for a 304 answer to a conditional request.
	// Body is not written (a 304 has none); Truncated is written if set.
	RevisitNotModified
	// RevisitIdenticalPayload writes a revisit record of the profile
	// ProfileIdenticalPayloadDigest, for a payload identical to the one of
	// an earlier capture: WARC-Payload-Digest is the digest of Body (the
	// digest a response record of it would have), Body is not written, and
	// the record says "WARC-Truncated: length" as the standard requires
	// (Truncated is ignored).
	RevisitIdenticalPayload

	numRevisits // the number of valid values
)

// The revisit profiles of WARC 1.1 (WARC-Profile).
const (
	ProfileServerNotModified      = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
	ProfileIdenticalPayloadDigest = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
)

// Stats are cumulative counters of a Writer.
type Stats struct {
	Files     int64 // files created
	Records   int64 // records written, warcinfo included
	Exchanges int64 // exchanges written
	Revisits  int64 // of which recorded with a revisit record
	Metadata  int64 // metadata records written
	Bytes     int64 // compressed bytes written
	Recovered int64 // leftover ".open" files repaired by Open
}

// Writer appends exchanges to WARC files. It is goroutine-safe.
type Writer struct {
	o        Options
	pid      int
	hostname string

	mu struct {
		sync.Mutex
		f      *os.File
		path   string // of f, with the ".open" suffix
		size   int64  // bytes in f
		start  int64  // bytes of f's warcinfo
		seq    int    // sequence number of the next file
		closed bool

		// The indexes of f, with Options.Index: [0] the replay index,
		// [1] the side index.
		idx     [2]*os.File // "<name>.cdxj.open", "<name>.cdxj-meta.open", locked; nil: none, or given up
		idxPath [2]string
		idxBad  bool   // a line could not be written: rebuild the indexes from f at the end
		name    string // f's final base name, the lines' filename
		line    []byte // scratch
	}

	files, records, exchanges, revisits, metadata, bytes, recovered atomic.Int64
}

// Open prepares a Writer for o (copied, with defaults filled in): it creates
// Dir and repairs every "<Prefix>-*.warc.gz.open" file there that no live
// Writer holds, by truncating it to its last complete exchange and renaming
// it, and (with o.Index) rebuilds the index of each from it and finishes
// indexes a crash left unfinished (see the package documentation). The
// first file is created by the first Write.
func Open(o Options) (*Writer, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("warcfile: create dir: %w", err)
	}
	w := &Writer{o: o, pid: os.Getpid()}
	w.hostname, _ = os.Hostname()
	n, err := recoverDir(o.Dir, o.Prefix, o.Index, o.Logger)
	w.recovered.Add(int64(n))
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Write appends x as a request record (if x.Request is set) and a response
// record (or a revisit record, see Exchange.Revisit), each its own gzip
// member, to the current file, rotating first if the file would pass
// MaxSize. x is not retained.
func (w *Writer) Write(x *Exchange) error {
	if err := x.check(); err != nil {
		return err
	}
	e := getEncoder(w.o.Level)
	defer putEncoder(e)
	e.index = w.o.Index
	if err := e.exchange(x); err != nil {
		return err
	}
	if err := w.append(e); err != nil {
		return err
	}
	w.exchanges.Add(1)
	if x.Revisit != NoRevisit {
		w.revisits.Add(1)
	}
	return nil
}

// Metadata appends a metadata record (WARC 1.1, section 6.6) about
// targetURI at date (zero: now) to the current file, as its own gzip
// member: Content-Type application/warc-fields, and a block of one
// "name: value" CRLF line per field, in order, e.g.
//
//	w.Metadata(u, time.Now(), [][2]string{{"near-duplicate-of", v}, {"simhash", "0123abcd89ef4567"}})
//
// targetURI follows the rules of Exchange.URL; a field name must be a
// token (no control characters, spaces or separators such as ':'), a value
// must have no control characters but tabs; at least one field. Errors for
// these wrap ErrInvalid. The record is indexed (with Options.Index) with
// the mime type "application/warc-fields".
func (w *Writer) Metadata(targetURI string, date time.Time, fields [][2]string) error {
	if err := checkMetadata(targetURI, fields); err != nil {
		return err
	}
	if date.IsZero() {
		date = time.Now()
	}
	e := getEncoder(w.o.Level)
	defer putEncoder(e)
	e.index = w.o.Index
	if err := e.metadata(targetURI, date, fields); err != nil {
		return err
	}
	if err := w.append(e); err != nil {
		return err
	}
	w.metadata.Add(1)
	return nil
}

// append appends the members of e to the current file, rotating first if
// the file would pass MaxSize, and their index lines to its index.
func (w *Writer) append(e *encoder) error {
	data := e.out
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return ErrClosed
	}
	if w.mu.f != nil && w.mu.size > w.mu.start && w.mu.size+int64(len(data)) > w.o.MaxSize {
		if err := w.finishLocked(); err != nil {
			return err
		}
	}
	if w.mu.f == nil {
		if err := w.createLocked(); err != nil {
			return err
		}
	}
	base := w.mu.size
	if err := w.appendLocked(data); err != nil {
		return err
	}
	w.records.Add(int64(e.records))
	for i, f := range w.mu.idx {
		if f == nil || len(e.lines) == 0 {
			continue
		}
		b := w.mu.line[:0]
		for _, l := range e.lines {
			if l.meta == (i == 1) {
				b = append(b, e.idx[l.start:l.end]...)
				b = strconv.AppendInt(b, base+int64(l.member), 10)
				b = cdxj.AppendTail(b, w.mu.name)
			}
		}
		w.mu.line = b
		if len(b) > maxPooledBuf {
			w.mu.line = nil
		}
		if len(b) == 0 {
			continue
		}
		if _, err := f.Write(b); err != nil {
			w.o.Logger.Error("warcfile: index write failed; the indexes will be rebuilt from the file", "path", w.mu.idxPath[i], "err", err)
			w.dropIndexLocked()
			break
		}
	}
	return nil
}

// dropIndexLocked gives up writing the current indexes: they are rebuilt
// from the WARC file when the file is finished.
func (w *Writer) dropIndexLocked() {
	for i, f := range w.mu.idx {
		if f != nil {
			f.Close()
			w.mu.idx[i] = nil
		}
	}
	w.mu.idxBad = true
}

// checkMetadata validates the arguments of Metadata.
func checkMetadata(targetURI string, fields [][2]string) error {
	if err := (&Exchange{URL: targetURI, Response: []byte{0}}).check(); err != nil {
		return err
	}
	if len(fields) == 0 {
		return fmt.Errorf("warcfile: metadata of %s: no fields: %w", targetURI, ErrInvalid)
	}
	for _, f := range fields {
		if err := checkField(f); err != nil {
			return fmt.Errorf("warcfile: metadata of %s: %w", targetURI, err)
		}
	}
	return nil
}

// checkField checks a "name: value" field of Metadata or Exchange.Extra.
func checkField(f [2]string) error {
	if f[0] == "" || strings.ContainsFunc(f[0], notToken) {
		return fmt.Errorf("field name %q: %w", f[0], ErrInvalid)
	}
	if strings.ContainsFunc(f[1], func(r rune) bool { return r != '\t' && isCtl(r) }) {
		return fmt.Errorf("field %s value %q: %w", f[0], f[1], ErrInvalid)
	}
	return nil
}

// notToken reports whether r may not be in an HTTP/WARC token.
func notToken(r rune) bool {
	return r <= ' ' || r >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, r)
}

// Close finishes the current file (sync, rename) and makes later Writes
// fail with ErrClosed. Calls after the first return nil.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return nil
	}
	w.mu.closed = true
	if w.mu.f == nil {
		return nil
	}
	return w.finishLocked()
}

// Stats returns a snapshot of the counters.
func (w *Writer) Stats() Stats {
	return Stats{
		Files:     w.files.Load(),
		Records:   w.records.Load(),
		Exchanges: w.exchanges.Load(),
		Revisits:  w.revisits.Load(),
		Metadata:  w.metadata.Load(),
		Bytes:     w.bytes.Load(),
		Recovered: w.recovered.Load(),
	}
}

// openSuffix marks a file being written.
const openSuffix = ".open"

// indexSuffix ends the name of the replay index of a file: "<name>.cdxj".
const indexSuffix = ".cdxj"

// metaSuffix ends the name of the side index of a file:
// "<name>.cdxj-meta" (cdxj.MetaPath).
const metaSuffix = indexSuffix + cdxj.MetaSuffix

// fileName returns the name of file number seq created at t.
func (w *Writer) fileName(t time.Time, seq int) string {
	return fmt.Sprintf("%s-%s-%05d-%d.warc.gz", w.o.Prefix, t.UTC().Format("20060102150405"), seq, w.pid)
}

// createLocked creates the next file, locks it and writes its warcinfo.
func (w *Writer) createLocked() error {
	var (
		f    *os.File
		name string
		err  error
	)
	// A name can be taken by a file of an earlier process with the same pid
	// in the same second; skip to the next sequence number then.
	for range 100 {
		name = w.fileName(time.Now(), w.mu.seq)
		w.mu.seq++
		f, err = os.OpenFile(filepath.Join(w.o.Dir, name+openSuffix), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
		if err == nil && fileExists(filepath.Join(w.o.Dir, name)) {
			f.Close()
			os.Remove(f.Name())
			err = os.ErrExist
		}
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("warcfile: create file: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("warcfile: lock %s: %w", f.Name(), err)
	}
	e := getEncoder(w.o.Level)
	defer putEncoder(e)
	if err := e.warcinfo(name, w.o.Software, w.hostname); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	w.mu.f, w.mu.path, w.mu.size, w.mu.start, w.mu.name = f, f.Name(), 0, 0, name
	if w.o.Index {
		w.createIndexLocked()
	}
	if err := w.appendLocked(e.out); err != nil {
		return err
	}
	w.mu.start = w.mu.size
	w.records.Add(1)
	w.files.Add(1)
	w.o.Logger.Info("warcfile: new file", "path", w.mu.path)
	return nil
}

// appendLocked appends data to the current file. On failure it cuts the
// file back to its last complete member; if even that fails, the file is
// abandoned as it is (Open repairs it later) and the next Write starts a new
// one.
func (w *Writer) appendLocked(data []byte) error {
	f := w.mu.f
	n, err := f.Write(data)
	if err == nil {
		w.mu.size += int64(n)
		w.bytes.Add(int64(n))
		return nil
	}
	err = fmt.Errorf("warcfile: write %s: %w", w.mu.path, err)
	if n > 0 {
		if terr := f.Truncate(w.mu.size); terr != nil {
			w.o.Logger.Error("warcfile: abandoning file after a failed write", "path", w.mu.path, "err", terr)
			f.Close()
			w.mu.f = nil
			w.closeIndexLocked() // Open repairs both
			return errors.Join(err, terr)
		}
	}
	if w.mu.size == 0 { // the warcinfo itself failed
		f.Close()
		os.Remove(w.mu.path)
		w.mu.f = nil
		for i, f := range w.mu.idx {
			if f != nil {
				os.Remove(w.mu.idxPath[i])
			}
		}
		w.closeIndexLocked()
	}
	return err
}

// createIndexLocked creates and locks the indexes of the new current
// file, "<name>.cdxj.open" and "<name>.cdxj-meta.open". If it cannot, the
// indexes are built from the file when the file is finished.
func (w *Writer) createIndexLocked() {
	w.mu.idxBad = false
	for i, suffix := range [2]string{indexSuffix, metaSuffix} {
		w.mu.idxPath[i] = filepath.Join(w.o.Dir, w.mu.name+suffix+openSuffix)
		idx, err := os.OpenFile(w.mu.idxPath[i], os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
		if err == nil {
			if err = lockFile(idx); err != nil {
				idx.Close()
			}
		}
		if err != nil {
			w.o.Logger.Error("warcfile: cannot create an index; the indexes will be built from the file", "path", w.mu.idxPath[i], "err", err)
			w.dropIndexLocked()
			return
		}
		w.mu.idx[i] = idx
	}
}

// closeIndexLocked closes the current index files, if any, and leaves them.
func (w *Writer) closeIndexLocked() {
	for i, f := range w.mu.idx {
		if f != nil {
			f.Close()
			w.mu.idx[i] = nil
		}
	}
	w.mu.idxBad = false
}

// finishLocked syncs, closes and renames the current file, then writes its
// sorted index (with Options.Index).
func (w *Writer) finishLocked() error {
	f, path := w.mu.f, w.mu.path
	w.mu.f = nil
	idx, idxPath, idxBad := w.mu.idx, w.mu.idxPath, w.mu.idxBad
	w.mu.idx, w.mu.idxBad = [2]*os.File{}, false
	final := strings.TrimSuffix(path, openSuffix)
	var errs []error
	if err := f.Sync(); err != nil {
		errs = append(errs, fmt.Errorf("warcfile: sync %s: %w", path, err))
	}
	if err := f.Close(); err != nil { // also drops the lock
		errs = append(errs, fmt.Errorf("warcfile: close %s: %w", path, err))
	}
	if len(errs) == 0 {
		if err := os.Rename(path, final); err != nil {
			errs = append(errs, fmt.Errorf("warcfile: rename %s: %w", path, err))
		} else if err := syncDir(w.o.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && w.o.Index {
		if err := w.finishIndex(final, idx, idxPath, idxBad); err != nil {
			errs = append(errs, err)
		}
	} else {
		for _, f := range idx {
			if f != nil {
				f.Close() // the file stays ".open": Open repairs it and them
			}
		}
	}
	w.o.Logger.Info("warcfile: file done", "path", final, "bytes", w.mu.size)
	return errors.Join(errs...)
}

// finishIndex writes the sorted indexes of the finished file final from
// the lines in idx (or, if an index file is missing or bad, from final
// itself), then removes the ".open" ones, which it closes.
func (w *Writer) finishIndex(final string, idx [2]*os.File, idxPath [2]string, bad bool) error {
	out := [2]string{final + indexSuffix, final + metaSuffix}
	var err error
	rebuild := bad || idx[0] == nil || idx[1] == nil
	for i := 1; i >= 0 && !rebuild; i-- { // the side index first, as cdxj.IndexFile
		if err = writeSortedFrom(idx[i], out[i]); err != nil {
			w.o.Logger.Error("warcfile: cannot sort an index; building both from the file", "path", idxPath[i], "err", err)
			rebuild = true
		}
	}
	if rebuild {
		_, err = cdxj.IndexFile(final, filepath.Base(final), out[0])
	}
	for _, p := range idxPath {
		if err == nil && p != "" {
			if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				err = fmt.Errorf("warcfile: remove %s: %w", p, rerr)
			}
		}
	}
	for _, f := range idx {
		if f != nil {
			f.Close() // drops its lock, after the removal
		}
	}
	if err != nil {
		return fmt.Errorf("warcfile: index %s: %w", final, err)
	}
	return syncDir(w.o.Dir)
}

// writeSortedFrom reads the lines of the unsorted index f and writes them
// sorted to path (cdxj.WriteSorted).
func writeSortedFrom(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, st.Size()))
	if err != nil {
		return err
	}
	return cdxj.WriteSorted(path, splitLines(data))
}

// splitLines splits data after every newline; a last line without one
// (not written in full) is dropped.
func splitLines(data []byte) [][]byte {
	lines := make([][]byte, 0, bytes.Count(data, []byte("\n")))
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, data[:i+1:i+1])
		data = data[i+1:]
	}
	return lines
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("warcfile: sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("warcfile: sync dir: %w", err)
	}
	return nil
}

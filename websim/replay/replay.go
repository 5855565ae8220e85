// Package replay serves HTTP responses recorded in WARC files, by URL.
//
// Open indexes the 'response' records of one or more WARC files, plain
// (.warc) or gzip-compressed (.warc.gz). The index maps each target URL to
// the position of its HTTP response block; the blocks themselves stay in the
// files and are read on demand. An Archive is an http.Handler that answers a
// request for http://host/path with the response recorded for that URL, byte
// for byte, so that a recorded crawl can be replayed as a web; ServeParsed is
// the variant that goes through net/http's response writer instead.
package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nlnwa/gowarc/v3"
)

var (
	// ErrNotFound is returned (wrapped) by Response for a URL that has no
	// indexed response.
	ErrNotFound = errors.New("replay: not found")
	// ErrClosed is returned by Response after Close.
	ErrClosed = errors.New("replay: archive closed")
)

// peekSize bounds the WARC header of a record: the header must end within
// this many bytes for the record's block to be located. It is also the read
// buffer size while indexing.
const peekSize = 64 << 10

// unmarshalOptions make gowarc lenient about syntax and spec violations (a
// replay should not refuse slightly odd archives) and keep it from buffering
// or digesting block contents, which indexing does not need. Structural
// damage (garbage between records, truncation, bad gzip data) is detected by
// indexFile and readRecord themselves.
var unmarshalOptions = []gowarc.WarcRecordOption{
	gowarc.WithSyntaxErrorPolicy(gowarc.ErrIgnore),
	gowarc.WithSpecViolationPolicy(gowarc.ErrIgnore),
	gowarc.WithUnknownRecordTypePolicy(gowarc.ErrIgnore),
	gowarc.WithBlockErrorPolicy(gowarc.ErrIgnore),
}

// entry locates the HTTP response block of one indexed record.
type entry struct {
	url    string // WARC-Target-URI as recorded
	key    string // canonical form of url, the index key
	host   string // lower-case host name without port
	file   int    // index into Archive.files and Archive.names
	record int64  // offset of the record, or of its gzip member, in the file
	gzip   bool   // whether the record is inside a gzip member
	member int64  // gzip member: offset in the file
	msize  int64  // gzip member: compressed size
	off    int64  // block offset: in the file, or in the decompressed member
	length int64  // block length (the record's Content-Length)
	status int    // recorded HTTP status code
}

// Archive is an index of the response records of one or more WARC files:
// target URL → (file, offset). It keeps only the index in memory, not the
// bodies; bodies are read from the files on demand with ReadAt, so an Archive
// is safe for concurrent use.
type Archive struct {
	names []string
	files []*os.File
	index map[string]*entry // canonical URL → entry; read-only after Open

	closed atomic.Bool
	mu     sync.Mutex            // guards conns, and closed against track
	conns  map[net.Conn]struct{} // hijacked connections being served
	wg     sync.WaitGroup        // hijacked connections being served

	// observe, if set, is told of every request the Archive answers and,
	// through the func it returns, of the status it answered with.
	observe func(r *http.Request) (end func(status int))
}

// SetObserver makes the Archive report every request it answers, those on
// connections it has taken over included, to fn; fn's result is called with
// the status once the response is written. Call it before serving.
func (a *Archive) SetObserver(fn func(r *http.Request) (end func(status int))) { a.observe = fn }

// observed reports r to the observer, if any; the result is never nil.
func (a *Archive) observed(r *http.Request) func(status int) {
	if a.observe == nil {
		return func(int) {}
	}
	return a.observe(r)
}

// statusOf is the status an answer from e (nil: a 404) carries.
func statusOf(e *entry) int {
	if e == nil {
		return http.StatusNotFound
	}
	return e.status
}

// Open reads every record of the WARC files at paths and indexes their
// 'response' records that carry an HTTP response block, by WARC-Target-URI.
// Other record types (warcinfo, request, metadata, revisit, ...) are skipped;
// a revisit means the content was unchanged, so the earlier response stays.
// When a URL appears several times the last record wins, also across files
// (later paths win).
//
// Files may be plain or gzip-compressed, one gzip member per record (as the
// WARC standard recommends) or several records per member. A file that is
// missing, unreadable or damaged (garbage instead of a record, a truncated
// record, bad gzip data) makes Open fail with an error naming the file and,
// for damage, the offset of the record, as in
// "replay: x.warc.gz: record at offset 1234: unexpected EOF".
// The files stay open until Close.
func Open(paths ...string) (*Archive, error) {
	a := &Archive{
		index: make(map[string]*entry),
		conns: make(map[net.Conn]struct{}),
	}
	for _, p := range paths {
		if err := a.addFile(p); err != nil {
			_ = a.closeFiles()
			return nil, err
		}
	}
	return a, nil
}

// addFile opens the file at path and indexes it.
func (a *Archive) addFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fileError(path, err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fileError(path, err)
	}
	if info.IsDir() {
		_ = f.Close()
		return fmt.Errorf("replay: %s: is a directory", path)
	}
	a.names = append(a.names, path)
	a.files = append(a.files, f)
	return a.indexFile(len(a.files) - 1)
}

// fileError wraps an error about the file at path, without repeating the
// path that an *fs.PathError already carries.
func fileError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("replay: %s: %w", path, err)
}

// recordError wraps an error about the record at offset in the file at path.
func recordError(path string, offset int64, err error) error {
	return fmt.Errorf("replay: %s: record at offset %d: %w", path, offset, err)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// stream is a buffered reader that knows its position.
type stream struct {
	cr countingReader
	br *bufio.Reader
}

func newStream(r io.Reader) *stream {
	s := &stream{cr: countingReader{r: r}}
	s.br = bufio.NewReaderSize(&s.cr, peekSize)
	return s
}

// pos returns the offset of the next unread byte.
func (s *stream) pos() int64 { return s.cr.n - int64(s.br.Buffered()) }

// skipBlank consumes CR, LF, SP and HT bytes, which some writers leave
// between records. It returns io.EOF at the end of the stream.
func (s *stream) skipBlank() error {
	for {
		b, err := s.br.ReadByte()
		if err != nil {
			return err
		}
		if b != '\r' && b != '\n' && b != ' ' && b != '\t' {
			return s.br.UnreadByte()
		}
	}
}

// indexFile reads every record of file fi and adds its responses to the index.
func (a *Archive) indexFile(fi int) error {
	name := a.names[fi]
	u := gowarc.NewUnmarshaler(unmarshalOptions...)
	s := newStream(a.files[fi])
	var zr *gzip.Reader
	for {
		if err := s.skipBlank(); err == io.EOF {
			return nil
		} else if err != nil {
			return recordError(name, s.pos(), err)
		}
		start := s.pos()
		magic, _ := s.br.Peek(2)
		if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
			e, err := readRecord(u, s, start)
			if err != nil {
				return recordError(name, start, err)
			}
			if e != nil {
				e.file, e.record = fi, start
				a.index[e.key] = e
			}
			continue
		}

		// A gzip member: read the records in it, then note its size.
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(s.br)
		} else {
			err = zr.Reset(s.br)
		}
		if err != nil {
			return recordError(name, start, err)
		}
		zr.Multistream(false)
		ms := newStream(zr)
		var found []*entry
		for {
			if err := ms.skipBlank(); err == io.EOF {
				break
			} else if err != nil {
				return recordError(name, start, err)
			}
			e, err := readRecord(u, ms, ms.pos())
			if err != nil {
				return recordError(name, start, err)
			}
			if e != nil {
				found = append(found, e)
			}
		}
		size := s.pos() - start
		for _, e := range found {
			e.file, e.record = fi, start
			e.gzip, e.member, e.msize = true, start, size
			a.index[e.key] = e
		}
	}
}

// readRecord reads the record that starts at offset start of s. It returns
// an entry with key, url, host, off and length set if the record is an
// indexable response, nil if it is some other record.
func readRecord(u gowarc.Unmarshaler, s *stream, start int64) (*entry, error) {
	// Locate the end of the WARC header before gowarc consumes it: gowarc
	// does not report where the block starts.
	p, err := s.br.Peek(peekSize)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, err
	}
	hdrLen := warcHeaderLen(p)
	inWindow := len(p) < peekSize // the peek reached the end of the stream
	httpAt := hdrLen >= 0 && len(p) >= hdrLen+4 && string(p[hdrLen:hdrLen+4]) == "HTTP"

	rec, skipped, _, err := u.Unmarshal(s.br)
	if rec != nil {
		defer func() { _ = rec.Close() }()
	}
	if err != nil {
		if err == io.EOF {
			err = fmt.Errorf("incomplete record: %w", io.ErrUnexpectedEOF)
		}
		return nil, err
	}
	if skipped != 0 {
		return nil, fmt.Errorf("%d bytes of non-WARC data before the record", skipped)
	}
	consumed := s.pos() - start

	length, lerr := rec.WarcHeader().GetInt64(gowarc.ContentLength)
	if hdrLen < 0 && inWindow {
		return nil, fmt.Errorf("truncated WARC header: %w", io.ErrUnexpectedEOF)
	}
	if hdrLen >= 0 && lerr == nil && consumed < int64(hdrLen)+length {
		return nil, fmt.Errorf("record shorter than its Content-Length %d: %w", length, io.ErrUnexpectedEOF)
	}

	if rec.Type() != gowarc.Response {
		return nil, nil
	}
	hb, ok := rec.Block().(gowarc.HttpResponseBlock)
	if !ok {
		return nil, nil
	}
	target := rec.WarcHeader().Get(gowarc.WarcTargetURI)
	key, host, ok := canonical(target)
	if !ok {
		return nil, nil
	}
	if lerr != nil || length < 0 {
		return nil, fmt.Errorf("bad Content-Length %q", rec.WarcHeader().Get(gowarc.ContentLength))
	}
	// gowarc consumes the header, the block and up to 4 bytes of
	// end-of-record marker; anything else means the block is not where
	// warcHeaderLen says.
	if !httpAt || consumed > int64(hdrLen)+length+4 {
		return nil, errors.New("cannot locate the HTTP block (WARC header longer than 64 KiB?)")
	}
	return &entry{
		url:    strings.Trim(strings.TrimSpace(target), "<>"),
		key:    key,
		host:   host,
		off:    start + int64(hdrLen),
		length: length,
		status: hb.HttpStatusCode(),
	}, nil
}

// warcHeaderLen returns the length of the WARC header (version line, fields
// and the empty line ending them) at the start of p, or -1 if p does not hold
// all of it. It follows gowarc's parser: a line that is empty after trimming
// SP, HT, CR and LF ends the header, except where it continues a field (the
// line starts with SP or HT).
func warcHeaderLen(p []byte) int {
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		return -1
	}
	i++
	for {
		j := bytes.IndexByte(p[i:], '\n')
		if j < 0 {
			return -1
		}
		line := p[i : i+j+1]
		i += j + 1
		if len(bytes.Trim(line, " \t\r\n")) == 0 {
			return i
		}
		for i < len(p) && (p[i] == ' ' || p[i] == '\t') {
			j := bytes.IndexByte(p[i:], '\n')
			if j < 0 {
				return -1
			}
			i += j + 1
		}
		if i >= len(p) {
			return -1
		}
	}
}

// canonical returns the index key of an http or https URL: scheme and host
// lower-cased, default port, user info and fragment removed, an empty path
// made "/". Path and query are kept byte for byte. It also returns the
// lower-case host name without port (and without IPv6 brackets). ok is false
// for other schemes and for URLs without a host. A URL in angle brackets
// (WARC/1.0 style) is accepted.
func canonical(raw string) (key, host string, ok bool) {
	raw = strings.Trim(strings.TrimSpace(raw), "<>")
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		raw = raw[:i]
	}
	i := strings.Index(raw, "://")
	if i <= 0 {
		return "", "", false
	}
	scheme := strings.ToLower(raw[:i])
	if scheme != "http" && scheme != "https" {
		return "", "", false
	}
	authority, path := raw[i+3:], ""
	if j := strings.IndexAny(authority, "/?"); j >= 0 {
		authority, path = authority[:j], authority[j:]
	}
	if j := strings.LastIndexByte(authority, '@'); j >= 0 {
		authority = authority[j+1:]
	}
	hostport := strings.TrimSuffix(strings.ToLower(authority), ":")
	if scheme == "http" {
		hostport = strings.TrimSuffix(hostport, ":80")
	} else {
		hostport = strings.TrimSuffix(hostport, ":443")
	}
	host = stripPort(hostport)
	if host == "" {
		return "", "", false
	}
	if path == "" || path[0] == '?' {
		path = "/" + path
	}
	return scheme + "://" + hostport + path, host, true
}

// stripPort returns hostport without its port and IPv6 brackets.
func stripPort(hostport string) string {
	if strings.HasPrefix(hostport, "[") {
		if i := strings.IndexByte(hostport, ']'); i > 0 {
			return hostport[1:i]
		}
		return hostport
	}
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		return hostport[:i]
	}
	return hostport
}

// Len returns the number of indexed URLs.
func (a *Archive) Len() int { return len(a.index) }

// Hosts returns the distinct lower-case host names (without port) of the
// indexed URLs, sorted.
func (a *Archive) Hosts() []string {
	seen := make(map[string]bool)
	hosts := []string{}
	for _, e := range a.index {
		if !seen[e.host] {
			seen[e.host] = true
			hosts = append(hosts, e.host)
		}
	}
	slices.Sort(hosts)
	return hosts
}

// URLs returns the indexed target URLs as recorded, sorted. Of URLs that
// differ only in host case or default port, only the last recorded is kept.
func (a *Archive) URLs() []string {
	urls := make([]string, 0, len(a.index))
	for _, e := range a.index {
		urls = append(urls, e.url)
	}
	slices.Sort(urls)
	return urls
}

// lookup returns the entry for url, or nil. The scheme and host of url are
// matched case-insensitively and a default port is ignored.
func (a *Archive) lookup(url string) *entry {
	key, _, ok := canonical(url)
	if !ok {
		return nil
	}
	return a.index[key]
}

// Response returns the HTTP response recorded for url: the stored HTTP
// response block verbatim, status line, headers and body exactly as
// recorded (a chunked body stays chunked). The error wraps ErrNotFound if
// url is not indexed and ErrClosed after Close.
func (a *Archive) Response(url string) ([]byte, error) {
	if a.closed.Load() {
		return nil, ErrClosed
	}
	e := a.lookup(url)
	if e == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, url)
	}
	r, err := a.block(e)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b := make([]byte, e.length)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, a.blockError(e, err)
	}
	return b, nil
}

// block returns a reader of the HTTP response block of e. The reader fails
// with io.ErrUnexpectedEOF if the file ends before the block does.
func (a *Archive) block(e *entry) (io.ReadCloser, error) {
	f := a.files[e.file]
	if !e.gzip {
		return &exactReader{r: io.NewSectionReader(f, e.off, e.length), n: e.length}, nil
	}
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(io.NewSectionReader(f, e.member, e.msize))
	} else {
		err = zr.Reset(io.NewSectionReader(f, e.member, e.msize))
	}
	if err != nil {
		return nil, a.blockError(e, err)
	}
	zr.Multistream(false)
	if _, err := io.CopyN(io.Discard, zr, e.off); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		gzipReaders.Put(zr)
		return nil, a.blockError(e, err)
	}
	return &exactReader{r: zr, n: e.length, zr: zr}, nil
}

// gzipReaders holds *gzip.Reader values for reuse by block.
var gzipReaders sync.Pool

// blockError wraps an error reading the block of e.
func (a *Archive) blockError(e *entry, err error) error {
	return recordError(a.names[e.file], e.record, err)
}

// exactReader reads exactly n bytes from r: an early EOF becomes
// io.ErrUnexpectedEOF.
type exactReader struct {
	r  io.Reader
	n  int64
	zr *gzip.Reader // returned to gzipReaders by Close, if not nil
}

func (x *exactReader) Read(p []byte) (int, error) {
	if x.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > x.n {
		p = p[:x.n]
	}
	n, err := x.r.Read(p)
	x.n -= int64(n)
	if err == io.EOF {
		if x.n > 0 {
			return n, io.ErrUnexpectedEOF
		}
		err = nil
	}
	return n, err
}

func (x *exactReader) Close() error {
	if x.zr != nil {
		gzipReaders.Put(x.zr)
		x.zr, x.r = nil, eofReader{}
	}
	return nil
}

// eofReader is an empty reader.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// Close closes the connections that ServeHTTP took over, waits for their
// goroutines to finish and closes the files. After Close, Response fails
// with ErrClosed and ServeHTTP answers 503. Close is idempotent; only the
// first call returns an error.
func (a *Archive) Close() error {
	a.mu.Lock()
	if a.closed.Load() {
		a.mu.Unlock()
		return nil
	}
	a.closed.Store(true)
	for c := range a.conns {
		_ = c.Close()
	}
	a.mu.Unlock()
	a.wg.Wait()
	return a.closeFiles()
}

// closeFiles closes all files and reports the first error.
func (a *Archive) closeFiles() error {
	var errs []error
	for i, f := range a.files {
		if err := f.Close(); err != nil {
			errs = append(errs, fileError(a.names[i], err))
		}
	}
	return errors.Join(errs...)
}

package cdxj

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// ErrRecord is wrapped by Index's error for a WARC record it cannot read.
var ErrRecord = errors.New("cdxj: unreadable WARC record")

// Kind says which index a WARC record's line goes into.
type Kind uint8

// The kinds of records.
const (
	// None: no line. Request, warcinfo, conversion and continuation
	// records, and resource records of Content-Type
	// application/warc-fields (cdxj-indexer leaves those out too).
	None Kind = iota
	// Capture: the replay index ("<name>.cdxj"), what pywb serves.
	// Response, revisit and resource records: cdxj-indexer's default set
	// without metadata records.
	Capture
	// Meta: the side index ("<name>.cdxj-meta", MetaPath): metadata
	// records (Meridian's say a page is a near-duplicate or asked not to
	// be indexed), which a replay tool would take for captures.
	// cdxj-indexer, by default, leaves out those of Content-Type
	// application/warc-fields and indexes the others as captures.
	Meta
)

// KindOf returns the kind of a record of WARC-Type typ and Content-Type
// contentType (its WARC header's).
func KindOf(typ, contentType string) Kind {
	switch typ {
	case "response", "revisit":
		return Capture
	case "resource":
		if MediaType(contentType) == "application/warc-fields" {
			return None
		}
		return Capture
	case "metadata":
		return Meta
	}
	return None
}

// MetaPath returns the path of the side index that goes with the replay
// index at indexPath: indexPath with "-meta" appended ("x.warc.gz.cdxj" →
// "x.warc.gz.cdxj-meta"). It does not end in ".cdxj", so that what loads
// every *.cdxj file of a directory as captures (pywb's directory index
// source, a shell glob) does not load it.
func MetaPath(indexPath string) string { return indexPath + MetaSuffix }

// MetaSuffix ends the side index's path (see MetaPath).
const MetaSuffix = "-meta"

// Index reads the WARC records of r, compressed one gzip member per record
// or not compressed at all, and calls emit with the kind and line of every
// record that gets one (see KindOf), in file order. Offsets and lengths are those of
// the gzip members, or of the records themselves (trailing CRLF CRLF
// included) in an uncompressed file. filename is the Filename of the lines.
//
// The fields are those of pywb's cdxj-indexer: Mime is the HTTP
// Content-Type of a response without its parameters, "warc/revisit" for a
// revisit, the record's Content-Type for resource and metadata records;
// Status the HTTP status code of a response or revisit (none for other
// records); Digest the
// record's WARC-Payload-Digest without its algorithm label, as cdxj-indexer
// writes it (it keeps what follows the last ':', so "sha1:3I42…" is
// "3I42…"), or if it has none, the base32 SHA-1 of its payload (the block of
// a record that is not HTTP, nothing for a revisit without a payload).
//
// Index stops at the first record it cannot read, with an error that wraps
// ErrRecord and names filename and the record's offset; lines emitted before
// it stand. A file compressed as a single gzip stream is not indexed
// correctly (only its first record would be seen): the offsets of such a
// file could not be used anyway.
func Index(r io.Reader, filename string, emit func(Kind, Line) error) error {
	wr, err := gowarc.NewWarcFileReaderFromStream(r, 0)
	if err != nil {
		return fmt.Errorf("cdxj: read %s: %w", filename, err)
	}
	defer wr.Close()
	var end int64 // of the last record read
	for {
		rec, err := wr.Next()
		if err == io.EOF && rec.WarcRecord == nil && rec.Size == 0 {
			return nil // nothing left: a clean end
		}
		if err != nil {
			rec.Close()
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("%w (truncated)", err)
			}
			return fmt.Errorf("cdxj: read record at offset %d of %s: %w: %w", end, filename, ErrRecord, err)
		}
		end = rec.Offset + rec.Size
		if err := checkLength(rec.WarcRecord); err != nil {
			rec.Close()
			return fmt.Errorf("cdxj: read record at offset %d of %s: %w: %w", rec.Offset, filename, ErrRecord, err)
		}
		h := rec.WarcRecord.WarcHeader()
		kind := KindOf(rec.WarcRecord.Type().String(), h.Get(gowarc.ContentType))
		if kind == None {
			rec.Close()
			continue
		}
		l, err := lineOf(rec, filename)
		rec.Close()
		if err != nil {
			return fmt.Errorf("cdxj: read record at offset %d of %s: %w: %w", rec.Offset, filename, ErrRecord, err)
		}
		if err := emit(kind, l); err != nil {
			return err
		}
	}
}

// checkLength reports a block shorter than its Content-Length: a record
// cut short, which gowarc's lenient reading lets through in an uncompressed
// file.
func checkLength(wr gowarc.WarcRecord) error {
	cl, err := wr.WarcHeader().GetInt64(gowarc.ContentLength)
	if err != nil {
		return fmt.Errorf("bad Content-Length: %w", err)
	}
	if n := wr.Block().Size(); n < cl {
		return fmt.Errorf("truncated: %d bytes of Content-Length %d: %w", n, cl, io.ErrUnexpectedEOF)
	}
	return nil
}

// lineOf builds the line of an indexed record.
func lineOf(rec gowarc.Record, filename string) (Line, error) {
	wr := rec.WarcRecord
	h := wr.WarcHeader()
	l := Line{
		URL:      h.Get(gowarc.WarcTargetURI),
		Digest:   DigestValue(h.Get(gowarc.WarcPayloadDigest)),
		Length:   rec.Size,
		Offset:   rec.Offset,
		Filename: filename,
	}
	l.Key = SURT(l.URL)
	l.Timestamp = warcDateTimestamp(h.Get(gowarc.WarcDate))
	switch typ := wr.Type(); typ {
	case gowarc.Revisit:
		l.Mime = "warc/revisit"
		switch blk := wr.Block().(type) {
		case gowarc.HttpResponseBlock:
			l.Status = statusCode(blk.HttpStatusCode())
		case gowarc.ProtocolHeaderBlock: // gowarc's revisit block: the HTTP header alone
			l.Status = StatusOf(blk.ProtocolHeaderBytes())
		}
	case gowarc.Response:
		if blk, ok := wr.Block().(gowarc.HttpResponseBlock); ok {
			l.Status = statusCode(blk.HttpStatusCode())
			l.Mime = MediaType(blk.HttpHeader().Get("Content-Type"))
		} else {
			l.Mime = MediaType(h.Get(gowarc.ContentType))
		}
	default:
		l.Mime = MediaType(h.Get(gowarc.ContentType))
	}
	if l.Digest == "" {
		d, err := payloadSHA1(wr)
		if err != nil {
			return l, err
		}
		l.Digest = d
	}
	return l, nil
}

// MediaType returns a Content-Type value without its parameters: up to the
// first ';' or white space, as cdxj-indexer cuts it.
func MediaType(ct string) string {
	ct = strings.TrimLeft(ct, " \t")
	if i := strings.IndexAny(ct, "; \t\r\n\v\f"); i >= 0 {
		ct = ct[:i]
	}
	return ct
}

// StatusOf returns the status code of the HTTP status line at the start of
// hdr ("HTTP/1.1 200 OK" → "200"), or "" if there is none.
func StatusOf(hdr []byte) string {
	if !bytes.HasPrefix(hdr, []byte("HTTP/")) {
		return ""
	}
	i := 5
	for i < len(hdr) && hdr[i] != ' ' && hdr[i] != '\t' && hdr[i] != '\r' && hdr[i] != '\n' {
		i++
	}
	for i < len(hdr) && (hdr[i] == ' ' || hdr[i] == '\t') {
		i++
	}
	if i+3 > len(hdr) || i+3 < len(hdr) && hdr[i+3] != ' ' && hdr[i+3] != '\t' && hdr[i+3] != '\r' && hdr[i+3] != '\n' {
		return ""
	}
	n := 0
	for _, c := range hdr[i : i+3] {
		if c < '0' || c > '9' {
			return ""
		}
		n = n*10 + int(c-'0')
	}
	return statusCode(n)
}

// statusCode formats a parsed status code; 0 (none) is "".
func statusCode(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// warcDateTimestamp turns a WARC-Date into 14 digits: parsed as RFC 3339
// (fractions dropped), or failing that its first 14 digits, zero-padded.
func warcDateTimestamp(d string) string {
	if t, err := time.Parse(time.RFC3339Nano, d); err == nil {
		return Timestamp(t)
	}
	var b []byte
	for i := 0; i < len(d) && len(b) < 14; i++ {
		if d[i] >= '0' && d[i] <= '9' {
			b = append(b, d[i])
		}
	}
	for len(b) < 14 {
		b = append(b, '0')
	}
	return string(b)
}

// DigestValue returns a labelled WARC digest without its label, as
// cdxj-indexer (and pywb's indexer before it) writes the digest field:
// what follows the last ':' ("sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ" →
// "3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"; cdxj-indexer's test expects
// "digest": "G7HRM7BGOKSKMSXZAHMUQTTV53QOFSMK" for a response record).
func DigestValue(d string) string {
	if i := strings.LastIndexByte(d, ':'); i >= 0 {
		return d[i+1:]
	}
	return d
}

// payloadSHA1 returns the base32 SHA-1 of the record's payload.
func payloadSHA1(wr gowarc.WarcRecord) (string, error) {
	var (
		r   io.Reader
		err error
	)
	if pb, ok := wr.Block().(gowarc.PayloadBlock); ok {
		r, err = pb.PayloadBytes()
	} else {
		r, err = wr.Block().RawBytes()
	}
	if err != nil {
		return "", err
	}
	h := sha1.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return base32.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// Sort sorts lines by their bytes, as `LC_ALL=C sort` does, which is the
// order pywb's binary search expects.
func Sort(lines [][]byte) {
	slices.SortFunc(lines, bytes.Compare)
}

// Counts are the lines IndexFile wrote, by index.
type Counts struct {
	Captures int // in the replay index
	Meta     int // in the side index
}

// IndexFile indexes the WARC file at warcPath (see Index) with Filename
// name and writes the sorted lines to two files, each atomically (a
// temporary file in the same directory, synced, then renamed): the replay
// index at indexPath (Capture lines) and the side index at
// MetaPath(indexPath) (Meta lines; empty if the file has no metadata
// record). On error nothing is written.
func IndexFile(warcPath, name, indexPath string) (Counts, error) {
	f, err := os.Open(warcPath)
	if err != nil {
		return Counts{}, fmt.Errorf("cdxj: %w", err)
	}
	defer f.Close()
	var buf [2][]byte
	var ends [2][]int
	err = Index(bufio.NewReaderSize(f, 256<<10), name, func(k Kind, l Line) error {
		i := 0
		if k == Meta {
			i = 1
		}
		buf[i] = l.Append(buf[i])
		ends[i] = append(ends[i], len(buf[i]))
		return nil
	})
	if err != nil {
		return Counts{}, err
	}
	var lines [2][][]byte
	for i := range lines {
		lines[i] = make([][]byte, len(ends[i]))
		start := 0
		for j, e := range ends[i] {
			lines[i][j], start = buf[i][start:e:e], e
		}
	}
	// The side index first: a replay index is never newer than its side
	// index.
	if err := WriteSorted(MetaPath(indexPath), lines[1]); err != nil {
		return Counts{}, err
	}
	if err := WriteSorted(indexPath, lines[0]); err != nil {
		return Counts{}, err
	}
	return Counts{Captures: len(lines[0]), Meta: len(lines[1])}, nil
}

// WriteSorted sorts lines (each ending in a newline) and writes them to
// path atomically: a temporary file in path's directory, synced and
// renamed over path.
func WriteSorted(path string, lines [][]byte) error {
	Sort(lines)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("cdxj: write %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(tmp, 256<<10)
	for _, l := range lines {
		bw.Write(l) // errors come back from Flush
	}
	err = bw.Flush()
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cdxj: write %s: %w", path, err)
	}
	return nil
}

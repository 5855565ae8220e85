package warcfile

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/meridian-crawler/meridian/fetcher/warcfile/cdxj"
)

// encoder serialises records and compresses each into its own gzip member,
// appending to out. Encoders are pooled per gzip level.
type encoder struct {
	level   int
	out     []byte       // compressed members
	hdr     []byte       // WARC header scratch
	gz      *gzip.Writer // at level
	store   *gzip.Writer // level NoCompression, for small records
	sha     hash.Hash
	sum     [sha1.Size]byte
	records int // records in out

	// With index set, every indexed member of out gets a line in idx: its
	// key, timestamp and JSON up to the offset (cdxj.Line.AppendHead); the
	// Writer adds the offset and file name when it appends out, to the
	// replay index or, for a metadata record, the side index.
	index bool
	idx   []byte
	lines []lineRef
}

// lineRef locates the head of one index line in encoder.idx and its member
// in encoder.out.
type lineRef struct {
	start, end int  // of the head in idx
	member     int  // offset of the member in out
	meta       bool // a line of the side index
}

// appender is an io.Writer that appends to encoder.out.
type appender struct{ e *encoder }

func (a appender) Write(p []byte) (int, error) {
	a.e.out = append(a.e.out, p...)
	return len(p), nil
}

var encoderPools sync.Map // level → *sync.Pool

// maxPooledBuf bounds the buffers an encoder keeps when it goes back to the
// pool, so that one huge body does not pin its memory.
const maxPooledBuf = 1 << 20

func getEncoder(level int) *encoder {
	p, ok := encoderPools.Load(level)
	if !ok {
		p, _ = encoderPools.LoadOrStore(level, &sync.Pool{})
	}
	if e, _ := p.(*sync.Pool).Get().(*encoder); e != nil {
		e.out, e.records = e.out[:0], 0
		e.index, e.idx, e.lines = false, e.idx[:0], e.lines[:0]
		return e
	}
	e := &encoder{level: level, sha: sha1.New()}
	e.gz, _ = gzip.NewWriterLevel(appender{e}, level) // level checked by Validate
	e.store, _ = gzip.NewWriterLevel(appender{e}, gzip.NoCompression)
	return e
}

func putEncoder(e *encoder) {
	if cap(e.out) > maxPooledBuf {
		e.out = nil
	}
	if cap(e.idx) > maxPooledBuf {
		e.idx = nil
	}
	p, _ := encoderPools.Load(e.level)
	p.(*sync.Pool).Put(e)
}

// check validates the parts of x that go into WARC headers.
func (x *Exchange) check() error {
	switch {
	case x == nil:
		return fmt.Errorf("warcfile: nil exchange: %w", ErrInvalid)
	case x.URL == "" || len(x.URL) > 1<<16:
		return fmt.Errorf("warcfile: URL length %d: %w", len(x.URL), ErrInvalid)
	case len(x.Response) == 0:
		return fmt.Errorf("warcfile: %s: empty response: %w", x.URL, ErrInvalid)
	case x.Revisit >= numRevisits:
		return fmt.Errorf("warcfile: %s: revisit %d: %w", x.URL, x.Revisit, ErrInvalid)
	}
	for i := 0; i < len(x.URL); i++ {
		if c := x.URL[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("warcfile: URL %q has byte %#x: %w", x.URL, c, ErrInvalid)
		}
	}
	for _, f := range x.Extra {
		if err := checkField(f); err != nil {
			return fmt.Errorf("warcfile: %s: %w", x.URL, err)
		}
	}
	for _, p := range x.Protocols {
		if p == "" || strings.ContainsFunc(p, func(r rune) bool { return r != '/' && notToken(r) }) {
			return fmt.Errorf("warcfile: %s: protocol %q: %w", x.URL, p, ErrInvalid)
		}
	}
	return nil
}

// appendExtra appends the Exchange's own fields (Exchange.Extra).
func appendExtra(h []byte, x *Exchange) []byte {
	for _, f := range x.Extra {
		h = appendField(h, f[0], f[1])
	}
	return h
}

// exchange encodes x as a request member (if x.Request is set) and a
// response or revisit member.
func (e *encoder) exchange(x *Exchange) error {
	date := x.Date
	if date.IsZero() {
		date = time.Now()
	}
	var ids [2][uuidLen]byte
	newIDs(&ids)
	reqID, respID := ids[0][:], ids[1][:]
	if len(x.Request) > 0 {
		h := e.start("request", reqID, date)
		h = e.common(h, x)
		h = appendField(h, "WARC-Concurrent-To", respID)
		h = append(h, "WARC-Block-Digest: "...)
		h = e.digest(h, x.Request, nil)
		h = append(h, "\r\nContent-Type: application/http;msgtype=request\r\n"...)
		e.hdr = h
		if err := e.member(x.Request, nil); err != nil {
			return err
		}
	}
	if x.Revisit != NoRevisit {
		return e.revisit(x, date, respID, reqID)
	}
	h := e.start("response", respID, date)
	h = e.common(h, x)
	if len(x.Request) > 0 {
		h = appendField(h, "WARC-Concurrent-To", reqID)
	}
	h = append(h, "WARC-Block-Digest: "...)
	h = e.digest(h, x.Response, x.Body)
	h = append(h, "\r\nWARC-Payload-Digest: "...)
	var dg digestBuf
	i := len(h)
	h = e.digest(h, x.Body, nil)
	digest := append(dg[:0], h[i:]...)
	h = append(h, "\r\n"...)
	if x.Truncated != "" {
		h = appendField(h, "WARC-Truncated", truncReason(x.Truncated))
	}
	h = appendExtra(h, x)
	h = append(h, "Content-Type: application/http;msgtype=response\r\n"...)
	e.hdr = h
	start := len(e.out)
	if err := e.member(x.Response, x.Body); err != nil {
		return err
	}
	if e.index {
		e.addLine(start, x.URL, date, cdxj.MediaType(httpContentType(x.Response)), cdxj.StatusOf(x.Response), digest, false)
	}
	return nil
}

// revisit encodes the revisit member of x (see Revisit), with record id id
// and, if x has a request, WARC-Concurrent-To reqID.
func (e *encoder) revisit(x *Exchange, date time.Time, id, reqID []byte) error {
	h := e.start("revisit", id, date)
	h = e.common(h, x)
	if len(x.Request) > 0 {
		h = appendField(h, "WARC-Concurrent-To", reqID)
	}
	profile := ProfileServerNotModified
	if x.Revisit == RevisitIdenticalPayload {
		profile = ProfileIdenticalPayloadDigest
	}
	h = appendField(h, "WARC-Profile", profile)
	h = appendField(h, "WARC-Refers-To-Target-URI", x.URL)
	if !x.RefersToDate.IsZero() {
		h = append(h, "WARC-Refers-To-Date: "...)
		h = appendDate(h, x.RefersToDate)
		h = append(h, "\r\n"...)
	}
	h = append(h, "WARC-Block-Digest: "...)
	h = e.digest(h, x.Response, nil)
	h = append(h, "\r\n"...)
	// A revisit without WARC-Payload-Digest is indexed with the digest of
	// its payload, which is empty, as cdxj-indexer does.
	var dg digestBuf
	digest := append(dg[:0], emptyDigest...)
	switch {
	case x.Revisit == RevisitIdenticalPayload:
		h = append(h, "WARC-Payload-Digest: "...)
		i := len(h)
		h = e.digest(h, x.Body, nil)
		digest = append(dg[:0], h[i:]...)
		h = append(h, "\r\nWARC-Truncated: length\r\n"...)
	case x.Truncated != "":
		h = appendField(h, "WARC-Truncated", truncReason(x.Truncated))
	}
	h = appendExtra(h, x)
	h = append(h, "Content-Type: application/http;msgtype=response\r\n"...)
	e.hdr = h
	start := len(e.out)
	if err := e.member(x.Response, nil); err != nil {
		return err
	}
	if e.index {
		e.addLine(start, x.URL, date, "warc/revisit", cdxj.StatusOf(x.Response), digest, false)
	}
	return nil
}

// metadata encodes a metadata record of targetURI with the fields as its
// application/warc-fields block.
func (e *encoder) metadata(targetURI string, date time.Time, fields [][2]string) error {
	var ids [2][uuidLen]byte
	newIDs(&ids)
	n := 0
	for _, f := range fields {
		n += len(f[0]) + len(f[1]) + 4
	}
	body := make([]byte, 0, n)
	for _, f := range fields {
		body = append(body, f[0]...)
		body = append(body, ": "...)
		body = append(body, f[1]...)
		body = append(body, "\r\n"...)
	}
	h := e.start("metadata", ids[0][:], date)
	h = appendField(h, "WARC-Target-URI", targetURI)
	h = append(h, "WARC-Block-Digest: "...)
	var dg digestBuf
	i := len(h)
	h = e.digest(h, body, nil)
	digest := append(dg[:0], h[i:]...) // the payload of a record that is not HTTP is its block
	h = append(h, "\r\nContent-Type: application/warc-fields\r\n"...)
	e.hdr = h
	start := len(e.out)
	if err := e.member(body, nil); err != nil {
		return err
	}
	if e.index {
		e.addLine(start, targetURI, date, "application/warc-fields", "", digest, true)
	}
	return nil
}

// digestBuf holds a "sha1:" digest without allocating.
type digestBuf [40]byte

// emptyDigest is the WARC digest of nothing.
const emptyDigest = "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"

// addLine adds the index line head of the member that starts at start in
// e.out and ends at its end, for the side index if meta. digest is the
// WARC digest; the line has it without its "sha1:" label, as
// cdxj-indexer writes it (cdxj.DigestValue).
func (e *encoder) addLine(start int, url string, date time.Time, mime, status string, digest []byte, meta bool) {
	l := cdxj.Line{
		URL:    url,
		Mime:   mime,
		Status: status,
		Digest: cdxj.DigestValue(string(digest)),
		Length: int64(len(e.out) - start),
	}
	i := len(e.idx)
	b := cdxj.AppendSURT(e.idx, url)
	b = append(b, ' ')
	b = cdxj.AppendTimestamp(b, date)
	b = l.AppendHead(b)
	e.idx = b
	e.lines = append(e.lines, lineRef{start: i, end: len(b), member: start, meta: meta})
}

// httpContentType returns the value of the first Content-Type field of an
// HTTP header block (status line first), or "".
func httpContentType(hdr []byte) string {
	_, rest, _ := bytes.Cut(hdr, []byte("\n"))
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && bytes.EqualFold(name, []byte("Content-Type")) {
			return string(bytes.TrimSpace(value))
		}
	}
	return ""
}

// warcinfo encodes the warcinfo record that starts file name.
func (e *encoder) warcinfo(name, software, hostname string) error {
	var ids [2][uuidLen]byte
	newIDs(&ids)
	body := make([]byte, 0, 256)
	body = append(body, "software: "...)
	body = append(body, software...)
	body = append(body, "\r\nformat: WARC File Format 1.1\r\nconformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n"...)
	if hostname != "" {
		body = append(body, "hostname: "...)
		body = append(body, hostname...)
		body = append(body, "\r\n"...)
	}
	h := e.start("warcinfo", ids[0][:], time.Now())
	h = appendField(h, "WARC-Filename", name)
	h = append(h, "WARC-Block-Digest: "...)
	h = e.digest(h, body, nil)
	h = append(h, "\r\nContent-Type: application/warc-fields\r\n"...)
	e.hdr = h
	return e.member(body, nil)
}

// start begins a record header.
func (e *encoder) start(typ string, id []byte, date time.Time) []byte {
	h := append(e.hdr[:0], "WARC/1.1\r\nWARC-Type: "...)
	h = append(h, typ...)
	h = append(h, "\r\nWARC-Record-ID: "...)
	h = append(h, id...)
	h = append(h, "\r\nWARC-Date: "...)
	h = appendDate(h, date)
	return append(h, "\r\n"...)
}

// appendDate appends t in the WARC-Date format, UTC to the second.
func appendDate(h []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(h, "2006-01-02T15:04:05Z")
}

// common appends the fields request and response share.
func (e *encoder) common(h []byte, x *Exchange) []byte {
	h = appendField(h, "WARC-Target-URI", x.URL)
	if x.IP.IsValid() {
		h = append(h, "WARC-IP-Address: "...)
		h = x.IP.Unmap().WithZone("").AppendTo(h)
		h = append(h, "\r\n"...)
	}
	for _, p := range x.Protocols {
		h = appendField(h, "WARC-Protocol", p)
	}
	return h
}

func appendField[S string | []byte](h []byte, name string, value S) []byte {
	h = append(h, name...)
	h = append(h, ": "...)
	h = append(h, value...)
	return append(h, "\r\n"...)
}

// digest appends "sha1:" and the base32 SHA-1 of a followed by b.
func (e *encoder) digest(h, a, b []byte) []byte {
	e.sha.Reset()
	e.sha.Write(a)
	e.sha.Write(b)
	sum := e.sha.Sum(e.sum[:0])
	h = append(h, "sha1:"...)
	return base32.StdEncoding.AppendEncode(h, sum)
}

// member compresses one record, e.hdr (without Content-Length) then the block
// a+b, as a gzip member appended to e.out.
func (e *encoder) member(a, b []byte) error {
	h := append(e.hdr, "Content-Length: "...)
	h = strconv.AppendInt(h, int64(len(a)+len(b)), 10)
	h = append(h, "\r\n\r\n"...)
	e.hdr = h
	gz := e.gz
	if len(h)+len(a)+len(b) < storeBelow {
		gz = e.store
	}
	gz.Reset(appender{e})
	gz.Write(h) // appender never fails, and so neither does gz
	gz.Write(a)
	gz.Write(b)
	gz.Write(crlfcrlf)
	if err := gz.Close(); err != nil {
		return fmt.Errorf("warcfile: compress: %w", err)
	}
	e.records++
	return nil
}

// storeBelow is the record size under which a member is stored rather than
// compressed: building Huffman tables for a few hundred bytes (a request
// record) costs more CPU (~10 µs) than the ~100 bytes it saves are worth.
const storeBelow = 1024

var crlfcrlf = []byte("\r\n\r\n")

// truncReason maps a WARC-Truncated value to one WARC 1.1 defines.
func truncReason(s string) string {
	switch s {
	case "length", "time", "disconnect":
		return s
	}
	return "unspecified"
}

// uuidLen is the length of "<urn:uuid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx>".
const uuidLen = 47

// newIDs fills ids with random (version 4) UUID record ids.
func newIDs(ids *[2][uuidLen]byte) {
	var raw [32]byte
	rand.Read(raw[:]) // never fails (crypto/rand)
	for i := range ids {
		u := raw[i*16 : i*16+16]
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		b := append(ids[i][:0], "<urn:uuid:"...)
		for j, c := range u {
			if j == 4 || j == 6 || j == 8 || j == 10 {
				b = append(b, '-')
			}
			b = append(b, hexDigits[c>>4], hexDigits[c&15])
		}
		_ = append(b, '>')
	}
}

const hexDigits = "0123456789abcdef"

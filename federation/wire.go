// The wire of the federation: a Batch of URLs one site puts to the site that
// owns them, and its compact binary encoding. server.go and client.go carry
// batches over HTTPS (HTTP/2 where possible) with mutual TLS 1.3, identities
// coming from certificates made by package certs. (The package's doc comment
// is in doc.go.)

package federation

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"net/url"
	"unicode/utf8"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/crawl"
)

// Errors of this package; the ones returned are wrapped with context, so
// match them with errors.Is.
var (
	// ErrMalformed: an encoded batch (or a batch about to be sent) breaks the
	// format: the error says which field and which entry.
	ErrMalformed = errors.New("federation: malformed batch")
	// ErrTooLarge: a batch or a body exceeds the Limits.
	ErrTooLarge = errors.New("federation: too large")
	// ErrNotOwner is for a Receiver to return (wrapped) when a batch holds a
	// URL whose host the receiving site does not own. The server answers
	// 409; the client sees ErrRefused.
	ErrNotOwner = errors.New("federation: not the owner")
	// ErrRefused: the receiver refused the batch for good (HTTP 409): the
	// sender must re-route or drop it, not retry it as it is. A Receiver may
	// also return it (wrapped) for refusals other than ownership.
	ErrRefused = errors.New("federation: refused")
	// ErrRejected: the request itself was wrong (HTTP 400, 403, 413, another
	// 4xx, a certificate the other side refused, an invalid batch caught
	// before sending). It is a bug or a misconfiguration: log it, do not
	// retry blindly.
	ErrRejected = errors.New("federation: rejected")
	// ErrUnavailable: the peer could not be reached or failed transiently
	// (network errors, timeouts, 5xx). Retry with back-off.
	ErrUnavailable = errors.New("federation: unavailable")
	// ErrNotLeader: the node does not lead its site (LeaderState).
	ErrNotLeader = errors.New("federation: not the site's leader")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("federation: closed")
)

// Put is one URL for the site that owns it, with its OPIC cash.
type Put struct {
	URL   string  // absolute http or https URL, at most MaxURLLen bytes
	Cash  float64 // OPIC cash the URL receives; finite, ≥ 0
	Depth uint32  // link depth from the seeds
}

// FetchedURL is a URL the sender fetched while it held the URL's host for
// the receiver (the receiver was down): the receiver records it with Status
// and does not fetch it again. It carries no cash (see
// store.Batch.FetchedElsewhere).
type FetchedURL struct {
	URL    string       // absolute http or https URL, at most MaxURLLen bytes
	Status crawl.Status // the final status the sender recorded (crawl.StatusFetched or after)
}

// HostLoc is where the sender located a host. It travels with the host's URLs
// so that the federation locates each host once.
type HostLoc struct {
	Host     string  // the host name, 1..MaxHostLen bytes
	Key      string  // the partition key the sender used for it (e.g. its registered domain); may be empty
	Lat, Lon float64 // degrees, in [-90, 90] and [-180, 180]
	Known    bool    // whether Lat and Lon locate the host; if not, it fell back to hashing
}

// Batch is what one site puts to another in one request.
type Batch struct {
	From, To string // sending and receiving sites
	// Seq is the sender's sequence number for (From, To), strictly
	// increasing, so the receiver can drop a batch it has already applied.
	Seq uint64
	// First, when the batch merges several of the sender's numbered entries,
	// is the first of them (the batch covers First..Seq); 0 means Seq alone.
	// If not 0, First ≤ Seq.
	First uint64
	// Virtual is cash for the receiver's virtual page: the cash of URLs the
	// sender had already sent (and so does not resend). Finite, ≥ 0.
	Virtual float64
	Puts    []Put
	Hosts   []HostLoc
	// Fetched are URLs of the receiver's hosts the sender fetched while
	// the receiver was down, sent back when it returns (the hand-back).
	// Their hosts' locations are in Hosts too.
	Fetched []FetchedURL

	// ends, for a batch decoded from a frame, is where each of its
	// entries ends in Puts and Fetched, and its virtual cash (a sharded
	// receiver splits the batch entry by entry: sharded.go).
	ends []entryEnd
}

// entryEnd is where one framed entry ends in its batch.
type entryEnd struct {
	puts, fetched int
	virtual       float64
}

// Limits bound what Decode and the server accept. The zero value of a field
// means its default.
type Limits struct {
	// MaxBytes bounds an encoded batch (and a put request's body). Default
	// DefaultMaxBytes.
	MaxBytes int
	// MaxPuts bounds len(Puts) and, separately, len(Hosts) and
	// len(Fetched). Default DefaultMaxPuts.
	MaxPuts int
}

// Defaults and fixed bounds of the wire.
const (
	DefaultMaxBytes = 8 << 20
	DefaultMaxPuts  = 100_000
	// MaxURLLen bounds a Put's URL, in bytes.
	MaxURLLen = 4 << 10
	// MaxHostLen bounds a HostLoc's Host and Key, in bytes.
	MaxHostLen = 1 << 10
	// Version is the first byte of an encoded batch without Fetched
	// records; VersionFetched, of one with them (the same layout, with the
	// records after the hosts). A batch with no Fetched records is always
	// encoded as Version, so that sites of an older release read it.
	Version        = 1
	VersionFetched = 2
	// VersionFrames is the first byte of a framed batch (AppendFrame):
	// several encoded batches (outbox entries) under one header, sent as
	// they were stored.
	VersionFrames = 3
)

// withDefaults returns l with zero fields set to their defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxPuts <= 0 {
		l.MaxPuts = DefaultMaxPuts
	}
	return l
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Fixed sizes of the encoding.
const (
	trailerLen = 4 // CRC-32C, little-endian
	minPutLen  = 1 + 1 + 8 + 1
	minHostLen = 1 + 1 + 1 + 8 + 8 + 1
	minDoneLen = 1 + 1 + 1
)

// Append appends the encoding of b to dst and returns it:
//
//	version        byte (Version)
//	from, to       uvarint length, bytes
//	seq, first     uvarint each
//	virtual        float64 bits, 8 bytes little-endian
//	puts           uvarint count, then per put:
//	                 url uvarint length, bytes; cash 8 bytes; depth uvarint
//	hosts          uvarint count, then per host:
//	                 host, key uvarint length, bytes; lat, lon 8 bytes each;
//	                 known 1 byte (0 or 1)
//	fetched        only in VersionFetched: uvarint count (≥ 1), then per
//	                 record: url uvarint length, bytes; status 1 byte
//	crc            CRC-32C (Castagnoli) of all the above, 4 bytes little-endian
//
// Varints are minimal, and the version is VersionFetched exactly when there
// are Fetched records, so every valid encoding is the only one of its
// batch. Append does not validate b; Decode does, and so does Validate.
func (b *Batch) Append(dst []byte) []byte {
	start := len(dst)
	if len(b.Fetched) > 0 {
		dst = append(dst, VersionFetched)
	} else {
		dst = append(dst, Version)
	}
	dst = appendString(dst, b.From)
	dst = appendString(dst, b.To)
	dst = binary.AppendUvarint(dst, b.Seq)
	dst = binary.AppendUvarint(dst, b.First)
	dst = appendFloat(dst, b.Virtual)
	dst = binary.AppendUvarint(dst, uint64(len(b.Puts)))
	for i := range b.Puts {
		p := &b.Puts[i]
		dst = appendString(dst, p.URL)
		dst = appendFloat(dst, p.Cash)
		dst = binary.AppendUvarint(dst, uint64(p.Depth))
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Hosts)))
	for i := range b.Hosts {
		h := &b.Hosts[i]
		dst = appendString(dst, h.Host)
		dst = appendString(dst, h.Key)
		dst = appendFloat(dst, h.Lat)
		dst = appendFloat(dst, h.Lon)
		k := byte(0)
		if h.Known {
			k = 1
		}
		dst = append(dst, k)
	}
	if len(b.Fetched) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(b.Fetched)))
		for i := range b.Fetched {
			dst = appendString(dst, b.Fetched[i].URL)
			dst = append(dst, byte(b.Fetched[i].Status))
		}
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// Size returns the length of b's encoding.
func (b *Batch) Size() int {
	n := 1 + strLen(b.From) + strLen(b.To) + uvarintLen(b.Seq) + uvarintLen(b.First) + 8 + uvarintLen(uint64(len(b.Puts)))
	for i := range b.Puts {
		n += strLen(b.Puts[i].URL) + 8 + uvarintLen(uint64(b.Puts[i].Depth))
	}
	n += uvarintLen(uint64(len(b.Hosts)))
	for i := range b.Hosts {
		n += strLen(b.Hosts[i].Host) + strLen(b.Hosts[i].Key) + 17
	}
	if len(b.Fetched) > 0 {
		n += uvarintLen(uint64(len(b.Fetched)))
		for i := range b.Fetched {
			n += strLen(b.Fetched[i].URL) + 1
		}
	}
	return n + trailerLen
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendFloat(dst []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
}

func strLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// Decode decodes and validates one encoded batch (see Batch.Append), or a
// framed batch (AppendFrame) as the one batch its entries make. Every
// error wraps ErrMalformed or ErrTooLarge and says what is wrong and where.
// It rejects a wrong version, a bad checksum, truncated or trailing bytes, a
// batch over lim, and any batch Validate rejects. The batch's strings share
// one copy of p, so p may be reused once Decode returns.
func Decode(p []byte, lim Limits) (*Batch, error) {
	lim = lim.withDefaults()
	if len(p) > 0 && p[0] == VersionFrames {
		return decodeFrames(p, lim)
	}
	b, err := decode(p, lim)
	if err != nil {
		return nil, err
	}
	if err := b.Validate(lim); err != nil {
		return nil, fmt.Errorf("federation: decode: %w", err)
	}
	return b, nil
}

// decode decodes one encoded batch (Version or VersionFetched) without
// Validate.
func decode(p []byte, lim Limits) (*Batch, error) {
	if len(p) > lim.MaxBytes {
		return nil, fmt.Errorf("federation: decode: %w: %d bytes, limit %d", ErrTooLarge, len(p), lim.MaxBytes)
	}
	if len(p) < 1+trailerLen {
		return nil, fmt.Errorf("federation: decode: %w: %d bytes is shorter than any batch", ErrMalformed, len(p))
	}
	if p[0] == VersionFrames {
		return nil, fmt.Errorf("federation: decode: %w: a framed batch (version %d) where one batch is expected (a frame's entry)", ErrMalformed, p[0])
	}
	if p[0] != Version && p[0] != VersionFetched {
		return nil, fmt.Errorf("federation: decode: %w: version %d, want %d, %d or %d (framed)", ErrMalformed, p[0], Version, VersionFetched, VersionFrames)
	}
	body := p[:len(p)-trailerLen]
	want := binary.LittleEndian.Uint32(p[len(body):])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("federation: decode: %w: checksum %08x, trailer says %08x (corrupted or truncated)", ErrMalformed, got, want)
	}
	d := decoder{s: string(body), off: 1, at: -1}
	b := &Batch{}
	b.From = d.str("from", MaxHostLen)
	b.To = d.str("to", MaxHostLen)
	b.Seq = d.uvarint("seq")
	b.First = d.uvarint("first")
	b.Virtual = d.float("virtual")
	if n := d.count("puts", lim.MaxPuts, minPutLen); n > 0 {
		b.Puts = make([]Put, n)
		for i := range b.Puts {
			d.at = i
			p := &b.Puts[i]
			p.URL = d.str("url", MaxURLLen)
			p.Cash = d.float("cash")
			dep := d.uvarint("depth")
			if dep > math.MaxUint32 && d.err == nil {
				d.fail(ErrMalformed, "depth", "%d does not fit 32 bits", dep)
			}
			p.Depth = uint32(dep)
			if d.err != nil {
				break
			}
		}
	}
	d.at = -1
	if n := d.count("hosts", lim.MaxPuts, minHostLen); n > 0 {
		b.Hosts = make([]HostLoc, n)
		for i := range b.Hosts {
			d.at, d.inHosts = i, true
			h := &b.Hosts[i]
			h.Host = d.str("host", MaxHostLen)
			h.Key = d.str("key", MaxHostLen)
			h.Lat = d.float("lat")
			h.Lon = d.float("lon")
			switch k := d.u8("known"); k {
			case 0, 1:
				h.Known = k == 1
			default:
				d.fail(ErrMalformed, "known", "byte %d, want 0 or 1", k)
			}
			if d.err != nil {
				break
			}
		}
	}
	d.at, d.inHosts = -1, false
	if p[0] == VersionFetched {
		n := d.count("fetched", lim.MaxPuts, minDoneLen)
		if n == 0 && d.err == nil {
			d.fail(ErrMalformed, "fetched", "version %d with no fetched records (such a batch is version %d)", VersionFetched, Version)
		}
		if n > 0 {
			b.Fetched = make([]FetchedURL, n)
			for i := range b.Fetched {
				d.at, d.inFetched = i, true
				r := &b.Fetched[i]
				r.URL = d.str("url", MaxURLLen)
				r.Status = crawl.Status(d.u8("status"))
				if d.err != nil {
					break
				}
			}
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("federation: decode: %w", d.err)
	}
	if d.off != len(d.s) {
		return nil, fmt.Errorf("federation: decode: %w: %d trailing bytes after the last field at offset %d", ErrMalformed, len(d.s)-d.off, d.off)
	}
	return b, nil
}

// decoder reads fields from s; after the first error every read is a no-op.
type decoder struct {
	s         string
	off       int
	err       error
	at        int  // index of the put, host or fetched record being read, or -1
	inHosts   bool // whether at indexes Hosts
	inFetched bool // whether at indexes Fetched
}

func (d *decoder) fail(kind error, field, format string, args ...any) {
	if d.err != nil {
		return
	}
	where := field
	switch {
	case d.at >= 0 && d.inHosts:
		where = fmt.Sprintf("hosts[%d].%s", d.at, field)
	case d.at >= 0 && d.inFetched:
		where = fmt.Sprintf("fetched[%d].%s", d.at, field)
	case d.at >= 0:
		where = fmt.Sprintf("puts[%d].%s", d.at, field)
	}
	d.err = fmt.Errorf("%w: %s at offset %d: %s", kind, where, d.off, fmt.Sprintf(format, args...))
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	var v uint64
	for i, shift := 0, uint(0); ; i, shift = i+1, shift+7 {
		if d.off+i >= len(d.s) {
			d.fail(ErrMalformed, field, "truncated varint")
			return 0
		}
		c := d.s[d.off+i]
		if i == 9 && c > 1 {
			d.fail(ErrMalformed, field, "varint overflows 64 bits")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			if c == 0 && i > 0 {
				d.fail(ErrMalformed, field, "non-minimal varint")
				return 0
			}
			d.off += i + 1
			return v
		}
	}
}

func (d *decoder) str(field string, max int) string {
	n := d.uvarint(field + " length")
	if d.err != nil {
		return ""
	}
	if n > uint64(max) {
		d.fail(ErrMalformed, field, "length %d over the limit %d", n, max)
		return ""
	}
	if n > uint64(len(d.s)-d.off) {
		d.fail(ErrMalformed, field, "truncated: length %d, %d bytes left", n, len(d.s)-d.off)
		return ""
	}
	s := d.s[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

func (d *decoder) float(field string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.s)-d.off < 8 {
		d.fail(ErrMalformed, field, "truncated float64")
		return 0
	}
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(d.s[d.off+i])
	}
	d.off += 8
	return math.Float64frombits(v)
}

func (d *decoder) u8(field string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.s) {
		d.fail(ErrMalformed, field, "truncated")
		return 0
	}
	c := d.s[d.off]
	d.off++
	return c
}

// count reads a count and checks it against max and against the bytes left
// (each entry takes at least minLen), before anything is allocated.
func (d *decoder) count(field string, max, minLen int) int {
	n := d.uvarint(field + " count")
	if d.err != nil {
		return 0
	}
	if n > uint64(max) {
		d.fail(ErrTooLarge, field, "%d entries, limit %d", n, max)
		return 0
	}
	if n > uint64((len(d.s)-d.off)/minLen) {
		d.fail(ErrMalformed, field, "truncated: %d entries cannot fit in %d bytes", n, len(d.s)-d.off)
		return 0
	}
	return int(n)
}

// Validate reports the first thing in b that Decode would reject, wrapping
// ErrMalformed or ErrTooLarge: From and To must be valid site names, First at
// most Seq, Virtual
// and every Cash finite and ≥ 0, every URL an absolute http or https URL of
// 1..MaxURLLen bytes with a host, every Host 1..MaxHostLen bytes of valid
// UTF-8 with no spaces or control characters, every Key at most MaxHostLen
// bytes, coordinates finite and on the globe, every Fetched record's URL
// valid as a put's and its Status final, and the batch within lim.
func (b *Batch) Validate(lim Limits) error {
	lim = lim.withDefaults()
	if err := certs.ValidateName(b.From); err != nil {
		return fmt.Errorf("%w: from: %w", ErrMalformed, err)
	}
	if err := certs.ValidateName(b.To); err != nil {
		return fmt.Errorf("%w: to: %w", ErrMalformed, err)
	}
	if b.First > b.Seq {
		return fmt.Errorf("%w: first %d is after seq %d", ErrMalformed, b.First, b.Seq)
	}
	if !nonNegative(b.Virtual) {
		return fmt.Errorf("%w: virtual: cash %v, want finite and ≥ 0", ErrMalformed, b.Virtual)
	}
	if len(b.Puts) > lim.MaxPuts {
		return fmt.Errorf("%w: %d puts, limit %d", ErrTooLarge, len(b.Puts), lim.MaxPuts)
	}
	if len(b.Hosts) > lim.MaxPuts {
		return fmt.Errorf("%w: %d hosts, limit %d", ErrTooLarge, len(b.Hosts), lim.MaxPuts)
	}
	if len(b.Fetched) > lim.MaxPuts {
		return fmt.Errorf("%w: %d fetched records, limit %d", ErrTooLarge, len(b.Fetched), lim.MaxPuts)
	}
	for i := range b.Puts {
		p := &b.Puts[i]
		if err := validURL(p.URL); err != nil {
			return fmt.Errorf("%w: puts[%d].url: %w", ErrMalformed, i, err)
		}
		if !nonNegative(p.Cash) {
			return fmt.Errorf("%w: puts[%d].cash: %v, want finite and ≥ 0 (url %q)", ErrMalformed, i, p.Cash, p.URL)
		}
	}
	for i := range b.Hosts {
		h := &b.Hosts[i]
		if err := validHost(h.Host); err != nil {
			return fmt.Errorf("%w: hosts[%d].host: %w", ErrMalformed, i, err)
		}
		if len(h.Key) > MaxHostLen || !utf8.ValidString(h.Key) {
			return fmt.Errorf("%w: hosts[%d].key: %d bytes, want valid UTF-8 of at most %d", ErrMalformed, i, len(h.Key), MaxHostLen)
		}
		if !(h.Lat >= -90 && h.Lat <= 90) || !(h.Lon >= -180 && h.Lon <= 180) {
			return fmt.Errorf("%w: hosts[%d]: coordinates (%v, %v) of %q are not on the globe", ErrMalformed, i, h.Lat, h.Lon, h.Host)
		}
	}
	for i := range b.Fetched {
		r := &b.Fetched[i]
		if err := validURL(r.URL); err != nil {
			return fmt.Errorf("%w: fetched[%d].url: %w", ErrMalformed, i, err)
		}
		if r.Status < crawl.StatusFetched || r.Status >= crawl.StatusCount {
			return fmt.Errorf("%w: fetched[%d].status: %d is not a final status (url %q)", ErrMalformed, i, r.Status, r.URL)
		}
	}
	if n := b.Size(); n > lim.MaxBytes {
		return fmt.Errorf("%w: %d bytes encoded, limit %d", ErrTooLarge, n, lim.MaxBytes)
	}
	return nil
}

func nonNegative(f float64) bool { return f >= 0 && !math.IsInf(f, 1) } // false for NaN

// validURL accepts an absolute http or https URL with a host.
func validURL(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > MaxURLLen {
		return fmt.Errorf("%d bytes, limit %d", len(s), MaxURLLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%.80q: not valid UTF-8", s)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%.80q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%.80q: scheme %q, want http or https", s, u.Scheme)
	}
	if u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%.80q: not an absolute URL with a host", s)
	}
	return nil
}

// validHost accepts a host name without spaces or control characters.
func validHost(s string) error {
	if s == "" || len(s) > MaxHostLen {
		return fmt.Errorf("%d bytes, want 1 to %d", len(s), MaxHostLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%.80q: not valid UTF-8", s)
	}
	for i, r := range s {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%.80q: character %q at %d", s, r, i)
		}
	}
	return nil
}

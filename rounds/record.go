package rounds

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds/segment"
)

// errRecord marks a round file record that does not decode.
var errRecord = errors.New("rounds: bad record")

// genEntry is one URL of a round's generated list.
type genEntry struct {
	URL   string
	Host  string
	Cash  float64
	Depth uint32
	// Prev is what the crawl database knows of a refetched URL's last
	// fetch (zero: a first fetch); its job sends it (fetcher.Job.Prev).
	Prev fetcher.Prev
}

const (
	recFetch   = 'F'
	recUpdate  = 'U'
	recUpdEnd  = 'T'
	maxStrings = 1 << 20
)

// recFetchEmbeds is a fetch record with the page's requisites
// (fetcher.Result.Embeds): recFetch's fields with, after the links, a
// count and the embeds. A result without embeds is written as recFetch,
// byte for byte as before requisites existed.
const recFetchEmbeds = 'E'

// recFetchNearDup is a fetch record of a near-duplicate page
// (fetcher.Result.NearDupOf): recFetchEmbeds's fields, its embeds' count
// possibly 0, and at the end the URL of the page it duplicates.
const recFetchNearDup = 'N'

// recFetchSignals is a fetch record of a result with the page's own
// signals (fetcher.Result.NoIndex, Canonical, Traps): recFetchNearDup's
// fields, its original possibly "", then a byte of signal flags (at least
// one set), the canonical URL if sigCanonical, and the trap counts
// (repetition, calendar: uvarints) if sigTraps. A result without them is
// written as recFetch, recFetchEmbeds or recFetchNearDup, byte for byte as
// before the signals existed.
const recFetchSignals = 'X'

// Signal flags of a recFetchSignals record.
const (
	sigNoIndex   = 1 << 0
	sigCanonical = 1 << 1
	sigTraps     = 1 << 2
	knownSignals = sigNoIndex | sigCanonical | sigTraps
)

// Flags of a fetch record.
const (
	flagRetry     = 1 << 0
	flagNoRequest = 1 << 1
	flagTruncated = 1 << 2 // the record ends with the WARC-Truncated reason
	// A refetch's record (one whose job had a Prev) ends with it, and
	// with the answer's validators and what the fetch found:
	flagRefetch     = 1 << 3 // then appendPrev, the ETag and the Last-Modified
	flagNotModified = 1 << 4 // fetcher.Result.NotModified
	flagUnchanged   = 1 << 5 // fetcher.Result.Unchanged
	// A first fetch answered with validators ends with the ETag and the
	// Last-Modified, which its refetch will send.
	flagValidators = 1 << 6
	// A sitemap's record whose links had <lastmod>s ends with them
	// (fetcher.Result.LastMods: one a link, Unix ms, 0 for none).
	flagLastMods = 1 << 7
	knownFlags   = flagRetry | flagNoRequest | flagTruncated | flagRefetch | flagNotModified | flagUnchanged | flagValidators | flagLastMods
)

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// reader decodes the fields of one record, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errRecord
	}
	r.b = nil
}

func (r *reader) byte1() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) f64() float64 { return math.Float64frombits(r.u64()) }

func (r *reader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// appendResult encodes a fetch result as a fetch segment record.
func appendResult(dst []byte, res *fetcher.Result) []byte {
	tag := byte(recFetch)
	var signals byte
	if res.NoIndex {
		signals |= sigNoIndex
	}
	if res.Canonical != "" {
		signals |= sigCanonical
	}
	if res.Traps.Repetition > 0 || res.Traps.Calendar > 0 {
		signals |= sigTraps
	}
	switch {
	case signals != 0:
		tag = recFetchSignals
	case res.NearDupOf != "":
		tag = recFetchNearDup
	case len(res.Embeds) > 0:
		tag = recFetchEmbeds
	}
	dst = append(dst, tag, byte(res.Kind), byte(res.Status))
	var flags byte
	if res.Retry {
		flags |= flagRetry
	}
	if res.NoRequest {
		flags |= flagNoRequest
	}
	if res.Truncated != "" {
		flags |= flagTruncated
	}
	refetch := res.Prev != (fetcher.Prev{})
	if refetch {
		flags |= flagRefetch
		if res.NotModified {
			flags |= flagNotModified
		}
		if res.Unchanged {
			flags |= flagUnchanged
		}
	}
	validators := !refetch && (res.ETag != "" || res.LastModified != "")
	if validators {
		flags |= flagValidators
	}
	lastMods := len(res.LastMods) > 0 && len(res.LastMods) == len(res.Links)
	if lastMods {
		flags |= flagLastMods
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(max(res.HTTPStatus, 0)))
	dst = binary.AppendUvarint(dst, uint64(res.Depth))
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(res.Cash))
	var at int64
	if !res.FetchedAt.IsZero() {
		at = res.FetchedAt.UnixMilli()
	}
	dst = binary.AppendVarint(dst, at)
	dst = binary.BigEndian.AppendUint64(dst, res.ContentFP)
	dst = binary.AppendUvarint(dst, uint64(max(res.Bytes, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(res.Wait, 0)))
	dst = appendString(dst, res.URL)
	dst = appendString(dst, res.Host)
	dst = appendString(dst, res.RedirectTo)
	dst = appendString(dst, res.Err)
	dst = binary.AppendUvarint(dst, uint64(len(res.Links)))
	for _, l := range res.Links {
		dst = appendString(dst, l)
	}
	if tag != recFetch {
		dst = binary.AppendUvarint(dst, uint64(len(res.Embeds)))
		for _, l := range res.Embeds {
			dst = appendString(dst, l)
		}
	}
	if res.Truncated != "" {
		dst = appendString(dst, res.Truncated)
	}
	if refetch {
		dst = appendPrev(dst, &res.Prev)
	}
	if refetch || validators {
		dst = appendString(dst, res.ETag)
		dst = appendString(dst, res.LastModified)
	}
	if lastMods {
		for _, t := range res.LastMods {
			dst = appendTimeMS(dst, t)
		}
	}
	if tag == recFetchNearDup || tag == recFetchSignals {
		dst = appendString(dst, res.NearDupOf)
	}
	if tag == recFetchSignals {
		dst = append(dst, signals)
		if signals&sigCanonical != 0 {
			dst = appendString(dst, res.Canonical)
		}
		if signals&sigTraps != 0 {
			dst = binary.AppendUvarint(dst, uint64(max(res.Traps.Repetition, 0)))
			dst = binary.AppendUvarint(dst, uint64(max(res.Traps.Calendar, 0)))
		}
	}
	return dst
}

// fetchRecord is a decoded fetch segment record.
type fetchRecord struct {
	Kind       fetcher.Kind
	Status     store.Status
	Retry      bool
	NoRequest  bool // answered without a request for the URL (see fetcher.Result)
	HTTPStatus int
	Depth      uint32
	Cash       float64
	At         time.Time
	ContentFP  uint64
	Bytes      int64
	Wait       time.Duration
	URL        string
	Host       string
	RedirectTo string
	Err        string
	Links      []string
	Embeds     []string // the page's requisites (fetcher.Result.Embeds)
	NearDupOf  string   // the page it is a near-duplicate of (fetcher.Result.NearDupOf)
	Truncated  string   // WARC-Truncated reason, if the body was cut
	// A refetch's: the job's Prev, and whether it was a 304 or an
	// unchanged body; any fetch's: the answer's validators
	// (fetcher.Result's fields).
	Prev                   fetcher.Prev
	ETag, LastModified     string
	NotModified, Unchanged bool
	// LastMods: a sitemap's <lastmod> of each of Links (nil: none).
	LastMods []time.Time
	// The page's own signals (fetcher.Result's): noindex, its
	// rel=canonical target, the links the trap rules refused.
	NoIndex   bool
	Canonical string
	Traps     fetcher.TrapCounts
}

// appendTimeMS appends t as a varint of Unix milliseconds (0: zero).
func appendTimeMS(dst []byte, t time.Time) []byte {
	var ms int64
	if !t.IsZero() {
		ms = t.UnixMilli()
	}
	return binary.AppendVarint(dst, ms)
}

func decodeFetch(b []byte) (fetchRecord, error) {
	r := reader{b: b}
	var f fetchRecord
	tag := r.byte1()
	if tag != recFetch && tag != recFetchEmbeds && tag != recFetchNearDup && tag != recFetchSignals {
		return f, fmt.Errorf("%w: not a fetch record", errRecord)
	}
	f.Kind = fetcher.Kind(r.byte1())
	f.Status = store.Status(r.byte1())
	flags := r.byte1()
	f.Retry, f.NoRequest = flags&flagRetry != 0, flags&flagNoRequest != 0
	f.HTTPStatus = int(r.uvarint())
	f.Depth = uint32(r.uvarint())
	f.Cash = r.f64()
	if ms := r.varint(); ms != 0 {
		f.At = time.UnixMilli(ms).UTC()
	}
	f.ContentFP = r.u64()
	f.Bytes = int64(r.uvarint())
	f.Wait = time.Duration(r.uvarint())
	f.URL, f.Host, f.RedirectTo, f.Err = r.str(), r.str(), r.str(), r.str()
	n := r.uvarint()
	if n > maxStrings || n > uint64(len(r.b)) {
		return f, fmt.Errorf("%w: %d links", errRecord, n)
	}
	f.Links = make([]string, 0, n)
	for range n {
		f.Links = append(f.Links, r.str())
	}
	if tag != recFetch {
		n := r.uvarint()
		if n == 0 && tag == recFetchEmbeds || n > maxStrings || n > uint64(len(r.b)) {
			return f, fmt.Errorf("%w: %d embeds", errRecord, n)
		}
		for range n {
			f.Embeds = append(f.Embeds, r.str())
		}
	}
	if flags&flagTruncated != 0 {
		f.Truncated = r.str()
	}
	if flags&flagRefetch != 0 {
		if f.Prev = r.prev(); f.Prev == (fetcher.Prev{}) && r.err == nil {
			return f, fmt.Errorf("%w: refetch record of %.100q without what it refetched", errRecord, f.URL)
		}
		f.ETag, f.LastModified = r.str(), r.str()
		f.NotModified, f.Unchanged = flags&flagNotModified != 0, flags&flagUnchanged != 0
	}
	if flags&flagValidators != 0 {
		f.ETag, f.LastModified = r.str(), r.str()
	}
	if flags&flagLastMods != 0 {
		f.LastMods = make([]time.Time, len(f.Links))
		for i := range f.LastMods {
			if ms := r.varint(); ms != 0 {
				f.LastMods[i] = time.UnixMilli(ms).UTC()
			}
		}
	}
	if tag == recFetchNearDup {
		if f.NearDupOf = r.str(); f.NearDupOf == "" && r.err == nil {
			return f, fmt.Errorf("%w: near-duplicate record of %.100q without its original", errRecord, f.URL)
		}
	}
	if tag == recFetchSignals {
		f.NearDupOf = r.str()
		if err := f.decodeSignals(&r); err != nil {
			return f, err
		}
	}
	if flags&^knownFlags != 0 || flags&(flagNotModified|flagUnchanged) != 0 && flags&flagRefetch == 0 ||
		flags&flagValidators != 0 && flags&flagRefetch != 0 {
		return f, fmt.Errorf("%w: fetch record flags %#x", errRecord, flags)
	}
	if r.err != nil || len(r.b) != 0 {
		return f, fmt.Errorf("%w: fetch record of %.100q", errRecord, f.URL)
	}
	if math.IsNaN(f.Cash) || f.Cash < 0 || math.IsInf(f.Cash, 0) {
		return f, fmt.Errorf("%w: cash %v in fetch record of %.100q", errRecord, f.Cash, f.URL)
	}
	return f, nil
}

// decodeSignals decodes the signals of a recFetchSignals record.
func (f *fetchRecord) decodeSignals(r *reader) error {
	sig := r.byte1()
	if r.err != nil {
		return nil // reported with the record
	}
	if sig == 0 || sig&^knownSignals != 0 {
		return fmt.Errorf("%w: fetch record of %.100q with signal flags %#x", errRecord, f.URL, sig)
	}
	f.NoIndex = sig&sigNoIndex != 0
	if sig&sigCanonical != 0 {
		if f.Canonical = r.str(); f.Canonical == "" && r.err == nil {
			return fmt.Errorf("%w: fetch record of %.100q with an empty canonical", errRecord, f.URL)
		}
	}
	if sig&sigTraps != 0 {
		rep, cal := r.uvarint(), r.uvarint()
		if rep > math.MaxInt32 || cal > math.MaxInt32 || rep == 0 && cal == 0 && r.err == nil {
			return fmt.Errorf("%w: fetch record of %.100q with trap counts %d, %d", errRecord, f.URL, rep, cal)
		}
		f.Traps = fetcher.TrapCounts{Repetition: int32(rep), Calendar: int32(cal)}
	}
	return nil
}

// FetchedURLs lists, per round still on disk under dir (a site's data
// directory), the page URLs that have a result in the round's fetch
// segment: what a restart will not fetch again.
func FetchedURLs(dir string) (map[uint64][]string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, "rounds"))
	if err != nil {
		return nil, fmt.Errorf("rounds: %w", err)
	}
	out := map[uint64][]string{}
	for _, e := range ents {
		n, err := strconv.ParseUint(e.Name(), 10, 64)
		if err != nil || !e.IsDir() {
			continue
		}
		path := filepath.Join(dir, "rounds", e.Name(), fetchFile)
		_, _, err = segment.Read(path, func(rec []byte) error {
			fr, err := decodeFetch(rec)
			if err != nil {
				return err
			}
			if fr.Kind == fetcher.KindPage {
				out[n] = append(out[n], fr.URL)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("rounds: round %d: %w", n, err)
		}
	}
	return out, nil
}

package store

import (
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
)

// Status is where a URL is in its life; see crawl.Status.
type Status = crawl.Status

// URL statuses, from package crawl.
const (
	StatusUnfetched    = crawl.StatusUnfetched
	StatusGenerated    = crawl.StatusGenerated
	StatusFetched      = crawl.StatusFetched
	StatusRedirect     = crawl.StatusRedirect
	StatusGone         = crawl.StatusGone
	StatusError        = crawl.StatusError
	StatusRobotsDenied = crawl.StatusRobotsDenied
	StatusDuplicate    = crawl.StatusDuplicate
	statusCount        = crawl.StatusCount
)

// URLRecord is what the crawl database knows of one URL.
type URLRecord struct {
	URL        string
	Status     Status
	Cash       float64 // OPIC cash not yet distributed
	History    float64 // OPIC cash distributed so far
	Depth      uint32
	Round      uint64 // the round that last generated it
	FetchedAt  time.Time
	HTTPStatus uint16
	Retries    uint16
	ContentFP  uint64 // fingerprint of the fetched content
	FP         uint64 // fingerprint of the URL

	// The refetch schedule (issue 23), set by a fetch recorded with a
	// Schedule (RecordRoundFetch). NextFetch is when a fetched URL is due
	// again (zero: never); Interval is the interval that set it; ETag and
	// LastModified are the validators of its last answer, sent back on
	// the refetch; Changed and Unchanged count the refetches that found
	// new content and those that did not; Watched is the time over which
	// they looked: the sum, over those refetches, of the time since the
	// fetch before (a change rate's estimate is counts over Watched).
	NextFetch          time.Time
	Interval           time.Duration
	ETag, LastModified string
	Changed, Unchanged uint32
	Watched            time.Duration
	// Due: the URL is being refetched. MakeDue puts a fetched URL whose
	// NextFetch has come back in the frontier, with DueScore as its
	// frontier score; it stays StatusFetched there, becomes
	// StatusGenerated in a round, and Due ends with the refetch's final
	// result (a retry or a requeue puts it back in the frontier as due).
	Due      bool
	DueScore float64
	// Parked: an unfetched URL out of the frontier (Batch.Park) because
	// its host used its page budget while the crawl refetches; it ends
	// when the URL leaves StatusUnfetched.
	Parked bool
}

// scheduled reports whether r has a refetch schedule of its own to
// index: fetched, not due yet, with a next fetch.
func (r *URLRecord) scheduled() bool {
	return r.Status == StatusFetched && !r.Due && !r.NextFetch.IsZero()
}

// inFrontier reports whether r is in the frontier: unfetched and not
// parked, or fetched and due for a refetch.
func (r *URLRecord) inFrontier() bool {
	return r.Status == StatusUnfetched && !r.Parked || r.Status == StatusFetched && r.Due
}

// frontierScore is r's score in the frontier: its cash if unfetched, its
// DueScore if due.
func (r *URLRecord) frontierScore() float64 {
	if r.Status == StatusFetched {
		return r.DueScore
	}
	return r.Cash
}

// hasRefetch reports whether r carries any refetch field (and so is
// stored in the second or third version of the encoding).
func (r *URLRecord) hasRefetch() bool {
	return !r.NextFetch.IsZero() || r.Interval != 0 || r.ETag != "" || r.LastModified != "" ||
		r.Changed != 0 || r.Unchanged != 0 || r.Due || r.DueScore != 0 || r.Watched != 0 || r.Parked
}

// Record encodings: version 1 is every record without a refetch field,
// byte for byte as before refetch existed; version 2 appends the refetch
// fields; version 3 is version 2 and a uvarint of Watched, used only when
// Watched is not 0 (so a record without it is stored as before).
const (
	recordVersion  = 1
	recordVersion2 = 2
	recordVersion3 = 3
)

// Limits of the stored validators: longer ones are not kept.
const MaxValidatorLen = 256

// Flags of the version 2 fields.
const (
	recDue    = 1
	recParked = 2
)

func (r *URLRecord) appendTo(dst []byte) []byte {
	v := byte(recordVersion)
	switch {
	case r.Watched != 0:
		v = recordVersion3
	case r.hasRefetch():
		v = recordVersion2
	}
	dst = append(dst, v, byte(r.Status))
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(r.Cash))
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(r.History))
	dst = binary.BigEndian.AppendUint64(dst, r.FP)
	dst = binary.AppendUvarint(dst, uint64(r.Depth))
	dst = binary.AppendUvarint(dst, r.Round)
	var ms int64
	if !r.FetchedAt.IsZero() {
		ms = r.FetchedAt.UnixMilli()
	}
	dst = binary.AppendVarint(dst, ms)
	dst = binary.AppendUvarint(dst, uint64(r.HTTPStatus))
	dst = binary.AppendUvarint(dst, uint64(r.Retries))
	dst = binary.BigEndian.AppendUint64(dst, r.ContentFP)
	if v == recordVersion {
		return dst
	}
	var flags byte
	if r.Due {
		flags |= recDue
	}
	if r.Parked {
		flags |= recParked
	}
	dst = append(dst, flags)
	dst = appendTime(dst, r.NextFetch)
	dst = binary.AppendUvarint(dst, uint64(max(r.Interval, 0)))
	dst = appendBytes(dst, []byte(r.ETag))
	dst = appendBytes(dst, []byte(r.LastModified))
	dst = binary.AppendUvarint(dst, uint64(r.Changed))
	dst = binary.AppendUvarint(dst, uint64(r.Unchanged))
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(r.DueScore))
	if v == recordVersion3 {
		dst = binary.AppendUvarint(dst, uint64(max(r.Watched, 0)))
	}
	return dst
}

var errBadValue = errors.New("bad stored value")

// decodeRecord decodes a stored URL record (URL excluded).
func decodeRecord(b []byte, r *URLRecord) error {
	if len(b) < 26 || b[0] < recordVersion || b[0] > recordVersion3 || b[1] == 0 || Status(b[1]) >= statusCount {
		return errBadValue
	}
	r.Status = Status(b[1])
	r.Cash = math.Float64frombits(binary.BigEndian.Uint64(b[2:]))
	r.History = math.Float64frombits(binary.BigEndian.Uint64(b[10:]))
	r.FP = binary.BigEndian.Uint64(b[18:])
	d := decoder{b: b[26:]}
	r.Depth = uint32(d.uvarint())
	r.Round = d.uvarint()
	if ms := d.varint(); ms != 0 {
		r.FetchedAt = time.UnixMilli(ms).UTC()
	} else {
		r.FetchedAt = time.Time{}
	}
	r.HTTPStatus = uint16(d.uvarint())
	r.Retries = uint16(d.uvarint())
	r.ContentFP = d.u64()
	r.NextFetch, r.Interval, r.ETag, r.LastModified = time.Time{}, 0, "", ""
	r.Changed, r.Unchanged, r.Due, r.DueScore, r.Watched, r.Parked = 0, 0, false, 0, 0, false
	if b[0] >= recordVersion2 {
		flags := d.byte1()
		r.Due, r.Parked = flags&recDue != 0, flags&recParked != 0
		r.NextFetch = d.time()
		r.Interval = time.Duration(min(d.uvarint(), math.MaxInt64))
		r.ETag = string(d.bytes(MaxValidatorLen))
		r.LastModified = string(d.bytes(MaxValidatorLen))
		r.Changed = uint32(min(d.uvarint(), math.MaxUint32))
		r.Unchanged = uint32(min(d.uvarint(), math.MaxUint32))
		r.DueScore = d.f64()
		if flags&^(recDue|recParked) != 0 || !validCash(r.DueScore) {
			return errBadValue
		}
	}
	if b[0] == recordVersion3 {
		r.Watched = time.Duration(min(d.uvarint(), math.MaxInt64))
	}
	if d.err != nil || len(d.b) != 0 {
		return errBadValue
	}
	return nil
}

// HostRecord is what the crawl database keeps per host for politeness; see
// crawl.HostRecord.
type HostRecord = crawl.HostRecord

// MaxRobotsBytes bounds the robots.txt body kept per host.
const MaxRobotsBytes = crawl.MaxRobotsBytes

func appendTime(dst []byte, t time.Time) []byte {
	var ms int64
	if !t.IsZero() {
		ms = t.UnixMilli()
	}
	return binary.AppendVarint(dst, ms)
}

func (d *decoder) time() time.Time {
	ms := d.varint()
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Host record encodings: version 1 is a record whose
// RobotsUnreachableSince is zero and SitemapsPending false, byte for byte
// as before those fields existed; version 2 appends
// RobotsUnreachableSince (appendTime); version 3 appends it and a flags
// uvarint (bit 0: SitemapsPending). All are decoded.
const (
	hostVersion  = 1
	hostVersion2 = 2
	hostVersion3 = 3
)

// hostSitemapsPending is version 3's flag bit of SitemapsPending.
const hostSitemapsPending = 1

// appendHost appends the stored encoding of h to dst:
//
//	version        byte (hostVersion, hostVersion2 or hostVersion3)
//	Robots         uvarint length, bytes
//	RobotsStatus   uvarint
//	RobotsExpiry   varint Unix ms (0: zero time)
//	CrawlDelay     varint ns
//	IPs            uvarint count, then each as uvarint length, netip binary
//	IPsExpiry      varint Unix ms
//	BackoffUntil   varint Unix ms
//	Failures       uvarint
//	RobotsUnreachableSince  varint Unix ms (versions 2 and 3)
//	flags          uvarint (version 3 only; bit 0: SitemapsPending)
func appendHost(dst []byte, h *HostRecord) []byte {
	v := byte(hostVersion)
	switch {
	case h.SitemapsPending:
		v = hostVersion3
	case !h.RobotsUnreachableSince.IsZero():
		v = hostVersion2
	}
	dst = append(dst, v)
	dst = appendBytes(dst, h.Robots)
	dst = binary.AppendUvarint(dst, uint64(h.RobotsStatus))
	dst = appendTime(dst, h.RobotsExpiry)
	dst = binary.AppendVarint(dst, int64(h.CrawlDelay))
	dst = binary.AppendUvarint(dst, uint64(len(h.IPs)))
	for _, ip := range h.IPs {
		b, _ := ip.MarshalBinary()
		dst = appendBytes(dst, b)
	}
	dst = appendTime(dst, h.IPsExpiry)
	dst = appendTime(dst, h.BackoffUntil)
	dst = binary.AppendUvarint(dst, uint64(h.Failures))
	if v >= hostVersion2 {
		dst = appendTime(dst, h.RobotsUnreachableSince)
	}
	if v == hostVersion3 {
		dst = binary.AppendUvarint(dst, hostSitemapsPending)
	}
	return dst
}

func decodeHost(b []byte) (HostRecord, error) {
	var h HostRecord
	if len(b) < 1 || b[0] < hostVersion || b[0] > hostVersion3 {
		return h, errBadValue
	}
	d := decoder{b: b[1:]}
	if r := d.bytes(MaxRobotsBytes); len(r) > 0 {
		h.Robots = append([]byte(nil), r...)
	}
	h.RobotsStatus = uint16(d.uvarint())
	h.RobotsExpiry = d.time()
	h.CrawlDelay = time.Duration(d.varint())
	n := d.uvarint()
	if n > 64 {
		return h, errBadValue
	}
	for range n {
		var ip netip.Addr
		if err := ip.UnmarshalBinary(d.bytes(16)); err != nil {
			return h, errBadValue
		}
		h.IPs = append(h.IPs, ip)
	}
	h.IPsExpiry = d.time()
	h.BackoffUntil = d.time()
	h.Failures = uint32(d.uvarint())
	if b[0] >= hostVersion2 {
		h.RobotsUnreachableSince = d.time()
	}
	if b[0] == hostVersion3 {
		flags := d.uvarint()
		if flags&^hostSitemapsPending != 0 {
			return h, errBadValue
		}
		h.SitemapsPending = flags&hostSitemapsPending != 0
	}
	if d.err != nil || len(d.b) != 0 {
		return h, errBadValue
	}
	return h, nil
}

// hostState is the crawl database's own per-host bookkeeping.
type hostState struct {
	best     float64 // score of the host's best frontier URL
	frontier uint64  // 1 if the host has URLs in the frontier (and so an entry in the host index)
	fetched  uint64  // fetch results recorded (the page budget used)
}

func (s *hostState) appendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(s.best))
	dst = binary.AppendUvarint(dst, s.frontier)
	return binary.AppendUvarint(dst, s.fetched)
}

func decodeHostState(b []byte) (hostState, error) {
	var s hostState
	if len(b) < 8 {
		return s, errBadValue
	}
	s.best = math.Float64frombits(binary.BigEndian.Uint64(b))
	d := decoder{b: b[8:]}
	s.frontier = d.uvarint()
	s.fetched = d.uvarint()
	if d.err != nil || len(d.b) != 0 {
		return s, errBadValue
	}
	return s, nil
}

// HostStats is the crawl database's bookkeeping for one host.
type HostStats struct {
	Frontier uint64  // URLs of the host waiting in the frontier
	Best     float64 // the best score among them
	Fetched  uint64  // fetch results recorded: the page budget used
}

// decoder reads the varint-and-length encodings used in values and commands.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.err = errShort
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) f64() float64 { return math.Float64frombits(d.u64()) }

func (d *decoder) byte1() byte {
	if d.err != nil || len(d.b) < 1 {
		d.err = errShort
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// bytes reads a length-prefixed byte string of at most max bytes; the result
// aliases the input.
func (d *decoder) bytes(max int) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

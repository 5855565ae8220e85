package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"
	"unsafe"
)

// OpType is the kind of one operation in a command.
type OpType uint8

// The operations a command can carry.
const (
	OpUpsertCash       OpType = iota + 1 // new → unfetched with cash; known → cash added
	OpPutIfAbsent                        // new → unfetched with cash; known → untouched
	OpMarkGenerated                      // unfetched → generated in a round
	OpRequeue                            // generated → unfetched (a round that did not fetch it)
	OpFetchResult                        // record a fetch: status, content fingerprint; cash → history
	OpPutHost                            // replace a host record
	OpSentCheckAdd                       // URL-sent cache: report presence, add if absent
	OpOutboxEnqueue                      // add a put for another site to the outbox
	OpOutboxAck                          // remove an outbox entry
	OpPutRound                           // replace the round state
	OpPutDomain                          // set a domain's coordinates
	OpPutUser                            // set a key of the node layer's table
	OpRoundFetch                         // record a fetch of a URL generated in a given round; only the spent cash → history
	OpRevisit                            // a fetched URL's stored outlinks were given some of its cash: that cash → history
	OpGuard                              // the command applies only if a node-layer key holds a given value
	OpDeleteUserPrefix                   // delete every node-layer key with a prefix
	OpHandOver                           // an unfetched URL gives cash away; with none left it is forgotten
	OpFetchedElsewhere                   // another site fetched the URL: new or unfetched → that final status, no cash moved; generated → marked
	OpRoundFetchSched                    // OpRoundFetch with a refetch schedule (FetchResult.Schedule)
	OpMakeDue                            // a fetched URL whose next fetch has come → back in the frontier, due, with a score
	OpPark                               // an unfetched URL of a host over its budget leaves the frontier (URLRecord.Parked)
	OpNearDup                            // a fetched page is a near-duplicate of another URL (Store.NearDupOf)
	OpDirectives                         // a fetched page's noindex and rel=canonical, or none (Store.DirectivesOf)
	opCount
)

// Limits on commands.
const (
	// MaxCommandBytes is the largest command accepted.
	MaxCommandBytes = 32 << 20
	// MaxOps is the most operations one command may carry.
	MaxOps      = 1 << 20
	maxName     = 1024
	maxPayload  = 64 << 10
	maxRoundLen = 64 << 10
	// MaxUserValue is the largest value of a node-layer key (PutUser).
	MaxUserValue = 8 << 20
)

const (
	cmdMagic   = 0xC7
	cmdVersion = 1
)

// Sentinel errors.
var (
	// ErrCorruptCommand: a command that does not decode or whose checksum fails.
	ErrCorruptCommand = errors.New("store: corrupt command")
	// ErrCommandTooLarge: a command above MaxCommandBytes or MaxOps.
	ErrCommandTooLarge = errors.New("store: command too large")
	// ErrBadURL: a URL the database does not accept (not normalised, too long).
	ErrBadURL = errors.New("store: bad url")
	// ErrBadOp: an operation with invalid arguments.
	ErrBadOp = errors.New("store: bad operation")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("store: closed")
	// ErrStorage: a write to Pebble failed; the store stops accepting commands.
	ErrStorage = errors.New("store: storage failure")
	// ErrGuard: a command's guard did not hold; the command changed nothing.
	ErrGuard = errors.New("store: guard failed")
	// ErrIncomplete: the store's last restore did not finish (a crash or an
	// I/O error in its middle), so it holds part of a snapshot. It is never
	// served: drop it (Shared.Drop, or remove a store of its own) and open
	// it empty; Raft restores its latest snapshot again at start.
	ErrIncomplete = errors.New("store: incomplete restore")
	// ErrCorruptSnapshot: a snapshot stream that does not decode, is cut
	// short, or fails its checksum; the store was not changed.
	ErrCorruptSnapshot = errors.New("store: corrupt snapshot")
	// ErrBadGroup: a group name that is not [a-z0-9-]{1,32}.
	ErrBadGroup = errors.New("store: bad group name")
	// ErrLayout: a Pebble opened the wrong way: a Shared's directory by
	// Open, or a store of its own by OpenShared.
	ErrLayout = errors.New("store: wrong kind of store directory")
)

// Batch builds one command: many operations applied atomically, in order.
// Add methods validate their arguments and record the first problem, which
// Encode returns.
type Batch struct {
	buf []byte // the operations
	out []byte // the encoded command
	n   int
	err error
}

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{} }

// Len returns the number of operations.
func (b *Batch) Len() int { return b.n }

// Reset empties the batch, keeping its buffer.
func (b *Batch) Reset() {
	b.buf, b.n, b.err = b.buf[:0], 0, nil
}

func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *Batch) op(t OpType) {
	b.buf = append(b.buf, byte(t))
	b.n++
}

func (b *Batch) url(u string) bool {
	if _, ok := splitURL(u); !ok {
		b.fail(fmt.Errorf("%w: %.200q", ErrBadURL, u))
		return false
	}
	b.buf = appendBytes(b.buf, []byte(u))
	return true
}

func validCash(c float64) bool { return c >= 0 && !math.IsInf(c, 0) && !math.IsNaN(c) }

// UpsertCash adds cash to url, inserting it as unfetched at depth if new
// (a known URL keeps the smaller depth).
func (b *Batch) UpsertCash(url string, cash float64, depth uint32) {
	b.urlCash(OpUpsertCash, url, cash, depth)
}

// PutIfAbsent inserts url as unfetched with cash at depth if it is new, and
// leaves a known URL untouched.
func (b *Batch) PutIfAbsent(url string, cash float64, depth uint32) {
	b.urlCash(OpPutIfAbsent, url, cash, depth)
}

func (b *Batch) urlCash(t OpType, url string, cash float64, depth uint32) {
	if !validCash(cash) {
		b.fail(fmt.Errorf("%w: cash %v for %s", ErrBadOp, cash, url))
		return
	}
	b.op(t)
	b.url(url)
	b.buf = binary.BigEndian.AppendUint64(b.buf, math.Float64bits(cash))
	b.buf = binary.AppendUvarint(b.buf, uint64(depth))
}

// HandOver takes up to cash from an unfetched url, which another site now
// owns and is sent with that cash; a URL left with no cash is forgotten
// (its record and frontier entry deleted), so that it can come back as new
// if the site owns its host again. A URL that is not unfetched is left
// alone (the result's Applied is false). The writer must be the only one
// that takes cash from unfetched URLs (the site's leader, in generate):
// others only add cash, so the amount read before the command is at most
// what it finds.
func (b *Batch) HandOver(url string, cash float64) {
	b.urlCash(OpHandOver, url, cash, 0)
}

// FetchedElsewhere records that another site fetched url (it held the
// URL's host while this site was down) and recorded status, a final status;
// the record moves no cash, so cash stays conserved wherever it is. A URL
// this site does not know is inserted with status and no cash; an
// unfetched one takes status and keeps its cash (it leaves the frontier);
// one with a final status is left alone. A generated URL keeps its round
// and is marked (OpResult.Marked): if its round gives it back to the
// frontier (Requeue, or a retry result) it takes status instead, with its
// cash; if the round records a final fetch of it here, the mark is simply
// dropped. Counts.Marked and MarkedURLs tell which URLs are marked,
// so that their jobs can be dropped.
func (b *Batch) FetchedElsewhere(url string, status Status) {
	if status < StatusFetched || status >= statusCount {
		b.fail(fmt.Errorf("%w: fetched elsewhere with status %v (not a final status) for %s", ErrBadOp, status, url))
		return
	}
	b.op(OpFetchedElsewhere)
	b.url(url)
	b.buf = append(b.buf, byte(status))
}

// MarkGenerated moves an unfetched url out of the frontier into round.
func (b *Batch) MarkGenerated(url string, round uint64) {
	b.op(OpMarkGenerated)
	b.url(url)
	b.buf = binary.AppendUvarint(b.buf, round)
}

// Requeue returns a generated url to the frontier.
func (b *Batch) Requeue(url string) {
	b.op(OpRequeue)
	b.url(url)
}

// FetchResult describes one fetch.
type FetchResult struct {
	URL        string
	Status     Status // StatusFetched … StatusDuplicate; or StatusUnfetched with Retry
	HTTPStatus uint16
	At         time.Time
	ContentFP  uint64
	// Retry puts the URL back in the frontier with its cash, counting a
	// retry, instead of recording a final status.
	Retry bool
	// Round and Spend are used by RecordRoundFetch only: the round that
	// generated the URL, and the cash the fetch distributed to outlinks.
	Round uint64
	Spend float64
	// Schedule, if set, is the URL's refetch schedule after this fetch
	// (RecordRoundFetch only; not for retries).
	Schedule *Schedule
}

// Schedule is what a fetch sets of a URL's refetch schedule (issue 23).
type Schedule struct {
	// NextFetch is when the URL is due again; zero: never.
	NextFetch time.Time
	// Interval is the interval that set NextFetch (the adaptive schedule's
	// state).
	Interval time.Duration
	// ETag and LastModified are the answer's validators, verbatim; a value
	// longer than MaxValidatorLen is not kept.
	ETag, LastModified string
	// Change is what the fetch found, for the URL's counters.
	Change Change
	// Watched is the URL's total time watched after this fetch
	// (URLRecord.Watched), computed by the caller; the store keeps it.
	Watched time.Duration
}

// Change is what a fetch of a URL found against its previous fetch.
type Change uint8

// The changes a Schedule reports.
const (
	ChangeNone      Change = iota // a first fetch: nothing to compare
	ChangeChanged                 // the content changed
	ChangeUnchanged               // the content did not change (a 304, or the same fingerprint)
	changeCount
)

// RecordFetch records a fetch result. A final status moves the URL's cash to
// its history.
func (b *Batch) RecordFetch(r FetchResult) {
	b.fetch(OpFetchResult, &r)
}

// RecordRoundFetch records a fetch of a URL generated in r.Round. It applies
// only while the URL is still generated in that round, so replaying it after
// a crash changes nothing. A final status moves r.Spend of the URL's cash
// (at most all of it) to its history; cash that arrived after generate stays.
// A retry returns the URL to the frontier with all its cash.
func (b *Batch) RecordRoundFetch(r FetchResult) {
	if !validCash(r.Spend) {
		b.fail(fmt.Errorf("%w: spend %v for %s", ErrBadOp, r.Spend, r.URL))
		return
	}
	t := OpRoundFetch
	if r.Schedule != nil && !r.Retry {
		sc := r.Schedule
		if sc.Interval < 0 || sc.Watched < 0 || sc.Change >= changeCount {
			b.fail(fmt.Errorf("%w: schedule %+v for %s", ErrBadOp, *sc, r.URL))
			return
		}
		t = OpRoundFetchSched
	}
	b.fetch(t, &r)
}

// MakeDue puts a fetched URL whose next fetch is at or before at back in
// the frontier for a refetch, with score as its frontier score. It applies
// only to a URL with StatusFetched, a schedule (Schedule.NextFetch) and
// that is not due yet; the URL keeps StatusFetched until generated.
func (b *Batch) MakeDue(url string, at time.Time, score float64) {
	if !validCash(score) || at.IsZero() {
		b.fail(fmt.Errorf("%w: due at %v with score %v for %s", ErrBadOp, at, score, url))
		return
	}
	b.op(OpMakeDue)
	b.url(url)
	b.buf = appendTime(b.buf, at)
	b.buf = binary.BigEndian.AppendUint64(b.buf, math.Float64bits(score))
}

// Park takes an unfetched URL out of the frontier for good: its host has
// used its page budget, and the crawl refetches its pages, so the host
// stays open for them; or its registrable domain has used its budget
// (--pld-budget), whose hosts are not closed (URLRecord.Parked). The URL keeps its record and
// its cash, which grows with its in-links as before. It applies only to
// an unfetched URL.
func (b *Batch) Park(url string) {
	b.op(OpPark)
	b.url(url)
}

// NearDup records that the page at url is a near-duplicate of the page
// at original (its SimHash within a few bits of the original's): a
// record of its own (Store.NearDupOf), beside the URL's.
func (b *Batch) NearDup(url, original string) {
	if _, ok := splitURL(url); !ok {
		b.fail(fmt.Errorf("%w: near-duplicate %.200q", ErrBadURL, url))
		return
	}
	if _, ok := splitURL(original); !ok {
		b.fail(fmt.Errorf("%w: original %.200q of near-duplicate %.200q", ErrBadURL, original, url))
		return
	}
	b.op(OpNearDup)
	b.buf = appendBytes(b.buf, []byte(url))
	b.buf = appendBytes(b.buf, []byte(original))
}

// Revisit records that spend of a fetched URL's cash was distributed over
// its stored outlinks without a new fetch (OPIC's visit, done from a link
// store): min(spend, cash) moves to its history. It applies only while the
// URL's status is StatusFetched.
func (b *Batch) Revisit(url string, spend float64) {
	if !validCash(spend) {
		b.fail(fmt.Errorf("%w: spend %v for %s", ErrBadOp, spend, url))
		return
	}
	b.op(OpRevisit)
	b.url(url)
	b.buf = binary.BigEndian.AppendUint64(b.buf, math.Float64bits(spend))
}

// fetch adds a fetch operation: the common fields, then for OpRoundFetch
// the round and the spent cash.
func (b *Batch) fetch(t OpType, r *FetchResult) {
	if !r.Retry && (r.Status < StatusFetched || r.Status >= statusCount) {
		b.fail(fmt.Errorf("%w: fetch status %v for %s", ErrBadOp, r.Status, r.URL))
		return
	}
	b.op(t)
	b.url(r.URL)
	st := r.Status
	if r.Retry {
		st = StatusUnfetched
	}
	b.buf = append(b.buf, byte(st))
	b.buf = binary.AppendUvarint(b.buf, uint64(r.HTTPStatus))
	b.buf = appendTime(b.buf, r.At)
	b.buf = binary.BigEndian.AppendUint64(b.buf, r.ContentFP)
	if t == OpRoundFetch || t == OpRoundFetchSched {
		b.buf = binary.AppendUvarint(b.buf, r.Round)
		b.buf = binary.BigEndian.AppendUint64(b.buf, math.Float64bits(r.Spend))
	}
	if t == OpRoundFetchSched {
		sc := r.Schedule
		b.buf = appendTime(b.buf, sc.NextFetch)
		b.buf = binary.AppendUvarint(b.buf, uint64(sc.Interval))
		b.buf = appendBytes(b.buf, []byte(validator(sc.ETag)))
		b.buf = appendBytes(b.buf, []byte(validator(sc.LastModified)))
		b.buf = append(b.buf, byte(sc.Change))
		b.buf = binary.AppendUvarint(b.buf, uint64(sc.Watched))
	}
}

// validator is v if it can be kept (at most MaxValidatorLen bytes), or "".
func validator(v string) string {
	if len(v) > MaxValidatorLen {
		return ""
	}
	return v
}

// PutHost replaces the record of host (a lower-case host name).
func (b *Batch) PutHost(host string, h HostRecord) {
	if _, ok := splitURL("http://" + host + "/"); !ok {
		b.fail(fmt.Errorf("%w: host %.200q", ErrBadOp, host))
		return
	}
	if len(h.Robots) > MaxRobotsBytes || len(h.IPs) > 64 {
		b.fail(fmt.Errorf("%w: host record for %s too large", ErrBadOp, host))
		return
	}
	b.op(OpPutHost)
	b.buf = appendBytes(b.buf, []byte(host))
	b.buf = appendBytes(b.buf, appendHost(nil, &h))
}

// SentCheckAdd asks the URL-sent cache whether fp is present, adding it if
// not; the cache keeps the newest capacity fingerprints.
func (b *Batch) SentCheckAdd(fp uint64, capacity uint64) {
	if capacity == 0 {
		b.fail(fmt.Errorf("%w: sent cache capacity 0", ErrBadOp))
		return
	}
	b.op(OpSentCheckAdd)
	b.buf = binary.BigEndian.AppendUint64(b.buf, fp)
	b.buf = binary.AppendUvarint(b.buf, capacity)
}

// OutboxEnqueue adds payload to the outbox of site; the result carries its sequence number.
func (b *Batch) OutboxEnqueue(site string, payload []byte) {
	if site == "" || len(site) > maxName || len(payload) > maxPayload || containsZero(site) {
		b.fail(fmt.Errorf("%w: outbox entry for site %.100q (%d bytes)", ErrBadOp, site, len(payload)))
		return
	}
	b.op(OpOutboxEnqueue)
	b.buf = appendBytes(b.buf, []byte(site))
	b.buf = appendBytes(b.buf, payload)
}

// OutboxAck removes entry seq from the outbox of site.
func (b *Batch) OutboxAck(site string, seq uint64) {
	if site == "" || len(site) > maxName || containsZero(site) {
		b.fail(fmt.Errorf("%w: outbox site %.100q", ErrBadOp, site))
		return
	}
	b.op(OpOutboxAck)
	b.buf = appendBytes(b.buf, []byte(site))
	b.buf = binary.AppendUvarint(b.buf, seq)
}

// PutRound replaces the round state, an opaque blob of the rounds package.
func (b *Batch) PutRound(state []byte) {
	if len(state) > maxRoundLen {
		b.fail(fmt.Errorf("%w: round state of %d bytes", ErrBadOp, len(state)))
		return
	}
	b.op(OpPutRound)
	b.buf = appendBytes(b.buf, state)
}

// PutDomain sets the coordinates of a domain.
func (b *Batch) PutDomain(domain string, lat, lon float64) {
	if domain == "" || len(domain) > maxName || !(lat >= -90 && lat <= 90) || !(lon >= -180 && lon <= 180) {
		b.fail(fmt.Errorf("%w: domain %.100q at %v,%v", ErrBadOp, domain, lat, lon))
		return
	}
	b.op(OpPutDomain)
	b.buf = appendBytes(b.buf, []byte(domain))
	b.buf = binary.BigEndian.AppendUint64(b.buf, math.Float64bits(lat))
	b.buf = binary.BigEndian.AppendUint64(b.buf, math.Float64bits(lon))
}

// PutUser sets key to value in the node layer's table (nil value deletes).
func (b *Batch) PutUser(key string, value []byte) {
	if key == "" || len(key) > maxName || len(value) > MaxUserValue {
		b.fail(fmt.Errorf("%w: user key %.100q (%d bytes)", ErrBadOp, key, len(value)))
		return
	}
	b.op(OpPutUser)
	b.buf = appendBytes(b.buf, []byte(key))
	b.buf = appendBytes(b.buf, value)
}

// Guard makes the whole command conditional: it applies only if the node
// layer's key holds value (an empty value: the key is absent) when the
// guard is reached, after the operations before it. Otherwise the command
// is rejected with ErrGuard and changes nothing. Leaders fence their writes
// with it, and nodes their staged results.
func (b *Batch) Guard(key string, value []byte) {
	if key == "" || len(key) > maxName || len(value) > maxPayload {
		b.fail(fmt.Errorf("%w: guard on user key %.100q", ErrBadOp, key))
		return
	}
	b.op(OpGuard)
	b.buf = appendBytes(b.buf, []byte(key))
	b.buf = appendBytes(b.buf, value)
}

// DeleteUserPrefix deletes every key of the node layer's table that starts
// with prefix (not empty).
func (b *Batch) DeleteUserPrefix(prefix string) {
	if prefix == "" || len(prefix) > maxName {
		b.fail(fmt.Errorf("%w: user prefix %.100q", ErrBadOp, prefix))
		return
	}
	b.op(OpDeleteUserPrefix)
	b.buf = appendBytes(b.buf, []byte(prefix))
}

func containsZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// Encode returns the command: magic, version, operation count, the
// operations and a CRC-32C of all that. The slice is valid until the batch
// is changed.
func (b *Batch) Encode() ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.n > MaxOps {
		return nil, fmt.Errorf("%w: %d operations (max %d)", ErrCommandTooLarge, b.n, MaxOps)
	}
	if len(b.buf)+16 > MaxCommandBytes {
		return nil, fmt.Errorf("%w: %d bytes (max %d)", ErrCommandTooLarge, len(b.buf)+16, MaxCommandBytes)
	}
	out := append(b.out[:0], cmdMagic, cmdVersion)
	out = binary.AppendUvarint(out, uint64(b.n))
	out = append(out, b.buf...)
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(out, crcTable))
	b.out = out
	return out, nil
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// op is one decoded operation; fields alias the command bytes.
type op struct {
	t       OpType
	url     urlParts
	rawURL  []byte
	cash    float64
	depth   uint32
	round   uint64
	status  Status
	http    uint16
	at      int64
	fp      uint64
	seq     uint64
	name    []byte
	payload []byte
	lat     float64
	lon     float64
	host    HostRecord
	sched   opSchedule // OpRoundFetchSched
	slot    *slot      // set by Apply: the URL's record in memory
}

// opSchedule is a decoded Schedule (its strings alias the command).
type opSchedule struct {
	next          int64 // ms; 0: never
	interval      uint64
	etag, lastMod []byte
	change        Change
	watched       uint64 // ns
}

// decodeCommand checks and decodes a whole command before anything is
// applied, so that a bad command changes nothing.
func decodeCommand(cmd []byte, ops []op) ([]op, error) {
	if len(cmd) > MaxCommandBytes {
		return ops, fmt.Errorf("%w: %d bytes (max %d)", ErrCommandTooLarge, len(cmd), MaxCommandBytes)
	}
	if len(cmd) < 7 || cmd[0] != cmdMagic || cmd[1] != cmdVersion {
		return ops, fmt.Errorf("%w: bad header", ErrCorruptCommand)
	}
	body, sum := cmd[:len(cmd)-4], binary.BigEndian.Uint32(cmd[len(cmd)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return ops, fmt.Errorf("%w: checksum mismatch", ErrCorruptCommand)
	}
	d := decoder{b: body[2:]}
	count := d.uvarint()
	if d.err != nil || count > MaxOps {
		return ops, fmt.Errorf("%w: bad operation count", ErrCorruptCommand)
	}
	base := len(ops) // ops may already hold earlier commands' operations
	for uint64(len(ops)-base) < count {
		if len(ops)-base >= MaxOps {
			return ops, fmt.Errorf("%w: more than %d operations", ErrCommandTooLarge, MaxOps)
		}
		var o op
		o.t = OpType(d.byte1())
		switch o.t {
		case OpUpsertCash, OpPutIfAbsent, OpHandOver:
			o.rawURL = d.bytes(MaxURLLen)
			o.cash = d.f64()
			o.depth = uint32(d.uvarint())
			if !validCash(o.cash) {
				return ops, fmt.Errorf("%w: op %d: cash %v", ErrCorruptCommand, len(ops)-base, o.cash)
			}
		case OpMarkGenerated:
			o.rawURL = d.bytes(MaxURLLen)
			o.round = d.uvarint()
		case OpRequeue:
			o.rawURL = d.bytes(MaxURLLen)
		case OpPark:
			o.rawURL = d.bytes(MaxURLLen)
		case OpMakeDue:
			o.rawURL = d.bytes(MaxURLLen)
			o.at = d.varint()
			o.cash = d.f64()
			if (!validCash(o.cash) || o.at == 0) && d.err == nil {
				return ops, fmt.Errorf("%w: op %d: due at %d with score %v", ErrCorruptCommand, len(ops)-base, o.at, o.cash)
			}
		case OpFetchedElsewhere:
			o.rawURL = d.bytes(MaxURLLen)
			o.status = Status(d.byte1())
			if (o.status < StatusFetched || o.status >= statusCount) && d.err == nil {
				return ops, fmt.Errorf("%w: op %d: fetched elsewhere with status %d", ErrCorruptCommand, len(ops)-base, o.status)
			}
		case OpRevisit:
			o.rawURL = d.bytes(MaxURLLen)
			o.cash = d.f64()
			if !validCash(o.cash) && d.err == nil {
				return ops, fmt.Errorf("%w: op %d: spend %v", ErrCorruptCommand, len(ops)-base, o.cash)
			}
		case OpFetchResult, OpRoundFetch, OpRoundFetchSched:
			o.rawURL = d.bytes(MaxURLLen)
			o.status = Status(d.byte1())
			o.http = uint16(d.uvarint())
			o.at = d.varint()
			o.fp = d.u64()
			if o.t != OpFetchResult {
				o.round = d.uvarint()
				o.cash = d.f64()
				if !validCash(o.cash) && d.err == nil {
					return ops, fmt.Errorf("%w: op %d: spend %v", ErrCorruptCommand, len(ops)-base, o.cash)
				}
			}
			if o.t == OpRoundFetchSched {
				sc := &o.sched
				sc.next = d.varint()
				sc.interval = d.uvarint()
				sc.etag = d.bytes(MaxValidatorLen)
				sc.lastMod = d.bytes(MaxValidatorLen)
				sc.change = Change(d.byte1())
				sc.watched = d.uvarint()
				if (sc.change >= changeCount || sc.interval > math.MaxInt64 || sc.watched > math.MaxInt64 || o.status == StatusUnfetched) && d.err == nil {
					return ops, fmt.Errorf("%w: op %d: schedule", ErrCorruptCommand, len(ops)-base)
				}
			}
			if o.status < StatusUnfetched || o.status >= statusCount || o.status == StatusGenerated {
				return ops, fmt.Errorf("%w: op %d: status %d", ErrCorruptCommand, len(ops)-base, o.status)
			}
		case OpPutHost:
			o.name = d.bytes(maxName)
			h, err := decodeHost(d.bytes(MaxRobotsBytes + 4096))
			if err != nil && d.err == nil {
				return ops, fmt.Errorf("%w: op %d: host record", ErrCorruptCommand, len(ops)-base)
			}
			o.host = h
			if _, ok := splitURL("http://" + string(o.name) + "/"); !ok && d.err == nil {
				return ops, fmt.Errorf("%w: op %d: host %.100q", ErrCorruptCommand, len(ops)-base, o.name)
			}
		case OpSentCheckAdd:
			o.fp = d.u64()
			o.seq = d.uvarint() // capacity
			if o.seq == 0 && d.err == nil {
				return ops, fmt.Errorf("%w: op %d: capacity 0", ErrCorruptCommand, len(ops)-base)
			}
		case OpOutboxEnqueue:
			o.name = d.bytes(maxName)
			o.payload = d.bytes(maxPayload)
			if len(o.name) == 0 || containsZero(string(o.name)) {
				return ops, fmt.Errorf("%w: op %d: outbox site", ErrCorruptCommand, len(ops)-base)
			}
		case OpOutboxAck:
			o.name = d.bytes(maxName)
			o.seq = d.uvarint()
			if len(o.name) == 0 || containsZero(string(o.name)) {
				return ops, fmt.Errorf("%w: op %d: outbox site", ErrCorruptCommand, len(ops)-base)
			}
		case OpPutRound:
			o.payload = d.bytes(maxRoundLen)
		case OpPutDomain:
			o.name = d.bytes(maxName)
			o.lat, o.lon = d.f64(), d.f64()
			if len(o.name) == 0 || !(o.lat >= -90 && o.lat <= 90) || !(o.lon >= -180 && o.lon <= 180) {
				return ops, fmt.Errorf("%w: op %d: domain", ErrCorruptCommand, len(ops)-base)
			}
		case OpPutUser:
			o.name = d.bytes(maxName)
			o.payload = d.bytes(MaxUserValue)
			if len(o.name) == 0 && d.err == nil {
				return ops, fmt.Errorf("%w: op %d: user key", ErrCorruptCommand, len(ops)-base)
			}
		case OpGuard:
			o.name = d.bytes(maxName)
			o.payload = d.bytes(maxPayload)
			if len(o.name) == 0 && d.err == nil {
				return ops, fmt.Errorf("%w: op %d: guard key", ErrCorruptCommand, len(ops)-base)
			}
		case OpDeleteUserPrefix:
			o.name = d.bytes(maxName)
			if len(o.name) == 0 && d.err == nil {
				return ops, fmt.Errorf("%w: op %d: user prefix", ErrCorruptCommand, len(ops)-base)
			}
		case OpNearDup:
			o.name, o.payload = d.bytes(MaxURLLen), d.bytes(MaxURLLen)
			if d.err == nil {
				if _, ok := splitURL(string(o.name)); !ok {
					return ops, fmt.Errorf("%w: op %d: near-duplicate %.200q", ErrBadURL, len(ops)-base, o.name)
				}
				if _, ok := splitURL(string(o.payload)); !ok {
					return ops, fmt.Errorf("%w: op %d: original %.200q", ErrBadURL, len(ops)-base, o.payload)
				}
			}
		case OpDirectives:
			o.name, o.payload = d.bytes(MaxURLLen), d.bytes(1+MaxURLLen)
			if d.err == nil {
				if _, ok := splitURL(string(o.name)); !ok {
					return ops, fmt.Errorf("%w: op %d: directives of %.200q", ErrBadURL, len(ops)-base, o.name)
				}
				if _, ok := decodeDirectives(o.payload); !ok && len(o.payload) > 0 {
					return ops, fmt.Errorf("%w: op %d: directives %q of %.200q", ErrCorruptCommand, len(ops)-base, o.payload, o.name)
				}
			}
		default:
			return ops, fmt.Errorf("%w: op %d: unknown type %d", ErrCorruptCommand, len(ops)-base, o.t)
		}
		if d.err != nil {
			return ops, fmt.Errorf("%w: op %d: %w", ErrCorruptCommand, len(ops)-base, d.err)
		}
		if o.rawURL != nil {
			// The parts alias the command's bytes, which outlive the
			// operation: no copy of every URL on the hot path.
			p, ok := splitURL(unsafe.String(unsafe.SliceData(o.rawURL), len(o.rawURL)))
			if !ok {
				return ops, fmt.Errorf("%w: op %d: url %.200q", ErrBadURL, len(ops)-base, o.rawURL)
			}
			o.url = p
		}
		ops = append(ops, o)
	}
	if len(d.b) != 0 {
		return ops, fmt.Errorf("%w: %d bytes after the last operation", ErrCorruptCommand, len(d.b))
	}
	return ops, nil
}

// CheckCommand decodes cmd without applying it: a leader refuses a bad
// command before it reaches the log.
func CheckCommand(cmd []byte) error {
	_, err := decodeCommand(cmd, nil)
	return err
}

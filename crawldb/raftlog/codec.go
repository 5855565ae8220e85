package raftlog

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Key layout.
const (
	prefixLog    = 'l'
	prefixStable = 's'
	logKeyLen    = 1 + 8
)

var (
	logLower = [1]byte{prefixLog}     // inclusive lower bound of all log keys
	logUpper = [1]byte{prefixLog + 1} // exclusive upper bound of all log keys
)

// putLogKey writes the key of log index idx into k.
func putLogKey(k *[logKeyLen]byte, idx uint64) {
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], idx)
}

// parseLogKey returns the index encoded in a log key.
func parseLogKey(k []byte) (uint64, error) {
	if len(k) != logKeyLen || k[0] != prefixLog {
		return 0, fmt.Errorf("%w: malformed log key %x", ErrCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

// stableKey returns 's' + key.
func stableKey(key []byte) []byte {
	k := make([]byte, 1+len(key))
	k[0] = prefixStable
	copy(k[1:], key)
	return k
}

// Log value encoding, version 1:
//
//	byte    version (1)
//	uvarint Index
//	uvarint Term
//	byte    Type
//	byte    flags (flagData: Data non-nil, flagExt: Extensions non-nil,
//	        flagTime: AppendedAt non-zero)
//	uvarint len(Data), Data bytes
//	uvarint len(Extensions), Extensions bytes
//	if flagTime: varint Unix seconds, uvarint nanoseconds (< 1e9)
//
// The value carries its own Index so that a value found under the wrong key
// is detected. Pebble checksums blocks and WAL records, so no CRC here.
const (
	codecVersion = 1

	flagData  = 1 << 0
	flagExt   = 1 << 1
	flagTime  = 1 << 2
	flagsMask = flagData | flagExt | flagTime
)

// uvarintLen is the encoded size of x as a uvarint.
func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// varintLen is the encoded size of x as a zig-zag varint.
func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}

// encodedLen returns the exact size appendLog will produce for l.
func encodedLen(l *raft.Log) int {
	n := 1 + uvarintLen(l.Index) + uvarintLen(l.Term) + 1 + 1 +
		uvarintLen(uint64(len(l.Data))) + len(l.Data) +
		uvarintLen(uint64(len(l.Extensions))) + len(l.Extensions)
	if !l.AppendedAt.IsZero() {
		n += varintLen(l.AppendedAt.Unix()) + uvarintLen(uint64(l.AppendedAt.Nanosecond()))
	}
	return n
}

// appendLog appends the encoding of l to dst.
func appendLog(dst []byte, l *raft.Log) []byte {
	var flags byte
	if l.Data != nil {
		flags |= flagData
	}
	if l.Extensions != nil {
		flags |= flagExt
	}
	if !l.AppendedAt.IsZero() {
		flags |= flagTime
	}
	dst = append(dst, codecVersion)
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = append(dst, byte(l.Type), flags)
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	if flags&flagTime != 0 {
		dst = binary.AppendVarint(dst, l.AppendedAt.Unix())
		dst = binary.AppendUvarint(dst, uint64(l.AppendedAt.Nanosecond()))
	}
	return dst
}

// decoder reads a log value; the first failure sticks in err.
type decoder struct {
	b   []byte
	err string
}

func (d *decoder) byte(what string) byte {
	if d.err != "" {
		return 0
	}
	if len(d.b) == 0 {
		d.err = "truncated " + what
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != "" {
		return 0
	}
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = "bad varint for " + what
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decoder) varint(what string) int64 {
	if d.err != "" {
		return 0
	}
	x, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = "bad varint for " + what
		return 0
	}
	d.b = d.b[n:]
	return x
}

// bytes returns a length-prefixed field without copying.
func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != "" {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Sprintf("%s length %d exceeds remaining %d bytes", what, n, len(d.b))
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

// decodeLog decodes v, the value stored under log index idx, into l. It
// copies Data and Extensions (v may be Pebble-owned memory) and never panics;
// errors wrap ErrCorrupt and name idx.
func decodeLog(idx uint64, v []byte, l *raft.Log) error {
	d := decoder{b: v}
	if ver := d.byte("version"); d.err == "" && ver != codecVersion {
		d.err = fmt.Sprintf("unsupported encoding version %d", ver)
	}
	index := d.uvarint("index")
	term := d.uvarint("term")
	typ := d.byte("type")
	flags := d.byte("flags")
	if d.err == "" && flags&^flagsMask != 0 {
		d.err = fmt.Sprintf("unknown flags %#x", flags)
	}
	data := d.bytes("data")
	ext := d.bytes("extensions")
	var at time.Time
	if flags&flagTime != 0 {
		sec := d.varint("appended-at seconds")
		nsec := d.uvarint("appended-at nanoseconds")
		if d.err == "" && nsec >= uint64(time.Second) {
			d.err = fmt.Sprintf("appended-at nanoseconds %d out of range", nsec)
		}
		at = time.Unix(sec, int64(nsec))
	}
	switch {
	case d.err != "":
	case len(d.b) != 0:
		d.err = fmt.Sprintf("%d trailing bytes", len(d.b))
	case index != idx:
		d.err = fmt.Sprintf("value holds index %d", index)
	case flags&flagData == 0 && len(data) != 0, flags&flagExt == 0 && len(ext) != 0:
		d.err = "payload present but flagged nil"
	}
	if d.err != "" {
		return fmt.Errorf("%w: log index %d: %s", ErrCorrupt, idx, d.err)
	}

	// One allocation for both byte fields; full slice expressions keep an
	// append to Data from overwriting Extensions.
	var buf []byte
	if flags&(flagData|flagExt) != 0 {
		buf = make([]byte, len(data)+len(ext))
		copy(buf, data)
		copy(buf[len(data):], ext)
	}
	*l = raft.Log{Index: index, Term: term, Type: raft.LogType(typ), AppendedAt: at}
	if flags&flagData != 0 {
		l.Data = buf[:len(data):len(data)]
	}
	if flags&flagExt != 0 {
		l.Extensions = buf[len(data):]
	}
	return nil
}

// encodeUint64 and decodeUint64 are the SetUint64/GetUint64 value format.
func encodeUint64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeUint64(key, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable key %q: uint64 value has %d bytes", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

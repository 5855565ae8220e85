package federation

// Framed batches: what the outbox delivery sends. Route writes each outbox
// entry in its wire encoding (Batch.Append: From and To set, Seq and First
// 0); a delivery frames several stored entries under one header without
// decoding them, and the receiver decodes the frame as the one batch its
// entries make.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Fixed sizes of a frame.
const (
	// minEntryLen is the shortest encoded batch: version, from and to
	// (one byte each at least), seq, first, virtual, two counts, crc.
	minEntryLen = 1 + 1 + 1 + 1 + 1 + 8 + 1 + 1 + trailerLen
)

// AppendFrame appends to dst a framed batch from site from to site to,
// covering the sender's entries first..seq, whose entries are encoded
// batches (Batch.Append) From from, To to, with Seq and First 0:
//
//	version        byte (VersionFrames)
//	from, to       uvarint length, bytes
//	seq, first     uvarint each
//	entries        uvarint count (≥ 1), then per entry: uvarint length,
//	                 bytes (an encoded batch, its own CRC included)
//	crc            CRC-32C (Castagnoli) of all the above, 4 bytes little-endian
//
// The frame means the batch whose Puts and Fetched are its entries' in
// order, whose Hosts are its entries' (each host once, the first
// location given) and whose Virtual is the sum of theirs. AppendFrame does
// not look inside the entries; Decode checks them.
func AppendFrame(dst []byte, from, to string, seq, first uint64, entries [][]byte) []byte {
	start := len(dst)
	dst = append(dst, VersionFrames)
	dst = appendString(dst, from)
	dst = appendString(dst, to)
	dst = binary.AppendUvarint(dst, seq)
	dst = binary.AppendUvarint(dst, first)
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	for _, e := range entries {
		dst = binary.AppendUvarint(dst, uint64(len(e)))
		dst = append(dst, e...)
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// frameHeader reads a frame's header (and checks its checksum): whom it
// is from and for, and the entries it covers.
func frameHeader(p []byte) (from, to string, seq, first uint64, err error) {
	d, err := openFrame(p, DefaultMaxBytes)
	if err != nil {
		return "", "", 0, 0, err
	}
	from = d.str("from", MaxHostLen)
	to = d.str("to", MaxHostLen)
	seq = d.uvarint("seq")
	first = d.uvarint("first")
	if d.err != nil {
		return "", "", 0, 0, fmt.Errorf("federation: frame: %w", d.err)
	}
	return from, to, seq, first, nil
}

// openFrame checks a frame's length, version and checksum and returns a
// decoder positioned after its version byte.
func openFrame(p []byte, maxBytes int) (*decoder, error) {
	if len(p) > maxBytes {
		return nil, fmt.Errorf("federation: frame: %w: %d bytes, limit %d", ErrTooLarge, len(p), maxBytes)
	}
	if len(p) < 1+trailerLen || p[0] != VersionFrames {
		return nil, fmt.Errorf("federation: frame: %w: not a framed batch (%d bytes)", ErrMalformed, len(p))
	}
	body := p[:len(p)-trailerLen]
	want := binary.LittleEndian.Uint32(p[len(body):])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("federation: frame: %w: checksum %08x, trailer says %08x (corrupted or truncated)", ErrMalformed, got, want)
	}
	return &decoder{s: string(body), off: 1, at: -1}, nil
}

// decodeFrames decodes and validates a framed batch (see AppendFrame) into
// the one batch its entries make.
func decodeFrames(p []byte, lim Limits) (*Batch, error) {
	d, err := openFrame(p, lim.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("federation: decode: %w", err)
	}
	b := &Batch{}
	b.From = d.str("from", MaxHostLen)
	b.To = d.str("to", MaxHostLen)
	b.Seq = d.uvarint("seq")
	b.First = d.uvarint("first")
	n := d.count("entries", lim.MaxPuts, minEntryLen+1)
	if n == 0 && d.err == nil {
		d.fail(ErrMalformed, "entries", "a frame with no entries")
	}
	if d.err != nil {
		return nil, fmt.Errorf("federation: decode: %w", d.err)
	}
	seen := map[string]bool{}
	for i := range n {
		size := d.uvarint(fmt.Sprintf("entry %d length", i))
		if d.err == nil && size > uint64(len(d.s)-d.off) {
			d.fail(ErrMalformed, fmt.Sprintf("entry %d", i), "truncated: length %d, %d bytes left", size, len(d.s)-d.off)
		}
		if d.err != nil {
			return nil, fmt.Errorf("federation: decode: %w", d.err)
		}
		e, err := decode(p[d.off:d.off+int(size)], lim) // d.s is p's body: the offsets agree
		if err != nil {
			return nil, fmt.Errorf("federation: decode: entry %d at offset %d: %w", i, d.off, err)
		}
		d.off += int(size)
		if e.From != b.From || e.To != b.To || e.Seq != 0 || e.First != 0 {
			return nil, fmt.Errorf("federation: decode: %w: entry %d is from %q to %q, seq %d, first %d; the frame is from %q to %q (entries carry seq and first 0)",
				ErrMalformed, i, e.From, e.To, e.Seq, e.First, b.From, b.To)
		}
		b.Virtual += e.Virtual
		b.Puts = append(b.Puts, e.Puts...)
		b.Fetched = append(b.Fetched, e.Fetched...)
		b.ends = append(b.ends, entryEnd{puts: len(b.Puts), fetched: len(b.Fetched), virtual: e.Virtual})
		for _, h := range e.Hosts {
			if !seen[h.Host] {
				seen[h.Host] = true
				b.Hosts = append(b.Hosts, h)
			}
		}
		if len(b.Puts) > lim.MaxPuts || len(b.Fetched) > lim.MaxPuts {
			return nil, fmt.Errorf("federation: decode: %w: over %d puts or fetched records by entry %d", ErrTooLarge, lim.MaxPuts, i)
		}
	}
	if d.off != len(d.s) {
		return nil, fmt.Errorf("federation: decode: %w: %d trailing bytes after the last entry at offset %d", ErrMalformed, len(d.s)-d.off, d.off)
	}
	if err := b.Validate(lim); err != nil {
		return nil, fmt.Errorf("federation: decode: %w", err)
	}
	return b, nil
}

// entryCount returns how many puts and fetched-elsewhere records an
// encoded outbox entry holds, reading only its header (the fetched records
// are bounded, not counted: maxPutsPerEntry), and its puts' count.
func entryCount(p []byte) (records, puts int, err error) {
	if len(p) < 1+trailerLen || (p[0] != Version && p[0] != VersionFetched) {
		return 0, 0, fmt.Errorf("federation: outbox entry of %d bytes: %w: not an encoded batch", len(p), ErrMalformed)
	}
	d := decoder{s: string(p[:min(len(p)-trailerLen, 2*MaxHostLen+64)]), off: 1, at: -1}
	d.str("from", MaxHostLen)
	d.str("to", MaxHostLen)
	d.uvarint("seq")
	d.uvarint("first")
	d.float("virtual")
	n := d.uvarint("puts count")
	if d.err != nil {
		return 0, 0, fmt.Errorf("federation: outbox entry: %w", d.err)
	}
	records = int(n)
	if p[0] == VersionFetched {
		records += maxPutsPerEntry
	}
	return records, int(n), nil
}

package crawldb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// errFrameRefused: a peer sent the Raft port something that is not a
// Raft RPC frame within frameLimits; the connection is closed.
var errFrameRefused = errors.New("crawldb: raft: frame refused")

// Why the Raft port needs a frame guard.
//
// hashicorp/raft's NetworkTransport frames each RPC as one byte (its type)
// and one msgpack value (the request), which it decodes with go-msgpack's
// codec straight from the connection; an InstallSnapshot request is followed
// by Size bytes of snapshot, which raft streams to disk. The codec does not
// trust a declared length for its first allocation (go-msgpack v2's
// MaxInitLen: at most about 256 KiB, then growth as the bytes arrive), and
// it bounds nesting (1024) and turns its panics into errors. But it trusts
// declared lengths in every other way:
//
//   - a string or byte string that declares 2^31 bytes is read to the end:
//     the decoder waits for the bytes for as long as the peer likes (the
//     transport sets no deadline on an accepted connection), and if they come
//     it grows its buffer 256 KiB at a time, copying what it holds at every
//     step: memory up to the declared size and time quadratic in it;
//   - an array that declares 2^31 elements (AppendEntries' Entries) is
//     likewise read element after element, holding the connection and
//     growing the slice as long as the peer sends.
//
// A peer that completed a mutual-TLS handshake is one of the site's nodes,
// but a node with a bug, or a compromised one, must not be able to take
// another's memory or hold its connections forever. frameGuard follows the
// msgpack structure of the bytes a peer sends (it reads token headers and
// skips payloads, it allocates nothing) and refuses, before raft's decoder
// sees them, frames that are not Raft RPCs or that declare more than any
// RPC of this package can hold: an unknown RPC type, a string, byte string
// or extension larger than a command (store.MaxCommandBytes, plus slack for
// Raft's own entries), a container of more than 65,536 elements (Raft sends
// at most maxAppendEntries entries), nesting deeper than 16 (Raft's RPCs
// nest 3 deep), or a frame larger than maxAppendEntries commands. It also
// tells raftConn when a frame is under way, so that each read in the middle
// of one has a deadline (stallTimeout) while an idle pooled connection,
// between frames, may wait. A snapshot's body passes unchecked (raft
// streams it to disk and checks its size itself); since raft never
// sends anything after a snapshot on its connection, the guard refuses any
// byte that follows one, and any byte after the node answered it (raft
// answers a refused snapshot without reading its body).
type frameGuard struct {
	lim   frameLimits
	state guardState
	rpc   byte  // the current frame's RPC type
	n     int64 // bytes of the current frame so far
	done  int64 // frames completed

	hdr  [9]byte // the token header being read
	have int     // bytes of hdr held
	need int     // bytes the header has, once its first byte is known

	left  int64     // payload bytes (or snapshot body bytes) left
	stack [16]int64 // items left in each open container (a map counts keys and values)
	depth int

	// An InstallSnapshot's Size, found in its top-level map.
	key     [8]byte // a top-level key being read (keys up to 8 bytes)
	keyLen  int
	keyLong bool // the key is longer than key: not "Size"
	capture bool // the payload being skipped is a top-level key
	sizeVal bool // the next top-level value is Size's
	size    int64
}

// frameLimits bound what one frame may declare.
type frameLimits struct {
	field int64 // bytes of a string, byte string or extension
	items int64 // elements of an array or entries of a map
	frame int64 // bytes of a frame (a snapshot's body excluded)
	depth int   // containers open at once (at most len(frameGuard.stack))
}

// maxAppendEntries is Raft's MaxAppendEntries: the most entries one
// AppendEntries carries.
const maxAppendEntries = 256

func defaultFrameLimits() frameLimits {
	field := int64(store.MaxCommandBytes + 1<<20)
	return frameLimits{field: field, items: 1 << 16, frame: maxAppendEntries * (field + 4096), depth: 16}
}

type guardState uint8

const (
	gType    guardState = iota // the next byte starts a frame: its RPC type
	gToken                     // in a frame's value, reading a token header
	gPayload                   // skipping the bytes of a string, byte string or extension
	gBody                      // in a snapshot's body
	gAfter                     // a snapshot is over: nothing may follow
)

// Raft's RPC types (hashicorp/raft net_transport.go).
const (
	rpcAppendEntries byte = iota
	rpcRequestVote
	rpcInstallSnapshot
	rpcTimeoutNow
	rpcRequestPreVote
)

var rpcNames = [...]string{"AppendEntries", "RequestVote", "InstallSnapshot", "TimeoutNow", "RequestPreVote"}

func newFrameGuard(lim frameLimits) frameGuard { return frameGuard{lim: lim} }

// midFrame reports whether a frame (or a snapshot's body) is under way.
func (g *frameGuard) midFrame() bool {
	return g.state == gToken || g.state == gPayload || g.state == gBody
}

// describe names what the guard is in the middle of, for messages.
func (g *frameGuard) describe() string {
	switch g.state {
	case gBody:
		return fmt.Sprintf("a snapshot's body (%d bytes to come)", g.left)
	case gToken, gPayload:
		return fmt.Sprintf("a frame of %s (%d bytes so far)", rpcNames[g.rpc], g.n)
	}
	return "no frame"
}

// answered tells the guard the node wrote to the peer: its answer to the
// frame it decoded last.
func (g *frameGuard) answered() {
	if g.state == gBody {
		g.state, g.left = gAfter, 0
	}
}

func (g *frameGuard) refuse(format string, args ...any) error {
	what := "frame"
	if g.state != gType && int(g.rpc) < len(rpcNames) {
		what = rpcNames[g.rpc]
	}
	return fmt.Errorf("%w: %s: %s", errFrameRefused, what, fmt.Sprintf(format, args...))
}

// scan follows p, the next bytes from the peer. After an error the guard
// is not to be used again.
func (g *frameGuard) scan(p []byte) error {
	for len(p) > 0 {
		switch g.state {
		case gAfter:
			return fmt.Errorf("%w: data after a snapshot (nothing follows a snapshot on its connection)", errFrameRefused)
		case gBody:
			k := min(int64(len(p)), g.left)
			g.left -= k
			p = p[k:]
			if g.left == 0 {
				g.state = gAfter
			}
		case gType:
			g.rpc = p[0]
			if int(g.rpc) >= len(rpcNames) {
				return fmt.Errorf("%w: unknown RPC type 0x%02x: not a Raft frame", errFrameRefused, g.rpc)
			}
			p = p[1:]
			g.n, g.state, g.have, g.depth = 1, gToken, 0, 0
			g.keyLen, g.keyLong, g.capture, g.sizeVal, g.size = 0, false, false, false, 0
		case gPayload:
			k := min(int64(len(p)), g.left)
			if g.capture {
				for _, b := range p[:k] {
					if g.keyLen < len(g.key) {
						g.key[g.keyLen] = b
						g.keyLen++
					} else {
						g.keyLong = true
					}
				}
			}
			if err := g.count(k); err != nil {
				return err
			}
			g.left -= k
			p = p[k:]
			if g.left == 0 {
				g.state = gToken
				if err := g.valueDone(); err != nil {
					return err
				}
			}
		case gToken:
			b := p[0]
			p = p[1:]
			if err := g.count(1); err != nil {
				return err
			}
			if g.have == 0 {
				need, ok := headerLen(b)
				if !ok {
					return g.refuse("byte 0x%02x is not msgpack", b)
				}
				g.need = need
			}
			g.hdr[g.have] = b
			g.have++
			if g.have == g.need {
				g.have = 0
				if err := g.token(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// count adds k bytes to the current frame.
func (g *frameGuard) count(k int64) error {
	g.n += k
	if g.n > g.lim.frame {
		return g.refuse("larger than %d bytes", g.lim.frame)
	}
	return nil
}

// headerLen is the length of the header of a msgpack token that starts with
// b, the type byte included; ok is false for the one byte msgpack never uses.
func headerLen(b byte) (n int, ok bool) {
	switch {
	case b <= 0xbf || b >= 0xe0: // fixint, fixmap, fixarray, fixstr, negative fixint
		return 1, true
	case b == 0xc1:
		return 0, false
	case b == 0xc0 || b == 0xc2 || b == 0xc3: // nil, false, true
		return 1, true
	case b >= 0xd4 && b <= 0xd8: // fixext: its type
		return 2, true
	}
	return [...]int{
		0xc4 - 0xc4: 2, 0xc5 - 0xc4: 3, 0xc6 - 0xc4: 5, // bin 8, 16, 32
		0xc7 - 0xc4: 3, 0xc8 - 0xc4: 4, 0xc9 - 0xc4: 6, // ext 8, 16, 32: length and type
		0xca - 0xc4: 5, 0xcb - 0xc4: 9, // float 32, 64
		0xcc - 0xc4: 2, 0xcd - 0xc4: 3, 0xce - 0xc4: 5, 0xcf - 0xc4: 9, // uint 8…64
		0xd0 - 0xc4: 2, 0xd1 - 0xc4: 3, 0xd2 - 0xc4: 5, 0xd3 - 0xc4: 9, // int 8…64
		0xd9 - 0xc4: 2, 0xda - 0xc4: 3, 0xdb - 0xc4: 5, // str 8, 16, 32
		0xdc - 0xc4: 3, 0xdd - 0xc4: 5, // array 16, 32
		0xde - 0xc4: 3, 0xdf - 0xc4: 5, // map 16, 32
	}[b-0xc4], true
}

// token handles a complete token header in g.hdr.
func (g *frameGuard) token() error {
	b := g.hdr[0]
	topKey := g.snapshotTop() && g.stack[0]%2 == 0 // the token is a key of the request's map
	topSize := g.snapshotTop() && g.sizeVal        // the token is Size's value
	if g.snapshotTop() {
		g.sizeVal = false
	}
	if g.depth == 0 && g.rpc == rpcInstallSnapshot && !(b >= 0x80 && b <= 0x8f || b == 0xde || b == 0xdf) {
		return g.refuse("the request is not a map (msgpack type 0x%02x)", b)
	}
	if topKey {
		g.keyLen, g.keyLong = 0, true // not "Size", unless a string says so
	}
	var payload, items int64 = -1, -1 // a string's bytes; a container's elements
	isMap := false
	switch {
	case b <= 0x7f, b >= 0xe0, b >= 0xcc && b <= 0xd3: // integers
		if topSize {
			v, ok := intValue(g.hdr[:headerLenOf(b)])
			if !ok || v < 0 {
				return g.refuse("Size is %s, not a byte count", describeInt(g.hdr[:headerLenOf(b)]))
			}
			g.size = v
		}
		return g.valueDone()
	case b >= 0x80 && b <= 0x8f:
		items, isMap = int64(b&0x0f), true
	case b >= 0x90 && b <= 0x9f:
		items = int64(b & 0x0f)
	case b >= 0xa0 && b <= 0xbf:
		payload = int64(b & 0x1f)
	case b == 0xc4, b == 0xd9:
		payload = int64(g.hdr[1])
	case b == 0xc5, b == 0xda:
		payload = int64(binary.BigEndian.Uint16(g.hdr[1:]))
	case b == 0xc6, b == 0xdb:
		payload = int64(binary.BigEndian.Uint32(g.hdr[1:]))
	case b == 0xc7:
		payload = int64(g.hdr[1])
	case b == 0xc8:
		payload = int64(binary.BigEndian.Uint16(g.hdr[1:]))
	case b == 0xc9:
		payload = int64(binary.BigEndian.Uint32(g.hdr[1:]))
	case b >= 0xd4 && b <= 0xd8:
		payload = 1 << (b - 0xd4)
	case b == 0xdc:
		items = int64(binary.BigEndian.Uint16(g.hdr[1:]))
	case b == 0xdd:
		items = int64(binary.BigEndian.Uint32(g.hdr[1:]))
	case b == 0xde:
		items, isMap = int64(binary.BigEndian.Uint16(g.hdr[1:])), true
	case b == 0xdf:
		items, isMap = int64(binary.BigEndian.Uint32(g.hdr[1:])), true
	}
	if topSize {
		return g.refuse("Size is not an integer (msgpack type 0x%02x)", b)
	}
	switch {
	case payload >= 0:
		if payload > g.lim.field {
			return g.refuse("a string of %d bytes (at most %d)", payload, g.lim.field)
		}
		if topKey {
			g.keyLong, g.capture = false, true
		}
		if payload == 0 {
			return g.valueDone()
		}
		g.state, g.left = gPayload, payload
		return nil
	case items >= 0:
		if items > g.lim.items {
			return g.refuse("a container of %d elements (at most %d)", items, g.lim.items)
		}
		if items == 0 {
			return g.valueDone()
		}
		if g.depth >= g.lim.depth || g.depth >= len(g.stack) {
			return g.refuse("nested deeper than %d", g.lim.depth)
		}
		if isMap {
			items *= 2
		}
		g.stack[g.depth] = items
		g.depth++
		return nil
	}
	return g.valueDone() // nil, booleans, floats
}

// snapshotTop reports whether the guard is directly in an InstallSnapshot
// request's map.
func (g *frameGuard) snapshotTop() bool { return g.rpc == rpcInstallSnapshot && g.depth == 1 }

// valueDone ends a value: it counts it in the containers it closes, and
// ends the frame when it was the request.
func (g *frameGuard) valueDone() error {
	if g.snapshotTop() && g.stack[0]%2 == 0 { // a key of the request's map
		g.sizeVal = !g.keyLong && string(g.key[:g.keyLen]) == "Size"
	}
	g.capture = false
	for g.depth > 0 {
		g.stack[g.depth-1]--
		if g.stack[g.depth-1] > 0 {
			return nil
		}
		g.depth--
	}
	// The request is complete.
	g.done++
	if g.rpc == rpcInstallSnapshot {
		g.state, g.left = gBody, g.size
		if g.size == 0 {
			g.state = gAfter
		}
		return nil
	}
	g.state = gType
	return nil
}

// headerLenOf is headerLen for a byte known to be valid.
func headerLenOf(b byte) int {
	n, _ := headerLen(b)
	return n
}

// intValue decodes a msgpack integer token.
func intValue(h []byte) (int64, bool) {
	b := h[0]
	switch {
	case b <= 0x7f:
		return int64(b), true
	case b >= 0xe0:
		return int64(int8(b)), true
	case b == 0xcc:
		return int64(h[1]), true
	case b == 0xcd:
		return int64(binary.BigEndian.Uint16(h[1:])), true
	case b == 0xce:
		return int64(binary.BigEndian.Uint32(h[1:])), true
	case b == 0xcf:
		v := binary.BigEndian.Uint64(h[1:])
		return int64(v), v <= math.MaxInt64
	case b == 0xd0:
		return int64(int8(h[1])), true
	case b == 0xd1:
		return int64(int16(binary.BigEndian.Uint16(h[1:]))), true
	case b == 0xd2:
		return int64(int32(binary.BigEndian.Uint32(h[1:]))), true
	case b == 0xd3:
		return int64(binary.BigEndian.Uint64(h[1:])), true
	}
	return 0, false
}

func describeInt(h []byte) string {
	if v, ok := intValue(h); ok {
		return fmt.Sprint(v)
	}
	return fmt.Sprint(binary.BigEndian.Uint64(h[1:]))
}

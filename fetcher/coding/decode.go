package coding

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// ZstdMaxWindow is the largest zstd window (history) decoded: RFC 9659
// (zstd in HTTP) forbids encoders a larger one, so a frame asking for more
// is refused, and a zstd decoder never holds more than about this much.
const ZstdMaxWindow = 8 << 20

// maxIdleReads bounds the reads in a row that return nothing and no error
// before a decompressor is deemed stuck (io.ErrNoProgress).
const maxIdleReads = 100

// Decoder decodes bodies by their content codings. The zero Decoder is
// ready for use. A Decoder is used by one goroutine at a time; a worker
// keeps one for its life.
type Decoder struct {
	src  bytes.Reader             // the encoded body
	held [MaxCodings]decompressor // borrowed for the body being decoded
	one  [1]byte                  // the byte read past the limit
	_    [0]func()                // not comparable
}

// decompressor is the decompressor of one coding of a chain.
type decompressor struct {
	gz *gzip.Reader
	br *brotli.Reader
	zs *zstd.Decoder
}

// Decode appends to dst the body src decoded by l, the last coding applied
// being undone first, at most limit bytes, and returns the extended
// buffer. cut reports that the decoded body goes on past limit (it is not
// decoded further: a bomb costs limit bytes and the time to decode them).
// err says why the decoding stopped early: src is corrupt, or ends before
// its codings do (io.ErrUnexpectedEOF, as a body cut short does); the
// buffer then holds what was decoded before. Gzip decodes the first gzip
// member and ignores what follows it, as browsers do (Chromium's gzip
// stream stops at the first member's trailer); a zstd body may hold
// several frames. An empty src decodes to nothing, whatever l says (a body
// a server sent none of); with an empty l, src is appended as it is.
func (d *Decoder) Decode(dst, src []byte, l List, limit int64) (out []byte, cut bool, err error) {
	if l.n == 0 || len(src) == 0 {
		n := min(int64(len(src)), max(limit, 0))
		return append(dst, src[:n]...), int64(len(src)) > n, nil
	}
	defer d.release()
	d.src.Reset(src)
	var r io.Reader = &d.src
	for i := int(l.n) - 1; i >= 0; i-- {
		if r, err = d.open(i, l.c[i], r); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // not even a header
			}
			return dst, false, fmt.Errorf("coding: %s: %w", l.c[i], err)
		}
	}
	out, cut, err = d.read(dst, r, limit)
	if err != nil {
		err = fmt.Errorf("coding: %s: %w", l, err)
	}
	return out, cut, err
}

// read appends what r gives to dst, at most limit bytes, then reads one
// byte more to tell whether there was more (cut).
func (d *Decoder) read(dst []byte, r io.Reader, limit int64) ([]byte, bool, error) {
	start, idle := len(dst), 0
	for {
		room := limit - int64(len(dst)-start)
		if room <= 0 {
			n, err := io.ReadFull(r, d.one[:])
			switch {
			case n > 0:
				return dst, true, nil
			case errors.Is(err, io.EOF):
				return dst, false, nil
			}
			return dst, false, err
		}
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)] // grow
		}
		free := dst[len(dst):cap(dst)]
		if int64(len(free)) > room {
			free = free[:room]
		}
		n, err := r.Read(free)
		dst = dst[:len(dst)+n]
		switch {
		case errors.Is(err, io.EOF):
			return dst, false, nil
		case err != nil:
			return dst, false, err
		case n > 0:
			idle = 0
		default:
			if idle++; idle >= maxIdleReads {
				return dst, false, io.ErrNoProgress
			}
		}
	}
}

// open sets up the decompressor of coding c at position i of the chain,
// reading r.
func (d *Decoder) open(i int, c Coding, r io.Reader) (io.Reader, error) {
	h := &d.held[i]
	switch c {
	case Gzip:
		h.gz = gzips.get()
		if h.gz == nil {
			h.gz = new(gzip.Reader)
		}
		if err := h.gz.Reset(r); err != nil {
			return nil, err
		}
		h.gz.Multistream(false)
		return h.gz, nil
	case Brotli:
		h.br = brotlis.get()
		if h.br == nil {
			h.br = brotli.NewReader(r)
		} else {
			h.br.Reset(r) // never fails
		}
		return h.br, nil
	case Zstd:
		h.zs = zstds.get()
		if h.zs == nil {
			z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(ZstdMaxWindow))
			if err != nil {
				return nil, err
			}
			h.zs = z
		} else if err := h.zs.Reset(r); err != nil {
			return nil, err
		}
		return h.zs, nil
	}
	return nil, fmt.Errorf("%w %d", ErrUnknown, c)
}

// release gives the decompressors back to their pools.
func (d *Decoder) release() {
	for i := range d.held {
		h := &d.held[i]
		if h.gz != nil {
			gzips.put(h.gz)
		}
		if h.br != nil {
			h.br.Reset(nil) // drops its reference to the body
			brotlis.put(h.br)
		}
		if h.zs != nil {
			h.zs.Reset(nil) // drops its reference to the body
			zstds.put(h.zs)
		}
		*h = decompressor{}
	}
	d.src.Reset(nil)
}

// The pools of idle decompressors. A zstd decoder keeps a history of up to
// twice its last window (at most ZstdMaxWindow and a block more), a Brotli
// reader a ring buffer of up to 16 MiB, a gzip reader about 40 KiB.
var (
	gzips   pool[*gzip.Reader]
	brotlis pool[*brotli.Reader]
	zstds   pool[*zstd.Decoder]
)

// pool keeps at most maxIdle idle decompressors of one kind; the rest are
// left to the garbage collector. Unlike a sync.Pool it does not empty at
// every collection (a zstd decoder costs tens of microseconds to make).
type pool[T any] struct {
	mu   sync.Mutex
	free []T
}

// maxIdle is the most idle decompressors a pool keeps: twice the CPUs
// that can be decoding at once.
var maxIdle = sync.OnceValue(func() int { return 2 * runtime.GOMAXPROCS(0) })

// get returns an idle decompressor, or the zero T if there is none.
func (p *pool[T]) get() T {
	var x T
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		x = p.free[n-1]
		var zero T
		p.free[n-1] = zero
		p.free = p.free[:n-1]
	}
	p.mu.Unlock()
	return x
}

// put keeps x for a later get, if the pool is not full.
func (p *pool[T]) put(x T) {
	p.mu.Lock()
	if len(p.free) < maxIdle() {
		p.free = append(p.free, x)
	}
	p.mu.Unlock()
}

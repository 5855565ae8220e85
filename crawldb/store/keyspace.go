package store

import (
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// The layout of a Pebble that holds stores (keys are bytes):
//
//	0x00 len(group) group  key   a key of a group's store (Shared): len is one
//	                             byte (1..32), group is [a-z0-9-]{1,32}, key is
//	                             the store's own key ('u'…, see keys.go)
//	key                          a key of the store of its own (Open): the
//	                             store's own key, whose first byte is a letter
//
// The group prefix is length-prefixed, so no group's prefix is a prefix of
// another's, and every group's keys sort below every key of a store of its
// own (whose first bytes are letters): the two never collide, and one
// DeleteRange over [prefix, prefixEnd(prefix)) drops a whole group.
const (
	groupMark   = 0x00 // first byte of every group key
	maxGroupLen = 32
)

// ownLo and ownHi bound the keys of a store of its own: every key the
// store writes starts with a letter.
var (
	ownLo = []byte{0x01}
	ownHi = []byte{0xff}
)

// keyspace is one store's part of a Pebble: it prepends the store's prefix
// to every key it writes, reads or seeks, and strips it from every key an
// iterator returns, so that the rest of the package keys its tables as if
// it had the Pebble to itself. With an empty prefix (a store of its own) it
// passes everything through unchanged.
type keyspace struct {
	// Reads go to snap if set, else to efos if set, else to db. (Concrete
	// types: a call through the pebble.Reader interface would move each
	// iterator's options to the heap.)
	db     *pebble.DB
	snap   *pebble.Snapshot
	efos   *pebble.EventuallyFileOnlySnapshot
	prefix []byte // empty: a store of its own
	lo, hi []byte // every key of the store, prefix included, is in [lo, hi)
}

func ownKeyspace(db *pebble.DB) keyspace {
	return keyspace{db: db, lo: ownLo, hi: ownHi}
}

func groupKeyspace(db *pebble.DB, group string) keyspace {
	p := groupPrefix(group)
	return keyspace{db: db, prefix: p, lo: p, hi: prefixEnd(p)}
}

// groupPrefix returns the prefix of group's keys; group must be valid.
func groupPrefix(group string) []byte {
	p := make([]byte, 0, 2+len(group))
	p = append(p, groupMark, byte(len(group)))
	return append(p, group...)
}

// withSnapshot returns the keyspace read through a snapshot of its DB.
func (k keyspace) withSnapshot(snap *pebble.Snapshot) keyspace {
	k.snap = snap
	return k
}

// withEFOS returns the keyspace read through an eventually-file-only
// snapshot of its DB.
func (k keyspace) withEFOS(efos *pebble.EventuallyFileOnlySnapshot) keyspace {
	k.efos = efos
	return k
}

func (k *keyspace) rawGet(key []byte) ([]byte, io.Closer, error) {
	switch {
	case k.snap != nil:
		return k.snap.Get(key)
	case k.efos != nil:
		return k.efos.Get(key)
	}
	return k.db.Get(key)
}

func (k *keyspace) rawIter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	switch {
	case k.snap != nil:
		return k.snap.NewIter(o)
	case k.efos != nil:
		return k.efos.NewIter(o)
	}
	return k.db.NewIter(o)
}

// full returns prefix+key in dst.
func (k *keyspace) full(dst, key []byte) []byte {
	dst = append(dst[:0], k.prefix...)
	return append(dst, key...)
}

// getBuf holds the prefixed key of one Get until its value is released:
// Pebble may keep the key until the closer is closed. Pooled, so that a
// read of a group's store allocates no more than one of a store of its own.
type getBuf struct {
	key []byte
	c   io.Closer
}

var getBufs = sync.Pool{New: func() any { return new(getBuf) }}

// Close releases the value and returns the buffer to the pool.
func (g *getBuf) Close() error {
	err := g.c.Close()
	g.c = nil
	getBufs.Put(g)
	return err
}

// get is pebble.Reader.Get of key in the keyspace.
func (k *keyspace) get(key []byte) ([]byte, io.Closer, error) {
	if len(k.prefix) == 0 {
		return k.rawGet(key)
	}
	g := getBufs.Get().(*getBuf)
	g.key = k.full(g.key, key)
	v, c, err := k.rawGet(g.key)
	if err != nil {
		getBufs.Put(g)
		return nil, nil, err
	}
	g.c = c
	return v, g, nil
}

// iter is a pebble.Iterator over one keyspace: seeks take and keys are
// the store's own keys. Use it by value; Close it once.
type iter struct {
	it   *pebble.Iterator
	n    int    // len(prefix)
	pre  []byte // the prefix
	seek []byte // the last seek key, prefix included (Pebble copies it)
}

// newIter returns an iterator over the store's keys in [lo, hi); a nil hi
// means the end of the keyspace.
func (k *keyspace) newIter(lo, hi []byte) (iter, error) {
	o := pebble.IterOptions{LowerBound: lo, UpperBound: hi}
	if len(k.prefix) == 0 {
		if hi == nil {
			o.UpperBound = k.hi
		}
	} else {
		// Pebble keeps the bounds while the iterator is open: one buffer
		// of their own.
		b := make([]byte, 0, 2*len(k.prefix)+len(lo)+len(hi))
		b = append(append(b, k.prefix...), lo...)
		o.LowerBound = b
		if hi == nil {
			o.UpperBound = k.hi
		} else {
			b = append(append(b, k.prefix...), hi...)
			o.UpperBound = b[len(o.LowerBound):]
		}
	}
	it, err := k.rawIter(&o)
	if err != nil {
		return iter{}, err
	}
	return iter{it: it, n: len(k.prefix), pre: k.prefix}, nil
}

// First moves to the first key.
func (i *iter) First() bool { return i.it.First() }

// Next moves to the next key.
func (i *iter) Next() bool { return i.it.Next() }

// SeekGE moves to the first key at or above key.
func (i *iter) SeekGE(key []byte) bool {
	if i.n == 0 {
		return i.it.SeekGE(key)
	}
	i.seek = append(append(i.seek[:0], i.pre...), key...)
	return i.it.SeekGE(i.seek)
}

// SeekPrefixGE is pebble.Iterator.SeekPrefixGE.
func (i *iter) SeekPrefixGE(key []byte) bool {
	if i.n == 0 {
		return i.it.SeekPrefixGE(key)
	}
	i.seek = append(append(i.seek[:0], i.pre...), key...)
	return i.it.SeekPrefixGE(i.seek)
}

// Key returns the current key without the prefix; valid until the
// iterator moves.
func (i *iter) Key() []byte { return i.it.Key()[i.n:] }

// Value returns the current value; valid until the iterator moves.
func (i *iter) Value() []byte { return i.it.Value() }

// Error returns the iterator's error.
func (i *iter) Error() error { return i.it.Error() }

// Close closes the iterator.
func (i *iter) Close() error { return i.it.Close() }

// batch is a pebble.Batch whose keys are the store's own keys.
type batch struct {
	b    *pebble.Batch
	k    *keyspace
	kbuf []byte // the prefixed key; Pebble copies it into the batch
}

func (k *keyspace) newBatch(db *pebble.DB, size int, kbuf []byte) batch {
	return batch{b: db.NewBatchWithSize(size), k: k, kbuf: kbuf}
}

// Set sets key to val.
func (b *batch) Set(key, val []byte, _ *pebble.WriteOptions) error {
	if len(b.k.prefix) == 0 {
		return b.b.Set(key, val, nil)
	}
	b.kbuf = b.k.full(b.kbuf, key)
	return b.b.Set(b.kbuf, val, nil)
}

// Delete deletes key.
func (b *batch) Delete(key []byte, _ *pebble.WriteOptions) error {
	if len(b.k.prefix) == 0 {
		return b.b.Delete(key, nil)
	}
	b.kbuf = b.k.full(b.kbuf, key)
	return b.b.Delete(b.kbuf, nil)
}

// DeleteRange deletes the keys in [start, end); a nil end means the end
// of the keyspace.
func (b *batch) DeleteRange(start, end []byte, _ *pebble.WriteOptions) error {
	if len(b.k.prefix) == 0 {
		if end == nil {
			end = b.k.hi
		}
		return b.b.DeleteRange(start, end, nil)
	}
	s := b.k.full(b.kbuf, start)
	var e []byte
	if end == nil {
		e = b.k.hi
	} else {
		e = append(append(s[len(s):], b.k.prefix...), end...)
	}
	err := b.b.DeleteRange(s, e, nil)
	b.kbuf = s[:0]
	return err
}

// deleteAll deletes every key of the keyspace.
func (b *batch) deleteAll() error { return b.b.DeleteRange(b.k.lo, b.k.hi, nil) }

// Commit commits the batch.
func (b *batch) Commit(o *pebble.WriteOptions) error { return b.b.Commit(o) }

// Len is the batch's size in bytes.
func (b *batch) Len() int { return b.b.Len() }

// Close releases the batch.
func (b *batch) Close() error { return b.b.Close() }

package store

import (
	"bytes"
	"fmt"
)

// Directives are what a fetched page told indexers about itself: that it
// is not to be indexed (meta robots or X-Robots-Tag noindex), and the URL
// it names as its canonical copy (rel=canonical). The zero value names
// nothing.
type Directives struct {
	// NoIndex: the page said noindex (or none).
	NoIndex bool
	// Canonical is the page's rel=canonical target, another URL than its
	// own; "" if it named none.
	Canonical string
}

// A directives record's value: a flags byte, then the canonical URL (the
// rest of the value, empty for none). A page without directives has no
// record.
const (
	dirNoIndex = 1 << 0
	dirKnown   = dirNoIndex
)

// appendDirectives encodes d as a record's value (empty for the zero value).
func appendDirectives(dst []byte, d Directives) []byte {
	if d == (Directives{}) {
		return dst
	}
	var f byte
	if d.NoIndex {
		f |= dirNoIndex
	}
	dst = append(dst, f)
	return append(dst, d.Canonical...)
}

// decodeDirectives decodes a record's value; ok is false for a value that
// appendDirectives does not write.
func decodeDirectives(v []byte) (Directives, bool) {
	if len(v) == 0 || v[0]&^dirKnown != 0 || v[0] == 0 && len(v) == 1 {
		return Directives{}, false
	}
	d := Directives{NoIndex: v[0]&dirNoIndex != 0, Canonical: string(v[1:])}
	if d.Canonical != "" {
		if _, ok := splitURL(d.Canonical); !ok {
			return Directives{}, false
		}
	}
	return d, true
}

// directivesKey returns the key of a URL's directives record.
func directivesKey(p *urlParts) []byte {
	k := p.urlKey(nil)
	k[0] = pDirs
	return k
}

// SetDirectives records what the page at url said of itself in its latest
// fetch (Store.DirectivesOf), in a record of its own beside the URL's; the
// zero Directives remove the record (a refetched page that no longer says
// noindex nor names a canonical). A canonical URL must be normalised, as
// url must.
func (b *Batch) SetDirectives(url string, d Directives) {
	if _, ok := splitURL(url); !ok {
		b.fail(fmt.Errorf("%w: directives of %.200q", ErrBadURL, url))
		return
	}
	if d.Canonical != "" {
		if _, ok := splitURL(d.Canonical); !ok {
			b.fail(fmt.Errorf("%w: canonical %.200q of %.200q", ErrBadURL, d.Canonical, url))
			return
		}
	}
	b.op(OpDirectives)
	b.buf = appendBytes(b.buf, []byte(url))
	b.buf = appendBytes(b.buf, appendDirectives(nil, d))
}

// DirectivesOf returns what the page at url said of itself in its latest
// fetch (Batch.SetDirectives); ok is false if it said nothing.
func (s *Store) DirectivesOf(url string) (d Directives, ok bool, err error) {
	p, good := splitURL(url)
	if !good {
		return Directives{}, false, fmt.Errorf("%w: %.200q", ErrBadURL, url)
	}
	v, err := s.value(directivesKey(&p))
	if err != nil || v == nil {
		return Directives{}, false, err
	}
	if d, ok = decodeDirectives(v); !ok {
		return Directives{}, false, fmt.Errorf("store: directives of %.200q: bad record %q", url, v)
	}
	return d, true, nil
}

// ScanDirectives calls fn with every page that has directives, in key
// order (by host, reversed), until fn returns an error.
func (s *Store) ScanDirectives(fn func(url string, d Directives) error) error {
	it, err := s.ks.newIter([]byte{pDirs}, []byte{pDirs + 1})
	if err != nil {
		return fmt.Errorf("store: directives: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[1:]
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			return fmt.Errorf("store: directives: bad key %q", it.Key())
		}
		u, ok := urlFromTail(k[:i], k[i+1:])
		if !ok {
			return fmt.Errorf("store: directives: bad key %q", it.Key())
		}
		d, ok := decodeDirectives(it.Value())
		if !ok {
			return fmt.Errorf("store: directives of %.200q: bad record %q", u, it.Value())
		}
		if err := fn(u, d); err != nil {
			return err
		}
	}
	return it.Error()
}

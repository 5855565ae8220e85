// Package coding undoes the content codings of HTTP responses (RFC 9110,
// section 8.4.1): gzip (and its alias x-gzip), br (Brotli, RFC 7932) and
// zstd (Zstandard, RFC 8878, with the 8 MiB window RFC 9659 sets for HTTP),
// alone or chained.
//
// Parse reads a Content-Encoding header into a List; a Decoder decodes a
// body held in memory by a List into a buffer, at most a given number of
// bytes, so a small body that inflates without end (a decompression bomb)
// costs no more than that bound. The decompressors, whose set-up is costly
// (a zstd decoder, a Brotli reader), are borrowed from bounded pools shared
// by every Decoder of the process and given back after each body: decoding
// is done on a body already read, so only about as many decompressors are
// in use at once as there are CPUs, however many Decoders there are.
package coding

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors.
var (
	// ErrUnknown is wrapped by Parse's error for a coding it does not
	// decode (compress, deflate, or any other name).
	ErrUnknown = errors.New("coding: unknown content coding")
	// ErrTooMany is wrapped by Parse's error for a header that lists more
	// than MaxCodings codings.
	ErrTooMany = errors.New("coding: too many content codings")
)

// Coding is one content coding.
type Coding uint8

// The codings Decode undoes.
const (
	Gzip   Coding = iota + 1 // "gzip" or "x-gzip" (RFC 9110, section 8.4.1.3)
	Brotli                   // "br"
	Zstd                     // "zstd"
)

// String returns the coding's name in a Content-Encoding header.
func (c Coding) String() string {
	switch c {
	case Gzip:
		return "gzip"
	case Brotli:
		return "br"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("coding(%d)", uint8(c))
}

// MaxCodings is the longest chain of codings Parse accepts, as curl does
// (its MAX_ENCODE_STACK); a longer one is an attack or a broken server.
const MaxCodings = 5

// List is the codings applied to a body, in the order they were applied
// (the header's order). The zero List is no coding at all.
type List struct {
	n uint8
	c [MaxCodings]Coding
}

// Len returns the number of codings.
func (l List) Len() int { return int(l.n) }

// At returns the i-th coding applied, 0 ≤ i < Len.
func (l List) At(i int) Coding { return l.c[:l.n][i] }

// String returns the codings as a Content-Encoding value: "gzip, br".
func (l List) String() string {
	var b strings.Builder
	for i, c := range l.c[:l.n] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.String())
	}
	return b.String()
}

// Parse returns the codings a Content-Encoding header lists: values are its
// field lines in order, each a comma-separated list. Names are matched
// case-insensitively; "identity" and empty list elements are skipped;
// "x-gzip" is gzip. A name Parse does not know is an error naming it
// (wrapping ErrUnknown), and so are more than MaxCodings codings
// (ErrTooMany). Parse allocates only for its errors.
func Parse(values []string) (List, error) {
	var l List
	for _, v := range values {
		for v != "" {
			var name string
			name, v, _ = strings.Cut(v, ",")
			name = strings.Trim(name, " \t")
			var c Coding
			switch {
			case name == "" || strings.EqualFold(name, "identity"):
				continue
			case strings.EqualFold(name, "gzip") || strings.EqualFold(name, "x-gzip"):
				c = Gzip
			case strings.EqualFold(name, "br"):
				c = Brotli
			case strings.EqualFold(name, "zstd"):
				c = Zstd
			default:
				return List{}, fmt.Errorf("coding: Content-Encoding %q: %w", name, ErrUnknown)
			}
			if l.n == MaxCodings {
				return List{}, fmt.Errorf("coding: Content-Encoding %q: more than %d codings: %w", strings.Join(values, ", "), MaxCodings, ErrTooMany)
			}
			l.c[l.n] = c
			l.n++
		}
	}
	return l, nil
}

package cdxj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// ErrSyntax is wrapped by Parse's error for a line that is not a CDXJ line.
var ErrSyntax = errors.New("cdxj: bad line")

// Line is one line of a CDXJ index: where one WARC record is and what it
// holds.
type Line struct {
	Key       string // SURT of URL (see SURT)
	Timestamp string // WARC-Date as 14 digits, yyyymmddhhmmss, UTC
	URL       string // WARC-Target-URI
	Mime      string // media type without parameters; "warc/revisit" for a revisit; "" is omitted
	Status    string // HTTP status code of a response or revisit; "" is omitted
	Digest    string // payload digest without its algorithm label, as cdxj-indexer writes it: "3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ" for WARC-Payload-Digest "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ" (see DigestValue); "" is omitted
	Length    int64  // bytes of the record in the file (its gzip member if compressed)
	Offset    int64  // byte offset of the record in the file
	Filename  string // base name of the WARC file
}

// Timestamp returns the 14-digit timestamp of t in UTC.
func Timestamp(t time.Time) string {
	return t.UTC().Format("20060102150405")
}

// AppendTimestamp appends the 14-digit timestamp of t in UTC.
func AppendTimestamp(b []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(b, "20060102150405")
}

// Append appends l as a CDXJ line, newline included, in the layout of
// pywb's cdxj-indexer (Python's json.dumps: ", " and ": " separators,
// non-ASCII escaped as \uXXXX, numbers as strings):
//
//	com,example)/ 20260304050607 {"url": "http://example.com/", "mime": "text/html", "status": "200", "digest": "3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ", "length": "1234", "offset": "0", "filename": "x.warc.gz"}
func (l *Line) Append(b []byte) []byte {
	b = append(b, l.Key...)
	b = append(b, ' ')
	b = append(b, l.Timestamp...)
	b = l.AppendHead(b)
	b = strconv.AppendInt(b, l.Offset, 10)
	return AppendTail(b, l.Filename)
}

// AppendHead appends what comes between the timestamp and the offset's
// digits: the JSON fields up to `"offset": "`. With AppendTail it lets a
// writer build most of a line before it knows the offset and file name.
func (l *Line) AppendHead(b []byte) []byte {
	b = append(b, ` {"url": `...)
	b = AppendJSONString(b, l.URL)
	if l.Mime != "" {
		b = append(b, `, "mime": `...)
		b = AppendJSONString(b, l.Mime)
	}
	if l.Status != "" {
		b = append(b, `, "status": `...)
		b = AppendJSONString(b, l.Status)
	}
	if l.Digest != "" {
		b = append(b, `, "digest": `...)
		b = AppendJSONString(b, l.Digest)
	}
	b = append(b, `, "length": "`...)
	b = strconv.AppendInt(b, l.Length, 10)
	return append(b, `", "offset": "`...)
}

// AppendTail appends what follows the offset's digits: the file name and
// the end of the line.
func AppendTail(b []byte, filename string) []byte {
	b = append(b, `", "filename": `...)
	b = AppendJSONString(b, filename)
	return append(b, "}\n"...)
}

// AppendJSONString appends s as a JSON string as Python's json.dumps writes
// it: '"', '\\' and control characters escaped (\n, \r, \t, \b, \f by
// name), DEL and everything outside ASCII as \uXXXX (UTF-16 surrogate pairs
// above U+FFFF), and a byte that is not UTF-8 as \ufffd.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		if c < 0x80 {
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r > 0xffff {
			r -= 0x10000
			b = appendU(b, 0xd800+(r>>10))
			r = 0xdc00 + r&0x3ff
		}
		b = appendU(b, r) // utf8.RuneError for a bad byte
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendU(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
}

// Parse parses one CDXJ line (without or with its newline): key, timestamp
// and a JSON object whose url, mime, status, digest, length, offset and
// filename it reads (length, offset and status as JSON strings, as pywb
// writes them, or numbers); other fields are ignored. Length and offset are
// required. Errors wrap ErrSyntax.
func Parse(line []byte) (Line, error) {
	var l Line
	line = bytes.TrimSuffix(line, []byte("\n"))
	key, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(key) == 0 {
		return l, fmt.Errorf("%w: no key and timestamp", ErrSyntax)
	}
	ts, obj, ok := bytes.Cut(rest, []byte(" "))
	if !ok || len(ts) == 0 {
		return l, fmt.Errorf("%w: no timestamp and JSON", ErrSyntax)
	}
	for _, c := range ts {
		if c < '0' || c > '9' {
			return l, fmt.Errorf("%w: timestamp %q is not digits", ErrSyntax, ts)
		}
	}
	var f struct {
		URL      *string        `json:"url"`
		Mime     *string        `json:"mime"`
		Status   stringOrNumber `json:"status"`
		Digest   *string        `json:"digest"`
		Length   stringOrNumber `json:"length"`
		Offset   stringOrNumber `json:"offset"`
		Filename *string        `json:"filename"`
	}
	if err := json.Unmarshal(obj, &f); err != nil {
		return l, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	if f.Length.s == "" || f.Offset.s == "" {
		return l, fmt.Errorf("%w: no length or offset", ErrSyntax)
	}
	var err error
	if l.Length, err = strconv.ParseInt(f.Length.s, 10, 64); err != nil || l.Length < 0 {
		return l, fmt.Errorf("%w: length %q", ErrSyntax, f.Length.s)
	}
	if l.Offset, err = strconv.ParseInt(f.Offset.s, 10, 64); err != nil || l.Offset < 0 {
		return l, fmt.Errorf("%w: offset %q", ErrSyntax, f.Offset.s)
	}
	l.Key, l.Timestamp, l.Status = string(key), string(ts), f.Status.s
	for _, p := range []struct {
		dst *string
		src *string
	}{{&l.URL, f.URL}, {&l.Mime, f.Mime}, {&l.Digest, f.Digest}, {&l.Filename, f.Filename}} {
		if p.src != nil {
			*p.dst = *p.src
		}
	}
	return l, nil
}

// stringOrNumber decodes a JSON string or number into its text.
type stringOrNumber struct{ s string }

func (v *stringOrNumber) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &v.s)
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	v.s = n.String()
	return nil
}

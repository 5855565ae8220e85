package store

import (
	"encoding/binary"
	"math"
	"net/netip"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/meridian-crawler/meridian/crawl"
)

// Key prefixes, one byte each: every table of the crawl database lives in one
// Pebble keyspace.
const (
	pURL      = 'u' // u revhost 0 scheme port(2) pathquery → URLRecord
	pFrontier = 'q' // q revhost 0 ^score(8) scheme port(2) pathquery → depth
	pHostPrio = 'p' // p ^bestscore(8) revhost → empty
	pHostFr   = 'x' // x revhost → hostState
	pGen      = 'g' // g round(8) revhost 0 scheme port(2) pathquery → empty
	pHost     = 'h' // h revhost → HostRecord
	pSent     = 'c' // c fp(8) → seq(8)
	pSentSeq  = 'C' // C seq(8) → fp(8)
	pOutbox   = 'o' // o site 0 seq(8) → payload
	pRound    = 'r' // r → round state
	pDomain   = 'd' // d domain → lat(8) lon(8)
	pMeta     = 'm' // m name → internal counters and the applied index
	pUser     = 'z' // z key → value, for the node layer
	pMark     = 'e' // e revhost 0 scheme port(2) pathquery → status: a generated URL fetched by another site (FetchedElsewhere)
	pDue      = 'w' // w nextfetch-ms(8) revhost 0 scheme port(2) pathquery → empty: a fetched URL's next refetch (URLRecord.scheduled)
	pNearDup  = 'n' // n revhost 0 scheme port(2) pathquery → the URL of the page it is a near-duplicate of (Batch.NearDup)
	pDirs     = 'i' // i revhost 0 scheme port(2) pathquery → flags(1) canonical: a fetched page's noindex and rel=canonical (Batch.SetDirectives)
)

// MaxURLLen is the longest URL the database accepts.
const MaxURLLen = crawl.MaxURLLen

const (
	schemeHTTP  = 'h'
	schemeHTTPS = 's'
)

// urlParts is a URL split for keying; host is reversed by label.
type urlParts struct {
	scheme byte
	port   uint16
	host   string // as given, lower-case
	path   string // path and query, starting with '/'
}

// splitURL splits a normalised absolute http(s) URL, whose host is a name
// or an IPv6 literal in brackets. It rejects what a normaliser would have
// fixed: upper-case scheme or host, userinfo, fragments, a missing path,
// bad ports, over-long URLs.
func splitURL(u string) (urlParts, bool) {
	var p urlParts
	if len(u) > MaxURLLen {
		return p, false
	}
	var rest string
	switch {
	case len(u) > 7 && u[:7] == "http://":
		p.scheme, p.port, rest = schemeHTTP, 80, u[7:]
	case len(u) > 8 && u[:8] == "https://":
		p.scheme, p.port, rest = schemeHTTPS, 443, u[8:]
	default:
		return p, false
	}
	end := 0
	for end < len(rest) && rest[end] != '/' {
		end++
	}
	if end == len(rest) {
		return p, false // no path: not normalised
	}
	auth, path := rest[:end], rest[end:]
	host := auth
	for i := len(auth) - 1; i >= 0; i-- {
		c := auth[i]
		if c == ':' {
			n, err := strconv.Atoi(auth[i+1:])
			if err != nil || n < 1 || n > 65535 || auth[i+1] == '0' {
				return p, false
			}
			p.port = uint16(n)
			host = auth[:i]
			break
		}
		if c < '0' || c > '9' {
			break
		}
	}
	if len(host) == 0 || len(host) > 253 || host[0] == '.' || host[len(host)-1] == '.' {
		return p, false
	}
	if host[0] == '[' && !ipv6Literal(host) {
		return p, false
	}
	for i := 0; i < len(host) && host[0] != '['; i++ { // a name's bytes
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') || (c == '.' && host[i-1] == '.') {
			return p, false
		}
	}
	for i := 0; i < len(path); i++ {
		if c := path[i]; c == '#' || c <= ' ' || c == 0x7f {
			return p, false
		}
	}
	p.host, p.path = host, path
	return p, true
}

// ValidURL reports whether the database takes u as a URL: a normalised
// absolute http(s) URL of at most MaxURLLen bytes (see splitURL).
func ValidURL(u string) bool {
	_, ok := splitURL(u)
	return ok
}

// ipv6Literal reports whether host is an IPv6 literal as a normaliser
// writes it: in brackets, lower-case hex groups and colons, no zone.
func ipv6Literal(host string) bool {
	if len(host) < 4 || host[len(host)-1] != ']' {
		return false
	}
	in := host[1 : len(host)-1]
	for i := 0; i < len(in); i++ {
		if c := in[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == ':') {
			return false
		}
	}
	a, err := netip.ParseAddr(in)
	return err == nil && a.Is6()
}

// appendRevHost appends host with its labels reversed: h1.us.test → test.us.h1.
func appendRevHost(dst []byte, host string) []byte {
	end := len(host)
	for i := len(host) - 1; i >= -1; i-- {
		if i == -1 || host[i] == '.' {
			dst = append(dst, host[i+1:end]...)
			if i >= 0 {
				dst = append(dst, '.')
			}
			end = i
		}
	}
	return dst
}

// appendTail appends scheme, port and path: the part of a URL key after the host.
func (p *urlParts) appendTail(dst []byte) []byte {
	dst = append(dst, p.scheme)
	dst = binary.BigEndian.AppendUint16(dst, p.port)
	return append(dst, p.path...)
}

// urlKey returns the record key of a split URL.
func (p *urlParts) urlKey(dst []byte) []byte {
	if dst == nil {
		dst = make([]byte, 0, 5+len(p.host)+len(p.path))
	}
	dst = append(dst, pURL)
	dst = appendRevHost(dst, p.host)
	dst = append(dst, 0)
	return p.appendTail(dst)
}

// nearDupKey returns the key of a URL's near-duplicate record.
func nearDupKey(p *urlParts) []byte {
	k := p.urlKey(nil)
	k[0] = pNearDup
	return k
}

// markKey returns the key of a URL's fetched-elsewhere mark, given its
// record key.
func markKey(urlKey []byte) []byte {
	return append([]byte{pMark}, urlKey[1:]...)
}

// hostPrefix returns prefix followed by the reversed host and a 0 byte.
func hostPrefix(dst []byte, prefix byte, host string) []byte {
	dst = append(dst, prefix)
	dst = appendRevHost(dst, host)
	return append(dst, 0)
}

// scoreBits orders non-negative scores descending as bytes.
func scoreBits(score float64) uint64 { return ^math.Float64bits(score) }

func scoreFromBits(b uint64) float64 { return math.Float64frombits(^b) }

// frontierKey returns the frontier entry of a URL with a score.
func (p *urlParts) frontierKey(dst []byte, score float64) []byte {
	if dst == nil {
		dst = make([]byte, 0, 13+len(p.host)+len(p.path))
	}
	dst = hostPrefix(dst, pFrontier, p.host)
	dst = binary.BigEndian.AppendUint64(dst, scoreBits(score))
	return p.appendTail(dst)
}

func hostPrioKey(dst []byte, best float64, revHost []byte) []byte {
	dst = append(dst, pHostPrio)
	dst = binary.BigEndian.AppendUint64(dst, scoreBits(best))
	return append(dst, revHost...)
}

func genKey(dst []byte, round uint64, p *urlParts) []byte {
	dst = append(dst, pGen)
	dst = binary.BigEndian.AppendUint64(dst, round)
	dst = appendRevHost(dst, p.host)
	dst = append(dst, 0)
	return p.appendTail(dst)
}

// dueKey returns the refetch index entry of a URL due at t.
func (p *urlParts) dueKey(dst []byte, t time.Time) []byte {
	if dst == nil {
		dst = make([]byte, 0, 13+len(p.host)+len(p.path))
	}
	dst = append(dst, pDue)
	dst = binary.BigEndian.AppendUint64(dst, uint64(max(t.UnixMilli(), 0)))
	dst = appendRevHost(dst, p.host)
	dst = append(dst, 0)
	return p.appendTail(dst)
}

func fpKey(dst []byte, prefix byte, fp uint64) []byte {
	dst = append(dst, prefix)
	return binary.BigEndian.AppendUint64(dst, fp)
}

// Fingerprint is the 64-bit fingerprint of a normalised URL used for
// seen-checks and the URL-sent cache.
func Fingerprint(url string) uint64 { return xxhash.Sum64String(url) }

// urlFromTail rebuilds a URL from a reversed host and a key tail
// (scheme, port, path).
func urlFromTail(revHost, tail []byte) (string, bool) {
	if len(tail) < 3 {
		return "", false
	}
	scheme, port, path := tail[0], binary.BigEndian.Uint16(tail[1:3]), tail[3:]
	b := make([]byte, 0, 16+len(revHost)+len(path))
	def := uint16(80)
	if scheme == schemeHTTPS {
		b = append(b, "https://"...)
		def = 443
	} else {
		b = append(b, "http://"...)
	}
	b = appendRevHost(b, string(revHost)) // reversing twice restores the host
	if port != def {
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(port), 10)
	}
	b = append(b, path...)
	return string(b), true
}

// hostFromRev returns the host name of a reversed host.
func hostFromRev(revHost []byte) string { return string(appendRevHost(nil, string(revHost))) }

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func outboxKey(site []byte, seq uint64) []byte {
	k := append([]byte{pOutbox}, site...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

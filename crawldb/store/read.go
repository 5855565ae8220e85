package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Get returns the record of url.
func (s *Store) Get(url string) (URLRecord, bool, error) {
	p, ok := splitURL(url)
	if !ok {
		return URLRecord{}, false, fmt.Errorf("%w: %.200q", ErrBadURL, url)
	}
	key := p.urlKey(nil)
	v, closer, err := s.ks.get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return URLRecord{}, false, nil
	}
	if err != nil {
		return URLRecord{}, false, fmt.Errorf("store: get %s: %w", url, err)
	}
	defer closer.Close()
	rec := URLRecord{URL: url}
	if err := decodeRecord(v, &rec); err != nil {
		return URLRecord{}, false, fmt.Errorf("store: get %s: %w", url, err)
	}
	return rec, true, nil
}

// Contains reports whether url is in the database (a seen-check).
func (s *Store) Contains(url string) (bool, error) {
	p, ok := splitURL(url)
	if !ok {
		return false, fmt.Errorf("%w: %.200q", ErrBadURL, url)
	}
	return s.has(p.urlKey(nil))
}

// SentContains reports whether fp is in the URL-sent cache.
func (s *Store) SentContains(fp uint64) (bool, error) {
	return s.has(fpKey(nil, pSent, fp))
}

func (s *Store) has(key []byte) (bool, error) {
	_, closer, err := s.ks.get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: get: %w", err)
	}
	closer.Close()
	return true, nil
}

// FrontierQuery asks for the top of the frontier.
type FrontierQuery struct {
	Width   int       // URLs in all
	PerHost int       // at most this many per host (k)
	Now     time.Time // hosts backing off after Now are skipped; zero: none skipped
	// MaxSkips bounds the hosts skipped for back-off; default Width.
	MaxSkips int
	// PerHostFor, if set, gives each host its own limit, at most PerHost
	// (larger values are cut to it); 0 skips the host, as a back-off does.
	PerHostFor func(host string) int
}

// FrontierEntry is one URL from the top of the frontier.
type FrontierEntry struct {
	URL   string
	Host  string
	Score float64
	Depth uint32
	// Refetch: a fetched URL due again (Batch.MakeDue); its record holds
	// what its last fetch found (validators, fingerprint, time).
	Refetch bool
}

// Frontier returns the top of the frontier: hosts in the order of their best
// URL's score, up to PerHost URLs of each in score order, Width in all. Its
// cost is bounded by Width and the hosts skipped, not by the database's size.
func (s *Store) Frontier(q FrontierQuery) ([]FrontierEntry, error) {
	if q.Width <= 0 || q.PerHost <= 0 {
		return nil, fmt.Errorf("%w: frontier width %d, per host %d", ErrBadOp, q.Width, q.PerHost)
	}
	if q.MaxSkips <= 0 {
		q.MaxSkips = q.Width
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	sk := s.ks.withSnapshot(snap)
	hosts, err := sk.newIter([]byte{pHostPrio}, []byte{pHostPrio + 1})
	if err != nil {
		return nil, fmt.Errorf("store: frontier: %w", err)
	}
	defer hosts.Close()
	urls, err := sk.newIter([]byte{pFrontier}, []byte{pFrontier + 1})
	if err != nil {
		return nil, fmt.Errorf("store: frontier: %w", err)
	}
	defer urls.Close()
	out := make([]FrontierEntry, 0, min(q.Width, 4096))
	skips := 0
	var prefix []byte
	for ok := hosts.First(); ok && len(out) < q.Width; ok = hosts.Next() {
		k := hosts.Key()
		if len(k) < 10 {
			return nil, fmt.Errorf("store: frontier: bad host index key %q", k)
		}
		rev := k[9:]
		hostName := hostFromRev(rev)
		if !q.Now.IsZero() {
			hr, found, err := hostFrom(&sk, rev)
			if err != nil {
				return nil, err
			}
			if found && hr.BackoffUntil.After(q.Now) {
				if skips++; skips > q.MaxSkips {
					break
				}
				continue
			}
		}
		limit := q.PerHost
		if q.PerHostFor != nil {
			if limit = min(q.PerHostFor(hostName), q.PerHost); limit <= 0 {
				if skips++; skips > q.MaxSkips {
					break
				}
				continue
			}
		}
		prefix = append(append(append(prefix[:0], pFrontier), rev...), 0)
		n := 0
		for ok := urls.SeekGE(prefix); ok && n < limit && len(out) < q.Width; ok = urls.Next() {
			uk := urls.Key()
			if len(uk) < len(prefix)+8+3 || string(uk[:len(prefix)]) != string(prefix) {
				break
			}
			e, err := frontierEntry(uk, len(prefix), rev, hostName, urls.Value())
			if err != nil {
				return nil, err
			}
			out = append(out, e)
			n++
		}
		if err := urls.Error(); err != nil {
			return nil, fmt.Errorf("store: frontier: %w", err)
		}
	}
	if err := hosts.Error(); err != nil {
		return nil, fmt.Errorf("store: frontier: %w", err)
	}
	return out, nil
}

// HostFrontier returns up to limit of host's frontier URLs, best first;
// an entry's Score is the URL's cash.
func (s *Store) HostFrontier(host string, limit int) ([]FrontierEntry, error) {
	rev := appendRevHost(nil, host)
	prefix := append(append([]byte{pFrontier}, rev...), 0)
	it, err := s.ks.newIter(prefix, prefixEnd(prefix))
	if err != nil {
		return nil, fmt.Errorf("store: frontier of %s: %w", host, err)
	}
	defer it.Close()
	var out []FrontierEntry
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		e, err := frontierEntry(it.Key(), len(prefix), rev, host, it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("store: frontier of %s: %w", host, err)
	}
	return out, nil
}

// frontierEntry decodes a frontier index entry of host (reversed: rev)
// whose key starts with a prefix of prefixLen bytes: score, then the URL's
// tail; the value is its depth.
func frontierEntry(key []byte, prefixLen int, rev []byte, host string, val []byte) (FrontierEntry, error) {
	if len(key) < prefixLen+8+3 {
		return FrontierEntry{}, fmt.Errorf("store: frontier: bad key %q", key)
	}
	u, ok := urlFromTail(rev, key[prefixLen+8:])
	if !ok {
		return FrontierEntry{}, fmt.Errorf("store: frontier: bad key %q", key)
	}
	depth, n := binary.Uvarint(val)
	refetch := n > 0 && len(val) > n && val[n] == frontierRefetch
	return FrontierEntry{URL: u, Host: host, Score: scoreFromBits(binary.BigEndian.Uint64(key[prefixLen:])), Depth: uint32(depth), Refetch: refetch}, nil
}

// hostFrom reads a host record through a keyspace over a snapshot.
func hostFrom(sk *keyspace, rev []byte) (HostRecord, bool, error) {
	v, closer, err := sk.get(append([]byte{pHost}, rev...))
	if errors.Is(err, pebble.ErrNotFound) {
		return HostRecord{}, false, nil
	}
	if err != nil {
		return HostRecord{}, false, fmt.Errorf("store: host %q: %w", rev, err)
	}
	defer closer.Close()
	h, err := decodeHost(v)
	if err != nil {
		return HostRecord{}, false, fmt.Errorf("store: host %q: %w", rev, err)
	}
	return h, true, nil
}

// Host returns the record of host.
func (s *Store) Host(host string) (HostRecord, bool, error) {
	v, closer, err := s.ks.get(append([]byte{pHost}, appendRevHost(nil, host)...))
	if errors.Is(err, pebble.ErrNotFound) {
		return HostRecord{}, false, nil
	}
	if err != nil {
		return HostRecord{}, false, fmt.Errorf("store: host %s: %w", host, err)
	}
	defer closer.Close()
	h, err := decodeHost(v)
	if err != nil {
		return HostRecord{}, false, fmt.Errorf("store: host %s: %w", host, err)
	}
	return h, true, nil
}

// HostStats returns the crawl database's bookkeeping for host.
func (s *Store) HostStats(host string) (HostStats, error) {
	v, closer, err := s.ks.get(append([]byte{pHostFr}, appendRevHost(nil, host)...))
	if errors.Is(err, pebble.ErrNotFound) {
		return HostStats{}, nil
	}
	if err != nil {
		return HostStats{}, fmt.Errorf("store: host stats %s: %w", host, err)
	}
	defer closer.Close()
	st, err := decodeHostState(v)
	if err != nil {
		return HostStats{}, fmt.Errorf("store: host stats %s: %w", host, err)
	}
	out := HostStats{Best: st.best, Fetched: st.fetched}
	if st.frontier > 0 { // counted on demand: keeping a count would cost a write per command
		prefix := hostPrefix(nil, pFrontier, host)
		it, err := s.ks.newIter(prefix, prefixEnd(prefix))
		if err != nil {
			return HostStats{}, fmt.Errorf("store: host stats %s: %w", host, err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			out.Frontier++
		}
		if err := it.Close(); err != nil {
			return HostStats{}, fmt.Errorf("store: host stats %s: %w", host, err)
		}
	}
	return out, nil
}

// DomainFetched returns the pages fetched (HostStats.Fetched) summed over
// domain and every host under it ("a.spam.test" and "b.a.spam.test" are
// under "spam.test"): the page budget a registrable domain has used. The
// hosts of a domain are one range of the host-state keys (reversed host
// names), so the read costs one key per host of the domain that has state,
// and no more.
func (s *Store) DomainFetched(domain string) (uint64, error) {
	if domain == "" {
		return 0, nil
	}
	rev := appendRevHost([]byte{pHostFr}, domain)
	var sum uint64
	add := func(v []byte) error {
		st, err := decodeHostState(v)
		if err != nil {
			return err
		}
		sum += st.fetched
		return nil
	}
	v, closer, err := s.ks.get(rev)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return 0, fmt.Errorf("store: fetched of domain %s: %w", domain, err)
	default:
		err = add(v)
		closer.Close()
		if err != nil {
			return 0, fmt.Errorf("store: fetched of domain %s: %w", domain, err)
		}
	}
	sub := append(rev, '.') // the hosts under it: "test.spam." …
	it, err := s.ks.newIter(sub, prefixEnd(sub))
	if err != nil {
		return 0, fmt.Errorf("store: fetched of domain %s: %w", domain, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := add(it.Value()); err != nil {
			it.Close()
			return 0, fmt.Errorf("store: fetched of domain %s: host %s: %w", domain, hostFromRev(it.Key()[1:]), err)
		}
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("store: fetched of domain %s: %w", domain, err)
	}
	return sum, nil
}

// OutboxEntry is one put waiting for another site.
type OutboxEntry struct {
	Seq     uint64
	Payload []byte
}

// Outbox returns up to limit entries of site's outbox with Seq > after, oldest first.
func (s *Store) Outbox(site string, after uint64, limit int) ([]OutboxEntry, error) {
	lo := outboxKey([]byte(site), after+1)
	hi := prefixEnd(append(append([]byte{pOutbox}, site...), 0))
	it, err := s.ks.newIter(lo, hi)
	if err != nil {
		return nil, fmt.Errorf("store: outbox %s: %w", site, err)
	}
	defer it.Close()
	var out []OutboxEntry
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		k := it.Key()
		out = append(out, OutboxEntry{Seq: binary.BigEndian.Uint64(k[len(k)-8:]), Payload: append([]byte(nil), it.Value()...)})
	}
	return out, it.Error()
}

// OutboxHeads returns, in one pass over the outbox, the first entries (at
// most limit) of every owner whose name starts with prefix; owners with
// no entry are absent. A reader of many outboxes (a sharded site's shard
// has one per other shard) looks at them all with one iterator, not one
// each.
func (s *Store) OutboxHeads(prefix string, limit int) (map[string][]OutboxEntry, error) {
	lo := append([]byte{pOutbox}, prefix...)
	it, err := s.ks.newIter(lo, prefixEnd(lo))
	if err != nil {
		return nil, fmt.Errorf("store: outbox heads %q: %w", prefix, err)
	}
	defer it.Close()
	out := map[string][]OutboxEntry{}
	var skip []byte
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) < 1+1+8 || k[len(k)-9] != 0 {
			return nil, fmt.Errorf("store: outbox heads: malformed key %q", k)
		}
		owner := k[1 : len(k)-9]
		es := out[string(owner)]
		if len(es) >= limit {
			// The rest of this owner's entries: past its separator.
			skip = append(append(append(skip[:0], pOutbox), owner...), 1)
			ok = it.SeekGE(skip)
			continue
		}
		out[string(owner)] = append(es, OutboxEntry{Seq: binary.BigEndian.Uint64(k[len(k)-8:]), Payload: append([]byte(nil), it.Value()...)})
		ok = it.Next()
	}
	return out, it.Error()
}

// Round returns the round state last put (nil if none).
func (s *Store) Round() ([]byte, error) { return s.value(keyRound) }

// User returns the value of key in the node layer's table (nil if none).
func (s *Store) User(key string) ([]byte, error) { return s.value(append([]byte{pUser}, key...)) }

// UserScan calls fn for every key of the node layer's table with prefix.
func (s *Store) UserScan(prefix string, fn func(key string, value []byte) error) error {
	p := append([]byte{pUser}, prefix...)
	it, err := s.ks.newIter(p, prefixEnd(p))
	if err != nil {
		return fmt.Errorf("store: user scan: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := fn(string(it.Key()[1:]), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// Domain returns the coordinates of domain.
// NearDupOf returns the URL of the page that the page at url is a
// near-duplicate of (Batch.NearDup); ok is false if it is none's.
func (s *Store) NearDupOf(url string) (original string, ok bool, err error) {
	p, good := splitURL(url)
	if !good {
		return "", false, fmt.Errorf("%w: %.200q", ErrBadURL, url)
	}
	v, err := s.value(nearDupKey(&p))
	if err != nil || v == nil {
		return "", false, err
	}
	return string(v), true, nil
}

// ScanNearDups calls fn with every near-duplicate and its original, in key
// order (by host, reversed), until fn returns an error.
func (s *Store) ScanNearDups(fn func(url, original string) error) error {
	it, err := s.ks.newIter([]byte{pNearDup}, []byte{pNearDup + 1})
	if err != nil {
		return fmt.Errorf("store: near-duplicates: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[1:]
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			return fmt.Errorf("store: near-duplicates: bad key %q", it.Key())
		}
		u, ok := urlFromTail(k[:i], k[i+1:])
		if !ok {
			return fmt.Errorf("store: near-duplicates: bad key %q", it.Key())
		}
		if err := fn(u, string(it.Value())); err != nil {
			return err
		}
	}
	return it.Error()
}

func (s *Store) Domain(domain string) (lat, lon float64, ok bool, err error) {
	v, err := s.value(append([]byte{pDomain}, domain...))
	if err != nil || v == nil {
		return 0, 0, false, err
	}
	if len(v) != 16 {
		return 0, 0, false, fmt.Errorf("store: domain %s: %w", domain, errBadValue)
	}
	return math.Float64frombits(binary.BigEndian.Uint64(v)), math.Float64frombits(binary.BigEndian.Uint64(v[8:])), true, nil
}

func (s *Store) value(key []byte) ([]byte, error) {
	v, closer, err := s.ks.get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: get %q: %w", key, err)
	}
	defer closer.Close()
	return append([]byte{}, v...), nil
}

// Generated returns up to limit URLs generated in round, in key order
// (a round resumed after a crash refetches them).
func (s *Store) Generated(round uint64, limit int) ([]string, error) {
	p := binary.BigEndian.AppendUint64([]byte{pGen}, round)
	it, err := s.ks.newIter(p, prefixEnd(p))
	if err != nil {
		return nil, fmt.Errorf("store: generated %d: %w", round, err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		k := it.Key()[9:]
		i := 0
		for i < len(k) && k[i] != 0 {
			i++
		}
		if i == len(k) {
			return nil, fmt.Errorf("store: generated: bad key %q", it.Key())
		}
		u, ok := urlFromTail(k[:i], k[i+1:])
		if !ok {
			return nil, fmt.Errorf("store: generated: bad key %q", it.Key())
		}
		out = append(out, u)
	}
	return out, it.Error()
}

// Counts are the store's running totals.
type Counts struct {
	Applied  uint64
	URLs     uint64
	ByStatus map[Status]uint64
	Frontier uint64 // = ByStatus[StatusUnfetched] − Parked
	Sent     uint64 // fingerprints in the URL-sent cache
	Outbox   uint64 // entries waiting in all outboxes
	Marked   uint64 // generated URLs marked as fetched by another site (Batch.FetchedElsewhere, MarkedURLs)
	// Scheduled counts the fetched URLs waiting for their next fetch
	// (a refetch schedule, not due yet: DueURLs lists them by time).
	Scheduled uint64
	// Parked counts the unfetched URLs taken out of the frontier because
	// their host used its budget (Batch.Park).
	Parked uint64
}

// Counts returns the running totals.
func (s *Store) Counts() Counts {
	s.mu.Lock()
	c := s.mu.counts
	s.mu.Unlock()
	out := Counts{Applied: s.AppliedIndex(), URLs: c.urls, ByStatus: map[Status]uint64{}, Frontier: c.byStatus[StatusUnfetched] - c.parked, Sent: c.sentSize, Outbox: c.outbox, Marked: c.marks, Scheduled: c.scheduled, Parked: c.parked}
	for st := StatusUnfetched; st < statusCount; st++ {
		if c.byStatus[st] > 0 {
			out.ByStatus[st] = c.byStatus[st]
		}
	}
	return out
}

// ScanURLs calls fn for every URL record, in key order (hosts contiguous).
func (s *Store) ScanURLs(fn func(URLRecord) error) error {
	it, err := s.ks.newIter([]byte{pURL}, []byte{pURL + 1})
	if err != nil {
		return fmt.Errorf("store: scan: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[1:]
		i := 0
		for i < len(k) && k[i] != 0 {
			i++
		}
		u, ok := urlFromTail(k[:i], k[min(i+1, len(k)):])
		if !ok {
			return fmt.Errorf("store: scan: bad key %q", it.Key())
		}
		rec := URLRecord{URL: u}
		if err := decodeRecord(it.Value(), &rec); err != nil {
			return fmt.Errorf("store: scan %s: %w", u, err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return it.Error()
}

// ScanHostURLs calls fn for every URL record of host, in key order.
func (s *Store) ScanHostURLs(host string, fn func(URLRecord) error) error {
	rev := appendRevHost(nil, host)
	prefix := hostPrefix(nil, pURL, host)
	it, err := s.ks.newIter(prefix, prefixEnd(prefix))
	if err != nil {
		return fmt.Errorf("store: URLs of %s: %w", host, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		u, ok := urlFromTail(rev, it.Key()[len(prefix):])
		if !ok {
			return fmt.Errorf("store: URLs of %s: bad key %q", host, it.Key())
		}
		rec := URLRecord{URL: u}
		if err := decodeRecord(it.Value(), &rec); err != nil {
			return fmt.Errorf("store: URLs of %s: %s: %w", host, u, err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("store: URLs of %s: %w", host, err)
	}
	return nil
}

// Marked is a generated URL marked as fetched by another site
// (Batch.FetchedElsewhere).
type Marked struct {
	URL, Host string
	Round     uint64 // the round that generated it
}

// MarkedURLs returns up to limit of the URLs marked as fetched by another
// site while generated here, with their rounds.
func (s *Store) MarkedURLs(limit int) ([]Marked, error) {
	s.mu.Lock()
	n := s.mu.counts.marks
	s.mu.Unlock()
	if n == 0 {
		return nil, nil
	}
	it, err := s.ks.newIter([]byte{pMark}, []byte{pMark + 1})
	if err != nil {
		return nil, fmt.Errorf("store: marked URLs: %w", err)
	}
	defer it.Close()
	var out []Marked
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		k := it.Key()[1:]
		i := bytes.IndexByte(k, 0)
		var u string
		if i >= 0 {
			u, ok = urlFromTail(k[:i], k[i+1:])
		}
		if i < 0 || !ok {
			return nil, fmt.Errorf("store: marked URLs: bad key %q", it.Key())
		}
		rec, found, err := s.Get(u)
		if err != nil {
			return nil, fmt.Errorf("store: marked URLs: %w", err)
		}
		if found && rec.Status == StatusGenerated {
			out = append(out, Marked{URL: u, Host: hostFromRev(k[:i]), Round: rec.Round})
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("store: marked URLs: %w", err)
	}
	return out, nil
}

// DueURL is a fetched URL's place in the refetch index.
type DueURL struct {
	URL       string
	NextFetch time.Time
}

// DueURLs returns up to limit URLs whose next fetch is at or before t,
// the earliest first: those Batch.MakeDue would put back in the frontier.
func (s *Store) DueURLs(t time.Time, limit int) ([]DueURL, error) {
	if limit <= 0 {
		return nil, nil
	}
	end := binary.BigEndian.AppendUint64([]byte{pDue}, uint64(max(t.UnixMilli(), 0))+1)
	it, err := s.ks.newIter([]byte{pDue}, end)
	if err != nil {
		return nil, fmt.Errorf("store: due URLs: %w", err)
	}
	defer it.Close()
	var out []DueURL
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		k := it.Key()
		if len(k) < 9 {
			return nil, fmt.Errorf("store: due URLs: bad key %q", k)
		}
		rest := k[9:]
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return nil, fmt.Errorf("store: due URLs: bad key %q", k)
		}
		u, ok := urlFromTail(rest[:i], rest[i+1:])
		if !ok {
			return nil, fmt.Errorf("store: due URLs: bad key %q", k)
		}
		out = append(out, DueURL{URL: u, NextFetch: time.UnixMilli(int64(binary.BigEndian.Uint64(k[1:9]))).UTC()})
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("store: due URLs: %w", err)
	}
	return out, nil
}

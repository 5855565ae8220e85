package federation

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/route"
)

// locPrefix keys a host's location in the crawl database's node table:
// located once (by this site or by the site that sent its URLs), it is
// never looked up again. It is a site's one record of where a host is:
// its politeness key (which names its shard, package shard) and its place
// on the globe (the federation's partitioner). A site of shards outside a
// federation records the key alone (PutHostKey: not placed); a Fed that
// needs the place of such a host looks it up then, keeping the key.
const locPrefix = "fed/loc/"

// maxPutsPerEntry bounds an outbox entry (and so a batch on the wire).
const maxPutsPerEntry = 4096

// locateWorkers is how many hosts are located at once.
const locateWorkers = 16

// location is where a host is, for the partitioner.
type location struct {
	key string
	loc partition.Location
	// unplaced: the key alone is known; no GeoIP lookup placed the host
	// (PutHostKey, or a shard's batch of a host not on the globe).
	unplaced bool
}

func (l location) hostLoc(host string) HostLoc {
	return HostLoc{Host: host, Key: l.key, Lat: l.loc.Lat, Lon: l.loc.Lon, Known: l.loc.Known}
}

// Flags in a location record's last byte. A record written before
// locUnplaced existed is placed (its byte is 0 or 1).
const (
	locKnown    = 1 << 0
	locUnplaced = 1 << 1
)

func encodeLocation(l location) []byte {
	b := binary.AppendUvarint(nil, uint64(len(l.key)))
	b = append(b, l.key...)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(l.loc.Lat))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(l.loc.Lon))
	var flags byte
	if l.loc.Known {
		flags |= locKnown
	}
	if l.unplaced {
		flags |= locUnplaced
	}
	return append(b, flags)
}

func decodeLocation(b []byte) (location, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) != n+17 {
		return location{}, fmt.Errorf("federation: host location record of %d bytes", len(b))
	}
	b = b[k:]
	l := location{key: string(b[:n])}
	b = b[n:]
	l.loc.Lat = math.Float64frombits(binary.BigEndian.Uint64(b))
	l.loc.Lon = math.Float64frombits(binary.BigEndian.Uint64(b[8:]))
	if b[16]&^(locKnown|locUnplaced) != 0 {
		return location{}, fmt.Errorf("federation: host location record with flags %#x", b[16])
	}
	l.loc.Known = b[16]&locKnown != 0
	l.unplaced = b[16]&locUnplaced != 0
	return l, nil
}

// recordOf returns host's location record in st, if it has one (placed
// or not).
func recordOf(st *store.Store, host string) (location, bool, error) {
	v, err := st.User(locPrefix + host)
	if err != nil || v == nil {
		return location{}, false, err
	}
	l, err := decodeLocation(v)
	if err != nil {
		return location{}, false, fmt.Errorf("%s%s: %w", locPrefix, host, err)
	}
	return l, true, nil
}

// ReadHostLoc returns host's location as st records it (the site's one
// record of it: its politeness key, and its place if it was placed), and
// whether st has one.
func ReadHostLoc(st *store.Store, host string) (HostLoc, bool, error) {
	l, ok, err := recordOf(st, host)
	if err != nil || !ok {
		return HostLoc{}, false, err
	}
	return l.hostLoc(host), true, nil
}

// PutHostKey records in b host's politeness key, not placed on the globe
// (a site of shards routing between its shards): a Fed that needs its
// place looks it up then, and keeps the key.
func PutHostKey(b *store.Batch, host, key string) {
	b.PutUser(locPrefix+host, encodeLocation(location{key: key, unplaced: true}))
}

// locations is the memory of where hosts are.
type locations struct {
	mu sync.Mutex
	m  map[string]location
}

func (f *Fed) cachedLoc(host string) (location, bool, error) {
	f.locs.mu.Lock()
	l, ok := f.locs.m[host]
	f.locs.mu.Unlock()
	if ok {
		return l, true, nil
	}
	l, ok, err := recordOf(f.st, host)
	if err != nil {
		return l, false, fmt.Errorf("federation: location of %s: %w", host, err)
	}
	if !ok || l.unplaced {
		return l, false, nil // not placed: located when routed (locateAll)
	}
	f.remember(host, l)
	return l, true, nil
}

// remember keeps a host's location (copies: a decoded batch's strings
// share its whole body).
func (f *Fed) remember(host string, l location) {
	l.key = strings.Clone(l.key)
	f.locs.mu.Lock()
	f.locs.m[strings.Clone(host)] = l
	f.locs.mu.Unlock()
}

// locate finds where host is: its addresses (the partition key is the
// smallest) and the GeoIP location of that address. A host that does not
// resolve (Resolve gives no addresses) is keyed by its name, at no known
// location; a lookup that failed places nothing (its error is returned):
// the location is recorded for good, and the other sites place the host by
// the addresses they see.
func (f *Fed) locate(ctx context.Context, host string) (location, error) {
	name := host
	var ips []netip.Addr
	if f.o.Resolve != nil {
		var err error
		if ips, err = f.o.Resolve(ctx, name); err != nil {
			return location{}, fmt.Errorf("federation: locate %s: %w", host, err)
		}
	} else if ip, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		ips = []netip.Addr{ip}
	}
	l := location{key: partition.Key(name, ips)}
	if f.o.GeoIP != nil && len(ips) > 0 {
		ip := slices.MinFunc(ips, func(a, b netip.Addr) int { return a.Compare(b) })
		l.loc = f.o.GeoIP.Locate(ip)
	}
	return l, nil
}

// Owners returns the owner of each host that another site owns, as Route
// picks it. Hosts not located yet are located (in parallel) and recorded
// in the crawl database, so that they are located once.
func (f *Fed) Owners(ctx context.Context, hosts []string) (map[string]string, error) {
	locs, err := f.locateAll(ctx, hosts)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for h, l := range locs {
		if o := f.primary(h, l); o != f.o.Self {
			out[h] = o
		}
	}
	return out, nil
}

// locateAll returns the location of each host. Hosts not located yet are
// located (in parallel) and recorded in the crawl database (fed/loc/), so
// that they are located once.
func (f *Fed) locateAll(ctx context.Context, hosts []string) (map[string]location, error) {
	locs := make(map[string]location, len(hosts))
	var todo []string
	keep := map[string]string{} // hosts recorded with a key alone: that key
	for _, h := range hosts {
		l, ok, err := f.cachedLoc(h)
		if err != nil {
			return nil, err
		}
		switch {
		case ok:
			locs[h] = l
		case l.unplaced:
			// Its shard routed it by this key: placed now, the key
			// stays (a host's shard never changes).
			todo = append(todo, h)
			keep[h] = l.key
		default:
			todo = append(todo, h)
		}
	}
	if len(todo) > 0 {
		found := make([]location, len(todo))
		errs := make([]error, len(todo))
		var wg sync.WaitGroup
		next := make(chan int)
		for range min(locateWorkers, len(todo)) {
			wg.Go(func() { // owner: Owners; ends when next closes
				for i := range next {
					found[i], errs[i] = f.locate(ctx, todo[i])
				}
			})
		}
		for i := range todo {
			next <- i
		}
		close(next)
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, err := range errs {
			if err != nil {
				return nil, err // the first: the others are alike
			}
		}
		b := store.NewBatch()
		for i, h := range todo {
			if k, ok := keep[h]; ok {
				found[i].key = k
			}
			locs[h] = found[i]
			b.PutUser(locPrefix+h, encodeLocation(found[i]))
			if b.Len() >= 5000 {
				if err := f.apply(ctx, b); err != nil {
					return nil, fmt.Errorf("federation: record host locations: %w", err)
				}
				b = store.NewBatch()
			}
		}
		if b.Len() > 0 {
			if err := f.apply(ctx, b); err != nil {
				return nil, fmt.Errorf("federation: record host locations: %w", err)
			}
		}
		for i, h := range todo {
			f.remember(h, found[i])
		}
	}
	return locs, nil
}

// Route keeps, from urls, those of this site's hosts and writes the others
// into b as outbox entries for their owners, in their wire encoding (see
// route.Router). The owner of a host is its primary owner (every site up):
// the outbox hands over to the next owner what a site down past its grace
// period does not take. A URL in the URL-sent cache (sent before, to its
// owner, or enqueued for it), unless Moved, is left out and its cash goes
// to the entry's virtual share; the others enter the cache in b, so that
// the cache is written with the entries that send them. Hosts are located first
// (locateAll).
func (f *Fed) Route(ctx context.Context, urls []route.Remote, b *store.Batch) ([]route.Remote, route.Sent, error) {
	seen := map[string]bool{}
	var hosts []string
	for _, u := range urls {
		if h := hostOf(u.URL); !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	locs, err := f.locateAll(ctx, hosts)
	if err != nil {
		return nil, route.Sent{}, err
	}
	owner := make(map[string]string, len(locs))
	for h, l := range locs {
		owner[h] = f.primary(h, l)
	}
	var local []route.Remote
	by := map[string][]route.Remote{}
	var sent route.Sent
	var cash opic.Sum
	for _, u := range urls {
		o := owner[hostOf(u.URL)]
		if o == f.o.Self {
			local = append(local, u)
			continue
		}
		by[o] = append(by[o], u)
		sent.URLs++
		cash.Add(u.Cash)
	}
	sent.Cash = cash.Value()
	for _, o := range slices.Sorted(maps.Keys(by)) {
		if err := f.enqueue(b, o, by[o], locs); err != nil {
			return nil, route.Sent{}, err
		}
	}
	return local, sent, nil
}

// enqueue writes urls for site owner into b as outbox entries: URLs in the
// URL-sent cache (unless Moved) or twice in urls leave their cash to the
// first entry's virtual share; the others are added to the cache in b.
func (f *Fed) enqueue(b *store.Batch, owner string, urls []route.Remote, locs map[string]location) error {
	puts := make([]Put, 0, len(urls))
	var virtual opic.Sum
	dup := make(map[uint64]bool, len(urls))
	hits := 0
	lookups := 0
	for _, u := range urls {
		fp := store.Fingerprint(u.URL)
		hit := dup[fp]
		if !hit && !u.Moved {
			var err error
			if hit, err = f.st.SentContains(fp); err != nil {
				return fmt.Errorf("federation: URL-sent cache: %w", err)
			}
			lookups++
		}
		if hit {
			virtual.Add(u.Cash)
			hits++
			continue
		}
		dup[fp] = true
		b.SentCheckAdd(fp, f.o.SentCache)
		puts = append(puts, Put{URL: u.URL, Cash: u.Cash, Depth: u.Depth})
	}
	for _, e := range f.entries(owner, puts, virtual.Value(), locs) {
		b.OutboxEnqueue(owner, e)
	}
	f.stats.hits.Add(int64(hits))
	f.stats.lookups.Add(int64(lookups))
	return nil
}

// Returned names the hosts, among hosts (this site's frontier), that
// another site owns as this site sees the federation now, with that site
// (see route.HandBack): hosts this site took over while their owner was
// down, now that it is back. A host never located is this site's.
func (f *Fed) Returned(_ context.Context, hosts []string) (map[string]route.Owner, error) {
	var out map[string]route.Owner
	for _, h := range hosts {
		l, ok, err := f.cachedLoc(h)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if o := f.owner(h, l); o != f.o.Self && o != "" {
			if out == nil {
				out = map[string]route.Owner{}
			}
			out[h] = route.Owner{Site: o}
		}
	}
	return out, nil
}

// Away reports whether host is another site's now although this site may
// hold it (only after a site came back), or is this site's and waits for
// the site that held it to hand it back (Waiting) (see route.HandBack).
func (f *Fed) Away(host string) bool {
	if f.Waiting(host) {
		return true
	}
	if !f.returned.Load() && (f.site == nil || !f.site.returned.Load()) {
		return false
	}
	l, ok, err := f.cachedLoc(host)
	if err != nil || !ok {
		return false
	}
	o := f.owner(host, l)
	return o != f.o.Self && o != ""
}

// primary is a host's owner when every site is up.
func (f *Fed) primary(host string, l location) string {
	return f.part.Owner(partition.Host{Name: host, Key: l.key, Loc: l.loc}, nil)
}

// owner is a host's owner as this site sees the federation now: sites
// down past their grace period own nothing, and the hosts of a site down
// go to the next site up (sharded or not).
func (f *Fed) owner(host string, l location) string {
	h := partition.Host{Name: host, Key: l.key, Loc: l.loc}
	if o := f.part.Owner(h, nil); !f.isDown(o) {
		return o // its primary owner, up
	}
	return f.part.Owner(h, f.isDown)
}

// entries cuts puts for owner into encoded outbox entries that the crawl
// database takes (at most maxEntryBytes, maxPutsPerEntry puts), each with
// the locations of its hosts; the first carries virtual (one entry with
// no puts carries it if there are none).
func (f *Fed) entries(owner string, puts []Put, virtual float64, locs map[string]location) [][]byte {
	if len(puts) == 0 {
		if virtual == 0 {
			return nil
		}
		return [][]byte{(&Batch{From: f.sender(), To: owner, Virtual: virtual}).Append(nil)}
	}
	return f.cutEntries(owner, len(puts), func(i int) string { return puts[i].URL }, 24, locs,
		func(b *Batch, lo, hi int) {
			b.Puts = puts[lo:hi]
			if lo == 0 {
				b.Virtual = virtual
			}
		})
}

// cutEntries cuts n records for owner into encoded outbox entries
// (CutEntries), with the locations in locs of their hosts.
func (f *Fed) cutEntries(owner string, n int, url func(int) string, fixed int, locs map[string]location, fill func(b *Batch, lo, hi int)) [][]byte {
	loc := func(h string) (HostLoc, bool) {
		l, ok := locs[h]
		return l.hostLoc(h), ok
	}
	return CutEntries(f.sender(), owner, n, url, fixed, loc, fill)
}

// CutEntries cuts n records, record i for url(i) and costing fixed bytes
// beside its URL, into encoded outbox entries from one sender to another
// that the crawl database takes: at most maxPutsPerEntry records and about
// maxEntryBytes each (a URL is at most a few KiB, so an entry stays under
// the database's 64 KiB limit on one). Each entry carries the location
// loc gives of each of its hosts (none where loc reports false); fill puts
// records [lo, hi) into an entry's batch.
func CutEntries(from, to string, n int, url func(int) string, fixed int, loc func(host string) (HostLoc, bool), fill func(b *Batch, lo, hi int)) [][]byte {
	var out [][]byte
	for lo := 0; lo < n; {
		b := &Batch{From: from, To: to}
		hosts := map[string]bool{}
		size := 64
		hi := lo
		for hi < n && hi-lo < maxPutsPerEntry {
			u := url(hi)
			h := hostOf(u)
			add := len(u) + fixed
			var hl HostLoc
			var located bool
			if !hosts[h] {
				hl, located = loc(h)
				add += len(h) + len(hl.Key) + 32
			}
			if hi > lo && size+add > maxEntryBytes {
				break
			}
			size += add
			if !hosts[h] {
				hosts[h] = true
				if located {
					b.Hosts = append(b.Hosts, hl)
				}
			}
			hi++
		}
		fill(b, lo, hi)
		out = append(out, b.Append(nil))
		lo = hi
	}
	return out
}

// maxEntryBytes bounds an encoded outbox entry, under the crawl
// database's limit on one (64 KiB).
const maxEntryBytes = 56 << 10

// hostOf names a URL's host as the rounds do.
func hostOf(u string) string { return crawl.HostOf(u) }

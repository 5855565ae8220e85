package federation

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/partition"
	"github.com/meridian-crawler/meridian/rounds"
)

// locPrefix keys a host's location in the crawl database's node table:
// located once (by this site or by the site that sent its URLs), it is
// never looked up again.
const locPrefix = "fed/loc/"

// maxPutsPerEntry bounds an outbox entry (and so a batch on the wire).
const maxPutsPerEntry = 4096

// locateWorkers is how many hosts are located at once.
const locateWorkers = 16

// location is where a host is, for the partitioner.
type location struct {
	key string
	loc partition.Location
}

func (l location) hostLoc(host string) HostLoc {
	return HostLoc{Host: host, Key: l.key, Lat: l.loc.Lat, Lon: l.loc.Lon, Known: l.loc.Known}
}

func encodeLocation(l location) []byte {
	b := binary.AppendUvarint(nil, uint64(len(l.key)))
	b = append(b, l.key...)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(l.loc.Lat))
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(l.loc.Lon))
	if l.loc.Known {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return b
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
	l.loc.Known = b[16] == 1
	return l, nil
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
	v, err := f.st.User(locPrefix + host)
	if err != nil {
		return l, false, fmt.Errorf("federation: location of %s: %w", host, err)
	}
	if v == nil {
		return l, false, nil
	}
	if l, err = decodeLocation(v); err != nil {
		return l, false, err
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
// resolve is keyed by its name, at no known location.
func (f *Fed) locate(ctx context.Context, host string) location {
	name := host
	var ips []netip.Addr
	if f.o.Resolve != nil {
		ips, _ = f.o.Resolve(ctx, name)
	} else if ip, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		ips = []netip.Addr{ip}
	}
	l := location{key: partition.Key(name, ips)}
	if f.o.GeoIP != nil && len(ips) > 0 {
		ip := slices.MinFunc(ips, func(a, b netip.Addr) int { return a.Compare(b) })
		l.loc = f.o.GeoIP.Locate(ip)
	}
	return l
}

// Owners returns the owner of each host that another site owns (see
// rounds.Router). Hosts not located yet are located (in parallel) and
// recorded in the crawl database, so that they are located once.
func (f *Fed) Owners(ctx context.Context, hosts []string) (map[string]string, error) {
	locs := make(map[string]location, len(hosts))
	var todo []string
	for _, h := range hosts {
		l, ok, err := f.cachedLoc(h)
		if err != nil {
			return nil, err
		}
		if ok {
			locs[h] = l
		} else {
			todo = append(todo, h)
		}
	}
	if len(todo) > 0 {
		found := make([]location, len(todo))
		var wg sync.WaitGroup
		next := make(chan int)
		for range min(locateWorkers, len(todo)) {
			wg.Go(func() { // owner: Owners; ends when next closes
				for i := range next {
					found[i] = f.locate(ctx, todo[i])
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
		b := store.NewBatch()
		for i, h := range todo {
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
	out := map[string]string{}
	for h, l := range locs {
		if o := f.primary(h, l); o != f.o.Self {
			out[h] = o
		}
	}
	return out, nil
}

// Returned names the hosts, among hosts (this site's frontier), that
// another site owns as this site sees the federation now, with that site
// (see rounds.Router): hosts this site took over while their owner was
// down, now that it is back. A host never located is this site's.
func (f *Fed) Returned(_ context.Context, hosts []string) (map[string]string, error) {
	var out map[string]string
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
				out = map[string]string{}
			}
			out[h] = o
		}
	}
	return out, nil
}

// Away reports whether host is another site's now although this site may
// hold it (only after a site came back), or is this site's and waits for
// the site that held it to hand it back (Waiting) (see rounds.Router).
func (f *Fed) Away(host string) bool {
	if f.Waiting(host) {
		return true
	}
	if !f.returned.Load() {
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
// down past their grace period own nothing.
func (f *Fed) owner(host string, l location) string {
	return f.part.Owner(partition.Host{Name: host, Key: l.key, Loc: l.loc}, f.isDown)
}

// Payloads encodes puts for owner into outbox entries (see rounds.Router).
func (f *Fed) Payloads(owner string, puts []rounds.Remote) ([][]byte, error) {
	ps := make([]Put, len(puts))
	locs := map[string]location{}
	for i, p := range puts {
		ps[i] = Put{URL: p.URL, Cash: p.Cash, Depth: p.Depth}
		h := hostOf(p.URL)
		if _, ok := locs[h]; ok {
			continue
		}
		l, ok, err := f.cachedLoc(h)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("federation: host %s of %s was never located", h, p.URL)
		}
		locs[h] = l
	}
	return f.entries(owner, ps, locs), nil
}

// entries cuts puts for owner into encoded outbox entries that the crawl
// database takes (at most maxEntryBytes, maxPutsPerEntry puts), each with
// the locations of its hosts.
func (f *Fed) entries(owner string, puts []Put, locs map[string]location) [][]byte {
	return f.cutEntries(owner, len(puts), func(i int) string { return puts[i].URL }, 24, locs,
		func(b *Batch, lo, hi int) { b.Puts = puts[lo:hi] })
}

// cutEntries cuts n records, record i for url(i) and costing fixed bytes
// beside its URL, into encoded outbox entries for owner: at most
// maxPutsPerEntry records and about maxEntryBytes each, with the locations
// of their hosts; fill puts records [lo, hi) into an entry's batch.
func (f *Fed) cutEntries(owner string, n int, url func(int) string, fixed int, locs map[string]location, fill func(b *Batch, lo, hi int)) [][]byte {
	var out [][]byte
	for lo := 0; lo < n; {
		b := &Batch{From: f.o.Self, To: owner}
		hosts := map[string]bool{}
		size := 64
		hi := lo
		for hi < n && hi-lo < maxPutsPerEntry {
			u := url(hi)
			h := hostOf(u)
			add := len(u) + fixed
			if !hosts[h] {
				add += len(h) + len(locs[h].key) + 32
			}
			if hi > lo && size+add > maxEntryBytes {
				break
			}
			size += add
			if !hosts[h] {
				hosts[h] = true
				if l, ok := locs[h]; ok {
					b.Hosts = append(b.Hosts, l.hostLoc(h))
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

// Package dnscache resolves host names to their IPv6 and IPv4 addresses
// through a DNS server and caches the answers for their TTL, negative
// answers included.
//
// A name gets two questions, AAAA and A, sent at once on one UDP socket
// (one round trip, one more query than A alone), with EDNS0; a truncated
// answer is asked again over TCP. The two answers make one cache entry
// whose addresses are in the order to connect in (RFC 8305: IPv6 first,
// then the families alternate). Concurrent lookups of one name share one
// query. The Resolver starts no goroutines.
package dnscache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/miekg/dns"
)

// Sentinel errors.
var (
	// ErrNotFound means the name does not exist (NXDOMAIN to either
	// question), has neither AAAA nor A records (NODATA to both) or is not
	// a valid host name. It is cached for the negative TTL.
	ErrNotFound = errors.New("dnscache: host not found")
	// ErrServer means the server answered with an error code such as SERVFAIL
	// or REFUSED, or an answer that does not match the question. Not cached;
	// when only one of the two questions fails so, the other's addresses
	// are the answer (see Lookup).
	ErrServer = errors.New("dnscache: server failure")
)

// Options configure a Resolver. Zero fields get the documented defaults.
type Options struct {
	// Server is the "host:port" of the DNS server (a missing port means 53).
	// "" uses the servers of /etc/resolv.conf, tried in order, or the Go
	// resolver (net.DefaultResolver) if that file names none.
	Server string
	// Timeout bounds one query to one server. Default 2 s.
	Timeout time.Duration
	// MinTTL and MaxTTL clamp the TTL of positive answers. Default 5 s and 6 h.
	MinTTL, MaxTTL time.Duration
	// NegativeTTL is how long a negative answer is cached at most (RFC 2308:
	// the SOA's TTL and minimum, if lower, win; MinTTL still applies).
	// Default 1 min.
	NegativeTTL time.Duration
	// MaxEntries bounds the cache. When it is full, expired entries and then
	// arbitrary ones are dropped until it is half full. Default 1<<20.
	MaxEntries int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// LocalAddrs are the local addresses queries leave from (UDP and TCP),
	// as the fetcher's connections do (fetcher.Options.LocalAddrs). A
	// server given by IP address is queried from the address of its family
	// that localaddr.Pick chooses for it; a server given by name from the
	// first IPv4 address, or the first address if none is IPv4. A server
	// whose family none of them has is not queried (its lookups fail with
	// an error saying so), and New fails if that leaves no server. Every
	// address must be the machine's (Validate binds a socket to each).
	// Without servers (the Go resolver), its queries are bound too. nil →
	// the system chooses.
	LocalAddrs []netip.Addr
}

// The defaults of Options.
const (
	DefaultTimeout     = 2 * time.Second
	DefaultMinTTL      = 5 * time.Second
	DefaultMaxTTL      = 6 * time.Hour
	DefaultNegativeTTL = time.Minute
	DefaultMaxEntries  = 1 << 20
	// SystemTTL is the TTL given to answers of the Go resolver, which does
	// not report TTLs (clamped to [MinTTL, MaxTTL]).
	SystemTTL = time.Minute
	// MaxAddrs bounds the addresses kept per name, both families together.
	MaxAddrs = 32
)

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MinTTL == 0 {
		o.MinTTL = DefaultMinTTL
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = DefaultMaxTTL
	}
	if o.NegativeTTL == 0 {
		o.NegativeTTL = DefaultNegativeTTL
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports every problem with o (after EnsureDefaults) at once.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("dnscache: "+format, args...)) }
	if o.Server != "" {
		if _, err := serverAddr(o.Server); err != nil {
			bad("server %q: %v", o.Server, err)
		}
	}
	if o.Timeout < 0 {
		bad("timeout %v is negative", o.Timeout)
	}
	if o.MinTTL < 0 || o.MaxTTL < 0 || o.NegativeTTL < 0 {
		bad("TTLs must not be negative (min %v, max %v, negative %v)", o.MinTTL, o.MaxTTL, o.NegativeTTL)
	}
	if o.MinTTL > o.MaxTTL {
		bad("min TTL %v is above max TTL %v", o.MinTTL, o.MaxTTL)
	}
	if o.MaxEntries < 0 {
		bad("max entries %d is negative", o.MaxEntries)
	}
	for _, a := range o.LocalAddrs {
		if err := localaddr.Check(a); err != nil {
			bad("local address %w", err)
		}
	}
	return errors.Join(errs...)
}

// Stats are cumulative counters of a Resolver.
type Stats struct {
	Hits      uint64 // lookups answered from the cache (negative answers included)
	Misses    uint64 // lookups that sent a query
	Shared    uint64 // lookups that waited for another lookup's query
	Literals  uint64 // IP-literal hosts, returned without a query
	NotFound  uint64 // lookups that returned ErrNotFound
	Partial   uint64 // lookups answered by one family while the other's question failed
	Errors    uint64 // lookups that failed otherwise (timeouts, server errors, cancellation)
	Queries   uint64 // DNS messages sent, UDP and TCP
	TCP       uint64 // of Queries, TCP retries after a truncated UDP answer
	Evictions uint64 // entries dropped to bound the cache
	Entries   int    // entries in the cache now
}

// Resolver is a caching DNS resolver. It is goroutine-safe; each name has at
// most one query in flight.
type Resolver struct {
	o       Options
	servers []upstream    // empty: use sys
	sys     *net.Resolver // when no server is known

	mu struct {
		sync.Mutex
		cache  map[string]entry
		flight map[string]*call
	}

	hits, misses, shared, literals, notFound, partial, errors, queries, tcpQueries, evictions atomic.Uint64
}

// entry is a cached answer: addresses, or a negative answer (err set).
type entry struct {
	addrs  []netip.Addr
	expiry time.Time
	err    error
	// partial, with addrs, is why one family's question failed: the
	// addresses are the other family's alone. Such an entry is not cached.
	partial error
}

// upstream is a DNS server and the clients that query it.
type upstream struct {
	addr     string      // "ip:port" or "host:port"
	udp, tcp *dns.Client // nil if err is set
	err      error       // why it cannot be queried (no local address of its family)
}

// call is a query in flight that other lookups of the name wait for.
type call struct {
	done      chan struct{}
	entry     entry
	cancelled bool // the querying lookup's context ended: waiters retry
}

// New returns a Resolver for o (copied, with defaults filled in).
func New(o Options) (*Resolver, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.LocalAddrs = slices.Clone(o.LocalAddrs) // the caller's slice stays the caller's
	for i, a := range o.LocalAddrs {
		o.LocalAddrs[i] = a.Unmap()
	}
	r := &Resolver{o: o}
	var addrs []string
	if o.Server != "" {
		s, _ := serverAddr(o.Server) // checked by Validate
		addrs = []string{s}
	} else if cfg, err := dns.ClientConfigFromFile("/etc/resolv.conf"); err == nil && len(cfg.Servers) > 0 {
		for _, s := range cfg.Servers {
			addrs = append(addrs, net.JoinHostPort(s, cfg.Port))
		}
	} else {
		r.sys = net.DefaultResolver
		if len(o.LocalAddrs) > 0 {
			r.sys = &net.Resolver{PreferGo: true, Dial: r.dialSystem}
		}
	}
	var errs []error
	for _, a := range addrs {
		s := r.newServer(a)
		if s.err != nil {
			errs = append(errs, s.err)
		}
		r.servers = append(r.servers, s)
	}
	if len(errs) > 0 && len(errs) == len(r.servers) {
		return nil, fmt.Errorf("dnscache: no DNS server can be queried: %w", errors.Join(errs...))
	}
	r.mu.cache = make(map[string]entry)
	r.mu.flight = make(map[string]*call)
	return r, nil
}

// newServer returns the server at addr ("host:port") with its clients,
// bound to the local address chosen for it, if any.
func (r *Resolver) newServer(addr string) upstream {
	s := upstream{
		addr: addr,
		udp:  &dns.Client{Net: "udp", Timeout: r.o.Timeout, UDPSize: ednsSize},
		tcp:  &dns.Client{Net: "tcp", Timeout: r.o.Timeout},
	}
	if len(r.o.LocalAddrs) == 0 {
		return s
	}
	local, err := r.localFor(addr)
	if err != nil {
		return upstream{addr: addr, err: fmt.Errorf("server %s: %w", addr, err)}
	}
	s.udp.Dialer = &net.Dialer{Timeout: r.o.Timeout, LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0))}
	s.tcp.Dialer = &net.Dialer{Timeout: r.o.Timeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0))}
	return s
}

// localFor returns the local address queries to addr ("host:port") leave
// from (see Options.LocalAddrs).
func (r *Resolver) localFor(addr string) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.Addr{}, err
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return localaddr.Pick(r.o.LocalAddrs, ip)
	}
	for _, a := range r.o.LocalAddrs {
		if a.Is4() {
			return a, nil
		}
	}
	return r.o.LocalAddrs[0], nil
}

// dialSystem dials for the Go resolver (no servers known) from the local
// address chosen for the server it asks.
func (r *Resolver) dialSystem(ctx context.Context, network, addr string) (net.Conn, error) {
	local, err := r.localFor(addr)
	if err != nil {
		return nil, fmt.Errorf("dnscache: server %s: %w", addr, err)
	}
	d := net.Dialer{Timeout: r.o.Timeout}
	switch network {
	case "udp", "udp4", "udp6":
		d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0))
	default:
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0))
	}
	return d.DialContext(ctx, network, addr)
}

// serverAddr returns s as "host:port", adding port 53 if it has none.
func serverAddr(s string) (string, error) {
	if _, _, err := net.SplitHostPort(s); err == nil {
		return s, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return netip.AddrPortFrom(a, 53).String(), nil
	}
	if _, ok := dns.IsDomainName(s); ok && !strings.Contains(s, ":") {
		return net.JoinHostPort(s, "53"), nil
	}
	return "", errors.New("not host:port")
}

// Lookup returns the IPv6 and IPv4 addresses of host, in the order to
// connect in (IPv6 first, then alternating families), and when they
// expire. An IP literal (also "[v6]"; one with a zone is no host name)
// is returned as is (an IPv4-mapped one as IPv4), expiring after MaxTTL,
// without a query. A negative answer is an error wrapping ErrNotFound;
// other failures are not cached. When one family's question fails (a
// timeout, SERVFAIL) and the other has addresses, those are the answer,
// expiring after MinTTL, and not cached: the next lookup asks both
// questions again. The returned slice is the caller's.
func (r *Resolver) Lookup(ctx context.Context, host string) (addrs []netip.Addr, expiry time.Time, err error) {
	e := r.lookup(ctx, host)
	return r.result(e)
}

// lookup returns host's entry: from the cache, another lookup's query or
// its own.
func (r *Resolver) lookup(ctx context.Context, host string) entry {
	if maybeLiteral(host) {
		if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil && a.Zone() == "" {
			r.literals.Add(1)
			return entry{addrs: []netip.Addr{a.Unmap()}, expiry: r.o.Now().Add(r.o.MaxTTL)}
		}
	}
	name, ok := canonicalName(host)
	if !ok {
		return entry{err: fmt.Errorf("dnscache: %q is not a valid host name: %w", truncate(host), ErrNotFound)}
	}
	// A lookup retries only if the query it waited for was cancelled by its
	// owner's context; bound that in case of a stream of cancelled owners.
	const attempts = 4
	for attempt := 0; ; attempt++ {
		now := r.o.Now()
		r.mu.Lock()
		if e, ok := r.mu.cache[name]; ok && now.Before(e.expiry) {
			r.mu.Unlock()
			r.hits.Add(1)
			return e
		}
		if c := r.mu.flight[name]; c != nil {
			r.mu.Unlock()
			r.shared.Add(1)
			select {
			case <-c.done:
			case <-ctx.Done():
				return entry{err: fmt.Errorf("dnscache: lookup %s: %w", name, ctx.Err())}
			}
			if c.cancelled && ctx.Err() == nil && attempt < attempts-1 {
				continue
			}
			return c.entry
		}
		c := &call{done: make(chan struct{})}
		r.mu.flight[name] = c
		r.mu.Unlock()

		r.misses.Add(1)
		c.entry = r.query(ctx, name)
		c.cancelled = ctxErr(ctx) != nil
		r.mu.Lock()
		delete(r.mu.flight, name)
		if !c.entry.expiry.IsZero() && c.entry.partial == nil {
			r.storeLocked(name, c.entry)
		}
		r.mu.Unlock()
		close(c.done)
		return c.entry
	}
}

// Settled returns host's addresses where two lookups of one name must
// agree, as when a host is placed at a site or in a shard by its addresses
// (partition.Key: by the least of them, IPv4 before IPv6): a name that
// does not exist has no addresses (and no error), and a lookup that fails
// otherwise (a timeout, a server failure) is tried again, after a back-off
// from 100 ms doubling to 5 s, until it is answered or ctx ends (its last
// error is returned then). A lookup that failed gives no answer, so it
// must not place a host: it would place it by its name alone, and
// elsewhere the same host is placed by its addresses. A partial answer
// (one family's question failed) is settled if it has IPv4 addresses (the
// AAAA question failed: IPv6 addresses sort after them, so they could not
// change the least) and is tried again if it has IPv6 ones only (the A
// question failed: an IPv4 address would come first).
func (r *Resolver) Settled(ctx context.Context, host string) ([]netip.Addr, error) {
	wait := 100 * time.Millisecond
	for {
		e := r.lookup(ctx, host)
		addrs, _, err := r.result(e)
		switch {
		case err == nil && (e.partial == nil || addrs[0].Is4()): // a partial answer is of one family
			return addrs, nil
		case err == nil:
			err = e.partial
		case errors.Is(err, ErrNotFound):
			return nil, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("dnscache: no settled answer for %s: %w", truncate(host), err)
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// result turns an entry into Lookup's results and counts its outcome.
func (r *Resolver) result(e entry) ([]netip.Addr, time.Time, error) {
	switch {
	case e.err == nil:
		if e.partial != nil {
			r.partial.Add(1)
		}
		return append([]netip.Addr(nil), e.addrs...), e.expiry, nil
	case errors.Is(e.err, ErrNotFound):
		r.notFound.Add(1)
	default:
		r.errors.Add(1)
	}
	return nil, e.expiry, e.err
}

// storeLocked caches e, first making room if the cache is full.
func (r *Resolver) storeLocked(name string, e entry) {
	cache := r.mu.cache
	if _, ok := cache[name]; !ok && len(cache) >= r.o.MaxEntries {
		now := r.o.Now()
		n := 0
		for k, v := range cache {
			if !now.Before(v.expiry) {
				delete(cache, k)
				n++
			}
		}
		// Map iteration order is unspecified and varies, so this drops an
		// arbitrary half.
		for k := range cache {
			if len(cache) <= r.o.MaxEntries/2 {
				break
			}
			delete(cache, k)
			n++
		}
		r.evictions.Add(uint64(n))
	}
	cache[name] = e
}

// Stats returns a snapshot of the counters.
func (r *Resolver) Stats() Stats {
	r.mu.Lock()
	n := len(r.mu.cache)
	r.mu.Unlock()
	return Stats{
		Hits:      r.hits.Load(),
		Misses:    r.misses.Load(),
		Shared:    r.shared.Load(),
		Literals:  r.literals.Load(),
		NotFound:  r.notFound.Load(),
		Partial:   r.partial.Load(),
		Errors:    r.errors.Load(),
		Queries:   r.queries.Load(),
		TCP:       r.tcpQueries.Load(),
		Evictions: r.evictions.Load(),
		Entries:   n,
	}
}

// maybeLiteral reports whether host could be an IP literal: IPv6 has a ':',
// and IPv4 starts and ends with a digit (a failed netip.ParseAddr allocates
// its error, so host names skip it).
func maybeLiteral(host string) bool {
	if host == "" {
		return false
	}
	first, last := host[0], host[len(host)-1]
	return strings.IndexByte(host, ':') >= 0 || first >= '0' && first <= '9' && last >= '0' && last <= '9'
}

// canonicalName lower-cases host, drops a trailing dot and checks that it is
// a DNS name of at most 253 octets with labels of 1 to 63 octets.
func canonicalName(host string) (string, bool) {
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return "", false
	}
	lower := true
	label := 0
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case c == '.':
			if label == 0 {
				return "", false
			}
			label = 0
			continue
		case c >= 'A' && c <= 'Z':
			lower = false
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return "", false
		}
		if label++; label > 63 {
			return "", false
		}
	}
	if label == 0 {
		return "", false
	}
	if !lower {
		host = strings.ToLower(host)
	}
	return host, true
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

package dnscache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// ednsSize is the UDP payload size advertised with EDNS0 (the DNS flag day
// 2020 value, which avoids IP fragmentation).
const ednsSize = 1232

// query resolves name (canonical) and returns the entry to cache; an entry
// with a zero expiry is a transient failure and is not cached.
func (r *Resolver) query(ctx context.Context, name string) entry {
	if r.sys != nil {
		return r.querySystem(ctx, name)
	}
	fqdn := dns.Fqdn(name)
	var errs []error
	for _, s := range r.servers {
		if s.err != nil {
			errs = append(errs, fmt.Errorf("dnscache: lookup %s: %w", name, s.err))
			continue
		}
		server := s.addr
		m := new(dns.Msg)
		m.SetQuestion(fqdn, dns.TypeA)
		m.SetEdns0(ednsSize, false)
		resp, err := r.exchange(ctx, s.udp, m, server)
		if err == nil && resp.Truncated {
			r.tcpQueries.Add(1)
			resp, err = r.exchange(ctx, s.tcp, m, server)
		}
		if err := ctxErr(ctx); err != nil {
			return entry{err: fmt.Errorf("dnscache: lookup %s: %w", name, err)}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("dnscache: lookup %s at %s: %w", name, server, err))
			continue
		}
		e, err := r.answer(name, fqdn, resp)
		if err != nil {
			errs = append(errs, fmt.Errorf("dnscache: lookup %s at %s: %w", name, server, err))
			continue
		}
		return e
	}
	return entry{err: errors.Join(errs...)}
}

// ctxErr is ctx.Err(), or DeadlineExceeded once ctx's deadline has passed
// (a socket deadline set from it can fire before ctx's own timer).
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// exchange sends m to server with c and reads the answer, giving up after
// the Timeout or as soon as ctx ends.
func (r *Resolver) exchange(ctx context.Context, c *dns.Client, m *dns.Msg, server string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	r.queries.Add(1)
	co, err := c.DialContext(ctx, server)
	if err != nil {
		return nil, err
	}
	defer co.Close()
	// Unblock the read when ctx is cancelled (its deadline alone only covers
	// timeouts).
	stop := context.AfterFunc(ctx, func() { co.SetDeadline(time.Now()) })
	defer stop()
	resp, _, err := c.ExchangeWithConnContext(ctx, m, co)
	return resp, err
}

// answer interprets a response to the A query for fqdn.
func (r *Resolver) answer(name, fqdn string, resp *dns.Msg) (entry, error) {
	if len(resp.Question) != 1 || !strings.EqualFold(resp.Question[0].Name, fqdn) || resp.Question[0].Qtype != dns.TypeA {
		return entry{}, fmt.Errorf("answer to another question: %w", ErrServer)
	}
	now := r.o.Now()
	switch resp.Rcode {
	case dns.RcodeSuccess:
	case dns.RcodeNameError:
		return r.negative(name, "NXDOMAIN", resp, now), nil
	default:
		return entry{}, fmt.Errorf("rcode %s: %w", dns.RcodeToString[resp.Rcode], ErrServer)
	}
	ttl := uint32(math.MaxUint32)
	var addrs []netip.Addr
	for _, rr := range resp.Answer {
		a, ok := rr.(*dns.A)
		if !ok {
			if rr.Header().Rrtype == dns.TypeCNAME {
				ttl = min(ttl, rr.Header().Ttl) // the chain expires with its shortest link
			}
			continue
		}
		ip, ok := netip.AddrFromSlice(a.A)
		if !ok || len(addrs) == MaxAddrs {
			continue
		}
		ttl = min(ttl, a.Hdr.Ttl)
		addrs = append(addrs, ip.Unmap())
	}
	if len(addrs) == 0 {
		return r.negative(name, "no A records", resp, now), nil
	}
	return entry{addrs: addrs, expiry: now.Add(r.clamp(time.Duration(ttl) * time.Second))}, nil
}

// negative builds the entry of a negative answer: cached for the SOA's
// negative TTL (RFC 2308 section 5), at most NegativeTTL.
func (r *Resolver) negative(name, why string, resp *dns.Msg, now time.Time) entry {
	ttl := r.o.NegativeTTL
	for _, rr := range resp.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			ttl = min(ttl, time.Duration(min(soa.Hdr.Ttl, soa.Minttl))*time.Second)
		}
	}
	ttl = max(ttl, r.o.MinTTL)
	return entry{err: fmt.Errorf("dnscache: %s: %s: %w", name, why, ErrNotFound), expiry: now.Add(ttl)}
}

// clamp limits a positive TTL to [MinTTL, MaxTTL].
func (r *Resolver) clamp(ttl time.Duration) time.Duration {
	return min(max(ttl, r.o.MinTTL), r.o.MaxTTL)
}

// querySystem resolves name with the Go resolver, which reports no TTL.
func (r *Resolver) querySystem(ctx context.Context, name string) entry {
	r.queries.Add(1)
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	ips, err := r.sys.LookupNetIP(ctx, "ip4", name)
	now := r.o.Now()
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return entry{err: fmt.Errorf("dnscache: %s: %w", name, ErrNotFound), expiry: now.Add(max(r.o.MinTTL, r.o.NegativeTTL))}
	case err != nil:
		return entry{err: fmt.Errorf("dnscache: lookup %s: %w", name, err)}
	}
	addrs := make([]netip.Addr, 0, min(len(ips), MaxAddrs))
	for _, ip := range ips {
		if len(addrs) < MaxAddrs {
			addrs = append(addrs, ip.Unmap())
		}
	}
	if len(addrs) == 0 {
		return entry{err: fmt.Errorf("dnscache: %s: no addresses: %w", name, ErrNotFound), expiry: now.Add(max(r.o.MinTTL, r.o.NegativeTTL))}
	}
	return entry{addrs: addrs, expiry: now.Add(r.clamp(SystemTTL))}
}

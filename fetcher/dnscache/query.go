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

// qtypes are the two questions asked of every name, in the order they are
// sent: AAAA, then A.
var qtypes = [2]uint16{dns.TypeAAAA, dns.TypeA}

// errNotAsked is the error of a question no server was asked (none can be).
var errNotAsked = errors.New("no server asked")

// family is what one of a name's two questions (AAAA or A) got.
type family struct {
	answered bool          // a usable answer: records, NODATA or NXDOMAIN
	nx       bool          // NXDOMAIN
	addrs    []netip.Addr  // the family's addresses, in the answer's order
	ttl      time.Duration // addresses: the least TTL of the answer; none: the negative TTL
	err      error         // not answered: why (the last server's error)
}

// query resolves name (canonical) and returns the entry to cache; an entry
// with a zero expiry is a transient failure and is not cached. It asks AAAA
// and A at once, on one socket, and each server in turn for the questions
// the servers before it did not answer.
func (r *Resolver) query(ctx context.Context, name string) entry {
	if r.sys != nil {
		return r.querySystem(ctx, name)
	}
	fqdn := dns.Fqdn(name)
	var fams [len(qtypes)]family
	var msgs [len(qtypes)]*dns.Msg
	for i, qt := range qtypes {
		m := new(dns.Msg)
		m.SetQuestion(fqdn, qt)
		m.SetEdns0(ednsSize, false)
		if i > 0 && m.Id == msgs[0].Id {
			m.Id++ // the answers are told apart by their IDs
		}
		msgs[i] = m
		fams[i].err = errNotAsked
	}
	var ms []*dns.Msg
	var idx []int
	for _, s := range r.servers {
		ms, idx = ms[:0], idx[:0]
		for i := range fams {
			if !fams[i].answered {
				ms, idx = append(ms, msgs[i]), append(idx, i)
			}
		}
		if len(ms) == 0 {
			break
		}
		if s.err != nil {
			for _, i := range idx {
				fams[i].err = s.err
			}
			continue
		}
		var resps [len(qtypes)]*dns.Msg
		errs := r.exchangeServer(ctx, s, ms, resps[:len(ms)])
		if err := ctxErr(ctx); err != nil {
			return entry{err: fmt.Errorf("dnscache: lookup %s: %w", name, err)}
		}
		for k, i := range idx {
			if errs[k] != nil {
				fams[i].err = fmt.Errorf("at %s: %w", s.addr, errs[k])
				continue
			}
			f, err := r.answer(fqdn, qtypes[i], resps[k])
			if err != nil {
				fams[i].err = fmt.Errorf("at %s: %w", s.addr, err)
				continue
			}
			fams[i] = f
		}
	}
	return r.merge(name, fams[:])
}

// exchangeServer asks server s the questions ms at once over UDP, then
// each truncated one again over TCP. resps[i] is the answer to ms[i], or
// nil with errs[i] saying why.
func (r *Resolver) exchangeServer(ctx context.Context, s upstream, ms, resps []*dns.Msg) []error {
	errs := make([]error, len(ms))
	err := r.exchangeUDP(ctx, s.udp, ms, resps, s.addr)
	for i, resp := range resps {
		switch {
		case resp == nil:
			errs[i] = err
		case resp.Truncated && ctxErr(ctx) == nil:
			r.tcpQueries.Add(1)
			resps[i], errs[i] = r.exchange(ctx, s.tcp, ms[i], s.addr)
		}
	}
	return errs
}

// exchangeUDP sends ms to server on one UDP socket, all at once, and reads
// the answers in whatever order they come, matched by ID, giving up after
// the Timeout or as soon as ctx ends. resps[i] answers ms[i]; the error is
// why some answer is missing.
func (r *Resolver) exchangeUDP(ctx context.Context, c *dns.Client, ms, resps []*dns.Msg, server string) error {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	r.queries.Add(uint64(len(ms)))
	co, err := c.DialContext(ctx, server)
	if err != nil {
		return err
	}
	defer co.Close()
	dl, _ := ctx.Deadline() // set by WithTimeout
	co.SetDeadline(dl)
	// Unblock the read when ctx is cancelled (the deadline only covers
	// timeouts).
	stop := context.AfterFunc(ctx, func() { co.SetDeadline(time.Now()) })
	defer stop()
	co.UDPSize = ednsSize
	for _, m := range ms {
		if err := co.WriteMsg(m); err != nil {
			return err
		}
	}
	for left := len(ms); left > 0; {
		resp, err := co.ReadMsg()
		if err != nil {
			return err
		}
		// An answer with an unknown ID may be one to an earlier query that
		// timed out on this port: ignored, as miekg/dns does.
		for i, m := range ms {
			if resps[i] == nil && resp.Id == m.Id {
				resps[i] = resp
				left--
				break
			}
		}
	}
	return nil
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

// answer interprets a response to the qtype (A or AAAA) question for fqdn.
func (r *Resolver) answer(fqdn string, qtype uint16, resp *dns.Msg) (family, error) {
	if len(resp.Question) != 1 || !strings.EqualFold(resp.Question[0].Name, fqdn) || resp.Question[0].Qtype != qtype {
		return family{}, fmt.Errorf("answer to another question: %w", ErrServer)
	}
	switch resp.Rcode {
	case dns.RcodeSuccess:
	case dns.RcodeNameError:
		return family{answered: true, nx: true, ttl: r.negativeTTL(resp)}, nil
	default:
		return family{}, fmt.Errorf("rcode %s: %w", dns.RcodeToString[resp.Rcode], ErrServer)
	}
	ttl := uint32(math.MaxUint32)
	var addrs []netip.Addr
	for _, rr := range resp.Answer {
		var ip netip.Addr
		var ok bool
		switch a := rr.(type) {
		case *dns.A:
			if qtype == dns.TypeA {
				ip, ok = netip.AddrFromSlice(a.A)
			}
		case *dns.AAAA:
			if qtype == dns.TypeAAAA {
				ip, ok = netip.AddrFromSlice(a.AAAA)
			}
		case *dns.CNAME:
			ttl = min(ttl, a.Hdr.Ttl) // the chain expires with its shortest link
		}
		if !ok || len(addrs) == MaxAddrs {
			continue
		}
		ttl = min(ttl, rr.Header().Ttl)
		addrs = append(addrs, ip.Unmap())
	}
	if len(addrs) == 0 {
		return family{answered: true, ttl: r.negativeTTL(resp)}, nil // NODATA
	}
	return family{answered: true, addrs: addrs, ttl: time.Duration(ttl) * time.Second}, nil
}

// negativeTTL is how long a negative answer is cached: the SOA's negative
// TTL (RFC 2308 section 5), at most NegativeTTL, at least MinTTL.
func (r *Resolver) negativeTTL(resp *dns.Msg) time.Duration {
	ttl := r.o.NegativeTTL
	for _, rr := range resp.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			ttl = min(ttl, time.Duration(min(soa.Hdr.Ttl, soa.Minttl))*time.Second)
		}
	}
	return max(ttl, r.o.MinTTL)
}

// merge makes one entry of the answers to a name's AAAA and A questions:
//
//   - NXDOMAIN to either is NXDOMAIN (the name does not exist), cached for
//     its negative TTL;
//   - addresses from either are the name's, in dialOrder, cached for the
//     least TTL of the families that have some (a family without records
//     does not shorten it); if the other family's question failed, the
//     answer is partial: it expires after MinTTL and is not cached;
//   - NODATA to both is a negative answer (ErrNotFound), cached for the
//     lesser negative TTL;
//   - anything else (a question failed and the other found nothing) is a
//     transient failure, not cached.
func (r *Resolver) merge(name string, fams []family) entry {
	now := r.o.Now()
	ttl, negTTL := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	var errs []error
	var v6, v4 []netip.Addr
	for i, f := range fams {
		switch {
		case f.nx:
			return entry{err: fmt.Errorf("dnscache: %s: NXDOMAIN: %w", name, ErrNotFound), expiry: now.Add(f.ttl)}
		case !f.answered:
			errs = append(errs, fmt.Errorf("%s: %w", dns.TypeToString[qtypes[i]], f.err))
		case len(f.addrs) > 0:
			ttl = min(ttl, f.ttl)
			if qtypes[i] == dns.TypeAAAA {
				v6 = f.addrs
			} else {
				v4 = f.addrs
			}
		default:
			negTTL = min(negTTL, f.ttl)
		}
	}
	var failed error
	if len(errs) > 0 {
		failed = joined(errs)
	}
	switch addrs := dialOrder(v6, v4); {
	case len(addrs) > 0 && failed != nil:
		return entry{addrs: addrs, expiry: now.Add(r.o.MinTTL), partial: fmt.Errorf("dnscache: lookup %s: %w", name, failed)}
	case len(addrs) > 0:
		return entry{addrs: addrs, expiry: now.Add(r.clamp(ttl))}
	case failed != nil:
		return entry{err: fmt.Errorf("dnscache: lookup %s: %w", name, failed)}
	}
	return entry{err: fmt.Errorf("dnscache: %s: no A or AAAA records: %w", name, ErrNotFound), expiry: now.Add(negTTL)}
}

// joined is errors.Join on one line: its parts separated by "; ".
type joined []error

func (e joined) Error() string {
	var b strings.Builder
	for i, err := range e {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap returns the parts, for errors.Is and errors.As.
func (e joined) Unwrap() []error { return e }

// dialOrder orders a name's addresses for connecting, as RFC 8305 section 4
// (Happy Eyeballs v2) sorts them: IPv6 first, then the families alternate,
// each keeping its own order (the server's, which RFC 6724's rules would
// only reorder by scope and policy a crawler does not know). An address
// given twice (an IPv4-mapped AAAA record and an A record) is kept once;
// IPv4-mapped addresses count as IPv4. At most MaxAddrs are kept; the
// result is new.
func dialOrder(v6, v4 []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, min(len(v6)+len(v4), MaxAddrs))
	var six, four []netip.Addr
	for _, lists := range [2][]netip.Addr{v6, v4} {
		for _, a := range lists {
			if a = a.Unmap(); a.Is4() {
				four = append(four, a)
			} else {
				six = append(six, a)
			}
		}
	}
	add := func(a netip.Addr) {
		for _, b := range out {
			if a == b {
				return
			}
		}
		out = append(out, a)
	}
	for i := 0; i < max(len(six), len(four)) && len(out) < MaxAddrs; i++ {
		if i < len(six) {
			add(six[i])
		}
		if i < len(four) && len(out) < MaxAddrs {
			add(four[i])
		}
	}
	return out
}

// clamp limits a positive TTL to [MinTTL, MaxTTL].
func (r *Resolver) clamp(ttl time.Duration) time.Duration {
	return min(max(ttl, r.o.MinTTL), r.o.MaxTTL)
}

// querySystem resolves name with the Go resolver, which asks AAAA and A
// and reports no TTL.
func (r *Resolver) querySystem(ctx context.Context, name string) entry {
	r.queries.Add(1)
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	ips, err := r.sys.LookupNetIP(ctx, "ip", name)
	now := r.o.Now()
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return entry{err: fmt.Errorf("dnscache: %s: %w", name, ErrNotFound), expiry: now.Add(max(r.o.MinTTL, r.o.NegativeTTL))}
	case err != nil:
		return entry{err: fmt.Errorf("dnscache: lookup %s: %w", name, err)}
	}
	addrs := dialOrder(ips, nil) // dialOrder sorts them by family
	if len(addrs) == 0 {
		return entry{err: fmt.Errorf("dnscache: %s: no addresses: %w", name, ErrNotFound), expiry: now.Add(max(r.o.MinTTL, r.o.NegativeTTL))}
	}
	return entry{addrs: addrs, expiry: now.Add(r.clamp(SystemTTL))}
}

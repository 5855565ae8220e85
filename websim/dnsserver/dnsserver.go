// Package dnsserver answers DNS queries for websim's hosts, so that a crawler
// under test can resolve synthetic host names through ordinary DNS.
//
// A Server listens on one IP and port for both UDP and TCP and acts as the
// authority for the whole name space: a name that Options.Lookup (or
// LookupAll) knows gets its addresses (A records to an A question, AAAA
// records to an AAAA question, NODATA when it has none of the family
// asked), any other name gets NXDOMAIN. Negative answers carry a synthetic
// SOA record for the root zone so that resolvers can cache them for the
// configured TTL. A UDP answer too large for the client's buffer (512
// bytes, or its EDNS0 size up to 1232) is truncated (TC set), and the
// client asks again over TCP.
package dnsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// DefaultTTL is the TTL of answers when Options.TTL is zero.
const DefaultTTL = 300 * time.Second

// MaxTTL is the largest accepted Options.TTL: RFC 2181 section 8 limits TTLs
// to 2^31-1 seconds, and resolvers treat larger values as zero.
const MaxTTL = math.MaxInt32 * time.Second

const (
	// ednsSize is the UDP payload size the server reads and advertises.
	ednsSize = 1232
	// compressAbove is the question-name length above which responses are
	// compressed; shorter names always fit in 512 bytes uncompressed.
	compressAbove = 200
	// portAttempts bounds the retries when, for port 0, the free TCP port
	// turns out to be taken for UDP.
	portAttempts = 10
)

// Options configures a Server. Zero values get documented defaults.
type Options struct {
	// Addr is the listen address "IP:port" (an IP literal, not a host name),
	// used for both UDP and TCP. Port 0 picks a free port, the same for
	// both. Required.
	Addr string
	// TTL is the TTL of every answer, truncated to whole seconds. Zero means
	// DefaultTTL; otherwise it must be between 1s and MaxTTL.
	TTL time.Duration
	// Lookup maps a lower-case host name without trailing dot, such as
	// "www.example.test", to its IPv4 address; ok false means the name does
	// not exist. An IPv6 address is served as AAAA instead of A. Lookup is
	// called concurrently from many goroutines. Lookup or LookupAll is
	// required, not both.
	Lookup func(name string) (addr netip.Addr, ok bool)
	// LookupAll is Lookup for names with several addresses: every address
	// of name, of both families, in the order the records are served (IPv4
	// ones, IPv4-mapped included, as A, IPv6 ones as AAAA); none means the
	// name does not exist. An invalid (zero) address among them makes the
	// answer SERVFAIL. The server only reads the slice. It is called
	// concurrently from many goroutines.
	LookupAll func(name string) []netip.Addr
	// Logger receives errors and, at debug level, one line per query.
	// Nil discards everything.
	Logger *slog.Logger
	// Delay, if set, is how long to hold the answer to a query for name
	// (lower-case, without trailing dot, "" for the root) from client (the
	// query's UDP or TCP source address, IPv4-mapped addresses unmapped):
	// websim's model of the network between them. The response is built at
	// once and written after the delay; Close cuts the wait short and drops
	// the response. Delay is called once per accepted query, concurrently
	// from many goroutines. Nil or a non-positive result: no wait.
	Delay func(client netip.Addr, name string) time.Duration
}

// Validate reports every problem with o at once, joined with errors.Join.
func (o Options) Validate() error {
	var errs []error
	if o.Addr == "" {
		errs = append(errs, errors.New("dnsserver: Addr is required"))
	} else if _, err := netip.ParseAddrPort(o.Addr); err != nil {
		errs = append(errs, fmt.Errorf("dnsserver: Addr %q is not IP:port: %w", o.Addr, err))
	}
	switch {
	case o.TTL == 0:
	case o.TTL < time.Second:
		errs = append(errs, fmt.Errorf("dnsserver: TTL %v is below 1s", o.TTL))
	case o.TTL > MaxTTL:
		errs = append(errs, fmt.Errorf("dnsserver: TTL %v is above %v", o.TTL, MaxTTL))
	}
	switch {
	case o.Lookup == nil && o.LookupAll == nil:
		errs = append(errs, errors.New("dnsserver: Lookup is required (or LookupAll)"))
	case o.Lookup != nil && o.LookupAll != nil:
		errs = append(errs, errors.New("dnsserver: Lookup and LookupAll are both set, give one"))
	}
	return errors.Join(errs...)
}

// Server is a running DNS server. Create it with Start and stop it with Close.
type Server struct {
	addr    string
	ttl     uint32
	lookup  func(string) (netip.Addr, bool)
	all     func(string) []netip.Addr              // LookupAll, when lookup is nil
	delay   func(netip.Addr, string) time.Duration // nil: answer at once
	done    chan struct{}                          // closed when Close starts: delayed answers are dropped
	log     *slog.Logger
	soa     *dns.SOA // shared by all responses; packing only reads it
	queries atomic.Int64

	udp, tcp *listener
	wg       sync.WaitGroup // the two serve goroutines

	closeMu sync.Mutex
	closed  bool
}

// listener is one of the Server's two dns.Servers and the outcome of its
// serve goroutine.
type listener struct {
	name    string // "udp" or "tcp"
	srv     *dns.Server
	started chan struct{} // closed once srv accepts Shutdown
	done    chan struct{} // closed when the serve goroutine returns
	err     error         // ActivateAndServe's result; read after done
}

// Start validates o, binds UDP and TCP on o.Addr and serves queries in
// background goroutines until Close.
func Start(o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ap := netip.MustParseAddrPort(o.Addr) // checked by Validate
	ttl := o.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	pc, ln, err := bind(ap)
	if err != nil {
		return nil, err
	}

	s := &Server{
		addr:   ln.Addr().String(),
		ttl:    uint32(ttl / time.Second),
		lookup: o.Lookup,
		all:    o.LookupAll,
		delay:  o.Delay,
		done:   make(chan struct{}),
		log:    logger,
	}
	s.soa = &dns.SOA{
		Hdr:     dns.RR_Header{Name: ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: s.ttl},
		Ns:      "ns.websim.invalid.",
		Mbox:    "hostmaster.websim.invalid.",
		Serial:  1,
		Refresh: s.ttl,
		Retry:   s.ttl,
		Expire:  s.ttl,
		Minttl:  s.ttl,
	}
	s.udp = s.newListener("udp", &dns.Server{PacketConn: pc, UDPSize: ednsSize})
	s.tcp = s.newListener("tcp", &dns.Server{Listener: ln})

	var startErrs []error
	for _, l := range []*listener{s.udp, s.tcp} {
		s.wg.Go(func() { l.serve(s.log) })
	}
	for _, l := range []*listener{s.udp, s.tcp} {
		select {
		case <-l.started:
		case <-l.done:
			startErrs = append(startErrs, fmt.Errorf("dnsserver: serve %s %s: %w", l.name, s.addr, l.err))
		}
	}
	if len(startErrs) > 0 {
		_ = s.Close()
		pc.Close() // ActivateAndServe may fail before taking ownership
		ln.Close()
		return nil, errors.Join(startErrs...)
	}
	s.log.Info("dnsserver: listening", "addr", s.addr, "ttl", ttl)
	return s, nil
}

// newListener fills in the dns.Server fields shared by UDP and TCP.
func (s *Server) newListener(name string, srv *dns.Server) *listener {
	l := &listener{name: name, srv: srv, started: make(chan struct{}), done: make(chan struct{})}
	srv.Handler = dns.HandlerFunc(s.serveDNS)
	srv.MsgAcceptFunc = acceptMsg
	srv.DecorateWriter = s.countWrites
	srv.NotifyStartedFunc = func() { close(l.started) }
	return l
}

// serve runs the dns.Server until it is shut down.
func (l *listener) serve(log *slog.Logger) {
	defer close(l.done)
	l.err = l.srv.ActivateAndServe()
	if l.err != nil {
		log.Error("dnsserver: serve failed", "net", l.name, "err", l.err)
	}
}

// bind listens on TCP and UDP at the same address. For port 0 it takes a
// free TCP port and then the same UDP port, retrying if that one is taken.
func bind(ap netip.AddrPort) (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range portAttempts {
		ln, err := net.Listen("tcp", ap.String())
		if err != nil {
			return nil, nil, fmt.Errorf("dnsserver: %w", err)
		}
		udpAddr := netip.AddrPortFrom(ap.Addr(), uint16(ln.Addr().(*net.TCPAddr).Port))
		pc, err := net.ListenPacket("udp", udpAddr.String())
		if err == nil {
			return pc, ln, nil
		}
		ln.Close()
		lastErr = fmt.Errorf("dnsserver: %w", err)
		if ap.Port() != 0 || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	return nil, nil, lastErr
}

// Addr returns the address the server listens on, as "IP:port".
func (s *Server) Addr() string { return s.addr }

// Queries returns the number of responses sent so far, including error
// responses such as FORMERR. A response is counted before it is sent, so a
// client that has received it sees it counted.
func (s *Server) Queries() int64 { return s.queries.Load() }

// Close stops both listeners, closes open TCP connections and waits for all
// goroutines of the server to exit. Calls after the first return nil.
func (s *Server) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.done)

	var errs []error
	for _, l := range []*listener{s.udp, s.tcp} {
		select {
		case <-l.started:
		default:
			continue // never started, or failed to; nothing to shut down
		}
		if err := l.srv.ShutdownContext(context.Background()); err != nil {
			errs = append(errs, fmt.Errorf("dnsserver: shut down %s: %w", l.name, err))
		}
	}
	s.wg.Wait()
	for _, l := range []*listener{s.udp, s.tcp} {
		if l.err != nil {
			errs = append(errs, fmt.Errorf("dnsserver: serve %s: %w", l.name, l.err))
		}
	}
	return errors.Join(errs...)
}

// acceptMsg decides which messages reach serveDNS: responses are dropped,
// opcodes other than QUERY get NOTIMP, and messages without exactly one
// question (RFC 9619) or with implausible section counts get FORMERR.
// Messages that fail to parse get FORMERR from dns.Server itself.
func acceptMsg(h dns.Header) dns.MsgAcceptAction {
	const qrBit = 1 << 15
	if h.Bits&qrBit != 0 {
		return dns.MsgIgnore
	}
	if opcode := int(h.Bits>>11) & 0xF; opcode != dns.OpcodeQuery {
		return dns.MsgRejectNotImplemented
	}
	return dns.DefaultMsgAcceptFunc(h)
}

// countingWriter counts the responses written through it.
type countingWriter struct {
	dns.Writer
	n *atomic.Int64
}

func (w countingWriter) Write(b []byte) (int, error) {
	w.n.Add(1)
	n, err := w.Writer.Write(b)
	if err != nil {
		w.n.Add(-1)
	}
	return n, err
}

// countWrites is the dns.Server DecorateWriter hook that feeds Queries.
func (s *Server) countWrites(w dns.Writer) dns.Writer {
	return countingWriter{Writer: w, n: &s.queries}
}

// serveDNS answers one accepted query; acceptMsg guarantees exactly one
// question.
func (s *Server) serveDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp := s.respond(req)
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp && len(resp.Answer) > 1 {
		resp.Truncate(udpSize(req))
	}
	if s.delay != nil && !s.hold(w.RemoteAddr(), req.Question[0].Name) {
		return // closing
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		q := req.Question[0]
		s.log.Debug("dnsserver: query", "name", q.Name, "type", dns.Type(q.Qtype).String(),
			"rcode", dns.RcodeToString[resp.Rcode], "answers", len(resp.Answer), "from", w.RemoteAddr().String())
	}
	if err := w.WriteMsg(resp); err != nil {
		s.log.Debug("dnsserver: write response", "err", err)
	}
}

// udpSize is the largest UDP answer the client of req reads: 512 bytes, or
// the EDNS0 size it advertises, up to the server's own.
func udpSize(req *dns.Msg) int {
	if opt := req.IsEdns0(); opt != nil {
		return int(min(max(opt.UDPSize(), dns.MinMsgSize), ednsSize))
	}
	return dns.MinMsgSize
}

// hold waits for Options.Delay(client, name), and reports false if Close
// started meanwhile.
func (s *Server) hold(from net.Addr, qname string) bool {
	var client netip.Addr
	switch a := from.(type) {
	case *net.UDPAddr:
		client = a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		client = a.AddrPort().Addr().Unmap()
	}
	d := s.delay(client, strings.TrimSuffix(strings.ToLower(qname), "."))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

// respond builds the response to req.
func (s *Server) respond(req *dns.Msg) *dns.Msg {
	q := req.Question[0]
	resp := &dns.Msg{
		MsgHdr: dns.MsgHdr{
			Id:               req.Id,
			Response:         true,
			Opcode:           dns.OpcodeQuery,
			RecursionDesired: req.RecursionDesired,
			CheckingDisabled: req.CheckingDisabled,
		},
		Question: req.Question[:1],
		Compress: len(q.Name) > compressAbove,
	}
	if opt := req.IsEdns0(); opt != nil {
		resp.SetEdns0(ednsSize, false)
		if opt.Version() != 0 {
			resp.Rcode = dns.RcodeBadVers // RFC 6891 section 6.1.3
			return resp
		}
	}
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		resp.Rcode = dns.RcodeRefused
		return resp
	}
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		resp.Rcode = dns.RcodeRefused // no zone transfers
		return resp
	}
	resp.Authoritative = true

	name := strings.ToLower(q.Name) // does not allocate for lower-case names
	if name == "." {
		// The root is the apex of the server's only zone.
		if q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY {
			resp.Answer = []dns.RR{s.soa}
		} else {
			resp.Ns = []dns.RR{s.soa}
		}
		return resp
	}
	name = strings.TrimSuffix(name, ".")
	var one [1]netip.Addr
	var addrs []netip.Addr
	// An escape (\. or \DDD) cannot occur in a host name.
	if strings.IndexByte(name, '\\') < 0 {
		if s.all != nil {
			addrs = s.all(name)
		} else if a, ok := s.lookup(name); ok {
			one[0] = a
			addrs = one[:]
		}
	}
	if len(addrs) == 0 {
		resp.Rcode = dns.RcodeNameError
		resp.Ns = []dns.RR{s.soa}
		return resp
	}

	for _, addr := range addrs {
		addr = addr.Unmap()
		hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: s.ttl}
		switch {
		case addr.Is4() && (q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY):
			hdr.Rrtype = dns.TypeA
			resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr, A: addr.AsSlice()})
		case addr.Is6() && (q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY):
			hdr.Rrtype = dns.TypeAAAA
			resp.Answer = append(resp.Answer, &dns.AAAA{Hdr: hdr, AAAA: addr.AsSlice()})
		case !addr.IsValid():
			s.log.Error("dnsserver: Lookup returned ok with an invalid address", "name", name)
			resp.Answer = nil
			resp.Authoritative = false
			resp.Rcode = dns.RcodeServerFailure
			return resp
		}
	}
	if len(resp.Answer) == 0 {
		resp.Ns = []dns.RR{s.soa} // NODATA
	}
	return resp
}

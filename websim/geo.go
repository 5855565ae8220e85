package websim

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/websim/geodelay"
)

// geo makes named clients pay for their distance to the hosts they visit,
// as on the Internet (package geodelay has the model):
//
//   - a connection's set-up: the TCP handshake takes one RTT from the
//     accept, so the first response on a connection is held until
//     max(request read, accept + RTT) + RTT: two RTTs for a client that
//     sends its request at once;
//   - every later response on the connection: held until the request was
//     read + RTT (request and response each cross the distance once);
//   - every DNS answer for a name whose host has a city: one RTT.
//
// The RTT is between the client (the TCP or UDP source address) and the
// city of the web address the connection reached (for DNS: the address the
// name resolves to). Addresses without a city (a replayed web) cost
// nothing; unnamed clients cost nothing and take nothing but a map read.
// The request is stamped in the statistics when it is read, before the
// hold, so politeness figures (request starts, intervals) are unchanged; it
// counts as in flight while held. The handler runs when the hold ends, so
// the server's own time adds to the RTT, as on the Internet. Each client's
// requests and DNS answers, and the modelled delays they paid, are counted
// in Snapshot.Clients.
//
// A geo is built before serving and never changed after: reading it needs
// no lock.
type geo struct {
	clients map[netip.Addr]*clientCounter // by source address
	places  map[netip.Addr]geodelay.Point // web address → its city; nil: none
	resolve func(name string) (netip.Addr, bool)
}

// newGeo returns the delay model for clients, counted in stats, or nil if
// there are no clients.
func newGeo(stats *Stats, clients []geodelay.Client, places map[netip.Addr]geodelay.Point, resolve func(string) (netip.Addr, bool)) *geo {
	if len(clients) == 0 {
		return nil
	}
	return &geo{clients: stats.watchClients(clients), places: places, resolve: resolve}
}

// rtt returns the round trip between client c and web address dst; ok is
// false if dst has no city.
func (g *geo) rtt(c *clientCounter, dst netip.Addr) (time.Duration, bool) {
	p, ok := g.places[dst]
	if !ok {
		return 0, false
	}
	return geodelay.RTT(c.client.Loc, p), true
}

// connGeo is what a named client's connection pays.
type connGeo struct {
	client   *clientCounter
	rtt      time.Duration // to the city of the address it reached; 0 if none
	accepted time.Time
	used     atomic.Bool // a request has been served
}

type connGeoKey struct{}

// connContext is the http.Server's ConnContext: it marks the connections
// of named clients with what they pay.
func (g *geo) connContext(ctx context.Context, c net.Conn) context.Context {
	src, ok := addrOf(c.RemoteAddr())
	if !ok {
		return ctx
	}
	cc := g.clients[src]
	if cc == nil {
		return ctx
	}
	cg := &connGeo{client: cc, accepted: time.Now()}
	if dst, ok := addrOf(c.LocalAddr()); ok {
		cg.rtt, _ = g.rtt(cc, dst)
	}
	return context.WithValue(ctx, connGeoKey{}, cg)
}

// hold waits until the response to r, read at read, may start, and counts
// the request for its client. If the request is cancelled meanwhile (the
// client went away, or the server is closing) it aborts the handler.
func (g *geo) hold(r *http.Request, read time.Time) {
	cg, _ := r.Context().Value(connGeoKey{}).(*connGeo)
	if cg == nil {
		return
	}
	start := read
	if !cg.used.Swap(true) {
		start = later(read, cg.accepted.Add(cg.rtt)) // the handshake
	}
	due := start.Add(cg.rtt)
	cg.client.request(due.Sub(read))
	if !sleepCtx(r.Context(), time.Until(due)) {
		panic(http.ErrAbortHandler) // no response: the connection is closed
	}
}

// count records a request from a named client that pays nothing: a
// replayed web has no cities. Replay serves the later requests of a
// connection itself, so the client is found by r.RemoteAddr.
func (g *geo) count(r *http.Request) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return
	}
	if cc := g.clients[ap.Addr().Unmap()]; cc != nil {
		cc.request(0)
	}
}

// dnsDelay is the DNS server's Delay hook: one RTT between a named client
// and the city of the host name resolves to.
func (g *geo) dnsDelay(client netip.Addr, name string) time.Duration {
	cc := g.clients[client]
	if cc == nil {
		return 0
	}
	var d time.Duration
	if ip, ok := g.resolve(name); ok {
		d, _ = g.rtt(cc, ip)
	}
	cc.dns(d)
	return d
}

// clientRTT returns the RTT the model charges between client and the host
// name or address literal host.
func (g *geo) clientRTT(client netip.Addr, host string) (time.Duration, bool) {
	if g == nil {
		return 0, false
	}
	cc := g.clients[client.Unmap()]
	if cc == nil {
		return 0, false
	}
	ip, ok := g.resolve(hostOnly(host))
	if !ok {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return 0, false
		}
		ip = a.Unmap()
	}
	return g.rtt(cc, ip)
}

// addrOf returns the IP of a TCP or UDP address.
func addrOf(a net.Addr) (netip.Addr, bool) {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap(), true
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sleepCtx sleeps for d and reports whether ctx was still live at the end.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

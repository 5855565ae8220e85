package websim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/meridian-crawler/meridian/websim/geodb"
	"github.com/meridian-crawler/meridian/websim/geodelay"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// The named clients of the distance tests: three continents.
var (
	fraClient = geodelay.Client{Addr: netip.MustParseAddr("127.0.2.1"), Name: "Frankfurt", Loc: geodelay.Point{Lat: 50.11, Lon: 8.68}}
	iadClient = geodelay.Client{Addr: netip.MustParseAddr("127.0.2.2"), Name: "Ashburn", Loc: geodelay.Point{Lat: 39.04, Lon: -77.49}}
	sinClient = geodelay.Client{Addr: netip.MustParseAddr("127.0.2.3"), Name: "Singapore", Loc: geodelay.Point{Lat: 1.29, Lon: 103.85}}
	unnamed   = netip.MustParseAddr("127.0.2.50")
)

// Timing bounds on a loaded machine: a measured wait is at least the
// model's less a millisecond (timer and clock granularity), and at most the
// model's plus geoSlack and a quarter (scheduling on two busy cores). The
// upper bound stays below the next multiple of the RTT for the RTTs the
// tests pick, so a round trip too many fails too.
const geoSlack = 40 * time.Millisecond

func checkWait(t *testing.T, what string, got, model time.Duration) {
	t.Helper()
	low, high := model-time.Millisecond, model+geoSlack+model/4
	t.Logf("%s: %v (model %v)", what, got.Round(100*time.Microsecond), model.Round(100*time.Microsecond))
	if got < low || got > high {
		t.Errorf("%s took %v, want the model's %v (in [%v, %v])", what, got, model, low, high)
	}
}

// startGeoWeb serves a web whose addresses are spread over the world, with
// the three named clients, DNS and the admin endpoint.
func startGeoWeb(t *testing.T) *Server {
	t.Helper()
	return startWeb(t, Options{Web: synth.Options{Hosts: 48, Pages: 3, Seed: 7, IPs: 48, Profile: synth.Clean},
		DNSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Clients: []geodelay.Client{fraClient, iadClient, sinClient}})
}

// geoHost is a host of the web and its model RTT from one client.
type geoHost struct {
	name string
	ip   netip.Addr
	city geodb.City
	rtt  time.Duration
}

// nearFar returns, for client c, the nearest host and the farthest one
// whose RTT is at most maxRTT (to keep the test short); the two RTTs differ
// by far more than the tolerances, so a wrong formula fails.
func nearFar(t *testing.T, s *Server, c geodelay.Client, maxRTT time.Duration) (near, far geoHost) {
	t.Helper()
	web := s.Web()
	for _, h := range web.Hosts() {
		city, ok := web.CityOfIP(h.IP)
		if !ok {
			t.Fatalf("%s: no city for %v", h.Name, h.IP)
		}
		g := geoHost{name: h.Name, ip: h.IP, city: city, rtt: geodelay.RTT(c.Loc, geodelay.PointOf(city))}
		if got, ok := s.ClientRTT(c.Addr, h.Name); !ok || got != g.rtt {
			t.Fatalf("ClientRTT(%v, %s) = %v, %v; want %v", c.Addr, h.Name, got, ok, g.rtt)
		}
		if near.name == "" || g.rtt < near.rtt {
			near = g
		}
		if g.rtt <= maxRTT && (far.name == "" || g.rtt > far.rtt) {
			far = g
		}
	}
	if far.rtt-near.rtt < 80*time.Millisecond {
		t.Fatalf("%s: near %s (%v) and far %s (%v) too close for the test", c.Name, near.city.Name, near.rtt, far.city.Name, far.rtt)
	}
	return near, far
}

// timedConn is a raw HTTP/1.1 client connection from a chosen source
// address that measures the wait for each response's first byte.
type timedConn struct {
	c  net.Conn
	br *bufio.Reader
}

// dialFrom connects from src to addr and returns the connection and the
// time the dial started.
func dialFrom(t *testing.T, src netip.Addr, addr string) (*timedConn, time.Time) {
	t.Helper()
	start := time.Now()
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &timedConn{c: c, br: bufio.NewReader(c)}, start
}

// get sends a GET for host's front page and returns the wait from since to
// the response's first byte; it reads the whole response.
func (tc *timedConn) get(t *testing.T, host string, port int, since time.Time) time.Duration {
	t.Helper()
	if since.IsZero() {
		since = time.Now()
	}
	if _, err := fmt.Fprintf(tc.c, "GET / HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.br.Peek(1); err != nil {
		t.Fatal(err)
	}
	took := time.Since(since)
	resp, err := http.ReadResponse(tc.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return took
}

// dnsWait asks s's DNS server for name from src (UDP) and returns the wait.
func dnsWait(t *testing.T, s *Server, src netip.Addr, name string) time.Duration {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}}
	start := time.Now()
	resp, _, err := c.Exchange(new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA), s.DNSAddr())
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Answer) != 1 {
		t.Fatalf("DNS %s: %v", name, resp)
	}
	return took
}

// TestClientDistance measures, from each named client's address, what a
// near and a far host cost: a new connection's first response two RTTs, a
// second request on it one RTT, a DNS answer one RTT; and that an unnamed
// client pays nothing for the same.
func TestClientDistance(t *testing.T) {
	s := startGeoWeb(t)
	port := s.Port()
	for _, c := range []geodelay.Client{fraClient, iadClient, sinClient} {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			near, far := nearFar(t, s, c, 160*time.Millisecond)
			for _, h := range []geoHost{near, far} {
				what := fmt.Sprintf("%s→%s (%s)", c.Name, h.city.Name, h.name)
				tc, dialed := dialFrom(t, c.Addr, hostAddr(h.ip, port))
				checkWait(t, what+": first response on a new connection", tc.get(t, h.name, port, dialed), 2*h.rtt)
				checkWait(t, what+": second request on the connection", tc.get(t, h.name, port, time.Time{}), h.rtt)
				checkWait(t, what+": DNS answer", dnsWait(t, s, c.Addr, h.name), h.rtt)
			}
		})
	}
	t.Run("unnamed", func(t *testing.T) {
		t.Parallel()
		_, far := nearFar(t, s, sinClient, 160*time.Millisecond)
		tc, dialed := dialFrom(t, unnamed, hostAddr(far.ip, port))
		checkWait(t, "unnamed: first response", tc.get(t, far.name, port, dialed), 0)
		checkWait(t, "unnamed: second request", tc.get(t, far.name, port, time.Time{}), 0)
		checkWait(t, "unnamed: DNS answer", dnsWait(t, s, unnamed, far.name), 0)
		if _, ok := s.ClientRTT(unnamed, far.name); ok {
			t.Error("ClientRTT has an RTT for an unnamed client")
		}
	})
}

// TestClientStats checks the per-client counts and mean delays of the
// stats endpoint, and that a web without clients reports none.
func TestClientStats(t *testing.T) {
	s := startGeoWeb(t)
	port := s.Port()
	// The far host: the accept-to-read time is small beside its RTT.
	_, far := nearFar(t, s, fraClient, 160*time.Millisecond)
	// Frankfurt: one connection, two requests; two DNS answers, one for a
	// name without host (no delay).
	tc, dialed := dialFrom(t, fraClient.Addr, hostAddr(far.ip, port))
	tc.get(t, far.name, port, dialed)
	tc.get(t, far.name, port, time.Time{})
	dnsWait(t, s, fraClient.Addr, far.name)
	m := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(netip.AddrPortFrom(fraClient.Addr, 0))}}
	if _, _, err := m.Exchange(new(dns.Msg).SetQuestion("nowhere.test.", dns.TypeA), s.DNSAddr()); err != nil {
		t.Fatal(err)
	}
	// Unnamed clients are not reported.
	u, _ := dialFrom(t, unnamed, hostAddr(far.ip, port))
	u.get(t, far.name, port, time.Time{})

	snap := fetchStats(t, s)
	if len(snap.Clients) != 3 || snap.Requests != 3 {
		t.Fatalf("clients %v, requests %d", snap.Clients, snap.Requests)
	}
	fra := snap.Clients[fraClient.Addr.String()]
	if fra == nil || fra.Name != "Frankfurt" || fra.Lat != fraClient.Loc.Lat || fra.Requests != 2 || fra.DNSAnswers != 2 {
		t.Fatalf("Frankfurt: %+v", fra)
	}
	// Requests: 2 RTT (less the accept-to-read time) and 1 RTT; DNS: 1 RTT and 0.
	rttMS := float64(far.rtt) / float64(time.Millisecond)
	if d := *fra.MeanDelayMS; d > 1.5*rttMS+0.001 || d < 1.5*rttMS-10 {
		t.Errorf("Frankfurt mean delay %v ms, want 1.5 RTT = %.3f ms", d, 1.5*rttMS)
	}
	// Two requests: the p95 is the larger delay (the first, 2 RTT less
	// the accept-to-read time), to the millisecond above.
	if fra.P95DelayMS == nil || *fra.P95DelayMS > math.Ceil(2*rttMS) || *fra.P95DelayMS < math.Ceil(2*rttMS-10) {
		t.Errorf("Frankfurt p95 delay %v ms, want ⌈2 RTT⌉ = %.0f ms", fra.P95DelayMS, math.Ceil(2*rttMS))
	}
	if n := fra.DelayHistMS[int(math.Ceil(2*rttMS-0.001))] + fra.DelayHistMS[int(math.Ceil(rttMS))]; len(fra.DelayHistMS) > 2 || n < 1 {
		t.Errorf("Frankfurt delay histogram %v: want its two requests, one at ⌈RTT⌉ = %.0f ms", fra.DelayHistMS, math.Ceil(rttMS))
	}
	if d := *fra.MeanDNSDelayMS; d < rttMS/2-0.001 || d > rttMS/2+0.001 {
		t.Errorf("Frankfurt mean DNS delay %v ms, want RTT/2 = %.3f ms", d, rttMS/2)
	}
	sin := snap.Clients[sinClient.Addr.String()]
	if sin == nil || sin.Requests != 0 || sin.MeanDelayMS != nil || sin.P95DelayMS != nil || sin.DelayHistMS != nil || sin.DNSAnswers != 0 || sin.MeanDNSDelayMS != nil {
		t.Fatalf("Singapore: %+v", sin)
	}
	s.Stats().Reset()
	if fra := s.Stats().Snapshot().Clients[fraClient.Addr.String()]; fra.Requests != 0 || fra.DNSAnswers != 0 {
		t.Fatalf("after Reset: %+v", fra)
	}

	// Without clients, the JSON has no "clients" key at all.
	plain := startWeb(t, Options{Web: synth.Options{Hosts: 3, Pages: 2, IPs: 1}, AdminAddr: "127.0.0.1:0"})
	resp, err := http.Get("http://" + plain.AdminAddr() + "/_websim/stats")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	err = json.NewDecoder(resp.Body).Decode(&raw)
	resp.Body.Close()
	if _, has := raw["clients"]; err != nil || has {
		t.Fatalf("stats without clients: %v, keys %v", err, raw)
	}
}

// TestClientDelayClose checks that Close does not wait for a held response,
// and that the client sees the connection end without an answer.
func TestClientDelayClose(t *testing.T) {
	// A client at the antipode of the web's only address pays over half a
	// second for a first response.
	wo := synth.Options{Hosts: 4, Pages: 2, IPs: 1, Seed: 3}
	probe, err := synth.New(wo)
	if err != nil {
		t.Fatal(err)
	}
	h := probe.Hosts()[0]
	city, _ := probe.CityOfIP(h.IP)
	anti := geodelay.Point{Lat: -city.Lat, Lon: city.Lon - 180}
	if anti.Lon < -180 {
		anti.Lon += 360
	}
	s := startWeb(t, Options{Web: wo, Clients: []geodelay.Client{{Addr: unnamed, Loc: anti}}})
	rtt, _ := s.ClientRTT(unnamed, h.Name)
	if rtt < 200*time.Millisecond {
		t.Fatalf("antipode RTT %v", rtt)
	}
	tc, _ := dialFrom(t, unnamed, hostAddr(h.IP, s.Port()))
	fmt.Fprintf(tc.c, "GET / HTTP/1.1\r\nHost: %s:%d\r\n\r\n", h.Name, s.Port())
	time.Sleep(20 * time.Millisecond) // the request is read and held
	start := time.Now()
	s.Close()
	took := time.Since(start)
	t.Logf("Close took %v with a response due in %v", took, 2*rtt)
	if took >= rtt {
		t.Errorf("Close took %v, held for a response due in %v", took, 2*rtt)
	}
	if _, err := tc.br.ReadByte(); err == nil {
		t.Error("a response was sent after Close")
	}
}

// TestClientsValidate checks that bad clients are refused by Start and
// StartReplay with the problem named.
func TestClientsValidate(t *testing.T) {
	dup := []geodelay.Client{fraClient, {Addr: fraClient.Addr, Loc: geodelay.Point{Lat: 1, Lon: 2}}}
	_, err := Start(Options{Web: synth.Options{Hosts: 3, Pages: 2, IPs: 1}, Clients: dup})
	if err == nil || !strings.Contains(err.Error(), "websim: clients: client 1: geodelay: duplicate address 127.0.2.1") {
		t.Fatalf("Start: %v", err)
	}
	_, err = StartReplay(ReplayOptions{WARCs: []string{"x.warc"}, Clients: []geodelay.Client{{Addr: fraClient.Addr, Loc: geodelay.Point{Lat: 95}}}})
	if err == nil || !strings.Contains(err.Error(), "bad coordinates") {
		t.Fatalf("StartReplay: %v", err)
	}
}

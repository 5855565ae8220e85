package fetcher

// Tests of Happy Eyeballs (happyEyeballs, dialAddrs) over real sockets on
// loopback. Linux only: a "black hole" (an address whose connects hang)
// is a listener with a full accept queue, which Linux answers by dropping
// SYNs.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/localaddr"
	"github.com/meridian-crawler/meridian/fetcher/netguard"
)

// blackHole returns "127.0.0.3:port" where connects hang: a listener with
// a backlog of 0 whose one queued connection is never accepted.
func blackHole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 3}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.3:%d", sa.(*syscall.SockaddrInet4).Port)
	filler, err := net.DialTimeout("tcp", addr, 5*time.Second) // fills the queue
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	// The next connect must hang; check, so that no test trusts a hole
	// that is not one.
	if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
		c.Close()
		t.Fatalf("%s accepts connections: not a black hole", addr)
	}
	return addr
}

// acceptLog is a TCP listener that keeps every connection it accepts and
// when.
type acceptLog struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	at    []time.Time
	first chan struct{} // closed at the first accept
}

func startAcceptLog(t *testing.T, ip string) *acceptLog {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	a := &acceptLog{ln: ln, first: make(chan struct{})}
	done := make(chan struct{})
	go func() { // owner: the test's cleanup, which closes ln and waits
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.mu.Lock()
			a.conns, a.at = append(a.conns, c), append(a.at, time.Now())
			if len(a.conns) == 1 {
				close(a.first)
			}
			a.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range a.accepted() {
			c.Close()
		}
	})
	return a
}

func (a *acceptLog) addr() string { return a.ln.Addr().String() }

func (a *acceptLog) accepted() []net.Conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]net.Conn(nil), a.conns...)
}

func (a *acceptLog) times() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.at...)
}

// waitAccepted waits up to 5 s for n accepted connections.
func (a *acceptLog) waitAccepted(t *testing.T, n int) []net.Conn {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c := a.accepted(); len(c) >= n {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d connections accepted within 5s, want %d", a.addr(), len(a.accepted()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// closedByPeer reports whether c's peer has closed it (a read ends) within
// wait, and false if it stays open that long.
func closedByPeer(c net.Conn, wait time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// closedPort returns "127.0.0.1:port" where connects are refused.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func dialers(n int) []*net.Dialer {
	out := make([]*net.Dialer, n)
	for i := range out {
		out[i] = &net.Dialer{Timeout: 10 * time.Second}
	}
	return out
}

// TestHappyEyeballsDelay: an attempt that hangs gets the Connection
// Attempt Delay, then the next address is tried beside it and wins; the
// hanging attempt is cancelled before happyEyeballs returns (goleak
// checks at the end that no attempt is left).
func TestHappyEyeballsDelay(t *testing.T) {
	hole, srv := blackHole(t), startAcceptLog(t, "127.0.0.1")
	const delay = 100 * time.Millisecond
	start := time.Now()
	c, errs := happyEyeballs(context.Background(), dialers(2), []string{hole, srv.addr()}, delay, nil)
	if c == nil {
		t.Fatalf("no connection: %v", errs)
	}
	defer c.Close()
	if c.RemoteAddr().String() != srv.addr() {
		t.Errorf("connected to %v, want %s", c.RemoteAddr(), srv.addr())
	}
	at := srv.waitAccepted(t, 1)
	if gap := srv.times()[0].Sub(start); gap < delay {
		t.Errorf("second address reached %v after the first attempt began, want ≥ %v", gap, delay)
	}
	if len(at) != 1 {
		t.Errorf("%d connections accepted, want 1", len(at))
	}
}

// TestHappyEyeballsFailureStartsNext: a refused attempt starts the next at
// once, well before the (long) delay.
func TestHappyEyeballsFailureStartsNext(t *testing.T) {
	refused, srv := closedPort(t), startAcceptLog(t, "127.0.0.1")
	const delay = 10 * time.Second
	start := time.Now()
	c, errs := happyEyeballs(context.Background(), dialers(2), []string{refused, srv.addr()}, delay, nil)
	if c == nil {
		t.Fatalf("no connection: %v", errs)
	}
	defer c.Close()
	srv.waitAccepted(t, 1)
	if gap := srv.times()[0].Sub(start); gap >= delay {
		t.Errorf("second address reached %v after the first failed, want it before the %v delay", gap, delay)
	}
	if len(errs) != 1 || !errors.Is(errs[0], syscall.ECONNREFUSED) {
		t.Errorf("errors %v, want the first address's refusal", errs)
	}
}

// TestHappyEyeballsLoserClosed: when both attempts connect, one
// connection is returned and the other is closed, as the servers see it.
// The first attempt is held before its connect until the second's server
// has accepted, so both do connect.
func TestHappyEyeballsLoserClosed(t *testing.T) {
	a, b := startAcceptLog(t, "127.0.0.1"), startAcceptLog(t, "127.0.0.2")
	ds := dialers(2)
	ds[0].Control = func(string, string, syscall.RawConn) error {
		select {
		case <-b.first:
		case <-time.After(5 * time.Second):
		}
		return nil
	}
	c, errs := happyEyeballs(context.Background(), ds, []string{a.addr(), b.addr()}, 10*time.Millisecond, nil)
	if c == nil {
		t.Fatalf("no connection: %v", errs)
	}
	defer c.Close()
	winner, loser := b, a
	if c.RemoteAddr().String() == a.addr() {
		winner, loser = a, b
	}
	if w := winner.waitAccepted(t, 1); closedByPeer(w[0], 200*time.Millisecond) {
		t.Errorf("the connection returned (%s) was closed", winner.addr())
	}
	if l := loser.waitAccepted(t, 1); !closedByPeer(l[0], 5*time.Second) {
		t.Errorf("the losing connection (%s) is still open", loser.addr())
	}
}

// TestHappyEyeballsAllFail: every address's error is returned; addresses
// not reached before the context ends are named as not tried.
func TestHappyEyeballsAllFail(t *testing.T) {
	r1, r2 := closedPort(t), closedPort(t)
	c, errs := happyEyeballs(context.Background(), dialers(2), []string{r1, r2}, time.Second, []error{errors.New("earlier")})
	if c != nil || len(errs) != 3 || errs[0].Error() != "earlier" || !strings.Contains(errs[1].Error(), r1) || !strings.Contains(errs[2].Error(), r2) {
		t.Errorf("conn %v, errors %v; want none and the earlier error, then %s's and %s's", c, errs, r1, r2)
	}
	h1, h2, h3 := blackHole(t), blackHole(t), blackHole(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, errs = happyEyeballs(ctx, dialers(3), []string{h1, h2, h3}, 200*time.Millisecond, nil)
	if c != nil || len(errs) != 3 {
		t.Fatalf("conn %v, errors %v; want none and 3", c, errs)
	}
	if !errors.Is(errs[0], context.DeadlineExceeded) && !isTimeout(errs[0]) || !strings.Contains(errs[2].Error(), h3+": not tried") {
		t.Errorf("errors %v: want the first attempts timed out and %s not tried", errs, h3)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestDialAddrs: the fetcher's dial skips what netguard refuses and
// addresses whose family has no local address, and names every address
// when none is left or none connects.
func TestDialAddrs(t *testing.T) {
	v4 := startAcceptLog(t, "127.0.0.1")
	port := v4.ln.Addr().(*net.TCPAddr).Port
	v6 := startAcceptLog(t, "::1")
	res, err := dnscache.New(dnscache.Options{Server: "127.0.0.1:1"}) // never asked: the dials are by address
	if err != nil {
		t.Fatal(err)
	}
	newF := func(o Options) *Fetcher {
		o.OnResult, o.ConnectTimeout, o.Resolver = func(*Result) {}, 5*time.Second, res
		f, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	loop4, loop6 := netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()
	both := &dialTarget{ip: loop6, ips: []netip.Addr{loop6, loop4}}
	p := fmt.Sprint(port)
	ctx := context.Background()

	// netguard refuses both loopback addresses.
	_, err = newF(Options{}).dialAddrs(ctx, "h.test:80", both, p)
	var de *dialError
	if !errors.As(err, &de) || len(de.errs) != 2 || !errors.Is(err, netguard.ErrForbidden) ||
		!strings.Contains(err.Error(), "fetcher: dial h.test:80: every address failed: netguard: ::1 is loopback") ||
		!strings.Contains(err.Error(), "127.0.0.1 is loopback") {
		t.Errorf("private addresses: %v, want both refused by netguard", err)
	}

	// An IPv4 local address only: ::1 is skipped, 127.0.0.1 dialled from it.
	c, err := newF(Options{AllowPrivate: true, LocalAddrs: []netip.Addr{loop4}}).dialAddrs(ctx, "h.test:80", both, p)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := c.RemoteAddr().String(); got != v4.addr() || len(v6.accepted()) != 0 {
		t.Errorf("connected to %s (%d on ::1), want %s only", got, len(v6.accepted()), v4.addr())
	}

	// An IPv6 local address only, IPv4 addresses only: none left.
	only4 := &dialTarget{ip: loop4, ips: []netip.Addr{loop4, netip.MustParseAddr("127.0.0.2")}}
	_, err = newF(Options{AllowPrivate: true, LocalAddrs: []netip.Addr{loop6}}).dialAddrs(ctx, "h.test:80", only4, p)
	if !errors.As(err, &de) || len(de.errs) != 2 || !errors.Is(err, localaddr.ErrNoFamily) {
		t.Errorf("no local address of the family: %v, want both skipped", err)
	}

	// No port open on either: both refusals named.
	closed := closedPort(t)
	_, cp, _ := net.SplitHostPort(closed)
	_, err = newF(Options{AllowPrivate: true}).dialAddrs(ctx, "h.test:80", both, cp)
	if !errors.As(err, &de) || len(de.errs) != 2 || !errors.Is(err, syscall.ECONNREFUSED) ||
		!strings.Contains(err.Error(), "[::1]:"+cp) || !strings.Contains(err.Error(), "127.0.0.1:"+cp) {
		t.Errorf("refused everywhere: %v, want both addresses named", err)
	}
}

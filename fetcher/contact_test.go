package fetcher

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/websim/dnsserver"
)

// publicResolver is a resolver whose DNS server (real, on loopback)
// answers documentation addresses (public for netguard) for public.test
// and public2.test, and 127.0.0.1 for local.test.
func publicResolver(t *testing.T) *dnscache.Resolver {
	t.Helper()
	names := map[string]netip.Addr{
		"public.test":  netip.MustParseAddr("203.0.113.7"),
		"public2.test": netip.MustParseAddr("198.51.100.9"),
		"local.test":   netip.MustParseAddr("127.0.0.1"),
	}
	dns, err := dnsserver.Start(dnsserver.Options{Addr: "127.0.0.1:0", Lookup: func(name string) (netip.Addr, bool) {
		a, ok := names[name]
		return a, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	res, err := dnscache.New(dnscache.Options{Server: dns.Addr(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// dialGuard makes f's dialer fail the test for (and refuse, before any
// packet is sent) a connection to anything but loopback; it returns the
// addresses dialled.
func dialGuard(t *testing.T, f *Fetcher, allowPublic bool) func() []string {
	var mu sync.Mutex
	var dialled []string
	f.dialer.Control = func(network, address string, _ syscall.RawConn) error {
		mu.Lock()
		dialled = append(dialled, address)
		mu.Unlock()
		ap, err := netip.ParseAddrPort(address)
		if err == nil && ap.Addr().IsLoopback() {
			return nil
		}
		if !allowPublic {
			t.Errorf("dial %s %s: a packet would leave loopback", network, address)
		}
		return errors.New("test: only loopback is dialled")
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), dialled...)
	}
}

// countingHandler counts the log records whose message has a substring.
type countingHandler struct {
	slog.Handler
	sub string
	n   *atomic.Int32
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.sub) {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

// TestNoContact: with neither a UserAgent nor a Contact, jobs of hosts
// that resolve to public addresses are refused with ErrNoContact before
// any connection (the dialer's hook sees none): StatusError, NoRequest,
// not a Retry, no back-off, one warning for the fetcher; a loopback host
// is still fetched, with the bare default User-Agent.
func TestNoContact(t *testing.T) {
	local := startOrigin(t, nil, textPage)
	var warned atomic.Int32
	log := slog.New(countingHandler{Handler: testLogger(t).Handler(), sub: "no contact", n: &warned})
	c := newCollector(1)
	f, err := New(Options{Workers: 2, HostDelay: time.Millisecond, Resolver: publicResolver(t), AllowPrivate: true, OnResult: c.onResult, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	dialled := dialGuard(t, f, false)
	public := []Job{
		{URL: "http://public.test/a", Host: "public.test"}, {URL: "http://public.test/b", Host: "public.test"},
		{URL: "https://public2.test/c", Host: "public2.test"},
	}
	lu := local.url("http", "local.test", "/y")
	runCrawl(t, f, c, append(public, Job{URL: lu, Host: "local.test"}), 10*time.Millisecond, 10*time.Second)
	for _, j := range public {
		r := c.final[j.URL]
		if r == nil || r.Status != crawl.StatusError || r.Retry || !r.NoRequest || !strings.Contains(r.Err, ErrNoContact.Error()) {
			t.Errorf("%s: %+v, want refused with ErrNoContact", j.URL, r)
		}
	}
	if r := c.final[lu]; r == nil || r.Status != crawl.StatusFetched {
		t.Errorf("%s: %+v, want fetched", lu, r)
	}
	for _, r := range local.requests() {
		if r.ua != "Meridian/0.1" {
			t.Errorf("%s: User-Agent %q, want Meridian/0.1", r.uri, r.ua)
		}
	}
	if n := len(local.requests()); n != 2 {
		t.Errorf("the loopback origin got %d requests, want robots.txt and the page", n)
	}
	for _, a := range dialled() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("dialled %s", a)
		}
	}
	if n := warned.Load(); n != 1 {
		t.Errorf("%d warnings, want one", n)
	}
	if st := f.Stats(); st.Backoffs != 0 || st.Requests != 2 {
		t.Errorf("stats %+v, want no back-off and two requests", st)
	}
}

// TestContactUserAgent: with a Contact, the default User-Agent carries it
// (the loopback origin's log), and a public host is no longer refused for
// want of one: the fetcher tries to connect (the dialer's hook refuses it
// before any packet is sent).
func TestContactUserAgent(t *testing.T) {
	local := startOrigin(t, nil, textPage)
	const contact = "https://ops.example/meridian"
	c := newCollector(1)
	f, err := New(Options{Workers: 2, HostDelay: time.Millisecond, Resolver: publicResolver(t), AllowPrivate: true,
		Contact: contact, MaxFailures: 100, OnResult: c.onResult, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	dialled := dialGuard(t, f, true)
	lu, pu := local.url("http", "local.test", "/y"), "http://public.test/a"
	runCrawl(t, f, c, []Job{{URL: lu, Host: "local.test"}, {URL: pu, Host: "public.test"}}, 10*time.Millisecond, 10*time.Second)
	reqs := local.requests()
	if len(reqs) != 2 {
		t.Errorf("the loopback origin got %d requests, want robots.txt and the page", len(reqs))
	}
	for _, r := range reqs {
		if want := "Meridian/0.1 (+" + contact + ")"; r.ua != want {
			t.Errorf("%s: User-Agent %q, want %q", r.uri, r.ua, want)
		}
	}
	if r := c.final[pu]; r == nil || strings.Contains(r.Err, ErrNoContact.Error()) {
		t.Errorf("%s: %+v, want no ErrNoContact", pu, r)
	}
	tried := false
	for _, a := range dialled() {
		tried = tried || a == "203.0.113.7:80"
	}
	if !tried {
		t.Errorf("dialled %q, want a try of 203.0.113.7:80", dialled())
	}
}

// TestEdgeOptionsValidate: Contact and MaxCookieHosts are checked.
func TestEdgeOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o   Options
		bad string // in the error; "" valid
	}{
		{Options{Contact: "https://ops.example/crawler"}, ""},
		{Options{Contact: "mailto:ops@example.org"}, ""},
		{Options{Contact: "ops.example/crawler"}, "not an absolute URL"},
		{Options{Contact: "https://ops.example/a b"}, "no spaces"},
		{Options{Contact: "https://ops.example/(x)"}, "parentheses"},
		{Options{Contact: "https://ops.example/\r\nX: y"}, "control characters"},
		{Options{MaxCookieHosts: -1}, "max cookie hosts must not be negative"},
		{Options{Cookies: true, MaxCookieHosts: 3}, ""},
	} {
		c.o.OnResult = func(*Result) {}
		err := c.o.Validate()
		if (c.bad == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.bad)) {
			t.Errorf("%+v: Validate = %v, want %q", c.o, err, c.bad)
		}
	}
}

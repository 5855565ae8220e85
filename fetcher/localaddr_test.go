package fetcher

// Tests of Options.LocalAddrs: the source address of the fetcher's
// connections, as the servers see it.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/localaddr"
)

// srcServer is an HTTP server on one loopback address that records the
// source address of every request (robots.txt: 404, anything else "ok").
type srcServer struct {
	ip   netip.Addr
	port int
	mu   sync.Mutex
	from []string // "path from-IP"
}

func startSrcServer(t *testing.T, ip string) *srcServer {
	t.Helper()
	s := &srcServer{ip: netip.MustParseAddr(ip)}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, _, _ := net.SplitHostPort(r.RemoteAddr)
		s.mu.Lock()
		s.from = append(s.from, r.URL.Path+" "+from)
		s.mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("ok"))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	s.port = ln.Addr().(*net.TCPAddr).Port
	return s
}

func (s *srcServer) url(path string) string {
	return fmt.Sprintf("http://%s%s", net.JoinHostPort(s.ip.String(), fmt.Sprint(s.port)), path)
}

func (s *srcServer) arrivals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.from...)
}

// fetchAll fetches /page of every server with locals and returns the page
// Results by URL, robots.txt ones under their URL too.
func fetchAll(t *testing.T, locals []netip.Addr, servers []*srcServer) map[string]*Result {
	t.Helper()
	// The hosts are IP literals: the resolver is never asked.
	res, err := dnscache.New(dnscache.Options{Server: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]*Result{}
	pages := 0
	f, err := New(Options{
		Workers: 4, HostDelay: time.Millisecond, AllowPrivate: true, Resolver: res, LocalAddrs: locals,
		BackoffBase: time.Hour, Logger: testLogger(t),
		OnResult: func(r *Result) {
			mu.Lock()
			defer mu.Unlock()
			got[r.URL] = r
			if r.Kind == KindPage {
				pages++
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []Job
	for _, s := range servers {
		jobs = append(jobs, Job{URL: s.url("/page"), Host: s.ip.String()})
	}
	f.Submit(jobs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := pages
		mu.Unlock()
		if n == len(servers) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of %d pages answered within 10s", n, len(servers))
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return got
}

// TestLocalAddrs: with one local address, robots.txt and the page arrive
// from it; with two, each server sees one of them, the one localaddr.Pick
// chooses for its IP, and both are used.
func TestLocalAddrs(t *testing.T) {
	t.Run("one", func(t *testing.T) {
		s := startSrcServer(t, "127.0.0.1")
		local := netip.MustParseAddr("127.0.2.1")
		got := fetchAll(t, []netip.Addr{local}, []*srcServer{s})
		r := got[s.url("/page")]
		if r == nil || r.HTTPStatus != 200 {
			t.Fatalf("page result %+v", r)
		}
		// Took is the request's time, start to end: more than nothing,
		// less than the whole test.
		if r.Took <= 0 || r.Took > 10*time.Second {
			t.Errorf("page result took %v, want the request's time", r.Took)
		}
		want := []string{"/robots.txt 127.0.2.1", "/page 127.0.2.1"}
		if a := s.arrivals(); fmt.Sprint(a) != fmt.Sprint(want) {
			t.Fatalf("arrivals %q, want %q", a, want)
		}
	})
	t.Run("two", func(t *testing.T) {
		locals := []netip.Addr{netip.MustParseAddr("127.0.2.1"), netip.MustParseAddr("127.0.2.2")}
		var servers []*srcServer
		for i := 1; i <= 6; i++ {
			servers = append(servers, startSrcServer(t, fmt.Sprintf("127.0.3.%d", i)))
		}
		got := fetchAll(t, locals, servers)
		used := map[string]bool{}
		for _, s := range servers {
			if r := got[s.url("/page")]; r == nil || r.HTTPStatus != 200 {
				t.Errorf("%s: page result %+v", s.ip, r)
				continue
			}
			pick, err := localaddr.Pick(locals, s.ip)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"/robots.txt " + pick.String(), "/page " + pick.String()}
			if a := s.arrivals(); fmt.Sprint(a) != fmt.Sprint(want) {
				t.Errorf("%s: arrivals %q, want %q", s.ip, a, want)
			}
			used[pick.String()] = true
		}
		if len(used) != 2 {
			t.Errorf("the six servers were reached from %v only; pick other server addresses", used)
		}
	})
	t.Run("no address of the family", func(t *testing.T) {
		v6 := netip.MustParseAddr("::1")
		if err := localaddr.Check(v6); err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		s := startSrcServer(t, "127.0.0.1")
		got := fetchAll(t, []netip.Addr{v6}, []*srcServer{s})
		r := got[s.url("/robots.txt")]
		if r == nil || !strings.Contains(r.Err, "no local address of the remote address's family: 127.0.0.1 is IPv4") {
			t.Errorf("robots.txt result %+v, want the family error", r)
		}
		if p := got[s.url("/page")]; p == nil || !p.Retry {
			t.Errorf("page result %+v, want a retry", p)
		}
		if a := s.arrivals(); len(a) != 0 {
			t.Errorf("arrivals %q, want none", a)
		}
	})
}

// TestLocalAddrsValidate: New refuses an address the machine lacks, and
// an unusable one, naming them.
func TestLocalAddrsValidate(t *testing.T) {
	ok := func(*Result) {}
	missing := netip.MustParseAddr("203.0.113.254")
	if localaddr.Check(missing) == nil {
		t.Skipf("%v is configured on this machine", missing)
	}
	_, err := New(Options{OnResult: ok, LocalAddrs: []netip.Addr{netip.MustParseAddr("127.0.2.1"), missing, netip.IPv4Unspecified()}})
	if err == nil {
		t.Fatal("New accepted an address the machine lacks")
	}
	for _, want := range []string{
		"fetcher: local address 203.0.113.254: this machine has no such address: bind: ",
		"fetcher: local address 0.0.0.0: the unspecified address",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

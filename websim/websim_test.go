package websim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oschwald/geoip2-golang"
	"go.uber.org/goleak"

	"github.com/meridian-crawler/meridian/websim/synth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startWeb(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func client(s *Server) *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: s.Dialer(), DisableCompression: true},
		Timeout:   10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp, b
}

// rawGet sends one request on a fresh TCP connection and returns every byte
// of the response.
func rawGet(t *testing.T, s *Server, host, path string) []byte {
	t.Helper()
	addr, ok := s.Addr(host)
	if !ok {
		t.Fatalf("no address for %s", host)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n", path, host, s.Port())
	c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.77.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestSameSeedSameBytes starts two servers with one seed, one after the
// other on the same port, and compares their truth files and raw responses.
func TestSameSeedSameBytes(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	run := func(name string) (truth []byte, raw [][]byte) {
		truthPath := filepath.Join(dir, name+".jsonl")
		s, err := Start(Options{Web: synth.Options{Hosts: 25, Pages: 10, Seed: 42, IPs: 4, Port: port, Profile: synth.Realistic}, TruthPath: truthPath})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		truth, err = os.ReadFile(truthPath)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(truth))
		sc.Buffer(nil, 1<<24)
		for i := 0; sc.Scan() && i < 400; i++ {
			var r synth.Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			if r.Status == 0 {
				continue
			}
			path := strings.TrimPrefix(r.URL, fmt.Sprintf("http://%s:%d", r.Host, port))
			raw = append(raw, rawGet(t, s, r.Host, path))
		}
		return truth, raw
	}
	t1, r1 := run("a")
	t2, r2 := run("b")
	if !bytes.Equal(t1, t2) {
		t.Fatal("truth files differ")
	}
	if len(r1) < 300 || len(r1) != len(r2) {
		t.Fatalf("fetched %d and %d responses", len(r1), len(r2))
	}
	for i := range r1 {
		if !bytes.Equal(r1[i], r2[i]) {
			t.Fatalf("response %d differs:\n%.300q\n%.300q", i, r1[i], r2[i])
		}
	}
}

func TestServesTruth(t *testing.T) {
	dir := t.TempDir()
	s := startWeb(t, Options{Web: synth.Options{Hosts: 30, Pages: 8, Seed: 9, IPs: 6, Profile: synth.Realistic},
		TruthPath: filepath.Join(dir, "truth.jsonl"), GeoIPPath: filepath.Join(dir, "geo.mmdb")})
	f, err := os.Open(filepath.Join(dir, "truth.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := client(s)
	dec := json.NewDecoder(f)
	n := 0
	flakySeen := map[string]int{}
	for dec.More() {
		var r synth.Record
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{r.URL, r.Canonical, r.Host, r.IP, r.Kind} {
			if field == "" {
				t.Fatalf("record with an empty field: %+v", r)
			}
		}
		resp, _ := get(t, c, r.URL)
		if r.FailFirst > 0 && flakySeen[r.URL] < r.FailFirst {
			for flakySeen[r.URL] = 1; flakySeen[r.URL] < r.FailFirst; flakySeen[r.URL]++ {
				if resp.StatusCode != 503 {
					t.Fatalf("%s: flaky robots answered %d, want 503", r.URL, resp.StatusCode)
				}
				resp, _ = get(t, c, r.URL)
			}
			if resp.StatusCode != 503 {
				t.Fatalf("%s: flaky robots answered %d, want 503", r.URL, resp.StatusCode)
			}
			resp, _ = get(t, c, r.URL)
		}
		if resp.StatusCode != r.Status || resp.Header.Get("Content-Type") != r.ContentType {
			t.Fatalf("%s: served %d %q, truth %d %q", r.URL, resp.StatusCode, resp.Header.Get("Content-Type"), r.Status, r.ContentType)
		}
		if resp.StatusCode/100 == 3 && resp.Header.Get("Location") != r.Outlinks[0] {
			t.Fatalf("%s: Location %q, truth %q", r.URL, resp.Header.Get("Location"), r.Outlinks)
		}
		if addr, _ := s.Addr(r.Host); !strings.HasPrefix(addr, r.IP+":") {
			t.Fatalf("%s: served from %s, truth says %s", r.URL, addr, r.IP)
		}
		n++
	}
	if n < 500 {
		t.Fatalf("only %d records", n)
	}
	db, err := geoip2.Open(filepath.Join(dir, "geo.mmdb"))
	if err != nil {
		t.Fatalf("geoip file: %v", err)
	}
	defer db.Close()
	regions := map[string]int{}
	for _, h := range s.Web().Hosts() {
		c, err := db.City(h.IP.AsSlice())
		if err != nil {
			t.Fatal(err)
		}
		cc := strings.ToLower(c.Country.IsoCode)
		if c.City.Names["en"] != h.City.Name || !strings.HasSuffix(h.Name, "."+cc+".test") || c.Location.Latitude != h.City.Lat {
			t.Fatalf("%s at %v: GeoIP says %q, %q, %v", h.Name, h.IP, c.City.Names["en"], cc, c.Location.Latitude)
		}
		regions[h.City.Region]++
	}
	if len(regions) < 3 {
		t.Fatalf("hosts in %d regions only: %v", len(regions), regions)
	}
}

func TestDNS(t *testing.T) {
	s := startWeb(t, Options{Web: synth.Options{Hosts: 10, Seed: 1, IPs: 3}, DNSAddr: "127.0.0.1:0", DNSTTL: 30 * time.Second})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, s.DNSAddr())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, h := range s.Web().Hosts() {
		addrs, err := r.LookupHost(ctx, h.Name)
		if err != nil || len(addrs) != 1 || addrs[0] != h.IP.String() {
			t.Fatalf("%s: %v %v, want %v", h.Name, addrs, err, h.IP)
		}
	}
	_, err := r.LookupHost(ctx, "nowhere.us.test")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Fatalf("unknown name: %v, want NXDOMAIN", err)
	}
}

func fetchStats(t *testing.T, s *Server) Snapshot {
	t.Helper()
	resp, err := http.Get("http://" + s.AdminAddr() + "/_websim/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestStatsEndpoint(t *testing.T) {
	s := startWeb(t, Options{Web: synth.Options{Hosts: 40, Pages: 5, Seed: 4, IPs: 40, Profile: synth.Hostile},
		AdminAddr: "127.0.0.1:0", Limits: Limits{DripInterval: 10 * time.Millisecond, DripChunk: 10}})
	web := s.Web()
	c := client(s)
	var plain, disallowed string
	for _, h := range web.Hosts() {
		if h.Role == synth.RoleNone && h.Index > 0 && h.Robots == synth.RobotsNormal && plain == "" {
			plain = h.Name
		}
	}
	// Three sequential requests 60ms apart, one of them robots-disallowed.
	disallowed = "http://" + plain + fmt.Sprintf(":%d", s.Port()) + "/private/0.html"
	for i, u := range []string{"/", "/robots.txt", "/private/0.html"} {
		if i > 0 {
			time.Sleep(60 * time.Millisecond)
		}
		get(t, c, "http://"+plain+fmt.Sprintf(":%d", s.Port())+u)
	}
	// Two concurrent requests to the drip host.
	var drip synth.Host
	for _, h := range web.Hosts() {
		if h.Role == synth.RoleDrip {
			drip = h
		}
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { get(t, c, fmt.Sprintf("http://%s:%d/drip.html", drip.Name, s.Port())) })
	}
	wg.Wait()
	snap := fetchStats(t, s)
	hs := snap.Hosts[plain]
	if hs == nil || hs.Requests != 3 || hs.MaxConcurrent != 1 || hs.MinIntervalMS == nil || *hs.MinIntervalMS < 55 {
		t.Fatalf("stats for %s: %+v", plain, hs)
	}
	ds := snap.Hosts[drip.Name]
	if ds == nil || ds.Requests != 2 || ds.MaxConcurrent != 2 {
		t.Fatalf("stats for drip host %s: %+v", drip.Name, ds)
	}
	if len(snap.RobotsViolations) != 1 || snap.RobotsViolations[0] != disallowed {
		t.Fatalf("robots violations %q, want [%s]", snap.RobotsViolations, disallowed)
	}
	var total int64
	for _, v := range snap.IPs {
		total += v.Requests
	}
	if total != 5 || snap.Requests != 5 {
		t.Fatalf("per-IP requests add up to %d (total %d), want 5", total, snap.Requests)
	}
	// One request only: min_interval_ms is null.
	get(t, c, fmt.Sprintf("http://%s:%d/", web.Hosts()[0].Name, s.Port()))
	raw, err := http.Get("http://" + s.AdminAddr() + "/_websim/stats")
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]map[string]map[string]any
	b, _ := io.ReadAll(raw.Body)
	raw.Body.Close()
	json.Unmarshal(b, &generic)
	if v, ok := generic["hosts"][web.Hosts()[0].Name]["min_interval_ms"]; !ok || v != nil {
		t.Fatalf("min_interval_ms for one request: %v (present %v), want null", v, ok)
	}
	// Unknown hosts are answered 404 and not counted as hosts.
	if _, err := c.Get(fmt.Sprintf("http://%s:%d/", "h999.zz.test", s.Port())); err == nil || !strings.Contains(err.Error(), "not a host of this web") {
		t.Fatalf("dialer let an unknown name through: %v", err)
	}
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s:%d/", s.IPs()[0], s.Port()), nil)
	req.Host = "h999.zz.test"
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("unknown host: %d", resp.StatusCode)
	}
	if snap := fetchStats(t, s); snap.UnknownHost != 1 || snap.Hosts["h999.zz.test"] != nil {
		t.Fatalf("unknown host counted: %d", snap.UnknownHost)
	}
}

func roleHost(t *testing.T, s *Server, r synth.Role) string {
	for _, h := range s.Web().Hosts() {
		if h.Role == r {
			return fmt.Sprintf("%s:%d", h.Name, s.Port())
		}
	}
	t.Fatalf("no host with role %s", r)
	return ""
}

func TestHostileBounded(t *testing.T) {
	lim := Limits{MaxSlow: 4, DripChunk: 10, DripInterval: 20 * time.Millisecond, DripMax: 300 * time.Millisecond, BlackholeHold: 10 * time.Second}
	s := startWeb(t, Options{Web: synth.Options{Hosts: 20, Pages: 5, Seed: 4, IPs: 4, Profile: synth.Hostile}, Limits: lim})
	c := client(s)

	t.Run("drip ends at DripMax", func(t *testing.T) {
		start := time.Now()
		resp, err := c.Get("http://" + roleHost(t, s, synth.RoleDrip) + "/p/1.html")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || len(b) >= int(resp.ContentLength) {
			t.Fatalf("drip delivered %d of %d bytes without error", len(b), resp.ContentLength)
		}
		if el := time.Since(start); el < 250*time.Millisecond || el > 5*time.Second {
			t.Fatalf("drip took %v, want about %v", el, lim.DripMax)
		}
	})
	t.Run("huge body is far above any limit", func(t *testing.T) {
		resp, err := c.Get("http://" + roleHost(t, s, synth.RoleHuge) + "/huge.html")
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.CopyN(io.Discard, resp.Body, 8<<20)
		resp.Body.Close()
		if err != nil || n != 8<<20 || resp.ContentLength != synth.HugeBytes {
			t.Fatalf("huge: read %d (%v), content-length %d", n, err, resp.ContentLength)
		}
	})
	t.Run("gzip bomb inflates 1000-fold", func(t *testing.T) {
		resp, body := get(t, c, "http://"+roleHost(t, s, synth.RoleBomb)+"/bomb.html")
		if resp.Header.Get("Content-Encoding") != "gzip" || len(body) > 2<<20 {
			t.Fatalf("bomb: %q, %d bytes", resp.Header.Get("Content-Encoding"), len(body))
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, io.LimitReader(zr, 64<<20))
		if err != nil || n != 64<<20 {
			t.Fatalf("bomb inflated to only %d bytes (%v)", n, err)
		}
	})
	t.Run("blackhole never answers and is bounded", func(t *testing.T) {
		addr, _ := s.Addr(strings.Split(roleHost(t, s, synth.RoleBlackhole), ":")[0])
		before := runtime.NumGoroutine()
		var conns []net.Conn
		answered := 0
		for i := range 3 * lim.MaxSlow {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, conn)
			fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", roleHost(t, s, synth.RoleBlackhole))
			_ = i
		}
		for _, conn := range conns {
			conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := conn.Read(make([]byte, 1))
			var ne net.Error
			switch {
			case n > 0:
				answered++
			case errors.As(err, &ne) && ne.Timeout(): // held: never answered
			case err == io.EOF: // dropped over the limit: never answered either
			default:
				t.Logf("read: %v", err)
			}
		}
		if answered > 0 {
			t.Fatalf("blackhole answered %d connections", answered)
		}
		if g := runtime.NumGoroutine(); g > before+3*lim.MaxSlow+10 {
			t.Fatalf("goroutines grew from %d to %d for %d connections with MaxSlow %d", before, g, len(conns), lim.MaxSlow)
		}
		for _, conn := range conns {
			conn.Close()
		}
	})
	t.Run("slow responses past MaxSlow get 503", func(t *testing.T) {
		var wg sync.WaitGroup
		codes := make(chan int, 3*lim.MaxSlow)
		for range 3 * lim.MaxSlow {
			wg.Go(func() {
				resp, err := c.Get("http://" + roleHost(t, s, synth.RoleDrip) + "/drip.html")
				if err != nil {
					return
				}
				codes <- resp.StatusCode
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
		close(codes)
		n503 := 0
		for code := range codes {
			if code == 503 {
				n503++
			}
		}
		if n503 == 0 {
			t.Fatal("no 503 past MaxSlow")
		}
	})
	// Closing the server ends held blackhole connections promptly (goleak in TestMain checks the rest).
	addr, _ := s.Addr(strings.Split(roleHost(t, s, synth.RoleBlackhole), ":")[0])
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", roleHost(t, s, synth.RoleBlackhole))
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 6*time.Second {
		t.Fatalf("Close took %v with a blackhole connection open", el)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.77.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = Start(Options{Web: synth.Options{Hosts: 3, Port: port}})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("127.77.0.1:%d", port)) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("port in use: %v", err)
	}
	if _, err := Start(Options{Web: synth.Options{Hosts: -2}, DNSAddr: "nonsense"}); err == nil ||
		!strings.Contains(err.Error(), "hosts") || !strings.Contains(err.Error(), "dns address") {
		t.Fatalf("bad options: %v", err)
	}
	dir := t.TempDir()
	if _, err := Start(Options{Web: synth.Options{Hosts: 3}, TruthPath: filepath.Join(dir, "no", "such", "dir", "t.jsonl")}); err == nil || !strings.Contains(err.Error(), "t.jsonl") {
		t.Fatalf("unwritable truth: %v", err)
	}
	bad := filepath.Join(dir, "bad.warc.gz")
	os.WriteFile(bad, []byte("this is not a warc file\n"), 0o644)
	if _, err := StartReplay(ReplayOptions{WARCs: []string{bad}}); err == nil || !strings.Contains(err.Error(), "bad.warc.gz") {
		t.Fatalf("bad warc: %v", err)
	}
	if _, err := StartReplay(ReplayOptions{WARCs: []string{filepath.Join(dir, "missing.warc")}}); err == nil || !strings.Contains(err.Error(), "missing.warc") {
		t.Fatalf("missing warc: %v", err)
	}
}

// TestStatsCountURLs: the request log counts each URL's 2xx answers from
// the moment it is turned on (not failures), and Reset empties it.
func TestStatsCountURLs(t *testing.T) {
	s := NewStats(nil)
	s.Start("a.test", true, "127.0.0.1", false, "http://a.test/1")(200)
	if s.URLRequests() != nil {
		t.Fatal("URLs counted before CountURLs")
	}
	s.CountURLs()
	for _, u := range []string{"http://a.test/1", "http://a.test/2", "http://a.test/1"} {
		s.Start("a.test", true, "127.0.0.1", false, u)(200)
	}
	s.Start("a.test", true, "127.0.0.1", false, "http://a.test/2")(503) // a failure: not counted
	got := s.URLRequests()
	if len(got) != 2 || got["http://a.test/1"] != 2 || got["http://a.test/2"] != 1 {
		t.Fatalf("URL requests %v", got)
	}
	s.Reset()
	if got := s.URLRequests(); got == nil || len(got) != 0 {
		t.Fatalf("after Reset: %v", got)
	}
}

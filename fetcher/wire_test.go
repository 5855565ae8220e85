package fetcher

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/cespare/xxhash/v2"
	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	gowarc "github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/coding"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
	"github.com/meridian-crawler/meridian/fetcher/warcfile/cdxj"
	"github.com/meridian-crawler/meridian/websim/replay"
)

// serverCA returns a pool trusting a CA made for one test, and a server
// certificate it signed for names (and 127.0.0.1).
func serverCA(t *testing.T, names ...string) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	ca := newTestCA(t)
	return ca.pool, ca.leaf(t, names, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// arrival is one request a test server received, as it received it.
type arrival struct {
	proto          string
	protoMajor     int
	path           string
	remote         string
	userAgent      string
	accept         string
	acceptEncoding string
}

// logServer is a test server that records every request it receives
// (its own log, against which the tests judge) and the connections it
// accepted and saw closed.
type logServer struct {
	srv            *httptest.Server
	mu             sync.Mutex
	log            []arrival
	opened, closed int
	inflight, most int // requests being answered, and the most at once
	port           uint16
}

// startLogServer starts serve behind a request log: over TLS with cert
// and the ALPN protocols nextProtos (h2 enables HTTP/2) if cert is not
// nil, else plain HTTP/1.1.
func startLogServer(t *testing.T, cert *tls.Certificate, nextProtos []string, serve http.HandlerFunc) *logServer {
	t.Helper()
	s := &logServer{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.log = append(s.log, arrival{
			proto: r.Proto, protoMajor: r.ProtoMajor, path: r.URL.RequestURI(), remote: r.RemoteAddr,
			userAgent: r.Header.Get("User-Agent"), accept: r.Header.Get("Accept"), acceptEncoding: r.Header.Get("Accept-Encoding"),
		})
		s.inflight++
		s.most = max(s.most, s.inflight)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inflight--
			s.mu.Unlock()
		}()
		serve(w, r)
	}))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch st {
		case http.StateNew:
			s.opened++
		case http.StateClosed, http.StateHijacked:
			s.closed++
		}
	}
	if cert != nil {
		s.srv.EnableHTTP2 = slices.Contains(nextProtos, "h2")
		s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: nextProtos}
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	t.Cleanup(s.srv.Close)
	s.port = netip.MustParseAddrPort(s.srv.Listener.Addr().String()).Port()
	return s
}

func (s *logServer) arrivals() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// mostAtOnce returns the most requests the server answered at once.
func (s *logServer) mostAtOnce() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most
}

func (s *logServer) conns() (opened, closed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened, s.closed
}

// waitClosed waits, at most 5 s, until the server has seen every
// connection it accepted closed, and reports whether it did.
func (s *logServer) waitClosed() bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if o, c := s.conns(); o == c {
			return true
		}
	}
	return false
}

// smallSite serves a robots.txt that allows everything and four pages
// linking to each other.
func smallSite(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/robots.txt":
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "User-agent: *\nDisallow: /private/\n")
	case "/", "/a", "/b", "/c":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<html><body><h1>%s</h1><a href="/">home</a> <a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a></body></html>`, r.URL.Path)
	default:
		http.NotFound(w, r)
	}
}

// wireFetcher returns a Fetcher for loopback test servers whose *.test
// names resolve to 127.0.0.1, trusting roots, with a WARC writer (and its
// indexes) in a temporary directory, and the collector of its Results.
func wireFetcher(t *testing.T, roots *x509.CertPool, maxBody int64) (*Fetcher, *collector, *warcfile.Writer, string) {
	t.Helper()
	dir := t.TempDir()
	wr, err := warcfile.Open(warcfile.Options{Dir: dir, Index: true})
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector(1)
	f, err := New(Options{
		Workers: 4, HostDelay: 5 * time.Millisecond, AllowPrivate: true, Resolver: testTLDResolver(t),
		TLSRoots: roots, WARC: wr, MaxBodyBytes: maxBody, OnResult: c.onResult, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return f, c, wr, dir
}

// pageJobs returns the jobs of paths on origin.
func pageJobs(origin string, paths ...string) []Job {
	var jobs []Job
	for _, p := range paths {
		jobs = append(jobs, Job{URL: origin + p, Host: originHost(origin)})
	}
	return jobs
}

// originHost returns the host name of an origin "scheme://host:port".
func originHost(origin string) string {
	h := origin[strings.Index(origin, "//")+2:]
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	return h
}

// warcRecord is one record of a WARC file as the tests read it back.
type warcRecord struct {
	typ       gowarc.RecordType
	uri       string
	ip        string   // WARC-IP-Address
	protocols []string // WARC-Protocol fields, in order
	truncated string
	block     []byte // the whole block: HTTP head and payload
	payload   []byte // after the HTTP head
	header    http.Header
	status    int
	fields    map[string]string  // a metadata record's fields that tests look at
	warc      *gowarc.WarcFields // the record's WARC header
	// request records: the request head as recorded, and its headers
	reqHead string
	reqHdr  http.Header
}

// metadataFields are the fields of metadata records readWARCs keeps.
var metadataFields = []string{"robots", "robots-source", "archived", "near-duplicate-of", "simhash"}

// readWARCs reads every record of the WARC files in dir with gowarc under
// strict validation, checking each record's block and payload digests.
func readWARCs(t *testing.T, dir string) []warcRecord {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) == 0 {
		t.Fatalf("no WARC file in %s", dir)
	}
	var out []warcRecord
	for _, path := range files {
		r, err := gowarc.NewWarcFileReader(path, 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if len(rec.Validation) > 0 {
				t.Fatalf("%s: record at %d: validation %v", path, rec.Offset, rec.Validation)
			}
			wr := rec.WarcRecord
			h := wr.WarcHeader()
			x := warcRecord{typ: wr.Type(), uri: h.Get(gowarc.WarcTargetURI), ip: h.Get(gowarc.WarcIPAddress), protocols: h.GetAll("WARC-Protocol"), truncated: h.Get(gowarc.WarcTruncated), warc: h}
			if b, ok := wr.Block().(gowarc.HttpRequestBlock); ok {
				x.reqHead, x.reqHdr = string(b.ProtocolHeaderBytes()), b.HttpHeader().Clone()
			}
			raw, err := wr.Block().RawBytes()
			if err != nil {
				t.Fatal(err)
			}
			x.block, _ = io.ReadAll(raw)
			if _, err := wr.ValidateDigest(); err != nil {
				t.Errorf("%s: %v record of %s: %v", path, x.typ, x.uri, err)
			}
			if blk, ok := wr.Block().(gowarc.HttpResponseBlock); ok {
				x.header, x.status = http.Header(*blk.HttpHeader()), blk.HttpStatusCode()
				if pr, err := blk.PayloadBytes(); err == nil {
					x.payload, _ = io.ReadAll(pr)
				}
				if pd := blk.PayloadDigest(); h.Get(gowarc.WarcPayloadDigest) != pd {
					t.Errorf("%s: response of %s: WARC-Payload-Digest %s, payload's %s", path, x.uri, h.Get(gowarc.WarcPayloadDigest), pd)
				}
			}
			if x.typ == gowarc.Metadata {
				b, ok := wr.Block().(gowarc.WarcFieldsBlock)
				if !ok {
					t.Fatalf("%s: metadata block of %s is a %T", path, x.uri, wr.Block())
				}
				x.fields = map[string]string{}
				for _, name := range metadataFields {
					if v := b.WarcFields().Get(name); v != "" {
						x.fields[name] = v
					}
				}
			}
			out = append(out, x)
			rec.Close()
		}
		r.Close()
	}
	return out
}

// TestHTTP2OnlyServerFetchedOverH2: a TLS server that offers h2 alone by
// ALPN and answers 505 to anything but HTTP/2 (an HTTP/2-only host): its
// log shows robots.txt and every page fetched over HTTP/2, one at a time,
// on one connection, closed once the fetcher is done; the WARC records have
// HTTP/1.1 heads (the request head listing what the server received) and
// say "WARC-Protocol: h2" and the TLS version.
func TestHTTP2OnlyServerFetchedOverH2(t *testing.T) {
	pool, cert := serverCA(t, "h2.test")
	s := startLogServer(t, &cert, []string{"h2"}, func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "HTTP/2 only", http.StatusHTTPVersionNotSupported)
			return
		}
		smallSite(w, r)
	})
	f, c, wr, dir := wireFetcher(t, pool, 0)
	origin := fmt.Sprintf("https://h2.test:%d", s.port)
	pages := []string{"/", "/a", "/b", "/c"}
	runCrawl(t, f, c, pageJobs(origin, pages...), 10*time.Millisecond, 20*time.Second)
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if r := c.final[origin+p]; r == nil || r.Status != crawl.StatusFetched || r.HTTPStatus != 200 || len(r.Links) != 3 {
			t.Errorf("%s: %+v, want fetched with 3 links", p, r)
		}
	}
	log := s.arrivals()
	var paths []string
	for _, a := range log {
		paths = append(paths, a.path)
		if a.protoMajor != 2 || a.remote != log[0].remote {
			t.Errorf("request for %s over %s from %s; want HTTP/2 from %s, the first connection", a.path, a.proto, a.remote, log[0].remote)
		}
	}
	slices.Sort(paths)
	if want := []string{"/", "/a", "/b", "/c", "/robots.txt"}; !slices.Equal(paths, want) {
		t.Errorf("the server saw %v, want %v once each", paths, want)
	}
	if opened, _ := s.conns(); opened != 1 {
		t.Errorf("%d connections, want 1 reused", opened)
	}
	if most := s.mostAtOnce(); most != 1 {
		t.Errorf("%d requests at once on the HTTP/2 connection, want 1 at a time", most)
	}
	if !s.waitClosed() {
		o, cl := s.conns()
		t.Errorf("after Run: %d connections opened, %d closed", o, cl)
	}

	byPath := map[string]arrival{}
	for _, a := range log {
		byPath[a.path] = a
	}
	recs := readWARCs(t, dir)
	n := 0
	for _, x := range recs {
		if x.typ != gowarc.Request && x.typ != gowarc.Response {
			continue
		}
		n++
		if want := []string{"h2", "tls/1.3"}; !slices.Equal(x.protocols, want) || x.ip != "127.0.0.1" {
			t.Errorf("%v of %s: WARC-Protocol %q, WARC-IP-Address %s; want %q, 127.0.0.1", x.typ, x.uri, x.protocols, x.ip, want)
		}
		path := strings.TrimPrefix(x.uri, origin)
		if x.typ == gowarc.Response {
			if !bytes.HasPrefix(x.block, []byte("HTTP/1.1 200 OK\r\n")) {
				t.Errorf("response of %s: head %q, want an HTTP/1.1 status line", x.uri, x.block[:min(len(x.block), 40)])
			}
			continue
		}
		a := byPath[path]
		want := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: h2.test:%d\r\nUser-Agent: %s\r\nAccept: %s\r\nAccept-Encoding: %s\r\n\r\n", path, s.port, a.userAgent, a.accept, a.acceptEncoding)
		if string(x.block) != want || a.acceptEncoding != "gzip, br, zstd" {
			t.Errorf("request of %s:\n%q\nwant what the server received\n%q", x.uri, x.block, want)
		}
	}
	if n != 2*(len(pages)+1) {
		t.Errorf("%d request and response records, want %d", n, 2*(len(pages)+1))
	}
}

// TestHTTP1OnlyTLSServerStillWorks: a TLS server that offers http/1.1
// alone gets every request over HTTP/1.1, on one kept-alive connection,
// and the WARC says "WARC-Protocol: http/1.1" and the TLS version.
func TestHTTP1OnlyTLSServerStillWorks(t *testing.T) {
	pool, cert := serverCA(t, "h1.test")
	s := startLogServer(t, &cert, []string{"http/1.1"}, smallSite)
	f, c, wr, dir := wireFetcher(t, pool, 0)
	origin := fmt.Sprintf("https://h1.test:%d", s.port)
	runCrawl(t, f, c, pageJobs(origin, "/", "/a"), 10*time.Millisecond, 20*time.Second)
	wr.Close()
	for _, p := range []string{"/", "/a"} {
		if r := c.final[origin+p]; r == nil || r.Status != crawl.StatusFetched || len(r.Links) != 3 {
			t.Errorf("%s: %+v, want fetched with 3 links", p, r)
		}
	}
	log := s.arrivals()
	for _, a := range log {
		if a.proto != "HTTP/1.1" || a.remote != log[0].remote {
			t.Errorf("request for %s over %s from %s", a.path, a.proto, a.remote)
		}
	}
	if len(log) != 3 {
		t.Errorf("the server saw %+v, want robots.txt and two pages", log)
	}
	for _, x := range readWARCs(t, dir) {
		if (x.typ == gowarc.Request || x.typ == gowarc.Response) && !slices.Equal(x.protocols, []string{"http/1.1", "tls/1.3"}) {
			t.Errorf("%v of %s: WARC-Protocol %q", x.typ, x.uri, x.protocols)
		}
	}
}

// TestTLSRootsTrusted: Options.TLSRoots is what verifies servers: the test
// CA's server is fetched with it, and refused without it, the system's
// roots not knowing the test CA: robots.txt gets no response and an error
// that says the certificate is not trusted, and the page no request.
func TestTLSRootsTrusted(t *testing.T) {
	pool, cert := serverCA(t, "roots.test")
	s := startLogServer(t, &cert, []string{"h2", "http/1.1"}, smallSite)
	origin := fmt.Sprintf("https://roots.test:%d", s.port)
	f, c, wr, _ := wireFetcher(t, nil, 0)
	runCrawl(t, f, c, pageJobs(origin, "/"), 10*time.Millisecond, 20*time.Second)
	wr.Close()
	var robotsErr string
	for _, r := range c.results() {
		if r.Kind == KindRobots {
			robotsErr = r.Err
		}
	}
	if !strings.Contains(robotsErr, "x509: certificate signed by unknown authority") {
		t.Errorf("without the test CA: robots.txt error %q, want one about the certificate", robotsErr)
	}
	if r := c.final[origin+"/"]; r == nil || r.Status != crawl.StatusError || r.HTTPStatus != 0 {
		t.Errorf("without the test CA: %+v, want an error without a response", r)
	}
	if log := s.arrivals(); len(log) != 0 {
		t.Errorf("the server answered %+v without a verified connection", log)
	}
	f, c, wr, _ = wireFetcher(t, pool, 0)
	runCrawl(t, f, c, pageJobs(origin, "/"), 10*time.Millisecond, 20*time.Second)
	wr.Close()
	if r := c.final[origin+"/"]; r == nil || r.Status != crawl.StatusFetched {
		t.Errorf("with the test CA: %+v, want fetched", r)
	}
}

// encodeWith applies the codings of a Content-Encoding value, in order,
// with the reference encoders.
func encodeWith(t *testing.T, b []byte, ce string) []byte {
	t.Helper()
	for _, c := range strings.Split(ce, ",") {
		var out bytes.Buffer
		var w io.WriteCloser
		switch strings.TrimSpace(c) {
		case "gzip":
			w = gzip.NewWriter(&out)
		case "br":
			w = brotli.NewWriterLevel(&out, 6)
		case "zstd":
			zw, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1))
			if err != nil {
				t.Fatal(err)
			}
			w = zw
		default:
			t.Fatalf("coding %q", c)
		}
		w.Write(b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b = out.Bytes()
	}
	return b
}

// decodeWith undoes the codings of a Content-Encoding value with the
// reference decoders (the standard library's gzip, andybalholm's brotli,
// klauspost's zstd), the last applied first.
func decodeWith(b []byte, ce string) ([]byte, error) {
	cs := strings.Split(ce, ",")
	for i := len(cs) - 1; i >= 0; i-- {
		var r io.Reader
		switch strings.TrimSpace(cs[i]) {
		case "gzip":
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			r = zr
		case "br":
			r = brotli.NewReader(bytes.NewReader(b))
		case "zstd":
			zr, err := zstd.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			defer zr.Close()
			r = zr
		default:
			return nil, fmt.Errorf("coding %q", cs[i])
		}
		var err error
		if b, err = io.ReadAll(r); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// decodingTransport is an http.RoundTripper that decodes the bodies of its
// responses by their Content-Encoding with the reference decoders, as a
// browser does.
type decodingTransport struct{ base http.RoundTripper }

func (d decodingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := d.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	ce := res.Header.Get("Content-Encoding")
	if ce == "" {
		return res, nil
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	body, err := decodeWith(raw, ce)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", ce, err)
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// codedPage is a page of the compression tests: its path, its
// Content-Encoding and the bytes it is served as.
type codedPage struct {
	path, ce string
	plain    []byte
	sent     []byte
}

// TestCompressedPagesArchivedAsReceived: pages served gzip, br, zstd and
// chained (to a request that said "Accept-Encoding: gzip, br, zstd", as the
// server's log shows of every request) are read decoded (their links, and
// the fingerprint of the page), and archived as received: each response
// record's digests verify, its Content-Encoding and Content-Length are
// those sent, its payload is the encoded bytes (WARC-Payload-Digest theirs)
// and decodes to the page; every line of the CDXJ index points at its
// record with its payload digest without "sha1:". websim/replay serves the
// WARC back to a client that decodes: the original pages. A page in an
// unknown coding is archived as received and not read.
func TestCompressedPagesArchivedAsReceived(t *testing.T) {
	html := func(name string) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "<html><head><title>%s</title></head><body>\n", name)
		for i := range 50 {
			fmt.Fprintf(&b, "<p>%s paragraph %d <a href=\"/%s/%d\">link</a></p>\n", name, i, name, i)
		}
		b.WriteString("</body></html>\n")
		return b.Bytes()
	}
	var pages []*codedPage
	for _, ce := range []string{"", "gzip", "br", "zstd", "gzip, br", "br, zstd, gzip"} {
		name := strings.NewReplacer(", ", "-").Replace(ce)
		if name == "" {
			name = "plain"
		}
		p := &codedPage{path: "/" + name, ce: ce, plain: html(name)}
		p.sent = p.plain
		if ce != "" {
			p.sent = encodeWith(t, p.plain, ce)
		}
		pages = append(pages, p)
	}
	unknown := &codedPage{path: "/compress", ce: "compress", plain: html("compress"), sent: []byte("\x1f\x9d\x90<not really LZW>")}
	broken := &codedPage{path: "/broken", ce: "gzip", plain: html("broken")}
	broken.sent = bytes.Clone(encodeWith(t, broken.plain, "gzip"))
	for i := 20; i < 40; i++ {
		broken.sent[i] ^= 0x5a
	}
	undecodable := []*codedPage{unknown, broken}
	byPath := map[string]*codedPage{unknown.path: unknown, broken.path: broken}
	for _, p := range pages {
		byPath[p.path] = p
	}
	s := startLogServer(t, nil, nil, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(encodeWith(t, []byte("User-agent: *\nDisallow: /private/\n"), "gzip"))
			return
		}
		p := byPath[r.URL.Path]
		if p == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if p.ce != "" {
			w.Header().Set("Content-Encoding", p.ce)
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(p.sent)))
		w.Write(p.sent)
	})
	f, c, wr, dir := wireFetcher(t, nil, 0)
	origin := fmt.Sprintf("http://gz.test:%d", s.port)
	var jobs []Job
	for _, p := range append(slices.Clone(pages), undecodable...) {
		jobs = append(jobs, pageJobs(origin, p.path)...)
	}
	jobs = append(jobs, pageJobs(origin, "/private/x")...)
	runCrawl(t, f, c, jobs, 10*time.Millisecond, 20*time.Second)
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}

	// The server's log: every request asked for the three codings, and
	// the gzipped robots.txt was read (its Disallow obeyed).
	log := s.arrivals()
	for _, a := range log {
		if a.acceptEncoding != "gzip, br, zstd" {
			t.Errorf("request for %s: Accept-Encoding %q", a.path, a.acceptEncoding)
		}
		if strings.HasPrefix(a.path, "/private/") {
			t.Errorf("%s fetched, which the gzipped robots.txt disallows", a.path)
		}
	}
	if len(log) != len(pages)+3 {
		t.Errorf("%d requests, want robots.txt and %d pages", len(log), len(pages)+2)
	}
	// The Results: the decoded pages read.
	for _, p := range pages {
		r := c.final[origin+p.path]
		if r == nil || r.Status != crawl.StatusFetched || len(r.Links) != 50 || r.Bytes != int64(len(p.plain)) || r.ContentFP != xxhash.Sum64(p.plain) || r.Err != "" || r.Truncated != "" {
			t.Errorf("%s (%q): %+v, want fetched, decoded, 50 links", p.path, p.ce, r)
		}
	}
	for _, u := range []struct {
		p   *codedPage
		why string
	}{{unknown, `not read: coding: Content-Encoding "compress": coding: unknown content coding`}, {broken, "not read: coding: gzip: "}} {
		if r := c.final[origin+u.p.path]; r == nil || r.Status != crawl.StatusFetched || len(r.Links) != 0 || r.Bytes != 0 ||
			r.ContentFP != xxhash.Sum64(u.p.sent) || !strings.Contains(r.Err, u.why) {
			t.Errorf("%s: %+v, want fetched, not read, fingerprint of the bytes as received, and %q", u.p.path, r, u.why)
		}
	}

	// The WARC: the responses as received.
	seen := map[string]bool{}
	for _, x := range readWARCs(t, dir) {
		if x.typ != gowarc.Response {
			continue
		}
		p := byPath[strings.TrimPrefix(x.uri, origin)]
		if p == nil {
			continue // robots.txt
		}
		seen[p.path] = true
		if x.header.Get("Content-Encoding") != p.ce || x.header.Get("Content-Length") != fmt.Sprint(len(p.sent)) || x.truncated != "" {
			t.Errorf("%s: Content-Encoding %q, Content-Length %q, truncated %q; want %q, %d, none", p.path, x.header.Get("Content-Encoding"), x.header.Get("Content-Length"), x.truncated, p.ce, len(p.sent))
		}
		if !bytes.Equal(x.payload, p.sent) {
			t.Errorf("%s: payload of %d bytes, want the %d sent", p.path, len(x.payload), len(p.sent))
		}
		if slices.Contains(undecodable, p) {
			continue
		}
		if got, err := decodeWith(x.payload, p.ce); p.ce != "" && (err != nil || !bytes.Equal(got, p.plain)) {
			t.Errorf("%s: the payload decodes to %d bytes, %v; want the page", p.path, len(got), err)
		}
	}
	if len(seen) != len(byPath) {
		t.Errorf("responses of %v in the WARC, want all %d pages", seen, len(byPath))
	}
	checkCaptureLines(t, dir)

	// Replayed, to a client that decodes: the pages.
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	arch, err := replay.Open(files...)
	if err != nil {
		t.Fatal(err)
	}
	rs := httptest.NewServer(arch)
	defer rs.Close()
	defer arch.Close() // its connections, before the server's
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: decodingTransport{base: tr}}
	for _, p := range pages {
		req, _ := http.NewRequest(http.MethodGet, rs.URL+p.path, nil)
		req.Host = fmt.Sprintf("gz.test:%d", s.port)
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("replay of %s: %v", p.path, err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 || res.Header.Get("Content-Encoding") != p.ce || !bytes.Equal(body, p.plain) {
			t.Errorf("replay of %s: %d, Content-Encoding %q, %d bytes, %v; want 200, %q, the page", p.path, res.StatusCode, res.Header.Get("Content-Encoding"), len(body), err, p.ce)
		}
	}
}

// checkCaptureLines checks the CDXJ indexes of the WARC files in dir:
// every line of the replay index is read back at its offset by gowarc, a
// response or revisit record whose payload digest, without "sha1:", is the
// line's; the side index has only metadata records' lines.
func checkCaptureLines(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	for _, path := range files {
		for _, ix := range []struct {
			path string
			meta bool
		}{{path + ".cdxj", false}, {cdxj.MetaPath(path + ".cdxj"), true}} {
			data, err := os.ReadFile(ix.path)
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range bytes.SplitAfter(data, []byte("\n")) {
				if len(raw) == 0 {
					continue
				}
				l, err := cdxj.Parse(raw)
				if err != nil {
					t.Fatal(err)
				}
				r, err := gowarc.NewWarcFileReader(path, l.Offset)
				if err != nil {
					t.Fatal(err)
				}
				rec, err := r.Next()
				if err != nil {
					t.Fatalf("%s: line %s: %v", ix.path, raw, err)
				}
				h := rec.WarcRecord.WarcHeader()
				typ := rec.WarcRecord.Type()
				if typ == gowarc.Metadata != ix.meta || rec.Size != l.Length || h.Get(gowarc.WarcTargetURI) != l.URL {
					t.Errorf("%s: line %s: a %v record of %s, %d bytes", ix.path, raw, typ, h.Get(gowarc.WarcTargetURI), rec.Size)
				}
				if d := h.Get(gowarc.WarcPayloadDigest); typ == gowarc.Response && (strings.Contains(l.Digest, ":") || "sha1:"+l.Digest != d) {
					t.Errorf("%s: line digest %q, record's payload digest %q", ix.path, l.Digest, d)
				}
				rec.Close()
				r.Close()
			}
		}
	}
}

// bombOf returns a body in coding ce that inflates to n zero bytes, made
// by the fastest encoders (the reference ones take seconds for a bomb).
func bombOf(t *testing.T, n int, ce string) []byte {
	t.Helper()
	var out bytes.Buffer
	var w io.WriteCloser
	switch ce {
	case "gzip":
		w, _ = kgzip.NewWriterLevel(&out, kgzip.BestSpeed)
	case "br":
		w = brotli.NewWriterLevel(&out, 1)
	case "zstd":
		zw, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	}
	zeros := make([]byte, 1<<20)
	for range n >> 20 {
		w.Write(zeros)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestDecompressionBombCut: pages of a few KiB to 128 KiB, served gzip, br
// and zstd, that inflate to 128 MiB each are read to MaxBodyBytes (1 MiB)
// and cut there (Truncated "length"), the crawl of the three allocating
// less than one of them inflated would; the WARC holds each response whole
// as received (no WARC-Truncated).
func TestDecompressionBombCut(t *testing.T) {
	const inflated, limit = 128 << 20, 1 << 20
	bombs := map[string][]byte{}
	for _, ce := range []string{"gzip", "br", "zstd"} {
		bombs["/"+ce] = bombOf(t, inflated, ce)
		if n := len(bombs["/"+ce]); n > 256<<10 {
			t.Fatalf("%s bomb of %d bytes", ce, n)
		}
	}
	s := startLogServer(t, nil, nil, func(w http.ResponseWriter, r *http.Request) {
		b := bombs[r.URL.Path]
		if b == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", r.URL.Path[1:])
		w.Write(b)
	})
	f, c, wr, dir := wireFetcher(t, nil, limit)
	origin := fmt.Sprintf("http://bomb.test:%d", s.port)
	runtime.GC()
	before := totalAlloc()
	runCrawl(t, f, c, pageJobs(origin, "/gzip", "/br", "/zstd"), 10*time.Millisecond, 30*time.Second)
	alloc := totalAlloc() - before
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}
	for path := range bombs {
		if r := c.final[origin+path]; r == nil || r.Status != crawl.StatusFetched || r.Bytes != limit || r.Truncated != "length" || r.Err != "" {
			t.Errorf("%s: %+v, want fetched, %d bytes, cut for length", path, r, limit)
		}
	}
	t.Logf("the crawl of three bombs allocated %d KiB", alloc>>10)
	if alloc > inflated {
		t.Errorf("the crawl of three bombs allocated %d MiB", alloc>>20)
	}
	for _, x := range readWARCs(t, dir) {
		if b := bombs[strings.TrimPrefix(x.uri, origin)]; x.typ == gowarc.Response && b != nil && (x.truncated != "" || !bytes.Equal(x.payload, b)) {
			t.Errorf("%s: WARC-Truncated %q, payload of %d bytes; want the %d sent, whole", x.uri, x.truncated, len(x.payload), len(b))
		}
	}
}

// totalAlloc returns the bytes allocated by the process so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// TestUnchangedCodedPageArchivedWhole: a refetch that finds a page
// unchanged (its decoded body has the Job's Prev.ContentFP) is recorded as
// an identical-payload revisit only without Content-Encoding: coded, its
// payload as received need not be the earlier capture's (a page compressed
// anew), so it gets a response record; both Results say Unchanged.
func TestUnchangedCodedPageArchivedWhole(t *testing.T) {
	page := []byte(`<html><body><a href="/x">x</a></body></html>`)
	gz := encodeWith(t, page, "gzip")
	s := startLogServer(t, nil, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/plain":
			w.Write(page)
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz)
		default:
			http.NotFound(w, r)
		}
	})
	f, c, wr, dir := wireFetcher(t, nil, 0)
	origin := fmt.Sprintf("http://unchanged.test:%d", s.port)
	jobs := pageJobs(origin, "/plain", "/gzip")
	for i := range jobs {
		jobs[i].Prev = Prev{ContentFP: xxhash.Sum64(page), FetchedAt: time.Now().Add(-time.Hour)}
	}
	runCrawl(t, f, c, jobs, 10*time.Millisecond, 20*time.Second)
	wr.Close()
	for _, j := range jobs {
		if r := c.final[j.URL]; r == nil || r.Status != crawl.StatusFetched || !r.Unchanged {
			t.Errorf("%s: %+v, want fetched, unchanged", j.URL, r)
		}
	}
	kinds := map[string]gowarc.RecordType{}
	for _, x := range readWARCs(t, dir) {
		if x.typ == gowarc.Response || x.typ == gowarc.Revisit {
			kinds[strings.TrimPrefix(x.uri, origin)] = x.typ
		}
	}
	if kinds["/plain"] != gowarc.Revisit || kinds["/gzip"] != gowarc.Response {
		t.Errorf("records %v, want a revisit of /plain and a response of /gzip", kinds)
	}
}

// TestBodyReaderCodings reads bodies through a bodyReader as the
// transport hands them over: without Content-Encoding the body is the
// bytes as received, not a copy of them; a coded one is decoded, cut at
// the limit before and after decoding, and one that does not decode is
// kept as received and not read.
func TestBodyReaderCodings(t *testing.T) {
	page := bytes.Repeat([]byte("<p>a paragraph of the page</p>\n"), 400) // 12 KB
	gz := encodeWith(t, page, "gzip")
	var dec coding.Decoder
	for _, c := range []struct {
		name      string
		ce        []string
		sent      []byte
		limit     int64
		body      []byte // want
		truncated string
		cut, err  bool
	}{
		{"plain", nil, page, 1 << 20, page, "", false, false},
		{"plain cut", nil, page, 1000, page[:1000], "length", false, false},
		{"identity", []string{"identity"}, page, 1 << 20, page, "", false, false},
		{"gzip", []string{"gzip"}, gz, 1 << 20, page, "", false, false},
		{"gzip cut as received", []string{"gzip"}, gz, int64(len(gz) / 2), nil, "length", false, false},
		{"gzip cut decoded", []string{"gzip"}, gz, 5000, page[:5000], "", true, false},
		{"unknown coding", []string{"compress"}, gz, 1 << 20, []byte{}, "", false, true},
		{"not gzip", []string{"gzip"}, page, 1 << 20, []byte{}, "", false, true},
	} {
		ex := &exchange{body: make([]byte, 0, 64<<10)}
		if c.ce != nil {
			ex.codings, ex.decodeErr = coding.Parse(c.ce)
			ex.coded = ex.codings.Len() > 0 || ex.decodeErr != nil
		}
		b := &bodyReader{rc: io.NopCloser(bytes.NewReader(c.sent)), ex: ex, limit: c.limit, ctx: t.Context(), run: t.Context(), dec: &dec}
		if n, err := io.ReadAll(b); err != nil || len(n) != 0 {
			t.Fatalf("%s: ReadAll: %d bytes, %v", c.name, len(n), err)
		}
		want := c.body
		if want == nil { // a prefix of the page, as far as the bytes received go
			if !bytes.HasPrefix(page, ex.body) || len(ex.body) == 0 {
				t.Errorf("%s: body of %d bytes, not a prefix of the page", c.name, len(ex.body))
			}
			want = ex.body
		}
		if !bytes.Equal(ex.body, want) || ex.truncated != c.truncated || ex.bodyCut != c.cut || (ex.decodeErr != nil) != c.err {
			t.Errorf("%s: body of %d bytes, truncated %q, cut %v, %v; want %d bytes, %q, %v, error %v", c.name, len(ex.body), ex.truncated, ex.bodyCut, ex.decodeErr, len(want), c.truncated, c.cut, c.err)
		}
		if got := ex.payload(); !bytes.Equal(got, c.sent[:min(int64(len(c.sent)), c.limit)]) {
			t.Errorf("%s: payload of %d bytes, want the %d received", c.name, len(got), min(int64(len(c.sent)), c.limit))
		}
		if !ex.coded && len(ex.body) > 0 && &ex.payload()[0] != &ex.body[0] {
			t.Errorf("%s: the payload of a body without coding is a copy", c.name)
		}
	}
}

package fetcher

// Tests of refetching (Job.Prev): conditional requests, 304 and unchanged
// answers, and their WARC revisit records. One HTTP server on 127.0.0.1
// serves every *.test host (resolved by a websim DNS server on 127.0.0.1)
// and answers conditional requests as a server does.

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/fetcher/warcfile"
)

// rfPage is what the refetch server serves at a path.
type rfPage struct {
	body, etag, lastMod string
	// liar answers 304 to every request, conditional or not.
	liar bool
	// noLastModOn304 leaves Last-Modified out of a 304 (ETag only).
	noLastModOn304 bool
}

// rfSent is the conditional headers of one request as the server got it.
type rfSent struct{ inm, ims string }

// rfServer serves rfPages and records the conditional headers it gets.
type rfServer struct {
	srv  *httptest.Server
	port int
	res  *dnscache.Resolver

	mu    sync.Mutex
	pages map[string]*rfPage
	sent  map[string][]rfSent // by path, robots.txt included
}

func startRfServer(t *testing.T) *rfServer {
	t.Helper()
	s := &rfServer{pages: map[string]*rfPage{}, sent: map[string][]rfSent{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	s.port = int(netip.MustParseAddrPort(s.srv.Listener.Addr().String()).Port())
	s.res = testTLDResolver(t)
	return s
}

func (s *rfServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.sent[r.URL.Path] = append(s.sent[r.URL.Path], rfSent{r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")})
	p := s.pages[r.URL.Path]
	var c rfPage
	if p != nil {
		c = *p
	}
	s.mu.Unlock()
	if p == nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	if c.etag != "" {
		h.Set("ETag", c.etag)
	}
	if c.lastMod != "" && !(c.noLastModOn304 && c.notModified(r)) {
		h.Set("Last-Modified", c.lastMod)
	}
	if c.notModified(r) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte(c.body))
}

// notModified reports whether r's conditions say the client has the page
// (RFC 9110 section 13.2.2: If-None-Match, if sent, decides).
func (c *rfPage) notModified(r *http.Request) bool {
	if c.liar {
		return true
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		return c.etag != "" && inm == c.etag
	}
	ims := r.Header.Get("If-Modified-Since")
	return ims != "" && c.lastMod != "" && ims == c.lastMod
}

func (s *rfServer) url(path string) string {
	return fmt.Sprintf("http://refetch.test:%d%s", s.port, path)
}

// takeSent returns and forgets the conditional headers received for path.
func (s *rfServer) takeSent(path string) []rfSent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent[path]
	delete(s.sent, path)
	return out
}

func (s *rfServer) set(path string, p rfPage) {
	s.mu.Lock()
	s.pages[path] = &p
	s.mu.Unlock()
}

// rfRecord is one WARC record read back.
type rfRecord struct {
	typ                              gowarc.RecordType
	id, concurrent                   string
	profile, refersURI, refersDate   string
	payloadDigest, truncated, status string
	block                            string // protocol headers (request, response or revisit)
	payload                          int    // payload bytes
}

// readRfWARC reads every record of the WARC files in dir with gowarc under
// strict validation, by target URI in file order.
func readRfWARC(t *testing.T, dir string) map[string][]rfRecord {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) == 0 {
		t.Fatal("no WARC file")
	}
	out := map[string][]rfRecord{}
	for _, name := range files {
		r, err := gowarc.NewWarcFileReader(name, 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(rec.Validation) > 0 {
				t.Fatalf("%s: validation %v", name, rec.Validation)
			}
			wr := rec.WarcRecord
			if _, err := wr.ValidateDigest(); err != nil {
				t.Fatalf("%s: digest: %v", name, err)
			}
			h := wr.WarcHeader()
			x := rfRecord{
				typ: wr.Type(), id: h.GetId(gowarc.WarcRecordID), concurrent: h.GetId(gowarc.WarcConcurrentTo),
				profile: h.Get(gowarc.WarcProfile), refersURI: h.Get(gowarc.WarcRefersToTargetURI), refersDate: h.Get(gowarc.WarcRefersToDate),
				payloadDigest: h.Get(gowarc.WarcPayloadDigest), truncated: h.Get(gowarc.WarcTruncated),
			}
			if ph, ok := wr.Block().(gowarc.ProtocolHeaderBlock); ok {
				x.block = string(ph.ProtocolHeaderBytes())
			}
			if pb, ok := wr.Block().(gowarc.PayloadBlock); ok {
				p, err := pb.PayloadBytes()
				if err != nil {
					t.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, p)
				x.payload = int(n)
			}
			if wr.Type() != gowarc.Warcinfo {
				u := h.Get(gowarc.WarcTargetURI)
				out[u] = append(out[u], x)
			}
			rec.Close()
		}
		r.Close()
	}
	return out
}

// rfRound runs one Fetcher over jobs and returns the page Results by URL
// and the Fetcher's Stats.
func rfRound(t *testing.T, s *rfServer, wr *warcfile.Writer, seen func(uint64, string) bool, jobs []Job) (map[string]*Result, Stats) {
	t.Helper()
	c := newCollector(1)
	f, err := New(Options{
		Workers: 4, HostDelay: time.Millisecond, MaxCrawlDelay: time.Millisecond,
		AllowPrivate: true, Resolver: s.res, WARC: wr, Seen: seen,
		OnResult: c.onResult, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCrawl(t, f, c, jobs, 5*time.Millisecond, 20*time.Second)
	return c.final, f.Stats()
}

// TestRefetch fetches pages, then fetches them again with what the first
// fetch learnt (Job.Prev), and checks the requests sent, the Results, the
// counters and the WARC records of both rounds.
func TestRefetch(t *testing.T) {
	s := startRfServer(t)
	const lm1 = "Mon, 02 Mar 2026 10:00:00 GMT"
	html := func(v string) string {
		return `<html><body><p>` + v + `</p><a href="/a.html">a</a> <a href="/b.html">b</a></body></html>`
	}
	s.set("/both", rfPage{body: html("both"), etag: `"b1"`, lastMod: lm1, noLastModOn304: true})
	s.set("/etag", rfPage{body: html("etag"), etag: `W/"e1"`})
	s.set("/lm", rfPage{body: html("lm"), lastMod: lm1})
	s.set("/same", rfPage{body: html("same")}) // no validators: refetched in full
	s.set("/changes", rfPage{body: html("v1"), etag: `"c1"`, lastMod: lm1})
	s.set("/copy", rfPage{body: html("same")}) // /same's content under another URL
	s.set("/liar", rfPage{body: html("liar"), liar: true})
	s.set("/badetag", rfPage{body: html("bad"), etag: `"` + strings.Repeat("x", MaxValidatorBytes) + `"`})

	var seenMu sync.Mutex
	firstURL := map[uint64]string{}
	seen := func(fp uint64, u string) bool {
		seenMu.Lock()
		defer seenMu.Unlock()
		if first, ok := firstURL[fp]; ok && first != u {
			return true
		}
		firstURL[fp] = u
		return false
	}
	dir := t.TempDir()
	wr, err := warcfile.Open(warcfile.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Close()

	// Round 1: first fetches.
	var jobs []Job
	for _, p := range []string{"/both", "/etag", "/lm", "/same", "/changes", "/liar", "/badetag"} {
		jobs = append(jobs, Job{URL: s.url(p), Host: "refetch.test"})
	}
	first, st1 := rfRound(t, s, wr, seen, jobs)
	for _, p := range []string{"/both", "/etag", "/lm", "/same", "/changes", "/liar", "/badetag", "/robots.txt"} {
		for _, h := range s.takeSent(p) {
			if h != (rfSent{}) {
				t.Errorf("round 1: %s sent with %+v", p, h)
			}
		}
	}
	if st1.NotModified != 0 || st1.Unchanged != 0 {
		t.Errorf("round 1: %d not modified, %d unchanged", st1.NotModified, st1.Unchanged)
	}
	for _, c := range []struct {
		path, etag, lastMod string
	}{
		{"/both", `"b1"`, lm1}, {"/etag", `W/"e1"`, ""}, {"/lm", "", lm1}, {"/same", "", ""}, {"/changes", `"c1"`, lm1},
		{"/badetag", "", ""}, // longer than MaxValidatorBytes: dropped
	} {
		r := first[s.url(c.path)]
		if r == nil || r.Status != crawl.StatusFetched || r.ETag != c.etag || r.LastModified != c.lastMod || r.NotModified || r.Unchanged || len(r.Links) != 2 {
			t.Errorf("round 1: %s: %s, ETag %q, Last-Modified %q, want fetched with %q, %q", c.path, describe(r), r.ETag, r.LastModified, c.etag, c.lastMod)
		}
	}
	if r := first[s.url("/liar")]; r.Status != crawl.StatusError || r.Retry || r.HTTPStatus != 304 || !strings.Contains(r.Err, "not conditional") || r.NotModified {
		t.Errorf("304 to an unconditional request: %s", describe(r))
	}

	// Round 2: refetches with what round 1 learnt; /changes has changed,
	// /copy is new.
	s.set("/changes", rfPage{body: html("v2"), etag: `"c2"`, lastMod: "Tue, 03 Mar 2026 10:00:00 GMT"})
	jobs = jobs[:0]
	for _, p := range []string{"/both", "/etag", "/lm", "/same", "/changes", "/badetag"} {
		r := first[s.url(p)]
		jobs = append(jobs, Job{URL: r.URL, Host: r.Host, Prev: Prev{FetchedAt: r.FetchedAt, ContentFP: r.ContentFP, ETag: r.ETag, LastModified: r.LastModified}})
	}
	jobs = append(jobs, Job{URL: s.url("/copy"), Host: "refetch.test"})
	second, st2 := rfRound(t, s, wr, seen, jobs)
	for _, c := range []struct {
		path string
		sent rfSent
	}{
		{"/both", rfSent{`"b1"`, lm1}}, {"/etag", rfSent{`W/"e1"`, ""}}, {"/lm", rfSent{"", lm1}},
		{"/same", rfSent{}}, {"/changes", rfSent{`"c1"`, lm1}}, {"/badetag", rfSent{}}, {"/copy", rfSent{}}, {"/robots.txt", rfSent{}},
	} {
		got := s.takeSent(c.path)
		if len(got) != 1 || got[0] != c.sent {
			t.Errorf("round 2: %s sent with %+v, want once with %+v", c.path, got, c.sent)
		}
	}
	for _, p := range []string{"/both", "/etag", "/lm"} {
		r, prev := second[s.url(p)], first[s.url(p)]
		if r.Status != crawl.StatusFetched || r.HTTPStatus != 304 || !r.NotModified || r.Unchanged || r.Retry ||
			r.ContentFP != prev.ContentFP || r.Bytes != 0 || len(r.Links) != 0 || r.Err != "" ||
			r.ETag != prev.ETag || r.LastModified != prev.LastModified { // /both's 304 has no Last-Modified: kept
			t.Errorf("round 2: %s: %s NotModified=%v FP %x (prev %x), ETag %q, Last-Modified %q", p, describe(r), r.NotModified, r.ContentFP, prev.ContentFP, r.ETag, r.LastModified)
		}
	}
	if r, prev := second[s.url("/same")], first[s.url("/same")]; r.Status != crawl.StatusFetched || r.HTTPStatus != 200 || !r.Unchanged || r.NotModified ||
		r.ContentFP != prev.ContentFP || r.Bytes != prev.Bytes || len(r.Links) != 2 {
		t.Errorf("round 2: unchanged /same: %s Unchanged=%v links %q", describe(r), r.Unchanged, r.Links)
	}
	if r := second[s.url("/copy")]; r.Status != crawl.StatusDuplicate || r.Unchanged {
		t.Errorf("round 2: /copy (the content of /same): %s, want a duplicate", describe(r))
	}
	if r, prev := second[s.url("/changes")], first[s.url("/changes")]; r.Status != crawl.StatusFetched || r.HTTPStatus != 200 || r.Unchanged || r.NotModified ||
		r.ContentFP == prev.ContentFP || r.ETag != `"c2"` || r.LastModified != "Tue, 03 Mar 2026 10:00:00 GMT" || len(r.Links) != 2 {
		t.Errorf("round 2: changed /changes: %s, ETag %q, Last-Modified %q", describe(r), r.ETag, r.LastModified)
	}
	if st2.NotModified != 3 || st2.Unchanged != 2 { // /same and /badetag
		t.Errorf("round 2: %d not modified, %d unchanged; want 3 and 2", st2.NotModified, st2.Unchanged)
	}
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}

	// The WARC records of both rounds.
	recs := readRfWARC(t, dir)
	date := func(p string) string { return first[s.url(p)].FetchedAt.UTC().Format(time.RFC3339) }
	kinds := func(rs []rfRecord) string {
		var b []string
		for _, r := range rs {
			b = append(b, r.typ.String())
		}
		return strings.Join(b, ",")
	}
	for _, p := range []string{"/both", "/etag", "/lm"} {
		rs := recs[s.url(p)]
		if kinds(rs) != "request,response,request,revisit" {
			t.Errorf("%s: records %s", p, kinds(rs))
			continue
		}
		req, rv := rs[2], rs[3]
		if req.concurrent != rv.id || rv.concurrent != req.id {
			t.Errorf("%s: request %s and revisit %s not linked (%s, %s)", p, req.id, rv.id, req.concurrent, rv.concurrent)
		}
		if rv.profile != warcfile.ProfileServerNotModified || rv.refersURI != s.url(p) || rv.refersDate != date(p) ||
			rv.payloadDigest != "" || rv.truncated != "" || rv.payload != 0 || !strings.HasPrefix(rv.block, "HTTP/1.1 304 Not Modified\r\n") {
			t.Errorf("%s: revisit %+v", p, rv)
		}
		prev := first[s.url(p)]
		if prev.ETag != "" && !strings.Contains(req.block, "\r\nIf-None-Match: "+prev.ETag+"\r\n") ||
			prev.LastModified != "" && !strings.Contains(req.block, "\r\nIf-Modified-Since: "+prev.LastModified+"\r\n") {
			t.Errorf("%s: request record %q", p, req.block)
		}
	}
	for p, v := range map[string]string{"/same": "same", "/badetag": "bad"} {
		rs := recs[s.url(p)]
		if kinds(rs) != "request,response,request,revisit" {
			t.Errorf("%s: records %s", p, kinds(rs))
			continue
		}
		resp, req, rv := rs[1], rs[2], rs[3]
		sum := sha1.Sum([]byte(html(v)))
		want := "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
		if rv.profile != warcfile.ProfileIdenticalPayloadDigest || rv.payloadDigest != resp.payloadDigest || rv.payloadDigest != want ||
			rv.refersURI != s.url(p) || rv.refersDate != date(p) || rv.truncated != "length" || rv.payload != 0 ||
			!strings.HasPrefix(rv.block, "HTTP/1.1 200 OK\r\n") || req.concurrent != rv.id || rv.concurrent != req.id {
			t.Errorf("%s: revisit %+v after response with payload digest %s (want %s)", p, rv, resp.payloadDigest, want)
		}
		if strings.Contains(req.block, "If-") {
			t.Errorf("%s: request record %q", p, req.block)
		}
	}
	if rs := recs[s.url("/changes")]; kinds(rs) != "request,response,request,response" || rs[1].payloadDigest == rs[3].payloadDigest ||
		!strings.Contains(rs[3].block, "\r\nEtag: \"c2\"\r\n") {
		t.Errorf("/changes: records %s", kinds(rs))
	}
	if rs := recs[s.url("/liar")]; kinds(rs) != "request,response" || !strings.HasPrefix(rs[1].block, "HTTP/1.1 304") {
		t.Errorf("/liar: records %s", kinds(rs))
	}
	if st := wr.Stats(); st.Revisits != 5 {
		t.Errorf("writer stats %+v, want 5 revisits", st)
	}
}

// TestConditionalHeader checks the request headers of refetches: which
// validators are sent, that first fetches and robots.txt send none, and
// that the WARC request head is byte for byte what the transport wrote.
func TestConditionalHeader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	heads := make(chan string, 1)
	go func() { // owner: this test; ends when ln closes
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(conn)
			for {
				var head strings.Builder
				for {
					line, err := br.ReadString('\n')
					head.WriteString(line)
					if err != nil || line == "\r\n" {
						break
					}
				}
				if head.Len() == 0 {
					break
				}
				heads <- head.String()
				if _, err := conn.Write([]byte("HTTP/1.1 304 Not Modified\r\nContent-Length: 0\r\n\r\n")); err != nil {
					break
				}
			}
			conn.Close()
		}
	}()
	f, err := New(Options{Workers: 1, AllowPrivate: true, OnResult: func(*Result) {}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.runCtx = ctx
	defer f.transport.CloseIdleConnections()
	w := newWorker(ctx, f)
	url := "http://h1.cc.test:" + strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:") + "/p?q"
	long := strings.Repeat("x", MaxValidatorBytes+1)
	for _, c := range []struct {
		name     string
		kind     taskKind
		prev     Prev
		inm, ims string
	}{
		{"first fetch", taskPage, Prev{}, "", ""},
		{"fingerprint only", taskPage, Prev{ContentFP: 1, FetchedAt: time.Now()}, "", ""},
		{"etag", taskPage, Prev{ETag: `"x"`}, `"x"`, ""},
		{"last-modified", taskPage, Prev{LastModified: "Mon, 02 Mar 2026 10:00:00 GMT"}, "", "Mon, 02 Mar 2026 10:00:00 GMT"},
		{"both", taskPage, Prev{ETag: `W/"x"`, LastModified: "Mon, 02 Mar 2026 10:00:00 GMT"}, `W/"x"`, "Mon, 02 Mar 2026 10:00:00 GMT"},
		{"robots.txt", taskRobots, Prev{ETag: `W/"x"`, LastModified: "Mon, 02 Mar 2026 10:00:00 GMT"}, "", ""},
		{"too long", taskPage, Prev{ETag: long, LastModified: "y"}, "", "y"},
		{"control characters", taskPage, Prev{ETag: "\"a\"\r\nX-Evil: 1", LastModified: "a\tb"}, "", ""},
		{"spaces around", taskPage, Prev{ETag: ` "a"`, LastModified: "b "}, "", ""},
	} {
		tk := &task{kind: c.kind, job: Job{URL: url, Prev: c.prev}, ip: netip.AddrFrom4([4]byte{127, 0, 0, 1})}
		if err := w.get(tk, url); err != nil || w.ex.status != http.StatusNotModified {
			t.Fatalf("%s: get: %v, status %d", c.name, err, w.ex.status)
		}
		sent := <-heads
		if w.ex.ifNoneMatch != c.inm || w.ex.ifModSince != c.ims || w.ex.conditional() != (c.inm != "" || c.ims != "") {
			t.Errorf("%s: noted %q, %q; want %q, %q", c.name, w.ex.ifNoneMatch, w.ex.ifModSince, c.inm, c.ims)
		}
		if got := string(appendRequestHead(nil, &w.ex, DefaultUserAgent(""))); got != sent {
			t.Errorf("%s: request head\n%q\nthe transport wrote\n%q", c.name, got, sent)
		}
		if len(w.hdr) != 3 {
			t.Fatalf("%s: the shared header changed: %v", c.name, w.hdr)
		}
	}
	w.ex.reset()
	if allocs := testing.AllocsPerRun(100, func() { w.conditional(&Prev{ETag: `"x"`, LastModified: "y"}) }); allocs > 3 {
		t.Errorf("conditional header: %v allocations", allocs)
	}
}

// TestClassifyRefetch classifies refetch answers without a network.
func TestClassifyRefetch(t *testing.T) {
	const page = "http://h1.cc.test/p.html"
	html := `<html><body><a href="/x">x</a></body></html>`
	calls := 0
	w := newTestWorker(t, func(uint64, string) bool { calls++; return true }) // everything is "seen"
	prev := Prev{ETag: `"e"`, LastModified: "Mon, 02 Mar 2026 10:00:00 GMT", ContentFP: 42}
	for _, c := range []struct {
		name        string
		prev        Prev
		conditional bool
		status      int
		header      map[string]string
		body        string
		want        crawl.Status
		notMod, unc bool
		etag, lm    string
		links       int
		seenCalls   int
	}{
		{"304 conditional", prev, true, 304, map[string]string{"Etag": `"e2"`}, "", crawl.StatusFetched, true, false, `"e2"`, prev.LastModified, 0, 0},
		{"304 unconditional", Prev{}, false, 304, nil, "", crawl.StatusError, false, false, "", "", 0, 0},
		{"304 with fingerprint only", Prev{ContentFP: 42}, false, 304, nil, "", crawl.StatusError, false, false, "", "", 0, 0},
		{"200 changed", prev, true, 200, map[string]string{"Content-Type": "text/html", "Etag": `"e3"`}, html, crawl.StatusDuplicate, false, false, `"e3"`, "", 0, 1},
		{"201 validators not reported", Prev{}, false, 201, map[string]string{"Content-Type": "text/html", "Etag": `"e3"`}, html, crawl.StatusDuplicate, false, false, "", "", 0, 1},
		{"404 validators not reported", prev, true, 404, map[string]string{"Etag": `"e3"`}, "", crawl.StatusGone, false, false, "", "", 0, 0},
	} {
		w.ex.reset()
		w.ex.gotResponse, w.ex.status, w.ex.statusText = true, c.status, fmt.Sprint(c.status, " ", http.StatusText(c.status))
		if c.conditional {
			w.ex.ifNoneMatch = c.prev.ETag
		}
		w.ex.header = http.Header{}
		for k, v := range c.header {
			w.ex.header.Set(k, v)
		}
		w.ex.body = append(w.ex.body[:0], c.body...)
		calls = 0
		r := &Result{Job: Job{URL: page, Prev: c.prev}}
		w.fill(r)
		w.classify(r)
		if r.Status != c.want || r.NotModified != c.notMod || r.Unchanged != c.unc || r.ETag != c.etag || r.LastModified != c.lm || len(r.Links) != c.links || calls != c.seenCalls || r.Retry {
			t.Errorf("%s: %s NotModified=%v Unchanged=%v ETag %q LM %q links %d, Seen called %d times", c.name, describe(r), r.NotModified, r.Unchanged, r.ETag, r.LastModified, len(r.Links), calls)
		}
		if c.notMod && r.ContentFP != c.prev.ContentFP {
			t.Errorf("%s: ContentFP %x, want %x", c.name, r.ContentFP, c.prev.ContentFP)
		}
	}
	// Unchanged: the fingerprint of the body.
	w.ex.reset()
	w.ex.gotResponse, w.ex.status, w.ex.statusText = true, 200, "200 OK"
	w.ex.header = http.Header{"Content-Type": {"text/html"}}
	w.ex.body = append(w.ex.body[:0], html...)
	calls = 0
	r := &Result{Job: Job{URL: page}}
	w.fill(r)
	r.Prev.ContentFP = r.ContentFP
	w.classify(r)
	if r.Status != crawl.StatusFetched || !r.Unchanged || len(r.Links) != 1 || calls != 0 {
		t.Errorf("unchanged: %s Unchanged=%v links %d, Seen called %d times", describe(r), r.Unchanged, len(r.Links), calls)
	}
}

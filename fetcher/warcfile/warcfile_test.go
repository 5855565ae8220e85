package warcfile

import (
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/meridian-crawler/meridian/websim/synth"
	gowarc "github.com/nlnwa/gowarc/v3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		os.Exit(killChild(dir))
	}
	goleak.VerifyTestMain(m)
}

// testLogger routes the writer's log to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// pages returns n HTML bodies rendered by websim.
func pages(t testing.TB, n int) [][]byte {
	w, err := synth.New(synth.Options{Hosts: 20, Pages: 20, Seed: 7, Profile: synth.Realistic})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for h := 0; len(out) < n; h = (h + 1) % 20 {
		path := "/"
		if k := len(out) / 20; k > 0 {
			path = fmt.Sprintf("/p/%d.html", k)
		}
		r := w.Respond(nil, nil, h, path, "")
		out = append(out, r.Body)
	}
	return out
}

// exchange builds a test exchange for URL u with body b.
func exchange(u string, b []byte, i int) *Exchange {
	host := strings.SplitN(strings.TrimPrefix(u, "http://"), "/", 2)[0]
	path := strings.TrimPrefix(u, "http://"+host)
	x := &Exchange{
		URL:      u,
		IP:       netip.AddrFrom4([4]byte{127, 77, 0, byte(1 + i%200)}),
		Date:     time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC).Add(time.Duration(i) * time.Second),
		Request:  []byte("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: Meridian/0.1 (+https://example.invalid/meridian)\r\nAccept-Encoding: gzip\r\n\r\n"),
		Response: fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\nX-Seq: %d\r\n\r\n", len(b), i),
		Body:     b,
	}
	switch i % 7 {
	case 3:
		x.Truncated = "length"
	case 5:
		x.Request = nil // response only
	case 6:
		x.IP = netip.Addr{}
	}
	return x
}

// readExchange is what the files say about one URL.
type readExchange struct {
	reqID, respID     string
	reqConc, respConc string
	req, resp, body   []byte
	ip, date, trunc   string
	file              string
	requests          int
	responses         int
	// revisit records
	revisits                       int
	profile, refersURI, refersDate string
	payloadDigest                  string
}

// readDir reads every WARC file in dir with gowarc under strict validation,
// checks file names, warcinfo records and gzip framing, and returns the
// exchanges by URL.
func readDir(t *testing.T, dir, prefix string) (map[string]*readExchange, []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	nameRE := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `-\d{14}-\d{5}-\d+\.warc\.gz$`)
	got := map[string]*readExchange{}
	var files []string
	for _, ent := range ents {
		name := ent.Name()
		if strings.HasSuffix(name, indexSuffix) && nameRE.MatchString(strings.TrimSuffix(name, indexSuffix)) ||
			strings.HasSuffix(name, metaSuffix) && nameRE.MatchString(strings.TrimSuffix(name, metaSuffix)) {
			continue // an index: see checkIndex
		}
		if !nameRE.MatchString(name) {
			t.Fatalf("unexpected file %q in %s", name, dir)
		}
		files = append(files, name)
		path := filepath.Join(dir, name)
		members := countMembers(t, path)
		r, err := gowarc.NewWarcFileReader(path, 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("%s record %d: %v", name, n, err)
			}
			if len(rec.Validation) > 0 {
				t.Fatalf("%s record %d: validation %v", name, n, rec.Validation)
			}
			wr := rec.WarcRecord
			h := wr.WarcHeader()
			if n == 0 {
				if wr.Type() != gowarc.Warcinfo || h.Get(gowarc.WarcFilename) != name {
					t.Fatalf("%s starts with a %v record for %q", name, wr.Type(), h.Get(gowarc.WarcFilename))
				}
			} else if wr.Type() != gowarc.Metadata { // see TestMetadata
				readRecord(t, got, name, wr)
			}
			if _, err := wr.ValidateDigest(); err != nil {
				t.Fatalf("%s record %d: digest: %v", name, n, err)
			}
			rec.Close()
			n++
		}
		r.Close()
		if n != members {
			t.Fatalf("%s: %d records in %d gzip members", name, n, members)
		}
	}
	return got, files
}

func readRecord(t *testing.T, got map[string]*readExchange, file string, wr gowarc.WarcRecord) {
	t.Helper()
	h := wr.WarcHeader()
	u := h.Get(gowarc.WarcTargetURI)
	x := got[u]
	if x == nil {
		x = &readExchange{file: file}
		got[u] = x
	}
	if x.file != file {
		t.Errorf("%s: request and response in different files", u)
	}
	blk, ok := wr.Block().(gowarc.PayloadBlock)
	if !ok {
		t.Fatalf("%s: %v block %T has no payload", u, wr.Type(), wr.Block())
	}
	ph, _ := wr.Block().(gowarc.ProtocolHeaderBlock)
	pr, err := blk.PayloadBytes()
	if err != nil {
		t.Fatal(err)
	}
	payload, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	switch wr.Type() {
	case gowarc.Request:
		x.requests++
		x.reqID, x.reqConc = h.GetId(gowarc.WarcRecordID), h.GetId(gowarc.WarcConcurrentTo)
		x.req = ph.ProtocolHeaderBytes()
		if len(payload) != 0 {
			t.Errorf("%s: request payload %q", u, payload)
		}
	case gowarc.Response:
		x.responses++
		x.respID, x.respConc = h.GetId(gowarc.WarcRecordID), h.GetId(gowarc.WarcConcurrentTo)
		x.resp, x.body = ph.ProtocolHeaderBytes(), payload
		x.ip, x.date, x.trunc = h.Get(gowarc.WarcIPAddress), h.Get(gowarc.WarcDate), h.Get(gowarc.WarcTruncated)
		if !h.Has(gowarc.WarcPayloadDigest) || !h.Has(gowarc.WarcBlockDigest) {
			t.Errorf("%s: response without digests", u)
		}
		x.payloadDigest = h.Get(gowarc.WarcPayloadDigest)
	case gowarc.Revisit:
		x.revisits++
		x.respID, x.respConc = h.GetId(gowarc.WarcRecordID), h.GetId(gowarc.WarcConcurrentTo)
		x.resp = ph.ProtocolHeaderBytes()
		x.ip, x.date, x.trunc = h.Get(gowarc.WarcIPAddress), h.Get(gowarc.WarcDate), h.Get(gowarc.WarcTruncated)
		x.profile, x.refersURI, x.refersDate = h.Get(gowarc.WarcProfile), h.Get(gowarc.WarcRefersToTargetURI), h.Get(gowarc.WarcRefersToDate)
		x.payloadDigest = h.Get(gowarc.WarcPayloadDigest)
		if len(payload) != 0 || !h.Has(gowarc.WarcBlockDigest) {
			t.Errorf("%s: revisit with payload %q, block digest %q", u, payload, h.Get(gowarc.WarcBlockDigest))
		}
		if ct := h.Get(gowarc.ContentType); ct != "application/http;msgtype=response" {
			t.Errorf("%s: revisit Content-Type %q", u, ct)
		}
	default:
		t.Errorf("%s: unexpected %v record", u, wr.Type())
	}
}

// countMembers counts the gzip members of a file, checking that they fill it.
func countMembers(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	br := bytes.NewReader(data)
	var zr gzip.Reader
	n := 0
	for br.Len() > 0 {
		if err := zr.Reset(br); err != nil {
			t.Fatalf("%s: member %d: %v", path, n, err)
		}
		zr.Multistream(false)
		if _, err := io.Copy(io.Discard, &zr); err != nil {
			t.Fatalf("%s: member %d: %v", path, n, err)
		}
		n++
	}
	return n
}

// checkExchange compares what was read for x.URL with x.
func checkExchange(t *testing.T, got map[string]*readExchange, x *Exchange) {
	t.Helper()
	r := got[x.URL]
	if r == nil {
		t.Fatalf("%s: missing", x.URL)
	}
	wantReq := 0
	if len(x.Request) > 0 {
		wantReq = 1
	}
	wantResp, wantRevisit := 1, 0
	if x.Revisit != NoRevisit {
		wantResp, wantRevisit = 0, 1
	}
	if r.requests != wantReq || r.responses != wantResp || r.revisits != wantRevisit {
		t.Fatalf("%s: %d requests, %d responses, %d revisits; want %d, %d and %d", x.URL, r.requests, r.responses, r.revisits, wantReq, wantResp, wantRevisit)
	}
	wantBody, wantTrunc := x.Body, x.Truncated
	switch x.Revisit {
	case RevisitNotModified:
		wantBody = nil
		checkRevisit(t, r, x, ProfileServerNotModified, "")
	case RevisitIdenticalPayload:
		wantBody, wantTrunc = nil, "length"
		checkRevisit(t, r, x, ProfileIdenticalPayloadDigest, sha1Digest(x.Body))
	default:
		if r.payloadDigest != sha1Digest(x.Body) {
			t.Errorf("%s: payload digest %q, want %q", x.URL, r.payloadDigest, sha1Digest(x.Body))
		}
	}
	if !bytes.Equal(r.body, wantBody) {
		t.Errorf("%s: body differs (%d bytes, want %d)", x.URL, len(r.body), len(wantBody))
	}
	if !bytes.Equal(r.resp, x.Response) {
		t.Errorf("%s: response headers %q, want %q", x.URL, r.resp, x.Response)
	}
	if wantReq == 1 {
		if !bytes.Equal(r.req, x.Request) {
			t.Errorf("%s: request %q, want %q", x.URL, r.req, x.Request)
		}
		if r.reqConc != r.respID || r.respConc != r.reqID || r.reqID == "" || r.reqID == r.respID {
			t.Errorf("%s: ids req %s resp %s, concurrent-to %s and %s", x.URL, r.reqID, r.respID, r.reqConc, r.respConc)
		}
	} else if r.respConc != "" {
		t.Errorf("%s: response-only exchange has Concurrent-To %s", x.URL, r.respConc)
	}
	wantIP := ""
	if x.IP.IsValid() {
		wantIP = x.IP.String()
	}
	if r.ip != wantIP {
		t.Errorf("%s: IP %q, want %q", x.URL, r.ip, wantIP)
	}
	if want := x.Date.UTC().Format(time.RFC3339); r.date != want {
		t.Errorf("%s: date %q, want %q", x.URL, r.date, want)
	}
	if r.trunc != wantTrunc {
		t.Errorf("%s: truncated %q, want %q", x.URL, r.trunc, wantTrunc)
	}
}

// checkRevisit compares the revisit fields read for x with what x asks for.
func checkRevisit(t *testing.T, r *readExchange, x *Exchange, profile, payloadDigest string) {
	t.Helper()
	wantDate := ""
	if !x.RefersToDate.IsZero() {
		wantDate = x.RefersToDate.UTC().Format(time.RFC3339)
	}
	if r.profile != profile || r.refersURI != x.URL || r.refersDate != wantDate || r.payloadDigest != payloadDigest {
		t.Errorf("%s: revisit profile %q refers to %q at %q, payload digest %q; want %q, %q, %q, %q",
			x.URL, r.profile, r.refersURI, r.refersDate, r.payloadDigest, profile, x.URL, wantDate, payloadDigest)
	}
}

// sha1Digest is the WARC digest of b, computed independently of the writer.
func sha1Digest(b []byte) string {
	sum := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

func openWriter(t *testing.T, o Options) *Writer {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	w, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestConcurrentReadBack writes exchanges from several goroutines into
// rotating files and reads everything back with gowarc.
func TestConcurrentReadBack(t *testing.T) {
	dir := t.TempDir()
	bodies := pages(t, 40)
	rng := rand.New(rand.NewPCG(1, 2))
	bin := make([]byte, 70_000)
	for i := range bin {
		bin[i] = byte(rng.Uint32())
	}
	bodies = append(bodies, nil, []byte("x"), bin, []byte("\r\n\r\n"))
	const goroutines, each = 6, 40
	w := openWriter(t, Options{Dir: dir, Prefix: "test", MaxSize: 100 << 10, Software: "meridian-test/1"})
	var wg sync.WaitGroup
	all := make([][]*Exchange, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				k := g*each + i
				x := exchange(fmt.Sprintf("http://h%d.fr.test/p/%d.html?g=%d", k%17, k, g), bodies[k%len(bodies)], k)
				if err := w.Write(x); err != nil {
					t.Error(err)
					return
				}
				all[g] = append(all[g], x)
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Write(exchange("http://a.test/", nil, 0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
	got, files := readDir(t, dir, "test")
	n := 0
	for _, xs := range all {
		for _, x := range xs {
			checkExchange(t, got, x)
			n++
		}
	}
	if n != goroutines*each || len(got) != n {
		t.Fatalf("wrote %d exchanges, read %d URLs", n, len(got))
	}
	if len(files) < 3 {
		t.Fatalf("%d files for %d exchanges at MaxSize 100 KiB: no rotation", len(files), n)
	}
	var total int64
	slices.Sort(files)
	for i, f := range files {
		st, _ := os.Stat(filepath.Join(dir, f))
		total += st.Size()
		if st.Size() > 100<<10 && countMembers(t, filepath.Join(dir, f)) > 3 {
			t.Errorf("%s: %d bytes, over MaxSize with more than one exchange", f, st.Size())
		}
		if want := fmt.Sprintf("-%05d-", i); !strings.Contains(f, want) {
			t.Errorf("file %d is %s, want sequence %s", i, f, want)
		}
	}
	st := w.Stats()
	if st.Files != int64(len(files)) || st.Exchanges != int64(n) || st.Bytes != total {
		t.Fatalf("stats %+v; %d files, %d bytes", st, len(files), total)
	}
	var wantRecords int64 = int64(len(files))
	for _, xs := range all {
		for _, x := range xs {
			wantRecords++
			if len(x.Request) > 0 {
				wantRecords++
			}
		}
	}
	if st.Records != wantRecords {
		t.Fatalf("stats %d records, want %d", st.Records, wantRecords)
	}
}

// TestCrashRecovery cuts a file that was being written at many places and
// checks that Open keeps exactly the complete exchanges before the cut, and
// replaces the file's partial index (all its lines, some now pointing past
// the cut) with one that matches the repaired file.
func TestCrashRecovery(t *testing.T) {
	src := t.TempDir()
	w := openWriter(t, Options{Dir: src, Prefix: "crash", Index: true})
	bodies := pages(t, 6)
	var xs []*Exchange
	for i := range 6 {
		x := exchange(fmt.Sprintf("http://h1.fr.test/p/%d.html", i), bodies[i], i)
		switch i {
		case 1, 4: // a refetch answered 304
			notModified(x)
		case 2: // a refetch with the same payload
			x.Revisit, x.RefersToDate = RevisitIdenticalPayload, x.Date.Add(-48*time.Hour)
		case 5:
			x.Request = []byte("GET /p/5.html HTTP/1.1\r\nHost: h1.fr.test\r\n\r\n") // ensure the last one has a request
		}
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
	}
	// Snapshot the .open file while the writer holds it, as after a crash.
	opens, _ := filepath.Glob(filepath.Join(src, "*.warc.gz.open"))
	if len(opens) != 1 {
		t.Fatalf("%d open files, want 1", len(opens))
	}
	data, err := os.ReadFile(opens[0])
	if err != nil {
		t.Fatal(err)
	}
	idxName := strings.TrimSuffix(filepath.Base(opens[0]), openSuffix) + indexSuffix + openSuffix
	idxData, err := os.ReadFile(filepath.Join(src, idxName))
	if err != nil || bytes.Count(idxData, []byte("\n")) != len(xs) {
		t.Fatalf("open index %q: %v", idxData, err)
	}
	// A second Writer on the same directory must leave the live file alone.
	w2 := openWriter(t, Options{Dir: src, Prefix: "crash", Index: true})
	if st := w2.Stats(); st.Recovered != 0 {
		t.Fatalf("Open recovered a file another Writer holds")
	}
	if _, err := os.Stat(opens[0]); err != nil {
		t.Fatalf("live open file touched: %v", err)
	}
	w2.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// Member boundaries, and which exchanges are complete after each.
	bounds := memberEnds(t, data)
	// bounds[0] is the warcinfo; then per exchange a request (unless
	// Request is empty) and a response or revisit record.
	type cut struct {
		name string
		at   int
		keep int // complete exchanges
	}
	var cuts []cut
	cuts = append(cuts, cut{"inside warcinfo", bounds[0] / 2, -1}, cut{"after warcinfo", bounds[0], 0})
	b := 1
	for i, x := range xs {
		if len(x.Request) > 0 {
			cuts = append(cuts, cut{fmt.Sprintf("inside request %d", i), (bounds[b-1] + bounds[b]) / 2, i})
			cuts = append(cuts, cut{fmt.Sprintf("after request %d", i), bounds[b], i})
			b++
		}
		kind := "response"
		if x.Revisit != NoRevisit {
			kind = "revisit"
		}
		cuts = append(cuts, cut{fmt.Sprintf("inside %s %d", kind, i), (bounds[b-1] + bounds[b]) / 2, i})
		cuts = append(cuts, cut{fmt.Sprintf("one byte short of %s %d", kind, i), bounds[b] - 1, i})
		cuts = append(cuts, cut{fmt.Sprintf("after %s %d", kind, i), bounds[b], i + 1})
		b++
	}
	if b != len(bounds) {
		t.Fatalf("%d members, expected %d", len(bounds), b)
	}
	cuts = append(cuts, cut{"garbage after the end", -1, len(xs)})
	for _, c := range cuts {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Base(opens[0])
			content := data
			if c.at >= 0 {
				content = data[:c.at]
			} else {
				content = append(slices.Clip(data), "\x1f\x8b\x08garbage"...)
			}
			if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, idxName), idxData, 0o644); err != nil {
				t.Fatal(err)
			}
			w := openWriter(t, Options{Dir: dir, Prefix: "crash", Index: true})
			defer w.Close()
			if st := w.Stats(); st.Recovered != 1 {
				t.Fatalf("Recovered = %d, want 1", st.Recovered)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*.open")); len(left) != 0 {
				t.Fatalf("open files left: %v", left)
			}
			if c.keep < 0 {
				if ents, _ := os.ReadDir(dir); len(ents) != 0 {
					t.Fatalf("a file without a complete warcinfo was kept: %v", ents)
				}
				return
			}
			got, files := readDir(t, dir, "crash")
			if len(files) != 1 || files[0]+openSuffix != name {
				t.Fatalf("files %v, want %s renamed", files, name)
			}
			if len(got) != c.keep {
				t.Fatalf("%d exchanges recovered, want %d", len(got), c.keep)
			}
			for _, x := range xs[:c.keep] {
				checkExchange(t, got, x)
			}
			if n := checkIndex(t, dir); n != c.keep {
				t.Fatalf("%d index lines for %d exchanges", n, c.keep)
			}
		})
	}
}

// notModified makes x a refetch answered 304, recorded as a revisit.
func notModified(x *Exchange) {
	x.Response = []byte("HTTP/1.1 304 Not Modified\r\nEtag: \"v1\"\r\nDate: Wed, 04 Mar 2026 05:06:07 GMT\r\n\r\n")
	x.Body, x.Truncated = nil, ""
	x.Revisit, x.RefersToDate = RevisitNotModified, x.Date.Add(-24*time.Hour)
}

// TestRevisit writes response and revisit records of both profiles and
// reads them back with gowarc under strict validation.
func TestRevisit(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, Prefix: "rv"})
	bodies := pages(t, 2)
	first := exchange("http://h1.fr.test/p/1.html", bodies[0], 0)
	snm := exchange("http://h1.fr.test/p/2.html", nil, 1)
	notModified(snm)
	ipd := exchange("http://h1.fr.test/p/3.html", bodies[0], 2) // first's payload, another URL (the digests are compared)
	ipd.Revisit, ipd.RefersToDate = RevisitIdenticalPayload, first.Date
	noReq := exchange("http://h1.fr.test/p/4.html", bodies[1], 4)
	noReq.Request, noReq.Revisit = nil, RevisitIdenticalPayload // no request record, no Refers-To-Date
	cut := exchange("http://h1.fr.test/p/5.html", bodies[1], 8)
	cut.Revisit, cut.Truncated = RevisitIdenticalPayload, "time" // written as "length" all the same
	xs := []*Exchange{first, snm, ipd, noReq, cut}
	for _, x := range xs {
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Exchanges != 5 || st.Revisits != 4 || st.Records != 1+4+5 {
		t.Errorf("stats %+v, want 5 exchanges, 4 revisits, 10 records", st)
	}
	got, files := readDir(t, dir, "rv")
	for _, x := range xs {
		checkExchange(t, got, x)
	}
	if a, b := got[first.URL].payloadDigest, got[ipd.URL].payloadDigest; a != b {
		t.Errorf("identical payload: revisit digest %s, response digest %s", b, a)
	}
	// The layout, for the record.
	data, err := os.ReadFile(filepath.Join(dir, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range strings.Split(string(all), "\r\n\r\nWARC/1.1\r\n")[1:] {
		if strings.Contains(rec, "WARC-Type: revisit") {
			t.Logf("%s", strings.SplitN(rec, "\r\n\r\n", 2)[0])
		}
	}
}

// memberEnds returns the end offset of each gzip member of data.
func memberEnds(t *testing.T, data []byte) []int {
	t.Helper()
	br := bytes.NewReader(data)
	var zr gzip.Reader
	var ends []int
	for br.Len() > 0 {
		if err := zr.Reset(br); err != nil {
			t.Fatal(err)
		}
		zr.Multistream(false)
		if _, err := io.Copy(io.Discard, &zr); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, len(data)-br.Len())
	}
	return ends
}

func TestInvalidExchange(t *testing.T) {
	w := openWriter(t, Options{Dir: t.TempDir()})
	defer w.Close()
	for _, x := range []*Exchange{
		nil,
		{URL: "", Response: []byte("HTTP/1.1 200 OK\r\n\r\n")},
		{URL: "http://a.test/\r\nWARC-Type: evil", Response: []byte("HTTP/1.1 200 OK\r\n\r\n")},
		{URL: "http://a.test/a b", Response: []byte("HTTP/1.1 200 OK\r\n\r\n")},
		{URL: "http://a.test/", Response: nil},
		{URL: "http://a.test/", Response: []byte("HTTP/1.1 304 Not Modified\r\n\r\n"), Revisit: numRevisits},
	} {
		if err := w.Write(x); !errors.Is(err, ErrInvalid) {
			t.Errorf("Write(%+v) = %v, want ErrInvalid", x, err)
		}
	}
	if st := w.Stats(); st.Files != 0 || st.Records != 0 {
		t.Fatalf("invalid exchanges wrote something: %+v", st)
	}
}

func TestTruncatedReasons(t *testing.T) {
	for in, want := range map[string]string{"": "", "length": "length", "time": "time", "disconnect": "disconnect", "other": "unspecified"} {
		dir := t.TempDir()
		w := openWriter(t, Options{Dir: dir})
		x := exchange("http://a.test/", []byte("<p>hi</p>"), 0)
		x.Truncated = in
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, _ := readDir(t, dir, DefaultPrefix)
		if r := got["http://a.test/"]; r == nil || r.trunc != want {
			t.Errorf("Truncated %q written as %+v, want %q", in, r, want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		o    Options
		want []string
	}{
		{Options{Dir: "x"}, nil},
		{Options{}, []string{"Dir"}},
		{Options{Dir: "x", Prefix: "a/b", MaxSize: -1, Level: 12, Software: "a\nb"}, []string{"prefix", "max size", "gzip level", "software"}},
		{Options{Dir: "x", Level: -2}, nil},
	}
	for _, tt := range tests {
		tt.o.EnsureDefaults()
		err := tt.o.Validate()
		if (err != nil) != (len(tt.want) > 0) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.o, err, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%+v) = %v, want a problem with %q", tt.o, err, w)
			}
		}
	}
}

// TestLevels checks that every gzip level writes readable files.
func TestLevels(t *testing.T) {
	body := pages(t, 1)[0]
	for _, level := range []int{gzip.HuffmanOnly, gzip.BestSpeed, 5, gzip.BestCompression} {
		dir := t.TempDir()
		w := openWriter(t, Options{Dir: dir, Level: level})
		x := exchange("http://a.test/", body, 1)
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, _ := readDir(t, dir, DefaultPrefix)
		checkExchange(t, got, x)
	}
}

// benchBody returns a 10,000-byte HTML body.
func benchBody(b *testing.B) []byte {
	body := pages(b, 1)[0]
	for len(body) < 10_000 {
		body = append(body, body...)
	}
	return body[:10_000]
}

func reportPerExchange(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/exchange")
}

// BenchmarkWrite measures one exchange with a 10 KB HTML body, end to end
// (records, digests, gzip, append).
func BenchmarkWrite(b *testing.B) {
	for _, level := range []int{gzip.BestSpeed, gzip.HuffmanOnly, 5} {
		b.Run(fmt.Sprintf("level=%d", level), func(b *testing.B) {
			w, err := Open(Options{Dir: b.TempDir(), Level: level})
			if err != nil {
				b.Fatal(err)
			}
			x := exchange("http://h1.fr.test/p/1.html", benchBody(b), 1)
			b.SetBytes(int64(len(x.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Write(x); err != nil {
					b.Fatal(err)
				}
			}
			reportPerExchange(b)
			b.ReportMetric(float64(w.Stats().Bytes)/float64(w.Stats().Exchanges), "B/exchange-on-disk")
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkWriteParallel writes from GOMAXPROCS goroutines: compression runs
// outside the file lock, so throughput should scale with cores.
func BenchmarkWriteParallel(b *testing.B) {
	w, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	body := benchBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		x := exchange("http://h1.fr.test/p/1.html", body, 1)
		for pb.Next() {
			if err := w.Write(x); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportPerExchange(b)
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGowarcFileWriter is the alternative: gowarc's own record builder
// and file writer (its compression, at the same level), for comparison.
func BenchmarkGowarcFileWriter(b *testing.B) {
	dir := b.TempDir()
	w := gowarc.NewWarcFileWriter(
		gowarc.WithCompressionLevel(gzip.BestSpeed),
		gowarc.WithMaxConcurrentWriters(1),
		gowarc.WithFileNameGenerator(&gowarc.PatternNameGenerator{Directory: dir, Prefix: "gw-"}),
		gowarc.WithWarcInfoFunc(func(rb gowarc.WarcRecordBuilder) error {
			_, err := rb.WriteString("software: bench\r\n")
			return err
		}),
	)
	defer w.Close()
	x := exchange("http://h1.fr.test/p/1.html", benchBody(b), 1)
	b.SetBytes(int64(len(x.Body)))
	b.ReportAllocs()
	for b.Loop() {
		req := gowarc.NewRecordBuilder(gowarc.Request)
		req.AddWarcHeader(gowarc.WarcTargetURI, x.URL)
		req.AddWarcHeaderTime(gowarc.WarcDate, x.Date)
		req.AddWarcHeader(gowarc.WarcIPAddress, x.IP.String())
		req.AddWarcHeader(gowarc.ContentType, "application/http;msgtype=request")
		req.Write(x.Request)
		resp := gowarc.NewRecordBuilder(gowarc.Response)
		resp.AddWarcHeader(gowarc.WarcTargetURI, x.URL)
		resp.AddWarcHeaderTime(gowarc.WarcDate, x.Date)
		resp.AddWarcHeader(gowarc.WarcIPAddress, x.IP.String())
		resp.AddWarcHeader(gowarc.ContentType, "application/http;msgtype=response")
		resp.Write(x.Response)
		resp.Write(x.Body)
		r1, _, err := req.Build()
		if err != nil {
			b.Fatal(err)
		}
		r2, _, err := resp.Build()
		if err != nil {
			b.Fatal(err)
		}
		for _, res := range w.Write(r1, r2) {
			if res.Err != nil {
				b.Fatal(res.Err)
			}
		}
	}
	reportPerExchange(b)
}

// TestProtocols: Exchange.Protocols become one WARC-Protocol field each, in
// order, on the request and the response (or revisit) record, which gowarc
// reads back under strict validation; a value that is not a token is
// refused.
func TestProtocols(t *testing.T) {
	dir := t.TempDir()
	w := openWriter(t, Options{Dir: dir, Prefix: "pr"})
	x := exchange("http://h1.fr.test/p/1.html", []byte("<p>h2</p>"), 0)
	x.Protocols = []string{"h2", "tls/1.3"}
	rv := exchange("http://h1.fr.test/p/2.html", nil, 1)
	notModified(rv)
	rv.Protocols = []string{"http/1.1"}
	for _, x := range []*Exchange{x, rv} {
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"", "h2 ", "h2\r\nWARC-Type: evil", "a,b", "tls:1.3"} {
		y := exchange("http://h1.fr.test/p/3.html", nil, 2)
		y.Protocols = []string{"h2", bad}
		if err := w.Write(y); !errors.Is(err, ErrInvalid) {
			t.Errorf("protocol %q: %v, want ErrInvalid", bad, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	r, err := gowarc.NewWarcFileReader(files[0], 0, gowarc.WithStrictValidation())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[string][]string{}
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Validation) > 0 {
			t.Fatalf("validation %v", rec.Validation)
		}
		h := rec.WarcRecord.WarcHeader()
		got[rec.WarcRecord.Type().String()+" "+h.Get(gowarc.WarcTargetURI)] = h.GetAll("WARC-Protocol")
		rec.Close()
	}
	want := map[string][]string{
		"warcinfo ":        nil,
		"request " + x.URL: {"h2", "tls/1.3"}, "response " + x.URL: {"h2", "tls/1.3"},
		"request " + rv.URL: {"http/1.1"}, "revisit " + rv.URL: {"http/1.1"},
	}
	if len(got) != len(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Errorf("%s: WARC-Protocol %q, want %q", k, got[k], v)
		}
	}
}

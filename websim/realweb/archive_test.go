package realweb_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/andybalholm/brotli"
	gowarc "github.com/nlnwa/gowarc/v3"

	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/websim/realweb"
)

// record is what the tests read back of one WARC record, with gowarc (a
// reader no one here wrote).
type record struct {
	typ     gowarc.RecordType
	warc    *gowarc.WarcFields
	header  http.Header // of a response record's HTTP message
	payload []byte      // of a response record: its payload as stored
	fields  *gowarc.WarcFields
}

// records are a crawl's WARC records by target URI.
type records map[string][]record

// gowarcMu serialises the parallel tests' readers: gowarc's
// NewWarcFileReader writes a package variable of google/uuid
// (EnableRandPool) each time it is called, a data race when two tests
// open readers at once.
var gowarcMu sync.Mutex

// readWARC reads every record of the crawl's WARC files, checking each
// record's digests.
func readWARC(t *testing.T, data string) records {
	t.Helper()
	gowarcMu.Lock()
	defer gowarcMu.Unlock()
	files, _ := filepath.Glob(filepath.Join(data, "warc", "*.warc.gz"))
	if len(files) == 0 {
		t.Fatalf("no WARC file in %s", data)
	}
	out := records{}
	for _, path := range files {
		r, err := gowarc.NewWarcFileReader(path, 0, gowarc.WithStrictValidation())
		if err != nil {
			t.Fatal(err)
		}
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			wr := rec.WarcRecord
			x := record{typ: wr.Type(), warc: wr.WarcHeader()}
			if _, err := wr.ValidateDigest(); err != nil {
				t.Errorf("%s: %v record of %s: %v", path, x.typ, x.warc.Get(gowarc.WarcTargetURI), err)
			}
			switch b := wr.Block().(type) {
			case gowarc.HttpResponseBlock:
				x.header = http.Header(*b.HttpHeader())
				if pr, err := b.PayloadBytes(); err == nil {
					x.payload, _ = io.ReadAll(pr)
				}
			case gowarc.WarcFieldsBlock:
				x.fields = b.WarcFields()
			}
			u := x.warc.Get(gowarc.WarcTargetURI)
			out[u] = append(out[u], x)
			rec.Close()
		}
		r.Close()
	}
	return out
}

// of returns the records of u of type typ.
func (rs records) of(u string, typ gowarc.RecordType) []record {
	var out []record
	for _, r := range rs[u] {
		if r.typ == typ {
			out = append(out, r)
		}
	}
	return out
}

// one returns the one record of u of type typ, failing the test if there
// is not exactly one.
func (rs records) one(t *testing.T, u string, typ gowarc.RecordType) record {
	t.Helper()
	found := rs.of(u, typ)
	if len(found) != 1 {
		t.Fatalf("%s: %d %v records, want one", u, len(found), typ)
	}
	return found[0]
}

// checkCompressedArchived: a page served with a Content-Encoding is
// archived as received: the header kept, the payload the coded bytes.
func checkCompressedArchived(t *testing.T, w *realweb.Web, recs records) {
	t.Helper()
	for _, c := range realweb.CompressedCases {
		r := recs.one(t, w.URL(realweb.HostCompressed, c.Page), gowarc.Response)
		if got := r.header.Get("Content-Encoding"); got != c.Encoding {
			t.Errorf("%s: the record's Content-Encoding is %q, want %q as received", c.Page, got, c.Encoding)
			continue
		}
		if c.Encoding != "br" {
			continue
		}
		page, err := io.ReadAll(brotli.NewReader(bytes.NewReader(r.payload)))
		if err != nil || !bytes.Contains(page, []byte(c.Target)) {
			t.Errorf("%s: the payload does not decode (brotli) to the page: %v, %q", c.Page, err, page)
		}
	}
}

// checkNoIndexArchived: a page that says noindex gets a metadata record
// saying so; it is archived unless respect is set, when the metadata
// record stands alone.
func checkNoIndexArchived(t *testing.T, w *realweb.Web, recs records, respect bool) {
	t.Helper()
	for _, p := range []string{realweb.MetaNoIndexPage, realweb.HeaderNoIndexPage} {
		u := w.URL(realweb.HostSignals, p)
		meta := recs.one(t, u, gowarc.Metadata)
		if got := meta.fields.Get("robots"); got != "noindex" {
			t.Errorf("%s: its metadata record says robots %q, want noindex", p, got)
		}
		if n := len(recs.of(u, gowarc.Response)); respect && n != 0 || !respect && n != 1 {
			t.Errorf("%s: %d response records with respect-noindex %v", p, n, respect)
		}
	}
}

// checkSideIndex: the CDXJ replay index holds captures only; metadata
// records are in the side index beside it.
func checkSideIndex(t *testing.T, w *realweb.Web, data string) {
	t.Helper()
	read := func(pattern string) string {
		files, _ := filepath.Glob(filepath.Join(data, "warc", pattern))
		var b strings.Builder
		for _, f := range files {
			c, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(c)
		}
		return b.String()
	}
	replay, side := read("*.cdxj"), read("*.cdxj-meta")
	if strings.Contains(replay, "warc-fields") || strings.Contains(replay, `"sha1:`) {
		t.Error("the replay index holds metadata records or sha1:-prefixed digests")
	}
	if !strings.Contains(side, realweb.MetaNoIndexPage) {
		t.Errorf("the side index has no line for %s:\n%s", realweb.MetaNoIndexPage, side)
	}
}

// checkRoundStats: the rounds count the traps refused by each rule and
// the pages' directives (every shard's rounds, summed).
func checkRoundStats(t *testing.T, data string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(data, "shards", "*", "stats", "rounds.jsonl"))
	if len(files) == 0 {
		t.Fatalf("%s has no shard's rounds.jsonl", data)
	}
	var sum rounds.RoundStats
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var r rounds.RoundStats
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			sum.Traps.Repetition += r.Traps.Repetition
			sum.Traps.Calendar += r.Traps.Calendar
			sum.NoIndex += r.NoIndex
			sum.Canonical += r.Canonical
		}
		f.Close()
	}
	if sum.Traps.Repetition == 0 || sum.Traps.Calendar == 0 || sum.NoIndex < 2 || sum.Canonical < 2 {
		t.Errorf("rounds.jsonl counts traps %+v, noindex %d, canonical %d; want both rules' refusals and two of each", sum.Traps, sum.NoIndex, sum.Canonical)
	}
}

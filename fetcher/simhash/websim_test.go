package simhash

import (
	"bytes"

	"fmt"
	"golang.org/x/net/html"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// crawlWeb visits the HTML pages of w that a polite crawler fetches
// (crawlcheck.Target records, session ids stripped), breadth first from
// every host's front page along the truth's outlinks, and calls visit with
// each page's URL and served body.
func crawlWeb(t testing.TB, w *synth.Web, truth []synth.Record, visit func(u string, body []byte)) (fetched map[string]bool) {
	t.Helper()
	norm := urlnorm.New(urlnorm.Options{})
	byURL := map[string]*synth.Record{}
	for i := range truth {
		r := &truth[i]
		if !crawlcheck.Target(r) {
			continue
		}
		u, err := norm.NormalizeString(r.URL)
		if err != nil {
			t.Fatalf("truth URL %s: %v", r.URL, err)
		}
		if _, ok := byURL[u]; !ok || u == r.URL {
			byURL[u] = r
		}
	}
	fetched = map[string]bool{}
	var queue []string
	push := func(u string) {
		n, err := norm.NormalizeString(u)
		if err != nil || fetched[n] || byURL[n] == nil {
			return
		}
		fetched[n] = true
		queue = append(queue, n)
	}
	for h := range w.Hosts() {
		push(w.FrontURL(h))
	}
	var (
		buf     []byte
		scratch []synth.Link
	)
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		r := byURL[u]
		for _, l := range r.Outlinks {
			push(l)
		}
		if r.Status != 200 || !strings.HasPrefix(r.ContentType, "text/html") {
			continue
		}
		pu, err := url.Parse(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		h, ok := w.Lookup(pu.Hostname())
		if !ok {
			t.Fatalf("%s: unknown host", r.URL)
		}
		resp := w.Respond(buf[:0], scratch, h, pu.Path, pu.RawQuery)
		buf, scratch = resp.Body, resp.Scratch
		visit(u, resp.Body)
	}
	return fetched
}

// TestWebsimNearDuplicates fingerprints every page a crawl of a realistic
// web fetches and looks each up in an Index, in crawl order, as a crawler
// would: a page within K bits of a page fetched before is a near-duplicate
// of it. The verdicts must match the truth's near-duplicates with
// precision ≥ 0.95 and recall ≥ 0.9 on pages of the default size (10 KB,
// about 1,100 words of text); on pages of half that size, a footer of a
// few words flips more bits, and recall must be ≥ 0.8.
func TestWebsimNearDuplicates(t *testing.T) {
	for _, c := range []struct {
		o         synth.Options
		minRecall float64
	}{
		{synth.Options{Hosts: 100, Pages: 50, Seed: 1}, 0.9},
		{synth.Options{Hosts: 200, Pages: 30, Seed: 5}, 0.9},
		{synth.Options{Hosts: 60, Pages: 40, Seed: 7, PageBytes: 5000}, 0.8},
	} {
		o := c.o
		t.Run(fmt.Sprintf("%d-%d-%d-%d", o.Hosts, o.Pages, o.Seed, o.PageBytes), func(t *testing.T) {
			if testing.Short() && o.Seed == 5 {
				t.Skip("-short")
			}
			o.Profile = synth.Realistic
			w, err := synth.New(o)
			if err != nil {
				t.Fatal(err)
			}
			truth, err := crawlcheck.Truth(w)
			if err != nil {
				t.Fatal(err)
			}
			x, err := NewIndex[string](IndexOptions{Capacity: 1 << 20, HostCap: 1 << 16})
			if err != nil {
				t.Fatal(err)
			}
			verdicts := map[string]string{}
			fps := map[string]uint64{}
			var h Hasher
			pages, noFP := 0, 0
			fetched := crawlWeb(t, w, truth, func(u string, body []byte) {
				pages++
				fp, ok := h.Page(body)
				if !ok {
					noFP++
					return
				}
				fps[u] = fp
				if orig, _, _, found := x.LookupOrAdd(fp, u, hostOf(u)); found {
					verdicts[u] = orig
				}
			})
			s := crawlcheck.ScoreNearDups(truth, func(u string) bool { return fetched[u] }, verdicts)
			// The distances of the truth's pairs, for the log.
			var dist [65]int
			for i := range truth {
				r := &truth[i]
				a, okA := fps[r.URL]
				b, okB := fps[r.NearDupOf]
				if r.NearDupOf != "" && okA && okB {
					dist[Distance(a, b)]++
				}
			}
			t.Logf("%d HTML pages fetched, %d without a fingerprint; %d verdicts, %d correct: precision %.3f; near-duplicate pairs %d, found %d: recall %.3f; exact duplicate pairs %d, found %d",
				pages, noFP, s.Verdicts, s.Correct, s.Precision, s.Pairs, s.Found, s.Recall, s.DupPairs, s.DupFound)
			t.Logf("distances of the truth's pairs (0…8): %v", dist[:9])
			// Distinct pages must be far apart, not just beyond K.
			cluster := map[string]string{}
			for i := range truth {
				r := &truth[i]
				cluster[r.URL] = r.URL
				if r.NearDupOf != "" {
					cluster[r.URL] = r.NearDupOf
				} else if r.DuplicateOf != "" {
					cluster[r.URL] = r.DuplicateOf
				}
			}
			type page struct {
				fp      uint64
				cluster string
			}
			var all []page
			for u, fp := range fps {
				all = append(all, page{fp, cluster[u]})
			}
			closest := 64
			for i := range all {
				for j := i + 1; j < len(all); j++ {
					if all[i].cluster != all[j].cluster {
						closest = min(closest, Distance(all[i].fp, all[j].fp))
					}
				}
			}
			t.Logf("closest pages of different clusters: %d bits apart", closest)
			if closest <= 2*K {
				t.Errorf("distinct pages %d bits apart: near-duplicates by accident", closest)
			}
			if s.Wrong != nil {
				t.Logf("wrong verdicts (sample): %q", s.Wrong)
			}
			if s.Missed != nil {
				t.Logf("missed pairs (sample): %q", s.Missed)
			}
			if s.Pairs < 50 || pages < 1000 {
				t.Fatalf("%d pairs in %d pages: too few to judge", s.Pairs, pages)
			}
			if s.Precision < 0.95 || s.Recall < c.minRecall {
				t.Errorf("precision %.3f (want ≥ 0.95), recall %.3f (want ≥ %.2f)", s.Precision, s.Recall, c.minRecall)
			}
		})
	}
}

func hostOf(u string) string {
	rest := u[strings.Index(u, "//")+2:]
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// benchPages returns HTML pages of a realistic web of 20 KB pages, spread
// over its hosts.
func benchPages(b *testing.B) [][]byte {
	w, err := synth.New(synth.Options{Hosts: 50, Pages: 20, Seed: 7, Profile: synth.Realistic, PageBytes: 20_000})
	if err != nil {
		b.Fatal(err)
	}
	var out [][]byte
	for h, host := range w.Hosts() {
		for n := range min(host.Pages, 6) {
			path := "/"
			if n > 0 {
				path = fmt.Sprintf("/p/%d.html", n)
			}
			resp := w.Respond(nil, nil, h, path, "")
			if resp.Status == 200 {
				out = append(out, resp.Body)
			}
		}
	}
	return out
}

// BenchmarkPage fingerprints realistic websim pages of 20 KB on average
// (tokenising them too); one op is one page.
func BenchmarkPage(b *testing.B) {
	pages := benchPages(b)
	b.SetBytes(meanSize(pages))
	b.ReportAllocs()
	var h Hasher
	i := 0
	for b.Loop() {
		h.Page(pages[i%len(pages)])
		i++
	}
}

// BenchmarkText hashes the visible text of the same pages, without
// tokenising: the cost a link extractor's loop adds by feeding a Hasher.
func BenchmarkText(b *testing.B) {
	pages := benchPages(b)
	// Each page's text segments, as Token would feed them.
	texts := make([][][]byte, len(pages))
	for i, p := range pages {
		s := string(p)
		for s != "" {
			lt := strings.IndexByte(s, '<')
			if lt < 0 {
				lt = len(s)
			}
			if lt > 0 {
				texts[i] = append(texts[i], []byte(s[:lt]))
			}
			s = s[lt:]
			if gt := strings.IndexByte(s, '>'); gt >= 0 {
				s = s[gt+1:]
			} else {
				s = ""
			}
		}
	}
	b.SetBytes(meanSize(pages))
	b.ReportAllocs()
	var h Hasher
	i := 0
	for b.Loop() {
		h.Reset()
		for _, t := range texts[i%len(texts)] {
			h.Text(t)
			h.Break()
		}
		h.Sum()
		i++
	}
	_ = slices.Clone[[]byte]
}

// BenchmarkTokenize runs the bare html.Tokenizer over the pages of
// BenchmarkPage: the parsing cost that Page adds hashing to.
func BenchmarkTokenize(b *testing.B) {
	pages := benchPages(b)
	b.SetBytes(meanSize(pages))
	b.ReportAllocs()
	var rd bytes.Reader
	i := 0
	for b.Loop() {
		rd.Reset(pages[i%len(pages)])
		z := html.NewTokenizer(&rd)
		for z.Next() != html.ErrorToken {
		}
		i++
	}
}

// meanSize is the mean size of pages, in bytes.
func meanSize(pages [][]byte) int64 {
	var size int
	for _, p := range pages {
		size += len(p)
	}
	return int64(size / len(pages))
}

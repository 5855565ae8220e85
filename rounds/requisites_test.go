package rounds

import (
	"math"
	"slices"
	"testing"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
)

// TestMapEmbeds: a fetched page's embeds (fetcher.Result.Embeds) are
// credited at the page's own depth, not one deeper, so a page at MaxDepth
// still gets its images while its links are not followed; a style sheet's
// embeds keep its depth too. The page's followed cash is split half over
// its links and half over its embeds (all of it over the embeds when no
// link is followed), and every page's cash ends with its targets or the
// virtual page: cash is conserved.
func TestMapEmbeds(t *testing.T) {
	const maxDepth = 2
	page := func(url string, depth uint32, links, embeds []string) *fetcher.Result {
		return &fetcher.Result{Job: fetcher.Job{URL: url, Host: "a.test", Round: 1, Depth: depth, Cash: 1}, Status: store.StatusFetched,
			HTTPStatus: 200, Links: links, Embeds: embeds}
	}
	for _, tc := range []struct {
		name      string
		res       *fetcher.Result
		wantDepth map[string]uint32
		wantCash  map[string]float64 // of the followed cash (damping 0.5 here)
	}{
		{
			name:      "page with links and embeds",
			res:       page("http://a.test/p", 1, []string{"http://a.test/l1", "http://a.test/l2"}, []string{"http://a.test/i.png", "http://a.test/s.css", "http://a.test/j.js", "http://a.test/f.ico"}),
			wantDepth: map[string]uint32{"http://a.test/l1": 2, "http://a.test/l2": 2, "http://a.test/i.png": 1, "http://a.test/s.css": 1, "http://a.test/j.js": 1, "http://a.test/f.ico": 1},
			wantCash:  map[string]float64{"http://a.test/l1": 0.25 / 2, "http://a.test/l2": 0.25 / 2, "http://a.test/i.png": 0.25 / 4, "http://a.test/s.css": 0.25 / 4, "http://a.test/j.js": 0.25 / 4, "http://a.test/f.ico": 0.25 / 4},
		},
		{
			name:      "page at max depth: embeds only",
			res:       page("http://a.test/deep", maxDepth, []string{"http://a.test/l3"}, []string{"http://a.test/d.png"}),
			wantDepth: map[string]uint32{"http://a.test/d.png": maxDepth},
			wantCash:  map[string]float64{"http://a.test/d.png": 0.5},
		},
		{
			name:      "style sheet's embeds keep its depth",
			res:       page("http://a.test/s.css", maxDepth, nil, []string{"http://a.test/bg.png", "http://a.test/more.css"}),
			wantDepth: map[string]uint32{"http://a.test/bg.png": maxDepth, "http://a.test/more.css": maxDepth},
			wantCash:  map[string]float64{"http://a.test/bg.png": 0.25, "http://a.test/more.css": 0.25},
		},
		{
			name:      "links only, as before requisites",
			res:       page("http://a.test/q", 0, []string{"http://a.test/l1", "http://a.test/l2"}, nil),
			wantDepth: map[string]uint32{"http://a.test/l1": 1, "http://a.test/l2": 1},
			wantCash:  map[string]float64{"http://a.test/l1": 0.25, "http://a.test/l2": 0.25},
		},
	} {
		c := &Crawler{o: Options{Damping: 0.5, MaxDepth: maxDepth}}
		acc := newStageAcc()
		if err := c.mapResults(&nodePart{ref: partRef{round: 1}}, []*fetcher.Result{tc.res}, acc); err != nil {
			t.Fatal(err)
		}
		b := acc.batch()
		var got []string
		total := acc.virtual.Value()
		for _, cr := range b.Credits {
			got = append(got, cr.url)
			total += cr.cash
			if d, ok := tc.wantDepth[cr.url]; !ok || cr.depth != d {
				t.Errorf("%s: %s credited at depth %d, want %d (listed: %v)", tc.name, cr.url, cr.depth, d, ok)
			}
			if w := tc.wantCash[cr.url]; math.Abs(cr.cash-w) > 1e-12 {
				t.Errorf("%s: %s credited %v, want %v", tc.name, cr.url, cr.cash, w)
			}
		}
		if len(got) != len(tc.wantDepth) {
			t.Errorf("%s: credits %v, want %d of them", tc.name, got, len(tc.wantDepth))
		}
		if math.Abs(total-1) > 1e-12 {
			t.Errorf("%s: credits and virtual page sum to %v of the page's cash 1", tc.name, total)
		}
	}
}

// TestRecordEmbeds: a fetch record of a result with embeds is tagged
// recFetchEmbeds and decodes back with them; one without is recFetch, byte
// for byte what it was before requisites existed (its decoder reads
// both), and a record that announces embeds but has none is refused.
func TestRecordEmbeds(t *testing.T) {
	res := fetcher.Result{Job: fetcher.Job{URL: "http://a.test/", Host: "a.test", Depth: 3, Cash: 0.5}, Status: store.StatusFetched, HTTPStatus: 200,
		Links: []string{"http://a.test/x"}, Embeds: []string{"http://a.test/i.png", "http://b.test/s.css"}, Truncated: "length"}
	b := appendResult(nil, &res)
	if b[0] != recFetchEmbeds {
		t.Fatalf("record tag %q, want %q", b[0], recFetchEmbeds)
	}
	f, err := decodeFetch(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Embeds, res.Embeds) || !slices.Equal(f.Links, res.Links) || f.Truncated != "length" || f.Depth != 3 {
		t.Errorf("round trip: %+v", f)
	}
	if r := f.result(1); !slices.Equal(r.Embeds, res.Embeds) {
		t.Errorf("result of the record: embeds %v", r.Embeds)
	}
	plain := res
	plain.Embeds = nil
	pb := appendResult(nil, &plain)
	if pb[0] != recFetch {
		t.Fatalf("record without embeds tagged %q, want %q", pb[0], recFetch)
	}
	// The record without embeds is the record with them less the tag
	// and the embeds' count and strings.
	var cut []byte
	cut = appendString(cut, res.Embeds[0])
	cut = appendString(cut, res.Embeds[1])
	if len(b)-len(pb) != 1+len(cut) {
		t.Errorf("a record without embeds is %d bytes shorter than with, want %d", len(b)-len(pb), 1+len(cut))
	}
	if f, err := decodeFetch(pb); err != nil || f.Embeds != nil {
		t.Errorf("record without embeds: %+v, %v", f, err)
	}
	bad := slices.Clone(pb)
	bad[0] = recFetchEmbeds
	if _, err := decodeFetch(bad); err == nil {
		t.Error("a recFetchEmbeds record without embeds decoded")
	}
}

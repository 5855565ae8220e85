package crawlcheck

import (
	"slices"

	"github.com/meridian-crawler/meridian/websim/synth"
)

// NearDupScore is how a crawler's near-duplicate verdicts compare with the
// truth's near-duplicate clusters: the sets of URLs that serve one page's
// text, joined by the truth's NearDupOf (printer-friendly copies and
// mirrors), DuplicateOf (print views, /index.html) and Canonical (session
// ids) fields.
type NearDupScore struct {
	// Verdicts is the number of pages the crawler named a near-duplicate
	// of another, and Correct those whose other page is in their cluster.
	Verdicts int `json:"verdicts"`
	Correct  int `json:"correct"`
	// Precision is Correct/Verdicts, 1 without verdicts.
	Precision float64 `json:"precision"`
	// Pairs is the number of the truth's (copy, original) pairs of
	// NearDupOf whose pages were both fetched, and Found those the crawler
	// detected: a correct verdict on either page (whichever it fetched
	// second names the first, or another page of their cluster).
	Pairs int `json:"pairs"`
	Found int `json:"found"`
	// Recall is Found/Pairs, 1 without pairs.
	Recall float64 `json:"recall"`
	// DupPairs and DupFound are the same for the exact duplicates of
	// DuplicateOf, which a near-duplicate detector finds at distance 0.
	DupPairs int `json:"dup_pairs"`
	DupFound int `json:"dup_found"`
	// Wrong and Missed sample up to 20 wrong verdicts ("url → named") and
	// missed pairs ("copy ~ original").
	Wrong  []string `json:"wrong_sample,omitempty"`
	Missed []string `json:"missed_sample,omitempty"`
}

// ScoreNearDups scores verdicts, a map from each page a crawler found to
// be a near-duplicate to the page it found it a near-duplicate of (both
// URLs as in the truth, or their canonical forms), against the truth;
// fetched reports whether the crawler fetched a URL.
func ScoreNearDups(truth []synth.Record, fetched func(url string) bool, verdicts map[string]string) NearDupScore {
	var s NearDupScore
	// Union-find over URLs.
	id := map[string]int{}
	var parent []int
	node := func(u string) int {
		i, ok := id[u]
		if !ok {
			i = len(parent)
			id[u] = i
			parent = append(parent, i)
		}
		return i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b string) {
		ra, rb := find(node(a)), find(node(b))
		if ra != rb {
			parent[ra] = rb
		}
	}
	for i := range truth {
		r := &truth[i]
		if r.NearDupOf != "" {
			union(r.URL, r.NearDupOf)
		}
		if r.DuplicateOf != "" {
			union(r.URL, r.DuplicateOf)
		}
		if r.Canonical != "" && r.Canonical != r.URL {
			union(r.URL, r.Canonical)
		}
	}
	same := func(a, b string) bool {
		ia, oka := id[a]
		ib, okb := id[b]
		return oka && okb && a != b && find(ia) == find(ib)
	}
	correct := func(u string) bool {
		v, ok := verdicts[u]
		return ok && same(u, v)
	}
	keys := make([]string, 0, len(verdicts))
	for u := range verdicts {
		keys = append(keys, u)
	}
	slices.Sort(keys)
	for _, u := range keys {
		s.Verdicts++
		if correct(u) {
			s.Correct++
		} else if len(s.Wrong) < 20 {
			s.Wrong = append(s.Wrong, u+" → "+verdicts[u])
		}
	}
	for i := range truth {
		r := &truth[i]
		for _, c := range []struct {
			of           string
			pairs, found *int
		}{{r.NearDupOf, &s.Pairs, &s.Found}, {r.DuplicateOf, &s.DupPairs, &s.DupFound}} {
			if c.of == "" || !fetched(r.URL) || !fetched(c.of) {
				continue
			}
			*c.pairs++
			if correct(r.URL) || correct(c.of) {
				*c.found++
			} else if c.pairs == &s.Pairs && len(s.Missed) < 20 {
				s.Missed = append(s.Missed, r.URL+" ~ "+c.of)
			}
		}
	}
	s.Precision, s.Recall = 1, 1
	if s.Verdicts > 0 {
		s.Precision = float64(s.Correct) / float64(s.Verdicts)
	}
	if s.Pairs > 0 {
		s.Recall = float64(s.Found) / float64(s.Pairs)
	}
	return s
}

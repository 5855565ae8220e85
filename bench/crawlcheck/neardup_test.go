package crawlcheck

import (
	"reflect"
	"testing"

	"github.com/meridian-crawler/meridian/websim/synth"
)

func TestScoreNearDups(t *testing.T) {
	// Cluster 1: a, its print copy ap, its mirror am. Cluster 2: b and its
	// copy bp. c has an exact duplicate ci; s?sid=1 is s with a session id.
	truth := []synth.Record{
		{URL: "a"}, {URL: "ap", NearDupOf: "a"}, {URL: "am", NearDupOf: "a"},
		{URL: "b"}, {URL: "bp", NearDupOf: "b"},
		{URL: "c"}, {URL: "ci", DuplicateOf: "c"},
		{URL: "s", Canonical: "s"}, {URL: "s?sid=1", Canonical: "s"},
		{URL: "d"}, {URL: "e"},
	}
	all := func(string) bool { return true }
	for _, c := range []struct {
		name     string
		fetched  func(string) bool
		verdicts map[string]string
		want     NearDupScore
	}{
		{"none", all, nil, NearDupScore{Precision: 1, Pairs: 3, Recall: 0, DupPairs: 1}},
		{"originals first", all, map[string]string{"ap": "a", "am": "a", "bp": "b", "ci": "c"},
			NearDupScore{Verdicts: 4, Correct: 4, Precision: 1, Pairs: 3, Found: 3, Recall: 1, DupPairs: 1, DupFound: 1}},
		{"copies first", all, map[string]string{"a": "am", "ap": "am", "b": "bp"},
			NearDupScore{Verdicts: 3, Correct: 3, Precision: 1, Pairs: 3, Found: 3, Recall: 1, DupPairs: 1}},
		{"copy of a copy", all, map[string]string{"am": "ap", "ap": "a"},
			NearDupScore{Verdicts: 2, Correct: 2, Precision: 1, Pairs: 3, Found: 2, Recall: 2.0 / 3, DupPairs: 1}},
		{"wrong cluster and unknown pages", all, map[string]string{"ap": "b", "d": "e", "bp": "b", "x": "a", "a": "a"},
			NearDupScore{Verdicts: 5, Correct: 1, Precision: 0.2, Pairs: 3, Found: 1, Recall: 1.0 / 3, DupPairs: 1}},
		{"session ids are one page", all, map[string]string{"s?sid=1": "s", "ap": "a"},
			NearDupScore{Verdicts: 2, Correct: 2, Precision: 1, Pairs: 3, Found: 1, Recall: 1.0 / 3, DupPairs: 1}},
		{"unfetched pairs do not count", func(u string) bool { return u != "am" && u != "b" }, map[string]string{"ap": "a"},
			NearDupScore{Verdicts: 1, Correct: 1, Precision: 1, Pairs: 1, Found: 1, Recall: 1, DupPairs: 1}},
		{"nothing fetched", func(string) bool { return false }, nil,
			NearDupScore{Precision: 1, Recall: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ScoreNearDups(truth, c.fetched, c.verdicts)
			if got.Correct != got.Verdicts && len(got.Wrong) != got.Verdicts-got.Correct {
				t.Errorf("%d wrong verdicts, %d sampled", got.Verdicts-got.Correct, len(got.Wrong))
			}
			if len(got.Missed) != got.Pairs-got.Found {
				t.Errorf("%d missed pairs, %d sampled", got.Pairs-got.Found, len(got.Missed))
			}
			got.Wrong, got.Missed = nil, nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

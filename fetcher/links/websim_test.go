package links

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// refNormalise is an independent reference normaliser for the truth's
// outlinks (already resolved by net/url): lower-case scheme and host, no
// default port, no fragment, no websim session parameter, no empty query.
// ok is false for non-http(s) URLs.
func refNormalise(t testing.TB, s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("truth outlink %q: %v", s, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" && !(scheme == "http" && p == "80") && !(scheme == "https" && p == "443") {
		host += ":" + p
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	var keep []string
	for _, kv := range strings.Split(u.RawQuery, "&") {
		name, _, _ := strings.Cut(kv, "=")
		if kv != "" && !slices.ContainsFunc(synth.SessionParams(), func(p string) bool { return strings.EqualFold(p, name) }) {
			keep = append(keep, kv)
		}
	}
	out := scheme + "://" + host + path
	if len(keep) > 0 {
		out += "?" + strings.Join(keep, "&")
	}
	return out, true
}

// truthPage is one HTML page of a synthetic web and its served body.
type truthPage struct {
	rec  synth.Record
	body []byte
}

// htmlPages returns the 200 text/html pages of w's truth with their served
// bodies, skipping responses websim streams specially.
func htmlPages(t testing.TB, w *synth.Web) []truthPage {
	t.Helper()
	var out []truthPage
	var scratch []synth.Link
	err := w.Truth(func(r *synth.Record) error {
		if r.Status != 200 || !strings.HasPrefix(r.ContentType, "text/html") || r.Role == synth.FarmRole {
			return nil // (the farm's entry is served by websim's wildcard, not a host of w)
		}
		u, err := url.Parse(r.URL)
		if err != nil {
			t.Fatalf("truth url %q: %v", r.URL, err)
		}
		h, ok := w.Lookup(u.Hostname())
		if !ok {
			t.Fatalf("truth url %q: unknown host", r.URL)
		}
		resp := w.Respond(nil, scratch, h, u.Path, u.RawQuery)
		scratch = resp.Scratch
		if resp.Special != synth.SpecialNone {
			return nil
		}
		rec := *r
		rec.Outlinks = slices.Clone(r.Outlinks)
		out = append(out, truthPage{rec: rec, body: resp.Body})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantLinks returns what Extract should find on a page of the truth: its
// outlinks normalised by refNormalise, in document order, each once,
// without mailto: links, rel=nofollow links (websim links only its /nf/
// pages so) and links to the page itself; and the number of nofollow links.
func wantLinks(t testing.TB, r *synth.Record, pageURL string) (want []string, nofollow int) {
	seen := map[string]bool{}
	for _, l := range r.Outlinks {
		u, ok := refNormalise(t, l)
		switch {
		case !ok:
			continue // mailto:
		case strings.Contains(u, "/nf/"):
			nofollow++
			continue
		case u == pageURL || seen[u]:
			continue
		}
		seen[u] = true
		want = append(want, u)
	}
	return want, nofollow
}

// TestWebsimTruth extracts the links of every HTML page of a realistic
// synthetic web from its served bytes and compares them with the truth's
// outlinks (see wantLinks): the same links in the same order. It also
// checks that the default scope drops exactly the images.
func TestWebsimTruth(t *testing.T) {
	w, err := synth.New(synth.Options{Hosts: 50, Pages: 20, Seed: 7, Profile: synth.Realistic, Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	n := urlnorm.New(urlnorm.Options{})
	all := NewExtractor(n, &urlnorm.Scope{SkipExts: []string{}}, 0)
	def := NewExtractor(n, &urlnorm.Scope{}, 0)
	var checked, withBase, withSession, withNofollow, skippedPNG int
	for _, tp := range htmlPages(t, w) {
		r := &tp.rec
		if r.Role != "" {
			t.Fatalf("%s: hostile role %q in a realistic web", r.URL, r.Role)
		}
		pageURL, err := n.NormalizeString(r.URL) // a crawler knows the page without its session id
		if err != nil {
			t.Fatalf("truth url %q: %v", r.URL, err)
		}
		want, wantNofollow := wantLinks(t, r, pageURL)
		p := all.Extract(pageURL, "", tp.body)
		if p.Err != nil || p.NoFollow || p.NoIndex || p.Truncated {
			t.Fatalf("%s: %+v", r.URL, p)
		}
		if !slices.Equal(p.Links, want) {
			t.Fatalf("%s: links differ from the truth\ngot  %q\nwant %q", r.URL, p.Links, want)
		}
		if p.NoFollowLinks != wantNofollow {
			t.Fatalf("%s: %d nofollow links skipped, truth has %d", r.URL, p.NoFollowLinks, wantNofollow)
		}
		if p.Base != pageURL {
			withBase++
		}
		if r.URL != pageURL {
			withSession++
		}
		if wantNofollow > 0 {
			withNofollow++
		}
		// The default scope drops exactly the images.
		noPNG := slices.DeleteFunc(slices.Clone(p.Links), func(l string) bool { return strings.HasSuffix(l, ".png") })
		d := def.Extract(pageURL, "", tp.body)
		if !slices.Equal(d.Links, noPNG) || d.OutOfScope != len(p.Links)-len(noPNG) {
			t.Fatalf("%s: default scope kept %q (%d out of scope), want %q", r.URL, d.Links, d.OutOfScope, noPNG)
		}
		skippedPNG += d.OutOfScope
		checked++
	}
	t.Logf("%d pages checked: %d with <base>, %d session variants, %d with nofollow links, %d images out of scope", checked, withBase, withSession, withNofollow, skippedPNG)
	if checked < 500 || withBase == 0 || withSession == 0 || withNofollow == 0 || skippedPNG == 0 {
		t.Fatalf("the web did not exercise every feature: %d pages, %d base, %d session, %d nofollow, %d png", checked, withBase, withSession, withNofollow, skippedPNG)
	}
}

// TestWebsimHostile does the same on a hostile web, whose role hosts serve
// broken HTML, traps and a 10,000-link page; that page is cut at the cap.
func TestWebsimHostile(t *testing.T) {
	w, err := synth.New(synth.Options{Hosts: 30, Pages: 12, Seed: 3, Profile: synth.Hostile, Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	n := urlnorm.New(urlnorm.Options{})
	// The calendar's entry, /cal/2026/11, links to the months beside it:
	// on a clock of its time the calendar rule refuses neither.
	calClock := func() time.Time { return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC) }
	big := NewExtractor(n, &urlnorm.Scope{SkipExts: []string{}, Now: calClock}, 20_000)
	capped := NewExtractor(n, &urlnorm.Scope{SkipExts: []string{}, Now: calClock}, 0)
	roles := map[string]int{}
	for _, tp := range htmlPages(t, w) {
		r := &tp.rec
		pageURL, err := n.NormalizeString(r.URL)
		if err != nil {
			t.Fatalf("truth url %q: %v", r.URL, err)
		}
		want, _ := wantLinks(t, r, pageURL)
		p := big.Extract(pageURL, "", tp.body)
		if !slices.Equal(p.Links, want) {
			t.Fatalf("%s (role %q): links differ from the truth\ngot  %.500q\nwant %.500q", r.URL, r.Role, p.Links, want)
		}
		roles[r.Role]++
		if len(want) > DefaultMaxLinks {
			c := capped.Extract(pageURL, "", tp.body)
			if !c.Truncated || !slices.Equal(c.Links, want[:DefaultMaxLinks]) {
				t.Fatalf("%s: %d links, truncated %v; want the first %d", r.URL, len(c.Links), c.Truncated, DefaultMaxLinks)
			}
			roles["capped"]++
		}
	}
	for _, role := range []string{"", "broken-html", "many-links", "calendar", "deep", "capped"} {
		if roles[role] == 0 {
			t.Errorf("no page of role %q checked: %v", role, roles)
		}
	}
}

package synth

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// visibleWords returns the words of a page's text outside <title> and <a>
// elements, without the "|" that separates navigation links.
func visibleWords(body []byte) []string {
	z := html.NewTokenizer(bytes.NewReader(body))
	var words []string
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return words
		case html.StartTagToken:
			if name, _ := z.TagName(); string(name) == "a" || string(name) == "title" {
				skip++
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); string(name) == "a" || string(name) == "title" {
				skip--
			}
		case html.TextToken:
			if skip == 0 {
				for _, f := range strings.Fields(string(z.Text())) {
					if f != "|" {
						words = append(words, f)
					}
				}
			}
		}
	}
}

// TestNearDuplicates checks the near-duplicate copies of a realistic web:
// their share, where they live, that their originals link them, and that
// they serve their original's text with a short footer.
func TestNearDuplicates(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 200, Pages: 30, Seed: 4, Profile: Realistic})
	recs := allRecords(t, w)
	byURL := map[string]*Record{}
	for i := range recs {
		byURL[recs[i].URL] = &recs[i]
	}
	var pages, copies, mirrors, reachable int
	for i := range recs {
		r := &recs[i]
		if r.Kind == "page" {
			pages++
		}
		if (r.Kind == "near-dup") != (r.NearDupOf != "") {
			t.Fatalf("%s: kind %s, near-duplicate of %q", r.URL, r.Kind, r.NearDupOf)
		}
		if r.NearDupOf == "" {
			continue
		}
		copies++
		orig := byURL[r.NearDupOf]
		if orig == nil || orig.Kind != "page" || orig.URL == orig.Canonical && orig.Depth < 1 {
			t.Fatalf("%s: original %s is not a tree page: %+v", r.URL, r.NearDupOf, orig)
		}
		ou, _ := url.Parse(orig.URL)
		cu, _ := url.Parse(r.URL)
		n, _ := strings.CutSuffix(strings.TrimPrefix(ou.Path, "/p/"), ".html")
		if cu.Host == ou.Host {
			if cu.Path != "/print/"+n+".html" {
				t.Fatalf("%s: same-host copy of %s at the wrong path", r.URL, orig.URL)
			}
			if r.Depth != orig.Depth+1 {
				t.Errorf("%s: depth %d, original's %d", r.URL, r.Depth, orig.Depth)
			}
		} else {
			mirrors++
			if cu.Path != "/mirror/"+ou.Host+"/"+n+".html" || r.Depth != -1 {
				t.Fatalf("%s: mirror copy of %s at the wrong path or depth %d", r.URL, orig.URL, r.Depth)
			}
		}
		if !slices.Contains(orig.Outlinks, r.URL) {
			t.Errorf("%s: its original %s does not link it", r.URL, orig.URL)
		}
		if r.Reachable != (orig.Reachable && r.RobotsAllowed) {
			t.Errorf("%s: reachable %v, original %v, allowed %v", r.URL, r.Reachable, orig.Reachable, r.RobotsAllowed)
		}
		if r.Reachable {
			reachable++
		}
		// The copy's links: its navigation, then the original's without
		// those to its copies.
		var want []string
		for _, l := range orig.Outlinks {
			if b := byURL[l]; b == nil || b.NearDupOf == "" {
				want = append(want, l)
			}
		}
		norm := func(ls []string) []string {
			out := make([]string, len(ls))
			for i, l := range ls {
				out[i] = normalise(t, l)
			}
			return out
		}
		if got := r.Outlinks[len(r.Outlinks)-len(want):]; !slices.Equal(norm(got), norm(want)) {
			t.Fatalf("%s: links\n%q, want the original's\n%q", r.URL, got, want)
		}
		if !slices.Contains(r.Outlinks[:len(r.Outlinks)-len(want)], orig.URL) {
			t.Errorf("%s: no link back to %s", r.URL, orig.URL)
		}
		// The copy's text: the original's, then a footer of 2-4 words.
		get := func(u *url.URL) []byte {
			h, ok := w.Lookup(u.Hostname())
			if !ok {
				t.Fatalf("%s: unknown host", u)
			}
			resp := w.Respond(nil, nil, h, u.Path, u.RawQuery)
			if resp.Status != 200 {
				t.Fatalf("%s: status %d", u, resp.Status)
			}
			return resp.Body
		}
		ow, cw := visibleWords(get(ou)), visibleWords(get(cu))
		if len(ow) < 100 || len(cw) < len(ow)+2 || len(cw) > len(ow)+4 || !slices.Equal(cw[:len(ow)], ow) {
			t.Fatalf("%s: text of %d words, original's %d; footer %q", r.URL, len(cw), len(ow), cw[min(len(ow), len(cw)):])
		}
	}
	share := float64(copies) / float64(pages)
	t.Logf("%d pages, %d near-duplicate copies (%.1f%%), %d of them mirrors, %d reachable", pages, copies, 100*share, mirrors, reachable)
	if share < 0.03 || share > 0.06 || mirrors < copies/5 || reachable < copies*3/4 {
		t.Errorf("%d copies of %d pages, %d mirrors, %d reachable: want 3-6%% of pages, a third of them mirrors, most reachable", copies, pages, mirrors, reachable)
	}
}

// TestNearDuplicateURLs: only the copies the truth lists exist.
func TestNearDuplicateURLs(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 50, Pages: 30, Seed: 4, Profile: Realistic})
	var orig, mirror, plain, src = -1, -1, -1, -1
	for h, host := range w.Hosts() {
		for n := 1; n < host.Pages; n++ {
			p, m := w.nearDups(h, n)
			switch {
			case p && m >= 0 && mirror < 0:
				src, orig, mirror = h, n, m
			case !p && plain < 0 && h == src:
				plain = n
			}
		}
	}
	if mirror < 0 || plain < 0 {
		t.Fatal("no page with a mirror copy on a host with a plain page")
	}
	name := w.Hosts()[src].Name
	other := (mirror + 1) % len(w.Hosts())
	if other == src {
		other = (other + 1) % len(w.Hosts())
	}
	for _, c := range []struct {
		h    int
		path string
		want int
	}{
		{src, "/print/" + strconv.Itoa(orig) + ".html", 200},
		{mirror, "/mirror/" + name + "/" + strconv.Itoa(orig) + ".html", 200},
		{src, "/print/" + strconv.Itoa(plain) + ".html", 404},
		{src, "/print/0" + strconv.Itoa(orig) + ".html", 404},
		{src, "/print/" + strconv.Itoa(orig), 404},
		{mirror, "/mirror/" + name + "/" + strconv.Itoa(plain) + ".html", 404},
		{mirror, "/mirror/" + strings.ToUpper(name) + "/" + strconv.Itoa(orig) + ".html", 404},
		{other, "/mirror/" + name + "/" + strconv.Itoa(orig) + ".html", 404},
		{mirror, "/mirror/" + name, 404},
		{src, "/mirror/" + name + "/" + strconv.Itoa(orig) + ".html", 404},
	} {
		if resp := w.Respond(nil, nil, c.h, c.path, ""); resp.Status != c.want {
			t.Errorf("host %d %s: status %d, want %d", c.h, c.path, resp.Status, c.want)
		}
	}
	for _, p := range []Profile{Clean, Hostile} {
		w := mustWeb(t, Options{Hosts: 50, Pages: 30, Seed: 4, Profile: p})
		for h := range w.Hosts() {
			for n := range w.Hosts()[h].Pages {
				if pr, m := w.nearDups(h, n); pr || m >= 0 {
					t.Fatalf("%v: page %d/%d has near-duplicates", p, h, n)
				}
			}
		}
	}
}

// TestTruthNearDupOf: the truth file names a copy's original in
// near_dup_of, and only for copies; a record without the field (an older
// truth file) reads as before.
func TestTruthNearDupOf(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 30, Pages: 20, Seed: 4, Profile: Realistic})
	var copies, lines int
	for _, line := range bytes.Split(bytes.TrimSpace(truthBytes(t, w)), []byte("\n")) {
		lines++
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if has := bytes.Contains(line, []byte(`"near_dup_of":`)); has != (r.Kind == "near-dup") || has != (r.NearDupOf != "") {
			t.Fatalf("near_dup_of in %s", line)
		}
		if r.NearDupOf != "" {
			copies++
		}
	}
	if copies == 0 {
		t.Fatalf("no near-duplicate in %d records", lines)
	}
	var old Record
	if err := json.Unmarshal([]byte(`{"url":"http://h1.us.test/p/3.html","canonical":"http://h1.us.test/p/3.html","host":"h1.us.test","ip":"127.77.0.2","status":200,"content_type":"text/html","robots_allowed":true,"depth":1,"outlinks":[],"kind":"page","reachable":true}`), &old); err != nil || old.NearDupOf != "" || old.Kind != "page" {
		t.Fatalf("old record: %+v %v", old, err)
	}
}

// TestCleanAndHostileBodiesUnchanged pins the bytes the clean and hostile
// profiles serve: a hash of every page node's and private page's body, and
// of every page's print view. Features of the realistic profile (such as
// near-duplicates) must leave them alone; a deliberate change must update
// the hashes here.
func TestCleanAndHostileBodiesUnchanged(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Hosts: 60, Pages: 15, Seed: 1, Profile: Clean}, "63f0d868393c5015fd3d4004821a102a3926041903d5a07c764b6a242bbca18a"},
		{Options{Hosts: 40, Pages: 12, Seed: 3, Profile: Hostile}, "39c14f734c5e160e256469b1891adfc981f88f94300d91b1de8343e8f14db140"},
	} {
		t.Run(fmt.Sprintf("%v/%d/%d/%d", c.o.Profile, c.o.Hosts, c.o.Pages, c.o.Seed), func(t *testing.T) {
			w := mustWeb(t, c.o)
			sum := sha256.New()
			var (
				buf     []byte
				scratch []Link
			)
			for h, host := range w.Hosts() {
				for n := range host.Pages + host.Orphans {
					for _, pq := range [][2]string{{pagePath(n), ""}, {pagePath(n), "view=print"}, {"/private/" + strconv.Itoa(n) + ".html", ""}} {
						resp := w.Respond(buf[:0], scratch, h, pq[0], pq[1])
						buf, scratch = resp.Body, resp.Scratch
						fmt.Fprintf(sum, "%d %s %d %s\n", resp.Status, resp.ContentType, len(resp.Body), resp.Location)
						sum.Write(resp.Body)
					}
				}
			}
			if got := fmt.Sprintf("%x", sum.Sum(nil)); got != c.want {
				t.Errorf("body hash %s, want %s", got, c.want)
			}
		})
	}
}

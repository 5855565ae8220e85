package synth

import (
	"bytes"
	"errors"
	"math"
	"net/netip"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

func mustWeb(t testing.TB, o Options) *Web {
	t.Helper()
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func truthBytes(t testing.TB, w *Web) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := w.WriteTruth(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func allRecords(t testing.TB, w *Web) []Record {
	t.Helper()
	var out []Record
	err := w.Truth(func(r *Record) error {
		c := *r
		c.Outlinks = slices.Clone(r.Outlinks)
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDeterminism(t *testing.T) {
	for _, p := range []Profile{Clean, Realistic, Hostile} {
		t.Run(p.String(), func(t *testing.T) {
			o := Options{Hosts: 40, Pages: 15, Seed: 7, IPs: 5, Port: 8080, Profile: p}
			a, b := mustWeb(t, o), mustWeb(t, o)
			ta, tb := truthBytes(t, a), truthBytes(t, b)
			if !bytes.Equal(ta, tb) {
				t.Fatal("same options, different truth")
			}
			for _, r := range allRecords(t, a)[:300] {
				u, _ := url.Parse(r.URL)
				h, _ := a.Lookup(u.Hostname())
				ra := a.Respond(nil, nil, h, u.Path, u.RawQuery)
				rb := b.Respond(nil, nil, h, u.Path, u.RawQuery)
				if ra.Status != rb.Status || !bytes.Equal(ra.Body, rb.Body) || ra.ContentType != rb.ContentType {
					t.Fatalf("%s: responses differ", r.URL)
				}
			}
			o.Seed = 8
			if bytes.Equal(ta, truthBytes(t, mustWeb(t, o))) {
				t.Fatal("another seed gave the same web")
			}
		})
	}
}

// extract parses an HTML page the way a crawler should: <base href>, <a
// href>, rel=nofollow, resolved against the page URL.
func extract(t *testing.T, pageURL string, body []byte) (links []string, nofollow int) {
	t.Helper()
	base, err := url.Parse(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	z := html.NewTokenizer(bytes.NewReader(body))
	var raw []string
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		tok := z.Token()
		attr := func(k string) (string, bool) {
			for _, a := range tok.Attr {
				if a.Key == k {
					return a.Val, true
				}
			}
			return "", false
		}
		switch tok.Data {
		case "base":
			if v, ok := attr("href"); ok {
				b, err := url.Parse(v)
				if err != nil {
					t.Fatalf("%s: bad base %q", pageURL, v)
				}
				base = base.ResolveReference(b)
			}
		case "a":
			if v, ok := attr("href"); ok {
				raw = append(raw, v)
				if rel, _ := attr("rel"); rel == "nofollow" {
					nofollow++
				}
			}
		}
	}
	for _, v := range raw {
		ref, err := url.Parse(v)
		if err != nil {
			t.Fatalf("%s: bad href %q", pageURL, v)
		}
		links = append(links, base.ResolveReference(ref).String())
	}
	return links, nofollow
}

// normalise is a reference URL normaliser: lower-case scheme and host, no
// default port, no fragment, dot segments resolved.
func normalise(t *testing.T, s string) string {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("normalise %q: %v", s, err)
	}
	if u.Scheme == "mailto" {
		return s
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	u.Host = strings.TrimSuffix(u.Host, ":80")
	u.Fragment, u.RawFragment = "", ""
	return u.ResolveReference(&url.URL{Path: u.EscapedPath(), RawQuery: u.RawQuery}).String()
}

// TestTruthMatchesServedPages checks the truth file against what the web
// serves: every record's status and type, and every HTML page's links
// extracted from its served bytes.
func TestTruthMatchesServedPages(t *testing.T) {
	for _, p := range []Profile{Clean, Realistic, Hostile} {
		t.Run(p.String(), func(t *testing.T) {
			w := mustWeb(t, Options{Hosts: 30, Pages: 12, Seed: 3, IPs: 4, Port: 80, Profile: p})
			recs := allRecords(t, w)
			known := map[string]bool{}
			for _, r := range recs {
				if known[r.URL] {
					t.Fatalf("record %s twice", r.URL)
				}
				known[r.URL] = true
			}
			checkedPages := 0
			for _, r := range recs {
				u, err := url.Parse(r.URL)
				if err != nil {
					t.Fatalf("record url %q: %v", r.URL, err)
				}
				if got := normalise(t, r.URL); got != r.URL {
					t.Fatalf("record url %q is not normalised (%q)", r.URL, got)
				}
				if n, ok := w.FarmHost(u.Hostname()); ok { // the subdomain farm's entry (farm_test.go)
					if resp := w.RespondFarm(nil, n, u.Path); resp.Status != r.Status || !r.Trap {
						t.Fatalf("%s: truth says %d (trap %v), the farm served %d", r.URL, r.Status, r.Trap, resp.Status)
					}
					continue
				}
				h, ok := w.Lookup(u.Hostname())
				if !ok || w.Hosts()[h].Name != r.Host {
					t.Fatalf("record %s: host %q unknown", r.URL, r.Host)
				}
				resp := w.Respond(nil, nil, h, u.Path, u.RawQuery)
				wantStatus := resp.Status
				if resp.Special == SpecialBlackhole {
					wantStatus = 0
				}
				if wantStatus != r.Status {
					t.Fatalf("%s: truth says %d, served %d", r.URL, r.Status, resp.Status)
				}
				if r.Kind == "robots" || r.Trap || resp.Special != SpecialNone || !strings.HasPrefix(resp.ContentType, "text/html") || r.Status != 200 {
					continue
				}
				links, _ := extract(t, r.URL, resp.Body)
				if !slices.Equal(links, r.Outlinks) {
					t.Fatalf("%s: served links differ from truth\nserved %d: %.300q\ntruth  %d: %.300q", r.URL, len(links), links, len(r.Outlinks), r.Outlinks)
				}
				for _, l := range links {
					n := normalise(t, l)
					if strings.HasPrefix(n, "mailto:") {
						continue
					}
					if !known[n] && !strings.Contains(n, "/cal/") && !strings.Contains(n, "/deep/") {
						t.Fatalf("%s links %s (normalised %s), which has no record", r.URL, l, n)
					}
				}
				checkedPages++
			}
			if checkedPages < 100 {
				t.Fatalf("only %d pages checked", checkedPages)
			}
		})
	}
}

func TestGraphShape(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 400, Pages: 30, Seed: 11, IPs: 20, Profile: Clean})
	var pages, maxPages int
	for _, h := range w.Hosts() {
		pages += h.Pages
		maxPages = max(maxPages, h.Pages)
	}
	mean := float64(pages) / 400
	if mean < 22 || mean > 38 {
		t.Errorf("mean pages per host %.1f, want ~30", mean)
	}
	if maxPages < 3*30 {
		t.Errorf("largest host has %d pages: not heavy-tailed", maxPages)
	}
	var links, onHost, maxDeg int
	inRemote := make([]int, 400)
	var buf []Link
	for h, host := range w.Hosts() {
		for n := range host.Pages {
			buf = w.pageLinks(buf[:0], h, n, false)
			links += len(buf)
			maxDeg = max(maxDeg, len(buf))
			for _, l := range buf {
				if int(l.host) == h {
					onHost++
				} else {
					inRemote[l.host]++
				}
			}
		}
	}
	deg := float64(links) / float64(pages)
	if deg < 32 || deg > 50 {
		t.Errorf("mean out-degree %.1f, want ~40", deg)
	}
	if maxDeg < 4*40 {
		t.Errorf("max out-degree %d: not heavy-tailed", maxDeg)
	}
	if share := float64(onHost) / float64(links); share < 0.75 {
		t.Errorf("on-host share %.2f, want most links on their host", share)
	}
	// Popular hosts (low indexes) get most cross-host links.
	remote := links - onHost
	top := 0
	for _, n := range inRemote[:40] {
		top += n
	}
	if share := float64(top) / float64(remote); share < 0.4 {
		t.Errorf("top 10%% of hosts get %.2f of remote links, want a power law (> 0.4)", share)
	}
	// Depth: every page of a clean host is reachable from its front page.
	for _, r := range allRecords(t, w) {
		if r.Kind == "page" && (r.Depth < 0 || !r.Reachable) {
			t.Fatalf("%s: depth %d reachable %v in a clean web", r.URL, r.Depth, r.Reachable)
		}
	}
}

func TestRealisticFeatures(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 300, Pages: 20, Seed: 5, IPs: 10, Profile: Realistic})
	count := map[string]int{}
	for _, h := range w.Hosts() {
		count["robots-"+[]string{"allowall", "normal", "partial", "delay", "missing", "flaky", "disallowall"}[h.Robots]]++
		count["charset-"+h.Charset.String()]++
		for _, f := range []struct {
			name string
			on   bool
		}{{"sitemap", h.Sitemap}, {"sitemap-missing", h.SitemapBad}, {"orphans", h.Orphans > 0}, {"session", h.Session}, {"base", h.Base}, {"loop", h.Loop}, {"index-dup", h.IndexDup}, {"crawl-delay", h.CrawlDelay > 0}} {
			if f.on {
				count[f.name]++
			}
		}
	}
	var statuses = map[int]int{}
	for _, r := range allRecords(t, w) {
		count["kind-"+r.Kind]++
		statuses[r.Status]++
		if r.DuplicateOf != "" {
			count["duplicate"]++
		}
		if r.NearDupOf != "" && strings.Contains(r.URL, "/mirror/") {
			count["near-dup-mirror"]++
		}
		if r.Canonical != r.URL {
			count["canonical-differs"]++
		}
		if r.FailFirst > 0 {
			count["robots-5xx-first"]++
		}
		if !r.Reachable && r.RobotsAllowed && r.Kind == "nofollow" {
			count["nofollow-unreachable"]++
		}
		if r.Kind == "orphan" && r.Reachable && r.Depth == -1 {
			count["orphan-via-sitemap"]++
		}
	}
	// Link forms, read from the served pages.
	var hrefs []byte
	for h := range 60 {
		resp := w.Respond(nil, nil, h, "/", "")
		hrefs = append(hrefs, resp.Body...)
		resp = w.Respond(nil, nil, h, "/p/1.html", "")
		hrefs = append(hrefs, resp.Body...)
	}
	for _, f := range []struct{ name, needle string }{
		{"form-absolute", `href="http://h`}, {"form-protocol-relative", `href="//h`}, {"form-root", `href="/p/`},
		{"form-relative", `href="`}, {"form-upper", `href="HTTP://H`}, {"form-dots", `href="/x/../`},
		{"form-default-port", `.test:80/`}, {"fragment", `#s`}, {"nofollow-attr", `rel="nofollow"`},
		{"base-tag", `<base href=`}, {"mailto", `href="mailto:`},
	} {
		if bytes.Contains(hrefs, []byte(f.needle)) {
			count[f.name]++
		}
	}
	want := []string{"robots-normal", "robots-partial", "robots-delay", "robots-missing", "robots-flaky", "robots-disallowall",
		"charset-utf-8", "charset-iso-8859-1", "charset-windows-1252", "charset-shift_jis",
		"sitemap", "sitemap-missing", "orphans", "session", "base", "loop", "index-dup", "crawl-delay",
		"kind-redirect", "kind-loop", "kind-gone", "kind-missing", "kind-error", "kind-pdf", "kind-png", "kind-print", "kind-index",
		"kind-session", "kind-private", "kind-nofollow", "kind-orphan", "kind-sitemap", "kind-near-dup", "near-dup-mirror", "duplicate", "canonical-differs", "robots-5xx-first",
		"nofollow-unreachable", "orphan-via-sitemap",
		"form-absolute", "form-protocol-relative", "form-root", "form-upper", "form-dots", "form-default-port", "fragment", "nofollow-attr", "base-tag", "mailto"}
	for _, k := range want {
		if count[k] == 0 {
			t.Errorf("feature %s missing from a realistic web", k)
		}
	}
	for _, s := range []int{200, 301, 302, 404, 410, 500} {
		if statuses[s] == 0 {
			t.Errorf("no record with status %d", s)
		}
	}
}

func TestHostileRoles(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 20, Pages: 10, Seed: 2, IPs: 4, Profile: Hostile})
	roles := map[Role]int{}
	for i, h := range w.Hosts() {
		roles[h.Role] = i
	}
	for r := Role(1); r < roleCount; r++ {
		if _, ok := roles[r]; !ok {
			t.Fatalf("no host with role %s", r)
		}
	}
	get := func(r Role, path string) Response {
		u, q, _ := strings.Cut(path, "?")
		return w.Respond(nil, nil, roles[r], u, q)
	}
	if resp := get(RoleCalendar, "/cal/2026/11"); resp.Status != 200 || !bytes.Contains(resp.Body, []byte("/cal/2026/12")) {
		t.Errorf("calendar: %d %.200q", resp.Status, resp.Body)
	}
	if resp := get(RoleCalendar, "/cal/9999/12"); resp.Status != 200 || bytes.Contains(resp.Body, []byte("/cal/10000/")) {
		t.Errorf("calendar must end at year 9999")
	}
	deep := "/deep/" + strings.Repeat("a/", 500)
	if resp := get(RoleDeep, deep); resp.Status != 200 || !bytes.Contains(resp.Body, []byte(deep+"a/")) {
		t.Errorf("deep path trap: %d", resp.Status)
	}
	if resp := get(RoleDeep, "/deep/"+strings.Repeat("b/", maxPathLen)); resp.Status != 404 {
		t.Errorf("deep path beyond %d bytes: %d, want 404", maxPathLen, resp.Status)
	}
	if resp := get(RoleManyLinks, "/many.html"); bytes.Count(resp.Body, []byte("<a href=")) != manyLinks {
		t.Errorf("many links: %d links", bytes.Count(resp.Body, []byte("<a href=")))
	}
	if resp := get(RoleDrip, "/drip.html"); resp.Special != SpecialDrip {
		t.Errorf("drip: special %d", resp.Special)
	}
	if resp := get(RoleDrip, "/"); resp.Special != SpecialNone {
		t.Errorf("drip host's front page must arrive normally")
	}
	if resp := get(RoleHuge, "/huge.html"); resp.Special != SpecialHuge {
		t.Errorf("huge: special %d", resp.Special)
	}
	if resp := get(RoleBomb, "/bomb.html"); resp.Special != SpecialBomb {
		t.Errorf("bomb: special %d", resp.Special)
	}
	if resp := get(RoleWrongType, "/wrong/1.html"); resp.ContentType != "image/jpeg" || !bytes.HasPrefix(resp.Body, []byte("<!DOCTYPE html>")) {
		t.Errorf("wrong type: %q", resp.ContentType)
	}
	if resp := get(RoleWrongType, "/data.bin"); !strings.HasPrefix(resp.ContentType, "text/html") || len(resp.Body) < 1000 {
		t.Errorf("binary as html: %q %d", resp.ContentType, len(resp.Body))
	}
	if resp := get(RoleBroken, "/p/1.html"); !bytes.Contains(resp.Body, []byte("\xff\xfe")) || bytes.HasSuffix(resp.Body, []byte("</html>\n")) {
		t.Errorf("broken html is not broken")
	}
	if resp := get(RoleBlackhole, "/robots.txt"); resp.Special != SpecialBlackhole {
		t.Errorf("blackhole answers robots.txt")
	}
	hops := 0
	for p := "/chain/0"; hops < 100; hops++ {
		resp := get(RoleChain, p)
		if resp.Status != 302 {
			break
		}
		p = strings.TrimPrefix(resp.Location, w.Origin(roles[RoleChain]))
	}
	if hops != chainHops {
		t.Errorf("redirect chain has %d hops, want %d", hops, chainHops)
	}
}

func TestMemoryIndependentOfPages(t *testing.T) {
	heap := func(pages int) (uint64, *Web) {
		runtime.GC()
		var a runtime.MemStats
		runtime.ReadMemStats(&a)
		w := mustWeb(t, Options{Hosts: 2000, Pages: pages, Seed: 1, Profile: Realistic})
		runtime.GC()
		var b runtime.MemStats
		runtime.ReadMemStats(&b)
		return b.HeapAlloc - min(a.HeapAlloc, b.HeapAlloc), w
	}
	small, w1 := heap(10)
	big, w2 := heap(100_000)
	t.Logf("heap for 2000 hosts: %d KiB at 10 pages/host, %d KiB at 100,000 pages/host", small>>10, big>>10)
	if big > small+small/2+(1<<20) {
		t.Errorf("memory grows with page count: %d vs %d bytes", big, small)
	}
	runtime.KeepAlive(w1)
	runtime.KeepAlive(w2)
}

func TestOptionsValidate(t *testing.T) {
	err := Options{Hosts: -1, Pages: 0, IPs: 1 << 20, Port: 70000, Profile: 9, PageBytes: 10}.Validate()
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, want := range []string{"hosts", "pages", "ips", "port", "profile", "page bytes", "ip base"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %q lacks %q", err, want)
		}
	}
	if _, err := New(Options{Hosts: 5, Profile: Hostile}); err == nil || !strings.Contains(err.Error(), "hostile") {
		t.Errorf("hostile with 5 hosts: %v", err)
	}
	if _, err := ParseProfile("nasty"); err == nil {
		t.Error("ParseProfile accepted nasty")
	}
	if _, err := New(Options{IPBase: mustAddr("10.0.0.1")}); err == nil {
		t.Error("non-loopback base accepted")
	}
	_ = errors.Join
}

func TestAddresses(t *testing.T) {
	ips, err := Addresses(mustAddr("127.77.0.250"), 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.77.0.250", "127.77.0.251", "127.77.0.252", "127.77.0.253", "127.77.0.254", "127.77.1.1", "127.77.1.2", "127.77.1.3", "127.77.1.4", "127.77.1.5"}
	for i, ip := range ips {
		if ip.String() != want[i] {
			t.Fatalf("address %d: %v, want %s", i, ip, want[i])
		}
	}
	if _, err := Addresses(mustAddr("127.255.255.250"), 10); err == nil {
		t.Error("ran past 127/8 without error")
	}
}

func TestLookup(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 50, Seed: 1})
	for i, h := range w.Hosts() {
		for _, name := range []string{h.Name, strings.ToUpper(h.Name), h.Name + "."} {
			if got, ok := w.Lookup(name); !ok || got != i {
				t.Fatalf("Lookup(%q) = %d %v", name, got, ok)
			}
		}
	}
	for _, name := range []string{"", "h", "h50.us.test", "h01.us.test", "x1.us.test", "h1.zz.test", "h99999999999999999999.us.test"} {
		if _, ok := w.Lookup(name); ok {
			t.Errorf("Lookup(%q) found a host", name)
		}
	}
}

func TestRobotsAllowedLongestMatch(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 200, Seed: 5, Profile: Realistic})
	h := slices.IndexFunc(w.Hosts(), func(h Host) bool { return h.Robots == RobotsPartial })
	if h < 0 {
		t.Fatal("no partial robots host")
	}
	for _, c := range []struct {
		path string
		want bool
	}{{"/", true}, {"/p/1.html", true}, {"/p/1.html?sid=1", true}, {"/p/10.html", false}, {"/p/2.html", true}, {"/private/3.html", false}, {"/cgi-bin/x", false}} {
		if got := w.RobotsAllowed(h, c.path); got != c.want {
			t.Errorf("RobotsAllowed(%s) = %v, want %v", c.path, got, c.want)
		}
	}
}

func FuzzRespond(f *testing.F) {
	w := mustWeb(f, Options{Hosts: 20, Pages: 10, Seed: 1, Profile: Hostile})
	for _, s := range []string{"/", "/p/1.html", "/p/01.html", "/cal/2026/1", "/deep/a/", "/x/9999", "/r/0", "/chain/29", "/loop/a", "/p/-1.html", "/files/3.pdf"} {
		f.Add(3, s, "")
	}
	f.Fuzz(func(t *testing.T, h int, path, query string) {
		if h < 0 || h >= len(w.Hosts()) || !strings.HasPrefix(path, "/") {
			return
		}
		resp := w.Respond(nil, nil, h, path, query)
		if resp.Special == SpecialNone && (resp.Status < 200 || resp.Status > 599) {
			t.Fatalf("%s: status %d", path, resp.Status)
		}
		if resp.Status/100 == 3 && resp.Location == "" {
			t.Fatalf("%s: redirect without Location", path)
		}
		if math.IsNaN(float64(len(resp.Body))) {
			t.Fatal("unreachable")
		}
	})
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestPageBytes(t *testing.T) {
	for _, pb := range []int{5_000, 10_000, 50_000} { // below ~3 KB the links alone are larger
		w := mustWeb(t, Options{Hosts: 50, Pages: 20, Seed: 3, Profile: Realistic, PageBytes: pb})
		var total, n int
		for h, host := range w.Hosts() {
			for p := range host.Pages {
				total += len(w.Respond(nil, nil, h, pagePath(p), "").Body)
				n++
			}
		}
		if mean := float64(total) / float64(n); math.Abs(mean-float64(pb))/float64(pb) > 0.12 {
			t.Errorf("page bytes %d: mean page is %.0f bytes", pb, mean)
		}
	}
}

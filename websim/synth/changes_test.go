package synth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

var day = 24 * time.Hour

// classOf returns the change class of a rate in changes per day.
func classOf(rate float64) int {
	if rate == 0 {
		return classStatic
	}
	iv := 1 / rate
	for c := range classStatic {
		if iv <= changeClasses[c].hi*(1+1e-9) {
			return c
		}
	}
	return classStatic
}

// TestChangeModelTable checks the tables of changes.go against the figures
// they cite: each domain's row sums to 1, the domain statements of Cho and
// Garcia-Molina hold, and the rows weighted by Table 1's sites give Figure
// 2(a) within a point.
func TestChangeModelTable(t *testing.T) {
	sites := 0
	for _, n := range domainSites {
		sites += n
	}
	if sites != 270 {
		t.Errorf("Table 1 has %d sites, want 270", sites)
	}
	if s := sum(overallShares[:]); math.Abs(s-1) > 1e-9 {
		t.Errorf("Figure 2(a) sums to %v", s)
	}
	var mix [classCount]float64
	for d := DomainCom; d < domainCount; d++ {
		row := domainShares[d]
		if s := sum(row[:]); math.Abs(s-1) > 1e-9 {
			t.Errorf("%s: shares sum to %v", d, s)
		}
		for c := range classCount {
			mix[c] += row[c] * float64(domainSites[d]) / float64(sites)
		}
		switch d {
		case DomainCom:
			if row[classDay] <= 0.40 {
				t.Errorf("com: %.2f change daily, the paper says more than 40%%", row[classDay])
			}
		default:
			if row[classDay] >= 0.10 {
				t.Errorf("%s: %.2f change daily, the paper says less than 10%%", d, row[classDay])
			}
		}
		if (d == DomainEdu || d == DomainGov) && row[classStatic] <= 0.50 {
			t.Errorf("%s: %.2f static for 4 months, the paper says more than 50%%", d, row[classStatic])
		}
	}
	for c := range classCount {
		if math.Abs(mix[c]-overallShares[c]) > 0.01 {
			t.Errorf("class %d: the domains give %.3f, Figure 2(a) %.2f", c, mix[c], overallShares[c])
		}
	}
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// TestChangeShares checks the rates of a large generated web against the
// cited shares: hosts by domain against Table 1, pages by change class
// against Figure 2(a), and the com, edu and gov statements per domain.
func TestChangeShares(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 3000, Pages: 30, Seed: 9, Profile: Realistic, Changes: true})
	var hosts [domainCount]int
	var pages [domainCount][classCount]int
	var total [classCount]int
	n := 0
	for h, host := range w.Hosts() {
		hosts[host.Domain]++
		for p := range host.Pages + host.Orphans {
			c := classOf(w.ChangeRate(h, p))
			pages[host.Domain][c]++
			total[c]++
			n++
		}
	}
	if hosts[DomainNone] != 0 {
		t.Errorf("%d hosts without a domain in a realistic changing web", hosts[DomainNone])
	}
	for d := DomainCom; d < domainCount; d++ {
		got, want := float64(hosts[d])/3000, float64(domainSites[d])/270
		if math.Abs(got-want) > 0.025 {
			t.Errorf("%s: %.3f of hosts, Table 1 gives %.3f", d, got, want)
		}
	}
	// Pages are clustered in hosts of lognormal size, hence the tolerances.
	for c := range classCount {
		if got := float64(total[c]) / float64(n); math.Abs(got-overallShares[c]) > 0.03 {
			t.Errorf("class %d: %.3f of pages, Figure 2(a) gives %.2f", c, got, overallShares[c])
		}
	}
	share := func(d Domain, c int) float64 {
		return float64(pages[d][c]) / float64(sum(intsToFloats(pages[d][:])))
	}
	t.Logf("pages %d; daily: com %.3f edu %.3f netorg %.3f gov %.3f; static: edu %.3f gov %.3f", n,
		share(DomainCom, classDay), share(DomainEdu, classDay), share(DomainNetOrg, classDay), share(DomainGov, classDay),
		share(DomainEdu, classStatic), share(DomainGov, classStatic))
	if share(DomainCom, classDay) <= 0.38 || share(DomainEdu, classDay) >= 0.10 || share(DomainGov, classDay) >= 0.12 {
		t.Error("daily changes by domain stray from the paper's")
	}
	if share(DomainEdu, classStatic) <= 0.48 || share(DomainGov, classStatic) <= 0.48 {
		t.Error("static pages in edu and gov stray from the paper's")
	}
	// Rates lie in their class's bounds: an hour to four months.
	for p := range 2000 {
		r := w.ChangeRate(p%3000, p%7)
		if r != 0 && (r > 24*(1+1e-9) || r < 1.0/120*(1-1e-9)) {
			t.Fatalf("rate %v per day out of bounds", r)
		}
	}
}

func intsToFloats(xs []int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// changingPage returns a page of w whose rate is in [lo, hi] per day.
func changingPage(t *testing.T, w *Web, lo, hi float64) (h, n int) {
	t.Helper()
	for h, host := range w.Hosts() {
		for n := range host.Pages {
			if r := w.ChangeRate(h, n); r >= lo && r <= hi {
				return h, n
			}
		}
	}
	t.Fatalf("no page changes %v to %v times a day", lo, hi)
	return 0, 0
}

// TestVersionProperties checks Version, LastChange, PageState and
// ChangeTime on many pages and times: deterministic (two Webs of one seed
// agree), monotone in t, LastChange no later than t and the time of the
// version's change, and ChangeTime the reference: the version at t is the
// number of change times up to t.
func TestVersionProperties(t *testing.T) {
	o := Options{Hosts: 200, Pages: 20, Seed: 4, Profile: Realistic, Changes: true}
	a, b := mustWeb(t, o), mustWeb(t, o)
	epoch := a.Options().Epoch
	r := newRNG(77)
	checked, changed := 0, 0
	for h, host := range a.Hosts() {
		for n := range host.Pages + host.Orphans {
			// Times: 40 sorted draws over 1,200 days, some far out.
			ts := make([]time.Time, 40)
			for i := range ts {
				ts[i] = epoch.Add(time.Duration(r.float() * float64(1200*day)))
			}
			ts[0] = epoch.Add(-time.Hour)
			ts[1] = epoch
			ts[2] = epoch.Add(100 * 365 * day)
			slices.SortFunc(ts, func(x, y time.Time) int { return x.Compare(y) })
			prevV, prevLast := 0, epoch
			for _, at := range ts {
				v, last := a.PageState(h, n, at)
				if bv, blast := b.PageState(h, n, at); bv != v || !blast.Equal(last) {
					t.Fatalf("(%d,%d) at %v: two webs of one seed disagree", h, n, at)
				}
				if v != a.Version(h, n, at) || !last.Equal(a.LastChange(h, n, at)) {
					t.Fatalf("(%d,%d): PageState differs from Version and LastChange", h, n)
				}
				if v < prevV || last.Before(prevLast) || (at.After(epoch) && last.After(at)) {
					t.Fatalf("(%d,%d) at %v: version %d last %v after version %d last %v", h, n, at, v, last, prevV, prevLast)
				}
				if v == 0 && !last.Equal(epoch) {
					t.Fatalf("(%d,%d): version 0 but last change %v", h, n, last)
				}
				if v > 0 {
					ct, ok := a.ChangeTime(h, n, v)
					if !ok || !ct.Equal(last) {
						t.Fatalf("(%d,%d) at %v: version %d last change %v, ChangeTime %v %v", h, n, at, v, last, ct, ok)
					}
				}
				prevV, prevLast = v, last
				checked++
			}
			if prevV > 0 {
				changed++
			}
			// The reference: every change time up to 300 days by
			// ChangeTime, counted at 20 times in that span.
			if h%2 == 0 {
				end := epoch.Add(300 * day)
				var times []time.Time
				for k := 1; k <= a.Version(h, n, end); k++ {
					ct, ok := a.ChangeTime(h, n, k)
					if !ok {
						t.Fatalf("(%d,%d): no change %d", h, n, k)
					}
					times = append(times, ct)
				}
				if !slices.IsSortedFunc(times, func(x, y time.Time) int { return x.Compare(y) }) {
					t.Fatalf("(%d,%d): change times out of order", h, n)
				}
				if _, ok := a.ChangeTime(h, n, len(times)+1); ok && a.Version(h, n, end) != len(times) {
					t.Fatalf("(%d,%d): change %d is not after %v", h, n, len(times)+1, end)
				}
				for range 20 {
					at := epoch.Add(time.Duration(r.float()*float64(300*day+time.Hour)) - time.Hour).Truncate(time.Second)
					if len(times) > 0 && r.chance(0.3) { // right at a change, and just before
						at = times[r.intn(len(times))].Add(-time.Duration(r.intn(2)) * time.Second)
					}
					want := 0
					for _, ct := range times {
						if !ct.After(at) {
							want++
						}
					}
					if got := a.Version(h, n, at); got != want {
						t.Fatalf("(%d,%d) at %v: version %d, %d changes up to then", h, n, at, got, want)
					}
				}
			}
		}
	}
	if changed < checked/40/3 {
		t.Errorf("only %d of %d pages changed", changed, checked/40)
	}
}

// TestVersionPoisson checks that the versions are a Poisson process of the
// page's rate: over many pages, the mean number of changes in 200 days is
// rate × 200, and for a fast page the daily counts have variance ≈ mean.
func TestVersionPoisson(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 1000, Pages: 20, Seed: 2, Profile: Realistic, Changes: true})
	epoch := w.Options().Epoch
	at := epoch.Add(200 * day)
	var got, want float64
	for h, host := range w.Hosts() {
		for n := range host.Pages {
			want += w.ChangeRate(h, n) * 200
			got += float64(w.Version(h, n, at))
		}
	}
	if math.Abs(got/want-1) > 0.02 {
		t.Errorf("%.0f changes in 200 days, rates say %.0f", got, want)
	}
	for _, band := range [][2]float64{{0.5, 1}, {3, 24}} {
		h, n := changingPage(t, w, band[0], band[1])
		lam := w.ChangeRate(h, n)
		const days = 3000
		var s, s2 float64
		prev := 0
		for d := 1; d <= days; d++ {
			v := w.Version(h, n, epoch.Add(time.Duration(d)*day))
			k := float64(v - prev)
			s += k
			s2 += k * k
			prev = v
		}
		mean := s / days
		variance := s2/days - mean*mean
		if math.Abs(mean/lam-1) > 0.1 || math.Abs(variance/mean-1) > 0.2 {
			t.Errorf("rate %.3f/day: daily mean %.3f, variance %.3f (Poisson: both the rate)", lam, mean, variance)
		}
	}
}

// TestChangeResponses checks what a change does to a page, just before and
// just after each of its first changes: the body, the ETag, Last-Modified
// and the links change exactly then; the new page of a version answers 200
// from that version on and 404 before; the sitemap's lastmod follows.
func TestChangeResponses(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 60, Pages: 20, Seed: 5, Profile: Realistic, Changes: true})
	epoch := w.Options().Epoch
	h, n := changingPage(t, w, 0.2, 2)
	origin := w.Origin(h)
	path := pagePath(n)
	get := func(p string, at time.Time) Response {
		return w.RespondAt(nil, nil, h, p, "", at)
	}
	static := w.Respond(nil, nil, h, path, "")
	if static.ETag != w.ETag(h, n, 0) || !static.LastModified.Equal(epoch) {
		t.Fatalf("at the epoch: ETag %s Last-Modified %v", static.ETag, static.LastModified)
	}
	linksAt := func(r Response) []string {
		ls, _ := extract(t, origin+path, r.Body)
		return ls
	}
	staticLinks := linksAt(static)
	prev := static
	for v := 1; v <= 4; v++ {
		ct, ok := w.ChangeTime(h, n, v)
		if !ok {
			t.Fatalf("no change %d", v)
		}
		before, after := get(path, ct.Add(-time.Second)), get(path, ct)
		if w.Version(h, n, ct) != v {
			continue // two changes in one second: nothing to tell apart
		}
		if !bytes.Equal(before.Body, prev.Body) || before.ETag != prev.ETag || !before.LastModified.Equal(prev.LastModified) {
			t.Fatalf("version %d: the page changed before %v", v-1, ct)
		}
		if bytes.Equal(after.Body, before.Body) || after.ETag == before.ETag || !after.LastModified.Equal(ct) {
			t.Fatalf("version %d: body, ETag or Last-Modified (%v) did not change at %v", v, after.LastModified, ct)
		}
		if after.ETag != w.ETag(h, n, v) || !strings.HasPrefix(after.ETag, `"`) || !strings.HasSuffix(after.ETag, `"`) {
			t.Fatalf("version %d: ETag %s", v, after.ETag)
		}
		// Links: the static page's, plus the version's news page.
		news := origin + NewsPath(n, v)
		got := linksAt(after)
		if i := slices.Index(got, news); i < 0 || !slices.Equal(slices.Delete(slices.Clone(got), i, i+1), staticLinks) {
			t.Fatalf("version %d: links %q, want the static ones and %s", v, got, news)
		}
		// The news page: 404 before its version, 200 from it on.
		if r := get(NewsPath(n, v), ct.Add(-time.Second)); r.Status != 404 {
			t.Fatalf("%s before version %d: %d", NewsPath(n, v), v, r.Status)
		}
		for _, at := range []time.Time{ct, ct.Add(400 * day)} {
			r := get(NewsPath(n, v), at)
			if r.Status != 200 || r.Kind != KindNews || r.ETag == "" || !r.LastModified.Equal(ct) {
				t.Fatalf("%s at %v: %d %s %s %v", NewsPath(n, v), at, r.Status, r.Kind, r.ETag, r.LastModified)
			}
			if ls, _ := extract(t, origin+NewsPath(n, v), r.Body); !slices.Equal(ls, []string{origin + path}) {
				t.Fatalf("%s links %q, want only %s", NewsPath(n, v), ls, origin+path)
			}
		}
		prev = after
	}
	for _, p := range []string{NewsPath(n, 0), "/news/" + fmt.Sprint(n) + "/01", "/news/x/1", "/news/1", NewsPath(w.Hosts()[h].Pages+w.Hosts()[h].Orphans, 1)} {
		if r := get(p, epoch.Add(5000*day)); r.Status != 404 {
			t.Errorf("%s: %d, want 404", p, r.Status)
		}
	}
	// Variants of a page carry its validators; private pages, leaves and
	// robots.txt none.
	at := epoch.Add(30 * day)
	page := get(path, at)
	if r := w.RespondAt(nil, nil, h, path, "view=print", at); r.ETag != page.ETag || !bytes.Equal(r.Body, page.Body) {
		t.Errorf("print variant: ETag %s, page %s", r.ETag, page.ETag)
	}
	for _, p := range []string{"/robots.txt", "/private/1.html", "/files/1.pdf", "/missing/1"} {
		if r := get(p, at); r.ETag != "" || !r.LastModified.IsZero() {
			t.Errorf("%s has validators %s %v", p, r.ETag, r.LastModified)
		}
	}
}

// TestSitemapLastmod checks that a changing web's sitemaps give each page's
// last change, and a static web's none.
func TestSitemapLastmod(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 80, Pages: 20, Seed: 3, Profile: Realistic, Changes: true})
	at := w.Options().Epoch.Add(45*day + 3*time.Hour)
	h := slices.IndexFunc(w.Hosts(), func(h Host) bool { return h.Sitemap })
	if h < 0 {
		t.Fatal("no host with a sitemap")
	}
	body := string(w.RespondAt(nil, nil, h, "/sitemap.xml", "", at).Body)
	for _, n := range w.sitemapPages(h) {
		want := fmt.Sprintf("<loc>%s%s</loc><lastmod>%s</lastmod>", w.Origin(h), pagePath(n), w.LastChange(h, n, at).Format(time.RFC3339))
		if !strings.Contains(body, want) {
			t.Fatalf("sitemap lacks %s:\n%.500s", want, body)
		}
	}
	static := mustWeb(t, Options{Hosts: 80, Pages: 20, Seed: 3, Profile: Realistic})
	if b := static.RespondAt(nil, nil, h, "/sitemap.xml", "", at).Body; bytes.Contains(b, []byte("lastmod")) {
		t.Error("a static web's sitemap has lastmod")
	}
}

// TestChangesOffUnchanged checks that without Options.Changes time does not
// matter and nothing has validators, and that a changing web at its epoch
// serves the static web (sitemaps aside) with the same truth, change rates
// aside.
func TestChangesOffUnchanged(t *testing.T) {
	for _, p := range []Profile{Clean, Realistic, Hostile} {
		t.Run(p.String(), func(t *testing.T) {
			o := Options{Hosts: 30, Pages: 12, Seed: 3, IPs: 4, Port: 80, Profile: p}
			off := mustWeb(t, o)
			o.Changes = true
			on := mustWeb(t, o)
			later := off.Options().Epoch.Add(300 * day)
			var rates int
			onRecs := allRecords(t, on)
			for i, r := range allRecords(t, off) {
				u := strings.TrimPrefix(r.URL, "http://")
				host, pq, _ := strings.Cut(u, "/")
				path, query, _ := strings.Cut("/"+pq, "?")
				h, _ := off.Lookup(host)
				a := off.Respond(nil, nil, h, path, query)
				b := off.RespondAt(nil, nil, h, path, query, later)
				c := on.Respond(nil, nil, h, path, query)
				if a.Status != b.Status || !bytes.Equal(a.Body, b.Body) || a.ETag != "" || b.ETag != "" || !b.LastModified.IsZero() {
					t.Fatalf("%s: a static web changed with time", r.URL)
				}
				if r.Kind != "sitemap" && (a.Status != c.Status || !bytes.Equal(a.Body, c.Body) || a.ContentType != c.ContentType) {
					t.Fatalf("%s: a changing web at its epoch differs from the static one", r.URL)
				}
				or := onRecs[i]
				if or.ChangeRate > 0 {
					rates++
				}
				or.ChangeRate = 0
				ja, _ := json.Marshal(r)
				jb, _ := json.Marshal(or)
				if !bytes.Equal(ja, jb) {
					t.Fatalf("truth differs beyond change_rate:\n%s\n%s", ja, jb)
				}
				if r.ChangeRate != 0 {
					t.Fatalf("%s: change rate %v in a static web", r.URL, r.ChangeRate)
				}
			}
			if rates == 0 {
				t.Error("no record of the changing web has a change rate")
			}
			if bytes.Contains(truthBytes(t, off), []byte("change_rate")) {
				t.Error("a static web's truth names change_rate")
			}
		})
	}
}

// BenchmarkVersion measures PageState (Version and LastChange at once)
// 1,000 simulated days after the epoch, over pages of every rate.
func BenchmarkVersion(b *testing.B) { benchPageState(b, 0) }

// BenchmarkVersionFast is BenchmarkVersion for pages changing more than
// once a day, the costliest walk.
func BenchmarkVersionFast(b *testing.B) { benchPageState(b, 1) }

// benchPageState measures PageState 1,000 simulated days after the epoch
// over the pages changing more often than minRate times a day.
func benchPageState(b *testing.B, minRate float64) {
	w := mustWeb(b, Options{Hosts: 1000, Pages: 20, Seed: 1, Profile: Realistic, Changes: true})
	at := w.Options().Epoch.Add(1000*day + 5*time.Hour)
	type page struct{ h, n int }
	var pages []page
	for h, host := range w.Hosts() {
		for n := range host.Pages {
			if w.ChangeRate(h, n) > minRate {
				pages = append(pages, page{h, n})
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p := pages[i%len(pages)]
		w.PageState(p.h, p.n, at)
	}
}

// FuzzRespondAt checks RespondAt on a changing web at any time: statuses
// are sane, validators come only with a 200 and a last change no later
// than the time asked, and news pages name versions that exist by then.
func FuzzRespondAt(f *testing.F) {
	w := mustWeb(f, Options{Hosts: 20, Pages: 10, Seed: 1, Profile: Hostile, Changes: true})
	for _, s := range []string{"/", "/p/1.html", "/news/0/1", "/news/3/12", "/news/1/0", "/news/01/1", "/news/2/", "/sitemap.xml", "/index.html"} {
		f.Add(12, s, "", int64(40*day))
	}
	f.Fuzz(func(t *testing.T, h int, path, query string, since int64) {
		if h < 0 || h >= len(w.Hosts()) || !strings.HasPrefix(path, "/") {
			return
		}
		at := w.Options().Epoch.Add(time.Duration(since))
		resp := w.RespondAt(nil, nil, h, path, query, at)
		if resp.Special == SpecialNone && (resp.Status < 200 || resp.Status > 599) {
			t.Fatalf("%s: status %d", path, resp.Status)
		}
		if resp.ETag != "" && (resp.Status != 200 || resp.LastModified.IsZero() || (at.After(w.Options().Epoch) && resp.LastModified.After(at))) {
			t.Fatalf("%s at %v: %d with ETag %s, Last-Modified %v", path, at, resp.Status, resp.ETag, resp.LastModified)
		}
		if resp.Kind == KindNews {
			var n, v int
			if _, err := fmt.Sscanf(path, "/news/%d/%d", &n, &v); err != nil || v < 1 || w.Version(h, n, at) < v {
				t.Fatalf("%s at %v: a news page of a version not yet made", path, at)
			}
		}
	})
}

// BenchmarkRespondAt measures a whole page answer (schedule, body,
// validators) 1,000 simulated days after the epoch, against Respond of the
// same pages in a static web.
func BenchmarkRespondAt(b *testing.B) {
	for _, changes := range []bool{false, true} {
		b.Run(fmt.Sprintf("changes=%v", changes), func(b *testing.B) {
			w := mustWeb(b, Options{Hosts: 1000, Pages: 20, Seed: 1, Profile: Realistic, Changes: changes})
			at := w.Options().Epoch.Add(1000*day + 5*time.Hour)
			var (
				buf     []byte
				scratch []Link
			)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				h := i % 1000
				resp := w.RespondAt(buf[:0], scratch, h, pagePath(i%w.Hosts()[h].Pages), "", at)
				buf, scratch = resp.Body[:0], resp.Scratch
			}
		})
	}
}

func TestPageNumber(t *testing.T) {
	w := mustWeb(t, Options{Hosts: 50, Pages: 10, Seed: 3, Profile: Realistic, Changes: true})
	h := slices.IndexFunc(w.Hosts(), func(h Host) bool { return h.Orphans > 0 && h.Pages > 3 })
	host := w.Hosts()[h]
	for _, c := range []struct {
		path string
		n    int
		ok   bool
	}{
		{"/", 0, true}, {"/index.html", 0, true}, {"/p/1.html", 1, true}, {pagePath(host.Pages), host.Pages, true},
		{pagePath(host.Pages + host.Orphans), 0, false}, {"/p/0.html", 0, false}, {"/p/01.html", 0, false},
		{"/p/-1.html", 0, false}, {"/news/1/1", 0, false}, {"/private/1.html", 0, false}, {"/p/1.htm", 0, false},
	} {
		if n, ok := w.PageNumber(h, c.path); n != c.n || ok != c.ok {
			t.Errorf("PageNumber(%s) = %d %v, want %d %v", c.path, n, ok, c.n, c.ok)
		}
		if c.ok {
			if r := w.Respond(nil, nil, h, c.path, ""); r.Status != 200 || r.ETag != w.ETag(h, c.n, 0) {
				t.Errorf("%s: %d %s", c.path, r.Status, r.ETag)
			}
		}
	}
}

package websim

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/websim/synth"
)

const day = 24 * time.Hour

// fakeWall is a wall clock that tests set.
type fakeWall struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeWall) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeWall) set(t time.Time) {
	f.mu.Lock()
	f.t = t
	f.mu.Unlock()
}

// changingServer starts a changing web on a fake wall clock at time scale
// 1, and returns a func that sets its simulated clock to sim.
func changingServer(t *testing.T) (s *Server, setSim func(sim time.Time)) {
	t.Helper()
	wall := &fakeWall{t: time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC)}
	s = startWeb(t, Options{Web: synth.Options{Hosts: 40, Pages: 15, Seed: 6, IPs: 3, Profile: synth.Realistic, Changes: true},
		Now: wall.now})
	clk, ok := s.Clock()
	if !ok || clk.Scale != 1 || !clk.Start.Equal(wall.now()) {
		t.Fatalf("clock %+v %v", clk, ok)
	}
	return s, func(sim time.Time) { wall.set(clk.Wall(sim)) }
}

// pageWithRate returns a page of web whose rate is in [lo, hi] per day.
func pageWithRate(t *testing.T, web *synth.Web, lo, hi float64) (h, n int) {
	t.Helper()
	for h, host := range web.Hosts() {
		for n := range host.Pages {
			if r := web.ChangeRate(h, n); r >= lo && r <= hi {
				return h, n
			}
		}
	}
	t.Fatal("no page with such a rate")
	return 0, 0
}

func pathOf(n int) string {
	if n == 0 {
		return "/"
	}
	return "/p/" + strconv.Itoa(n) + ".html"
}

// do sends method url with the given header lines and returns the
// response and its body.
func do(t *testing.T, c *http.Client, method, url string, hdr map[string][]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestChangingPageOverHTTP follows one page over loopback through its first
// changes: just before a change it answers its old body and validators,
// from the change on the new ones and a link to a news page that answers
// 404 before and 200 after; conditional GETs with the old validators get
// 304 before the change and the new body after.
func TestChangingPageOverHTTP(t *testing.T) {
	s, setSim := changingServer(t)
	web := s.Web()
	c := client(s)
	h, n := pageWithRate(t, web, 0.3, 3)
	url := web.Origin(h) + pathOf(n)
	epoch := web.Options().Epoch
	httpDate := func(tm time.Time) string { return tm.UTC().Format(http.TimeFormat) }

	setSim(epoch)
	_, body0 := get(t, c, url)
	oldETag, oldLM := web.ETag(h, n, 0), httpDate(epoch)
	for v := 1; v <= 3; v++ {
		ct, ok := web.ChangeTime(h, n, v)
		if !ok {
			t.Fatalf("no change %d", v)
		}
		news := web.Origin(h) + synth.NewsPath(n, v)
		// Just before the change.
		setSim(ct.Add(-time.Second))
		resp, body := get(t, c, url)
		if resp.StatusCode != 200 || resp.Header.Get("ETag") != oldETag || resp.Header.Get("Last-Modified") != oldLM || !bytes.Equal(body, body0) {
			t.Fatalf("version %d, a second early: %d ETag %s Last-Modified %s", v-1, resp.StatusCode, resp.Header.Get("ETag"), resp.Header.Get("Last-Modified"))
		}
		if got, want := resp.Header.Get("Date"), httpDate(ct.Add(-time.Second)); got != want {
			t.Fatalf("version %d, a second early: Date %q, want the simulated %q", v-1, got, want)
		}
		for _, hdr := range []map[string][]string{{"If-None-Match": {oldETag}}, {"If-Modified-Since": {oldLM}}} {
			resp, body := do(t, c, "GET", url, hdr)
			if resp.StatusCode != 304 || len(body) != 0 || resp.Header.Get("ETag") != oldETag || resp.Header.Get("Last-Modified") != oldLM ||
				resp.Header.Get("Date") != httpDate(ct.Add(-time.Second)) ||
				resp.Header.Get("Content-Type") != "" || resp.Header.Get("Content-Length") != "" {
				t.Fatalf("version %d, %v: %d, %d bytes, headers %v", v-1, hdr, resp.StatusCode, len(body), resp.Header)
			}
		}
		if resp, _ := get(t, c, news); resp.StatusCode != 404 {
			t.Fatalf("%s before its version: %d", news, resp.StatusCode)
		}
		// At the change.
		setSim(ct)
		newETag, newLM := web.ETag(h, n, v), httpDate(ct)
		var newBody []byte
		for _, hdr := range []map[string][]string{nil, {"If-None-Match": {oldETag}}, {"If-Modified-Since": {oldLM}}} {
			resp, body := do(t, c, "GET", url, hdr)
			if resp.StatusCode != 200 || bytes.Equal(body, body0) || resp.Header.Get("ETag") != newETag || resp.Header.Get("Last-Modified") != newLM {
				t.Fatalf("version %d, %v: %d ETag %s Last-Modified %s", v, hdr, resp.StatusCode, resp.Header.Get("ETag"), resp.Header.Get("Last-Modified"))
			}
			if newBody != nil && !bytes.Equal(body, newBody) {
				t.Fatalf("version %d: two bodies", v)
			}
			if !bytes.Contains(body, []byte(`href="`+synth.NewsPath(n, v)+`"`)) {
				t.Fatalf("version %d does not link %s", v, synth.NewsPath(n, v))
			}
			newBody = body
		}
		body0 = newBody
		if resp, body := get(t, c, news); resp.StatusCode != 200 || resp.Header.Get("ETag") == "" || resp.Header.Get("Last-Modified") != newLM ||
			!bytes.Contains(body, []byte(`href="`+pathOf(n)+`"`)) {
			t.Fatalf("%s at its version: %d %v", news, resp.StatusCode, resp.Header)
		}
		oldETag, oldLM = newETag, newLM
	}
	snap := s.Stats().Snapshot()
	if snap.ConditionalRequests != 12 || snap.NotModified != 6 {
		t.Errorf("%d conditional requests, %d not modified; want 12 and 6", snap.ConditionalRequests, snap.NotModified)
	}
	last, _ := web.ChangeTime(h, n, 3)
	if snap.SimTime != last.Format(time.RFC3339Nano) {
		t.Errorf("sim time %s, want %s", snap.SimTime, last.Format(time.RFC3339Nano))
	}
	if got := snap.Hosts[web.Hosts()[h].Name].Statuses[304]; got != 6 {
		t.Errorf("host statuses count %d 304s, want 6", got)
	}
}

// TestConditionalRequests checks the preconditions websim evaluates, on a
// page whose validators are known: If-None-Match (lists, weak tags, "*"),
// If-Modified-Since, and the precedence of the first.
func TestConditionalRequests(t *testing.T) {
	s, setSim := changingServer(t)
	web := s.Web()
	c := client(s)
	h, n := pageWithRate(t, web, 0.3, 3)
	url := web.Origin(h) + pathOf(n)
	ct, _ := web.ChangeTime(h, n, 2)
	setSim(ct.Add(time.Hour))
	v := web.Version(h, n, ct.Add(time.Hour))
	etag := web.ETag(h, n, v)
	lm := ct.UTC()
	date := func(tm time.Time) string { return tm.UTC().Format(http.TimeFormat) }
	other := web.ETag(h, n, v-1)
	for _, tc := range []struct {
		name   string
		method string
		hdr    map[string][]string
		want   int
	}{
		{"none", "GET", nil, 200},
		{"etag", "GET", map[string][]string{"If-None-Match": {etag}}, 304},
		{"weak etag", "GET", map[string][]string{"If-None-Match": {"W/" + etag}}, 304},
		{"list", "GET", map[string][]string{"If-None-Match": {`"a", ` + other + `,` + etag}}, 304},
		{"two field lines", "GET", map[string][]string{"If-None-Match": {`"a"`, etag}}, 304},
		{"star", "GET", map[string][]string{"If-None-Match": {"*"}}, 304},
		{"older etag", "GET", map[string][]string{"If-None-Match": {other}}, 200},
		{"unquoted etag", "GET", map[string][]string{"If-None-Match": {strings.Trim(etag, `"`)}}, 200},
		{"malformed before the etag", "GET", map[string][]string{"If-None-Match": {`"a" junk, ` + etag}}, 200},
		{"empty if-none-match", "GET", map[string][]string{"If-None-Match": {""}, "If-Modified-Since": {date(lm)}}, 304},
		{"modified since: same second", "GET", map[string][]string{"If-Modified-Since": {date(lm)}}, 304},
		{"modified since: later", "GET", map[string][]string{"If-Modified-Since": {date(lm.Add(day))}}, 304},
		{"modified since: a second early", "GET", map[string][]string{"If-Modified-Since": {date(lm.Add(-time.Second))}}, 200},
		{"modified since: RFC 850 date", "GET", map[string][]string{"If-Modified-Since": {lm.Format(time.RFC850)}}, 304},
		{"modified since: bad date", "GET", map[string][]string{"If-Modified-Since": {"yesterday"}}, 200},
		{"modified since: two lines", "GET", map[string][]string{"If-Modified-Since": {date(lm), date(lm)}}, 200},
		{"etag wins over an old date", "GET", map[string][]string{"If-None-Match": {etag}, "If-Modified-Since": {date(lm.Add(-day))}}, 304},
		{"a stale etag beats a fresh date", "GET", map[string][]string{"If-None-Match": {other}, "If-Modified-Since": {date(lm.Add(day))}}, 200},
		{"HEAD is not conditional", "HEAD", map[string][]string{"If-None-Match": {etag}}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, c, tc.method, url, tc.hdr)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if resp.Header.Get("ETag") != etag || resp.Header.Get("Last-Modified") != date(lm) {
				t.Fatalf("validators %q %q, want %q %q", resp.Header.Get("ETag"), resp.Header.Get("Last-Modified"), etag, date(lm))
			}
			if (tc.want == 304 || tc.method == "HEAD") != (len(body) == 0) {
				t.Fatalf("%d bytes of body", len(body))
			}
		})
	}
	// Other answers have no validators and ignore preconditions.
	for _, p := range []string{"/robots.txt", "/private/1.html", "/missing/1", "/news/0/999999"} {
		resp, _ := do(t, c, "GET", web.Origin(h)+p, map[string][]string{"If-None-Match": {"*"}})
		if resp.StatusCode == 304 || resp.Header.Get("ETag") != "" || resp.Header.Get("Last-Modified") != "" {
			t.Errorf("%s: %d with ETag %q", p, resp.StatusCode, resp.Header.Get("ETag"))
		}
	}
}

// TestStaticWebHasNoValidators checks that without changes nothing carries
// ETag or Last-Modified, preconditions are ignored, and the statistics
// have none of the new fields.
func TestStaticWebHasNoValidators(t *testing.T) {
	s := startWeb(t, Options{Web: synth.Options{Hosts: 10, Pages: 5, Seed: 6, IPs: 2, Profile: synth.Realistic}, TimeScale: 86400})
	c := client(s)
	for _, p := range []string{"/", "/p/1.html", "/sitemap.xml"} {
		resp, body := do(t, c, "GET", s.Web().Origin(0)+p, map[string][]string{"If-None-Match": {"*"}, "If-Modified-Since": {time.Now().Add(day).Format(http.TimeFormat)}})
		if resp.StatusCode == 304 || resp.Header.Get("ETag") != "" || resp.Header.Get("Last-Modified") != "" || bytes.Contains(body, []byte("lastmod")) {
			t.Errorf("%s: %d, ETag %q, Last-Modified %q", p, resp.StatusCode, resp.Header.Get("ETag"), resp.Header.Get("Last-Modified"))
		}
	}
	b, _ := json.Marshal(s.Stats().Snapshot())
	for _, k := range []string{"conditional_requests", "not_modified", "sim_time"} {
		if bytes.Contains(b, []byte(k)) {
			t.Errorf("stats of a static web have %s: %s", k, b)
		}
	}
}

// TestClock checks the simulated clock's arithmetic and that a server's
// runs at its time scale on the real wall clock.
func TestClock(t *testing.T) {
	epoch := synth.DefaultEpoch
	start := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	c := Clock{Epoch: epoch, Start: start, Scale: 86400}
	for _, tc := range []struct {
		wall time.Time
		want time.Time
	}{
		{start, epoch},
		{start.Add(-time.Hour), epoch},
		{start.Add(time.Second), epoch.Add(day)},
		{start.Add(1500 * time.Millisecond), epoch.Add(36 * time.Hour)},
		{start.Add(1000 * time.Second), epoch.Add(1000 * day)},
		{start.Add(1e6 * time.Second), epoch.Add(math.MaxInt64)},
	} {
		if got := c.At(tc.wall); !got.Equal(tc.want) {
			t.Errorf("At(start%+v) = %v, want %v", tc.wall.Sub(start), got, tc.want)
		}
	}
	if got := c.Wall(epoch.Add(10 * day)); !got.Equal(start.Add(10 * time.Second)) {
		t.Errorf("Wall(epoch+10d) = %v", got)
	}
	if got := c.Wall(epoch.Add(-day)); !got.Equal(start) {
		t.Errorf("Wall before the epoch = %v", got)
	}

	s := startWeb(t, Options{Web: synth.Options{Hosts: 5, Pages: 3, Seed: 1, IPs: 1, Changes: true,
		Epoch: time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)}, TimeScale: 3600})
	clk, _ := s.Clock()
	time.Sleep(50 * time.Millisecond)
	before := time.Now()
	sim := s.SimNow()
	after := time.Now()
	if sim.Before(clk.At(before)) || sim.After(clk.At(after)) || sim.Sub(clk.Epoch) < 50*time.Millisecond*3600 {
		t.Errorf("sim time %v after 50ms at 3600×, want in [%v, %v]", sim, clk.At(before), clk.At(after))
	}
}

func TestTimeScaleValidate(t *testing.T) {
	for _, ts := range []float64{-1, math.NaN(), math.Inf(1), MaxTimeScale * 2} {
		err := Options{Web: synth.Options{Hosts: 2}, TimeScale: ts}.Validate()
		if err == nil || !strings.Contains(err.Error(), "time scale") {
			t.Errorf("time scale %v: %v", ts, err)
		}
	}
	for _, ts := range []float64{0, 1e-3, 1, 86400, MaxTimeScale} {
		if err := (Options{Web: synth.Options{Hosts: 2}, TimeScale: ts}).Validate(); err != nil {
			t.Errorf("time scale %v: %v", ts, err)
		}
	}
}

// etagMember is one member of an If-None-Match list, for the reference.
var (
	etagMember = `(?:\*|(?:W/)?"[\x21\x23-\x7e]*")`
	etagListRE = regexp.MustCompile(`^[ \t]*(?:` + etagMember + `)?(?:[ \t]*,[ \t]*(?:` + etagMember + `)?)*[ \t]*$`)
	etagTagRE  = regexp.MustCompile(`\*|"[\x21\x23-\x7e]*"`)
)

// FuzzETagList checks etagListMatches against a reference: for a
// well-formed ASCII list, it matches iff the list has "*" or the tag's
// opaque tag; it never matches a list that does not contain the tag or *.
func FuzzETagList(f *testing.F) {
	for _, s := range []string{`"abc"`, `W/"abc"`, `"x", "abc"`, `*`, ` , ,"abc" `, `"a,b", "c"`, `"abc`, `abc`, `"a" "abc"`, "\"\x80\"", `W/`, `,*,`} {
		f.Add(s, `"abc"`)
	}
	f.Fuzz(func(t *testing.T, list, tag string) {
		opaque, rest, ok := scanETag(tag)
		if !ok || rest != "" || strings.HasPrefix(tag, "W/") {
			return
		}
		got := etagListMatches(list, tag)
		if got && !strings.Contains(list, "*") && !strings.Contains(list, opaque) {
			t.Fatalf("%q matches %q, which it does not contain", list, tag)
		}
		for i := 0; i < len(list); i++ {
			if list[i] >= 0x80 {
				return
			}
		}
		if !etagListRE.MatchString(list) {
			return
		}
		want := false
		for _, m := range etagTagRE.FindAllString(list, -1) {
			want = want || m == "*" || m == opaque
		}
		if got != want {
			t.Fatalf("etagListMatches(%q, %q) = %v, want %v", list, tag, got, want)
		}
	})
}

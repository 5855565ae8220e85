package urlnorm

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is the fixed time of the trap tests: the default window is
// 2021-06-15 to 2027-06-15.
var clock = time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)

func fixed(t time.Time) func() time.Time { return func() time.Time { return t } }

// checkAll checks every URL of cases against s with Check, CheckString,
// Allow and AllowString.
func checkAll(t *testing.T, s *Scope, cases map[string]Verdict) {
	t.Helper()
	for u, want := range cases {
		if got := s.Check([]byte(u)); got != want {
			t.Errorf("Check(%q) = %v, want %v", u, got, want)
		}
		if got := s.CheckString(u); got != want {
			t.Errorf("CheckString(%q) = %v, want %v", u, got, want)
		}
		if got := s.Allow([]byte(u)); got != (want == Allowed) {
			t.Errorf("Allow(%q) = %v, want %v", u, got, want == Allowed)
		}
	}
}

func TestRepetitionRule(t *testing.T) {
	const h = "http://e.com"
	for _, c := range []struct {
		name  string
		scope *Scope
		cases map[string]Verdict
	}{
		{"default: two repeats", &Scope{Now: fixed(clock)}, map[string]Verdict{
			h + "/a/a/":                                  Allowed,
			h + "/a/a":                                   Allowed,
			h + "/a/a/a/":                                TrapRepetition,
			h + "/a/a/a":                                 TrapRepetition, // the file name counts
			h + "/a/a/a.html":                            Allowed,
			h + "/x/a/b/a/b/":                            Allowed,
			h + "/x/a/b/a/b/a/b/":                        TrapRepetition,
			h + "/x/a/b/a/b/a/b":                         TrapRepetition,
			h + "/x/a/b/a/b/a/":                          TrapRepetition, // no third a/b in a row, but a thrice
			h + "/a/b/c/a/b/c":                           Allowed,        // the run a/b/c twice
			h + "/a/b/c/a/b/c/a/b/c/":                    TrapRepetition,
			h + "/a/x/a/y/a/":                            TrapRepetition, // a named segment thrice
			h + "/a/x/a/y/":                              Allowed,        // twice
			h + "/1/x/1/y/1/":                            Allowed,        // numbers may recur
			h + "/users/1/posts/1/comments/1":            Allowed,
			h + "/trap/a/b/a/b/a/":                       TrapRepetition, // a page of links a/ and b/ at every path
			h + "/a/a/b/a/a/b/":                          TrapRepetition, // a four times
			h + "/a/a/b/a/a/b/a/a/b/":                    TrapRepetition,
			h + "/x/y/p/q/p/q/p/q/z/w.html":              TrapRepetition, // in the middle
			h + "/a/b/b/b/c":                             TrapRepetition,
			h + "/trap" + strings.Repeat("/a", 11) + "/": TrapRepetition,
			h + "/a////b":                                TrapRepetition, // three empty segments
			h + "/a///b":                                 Allowed,
			h + "/A/a/A/":                                Allowed, // paths are case-sensitive
			h + "/a/a/?x=/a/a/a/":                        Allowed, // the query is not the path
			h + "/":                                      Allowed,
			h:                                            Allowed,
			h + "/a/a/a.png":                             OutOfScope, // the extension is checked first
		}},
		{"one repeat", &Scope{MaxRepeats: 1, Now: fixed(clock)}, map[string]Verdict{
			h + "/a/":      Allowed,
			h + "/a/a/":    TrapRepetition,
			h + "/a/b/a/b": TrapRepetition,
			h + "/a/b/a/":  TrapRepetition, // a twice, one allowed
		}},
		{"three repeats", &Scope{MaxRepeats: 3, Now: fixed(clock)}, map[string]Verdict{
			h + "/a/a/a/":          Allowed,
			h + "/a/a/a/a/":        TrapRepetition,
			h + "/a/b/a/b/a/b/":    Allowed,
			h + "/a/b/a/b/a/b/a/b": TrapRepetition,
		}},
		{"off", &Scope{MaxRepeats: -1, Now: fixed(clock)}, map[string]Verdict{
			h + strings.Repeat("/a", 64): Allowed,
			h + strings.Repeat("/a", 65): OutOfScope, // the segment limit still holds
		}},
		{"above the stack's segments", &Scope{MaxPathSegments: 200, Now: fixed(clock)}, map[string]Verdict{
			h + distinct(150) + "/a/a/":   Allowed,
			h + distinct(150) + "/a/a/a/": TrapRepetition,
		}},
	} {
		t.Run(c.name, func(t *testing.T) { checkAll(t, c.scope, c.cases) })
	}
}

// distinct returns a path of n distinct segments.
func distinct(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("/s" + strconv.Itoa(i))
	}
	return b.String()
}

func TestCalendarRule(t *testing.T) {
	const h = "http://e.com"
	for _, c := range []struct {
		name  string
		scope *Scope
		cases map[string]Verdict
	}{
		{"default window", &Scope{Now: fixed(clock)}, map[string]Verdict{
			// path dates, months: 2021-06 to 2027-06 pass
			h + "/cal/2026/11":             Allowed,
			h + "/cal/2021/6":              Allowed,
			h + "/cal/2021/5":              TrapCalendar,
			h + "/cal/2027/06":             Allowed,
			h + "/cal/2027/7":              TrapCalendar,
			h + "/cal/9999/12":             TrapCalendar,
			h + "/cal/1000/1":              TrapCalendar,
			h + "/cal/2030/1/":             TrapCalendar,
			h + "/cal/2010/5/index.html":   TrapCalendar,
			h + "/cal/2010/5/Default.aspx": TrapCalendar,
			h + "/cal/2010/05.html":        TrapCalendar,
			h + "/2010/05":                 TrapCalendar, // at the root too
			// path dates, days: 2021-06-15 to 2027-06-15 pass
			h + "/events/2027/06/15/": Allowed,
			h + "/events/2027/06/16/": TrapCalendar,
			h + "/events/2021/6/15":   Allowed,
			h + "/events/2021/6/14":   TrapCalendar,
			h + "/events/2026/11/30/": Allowed,
			h + "/events/2030/11/30/": TrapCalendar,
			// one segment
			h + "/archive/2019-05/":   TrapCalendar,
			h + "/archive/2024-05/":   Allowed,
			h + "/archive/2029-05-01": TrapCalendar,
			h + "/archive/2026-5-1/":  Allowed,
			// not calendar-like: a slug after the date, a year alone, no date
			h + "/2010/05/my-story.html": Allowed,
			h + "/2010/05/14/my-story/":  Allowed,
			h + "/2010/05/page/2/":       Allowed,
			h + "/1999/":                 Allowed,
			h + "/issues/1999":           Allowed,
			h + "/cal/2010/13":           Allowed, // no month 13
			h + "/cal/2010/0":            Allowed,
			h + "/cal/2010/1/32":         Allowed, // 1/32 is no day; 2010 is not followed by a month alone
			h + "/cal/0999/1":            Allowed, // years have four digits from 1000
			h + "/cal/20100/1":           Allowed,
			h + "/cal/2010/001":          Allowed,
			h + "/archive/2010-05-x/":    Allowed,
			h + "/files/2010/report.pdf": Allowed,
			// the price of the rule: an id and a page number that read as a date
			h + "/forum/thread/2045/3": TrapCalendar,
			// query dates
			h + "/?date=2026-11-30":                  Allowed,
			h + "/?date=2030-11-30":                  TrapCalendar,
			h + "/cal?month=2026-11":                 Allowed,
			h + "/cal?month=2015-01":                 TrapCalendar,
			h + "/cal?from=2015-01-01&to=2026-01-01": TrapCalendar, // any date out
			h + "/cal?date=20301130":                 TrapCalendar,
			h + "/cal?date=202611":                   Allowed,
			h + "/cal?date=199001":                   TrapCalendar,
			h + "/cal?id=19900101":                   Allowed, // compact dates only in a date parameter
			h + "/?year=2026&month=11":               Allowed,
			h + "/?year=2035&month=11":               TrapCalendar,
			h + "/?month=11&year=2035":               TrapCalendar,
			h + "/?y=2026&m=11":                      Allowed,
			h + "/?y=1990&m=1":                       TrapCalendar,
			h + "/?view=day&Y=2040&M=2&D=3":          TrapCalendar,
			h + "/?y=2027&m=6&d=16":                  TrapCalendar,
			h + "/?y=2027&m=6&d=15":                  Allowed,
			h + "/?year=1999":                        Allowed, // a year alone
			h + "/?month=11":                         Allowed,
			h + "/?year=1999&month=13":               Allowed,
			h + "/?p=2015-01x":                       Allowed,
			h + "/?q=shoes&size=42&page=3":           Allowed,
			h + "/2010/05?x=1":                       TrapCalendar, // the path's date, with a query
		}},
		{"narrow window", &Scope{CalendarPastMonths: 1, CalendarFutureMonths: 2, Now: fixed(clock)}, map[string]Verdict{
			h + "/cal/2026/5":  Allowed,
			h + "/cal/2026/4":  TrapCalendar,
			h + "/cal/2026/08": Allowed,
			h + "/cal/2026/9":  TrapCalendar,
		}},
		{"no past bound", &Scope{CalendarPastMonths: -1, Now: fixed(clock)}, map[string]Verdict{
			h + "/cal/1000/1": Allowed,
			h + "/cal/2030/1": TrapCalendar,
		}},
		{"no future bound", &Scope{CalendarFutureMonths: -1, Now: fixed(clock)}, map[string]Verdict{
			h + "/cal/1000/1": TrapCalendar,
			h + "/cal/9999/1": Allowed,
		}},
		{"off", &Scope{CalendarPastMonths: -1, CalendarFutureMonths: -1, Now: fixed(clock)}, map[string]Verdict{
			h + "/cal/1000/1":      Allowed,
			h + "/?y=9999&m=12":    Allowed,
			h + "/cal/1000/1/1/1/": TrapRepetition, // the other rule stays on
		}},
	} {
		t.Run(c.name, func(t *testing.T) { checkAll(t, c.scope, c.cases) })
	}
}

// TestCalendarWindowByDefinition walks the months of 1990 to 2040, as
// /cal/Y/M and ?year=Y&month=M, against the window written out here from
// its definition: a month is refused if it ends before the clock less
// five years or starts after the clock plus one year.
func TestCalendarWindowByDefinition(t *testing.T) {
	for _, now := range []time.Time{clock, time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC), time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)} {
		s := &Scope{Now: fixed(now)}
		past, future := now.AddDate(-5, 0, 0), now.AddDate(1, 0, 0)
		pastDay := time.Date(past.Year(), past.Month(), past.Day(), 0, 0, 0, 0, time.UTC)
		allowed := 0
		for y := 1990; y <= 2040; y++ {
			for m := time.January; m <= time.December; m++ {
				first := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
				lastDay := first.AddDate(0, 1, -1)
				want := Allowed
				if lastDay.Before(pastDay) || first.After(future) {
					want = TrapCalendar
				} else {
					allowed++
				}
				for _, u := range []string{fmt.Sprintf("http://e.com/cal/%d/%d", y, m), fmt.Sprintf("http://e.com/?year=%d&month=%02d", y, m)} {
					if got := s.CheckString(u); got != want {
						t.Errorf("now %v: %s: %v, want %v", now, u, got, want)
					}
				}
			}
		}
		if allowed != 73 { // 5 years back, 1 ahead, and the clock's month
			t.Errorf("now %v: %d months allowed, want 73", now, allowed)
		}
	}
}

// TestLegitimateURLs: real-looking URLs that neither rule refuses.
func TestLegitimateURLs(t *testing.T) {
	s := &Scope{Now: fixed(clock)}
	for _, u := range []string{
		"http://news.example/2019/05/my-story.html",
		"http://news.example/2010/01/02/old-story/",
		"http://news.example/archive/2019/05/14/some-slug/",
		"http://blog.example/2024/",
		"http://blog.example/1998/",
		"http://blog.example/2026/06/",
		"http://blog.example/2023/11/28/",
		"http://blog.example/2015/03/page/2/",
		"http://docs.example/docs/v2/v2/",
		"http://docs.example/en/guide/install/linux/debian/bookworm/amd64/index.html",
		"http://docs.example/pkg/net/http/httputil/reverseproxy/",
		"http://example.com/a/b/c/a/b/c",
		"http://example.com/a/b/a/b/",
		"http://example.com/tags/go/go/",
		"http://example.com/1/1/",
		"http://example.com/v1/users/42/posts/7",
		"http://example.com/product/12345/reviews",
		"http://example.com/issues/1999",
		"http://example.com/wiki/2001",
		"http://example.com/files/2010/report.pdf",
		"http://example.com/feed/2012/rss.xml",
		"http://example.com/page/2/",
		"http://example.com/search?q=x&date=2026-05-01",
		"http://example.com/events?year=2026&month=7",
		"http://example.com/events?y=2022&m=1&d=9",
		"http://example.com/movies?year=1999",
		"http://example.com/?p=2015",
		"http://example.com/blog/2025-12-01-release-notes.html",
		"http://example.com/",
	} {
		if v := s.CheckString(u); v != Allowed {
			t.Errorf("%s: %v, want allowed", u, v)
		}
	}
}

// TestTraps: traps of both kinds, refused by the default rules.
func TestTraps(t *testing.T) {
	s := &Scope{Now: fixed(clock)}
	for u, want := range map[string]Verdict{
		"http://e.com/trap/a/a/a/a/a/a/a/a/a/a/a/":            TrapRepetition,
		"http://e.com/trap/a/b/a/b/a/b/":                      TrapRepetition,
		"http://e.com/shop/cart/shop/cart/shop/cart/":         TrapRepetition,
		"http://e.com/en/en/en/about":                         TrapRepetition,
		"http://e.com/calendar/1999/12":                       TrapCalendar,
		"http://e.com/calendar/2099/1/":                       TrapCalendar,
		"http://e.com/events/month/2015-01/":                  TrapCalendar,
		"http://e.com/events/2034-02-03/":                     TrapCalendar,
		"http://e.com/index.php?option=cal&year=1970&month=1": TrapCalendar,
		"http://e.com/calendar.php?date=2090-01-01":           TrapCalendar,
	} {
		if v := s.CheckString(u); v != want {
			t.Errorf("%s: %v, want %v", u, v, want)
		}
	}
}

// TestCalendarClock: the clock is read for calendar-like URLs only, and a
// clock that moves to another day moves the window.
func TestCalendarClock(t *testing.T) {
	var reads atomic.Int64
	var now atomic.Pointer[time.Time]
	now.Store(&clock)
	s := &Scope{Now: func() time.Time { reads.Add(1); return *now.Load() }}
	for _, u := range []string{"http://e.com/", "http://e.com/p/17.html", "http://e.com/2019/05/my-story.html", "http://e.com/?q=1&page=2", "http://e.com/a/a/a/"} {
		s.CheckString(u)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("%d clock reads for URLs that are not calendar-like", n)
	}
	const u = "http://e.com/cal/2027/6"
	if v := s.CheckString(u); v != Allowed {
		t.Fatalf("%s at %v: %v", u, clock, v)
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d clock reads for one calendar-like URL, want 1", n)
	}
	later := clock.AddDate(-1, 0, 0)
	now.Store(&later)
	if v := s.CheckString(u); v != TrapCalendar {
		t.Errorf("%s at %v: %v, want a calendar trap", u, later, v)
	}
}

// TestScopeTrapsConcurrent checks calendar URLs from several goroutines
// while the clock changes day (run with -race).
func TestScopeTrapsConcurrent(t *testing.T) {
	var day atomic.Int64
	s := &Scope{Now: func() time.Time { return clock.AddDate(0, 0, int(day.Load())) }}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if g == 0 {
					day.Store(int64(i % 3))
				}
				if v := s.CheckString("http://e.com/cal/2026/6"); v != Allowed {
					errs <- fmt.Sprintf("2026/6: %v", v)
					return
				}
				if v := s.CheckString("http://e.com/cal/1990/6"); v != TrapCalendar {
					errs <- fmt.Sprintf("1990/6: %v", v)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// repeatedRef is the repetition rule as defined: the segments (a trailing
// slash adds none) hold a run of p segments followed by k copies of it.
func repeatedRef(path string, k int) bool {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if strings.HasSuffix(path, "/") {
		segs = segs[:len(segs)-1]
	}
	n := len(segs)
	named := map[string]int{}
	for _, s := range segs {
		if s == "" || strings.Trim(s, "0123456789") == "" {
			continue
		}
		if named[s]++; named[s] > k {
			return true
		}
	}
	for p := 1; (k+1)*p <= n; p++ {
		for i := 0; i+(k+1)*p <= n; i++ {
			all := true
			for c := 1; c <= k && all; c++ {
				for j := range p {
					if segs[i+j] != segs[i+c*p+j] {
						all = false
						break
					}
				}
			}
			if all {
				return true
			}
		}
	}
	return false
}

// TestRepeatedAgainstReference compares the rule with repeatedRef on
// random paths over a small alphabet (fixed seed), where repeats are
// common.
func TestRepeatedAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "c", "", "ab"}
	found := 0
	for range 20000 {
		n := rng.IntN(40)
		var b strings.Builder
		for range n {
			b.WriteString("/" + alphabet[rng.IntN(len(alphabet))])
		}
		if rng.IntN(2) == 0 {
			b.WriteString("/")
		}
		path := b.String()
		for _, k := range []int{1, 2, 3} {
			want := repeatedRef(path, k)
			if got := repeated([]byte(path), k); got != want {
				t.Fatalf("repeated(%q, %d) = %v, want %v", path, k, got, want)
			}
			if want {
				found++
			}
		}
	}
	if found < 1000 {
		t.Errorf("only %d repeated paths among the random ones", found)
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Allowed: "allowed", OutOfScope: "out of scope", TrapRepetition: "repetition trap", TrapCalendar: "calendar trap", 9: "verdict?"} {
		if v.String() != want {
			t.Errorf("%d: %q, want %q", v, v.String(), want)
		}
		if v.Trap() != (v == TrapRepetition || v == TrapCalendar) {
			t.Errorf("%v.Trap() = %v", v, v.Trap())
		}
	}
}

// FuzzCheck: Check never panics, returns a known verdict, agrees with
// Allow, and its repetition verdict is the reference's.
func FuzzCheck(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	for _, s := range []string{
		"http://e.com/a/a/a/", "http://e.com/x/a/b/a/b/a/b", "http://e.com/cal/2026/11", "http://e.com/cal/1999/1/index.html",
		"http://e.com/archive/2019-05/", "http://e.com/?y=2040&m=1&d=2", "http://e.com/?date=20261130", "http://e.com//////",
		"http://e.com/2019/05/x.html", "http://e.com/a/./a/../a", "http://e.com?year=&month=", "http://e.com/-/-/-",
	} {
		f.Add(s)
	}
	s := &Scope{SkipExts: []string{}, Now: fixed(clock)}
	f.Fuzz(func(t *testing.T, u string) {
		v := s.CheckString(u)
		if v > TrapCalendar {
			t.Fatalf("Check(%q) = %d", u, v)
		}
		if s.AllowString(u) != (v == Allowed) {
			t.Fatalf("Check(%q) = %v, Allow disagrees", u, v)
		}
		i := strings.Index(u, "://")
		if i < 0 {
			if v != OutOfScope {
				t.Fatalf("Check(%q) = %v for no URL", u, v)
			}
			return
		}
		rest := u[i+3:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			return
		}
		path, _, _ := strings.Cut(rest[j:], "?")
		if strings.Count(path, "/") > DefaultMaxPathSegments {
			return
		}
		if want := repeatedRef(path, DefaultMaxRepeats); (v == TrapRepetition) != want {
			t.Fatalf("Check(%q) = %v, the reference says repeated=%v", u, v, want)
		}
	})
}

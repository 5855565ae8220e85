package links

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

// trapClock is the clock of the extractor's trap tests: calendar dates from
// 2021-06-15 to 2027-06-15 pass.
func trapClock() time.Time { return time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC) }

// TestExtractCountsTraps: the links the Scope refuses as traps are counted
// by rule (each distinct link once), are among OutOfScope, and are listed
// in TrapLinks in document order; the other links are kept.
func TestExtractCountsTraps(t *testing.T) {
	n := urlnorm.New(urlnorm.Options{})
	scope := &urlnorm.Scope{HostSuffixes: []string{"us.test"}, SkipExts: []string{}, Now: trapClock}
	x := NewExtractor(n, scope, 0)
	x.SetRequisites(true)
	const page = "http://h1.us.test/trap/a/a/"
	body := `<a href="a/">repeats a</a>
		<a href="b/">b</a>
		<a href="a/">a again: a duplicate</a>
		<a href="/cal/1990/1">old month</a>
		<a href="/cal/2026/6">this month</a>
		<a href="/cal/2026/7/index.html">next month</a>
		<a href="/events?year=2099&amp;month=1">far future</a>
		<a href="/x/y/x/y/x/y/">runs</a>
		<a href="http://elsewhere.example/">off site</a>
		<a href="/2019/05/my-story.html">an article</a>
		<img src="/img/i/i/i/logo.gif">`
	p := x.Extract(page, "text/html", []byte(body))
	wantLinks := []string{
		"http://h1.us.test/trap/a/a/b/",
		"http://h1.us.test/cal/2026/6",
		"http://h1.us.test/cal/2026/7/index.html",
		"http://h1.us.test/2019/05/my-story.html",
	}
	if !slices.Equal(p.Links, wantLinks) {
		t.Errorf("links %q, want %q", p.Links, wantLinks)
	}
	if p.TrapRepetition != 3 || p.TrapCalendar != 2 || p.OutOfScope != 6 || p.Duplicates != 1 {
		t.Errorf("%d repetition traps, %d calendar traps, %d out of scope, %d duplicates; want 3 (two links, one embed), 2, 6, 1",
			p.TrapRepetition, p.TrapCalendar, p.OutOfScope, p.Duplicates)
	}
	wantTraps := []string{
		"repetition trap http://h1.us.test/trap/a/a/a/",
		"calendar trap http://h1.us.test/cal/1990/1",
		"calendar trap http://h1.us.test/events?year=2099&month=1",
		"repetition trap http://h1.us.test/x/y/x/y/x/y/",
		"repetition trap http://h1.us.test/img/i/i/i/logo.gif",
	}
	if got := trapStrings(p); !slices.Equal(got, wantTraps) {
		t.Errorf("trap links\n%q\nwant\n%q", got, wantTraps)
	}
	if len(p.Embeds) != 0 {
		t.Errorf("embeds %q, want none (the only one is a trap)", p.Embeds)
	}

	// A page without traps has no counts and no list; the counts of the
	// page before are gone.
	p = x.Extract("http://h1.us.test/", "", []byte(`<a href="/a/a/">two</a><a href="/cal/2026/1">in the window</a>`))
	if p.TrapRepetition != 0 || p.TrapCalendar != 0 || p.TrapLinks != nil || len(p.Links) != 2 {
		t.Errorf("clean page: %d, %d, %q, links %q", p.TrapRepetition, p.TrapCalendar, p.TrapLinks, p.Links)
	}
}

// TestTrapLinksSurviveGrowth: a trap link early on a page keeps its bytes
// while thousands of links after it grow the Extractor's buffer.
func TestTrapLinksSurviveGrowth(t *testing.T) {
	x := NewExtractor(nil, &urlnorm.Scope{Now: trapClock}, 0)
	var b strings.Builder
	b.WriteString(`<a href="/q/q/q/">trap</a>`)
	for i := range 3000 {
		fmt.Fprintf(&b, `<a href="/page/%d/with/a/longer/path/to/grow/the/buffer">x</a>`, i)
	}
	b.WriteString(`<a href="/cal/1234/5">trap</a>`)
	p := x.Extract("http://h.test/", "", []byte(b.String()))
	want := []string{"repetition trap http://h.test/q/q/q/", "calendar trap http://h.test/cal/1234/5"}
	if got := trapStrings(p); !slices.Equal(got, want) || len(p.Links) != 3000 {
		t.Errorf("trap links %q with %d links, want %q with 3000", got, len(p.Links), want)
	}
}

// TestExtractNilScopeNoTraps: without a Scope nothing is refused.
func TestExtractNilScopeNoTraps(t *testing.T) {
	x := NewExtractor(nil, nil, 0)
	p := x.Extract("http://h.test/", "", []byte(`<a href="/a/a/a/">1</a><a href="/cal/1000/1">2</a>`))
	if len(p.Links) != 2 || p.OutOfScope != 0 || p.TrapRepetition != 0 || p.TrapCalendar != 0 {
		t.Errorf("nil scope: links %q, %d out of scope, %d and %d traps", p.Links, p.OutOfScope, p.TrapRepetition, p.TrapCalendar)
	}
}

func trapStrings(p *Page) []string {
	var out []string
	for _, l := range p.TrapLinks {
		out = append(out, l.Rule.String()+" "+string(l.URL))
	}
	return out
}

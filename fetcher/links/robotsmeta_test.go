package links

import (
	"testing"

	"github.com/meridian-crawler/meridian/fetcher/urlnorm"
)

func TestParseXRobotsTag(t *testing.T) {
	const agent = "meridian"
	for _, c := range []struct {
		name   string
		values []string
		want   RobotsTag
	}{
		{"none given", nil, RobotsTag{}},
		{"noindex", []string{"noindex"}, RobotsTag{NoIndex: true}},
		{"nofollow", []string{"nofollow"}, RobotsTag{NoFollow: true}},
		{"none is both", []string{"none"}, RobotsTag{NoIndex: true, NoFollow: true}},
		{"case and spaces", []string{"  NoIndex ,NOFOLLOW  "}, RobotsTag{NoIndex: true, NoFollow: true}},
		{"several values add up", []string{"noindex", "nofollow"}, RobotsTag{NoIndex: true, NoFollow: true}},
		{"all, index and follow say nothing", []string{"all", "index, follow"}, RobotsTag{}},
		{"other directives ignored", []string{"noarchive, nosnippet, noimageindex, notranslate, max-snippet: 20, max-image-preview: large"}, RobotsTag{}},
		{"unavailable_after with commas in its date", []string{"unavailable_after: Saturday, 01-Jul-2023 15:00:00 PST, noindex"}, RobotsTag{NoIndex: true}},
		{"unavailable_after does not open an agent's list", []string{"unavailable_after: 2025-01-01, nofollow"}, RobotsTag{NoFollow: true}},
		{"our agent's prefix", []string{"meridian: noindex"}, RobotsTag{NoIndex: true}},
		{"our agent, any case, no space", []string{"Meridian:nofollow"}, RobotsTag{NoFollow: true}},
		{"another agent's prefix ignored", []string{"otherbot: noindex, nofollow"}, RobotsTag{}},
		{"another agent then ours in one value", []string{"otherbot: noindex, meridian: nofollow"}, RobotsTag{NoFollow: true}},
		{"ours then another in one value", []string{"meridian: nofollow, otherbot: noindex"}, RobotsTag{NoFollow: true}},
		{"a prefix lasts to the end of its value only", []string{"otherbot: noindex", "nofollow"}, RobotsTag{NoFollow: true}},
		{"every agent and ours add up", []string{"noindex", "meridian: nofollow", "googlebot: none"}, RobotsTag{NoIndex: true, NoFollow: true}},
		{"an agent that is a prefix of ours is another", []string{"meri: noindex", "meridianbot: nofollow"}, RobotsTag{}},
		{"garbage", []string{",,, ;noindex; :: : , \x00"}, RobotsTag{}},
		{"empty value", []string{""}, RobotsTag{}},
	} {
		if got := ParseXRobotsTag(c.values, agent); got != c.want {
			t.Errorf("%s: %q: %+v, want %+v", c.name, c.values, got, c.want)
		}
	}
	// Without an agent, prefixed directives apply to no one.
	if got := ParseXRobotsTag([]string{"meridian: noindex", "nofollow"}, ""); got != (RobotsTag{NoFollow: true}) {
		t.Errorf("no agent: %+v", got)
	}
}

// TestExtractMetaRobotsAgent: <meta name=AGENT> is read for the robots
// agent set, as <meta name=robots> is, and other agents' are not.
func TestExtractMetaRobotsAgent(t *testing.T) {
	x := NewExtractor(urlnorm.New(urlnorm.Options{}), nil, 0)
	x.SetRobotsAgent("Meridian")
	for _, c := range []struct {
		body              string
		noindex, nofollow bool
	}{
		{`<meta name="meridian" content="noindex"><a href=x>`, true, false},
		{`<meta name=" MERIDIAN " content="nofollow"><a href=x>`, false, true},
		{`<meta name="googlebot" content="none"><a href=x>`, false, false},
		{`<meta name="robots" content="noindex"><meta name="meridian" content="nofollow"><a href=x>`, true, true},
		{`<meta name="meridianbot" content="none"><a href=x>`, false, false},
	} {
		p := x.Extract(pageURL, "", []byte(c.body))
		if p.NoIndex != c.noindex || p.NoFollow != c.nofollow || (len(p.Links) == 0) != c.nofollow {
			t.Errorf("%s: noindex %v, nofollow %v, links %q; want %v, %v", c.body, p.NoIndex, p.NoFollow, p.Links, c.noindex, c.nofollow)
		}
	}
	x.SetRobotsAgent("")
	if p := x.Extract(pageURL, "", []byte(`<meta name="meridian" content="none"><a href=x>`)); p.NoIndex || p.NoFollow {
		t.Errorf("no agent: %+v", *p)
	}
}

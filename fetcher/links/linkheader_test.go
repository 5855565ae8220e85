package links

import (
	"slices"
	"strings"
	"testing"
)

func TestParseLinkHeader(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []string
		want   []HeaderLink
		err    string // what the error says; "" for none
	}{
		{"one", []string{`<https://a.test/c>; rel="canonical"`}, []HeaderLink{{Target: "https://a.test/c", Rel: "canonical"}}, ""},
		{"unquoted rel, relative target", []string{`</c.html>;rel=canonical`}, []HeaderLink{{Target: "/c.html", Rel: "canonical"}}, ""},
		{"several per value, commas in targets and quotes", []string{`<http://a.test/x,y>; rel="next, prev"; title="a, b", <b>; rel=canonical`},
			[]HeaderLink{{Target: "http://a.test/x,y", Rel: "next, prev"}, {Target: "b", Rel: "canonical"}}, ""},
		{"several values", []string{`<a>; rel=prev`, `<b>; rel="canonical alternate"; type="text/html"`},
			[]HeaderLink{{Target: "a", Rel: "prev"}, {Target: "b", Rel: "canonical alternate", Type: "text/html"}}, ""},
		{"the first of a parameter counts, names any case", []string{`<a>; REL=first; rel=second; Type=x; type=y`}, []HeaderLink{{Target: "a", Rel: "first", Type: "x"}}, ""},
		{"white space everywhere", []string{" \t< a >\t;\trel\t=\t\"canonical\"\t,\t"}, []HeaderLink{{Target: "a", Rel: "canonical"}}, ""},
		{"escapes in a quoted string", []string{`<a>; title="say \"hi\", \\o/"; rel="canonical"`}, []HeaderLink{{Target: "a", Rel: "canonical"}}, ""},
		{"anchor", []string{`<a>; rel=canonical; anchor="#part"`, `<b>; anchor=""; rel=canonical`},
			[]HeaderLink{{Target: "a", Rel: "canonical", Anchor: "#part", HasAnchor: true}, {Target: "b", Rel: "canonical", HasAnchor: true}}, ""},
		{"parameters without values", []string{`<a>; crossorigin; rel=preload`}, []HeaderLink{{Target: "a", Rel: "preload"}}, ""},
		{"empty elements", []string{`,, <a>; rel=x ,,`}, []HeaderLink{{Target: "a", Rel: "x"}}, ""},
		{"wordpress", []string{`<https://w.test/wp-json/>; rel="https://api.w.org/"`, `<https://w.test/?p=1>; rel=shortlink`},
			[]HeaderLink{{Target: "https://w.test/wp-json/", Rel: "https://api.w.org/"}, {Target: "https://w.test/?p=1", Rel: "shortlink"}}, ""},
		{"no '<': skipped to the next comma", []string{`https://a.test/; rel=canonical, <b>; rel=canonical`}, []HeaderLink{{Target: "b", Rel: "canonical"}}, "value 0, offset 0"},
		{"unterminated target", []string{`<a>; rel=x`, `<b; rel=canonical`}, []HeaderLink{{Target: "a", Rel: "x"}}, "value 1, offset 0: link target without its '>'"},
		{"junk after a parameter", []string{`<a>; rel="x" junk; more, <b>`}, []HeaderLink{{Target: "b"}}, "want ';' or ','"},
		{"unterminated quote", []string{`<a>; rel="canonical`}, []HeaderLink{{Target: "a", Rel: "canonical"}}, ""},
		{"empty", []string{""}, nil, ""},
	} {
		got, err := ParseLinkHeader(c.values)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %q\n got %+v\nwant %+v", c.name, c.values, got, c.want)
		}
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: error %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.err)
		}
	}
	l := HeaderLink{Rel: " alternate  CANONICAL "}
	if !l.HasRel("canonical") || l.HasRel("canon") || !l.OfResource() {
		t.Errorf("HasRel or OfResource wrong for %+v", l)
	}
}

// FuzzLinkHeader: ParseLinkHeader never panics, every target is found in
// the input, and the links it finds, written out again in canonical form,
// parse back to themselves.
func FuzzLinkHeader(f *testing.F) {
	for _, s := range []string{
		`<https://a.test/c>; rel="canonical"`, `</x>;rel=canonical, <y>; rel="next prev"; type=text/html`,
		`<a>; title="q\"uote"; anchor="#x"`, `<a`, `a>; rel=x`, `<>;;;,,;`, `<a>; rel="unterminated`, `<a>; x=1 y`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		links, _ := ParseLinkHeader([]string{v})
		var b strings.Builder
		for i, l := range links {
			if !strings.Contains(v, l.Target) {
				t.Fatalf("target %q not in %q", l.Target, v)
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("<" + l.Target + ">")
			q := func(name, val string) {
				b.WriteString("; " + name + `="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(val) + `"`)
			}
			q("rel", l.Rel)
			q("type", l.Type)
			if l.HasAnchor {
				q("anchor", l.Anchor)
			}
		}
		again, err := ParseLinkHeader([]string{b.String()})
		if err != nil {
			t.Fatalf("%q (from %q): %v", b.String(), v, err)
		}
		if len(again) != len(links) {
			t.Fatalf("%q gives %d links, %q gave %d", b.String(), len(again), v, len(links))
		}
		for i := range links {
			want := links[i]
			if !want.HasAnchor {
				want.Anchor = ""
			}
			if again[i] != want {
				t.Fatalf("link %d: %+v, written out and read again %+v", i, links[i], again[i])
			}
		}
	})
}

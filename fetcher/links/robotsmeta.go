package links

import "strings"

// RobotsTag is what robots directives (an X-Robots-Tag header, a meta
// robots tag) ask of a crawler.
type RobotsTag struct {
	NoIndex  bool // noindex (or none): do not index the page
	NoFollow bool // nofollow (or none): do not follow its links
}

// valueDirectives are the X-Robots-Tag directives written "name: value",
// which a user-agent prefix ("otherbot: noindex") must not be taken for.
var valueDirectives = [...]string{"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}

// ParseXRobotsTag reads the values of a response's X-Robots-Tag headers
// for the robots agent agent (a product token, matched case-insensitively),
// as Google documents them: each value is a comma-separated list of
// directives; "name: directive" (a token that starts with a letter and is
// not a directive that takes a value, such as unavailable_after or
// max-snippet) makes the directives from there to the end of the value, or
// to the next such prefix, apply to that agent only; directives before any
// prefix apply to every agent. noindex, nofollow and none (both) are read,
// case-insensitively; every other directive (noarchive, nosnippet,
// unavailable_after: …, max-snippet: …) is ignored, and so is anything
// that is not a directive. The directives for every agent and those for
// agent add up: the most restrictive wins.
func ParseXRobotsTag(values []string, agent string) RobotsTag {
	var t RobotsTag
	for _, v := range values {
		mine := true // no prefix yet: for every agent
		for len(v) > 0 {
			part := v
			if i := strings.IndexByte(v, ','); i >= 0 {
				part, v = v[:i], v[i+1:]
			} else {
				v = ""
			}
			part = strings.TrimSpace(part)
			if name, rest, ok := strings.Cut(part, ":"); ok && isAgentName(name) {
				mine = strings.EqualFold(name, agent)
				part = strings.TrimSpace(rest)
			}
			if mine {
				t.directive(part)
			}
		}
	}
	return t
}

// isAgentName reports whether name, the text before a ':' in an
// X-Robots-Tag directive, is a user-agent prefix: a token of letters,
// digits, '-' and '_' that starts with a letter and is not the name of a
// directive that takes a value.
func isAgentName(name string) bool {
	if name == "" || !isLetter(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !isLetter(c) && !(c >= '0' && c <= '9') && c != '-' && c != '_' {
			return false
		}
	}
	for _, d := range valueDirectives {
		if strings.EqualFold(name, d) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// directive applies one directive (trimmed) to t.
func (t *RobotsTag) directive(d string) {
	switch {
	case strings.EqualFold(d, "noindex"):
		t.NoIndex = true
	case strings.EqualFold(d, "nofollow"):
		t.NoFollow = true
	case strings.EqualFold(d, "none"):
		t.NoIndex, t.NoFollow = true, true
	}
}

// metaDirectives applies the directives of a meta robots content
// attribute (separated by commas and spaces) to t.
func (t *RobotsTag) metaDirectives(content []byte) {
	for len(content) > 0 {
		i := 0
		for i < len(content) && (isSpace(content[i]) || content[i] == ',') {
			i++
		}
		j := i
		for j < len(content) && !isSpace(content[j]) && content[j] != ',' {
			j++
		}
		switch tok := content[i:j]; {
		case asciiEqualFold(tok, "nofollow"):
			t.NoFollow = true
		case asciiEqualFold(tok, "noindex"):
			t.NoIndex = true
		case asciiEqualFold(tok, "none"):
			t.NoIndex, t.NoFollow = true, true
		}
		content = content[j:]
	}
}

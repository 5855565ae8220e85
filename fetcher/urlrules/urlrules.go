// Package urlrules holds a crawl's URL rules: ordered accept (+) and
// reject (-) lines of prefix, suffix, host, host-suffix and regular
// expression (RE2) rules, the first that matches deciding, as Nutch's
// regex-urlfilter does.
//
// A rules file has one rule a line; blank lines and lines starting with #
// are ignored:
//
//	-suffix:.pdf                     reject URLs ending in .pdf
//	+host:docs.example.com           accept every URL of that host
//	-host-suffix:spam.test           reject spam.test and its subdomains
//	+prefix:https://example.com/a/   accept URLs starting so
//	-regex:[?&]sessionid=            reject URLs the expression matches
//	-[?&]sid=                        a line without a kind is a regular expression (Nutch's form)
//	+.                               accept the rest
//
// A URL that no rule matches is rejected, as in Nutch: a file that means
// to accept the rest ends with "+." . Rules see the URL as the crawler
// normalised it (lower-case scheme and host, no fragment).
package urlrules

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Limits of a rules file.
const (
	MaxRules   = 10_000
	MaxLineLen = 4096
)

// ErrRules: a rules file that cannot be used; the error says which line.
var ErrRules = errors.New("urlrules: bad rules")

// Kind is what a rule compares.
type Kind uint8

// The kinds of rules.
const (
	Prefix     Kind = iota + 1 // the URL starts with the pattern
	Suffix                     // the URL ends with the pattern
	Host                       // the URL's host is the pattern
	HostSuffix                 // the URL's host is the pattern or ends in "."+pattern
	Regex                      // the RE2 expression matches somewhere in the URL
)

var kindNames = map[string]Kind{"prefix": Prefix, "suffix": Suffix, "host": Host, "host-suffix": HostSuffix, "regex": Regex}

// Rule is one line of a rules file.
type Rule struct {
	Accept  bool
	Kind    Kind
	Pattern string
	Line    int // in the file, from 1
	re      *regexp.Regexp
}

// Rules is a parsed rules file. A nil *Rules accepts every URL. It is safe
// for concurrent use.
type Rules struct {
	rules []Rule
}

// Parse reads a rules file. Every bad line is reported, with its number
// (name names the file in the messages).
func Parse(name string, r io.Reader) (*Rules, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1024), MaxLineLen+1)
	var rs Rules
	var errs []error
	bad := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s:%d: %s", ErrRules, name, line, fmt.Sprintf(format, args...)))
	}
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		rule, err := parseLine(line)
		if err != nil {
			bad(n, "%v", err)
			continue
		}
		if len(rs.rules) == MaxRules {
			bad(n, "more than %d rules", MaxRules)
			break
		}
		rule.Line = n
		rs.rules = append(rs.rules, rule)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			bad(n+1, "a line longer than %d bytes", MaxLineLen)
		} else {
			errs = append(errs, fmt.Errorf("urlrules: read %s: %w", name, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &rs, nil
}

// ParseString is Parse of a string.
func ParseString(name, s string) (*Rules, error) { return Parse(name, strings.NewReader(s)) }

// parseLine reads one rule: + or -, then KIND:PATTERN, or a regular
// expression.
func parseLine(line string) (Rule, error) {
	var r Rule
	switch line[0] {
	case '+':
		r.Accept = true
	case '-':
	default:
		return r, fmt.Errorf("%q: a rule starts with + (accept) or - (reject)", clip(line))
	}
	body := line[1:]
	r.Kind, r.Pattern = Regex, body
	if k, p, ok := strings.Cut(body, ":"); ok {
		if kind, known := kindNames[k]; known {
			r.Kind, r.Pattern = kind, p
		}
	}
	if r.Pattern == "" {
		return r, fmt.Errorf("%q: an empty pattern", clip(line))
	}
	switch r.Kind {
	case Regex:
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return r, fmt.Errorf("%q: %v", clip(line), err)
		}
		r.re = re
	case Host, HostSuffix:
		h := strings.TrimSuffix(strings.ToLower(r.Pattern), ".")
		if r.Kind == HostSuffix {
			h = strings.TrimPrefix(h, ".")
		}
		if h == "" || strings.ContainsAny(h, "/:?#@ ") {
			return r, fmt.Errorf("%q: not a host name", clip(line))
		}
		r.Pattern = h
	}
	return r, nil
}

// clip shortens a line for a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// Len is the number of rules.
func (rs *Rules) Len() int {
	if rs == nil {
		return 0
	}
	return len(rs.rules)
}

// Rules returns the rules in order.
func (rs *Rules) Rules() []Rule {
	if rs == nil {
		return nil
	}
	return rs.rules
}

// Match returns the first rule that matches u, and whether one did.
func (rs *Rules) Match(u []byte) (Rule, bool) {
	if rs == nil {
		return Rule{}, false
	}
	var host []byte
	hostDone := false
	for _, r := range rs.rules {
		var ok bool
		switch r.Kind {
		case Prefix:
			ok = bytes.HasPrefix(u, []byte(r.Pattern))
		case Suffix:
			ok = bytes.HasSuffix(u, []byte(r.Pattern))
		case Host, HostSuffix:
			if !hostDone {
				host, hostDone = hostOf(u), true
			}
			ok = string(host) == r.Pattern ||
				r.Kind == HostSuffix && len(host) > len(r.Pattern) && host[len(host)-len(r.Pattern)-1] == '.' &&
					string(host[len(host)-len(r.Pattern):]) == r.Pattern
		case Regex:
			ok = r.re.Match(u)
		}
		if ok {
			return r, true
		}
	}
	return Rule{}, false
}

// Allow reports whether u is accepted: by the first rule that matches it,
// or, when none does, not at all. A nil *Rules accepts every URL.
func (rs *Rules) Allow(u []byte) bool {
	if rs == nil {
		return true
	}
	r, ok := rs.Match(u)
	return ok && r.Accept
}

// hostOf returns the host of an absolute URL, lower-case as normalised,
// without port or user info (nil if it has none).
func hostOf(u []byte) []byte {
	i := bytes.Index(u, []byte("://"))
	if i < 0 {
		return nil
	}
	rest := u[i+3:]
	if end := bytes.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	if at := bytes.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	if len(rest) > 0 && rest[0] == '[' { // IPv6 literal
		if end := bytes.IndexByte(rest, ']'); end >= 0 {
			return rest[:end+1]
		}
		return rest
	}
	if c := bytes.LastIndexByte(rest, ':'); c >= 0 {
		rest = rest[:c]
	}
	return rest
}

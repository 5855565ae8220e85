package urlnorm

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxPathSegments is the Scope.MaxPathSegments default.
const DefaultMaxPathSegments = 64

// DefaultSkipExts are the path extensions not fetched by default: images,
// audio, video, archives, fonts, executables and packages, style sheets and
// scripts. Documents (pdf, doc, ...) are not in the list.
var DefaultSkipExts = []string{
	// images
	"jpg", "jpeg", "png", "gif", "bmp", "webp", "svg", "ico", "tif", "tiff", "avif", "heic", "psd",
	// audio
	"mp3", "wav", "ogg", "oga", "flac", "aac", "m4a", "wma", "opus", "mid", "midi",
	// video
	"mp4", "m4v", "avi", "mov", "wmv", "flv", "mkv", "webm", "mpg", "mpeg", "3gp", "ogv",
	// archives and disk images
	"zip", "gz", "tgz", "bz2", "xz", "7z", "rar", "tar", "zst", "dmg", "iso",
	// fonts
	"woff", "woff2", "ttf", "otf", "eot",
	// executables and packages
	"exe", "msi", "bin", "apk", "deb", "rpm", "jar", "dll", "so",
	// page resources
	"css", "js", "map",
}

// maxExtLen bounds the extensions Scope compares.
const maxExtLen = 16

// Scope decides whether a normalised URL is in a crawl's scope, and
// refuses spider traps by two rules that are on by default: path
// repetition (MaxRepeats) and calendars (CalendarPastMonths,
// CalendarFutureMonths). Its fields must not change, and the Scope must
// not be copied, after the first call to Check or Allow; both are safe for
// concurrent use. A nil *Scope allows everything, traps included.
type Scope struct {
	// HostSuffixes, if non-empty, limit the crawl to hosts equal to one of
	// them or ending in "."+suffix (lower-case, no trailing dot).
	HostSuffixes []string
	// DenyHosts are exact hosts never crawled.
	DenyHosts []string
	// SkipExts are path extensions (of the last path segment, with or
	// without the leading dot, case-insensitive) not fetched. nil means
	// DefaultSkipExts; an empty non-nil slice skips nothing.
	SkipExts []string
	// MaxPathSegments is the most path segments a URL may have. 0 means
	// DefaultMaxPathSegments.
	MaxPathSegments int
	// MaxRepeats is how many times in a row a path segment, or a run of
	// consecutive segments, may occur, and how many times a named segment
	// (not empty, not all digits) may occur anywhere in the path: with 2,
	// /a/a/, /x/a/b/a/b/ and /a/x/a/y/ pass, /a/a/a/, /a/a/a (the last
	// segment counts, file name or not), /x/a/b/a/b/a/b/ and /a/x/a/y/a/
	// are refused as TrapRepetition, and /users/1/posts/1/comments/1
	// passes. 0 means DefaultMaxRepeats; a negative value turns the rule
	// off.
	MaxRepeats int
	// CalendarPastMonths and CalendarFutureMonths bound the dates of
	// calendar-like URLs (see Check): one whose month (or day) ends more
	// than CalendarPastMonths before the clock, or starts more than
	// CalendarFutureMonths after it, is refused as TrapCalendar. 0 means
	// DefaultCalendarPastMonths (five years) and
	// DefaultCalendarFutureMonths (one year); a negative value leaves that
	// side unbounded, and both negative turn the rule off.
	CalendarPastMonths   int
	CalendarFutureMonths int
	// Now is the clock of the calendar rule, read in UTC, and called from
	// every goroutine that calls Check. It is read only for calendar-like
	// URLs, once each; the window is recomputed when the day changes. nil
	// means time.Now.
	Now func() time.Time
	// Filter, if set, has the last word on a URL the rest allows (a
	// crawl's URL rules: urlrules.Rules.Allow).
	Filter func(u []byte) bool

	once sync.Once
	c    compiledScope
	win  atomic.Pointer[calWindow] // the calendar window of the clock's day
}

// compiledScope is the lookup form of a Scope's fields.
type compiledScope struct {
	suffixes []string // "."+suffix, and the suffix itself in exact
	exact    map[string]struct{}
	deny     map[string]struct{}
	exts     map[string]struct{} // lower-case, no dot
	maxSegs  int
	repeats  int  // MaxRepeats; 0: the rule is off
	calendar bool // the calendar rule is on
	calPast  int  // months; -1: unbounded
	calFut   int  // months; -1: unbounded
}

func (s *Scope) compile() {
	c := compiledScope{maxSegs: s.MaxPathSegments, repeats: s.MaxRepeats, calPast: s.CalendarPastMonths, calFut: s.CalendarFutureMonths}
	if c.maxSegs <= 0 {
		c.maxSegs = DefaultMaxPathSegments
	}
	switch {
	case c.repeats == 0:
		c.repeats = DefaultMaxRepeats
	case c.repeats < 0:
		c.repeats = 0
	}
	switch {
	case c.calPast == 0:
		c.calPast = DefaultCalendarPastMonths
	case c.calPast < 0:
		c.calPast = -1
	}
	switch {
	case c.calFut == 0:
		c.calFut = DefaultCalendarFutureMonths
	case c.calFut < 0:
		c.calFut = -1
	}
	c.calendar = c.calPast >= 0 || c.calFut >= 0
	if len(s.HostSuffixes) > 0 {
		c.exact = make(map[string]struct{}, len(s.HostSuffixes))
		for _, h := range s.HostSuffixes {
			h = strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(h), "."), ".")
			c.exact[h] = struct{}{}
			c.suffixes = append(c.suffixes, "."+h)
		}
	}
	c.deny = make(map[string]struct{}, len(s.DenyHosts))
	for _, h := range s.DenyHosts {
		c.deny[strings.TrimSuffix(strings.ToLower(h), ".")] = struct{}{}
	}
	exts := s.SkipExts
	if exts == nil {
		exts = DefaultSkipExts
	}
	c.exts = make(map[string]struct{}, len(exts))
	for _, e := range exts {
		e = strings.ToLower(strings.TrimPrefix(e, "."))
		if e != "" && len(e) <= maxExtLen {
			c.exts[e] = struct{}{}
		}
	}
	s.c = c
}

// Allow reports whether Check allows the normalised URL u.
func (s *Scope) Allow(u []byte) bool { return s.Check(u) == Allowed }

// Check decides about the normalised URL u, in this order. OutOfScope: u
// has no "://", its host does not match HostSuffixes (if any) or is in
// DenyHosts, its last path segment's extension is in SkipExts, or its
// path has more than MaxPathSegments segments. TrapRepetition: its path
// repeats a segment, or a run of segments, more than MaxRepeats times in a
// row. TrapCalendar: u is calendar-like, with a date outside the window
// around Now. OutOfScope: Filter (if set) refuses it. Allowed otherwise.
//
// A URL is calendar-like if its path ends in a date, YYYY/MM or
// YYYY/MM/DD as segments or YYYY-MM or YYYY-MM-DD as one (a trailing
// slash, an index file such as index.html, or an extension on the last
// part, 05.html, may follow), or if its query has a date: a parameter
// whose value is YYYY-MM or YYYY-MM-DD, a date parameter of YYYYMM or
// YYYYMMDD, or year (y) and month (m, mon) parameters, with day (d) or
// not, names in any case. Years have four digits (1000-9999), months and
// days one or two (1-12, 1-31). A date followed by more path
// (/2019/05/my-story.html, an article) and a year alone (/2024/,
// ?year=1999) are not calendar-like.
//
// Check allocates nothing but the calendar window, once a day, and
// offsets for paths of more than DefaultMaxPathSegments segments.
func (s *Scope) Check(u []byte) Verdict {
	if s == nil {
		return Allowed
	}
	s.once.Do(s.compile)
	c := &s.c
	i := bytes.Index(u, []byte("://"))
	if i < 0 {
		return OutOfScope
	}
	rest := u[i+3:]
	end := bytes.IndexByte(rest, '/')
	if end < 0 {
		end = len(rest)
	}
	host := rest[:end]
	if j := bytes.LastIndexByte(host, ':'); j >= 0 && host[len(host)-1] != ']' { // an IPv6 literal's colons are not a port's
		host = host[:j]
	}
	if len(c.deny) > 0 {
		if _, ok := c.deny[string(host)]; ok {
			return OutOfScope
		}
	}
	if c.exact != nil && !c.hostInSuffixes(host) {
		return OutOfScope
	}
	path, query := rest[end:], []byte(nil)
	if q := bytes.IndexByte(path, '?'); q >= 0 {
		path, query = path[:q], path[q+1:]
	}
	if len(path) > c.maxSegs && bytes.Count(path, []byte{'/'}) > c.maxSegs {
		return OutOfScope
	}
	if len(c.exts) > 0 {
		seg := path[bytes.LastIndexByte(path, '/')+1:]
		if d := bytes.LastIndexByte(seg, '.'); d >= 0 && len(seg)-d-1 <= maxExtLen {
			var buf [maxExtLen]byte
			ext := buf[:0]
			for _, ch := range seg[d+1:] {
				ext = append(ext, lowerASCII(ch))
			}
			if _, ok := c.exts[string(ext)]; ok {
				return OutOfScope
			}
		}
	}
	if c.repeats > 0 && repeated(path, c.repeats) {
		return TrapRepetition
	}
	if c.calendar && s.calendarOutside(path, query) {
		return TrapCalendar
	}
	if s.Filter != nil && !s.Filter(u) {
		return OutOfScope
	}
	return Allowed
}

func (c *compiledScope) hostInSuffixes(host []byte) bool {
	if _, ok := c.exact[string(host)]; ok {
		return true
	}
	for _, sfx := range c.suffixes {
		if len(host) > len(sfx) && string(host[len(host)-len(sfx):]) == sfx {
			return true
		}
	}
	return false
}

// AllowString is Allow for a string.
func (s *Scope) AllowString(u string) bool {
	return s.Allow([]byte(u))
}

// CheckString is Check for a string.
func (s *Scope) CheckString(u string) Verdict {
	return s.Check([]byte(u))
}

package urlnorm

import (
	"bytes"
	"math"
	"time"
)

// The trap rules' defaults (see Scope).
const (
	// DefaultMaxRepeats is the Scope.MaxRepeats default, Heritrix's
	// PathologicalPath rule's: a segment, or a run of segments, may occur
	// twice in a row, and a named segment twice in the path.
	DefaultMaxRepeats = 2
	// DefaultCalendarPastMonths is the Scope.CalendarPastMonths default:
	// five years.
	DefaultCalendarPastMonths = 60
	// DefaultCalendarFutureMonths is the Scope.CalendarFutureMonths
	// default: one year.
	DefaultCalendarFutureMonths = 12
)

// Verdict is what Scope.Check decides about a URL.
type Verdict uint8

// The verdicts of Scope.Check.
const (
	// Allowed: the URL is in scope.
	Allowed Verdict = iota
	// OutOfScope: the URL is no URL, or its host, its extension, its
	// number of path segments or the Filter refuses it.
	OutOfScope
	// TrapRepetition: the path repeats a segment, or a run of
	// consecutive segments, more than Scope.MaxRepeats times in a row, or
	// holds a named segment (one with a character other than a digit)
	// more than Scope.MaxRepeats times anywhere.
	TrapRepetition
	// TrapCalendar: the URL is calendar-like and its date lies outside
	// the Scope's calendar window.
	TrapCalendar
)

var verdictNames = [...]string{"allowed", "out of scope", "repetition trap", "calendar trap"}

// String names the verdict: "allowed", "out of scope", "repetition trap"
// or "calendar trap".
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "verdict?"
}

// Trap reports whether v is the refusal of a trap rule.
func (v Verdict) Trap() bool { return v == TrapRepetition || v == TrapCalendar }

// maxStackSegs is the most path segments the repetition rule looks at
// without allocating (DefaultMaxPathSegments).
const maxStackSegs = DefaultMaxPathSegments

// repeated reports whether the path holds a run of k+1 or more equal runs
// of consecutive segments (a segment alone is a run of one), or k+1 or
// more equal named segments anywhere (not empty, not all digits: "/v1/x/v1/
// y/v1/" is refused, "/users/1/posts/1/comments/1" is not). The segments
// are what lies between slashes; a trailing slash ends the last segment
// and adds none, so "/a/a/" and "/a/a" both have the segments a and a.
//
// The second rule bounds what the first cannot: a page served at every
// path whose relative links are a/ and b/ leads to paths with no run
// repeated three times in a row (a/b/a/a/b/a/b/b/…) without end; with
// each name at most k times, such a page of m links leads to paths of at
// most k·m segments under it.
//
// A run of period p repeated k+1 times is kp consecutive segments each
// equal to the one p after it; any kp consecutive positions hold a
// multiple of p, so only those are probed, and a match is grown both ways.
// The work is about n log n segment comparisons for n segments, none for
// paths of k segments or fewer.
func repeated(path []byte, k int) bool {
	n := bytes.Count(path, slash)
	if n > 0 && path[len(path)-1] == '/' {
		n--
	}
	if n <= k {
		return false
	}
	// off[i] is where segment i starts; segment i is
	// path[off[i]:off[i+1]-1].
	var stack [maxStackSegs + 1]int32
	off := stack[:0]
	if n > maxStackSegs {
		off = make([]int32, 0, n+1) // only with MaxPathSegments above the default
	}
	at := bytes.IndexByte(path, '/') + 1
	for range n {
		off = append(off, int32(at))
		if i := bytes.IndexByte(path[at:], '/'); i >= 0 {
			at += i + 1
		} else {
			at = len(path) + 1 // the last segment ends the path
		}
	}
	off = append(off, int32(at))
	eq := func(i, j int) bool {
		li, lj := off[i+1]-off[i], off[j+1]-off[j]
		return li == lj && bytes.Equal(path[off[i]:off[i+1]-1], path[off[j]:off[j+1]-1])
	}
	if namedRepeated(path, off, n, k, eq) {
		return true
	}
	for p := 1; (k+1)*p <= n; p++ {
		need := k * p // consecutive matches at distance p
		for j := 0; j+p < n; j += p {
			if !eq(j, j+p) {
				continue
			}
			lo, hi := j, j+1 // matches at lo..hi-1
			for lo > 0 && eq(lo-1, lo-1+p) {
				lo--
			}
			for hi+p < n && eq(hi, hi+p) {
				hi++
			}
			if hi-lo >= need {
				return true
			}
			j = hi - hi%p // the next probe is the first multiple of p past hi
		}
	}
	return false
}

var slash = []byte{'/'}

// namedRepeated reports whether one of the n segments at off (see
// repeated) that is named, neither empty nor all digits, occurs more
// than k times. The work is n² segment comparisons at most, for the
// paths of more than k segments only.
func namedRepeated(path []byte, off []int32, n, k int, eq func(i, j int) bool) bool {
	for i := 0; i+k < n; i++ {
		seg := path[off[i] : off[i+1]-1]
		if len(seg) == 0 || allDigits(seg) {
			continue
		}
		seen := 1
		for j := i + 1; j < n; j++ {
			if eq(i, j) {
				if seen++; seen > k {
					return true
				}
			}
		}
	}
	return false
}

// allDigits reports whether b is ASCII digits only.
func allDigits(b []byte) bool {
	for _, c := range b {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// calWindow is the calendar rule's window for one UTC day of the clock.
type calWindow struct {
	day          int64 // Unix day it was computed for
	past, future int32 // yyyymmdd: dates ending before past or starting after future are refused
}

// window returns the calendar window for the Scope's clock now, computed
// once per UTC day.
func (s *Scope) window() *calWindow {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	t := now().UTC()
	day := t.Unix() / 86400
	if t.Unix() < 0 && t.Unix()%86400 != 0 {
		day--
	}
	if w := s.win.Load(); w != nil && w.day == day {
		return w
	}
	w := &calWindow{day: day, past: math.MinInt32, future: math.MaxInt32}
	if s.c.calPast >= 0 {
		w.past = yyyymmdd(t.AddDate(0, -s.c.calPast, 0))
	}
	if s.c.calFut >= 0 {
		w.future = yyyymmdd(t.AddDate(0, s.c.calFut, 0))
	}
	s.win.Store(w)
	return w
}

func yyyymmdd(t time.Time) int32 {
	y, m, d := t.Date()
	return int32(max(min(y, 200_000), -200_000)*10000 + int(m)*100 + d)
}

// date is a calendar date as a URL writes it: a year, a month (1-12) and,
// if day > 0, a day (1-31).
type date struct{ year, month, day int }

// outside reports whether the whole of d (a month, or a day) lies before
// w.past or after w.future.
func (w *calWindow) outside(d date) bool {
	first, last := d.year*10000+d.month*100, d.year*10000+d.month*100
	if d.day > 0 {
		first, last = first+d.day, last+d.day
	} else {
		first, last = first+1, last+31
	}
	return first > int(w.future) || last < int(w.past)
}

// calendarOutside reports whether path or query is calendar-like with a
// date outside the window (see Scope.Check).
func (s *Scope) calendarOutside(path, query []byte) bool {
	var w *calWindow
	if d, ok := pathDate(path); ok {
		w = s.window()
		if w.outside(d) {
			return true
		}
	}
	if !hasFourDigits(query) {
		return false // every date form has a year
	}
	var split date // from year=, month= and day= parameters
	for len(query) > 0 {
		var kv []byte
		if i := bytes.IndexByte(query, '&'); i >= 0 {
			kv, query = query[:i], query[i+1:]
		} else {
			kv, query = query, nil
		}
		eq := bytes.IndexByte(kv, '=')
		if eq < 0 {
			continue
		}
		key, val := kv[:eq], kv[eq+1:]
		if len(val) < 1 || len(val) > 10 || !isDigit(val[0]) {
			continue
		}
		d, ok := dashDate(val)
		if !ok && equalFoldASCII(key, "date") {
			d, ok = compactDate(val)
		}
		if ok {
			if w == nil {
				w = s.window()
			}
			if w.outside(d) {
				return true
			}
			continue
		}
		switch {
		case equalFoldASCII(key, "year") || equalFoldASCII(key, "y"):
			if y, ok := year(val); ok {
				split.year = y
			}
		case equalFoldASCII(key, "month") || equalFoldASCII(key, "m") || equalFoldASCII(key, "mon"):
			if m, ok := number(val, 12); ok {
				split.month = m
			}
		case equalFoldASCII(key, "day") || equalFoldASCII(key, "d"):
			if d, ok := number(val, 31); ok {
				split.day = d
			}
		}
	}
	if split.year == 0 || split.month == 0 {
		return false
	}
	if w == nil {
		w = s.window()
	}
	return w.outside(split)
}

// pathDate returns the date that ends path: its last segments are
// YYYY/MM or YYYY/MM/DD, or its last segment is YYYY-MM or YYYY-MM-DD;
// a trailing slash, an index file (index.html, default.aspx, ...) after
// the date and a file extension on its last part (05.html) are allowed.
// A date followed by anything else (a slug: /2019/05/my-story.html) is no
// calendar, and neither is a year alone (/2024/, /issues/1999). It looks
// at the path's end only, and most paths fail at their last byte.
func pathDate(path []byte) (date, bool) {
	p := path
	if len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	if len(p) == 0 {
		return date{}, false
	}
	ls := lastSlash(p) + 1
	if ls < len(p) {
		if c := p[ls] | 0x20; (c == 'i' || c == 'd') && isIndexFile(p[ls:]) {
			if p = p[:max(ls-1, 0)]; len(p) == 0 {
				return date{}, false
			}
			ls = lastSlash(p) + 1
		}
	}
	last := p[ls:]
	if len(last) == 0 {
		return date{}, false
	}
	if c := last[len(last)-1]; !isDigit(c) {
		if last = trimExt(last); len(last) == 0 || !isDigit(last[len(last)-1]) {
			return date{}, false // the common case: no number ends the path
		}
	}
	if !isDigit(last[0]) {
		return date{}, false
	}
	if len(last) > 2 {
		return dashDate(last)
	}
	if ls == 0 {
		return date{}, false
	}
	p = p[:ls-1]
	ps := lastSlash(p) + 1
	prev := p[ps:]
	if y, ok := year(prev); ok {
		m, ok := number(last, 12)
		return date{year: y, month: m}, ok
	}
	if len(prev) > 2 || ps == 0 {
		return date{}, false
	}
	p = p[:ps-1]
	y, ok := year(p[lastSlash(p)+1:])
	if !ok {
		return date{}, false
	}
	m, ok1 := number(prev, 12)
	d, ok2 := number(last, 31)
	return date{year: y, month: m, day: d}, ok1 && ok2
}

// lastSlash returns the index of the last '/' in p, -1 if none. Segments
// are short: a loop beats bytes.LastIndexByte's call.
func lastSlash(p []byte) int {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return i
		}
	}
	return -1
}

// isIndexFile reports whether seg names a directory's index: "index" or
// "default", with or without an extension, in any case.
func isIndexFile(seg []byte) bool {
	name := seg
	if i := bytes.IndexByte(seg, '.'); i >= 0 {
		if !isExt(seg[i+1:]) {
			return false
		}
		name = seg[:i]
	}
	return equalFoldASCII(name, "index") || equalFoldASCII(name, "default")
}

// trimExt removes a file extension (a dot and 1 to 5 ASCII letters) from
// seg.
func trimExt(seg []byte) []byte {
	for i := len(seg) - 1; i >= 0 && i >= len(seg)-6; i-- {
		switch c := seg[i] | 0x20; {
		case c >= 'a' && c <= 'z':
		case seg[i] == '.' && i < len(seg)-1:
			return seg[:i]
		default:
			return seg
		}
	}
	return seg
}

func isExt(b []byte) bool {
	if len(b) < 1 || len(b) > 5 {
		return false
	}
	for _, c := range b {
		if c = lowerASCII(c); c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// dashDate parses YYYY-MM or YYYY-MM-DD (months and days of one or two
// digits).
func dashDate(b []byte) (date, bool) {
	if len(b) < 6 || b[4] != '-' {
		return date{}, false
	}
	y, ok := year(b[:4])
	if !ok {
		return date{}, false
	}
	rest := b[5:]
	ms, ds := rest, []byte(nil)
	if i := bytes.IndexByte(rest, '-'); i >= 0 {
		ms, ds = rest[:i], rest[i+1:]
	}
	m, ok := number(ms, 12)
	if !ok {
		return date{}, false
	}
	if ds == nil {
		return date{year: y, month: m}, true
	}
	d, ok := number(ds, 31)
	if !ok {
		return date{}, false
	}
	return date{year: y, month: m, day: d}, true
}

// compactDate parses YYYYMM or YYYYMMDD.
func compactDate(b []byte) (date, bool) {
	if len(b) != 6 && len(b) != 8 {
		return date{}, false
	}
	y, ok1 := year(b[:4])
	m, ok2 := number(b[4:6], 12)
	if !ok1 || !ok2 {
		return date{}, false
	}
	if len(b) == 6 {
		return date{year: y, month: m}, true
	}
	d, ok := number(b[6:], 31)
	return date{year: y, month: m, day: d}, ok
}

// year parses a year of four digits, 1000 to 9999.
func year(b []byte) (int, bool) {
	if len(b) != 4 || b[0] == '0' {
		return 0, false
	}
	y := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		y = y*10 + int(c-'0')
	}
	return y, true
}

// number parses one or two digits with a value from 1 to hi.
func number(b []byte, hi int) (int, bool) {
	if len(b) < 1 || len(b) > 2 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 1 && n <= hi
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// hasFourDigits reports whether b holds four digits in a row.
func hasFourDigits(b []byte) bool {
	run := 0
	for _, c := range b {
		if run++; !isDigit(c) {
			run = 0
		} else if run == 4 {
			return true
		}
	}
	return false
}

package urlnorm

import (
	"bytes"
	"strings"
	"sync"
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

// Scope decides whether a normalised URL is in a crawl's scope. Its fields
// must not change, and the Scope must not be copied, after the first call to
// Allow; Allow is safe for concurrent use. A nil *Scope allows everything.
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
	// Filter, if set, has the last word on a URL the rest allows (a
	// crawl's URL rules: urlrules.Rules.Allow).
	Filter func(u []byte) bool

	once sync.Once
	c    compiledScope
}

// compiledScope is the lookup form of a Scope's fields.
type compiledScope struct {
	suffixes []string // "."+suffix, and the suffix itself in exact
	exact    map[string]struct{}
	deny     map[string]struct{}
	exts     map[string]struct{} // lower-case, no dot
	maxSegs  int
}

func (s *Scope) compile() {
	c := compiledScope{maxSegs: s.MaxPathSegments}
	if c.maxSegs <= 0 {
		c.maxSegs = DefaultMaxPathSegments
	}
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

// Allow reports whether the normalised URL u is in scope: its host matches
// HostSuffixes (if any) and is not in DenyHosts, its last path segment's
// extension is not in SkipExts, its path has at most MaxPathSegments
// segments, and Filter (if set) accepts it. A URL without "://" is out of
// scope.
func (s *Scope) Allow(u []byte) bool {
	if s == nil {
		return true
	}
	s.once.Do(s.compile)
	c := &s.c
	i := bytes.Index(u, []byte("://"))
	if i < 0 {
		return false
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
			return false
		}
	}
	if c.exact != nil && !c.hostInSuffixes(host) {
		return false
	}
	path := rest[end:]
	if q := bytes.IndexByte(path, '?'); q >= 0 {
		path = path[:q]
	}
	if len(path) > c.maxSegs && bytes.Count(path, []byte{'/'}) > c.maxSegs {
		return false
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
				return false
			}
		}
	}
	return s.Filter == nil || s.Filter(u)
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

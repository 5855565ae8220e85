package synth

import (
	"math"
	"math/bits"
	"slices"
	"strconv"
	"time"
)

// A web with Options.Changes changes over time. Each page node (the front
// page, /p/N.html and the sitemap's orphans) of a host without a hostile
// role has a change rate λ (changes per day), drawn from the seed; its
// changes are a Poisson process of rate λ from the epoch on, the model of
// Cho and Garcia-Molina ("Effective page refresh policies for Web
// crawlers", ACM TODS 2003, and already in the VLDB 2000 paper below: "a
// Poisson process predicts the observed data very well"). The version of a
// page at time t is the number of its changes in (epoch, t]; version 0 is
// the page of a static web, byte for byte.
//
// # Where the rates come from
//
// Cho and Garcia-Molina, "The evolution of the Web and implications for an
// incremental crawler", VLDB 2000, fetched 720,000 pages (3,000 from each of
// 270 sites) every day for four months (February to June 1999) and counted a
// change whenever a page's checksum changed. A page's average change
// interval is the study's length over its number of changes. The figures
// used here:
//
//   - Sites per domain (their Table 1): com 132, edu 78, netorg 30, gov 30.
//     Each websim host draws its Domain with these shares (domainSites).
//     websim's hosts are named after countries (h12.us.test), so the
//     domain is a property of the host drawn from the seed, not read from
//     its name.
//   - Share of all pages by average change interval (their Figure 2(a)):
//     ≤ 1 day 23%, 1 day – 1 week 15%, 1 week – 1 month 16%, 1 – 4 months
//     16%, > 4 months 30% (overallShares). The 23% agrees with the text
//     ("more than 20% of pages had changed whenever we visited them") and
//     with Fetterly, Manasse, Najork and Wiener (WWW 2003), who summarise the
//     study as "40% of all web pages in their set changed within a week"
//     (23% + 15% = 38%). The five bars are read from the figure as it is
//     usually quoted; the copy of the paper checked for this code held only
//     its text, so the middle three are known to about ±2 points.
//   - Domains (their Figure 2(b), given in the text): "more than 40% of
//     pages in the com domain changed every day, while less than 10% of the
//     pages in other domains changed at that frequency", and in edu and gov
//     "more than 50% of pages ... did not change at all for 4 months".
//     Also: 50% of the com domain changed within 11 days, of gov within
//     almost 4 months. The per-domain bars were not at hand; domainShares
//     are fitted to these statements so that, weighted by the sites of
//     Table 1, they give Figure 2(a) within a point (TestChangeShares).
//
// Within a class the mean interval is log-uniform between the class's
// bounds (changeClasses). The paper sampled once a day, so it cannot see
// below a day: the ≤ 1 day class is given intervals from an hour to a day,
// a choice of this code. The > 4 months class holds the pages that did not
// change during the study; websim makes them static (rate 0), which over a
// benchmark of a few simulated months cannot be told from a slow rate.
//
// # The schedule
//
// Nothing is stored per page: the changes of page (h, n) are a function of
// (seed, h, n). Time is cut into days from the epoch and days into blocks
// of 2^changeLevels (65,536) days. The number of changes in a block is
// Poisson(λ·65,536), drawn from a hash of (seed, h, n, block); it is split
// between the block's two halves by a Binomial(count, ½) draw keyed by the
// node, and so on down to single days, which is exactly a Poisson process
// sampled day by day (a normal approximation is used for counts above
// 1,024). A day's changes fall at whole seconds drawn uniformly in the day
// (whole seconds, so that Last-Modified, which has one-second resolution,
// is the time of the change itself). The version at t walks one path from
// the block's root to t's day: 16 draws, whatever t (BenchmarkVersion).
const (
	changeLevels = 16
	blockDays    = 1 << changeLevels
	daySeconds   = 86400
)

// Domain is the kind of site a host is, for its pages' change rates: the
// domains of Cho and Garcia-Molina's study.
type Domain uint8

// The domains. DomainNone is a host that never changes: every host of a web
// without Options.Changes, and the hostile profile's role hosts.
const (
	DomainNone Domain = iota
	DomainCom
	DomainEdu
	DomainNetOrg // .net and .org, counted together in the study
	DomainGov
	domainCount
)

var domainNames = [...]string{"", "com", "edu", "netorg", "gov"}

// String names the domain ("" for none).
func (d Domain) String() string {
	if int(d) < len(domainNames) {
		return domainNames[d]
	}
	return "domain" + strconv.Itoa(int(d))
}

// domainSites is Table 1 of Cho and Garcia-Molina (VLDB 2000): the number
// of the 270 sites in each domain. Hosts draw their domain with these weights.
var domainSites = [domainCount]int{DomainCom: 132, DomainEdu: 78, DomainNetOrg: 30, DomainGov: 30}

// The change classes: a page's average change interval.
const (
	classDay    = iota // ≤ 1 day
	classWeek          // 1 day – 1 week
	classMonth         // 1 week – 1 month
	class4Month        // 1 – 4 months
	classStatic        // > 4 months: no change in the study's four months
	classCount
)

// changeClasses are the bounds of each class's mean change interval, in
// days (log-uniform between them); the static class has none.
var changeClasses = [classCount]struct{ lo, hi float64 }{
	classDay:    {1.0 / 24, 1},
	classWeek:   {1, 7},
	classMonth:  {7, 30},
	class4Month: {30, 120},
}

// overallShares is Figure 2(a) of Cho and Garcia-Molina (VLDB 2000): the
// share of all pages in each change class.
var overallShares = [classCount]float64{0.23, 0.15, 0.16, 0.16, 0.30}

// domainShares are the shares of each class within a domain: fitted to
// the study's statements about domains (see the comment at the top of this
// file) and to overallShares; each row sums to 1.
var domainShares = [domainCount][classCount]float64{
	DomainCom:    {0.41, 0.17, 0.16, 0.14, 0.12},
	DomainEdu:    {0.05, 0.12, 0.14, 0.16, 0.53},
	DomainNetOrg: {0.08, 0.18, 0.25, 0.25, 0.24},
	DomainGov:    {0.06, 0.10, 0.13, 0.15, 0.56},
}

// DefaultEpoch is the default Options.Epoch: the simulated time at which
// every page of a changing web is at version 0.
var DefaultEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// hash tags of the change model (apart from those of web.go; tagLeaf+1,
// tagLeaf+2 and tagPage+100 are taken).
const (
	tagDomain = 200 + iota
	tagRate
	tagChange
	tagUpdate
	tagETag
	tagNewsETag
)

// pickDomain draws host i's domain.
func (w *Web) pickDomain(i int) Domain {
	total := 0
	for _, n := range domainSites {
		total += n
	}
	k := int(hash3(w.opt.Seed, tagDomain, uint64(i), 0) % uint64(total))
	for d, n := range domainSites {
		if k < n {
			return Domain(d)
		}
		k -= n
	}
	return DomainCom
}

// changes reports whether page node n of host h has a change schedule.
func (w *Web) changes(h, n int) bool {
	host := &w.hosts[h]
	return host.Domain != DomainNone && n >= 0 && n < host.Pages+host.Orphans
}

// ChangeRate returns the change rate of page n of host h (page 0 is the
// front page; orphans count), in changes per day: 0 for a page that never
// changes, for a page the host does not have, and for every page of a web
// without Options.Changes.
func (w *Web) ChangeRate(h, n int) float64 {
	if h < 0 || h >= len(w.hosts) || !w.changes(h, n) {
		return 0
	}
	return w.rate(h, n)
}

// rate draws the change rate of a page that has a schedule.
func (w *Web) rate(h, n int) float64 {
	r := newRNG(hash3(w.opt.Seed, tagRate, uint64(h), uint64(n)))
	shares := &domainShares[w.hosts[h].Domain]
	u := r.float()
	class := classStatic
	for c := range classStatic {
		if u < shares[c] {
			class = c
			break
		}
		u -= shares[c]
	}
	if class == classStatic {
		return 0
	}
	b := changeClasses[class]
	interval := b.lo * math.Pow(b.hi/b.lo, r.float())
	return 1 / interval
}

// Version returns the version of page n of host h at time t: the number of
// its changes in (epoch, t]. It is 0 before the epoch and for pages that
// never change, and never decreases as t grows.
func (w *Web) Version(h, n int, t time.Time) int {
	v, _ := w.PageState(h, n, t)
	return v
}

// LastChange returns the time of the last change of page n of host h at or
// before t: the epoch if it has not changed by then.
func (w *Web) LastChange(h, n int, t time.Time) time.Time {
	_, last := w.PageState(h, n, t)
	return last
}

// PageState returns Version and LastChange of page n of host h at t at
// the cost of one of them.
func (w *Web) PageState(h, n int, t time.Time) (version int, lastChange time.Time) {
	epoch := w.opt.Epoch
	if h < 0 || h >= len(w.hosts) || !w.changes(h, n) {
		return 0, epoch
	}
	lam := w.rate(h, n)
	if lam == 0 || !t.After(epoch) {
		return 0, epoch
	}
	s := sinceEpoch(epoch, t)
	v, last := changesUpTo(w.pageKey(h, n), lam, s)
	return v, epoch.Add(time.Duration(last) * time.Second)
}

// ChangeTime returns the time of change number v (v ≥ 1) of page n of host
// h, when version v began; ok is false if the page never gets a version v.
func (w *Web) ChangeTime(h, n, v int) (t time.Time, ok bool) {
	if v < 1 || h < 0 || h >= len(w.hosts) || !w.changes(h, n) {
		return time.Time{}, false
	}
	lam := w.rate(h, n)
	if lam == 0 {
		return time.Time{}, false
	}
	s, ok := nthChange(w.pageKey(h, n), lam, v)
	if !ok {
		return time.Time{}, false
	}
	return w.opt.Epoch.Add(time.Duration(s) * time.Second), true
}

// sinceEpoch returns the whole seconds from epoch to t, t after epoch,
// saturating at the largest time.Duration.
func sinceEpoch(epoch, t time.Time) int64 {
	return int64(t.Sub(epoch) / time.Second)
}

func (w *Web) pageKey(h, n int) uint64 { return hash3(w.opt.Seed, tagChange, uint64(h), uint64(n)) }

// nodeKey keys the draw of block b's node (level, i): level changeLevels+1
// is the block's count, 1…changeLevels split a node of 2^level days, and
// 0 places the changes of day i.
func nodeKey(pk uint64, b, level, i int) uint64 {
	return hash3(pk, uint64(b)<<6|uint64(level), uint64(i), 0)
}

// blockCount returns the number of changes in block b of a page of rate lam.
func blockCount(pk uint64, lam float64, b int) int {
	r := newRNG(nodeKey(pk, b, changeLevels+1, 0))
	return poisson(&r, lam*blockDays)
}

// halve returns how many of a node's c changes fall in its first half.
func halve(pk uint64, b, level, i, c int) int {
	r := newRNG(nodeKey(pk, b, level, i))
	return binomialHalf(&r, c)
}

// dayOffsets appends the seconds into day d (absolute, from the epoch) at
// which its c changes fall, each in [1, daySeconds], in draw order.
func dayOffsets(dst []int32, pk uint64, b, d, c int) []int32 {
	r := newRNG(nodeKey(pk, b, 0, d))
	for range c {
		dst = append(dst, int32(1+r.next()%daySeconds))
	}
	return dst
}

// maxBlocks bounds the blocks a schedule walks (4 × 179 years: past the
// largest time.Duration from the epoch).
const maxBlocks = 4

// changesUpTo returns how many changes a page with key pk and rate lam has
// in (0, s] seconds from the epoch, and the second of the last (0 if none).
// Day D holds the seconds (D·86400, (D+1)·86400].
func changesUpTo(pk uint64, lam float64, s int64) (n int, last int64) {
	if s <= 0 {
		return 0, 0
	}
	day := (s - 1) / daySeconds
	off := int32(s - day*daySeconds)
	b := int(day >> changeLevels)
	if b >= maxBlocks {
		b, day, off = maxBlocks-1, maxBlocks*blockDays-1, daySeconds
	}
	d := int(day) & (blockDays - 1)
	prevBlock := -1 // the latest earlier block with changes
	for bb := range b {
		if c := blockCount(pk, lam, bb); c > 0 {
			n += c
			prevBlock = bb
		}
	}
	// Walk from the root to day d, counting the changes of the halves to
	// its left and keeping the nearest of those that has any.
	c := blockCount(pk, lam, b)
	i := 0
	sibLevel, sibIndex, sibCount := -1, 0, 0
	level := changeLevels
	for ; level > 0 && c > 0; level-- {
		left := halve(pk, b, level, i, c)
		if d>>(level-1)&1 == 0 {
			c, i = left, 2*i
			continue
		}
		n += left
		if left > 0 {
			sibLevel, sibIndex, sibCount = level-1, 2*i, left
		}
		c, i = c-left, 2*i+1
	}
	if level == 0 && c > 0 {
		var buf [64]int32
		best := int32(0)
		for _, o := range dayOffsets(buf[:0], pk, b, d, c) {
			if o <= off {
				n++
				best = max(best, o)
			}
		}
		if best > 0 {
			return n, (int64(b)*blockDays+int64(d))*daySeconds + int64(best)
		}
	}
	switch {
	case sibLevel >= 0:
		return n, latest(pk, b, sibLevel, sibIndex, sibCount)
	case prevBlock >= 0:
		return n, latest(pk, prevBlock, changeLevels, 0, blockCount(pk, lam, prevBlock))
	}
	return n, 0
}

// latest returns the second (from the epoch) of the last change in node
// (level, i) of block b, which has c > 0 changes.
func latest(pk uint64, b, level, i, c int) int64 {
	for ; level > 0; level-- {
		left := halve(pk, b, level, i, c)
		if c > left {
			c, i = c-left, 2*i+1
		} else {
			c, i = left, 2*i
		}
	}
	var buf [64]int32
	best := slices.Max(dayOffsets(buf[:0], pk, b, i, c))
	return (int64(b)*blockDays+int64(i))*daySeconds + int64(best)
}

// nthChange returns the second (from the epoch) of change number v ≥ 1.
func nthChange(pk uint64, lam float64, v int) (int64, bool) {
	for b := range maxBlocks {
		c := blockCount(pk, lam, b)
		if v > c {
			v -= c
			continue
		}
		i := 0
		for level := changeLevels; level > 0; level-- {
			left := halve(pk, b, level, i, c)
			if v <= left {
				c, i = left, 2*i
			} else {
				v, c, i = v-left, c-left, 2*i+1
			}
		}
		var buf [64]int32
		offs := dayOffsets(buf[:0], pk, b, i, c)
		slices.Sort(offs)
		return (int64(b)*blockDays+int64(i))*daySeconds + int64(offs[v-1]), true
	}
	return 0, false
}

// poisson draws a Poisson variate of the given mean: by inversion below a
// mean of 40, and from the normal approximation above.
func poisson(r *rng, mean float64) int {
	if mean <= 0 {
		return 0
	}
	if mean >= 40 {
		return max(0, int(math.Round(mean+math.Sqrt(mean)*r.norm())))
	}
	p := math.Exp(-mean)
	sum, k, u := p, 0, r.float()
	for u > sum && k < 1000 {
		k++
		p *= mean / float64(k)
		sum += p
	}
	return k
}

// binomialHalf draws a Binomial(c, ½) variate: exactly (as the number of
// set bits among c random ones) up to 1,024, from the normal approximation
// above.
func binomialHalf(r *rng, c int) int {
	if c <= 0 {
		return 0
	}
	if c > 1024 {
		k := int(math.Round(float64(c)/2 + math.Sqrt(float64(c))/2*r.norm()))
		return min(max(k, 0), c)
	}
	k := 0
	for ; c >= 64; c -= 64 {
		k += bits.OnesCount64(r.next())
	}
	if c > 0 {
		k += bits.OnesCount64(r.next() & (1<<c - 1))
	}
	return k
}

// ETag returns the strong entity tag (quoted) of version v of page n of
// host h.
func (w *Web) ETag(h, n, v int) string {
	return etag(hash3(w.opt.Seed, tagETag, uint64(h), uint64(n)), v)
}

// newsETag returns the entity tag of news page v of page n of host h.
func (w *Web) newsETag(h, n, v int) string {
	return etag(hash3(w.opt.Seed, tagNewsETag, uint64(h), uint64(n)), v)
}

func etag(key uint64, v int) string {
	const hex = "0123456789abcdef"
	var b [40]byte
	out := append(b[:0], '"')
	k := mix64(key ^ mix64(uint64(v)+1))
	for s := 60; s >= 0; s -= 4 {
		out = append(out, hex[k>>s&0xf])
	}
	out = append(out, '-')
	out = strconv.AppendInt(out, int64(v), 10)
	return string(append(out, '"'))
}

// NewsPath returns the path of the page that version v ≥ 1 of page n links
// to: /news/N/V, a leaf of the same host that exists from version v on and
// links back to page n.
func NewsPath(n, v int) string {
	return "/news/" + strconv.Itoa(n) + "/" + strconv.Itoa(v)
}

// PageNumber returns the page node whose content a GET of path?query on
// host h serves ("/", "/index.html", "/p/N.html" and their print and
// session variants), so that a URL of the truth file can be handed to
// Version; ok is false for anything else.
func (w *Web) PageNumber(h int, path string) (n int, ok bool) {
	if h < 0 || h >= len(w.hosts) {
		return 0, false
	}
	host := &w.hosts[h]
	switch path {
	case "/":
		return 0, true
	case "/index.html":
		return 0, w.opt.Profile != Clean
	}
	s, ok := cutAffixes(path, "/p/", ".html")
	if !ok {
		return 0, false
	}
	if n, ok = canonicalInt(s); !ok || n < 1 || n >= host.Pages+host.Orphans {
		return 0, false
	}
	return n, true
}

// cutAffixes returns s without prefix and suffix, if it has both.
func cutAffixes(s, prefix, suffix string) (string, bool) {
	if len(s) < len(prefix)+len(suffix) || s[:len(prefix)] != prefix || s[len(s)-len(suffix):] != suffix {
		return "", false
	}
	return s[len(prefix) : len(s)-len(suffix)], true
}

// canonicalInt parses a non-negative decimal without sign or leading zeros,
// of at most 9 digits.
func canonicalInt(s string) (int, bool) {
	if s == "" || len(s) > 9 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

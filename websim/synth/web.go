// Package synth is websim's model of a synthetic web: a deterministic
// function from Options to hosts, pages, links and HTTP responses, with
// pages generated on the fly so that memory does not depend on page count.
// With Options.Changes the web changes over time: responses are also a
// function of a simulated time, on a schedule drawn from the seed
// (changes.go).
//
// The same Options give the same web byte for byte. Everything here is pure:
// the HTTP, DNS and statistics around it live in package websim.
package synth

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/meridian-crawler/meridian/websim/geodb"
)

// Role is what a host of the hostile profile does to its visitors.
type Role uint8

// The hostile roles; host i (1 ≤ i ≤ HostileRoles) of a hostile web has role i.
const (
	RoleNone      Role = iota
	RoleCalendar       // an infinite calendar: /cal/YYYY/MM links to the next and previous months
	RoleDeep           // unbounded path depth: /deep/a/ links to /deep/a/a/ and so on
	RoleManyLinks      // /many.html has 10,000 links
	RoleDrip           // HTML pages drip out a few bytes at a time
	RoleHuge           // /huge.html is 1 GiB
	RoleBomb           // /bomb.html is a gzip bomb: ~1 MiB that inflates to 1 GiB
	RoleWrongType      // HTML served as image/jpeg, binary served as text/html
	RoleBroken         // broken HTML: unclosed and unquoted tags, stray bytes, invalid UTF-8
	RoleBlackhole      // accepts connections and never answers
	RoleChain          // a 30-hop redirect chain
	roleCount
)

var roleNames = [...]string{"", "calendar", "deep", "many-links", "drip", "huge", "gzip-bomb", "wrong-type", "broken-html", "blackhole", "redirect-chain"}

// String names the role ("" for none).
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "role" + strconv.Itoa(int(r))
}

// RobotsKind is what a host's robots.txt says.
type RobotsKind uint8

// The robots.txt variants.
const (
	RobotsAllowAll    RobotsKind = iota // 200, allows everything (the clean profile)
	RobotsNormal                        // 200, disallows /private/ and /cgi-bin/
	RobotsPartial                       // as Normal, plus Disallow: /p/1 with Allow: /p/1.html
	RobotsDelay                         // as Normal, with a Crawl-delay
	RobotsMissing                       // 404: everything allowed
	RobotsFlaky                         // 503 for the first RobotsFailures requests, then Normal
	RobotsDisallowAll                   // Disallow: /
)

// RobotsFailures is how many robots.txt requests a RobotsFlaky host answers with 503.
const RobotsFailures = 2

// Charset is the encoding of a host's pages.
type Charset uint8

// The charsets pages are served in.
const (
	UTF8 Charset = iota
	Latin1
	Windows1252
	ShiftJIS
	charsetCount
)

var charsetNames = [...]string{"utf-8", "iso-8859-1", "windows-1252", "shift_jis"}

// String returns the charset's IANA name.
func (c Charset) String() string { return charsetNames[c] }

// sessionParams are the session-id parameter names a session host uses.
var sessionParams = [...]string{"sid", "PHPSESSID", "jsessionid", "sessionid"}

// SessionParams returns the query parameter names that websim uses for
// session ids (a good normaliser strips them).
func SessionParams() []string { return append([]string(nil), sessionParams[:]...) }

// Host is one host of the web and its features.
type Host struct {
	Index      int
	Name       string // e.g. "h12.fr.test"
	IP         netip.Addr
	City       geodb.City
	Pages      int // pages in the link tree, front page included
	Orphans    int // pages listed only in the sitemap (/p/N.html for N ≥ Pages)
	Role       Role
	Robots     RobotsKind
	CrawlDelay int  // seconds, for RobotsDelay
	Sitemap    bool // robots.txt names /sitemap.xml (and maybe a missing one)
	SitemapBad bool // robots.txt also names /sitemap-missing.xml, a 404
	Session    bool // on-host links carry a session id
	SessionKey string
	Base       bool // pages carry <base href=".../p/">
	Charset    Charset
	CharsetHdr bool // charset in the Content-Type header as well as in <meta>
	Loop       bool // /loop/a ↔ /loop/b redirect loop linked from the front page
	IndexDup   bool // front page links /index.html, the same content as /
	// Domain is the kind of site whose change rates the host's pages
	// follow (changes.go); DomainNone, its pages never change, unless
	// Options.Changes is set.
	Domain Domain
}

// Web is a synthetic web. It is immutable and safe for concurrent use.
type Web struct {
	opt      Options
	hosts    []Host
	ips      []netip.Addr
	ipCity   []int // index into geodb.Cities
	byIP     map[netip.Addr][]int
	portSfx  string // ":port" or ""
	fillers  [charsetCount]filler
	nodeBase []int   // prefix sums of Pages+Orphans, for truth
	tops     webTops // the realistic link graph's per-host constants
	// mirrorOf is each host's mirror host and mirrored the hosts each
	// host mirrors (realistic webs only; neardup.go).
	mirrorOf []int32
	mirrored [][]int32
}

// New builds the web described by o (defaults filled in).
func New(o Options) (*Web, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.Epoch = o.Epoch.UTC()
	w := &Web{opt: o}
	if o.Port != 80 {
		w.portSfx = ":" + strconv.Itoa(o.Port)
	}
	w.ips = make([]netip.Addr, o.IPs)
	w.ipCity = make([]int, o.IPs)
	w.byIP = make(map[netip.Addr][]int, o.IPs)
	for i := range w.ips {
		ip, _ := ipAt(o.IPBase, i)
		w.ips[i] = ip
		w.ipCity[i] = pickCity(hash3(o.Seed, tagIPCity, uint64(i), 0))
	}
	w.hosts = make([]Host, o.Hosts)
	w.nodeBase = make([]int, o.Hosts+1)
	for i := range w.hosts {
		w.hosts[i] = w.makeHost(i)
		for _, v := range w.opt.Overrides {
			if v.Host != i {
				continue
			}
			if v.Pages > 0 {
				w.hosts[i].Pages = v.Pages
			}
			if v.CrawlDelay > 0 {
				w.hosts[i].Robots, w.hosts[i].CrawlDelay = RobotsDelay, v.CrawlDelay
			}
		}
		h := &w.hosts[i]
		if o.Changes && h.Role == RoleNone {
			h.Domain = w.pickDomain(i)
		}
		w.byIP[h.IP] = append(w.byIP[h.IP], i)
		w.nodeBase[i+1] = w.nodeBase[i] + h.Pages + h.Orphans
	}
	if o.Profile == Realistic {
		w.makeWebTops()
		w.makeMirrors()
	}
	for c := range charsetCount {
		w.fillers[c] = makeFiller(c)
	}
	return w, nil
}

// Options returns the options the web was built with, defaults filled in.
func (w *Web) Options() Options { return w.opt }

// Hosts returns the hosts, indexed by Host.Index. Callers must not modify it.
func (w *Web) Hosts() []Host { return w.hosts }

// IPs returns the loopback addresses the web's hosts use, in order.
func (w *Web) IPs() []netip.Addr { return w.ips }

// HostsOn returns the indexes of the hosts on ip.
func (w *Web) HostsOn(ip netip.Addr) []int { return w.byIP[ip] }

// CityOfIP returns the city websim places ip in.
func (w *Web) CityOfIP(ip netip.Addr) (geodb.City, bool) {
	for i, a := range w.ips {
		if a == ip {
			return geodb.Cities[w.ipCity[i]], true
		}
	}
	return geodb.City{}, false
}

// GeoEntries returns one geodb entry per address, for the GeoIP database.
func (w *Web) GeoEntries() []geodb.Entry {
	out := make([]geodb.Entry, len(w.ips))
	for i, ip := range w.ips {
		out[i] = geodb.Entry{IP: ip, City: geodb.Cities[w.ipCity[i]]}
	}
	return out
}

// Lookup returns the index of the host with the given name (case-insensitive,
// without port or trailing dot).
func (w *Web) Lookup(name string) (int, bool) {
	name = strings.TrimSuffix(name, ".")
	if len(name) < 2 || (name[0] != 'h' && name[0] != 'H') {
		return 0, false
	}
	end := 1
	for end < len(name) && name[end] >= '0' && name[end] <= '9' {
		end++
	}
	if end == 1 || end-1 > 7 || (name[1] == '0' && end > 2) {
		return 0, false
	}
	i, err := strconv.Atoi(name[1:end])
	if err != nil || i >= len(w.hosts) {
		return 0, false
	}
	if !strings.EqualFold(w.hosts[i].Name, name) {
		return 0, false
	}
	return i, true
}

// ResolveIP returns the address of the host with the given name.
func (w *Web) ResolveIP(name string) (netip.Addr, bool) {
	i, ok := w.Lookup(name)
	if !ok {
		return netip.Addr{}, false
	}
	return w.hosts[i].IP, true
}

// Origin returns "http://NAME[:port]" for host h.
func (w *Web) Origin(h int) string { return "http://" + w.hosts[h].Name + w.portSfx }

// FrontURL returns the front page URL of host h.
func (w *Web) FrontURL(h int) string { return w.Origin(h) + "/" }

// hash tags, one per kind of decision.
const (
	tagIPCity = iota + 1
	tagHostIP
	tagHost
	tagPage
	tagSession
	tagFill
	tagLeaf
)

// pickCity draws a city: a region by RegionWeights, then a city in it.
func pickCity(key uint64) int {
	r := newRNG(key)
	u := r.float()
	region := geodb.RegionNames[len(geodb.RegionNames)-1]
	for i, wgt := range geodb.RegionWeights {
		if u < wgt {
			region = geodb.RegionNames[i]
			break
		}
		u -= wgt
	}
	var idx []int
	for i, c := range geodb.Cities {
		if c.Region == region {
			idx = append(idx, i)
		}
	}
	return idx[r.intn(len(idx))]
}

func (w *Web) makeHost(i int) Host {
	o := w.opt
	ipi := int(hash3(o.Seed, tagHostIP, uint64(i), 0) % uint64(len(w.ips)))
	city := geodb.Cities[w.ipCity[ipi]]
	h := Host{Index: i, IP: w.ips[ipi], City: city, Charset: UTF8, Robots: RobotsAllowAll}
	h.Name = "h" + strconv.Itoa(i) + "." + strings.ToLower(city.CountryISO) + ".test"
	r := newRNG(hash3(o.Seed, tagHost, uint64(i), 0))
	// Pages per host: lognormal with sigma 1 and mean o.Pages, capped.
	const sigma = 1.0
	mu := math.Log(float64(o.Pages)) - sigma*sigma/2
	n := int(math.Round(math.Exp(mu + sigma*r.norm())))
	h.Pages = max(1, min(n, 20*o.Pages+10))
	if o.Profile == Clean {
		return h
	}
	switch u := r.float(); {
	case u < 0.55:
		h.Robots = RobotsNormal
	case u < 0.70:
		h.Robots = RobotsPartial
	case u < 0.82:
		h.Robots = RobotsDelay
		h.CrawlDelay = 1 + r.intn(2)
	case u < 0.91:
		h.Robots = RobotsMissing
	case u < 0.96:
		h.Robots = RobotsFlaky
	default:
		h.Robots = RobotsDisallowAll
	}
	if h.Robots != RobotsMissing && r.chance(0.2) {
		h.Sitemap = true
		h.SitemapBad = r.chance(0.3)
		h.Orphans = 1 + r.intn(3)
	}
	h.Session = r.chance(0.1)
	h.SessionKey = sessionParams[r.intn(len(sessionParams))]
	h.Base = r.chance(0.1)
	switch u := r.float(); {
	case u < 0.70:
	case u < 0.85:
		h.Charset = Latin1
	case u < 0.95:
		h.Charset = Windows1252
	default:
		h.Charset = ShiftJIS
	}
	h.CharsetHdr = r.chance(0.5)
	h.Loop = r.chance(0.05)
	h.IndexDup = r.chance(0.2)
	if o.Profile == Hostile && i >= 1 && i <= HostileRoles {
		h.Role = Role(i)
		// Role hosts are plain otherwise, so that their trap is what they test.
		h.Robots, h.CrawlDelay, h.Sitemap, h.SitemapBad, h.Orphans = RobotsNormal, 0, false, false, 0
		h.Session, h.Base, h.Loop = false, false, false
	}
	return h
}

// sessionID returns the session id value number k of host h.
func (w *Web) sessionID(h, k int) string {
	return fmt.Sprintf("%016x", hash3(w.opt.Seed, tagSession, uint64(h), uint64(k)))
}

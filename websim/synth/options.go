package synth

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Profile selects how much of the real web's mess a Web contains.
type Profile uint8

// The profiles, each a superset of the one before.
const (
	// Clean has well-formed pages, absolute and root-relative links, an
	// allow-all robots.txt and nothing else.
	Clean Profile = iota
	// Realistic adds robots rules, crawl-delays, sitemaps, redirects, error
	// pages, non-HTML files, charsets, relative links, fragments, session ids,
	// <base href>, rel=nofollow, duplicate content and near-duplicate
	// pages (printer-friendly copies and mirrors, neardup.go). Its link
	// graph follows published measurements of the web's: in-degrees a power
	// law of exponent 2.1, 85% of links within their host, 40% of the
	// others to a front page (webgraph.go). The clean and hostile profiles
	// keep an older, simpler graph, and have no near-duplicate pages.
	Realistic
	// Hostile adds to the realistic features (bar the realistic graph and
	// near-duplicates) spider traps, a 10,000-link page, a slow drip, an
	// oversized body, a gzip bomb, wrong content types, broken HTML and a
	// host that accepts connections and never answers.
	Hostile
)

var profileNames = [...]string{Clean: "clean", Realistic: "realistic", Hostile: "hostile"}

// String returns the profile's flag name.
func (p Profile) String() string {
	if int(p) < len(profileNames) {
		return profileNames[p]
	}
	return fmt.Sprintf("Profile(%d)", p)
}

// ParseProfile parses "clean", "realistic" or "hostile".
func ParseProfile(s string) (Profile, error) {
	for i, n := range profileNames {
		if strings.EqualFold(s, n) {
			return Profile(i), nil
		}
	}
	return 0, fmt.Errorf("synth: unknown profile %q (want clean, realistic or hostile)", s)
}

// Limits on Options, so that a typo cannot ask for an absurd web.
const (
	MaxHosts = 1 << 20 // hosts in one web
	MaxIPs   = 1 << 16 // loopback addresses
	MaxPages = 1 << 20 // mean pages per host
	// HostileRoles is the number of hosts that carry a hostile role; a hostile
	// web needs at least HostileRoles+2 hosts.
	HostileRoles = int(roleCount) - 1
)

// Options describe a synthetic web. The zero value is not valid; start from
// DefaultOptions.
type Options struct {
	// Hosts is the number of hosts. Default 100.
	Hosts int
	// Pages is the mean number of pages per host (heavy-tailed per host).
	// Default 50.
	Pages int
	// Seed selects the web: the same Options give the same web, byte for byte.
	Seed uint64
	// IPs is the number of loopback addresses the hosts are spread over.
	// Default 16 (capped at Hosts).
	IPs int
	// IPBase is the first address; address i is IPBase + i, skipping .0 and
	// .255 in the last octet. Must be in 127.0.0.0/8. Default 127.77.0.1.
	IPBase netip.Addr
	// Port is the HTTP port written into URLs (omitted when 80). Default 80.
	Port int
	// Profile selects the features. Default Clean.
	Profile Profile
	// PageBytes is the mean size of an HTML page in bytes. Default 10,000.
	PageBytes int
	// Overrides reshape single hosts, for tests that need a host of a
	// given size or pace; the rest of the web is as the seed makes it.
	Overrides []Override
	// Changes makes the web change over time: every page gets a change
	// rate drawn from the published distribution of changes.go, and its
	// body, links, ETag and Last-Modified follow a schedule of simulated
	// time (RespondAt, Version). Default false: a static web, byte for
	// byte as without the option.
	Changes bool
	// Epoch is the simulated time at which every page is at version 0
	// (RespondAt and Respond at the epoch serve the static web). Default
	// DefaultEpoch, 2026-01-01T00:00:00Z.
	Epoch time.Time
}

// Override reshapes host number Host of a web.
type Override struct {
	Host int
	// Pages, if positive, is the number of pages in the host's link tree.
	Pages int
	// CrawlDelay, if positive, is the Crawl-delay (seconds) its robots.txt
	// gives every user-agent (its robots kind becomes RobotsDelay).
	CrawlDelay int
}

// DefaultOptions returns Options with every default filled in.
func DefaultOptions() Options {
	return Options{Hosts: 100, Pages: 50, IPs: 16, IPBase: netip.AddrFrom4([4]byte{127, 77, 0, 1}), Port: 80, PageBytes: 10_000, Epoch: DefaultEpoch}
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	d := DefaultOptions()
	if o.Hosts == 0 {
		o.Hosts = d.Hosts
	}
	if o.Pages == 0 {
		o.Pages = d.Pages
	}
	if o.IPs == 0 {
		o.IPs = min(d.IPs, o.Hosts)
	}
	if !o.IPBase.IsValid() {
		o.IPBase = d.IPBase
	}
	if o.Port == 0 {
		o.Port = d.Port
	}
	if o.PageBytes == 0 {
		o.PageBytes = d.PageBytes
	}
	if o.Epoch.IsZero() {
		o.Epoch = d.Epoch
	}
}

// Validate reports every problem with o at once.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("synth: "+format, args...)) }
	if o.Hosts < 1 || o.Hosts > MaxHosts {
		bad("hosts must be in [1, %d], got %d", MaxHosts, o.Hosts)
	}
	if o.Pages < 1 || o.Pages > MaxPages {
		bad("pages must be in [1, %d], got %d", MaxPages, o.Pages)
	}
	if o.IPs < 1 || o.IPs > MaxIPs {
		bad("ips must be in [1, %d], got %d", MaxIPs, o.IPs)
	}
	if !o.IPBase.Is4() || o.IPBase.As4()[0] != 127 {
		bad("ip base must be an IPv4 address in 127.0.0.0/8, got %v", o.IPBase)
	} else if o.IPs >= 1 && o.IPs <= MaxIPs {
		if _, ok := ipAt(o.IPBase, o.IPs-1); !ok {
			bad("%d addresses from %v run out of 127.0.0.0/8", o.IPs, o.IPBase)
		}
	}
	if o.Port < 1 || o.Port > 65535 {
		bad("port must be in [1, 65535], got %d", o.Port)
	}
	if o.Profile > Hostile {
		bad("unknown profile %d", o.Profile)
	}
	if o.Profile == Hostile && o.Hosts < HostileRoles+2 {
		bad("the hostile profile needs at least %d hosts, got %d", HostileRoles+2, o.Hosts)
	}
	for _, v := range o.Overrides {
		if v.Host < 0 || v.Host >= o.Hosts || v.Pages < 0 || v.Pages > 100*MaxPages || v.CrawlDelay < 0 || v.CrawlDelay > 3600 {
			bad("override %+v: host must be in [0, %d), pages in [0, %d], crawl-delay in [0, 3600]", v, o.Hosts, 100*MaxPages)
		}
	}
	if o.PageBytes < 512 || o.PageBytes > 1<<20 {
		bad("page bytes must be in [512, %d], got %d", 1<<20, o.PageBytes)
	}
	if y := o.Epoch.Year(); !o.Epoch.IsZero() && (y < 1970 || y > 9000) {
		bad("epoch must be in the years 1970 to 9000, got %v", o.Epoch)
	}
	return errors.Join(errs...)
}

// ipAt returns base + i, skipping .0 and .255 in the last octet.
func ipAt(base netip.Addr, i int) (netip.Addr, bool) {
	b := base.As4()
	v := uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
	last := v & 0xff
	switch last {
	case 0:
		last = 1
	case 255:
		v += 256
		last = 1
	}
	pos := (v>>8)*254 + (last - 1) + uint64(i)
	w := (pos/254)<<8 | (pos%254 + 1)
	if w>>24 != 127 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte{byte(w >> 24), byte(w >> 16), byte(w >> 8), byte(w)}), true
}

// Addresses returns n consecutive loopback addresses from base, as a web's
// IPs are laid out.
func Addresses(base netip.Addr, n int) ([]netip.Addr, error) {
	if !base.Is4() || base.As4()[0] != 127 {
		return nil, fmt.Errorf("synth: ip base must be an IPv4 address in 127.0.0.0/8, got %v", base)
	}
	out := make([]netip.Addr, n)
	for i := range out {
		ip, ok := ipAt(base, i)
		if !ok {
			return nil, fmt.Errorf("synth: %d addresses from %v run out of 127.0.0.0/8", n, base)
		}
		out[i] = ip
	}
	return out, nil
}

package synth

import (
	"net/netip"
	"strconv"
	"strings"
)

// The subdomain farm of the hostile profile: a link farm under a
// registrable domain of its own, FarmDomain, whose hosts s0.FarmDomain,
// s1.FarmDomain, … are endless: the front page of host sN links to the
// front pages of FarmFanout hosts never linked before, s(N·FarmFanout+1)
// to s(N·FarmFanout+FarmFanout). Each host has one page, so no host
// budget stops a crawler in it; only a budget per registrable domain does
// (a crawler's --pld-budget). The farm is not one of Web.Hosts: its names
// answer through FarmHost and FarmIP (a wildcard for *.FarmDomain in
// websim's DNS), its pages through RespondFarm, and a crawl reaches it from
// its seed FarmFront. The truth lists only that entry, marked as a trap
// (Record.Trap, Role FarmRole): what lies behind it is unbounded.
const (
	// FarmDomain is the farm's registrable domain: under .test, which the
	// public-suffix list does not name, so that its default rule makes
	// FarmDomain the registrable part of every farm host.
	FarmDomain = "linkfarm.test"
	// FarmFanout is how many new farm hosts each farm page links to.
	FarmFanout = 4
	// FarmRole is the role the truth gives the farm's entry.
	FarmRole = "subdomain-farm"
	// farmMax bounds the farm's host numbers (hosts beyond link to none).
	farmMax  = 1 << 40
	tagFarm  = 0x6661726d // "farm": a hash tag of its own
	farmHost = "s"
)

// HasFarm reports whether the web has the subdomain farm (the hostile
// profile).
func (w *Web) HasFarm() bool { return w.opt.Profile == Hostile }

// FarmHostName returns the name of farm host n: "s<n>." + FarmDomain.
func FarmHostName(n uint64) string {
	return farmHost + strconv.FormatUint(n, 10) + "." + FarmDomain
}

// FarmHost returns the number of the farm host with the given name
// (case-insensitive, without port or trailing dot); ok is false for any
// other name, and in a web without the farm.
func (w *Web) FarmHost(name string) (n uint64, ok bool) {
	if !w.HasFarm() {
		return 0, false
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	label, ok := strings.CutSuffix(name, "."+FarmDomain)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutPrefix(label, farmHost)
	if !ok || digits == "" || len(digits) > 13 || digits[0] == '0' && len(digits) > 1 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n >= farmMax {
		return 0, false
	}
	return n, true
}

// FarmIP returns the address of the farm host with the given name: one
// of the web's addresses, drawn per host. ok is false for a name that is
// not one of the farm's.
func (w *Web) FarmIP(name string) (netip.Addr, bool) {
	n, ok := w.FarmHost(name)
	if !ok {
		return netip.Addr{}, false
	}
	return w.ips[hash3(w.opt.Seed, tagFarm, n, 0)%uint64(len(w.ips))], true
}

// FarmFront returns the farm's entry, the front page of s0 ("" in a web
// without the farm): a crawl of the hostile web is seeded with it beside
// the hosts' front pages.
func (w *Web) FarmFront() string {
	if !w.HasFarm() {
		return ""
	}
	return w.farmURL(0)
}

func (w *Web) farmURL(n uint64) string {
	return "http://" + FarmHostName(n) + w.portSfx + "/"
}

// farmLinks calls emit with the links of farm host n's front page.
func (w *Web) farmLinks(n uint64, emit func(string)) {
	if n >= farmMax/FarmFanout {
		return
	}
	for i := uint64(1); i <= FarmFanout; i++ {
		emit(w.farmURL(n*FarmFanout + i))
	}
}

// RespondFarm appends the response to a GET of path on farm host n (see
// FarmHost) to buf: its front page links to FarmFanout new farm hosts;
// robots.txt is missing (404: everything allowed), as is every other path.
func (w *Web) RespondFarm(buf []byte, n uint64, path string) Response {
	switch path {
	case "/":
		body := renderLinkList(buf, "farm "+strconv.FormatUint(n, 10), func(emit func(string)) { w.farmLinks(n, emit) })
		return Response{Status: 200, ContentType: "text/html; charset=utf-8", Body: body, Kind: KindTrap}
	case "/robots.txt":
		return Response{Status: 404, ContentType: "text/plain; charset=utf-8", Body: append(buf, "not found\n"...), Kind: KindRobots}
	}
	return Response{Status: 404, ContentType: "text/html; charset=utf-8", Body: renderLeaf(buf, "404 not found"), Kind: KindMissing}
}

// farmTruth emits the farm's record in the truth: its entry, a trap
// (reached from its seed; what it links to is unbounded and left out).
func (w *Web) farmTruth(fn func(*Record) error) error {
	if !w.HasFarm() {
		return nil
	}
	name := FarmHostName(0)
	ip, _ := w.FarmIP(name)
	resp := w.RespondFarm(nil, 0, "/")
	rec := Record{URL: w.FarmFront(), Canonical: w.FarmFront(), Host: name, IP: ip.String(), Status: resp.Status,
		ContentType: resp.ContentType, RobotsAllowed: true, Depth: 0, Kind: KindTrap.String(), Reachable: true,
		Role: FarmRole, Trap: true}
	w.farmLinks(0, func(u string) { rec.Outlinks = append(rec.Outlinks, u) })
	return fn(&rec)
}

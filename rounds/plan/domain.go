package plan

import (
	"net/netip"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Registrable is the pay-level domain of host, the unit of --pld-budget:
// its registrable domain by the public-suffix list (eTLD+1, so that
// a.spam.test and b.spam.test share spam.test, and a.example.co.uk is
// under example.co.uk). The list's default rule makes the last label a
// public suffix when the list does not name it: websim's h12.fr.test is
// under fr.test, with every other host of its country. A host with no
// registrable part is its own domain: an address, a bare public suffix,
// a single label such as localhost.
func Registrable(host string) string {
	h := strings.TrimSuffix(host, ".")
	if strings.HasPrefix(h, "[") || strings.Contains(h, ":") {
		return host // an IPv6 literal
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return host
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(h)
	if err != nil || d == "" {
		return host
	}
	return d
}

// Package netguard refuses addresses a public web crawler must not connect
// to: loopback, private, link-local, CGNAT, multicast, reserved and
// unspecified addresses, including IPv6 forms that embed such an IPv4 address.
package netguard

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrForbidden is wrapped by every error Check returns.
var ErrForbidden = errors.New("netguard: forbidden address")

// Check returns an error wrapping ErrForbidden if a is loopback, private
// (RFC 1918, fc00::/7, the deprecated fec0::/10), link-local, unspecified,
// multicast, CGNAT 100.64/10, "this network" 0/8, reserved 240/4 (which holds
// the broadcast address), invalid, or an IPv6 form that embeds one of those
// IPv4 addresses (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96, 6to4
// 2002::/16), or is in the local-use NAT64 prefix 64:ff9b:1::/48. With
// allowPrivate every address passes.
func Check(a netip.Addr, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	if reason := classify(a); reason != "" {
		return fmt.Errorf("netguard: %v is %s: %w", a, reason, ErrForbidden)
	}
	return nil
}

// Reason names the class of a forbidden address, or returns "" if a is a
// public address that Check lets through.
func Reason(a netip.Addr) string { return classify(a) }

var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	siteLocal  = netip.MustParsePrefix("fec0::/10")
	v4Compat   = netip.MustParsePrefix("::/96")
)

func classify(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return classify4(a.As4())
	}
	b := a.As16()
	switch {
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate(), siteLocal.Contains(a):
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	case nat64Local.Contains(a):
		return "local-use NAT64"
	case v4Compat.Contains(a):
		return embedded("IPv4-compatible", [4]byte(b[12:16]))
	case nat64.Contains(a):
		return embedded("NAT64", [4]byte(b[12:16]))
	case sixToFour.Contains(a):
		return embedded("6to4", [4]byte(b[2:6]))
	}
	return ""
}

// embedded classifies an IPv4 address carried inside an IPv6 one.
func embedded(form string, v4 [4]byte) string {
	if r := classify4(v4); r != "" {
		return form + " " + r
	}
	return ""
}

func classify4(b [4]byte) string {
	switch {
	case b[0] == 0 && b == [4]byte{}:
		return "unspecified"
	case b[0] == 0:
		return "this-network"
	case b[0] == 127:
		return "loopback"
	case b[0] == 10, b[0] == 172 && b[1]&0xf0 == 16, b[0] == 192 && b[1] == 168:
		return "private"
	case b[0] == 100 && b[1]&0xc0 == 64:
		return "CGNAT"
	case b[0] == 169 && b[1] == 254:
		return "link-local"
	case b[0]&0xf0 == 224:
		return "multicast"
	case b == [4]byte{255, 255, 255, 255}:
		return "broadcast"
	case b[0]&0xf0 == 240:
		return "reserved"
	}
	return ""
}

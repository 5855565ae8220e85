// Package localaddr binds the crawler's outgoing connections (HTTP and DNS)
// to chosen local addresses, as operators of multi-homed crawlers do: Parse
// reads a list of them, Check makes sure the machine has an address, and
// Pick chooses the one a connection to a remote address leaves from.
//
// Pick is deterministic: one remote address is always reached from the same
// local address (chosen by a hash of the remote address among the local
// addresses of its family), so a host sees one crawler address, across
// connections and restarts alike, as long as the list is the same.
package localaddr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
)

// ErrNoFamily is wrapped by Pick's error when no local address has the
// remote address's family (IPv4 or IPv6).
var ErrNoFamily = errors.New("localaddr: no local address of the remote address's family")

// NotLocalError is Check's error for an address the machine does not have
// (binding a socket to it failed with "cannot assign requested address").
type NotLocalError struct {
	Addr netip.Addr
	Err  error // the bind error, e.g. "bind: cannot assign requested address"
}

// Error reads "ADDR: this machine has no such address: bind: cannot assign
// requested address".
func (e *NotLocalError) Error() string {
	return fmt.Sprintf("%v: this machine has no such address: %v", e.Addr, e.Err)
}

// Unwrap returns the bind error.
func (e *NotLocalError) Unwrap() error { return e.Err }

// Parse reads a comma-separated list of IP addresses ("127.0.2.1,
// 2001:db8::1"; brackets around an IPv6 address are allowed). Spaces around
// items and empty items are ignored, a repeated address is kept once, and
// IPv4-mapped IPv6 addresses are taken as IPv4. An item that is not an IP
// address, or is an unspecified (0.0.0.0, ::) or multicast address, is an
// error naming it (all of them are reported at once). "" gives no
// addresses. Errors, like Check's, start with the bad item, for the caller
// to put its context before.
func Parse(list string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	var errs []error
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(item, "["), "]"))
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: not an IP address", item))
			continue
		}
		a = a.Unmap()
		if err := usable(a); err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return addrs, nil
}

// usable refuses an address no connection can leave from.
func usable(a netip.Addr) error {
	switch {
	case !a.IsValid():
		return errors.New("invalid (zero) address")
	case a.IsUnspecified():
		return fmt.Errorf("%v: the unspecified address, not one of the machine's own", a)
	case a.IsMulticast():
		return fmt.Errorf("%v: a multicast address, not one of the machine's own", a)
	}
	return nil
}

// Check makes sure the machine has a: it binds a UDP socket to port 0 of a
// and closes it. An address the machine does not have gives a
// *NotLocalError. On Linux any address of 127.0.0.0/8 is the machine's,
// configured or not.
func Check(a netip.Addr) error {
	if err := usable(a); err != nil {
		return err
	}
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err // "bind: cannot assign requested address", without "listen udp ADDR:0: "
		}
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			return &NotLocalError{Addr: a, Err: err}
		}
		return fmt.Errorf("%v: cannot bind a socket to it: %w", a, err)
	}
	pc.Close()
	return nil
}

// CheckAll checks every address of addrs and reports every problem at once.
func CheckAll(addrs []netip.Addr) error {
	var errs []error
	for _, a := range addrs {
		if err := Check(a); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Pick returns the address of locals that a connection to remote leaves
// from: among the addresses of remote's family (an IPv4-mapped remote is
// IPv4), the one at index hash(remote) mod their number, so every
// connection to one remote address leaves from the same local address. With
// no locals it returns the zero Addr and nil: no binding. When locals has no
// address of remote's family the error wraps ErrNoFamily: the connection
// must fail rather than leave from an address the operator did not give.
func Pick(locals []netip.Addr, remote netip.Addr) (netip.Addr, error) {
	if len(locals) == 0 {
		return netip.Addr{}, nil
	}
	remote = remote.Unmap()
	v4 := remote.Is4()
	n := 0
	for _, a := range locals {
		if a.Is4() == v4 {
			n++
		}
	}
	if n == 0 {
		fam := "IPv6"
		if v4 {
			fam = "IPv4"
		}
		return netip.Addr{}, fmt.Errorf("%w: %v is %s, the local addresses %v are not", ErrNoFamily, remote, fam, locals)
	}
	i := int(hash(remote) % uint64(n))
	for _, a := range locals {
		if a.Is4() != v4 {
			continue
		}
		if i == 0 {
			return a, nil
		}
		i--
	}
	panic("localaddr: unreachable")
}

// hash is FNV-1a over remote's 16 bytes (its zone ignored): stable across
// processes, unlike hash/maphash.
func hash(remote netip.Addr) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, b := range remote.As16() {
		h ^= uint64(b)
		h *= prime
	}
	return h
}

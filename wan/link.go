package wan

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Link is one emulated WAN path: a TCP proxy from Listen to Upstream that
// holds data for Delay ± Jitter in each direction.
type Link struct {
	// Name identifies the link in the Emulator's methods; it must be unique
	// and non-empty (for instance the name of the site behind Upstream).
	Name string
	// Listen is the host:port the proxy listens on; port 0 picks a free
	// port, which Emulator.Addr then reports.
	Listen string
	// Upstream is the host:port every accepted connection is forwarded to.
	Upstream string
	// Delay is the one-way delay, applied in each direction, so that a round
	// trip over the link costs at least 2×Delay. Zero forwards at once.
	Delay time.Duration
	// Jitter varies each piece of data's delay uniformly within
	// [Delay-Jitter, Delay+Jitter]; data still arrives in order. It must
	// not exceed Delay.
	Jitter time.Duration
}

// Validate reports every problem with l at once, each wrapping
// ErrInvalidLink; nil if l can be run.
func (l Link) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w %q: %s", ErrInvalidLink, l.Name, fmt.Sprintf(format, args...)))
	}
	if l.Name == "" {
		bad("no name")
	}
	if _, _, err := net.SplitHostPort(l.Listen); err != nil {
		bad("listen address %q: %v", l.Listen, err)
	}
	if _, _, err := net.SplitHostPort(l.Upstream); err != nil {
		bad("upstream address %q: %v", l.Upstream, err)
	}
	if err := validShape(l.Delay, l.Jitter); err != nil {
		bad("%v", err)
	}
	return errors.Join(errs...)
}

// validShape checks a delay and jitter pair.
func validShape(delay, jitter time.Duration) error {
	switch {
	case delay < 0:
		return fmt.Errorf("negative delay %v", delay)
	case jitter < 0:
		return fmt.Errorf("negative jitter %v", jitter)
	case jitter > delay:
		return fmt.Errorf("jitter %v exceeds delay %v", jitter, delay)
	}
	return nil
}

// validateLinks reports every problem with a set of links at once.
func validateLinks(links []Link) error {
	var errs []error
	if len(links) == 0 {
		errs = append(errs, fmt.Errorf("%w: no links", ErrInvalidLink))
	}
	seen := make(map[string]bool, len(links))
	for _, l := range links {
		if err := l.Validate(); err != nil {
			errs = append(errs, err)
		}
		if l.Name != "" && seen[l.Name] {
			errs = append(errs, fmt.Errorf("%w %q: name used twice", ErrInvalidLink, l.Name))
		}
		seen[l.Name] = true
	}
	return errors.Join(errs...)
}

// shape is a link's current delay and jitter. It is never modified once
// made: SetDelay swaps in a new one.
type shape struct {
	delay, jitter time.Duration
}

// draw returns one piece of data's delay, using int64n (a uniform draw in
// [0, n)) for the jitter.
func (s *shape) draw(int64n func(n int64) int64) time.Duration {
	if s.jitter <= 0 {
		return s.delay
	}
	return s.delay - s.jitter + time.Duration(int64n(2*int64(s.jitter)+1))
}

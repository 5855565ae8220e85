// Package control holds an operator's overrides of a running crawl: pause,
// the round limits (width, k, host and pay-level-domain budgets) and
// per-host politeness (a delay, a block until a time). They live in the crawl database, under the
// node layer's keys Key and VersionKey, so that every node and a new leader
// see them; a change is one command, guarded by the version so that two
// operators never undo each other. The rounds read them (Crawler.Controls)
// each time they plan, and the fetcher per request (a host's override).
package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The node-layer keys the controls are kept under.
const (
	// Key holds the controls, JSON (Controls).
	Key = "control"
	// VersionKey holds Controls.Version in decimal: a change is guarded
	// by it (store.Batch.Guard).
	VersionKey = "control-version"
)

// Limits on what the controls hold.
const (
	// MaxHosts is the most hosts with an override at once.
	MaxHosts = 10_000
	// MaxChanges is how many past changes the controls keep (Changes).
	MaxChanges = 50
	// MaxDelay is the longest per-host delay an operator may set.
	MaxDelay = 24 * time.Hour
	maxHost  = 253
)

// ErrBadOp is returned for a change that is not valid (the message says
// which field and why).
var ErrBadOp = errors.New("control: bad change")

// Controls is the operator's overrides of a crawl. The zero value changes
// nothing.
type Controls struct {
	// Version counts the changes applied; a change is made against one.
	Version uint64 `json:"version"`
	// Paused: the site generates no new round; rounds in flight finish.
	Paused bool `json:"paused,omitempty"`
	// Width, PerHost, HostBudget and PLDBudget replace the site's
	// --width, --per-host, --host-budget and --pld-budget when > 0 (a
	// PLDBudget turns the budget on for a site started without one).
	Width      int `json:"width,omitempty"`
	PerHost    int `json:"per_host,omitempty"`
	HostBudget int `json:"host_budget,omitempty"`
	PLDBudget  int `json:"pld_budget,omitempty"`
	// Hosts are the per-host overrides, by host name.
	Hosts map[string]Host `json:"hosts,omitempty"`
	// Changes are the last MaxChanges changes, oldest first.
	Changes []Change `json:"changes,omitempty"`
}

// Host is an override of one host's politeness.
type Host struct {
	// Delay replaces the site's --host-delay for the host when > 0; a
	// longer robots.txt Crawl-delay (up to --max-crawl-delay) still
	// applies.
	Delay time.Duration `json:"delay,omitempty"`
	// Blocked: the host gets no request until Until (zero Until: until
	// it is unblocked).
	Blocked bool      `json:"blocked,omitempty"`
	Until   time.Time `json:"until,omitzero"`
}

// BlockedAt reports whether the host is blocked at now.
func (h Host) BlockedAt(now time.Time) bool {
	return h.Blocked && (h.Until.IsZero() || now.Before(h.Until))
}

// Change is one change as the controls log it.
type Change struct {
	At   time.Time `json:"at"`
	By   string    `json:"by,omitempty"` // the node that applied it
	What string    `json:"what"`
}

// Op is a change an operator asks for. Nil fields are left as they are.
type Op struct {
	Pause      *bool `json:"pause,omitempty"`
	Width      *int  `json:"width,omitempty"`       // 0: back to the site's flag
	PerHost    *int  `json:"per_host,omitempty"`    // 0: back to the site's flag
	HostBudget *int  `json:"host_budget,omitempty"` // 0: back to the site's flag
	PLDBudget  *int  `json:"pld_budget,omitempty"`  // 0: back to the site's flag
	// Host names the host the fields below change.
	Host string `json:"host,omitempty"`
	// Delay sets the host's delay (0: back to the site's).
	Delay *Duration `json:"delay,omitempty"`
	// Block blocks the host until a time (zero: until unblocked).
	Block *time.Time `json:"block,omitempty"`
	// Unblock lifts a block.
	Unblock bool `json:"unblock,omitempty"`
}

// Duration is a time.Duration that reads and writes as Go's duration text
// ("1.5s") in JSON.
type Duration time.Duration

// MarshalJSON writes d as "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads "1.5s" (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("control: a duration such as \"2s\": %w", err)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Empty reports whether op changes nothing.
func (op Op) Empty() bool {
	return op.Pause == nil && op.Width == nil && op.PerHost == nil && op.HostBudget == nil && op.PLDBudget == nil &&
		op.Delay == nil && op.Block == nil && !op.Unblock
}

// Check reports what is wrong with op, every problem at once.
func (op Op) Check() error {
	var bad []string
	if op.Empty() {
		bad = append(bad, "nothing to change")
	}
	limit := func(name string, v *int, most int) {
		if v != nil && (*v < 0 || *v > most) {
			bad = append(bad, fmt.Sprintf("%s must be in [0, %d], got %d", name, most, *v))
		}
	}
	limit("width", op.Width, 10_000_000)
	limit("per_host", op.PerHost, 1_000_000)
	limit("host_budget", op.HostBudget, 1_000_000_000)
	limit("pld_budget", op.PLDBudget, 1_000_000_000)
	hostOp := op.Delay != nil || op.Block != nil || op.Unblock
	switch {
	case hostOp && op.Host == "":
		bad = append(bad, "a host's delay or block needs the host")
	case !hostOp && op.Host != "":
		bad = append(bad, fmt.Sprintf("host %q given without a delay, block or unblock", op.Host))
	case op.Host != "":
		if err := checkHost(op.Host); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if op.Block != nil && op.Unblock {
		bad = append(bad, "block and unblock at once")
	}
	if op.Delay != nil && (*op.Delay < 0 || time.Duration(*op.Delay) > MaxDelay) {
		bad = append(bad, fmt.Sprintf("delay must be in [0, %v], got %v", MaxDelay, time.Duration(*op.Delay)))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrBadOp, strings.Join(bad, "; "))
	}
	return nil
}

// checkHost accepts a host name as the crawl database keys it: lower
// case, no scheme, port or path.
func checkHost(h string) error {
	if len(h) > maxHost {
		return fmt.Errorf("host %.40q… is longer than %d bytes", h, maxHost)
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.', c == '_', c == ':', c == '[', c == ']':
		default:
			return fmt.Errorf("host %q: byte %q at %d is not one of a host name's (lower case, no scheme, port or path)", h, c, i)
		}
	}
	return nil
}

// Apply returns c with op applied at now by node, its version one more
// and the change logged. c is not changed.
func (c Controls) Apply(op Op, now time.Time, node string) (Controls, error) {
	if err := op.Check(); err != nil {
		return c, err
	}
	n := c
	n.Hosts = maps.Clone(c.Hosts)
	var what []string
	if op.Pause != nil {
		n.Paused = *op.Pause
		what = append(what, map[bool]string{true: "pause", false: "resume"}[*op.Pause])
	}
	set := func(name string, dst *int, v *int) {
		if v != nil {
			*dst = *v
			what = append(what, name+"="+strconv.Itoa(*v))
		}
	}
	set("width", &n.Width, op.Width)
	set("per_host", &n.PerHost, op.PerHost)
	set("host_budget", &n.HostBudget, op.HostBudget)
	set("pld_budget", &n.PLDBudget, op.PLDBudget)
	if op.Host != "" {
		h := n.Hosts[op.Host]
		if op.Delay != nil {
			h.Delay = time.Duration(*op.Delay)
			what = append(what, "host "+op.Host+" delay="+h.Delay.String())
		}
		if op.Block != nil {
			h.Blocked, h.Until = true, op.Block.UTC()
			if h.Until.IsZero() {
				what = append(what, "host "+op.Host+" blocked")
			} else {
				what = append(what, "host "+op.Host+" blocked until "+h.Until.Format(time.RFC3339))
			}
		}
		if op.Unblock {
			h.Blocked, h.Until = false, time.Time{}
			what = append(what, "host "+op.Host+" unblocked")
		}
		if h == (Host{}) {
			delete(n.Hosts, op.Host)
		} else {
			if n.Hosts == nil {
				n.Hosts = map[string]Host{}
			}
			n.Hosts[op.Host] = h
		}
		if len(n.Hosts) > MaxHosts {
			return c, fmt.Errorf("%w: more than %d hosts with an override (unblock or reset some first)", ErrBadOp, MaxHosts)
		}
	}
	n.Version++
	n.Changes = append(slices.Clone(c.Changes), Change{At: now.UTC(), By: node, What: strings.Join(what, ", ")})
	if k := len(n.Changes) - MaxChanges; k > 0 {
		n.Changes = n.Changes[k:]
	}
	return n, nil
}

// Encode returns the controls as stored under Key.
func (c Controls) Encode() []byte {
	b, _ := json.Marshal(c) // no value of Controls fails to encode
	return b
}

// VersionValue is the value of VersionKey for version v ("" for 0: the
// key is absent before the first change).
func VersionValue(v uint64) []byte {
	if v == 0 {
		return nil
	}
	return strconv.AppendUint(nil, v, 10)
}

// Decode reads controls stored under Key; nil or empty is the zero value.
func Decode(b []byte) (Controls, error) {
	var c Controls
	if len(b) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return Controls{}, fmt.Errorf("control: decode: %w", err)
	}
	return c, nil
}

// Blocked reports whether host is blocked at now.
func (c *Controls) Blocked(host string, now time.Time) bool {
	if c == nil || len(c.Hosts) == 0 {
		return false
	}
	h, ok := c.Hosts[host]
	return ok && h.BlockedAt(now)
}

// Delay is host's delay override (0: none).
func (c *Controls) Delay(host string) time.Duration {
	if c == nil || len(c.Hosts) == 0 {
		return 0
	}
	return c.Hosts[host].Delay
}

// NextUnblock is the earliest end of a timed block after now (zero:
// none): the crawl is not over while a host waits for it.
func (c *Controls) NextUnblock(now time.Time) time.Time {
	var t time.Time
	if c == nil {
		return t
	}
	for _, h := range c.Hosts {
		if h.Blocked && !h.Until.IsZero() && h.Until.After(now) && (t.IsZero() || h.Until.Before(t)) {
			t = h.Until
		}
	}
	return t
}

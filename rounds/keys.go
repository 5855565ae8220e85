package rounds

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The crawl database keys of a round's plan and staged results, all in the
// node layer's table under "r/<round>/" so a retired round is deleted with
// one prefix:
//
//	r/<round>/head            the plan's header (planHead), written last
//	r/<round>/part/<id>       a part's URLs (encodePart)
//	r/<round>/own/<id>        the part's owner (partOwner): the guard of its stage commands
//	r/<round>/done/<id>       the part is fetched (partDone)
//	r/<round>/res/<id>/<taker>/<seq>  a staged batch of the part's results (stageBatch);
//	                          taker names the node and its take of the part (a
//	                          node that takes a part again never writes over
//	                          what it staged before)
//	r/<round>/rev             the update's revisits, staged before any update command
//
// Round numbers and part ids are zero-padded so that keys sort by them.

func roundPrefix(round uint64) string { return fmt.Sprintf("r/%012d/", round) }
func headKey(round uint64) string     { return roundPrefix(round) + "head" }
func partKey(round uint64, id int) string {
	return fmt.Sprintf("%spart/%06d", roundPrefix(round), id)
}
func ownPrefix(round uint64) string { return roundPrefix(round) + "own/" }
func ownKey(round uint64, id int) string {
	return fmt.Sprintf("%s%06d", ownPrefix(round), id)
}
func donePrefix(round uint64) string { return roundPrefix(round) + "done/" }
func doneKey(round uint64, id int) string {
	return fmt.Sprintf("%s%06d", donePrefix(round), id)
}
func resPrefix(round uint64) string { return roundPrefix(round) + "res/" }
func resPartPrefix(round uint64, id int) string {
	return fmt.Sprintf("%s%06d/", resPrefix(round), id)
}
func resKey(round uint64, id int, taker string, seq uint64) string {
	return fmt.Sprintf("%s%s/%09d", resPartPrefix(round, id), taker, seq)
}
func revKey(round uint64) string { return roundPrefix(round) + "rev" }

// leaderKey holds the token of the node that leads the site's rounds: every
// command of the leader's carries a guard on it, so a deposed leader's late
// writes are refused.
const leaderKey = "site/leader"

// releaseKey holds, per node, the leader token of the leadership to which
// the node, deposed, released the parts it held: it had staged every
// result it held when it wrote it (a Solo crawl; see Options.ReleaseWait).
func releaseKey(node string) string { return "site/release/" + node }

// partID reads the id at the end of an own/ or done/ key.
func partID(key string) (int, error) {
	i := strings.LastIndexByte(key, '/')
	id, err := strconv.Atoi(key[i+1:])
	if err != nil || id < 0 {
		return 0, fmt.Errorf("%w: part key %q", errRecord, key)
	}
	return id, nil
}

// planHead is a round's plan as a whole.
type planHead struct {
	Round uint64 `json:"round"`
	Parts int    `json:"parts"`
	URLs  int    `json:"urls"`
	// LinkThreshold: nodes stage the outlinks of fetched pages that
	// distributed at least this much cash (the lightest page the leader's
	// link store keeps when full; 0 when it has room), for revisits.
	LinkThreshold float64   `json:"link_threshold"`
	Created       time.Time `json:"created"`
}

// partOwner is who fetches a part. Its encoded bytes are the guard of the
// owner's stage commands: when the part moves, the old owner's are refused.
type partOwner struct {
	Node string `json:"node"`
	Gen  int    `json:"gen"` // moves so far
	// NotBefore: the part's hosts may not be fetched before this (the node
	// that held them last would have allowed its next request then).
	NotBefore time.Time `json:"not_before,omitzero"`
	// Lost: the part moved from a node that died; what that node fetched
	// and had not staged is lost, its hosts' sitemaps included, so their
	// robots.txt is fetched again.
	Lost bool `json:"lost,omitempty"`
}

func (o partOwner) encode() []byte {
	b, _ := json.Marshal(o)
	return b
}

func decodeOwner(b []byte) (partOwner, error) {
	var o partOwner
	if err := json.Unmarshal(b, &o); err != nil || o.Node == "" {
		return o, fmt.Errorf("%w: part owner %q", errRecord, b)
	}
	return o, nil
}

// partDone is written with a part's last staged batch.
type partDone struct {
	Node string    `json:"node"`
	At   time.Time `json:"at"`
	// FreeAt: when the node would allow the next request to any of the
	// part's hosts (their last request's end plus their delay).
	FreeAt time.Time `json:"free_at"`
	// Local: the results stayed in the node's fetch segment (a site of one
	// node, whose leader reads them there).
	Local bool `json:"local,omitempty"`
	// Late counts the page results the node dropped since its previous
	// done marker because their take was over (the part had moved or was
	// done): fetched, but not counted. The round's statistics sum them.
	Late int64 `json:"late,omitempty"`
}

func (d partDone) encode() []byte {
	b, _ := json.Marshal(d)
	return b
}

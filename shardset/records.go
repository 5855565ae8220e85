package shardset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/shard"
)

// The site's records in its meta group (user keys).
const (
	settingsKey  = "shardset/settings"
	placementKey = "shardset/placement"
	leavingKey   = "shardset/leaving/" // + node: the node is leaving (its replicas move away)
	createdKey   = "shardset/created"  // the creator has bootstrapped every shard's group
)

// MetaGroup is the ID of the site's meta group: every node holds a replica;
// it keeps the site's members, Settings and the shards' placement.
const MetaGroup = "meta"

// GroupID names shard s's Raft group.
func GroupID(s int) string { return fmt.Sprintf("s%03d", s) }

// ShardOfGroup returns the shard a group ID names, or -1.
func ShardOfGroup(id string) int {
	var s int
	if n, err := fmt.Sscanf(id, "s%03d", &s); err != nil || n != 1 || GroupID(s) != id {
		return -1
	}
	return s
}

// Settings are the site's sharding settings, fixed when the site is
// created.
type Settings struct {
	// Shards is the site's shard count S.
	Shards int `json:"shards"`
	// Replicas is the site's replication target R.
	Replicas int `json:"replicas"`
	// Creator is the node that created the site: it bootstraps every
	// shard's group, alone, as the first placement says.
	Creator string `json:"creator"`
}

// Validate reports what is wrong with s.
func (s Settings) Validate() error {
	var errs []error
	if s.Shards < 1 || s.Shards > MaxShards {
		errs = append(errs, fmt.Errorf("shardset: shards must be in [1, %d], got %d", MaxShards, s.Shards))
	}
	if s.Replicas < 1 || s.Replicas > MaxReplicas {
		errs = append(errs, fmt.Errorf("shardset: replicas must be in [1, %d], got %d", MaxReplicas, s.Replicas))
	}
	if s.Creator == "" {
		errs = append(errs, errors.New("shardset: settings without a creator"))
	}
	return errors.Join(errs...)
}

// Bounds of Settings.
const (
	MaxShards   = 1000 // GroupID has three digits
	MaxReplicas = 7
)

// ErrNoSettings: the meta group has no sharding settings (the site was
// not created as a sharded site).
var ErrNoSettings = errors.New("shardset: the site has no sharding settings")

// ReadSettings returns the site's settings from a replica of its meta
// group.
func ReadSettings(st *store.Store) (Settings, error) {
	var s Settings
	v, err := st.User(settingsKey)
	if err != nil {
		return s, fmt.Errorf("shardset: read settings: %w", err)
	}
	if v == nil {
		return s, ErrNoSettings
	}
	if err := json.Unmarshal(v, &s); err != nil {
		return s, fmt.Errorf("shardset: settings record: %w", err)
	}
	return s, s.Validate()
}

// placement is the stored target placement, with a version that grows
// with every change.
type placement struct {
	Version uint64          `json:"version"`
	P       shard.Placement `json:"placement"`
	// Why says what made this placement differ from the one before (the
	// nodes that joined, went silent, were given up or are leaving), for
	// the operator: site status and the dashboard show it on the shards
	// still moving to it.
	Why string `json:"why,omitempty"`
}

func readPlacement(st *store.Store) (placement, []byte, error) {
	var p placement
	v, err := st.User(placementKey)
	if err != nil {
		return p, nil, fmt.Errorf("shardset: read placement: %w", err)
	}
	if v == nil {
		return p, nil, nil
	}
	if err := json.Unmarshal(v, &p); err != nil {
		return p, nil, fmt.Errorf("shardset: placement record: %w", err)
	}
	return p, v, nil
}

// samePlacement reports whether a and b give every shard the same
// replicas (in any order) and leader.
func samePlacement(a, b shard.Placement) bool {
	if len(a.Shards) != len(b.Shards) {
		return false
	}
	for i := range a.Shards {
		x, y := a.Shards[i], b.Shards[i]
		if x.Leader != y.Leader || len(x.Replicas) != len(y.Replicas) {
			return false
		}
		xs, ys := slices.Clone(x.Replicas), slices.Clone(y.Replicas)
		slices.Sort(xs)
		slices.Sort(ys)
		if !slices.Equal(xs, ys) {
			return false
		}
	}
	return true
}

// Create writes a new sharded site's settings and its first placement
// (every shard on the creator) into the meta group, unless settings are
// there already: then they must be s's (ErrSettings otherwise, naming the
// site's). Call it on the meta group's leader.
func Create(ctx context.Context, meta *crawldb.DB, s Settings) error {
	if err := s.Validate(); err != nil {
		return err
	}
	have, err := ReadSettings(meta.Store())
	switch {
	case err == nil:
		if have.Shards != s.Shards || have.Replicas != s.Replicas {
			return fmt.Errorf("%w: the site has %d shards of %d replicas, not %d of %d", ErrSettings, have.Shards, have.Replicas, s.Shards, s.Replicas)
		}
		return nil
	case !errors.Is(err, ErrNoSettings):
		return err
	}
	first := shard.Place(shard.Input{Shards: s.Shards, Replicas: s.Replicas, Nodes: []shard.Node{{ID: s.Creator, Alive: true}}})
	pv, err := json.Marshal(placement{Version: 1, P: first})
	if err != nil {
		return err
	}
	sv, err := json.Marshal(s)
	if err != nil {
		return err
	}
	b := store.NewBatch()
	b.Guard(settingsKey, nil)
	b.PutUser(settingsKey, sv)
	b.PutUser(placementKey, pv)
	if err := apply(ctx, meta, b); err != nil {
		return fmt.Errorf("shardset: create the site's records: %w", err)
	}
	return nil
}

// apply applies b to db, returning the command's own error too.
func apply(ctx context.Context, db *crawldb.DB, b *store.Batch) error {
	res, err := db.Apply(ctx, b)
	if err == nil && res != nil && res.Err != nil {
		err = res.Err
	}
	return err
}

// ErrSettings: a node's sharding settings differ from its site's.
var ErrSettings = errors.New("shardset: sharding settings differ from the site's")

// ShardRecord is one shard as the site's meta group records it, which
// every node's replica has whether or not it holds the shard: where the
// placement wants it, and the last leader that reported it (each node
// writes the states of the shards it leads every 500 ms). A site-wide
// view falls back on it for a shard none of whose nodes answer.
type ShardRecord struct {
	Shard        int      `json:"id"`
	Target       []string `json:"target"`        // the placement's replicas
	TargetLeader string   `json:"target_leader"` // the placement's leader
	// Reported is the node whose state record names the shard in its
	// group's latest term, the voters it saw then and that term; ""
	// (and no voters) when no member of the site has reported it.
	Reported       string   `json:"reported_leader,omitempty"`
	ReportedVoters []string `json:"reported_voters,omitempty"`
	ReportedTerm   uint64   `json:"reported_term,omitempty"`
}

// Records returns every shard of the site, in order, as this node's
// replica of the meta group records it (a shard the placement does not
// name yet has no target).
func (s *Set) Records() ([]ShardRecord, error) {
	p, _, err := readPlacement(s.o.Meta.Store())
	if err != nil {
		return nil, err
	}
	out := make([]ShardRecord, s.settings.Shards)
	for i := range out {
		out[i].Shard = i
		if i < len(p.P.Shards) {
			out[i].Target = slices.Clone(p.P.Shards[i].Replicas)
			out[i].TargetLeader = p.P.Shards[i].Leader
		}
	}
	members, err := s.o.Meta.Members()
	if err != nil {
		return nil, fmt.Errorf("shardset: the site's members: %w", err)
	}
	err = s.memberStates(members, func(node string, ns nodeState) error {
		for sh, st := range ns.Shards {
			if sh < 0 || sh >= len(out) {
				continue
			}
			if r := &out[sh]; r.Reported == "" || st.Term > r.ReportedTerm || (st.Term == r.ReportedTerm && node < r.Reported) {
				r.Reported, r.ReportedVoters, r.ReportedTerm = node, slices.Clone(st.Voters), st.Term
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

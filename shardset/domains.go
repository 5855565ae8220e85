package shardset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/rounds/plan"
)

// The site's --pld-budget, shared by its shards (plan.DomainShare): one
// record per registrable domain that a shard needed more of than its
// implicit share, in the meta group's node-layer table under
// domainPrefix. Every shard reads its cap from its node's replica of the
// meta group and writes only its own cap, with a guard on the record it
// read, so that two shards' writes never lose one another's.

// domainPrefix is the meta group's key prefix of the domain records.
const domainPrefix = "pld/"

// domainShares is one shard's side of the site's domain budgets
// (rounds.DomainShares).
type domainShares struct {
	meta          *crawldb.DB
	shard, shards int
}

// newDomainShares is shard's side of the domain budgets of a site of
// shards shards.
func newDomainShares(meta *crawldb.DB, shard, shards int) *domainShares {
	return &domainShares{meta: meta, shard: shard, shards: shards}
}

// read returns dom's record and its bytes (nil: none) from this node's
// replica of the meta group.
func (d *domainShares) read(dom string) (plan.DomainShare, []byte, error) {
	var sh plan.DomainShare
	b, err := d.meta.Store().User(domainPrefix + dom)
	if err != nil || b == nil {
		return sh, nil, err
	}
	if err := json.Unmarshal(b, &sh); err != nil {
		return sh, nil, fmt.Errorf("shardset: domain record %q: %w", dom, err)
	}
	return sh, b, nil
}

// Share is this shard's cap of dom, and whether dom's budget is all given
// out to caps every shard wrote.
func (d *domainShares) Share(dom string, budget int) (int64, bool, error) {
	sh, _, err := d.read(dom)
	if err != nil {
		return 0, false, err
	}
	return sh.Cap(d.shard, budget, d.shards), sh.Full(budget, d.shards), nil
}

// Sync returns once this node's replica of the meta group has applied
// every record written before it was called: a shard's new leader reads
// the caps its predecessor wrote, not older ones.
func (d *domainShares) Sync(ctx context.Context) error {
	res, err := d.meta.Apply(ctx, store.NewBatch())
	if err != nil {
		return fmt.Errorf("shardset: domain budgets: sync: %w", err)
	}
	return d.meta.WaitApplied(ctx, res.Index)
}

// Ask asks for more of doms (this shard at its cap of each, with URLs
// left).
func (d *domainShares) Ask(ctx context.Context, budget int, doms []string) error {
	for _, dom := range doms {
		if err := d.update(ctx, dom, func(sh plan.DomainShare) (plan.DomainShare, bool) {
			return sh.Ask(d.shard, budget, d.shards), true
		}); err != nil {
			return err
		}
	}
	return nil
}

// Wanted returns the domains another shard wants more of.
func (d *domainShares) Wanted() ([]string, error) {
	var out []string
	err := d.meta.Store().UserScan(domainPrefix, func(key string, value []byte) error {
		var sh plan.DomainShare
		if err := json.Unmarshal(value, &sh); err != nil {
			return fmt.Errorf("shardset: domain record %q: %w", key, err)
		}
		if sh.Wanted(d.shard) || sh.Want[d.shard] {
			out = append(out, strings.TrimPrefix(key, domainPrefix))
		}
		return nil
	})
	return out, err
}

// Yield gives back, of each domain in usage (this shard's pages fetched
// and in flight), what another shard wants and this one does not use.
func (d *domainShares) Yield(ctx context.Context, budget int, usage map[string]int64) error {
	for dom, u := range usage {
		if err := d.update(ctx, dom, func(sh plan.DomainShare) (plan.DomainShare, bool) {
			return sh.Yield(d.shard, budget, d.shards, u)
		}); err != nil {
			return err
		}
	}
	return nil
}

// update writes dom's record as change makes it from the one this node's
// replica holds, guarded by that one, and waits until the replica has
// applied it. A guard that fails (another shard wrote meanwhile, or the
// replica lagged) reads the record again, a few times.
func (d *domainShares) update(ctx context.Context, dom string, change func(plan.DomainShare) (plan.DomainShare, bool)) error {
	for attempt := 0; ; attempt++ {
		sh, old, err := d.read(dom)
		if err != nil {
			return err
		}
		next, ok := change(sh)
		if !ok {
			return nil
		}
		b, err := json.Marshal(next)
		if err != nil {
			return err
		}
		batch := store.NewBatch()
		batch.Guard(domainPrefix+dom, old)
		batch.PutUser(domainPrefix+dom, b)
		res, err := d.meta.Apply(ctx, batch)
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if err == nil {
			return d.meta.WaitApplied(ctx, res.Index)
		}
		if !errors.Is(err, store.ErrGuard) || attempt >= 8 {
			return fmt.Errorf("shardset: domain budget of %s: %w", dom, err)
		}
		if res != nil {
			d.meta.WaitApplied(ctx, res.Index) // the write that beat this one
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
}

package federation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// A site removed from the federation file (what an operator does about a
// site gone for good): what a crawl database holds for it would wait for
// ever, and its outbox alone would keep the federation from ending (a site
// with outbox entries is not passive). Each site's leader, and each
// shard's, hands it over once, at its start (forgetRemoved).

// LocalOutboxPrefix begins the names of outboxes that are not for sites:
// a sharded site's shards deliver to each other through them (shardset).
// No site's name may begin with it.
const LocalOutboxPrefix = "~"

// handOverChunk bounds the records one hand-over command moves.
const handOverChunk = 16

// removedSites returns the sites that this crawl database holds records
// for (an outbox, entries in doubt or delivered, outbound and hand-back
// records) and that the federation file no longer names.
func (f *Fed) removedSites() ([]string, error) {
	known := map[string]bool{f.o.Self: true}
	for _, s := range f.o.File.Sites {
		known[s.Name] = true
	}
	gone := map[string]bool{}
	heads, err := f.st.OutboxHeads("", 1)
	if err != nil {
		return nil, err
	}
	for name := range heads {
		if !known[name] && !strings.HasPrefix(name, LocalOutboxPrefix) {
			gone[name] = true
		}
	}
	for _, prefix := range []string{doubtPrefix, sentPrefix, outPrefix, backPrefix} {
		err := f.st.UserScan(prefix, func(k string, _ []byte) error {
			name, _, _ := strings.Cut(k[len(prefix):], "/")
			if !known[name] {
				gone[name] = true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return slices.Sorted(maps.Keys(gone)), nil
}

// forgetRemoved hands over what this crawl database holds for sites no
// longer in the federation file to their hosts' owners now, as handOver
// does for a site down: outbox entries and entries in doubt with their
// cash (the site will never say whether it applied them: if it did, that
// cash went with it), the URLs delivered to it without (it had the cash);
// then it drops the site's outbound and hand-back records.
func (f *Fed) forgetRemoved(ctx context.Context) error {
	names, err := f.removedSites()
	if err != nil || len(names) == 0 {
		return err
	}
	for _, name := range names {
		moved := map[string]int{}
		for {
			entries, err := f.st.Outbox(name, 0, handOverChunk)
			if err != nil {
				return err
			}
			if len(entries) == 0 {
				break
			}
			if err := f.moveRecords(ctx, entries, withCash, func(b *store.Batch, e store.OutboxEntry) { b.OutboxAck(name, e.Seq) }); err != nil {
				return fmt.Errorf("federation: outbox of %s, removed from the federation file: %w", name, err)
			}
			moved["outbox"] += len(entries)
		}
		for _, kind := range []struct {
			prefix string
			key    func(peer string, seq uint64) string
			mode   rerouteMode
		}{{doubtPrefix, doubtKey, withCash}, {sentPrefix, sentKey, noCash}} {
			for {
				entries, err := f.records(kind.prefix+name+"/", handOverChunk)
				if err != nil {
					return err
				}
				if len(entries) == 0 {
					break
				}
				drop := func(b *store.Batch, e store.OutboxEntry) { b.PutUser(kind.key(name, e.Seq), nil) }
				if err := f.moveRecords(ctx, entries, kind.mode, drop); err != nil {
					return fmt.Errorf("federation: %s%s, removed from the federation file: %w", kind.prefix, name, err)
				}
				moved[strings.TrimSuffix(strings.TrimPrefix(kind.prefix, "fed/"), "/")] += len(entries)
			}
		}
		b := store.NewBatch()
		b.PutUser(outPrefix+name, nil)
		b.PutUser(backPrefix+name, nil)
		if err := f.apply(ctx, b); err != nil {
			return err
		}
		f.log.Warn("federation: a site no longer in the federation file: what this site held for it went to its hosts' owners now",
			"site", name, "outbox_entries", moved["outbox"], "in_doubt", moved["doubt"], "delivered_before", moved["sent"])
	}
	return nil
}

// records returns up to limit records under prefix (keys ending in a
// sequence number), oldest first, as outbox entries.
func (f *Fed) records(prefix string, limit int) ([]store.OutboxEntry, error) {
	var out []store.OutboxEntry
	err := f.st.UserScan(prefix, func(k string, v []byte) error {
		if len(out) >= limit {
			return nil
		}
		seq, err := strconv.ParseUint(k[len(prefix):], 10, 64)
		if err != nil {
			return fmt.Errorf("federation: bad key %q: %w", k, err)
		}
		out = append(out, store.OutboxEntry{Seq: seq, Payload: append([]byte(nil), v...)})
		return nil
	})
	return out, err
}

// moveRecords re-routes entries (mode) and drops each (drop), in one
// command.
func (f *Fed) moveRecords(ctx context.Context, entries []store.OutboxEntry, mode rerouteMode, drop func(*store.Batch, store.OutboxEntry)) error {
	var self inbound
	b := store.NewBatch()
	for _, e := range entries {
		if err := f.reroute(ctx, b, e.Payload, mode, &self); err != nil {
			return fmt.Errorf("entry %d: %w", e.Seq, err)
		}
		drop(b, e)
	}
	return f.applySelf(ctx, b, self)
}

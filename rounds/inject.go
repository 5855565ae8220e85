package rounds

import (
	"context"
	"fmt"

	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/route"
)

// Injected is what Inject did with its URLs.
type Injected struct {
	Added int `json:"added"` // new here: in the frontier with the seed cash
	Known int `json:"known"` // already in this crawl database: left as they are
	Sent  int `json:"sent"`  // another shard's or site's: sent to it (Router)
}

// maxInject is how many URLs one Inject command carries.
const maxInject = 10_000

// Seed adds urls (normalised) to the frontier with the seed cash, skipping
// those already known, in one command with the cash they inject. It
// returns how many were new. On a site of several nodes only the leader
// seeds (Options.Seeds); they are this crawl database's (no router).
//
// A URL can arrive (from another shard or site) between the check that it
// is new and the command that seeds it: the command adds the seed cash to
// it (UpsertCash) rather than leaving it untouched, so that the cash the
// state counts as injected is always in a page.
func (c *Crawler) Seed(ctx context.Context, urls []string) (int, error) {
	in, err := c.inject(ctx, distinct(urls), false, "seed")
	return in.Added, err
}

// distinct returns urls without repeats, in order.
func distinct(urls []string) []string {
	seen := make(map[string]bool, len(urls))
	out := make([]string, 0, len(urls))
	for _, u := range urls {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// Inject adds urls (normalised, in scope) to a running crawl as seeds, as
// Options.Seeds are at start: a new URL gets the seed cash, a known one is
// left as it is. With a Router each goes to its owner: this crawl
// database's to its frontier, another shard's or site's through the
// router (its outbox) with the seed cash, which the round state counts as
// injected here and sent. It must run on the leader (ErrNotLeader).
func (c *Crawler) Inject(ctx context.Context, urls []string) (Injected, error) {
	var in Injected
	if !c.db.IsLeader() {
		return in, ErrNotLeader
	}
	uniq := distinct(urls)
	for len(uniq) > 0 {
		n := min(len(uniq), maxInject)
		got, err := c.inject(ctx, uniq[:n], true, "inject")
		in.Added, in.Known, in.Sent = in.Added+got.Added, in.Known+got.Known, in.Sent+got.Sent
		if err != nil {
			return in, err
		}
		uniq = uniq[n:]
	}
	c.log.Info("rounds: seeds injected", "added", in.Added, "known", in.Known, "sent", in.Sent)
	return in, nil
}

// inject adds distinct urls in one command (what names it in errors):
// Seed's, and Inject's for each of its chunks, which routes them (routed).
func (c *Crawler) inject(ctx context.Context, urls []string, routed bool, what string) (Injected, error) {
	var in Injected
	b := c.newBatch()
	local := urls
	var sent route.Sent
	if routed && c.o.Router != nil {
		puts := make([]route.Remote, len(urls))
		for i, u := range urls {
			puts[i] = route.Remote{URL: u, Cash: opic.SeedCash}
		}
		kept, s, err := c.o.Router.Route(ctx, puts, b)
		if err != nil {
			return in, fmt.Errorf("rounds: %s: route: %w", what, err)
		}
		local = make([]string, len(kept))
		for i, r := range kept {
			local[i] = r.URL
		}
		sent, in.Sent = s, len(urls)-len(kept)
	}
	for _, u := range local {
		ok, err := c.st.Contains(u)
		if err != nil {
			return in, fmt.Errorf("rounds: %s: %w", what, err)
		}
		if ok {
			in.Known++
			continue
		}
		// UpsertCash, not PutIfAbsent: a URL that arrives before the
		// command still gets the cash the state counts (see Seed).
		b.UpsertCash(u, opic.SeedCash, 0)
		in.Added++
	}
	if b.Len() == 0 { // nothing new here, nothing the router wrote
		return in, nil
	}
	if c.beforeSeed != nil {
		c.beforeSeed()
	}
	c.stateMu.Lock() // held until the new state is written: writers take turns
	defer c.stateMu.Unlock()
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	s.Injected += float64(in.Added)*opic.SeedCash + sent.Cash
	s.Sent += sent.Cash
	// One command: the URLs and the cash they inject, together.
	if err := c.putState(ctx, b, s); err != nil {
		return Injected{}, fmt.Errorf("rounds: %s: %w", what, err)
	}
	return in, nil
}

package site

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/rounds/control"
	"github.com/meridian-crawler/meridian/shardset"
)

// WriteSummary writes st as the few lines an operator reads at a glance
// (`site status`; `site status --json` prints st itself): the node and its
// role, the rounds, the fetcher, the crawl database, the recent rounds'
// refetches when there were any, a sharded node's shards (and with Site
// its site-wide view: every shard and node), the site's nodes and the
// federation's peers when there are any.
func (st Status) WriteSummary(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	node := st.Node
	if node == "" {
		node = "-"
	}
	p("site %s, node %s (%s), pid %d, up %s\n", st.Region, node, st.Role, st.PID, roundDur(st.Uptime))

	// An end's rounds are its own count: a site of shards', those of its
	// busiest shard (--rounds counts each shard's), not the sum Done is.
	r := st.Rounds
	switch {
	case r.Finished != nil && r.Finished.Reason == rounds.EndRounds:
		p("rounds    stopped at the round limit (--rounds) after %d rounds; %d URLs left unfetched in the frontier\n", r.Finished.Rounds, r.Finished.Frontier)
	case r.Finished != nil && r.Finished.Reason == rounds.EndBudget:
		p("rounds    stopped after %d rounds: %s\n", r.Finished.Rounds, r.Finished.BudgetLeft(false))
	case r.Finished != nil:
		p("rounds    finished after %d rounds (%s)\n", r.Finished.Rounds, r.Finished.Reason)
	case st.Stopped != nil:
		p("rounds    stopping (%s) after %d rounds; %d URLs left unfetched in the frontier, %d in rounds in flight\n", st.Stopped.Reason, st.Stopped.Rounds, st.Stopped.Frontier, st.Stopped.InFlight)
	default:
		p("rounds    %d done, phase %s", r.Done, st.Phase)
		if len(r.Active) > 0 {
			var act []string
			for _, a := range r.Active {
				act = append(act, fmt.Sprintf("%d %s", a.Round, a.Phase))
			}
			p("; in flight: %s", strings.Join(act, ", "))
		}
		p("\n")
	}
	if c := st.Controls; c != nil {
		p("controls  %s\n", controlsLine(c, time.Now()))
	}
	if l := r.Last; l != nil {
		p("          last round %d: %d generated, %d fetched (%d 2xx), %d new URLs, fetch %.1fs, update %.1fs\n",
			l.Round, l.Generated, l.Fetched, l.ByClass["2xx"], l.NewURLs, l.FetchSeconds, l.UpdateSeconds)
		if l.NoIndex > 0 || l.Canonical > 0 || l.Traps.Total() > 0 {
			p("          its pages: %d said noindex, %d named another canonical; %d links refused as spider traps (%d repetition, %d calendar)\n",
				l.NoIndex, l.Canonical, l.Traps.Total(), l.Traps.Repetition, l.Traps.Calendar)
		}
	}

	f := st.Fetcher
	p("fetcher   %d done, %d in flight, %d queued, %d requests, %s, %d hosts in the workbench",
		f.Done, f.InFlight, f.Queued, f.Requests, byteSize(f.Bytes), f.Hosts)
	if len(f.FetchFrom) > 0 {
		from := make([]string, len(f.FetchFrom))
		for i, a := range f.FetchFrom {
			from[i] = a.String()
		}
		p("; fetching from %s", strings.Join(from, ", "))
	}
	p("\n")

	c := st.CrawlDB
	p("crawldb   %d URLs, %d in the frontier, %d fetched", c.URLs, c.Frontier, c.ByStatus["fetched"])
	if c.Scheduled > 0 {
		p(" (%d waiting for their refetch)", c.Scheduled)
	}
	var other []string
	for _, k := range slices.Sorted(maps.Keys(c.ByStatus)) {
		if k != "fetched" && k != "unfetched" && c.ByStatus[k] > 0 {
			other = append(other, fmt.Sprintf("%d %s", c.ByStatus[k], k))
		}
	}
	if len(other) > 0 {
		p(" (%s)", strings.Join(other, ", "))
	}
	p("\n")
	if rf := st.Refetch; rf != nil && rf.Refetches > 0 {
		p("refetch   %.1f/s over the last %d rounds (%s): %d refetches, %.1f%% answered 304 Not Modified\n",
			rf.Rate, rf.Rounds, roundDur(rf.Window), rf.Refetches, 100*rf.NotModifiedShare)
		p("          est. freshness %.1f%%: the share of refetched pages whose stored copy was still the live one "+
			"(304 or the same body); per page a lower bound on its time-averaged freshness\n", 100*rf.Freshness)
	}

	if st.Sharding != nil || len(st.Shards) > 0 {
		writeShards(&b, st)
	}
	if st.Site != nil {
		writeSite(&b, st.Site)
	}

	if fed := st.Federation; fed != nil {
		state := "crawling"
		switch {
		case fed.Terminated:
			state = "ended"
		case fed.Passive:
			state = "idle"
		}
		p("\nfederation (%s partitioner): %s; sent %d URLs, received %d; outbox %d entries; URL-sent cache hit %.1f%% of %d\n",
			fed.Partitioner, state, fed.SentURLs, fed.RecvURLs, fed.Outbox, 100*fed.CacheRate, fed.CacheLookup)
		if len(fed.Peers) > 0 {
			tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  peer\tstate\tsilent\toutbox\tsent seq\trecv seq\tout\tin\tlast error")
			for _, pe := range fed.Peers {
				e := pe.LastErr
				if e == "" {
					e = "-"
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", pe.Name, pe.State, roundDur(pe.Silent), pe.Outbox,
					pe.Sent, pe.Recv, byteSize(pe.BytesOut), byteSize(pe.BytesIn), e)
			}
			tw.Flush()
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeShards writes a sharded node's shards: one line per shard it holds
// a replica of, with its leader, replicas, frontier and fetched pages,
// and what is wrong with it (under-replicated, replicas on silent nodes,
// no leader) or under way.
func writeShards(b *strings.Builder, st Status) {
	led, under := 0, 0
	for _, sh := range st.Shards {
		if sh.Leader == st.Node {
			led++
		}
		if sh.UnderReplicated {
			under++
		}
	}
	fmt.Fprintf(b, "\nshards    ")
	if s := st.Sharding; s != nil {
		fmt.Fprintf(b, "%d in the site, target %d replicas each; ", s.Shards, s.Replicas)
	}
	fmt.Fprintf(b, "this node holds %d, leads %d", len(st.Shards), led)
	if under > 0 {
		fmt.Fprintf(b, "; %d UNDER-REPLICATED", under)
	}
	if s := st.Sharding; s != nil && len(st.Shards) < s.Shards {
		fmt.Fprintf(b, " (partial: the other shards are only on other nodes)")
	}
	b.WriteString("\n")
	if len(st.Shards) == 0 {
		return
	}
	tw := tabwriter.NewWriter(b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  shard\tleader\treplicas\tfrontier\tfetched\tstate")
	for _, sh := range st.Shards {
		leader := sh.Leader
		if leader == "" {
			leader = "NONE"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%d\t%s\n", sh.Shard, leader, strings.Join(sh.Replicas, ","), sh.Frontier, sh.Fetched, strings.Join(shardState(sh, nil), "; "))
	}
	tw.Flush()
}

// shardState is what is wrong with a shard or under way ("ok" if
// nothing): nodes that did not answer a site-wide view (notAnswering),
// too few replicas, replicas on silent nodes, a move, a step, the end.
func shardState(sh shardset.ShardStatus, notAnswering []string) []string {
	var state []string
	if len(notAnswering) > 0 {
		state = append(state, "NOT ANSWERING: "+strings.Join(notAnswering, ","))
	}
	if sh.UnderReplicated {
		state = append(state, fmt.Sprintf("UNDER-REPLICATED (%d)", len(sh.Replicas)))
	}
	if len(sh.Down) > 0 {
		state = append(state, "silent: "+strings.Join(sh.Down, ","))
	}
	why := ""
	if sh.Moving != "" {
		why = " (" + sh.Moving + ")"
	}
	switch {
	case len(sh.Target) > 0 && !slices.Equal(slices.Sorted(slices.Values(sh.Target)), sh.Replicas):
		state = append(state, "moving to "+strings.Join(sh.Target, ",")+why)
	case sh.Moving != "":
		state = append(state, "moving"+why)
	}
	if sh.Step != "" {
		state = append(state, sh.Step)
	}
	if sh.Finished {
		state = append(state, "finished")
	}
	if len(state) == 0 {
		state = append(state, "ok")
	}
	return state
}

// writeSite writes a sharded site's site-wide view (`site status` asks
// for it): every shard, from the node whose replica gave its row (its
// leader's when it answered), and every node, up if it answered.
func writeSite(b *strings.Builder, v *SiteView) {
	up, under := 0, 0
	var silent []string
	for _, n := range v.Nodes {
		if n.Up {
			up++
		} else {
			silent = append(silent, n.ID)
		}
	}
	for _, r := range v.Rows {
		if r.UnderReplicated {
			under++
		}
	}
	fmt.Fprintf(b, "\nsite-wide %d shards, gathered by %s from %d of %d nodes", v.Shards, v.By, up, len(v.Nodes))
	if len(silent) > 0 {
		fmt.Fprintf(b, " (%s not answering within %s)", strings.Join(silent, ","), roundDur(v.Wait))
	}
	if under > 0 {
		fmt.Fprintf(b, "; %d UNDER-REPLICATED", under)
	}
	if v.NotAnswering > 0 {
		fmt.Fprintf(b, "; %d with no answering replica", v.NotAnswering)
	}
	b.WriteString("\n")
	if f := v.Federation; f != nil {
		fmt.Fprintf(b, "site-wide federation (%d of %d shards): sent %d URLs, received %d; outboxes %d entries; URL-sent cache %d\n",
			v.FederationShards, v.Shards, f.SentURLs, f.RecvURLs, f.Outbox, f.SentCache)
	}
	tw := tabwriter.NewWriter(b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  shard\tleader\treplicas\tlearners\tfrontier\tfetched\tpages/s\tfrom\tstate")
	dash := func(s []string) string {
		if len(s) == 0 {
			return "-"
		}
		return strings.Join(s, ",")
	}
	for _, r := range v.Rows {
		if r.From == "" { // no replica answered: the meta group's records
			state := "NOT ANSWERING: " + dash(r.NotAnswering)
			if len(r.Target) > 0 {
				state += "; placed on " + strings.Join(r.Target, ",")
				if r.TargetLeader != "" {
					state += ", led by " + r.TargetLeader
				}
			}
			fmt.Fprintf(tw, "  %d\t?\t?\t?\t?\t?\t?\tmeta\t%s\n", r.Shard, state)
			continue
		}
		leader := r.Leader
		if leader == "" {
			leader = "NONE"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%d\t%.1f\t%s\t%s\n", r.Shard, leader, dash(r.Replicas), dash(r.Learners),
			r.Frontier, r.Fetched, r.Pages, r.From, strings.Join(shardState(r.ShardStatus, r.NotAnswering), "; "))
	}
	tw.Flush()
	tw = tabwriter.NewWriter(b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  node\tup\tled\theld\tapi\terror")
	for _, n := range v.Nodes {
		id, e := n.ID, n.Err
		if n.Self {
			id += " (this node)"
		}
		if e == "" {
			e = "-"
		}
		fmt.Fprintf(tw, "  %s\t%v\t%d\t%d\t%s\t%s\n", id, n.Up, n.Led, n.Held, n.API, e)
	}
	tw.Flush()
}

// roundDur prints seconds as a short duration ("3.2s", "4m10s").
func roundDur(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// byteSize prints a byte count with a binary unit.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// controlsLine sums up the operator's controls in one line.
func controlsLine(c *control.Controls, now time.Time) string {
	var parts []string
	if c.Paused {
		parts = append(parts, "PAUSED (site resume)")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"width", c.Width}, {"per-host", c.PerHost}, {"host budget", c.HostBudget}, {"pld budget", c.PLDBudget}} {
		if f.v > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", f.name, f.v))
		}
	}
	blocked, delayed := 0, 0
	for _, h := range c.Hosts {
		if h.BlockedAt(now) {
			blocked++
		}
		if h.Delay > 0 {
			delayed++
		}
	}
	if blocked > 0 {
		parts = append(parts, fmt.Sprintf("%d hosts blocked", blocked))
	}
	if delayed > 0 {
		parts = append(parts, fmt.Sprintf("%d hosts with a delay", delayed))
	}
	if n := len(c.Changes); n > 0 {
		l := c.Changes[n-1]
		parts = append(parts, fmt.Sprintf("last change %q by %s at %s", l.What, l.By, l.At.Format(time.RFC3339)))
	}
	if len(parts) == 0 {
		return "none in force"
	}
	return strings.Join(parts, "; ")
}

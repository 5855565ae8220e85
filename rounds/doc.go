// Package rounds runs a site's crawl in rounds over the site's nodes:
// generate (the top of the frontier, width in all, each host as many URLs
// as it can serve at its own pace in the time a host at the site's host
// delay takes for k = PerHost: plan.RoundBudget; at the crawl's tail,
// when no host at the host delay has URLs left, in the time the fastest
// host left takes for k: plan.RoundSpan), fetch+parse
// (the polite fetcher of every node) and update (outlinks reduced by URL
// with their OPIC cash, written to the crawl database in batches).
//
// # Leader and nodes
//
// Every node of a site runs a Crawler. The node that leads the crawl
// database also leads the rounds (leader.go): it generates each round,
// groups the round's hosts into politeness units (a host; with an IP delay,
// all hosts behind one address) and splits them into parts over the nodes
// that report to it, by the rules of package plan; it writes the plan to
// the crawl database (every key under r/<round>/, see keys.go), starts a
// round's update once every part is done, and ends the crawl. Everything it
// decides is in the crawl database, and each of its writes is fenced by a
// token under site/leader: a new leader continues where the old one
// stopped, and a deposed one cannot write.
//
// Every node (node.go) watches its replica for the parts given to it,
// hands their URLs to its fetcher, appends each result to a write-ahead
// segment under Dir/rounds/N (so that a restart stages what it had instead
// of fetching it again), maps the results (outlinks, cash split, combined
// by URL) and stages the mapped batch in the crawl database when the part
// is done, or after Options.StageEvery, each staging command guarded by the
// part's owner so that a node whose part was moved cannot add to it. A
// node leading a site of one node keeps its results in its segment instead
// and stages only done markers (local parts): nothing else could read
// them. Nodes report to the leader every ReportEvery; the parts of a node
// silent for FailTimeout, or stopping (Drain), go to the others, which
// start on their hosts no earlier than the old node's delays allow. A node
// that lost the leader pauses its fetcher, and resumes only once its
// replica shows what the leader decided meanwhile.
//
// # The update
//
// The leader reads a round's staged batches in key order (and the local
// parts' segment), stages its revisits first (an update revisits, from a
// bounded in-memory link store, the fetched pages that cash has reached
// since their fetch, passing that cash on over their outlinks without
// fetching them again), reduces the credits by URL on rounds/mapreduce and
// writes the update's commands to Dir/rounds/N/update, each carrying a
// progress marker so that a restart applies each exactly once. Given the
// same staged data and round state the preparation gives the same
// commands, so a new leader prepares the update again and resumes after
// the last command applied. The last command retires the round: its state,
// plan and staged batches go in one command.
//
// # Overlap
//
// Rounds overlap: the next round is generated when nothing is fetching, or
// when the one round fetching is running dry (few URLs left to start site
// wide), and only once every earlier update is in (plan.Generate); so a
// round is fetched while the previous one's update is applied, and at most
// two rounds fetch at once.
package rounds

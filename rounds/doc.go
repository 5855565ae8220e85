// Package rounds runs a site's crawl in rounds: generate (the top of the
// frontier, k per host, width in all), fetch+parse (the polite fetcher) and
// update (outlinks reduced by URL with their OPIC cash, written to the crawl
// database in batches). An update also revisits, from a bounded in-memory
// link store, the fetched pages that cash has reached since their fetch,
// passing that cash on over their outlinks without fetching them again, so a
// page's score is not frozen at the cash it had when it was fetched. Rounds
// overlap: the next round is generated and fetched while the previous one's
// update is applied.
//
// Every step is restartable after a SIGKILL. Each round keeps three files
// under Dir/rounds/N: the generated list (written and synced before the URLs
// are marked generated), the fetch segment (one record per finished fetch,
// written as it finishes, so a restart refetches only what was in flight) and
// the update file (the encoded crawl-database commands of the update, each
// carrying a progress marker, so a restart applies each exactly once). The
// round state (rounds in flight, the virtual page's cash, the cash injected)
// lives in the crawl database.
package rounds

// Package federation joins sites of several regions into one crawl. Each
// site owns the hosts a partitioner gives it (package partition) and crawls
// only those. It is the routing layer the rounds call (route.Router): one
// call, Fed.Route, keeps a batch's URLs of this site and writes the others
// into the caller's crawl-database command as outbox entries in their wire
// encoding, and this package delivers them:
//
//   - frontier mode: the only call between sites is PutIfAbsent(batch):
//     the owner inserts the URLs it does not know with their OPIC cash and
//     adds the cash of those it knows; every read stays local;
//   - the URL-sent cache (in the crawl database, so every node of a site
//     shares it), checked by Route: a URL already sent (or enqueued) to its
//     owner is not sent again, its cash goes with the entry to the owner's
//     virtual page instead; the others enter the cache in the command that
//     enqueues them;
//   - a durable outbox: a put is done for its round once it is in the
//     outbox; delivery frames stored entries as they are (AppendFrame: no
//     decoding, no re-encoding), by a Transport per owner (another site's
//     endpoint; another shard of the site later), retried with back-off and
//     acknowledged by sequence number;
//   - a failure detector (probes): a site silent for SuspectAfter is
//     suspect; after the federation's grace period its hosts go to their
//     next owner (contravariance), and come back when it answers again;
//   - termination: the federation's crawl ends when every live site is
//     idle and nothing is in flight, detected with Mattern's four-counter
//     method (two consecutive waves of probes, every site passive in both,
//     batches sent = batches received and unchanged: package termwave,
//     which a sharded site's waves between its shards use too); the
//     coordinator is the live site with the smallest name.
//
// Sites are listed in a federation file (ReadFile), the same at every site.
package federation

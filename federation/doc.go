// Package federation joins sites of several regions into one crawl. Each
// site owns the hosts a partitioner gives it (package partition) and crawls
// only those; the update of a round puts the URLs it found on other sites'
// hosts into the crawl database's outbox, and this package delivers them:
//
//   - frontier mode: the only call between sites is PutIfAbsent(batch):
//     the owner inserts the URLs it does not know with their OPIC cash and
//     adds the cash of those it knows; every read stays local;
//   - the URL-sent cache (in the crawl database, so every node of a site
//     shares it): a URL already sent to its owner is not sent again, its
//     cash goes with the batch to the owner's virtual page instead;
//   - a durable outbox: a put is done for its round once it is in the
//     outbox; delivery is batched, retried with back-off, acknowledged by a
//     command that also fills the sent cache;
//   - a failure detector (probes): a site silent for SuspectAfter is
//     suspect; after the federation's grace period its hosts go to their
//     next owner (contravariance), and come back when it answers again;
//   - termination: the federation's crawl ends when every live site is
//     idle and nothing is in flight, detected with Mattern's four-counter
//     method (two consecutive waves of probes, every site passive in both,
//     batches sent = batches received and unchanged); the coordinator is
//     the live site with the smallest name.
//
// Sites are listed in a federation file (ReadFile), the same at every site.
package federation

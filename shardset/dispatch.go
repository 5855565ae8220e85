package shardset

import (
	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/fetcher"
)

// The node's one fetcher serves every shard's crawler: groupFetcher tags a
// shard's jobs with it, and the Set's hooks send what the fetcher reports
// back to the crawler of the shard the job (or the host) belongs to.

// groupFetcher is a shard's view of the node's fetcher (rounds.Fetcher,
// with pause and abort for its own jobs only).
type groupFetcher struct {
	s *Set
	g uint32
}

// Submit tags the jobs with the shard and hands them to the fetcher.
func (gf groupFetcher) Submit(jobs []fetcher.Job) {
	for i := range jobs {
		jobs[i].Group = gf.g
		gf.s.hostShard.Store(jobs[i].Host, gf.g)
	}
	gf.s.fetch.Load().Submit(jobs)
}

// Stats are the shard's queued jobs and requests in flight.
func (gf groupFetcher) Stats() fetcher.Stats {
	gs := gf.s.fetch.Load().GroupStats(gf.g)
	return fetcher.Stats{Queued: gs.Queued, InFlight: gs.InFlight}
}

// Pause stops (or resumes) the start of the shard's requests.
func (gf groupFetcher) Pause(on bool) { gf.s.fetch.Load().PauseGroup(gf.g, on) }

// Abort ends the shard's requests in flight.
func (gf groupFetcher) Abort() { gf.s.fetch.Load().AbortGroup(gf.g) }

// shardOfHost returns the crawler's replica for host's jobs, or nil.
func (s *Set) shardOfHost(host string) *replica {
	v, ok := s.hostShard.Load(host)
	if !ok {
		return nil
	}
	return s.replica(int(v.(uint32)))
}

// OnResult is the fetcher's result hook: the result goes to the crawler
// of its job's shard (robots.txt and sitemap results: of their host's).
// A result of a shard whose replica has gone is dropped and counted: its
// URL stays generated in the shard's crawl database, where the shard's
// new leader fetches it.
func (s *Set) OnResult(res *fetcher.Result) {
	r := s.replica(int(res.Group))
	if res.Kind != fetcher.KindPage {
		if h := s.shardOfHost(res.Host); h != nil {
			r = h
		}
	}
	if r == nil {
		s.dropped.Add(1)
		return
	}
	r.crawler().OnResult(res)
}

// Skip is the fetcher's Skip hook: the job's shard's crawler decides; a
// job of a shard not open here is skipped.
func (s *Set) Skip(j *fetcher.Job) bool {
	r := s.replica(int(j.Group))
	if r == nil {
		return true
	}
	return r.cur.Load().skip(j)
}

// Seen is the fetcher's duplicate check: a body's fingerprint is looked up
// in the crawler of the URL's host's shard.
func (s *Set) Seen(fp uint64, url string) bool {
	r := s.shardOfHost(crawl.HostOf(url))
	if r == nil {
		return false
	}
	return r.crawler().Seen(fp, url)
}

// Hosts is the fetcher's host store: each host's record is kept by its
// shard's crawler.
func (s *Set) Hosts() fetcher.HostStore { return hostStore{s} }

type hostStore struct{ s *Set }

// LoadHost reads host's record from its shard's crawl database.
func (h hostStore) LoadHost(host string) (crawl.HostRecord, bool, error) {
	r := h.s.shardOfHost(host)
	if r == nil {
		return crawl.HostRecord{}, false, nil
	}
	return r.crawler().Hosts().LoadHost(host)
}

// SaveHost stores host's record through its shard's crawler; a host of a
// shard not open here is not stored (its new leader fetches robots.txt
// again).
func (h hostStore) SaveHost(host string, rec crawl.HostRecord) {
	if r := h.s.shardOfHost(host); r != nil {
		r.crawler().Hosts().SaveHost(host, rec)
	}
}

// Dropped counts results of shards not open here.
func (s *Set) Dropped() int64 { return s.dropped.Load() }

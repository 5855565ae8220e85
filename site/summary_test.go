package site_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/shardset"
	"github.com/meridian-crawler/meridian/site"
)

func TestWriteSummary(t *testing.T) {
	base := site.Status{Region: "eu", Node: "eu-1", Role: "leader", PID: 42, Uptime: 75, Phase: rounds.PhaseFetch, Round: 7,
		Rounds: rounds.Status{Done: 5, Active: []rounds.Active{{Round: 6, Phase: rounds.PhaseUpdate}, {Round: 7, Phase: rounds.PhaseFetch}},
			Last: &rounds.RoundStats{Round: 5, Generated: 100, Fetched: 98, ByClass: map[string]int64{"2xx": 90}, NewURLs: 300}}}
	base.CrawlDB.URLs, base.CrawlDB.Frontier = 1000, 600
	base.CrawlDB.ByStatus = map[string]uint64{"fetched": 350, "unfetched": 600, "gone": 50}
	withFed := base
	withFed.Federation = &federation.Status{Partitioner: "consistent", SentURLs: 1234, RecvURLs: 567, Outbox: 2, CacheRate: 0.75, CacheLookup: 400,
		Peers: []federation.PeerStatus{{Name: "us", State: "up", Sent: 9, Recv: 8, BytesOut: 4096}, {Name: "asia", State: "suspect", Silent: 3, LastErr: "timeout"}}}
	finished := base
	finished.Rounds.Finished = &rounds.Finish{Reason: "exhausted", Rounds: 5}
	cut := base
	cut.Rounds.Finished = &rounds.Finish{Reason: rounds.EndRounds, Rounds: 5, Frontier: 158}
	budget := base
	budget.Rounds.Finished = &rounds.Finish{Reason: rounds.EndBudget, Rounds: 5, Frontier: 12}
	stopping := base
	stopping.Stopped = &rounds.Finish{Reason: rounds.EndSignal, Rounds: 5, Frontier: 600, InFlight: 40}
	refetching := base
	refetching.CrawlDB.Scheduled = 340
	refetching.Refetch = &site.RefetchFigures{Rounds: 60, Window: 450, Refetches: 1125, NotModified: 450, Unchanged: 461, Changed: 214,
		Rate: 2.5, NotModifiedShare: 0.4, Freshness: 0.80978}
	idle := base // refetching on, nothing refetched yet
	idle.CrawlDB.Scheduled = 340
	idle.Refetch = &site.RefetchFigures{Rounds: 3, Window: 12}
	signals := base
	last := *base.Rounds.Last
	last.NoIndex, last.Canonical, last.Traps = 12, 3, rounds.TrapStats{Repetition: 38, Calendar: 2}
	signals.Rounds.Last = &last
	fetchFrom := base
	fetchFrom.Fetcher.FetchFrom = []netip.Addr{netip.MustParseAddr("127.0.2.1"), netip.MustParseAddr("127.0.2.2")}
	sharded := base
	sharded.Sharding = &shardset.Settings{Shards: 4, Replicas: 3}
	sharded.Shards = []shardset.ShardStatus{
		{Shard: 0, Leader: "eu-1", Replicas: []string{"eu-1", "eu-2", "eu-3"}, Target: []string{"eu-3", "eu-1", "eu-2"}, Frontier: 120, Fetched: 40},
		{Shard: 2, Leader: "eu-2", Replicas: []string{"eu-1", "eu-2"}, Target: []string{"eu-1", "eu-2", "eu-4"}, UnderReplicated: true, Down: []string{"eu-3"},
			Frontier: 7, Fetched: 300, Step: "add eu-4", Moving: "eu-4 joined; eu-3 silent"},
		{Shard: 3, Replicas: []string{"eu-1"}, Frontier: 5, Finished: true},
	}
	siteWide := sharded
	siteWide.Site = &site.SiteView{By: "eu-1", Wait: 1, Shards: 3, Replicas: 3, NotAnswering: 1,
		Rows: []site.SiteRow{
			{ShardStatus: shardset.ShardStatus{Shard: 0, Leader: "eu-2", Replicas: []string{"eu-1", "eu-2", "eu-3"}, Learners: []string{"eu-4"}, Target: []string{"eu-1", "eu-2", "eu-3"},
				Frontier: 120, Fetched: 40, Moving: "eu-4 joined"}, Pages: 12.345, From: "eu-2", NotAnswering: []string{"eu-3"}},
			{ShardStatus: shardset.ShardStatus{Shard: 1, Leader: "eu-1", Replicas: []string{"eu-1"}, UnderReplicated: true, Frontier: 7, Fetched: 3}, From: "eu-1"},
			{ShardStatus: shardset.ShardStatus{Shard: 2, Target: []string{"eu-3"}, TargetLeader: "eu-3"}, NotAnswering: []string{"eu-3"}},
		},
		Nodes: []site.SiteNode{{ID: "eu-1", Self: true, Up: true, Led: 1, Held: 2, API: "10.0.0.1:7001"}, {ID: "eu-2", Up: true, Led: 1, Held: 1, API: "10.0.0.2:7001"},
			{ID: "eu-3", Err: "no answer", API: "10.0.0.3:7001", Held: 1}}}
	tests := []struct {
		name      string
		st        site.Status
		want, not []string
	}{
		{"one node", base, []string{"site eu, node eu-1 (leader), pid 42, up 1m15s", "rounds    5 done, phase fetch; in flight: 6 update, 7 fetch",
			"last round 5: 100 generated, 98 fetched (90 2xx), 300 new URLs", "crawldb   1000 URLs, 600 in the frontier, 350 fetched (50 gone)"},
			[]string{"nodes", "federation", "shards", "fetching from", "refetch", "freshness", "noindex", "spider traps"}},
		{"signals", signals, []string{"last round 5: 100 generated, 98 fetched (90 2xx), 300 new URLs, fetch 0.0s, update 0.0s\n" +
			"          its pages: 12 said noindex, 3 named another canonical; 40 links refused as spider traps (38 repetition, 2 calendar)\n"}, nil},
		{"refetches", refetching, []string{"crawldb   1000 URLs, 600 in the frontier, 350 fetched (340 waiting for their refetch) (50 gone)\n",
			"refetch   2.5/s over the last 60 rounds (7m30s): 1125 refetches, 40.0% answered 304 Not Modified\n",
			"          est. freshness 81.0%: the share of refetched pages whose stored copy was still the live one (304 or the same body); per page a lower bound on its time-averaged freshness\n"},
			nil},
		{"no refetches yet", idle, []string{"(340 waiting for their refetch)"}, []string{"refetch   ", "freshness"}},
		{"fetch from", fetchFrom, []string{"hosts in the workbench; fetching from 127.0.2.1, 127.0.2.2\n"}, nil},
		{"federation", withFed, []string{"federation (consistent partitioner): crawling; sent 1234 URLs, received 567; outbox 2 entries; URL-sent cache hit 75.0% of 400",
			"us    up", "4.0 KiB", "asia  suspect", "timeout"}, nil},
		{"shards", sharded, []string{"\nshards    4 in the site, target 3 replicas each; this node holds 3, leads 1; 1 UNDER-REPLICATED (partial: the other shards are only on other nodes)\n",
			"  shard  leader  replicas        frontier  fetched  state\n",
			"  0      eu-1    eu-1,eu-2,eu-3  120       40       ok\n",
			"  2      eu-2    eu-1,eu-2       7         300      UNDER-REPLICATED (2); silent: eu-3; moving to eu-1,eu-2,eu-4 (eu-4 joined; eu-3 silent); add eu-4\n",
			"  3      NONE    eu-1            5         0        finished\n"},
			[]string{"\nnodes\n", "federation"}},
		{"site-wide", siteWide, []string{
			"\nsite-wide 3 shards, gathered by eu-1 from 2 of 3 nodes (eu-3 not answering within 1s); 1 UNDER-REPLICATED; 1 with no answering replica\n",
			"  shard  leader  replicas        learners  frontier  fetched  pages/s  from  state\n",
			"  0      eu-2    eu-1,eu-2,eu-3  eu-4      120       40       12.3     eu-2  NOT ANSWERING: eu-3; moving (eu-4 joined)\n",
			"  1      eu-1    eu-1            -         7         3        0.0      eu-1  UNDER-REPLICATED (1)\n",
			"  2      ?       ?               ?         ?         ?        ?        meta  NOT ANSWERING: eu-3; placed on eu-3, led by eu-3\n",
			"  eu-1 (this node)  true   1    2     10.0.0.1:7001  -\n",
			"  eu-3              false  0    1     10.0.0.3:7001  no answer\n"},
			nil},
		{"finished", finished, []string{"rounds    finished after 5 rounds (exhausted)"}, []string{"in flight: "}},
		{"round limit", cut, []string{"rounds    stopped at the round limit (--rounds) after 5 rounds; 158 URLs left unfetched in the frontier"},
			[]string{"in flight: ", "exhausted"}},
		{"budget", budget, []string{"rounds    stopped after 5 rounds: the 12 URLs left in the frontier are all of hosts that used their page budget"},
			[]string{"in flight: ", "exhausted"}},
		{"signal", stopping, []string{"rounds    stopping (signal) after 5 rounds; 600 URLs left unfetched in the frontier, 40 in rounds in flight"},
			[]string{"exhausted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := tt.st.WriteSummary(&b); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("summary lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(out, w) {
					t.Errorf("summary has %q:\n%s", w, out)
				}
			}
		})
	}
}

package site

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/shardset"
)

// TestMergeSite: the site-wide view keeps, for each shard, the row of the
// node that leads it as its own replica says (of two that say so, the
// later term's); without it, an answering replica's that knows a leader,
// then any answering replica's, then the meta group's records; a row
// names the shard's nodes that did not answer (with no answer from its
// leader, also the placement's and the last reported leader's); the
// nodes are the meta group's voters, sorted, each up if it answered,
// with the leads and replicas of the rows.
func TestMergeSite(t *testing.T) {
	voters := []crawldb.Member{{ID: "n2", APIAddr: "a2"}, {ID: "n1", APIAddr: "a1"}, {ID: "n3", APIAddr: "a3"}}
	row := func(from string, sh int, leader string, term uint64, replicas ...string) SiteRow {
		return SiteRow{ShardStatus: shardset.ShardStatus{Shard: sh, Leader: leader, Term: term, Replicas: replicas, Frontier: frontier(from, sh)}, From: from}
	}
	down := errors.New("refused")
	type want struct {
		from, leader string
		silent       []string
	}
	tests := []struct {
		name     string
		shards   int
		recs     []shardset.ShardRecord
		answers  map[string]nodeAnswer
		voters   []crawldb.Member
		rows     []want
		missing  int
		up       []bool   // by sorted voter
		led      []int    // by sorted voter
		held     []int    // by sorted voter
		nodesIDs []string // sorted voters
	}{
		{
			name: "every node answers: the leaders' rows", shards: 3,
			answers: map[string]nodeAnswer{
				"n1": {rows: []SiteRow{row("n1", 0, "n1", 2, "n1", "n2"), row("n1", 1, "n2", 3, "n1", "n2")}},
				"n2": {rows: []SiteRow{row("n2", 0, "n1", 2, "n1", "n2"), row("n2", 1, "n2", 3, "n1", "n2"), row("n2", 2, "n3", 1, "n2", "n3")}},
				"n3": {rows: []SiteRow{row("n3", 2, "n3", 1, "n2", "n3")}},
			},
			rows:    []want{{"n1", "n1", nil}, {"n2", "n2", nil}, {"n3", "n3", nil}},
			up:      []bool{true, true, true},
			led:     []int{1, 1, 1},
			held:    []int{2, 3, 1},
			missing: 0,
		},
		{
			name: "the leader silent: a follower's row, its silent replica named", shards: 1,
			recs: []shardset.ShardRecord{{Shard: 0, Target: []string{"n1", "n3"}, TargetLeader: "n3", Reported: "n3"}},
			answers: map[string]nodeAnswer{
				"n1": {rows: []SiteRow{row("n1", 0, "", 4, "n1", "n3")}},
				"n2": {rows: []SiteRow{}},
				"n3": {err: down},
			},
			rows: []want{{"n1", "", []string{"n3"}}},
			up:   []bool{true, true, false}, led: []int{0, 0, 0}, held: []int{1, 0, 1},
		},
		{
			name: "a follower that knows the leader beats one that does not", shards: 1,
			answers: map[string]nodeAnswer{
				"n1": {rows: []SiteRow{row("n1", 0, "", 4, "n1", "n2", "n3")}},
				"n2": {rows: []SiteRow{row("n2", 0, "n3", 4, "n1", "n2", "n3")}},
				"n3": {err: down},
			},
			rows: []want{{"n2", "n3", []string{"n3"}}},
			up:   []bool{true, true, false}, led: []int{0, 0, 1}, held: []int{1, 1, 1},
		},
		{
			name: "two say they lead: the later term", shards: 1,
			answers: map[string]nodeAnswer{
				"n1": {rows: []SiteRow{row("n1", 0, "n1", 5, "n1", "n2")}},
				"n2": {rows: []SiteRow{row("n2", 0, "n2", 6, "n1", "n2")}},
				"n3": {rows: []SiteRow{}},
			},
			rows: []want{{"n2", "n2", nil}},
			up:   []bool{true, true, true}, led: []int{0, 1, 0}, held: []int{1, 1, 0},
		},
		{
			name: "R = 1, its node silent: the meta group's records", shards: 2,
			recs: []shardset.ShardRecord{{Shard: 0, Target: []string{"n1"}, TargetLeader: "n1"}, {Shard: 1, Target: []string{"n3"}, TargetLeader: "n3", Reported: "n3", ReportedVoters: []string{"n3"}}},
			answers: map[string]nodeAnswer{
				"n1": {rows: []SiteRow{row("n1", 0, "n1", 1, "n1")}},
				"n2": {rows: []SiteRow{}},
				"n3": {err: down},
			},
			rows:    []want{{"n1", "n1", nil}, {"", "", []string{"n3"}}},
			missing: 1,
			up:      []bool{true, true, false}, led: []int{1, 0, 0}, held: []int{1, 0, 0},
		},
		{
			name: "R = 1, re-placed on a node that waits for it: the last leader named", shards: 1,
			recs: []shardset.ShardRecord{{Shard: 0, Target: []string{"n2"}, TargetLeader: "n2", Reported: "n3", ReportedVoters: []string{"n3"}}},
			answers: map[string]nodeAnswer{
				"n1": {rows: []SiteRow{}},
				"n2": {rows: []SiteRow{row("n2", 0, "", 0)}},
			},
			rows: []want{{"n2", "", []string{"n3"}}},
			up:   []bool{true, true, false}, led: []int{0, 0, 0}, held: []int{0, 0, 0},
		},
		{
			name: "this node missing from the voters read: its rows still count", shards: 1,
			voters:  []crawldb.Member{{ID: "n2"}},
			answers: map[string]nodeAnswer{"n1": {rows: []SiteRow{row("n1", 0, "n1", 1, "n1")}}, "n2": {rows: []SiteRow{}}},
			rows:    []want{{"n1", "n1", nil}},
			up:      []bool{true, true}, led: []int{1, 0}, held: []int{1, 0}, nodesIDs: []string{"n1", "n2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := voters
			if tt.voters != nil {
				vs = tt.voters
			}
			ids := tt.nodesIDs
			if ids == nil {
				ids = []string{"n1", "n2", "n3"}
			}
			v := mergeSite("n1", shardset.Settings{Shards: tt.shards, Replicas: 2}, vs, tt.recs, tt.answers)
			if v.By != "n1" || v.Shards != tt.shards || len(v.Rows) != tt.shards || v.NotAnswering != tt.missing {
				t.Fatalf("view by %s, %d shards, %d rows, %d not answering; want n1, %d, %d, %d", v.By, v.Shards, len(v.Rows), v.NotAnswering, tt.shards, tt.shards, tt.missing)
			}
			for i, r := range v.Rows {
				w := tt.rows[i]
				if r.Shard != i || r.From != w.from || r.Leader != w.leader || !slices.Equal(r.NotAnswering, w.silent) {
					t.Errorf("row %d: shard %d from %q, leader %q, not answering %v; want from %q, leader %q, not answering %v", i, r.Shard, r.From, r.Leader, r.NotAnswering, w.from, w.leader, w.silent)
				}
				if r.From == "" && i < len(tt.recs) && !slices.Equal(r.Target, tt.recs[i].Target) {
					t.Errorf("row %d from the records: target %v, want %v", i, r.Target, tt.recs[i].Target)
				}
				if r.From != "" && r.Frontier != frontier(r.From, i) {
					t.Errorf("row %d: frontier %d is not the row of %s", i, r.Frontier, r.From)
				}
			}
			var got []string
			for i, n := range v.Nodes {
				got = append(got, n.ID)
				if i >= len(tt.up) {
					break
				}
				if n.Up != tt.up[i] || n.Led != tt.led[i] || n.Held != tt.held[i] || n.Self != (n.ID == "n1") || (n.Up != (n.Err == "")) {
					t.Errorf("node %+v; want up %v, %d led, %d held", n, tt.up[i], tt.led[i], tt.held[i])
				}
			}
			if !slices.Equal(got, ids) {
				t.Errorf("nodes %v, want %v", got, ids)
			}
		})
	}
}

// TestMergeSiteFederation: the site-wide view's federation figures sum the
// picked rows' (each shard once, from the replica whose row is shown),
// say over how many shards, and are absent without a federation; the
// status summary prints them.
func TestMergeSiteFederation(t *testing.T) {
	voters := []crawldb.Member{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}}
	row := func(from string, sh int, leader string, fig *federation.ShardFigures) SiteRow {
		return SiteRow{ShardStatus: shardset.ShardStatus{Shard: sh, Leader: leader, Term: 1, Replicas: []string{"n1", "n2"}}, From: from, Federation: fig}
	}
	answers := map[string]nodeAnswer{
		"n1": {rows: []SiteRow{row("n1", 0, "n1", &federation.ShardFigures{SentURLs: 10, RecvURLs: 1, Outbox: 2, SentCache: 5})}},
		"n2": {rows: []SiteRow{
			row("n2", 0, "n1", &federation.ShardFigures{SentURLs: 9}), // a follower's, behind
			row("n2", 1, "n2", &federation.ShardFigures{SentURLs: 20, RecvURLs: 3}),
		}},
		"n3": {err: errors.New("refused")},
	}
	v := mergeSite("n1", shardset.Settings{Shards: 3, Replicas: 2}, voters, nil, answers)
	want := federation.ShardFigures{SentURLs: 30, RecvURLs: 4, Outbox: 2, SentCache: 5}
	if v.Federation == nil || *v.Federation != want || v.FederationShards != 2 {
		t.Fatalf("site-wide federation %+v over %d shards; want %+v over 2", v.Federation, v.FederationShards, want)
	}
	var b strings.Builder
	writeSite(&b, v)
	if line := "site-wide federation (2 of 3 shards): sent 30 URLs, received 4; outboxes 2 entries; URL-sent cache 5\n"; !strings.Contains(b.String(), line) {
		t.Errorf("summary lacks %q:\n%s", line, b.String())
	}
	for i := range answers["n1"].rows {
		answers["n1"].rows[i].Federation = nil
	}
	answers["n2"] = nodeAnswer{rows: []SiteRow{row("n2", 1, "n2", nil)}}
	if v := mergeSite("n1", shardset.Settings{Shards: 3, Replicas: 2}, voters, nil, answers); v.Federation != nil || v.FederationShards != 0 {
		t.Errorf("without a federation: %+v over %d shards", v.Federation, v.FederationShards)
	}
}

// frontier is a row's frontier in TestMergeSite, telling the rows of
// one shard apart by the node that gave them.
func frontier(from string, sh int) uint64 { return uint64(10*sh) + uint64(from[len(from)-1]-'0') }

// TestAskRows: a node's rows are asked over its API, each row marked as
// that node's; a node that accepts the connection and never answers is
// given up on when the bound ends, with an error that says so; a node
// answering as another is refused; a 404 (not a sharded node) is an error
// that names the node.
func TestAskRows(t *testing.T) {
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/site/shards" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(nodeRows{Node: "n2", Rows: []SiteRow{{ShardStatus: shardset.ShardStatus{Shard: 3, Leader: "n2"}, From: "somebody"}}})
	}))
	defer good.Close()
	notSharded := httptest.NewServer(http.NotFoundHandler())
	defer notSharded.Close()
	// A node that accepts connections and never answers (hung).
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	accepted := make(chan struct{})
	go func() { // owner: the test; ends when hung is closed (cleanup)
		defer close(accepted)
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		hung.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	})
	s := &Site{nodeClient: &http.Client{Timeout: apiClientTimeout}, apiScheme: "http"}
	addr := func(u string) string { return strings.TrimPrefix(u, "http://") }
	tests := []struct {
		name    string
		m       crawldb.Member
		wantErr string
	}{
		{"answers", crawldb.Member{ID: "n2", APIAddr: addr(good.URL)}, ""},
		{"answers as another node", crawldb.Member{ID: "n3", APIAddr: addr(good.URL)}, `answered as node "n2"`},
		{"not sharded", crawldb.Member{ID: "n4", APIAddr: addr(notSharded.URL)}, "node n4's shards: 404"},
		{"hung", crawldb.Member{ID: "n5", APIAddr: hung.Addr().String()}, "did not answer within"},
		{"no address", crawldb.Member{ID: "n6"}, "no API address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), siteWait)
			defer cancel()
			rows, err := s.askRows(ctx, tt.m)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 1 || rows[0].Shard != 3 || rows[0].From != "n2" {
				t.Errorf("rows %+v, want shard 3 from n2", rows)
			}
		})
	}
}

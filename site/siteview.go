package site

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/shardset"
)

// The site-wide view of a sharded site. Each node knows the shards it
// holds a replica of (Status's shards, the dashboard's rows); the view
// of the whole site is gathered on demand by the node asked: it asks
// every other node of the site (the meta group's voters) for its rows,
// GET /site/shards on the node API (mutual TLS with --certs, through the
// node client every node-to-node call uses), each within siteWait, and
// keeps for each shard the row of the node that leads it. A shard whose
// nodes do not answer is shown from what the meta group records (the
// placement and the last leader's state record), with those nodes named.
// GET /status?site=1 and the dashboard of a sharded node carry the view.

// siteWait bounds each node's answer to a site-wide view: a node that
// has not answered by then counts as not answering, so a down or hung
// node delays the view by at most this.
const siteWait = time.Second

// siteFresh is how long a gathered view is served again (the dashboard
// polls every second; pages open at once share one gathering).
const siteFresh = sampleEvery

// SiteView is a sharded site as a whole, gathered by one node from every
// node's shards (GET /status?site=1, the dashboard's sharded.site).
type SiteView struct {
	By       string    `json:"by"`     // the node that gathered it
	At       time.Time `json:"at"`     // when it began to gather it
	Wait     float64   `json:"wait_s"` // the bound on each node's answer, seconds
	Shards   int       `json:"shards"` // the site's shards (len(Rows))
	Replicas int       `json:"replicas"`
	// NotAnswering counts the shards no answering node holds a replica
	// of: their rows come from the meta group's records.
	NotAnswering int        `json:"shards_not_answering"`
	Rows         []SiteRow  `json:"rows"`
	Nodes        []SiteNode `json:"nodes"`
	// Federation sums the rows' federation figures (in a federation), over
	// FederationShards rows: those whose replica answered with them.
	Federation       *federation.ShardFigures `json:"federation,omitempty"`
	FederationShards int                      `json:"federation_shards,omitempty"`
}

// SiteRow is one shard of the site: as the replica of node From has it
// (its leader's own when the leader answered), with its pages/s there.
type SiteRow struct {
	shardset.ShardStatus
	// Pages is the URLs whose result the shard recorded per second, as
	// From's dashboard measures it (DashShard.Pages).
	Pages float64 `json:"pages_s"`
	// Federation is the shard's federation figures (in a federation), from
	// From's replica of its crawl database.
	Federation *federation.ShardFigures `json:"federation,omitempty"`
	// From is the node whose replica gave the row; "" when no node
	// holding the shard answered: the row is the meta group's records
	// (Target, TargetLeader; Leader is then "").
	From string `json:"from"`
	// NotAnswering are the shard's nodes (its replicas and learners; with
	// no answer from its leader, also the placement's and the last
	// reported leader's) that did not answer.
	NotAnswering []string `json:"not_answering,omitempty"`
}

// SiteNode is one node of the site (a voter of the meta group) in a
// site-wide view.
type SiteNode struct {
	ID   string `json:"id"`
	API  string `json:"api_addr"`
	Raft string `json:"raft_addr"`
	Self bool   `json:"self"`
	// Up: the node answered within siteWait; Err says why not.
	Up  bool   `json:"up"`
	Err string `json:"error,omitempty"`
	Led int    `json:"shards_led"` // rows it leads
	// Held is the rows whose voters include it.
	Held int `json:"replicas_held"`
}

// nodeRows is what a node answers on GET /site/shards: the shards it
// holds a replica of.
type nodeRows struct {
	Node string    `json:"node"`
	Rows []SiteRow `json:"rows"`
}

// nodeAnswer is one node's answer to a gathering (err: none in time).
type nodeAnswer struct {
	rows []SiteRow
	err  error
}

// localRows are this node's rows: the shards it holds, with their pages/s.
func (s *Site) localRows() nodeRows {
	rates, _ := s.dash.shardRates()
	out := nodeRows{Node: s.cfg.Node, Rows: []SiteRow{}}
	for _, sh := range s.set.Status() {
		row := SiteRow{ShardStatus: sh, Pages: rates[sh.Shard], From: s.cfg.Node}
		if s.fed != nil {
			if fig, ok := s.fed.ShardFigures(federation.SenderName(s.cfg.Region, sh.Shard)); ok {
				row.Federation = &fig
			}
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}

// SiteView returns the site-wide view, gathered now or within the last
// siteFresh.
func (s *Site) SiteView() *SiteView {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	if v := s.view.last; v != nil && time.Since(s.view.at) < siteFresh {
		return v
	}
	v := s.gatherSite()
	s.view.last, s.view.at = v, time.Now()
	return v
}

// siteCache is the last site-wide view and when its gathering ended; mu
// is held while one is gathered, so that callers at once share it.
type siteCache struct {
	mu   sync.Mutex
	last *SiteView
	at   time.Time
}

// gatherSite asks every other node for its rows, at once, each within
// siteWait, and merges them.
func (s *Site) gatherSite() *SiteView {
	now := time.Now()
	voters, err := s.db.Voters()
	if err != nil {
		s.log.Warn("site: site-wide view: the site's nodes", "err", err)
	}
	recs, err := s.set.Records()
	if err != nil {
		s.log.Warn("site: site-wide view: the meta group's records", "err", err)
	}
	answers := make(map[string]nodeAnswer, len(voters))
	answers[s.cfg.Node] = nodeAnswer{rows: s.localRows().Rows}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), siteWait)
	defer cancel()
	for _, v := range voters {
		if v.ID == s.cfg.Node {
			continue
		}
		wg.Go(func() { // owner: gatherSite, which waits; bounded by ctx
			rows, err := s.askRows(ctx, v)
			mu.Lock()
			answers[v.ID] = nodeAnswer{rows: rows, err: err}
			mu.Unlock()
		})
	}
	wg.Wait()
	view := mergeSite(s.cfg.Node, s.set.Settings(), voters, recs, answers)
	view.At, view.Wait = now, siteWait.Seconds()
	return view
}

// askRows asks node m for its rows over the node API.
func (s *Site) askRows(ctx context.Context, m crawldb.Member) ([]SiteRow, error) {
	if m.APIAddr == "" {
		return nil, fmt.Errorf("site: node %s: no API address in the meta group", m.ID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiURL(m.APIAddr, "/site/shards"), nil)
	if err != nil {
		return nil, fmt.Errorf("site: node %s's shards: %w", m.ID, err)
	}
	resp, err := s.nodeClient.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("site: node %s (%s) did not answer within %v", m.ID, m.APIAddr, siteWait)
		}
		return nil, fmt.Errorf("site: node %s's shards: %w", m.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("site: node %s's shards: %s: %s", m.ID, resp.Status, strings.TrimSpace(string(b)))
	}
	var nr nodeRows
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&nr); err != nil {
		return nil, fmt.Errorf("site: node %s's shards: %w", m.ID, err)
	}
	if nr.Node != m.ID {
		return nil, fmt.Errorf("site: node %s's API (%s) answered as node %q", m.ID, m.APIAddr, nr.Node)
	}
	for i := range nr.Rows {
		nr.Rows[i].From = m.ID
	}
	return nr.Rows, nil
}

// mergeSite makes the site-wide view from the nodes' answers (self's
// among them) and the meta group's records. Each shard's row is, in this
// order of preference: the row of the node that leads it as its own
// replica says; a row of an answering replica that knows a leader; any
// answering replica's; the records' (From ""). A row's NotAnswering are
// the nodes that did not answer among its voters and learners, and, when
// its leader did not answer for it, among the placement's replicas and
// the last reported leader and voters. Nodes are the meta group's voters,
// sorted, each up if it answered.
func mergeSite(self string, settings shardset.Settings, voters []crawldb.Member, recs []shardset.ShardRecord, answers map[string]nodeAnswer) *SiteView {
	v := &SiteView{By: self, Shards: settings.Shards, Replicas: settings.Replicas, Rows: []SiteRow{}, Nodes: []SiteNode{}}
	voters = slices.Clone(voters)
	if !slices.ContainsFunc(voters, func(m crawldb.Member) bool { return m.ID == self }) {
		voters = append(voters, crawldb.Member{ID: self}) // its own rows, whatever its replica of the meta group says
	}
	slices.SortFunc(voters, func(a, b crawldb.Member) int { return strings.Compare(a.ID, b.ID) })
	silent := map[string]bool{}
	byShard := map[int][]SiteRow{}
	for _, m := range voters {
		a, ok := answers[m.ID]
		if !ok || a.err != nil {
			silent[m.ID] = true
			continue
		}
		for _, r := range a.rows {
			byShard[r.Shard] = append(byShard[r.Shard], r)
		}
	}
	for sh := range settings.Shards {
		var rec shardset.ShardRecord
		if sh < len(recs) {
			rec = recs[sh]
		}
		row, led := pickRow(byShard[sh])
		if row == nil {
			row = &SiteRow{ShardStatus: shardset.ShardStatus{Shard: sh, Group: shardset.GroupID(sh),
				Target: rec.Target, TargetLeader: rec.TargetLeader}}
			v.NotAnswering++
		}
		nodes := slices.Concat(row.Replicas, row.Learners)
		if !led {
			nodes = slices.Concat(nodes, []string{row.Leader, rec.TargetLeader, rec.Reported}, rec.Target, rec.ReportedVoters)
		}
		for _, id := range nodes {
			if silent[id] && !slices.Contains(row.NotAnswering, id) {
				row.NotAnswering = append(row.NotAnswering, id)
			}
		}
		slices.Sort(row.NotAnswering)
		v.Rows = append(v.Rows, *row)
		if row.Federation != nil {
			if v.Federation == nil {
				v.Federation = &federation.ShardFigures{}
			}
			v.Federation.Add(*row.Federation)
			v.FederationShards++
		}
	}
	for _, m := range voters {
		n := SiteNode{ID: m.ID, API: m.APIAddr, Raft: m.RaftAddr, Self: m.ID == self, Up: !silent[m.ID]}
		if a := answers[m.ID]; a.err != nil {
			n.Err = a.err.Error()
		} else if silent[m.ID] {
			n.Err = "not asked"
		}
		for _, r := range v.Rows {
			if r.Leader == m.ID {
				n.Led++
			}
			if slices.Contains(r.Replicas, m.ID) {
				n.Held++
			}
		}
		v.Nodes = append(v.Nodes, n)
	}
	return v
}

// pickRow picks a shard's row among its answering replicas' (see
// mergeSite); led is true when it is its leader's own (of two replicas
// that both say they lead, a deposed leader not told yet, the one of the
// later term). nil: none.
func pickRow(rows []SiteRow) (row *SiteRow, led bool) {
	var best *SiteRow
	for _, r := range rows {
		switch {
		case best == nil:
		case r.Leader == r.From && r.Leader != "":
			if best.Leader == best.From && best.Leader != "" && r.Term <= best.Term {
				continue
			}
		case best.Leader == best.From && best.Leader != "":
			continue
		case r.Leader != "" && best.Leader == "":
		default:
			continue
		}
		best = &r
	}
	if best == nil {
		return nil, false
	}
	return best, best.Leader != "" && best.Leader == best.From
}

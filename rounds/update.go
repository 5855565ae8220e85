package rounds

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/rounds/mapreduce"
	"github.com/meridian-crawler/meridian/rounds/plan"
	"github.com/meridian-crawler/meridian/rounds/segment"
	"github.com/meridian-crawler/meridian/route"
)

const (
	updateFile = "update"
	// hostGrace is how many consecutive host failures beyond MaxRetries
	// a host gets before retries that made no request count against its
	// URLs.
	hostGrace = 3
)

// credit is what the update's shuffle carries per outlink: a cash share and
// the depth the link was found at. Credits of one URL combine by summing the
// cash and keeping the smaller depth.
type credit struct {
	cash  float64
	depth uint32
}

func combineCredit(a, b credit) credit {
	return credit{cash: a.cash + b.cash, depth: min(a.depth, b.depth)}
}

type creditCodec struct{}

func (creditCodec) Append(dst []byte, v credit) []byte {
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(v.cash))
	return binary.AppendUvarint(dst, uint64(v.depth))
}

func (creditCodec) Decode(b []byte) (credit, error) {
	if len(b) < 9 {
		return credit{}, fmt.Errorf("%w: credit of %d bytes", errRecord, len(b))
	}
	d, n := binary.Uvarint(b[8:])
	if n <= 0 || n != len(b)-8 {
		return credit{}, fmt.Errorf("%w: credit depth", errRecord)
	}
	return credit{cash: math.Float64frombits(binary.BigEndian.Uint64(b)), depth: uint32(d)}, nil
}

// updateTrailer ends a prepared update file.
type updateTrailer struct {
	Commands int     `json:"commands"`
	Targets  int64   `json:"targets"`
	Spent    float64 `json:"spent"`   // cash the round's fetches and revisits distributed
	Virtual  float64 `json:"virtual"` // the virtual page's cash after this update
	// Revisits and RevisitCash: stored pages that passed their cash on, and how much.
	Revisits    int     `json:"revisits,omitempty"`
	RevisitCash float64 `json:"revisit_cash,omitempty"`
	// Token is the leader token the commands are fenced with: a file
	// prepared under another leadership is prepared again.
	Token string `json:"token"`
	// Stats are the round's counters, summed from the staged batches.
	Stats *stageStats `json:"stats,omitempty"`
	// Staged is the size of the staged batches read, in bytes.
	Staged int64 `json:"staged_bytes"`
	// Unanswered: URLs of the plan without a result, sent back to the frontier.
	Unanswered int `json:"unanswered,omitempty"`
	// Late: page results the nodes fetched but dropped because their take
	// of a part was over (the part had moved or was done), summed from the
	// round's done markers; Duplicates: second results of one URL found in
	// a fetch segment, not counted.
	Late       int64 `json:"late,omitempty"`
	Duplicates int   `json:"duplicates,omitempty"`
	// Budget counts, per host, the fetch results that use its page budget.
	Budget map[string]int64 `json:"budget,omitempty"`
	// Sent is the cash of the URLs put in other sites' outboxes; SentURLs
	// how many.
	Sent     float64 `json:"sent,omitempty"`
	SentURLs int     `json:"sent_urls,omitempty"`
}

// update folds a fetched round into the crawl database: it prepares the
// round's commands (from the batches the nodes staged, and the revisits
// the leader staged) into the update file, then applies those not applied
// yet, then retires the round. The preparation is deterministic, so a new
// leader that prepares it again gets the same commands and resumes after
// the last one applied.
func (c *Crawler) update(ctx context.Context, round uint64) (RoundStats, error) {
	start := c.o.Now()
	dir := c.roundDir(round)
	token := string(c.token())
	if token == "" {
		return RoundStats{}, errDeposed
	}
	cmds, tr, err := readUpdate(dir)
	if err != nil || (cmds != nil && tr.Token != token) {
		if err != nil {
			c.log.Warn("rounds: update file unreadable: preparing it again", "round", round, "err", err)
		}
		os.Remove(filepath.Join(dir, updateFile))
		cmds = nil
	}
	if cmds == nil {
		if err := c.prepareUpdate(ctx, round); err != nil {
			return RoundStats{}, err
		}
		if cmds, tr, err = readUpdate(dir); err != nil {
			return RoundStats{}, err
		}
		if cmds == nil {
			return RoundStats{}, fmt.Errorf("rounds: round %d: update file missing after prepare", round)
		}
	}
	done, err := loadProgress(c.st, round)
	if err != nil {
		return RoundStats{}, err
	}
	var newURLs int64
	for i := int(done); i < len(cmds); i++ {
		res, err := c.db.ApplyCommand(ctx, cmds[i])
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if errors.Is(err, store.ErrGuard) {
			err = fmt.Errorf("%w: %w", errDeposed, err)
		}
		if err != nil {
			return RoundStats{}, fmt.Errorf("rounds: round %d: apply update command %d of %d: %w", round, i+1, len(cmds), err)
		}
		for _, r := range res.Ops {
			if r.New {
				newURLs++
			}
		}
		if c.afterCommand != nil {
			if err := c.afterCommand(round, i+1); err != nil {
				return RoundStats{}, fmt.Errorf("rounds: round %d: %w", round, err)
			}
		}
	}
	// Retire the round: its state, progress marker, plan and staged
	// results in one command.
	if err := c.hosts.flush(ctx); err != nil {
		return RoundStats{}, err
	}
	c.stateMu.Lock() // until the retired state is written: writers take turns
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	a := s.active(round)
	var st RoundStats
	if a != nil {
		st.Generated, st.Started, st.Parts = a.Generated, a.Started, a.Parts
		if !a.Fetched.IsZero() {
			st.FetchSeconds = a.Fetched.Sub(a.Started).Seconds()
		}
	}
	s.remove(round)
	s.Virtual = tr.Virtual
	s.Spent += tr.Spent
	s.Sent += tr.Sent
	if r := c.inbound; r != nil {
		// Cash other sites sent for the virtual page joins it now.
		puts, virt, err := r.Inbound()
		if err != nil {
			c.stateMu.Unlock()
			return RoundStats{}, fmt.Errorf("rounds: round %d: %w", round, err)
		}
		if virt > s.VirtualIn {
			s.Virtual += virt - s.VirtualIn
			s.VirtualIn = virt
		}
		s.PutsIn = puts
	}
	s.Done++
	b := c.newBatch()
	b.PutUser(progressKey(round), nil)
	b.DeleteUserPrefix(roundPrefix(round))
	err = c.putState(ctx, b, s)
	c.stateMu.Unlock()
	if err != nil {
		return RoundStats{}, err
	}
	c.mu.Lock()
	if l := c.lead; l != nil {
		l.mu.Lock()
		for h, n := range tr.Budget {
			if _, ok := l.fetched[h]; ok {
				l.fetched[h] += n
			}
			if len(l.pldFetched) > 0 { // --pld-budget: its registrable domain's count too
				d := plan.Registrable(h)
				if _, ok := l.pldFetched[d]; ok {
					l.pldFetched[d] += n
				}
			}
		}
		l.mu.Unlock()
	}
	if d, ok := c.genDur[round]; ok {
		st.GenerateSeconds = d.Seconds()
		delete(c.genDur, round)
	}
	c.mu.Unlock()
	if tr.Stats != nil {
		tr.Stats.fill(&st)
	}
	st.Round = round
	st.Ended = c.o.Now()
	st.UpdateSeconds = st.Ended.Sub(start).Seconds()
	st.Targets, st.NewURLs, st.Virtual = tr.Targets, newURLs, tr.Virtual
	st.Revisits, st.RevisitCash = tr.Revisits, tr.RevisitCash
	st.StagedBytes, st.Unanswered = tr.Staged, tr.Unanswered
	st.LateResults, st.DuplicateResults = tr.Late, tr.Duplicates
	st.RemoteURLs, st.RemoteCash = tr.SentURLs, tr.Sent
	if cs, ok := c.o.Router.(interface{ CacheStats() (hits, lookups int64) }); ok {
		st.SentCacheHits, st.SentCacheLookups = cs.CacheStats()
		if st.SentCacheLookups > 0 {
			st.SentCacheHitRate = float64(st.SentCacheHits) / float64(st.SentCacheLookups)
		}
	}
	st.Leader = c.id
	st.TroubledCount = len(st.Troubled)
	if st.Traps.Total() > 0 {
		c.log.Info("rounds: links refused as spider traps", "round", round, "repetition", st.Traps.Repetition, "calendar", st.Traps.Calendar)
	}
	if c.o.CheckCash {
		off, err := c.cashError()
		if err != nil {
			return RoundStats{}, err
		}
		st.CashError = &off
	}
	if !c.o.KeepFiles {
		os.Remove(filepath.Join(dir, updateFile))
		os.RemoveAll(filepath.Join(dir, "shuffle"))
		os.Remove(dir) // only if empty: a node's fetch segment goes when it sees the round retired
	}
	return st, nil
}

// cashError is how far the crawl database is from OPIC's invariant: (the
// cash of all pages + the virtual page's − the cash injected) / injected.
//
// In a federation the site's accounts also hold the cash sent to other
// sites and received from them: cash + virtual = injected + received on
// URLs + received for the virtual page (taken in) − sent. Cash may arrive
// during the scan: the scan is taken again (a few times) until the cash
// received on URLs is the same before and after it. The round state's
// writers (generate's hand-back of a returned site's hosts, seeding) are
// held off during the check, and the state checked is the latest they
// wrote: a command of theirs applied during the scan would move cash out
// of pages that a state read before it does not count as sent. (Only with
// Options.CheckCash: a diagnostic.)
func (c *Crawler) cashError() (float64, error) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	var off float64
	for attempt := 0; attempt < 5; attempt++ {
		var before, after float64
		if r := c.inbound; r != nil {
			var err error
			if before, _, err = r.Inbound(); err != nil {
				return 0, fmt.Errorf("rounds: check cash: %w", err)
			}
		}
		var cash opic.Sum
		if err := c.st.ScanURLs(func(r store.URLRecord) error {
			cash.Add(r.Cash)
			return nil
		}); err != nil {
			return 0, fmt.Errorf("rounds: check cash: %w", err)
		}
		cash.Add(s.Virtual)
		if r := c.inbound; r != nil {
			after, _, _ = r.Inbound()
		}
		in := s.Injected + after + s.VirtualIn - s.Sent
		if in == 0 {
			return 0, nil
		}
		off = (cash.Value() - in) / in
		if before == after {
			break
		}
	}
	return off, nil
}

// route returns the targets of parts (in their order) that are this
// shard's hosts' (parts itself without a router), and writes the others, by chunks of BatchOps URLs of
// parts in order, as outbox entries into commands of their own
// (route.Router.Route), returned in order with what they sent. The chunks
// are the same however often the update is prepared, so that a leader that
// prepares it again after some of its commands were applied resumes with
// the same commands.
func (c *Crawler) route(ctx context.Context, parts [][]target, newBatch func() *store.Batch) ([][]target, []*store.Batch, route.Sent, error) {
	r := c.o.Router
	if r == nil {
		return parts, nil, route.Sent{}, nil
	}
	var kept []target
	var out []*store.Batch
	var sent route.Sent
	var cash opic.Sum
	chunk := make([]route.Remote, 0, c.o.BatchOps)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		b := newBatch()
		local, s, err := r.Route(ctx, chunk, b)
		if err != nil {
			return fmt.Errorf("route: %w", err)
		}
		for _, u := range local {
			kept = append(kept, target{url: u.URL, credit: credit{cash: u.Cash, depth: u.Depth}})
		}
		if s.URLs > 0 {
			out = append(out, b)
			sent.URLs += s.URLs
			cash.Add(s.Cash)
		}
		chunk = chunk[:0]
		return nil
	}
	for _, p := range parts {
		for _, t := range p {
			chunk = append(chunk, route.Remote{URL: t.url, Cash: t.cash, Depth: t.depth})
			if len(chunk) >= c.o.BatchOps {
				if err := flush(); err != nil {
					return nil, nil, sent, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, nil, sent, err
	}
	sent.Cash = cash.Value()
	return [][]target{kept}, out, sent, nil
}

// readUpdate reads a prepared update file; nil commands means none yet.
func readUpdate(dir string) ([][]byte, updateTrailer, error) {
	var cmds [][]byte
	var tr updateTrailer
	ended := false
	_, _, err := segment.Read(filepath.Join(dir, updateFile), func(rec []byte) error {
		if len(rec) > 0 && rec[0] == recUpdEnd {
			ended = true
			return json.Unmarshal(rec[1:], &tr)
		}
		cmds = append(cmds, append([]byte(nil), rec...))
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, tr, nil
	}
	if err != nil {
		return nil, tr, fmt.Errorf("rounds: read update file: %w", err)
	}
	if !ended || tr.Commands != len(cmds) {
		// The file is renamed into place only when complete.
		return nil, tr, fmt.Errorf("rounds: update file in %s is incomplete (%d commands)", dir, len(cmds))
	}
	if cmds == nil {
		cmds = [][]byte{}
	}
	return cmds, tr, nil
}

// target is one reduced outlink.
type target struct {
	url string
	credit
}

// prepareUpdate reads the round's staged batches in key order (and the
// revisits, staged first if they are not yet), reduces the credits by URL
// and writes the encoded commands to the update file. Given the same
// staged data and round state it writes the same commands.
func (c *Crawler) prepareUpdate(ctx context.Context, round uint64) error {
	dir := c.roundDir(round)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	rev, err := c.stagedRevisits(ctx, round)
	if err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	tmp := filepath.Join(dir, "shuffle")
	os.RemoveAll(tmp)
	sh, err := mapreduce.NewShuffle(mapreduce.Options[credit]{
		Partitions:   16,
		MemoryBudget: c.o.MemoryBudget,
		ValueSize:    16,
		TempDir:      tmp,
		Combine:      combineCredit,
		Codec:        creditCodec{},
	})
	if err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	defer sh.Close()

	var fetchOps []store.FetchResult
	var requeues []string
	var hops []redirectHop
	var virtual, spent opic.Sum
	var stats stageStats
	var stagedBytes int64
	budget := map[string]int64{}
	lastMods := map[string]int64{} // sitemap lastmods by URL, the latest
	var nearDups []nearDupHint     // the fetched pages that are near-duplicates, with their originals
	var dirs []directivesHint      // the fetched pages' noindex and canonical (and the refetched pages' none)
	seen := map[string]bool{}      // a URL's result counts once
	var mu sync.Mutex              // fold's state, for the parallel map of local results
	fold := func(b *stageBatch) error {
		mu.Lock()
		for _, op := range b.Ops {
			if seen[op.URL] {
				// Its credits and its virtual share would be counted
				// twice while its spend is counted once: cash created.
				mu.Unlock()
				return fmt.Errorf("%w: %s", errTwoResults, op.URL)
			}
		}
		mu.Unlock()
		for _, t := range b.Credits {
			if err := sh.Emit([]byte(t.url), t.credit); err != nil {
				return err
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, op := range b.Ops {
			if seen[op.URL] {
				return fmt.Errorf("%w: %s", errTwoResults, op.URL)
			}
			seen[op.URL] = true
			fetchOps = append(fetchOps, op)
			spent.Add(op.Spend)
			if !op.Retry && (op.Schedule == nil || op.Schedule.Change == store.ChangeNone) {
				budget[hostOf(op.URL)]++ // a refetch uses none of the page budget
			}
		}
		requeues = append(requeues, b.Requeues...)
		hops = append(hops, b.Hops...)
		for _, h := range b.LastMods {
			lastMods[h.URL] = max(lastMods[h.URL], h.LastMod)
		}
		nearDups = append(nearDups, b.NearDups...)
		dirs = append(dirs, b.Directives...)
		for _, l := range b.Links {
			c.links.offer(l.URL, l.Depth, l.Links, l.Weight)
		}
		virtual.Add(b.Virtual)
		stats.add(&b.Stats)
		return nil
	}
	if err := fold(rev); err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	var revisitCash opic.Sum
	for _, r := range rev.Revisits {
		spent.Add(r.spend)
		revisitCash.Add(r.spend)
	}
	err = c.st.UserScan(resPrefix(round), func(k string, v []byte) error {
		stagedBytes += int64(len(v))
		b, err := decodeStage(v, round)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return fold(&b)
	})
	if err != nil {
		return fmt.Errorf("rounds: round %d: read staged results: %w", round, err)
	}
	late, err := c.lateResults(round)
	if err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	dups, err := c.mapLocal(ctx, round, fold)
	if err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	if dups > 0 {
		c.log.Warn("rounds: a fetch segment held more than one result of a URL: the first counts", "round", round, "duplicates", dups)
	}
	// A URL's result counts once: sort fetch results (the local ones come
	// in no set order) so that the commands are the same on any leader,
	// and so the other ops the results give: a leader that prepares the
	// update again after a restart resumes by command index, and must find
	// each op in the command it was in.
	slices.SortStableFunc(fetchOps, func(a, b store.FetchResult) int { return cmp.Compare(a.URL, b.URL) })
	slices.Sort(requeues)
	slices.SortFunc(nearDups, func(a, b nearDupHint) int { return cmp.Compare(a.URL, b.URL) })
	// A target reached by two chains: the shorter is written last, and kept.
	slices.SortFunc(hops, func(a, b redirectHop) int {
		return cmp.Or(cmp.Compare(a.target, b.target), cmp.Compare(b.hops, a.hops))
	})

	// Encode the commands: fetch results first, then the credits, then
	// the URLs of other shards and sites; each fenced by the leader's token.
	token := c.token()
	var cmds [][]byte
	newBatch := func() *store.Batch {
		b := store.NewBatch()
		b.Guard(leaderKey, token)
		return b
	}
	parts := make([][]target, 16)
	err = sh.Reduce(ctx, c.o.Workers, func(part int, key []byte, v credit) error {
		parts[part] = append(parts[part], target{url: string(key), credit: v})
		return nil
	})
	if err != nil {
		return fmt.Errorf("rounds: round %d: update reduce: %w", round, err)
	}
	// URLs of other shards' and sites' hosts go to their outboxes, with
	// their cash, in commands of their own.
	local, routed, sent, err := c.route(ctx, parts, newBatch)
	if err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	var n int64
	for _, p := range local {
		n += int64(len(p))
	}
	c.mu.Lock()
	prevVirtual := c.state.Virtual
	c.mu.Unlock()
	each, keptVirtual := opic.Spread(prevVirtual+virtual.Value(), int(n))

	b := newBatch()
	flush := func() error {
		b.PutUser(progressKey(round), encodeProgress(uint64(len(cmds)+1)))
		cmd, err := b.Encode()
		if err != nil {
			return fmt.Errorf("rounds: round %d: encode update command: %w", round, err)
		}
		cmds = append(cmds, bytes.Clone(cmd))
		b = newBatch()
		return nil
	}
	add := func(f func(b *store.Batch)) error {
		f(b)
		if b.Len() >= c.o.BatchOps {
			return flush()
		}
		return nil
	}
	for _, op := range fetchOps {
		if err := c.schedule(&op); err != nil {
			return fmt.Errorf("rounds: round %d: %w", round, err)
		}
		if err := add(func(b *store.Batch) { b.RecordRoundFetch(op) }); err != nil {
			return err
		}
	}
	for _, r := range rev.Revisits {
		if err := add(func(b *store.Batch) { b.Revisit(r.url, r.spend) }); err != nil {
			return err
		}
	}
	for _, h := range hops {
		if err := add(func(b *store.Batch) { b.PutUser(redirectKey(h.target), binary.AppendUvarint(nil, uint64(h.hops))) }); err != nil {
			return err
		}
	}
	for _, u := range requeues {
		if seen[u] {
			continue
		}
		seen[u] = true
		if err := add(func(b *store.Batch) { b.Requeue(u) }); err != nil {
			return err
		}
	}
	for _, n := range nearDups {
		stats.NearDups++
		if err := add(func(b *store.Batch) { b.NearDup(n.URL, n.Of) }); err != nil {
			return err
		}
	}
	// By URL (a URL has one final result a round): the local ones come
	// in no set order, and a leader that prepares the update again must
	// put each in the same command.
	slices.SortFunc(dirs, func(a, b directivesHint) int { return cmp.Compare(a.URL, b.URL) })
	for _, d := range dirs {
		if d.D.NoIndex {
			stats.NoIndex++
		}
		if d.D.Canonical != "" {
			stats.Canonical++
		}
		if err := add(func(b *store.Batch) { b.SetDirectives(d.URL, d.D) }); err != nil {
			return err
		}
	}
	err = c.sitemapDue(lastMods, seen, c.o.Now(), func(u string, at time.Time, score float64) error {
		stats.SitemapDue++
		return add(func(b *store.Batch) { b.MakeDue(u, at, score) })
	})
	if err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	// Every URL of the plan has an answer; one without goes back to the
	// frontier rather than stay generated for ever (it should not happen:
	// it is logged).
	var unanswered []string
	err = c.st.UserScan(roundPrefix(round)+"part/", func(k string, v []byte) error {
		pp, err := decodePart(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		for _, e := range pp.Entries {
			if !seen[e.URL] {
				seen[e.URL] = true
				unanswered = append(unanswered, e.URL)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rounds: round %d: read plan: %w", round, err)
	}
	if len(unanswered) > 0 {
		c.log.Error("rounds: URLs of the round without a result go back to the frontier", "round", round, "urls", len(unanswered), "e.g.", unanswered[:min(5, len(unanswered))])
	}
	for _, u := range unanswered {
		if err := add(func(b *store.Batch) { b.Requeue(u) }); err != nil {
			return err
		}
	}
	for _, p := range local {
		c.links.credit(p, each)
		for _, t := range p {
			if err := add(func(b *store.Batch) { b.UpsertCash(t.url, t.cash+each, t.depth) }); err != nil {
				return err
			}
		}
	}
	if b.Len() > 1 {
		if err := flush(); err != nil {
			return err
		}
	}
	for _, rb := range routed {
		b = rb
		if err := flush(); err != nil {
			return err
		}
	}
	tr, _ := json.Marshal(updateTrailer{Sent: sent.Cash, SentURLs: sent.URLs, Commands: len(cmds), Targets: n, Spent: spent.Value(), Virtual: keptVirtual,
		Revisits: len(rev.Revisits), RevisitCash: revisitCash.Value(), Token: string(token), Stats: &stats, Staged: stagedBytes, Budget: budget, Unanswered: len(unanswered),
		Late: late, Duplicates: dups})
	part := filepath.Join(dir, updateFile+".part")
	os.Remove(part)
	w, err := segment.Create(part)
	if err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	recs := append(cmds, append([]byte{recUpdEnd}, tr...))
	if err := w.AppendBatch(recs); err != nil {
		w.Close()
		return fmt.Errorf("rounds: round %d: write update file: %w", round, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("rounds: round %d: write update file: %w", round, err)
	}
	if err := os.Rename(part, filepath.Join(dir, updateFile)); err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	return nil
}

// redirectHop is the length of the redirect chain that reaches target.
type redirectHop struct {
	target string
	hops   int
}

// redirectKey names the node-layer key holding the redirect chain length
// of a URL reached by redirects (by fingerprint: URLs may be long).
func redirectKey(u string) string { return fmt.Sprintf("rounds/redirect/%016x", store.Fingerprint(u)) }

// redirectHops returns how many redirects led to u (0 if none).
func (c *Crawler) redirectHops(u string) (int, error) {
	b, err := c.st.User(redirectKey(u))
	if err != nil {
		return 0, fmt.Errorf("rounds: redirect chain of %s: %w", u, err)
	}
	if len(b) == 0 {
		return 0, nil
	}
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, fmt.Errorf("rounds: redirect chain of %s: %w", u, errRecord)
	}
	return int(n), nil
}

// plannedRevisit is a revisit an update carries: spend of url's cash goes
// to its history and, damped, over its stored outlinks.
type plannedRevisit struct {
	url   string
	spend float64
}

// stagedRevisits returns the round's revisits, staged in the crawl
// database: read back if an earlier leadership staged them, else picked
// now and staged before any update command is applied (a new leader then
// prepares the same update).
func (c *Crawler) stagedRevisits(ctx context.Context, round uint64) (*stageBatch, error) {
	if v, err := c.st.User(revKey(round)); err != nil {
		return nil, fmt.Errorf("read revisits: %w", err)
	} else if v != nil {
		b, err := decodeStage(v, round)
		if err != nil {
			return nil, fmt.Errorf("staged revisits: %w", err)
		}
		return &b, nil
	}
	rev, err := c.revisit(ctx)
	if err != nil {
		return nil, err
	}
	v := rev.encode()
	b := c.newBatch()
	b.Guard(revKey(round), nil)
	b.PutUser(revKey(round), v)
	if _, err := c.applyLeader(ctx, b); err != nil {
		return nil, fmt.Errorf("stage revisits: %w", err)
	}
	return rev, nil
}

// revisit picks the stored pages owed the most cash, reads the cash each
// has now, and returns its distribution over their outlinks (the damped
// part and any rounding to the virtual page). The cash read is what the
// update's Revisit operations move: only the update moves a fetched page's
// cash out, one at a time, and credits only add to it.
func (c *Crawler) revisit(ctx context.Context) (*stageBatch, error) {
	b := &stageBatch{}
	credits := map[string]credit{}
	emit := func(url string, cr credit) {
		if old, ok := credits[url]; ok {
			cr = combineCredit(old, cr)
		}
		credits[url] = cr
	}
	var virtual opic.Sum
	for _, r := range c.links.pick(c.o.Revisits) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, ok, err := c.st.Get(r.url)
		if err != nil {
			return nil, fmt.Errorf("revisit %s: %w", r.url, err)
		}
		if !ok || rec.Status != store.StatusFetched || rec.Due || !rec.NextFetch.IsZero() {
			// A page in the refetch cycle is fetched again, which passes
			// its cash on; revisited too, it could be generated for its
			// refetch (with its cash in the job) between this plan and its
			// command, and its cash would be given away twice.
			c.links.forget(r.url)
			continue
		}
		if rec.Cash <= 0 || rec.Depth+1 > c.o.MaxDepth {
			continue
		}
		virtual.Add(distribute(emit, rec.Cash, c.o.Damping, r.links, rec.Depth+1))
		c.links.visited(r.url, rec.Cash)
		b.Revisits = append(b.Revisits, plannedRevisit{url: r.url, spend: rec.Cash})
	}
	b.Virtual = virtual.Value()
	for u, cr := range credits {
		b.Credits = append(b.Credits, target{url: u, credit: cr})
	}
	slices.SortFunc(b.Credits, func(x, y target) int { return cmp.Compare(x.url, y.url) })
	return b, nil
}

// distribute is OPIC's step for one page, fetched or revisited: d of its
// cash is split over links, emitted at depth, and what goes to the virtual
// page (the damped part, or all of it without links) is returned.
func distribute(emit func(url string, cr credit), cash, d float64, links []string, depth uint32) float64 {
	follow, damped := opic.Damp(cash, d)
	share, toVirtual := opic.Split(follow, len(links))
	for _, l := range links {
		emit(l, credit{cash: share, depth: depth})
	}
	return damped + toVirtual
}

// distributeEmbeds is distribute for a page with requisites (embeds,
// emitted at the page's own depth embedDepth): of the cash that follows the
// page, half is split over its links and half over its embeds (all of it
// over the one kind when the other has none), so that the page's few
// embeds each get a larger share than its many links do, and are ranked in
// the frontier (by cash) with the page rather than behind its links. The
// halves add up to what follows: cash is conserved as distribute
// conserves it. What goes to the virtual page is returned. The link store
// keeps a page's links only: a revisit passes the cash that reached the
// page after its fetch on to its links (its embeds, fetched once and
// mostly leaves, pass theirs to the virtual page when fetched).
func distributeEmbeds(emit func(url string, cr credit), cash, d float64, links []string, depth uint32, embeds []string, embedDepth uint32) float64 {
	follow, damped := opic.Damp(cash, d)
	toLinks := follow / 2
	toEmbeds := follow - toLinks
	if len(links) == 0 {
		toLinks, toEmbeds = 0, follow
	}
	share, toVirtual := opic.Split(toLinks, len(links))
	for _, l := range links {
		emit(l, credit{cash: share, depth: depth})
	}
	eshare, eVirtual := opic.Split(toEmbeds, len(embeds))
	for _, l := range embeds {
		emit(l, credit{cash: eshare, depth: embedDepth})
	}
	return damped + toVirtual + eVirtual
}

// mapLocal maps the results of the round's local parts (done by this node,
// leading a site of one node) from its fetch segment, in parallel, and
// folds them in.
func (c *Crawler) mapLocal(ctx context.Context, round uint64, fold func(*stageBatch) error) (dups int, err error) {
	urls := map[string]bool{}
	local := false
	err = c.st.UserScan(donePrefix(round), func(k string, v []byte) error {
		var d partDone
		if err := decodeJSON(v, &d); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if !d.Local || d.Node != c.id {
			return nil
		}
		id, err := partID(k)
		if err != nil {
			return err
		}
		raw, err := c.st.User(partKey(round, id))
		if err != nil {
			return err
		}
		pp, err := decodePart(raw)
		if err != nil {
			return fmt.Errorf("part %d: %w", id, err)
		}
		// The URLs a staged batch of the part answers are counted from
		// that batch: the part was taken again here after another take
		// (of this node, in an earlier leadership, or of another node)
		// staged them, and this node's segment may hold a result of its
		// own from before (take fetched only the others).
		staged, err := c.stagedURLs(partRef{round, id})
		if err != nil {
			return err
		}
		for _, e := range pp.Entries {
			if !staged[e.URL] {
				urls[e.URL] = true
			}
		}
		local = true
		return nil
	})
	if err != nil || !local {
		return 0, err
	}
	var chunks [][]*fetcher.Result
	var cur []*fetcher.Result
	seen := map[string]bool{}
	_, _, err = segment.Read(filepath.Join(c.roundDir(round), fetchFile), func(rec []byte) error {
		fr, err := decodeFetch(rec)
		if err != nil {
			return err
		}
		if fr.Kind == fetcher.KindPage && urls[fr.URL] && seen[fr.URL] {
			// A URL has one result a round; a second one (fetched again
			// after a restart that did not recover the first) is not
			// counted: fold would refuse it.
			dups++
			return nil
		}
		if fr.Kind == fetcher.KindSitemap || fr.Kind == fetcher.KindRobots || (fr.Kind == fetcher.KindPage && urls[fr.URL]) {
			if fr.Kind == fetcher.KindPage {
				seen[fr.URL] = true
			}
			cur = append(cur, fr.result(round))
			if len(cur) == mapChunk {
				chunks, cur = append(chunks, cur), nil
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("read fetch segment: %w", err)
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	p := &nodePart{ref: partRef{round: round}} // every page's outlinks are offered to the link store
	return dups, mapreduce.Map(ctx, c.o.Workers, chunks, func(ctx context.Context, chunk []*fetcher.Result) error {
		acc := newStageAcc()
		if err := c.mapResults(p, chunk, acc); err != nil {
			return err
		}
		return fold(acc.batch())
	})
}

// mapChunk is how many results one map task of local results takes.
const mapChunk = 512

// errTwoResults: the update met a second result of one URL in a round.
var errTwoResults = errors.New("rounds: a second fetch result of one URL in a round")

// lateResults sums the late results the round's done markers count.
func (c *Crawler) lateResults(round uint64) (int64, error) {
	var late int64
	err := c.st.UserScan(donePrefix(round), func(k string, v []byte) error {
		var d partDone
		if err := decodeJSON(v, &d); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		late += d.Late
		return nil
	})
	return late, err
}

// sitemapDue makes due at once (due, in URL order) the fetched pages
// whose sitemap <lastmod> (lastMods, Unix ms) is newer than their copy:
// its Last-Modified if it had one (the origin's clock, as the sitemap's),
// else its fetch time. Pages of this round's results (skip), pages
// without a schedule and pages already due are left alone. Their due
// score is plan.DueScore's, not overdue. Reading the records before the
// update applies, it picks the same pages when the update is prepared
// again (their time and score follow the clock); a command that comes
// after the page's refetch was applied does not apply
// (store.Batch.MakeDue: the next fetch then lies after at).
func (c *Crawler) sitemapDue(lastMods map[string]int64, skip map[string]bool, now time.Time, due func(u string, at time.Time, score float64) error) error {
	if !c.o.Refetch.On() || len(lastMods) == 0 {
		return nil
	}
	urls := make([]string, 0, len(lastMods))
	for u := range lastMods {
		if !skip[u] {
			urls = append(urls, u)
		}
	}
	slices.Sort(urls)
	for _, u := range urls {
		rec, ok, err := c.st.Get(u)
		if err != nil {
			return fmt.Errorf("sitemap lastmod of %s: %w", u, err)
		}
		if !ok || rec.Status != store.StatusFetched || rec.Due || rec.NextFetch.IsZero() {
			continue
		}
		copyAt := rec.FetchedAt
		if lm, err := http.ParseTime(rec.LastModified); err == nil {
			copyAt = lm
		}
		if !time.UnixMilli(lastMods[u]).After(copyAt) {
			continue
		}
		at := rec.NextFetch
		if now.After(at) {
			at = now
		}
		if err := due(u, at, plan.DueScore(rec.History, rec.Cash, rec.NextFetch, now, rec.Interval)); err != nil {
			return err
		}
	}
	return nil
}

// schedule completes a fetched page's refetch schedule (its validators and
// what the fetch found come from the map side): its next fetch, from the
// fetch time, with the interval its record holds (plan.Refetch.Next), or
// under the optimal schedule from the page's estimated change rate
// (optimalNext); and its time watched, the record's plus the time since
// its previous fetch when this fetch compared the two. An op without a
// schedule, or with refetch off, is left as it is. It reads the URL's
// record for a refetch (or for every page under the optimal schedule),
// which this round's commands change only once applied: a leader that
// prepares the update again gets the same commands for those not applied
// yet. (Under the optimal schedule their intervals depend on the
// leader's rate histogram and may differ; each command holds the same
// ops, and those applied are not applied again.)
func (c *Crawler) schedule(op *store.FetchResult) error {
	sc := op.Schedule
	if sc == nil || op.Retry {
		op.Schedule = nil
		return nil
	}
	if !c.o.Refetch.On() {
		op.Schedule = nil
		return nil
	}
	if op.At.IsZero() { // no fetch time to count from (a fetched page has one)
		op.Schedule = nil
		return nil
	}
	var rec store.URLRecord
	var found bool
	if sc.Change != store.ChangeNone || c.o.Refetch.Optimal {
		var err error
		if rec, found, err = c.st.Get(op.URL); err != nil {
			return fmt.Errorf("schedule %s: %w", op.URL, err)
		}
	}
	change := plan.FirstFetch
	switch sc.Change {
	case store.ChangeChanged:
		change = plan.Changed
	case store.ChangeUnchanged:
		change = plan.Unchanged
	}
	full := *sc
	full.Watched = rec.Watched
	if change != plan.FirstFetch && !rec.FetchedAt.IsZero() {
		if d := op.At.Sub(rec.FetchedAt); d > 0 {
			full.Watched += d
		}
	}
	if c.o.Refetch.Optimal {
		full.NextFetch, full.Interval = c.optimalNext(op, &rec, found, change, full.Watched)
	} else {
		full.NextFetch, full.Interval = c.o.Refetch.Next(op.At, rec.Interval, change)
	}
	op.Schedule = &full
	return nil
}

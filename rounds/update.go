package rounds

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/opic"
	"github.com/meridian-crawler/meridian/rounds/mapreduce"
	"github.com/meridian-crawler/meridian/rounds/segment"
)

const (
	fetchFile  = "fetched"
	updateFile = "update"
	mapChunk   = 512 // fetch records per map task
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
}

// update folds a fetched round into the crawl database: it prepares the
// round's commands once (map over the fetch segment, shuffle by URL, reduce)
// into the update file, then applies those not applied yet, then retires
// the round.
func (c *Crawler) update(ctx context.Context, round uint64) (RoundStats, error) {
	start := c.o.Now()
	dir := c.roundDir(round)
	cmds, tr, err := readUpdate(dir)
	if err != nil {
		return RoundStats{}, err
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
	// Retire the round: its state and progress marker in one command.
	if err := c.hosts.flush(ctx); err != nil {
		return RoundStats{}, err
	}
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	a := s.active(round)
	var st RoundStats
	if a != nil {
		st.Generated, st.Started = a.Generated, a.Started
		if !a.Fetched.IsZero() {
			st.FetchSeconds = a.Fetched.Sub(a.Started).Seconds()
		}
	}
	s.remove(round)
	s.Virtual = tr.Virtual
	s.Spent += tr.Spent
	s.Done++
	b := store.NewBatch()
	b.PutUser(progressKey(round), nil)
	if err := c.putState(ctx, b, s); err != nil {
		return RoundStats{}, err
	}
	c.mu.Lock()
	c.state.remove(round)
	c.state.Virtual, c.state.Spent, c.state.Done = s.Virtual, s.Spent, s.Done
	r := c.running[round]
	delete(c.running, round)
	c.mu.Unlock()
	if r != nil {
		r.stats.fill(&st)
		st.GenerateSeconds = r.genDur.Seconds()
		if !r.fetchAt.IsZero() && a != nil && !a.Fetched.IsZero() {
			st.FetchSeconds = a.Fetched.Sub(r.fetchAt).Seconds()
		}
	}
	st.Round = round
	st.Ended = c.o.Now()
	st.UpdateSeconds = st.Ended.Sub(start).Seconds()
	st.Targets, st.NewURLs, st.Virtual = tr.Targets, newURLs, tr.Virtual
	st.Revisits, st.RevisitCash = tr.Revisits, tr.RevisitCash
	st.TroubledCount = len(st.Troubled)
	if !c.o.KeepFiles {
		if err := os.RemoveAll(dir); err != nil {
			c.log.Warn("rounds: remove round files", "round", round, "err", err)
		}
	}
	return st, nil
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

// prepareUpdate maps the round's fetch records to crawl-database operations
// and outlink credits, reduces the credits by URL, and writes the encoded
// commands to the update file.
func (c *Crawler) prepareUpdate(ctx context.Context, round uint64) error {
	dir := c.roundDir(round)
	// Read the fetch segment in chunks of raw records for the map.
	var chunks [][][]byte
	var cur [][]byte
	_, _, err := segment.Read(filepath.Join(dir, fetchFile), func(rec []byte) error {
		cur = append(cur, append([]byte(nil), rec...))
		if len(cur) == mapChunk {
			chunks, cur = append(chunks, cur), nil
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rounds: round %d: read fetch segment: %w", round, err)
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	tmp := filepath.Join(dir, "shuffle")
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

	var mu sync.Mutex
	var fetchOps []store.FetchResult
	var requeues []string
	var hops []redirectHop
	var virtual, spent opic.Sum
	seen := map[string]bool{} // a URL's result counts once
	revisits, revisitCash, err := c.revisit(ctx, sh, &virtual)
	if err != nil {
		return fmt.Errorf("rounds: round %d: %w", round, err)
	}
	err = mapreduce.Map(ctx, c.o.Workers, chunks, func(ctx context.Context, chunk [][]byte) error {
		var ops []store.FetchResult
		var requeue []string
		var hopsOut []redirectHop
		var v opic.Sum
		for _, raw := range chunk {
			fr, err := decodeFetch(raw)
			if err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
			switch fr.Kind {
			case fetcher.KindRobots:
				continue
			case fetcher.KindSitemap:
				for _, l := range fr.Links {
					if err := sh.Emit([]byte(l), credit{depth: 1}); err != nil {
						return err
					}
				}
				continue
			}
			op := store.FetchResult{URL: fr.URL, Status: fr.Status, HTTPStatus: uint16(min(max(fr.HTTPStatus, 0), math.MaxUint16)), At: fr.At, ContentFP: fr.ContentFP, Round: round}
			if fr.Retry && fr.NoRequest {
				// The host was unavailable, not the URL: back to the
				// frontier without spending one of its retries, until
				// the host has failed so often that its URLs are given
				// up like any other.
				h, _, err := c.hosts.LoadHost(fr.Host)
				if err != nil {
					return err
				}
				if int(h.Failures) < c.o.MaxRetries+hostGrace {
					requeue = append(requeue, fr.URL)
					continue
				}
			}
			if fr.Retry {
				rec, ok, err := c.st.Get(fr.URL)
				if err != nil {
					return err
				}
				if !ok || int(rec.Retries)+1 < c.o.MaxRetries {
					op.Retry = true
					ops = append(ops, op)
					continue
				}
				op.Status = store.StatusError // out of retries
			}
			if op.Status < store.StatusFetched {
				op.Status = store.StatusError
			}
			op.Spend = fr.Cash
			ops = append(ops, op)
			var links []string
			switch {
			case fr.Status == store.StatusFetched:
				links = fr.Links
			case fr.Status == store.StatusRedirect && fr.RedirectTo != "" && fr.RedirectTo != fr.URL:
				// A redirect target is a link, unless the chain that led
				// here is already MaxRedirects long.
				hops, err := c.redirectHops(fr.URL)
				if err != nil {
					return err
				}
				if hops < c.o.MaxRedirects {
					links = []string{fr.RedirectTo}
					hopsOut = append(hopsOut, redirectHop{fr.RedirectTo, hops + 1})
				}
			}
			if fr.Depth+1 > c.o.MaxDepth {
				links = nil
			}
			damping := 1.0 // a redirect passes all of its cash on
			if fr.Status == store.StatusFetched {
				damping = c.o.Damping
				if len(links) > 0 {
					c.links.offer(fr.URL, fr.Depth, links, fr.Cash)
				}
			}
			toVirtual, err := distribute(sh, fr.Cash, damping, links, fr.Depth+1)
			if err != nil {
				return err
			}
			v.Add(toVirtual)
		}
		mu.Lock()
		fetchOps = append(fetchOps, ops...)
		requeues = append(requeues, requeue...)
		hops = append(hops, hopsOut...)
		virtual.Add(v.Value())
		mu.Unlock()
		return nil
	})
	if err != nil {
		return fmt.Errorf("rounds: round %d: update map: %w", round, err)
	}
	// A URL with two results (it cannot happen through startFetch, but a
	// file is input) keeps the first; its spend is not counted twice.
	kept := fetchOps[:0]
	for _, op := range fetchOps {
		if !seen[op.URL] {
			seen[op.URL] = true
			kept = append(kept, op)
		}
	}
	fetchOps = kept
	for _, op := range fetchOps {
		spent.Add(op.Spend)
	}
	for _, r := range revisits {
		spent.Add(r.spend)
	}

	parts := make([][]target, 16)
	err = sh.Reduce(ctx, c.o.Workers, func(part int, key []byte, v credit) error {
		parts[part] = append(parts[part], target{url: string(key), credit: v})
		return nil
	})
	if err != nil {
		return fmt.Errorf("rounds: round %d: update reduce: %w", round, err)
	}
	var n int64
	for _, p := range parts {
		n += int64(len(p))
	}
	c.mu.Lock()
	prevVirtual := c.state.Virtual
	c.mu.Unlock()
	each, keptVirtual := opic.Spread(prevVirtual+virtual.Value(), int(n))

	// Encode the commands: fetch results first, then the credits.
	var cmds [][]byte
	b := store.NewBatch()
	flush := func() error {
		b.PutUser(progressKey(round), encodeProgress(uint64(len(cmds)+1)))
		cmd, err := b.Encode()
		if err != nil {
			return fmt.Errorf("rounds: round %d: encode update command: %w", round, err)
		}
		cmds = append(cmds, cmd)
		b = store.NewBatch()
		return nil
	}
	for _, op := range fetchOps {
		b.RecordRoundFetch(op)
		if b.Len() >= c.o.BatchOps {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	for _, r := range revisits {
		b.Revisit(r.url, r.spend)
		if b.Len() >= c.o.BatchOps {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	for _, h := range hops {
		b.PutUser(redirectKey(h.target), binary.AppendUvarint(nil, uint64(h.hops)))
		if b.Len() >= c.o.BatchOps {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	for _, u := range requeues {
		if seen[u] {
			continue
		}
		seen[u] = true
		b.Requeue(u)
		if b.Len() >= c.o.BatchOps {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	for _, p := range parts {
		c.links.credit(p, each)
		for _, t := range p {
			b.UpsertCash(t.url, t.cash+each, t.depth)
			if b.Len() >= c.o.BatchOps {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if b.Len() > 0 {
		if err := flush(); err != nil {
			return err
		}
	}
	tr, _ := json.Marshal(updateTrailer{Commands: len(cmds), Targets: n, Spent: spent.Value(), Virtual: keptVirtual,
		Revisits: len(revisits), RevisitCash: revisitCash})
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

// revisit picks the stored pages owed the most cash, reads the cash each
// has now, and emits it over their outlinks into sh (the damped part and
// any rounding into virtual). The cash read is what the update's Revisit
// operations move: nothing else changes a fetched page's cash between the
// read and the update, which is the only writer of cash and runs alone.
func (c *Crawler) revisit(ctx context.Context, sh *mapreduce.Shuffle[credit], virtual *opic.Sum) ([]plannedRevisit, float64, error) {
	var out []plannedRevisit
	var total opic.Sum
	for _, r := range c.links.pick(c.o.Revisits) {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		rec, ok, err := c.st.Get(r.url)
		if err != nil {
			return nil, 0, fmt.Errorf("revisit %s: %w", r.url, err)
		}
		if !ok || rec.Status != store.StatusFetched {
			c.links.forget(r.url)
			continue
		}
		if rec.Cash <= 0 || rec.Depth+1 > c.o.MaxDepth {
			continue
		}
		toVirtual, err := distribute(sh, rec.Cash, c.o.Damping, r.links, rec.Depth+1)
		if err != nil {
			return nil, 0, err
		}
		virtual.Add(toVirtual)
		c.links.visited(r.url, rec.Cash)
		out = append(out, plannedRevisit{url: r.url, spend: rec.Cash})
		total.Add(rec.Cash)
	}
	return out, total.Value(), nil
}

// distribute is OPIC's step for one page, fetched or revisited: d of its
// cash is split over links, emitted into sh at depth, and what goes to the
// virtual page (the damped part, or all of it without links) is returned.
func distribute(sh *mapreduce.Shuffle[credit], cash, d float64, links []string, depth uint32) (float64, error) {
	follow, damped := opic.Damp(cash, d)
	share, toVirtual := opic.Split(follow, len(links))
	for _, l := range links {
		if err := sh.Emit([]byte(l), credit{cash: share, depth: depth}); err != nil {
			return 0, err
		}
	}
	return damped + toVirtual, nil
}

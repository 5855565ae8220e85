package rounds

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/rounds/segment"
)

const genFile = "generated"

// generate picks the next round from the top of the frontier, writes its
// list and marks its URLs generated. It returns the round (nil: the
// frontier had nothing to give).
func (c *Crawler) generate(ctx context.Context) (*roundRun, error) {
	c.mu.Lock()
	round := c.state.Next
	c.mu.Unlock()
	start := c.o.Now()
	entries, err := c.pick()
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, nil
	}
	dir := c.roundDir(round)
	if err := os.RemoveAll(dir); err != nil { // leftovers of a generate cut short
		return nil, fmt.Errorf("rounds: generate %d: %w", round, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("rounds: generate %d: %w", round, err)
	}
	w, err := segment.Create(filepath.Join(dir, genFile))
	if err != nil {
		return nil, fmt.Errorf("rounds: generate %d: %w", round, err)
	}
	recs := make([][]byte, 0, len(entries)+1)
	for i := range entries {
		recs = append(recs, entries[i].appendTo(nil))
	}
	recs = append(recs, []byte{recGenEnd})
	if err := w.AppendBatch(recs); err != nil {
		w.Close()
		return nil, fmt.Errorf("rounds: generate %d: write list: %w", round, err)
	}
	if err := w.Close(); err != nil { // Close syncs: the list is durable before any URL is marked
		return nil, fmt.Errorf("rounds: generate %d: write list: %w", round, err)
	}
	r := &roundRun{round: round, gen: entries, started: start}
	if err := c.markGenerated(ctx, r); err != nil {
		return nil, err
	}
	r.genDur = c.o.Now().Sub(start)
	return r, nil
}

// pick reads the top of the frontier, closing hosts that have used their
// budget (their URLs are left where they are; generate skips the host).
func (c *Crawler) pick() ([]genEntry, error) {
	for attempt := 0; attempt < 4; attempt++ {
		fr, err := c.st.Frontier(store.FrontierQuery{Width: c.o.Width, PerHost: c.o.PerHost, Now: c.o.Now()})
		if err != nil {
			return nil, fmt.Errorf("rounds: generate: read frontier: %w", err)
		}
		entries := make([]genEntry, 0, len(fr))
		closed := 0
		lastHost := ""
		over := false
		for _, e := range fr {
			if e.Host != lastHost {
				lastHost = e.Host
				over = c.hostFetched(e.Host).Load() >= int64(c.o.HostBudget)
				if over {
					if err := c.hosts.close(e.Host); err != nil {
						return nil, fmt.Errorf("rounds: close host %s: %w", e.Host, err)
					}
					closed++
				}
			}
			if !over {
				entries = append(entries, genEntry{URL: e.URL, Host: e.Host, Cash: e.Score, Depth: e.Depth})
			}
		}
		if closed == 0 || len(entries) > 0 {
			return entries, nil
		}
		// Every host was over budget: write the closures so the
		// frontier skips them, and look again.
		if err := c.hosts.flush(context.Background()); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// markGenerated applies MarkGenerated for the round's URLs in batches, the
// last one with the new round state. It is idempotent, so a restart that
// finds a complete list and no state for it simply runs it again.
func (c *Crawler) markGenerated(ctx context.Context, r *roundRun) error {
	b := store.NewBatch()
	for i := range r.gen {
		b.MarkGenerated(r.gen[i].URL, r.round)
		if b.Len() >= c.o.BatchOps && i < len(r.gen)-1 {
			if _, err := c.apply(ctx, b); err != nil {
				return fmt.Errorf("rounds: generate %d: %w", r.round, err)
			}
			b = store.NewBatch()
		}
	}
	c.mu.Lock()
	s := c.state.clone()
	c.mu.Unlock()
	s.Next = r.round + 1
	s.Active = append(s.Active, Active{Round: r.round, Phase: PhaseFetch, Generated: len(r.gen), Started: r.started})
	if err := c.putState(ctx, b, s); err != nil {
		return err
	}
	c.mu.Lock()
	c.state.Next = s.Next
	c.state.Active = append(c.state.Active, s.Active[len(s.Active)-1])
	c.mu.Unlock()
	return nil
}

// readGenerated reads a round's list. complete is false when the list was
// cut short (a crash during generate): such a round never reached the state.
func readGenerated(dir string) (entries []genEntry, complete bool, err error) {
	_, _, err = segment.Read(filepath.Join(dir, genFile), func(rec []byte) error {
		if len(rec) == 1 && rec[0] == recGenEnd {
			complete = true
			return nil
		}
		e, err := decodeGen(rec)
		if err != nil {
			return err
		}
		entries = append(entries, e)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return entries, complete, err
}

// startFetch opens the round's fetch segment (recovering it after a crash),
// works out which generated URLs still need a result and submits them.
func (c *Crawler) startFetch(r *roundRun, f Fetcher) error {
	path := filepath.Join(c.roundDir(r.round), fetchFile)
	done := map[string]bool{}
	if _, err := os.Stat(path); err == nil {
		_, tail, err := segment.Read(path, func(rec []byte) error {
			fr, err := decodeFetch(rec)
			if err != nil {
				return err
			}
			if fr.Kind == fetcher.KindPage {
				done[fr.URL] = true
			}
			r.stats.addRecord(&fr)
			return nil
		})
		if err != nil {
			return fmt.Errorf("rounds: round %d: read fetch segment: %w", r.round, err)
		}
		w, dropped, err := segment.OpenAppend(path)
		if err != nil {
			return fmt.Errorf("rounds: round %d: reopen fetch segment: %w", r.round, err)
		}
		if tail > 0 || dropped > 0 {
			c.log.Warn("rounds: fetch segment had a torn tail", "round", r.round, "bytes", max(tail, dropped))
		}
		r.seg = w
	} else {
		w, err := segment.Create(path)
		if err != nil {
			return fmt.Errorf("rounds: round %d: create fetch segment: %w", r.round, err)
		}
		r.seg = w
	}
	jobs := make([]fetcher.Job, 0, len(r.gen))
	for _, e := range r.gen {
		if !done[e.URL] {
			jobs = append(jobs, fetcher.Job{URL: e.URL, Host: e.Host, Round: r.round, Depth: e.Depth, Cash: e.Cash})
		}
	}
	r.pending.Store(int64(len(jobs)))
	r.fetchAt = c.o.Now()
	c.mu.Lock()
	c.running[r.round] = r
	orphans := c.orphans
	c.orphans = nil
	c.mu.Unlock()
	if len(orphans) > 0 {
		if err := r.seg.AppendBatch(orphans); err != nil {
			return fmt.Errorf("rounds: round %d: write sitemap results: %w", r.round, err)
		}
	}
	if len(jobs) == 0 {
		c.send(event{kind: "fetched", round: r.round})
		return nil
	}
	f.Submit(jobs)
	return nil
}

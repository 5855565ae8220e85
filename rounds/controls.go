package rounds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/rounds/control"
)

// controlsPoll is how often a node reads the operator's controls again
// (one small key).
const controlsPoll = 200 * time.Millisecond

// ReadControls reads the operator's controls from a crawl database's store.
func ReadControls(st *store.Store) (control.Controls, error) {
	b, err := st.User(control.Key)
	if err != nil {
		return control.Controls{}, fmt.Errorf("rounds: read controls: %w", err)
	}
	return control.Decode(b)
}

// ApplyControl applies an operator's change to the controls held in db (a
// site's crawl database, or a sharded site's meta group) as node, and
// returns the controls it made. The change is one command guarded by the
// version it was made against: a concurrent change makes it read again
// and retry. The change is logged.
func ApplyControl(ctx context.Context, db *crawldb.DB, op control.Op, node string, log *slog.Logger) (control.Controls, error) {
	if err := op.Check(); err != nil {
		return control.Controls{}, err
	}
	for try := 0; ; try++ {
		cur, err := ReadControls(db.Store())
		if err != nil {
			return cur, err
		}
		next, err := cur.Apply(op, time.Now(), node)
		if err != nil {
			return cur, err
		}
		b := store.NewBatch()
		b.Guard(control.VersionKey, control.VersionValue(cur.Version))
		b.PutUser(control.VersionKey, control.VersionValue(next.Version))
		b.PutUser(control.Key, next.Encode())
		res, err := db.Apply(ctx, b)
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if err == nil {
			if log != nil {
				log.Info("rounds: operator's change applied", "change", next.Changes[len(next.Changes)-1].What, "version", next.Version)
			}
			// What this node reads next includes it.
			if err := db.WaitApplied(ctx, res.Index); err != nil {
				return next, err
			}
			return next, nil
		}
		if !errors.Is(err, store.ErrGuard) || try >= 20 {
			return cur, fmt.Errorf("rounds: apply the change: %w", err)
		}
		// Another change came first: read again once it is here.
		select {
		case <-ctx.Done():
			return cur, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ControlWatch keeps the operator's controls of a store as last read. Its
// reads are cheap: Load reads the store again (one small key, the
// version) at most every controlsPoll, and decodes the controls only when
// their version moved. Safe for concurrent use.
type ControlWatch struct {
	st   *store.Store
	now  func() time.Time
	cur  atomic.Pointer[control.Controls]
	next atomic.Int64 // unix nanos: when Load reads the store again
	busy atomic.Bool  // a Load is reading
	// seen is the store's applied index at the last read: the controls
	// cannot have moved while it stays (a sharded node's shards each
	// refresh at every leader step, against the one meta group).
	seen atomic.Uint64
	log  *slog.Logger
}

// NewControlWatch returns a watch of the controls in st (now nil: time.Now).
func NewControlWatch(st *store.Store, now func() time.Time, log *slog.Logger) *ControlWatch {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ControlWatch{st: st, now: now, log: log}
}

// Load returns the controls as last read, reading them again if the last
// read is older than controlsPoll (nil: none could be read yet). The value
// must not be changed.
func (w *ControlWatch) Load() *control.Controls {
	if w == nil {
		return nil
	}
	if now := w.now().UnixNano(); now >= w.next.Load() && w.busy.CompareAndSwap(false, true) {
		if err := w.Refresh(); err != nil && !errors.Is(err, store.ErrClosed) {
			w.log.Warn("rounds: controls", "err", err)
		}
		w.next.Store(now + int64(controlsPoll))
		w.busy.Store(false)
	}
	return w.cur.Load()
}

// Refresh reads the controls again now if their version moved.
func (w *ControlWatch) Refresh() error {
	idx := w.st.AppliedIndex()
	if w.cur.Load() != nil && idx != 0 && idx == w.seen.Load() {
		return nil
	}
	v, err := w.st.User(control.VersionKey)
	if err != nil {
		return fmt.Errorf("rounds: read controls: %w", err)
	}
	if cur := w.cur.Load(); cur != nil && bytes.Equal(v, control.VersionValue(cur.Version)) {
		w.seen.Store(idx)
		return nil
	}
	ctl, err := ReadControls(w.st)
	if err != nil {
		return err
	}
	w.cur.Store(&ctl)
	w.seen.Store(idx)
	return nil
}

// HostOverride is the fetcher's per-host override (fetcher.Options.Override):
// the operator's delay for host, and whether it is blocked now.
func (w *ControlWatch) HostOverride(host string) (time.Duration, bool) {
	ctl := w.Load()
	if ctl == nil || len(ctl.Hosts) == 0 {
		return 0, false
	}
	h, ok := ctl.Hosts[host]
	if !ok {
		return 0, false
	}
	return h.Delay, h.BlockedAt(w.now())
}

// Controls returns the operator's controls as this node last read them
// (nil: none read yet). The value must not be changed.
func (c *Crawler) Controls() *control.Controls { return c.ctl.Load() }

// HostOverride is the fetcher's per-host override (ControlWatch.HostOverride).
func (c *Crawler) HostOverride(host string) (time.Duration, bool) { return c.ctl.HostOverride(host) }

// limits are the round limits in force: the options, or the operator's.
type limits struct {
	width, perHost, hostBudget int
	pldBudget                  int // 0: none
}

// limits returns the round limits in force for this crawl database (a
// site-wide width is shared by Options.Shards).
func (c *Crawler) limits() limits {
	l := limits{width: c.o.Width, perHost: c.o.PerHost, hostBudget: c.o.HostBudget, pldBudget: c.o.PLDBudget}
	if ctl := c.ctl.Load(); ctl != nil {
		if ctl.Width > 0 {
			l.width = max(ctl.Width/max(c.o.Shards, 1), 1)
		}
		if ctl.PerHost > 0 {
			l.perHost = ctl.PerHost
		}
		if ctl.HostBudget > 0 {
			l.hostBudget = ctl.HostBudget
		}
		if ctl.PLDBudget > 0 {
			l.pldBudget = ctl.PLDBudget
		}
	}
	return l
}

// paused reports whether the operator paused the crawl.
func (c *Crawler) paused() bool {
	ctl := c.ctl.Load()
	return ctl != nil && ctl.Paused
}

// blocked reports whether the operator blocked host now.
func (c *Crawler) blocked(host string) bool {
	return c.ctl.Load().Blocked(host, c.o.Now())
}

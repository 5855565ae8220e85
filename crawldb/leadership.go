package crawldb

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// leadership fans the node's leadership changes out to subscribers. Raft's
// LeaderCh has room for one reader: watchLeadership is it.
type leadership struct {
	mu     sync.Mutex
	leader bool
	closed bool
	subs   map[chan bool]struct{}
}

// set records the latest value from Raft and hands it to every subscriber.
func (l *leadership) set(v bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leader = v
	for ch := range l.subs {
		deliverLatest(ch, v)
	}
}

// deliverLatest replaces what ch holds (room for one) with v. Only the
// holder of leadership.mu sends, so the send cannot block.
func deliverLatest(ch chan bool, v bool) {
	select {
	case <-ch:
	default:
	}
	ch <- v
}

func (l *leadership) subscribe() (<-chan bool, func()) {
	ch := make(chan bool, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		close(ch)
		return ch, func() {}
	}
	if l.subs == nil {
		l.subs = map[chan bool]struct{}{}
	}
	l.subs[ch] = struct{}{}
	ch <- l.leader
	return ch, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.subs[ch]; ok {
			delete(l.subs, ch)
			close(ch)
		}
	}
}

// close ends every subscription. It is idempotent.
func (l *leadership) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for ch := range l.subs {
		close(ch)
	}
	l.subs = nil
}

// LeadershipChanges subscribes to this node's leadership: the channel
// delivers the current state first (true: this node leads), then a value at
// every change. Values are coalesced: a slow reader sees the latest one, and
// a repeated value means leadership was lost and regained (or the reverse)
// in between; Term tells them apart. The channel is closed by cancel and when
// the node closes.
func (db *DB) LeadershipChanges() (<-chan bool, func()) { return db.leaders.subscribe() }

// watchLeadership is the only reader of Raft's LeaderCh: it fans the changes
// out and makes a new leader announce its API address, so that followers can
// forward to it. It ends when the node closes.
func (db *DB) watchLeadership() {
	defer db.bg.Done()
	ch := db.raft.LeaderCh()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		select {
		case <-db.ctx.Done():
			return
		case v := <-ch:
			db.leaders.set(v)
		case <-check.C:
		}
		db.announce()
	}
}

// announce records the leader's own API address if the store lacks it,
// and those of the voters a Host's group was bootstrapped with.
func (db *DB) announce() {
	if db.raft.State() != raft.Leader {
		return
	}
	db.recordBootAPIs()
	api := db.APIAddr()
	if api == "" {
		return
	}
	if v, err := db.Store().User(memberKey(db.opts.NodeID)); err == nil && string(v) == api {
		return
	}
	b := store.NewBatch()
	b.PutUser(memberKey(db.opts.NodeID), []byte(api))
	if _, err := db.applyBatchLocal(b); err != nil {
		db.log.Debug("crawldb: announce", "err", err)
	}
}

// recordBootAPIs records, once, the API addresses of the voters a Host's
// group was bootstrapped with (GroupOptions.Bootstrap) that are still
// voters and whose address the store lacks. The node must lead.
func (db *DB) recordBootAPIs() {
	if db.bootAPIs == nil || db.bootDone.Load() {
		return
	}
	cfg, err := db.configuration()
	if err != nil {
		return
	}
	b := store.NewBatch()
	n := 0
	for _, s := range cfg.Servers {
		api := db.bootAPIs[string(s.ID)]
		if api == "" {
			continue
		}
		if v, err := db.Store().User(memberKey(string(s.ID))); err == nil && len(v) > 0 {
			continue
		}
		b.PutUser(memberKey(string(s.ID)), []byte(api))
		n++
	}
	if n > 0 {
		if _, err := db.applyBatchLocal(b); err != nil {
			db.log.Debug("crawldb: record bootstrap voters' API addresses", "err", err)
			return
		}
	}
	db.bootDone.Store(true)
}

// applyBatchLocal applies b at this node, which must lead.
func (db *DB) applyBatchLocal(b *store.Batch) (*store.Result, error) {
	cmd, err := b.Encode()
	if err != nil {
		return nil, err
	}
	return db.applyLocal(cmd)
}

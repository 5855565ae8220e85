package shardset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
	"github.com/meridian-crawler/meridian/federation"
)

// Delivery between shards: the leader of each shard sends its outbox's
// entries for every other shard to that shard's crawl database, framed as
// a federation batch (federation.AppendFrame) and applied once by sequence
// number (federation.ApplyFrame): in process when this node has a replica
// of the receiving shard (its crawl database forwards the write to the
// shard's leader), else to a node that has one, over the node API.

// deliverEvery is how often a shard's outbox is looked at.
const deliverEvery = 100 * time.Millisecond

// deliverLoop delivers the outboxes of the shards this node leads until
// ctx ends.
func (s *Set) deliverLoop(ctx context.Context) {
	t := time.NewTicker(deliverEvery)
	defer t.Stop()
	for {
		for _, r := range s.replicas() {
			if !r.db.IsLeader() {
				continue
			}
			// One pass over the shard's outboxes, not one per shard.
			heads, err := r.db.Store().OutboxHeads(outboxPrefix, maxDeliver)
			if err != nil {
				s.log.Warn("shardset: read outboxes", "shard", r.shard, "err", err)
				continue
			}
			for owner, entries := range heads {
				dest := ShardOfGroup(owner[len(outboxPrefix):])
				if dest < 0 || dest >= s.settings.Shards || dest == r.shard {
					s.log.Warn("shardset: outbox of no other shard", "shard", r.shard, "owner", owner)
					continue
				}
				if err := s.deliver(ctx, r, dest, entries); err != nil && ctx.Err() == nil {
					s.log.Debug("shardset: deliver", "from", r.shard, "to", dest, "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maxDeliver is how many of an outbox's entries one delivery looks at.
const maxDeliver = 1024

// deliver sends entries, the head of r's outbox for shard dest, once: it
// acks what dest has applied, then sends the rest in one frame.
func (s *Set) deliver(ctx context.Context, r *replica, dest int, entries []store.OutboxEntry) error {
	owner := outboxOwner(dest)
	if len(entries) == 0 {
		return nil
	}
	from := GroupID(r.shard)
	applied, err := s.applied(ctx, dest, from)
	if err != nil {
		return err
	}
	if err := s.ack(ctx, r, owner, entries, applied); err != nil {
		return err
	}
	for len(entries) > 0 && entries[0].Seq <= applied {
		entries = entries[1:]
	}
	if len(entries) == 0 {
		return nil
	}
	first := entries[0].Seq
	var payloads [][]byte
	size, seq := 64, first
	for _, e := range entries {
		if len(payloads) > 0 && (size+len(e.Payload) > maxFrameBytes || len(payloads)*maxPutsPerEntry >= maxFramePuts) {
			break
		}
		payloads = append(payloads, e.Payload)
		size += len(e.Payload) + 8
		seq = e.Seq
	}
	frame := federation.AppendFrame(make([]byte, 0, size), from, GroupID(dest), seq, first, payloads)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	applied, err = s.send(cctx, dest, from, frame)
	if err != nil {
		return err
	}
	return s.ack(ctx, r, owner, entries, applied)
}

// ack removes from r's outbox for owner the entries up to applied.
func (s *Set) ack(ctx context.Context, r *replica, owner string, entries []store.OutboxEntry, applied uint64) error {
	b := store.NewBatch()
	for _, e := range entries {
		if e.Seq > applied {
			break
		}
		b.OutboxAck(owner, e.Seq)
	}
	n := b.Len()
	if n == 0 {
		return nil
	}
	if err := apply(ctx, r.db, b); err != nil {
		return err
	}
	r.acked.Add(uint64(n))
	return nil
}

// applied returns what shard dest has applied from the shard named from.
func (s *Set) applied(ctx context.Context, dest int, from string) (uint64, error) {
	if d := s.replica(dest); d != nil {
		return federation.Applied(d.db.Store(), from)
	}
	api, err := s.holder(dest)
	if err != nil {
		return 0, err
	}
	q := url.Values{"from": {from}, "to": {GroupID(dest)}}
	return s.call(ctx, http.MethodGet, api, "/shardset/applied?"+q.Encode(), nil)
}

// send applies frame to shard dest and returns what it has applied from
// the sender since.
func (s *Set) send(ctx context.Context, dest int, from string, frame []byte) (uint64, error) {
	if d := s.replica(dest); d != nil {
		return federation.ApplyFrame(ctx, d.db, from, frame)
	}
	api, err := s.holder(dest)
	if err != nil {
		return 0, err
	}
	q := url.Values{"from": {from}, "to": {GroupID(dest)}}
	return s.call(ctx, http.MethodPost, api, "/shardset/deliver?"+q.Encode(), frame)
}

// holder returns the node API address of a node that holds shard dest:
// its target leader, else another of its replicas.
func (s *Set) holder(dest int) (string, error) {
	p, _, err := readPlacement(s.o.Meta.Store())
	if err != nil {
		return "", err
	}
	if dest >= len(p.P.Shards) {
		return "", fmt.Errorf("shardset: no placement of shard %d", dest)
	}
	sh := p.P.Shards[dest]
	for _, id := range append([]string{sh.Leader}, sh.Replicas...) {
		if m, err := s.member(id); err == nil && m.APIAddr != "" && id != s.self {
			return m.APIAddr, nil
		}
	}
	return "", fmt.Errorf("shardset: no node of the site holds shard %d", dest)
}

// call makes a node API call and reads the applied sequence number it
// answers.
func (s *Set) call(ctx context.Context, method, api, path string, body []byte) (uint64, error) {
	if s.o.Client == nil {
		return 0, errors.New("shardset: no client for the node API")
	}
	req, err := http.NewRequestWithContext(ctx, method, s.o.Scheme+"://"+api+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("shardset: %s %s at %s: %s: %s", method, path, api, resp.Status, bytes.TrimSpace(b))
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("shardset: %s %s at %s: answer %q: %w", method, path, api, b, err)
	}
	return n, nil
}

// Handler serves the node API's shard calls (mount it under /shardset/):
// POST /shardset/deliver?from=F&to=T applies a frame to this node's
// replica of shard T; GET /shardset/applied?from=F&to=T says what T has
// applied from F. Both answer that sequence number.
func (s *Set) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /shardset/deliver", func(w http.ResponseWriter, req *http.Request) {
		d, from, ok := s.target(w, req)
		if !ok {
			return
		}
		frame, err := io.ReadAll(io.LimitReader(req.Body, federation.DefaultMaxBytes+1))
		if err != nil || len(frame) > federation.DefaultMaxBytes {
			http.Error(w, "shardset: deliver: body unreadable or over the frame limit", http.StatusRequestEntityTooLarge)
			return
		}
		n, err := federation.ApplyFrame(req.Context(), d.db, from, frame)
		if err != nil {
			code := http.StatusServiceUnavailable
			if errors.Is(err, federation.ErrRejected) || errors.Is(err, federation.ErrRefused) {
				code = http.StatusBadRequest
			}
			http.Error(w, err.Error(), code)
			return
		}
		fmt.Fprintln(w, n)
	})
	mux.HandleFunc("POST /shardset/inbound", s.serveInbound)
	mux.HandleFunc("GET /shardset/applied", func(w http.ResponseWriter, req *http.Request) {
		d, from, ok := s.target(w, req)
		if !ok {
			return
		}
		n, err := federation.Applied(d.db.Store(), from)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, n)
	})
	return mux
}

// target reads a call's from and to and finds this node's replica of to.
func (s *Set) target(w http.ResponseWriter, req *http.Request) (*replica, string, bool) {
	q := req.URL.Query()
	from, to := q.Get("from"), q.Get("to")
	fs, ts := ShardOfGroup(from), ShardOfGroup(to)
	if fs < 0 || ts < 0 || fs >= s.settings.Shards || ts >= s.settings.Shards || fs == ts {
		http.Error(w, fmt.Sprintf("shardset: from %q and to %q must name two shards of this site's %d", from, to, s.settings.Shards), http.StatusBadRequest)
		return nil, "", false
	}
	d := s.replica(ts)
	if d == nil {
		http.Error(w, fmt.Sprintf("shardset: node %s holds no replica of shard %d", s.self, ts), http.StatusServiceUnavailable)
		return nil, "", false
	}
	return d, from, true
}

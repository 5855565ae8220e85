package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/termwave"
)

// peer is another site as this node sees it.
type peer struct {
	name string
	spec SiteSpec

	// Delivery (the Run goroutine only).
	pend     *pending
	nextTry  time.Time
	failures int
	synced   bool // outbox entries the peer applied are acknowledged
	reseeded bool // its seeds this site owns while it is down are in
	// handedOver: a shard has logged its first hand-over of the URLs
	// for the peer in this down period (Shard.handOver).
	handedOver bool
	// refusedAt is when the peer last refused a batch (zero: settled):
	// once an answer to a probe sent after it says what the peer has
	// applied, the entries left that it will not take are re-routed
	// (Fed.rerouteStray).
	refusedAt time.Time

	// The hand-back of its hosts (the Run goroutine only; handback.go):
	// holding, this down period's record is written; backPending, the
	// hand-back is to be done (backLoaded: read from the crawl database);
	// backAfter, the first round generated after it was seen back;
	// backNext, when to look at the rounds again.
	holding, backLoaded, backPending bool
	backAfter                        uint64
	backNext                         time.Time

	// Detection (under Fed.mu).
	lastOK time.Time // its last answer
	// missed counts the probe rounds since its last answer that it did
	// not answer, and missedAt is missed when it became suspect: silence
	// alone is wall-clock time, which a starved node (its probes late)
	// would count against its peers.
	missed, missedAt int
	askedAt          time.Time // when the probe that got its last answer was sent
	suspect          bool
	down             bool // suspect past the grace period: its hosts have moved
	heard            bool // state is from its answer
	state            probeMsg
	lastErr          string
}

func (p *peer) backoff(now time.Time, d time.Duration) { p.nextTry = now.Add(d) }

func (p *peer) ok(now time.Time) { p.failures, p.nextTry = 0, time.Time{} }

// fail backs off exponentially: 100 ms, doubling, at most 5 s.
func (p *peer) fail(now time.Time) {
	p.failures++
	d := 100 * time.Millisecond << min(p.failures-1, 6)
	p.nextTry = now.Add(min(d, 5*time.Second))
}

// probeMsg is what sites tell each other in probes, both ways: enough for
// the failure detector (any answer) and the termination waves.
type probeMsg struct {
	Site    string `json:"site"`
	Passive bool   `json:"passive"` // nothing to do, nothing to send
	// Sent is, per peer, the last outbox entry sent to it (acknowledged,
	// or in flight); Recv, per peer, the last one applied from it.
	Sent map[string]uint64 `json:"sent"`
	Recv map[string]uint64 `json:"recv"`
	// RecvFrom is, per sender that is a shard of a peer (SenderName),
	// the last batch applied from it (Recv sums them per site): the
	// shard learns from it what it need not send again.
	RecvFrom map[string]uint64 `json:"recv_from,omitempty"`
	Down     []string          `json:"down,omitempty"`
	// Sharded: the site is sharded (for the record: a sharded site takes a
	// down site's hosts as any other does).
	Sharded    bool `json:"sharded,omitempty"`
	Terminated bool `json:"terminated,omitempty"`
	// Idle is the site leader's Options.Idle (the applied index as of its
	// last idle look), for a node of the site that asks its leader.
	Idle uint64 `json:"idle,omitempty"`
	// HandBack is, per site whose hosts this site took over while it was
	// down, this site's hand-back of the URLs it fetched of them: pending,
	// or done up to an outbox entry (handback.go).
	HandBack map[string]HandBack `json:"hand_back,omitempty"`
}

// local returns this node's own probe state.
func (f *Fed) local() (probeMsg, error) {
	m := probeMsg{Site: f.o.Self, Sent: map[string]uint64{}, Recv: map[string]uint64{}, Terminated: f.terminated.Load(), Sharded: f.o.Sharded != nil}
	idle := uint64(0)
	if f.o.Idle != nil {
		idle = f.o.Idle()
	}
	backs, err := f.backRecords()
	if err != nil {
		return m, err
	}
	doubts, err := f.doubted()
	if err != nil {
		return m, err
	}
	f.mu.Lock()
	pending := false
	for name, p := range f.peers {
		if p.pend != nil && !p.down {
			pending = true
			m.Sent[name] = p.pend.seq
		}
		if doubts[name] && !p.down {
			pending = true // entries to settle with, or deliver again to, a site back
		}
		if p.down {
			m.Down = append(m.Down, name)
			backs[name] = backRecord{Pending: true} // its record may not be written yet
		} else if backs[name].Pending {
			pending = true // a hand-back to a site up is work to do
		}
	}
	f.mu.Unlock()
	if f.o.Sharded != nil {
		// The shards hold the hosts, and their hand-back records.
		for name, hb := range f.o.Sharded.HandBacks() {
			if !backs[name].Pending {
				if m.HandBack == nil {
					m.HandBack = map[string]HandBack{}
				}
				m.HandBack[name] = hb
			}
		}
	}
	for name, r := range backs {
		if m.HandBack == nil {
			m.HandBack = map[string]HandBack{}
		}
		if _, ok := m.HandBack[name]; !ok || r.Pending {
			m.HandBack[name] = HandBack{Pending: r.Pending, Seq: r.Seq}
		}
	}
	for _, s := range f.o.File.Sites {
		if s.Name == f.o.Self {
			continue
		}
		if _, ok := m.Sent[s.Name]; !ok {
			out, err := f.outboundOf(s.Name)
			if err != nil {
				return m, err
			}
			m.Sent[s.Name] = out.Acked
		}
		if err := f.recvOf(s.Name, &m); err != nil {
			return m, err
		}
	}
	m.Idle = idle
	m.Passive = idle > 0 && idle >= f.lastRecv.Load() && f.st.Counts().Outbox == 0 && !pending && f.o.DB.IsLeader()
	if f.o.Sharded != nil {
		// The shards send: what they acknowledged, summed per peer.
		passive, sent, since := f.o.Sharded.Quiet()
		// A batch received after the shards' states were read may not be
		// in them (another node of the site compares since, as Idle,
		// with its own last batch: Fed.state).
		m.Idle = since
		m.Passive = passive && since >= f.lastRecv.Load() && f.o.DB.IsLeader()
		for name := range m.Sent {
			m.Sent[name] = sent[name]
		}
	}
	return m, nil
}

// doubted returns the peers for which outbox entries are in doubt
// (handOver): settled, or delivered again, when they are back.
func (f *Fed) doubted() (map[string]bool, error) {
	var m map[string]bool
	err := f.st.UserScan(doubtPrefix, func(k string, _ []byte) error {
		name, _, _ := strings.Cut(k[len(doubtPrefix):], "/")
		if m == nil {
			m = map[string]bool{}
		}
		m[name] = true
		return nil
	})
	return m, err
}

// recvOf sets m.Recv[site], the last batch applied from site summed over
// its senders (the site, or its shards), and m.RecvFrom of its shards.
func (f *Fed) recvOf(site string, m *probeMsg) error {
	var sum uint64
	err := f.st.UserScan(inPrefix+site, func(k string, v []byte) error {
		name := k[len(inPrefix):]
		if name != site && SiteOfSender(name) != site {
			return nil
		}
		in, err := decodeInbound(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		sum += in.Seq
		if name != site {
			if m.RecvFrom == nil {
				m.RecvFrom = map[string]uint64{}
			}
			m.RecvFrom[name] = in.Seq
		}
		return nil
	})
	m.Recv[site] = sum
	return err
}

// state is this site's probe state as this node can tell it: its own on
// the site's leader; on another node (one serving the endpoint after a
// leadership change), the leader's, which runs the rounds and the
// deliveries, made passive only if the leader's idle index also covers
// the batches this node received. Without a leader to ask, the site is
// not passive.
func (f *Fed) state(ctx context.Context) (probeMsg, error) {
	m, err := f.local()
	if err != nil || f.o.DB.IsLeader() || f.o.LeaderState == nil {
		return m, err
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	b, err := f.o.LeaderState(cctx)
	var lm probeMsg
	if err == nil {
		err = json.Unmarshal(b, &lm)
	}
	if err != nil || lm.Site != f.o.Self {
		f.log.Debug("federation: the site leader's state", "err", err)
		return m, nil // not passive
	}
	lm.Passive = lm.Passive && lm.Idle >= f.lastRecv.Load()
	lm.Terminated = lm.Terminated || m.Terminated
	return lm, nil
}

// LeaderState is this node's probe state (JSON) when it leads its site,
// for the site's other nodes (Options.LeaderState); ErrNotLeader on
// another node.
func (f *Fed) LeaderState() ([]byte, error) {
	if !f.o.DB.IsLeader() {
		return nil, ErrNotLeader
	}
	m, err := f.local()
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// Probe answers a peer's probe with this node's state (see Receiver).
func (f *Fed) Probe(ctx context.Context, from string, body []byte) ([]byte, error) {
	if _, ok := f.o.File.Site(from); !ok || from == f.o.Self {
		return nil, fmt.Errorf("%w: site %q is not a peer in the federation file", ErrRefused, from)
	}
	var in probeMsg
	if err := json.Unmarshal(body, &in); err != nil || in.Site != from {
		return nil, fmt.Errorf("%w: probe from %s: %w", ErrRefused, from, err)
	}
	if in.Terminated {
		f.setTerminated(from)
	}
	f.heardFrom(from, in, f.o.Now())
	m, err := f.state(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// setTerminated records that a peer announced the federation's end.
func (f *Fed) setTerminated(by string) {
	f.terminated.Store(true)
	if !f.ended.Swap(true) {
		f.log.Info("federation: the federation's crawl has ended", "detected_by", by)
	}
}

// suspectMisses is how many probe rounds in a row a peer must leave
// unanswered, besides its silence, to become suspect, and as many more to
// go down: a node whose probes stalled (a starved process) does not
// count the stall against its peers.
const suspectMisses = 3

// heardFrom records a peer's state from its probe or answer.
func (f *Fed) heardFrom(name string, m probeMsg, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.peers[name]
	if p == nil {
		return
	}
	p.lastOK, p.state, p.heard, p.lastErr, p.missed = now, m, true, "", 0
	if p.down {
		f.log.Warn("federation: site is back: its hosts are its own again", "site", name)
		f.returned.Store(true)
	}
	if p.down {
		p.synced = false // settle what was in doubt, and learn what it applied
	}
	if p.suspect || p.down {
		p.suspect, p.down, p.reseeded = false, false, false
		f.publishDown()
	}
}

// probeAll probes every peer at once, runs the failure detector, and, on
// the coordinator, a termination wave.
func (f *Fed) probeAll(ctx context.Context) {
	me, err := f.state(ctx)
	if err != nil {
		f.log.Error("federation: local state", "err", err)
		return
	}
	body, _ := json.Marshal(me)
	f.mu.Lock()
	peers := slices.Collect(maps.Values(f.peers))
	f.mu.Unlock()
	var wg sync.WaitGroup
	answered := make([]bool, len(peers))
	for i, p := range peers {
		wg.Go(func() { // owner: probeAll; bounded by the call's timeout
			cctx, cancel := context.WithTimeout(ctx, max(f.o.SuspectAfter/2, 500*time.Millisecond))
			defer cancel()
			asked := f.o.Now()
			reply, err := f.client.Probe(cctx, p.spec.Endpoint, p.name, body)
			var m probeMsg
			if err == nil {
				err = json.Unmarshal(reply, &m)
			}
			if err == nil && m.Site != p.name {
				err = fmt.Errorf("answer from %q", m.Site)
			}
			if err != nil {
				f.mu.Lock()
				p.lastErr = err.Error()
				f.mu.Unlock()
				return
			}
			if m.Terminated {
				f.setTerminated(p.name)
			}
			f.heardFrom(p.name, m, f.o.Now())
			f.mu.Lock()
			p.askedAt = asked
			f.mu.Unlock()
			answered[i] = true
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	now := f.o.Now()
	grace := f.o.File.GraceOr()
	f.mu.Lock()
	changed := false
	for i, p := range peers {
		if !answered[i] {
			p.missed++
		}
		silent := now.Sub(p.lastOK)
		if !p.suspect && silent > f.o.SuspectAfter && p.missed >= suspectMisses {
			p.suspect, p.missedAt = true, p.missed
			f.log.Warn("federation: site suspect", "site", p.name, "silent", silent.Round(time.Millisecond), "err", p.lastErr)
		}
		if p.suspect && !p.down && silent > f.o.SuspectAfter+grace && p.missed >= p.missedAt+suspectMisses {
			p.down, changed = true, true
			f.log.Warn("federation: site down past the grace period: its hosts go to their next owner", "site", p.name, "grace", grace)
		}
	}
	if changed {
		f.publishDown()
	}
	states := map[string]probeMsg{f.o.Self: me}
	complete := true
	for i, p := range peers {
		if p.down {
			continue
		}
		if !answered[i] {
			complete = false
		}
		states[p.name] = p.state
	}
	coordinator := f.o.Self
	for name := range states {
		coordinator = min(coordinator, name)
	}
	f.mu.Unlock()
	if coordinator != f.o.Self || f.terminated.Load() {
		return
	}
	if !complete {
		f.waves.Reset()
		return
	}
	w := waveOf(states)
	if last, ok := f.waves.Last(); !ok || last.Key != w.Key || last.Quiet != w.Quiet {
		f.log.Debug("federation: termination wave", "quiet", w.Quiet, "counters", w.Key, "passive", passives(states))
	}
	if f.waves.Observe(w) {
		f.terminated.Store(true)
		f.log.Info("federation: the federation's crawl has ended: telling the peers", "waves", 2)
		f.announce(ctx, peers)
		f.ended.Store(true)
	}
}

// announce tells the live peers that the federation's crawl has ended,
// trying each for a few seconds (a peer that misses it learns it from the
// next probe it sends to a site that knows).
func (f *Fed) announce(ctx context.Context, peers []*peer) {
	me, err := f.local()
	if err != nil {
		return
	}
	body, _ := json.Marshal(me)
	var wg sync.WaitGroup
	for _, p := range peers {
		f.mu.Lock()
		down := p.down
		f.mu.Unlock()
		if down {
			continue
		}
		wg.Go(func() { // owner: announce; bounded in time
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := f.client.Probe(cctx, p.spec.Endpoint, p.name, body)
				cancel()
				if err == nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	wg.Wait()
}

// publishDown publishes the sites down (under f.mu).
func (f *Fed) publishDown() {
	m := map[string]bool{}
	for name, p := range f.peers {
		if p.down {
			m[name] = true
		}
	}
	f.down.Store(&m)
}

// waveOf reads the states of the live sites into a termination wave
// (termwave: Mattern's four counters, per pair of sites). Each wave is a
// round of probes, every answer new.
func waveOf(states map[string]probeMsg) termwave.Wave {
	ts := make(map[string]termwave.State, len(states))
	for name, m := range states {
		ts[name] = termwave.State{Passive: m.Passive, Sent: m.Sent, Recv: m.Recv}
	}
	return termwave.Read(ts, nil)
}

// Status is the federation as this node sees it (site status, /status).
type Status struct {
	Site        string       `json:"site"`
	Lat         float64      `json:"lat"`
	Lon         float64      `json:"lon"`
	Partitioner string       `json:"partitioner"`
	Terminated  bool         `json:"terminated"`
	Passive     bool         `json:"passive"`
	Outbox      uint64       `json:"outbox_entries"`
	SentCache   uint64       `json:"sent_cache_size"`
	CacheHits   int64        `json:"sent_cache_hits"`
	CacheLookup int64        `json:"sent_cache_lookups"`
	CacheRate   float64      `json:"sent_cache_hit_rate"`
	SentURLs    int64        `json:"sent_urls"`
	SentBatches int64        `json:"sent_batches"`
	RecvURLs    int64        `json:"received_urls"`
	RecvBatches int64        `json:"received_batches"`
	Peers       []PeerStatus `json:"peers"`
}

// PeerStatus is one peer in Status.
type PeerStatus struct {
	Name     string  `json:"name"`
	Endpoint string  `json:"endpoint"`
	State    string  `json:"state"` // "up", "suspect", "down" (its hosts moved), "unknown"
	Silent   float64 `json:"silent_s"`
	Outbox   int     `json:"outbox_pending"` // entries waiting (up to a scan's worth)
	Sent     uint64  `json:"sent_seq"`
	Recv     uint64  `json:"recv_seq"`
	BytesOut int64   `json:"bytes_out"`
	BytesIn  int64   `json:"bytes_in"`
	// SentURLs and RecvURLs: URLs delivered to it and applied from it, in
	// all (the site's durable counters).
	SentURLs uint64  `json:"sent_urls"`
	RecvURLs uint64  `json:"received_urls"`
	Lat      float64 `json:"lat"`
	Lon      float64 `json:"lon"`
	LastErr  string  `json:"last_error,omitempty"`
}

// Status returns the federation's state as this node sees it; on a
// sharded site, with the figures of the shards this node leads.
func (f *Fed) Status() Status {
	me, _ := f.local()
	c := f.st.Counts()
	s := Status{Site: f.o.Self, Partitioner: f.o.File.Partitioner, Terminated: f.terminated.Load(), Passive: me.Passive,
		Outbox: c.Outbox, SentCache: c.Sent, CacheHits: f.stats.hits.Load(), CacheLookup: f.stats.lookups.Load(),
		SentURLs: f.stats.sentURLs.Load(), SentBatches: f.stats.sentBatches.Load(),
		RecvURLs: f.stats.recvURLs.Load(), RecvBatches: f.stats.recvBatches.Load()}
	if s.CacheLookup > 0 {
		s.CacheRate = float64(s.CacheHits) / float64(s.CacheLookup)
	}
	if me, ok := f.o.File.Site(f.o.Self); ok {
		s.Lat, s.Lon = me.Lat, me.Lon
	}
	traffic := f.client.Traffic()
	now := f.o.Now()
	f.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(f.peers)) {
		p := f.peers[name]
		ps := PeerStatus{Name: name, Endpoint: p.spec.Endpoint, Lat: p.spec.Lat, Lon: p.spec.Lon, Silent: now.Sub(p.lastOK).Seconds(), Sent: me.Sent[name], Recv: me.Recv[name], LastErr: p.lastErr}
		switch {
		case p.down:
			ps.State = "down"
		case p.suspect:
			ps.State = "suspect"
		case p.heard:
			ps.State = "up"
		default:
			ps.State = "unknown"
		}
		t := traffic[name]
		ps.BytesOut, ps.BytesIn = int64(t.WireSent), int64(t.WireReceived)
		s.Peers = append(s.Peers, ps)
	}
	f.mu.Unlock()
	for i := range s.Peers {
		ps := &s.Peers[i]
		if e, err := f.st.Outbox(ps.Name, 0, outboxScan); err == nil {
			ps.Outbox = len(e)
		}
		if v, err := f.st.User(outPrefix + ps.Name); err == nil {
			if out, err := decodeOutbound(v); err == nil {
				ps.SentURLs = out.URLs
			}
		}
		if v, err := f.st.User(inPrefix + ps.Name); err == nil {
			if in, err := decodeInbound(v); err == nil {
				ps.RecvURLs = in.URLs
			}
		}
	}
	if f.o.Sharded != nil {
		f.addShards(&s)
	}
	return s
}

func passives(states map[string]probeMsg) string {
	out := ""
	for n, s := range states {
		out += fmt.Sprintf("%s=%v ", n, s.Passive)
	}
	return out
}

package crawldb

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// recordingStream is a stream layer whose dialed connections record what
// they send.
type recordingStream struct {
	*streamLayer
	mu    sync.Mutex
	conns []*recordingConn
}

type recordingConn struct {
	net.Conn
	mu  *sync.Mutex
	buf bytes.Buffer
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.buf.Write(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (s *recordingStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := s.streamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	rc := &recordingConn{Conn: conn, mu: &s.mu}
	s.mu.Lock()
	s.conns = append(s.conns, rc)
	s.mu.Unlock()
	return rc, nil
}

// sent returns what each dialed connection sent.
func (s *recordingStream) sent() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for _, c := range s.conns {
		out = append(out, bytes.Clone(c.buf.Bytes()))
	}
	return out
}

// sendRaftRPCs sends every kind of Raft RPC from one NetworkTransport to
// another, each over this package's stream layer (with tlsCfg, if not nil),
// and returns what the sender wrote on each connection and how many RPCs
// it sent. The receiver answers every RPC; any refusal fails the test.
func sendRaftRPCs(t *testing.T, tlsCfg *TLSConfig) (streams [][]byte, rpcs int) {
	t.Helper()
	logger, rec := newLogRecorder(t)
	hlog := hclog.NewNullLogger()
	layer := func() *streamLayer {
		s, err := newStreamLayer(streamConfig{bind: "127.0.0.1:0", tls: tlsCfg, counters: &counters{}, log: logger, fast: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	recv := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer(), MaxPool: 4, Timeout: 10 * time.Second, Logger: hlog})
	rs := &recordingStream{streamLayer: layer()}
	send := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: rs, MaxPool: 4, Timeout: 10 * time.Second, Logger: hlog})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the receiver's Raft: answers every RPC
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case rpc := <-recv.Consumer():
				switch c := rpc.Command.(type) {
				case *raft.AppendEntriesRequest:
					rpc.Respond(&raft.AppendEntriesResponse{Term: c.Term, Success: true}, nil)
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{Term: c.Term}, nil)
				case *raft.RequestPreVoteRequest:
					rpc.Respond(&raft.RequestPreVoteResponse{Term: c.Term}, nil)
				case *raft.TimeoutNowRequest:
					rpc.Respond(&raft.TimeoutNowResponse{}, nil)
				case *raft.InstallSnapshotRequest:
					n, err := io.Copy(io.Discard, rpc.Reader)
					rpc.Respond(&raft.InstallSnapshotResponse{Term: c.Term, Success: err == nil && n == c.Size}, nil)
				default:
					rpc.Respond(nil, errors.New("unexpected RPC"))
				}
			}
		}
	}()
	defer func() {
		send.Close()
		send.CloseStreams()
		recv.Close()
		recv.CloseStreams()
		close(stop)
		wg.Wait()
	}()

	id, target := raft.ServerID("r"), recv.LocalAddr()
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("s"), Addr: []byte(send.LocalAddr())}
	data := func(n int) []byte { return bytes.Repeat([]byte{0xc6}, n) } // msgpack's bin32 byte, as data
	entries := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: "s", Address: "127.0.0.1:1"}}})},
		{Index: 2, Term: 1, Type: raft.LogNoop},
		{Index: 3, Term: 1, Type: raft.LogCommand, Data: data(100), AppendedAt: time.Now()},
		{Index: 4, Term: 1, Type: raft.LogCommand, Data: data(300 << 10)},
		{Index: 5, Term: 1, Type: raft.LogCommand, Data: data(1<<20 + 3)},
	}
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		rpcs++
	}
	check("heartbeat", send.AppendEntries(id, target, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 1, Leader: []byte("s")}, &raft.AppendEntriesResponse{}))
	check("append", send.AppendEntries(id, target, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 1, Entries: entries, LeaderCommitIndex: 3}, &raft.AppendEntriesResponse{}))
	check("vote", send.RequestVote(id, target, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 2, LastLogIndex: 5, LastLogTerm: 1, LeadershipTransfer: true}, &raft.RequestVoteResponse{}))
	check("pre-vote", send.RequestPreVote(id, target, &raft.RequestPreVoteRequest{RPCHeader: hdr, Term: 2}, &raft.RequestPreVoteResponse{}))
	check("timeout now", send.TimeoutNow(id, target, &raft.TimeoutNowRequest{RPCHeader: hdr}, &raft.TimeoutNowResponse{}))
	for _, size := range []int64{0, 1<<20 + 17} {
		var resp raft.InstallSnapshotResponse
		check("snapshot", send.InstallSnapshot(id, target, &raft.InstallSnapshotRequest{RPCHeader: hdr, SnapshotVersion: raft.SnapshotVersionMax,
			Term: 2, Leader: []byte("s"), LastLogIndex: 5, LastLogTerm: 1, Configuration: entries[0].Data, ConfigurationIndex: 1, Size: size},
			&resp, bytes.NewReader(data(int(size)))))
		if !resp.Success {
			t.Fatalf("snapshot of %d bytes: not received whole", size)
		}
	}
	pipe, err := send.AppendEntriesPipeline(id, target)
	if err != nil {
		t.Fatal(err)
	}
	const piped = 6
	results := make(chan error, piped)
	go func() { // raft's replication reads the futures as it sends
		for range piped {
			select {
			case f := <-pipe.Consumer():
				results <- f.Error()
			case <-time.After(10 * time.Second):
				results <- errors.New("pipelined appends not answered")
				return
			}
		}
	}()
	for i := range piped {
		if _, err := pipe.AppendEntries(&raft.AppendEntriesRequest{RPCHeader: hdr, Term: 2, PrevLogEntry: uint64(5 + i), PrevLogTerm: 1,
			Entries: []*raft.Log{{Index: uint64(6 + i), Term: 2, Type: raft.LogCommand, Data: data(i * 70000)}}}, &raft.AppendEntriesResponse{}); err != nil {
			t.Fatal(err)
		}
	}
	for range piped {
		check("pipelined append", <-results)
	}
	pipe.Close()
	if l := rec.matching("crawldb: raft"); len(l) > 0 {
		t.Fatalf("the receiver refused: %q", l)
	}
	return rs.sent(), rpcs
}

// TestFrameGuardPassesRaftRPCs sends every kind of Raft RPC over the TLS
// stream layer, and checks that the guard finds each frame's end in what was
// sent, however the bytes are cut into reads.
func TestFrameGuardPassesRaftRPCs(t *testing.T) {
	streams, rpcs := sendRaftRPCs(t, newTestCA(t, "CA").tlsConfig(t, "n"))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, cut := range []string{"whole", "bytes", "random"} {
		frames := 0
		for _, s := range streams {
			g := newFrameGuard(defaultFrameLimits())
			for p := s; len(p) > 0; {
				n := len(p)
				switch cut {
				case "bytes":
					n = 1
				case "random":
					n = min(n, 1+rng.IntN(70000))
				}
				if err := g.scan(p[:n]); err != nil {
					t.Fatalf("%s: %v", cut, err)
				}
				p = p[n:]
			}
			if g.state != gType && g.state != gAfter {
				t.Fatalf("%s: a stream of %d bytes ends in %s", cut, len(s), g.describe())
			}
			frames += int(g.done)
		}
		if frames != rpcs {
			t.Fatalf("%s: %d frames in %d streams, %d RPCs sent", cut, frames, len(streams), rpcs)
		}
	}
}

// splitFrames cuts a stream of frames into frames.
func splitFrames(t *testing.T, s []byte) [][]byte {
	t.Helper()
	g := newFrameGuard(defaultFrameLimits())
	var out [][]byte
	start := 0
	for i := range s {
		if err := g.scan(s[i : i+1]); err != nil {
			t.Fatal(err)
		}
		if !g.midFrame() {
			out = append(out, s[start:i+1])
			start = i + 1
		}
	}
	return out
}

// msgpack builders for hand-made frames.
func mpStr(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }

func mpHeader(b byte, n uint32) []byte { return binary.BigEndian.AppendUint32([]byte{b}, n) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// badFrames are frames the guard refuses, and why.
var badFrames = []struct {
	name  string
	frame []byte
	want  string
}{
	{"unknown RPC type", []byte{0x47, 0x45, 0x54, 0x20}, "unknown RPC type 0x47"},
	{"2^31 entries", cat([]byte{rpcAppendEntries, 0x82}, mpStr("Term"), []byte{0x01}, mpStr("Entries"), mpHeader(0xdd, 1<<31)),
		"AppendEntries: a container of 2147483648 elements (at most 65536)"},
	{"2^31 bytes of data", cat([]byte{rpcAppendEntries, 0x81}, mpStr("Entries"), []byte{0x91, 0x81}, mpStr("Data"), mpHeader(0xc6, 1<<31), []byte("xxxx")),
		"AppendEntries: a string of 2147483648 bytes (at most 34603008)"},
	{"2^31 long key", cat([]byte{rpcRequestVote, 0x81}, mpHeader(0xdb, 1<<31)), "RequestVote: a string of 2147483648 bytes"},
	{"2^31 map", cat([]byte{rpcTimeoutNow}, mpHeader(0xdf, 1<<31)), "TimeoutNow: a container of 2147483648 elements"},
	{"deep nesting", cat([]byte{rpcRequestPreVote}, bytes.Repeat([]byte{0x91}, 40)), "RequestPreVote: nested deeper than 16"},
	{"unused msgpack byte", []byte{rpcAppendEntries, 0x81, 0xc1}, "byte 0xc1 is not msgpack"},
	{"snapshot that is no map", []byte{rpcInstallSnapshot, 0x90}, "InstallSnapshot: the request is not a map"},
	{"snapshot that is a number", []byte{rpcInstallSnapshot, 0x30, 0x30}, "InstallSnapshot: the request is not a map (msgpack type 0x30)"},
	{"snapshot of negative size", cat([]byte{rpcInstallSnapshot, 0x81}, mpStr("Size"), []byte{0xff}), "InstallSnapshot: Size is -1, not a byte count"},
	{"snapshot size a string", cat([]byte{rpcInstallSnapshot, 0x81}, mpStr("Size"), mpStr("big")), "InstallSnapshot: Size is not an integer"},
	{"bytes after a snapshot", cat([]byte{rpcInstallSnapshot, 0x82}, mpStr("Term"), []byte{0x05}, mpStr("Size"), []byte{0x03}, []byte("abc"), []byte{rpcAppendEntries}),
		"data after a snapshot"},
}

// TestFrameGuardRefuses feeds the guard hand-made bad frames, whole and a
// byte at a time.
func TestFrameGuardRefuses(t *testing.T) {
	for _, tc := range badFrames {
		t.Run(tc.name, func(t *testing.T) {
			for _, step := range []int{len(tc.frame), 1} {
				g := newFrameGuard(defaultFrameLimits())
				var err error
				for p := tc.frame; len(p) > 0 && err == nil; p = p[min(step, len(p)):] {
					err = g.scan(p[:min(step, len(p))])
				}
				if !errors.Is(err, errFrameRefused) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("step %d: %v; want a refusal with %q", step, err, tc.want)
				}
			}
		})
	}
	t.Run("frame too large", func(t *testing.T) {
		lim := defaultFrameLimits()
		lim.frame = 1000
		g := newFrameGuard(lim)
		err := g.scan(cat([]byte{rpcAppendEntries, 0x81}, mpStr("Entries"), []byte{0x92, 0xc5, 0x02, 0x00}, make([]byte, 512), []byte{0xc5, 0x02, 0x00}, make([]byte, 512)))
		if !errors.Is(err, errFrameRefused) || !strings.Contains(err.Error(), "larger than 1000 bytes") {
			t.Fatalf("%v", err)
		}
	})
}

// FuzzFrameGuard: the guard never panics, and cutting its input into reads
// changes nothing: it refuses the same streams, after the same frames, and
// ends in the same state.
func FuzzFrameGuard(f *testing.F) {
	for _, tc := range badFrames {
		f.Add(tc.frame, uint8(3))
	}
	f.Add(cat([]byte{rpcAppendEntries, 0x82}, mpStr("Term"), []byte{0x01}, mpStr("Entries"), []byte{0x91, 0x82}, mpStr("Data"), []byte{0xc4, 0x02, 0x01, 0x02}, mpStr("Index"), []byte{0xcf, 0, 0, 0, 0, 0, 0, 0, 9}), uint8(1))
	f.Add(cat([]byte{rpcInstallSnapshot, 0x81}, mpStr("Size"), []byte{0x03}, []byte("abc")), uint8(2))
	f.Add(cat([]byte{rpcTimeoutNow, 0x80, rpcRequestVote, 0x81}, mpStr("Term"), []byte{0xd4, 0x01, 0x02}), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		whole := newFrameGuard(defaultFrameLimits())
		errWhole := whole.scan(data)
		cut := newFrameGuard(defaultFrameLimits())
		var errCut error
		n := max(int(step), 1)
		for p := data; len(p) > 0 && errCut == nil; p = p[min(n, len(p)):] {
			errCut = cut.scan(p[:min(n, len(p))])
		}
		if (errWhole == nil) != (errCut == nil) || errWhole != nil && errWhole.Error() != errCut.Error() {
			t.Fatalf("whole: %v; in reads of %d: %v", errWhole, n, errCut)
		}
		if errWhole == nil && (whole.state != cut.state || whole.done != cut.done || whole.n != cut.n || whole.depth != cut.depth || whole.left != cut.left) {
			t.Fatalf("whole ends in %s after %d frames, in reads of %d in %s after %d", whole.describe(), whole.done, n, cut.describe(), cut.done)
		}
		if errWhole != nil && !errors.Is(errWhole, errFrameRefused) {
			t.Fatalf("error %v is no refusal", errWhole)
		}
	})
}

// TestRaftPortRefusesBadFrames connects to the Raft ports of a TLS group as
// a peer with a valid certificate and sends what no node sends: random
// bytes, a truncated AppendEntries (closed, or left silent), and frames that
// declare more than any RPC holds. Each connection is dropped and logged,
// nothing changes, and the group still replicates writes.
func TestRaftPortRefusesBadFrames(t *testing.T) {
	ca := newTestCA(t, "site CA")
	streams, _ := sendRaftRPCs(t, nil)
	var append_ []byte // the largest AppendEntries frame Raft sent
	for _, s := range streams {
		for _, f := range splitFrames(t, s) {
			if f[0] == rpcAppendEntries && len(f) > len(append_) {
				append_ = f
			}
		}
	}
	if len(append_) < 1<<20 {
		t.Fatalf("largest AppendEntries frame: %d bytes", len(append_))
	}

	root := t.TempDir()
	logger, rec := newLogRecorder(t)
	n1 := openWith(t, tlsNodeOptions(t, filepath.Join(root, "n1"), "n1", "", ca, logger.With("node", "n1")))
	defer n1.Close()
	waitFor(t, "n1 to announce its API address", func() bool { return hasMemberKey(n1, "n1") })
	n2 := openWith(t, tlsNodeOptions(t, filepath.Join(root, "n2"), "n2", n1.APIAddr(), ca, logger.With("node", "n2")))
	defer n2.Close()
	nodes := []*DB{n1, n2}
	res := mustApply(t, n2, upserts(0, 20, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := n.WaitApplied(ctx, res.Index); err != nil {
			t.Fatal(err)
		}
	}
	var before []nodeState
	for _, n := range nodes {
		before = append(before, stateOf(t, n))
	}

	peer := ca.tlsConfig(t, "peer").Client // a valid certificate of the site's CA
	rng := rand.New(rand.NewPCG(14, 14))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	type badCase struct {
		name   string
		send   []byte
		silent bool     // keep the connection open after sending
		logs   []string // the node logs a line with one of these (and the peer's address)
	}
	cases := []badCase{
		{name: "random bytes", send: random, logs: []string{"crawldb: raft: refused a frame"}},
		{name: "truncated AppendEntries", send: append_[:len(append_)/2], logs: []string{"crawldb: raft: a peer closed its connection in the middle of a frame"}},
		{name: "truncated AppendEntries, then silence", send: append_[:len(append_)/3], silent: true, logs: []string{"crawldb: raft: dropped a stalled connection"}},
		{name: "a huge declared length, then silence", send: cat([]byte{rpcAppendEntries, 0x81}, mpStr("Leader"), mpHeader(0xc6, 1<<20), []byte("n1")), silent: true,
			logs: []string{"crawldb: raft: dropped a stalled connection"}},
	}
	for _, bf := range badFrames {
		cases = append(cases, badCase{name: bf.name, send: bf.frame, logs: []string{"crawldb: raft: refused a frame", bf.want}})
	}
	t.Run("peers", func(t *testing.T) {
		for _, tc := range cases {
			for _, n := range nodes {
				t.Run(tc.name+"/"+n.opts.NodeID, func(t *testing.T) {
					t.Parallel() // the silent ones wait out the stall timeout together
					conn, err := tls.Dial("tcp", n.RaftAddr(), clientFor(peer, n.RaftAddr()))
					if err != nil {
						t.Fatalf("handshake with a valid certificate: %v", err)
					}
					defer conn.Close()
					local := conn.LocalAddr().String()
					conn.SetDeadline(time.Now().Add(10 * time.Second))
					start := time.Now()
					if _, err := conn.Write(tc.send); err != nil && !refusedMidWrite(err) {
						t.Fatal(err)
					}
					if !tc.silent {
						conn.CloseWrite()
					}
					if b, err := io.ReadAll(conn); err == nil && len(b) > 0 || isTimeout(err) {
						t.Fatalf("the node answered %d bytes, err %v", len(b), err)
					}
					if tc.silent {
						if d := time.Since(start); d < fastTimeout/2 || d > fastTimeout+3*time.Second {
							t.Errorf("a silent peer was dropped after %v; the stall timeout is %v", d, fastTimeout)
						}
					}
					lines := rec.waitLogged(t, append([]string{"remote=" + local}, tc.logs...)...)
					if len(lines) != 1 {
						t.Errorf("logged %q, want one line", lines)
					}
				})
			}
		}
	})
	for i, n := range nodes {
		if after := stateOf(t, n); !sameState(before[i], after) {
			t.Fatalf("%s: state changed: %+v → %+v", n.opts.NodeID, before[i], after)
		}
	}
	// The group still replicates, and forwards over https.
	for _, n := range nodes {
		res := mustApply(t, n, upserts(100, 20, 1))
		for _, m := range nodes {
			if err := m.WaitApplied(ctx, res.Index); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range nodes {
		if c := n.Store().Counts(); c.URLs != 40 {
			t.Errorf("%s has %d URLs, want 40", n.opts.NodeID, c.URLs)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// refusedMidWrite reports whether a write failed because the node had
// already refused the frame and closed the connection (it reads a frame's
// head, not all of what a bad peer sends): the log line is the test's
// evidence then.
func refusedMidWrite(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand"
	randv2 "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// openT opens a store and registers its Close.
func openT(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quietLog
	}
	s, err := Open(dir, o)
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// mkLog builds a deterministic entry for index i.
func mkLog(i, term uint64) *raft.Log {
	return &raft.Log{
		Index:      i,
		Term:       term,
		Type:       raft.LogCommand,
		Data:       []byte(fmt.Sprintf("cmd-%d", i)),
		AppendedAt: time.Unix(1700000000+int64(i), int64(i)),
	}
}

func mkLogs(lo, hi, term uint64) []*raft.Log {
	var ls []*raft.Log
	for i := lo; i <= hi; i++ {
		ls = append(ls, mkLog(i, term))
	}
	return ls
}

// logsEqual compares two logs, time by instant.
func logsEqual(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && (a.Data == nil) == (b.Data == nil) &&
		bytes.Equal(a.Extensions, b.Extensions) && (a.Extensions == nil) == (b.Extensions == nil) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

func wantBounds(t *testing.T, s *Store, first, last uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	if err != nil {
		t.Fatalf("FirstIndex: %v", err)
	}
	l, err := s.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex: %v", err)
	}
	if f != first || l != last {
		t.Fatalf("bounds = (%d, %d), want (%d, %d)", f, l, first, last)
	}
}

func mustStore(t *testing.T, s *Store, logs ...*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs: %v", err)
	}
}

// ---------------------------------------------------------------------------
// Codec

func TestCodecRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte{0xAB}, 1<<20)
	tests := []struct {
		name string
		l    raft.Log
	}{
		{"zero-ish", raft.Log{Index: 1}},
		{"max", raft.Log{Index: math.MaxUint64, Term: math.MaxUint64, Type: 255}},
		{"command", raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte("set x=1")}},
		{"noop", raft.Log{Index: 3, Term: 2, Type: raft.LogNoop}},
		{"add-peer", raft.Log{Index: 4, Term: 2, Type: raft.LogAddPeerDeprecated, Data: []byte("peer")}},
		{"remove-peer", raft.Log{Index: 5, Term: 2, Type: raft.LogRemovePeerDeprecated, Data: []byte("peer")}},
		{"barrier", raft.Log{Index: 6, Term: 3, Type: raft.LogBarrier}},
		{"configuration", raft.Log{Index: 7, Term: 3, Type: raft.LogConfiguration, Data: []byte{1, 2, 3}}},
		{"extensions", raft.Log{Index: 8, Term: 3, Data: []byte("d"), Extensions: []byte("chunk-3-of-5")}},
		{"empty-not-nil", raft.Log{Index: 9, Data: []byte{}, Extensions: []byte{}}},
		{"big", raft.Log{Index: 10, Term: 4, Data: big, Extensions: big[:1000]}},
		{"appended-now", raft.Log{Index: 11, AppendedAt: time.Now()}},
		{"appended-utc-nanos", raft.Log{Index: 12, AppendedAt: time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC)}},
		{"appended-pre-1970", raft.Log{Index: 13, AppendedAt: time.Date(1901, 1, 1, 0, 0, 0, 1, time.UTC)}},
	}
	s := openT(t, "db", Options{FS: vfs.NewMem()})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := appendLog(nil, &tc.l)
			if len(enc) != encodedLen(&tc.l) {
				t.Fatalf("encodedLen = %d, encoded %d bytes", encodedLen(&tc.l), len(enc))
			}
			got := raft.Log{Index: 99, Data: []byte("stale"), Extensions: []byte("stale")}
			if err := decodeLog(tc.l.Index, enc, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !logsEqual(&got, &tc.l) {
				t.Fatalf("codec round trip:\n got %+v\nwant %+v", got, tc.l)
			}
			// Same through Pebble.
			mustStore(t, s, &tc.l)
			got = raft.Log{Data: []byte("stale")}
			if err := s.GetLog(tc.l.Index, &got); err != nil {
				t.Fatalf("GetLog: %v", err)
			}
			if !logsEqual(&got, &tc.l) {
				t.Fatalf("store round trip:\n got %+v\nwant %+v", got, tc.l)
			}
		})
	}
}

func TestDecodeDoesNotAlias(t *testing.T) {
	l := raft.Log{Index: 1, Data: []byte("ab"), Extensions: []byte("cd")}
	enc := appendLog(nil, &l)
	var got raft.Log
	if err := decodeLog(1, enc, &got); err != nil {
		t.Fatal(err)
	}
	clear(enc) // the source buffer (Pebble memory) goes away
	got.Data = append(got.Data, 'X')
	if string(got.Extensions) != "cd" {
		t.Fatalf("append to Data clobbered Extensions: %q", got.Extensions)
	}
}

func TestCorruptValue(t *testing.T) {
	good := appendLog(nil, &raft.Log{Index: 5, Term: 2, Data: []byte("hello"), AppendedAt: time.Unix(1, 2)})
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		v    []byte
		want string
	}{
		{"empty", nil, "truncated version"},
		{"bad-version", mod(func(b []byte) []byte { b[0] = 9; return b }), "unsupported encoding version 9"},
		{"truncated-mid-data", good[:8], "data length"},
		{"truncated-time", good[:len(good)-1], "appended-at"},
		{"trailing", append(append([]byte(nil), good...), 0), "1 trailing bytes"},
		{"wrong-index", appendLog(nil, &raft.Log{Index: 6}), "value holds index 6"},
		{"huge-length", []byte{1, 5, 2, 0, flagData, 0xff, 0xff, 0xff, 0xff, 0x0f}, "exceeds remaining"},
		{"bad-varint", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "bad varint for index"},
		{"unknown-flags", []byte{1, 5, 2, 0, 0x80, 0, 0}, "unknown flags"},
		{"nil-with-payload", []byte{1, 5, 2, 0, 0, 1, 'x', 0}, "flagged nil"},
		{"bad-nanos", append([]byte{1, 5, 2, 0, flagTime, 0, 0, 0}, binary.AppendUvarint(nil, uint64(time.Second))...), "nanoseconds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openT(t, "db", Options{FS: vfs.NewMem()})
			mustStore(t, s, mkLog(4, 1), mkLog(5, 1))
			var k [logKeyLen]byte
			putLogKey(&k, 5)
			if err := s.e.db.Set(k[:], tc.v, nil); err != nil {
				t.Fatal(err)
			}
			var l raft.Log
			err := s.GetLog(5, &l)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("GetLog = %v, want ErrCorrupt", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "raftlog: ") || !strings.Contains(msg, "log index 5") || !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q: want prefix \"raftlog: \", \"log index 5\" and %q", msg, tc.want)
			}
			if err := s.GetLog(4, &l); err != nil { // neighbours unaffected
				t.Fatalf("GetLog(4): %v", err)
			}
		})
	}
}

func FuzzDecodeLog(f *testing.F) {
	for _, l := range []raft.Log{
		{Index: 1},
		{Index: 7, Term: 3, Type: raft.LogConfiguration, Data: []byte("cfg"), Extensions: []byte{}, AppendedAt: time.Unix(-5, 999)},
		{Index: math.MaxUint64, Term: 1 << 40, Data: bytes.Repeat([]byte("x"), 300)},
	} {
		f.Add(l.Index, appendLog(nil, &l))
	}
	f.Add(uint64(0), []byte{})
	f.Add(uint64(3), []byte{1, 3, 0, 0, 7, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, idx uint64, v []byte) {
		var l1 raft.Log
		if err := decodeLog(idx, v, &l1); err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("log index %d", idx)) {
				t.Fatalf("error %q does not wrap ErrCorrupt and name index %d", err, idx)
			}
			return
		}
		// Anything accepted must re-encode to a canonical form that decodes
		// to the same entry.
		enc := appendLog(nil, &l1)
		if len(enc) != encodedLen(&l1) {
			t.Fatalf("encodedLen %d != %d", encodedLen(&l1), len(enc))
		}
		var l2 raft.Log
		if err := decodeLog(idx, enc, &l2); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !logsEqual(&l1, &l2) {
			t.Fatalf("round trip mismatch:\n%+v\n%+v", l1, l2)
		}
		if !bytes.Equal(appendLog(nil, &l2), enc) {
			t.Fatal("encoding not canonical")
		}
	})
}

// ---------------------------------------------------------------------------
// LogStore

// layout opens the stores a test drives: the one Store of Open, or group
// views of one Shared whose writes interleave.
type layout struct {
	name string
	// groups is how many Stores open returns.
	groups int
	open   func(dir string, o Options) (stores []*Store, closeAll func() error, err error)
}

// groupIDs are the groups of the shared layout: "a" and "ab" share a first
// byte, so a prefix without its length byte would mix them up.
var groupIDs = []string{"a", "ab", "b"}

var layouts = []layout{
	{name: "single", groups: 1, open: func(dir string, o Options) ([]*Store, func() error, error) {
		s, err := Open(dir, o)
		if err != nil {
			return nil, nil, err
		}
		return []*Store{s}, s.Close, nil
	}},
	{name: "shared", groups: len(groupIDs), open: func(dir string, o Options) ([]*Store, func() error, error) {
		sh, err := OpenShared(dir, o)
		if err != nil {
			return nil, nil, err
		}
		var out []*Store
		for _, id := range groupIDs {
			s, err := sh.Group(id)
			if err != nil {
				sh.Close()
				return nil, nil, err
			}
			out = append(out, s)
		}
		return out, sh.Close, nil
	}},
}

// TestLogStoreScenario runs raft-like steps on a store; in the shared
// layout, on two interleaved groups, while a third group holds a fixed log
// that no other group's writes or deletions may touch.
func TestLogStoreScenario(t *testing.T) {
	for _, lay := range layouts {
		t.Run(lay.name, func(t *testing.T) { testLogStoreScenario(t, lay) })
	}
}

func testLogStoreScenario(t *testing.T, lay layout) {
	type step struct {
		name        string
		do          func(t *testing.T, s *Store)
		reopen      bool
		first, last uint64
		present     []uint64
		absent      []uint64
	}
	del := func(lo, hi uint64) func(*testing.T, *Store) {
		return func(t *testing.T, s *Store) {
			if err := s.DeleteRange(lo, hi); err != nil {
				t.Fatalf("DeleteRange(%d, %d): %v", lo, hi, err)
			}
		}
	}
	store := func(ls ...*raft.Log) func(*testing.T, *Store) {
		return func(t *testing.T, s *Store) { mustStore(t, s, ls...) }
	}
	steps := []step{
		{name: "empty", do: func(*testing.T, *Store) {}, absent: []uint64{0, 1, math.MaxUint64}},
		{name: "single", do: func(t *testing.T, s *Store) {
			if err := s.StoreLog(mkLog(1, 1)); err != nil {
				t.Fatal(err)
			}
		}, first: 1, last: 1, present: []uint64{1}, absent: []uint64{2}},
		{name: "batch", do: store(mkLogs(2, 100, 1)...), first: 1, last: 100, present: []uint64{1, 50, 100}, absent: []uint64{101}},
		{name: "reopen", reopen: true, first: 1, last: 100, present: []uint64{1, 100}},
		{name: "delete-prefix", do: del(1, 50), first: 51, last: 100, present: []uint64{51}, absent: []uint64{1, 50}},
		{name: "delete-prefix-below-first", do: del(0, 55), first: 56, last: 100, absent: []uint64{55}},
		{name: "delete-suffix", do: del(91, 100), first: 56, last: 90, present: []uint64{90}, absent: []uint64{91, 100}},
		{name: "delete-suffix-beyond-last", do: del(90, math.MaxUint64), first: 56, last: 89, absent: []uint64{90}},
		{name: "re-append-new-term", do: store(mkLogs(90, 95, 2)...), first: 56, last: 95, present: []uint64{90, 95}},
		{name: "delete-middle", do: del(60, 70), first: 56, last: 95, present: []uint64{59, 71}, absent: []uint64{60, 65, 70}},
		{name: "delete-outside", do: del(1000, 2000), first: 56, last: 95},
		{name: "delete-inverted", do: del(80, 70), first: 56, last: 95, present: []uint64{75}},
		{name: "gap-append", do: store(mkLog(200, 3)), first: 56, last: 200, present: []uint64{200}, absent: []uint64{96, 199}},
		{name: "reopen-with-gaps", reopen: true, first: 56, last: 200, present: []uint64{56, 59, 71, 95, 200}, absent: []uint64{60, 70, 96}},
		{name: "delete-suffix-across-gap", do: del(150, 200), first: 56, last: 95},
		{name: "delete-prefix-across-hole", do: del(56, 65), first: 71, last: 95, absent: []uint64{59}},
		{name: "overwrite", do: store(&raft.Log{Index: 80, Term: 9, Type: raft.LogNoop}), first: 71, last: 95},
		{name: "store-below-first", do: store(mkLog(10, 1)), first: 10, last: 95, present: []uint64{10}},
		{name: "delete-all", do: del(1, math.MaxUint64), first: 0, last: 0, absent: []uint64{10, 71, 95}},
		{name: "reopen-empty", reopen: true, first: 0, last: 0},
		{name: "restart-after-empty", do: store(mkLogs(300, 310, 4)...), first: 300, last: 310},
		{name: "reopen-final", reopen: true, first: 300, last: 310, present: []uint64{300, 310}},
	}

	dir := filepath.Join(t.TempDir(), "raftlog")
	stores, closeAll, err := lay.open(dir, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closeAll() }()
	// In the shared layout the last group is the sentinel: a fixed log.
	driven := stores
	const sentinelTerm = 7
	if len(stores) > 1 {
		driven = stores[:len(stores)-1]
		mustStore(t, stores[len(stores)-1], mkLogs(1, 500, sentinelTerm)...)
	}
	terms := map[uint64]uint64{}
	for _, st := range steps {
		ok := t.Run(st.name, func(t *testing.T) {
			if st.reopen {
				if err := closeAll(); err != nil {
					t.Fatal(err)
				}
				if stores, closeAll, err = lay.open(dir, Options{Logger: quietLog}); err != nil {
					t.Fatal(err)
				}
				driven = stores[:max(1, len(stores)-1)]
			}
			for g, s := range driven {
				if st.do != nil {
					st.do(t, s)
				}
				wantBounds(t, s, st.first, st.last)
				for _, i := range st.present {
					var l raft.Log
					if err := s.GetLog(i, &l); err != nil {
						t.Fatalf("group %d: GetLog(%d): %v", g, i, err)
					}
					if l.Index != i {
						t.Fatalf("group %d: GetLog(%d) returned index %d", g, i, l.Index)
					}
					terms[i] = l.Term
				}
				for _, i := range st.absent {
					var l raft.Log
					if err := s.GetLog(i, &l); err != raft.ErrLogNotFound {
						t.Fatalf("group %d: GetLog(%d) = %v, want raft.ErrLogNotFound", g, i, err)
					}
				}
			}
			if len(stores) > 1 {
				sentinel := stores[len(stores)-1]
				wantBounds(t, sentinel, 1, 500)
				for _, i := range []uint64{1, 10, 56, 90, 95, 200, 300, 500} {
					var l raft.Log
					if err := sentinel.GetLog(i, &l); err != nil || !logsEqual(&l, mkLog(i, sentinelTerm)) {
						t.Fatalf("sentinel group: GetLog(%d) = %+v, %v; want its own entry of term %d", i, l, err, sentinelTerm)
					}
				}
			}
		})
		if !ok {
			t.FailNow()
		}
	}
	if terms[90] != 2 || terms[59] != 1 {
		t.Errorf("terms after re-append: 90→%d 59→%d, want 2 and 1", terms[90], terms[59])
	}
}

// TestLogStoreModel drives random raft-like operations against the store
// and an in-memory model, reopening now and then.
// In the shared layout every operation goes to a group picked at random,
// each group with a model of its own.
func TestLogStoreModel(t *testing.T) {
	for _, lay := range layouts {
		t.Run(lay.name, func(t *testing.T) { testLogStoreModel(t, lay) })
	}
}

func testLogStoreModel(t *testing.T, lay layout) {
	rng := rand.New(rand.NewSource(1))
	fs := vfs.NewMem()
	stores, closeAll, err := lay.open("db", Options{FS: fs, NoSync: true, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closeAll() }()
	models := make([]map[uint64]*raft.Log, len(stores))
	terms := make([]uint64, len(stores))
	for g := range models {
		models[g], terms[g] = map[uint64]*raft.Log{}, 1
	}
	var model map[uint64]*raft.Log
	bounds := func() (lo, hi uint64) {
		for i := range model {
			if lo == 0 || i < lo {
				lo = i
			}
			hi = max(hi, i)
		}
		return lo, hi
	}
	for op := 0; op < 600*len(stores); op++ {
		g := rng.Intn(len(stores))
		s, term := stores[g], &terms[g]
		model = models[g]
		lo, hi := bounds()
		switch r := rng.Intn(10); {
		case r < 5: // append a batch, sometimes after a gap
			start := hi + 1
			if rng.Intn(8) == 0 {
				start += uint64(rng.Intn(20))
			}
			n := uint64(1 + rng.Intn(64))
			ls := mkLogs(start, start+n-1, *term)
			mustStore(t, s, ls...)
			for _, l := range ls {
				model[l.Index] = l
			}
		case r < 7 && hi > 0: // conflict: truncate a suffix, new term
			from := lo + uint64(rng.Int63n(int64(hi-lo+1)))
			if err := s.DeleteRange(from, hi); err != nil {
				t.Fatal(err)
			}
			for i := from; i <= hi; i++ {
				delete(model, i)
			}
			(*term)++
		case r < 9 && hi > 0: // compaction: delete a prefix
			to := lo + uint64(rng.Int63n(int64(hi-lo+1)))
			if err := s.DeleteRange(0, to); err != nil {
				t.Fatal(err)
			}
			for i := range model {
				if i <= to {
					delete(model, i)
				}
			}
		default:
			if err := closeAll(); err != nil {
				t.Fatal(err)
			}
			if stores, closeAll, err = lay.open("db", Options{FS: fs, NoSync: true, Logger: quietLog}); err != nil {
				t.Fatal(err)
			}
		}
		for g, s := range stores {
			model = models[g]
			lo, hi = bounds()
			wantBounds(t, s, lo, hi)
			if op%50 != 0 && op != 600*len(stores)-1 {
				continue
			}
			for i := max(lo, 1) - 1; i <= hi+1; i++ {
				var got raft.Log
				err := s.GetLog(i, &got)
				want, ok := model[i]
				switch {
				case !ok && err != raft.ErrLogNotFound:
					t.Fatalf("op %d, group %d: GetLog(%d) = %v, want ErrLogNotFound", op, g, i, err)
				case ok && err != nil:
					t.Fatalf("op %d, group %d: GetLog(%d): %v", op, g, i, err)
				case ok && !logsEqual(&got, want):
					t.Fatalf("op %d, group %d: GetLog(%d) = %+v, want %+v", op, g, i, got, want)
				}
			}
		}
	}
}

func TestStoreLogsValidation(t *testing.T) {
	s := openT(t, "db", Options{FS: vfs.NewMem()})
	if err := s.StoreLogs(nil); err != nil {
		t.Fatalf("StoreLogs(nil) = %v", err)
	}
	err := s.StoreLogs([]*raft.Log{mkLog(1, 1), {Index: 0}})
	if !errors.Is(err, ErrInvalidIndex) {
		t.Fatalf("StoreLogs with index 0 = %v, want ErrInvalidIndex", err)
	}
	wantBounds(t, s, 0, 0)
	var l raft.Log
	if err := s.GetLog(1, &l); err != raft.ErrLogNotFound {
		t.Fatalf("partial batch written: GetLog(1) = %v", err)
	}
}

func TestNotMonotonic(t *testing.T) {
	var ls raft.LogStore = &Store{}
	if _, ok := ls.(raft.MonotonicLogStore); ok {
		t.Fatal("Store implements raft.MonotonicLogStore; the package doc says it does not")
	}
}

// ---------------------------------------------------------------------------
// StableStore

func TestStableStore(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})

	// Missing keys: what raft's NewRaft/HasExistingState/requestVote accept.
	v, err := s.Get([]byte("missing"))
	if v != nil || err == nil || err.Error() != "not found" || !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("Get(missing) = %q, %v; want nil, \"not found\"", v, err)
	}
	n, err := s.GetUint64([]byte("missing"))
	if n != 0 || err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64(missing) = %d, %v; want 0, \"not found\"", n, err)
	}
	if has, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore()); err != nil || has {
		t.Fatalf("HasExistingState on a fresh store = %v, %v", has, err)
	}

	var logKey [logKeyLen]byte
	putLogKey(&logKey, 7)
	kvs := []struct {
		key, val []byte
	}{
		{[]byte("LastVoteCand"), []byte("node-1")},
		{[]byte("empty"), []byte{}},
		{[]byte{}, []byte("empty key")},
		{[]byte{0, 0xff}, bytes.Repeat([]byte{7}, 4096)},
		{logKey[:], []byte("looks like a log key")}, // must not become log 7
	}
	ints := []struct {
		key []byte
		val uint64
	}{
		{[]byte("CurrentTerm"), 42},
		{[]byte("LastVoteTerm"), 0},
		{[]byte("max"), math.MaxUint64},
	}
	for _, kv := range kvs {
		if err := s.Set(kv.key, kv.val); err != nil {
			t.Fatalf("Set(%q): %v", kv.key, err)
		}
	}
	for _, kv := range ints {
		if err := s.SetUint64(kv.key, kv.val); err != nil {
			t.Fatalf("SetUint64(%q): %v", kv.key, err)
		}
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 43); err != nil { // overwrite
		t.Fatal(err)
	}
	ints[0].val = 43

	check := func(t *testing.T, s *Store) {
		for _, kv := range kvs {
			got, err := s.Get(kv.key)
			if err != nil || !bytes.Equal(got, kv.val) || got == nil {
				t.Errorf("Get(%q) = %q, %v; want %q", kv.key, got, err, kv.val)
			}
		}
		for _, kv := range ints {
			got, err := s.GetUint64(kv.key)
			if err != nil || got != kv.val {
				t.Errorf("GetUint64(%q) = %d, %v; want %d", kv.key, got, err, kv.val)
			}
		}
		if _, err := s.GetUint64([]byte("LastVoteCand")); !errors.Is(err, ErrCorrupt) {
			t.Errorf("GetUint64 of a 6-byte value = %v, want ErrCorrupt", err)
		}
		wantBounds(t, s, 0, 0)
		if has, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore()); err != nil || !has {
			t.Errorf("HasExistingState with CurrentTerm set = %v, %v", has, err)
		}
	}
	t.Run("live", func(t *testing.T) { check(t, s) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("reopened", func(t *testing.T) { check(t, openT(t, dir, Options{})) })
}

// ---------------------------------------------------------------------------
// Durability and failures

// TestDurabilityCrashClone writes synced entries, takes a crash image of the
// filesystem (only synced data survives) while the DB is still open, and
// opens the image. The NoSync case is the control showing the image really
// drops unsynced writes.
func TestDurabilityCrashClone(t *testing.T) {
	const n = 200
	tests := []struct {
		name     string
		noSync   bool
		unsynced int // CrashCloneCfg.UnsyncedDataPercent
		wantAll  bool
	}{
		{"sync/only-synced-data", false, 0, true},
		{"sync/half-unsynced-data", false, 50, true},
		{"sync/all-unsynced-data", false, 100, true},
		{"nosync/control", true, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			s := openT(t, "db", Options{FS: fs, NoSync: tc.noSync})
			for i := uint64(1); i <= n; i += 10 {
				mustStore(t, s, mkLogs(i, i+9, 1)...)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteRange(1, 20); err != nil {
				t.Fatal(err)
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: tc.unsynced, RNG: randv2.New(randv2.NewPCG(3, 3))})
			_ = s.Close() // background work may finish, but not in the clone

			r := openT(t, "db", Options{FS: crashed})
			first, _ := r.FirstIndex()
			last, _ := r.LastIndex()
			if !tc.wantAll {
				if last == n {
					t.Fatalf("control: unsynced writes survived the crash image (last=%d); the durability subtests prove nothing", last)
				}
				return
			}
			if first != 21 || last != n {
				t.Fatalf("after crash: bounds (%d, %d), want (21, %d)", first, last, n)
			}
			for i := uint64(21); i <= n; i++ {
				var l raft.Log
				if err := r.GetLog(i, &l); err != nil || !logsEqual(&l, mkLog(i, 1)) {
					t.Fatalf("after crash: GetLog(%d) = %+v, %v", i, l, err)
				}
			}
			if term, err := r.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
				t.Fatalf("after crash: CurrentTerm = %d, %v", term, err)
			}
		})
	}
}

// TestWriteErrorAllOrNothing injects WAL write or sync failures and checks
// the write reports an error, the store refuses further use, and after
// reopening (both the plain filesystem and a crash image of it) the failed
// batch is present entirely or not at all while earlier writes survive.
func TestWriteErrorAllOrNothing(t *testing.T) {
	isWAL := func(p string) bool { return strings.HasSuffix(p, ".log") }
	kinds := map[string][]errorfs.OpKind{
		"wal-write": {errorfs.OpFileWrite, errorfs.OpFileWriteAt},
		"wal-sync":  {errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo},
	}
	ops := []struct {
		name  string
		write func(s *Store) error
		// check reports how much of the failed write is visible: 0 none,
		// 1 all, -1 partial.
		check func(t *testing.T, s *Store) int
	}{
		{
			name:  "StoreLogs",
			write: func(s *Store) error { return s.StoreLogs(mkLogs(11, 74, 2)) },
			check: func(t *testing.T, s *Store) int {
				found := 0
				for i := uint64(11); i <= 74; i++ {
					var l raft.Log
					switch err := s.GetLog(i, &l); {
					case err == nil:
						found++
					case err != raft.ErrLogNotFound:
						t.Fatalf("GetLog(%d): %v", i, err)
					}
				}
				last, _ := s.LastIndex()
				switch {
				case found == 0 && last == 10:
					return 0
				case found == 64 && last == 74:
					return 1
				}
				t.Logf("found %d of 64, last %d", found, last)
				return -1
			},
		},
		{
			name:  "DeleteRange",
			write: func(s *Store) error { return s.DeleteRange(1, 5) },
			check: func(t *testing.T, s *Store) int {
				first, _ := s.FirstIndex()
				switch first {
				case 1:
					return 0
				case 6:
					return 1
				}
				return -1
			},
		},
		{
			name:  "SetUint64",
			write: func(s *Store) error { return s.SetUint64([]byte("CurrentTerm"), 2) },
			check: func(t *testing.T, s *Store) int {
				v, err := s.GetUint64([]byte("CurrentTerm"))
				if err != nil {
					t.Fatal(err)
				}
				return int(v) - 1
			},
		},
	}
	for kindName, kindList := range kinds {
		for _, op := range ops {
			t.Run(kindName+"/"+op.name, func(t *testing.T) {
				mem := vfs.NewCrashableMem()
				toggle := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(o errorfs.Op) error {
					for _, k := range kindList {
						if o.Kind == k && isWAL(o.Path) {
							return errorfs.ErrInjected
						}
					}
					return nil
				})}
				counter := &errorfs.Counter{Injector: toggle}
				s, err := Open("db", Options{FS: errorfs.Wrap(mem, counter), Logger: quietLog})
				if err != nil {
					t.Fatal(err)
				}
				mustStore(t, s, mkLogs(1, 10, 1)...)
				if err := s.SetUint64([]byte("CurrentTerm"), 1); err != nil {
					t.Fatal(err)
				}

				toggle.On()
				err = op.write(s)
				if err == nil {
					t.Fatalf("%s succeeded with failing WAL (%d injected errors)", op.name, counter.Load())
				}
				if !strings.HasPrefix(err.Error(), "raftlog: ") || !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "injected error") {
					t.Fatalf("%s error = %q; want \"raftlog: \" prefix, ErrFailed and the injected cause", op.name, err)
				}
				// The store is disabled until reopened.
				if err := s.StoreLog(mkLog(100, 2)); !errors.Is(err, ErrFailed) {
					t.Fatalf("StoreLog after failure = %v, want ErrFailed", err)
				}
				var l raft.Log
				if err := s.GetLog(1, &l); !errors.Is(err, ErrFailed) {
					t.Fatalf("GetLog after failure = %v, want ErrFailed", err)
				}
				if _, err := s.LastIndex(); !errors.Is(err, ErrFailed) {
					t.Fatalf("LastIndex after failure = %v, want ErrFailed", err)
				}

				crashed := mem.CrashClone(vfs.CrashCloneCfg{})
				toggle.Off()
				_ = s.Close() // may report the WAL error; must not hang or panic
				if err := s.Close(); err != nil {
					t.Fatalf("second Close = %v", err)
				}

				for name, fs := range map[string]vfs.FS{"after-close": mem, "crash-image": crashed} {
					r, err := Open("db", Options{FS: fs, Logger: quietLog})
					if err != nil {
						t.Fatalf("%s: reopen: %v", name, err)
					}
					for i := uint64(6); i <= 10; i++ {
						if err := r.GetLog(i, &l); err != nil {
							t.Errorf("%s: earlier synced log %d lost: %v", name, i, err)
						}
					}
					switch got := op.check(t, r); got {
					case -1:
						t.Errorf("%s: failed %s is partially applied", name, op.name)
					default:
						t.Logf("%s: failed %s present=%v", name, op.name, got == 1)
					}
					if err := r.Close(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

func TestOpenError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(file, Options{Logger: quietLog})
	if err == nil || !strings.HasPrefix(err.Error(), "raftlog: ") || !strings.Contains(err.Error(), file) {
		t.Fatalf("Open(file) = %v; want a \"raftlog: \" error naming %s", err, file)
	}
}

func TestCloseIdempotent(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	mustStore(t, s, mkLog(1, 1))
	for i := 0; i < 3; i++ {
		if err := s.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	var l raft.Log
	checks := map[string]error{
		"FirstIndex": func() error { _, err := s.FirstIndex(); return err }(),
		"LastIndex":  func() error { _, err := s.LastIndex(); return err }(),
		"GetLog":     s.GetLog(1, &l),
		"StoreLog":   s.StoreLog(mkLog(2, 1)),
		"Delete":     s.DeleteRange(1, 1),
		"Set":        s.Set([]byte("k"), []byte("v")),
		"Get":        func() error { _, err := s.Get([]byte("k")); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// TestConcurrentUseAndClose runs readers and a writer against Close; run
// with -race.
func TestConcurrentUseAndClose(t *testing.T) {
	s, err := Open("db", Options{FS: vfs.NewMem(), NoSync: true, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	mustStore(t, s, mkLogs(1, 10, 1)...)
	var wg sync.WaitGroup
	var stop atomic.Bool
	fail := make(chan error, 8)
	okErr := func(err error) bool { return err == nil || errors.Is(err, ErrClosed) }
	wg.Add(1)
	go func() { // writer: append and compact like raft
		defer wg.Done()
		for i := uint64(11); !stop.Load(); i++ {
			if err := s.StoreLog(mkLog(i, 1)); !okErr(err) {
				fail <- err
				return
			}
			if i%16 == 0 {
				if err := s.DeleteRange(0, i-8); !okErr(err) {
					fail <- err
					return
				}
			}
		}
	}()
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				first, err1 := s.FirstIndex()
				last, err2 := s.LastIndex()
				if !okErr(err1) || !okErr(err2) {
					fail <- errors.Join(err1, err2)
					return
				}
				var l raft.Log
				err := s.GetLog(last, &l)
				if !okErr(err) && err != raft.ErrLogNotFound {
					fail <- err
					return
				}
				if err == nil && l.Index != last {
					fail <- fmt.Errorf("GetLog(%d) returned %d", last, l.Index)
					return
				}
				_ = first
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Error(err)
	}
}

func TestStoreLogsAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	s := openT(t, "db", Options{FS: vfs.NewMem(), NoSync: true})
	logs := mkLogs(1, 64, 1)
	next := uint64(1)
	allocs := testing.AllocsPerRun(100, func() {
		for _, l := range logs {
			l.Index = next
			next++
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("StoreLogs(64 entries): %.1f allocs/op", allocs)
	if allocs > 16 {
		t.Errorf("StoreLogs allocates %.1f times per batch of 64; want a handful", allocs)
	}
}

// ---------------------------------------------------------------------------
// Real raft

type countFSM struct {
	mu    sync.Mutex
	count uint64
	bad   error
}

func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := fmt.Sprintf("inc-%d", f.count+1); string(l.Data) != want && f.bad == nil {
		f.bad = fmt.Errorf("applied %q at count %d, want %q", l.Data, f.count, want)
	}
	f.count++
	return f.count
}

func (f *countFSM) get() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count, f.bad
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	n, _ := f.get()
	return countSnap(n), nil
}

func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [8]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	f.count = binary.BigEndian.Uint64(b[:])
	f.mu.Unlock()
	return nil
}

type countSnap uint64

func (c countSnap) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, uint64(c))); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (countSnap) Release() {}

func TestRaftSingleNode(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const n = 1000
	logDir := filepath.Join(t.TempDir(), "raft-log")
	snaps := raft.NewInmemSnapshotStore()

	start := func(t *testing.T, bootstrap bool) (*raft.Raft, *Store, *countFSM) {
		t.Helper()
		store, err := Open(logDir, Options{Logger: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		conf := raft.DefaultConfig()
		conf.LocalID = "n1"
		conf.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard})
		conf.HeartbeatTimeout = 50 * time.Millisecond
		conf.ElectionTimeout = 50 * time.Millisecond
		conf.LeaderLeaseTimeout = 50 * time.Millisecond
		conf.CommitTimeout = 5 * time.Millisecond
		conf.SnapshotThreshold = 1 << 20 // replay from the log, not a snapshot
		addr, trans := raft.NewInmemTransport("n1")
		fsm := &countFSM{}
		if bootstrap {
			has, err := raft.HasExistingState(store, store, snaps)
			if err != nil || has {
				t.Fatalf("HasExistingState = %v, %v on a fresh store", has, err)
			}
			cfg := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}
			if err := raft.BootstrapCluster(conf, store, store, snaps, trans, cfg); err != nil {
				t.Fatal(err)
			}
		}
		r, err := raft.NewRaft(conf, fsm, store, store, snaps, trans)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for r.State() != raft.Leader {
			if time.Now().After(deadline) {
				t.Fatal("no leader after 10s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		return r, store, fsm
	}
	stop := func(t *testing.T, r *raft.Raft, store *Store) {
		t.Helper()
		if err := r.Shutdown().Error(); err != nil {
			t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}

	r, store, fsm := start(t, true)
	futures := make([]raft.ApplyFuture, 0, n)
	for i := 1; i <= n; i++ {
		futures = append(futures, r.Apply([]byte(fmt.Sprintf("inc-%d", i)), 5*time.Second))
	}
	for i, f := range futures {
		if err := f.Error(); err != nil {
			t.Fatalf("apply %d: %v", i+1, err)
		}
	}
	if got, err := fsm.get(); got != n || err != nil {
		t.Fatalf("FSM count = %d, %v; want %d", got, err, n)
	}
	last1, _ := store.LastIndex()
	if last1 < n {
		t.Fatalf("LastIndex = %d after %d applies", last1, n)
	}
	stop(t, r, store)

	// Reopen: the persisted LastIndex and term are there before raft starts.
	pre, err := Open(logDir, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := pre.LastIndex(); got != last1 {
		t.Fatalf("LastIndex after reopen = %d, want %d", got, last1)
	}
	if term, err := pre.GetUint64([]byte("CurrentTerm")); err != nil || term == 0 {
		t.Fatalf("CurrentTerm after reopen = %d, %v", term, err)
	}
	if err := pre.Close(); err != nil {
		t.Fatal(err)
	}

	r, store, fsm = start(t, false)
	defer stop(t, r, store)
	if err := r.Barrier(10 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if got, err := fsm.get(); got != n || err != nil {
		t.Fatalf("FSM after restart replayed %d commands (%v), want %d", got, err, n)
	}
	if last2, _ := store.LastIndex(); last2 <= last1 {
		t.Fatalf("LastIndex after restart = %d, want > %d (new leader entry)", last2, last1)
	}
}

// ---------------------------------------------------------------------------
// Benchmarks

func BenchmarkStoreLogs(b *testing.B) {
	const (
		batch   = 64
		entry   = 16 << 10
		compact = 256 // delete the log prefix every this many batches, like raft
	)
	for _, noSync := range []bool{false, true} {
		name := "sync"
		if noSync {
			name = "nosync"
		}
		b.Run(name, func(b *testing.B) {
			s := openT(b, b.TempDir(), Options{NoSync: noSync})
			data := bytes.Repeat([]byte("0123456789abcdef"), entry/16)
			logs := make([]*raft.Log, batch)
			for i := range logs {
				logs[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
			}
			b.SetBytes(batch * entry)
			b.ReportAllocs()
			next := uint64(1)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, l := range logs {
					l.Index = next
					next++
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
				if i%compact == compact-1 {
					b.StopTimer()
					if err := s.DeleteRange(0, next-1-batch*16); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// TestSharedGroups: a Shared lists the groups with keys, keeps their keys
// apart across a reopen, refuses a second view of a group and the deletion
// of an open one, and deletes a closed group's keys and nothing else.
func TestSharedGroups(t *testing.T) {
	dir := t.TempDir()
	sh, err := OpenShared(dir, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sh.Close() }()
	ids := []string{"s1", "s10", "meta"}
	for n, id := range ids {
		s, err := sh.Group(id)
		if err != nil {
			t.Fatal(err)
		}
		mustStore(t, s, mkLogs(1, uint64(10*(n+1)), uint64(n+1))...)
		if err := s.SetUint64([]byte("CurrentTerm"), uint64(n+1)); err != nil {
			t.Fatal(err)
		}
		if _, err := sh.Group(id); err == nil || !strings.Contains(err.Error(), "already open") {
			t.Fatalf("second Group(%q) = %v, want an already-open error", id, err)
		}
		if err := sh.DeleteGroup(id); err == nil || !strings.Contains(err.Error(), "close it first") {
			t.Fatalf("DeleteGroup(%q) of an open group = %v, want a refusal", id, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxGroupIDLen+1)} {
		if _, err := sh.Group(bad); err == nil {
			t.Errorf("Group(%d bytes) = nil error, want a refusal", len(bad))
		}
	}
	if err := sh.Close(); err != nil {
		t.Fatal(err)
	}
	if sh, err = OpenShared(dir, Options{Logger: quietLog}); err != nil {
		t.Fatal(err)
	}
	got, err := sh.Groups()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s1", "s10", "meta"}; !slicesEqual(got, want) { // by length, then bytes
		t.Fatalf("Groups() = %q, want %q", got, want)
	}
	if err := sh.DeleteGroup("s1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := sh.Groups(); !slicesEqual(got, []string{"s10", "meta"}) {
		t.Fatalf("Groups() after deleting s1 = %q", got)
	}
	for n, id := range ids {
		s, err := sh.Group(id)
		if err != nil {
			t.Fatal(err)
		}
		term, err := s.GetUint64([]byte("CurrentTerm"))
		if id == "s1" {
			wantBounds(t, s, 0, 0)
			if err == nil {
				t.Errorf("deleted group s1 still has CurrentTerm %d", term)
			}
			continue
		}
		wantBounds(t, s, 1, uint64(10*(n+1)))
		if err != nil || term != uint64(n+1) {
			t.Errorf("group %s: CurrentTerm = %d, %v; want %d", id, term, err, n+1)
		}
		var l raft.Log
		if err := s.GetLog(10, &l); err != nil || l.Term != uint64(n+1) {
			t.Errorf("group %s: GetLog(10) term %d, %v; want %d", id, l.Term, err, n+1)
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// BenchmarkSharedStoreLogs: synced StoreLogs of one entry by several groups
// of one Shared at once (each group its own writer, as each Raft group is),
// reporting the WAL fsyncs per commit: below 1 when the groups' commits
// share Pebble's fsyncs.
func BenchmarkSharedStoreLogs(b *testing.B) {
	for _, groups := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			var syncs atomic.Int64
			fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(o errorfs.Op) error {
				if o.Kind == errorfs.OpFileSync || o.Kind == errorfs.OpFileSyncData {
					syncs.Add(1)
				}
				return nil
			}))
			sh, err := OpenShared(b.TempDir(), Options{FS: fs, Logger: quietLog})
			if err != nil {
				b.Fatal(err)
			}
			defer sh.Close()
			stores := make([]*Store, groups)
			for g := range stores {
				if stores[g], err = sh.Group(fmt.Sprintf("g%d", g)); err != nil {
					b.Fatal(err)
				}
			}
			per := max(1, b.N/groups)
			b.ResetTimer()
			before := syncs.Load()
			var wg sync.WaitGroup
			for _, s := range stores {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 1; i <= per; i++ {
						if err := s.StoreLogs([]*raft.Log{mkLog(uint64(i), 1)}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(syncs.Load()-before)/float64(per*groups), "fsyncs/commit")
		})
	}
}

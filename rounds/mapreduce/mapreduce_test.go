package mapreduce

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// stat is the test value: a sum, a count and a maximum.
type stat struct {
	Sum int64
	N   uint32
	Max int64
}

func combineStat(a, b stat) stat {
	return stat{Sum: a.Sum + b.Sum, N: a.N + b.N, Max: max(a.Max, b.Max)}
}

// statCodec encodes a stat in 20 bytes.
type statCodec struct{}

func (statCodec) Append(dst []byte, v stat) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(v.Sum))
	dst = binary.LittleEndian.AppendUint32(dst, v.N)
	return binary.LittleEndian.AppendUint64(dst, uint64(v.Max))
}

var errBadValue = errors.New("bad stat encoding")

func (statCodec) Decode(b []byte) (stat, error) {
	if len(b) != 20 {
		return stat{}, fmt.Errorf("%w: %d bytes", errBadValue, len(b))
	}
	return stat{
		Sum: int64(binary.LittleEndian.Uint64(b)),
		N:   binary.LittleEndian.Uint32(b[8:]),
		Max: int64(binary.LittleEndian.Uint64(b[12:])),
	}, nil
}

// keyPool returns n distinct random keys of 0..40 bytes (any byte values).
func keyPool(rng *rand.Rand, n int) [][]byte {
	seen := make(map[string]bool, n)
	var keys [][]byte
	for len(keys) < n {
		k := make([]byte, rng.IntN(41))
		for i := range k {
			k[i] = byte(rng.IntN(256))
		}
		if !seen[string(k)] {
			seen[string(k)] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// emitSeq calls emit for emitter g's deterministic sequence of pairs.
func emitSeq(g, emits int, keys [][]byte, emit func(k []byte, v stat) error) error {
	rng := rand.New(rand.NewPCG(uint64(g), 99))
	for range emits {
		k := keys[rng.IntN(len(keys))]
		x := rng.Int64N(1000) - 500
		if err := emit(k, stat{Sum: x, N: 1, Max: x}); err != nil {
			return err
		}
	}
	return nil
}

type kv struct {
	key string
	v   stat
}

func newStatShuffle(t testing.TB, o Options[stat]) *Shuffle[stat] {
	t.Helper()
	o.Combine = combineStat
	if o.Codec == nil {
		o.Codec = statCodec{}
	}
	s, err := NewShuffle(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestShuffleMatchesReference emits random pairs from many goroutines and
// checks Reduce against a plain map: every key once, in its partition,
// in ascending order, with the right combined value.
func TestShuffleMatchesReference(t *testing.T) {
	tests := []struct {
		name       string
		partitions int
		budget     int64
		emitters   int
		emits      int // per emitter
		keys       int
		workers    int
		spills     bool
	}{
		{name: "memory", emitters: 8, emits: 3000, keys: 5000, workers: 2},
		{name: "memory one partition", partitions: 1, emitters: 4, emits: 2000, keys: 500, workers: 3},
		{name: "spill tiny budget", budget: 16 << 10, emitters: 8, emits: 2000, keys: 3000, workers: 2, spills: true},
		{name: "spill one partition", partitions: 1, budget: 16 << 10, emitters: 4, emits: 3000, keys: 2000, workers: 1, spills: true},
		{name: "spill many partitions", partitions: 64, budget: 64 << 10, emitters: 6, emits: 3000, keys: 4000, workers: 4, spills: true},
		{name: "few keys", partitions: 8, emitters: 3, emits: 100, keys: 3, workers: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys := keyPool(rand.New(rand.NewPCG(7, uint64(tc.keys))), tc.keys)
			ref := make(map[string]stat)
			for g := range tc.emitters {
				_ = emitSeq(g, tc.emits, keys, func(k []byte, v stat) error {
					if old, ok := ref[string(k)]; ok {
						v = combineStat(old, v)
					}
					ref[string(k)] = v
					return nil
				})
			}

			dir := filepath.Join(t.TempDir(), "spill")
			s := newStatShuffle(t, Options[stat]{Partitions: tc.partitions, MemoryBudget: tc.budget, TempDir: dir})
			emitters := make([]int, tc.emitters)
			for i := range emitters {
				emitters[i] = i
			}
			err := Map(context.Background(), tc.emitters, emitters, func(_ context.Context, g int) error {
				return emitSeq(g, tc.emits, keys, s.Emit)
			})
			if err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			t.Logf("stats %+v", st)
			if tc.spills != (st.Runs > 0) {
				t.Fatalf("spilled %d runs; want spills: %v", st.Runs, tc.spills)
			}
			if !tc.spills && s.Keys() != int64(len(ref)) || tc.spills && s.Keys() < int64(len(ref)) {
				t.Fatalf("Keys() = %d, reference has %d", s.Keys(), len(ref))
			}

			nparts := cmpOr(tc.partitions, DefaultPartitions)
			got := make([][]kv, nparts)
			inFlight := make([]atomic.Int32, nparts)
			err = s.Reduce(context.Background(), tc.workers, func(part int, key []byte, v stat) error {
				if inFlight[part].Add(1) != 1 {
					t.Errorf("partition %d reduced by two goroutines at once", part)
				}
				defer inFlight[part].Add(-1)
				got[part] = append(got[part], kv{string(key), v})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for part, kvs := range got {
				for i, e := range kvs {
					if i > 0 && kvs[i-1].key >= e.key {
						t.Fatalf("partition %d: key %q after %q", part, e.key, kvs[i-1].key)
					}
					if p := s.Partition([]byte(e.key)); p != part {
						t.Fatalf("key %q reduced in partition %d, Partition says %d", e.key, part, p)
					}
					want, ok := ref[e.key]
					if !ok {
						t.Fatalf("key %q was never emitted", e.key)
					}
					if e.v != want {
						t.Fatalf("key %q: got %+v, want %+v", e.key, e.v, want)
					}
				}
				total += len(kvs)
			}
			if total != len(ref) {
				t.Fatalf("reduced %d keys, want %d", total, len(ref))
			}
			if err := s.Emit([]byte("late"), stat{}); !errors.Is(err, ErrSpent) {
				t.Fatalf("Emit after Reduce: %v", err)
			}
			if err := s.Reduce(context.Background(), 1, nil); !errors.Is(err, ErrSpent) {
				t.Fatalf("second Reduce: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("spill directory not empty after Close: %d entries", len(ents))
			}
		})
	}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// TestCombineOrder checks that a key's values are combined in emit order
// across spills when one goroutine emits: runs first, memory last.
func TestCombineOrder(t *testing.T) {
	s, err := NewShuffle(Options[string]{
		Partitions:   1,
		MemoryBudget: 1, // every new key spills
		TempDir:      t.TempDir(),
		Combine:      func(a, b string) string { return a + b },
		Codec:        stringCodec{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, e := range []struct{ k, v string }{{"k", "a"}, {"j", "x"}, {"k", "b"}, {"k", "c"}, {"j", "y"}, {"k", "d"}} {
		if err := s.Emit([]byte(e.k), e.v); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err = s.Reduce(context.Background(), 1, func(_ int, key []byte, v string) error {
		got = append(got, string(key)+"="+v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"j=xy", "k=abcd"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

type stringCodec struct{}

func (stringCodec) Append(dst []byte, v string) []byte { return append(dst, v...) }
func (stringCodec) Decode(b []byte) (string, error)    { return string(b), nil }

func TestCloseRemovesSpillFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tmp")
	s := newStatShuffle(t, Options[stat]{MemoryBudget: 2 << 10, TempDir: dir})
	keys := keyPool(rand.New(rand.NewPCG(1, 1)), 500)
	if err := emitSeq(0, 2000, keys, s.Emit); err != nil {
		t.Fatal(err)
	}
	var files int
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, _ error) error {
		if d != nil && !d.IsDir() {
			files++
		}
		return nil
	})
	if files == 0 || s.Stats().Runs == 0 {
		t.Fatalf("expected spill files, found %d (runs %d)", files, s.Stats().Runs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("after Close: %d entries in %s (%v)", len(ents), dir, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Emit([]byte("x"), stat{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Emit after Close: %v", err)
	}
	if err := s.Reduce(context.Background(), 1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reduce after Close: %v", err)
	}
}

// TestReduceErrors checks that an error or cancellation in one partition
// stops Reduce, in memory and while merging spilled runs, without leaks.
func TestReduceErrors(t *testing.T) {
	errStop := errors.New("stop")
	tests := []struct {
		name   string
		budget int64
		fail   func(cancel context.CancelFunc, part int, n int) error // called for the n-th key of a partition
		want   error
	}{
		{name: "fn error in memory", fail: failAt(3, 10, errStop), want: errStop},
		{name: "fn error merging", budget: 32 << 10, fail: failAt(5, 20, errStop), want: errStop},
		{name: "cancel in memory", fail: cancelAt(2, 5), want: context.Canceled},
		{name: "cancel merging", budget: 32 << 10, fail: cancelAt(7, 1), want: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			s := newStatShuffle(t, Options[stat]{MemoryBudget: tc.budget, TempDir: t.TempDir()})
			keys := keyPool(rand.New(rand.NewPCG(3, 3)), 5000)
			if err := emitSeq(0, 20000, keys, s.Emit); err != nil {
				t.Fatal(err)
			}
			if (tc.budget > 0) != (s.Stats().Runs > 0) {
				t.Fatalf("runs %d with budget %d", s.Stats().Runs, tc.budget)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var counts [DefaultPartitions]int
			var after atomic.Int64 // keys reduced after the failure
			var failed atomic.Bool
			err := s.Reduce(ctx, 2, func(part int, _ []byte, _ stat) error {
				if failed.Load() {
					after.Add(1)
				}
				counts[part]++
				if err := tc.fail(cancel, part, counts[part]); err != nil {
					failed.Store(true)
					return err
				}
				if ctx.Err() != nil {
					failed.Store(true)
				}
				return nil
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Reduce: %v, want %v", err, tc.want)
			}
			// The other worker stops at its next context check.
			if a := after.Load(); a > ctxEvery {
				t.Fatalf("%d keys reduced after the failure", a)
			}
		})
	}
}

func failAt(part, n int, err error) func(context.CancelFunc, int, int) error {
	return func(_ context.CancelFunc, p, i int) error {
		if p == part && i == n {
			return err
		}
		return nil
	}
}

func cancelAt(part, n int) func(context.CancelFunc, int, int) error {
	return func(cancel context.CancelFunc, p, i int) error {
		if p == part && i == n {
			cancel()
		}
		return nil
	}
}

// TestBadSpillData damages the spill files or their values: Reduce must
// fail with a useful error rather than return wrong data.
func TestBadSpillData(t *testing.T) {
	tests := []struct {
		name   string
		codec  Codec[stat]
		damage func(t *testing.T, path string)
		want   error
	}{
		{name: "codec rejects value", codec: rejectCodec{}, want: errBadValue},
		{name: "truncated file", codec: statCodec{}, want: ErrCorrupt, damage: func(t *testing.T, path string) {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, st.Size()-7); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "huge key length", codec: statCodec{}, want: ErrCorrupt, damage: func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0x7f}, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "value length too short", codec: statCodec{}, want: errBadValue, damage: func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The first entry: uvarint key length (< 128 here), key, value length 20.
			at := 1 + int(data[0])
			if data[at] != 20 {
				t.Fatalf("value length byte is %d", data[at])
			}
			data[at] = 19
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStatShuffle(t, Options[stat]{Partitions: 1, MemoryBudget: 8 << 10, TempDir: dir, Codec: tc.codec})
			keys := keyPool(rand.New(rand.NewPCG(5, 5)), 1000)
			if err := emitSeq(0, 3000, keys, s.Emit); err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*", "*.run"))
			if len(files) != 1 {
				t.Fatalf("spill files: %q", files)
			}
			if tc.damage != nil {
				tc.damage(t, files[0])
			}
			err := s.Reduce(context.Background(), 1, func(int, []byte, stat) error { return nil })
			if !errors.Is(err, tc.want) {
				t.Fatalf("Reduce: %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), "mapreduce:") {
				t.Fatalf("error lacks context: %v", err)
			}
		})
	}
}

// rejectCodec writes values that its Decode refuses.
type rejectCodec struct{ statCodec }

func (rejectCodec) Append(dst []byte, v stat) []byte { return append(dst, 1, 2, 3) }

func TestSpillWriteError(t *testing.T) {
	// A TempDir below a regular file cannot be created.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newStatShuffle(t, Options[stat]{MemoryBudget: 1 << 10, TempDir: filepath.Join(file, "sub")})
	keys := keyPool(rand.New(rand.NewPCG(6, 6)), 200)
	err := emitSeq(0, 1000, keys, s.Emit)
	if err == nil || !strings.Contains(err.Error(), "spill directory") {
		t.Fatalf("Emit past the budget with a bad TempDir: %v", err)
	}
	if err2 := s.Emit([]byte("again"), stat{}); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("later Emit: %v, want the spill error", err2)
	}
	if err2 := s.Reduce(context.Background(), 1, nil); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("Reduce: %v, want the spill error", err2)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options[int]
		want []string // substrings, one per problem
	}{
		{name: "ok", o: Options[int]{Combine: func(a, b int) int { return a + b }}},
		{name: "no combine", o: Options[int]{}, want: []string{"Combine"}},
		{name: "everything wrong", o: Options[int]{Partitions: -1, MemoryBudget: -1, ValueSize: -2},
			want: []string{"Partitions", "MemoryBudget", "ValueSize", "Combine"}},
		{name: "too many partitions", o: Options[int]{Partitions: 1 << 20, Combine: func(a, b int) int { return a }}, want: []string{"Partitions"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewShuffle(tc.o)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
		})
	}
}

func TestMap(t *testing.T) {
	tests := []struct {
		name    string
		workers int
		inputs  int
	}{
		{name: "no inputs", workers: 2, inputs: 0},
		{name: "default workers", workers: 0, inputs: 50},
		{name: "one worker", workers: 1, inputs: 50},
		{name: "more workers than inputs", workers: 100, inputs: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			inputs := make([]int, tc.inputs)
			for i := range inputs {
				inputs[i] = i
			}
			seen := make([]atomic.Int32, tc.inputs)
			err := Map(context.Background(), tc.workers, inputs, func(_ context.Context, i int) error {
				seen[i].Add(1)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := range seen {
				if n := seen[i].Load(); n != 1 {
					t.Fatalf("input %d ran %d times", i, n)
				}
			}
		})
	}
}

func TestMapErrorCancelsRest(t *testing.T) {
	defer goleak.VerifyNone(t)
	errBoom := errors.New("boom")
	inputs := make([]int, 100)
	for i := range inputs {
		inputs[i] = i
	}
	var started, running atomic.Int32
	err := Map(context.Background(), 4, inputs, func(ctx context.Context, i int) error {
		started.Add(1)
		running.Add(1)
		defer running.Add(-1)
		switch {
		case i < 7:
			return nil
		case i == 7:
			return errBoom
		}
		select { // inputs after the failing one wait for cancellation
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("not cancelled")
		}
	})
	if err != errBoom {
		t.Fatalf("Map: %v, want errBoom", err)
	}
	if r := running.Load(); r != 0 {
		t.Fatalf("%d calls still running after Map returned", r)
	}
	if s := started.Load(); s > 8+4 {
		t.Fatalf("%d inputs started; the error should stop new ones", s)
	}
}

func TestMapParentCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	inputs := make([]int, 20)
	var once sync.Once
	err := Map(ctx, 3, inputs, func(ctx context.Context, _ int) error {
		once.Do(cancel)
		<-ctx.Done()
		return nil // ignores the cancellation: Map must still report it
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Map: %v, want context.Canceled", err)
	}
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	calls := 0
	if err := Map(done, 2, inputs, func(context.Context, int) error { calls++; return nil }); !errors.Is(err, context.Canceled) || calls != 0 {
		t.Fatalf("Map with a cancelled context: %v after %d calls", err, calls)
	}
}

// FuzzRunDecode feeds arbitrary bytes to the spill run reader: it must
// return entries or an error, never panic or read past the run.
func FuzzRunDecode(f *testing.F) {
	var valid []byte
	for _, k := range []string{"", "a", "bb"} {
		valid = binary.AppendUvarint(valid, uint64(len(k)))
		valid = append(valid, k...)
		valid = binary.AppendUvarint(valid, 20)
		valid = statCodec{}.Append(valid, stat{Sum: 1, N: 2, Max: 3})
	}
	f.Add(valid, uint8(3))
	f.Add(valid[:len(valid)-1], uint8(3))
	f.Add(valid, uint8(4))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint8(1))
	dir := f.TempDir()
	var seq int
	f.Fuzz(func(t *testing.T, data []byte, keys uint8) {
		seq++
		path := filepath.Join(dir, fmt.Sprintf("run%d", seq))
		// The run sits between a prefix and a suffix that must not be read.
		file := append(append([]byte("PREFIX"), data...), "SUFFIX"...)
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		r := run{off: 6, size: int64(len(data)), keys: int(keys)}
		c := &cursor[stat]{run: r, name: path, codec: statCodec{},
			br: newRunReader(fh, r)}
		var consumed []byte
		for i := 0; ; i++ {
			ok, err := c.next()
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, errBadValue) {
					t.Fatalf("entry %d: unexpected error %v", i, err)
				}
				return
			}
			if !ok {
				break
			}
			consumed = binary.AppendUvarint(consumed, uint64(len(c.key)))
			consumed = append(consumed, c.key...)
			consumed = binary.AppendUvarint(consumed, 20)
			consumed = statCodec{}.Append(consumed, c.val)
		}
		if c.read != int(keys) || len(consumed) > len(data) {
			t.Fatalf("read %d of %d keys, %d bytes of entries from a %d-byte run", c.read, keys, len(consumed), len(data))
		}
	})
}

type f64Codec struct{}

func (f64Codec) Append(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

func (f64Codec) Decode(b []byte) (float64, error) {
	if len(b) != 8 {
		return 0, errBadValue
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
}

// BenchmarkShuffle emits 2M float64 values over 500k distinct 60-byte keys
// from 2 goroutines and reduces them with 2 workers, all in memory and
// with a budget that forces spills.
func BenchmarkShuffle(b *testing.B) {
	const distinct, emits, workers = 500_000, 2_000_000, 2
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, distinct)
	for i := range keys {
		k := make([]byte, 60)
		for j := range k {
			k[j] = 'a' + byte(rng.IntN(26))
		}
		keys[i] = k
	}
	order := make([]int32, emits)
	for i := range order {
		order[i] = int32(i % distinct)
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	chunks := make([][]int32, 16)
	for i := range chunks {
		chunks[i] = order[i*emits/len(chunks) : (i+1)*emits/len(chunks)]
	}
	for _, bc := range []struct {
		name   string
		budget int64
	}{
		{"memory", 0},
		{"spill16MiB", 16 << 20},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			var runs int
			for b.Loop() {
				s, err := NewShuffle(Options[float64]{
					MemoryBudget: bc.budget,
					TempDir:      b.TempDir(),
					Combine:      func(a, b float64) float64 { return a + b },
					Codec:        f64Codec{},
				})
				if err != nil {
					b.Fatal(err)
				}
				err = Map(context.Background(), workers, chunks, func(_ context.Context, c []int32) error {
					for _, i := range c {
						if err := s.Emit(keys[i], 1); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				sums := make([]float64, DefaultPartitions)
				var n atomic.Int64
				err = s.Reduce(context.Background(), workers, func(part int, _ []byte, v float64) error {
					sums[part] += v
					n.Add(1)
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				runs = s.Stats().Runs
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				var total float64
				for _, v := range sums {
					total += v
				}
				if n.Load() != distinct || total != emits {
					b.Fatalf("reduced %d keys summing to %v", n.Load(), total)
				}
			}
			runtime.ReadMemStats(&ms1)
			perEmit := float64(b.N) * emits
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/perEmit, "ns/emit")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/perEmit, "allocs/emit")
			b.ReportMetric(float64(runs), "runs")
		})
	}
}

// TestTableCollisions forces equal hashes for different keys: the table
// must tell them apart by their bytes, also across growth.
func TestTableCollisions(t *testing.T) {
	tests := []struct {
		name  string
		hash  func(i int) uint64 // before setting bit 0
		count int
	}{
		{name: "all equal", hash: func(int) uint64 { return 42 }, count: 300},
		{name: "two classes", hash: func(i int) uint64 { return uint64(i%2) << 40 }, count: 500},
		{name: "distinct", hash: func(i int) uint64 { return uint64(i) * 0x9E3779B97F4A7C15 }, count: 5000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tb table[int]
			for round := range 2 { // insert, then add to every key
				for i := range tc.count {
					key := fmt.Appendf(nil, "key-%d", i)
					tb.reserve()
					sl, found := tb.find(tc.hash(i)|1, key)
					if found != (round == 1) {
						t.Fatalf("round %d key %d: found=%v", round, i, found)
					}
					if found {
						sl.v += 1000
					} else {
						tb.insert(sl, tc.hash(i)|1, key, i)
					}
				}
			}
			if tb.used != tc.count || (tb.used+1)*10 > len(tb.slots)*7+10 {
				t.Fatalf("used %d of %d slots", tb.used, len(tb.slots))
			}
			es := tb.sorted()
			if len(es) != tc.count {
				t.Fatalf("sorted %d entries, want %d", len(es), tc.count)
			}
			for j := range es {
				var i int
				if _, err := fmt.Sscanf(string(tb.key(&es[j])), "key-%d", &i); err != nil || es[j].v != i+1000 {
					t.Fatalf("entry %q = %d (%v)", tb.key(&es[j]), es[j].v, err)
				}
				if j > 0 && string(tb.key(&es[j-1])) >= string(tb.key(&es[j])) {
					t.Fatalf("not sorted at %d", j)
				}
			}
			tb.reset()
			if _, found := tb.find(tc.hash(0)|1, []byte("key-0")); found || tb.used != 0 || len(tb.arena) != 0 {
				t.Fatal("reset left entries behind")
			}
		})
	}
}

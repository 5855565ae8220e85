package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func openSharedT(t testing.TB, dir string) *Shared {
	t.Helper()
	sh, err := OpenShared(dir, Options{CacheBytes: 8 << 20, MemTableBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

func groupT(t testing.TB, sh *Shared, group string) *Store {
	t.Helper()
	s, err := sh.Store(group)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dump returns every key and value of a store's keyspace, in key order.
func dump(t testing.TB, s *Store) []string {
	t.Helper()
	it, err := s.ks.newIter(ownLo, ownHi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, fmt.Sprintf("%q=%q", it.Key(), it.Value()))
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameDump(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		n := min(len(got), len(want))
		i := 0
		for i < n && got[i] == want[i] {
			i++
		}
		g, w := "(end)", "(end)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		t.Fatalf("%s: %d keys, want %d; first difference at %d: %s, want %s", what, len(got), len(want), i, g, w)
	}
}

// populate writes the same keys into a store with values that depend on v,
// and keys of its own (only<v>…), at indexes 1 and 2.
func populate(t *testing.T, s *Store, v int) {
	t.Helper()
	b := NewBatch()
	b.UpsertCash("http://h1.test/a", float64(v), 1)
	b.UpsertCash("http://h1.test/gen", 1, 1)
	b.UpsertCash(fmt.Sprintf("http://only%d.test/x", v), 1, 1)
	b.PutHost("h1.test", HostRecord{Failures: uint32(v)})
	b.PutUser("k", []byte(fmt.Sprint("user", v)))
	b.PutUser(fmt.Sprintf("only%d", v), []byte("x"))
	b.PutDomain("test", float64(v), 0)
	b.PutRound([]byte(fmt.Sprint("round", v)))
	b.OutboxEnqueue("eu", []byte(fmt.Sprint("out", v)))
	b.SentCheckAdd(uint64(v), 100)
	applyT(t, s, 1, b)
	b = NewBatch()
	b.MarkGenerated("http://h1.test/gen", uint64(v))
	b.FetchedElsewhere("http://h1.test/gen", StatusFetched) // generated: marked
	applyT(t, s, 2, b)
}

// TestGroupsDoNotSeeEachOther: two groups of one Shared hold the same keys
// with other values; every read path returns each group's own.
func TestGroupsDoNotSeeEachOther(t *testing.T) {
	sh := openSharedT(t, t.TempDir())
	defer sh.Close()
	// "s1" is a prefix of "s12": the group prefix must keep them apart.
	stores := map[int]*Store{1: groupT(t, sh, "s1"), 2: groupT(t, sh, "s12")}
	for v, s := range stores {
		populate(t, s, v)
	}
	type read func(s *Store) (string, error)
	other := func(v int) int { return 3 - v }
	for _, tc := range []struct {
		name string
		read read
		want func(v int) string
	}{
		{"Get", func(s *Store) (string, error) {
			r, ok, err := s.Get("http://h1.test/a")
			return fmt.Sprint(r.Cash, ok), err
		}, func(v int) string { return fmt.Sprint(float64(v), true) }},
		{"Contains", func(s *Store) (string, error) {
			a, err := s.Contains("http://only1.test/x")
			b, err2 := s.Contains("http://only2.test/x")
			return fmt.Sprint(a, b), errors.Join(err, err2)
		}, func(v int) string { return fmt.Sprint(v == 1, v == 2) }},
		{"Host", func(s *Store) (string, error) {
			h, ok, err := s.Host("h1.test")
			return fmt.Sprint(h.Failures, ok), err
		}, func(v int) string { return fmt.Sprint(v, true) }},
		{"HostStats", func(s *Store) (string, error) {
			st, err := s.HostStats("h1.test")
			return fmt.Sprint(st.Frontier, st.Best, st.Fetched), err
		}, func(v int) string { return fmt.Sprint(1, float64(v), 0) }},
		{"HostFrontier", func(s *Store) (string, error) {
			fr, err := s.HostFrontier("h1.test", 10)
			var out []string
			for _, e := range fr {
				out = append(out, fmt.Sprint(e.URL, e.Score))
			}
			return strings.Join(out, ","), err
		}, func(v int) string { return fmt.Sprint("http://h1.test/a", float64(v)) }},
		{"Frontier", func(s *Store) (string, error) {
			fr, err := s.Frontier(FrontierQuery{Width: 100, PerHost: 100})
			var out []string
			for _, e := range fr {
				out = append(out, fmt.Sprint(e.URL, " ", e.Score))
			}
			slices.Sort(out)
			return strings.Join(out, ","), err
		}, func(v int) string { return fmt.Sprintf("http://h1.test/a %v,http://only%d.test/x 1", float64(v), v) }},
		{"ScanURLs", func(s *Store) (string, error) {
			var out []string
			err := s.ScanURLs(func(r URLRecord) error { out = append(out, fmt.Sprint(r.URL, " ", r.Status)); return nil })
			slices.Sort(out)
			return strings.Join(out, ","), err
		}, func(v int) string {
			return fmt.Sprintf("http://h1.test/a %v,http://h1.test/gen %v,http://only%d.test/x %v", StatusUnfetched, StatusGenerated, v, StatusUnfetched)
		}},
		{"ScanHostURLs", func(s *Store) (string, error) {
			var out []string
			err := s.ScanHostURLs(fmt.Sprintf("only%d.test", 1), func(r URLRecord) error { out = append(out, r.URL); return nil })
			return strings.Join(out, ","), err
		}, func(v int) string {
			if v == 1 {
				return "http://only1.test/x"
			}
			return ""
		}},
		{"User", func(s *Store) (string, error) {
			u, err := s.User("k")
			return string(u), err
		}, func(v int) string { return fmt.Sprint("user", v) }},
		{"UserScan", func(s *Store) (string, error) {
			var out []string
			err := s.UserScan("", func(k string, _ []byte) error { out = append(out, k); return nil })
			return strings.Join(out, ","), err
		}, func(v int) string { return fmt.Sprintf("k,only%d", v) }},
		{"Domain", func(s *Store) (string, error) {
			lat, _, ok, err := s.Domain("test")
			return fmt.Sprint(lat, ok), err
		}, func(v int) string { return fmt.Sprint(float64(v), true) }},
		{"Round", func(s *Store) (string, error) {
			r, err := s.Round()
			return string(r), err
		}, func(v int) string { return fmt.Sprint("round", v) }},
		{"Outbox", func(s *Store) (string, error) {
			es, err := s.Outbox("eu", 0, 10)
			var out []string
			for _, e := range es {
				out = append(out, fmt.Sprint(e.Seq, string(e.Payload)))
			}
			return strings.Join(out, ","), err
		}, func(v int) string { return fmt.Sprint(1, "out", v) }},
		{"SentContains", func(s *Store) (string, error) {
			a, err := s.SentContains(1)
			b, err2 := s.SentContains(2)
			return fmt.Sprint(a, b), errors.Join(err, err2)
		}, func(v int) string { return fmt.Sprint(v == 1, v == 2) }},
		{"Generated", func(s *Store) (string, error) {
			a, err := s.Generated(1, 10)
			b, err2 := s.Generated(2, 10)
			return fmt.Sprint(a, b), errors.Join(err, err2)
		}, func(v int) string {
			g := [2][]string{}
			g[v-1] = []string{"http://h1.test/gen"}
			return fmt.Sprint(g[0], g[1])
		}},
		{"MarkedURLs", func(s *Store) (string, error) {
			ms, err := s.MarkedURLs(10)
			return fmt.Sprint(ms), err
		}, func(v int) string {
			return fmt.Sprint([]Marked{{URL: "http://h1.test/gen", Host: "h1.test", Round: uint64(v)}})
		}},
		{"Counts", func(s *Store) (string, error) {
			c := s.Counts()
			return fmt.Sprint(c.Applied, c.URLs, c.Frontier, c.Sent, c.Outbox, c.Marked), nil
		}, func(v int) string { return fmt.Sprint(2, 3, 2, 1, 1, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for v, s := range stores {
				got, err := tc.read(s)
				if err != nil {
					t.Fatalf("group %s: %v", s.Group(), err)
				}
				if want := tc.want(v); got != want {
					t.Errorf("group %s: %q, want %q (the other group's: %q)", s.Group(), got, want, tc.want(other(v)))
				}
			}
		})
	}
	// A prefix deletion of the node layer's keys in one group leaves the
	// other's.
	b := NewBatch()
	b.DeleteUserPrefix("k")
	applyT(t, stores[2], 3, b)
	for v, want := range map[int]string{1: "user1", 2: ""} {
		if u, err := stores[v].User("k"); err != nil || string(u) != want {
			t.Errorf("after deleting group s12's user keys, group %s's k = %q, %v; want %q", stores[v].Group(), u, err, want)
		}
	}
	gs, err := sh.Groups()
	if err != nil || !slices.Equal(gs, []string{"s1", "s12"}) {
		t.Fatalf("Groups() = %v, %v", gs, err)
	}
}

// TestGroupsAgainstModel: three groups of one Shared (two with the same
// URLs) each follow their own random commands and match their own model
// through every read the model checks, across reopens of the Shared.
func TestGroupsAgainstModel(t *testing.T) {
	var urls []string
	for h := range 4 {
		for p := range 6 {
			urls = append(urls, fmt.Sprintf("http://h%d.us.test/p/%d.html", h, p))
		}
	}
	groups := []string{"s1", "s12", "s2"}
	dir := t.TempDir()
	sh := openSharedT(t, dir)
	defer func() { sh.Close() }()
	models := make([]*model, len(groups))
	rngs := make([]*rand.Rand, len(groups))
	for i := range groups {
		models[i] = newModel()
		rngs[i] = rand.New(rand.NewPCG(uint64(i), 7))
	}
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for idx := uint64(1); idx <= 120; idx++ {
		for i, g := range groups {
			s := groupT(t, sh, g)
			b := NewBatch()
			var want []OpResult
			for range 1 + rngs[i].IntN(20) {
				want = append(want, models[i].randomOp(rngs[i], b, urls, at))
			}
			res := applyT(t, s, idx, b)
			for j := range want {
				if res.Ops[j] != want[j] {
					t.Fatalf("group %s command %d op %d: result %+v, model %+v", g, idx, j, res.Ops[j], want[j])
				}
			}
			models[i].check(t, s)
		}
		if idx%40 == 0 {
			if err := sh.Close(); err != nil {
				t.Fatal(err)
			}
			sh = openSharedT(t, dir)
			for i, g := range groups {
				s := groupT(t, sh, g)
				if s.AppliedIndex() != idx {
					t.Fatalf("group %s: applied index %d after reopen, want %d", g, s.AppliedIndex(), idx)
				}
				models[i].check(t, s)
			}
		}
	}
}

func TestSharedLifecycle(t *testing.T) {
	dir := t.TempDir()
	sh := openSharedT(t, dir)
	a := groupT(t, sh, "a")
	if again := groupT(t, sh, "a"); again != a {
		t.Fatal("Store of an open group returned another *Store")
	}
	applyT(t, a, 1, upsertBatch(0, 10))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := a.Apply(2, mustEncodeBatch(t, upsertBatch(10, 1))); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply on a closed group's store: %v, want ErrClosed", err)
	}
	a2 := groupT(t, sh, "a") // the Pebble stayed open
	if a2 == a || a2.AppliedIndex() != 1 || a2.Counts().URLs != 10 {
		t.Fatalf("reopened group: same=%v applied %d, %d URLs; want a new store at 1 with 10", a2 == a, a2.AppliedIndex(), a2.Counts().URLs)
	}
	if err := a2.Checkpoint(t.TempDir() + "/ck"); !errors.Is(err, ErrBadOp) {
		t.Fatalf("Checkpoint of a group: %v, want ErrBadOp", err)
	}
	for _, g := range []string{"", "A", "a_b", "a.b", strings.Repeat("x", 33), "é"} {
		if _, err := sh.Store(g); !errors.Is(err, ErrBadGroup) {
			t.Errorf("Store(%q): %v, want ErrBadGroup", g, err)
		}
	}
	for _, g := range []string{"a", "s-07", strings.Repeat("9", 32)} {
		if err := ValidGroup(g); err != nil {
			t.Errorf("ValidGroup(%q): %v", g, err)
		}
	}
	if err := sh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sh.Close(); err != nil {
		t.Fatalf("second Shared.Close: %v", err)
	}
	if _, err := a2.Apply(2, mustEncodeBatch(t, upsertBatch(10, 1))); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply after Shared.Close: %v, want ErrClosed", err)
	}
	if _, err := sh.Store("a"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Store after Shared.Close: %v, want ErrClosed", err)
	}
	// The two layouts refuse each other.
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLayout) {
		t.Fatalf("Open of a Shared's directory: %v, want ErrLayout", err)
	}
	own := t.TempDir()
	s := openT(t, own, Options{})
	applyT(t, s, 1, upsertBatch(0, 1))
	s.Close()
	if _, err := OpenShared(own, Options{}); !errors.Is(err, ErrLayout) {
		t.Fatalf("OpenShared of a store of its own: %v, want ErrLayout", err)
	}
}

func TestDrop(t *testing.T) {
	dir := t.TempDir()
	sh := openSharedT(t, dir)
	defer func() { sh.Close() }()
	a, b := groupT(t, sh, "a"), groupT(t, sh, "a-b")
	populate(t, a, 1)
	populate(t, b, 2)
	before := dump(t, b)
	if err := sh.Drop("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Apply(3, mustEncodeBatch(t, upsertBatch(0, 1))); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply on a dropped group's store: %v, want ErrClosed", err)
	}
	if err := sh.Drop("never"); err != nil {
		t.Fatalf("Drop of a group without data: %v", err)
	}
	for round := range 2 {
		gs, err := sh.Groups()
		if err != nil || !slices.Equal(gs, []string{"a-b"}) {
			t.Fatalf("round %d: Groups() = %v, %v; want [a-b]", round, gs, err)
		}
		sameDump(t, "the group left", dump(t, groupT(t, sh, "a-b")), before)
		a = groupT(t, sh, "a")
		if d := dump(t, a); len(d) != 0 || a.AppliedIndex() != 0 || a.Counts().URLs != 0 {
			t.Fatalf("round %d: dropped group reopened with %d keys, applied %d", round, len(d), a.AppliedIndex())
		}
		if ok, _ := a.Contains("http://h1.test/a"); ok {
			t.Fatal("dropped group still contains its URL")
		}
		sh.Close()
		sh = openSharedT(t, dir)
	}
}

// fillRandom applies n random commands from index from+1 on.
func fillRandom(t *testing.T, s *Store, seed uint64, from, n uint64) uint64 {
	t.Helper()
	var urls []string
	for h := range 5 {
		for p := range 10 {
			urls = append(urls, fmt.Sprintf("http://h%d.eu.test/p/%d", h, p))
		}
	}
	r := rand.New(rand.NewPCG(seed, 1))
	m := newModel()
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for idx := from + 1; idx <= from+n; idx++ {
		b := NewBatch()
		for range 1 + r.IntN(20) {
			m.randomOp(r, b, urls, at)
		}
		applyT(t, s, idx, b)
	}
	return from + n
}

func snapshotBytes(t *testing.T, s *Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSnapshotRestore: a group's snapshot restored into another store gives
// the same keys (those only in the target are gone), the same counts, and
// the same results for the next commands, before and after a reopen.
func TestSnapshotRestore(t *testing.T) {
	srcSh := openSharedT(t, t.TempDir())
	defer srcSh.Close()
	src := groupT(t, srcSh, "src")
	last := fillRandom(t, src, 1, 0, 80)
	neighbour := groupT(t, srcSh, "src-other") // the snapshot must not carry it, nor a restore touch it
	populate(t, neighbour, 5)
	neighbourBefore := dump(t, neighbour)
	snap := snapshotBytes(t, src)
	for _, tc := range []struct {
		name string
		open func(t *testing.T, dir string) (*Store, func()) // the target, and how to close all
	}{
		{"group of another Shared", func(t *testing.T, dir string) (*Store, func()) {
			sh := openSharedT(t, dir)
			return groupT(t, sh, "dst"), func() { sh.Close() }
		}},
		{"same group name in another Shared", func(t *testing.T, dir string) (*Store, func()) {
			sh := openSharedT(t, dir)
			return groupT(t, sh, "src"), func() { sh.Close() }
		}},
		{"store of its own", func(t *testing.T, dir string) (*Store, func()) {
			s := openT(t, dir, Options{})
			return s, func() { s.Close() }
		}},
		{"another group of the source's Shared", func(t *testing.T, dir string) (*Store, func()) {
			s := groupT(t, srcSh, "dst")
			return s, func() { s.Close() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dst, closeAll := tc.open(t, dir)
			populate(t, dst, 3)
			fillRandom(t, dst, 9, 2, 30) // other URLs, other index
			if err := dst.RestoreSnapshot(bytes.NewReader(snap)); err != nil {
				t.Fatal(err)
			}
			want := dump(t, src)
			sameDump(t, "restored", dump(t, dst), want)
			if dst.AppliedIndex() != last || dst.Counts().URLs != src.Counts().URLs || dst.Counts().Marked != src.Counts().Marked {
				t.Fatalf("restored applied %d counts %+v, want %d %+v", dst.AppliedIndex(), dst.Counts(), last, src.Counts())
			}
			if ok, _ := dst.Contains("http://only3.test/x"); ok {
				t.Fatal("a URL only the target had survived the restore")
			}
			// The next commands act the same on both (the restored store
			// rebuilt its URL filter, counters and host cache).
			next := NewBatch()
			next.UpsertCash("http://h1.eu.test/p/1", 2, 1)
			next.UpsertCash("http://new.test/", 1, 0)
			next.HandOver("http://h2.eu.test/p/3", 100)
			next.SentCheckAdd(77, 3)
			cmd := mustEncodeBatch(t, next)
			r1, err1 := src.Apply(last+1, cmd)
			r2, err2 := dst.Apply(last+1, cmd)
			if err1 != nil || err2 != nil || fmt.Sprint(r1.Ops) != fmt.Sprint(r2.Ops) {
				t.Fatalf("next command: source %+v %v, restored %+v %v", r1, err1, r2, err2)
			}
			want = dump(t, src)
			sameDump(t, "after the next command", dump(t, dst), want)
			closeAll()
			dst, closeAll = tc.open(t, dir)
			defer closeAll()
			sameDump(t, "reopened", dump(t, dst), want)
			if dst.AppliedIndex() != last+1 {
				t.Fatalf("reopened at %d, want %d", dst.AppliedIndex(), last+1)
			}
			sameDump(t, "the source's neighbour group", dump(t, neighbour), neighbourBefore)
			// Back to the state before the next command, for the next case.
			if err := src.RestoreSnapshot(bytes.NewReader(snap)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRestoreRefusesCorrupt: a cut, altered or unreadable stream is
// refused and the target keeps every key.
func TestRestoreRefusesCorrupt(t *testing.T) {
	srcSh := openSharedT(t, t.TempDir())
	defer srcSh.Close()
	src := groupT(t, srcSh, "src")
	fillRandom(t, src, 2, 0, 40)
	snap := snapshotBytes(t, src)
	flip := func(i int) []byte {
		b := bytes.Clone(snap)
		b[i] ^= 0x10
		return b
	}
	errRead := errors.New("disk gone")
	dir := t.TempDir()
	sh := openSharedT(t, dir)
	defer sh.Close()
	dst := groupT(t, sh, "dst")
	populate(t, dst, 4)
	before := dump(t, dst)
	for _, tc := range []struct {
		name    string
		r       io.Reader
		corrupt bool // ErrCorruptSnapshot; else the reader's error
	}{
		{"empty", bytes.NewReader(nil), true},
		{"header only", bytes.NewReader(snap[:17]), true},
		{"cut in half", bytes.NewReader(snap[:len(snap)/2]), true},
		{"last byte missing", bytes.NewReader(snap[:len(snap)-1]), true},
		{"byte flipped in a record", bytes.NewReader(flip(len(snap) / 2)), true},
		{"checksum flipped", bytes.NewReader(flip(len(snap) - 1)), true},
		{"other magic", bytes.NewReader(flip(0)), true},
		{"other version", bytes.NewReader(flip(8)), true},
		{"other index in the header", bytes.NewReader(flip(16)), true},
		{"bytes after the end", bytes.NewReader(append(bytes.Clone(snap), 0)), true},
		{"read error", io.MultiReader(bytes.NewReader(snap[:len(snap)/2]), iotest.ErrReader(errRead)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dst.RestoreSnapshot(tc.r)
			if tc.corrupt && !errors.Is(err, ErrCorruptSnapshot) || !tc.corrupt && !errors.Is(err, errRead) {
				t.Fatalf("RestoreSnapshot: %v", err)
			}
			sameDump(t, "target after a refused restore", dump(t, dst), before)
			if dst.AppliedIndex() != 2 {
				t.Fatalf("applied %d, want 2", dst.AppliedIndex())
			}
			if _, err := os.Stat(dir + "/" + spoolName("dst")); !os.IsNotExist(err) {
				t.Fatalf("spool left behind: %v", err)
			}
		})
	}
	// The target still takes commands.
	applyT(t, dst, 3, upsertBatch(0, 3))
}

// TestInterruptedRestore: a restore stopped after its first batch of data
// leaves the store refusing commands and, once reopened, refused with
// ErrIncomplete; dropped and restored again, it holds the snapshot.
func TestInterruptedRestore(t *testing.T) {
	srcSh := openSharedT(t, t.TempDir())
	defer srcSh.Close()
	src := groupT(t, srcSh, "src")
	fillRandom(t, src, 3, 0, 60)
	snap := snapshotBytes(t, src)
	want := dump(t, src)
	errStop := errors.New("stopped by the test")
	interrupt := func(t *testing.T) {
		batches := restoreBatchBytes
		restoreBatchBytes = 512
		restoreHook = func(n int) error {
			if n == 1 {
				return errStop
			}
			return nil
		}
		t.Cleanup(func() { restoreBatchBytes, restoreHook = batches, nil })
	}
	restored := func(t *testing.T, s *Store) {
		t.Helper()
		restoreHook = nil
		if err := s.RestoreSnapshot(bytes.NewReader(snap)); err != nil {
			t.Fatal(err)
		}
		sameDump(t, "restored after an interrupted restore", dump(t, s), want)
		applyT(t, s, s.AppliedIndex()+1, upsertBatch(0, 2))
	}

	t.Run("group, reopened", func(t *testing.T) {
		interrupt(t)
		dir := t.TempDir()
		sh := openSharedT(t, dir)
		dst, other := groupT(t, sh, "dst"), groupT(t, sh, "other")
		populate(t, dst, 1)
		populate(t, other, 2)
		otherBefore := dump(t, other)
		if err := dst.RestoreSnapshot(bytes.NewReader(snap)); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("interrupted restore: %v, want ErrIncomplete", err)
		}
		if _, err := dst.Apply(100, mustEncodeBatch(t, upsertBatch(0, 1))); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("Apply after an interrupted restore: %v, want ErrIncomplete", err)
		}
		sh.Close()
		sh = openSharedT(t, dir)
		defer func() { sh.Close() }()
		if _, err := sh.Store("dst"); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("open after an interrupted restore: %v, want ErrIncomplete", err)
		}
		sameDump(t, "the other group", dump(t, groupT(t, sh, "other")), otherBefore)
		if err := sh.Drop("dst"); err != nil {
			t.Fatal(err)
		}
		dst = groupT(t, sh, "dst")
		if dst.AppliedIndex() != 0 || len(dump(t, dst)) != 0 {
			t.Fatalf("dropped group opened at %d with %d keys", dst.AppliedIndex(), len(dump(t, dst)))
		}
		restored(t, dst)
	})
	t.Run("group, retried in place", func(t *testing.T) {
		interrupt(t)
		sh := openSharedT(t, t.TempDir())
		defer sh.Close()
		dst := groupT(t, sh, "dst")
		populate(t, dst, 1)
		if err := dst.RestoreSnapshot(bytes.NewReader(snap)); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("interrupted restore: %v, want ErrIncomplete", err)
		}
		restored(t, dst)
	})
	t.Run("store of its own, reopened", func(t *testing.T) {
		interrupt(t)
		dir := t.TempDir()
		dst := openT(t, dir, Options{})
		populate(t, dst, 1)
		if err := dst.RestoreSnapshot(bytes.NewReader(snap)); !errors.Is(err, ErrIncomplete) {
			t.Fatalf("interrupted restore: %v, want ErrIncomplete", err)
		}
		dst.Close()
		if s, err := Open(dir, Options{}); !errors.Is(err, ErrIncomplete) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("Open after an interrupted restore: %v, want ErrIncomplete", err)
		}
	})
}

// FuzzDecodeSnapshot: the decoder never panics, and a stream it accepts
// encodes back to the same bytes.
func FuzzDecodeSnapshot(f *testing.F) {
	dir := f.TempDir()
	s, err := Open(dir, Options{CacheBytes: 1 << 20, MemTableBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	var empty bytes.Buffer
	if err := s.WriteSnapshot(&empty); err != nil {
		f.Fatal(err)
	}
	f.Add(empty.Bytes())
	b := upsertBatch(0, 5)
	b.PutUser("k", []byte("v"))
	cmd, err := b.Encode()
	if err != nil {
		f.Fatal(err)
	}
	if _, err := s.Apply(1, cmd); err != nil {
		f.Fatal(err)
	}
	var full bytes.Buffer
	if err := s.WriteSnapshot(&full); err != nil {
		f.Fatal(err)
	}
	s.Close()
	f.Add(full.Bytes())
	f.Add(full.Bytes()[:len(full.Bytes())/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		var keys, vals [][]byte
		index, err := decodeSnapshot(bytes.NewReader(data), func(k, v []byte) error {
			keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error not ErrCorruptSnapshot: %v", err)
			}
			return
		}
		var out bytes.Buffer
		sw := newSnapWriter(&out, index)
		for i := range keys {
			sw.record(keys[i], vals[i])
		}
		if err := sw.end(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("accepted stream of %d bytes encodes back to %d other bytes", len(data), out.Len())
		}
	})
}

// TestSnapshotIsConsistent: a snapshot taken before more commands are
// applied writes the state as of its index, however late it is written.
func TestSnapshotIsConsistent(t *testing.T) {
	sh := openSharedT(t, t.TempDir())
	defer sh.Close()
	s := groupT(t, sh, "g")
	last := fillRandom(t, s, 4, 0, 30)
	want := snapshotBytes(t, s)
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Close()
	fillRandom(t, s, 5, last, 20)
	populate(t, groupT(t, sh, "h"), 1)
	for range 2 { // WriteTo may be called again
		var got bytes.Buffer
		if _, err := sn.WriteTo(&got); err != nil {
			t.Fatal(err)
		}
		if sn.Index() != last || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("snapshot at %d (want %d) wrote %d bytes that differ from the %d at its index", sn.Index(), last, got.Len(), len(want))
		}
	}
	if err := sn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sn.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

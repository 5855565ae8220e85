package crawldb

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// fsm feeds the Raft log to the store and takes and installs snapshots.
//
// Over a store of its own (newFSM, the one-group node that crawldb.Open
// runs), the store lives in a generation directory named by the file CURRENT
// under Dir, so that a snapshot (a Pebble checkpoint, tarred) can be
// installed beside it and swapped in whole.
//
// Over one group of a store.Shared (newGroupFSM, a node holding many
// groups' replicas in one Pebble), a snapshot is the group's key/value
// stream (store.Snapshot) and a restore rewrites the group in place
// (Store.RestoreSnapshot): the other groups are not touched.
type fsm struct {
	db    *DB
	dir   string // the node's Dir; "" for a group's fsm
	opts  store.Options
	group bool // the store is a group of a store.Shared

	mu sync.RWMutex
	st *store.Store
}

const currentFile = "CURRENT"

func newFSM(db *DB, dbDir string, o store.Options) (*fsm, error) {
	f := &fsm{db: db, dir: filepath.Dir(dbDir), opts: o}
	name := "db"
	if b, err := os.ReadFile(filepath.Join(f.dir, currentFile)); err == nil {
		name = strings.TrimSpace(string(b))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("crawldb: %w", err)
	}
	st, err := store.Open(filepath.Join(f.dir, name), o)
	if err != nil {
		return nil, fmt.Errorf("crawldb: %w", err)
	}
	f.st = st
	return f, nil
}

// newGroupFSM returns the Raft state machine of one group whose store is
// st, a group of a store.Shared (Shared.Store); db is the node whose
// failures it reports (DB.fatal) and whose logger it uses. The fsm owns st:
// its close closes st (not the Shared). This is the seam a node holding
// many Raft groups uses: one newGroupFSM per group, handed to raft.NewRaft.
//
// If Shared.Store refused the group with store.ErrIncomplete (a crash in
// the middle of a restore), the caller drops it (Shared.Drop), opens it
// again empty and passes that: Raft restores its latest snapshot at start
// (the snapshot being installed was saved in the snapshot store before
// Restore was called) and replays the log after it.
func newGroupFSM(db *DB, st *store.Store) *fsm {
	return &fsm{db: db, group: true, st: st}
}

func (f *fsm) store() *store.Store {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st
}

func (f *fsm) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st == nil {
		return nil
	}
	return f.st.Close()
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: the commands Raft hands over
// together are applied in one store batch.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	entries := make([]store.Entry, 0, len(logs))
	pos := make([]int, 0, len(logs))
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			entries = append(entries, store.Entry{Index: l.Index, Cmd: l.Data})
			pos = append(pos, i)
		}
	}
	if len(entries) == 0 {
		return out
	}
	res, err := f.store().ApplyBatch(entries)
	if err != nil {
		f.db.fatal(err)
		for _, i := range pos {
			out[i] = err
		}
		return out
	}
	for j, i := range pos {
		out[i] = res[j]
	}
	return out
}

const snapshotMagic = "MERIDIAN-CRAWLDB-SNAPSHOT 1"

// Snapshot implements raft.FSM: a Pebble checkpoint of the store as of the
// last applied command, streamed by Persist; for a group's fsm, a Pebble
// snapshot of the group's keys, streamed by Persist as the store's snapshot
// stream.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	st := f.store()
	if f.group {
		sn, err := st.Snapshot()
		if err != nil {
			return nil, fmt.Errorf("crawldb: snapshot of group %s: %w", st.Group(), err)
		}
		return &groupSnapshot{sn: sn, group: st.Group()}, nil
	}
	tmp := filepath.Join(f.dir, "snapshots-tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("crawldb: snapshot: %w", err)
	}
	dir := filepath.Join(tmp, fmt.Sprintf("ckpt-%d-%d", st.AppliedIndex(), time.Now().UnixNano()))
	index := st.AppliedIndex()
	if err := st.Checkpoint(dir); err != nil {
		return nil, err
	}
	return &snapshot{dir: dir, index: index}, nil
}

type snapshot struct {
	dir   string
	index uint64
}

// Persist writes a header with the applied index and a tar of the checkpoint.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	err := func() error {
		bw := bufio.NewWriterSize(sink, 1<<20)
		fmt.Fprintf(bw, "%s %d\n", snapshotMagic, s.index)
		tw := tar.NewWriter(bw)
		err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(s.dir, path)
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: fi.Size(), ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
			fh, err := os.Open(path)
			if err != nil {
				return err
			}
			defer fh.Close()
			_, err = io.Copy(tw, fh)
			return err
		})
		if err != nil {
			return err
		}
		if err := tw.Close(); err != nil {
			return err
		}
		return bw.Flush()
	}()
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("crawldb: persist snapshot %d: %w", s.index, err)
	}
	return sink.Close()
}

// Release removes the checkpoint.
func (s *snapshot) Release() { os.RemoveAll(s.dir) }

// Restore implements raft.FSM. A snapshot no newer than what the store has
// applied (Raft restores its latest snapshot at every start) is skipped;
// a newer one (sent by the leader to a node that fell behind) replaces the
// store whole.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	if f.group {
		return f.restoreGroup(rc)
	}
	br := bufio.NewReaderSize(rc, 1<<20)
	line, err := br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("crawldb: restore: header: %w", err)
	}
	head, idxStr, ok := strings.Cut(strings.TrimSpace(line), " 1 ")
	index, perr := strconv.ParseUint(idxStr, 10, 64)
	if !ok || head+" 1" != snapshotMagic || perr != nil {
		return fmt.Errorf("crawldb: restore: not a crawldb snapshot (header %.80q)", line)
	}
	cur := f.store()
	if index <= cur.AppliedIndex() {
		_, err := io.Copy(io.Discard, br)
		return err
	}
	name := fmt.Sprintf("db-%d", index)
	dir := filepath.Join(f.dir, name)
	os.RemoveAll(dir)
	if err := untar(tar.NewReader(br), dir); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("crawldb: restore snapshot %d: %w", index, err)
	}
	st, err := store.Open(dir, f.opts)
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("crawldb: restore snapshot %d: %w", index, err)
	}
	if st.AppliedIndex() != index {
		st.Close()
		return fmt.Errorf("crawldb: restore: snapshot says index %d, its store %d", index, st.AppliedIndex())
	}
	if err := writeAtomic(filepath.Join(f.dir, currentFile), []byte(name+"\n")); err != nil {
		st.Close()
		return fmt.Errorf("crawldb: restore: %w", err)
	}
	f.mu.Lock()
	old := f.st
	f.st = st
	f.mu.Unlock()
	f.db.log.Info("crawldb: installed snapshot", "node", f.db.opts.NodeID, "index", index, "dir", dir)
	// Readers may still hold the old store for a moment.
	f.db.wg.Add(1)
	go func() {
		defer f.db.wg.Done()
		select {
		case <-time.After(2 * time.Second):
		case <-f.db.ctx.Done():
		}
		old.Close()
		os.RemoveAll(old.Dir())
	}()
	return nil
}

const groupSnapshotMagic = "MERIDIAN-CRAWLDB-GROUP-SNAPSHOT 1"

// groupSnapshot is a group's snapshot: a header line with the group and
// the applied index, then the store's snapshot stream.
type groupSnapshot struct {
	sn    *store.Snapshot
	group string
}

// Persist implements raft.FSMSnapshot.
func (s *groupSnapshot) Persist(sink raft.SnapshotSink) error {
	bw := bufio.NewWriterSize(sink, 1<<20)
	fmt.Fprintf(bw, "%s %s %d\n", groupSnapshotMagic, s.group, s.sn.Index())
	_, err := s.sn.WriteTo(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("crawldb: persist snapshot %d of group %s: %w", s.sn.Index(), s.group, err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *groupSnapshot) Release() { s.sn.Close() }

// restoreGroup installs a group's snapshot. One no newer than what the
// group has applied (Raft restores its latest snapshot at every start) is
// skipped; a newer one replaces the group's keys (store.RestoreSnapshot
// checks the whole stream before it changes anything). A snapshot of
// another group is accepted: a group's data does not name its group.
func (f *fsm) restoreGroup(r io.Reader) error {
	st := f.store()
	br := bufio.NewReaderSize(r, 1<<20)
	line, err := br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("crawldb: restore group %s: header: %w", st.Group(), err)
	}
	fields := strings.Fields(line)
	var index uint64
	if len(fields) == 4 && strings.Join(fields[:2], " ") == groupSnapshotMagic {
		index, err = strconv.ParseUint(fields[3], 10, 64)
	}
	if len(fields) != 4 || strings.Join(fields[:2], " ") != groupSnapshotMagic || err != nil {
		return fmt.Errorf("crawldb: restore group %s: not a group snapshot (header %.80q)", st.Group(), line)
	}
	if index <= st.AppliedIndex() {
		_, err := io.Copy(io.Discard, br)
		return err
	}
	if err := st.RestoreSnapshot(br); err != nil {
		return fmt.Errorf("crawldb: restore group %s snapshot %d: %w", st.Group(), index, err)
	}
	if got := st.AppliedIndex(); got != index {
		return fmt.Errorf("crawldb: restore group %s: the header says index %d, the data %d", st.Group(), index, got)
	}
	f.db.log.Info("crawldb: installed group snapshot", "node", f.db.opts.NodeID, "group", st.Group(), "index", index)
	return nil
}

func untar(tr *tar.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return syncDir(dir)
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if name == "." || strings.HasPrefix(name, "..") || filepath.IsAbs(name) || h.Typeflag != tar.TypeReg {
			return fmt.Errorf("bad entry %q in snapshot", h.Name)
		}
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = io.Copy(fh, tr)
		if err == nil {
			err = fh.Sync()
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	fh, err := os.Open(tmp)
	if err == nil {
		fh.Sync()
		fh.Close()
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// OpenStore opens the state machine of a stopped node's Dir (the
// generation CURRENT names) without Raft, for reading: the node's state as
// of the last command it applied. It works for any node of a site, which a
// lone crawldb.Open of one node of several could not (it would wait for a
// quorum). Nothing must write through it while the node may run again.
func OpenStore(dir string, o store.Options) (*store.Store, error) {
	name := "db"
	if b, err := os.ReadFile(filepath.Join(dir, currentFile)); err == nil {
		name = strings.TrimSpace(string(b))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("crawldb: %w", err)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("crawldb: no crawl database in %s: %w", dir, err)
	}
	st, err := store.Open(path, o)
	if err != nil {
		return nil, fmt.Errorf("crawldb: %w", err)
	}
	return st, nil
}

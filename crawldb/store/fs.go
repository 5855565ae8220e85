package store

import (
	"io"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// reportingFS wraps Pebble's filesystem so that the first failed write or
// sync is logged with the file's name before Pebble acts on it: Pebble stops
// the process on some write failures (a lost WAL write cannot be recovered
// in place), and the operator must learn which disk failed and why.
type reportingFS struct {
	vfs.FS
	log  *slog.Logger
	once *sync.Once
	dir  string
}

func newReportingFS(fs vfs.FS, log *slog.Logger, dir string) vfs.FS {
	return &reportingFS{FS: fs, log: log, once: new(sync.Once), dir: dir}
}

func (fs *reportingFS) report(op, name string, err error) error {
	if err != nil {
		fs.once.Do(func() {
			fs.log.Error("store: disk write failed; the crawl database in "+fs.dir+" stops here, and no half-written batch is kept",
				"op", op, "file", name, "err", err)
		})
	}
	return err
}

func (fs *reportingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, fs.report("create", name, err)
	}
	return &reportingFile{File: f, fs: fs, name: name}, nil
}

func (fs *reportingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *reportingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

func (fs *reportingFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

// Unwrap returns the wrapped filesystem.
func (fs *reportingFS) Unwrap() vfs.FS { return fs.FS }

type reportingFile struct {
	vfs.File
	fs   *reportingFS
	name string
}

func (f *reportingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.fs.report("write", f.name, err)
}

func (f *reportingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.fs.report("write", f.name, err)
}

func (f *reportingFile) Sync() error { return f.fs.report("sync", f.name, f.File.Sync()) }

func (f *reportingFile) SyncData() error { return f.fs.report("sync", f.name, f.File.SyncData()) }

func (f *reportingFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.fs.report("sync", f.name, err)
}

var _ io.Writer = (*reportingFile)(nil)

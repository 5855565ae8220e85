package warcfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/meridian-crawler/meridian/fetcher/warcfile/cdxj"
)

// recoverDir repairs the leftover ".open" files of prefix in dir and returns
// how many it repaired. Files that another live Writer holds (its lock) are
// left alone. The indexes of a repaired file are rebuilt from it (with
// index; without, stale ones are removed), and so are those of a finished
// file whose indexes a crash left unfinished (see recoverIndex).
func recoverDir(dir, prefix string, index bool, log *slog.Logger) (int, error) {
	paths, err := filepath.Glob(filepath.Join(dir, globEscape(prefix)+"-*.warc.gz"+openSuffix))
	if err != nil {
		return 0, fmt.Errorf("warcfile: list %s: %w", dir, err)
	}
	n := 0
	var errs []error
	for _, p := range paths {
		ok, err := recoverFile(p, log)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			n++
			final := strings.TrimSuffix(p, openSuffix)
			if fileExists(final) {
				rebuildIndex(final, index, log)
			}
			removeStale(final+indexSuffix+openSuffix, log)
			removeStale(final+metaSuffix+openSuffix, log)
		}
	}
	changed := n > 0
	for _, suffix := range []string{indexSuffix, metaSuffix} {
		idxs, err := filepath.Glob(filepath.Join(dir, globEscape(prefix)+"-*.warc.gz"+suffix+openSuffix))
		if err != nil {
			return n, fmt.Errorf("warcfile: list %s: %w", dir, err)
		}
		for _, p := range idxs {
			changed = recoverIndex(p, suffix, index, log) || changed
		}
	}
	if changed {
		if err := syncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// rebuildIndex writes the sorted indexes of the WARC file final from the
// file itself, with index; a failure is logged (the file is intact, and
// `site warc-index` can index it later).
func rebuildIndex(final string, index bool, log *slog.Logger) {
	if !index {
		return
	}
	n, err := cdxj.IndexFile(final, filepath.Base(final), final+indexSuffix)
	if err != nil {
		log.Error("warcfile: cannot rebuild the indexes of a recovered file", "path", final, "err", err)
		return
	}
	log.Warn("warcfile: rebuilt the indexes of a recovered file", "path", final+indexSuffix, "lines", n.Captures, "metadata lines", n.Meta)
}

// removeStale removes a partial index file, if there is one.
func removeStale(path string, log *slog.Logger) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Error("warcfile: cannot remove a stale index", "path", path, "err", err)
	}
}

// recoverIndex handles the unfinished index path, "<name>" suffix ".open"
// (suffix: indexSuffix or metaSuffix), of a file that is not open any more
// (a crash after the file was renamed, before its indexes were): it
// rebuilds both indexes of "<name>" from it (with index) and removes both
// ".open" ones.
// It leaves path alone while "<name>.open" exists (the file is still being
// written, or could not be recovered) or a live Writer holds path's lock
// (it is finishing the indexes). It reports whether it changed anything.
func recoverIndex(path, suffix string, index bool, log *slog.Logger) bool {
	warc := strings.TrimSuffix(path, suffix+openSuffix)
	if fileExists(warc + openSuffix) {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false // gone meanwhile
	}
	defer f.Close()
	if err := tryLockFile(f); err != nil {
		return false
	}
	if fileExists(warc) {
		rebuildIndex(warc, index, log)
	}
	// Both: a Writer removes them before it unlocks either, so the other
	// one is no live Writer's either.
	removeStale(warc+indexSuffix+openSuffix, log)
	removeStale(warc+metaSuffix+openSuffix, log)
	return true
}

// globEscape escapes the metacharacters of filepath.Match in s.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// recoverFile cuts path to its last complete exchange and renames it without
// ".open"; a file without even a complete warcinfo record is removed. It
// reports whether it changed anything.
func recoverFile(path string, log *slog.Logger) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false, fmt.Errorf("warcfile: recover %s: %w", path, err)
	}
	defer f.Close()
	if err := tryLockFile(f); err != nil {
		log.Info("warcfile: leaving an open file that is in use", "path", path, "err", err)
		return false, nil
	}
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("warcfile: recover %s: %w", path, err)
	}
	good, err := lastCompleteExchange(f)
	if err != nil {
		return false, fmt.Errorf("warcfile: recover %s: %w", path, err)
	}
	final := strings.TrimSuffix(path, openSuffix)
	if good == 0 {
		log.Warn("warcfile: removing an open file with no complete record", "path", path, "bytes", st.Size())
		if err := os.Remove(path); err != nil {
			return false, fmt.Errorf("warcfile: recover %s: %w", path, err)
		}
		return true, nil
	}
	if fileExists(final) {
		log.Error("warcfile: cannot recover an open file: its final name is taken", "path", path, "final", final)
		return false, nil
	}
	if good < st.Size() {
		if err := f.Truncate(good); err != nil {
			return false, fmt.Errorf("warcfile: recover %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("warcfile: recover %s: %w", path, err)
	}
	if err := os.Rename(path, final); err != nil {
		return false, fmt.Errorf("warcfile: recover %s: %w", path, err)
	}
	log.Warn("warcfile: recovered an open file", "path", final, "kept", good, "dropped", st.Size()-good)
	return true, nil
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// lastCompleteExchange returns the offset just past the last gzip member of
// r that decompresses completely (checksum and length verified) and is not
// a request record: a request whose response (or revisit) member is
// missing or broken is dropped with it.
func lastCompleteExchange(r io.Reader) (int64, error) {
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, 64<<10)
	var (
		zr   gzip.Reader
		good int64
		head headWriter
	)
	for {
		if err := zr.Reset(br); err != nil {
			return good, nil // EOF or a broken member header
		}
		zr.Multistream(false)
		head.n = 0
		if _, err := io.Copy(&head, &zr); err != nil {
			return good, nil // truncated or corrupt member
		}
		end := cr.n - int64(br.Buffered())
		if !bytes.Contains(head.b[:head.n], []byte("\r\nWARC-Type: request\r\n")) {
			good = end
		}
	}
}

// headWriter keeps the first bytes written to it and discards the rest.
type headWriter struct {
	b [64]byte
	n int
}

func (h *headWriter) Write(p []byte) (int, error) {
	h.n += copy(h.b[h.n:], p)
	return len(p), nil
}

package warcfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"
)

// recoverDir repairs the leftover ".open" files of prefix in dir and returns
// how many it repaired. Files that another live Writer holds (its lock) are
// left alone.
func recoverDir(dir, prefix string, log *slog.Logger) (int, error) {
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
		}
	}
	if n > 0 {
		if err := syncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
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

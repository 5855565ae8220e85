package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/meridian-crawler/meridian/fetcher/warcfile/cdxj"
	"github.com/spf13/cobra"
)

// warcIndexCmd is `site warc-index DIR`: the sorted CDXJ indexes beside
// every WARC file in DIR, (re)built from the WARC files alone.
func warcIndexCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "warc-index DIR",
		Short: "(Re)build the sorted CDXJ indexes beside every WARC file in DIR, for pywb",
		Long: `(Re)build FILE.cdxj and FILE.cdxj-meta beside every WARC file FILE (*.warc,
*.warc.gz) in DIR, from the WARC file alone, in the CDXJ format of pywb's
cdxj-indexer (digests without their "sha1:"), sorted by their bytes:
FILE.cdxj, the replay index, has one line per response, revisit and resource
record; FILE.cdxj-meta, the side index, one line per metadata record (a
replay tool would take those for captures; the name does not end in .cdxj so
that a tool loading every *.cdxj of a directory leaves it out). Any WARC file
will do: one gzip member per record (offset and length are those of the
member) or uncompressed (those of the record). Each index is written to a
temporary file and renamed into place.

Files still being written (*.open) are left alone with a message: a running
writer owns them, and writes their index itself when it finishes them (with
--data's WARC files, the site does). A WARC file that does not read is
reported with the offset of the record that failed; the other files are
still indexed, and the exit status is non-zero.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return indexWARCDir(stdout, stderr, args[0])
		},
	}
}

// indexWARCDir indexes every WARC file in dir (see warcIndexCmd).
func indexWARCDir(stdout, stderr io.Writer, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("warc-index: %w", err)
	}
	var names []string
	for _, ent := range ents {
		name := ent.Name()
		switch {
		case ent.IsDir():
		case isWARCName(strings.TrimSuffix(name, ".open")) && strings.HasSuffix(name, ".open"):
			fmt.Fprintf(stderr, "warc-index: skipping %s: still being written (a running writer owns it and indexes it when done)\n", filepath.Join(dir, name))
		case isWARCName(name):
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		fmt.Fprintf(stdout, "no WARC files (*.warc, *.warc.gz) in %s\n", dir)
		return nil
	}
	failed := 0
	for _, name := range names {
		path := filepath.Join(dir, name)
		n, err := cdxj.IndexFile(path, name, path+".cdxj")
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "warc-index: %s: %v\n", path, err)
			continue
		}
		fmt.Fprintf(stdout, "%s.cdxj: %d lines; %s: %d lines\n", path, n.Captures, cdxj.MetaPath(path+".cdxj"), n.Meta)
	}
	if failed > 0 {
		return fmt.Errorf("warc-index: %d of %d WARC files in %s could not be indexed (see above)", failed, len(names), dir)
	}
	return nil
}

func isWARCName(name string) bool {
	return strings.HasSuffix(name, ".warc") || strings.HasSuffix(name, ".warc.gz")
}

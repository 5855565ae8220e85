package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/meridian-crawler/meridian/bench"
)

// writeFigures writes figs beside the JSON result at jsonPath: BASE.json's
// figure NAME goes to BASE-NAME.svg (in dir, if set, instead of beside it).
// It names each file it writes on w.
func writeFigures(w io.Writer, jsonPath, dir string, figs []bench.Figure) error {
	if jsonPath == "" {
		return nil
	}
	base := strings.TrimSuffix(jsonPath, ".json")
	if dir != "" {
		base = filepath.Join(dir, filepath.Base(base))
	}
	for _, f := range figs {
		path := base + "-" + f.Name + ".svg"
		if err := os.WriteFile(path, f.SVG, 0o644); err != nil {
			return fmt.Errorf("bench: plot: %w", err)
		}
		fmt.Fprintf(w, "wrote %s\n", path)
	}
	return nil
}

// runPlot is `bench plot`: it draws the figures of JSON results written
// with --json, again, without rerunning anything.
//
//	go run ./cmd/bench plot [--out DIR] bench/out/*.json
func runPlot(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench plot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("out", "", "write the SVG files into this directory (default: beside each JSON file)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bench plot [--out DIR] RESULT.json...   (results of site, correctness, cluster, partition, federation)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("bench plot: name one or more JSON results")
	}
	for _, path := range fs.Args() {
		figs, err := figuresOf(path)
		if err != nil {
			return err
		}
		if len(figs) == 0 {
			fmt.Fprintf(stderr, "%s: nothing to plot\n", path)
		}
		if err := writeFigures(stdout, path, *dir, figs); err != nil {
			return err
		}
	}
	return nil
}

// figuresOf reads a JSON result and returns its figures (none for the
// benchmarks that have no plots).
func figuresOf(path string) ([]bench.Figure, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench plot: %w", err)
	}
	var head struct {
		Benchmark string          `json:"benchmark"`
		Result    json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("bench plot: %s: %w", path, err)
	}
	switch head.Benchmark {
	case "site", "correctness":
		return decodeFigures[bench.SiteResult](path, head.Result)
	case "cluster":
		return decodeFigures[bench.ClusterResult](path, head.Result)
	case "partition":
		return decodeFigures[bench.PartitionResult](path, head.Result)
	case "federation":
		return decodeFigures[bench.FederationResult](path, head.Result)
	case "fresh":
		return decodeFigures[bench.FreshResult](path, head.Result)
	case "websim", "crawldb":
		return nil, nil
	default:
		return nil, fmt.Errorf("bench plot: %s: not a benchmark result (benchmark %q)", path, head.Benchmark)
	}
}

// decodeFigures decodes a result of type R and returns its figures.
func decodeFigures[R interface{ Figures() []bench.Figure }](path string, raw json.RawMessage) ([]bench.Figure, error) {
	var r R
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("bench plot: %s: %w", path, err)
	}
	return r.Figures(), nil
}

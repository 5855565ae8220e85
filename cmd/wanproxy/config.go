package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/wan"
)

// parseLink reads a --link value, NAME=LISTEN>UPSTREAM, into a link with
// the given delay and jitter.
func parseLink(s string, delay, jitter time.Duration) (wan.Link, error) {
	name, rest, ok := strings.Cut(s, "=")
	listen, upstream, ok2 := strings.Cut(rest, ">")
	if !ok || !ok2 || name == "" || listen == "" || upstream == "" {
		return wan.Link{}, fmt.Errorf("--link %q: want NAME=LISTEN>UPSTREAM, e.g. eu=127.0.0.1:0>127.0.0.1:7101", s)
	}
	return wan.Link{Name: name, Listen: listen, Upstream: upstream, Delay: delay, Jitter: jitter}, nil
}

// configFile is the JSON form of a set of links (--config). A link's delay
// and jitter, Go durations such as "40ms", default to --delay and --jitter.
type configFile struct {
	Links []struct {
		Name     string `json:"name"`
		Listen   string `json:"listen"`
		Upstream string `json:"upstream"`
		Delay    string `json:"delay,omitempty"`
		Jitter   string `json:"jitter,omitempty"`
	} `json:"links"`
}

// loadConfig reads the links of a --config file, reporting every problem at
// once.
func loadConfig(path string, delay, jitter time.Duration) ([]wan.Link, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	defer file.Close()
	var f configFile
	dec := json.NewDecoder(file)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	var links []wan.Link
	var errs []error
	duration := func(name, field, s string, def time.Duration) time.Duration {
		if s == "" {
			return def
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--config %s: link %q: %s: %w", path, name, field, err))
		}
		return d
	}
	for _, l := range f.Links {
		links = append(links, wan.Link{
			Name:     l.Name,
			Listen:   l.Listen,
			Upstream: l.Upstream,
			Delay:    duration(l.Name, "delay", l.Delay, delay),
			Jitter:   duration(l.Name, "jitter", l.Jitter, jitter),
		})
	}
	return links, errors.Join(errs...)
}

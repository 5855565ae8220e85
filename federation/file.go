package federation

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/partition"
)

// File is a federation file: which sites crawl together and how hosts are
// shared among them. The same file is given to every site.
type File struct {
	// Partitioner is "consistent" (identifier-seeded consistent hashing)
	// or "distance" (the nearest site to a host's GeoIP location).
	Partitioner string `json:"partitioner"`
	// Replicas per unit of capacity on the consistent-hashing ring; 0 → 200.
	Replicas int `json:"replicas,omitempty"`
	// Grace is how long a site may be suspect before its hosts go to
	// their next owner; "" → 30s.
	Grace Duration `json:"grace,omitempty"`
	// Sites of the federation.
	Sites []SiteSpec `json:"sites"`
}

// SiteSpec is one site of a federation file.
type SiteSpec struct {
	Name     string  `json:"name"`
	Lat      float64 `json:"lat"`
	Lon      float64 `json:"lon"`
	Endpoint string  `json:"endpoint"` // host:port the other sites call
	// Listen is where the site serves its endpoint, when that is not
	// Endpoint (a proxy or a NAT in between, as scripts/wan.sh puts).
	Listen   string  `json:"listen,omitempty"`
	Capacity float64 `json:"capacity,omitempty"`
}

// ListenAddr is where the site serves its federation endpoint.
func (s SiteSpec) ListenAddr() string {
	if s.Listen != "" {
		return s.Listen
	}
	return s.Endpoint
}

// Duration is a time.Duration written as a string ("30s") in JSON.
type Duration time.Duration

// UnmarshalJSON reads "30s" (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("a duration is a string such as \"30s\": %s", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ErrBadFile: the federation file is not valid.
var ErrBadFile = errors.New("federation: bad federation file")

// ReadFile reads and checks a federation file.
func ReadFile(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("federation: %w", err)
	}
	return ParseFile(b, path)
}

// ParseFile parses and checks a federation file's bytes; name is for the
// messages.
func ParseFile(b []byte, name string) (File, error) {
	var f File
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%w: %s: %w", ErrBadFile, name, err)
	}
	if err := f.check(); err != nil {
		return f, fmt.Errorf("%w: %s: %w", ErrBadFile, name, err)
	}
	return f, nil
}

// GraceOr returns the grace period, the default if unset.
func (f File) GraceOr() time.Duration {
	if f.Grace <= 0 {
		return 30 * time.Second
	}
	return time.Duration(f.Grace)
}

func (f File) replicas() int {
	if f.Replicas <= 0 {
		return 200
	}
	return f.Replicas
}

func (f *File) check() error {
	var errs []error
	switch f.Partitioner {
	case "consistent", "distance":
	default:
		errs = append(errs, fmt.Errorf("partitioner %q: want \"consistent\" or \"distance\"", f.Partitioner))
	}
	if f.Replicas < 0 || f.Replicas > 100_000 {
		errs = append(errs, fmt.Errorf("replicas %d: want 1..100000 (0: 200)", f.Replicas))
	}
	if f.Grace < 0 {
		errs = append(errs, fmt.Errorf("grace %v is negative", time.Duration(f.Grace)))
	}
	if len(f.Sites) == 0 {
		errs = append(errs, errors.New("no sites"))
	}
	seen := map[string]bool{}
	for i, s := range f.Sites {
		where := fmt.Sprintf("sites[%d] (%q)", i, s.Name)
		if s.Name == "" || seen[s.Name] {
			errs = append(errs, fmt.Errorf("%s: the name is empty or repeated", where))
		}
		if strings.HasPrefix(s.Name, LocalOutboxPrefix) {
			errs = append(errs, fmt.Errorf("%s: a site's name may not begin with %q", where, LocalOutboxPrefix))
		}
		seen[s.Name] = true
		if !(s.Lat >= -90 && s.Lat <= 90 && s.Lon >= -180 && s.Lon <= 180) {
			errs = append(errs, fmt.Errorf("%s: coordinates %v,%v out of range", where, s.Lat, s.Lon))
		}
		if s.Endpoint == "" || !strings.Contains(s.Endpoint, ":") {
			errs = append(errs, fmt.Errorf("%s: endpoint %q: want host:port", where, s.Endpoint))
		}
		if s.Capacity < 0 {
			errs = append(errs, fmt.Errorf("%s: negative capacity", where))
		}
	}
	if len(errs) == 0 {
		if _, err := f.partitioner(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Site returns the spec of the named site.
func (f File) Site(name string) (SiteSpec, bool) {
	for _, s := range f.Sites {
		if s.Name == name {
			return s, true
		}
	}
	return SiteSpec{}, false
}

func (f File) partitioner() (partition.Partitioner, error) {
	sites := make([]partition.Site, len(f.Sites))
	for i, s := range f.Sites {
		sites[i] = partition.Site{Name: s.Name, Lat: s.Lat, Lon: s.Lon, Capacity: s.Capacity}
	}
	return partition.New(f.Partitioner, sites, f.replicas())
}

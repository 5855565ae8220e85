package geodelay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/meridian-crawler/meridian/websim/geodb"
)

// Sentinel errors of the clients file; a *LineError wraps one of them.
var (
	// ErrSyntax: a line is not of either form.
	ErrSyntax = errors.New("geodelay: syntax error")
	// ErrBadAddr: the address does not parse or carries a zone.
	ErrBadAddr = errors.New("geodelay: bad address")
	// ErrUnknownCity: the city is not in geodb.Cities.
	ErrUnknownCity = errors.New("geodelay: unknown city")
	// ErrBadCoord: a latitude or longitude is out of range or not finite.
	ErrBadCoord = errors.New("geodelay: bad coordinates")
	// ErrDuplicate: an address is named twice.
	ErrDuplicate = errors.New("geodelay: duplicate address")
)

// maxErrors bounds the line errors Parse reports at once.
const maxErrors = 20

// maxLine bounds a line of the clients file, in bytes.
const maxLine = 4096

// Client is a named client: its source address and where it is.
type Client struct {
	// Addr is the client's source address (never an IPv4-mapped IPv6 one).
	Addr netip.Addr
	// Name labels the client: its city's name, or the name given after the
	// coordinates (possibly empty).
	Name string
	// Loc is where the client is.
	Loc Point
}

// String returns c as a line of the clients file in the coordinates form,
// which Parse reads back to c.
func (c Client) String() string {
	s := c.Addr.String() + " " + strconv.FormatFloat(c.Loc.Lat, 'g', -1, 64) + " " + strconv.FormatFloat(c.Loc.Lon, 'g', -1, 64)
	if c.Name != "" {
		s += " " + c.Name
	}
	return s
}

// LineError is a problem with one line of a clients file.
type LineError struct {
	File string // as given to Parse
	Line int    // 1-based
	Err  error  // wraps a sentinel error of this package
}

// Error returns "FILE:LINE: problem".
func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the problem.
func (e *LineError) Unwrap() error { return e.Err }

// ReadFile parses the clients file at path (see Parse).
func ReadFile(path string) ([]Client, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("geodelay: clients file: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a clients file from r; file names it in errors. It returns
// the clients in file order, or every bad line (up to 20) as *LineErrors
// joined with errors.Join.
func Parse(r io.Reader, file string) ([]Client, error) {
	var (
		out   []Client
		errs  []error
		first = map[netip.Addr]int{} // line of each address
		n     int
	)
	fail := func(err error) bool {
		errs = append(errs, &LineError{File: file, Line: n, Err: err})
		return len(errs) >= maxErrors
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxLine)
	for sc.Scan() {
		n++
		c, ok, err := parseLine(sc.Text())
		if err == nil && ok {
			if l, dup := first[c.Addr]; dup {
				err = fmt.Errorf("%w %s (first on line %d)", ErrDuplicate, c.Addr, l)
			} else {
				first[c.Addr] = n
				out = append(out, c)
			}
		}
		if err != nil && fail(err) {
			errs = append(errs, fmt.Errorf("geodelay: %s: too many errors, stopped at line %d", file, n))
			return nil, errors.Join(errs...)
		}
	}
	if err := sc.Err(); err != nil {
		n++
		if errors.Is(err, bufio.ErrTooLong) {
			fail(fmt.Errorf("%w: line longer than %d bytes", ErrSyntax, maxLine))
		} else {
			errs = append(errs, fmt.Errorf("geodelay: read %s: %w", file, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// parseLine parses one line; ok is false for a blank or comment line.
func parseLine(line string) (c Client, ok bool, err error) {
	if !utf8.ValidString(line) {
		return c, false, fmt.Errorf("%w: not UTF-8", ErrSyntax)
	}
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	for _, r := range line {
		if unicode.IsControl(r) && r != '\t' && r != '\r' {
			return c, false, fmt.Errorf("%w: control character %q", ErrSyntax, r)
		}
	}
	f := strings.Fields(line)
	switch len(f) {
	case 0:
		return c, false, nil
	case 1:
		return c, false, fmt.Errorf("%w: %q needs a city or LAT LON after it", ErrSyntax, f[0])
	}
	a, err := netip.ParseAddr(f[0])
	if err != nil {
		return c, false, fmt.Errorf("%w %q: %w", ErrBadAddr, f[0], err)
	}
	if a.Zone() != "" {
		return c, false, fmt.Errorf("%w %q: has a zone", ErrBadAddr, f[0])
	}
	c.Addr = a.Unmap()
	lat, latErr := strconv.ParseFloat(f[1], 64)
	if latErr != nil && !isNumberish(f[1]) {
		// The city form.
		name := strings.Join(f[1:], " ")
		city, found := cityNamed(name)
		if !found {
			return c, false, fmt.Errorf("%w %q (a city of geodb.Cities, or LAT LON)", ErrUnknownCity, name)
		}
		c.Name, c.Loc = city.Name, PointOf(city)
		return c, true, nil
	}
	if latErr != nil {
		return c, false, fmt.Errorf("%w: latitude %q: %w", ErrBadCoord, f[1], latErr)
	}
	if len(f) < 3 {
		return c, false, fmt.Errorf("%w: latitude %s needs a longitude after it", ErrSyntax, f[1])
	}
	lon, err := strconv.ParseFloat(f[2], 64)
	if err != nil {
		return c, false, fmt.Errorf("%w: longitude %q: %w", ErrBadCoord, f[2], err)
	}
	c.Loc = Point{Lat: lat, Lon: lon}
	if !c.Loc.Valid() {
		return c, false, fmt.Errorf("%w: %s %s: latitude must be in [-90, 90] and longitude in [-180, 180]", ErrBadCoord, f[1], f[2])
	}
	c.Name = strings.Join(f[3:], " ")
	return c, true, nil
}

// isNumberish reports whether s looks like a number that failed to parse
// (such as "1e999" or "5O.1"), so that it is reported as a bad coordinate
// rather than an unknown city.
func isNumberish(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	return c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')
}

// cityNamed finds the city of geodb.Cities called name, ignoring case.
func cityNamed(name string) (geodb.City, bool) {
	for _, c := range geodb.Cities {
		if strings.EqualFold(c.Name, name) {
			return c, true
		}
	}
	return geodb.City{}, false
}

// Check reports every problem with clients at once (joined with
// errors.Join): invalid or zoned addresses, IPv4-mapped addresses,
// coordinates out of range and addresses named twice. Clients read by
// Parse pass it.
func Check(clients []Client) error {
	var errs []error
	seen := make(map[netip.Addr]int, len(clients))
	for i, c := range clients {
		switch {
		case !c.Addr.IsValid():
			errs = append(errs, fmt.Errorf("client %d (%q): %w: no address", i, c.Name, ErrBadAddr))
			continue
		case c.Addr.Zone() != "" || c.Addr.Is4In6():
			errs = append(errs, fmt.Errorf("client %d: %w %s: zoned or IPv4-mapped", i, ErrBadAddr, c.Addr))
		}
		if !c.Loc.Valid() {
			errs = append(errs, fmt.Errorf("client %d (%s): %w %v", i, c.Addr, ErrBadCoord, c.Loc))
		}
		if j, dup := seen[c.Addr]; dup {
			errs = append(errs, fmt.Errorf("client %d: %w %s (also client %d)", i, ErrDuplicate, c.Addr, j))
		} else {
			seen[c.Addr] = i
		}
	}
	return errors.Join(errs...)
}

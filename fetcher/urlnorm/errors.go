package urlnorm

import (
	"errors"
	"strconv"
)

// Sentinel errors; the errors Normalize and Resolve return wrap one of them
// in an *Error that names the offending input.
var (
	// ErrScheme: the URL's scheme is not http or https (mailto:, javascript:, ftp:, ...).
	ErrScheme = errors.New("urlnorm: unsupported scheme")
	// ErrHost: the host is empty or invalid (bad characters, a bad IPv6
	// literal or one with a zone identifier, bad IDN) or the port is not a
	// number in [1, 65535].
	ErrHost = errors.New("urlnorm: bad host or port")
	// ErrTooLong: the URL is longer than Options.MaxLen.
	ErrTooLong = errors.New("urlnorm: url too long")
	// ErrSyntax: the input is not an absolute URL (Normalize) or the Base is
	// not set or not normalised.
	ErrSyntax = errors.New("urlnorm: bad url syntax")
)

// maxErrInput is how much of the offending input an Error keeps.
const maxErrInput = 96

// Error is a normalisation failure: one of the sentinel errors and the
// input (truncated to about 100 bytes) that caused it.
type Error struct {
	Err   error  // ErrScheme, ErrHost, ErrTooLong or ErrSyntax, or an error wrapping one
	Input string // the offending input, truncated
}

// Error returns "<sentinel text>: <quoted input>".
func (e *Error) Error() string { return e.Err.Error() + ": " + strconv.Quote(e.Input) }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func wrap(err error, input []byte) error {
	s := input
	suffix := ""
	if len(s) > maxErrInput {
		s, suffix = s[:maxErrInput], "..."
	}
	return &Error{Err: err, Input: string(s) + suffix}
}

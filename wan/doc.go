// Package wan emulates a wide-area network between Meridian's sites, in the
// process, for tests and benchmarks.
//
// An [Emulator] runs one TCP proxy per [Link]: clients connect to the link's
// Listen address and the emulator forwards every connection to its Upstream,
// holding each piece of data for the link's one-way Delay (± Jitter) in each
// direction, so a request and its response together pay at least 2×Delay.
// The delay can be changed while connections are open ([Emulator.SetDelay],
// for a latency sweep), and the bytes that cross each link are counted
// ([Emulator.Stats], for inter-site traffic figures).
//
// The proxies are Shopify's toxiproxy (github.com/Shopify/toxiproxy/v2),
// run in the process without its HTTP API. The delay itself is a toxic of
// this package registered with toxiproxy, with the semantics of toxiproxy's
// latency toxic: each chunk that toxiproxy reads is handed on Delay ± Jitter
// after it was read, in order. toxiproxy's own latency toxic is not used
// because, in v2.5.0, changing it while connections are open rewrites fields
// that the connections' goroutines read without synchronisation (a data race
// under go test -race), and because its goroutines block for good when the
// receiving side of a connection goes away with data in flight, which would
// leave goroutines behind after [Emulator.Close].
//
// What it does not emulate: connection set-up is not delayed (toxiproxy
// accepts locally and dials the upstream at once; a TLS handshake, being
// data, does pay its round trips); there is no bandwidth limit or loss; and a
// half-close (CloseWrite) by either side ends the whole connection, as
// toxiproxy does. HTTP/1.1, HTTP/2 and gRPC do not rely on half-closes.
//
// Where the kernel has sch_netem, scripts/wan.sh puts each site in a network
// namespace with tc netem instead; cmd/wanproxy is this package as a command,
// the script's fallback when netem is missing.
package wan

import "errors"

// Errors returned by the package, wrapped with context; match with errors.Is.
var (
	// ErrClosed is returned by an Emulator that has been closed.
	ErrClosed = errors.New("wan: closed")
	// ErrUnknownLink is returned for a link name the Emulator does not have.
	ErrUnknownLink = errors.New("wan: unknown link")
	// ErrInvalidLink is returned by Start and SetDelay for a link that
	// cannot be run as given; the message says what is wrong.
	ErrInvalidLink = errors.New("wan: invalid link")
)

package wan

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// Emulator runs a set of links. Its methods are safe for concurrent use.
type Emulator struct {
	server *toxiproxy.ApiServer // holds the proxies; its HTTP API is not served
	links  map[string]*link     // fixed by Start
	names  []string             // links' names, sorted

	// closing is closed when Close begins: stages stop waiting for readers.
	closing chan struct{}
	// closed is closed when Close has finished.
	closed chan struct{}
	// stages counts the stage goroutines of open connections (two per
	// connection); Close waits for them.
	stages    sync.WaitGroup
	closeOnce sync.Once

	mu struct {
		sync.Mutex
		// stopWatch stops the watch on Start's context.
		stopWatch func() bool
	}
}

// link is the running state of one Link.
type link struct {
	em       *Emulator
	addr     string // bound listen address
	upstream string
	shape    atomic.Pointer[shape]
	up, down atomic.Int64 // bytes handed on towards the upstream, and back
	conns    atomic.Int64 // connections accepted
}

// Stats counts what crossed one link since Start.
type Stats struct {
	// Upstream is the number of bytes the link has passed on, after their
	// delay, from clients towards the upstream; Downstream, from the
	// upstream back towards clients.
	Upstream, Downstream int64
	// Conns is the number of connections the link has accepted.
	Conns int64
}

// Start validates links, reporting every problem at once, and starts one
// proxy per link. The Emulator closes itself when ctx is done; Close stops
// it earlier.
func Start(ctx context.Context, links []Link) (*Emulator, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("wan: start: %w", err)
	}
	if err := validateLinks(links); err != nil {
		return nil, err
	}
	e := &Emulator{
		server:  toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
		links:   make(map[string]*link, len(links)),
		closing: make(chan struct{}),
		closed:  make(chan struct{}),
	}
	for _, l := range links {
		ln, err := e.startLink(l)
		if err != nil {
			e.shutdown()
			return nil, err
		}
		e.links[l.Name] = ln
		e.names = append(e.names, l.Name)
	}
	sort.Strings(e.names)
	stop := context.AfterFunc(ctx, func() { _ = e.Close() })
	e.mu.Lock()
	e.mu.stopWatch = stop
	e.mu.Unlock()
	return e, nil
}

// startLink makes a link's proxy, puts a stage at the end of each
// direction's chain and starts listening.
func (e *Emulator) startLink(l Link) (*link, error) {
	ln := &link{em: e, upstream: l.Upstream}
	ln.shape.Store(&shape{delay: l.Delay, jitter: l.Jitter})
	proxy := toxiproxy.NewProxy(e.server, l.Name, l.Listen, l.Upstream)
	for _, dir := range []struct {
		stream string
		bytes  *atomic.Int64
		conns  *atomic.Int64
	}{{"upstream", &ln.up, &ln.conns}, {"downstream", &ln.down, nil}} {
		body := fmt.Sprintf(`{"name":"wan_%s","type":%q,"stream":%q,"toxicity":1}`, dir.stream, toxicType, dir.stream)
		w, err := proxy.Toxics.AddToxicJson(strings.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("wan: link %q: add %s stage: %w", l.Name, dir.stream, err)
		}
		st, ok := w.Toxic.(*stage)
		if !ok {
			return nil, fmt.Errorf("wan: link %q: toxiproxy made a %T for the %s stage", l.Name, w.Toxic, dir.stream)
		}
		st.link, st.bytes, st.conns = ln, dir.bytes, dir.conns
	}
	if err := e.server.Collection.Add(proxy, true); err != nil {
		return nil, fmt.Errorf("wan: link %q: listen on %s: %w", l.Name, l.Listen, err)
	}
	ln.addr = proxy.Listen
	return ln, nil
}

// lookup returns the named link.
func (e *Emulator) lookup(name string) (*link, error) {
	ln, ok := e.links[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownLink, name)
	}
	return ln, nil
}

// Addr returns the address the named link listens on (with the port chosen
// when Listen's was 0), or "" if there is no such link.
func (e *Emulator) Addr(name string) string {
	if ln, ok := e.links[name]; ok {
		return ln.addr
	}
	return ""
}

// Names returns the links' names, sorted.
func (e *Emulator) Names() []string {
	return append([]string(nil), e.names...)
}

// Links returns the links as they run now: Listen is the bound address and
// Delay and Jitter are the latest set.
func (e *Emulator) Links() []Link {
	out := make([]Link, 0, len(e.names))
	for _, name := range e.names {
		ln := e.links[name]
		s := ln.shape.Load()
		out = append(out, Link{Name: name, Listen: ln.addr, Upstream: ln.upstream, Delay: s.delay, Jitter: s.jitter})
	}
	return out
}

// SetDelay changes a link's one-way delay and jitter while it runs. Data
// that the link has yet to start holding, including data already read and
// queued, is delivered delay ± jitter after it was read; a chunk being held
// keeps the delay it was given.
func (e *Emulator) SetDelay(name string, delay, jitter time.Duration) error {
	select {
	case <-e.closing:
		return fmt.Errorf("wan: set delay of %q: %w", name, ErrClosed)
	default:
	}
	ln, err := e.lookup(name)
	if err != nil {
		return fmt.Errorf("wan: set delay: %w", err)
	}
	if err := validShape(delay, jitter); err != nil {
		return fmt.Errorf("%w %q: %w", ErrInvalidLink, name, err)
	}
	ln.shape.Store(&shape{delay: delay, jitter: jitter})
	return nil
}

// Stats returns what has crossed the named link so far. It still answers
// after Close.
func (e *Emulator) Stats(name string) (Stats, error) {
	ln, err := e.lookup(name)
	if err != nil {
		return Stats{}, fmt.Errorf("wan: stats: %w", err)
	}
	return Stats{Upstream: ln.up.Load(), Downstream: ln.down.Load(), Conns: ln.conns.Load()}, nil
}

// Close stops every link: their listeners and open connections are
// closed, data still held is dropped, and Close returns once every
// connection's stages have stopped (toxiproxy's reader and writer for a
// connection end as their sockets close). Calling Close again, or after
// Start's context is done, returns nil.
func (e *Emulator) Close() error {
	e.mu.Lock()
	stop := e.mu.stopWatch
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
	e.shutdown()
	return nil
}

// shutdown stops the proxies and waits for the stages, once.
func (e *Emulator) shutdown() {
	e.closeOnce.Do(func() {
		// Stopping a proxy closes its listener and both sockets of each of
		// its connections; every stage's input then closes. Stages that
		// hold data for a socket already closed are blocked until closing.
		e.server.Collection.Clear()
		close(e.closing)
		e.stages.Wait()
		close(e.closed)
	})
}

// Done is closed once the Emulator has been closed, by Close or by the end
// of Start's context.
func (e *Emulator) Done() <-chan struct{} {
	return e.closed
}

// Compile-time checks that stage is the kind of toxic toxiproxy expects.
var (
	_ toxics.Toxic         = (*stage)(nil)
	_ toxics.BufferedToxic = (*stage)(nil)
	_ toxics.StatefulToxic = (*stage)(nil)
)

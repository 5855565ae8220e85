package wan

import (
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// toxicType is the name under which the stage toxic is registered with
// toxiproxy (its registry is process-wide).
const toxicType = "meridian_wan_stage"

// stageBuffer is how many chunks (of up to 32 KiB each, as toxiproxy reads
// them) may wait in a stage: like toxiproxy's latency toxic, enough for a
// fast sender to keep the delayed path full.
const stageBuffer = 1024

func init() {
	toxics.Register(toxicType, new(stage))
}

// stage is the toxic that delays and counts one direction of one link.
// toxiproxy runs its Pipe in one goroutine per connection, as the last
// toxic of the direction's chain, feeding the goroutine that writes to the
// receiving socket. Its fields are set by Start before the proxy accepts
// its first connection and not changed after.
type stage struct {
	link  *link
	bytes *atomic.Int64 // bytes handed on in this direction
	conns *atomic.Int64 // connections started; nil for the downstream stage
}

// GetBufferSize sizes the channel in front of the stage (toxics.BufferedToxic).
func (t *stage) GetBufferSize() int { return stageBuffer }

// NewState is called by toxiproxy, in the goroutine that accepts a
// connection and before that connection's goroutines start
// (toxics.StatefulToxic). It registers the connection's stage with the
// Emulator, which waits for it on Close.
func (t *stage) NewState() interface{} {
	t.link.em.stages.Add(1)
	if t.conns != nil {
		t.conns.Add(1)
	}
	return nil
}

// Pipe moves chunks from the stage's input to its output, each no sooner
// than its link's delay after toxiproxy read it, in order, until the input
// closes (the sending socket is gone) or toxiproxy interrupts the stage.
func (t *stage) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				t.link.em.stages.Done()
				return
			}
			if t.pass(stub, c) {
				return
			}
		}
	}
}

// pass holds c until it is due and hands it on. It reports whether
// toxiproxy interrupted the stage meanwhile; c is handed on at once then,
// not lost. Once the Emulator is closing, c is dropped rather than waited
// for: the socket it was going to may have been closed, and then nobody
// reads the output.
func (t *stage) pass(stub *toxics.ToxicStub, c *stream.StreamChunk) (interrupted bool) {
	closing := t.link.em.closing
	due := c.Timestamp.Add(t.link.shape.Load().draw(rand.Int64N))
	if wait := time.Until(due); wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-stub.Interrupt:
			interrupted = true
		case <-closing:
		}
		timer.Stop()
	}
	// Count before handing on, so that a reader who has the bytes also
	// sees them counted; take them back if they are dropped.
	n := int64(len(c.Data))
	t.bytes.Add(n)
	select {
	case stub.Output <- c:
	case <-closing:
		t.bytes.Add(-n)
	}
	return interrupted
}

package wan

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// upstream is a TCP server on loopback owned by a test; its goroutines
// end in its cleanup.
type upstream struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// startUpstream serves each connection with handle until the test ends.
func startUpstream(t *testing.T, handle func(net.Conn)) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{ln: ln}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(u.close)
	return u
}

func (u *upstream) addr() string { return u.ln.Addr().String() }

// close stops accepting, closes every connection and waits for the handlers.
func (u *upstream) close() {
	u.ln.Close()
	u.mu.Lock()
	for _, c := range u.conns {
		c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// answerFrames answers each request frame (an 8-byte big-endian length, then
// the payload) with the payload's SHA-256, then the payload as a frame again.
// The hash checks the way up, the echo the way down.
func answerFrames(c net.Conn) {
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		payload := make([]byte, binary.BigEndian.Uint64(hdr[:]))
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		sum := sha256.Sum256(payload)
		resp := append(sum[:], hdr[:]...)
		if _, err := c.Write(append(resp, payload...)); err != nil {
			return
		}
	}
}

// roundTrip sends payload as a frame on c and reads the answer, checking that
// both ways carried the bytes intact. It returns the time from the first
// byte written to the last byte read.
func roundTrip(c net.Conn, payload []byte) (time.Duration, error) {
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], uint64(len(payload)))
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(append(hdr[:], payload...))
		werr <- err
	}()
	resp := make([]byte, sha256.Size+8+len(payload))
	_, rerr := io.ReadFull(c, resp)
	rtt := time.Since(start)
	if err := <-werr; err != nil {
		return rtt, fmt.Errorf("write: %w", err)
	}
	if rerr != nil {
		return rtt, fmt.Errorf("read: %w", rerr)
	}
	want := sha256.Sum256(payload)
	if !bytes.Equal(resp[:sha256.Size], want[:]) {
		return rtt, fmt.Errorf("upstream received other bytes than were sent")
	}
	echo := resp[sha256.Size:]
	if !bytes.Equal(echo[:8], hdr[:]) || sha256.Sum256(echo[8:]) != want {
		return rtt, fmt.Errorf("client received other bytes than upstream sent")
	}
	return rtt, nil
}

// responseSize is the size of upstream's answer to a payload of n bytes.
func responseSize(n int) int64 { return int64(sha256.Size + 8 + n) }

// startEmulator starts links for the test and closes them when it ends.
func startEmulator(t *testing.T, links ...Link) *Emulator {
	t.Helper()
	e, err := Start(context.Background(), links)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// dial connects to addr and closes the connection when the test ends.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

package wan

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// tolerance absorbs clock reading around the lower bounds below; the delay is
// measured from when toxiproxy read the data, so no round trip should be
// shorter than 2×Delay at all.
const tolerance = time.Millisecond

func TestRoundTripPaysTwiceTheDelay(t *testing.T) {
	const delay = 25 * time.Millisecond
	up := startUpstream(t, answerFrames)
	e := startEmulator(t, Link{Name: "eu", Listen: "127.0.0.1:0", Upstream: up.addr(), Delay: delay})
	c := dial(t, e.Addr("eu"))
	for i := range 4 {
		rtt, err := roundTrip(c, []byte("ping"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round trip %d: %v", i, rtt)
		if rtt < 2*delay-tolerance {
			t.Errorf("round trip %d took %v, want at least 2×%v", i, rtt, delay)
		}
	}
}

func TestLargePayloadIntactBothWaysAndCounted(t *testing.T) {
	const size = 8 << 20
	payload := make([]byte, size)
	rand.NewChaCha8([32]byte{7}).Read(payload)
	up := startUpstream(t, answerFrames)
	e := startEmulator(t, Link{Name: "us", Listen: "127.0.0.1:0", Upstream: up.addr(),
		Delay: 5 * time.Millisecond, Jitter: 4 * time.Millisecond})
	for range 2 { // two connections, one frame each
		if _, err := roundTrip(dial(t, e.Addr("us")), payload); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.Stats("us")
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Upstream: 2 * (8 + size), Downstream: 2 * responseSize(size), Conns: 2}
	if got != want {
		t.Errorf("stats: got %+v, want %+v", got, want)
	}
}

func TestSetDelayChangesDelayLive(t *testing.T) {
	const high = 100 * time.Millisecond
	up := startUpstream(t, answerFrames)
	e := startEmulator(t, Link{Name: "asia", Listen: "127.0.0.1:0", Upstream: up.addr()})
	c := dial(t, e.Addr("asia")) // one connection, open throughout
	measure := func() time.Duration {
		t.Helper()
		rtt, err := roundTrip(c, []byte("ping"))
		if err != nil {
			t.Fatal(err)
		}
		return rtt
	}
	t.Logf("no delay: %v", measure())

	if err := e.SetDelay("asia", high, 0); err != nil {
		t.Fatal(err)
	}
	if rtt := measure(); rtt < 2*high-tolerance {
		t.Errorf("after SetDelay(%v): round trip %v, want at least %v", high, rtt, 2*high)
	}
	if l := e.Links()[0]; l.Delay != high || l.Jitter != 0 || l.Listen != e.Addr("asia") {
		t.Errorf("Links after SetDelay: %+v", l)
	}

	if err := e.SetDelay("asia", 0, 0); err != nil {
		t.Fatal(err)
	}
	// A loose upper bound: the delay is gone, so the round trip is far from
	// what it was (not a performance figure).
	if rtt := measure(); rtt >= 2*high {
		t.Errorf("after SetDelay(0): round trip %v, want well under %v", rtt, 2*high)
	}

	if err := e.SetDelay("asia", time.Millisecond, 2*time.Millisecond); !errors.Is(err, ErrInvalidLink) {
		t.Errorf("jitter over delay: got %v, want ErrInvalidLink", err)
	}
	if err := e.SetDelay("mars", time.Millisecond, 0); !errors.Is(err, ErrUnknownLink) {
		t.Errorf("unknown link: got %v, want ErrUnknownLink", err)
	}
	if _, err := e.Stats("mars"); !errors.Is(err, ErrUnknownLink) {
		t.Errorf("stats of unknown link: got %v, want ErrUnknownLink", err)
	}
	if a := e.Addr("mars"); a != "" {
		t.Errorf("Addr of unknown link: %q", a)
	}
}

func TestJitterBounds(t *testing.T) {
	const delay, jitter = 20 * time.Millisecond, 8 * time.Millisecond
	s := &shape{delay: delay, jitter: jitter}
	if got := s.draw(func(int64) int64 { return 0 }); got != delay-jitter {
		t.Errorf("lowest draw %v, want %v", got, delay-jitter)
	}
	if got := s.draw(func(n int64) int64 { return n - 1 }); got != delay+jitter {
		t.Errorf("highest draw %v, want %v", got, delay+jitter)
	}
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[bool]int{}
	for range 1000 {
		d := s.draw(r.Int64N)
		if d < delay-jitter || d > delay+jitter {
			t.Fatalf("draw %v outside %v ± %v", d, delay, jitter)
		}
		seen[d < delay]++
	}
	if seen[true] < 400 || seen[false] < 400 {
		t.Errorf("draws below/above the delay: %v, want about half each", seen)
	}
	if got := (&shape{delay: delay}).draw(nil); got != delay {
		t.Errorf("no jitter: %v, want %v", got, delay)
	}

	// Over the wire: every round trip pays at least 2×(delay-jitter).
	up := startUpstream(t, answerFrames)
	e := startEmulator(t, Link{Name: "j", Listen: "127.0.0.1:0", Upstream: up.addr(), Delay: delay, Jitter: jitter})
	c := dial(t, e.Addr("j"))
	for range 5 {
		rtt, err := roundTrip(c, []byte("ping"))
		if err != nil {
			t.Fatal(err)
		}
		if rtt < 2*(delay-jitter)-tolerance {
			t.Errorf("round trip %v, want at least %v", rtt, 2*(delay-jitter))
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	_, err := Start(context.Background(), []Link{
		{Name: "", Listen: "127.0.0.1:0", Upstream: "127.0.0.1:1"},
		{Name: "a", Listen: "nowhere", Upstream: "127.0.0.1:1", Delay: -time.Second},
		{Name: "a", Listen: "127.0.0.1:0", Upstream: "127.0.0.1:1", Delay: time.Millisecond, Jitter: time.Second},
	})
	if !errors.Is(err, ErrInvalidLink) {
		t.Fatalf("got %v, want ErrInvalidLink", err)
	}
	for _, want := range []string{"no name", `listen address "nowhere"`, "negative delay", "exceeds delay", "name used twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if _, err := Start(context.Background(), nil); !errors.Is(err, ErrInvalidLink) {
		t.Errorf("no links: got %v, want ErrInvalidLink", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, []Link{{Name: "a", Listen: "127.0.0.1:0", Upstream: "127.0.0.1:1"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: got %v", err)
	}
}

func TestStartFailureStopsStartedLinks(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()
	_, err = Start(context.Background(), []Link{
		{Name: "a", Listen: freeAddr, Upstream: busy.Addr().String()},
		{Name: "b", Listen: busy.Addr().String(), Upstream: busy.Addr().String()},
	})
	if err == nil || !strings.Contains(err.Error(), `link "b"`) {
		t.Fatalf("got %v, want an error about link b", err)
	}
	if c, err := net.Dial("tcp", freeAddr); err == nil {
		c.Close()
		t.Errorf("link a still listens after Start failed")
	}
	goleak.VerifyNone(t)
}

// TestCloseStopsEverything closes an emulator while data is held on its
// links, including data bound for a client that has gone away, and checks
// that nothing is left running.
func TestCloseStopsEverything(t *testing.T) {
	flood := make([]byte, 2<<20)
	up := startUpstream(t, func(c net.Conn) { _, _ = c.Write(flood) })
	const delay = 100 * time.Millisecond
	e, err := Start(context.Background(), []Link{{Name: "eu", Listen: "127.0.0.1:0", Upstream: up.addr(), Delay: delay}})
	if err != nil {
		t.Fatal(err)
	}
	addr := e.Addr("eu")
	quiet, err := net.Dial("tcp", addr) // never reads
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	gone, err := net.Dial("tcp", addr) // goes away with data in flight
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if s, _ := e.Stats("eu"); s.Conns == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the link did not accept both connections")
		}
	}
	gone.Close()
	// Past the delay, the link has tried to deliver to the closed socket.
	time.Sleep(2 * delay)

	start := time.Now()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	select {
	case <-e.Done():
	default:
		t.Error("Done not closed after Close")
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := e.SetDelay("eu", 0, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("SetDelay after Close: got %v, want ErrClosed", err)
	}
	if s, err := e.Stats("eu"); err != nil || s.Conns != 2 {
		t.Errorf("Stats after Close: %+v, %v", s, err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("link still listens after Close")
	}
	quiet.Close()
	up.close()
	goleak.VerifyNone(t)
}

func TestContextEndClosesEmulator(t *testing.T) {
	up := startUpstream(t, answerFrames)
	ctx, cancel := context.WithCancel(context.Background())
	e, err := Start(ctx, []Link{{Name: "eu", Listen: "127.0.0.1:0", Upstream: up.addr(), Delay: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, e.Addr("eu"))
	if _, err := roundTrip(c, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-e.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("emulator still running 5s after its context ended")
	}
	if _, err := roundTrip(c, []byte("ping")); err == nil {
		t.Error("connection still carries data after the context ended")
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close after the context ended: %v", err)
	}
}

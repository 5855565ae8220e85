package plan

import (
	"math"
	"testing"
	"time"
)

// ---------------------------------------------------------------- Budgets

func TestHostSpent(t *testing.T) {
	tests := []struct {
		name              string
		fetched, inFlight int64
		budget            int
		want              bool
	}{
		{"a new host", 0, 0, 100, false},
		{"one page short", 99, 0, 100, false},
		{"the budget reached exactly", 100, 0, 100, true},
		{"past the budget", 150, 0, 100, true},
		{"rounds in flight reach it", 90, 10, 100, true},
		{"rounds in flight one short", 90, 9, 100, false},
		{"a budget of none", 0, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HostSpent(tt.fetched, tt.inFlight, tt.budget); got != tt.want {
				t.Errorf("HostSpent(%d, %d, %d) = %v, want %v", tt.fetched, tt.inFlight, tt.budget, got, tt.want)
			}
		})
	}
}

func TestRoundBudget(t *testing.T) {
	const hostDelay = 100 * time.Millisecond
	span := 9 * hostDelay // k = 10 at the host delay
	tests := []struct {
		name      string
		perHost   int
		hostDelay time.Duration
		delay     time.Duration
		busyUntil time.Time
		span      time.Duration
		want      int
	}{
		{"a host at the host delay gets k", 10, hostDelay, hostDelay, time.Time{}, span, 10},
		{"its earlier URLs done long ago", 10, hostDelay, hostDelay, t0.Add(-time.Minute), span, 10},
		{"busy until now", 10, hostDelay, hostDelay, t0, span, 10},
		{"busy for a third of the span", 10, hostDelay, hostDelay, t0.Add(300 * time.Millisecond), span, 7},
		{"busy to the span's end exactly", 10, hostDelay, hostDelay, t0.Add(span), span, 1},
		{"busy a nanosecond past the span", 10, hostDelay, hostDelay, t0.Add(span + 1), span, 0},
		{"a Crawl-delay of 450ms", 10, hostDelay, 450 * time.Millisecond, time.Time{}, span, 3},
		{"a delay longer than the span: one URL", 10, hostDelay, 2 * time.Second, time.Time{}, span, 1},
		{"capped at k", 4, hostDelay, hostDelay, time.Time{}, span, 4},
		{"a delay below the host delay counts as the host delay", 100, hostDelay, hostDelay / 2, time.Time{}, span, 10},
		{"no host delay: k, busy or not", 10, 0, 0, t0.Add(time.Hour), span, 10},
		{"no span: k, busy or not", 10, hostDelay, hostDelay, t0.Add(time.Hour), 0, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RoundBudget(tt.perHost, tt.hostDelay, tt.delay, t0, tt.busyUntil, tt.span); got != tt.want {
				t.Errorf("RoundBudget(%d, %v, %v, busy t0%+v, %v) = %d, want %d", tt.perHost, tt.hostDelay, tt.delay, tt.busyUntil.Sub(t0), tt.span, got, tt.want)
			}
		})
	}
}

func TestIPBudget(t *testing.T) {
	const ipDelay, span = 10 * time.Millisecond, 900 * time.Millisecond
	tests := []struct {
		name      string
		ipDelay   time.Duration
		busyUntil time.Time
		want      int
	}{
		{"an idle address", ipDelay, time.Time{}, 91},
		{"busy for half the span", ipDelay, t0.Add(450 * time.Millisecond), 46},
		{"busy to the span's end exactly", ipDelay, t0.Add(span), 1},
		{"busy a nanosecond past the span", ipDelay, t0.Add(span + 1), 0},
		{"no address delay: no limit", 0, t0.Add(time.Hour), math.MaxInt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IPBudget(tt.ipDelay, t0, tt.busyUntil, span); got != tt.want {
				t.Errorf("IPBudget(%v, busy t0%+v) = %d, want %d", tt.ipDelay, tt.busyUntil.Sub(t0), got, tt.want)
			}
		})
	}
}

// budgetStep is one host offered to Budgets.Host and its share.
type budgetStep struct {
	name string
	h    HostPace
	want int
}

func runBudgets(t *testing.T, b *Budgets, steps []budgetStep, fastest time.Duration, refill time.Time) {
	t.Helper()
	for _, st := range steps {
		if got := b.Host(st.h); got != st.want {
			t.Errorf("%s: Host(%+v) = %d, want %d", st.name, st.h, got, st.want)
		}
	}
	if got := b.Fastest(); got != fastest {
		t.Errorf("Fastest() = %v, want %v", got, fastest)
	}
	if got := b.Refill(); !got.Equal(refill) {
		t.Errorf("Refill() = %v, want %v", got, refill)
	}
}

func TestBudgets(t *testing.T) {
	const hostDelay, lead = 100 * time.Millisecond, 200 * time.Millisecond
	t.Run("a round's read: shares, the fastest host, the earliest refill", func(t *testing.T) {
		b := &Budgets{PerHost: 10, HostDelay: hostDelay, Now: t0, Span: 9 * hostDelay, Lead: lead}
		runBudgets(t, b, []budgetStep{
			{"a slow host first", HostPace{Delay: 450 * time.Millisecond}, 3},
			{"a host at the host delay", HostPace{Delay: hostDelay}, 10},
			{"a host waiting for a hand-back counts for nothing (else the fastest, and the earliest refill)", HostPace{Waiting: true, Delay: time.Millisecond, BusyUntil: t0.Add(901 * time.Millisecond)}, 0},
			{"busy past the span: a refill", HostPace{Delay: hostDelay, BusyUntil: t0.Add(time.Second)}, 0},
			{"busy past the span, sooner out: the earlier refill", HostPace{Delay: hostDelay, BusyUntil: t0.Add(950 * time.Millisecond)}, 0},
			{"busy for a third of the span", HostPace{Delay: hostDelay, BusyUntil: t0.Add(300 * time.Millisecond)}, 7},
		}, hostDelay, t0.Add(750*time.Millisecond))
	})
	t.Run("the tail: a host gets URLs only once it is about to run out", func(t *testing.T) {
		span := RoundSpan(10, hostDelay, 500*time.Millisecond, lead) // 4.7 s
		b := &Budgets{PerHost: 10, HostDelay: hostDelay, Now: t0, Span: span, Lead: lead, Tail: true}
		runBudgets(t, b, []budgetStep{
			{"busy beyond the lead, within the span", HostPace{Delay: 500 * time.Millisecond, BusyUntil: t0.Add(time.Second)}, 0},
			{"busy exactly to the lead", HostPace{Delay: 500 * time.Millisecond, BusyUntil: t0.Add(lead)}, 10},
			{"idle", HostPace{Delay: 500 * time.Millisecond}, 10},
			{"a slower host, busy a little", HostPace{Delay: 2 * time.Second, BusyUntil: t0.Add(100 * time.Millisecond)}, 3},
		}, 500*time.Millisecond, t0.Add(800*time.Millisecond))
	})
	t.Run("hosts behind one address share its budget, best first", func(t *testing.T) {
		ip1, ip2, ip3 := ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3")
		b := &Budgets{PerHost: 4, HostDelay: hostDelay, IPDelay: 50 * time.Millisecond, Now: t0, Span: 3 * hostDelay, Lead: lead}
		runBudgets(t, b, []budgetStep{
			{"waiting: takes nothing of its address", HostPace{Waiting: true, Delay: hostDelay, IP: ip1, IPOK: true}, 0},
			{"first behind ip1 (7 requests in the span)", HostPace{Delay: hostDelay, IP: ip1, IPOK: true}, 4},
			{"second behind ip1: the 3 left", HostPace{Delay: hostDelay, IP: ip1, IPOK: true}, 3},
			{"third behind ip1: none left, and no refill for it", HostPace{Delay: hostDelay, IP: ip1, IPOK: true}, 0},
			{"an address busy for two thirds of the span", HostPace{Delay: hostDelay, IP: ip2, IPOK: true, IPBusyUntil: t0.Add(200 * time.Millisecond)}, 3},
			{"ip1 again, but not resolved (IPOK false): no address limit", HostPace{Delay: hostDelay, IP: ip1}, 4},
			{"an address busy past the span", HostPace{Delay: hostDelay, IP: ip3, IPOK: true, IPBusyUntil: t0.Add(301 * time.Millisecond)}, 0},
		}, hostDelay, time.Time{})
	})
	t.Run("nothing read", func(t *testing.T) {
		runBudgets(t, &Budgets{PerHost: 10, HostDelay: hostDelay, Now: t0, Span: 9 * hostDelay}, nil, 0, time.Time{})
	})
}

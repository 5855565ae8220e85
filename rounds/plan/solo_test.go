package plan

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// ---------------------------------------------------------------- Solo leader

func TestLeadFenced(t *testing.T) {
	const fence = time.Second
	solo := Lead{Self: "b", Solo: true, Since: t0, Fence: fence}
	tests := []struct {
		name string
		lead Lead
		now  time.Time
		want bool
	}{
		{"not Solo: never fenced", Lead{Self: "b", Since: t0, Fence: fence}, t0, false},
		{"not Solo, long before the fence's end", Lead{Self: "b", Since: t0, Fence: time.Hour}, t0.Add(time.Minute), false},
		{"the moment it began to lead", solo, t0, true},
		{"a clock behind the start", solo, t0.Add(-time.Millisecond), true},
		{"a nanosecond before the fence's end", solo, t0.Add(fence - 1), true},
		{"exactly at the fence's end", solo, t0.Add(fence), false},
		{"after the fence", solo, t0.Add(fence + time.Millisecond), false},
		{"no fence", Lead{Self: "b", Solo: true, Since: t0}, t0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.lead.Fenced(tt.now); got != tt.want {
				t.Errorf("%+v.Fenced(t0%+v) = %v, want %v", tt.lead, tt.now.Sub(t0), got, tt.want)
			}
		})
	}
}

func TestLeadAwaitsRelease(t *testing.T) {
	const fence, wait = time.Second, 5 * time.Second
	solo := Lead{Self: "b", Solo: true, Since: t0, Fence: fence, ReleaseWait: wait}
	past := t0.Add(fence + time.Millisecond)
	alive, dead, released := Holder{Alive: true}, Holder{}, Holder{Alive: true, Released: true}
	tests := []struct {
		name    string
		lead    Lead
		now     time.Time
		holders []Holder
		want    bool
	}{
		{"not Solo: never waits", Lead{Self: "b", Since: t0, Fence: fence, ReleaseWait: wait}, past, []Holder{alive}, false},
		{"no holder", solo, past, nil, false},
		{"a live holder that has not released", solo, past, []Holder{alive}, true},
		{"a live holder that has released", solo, past, []Holder{released}, false},
		{"a dead holder is not waited for", solo, past, []Holder{dead}, false},
		{"one released, one not", solo, past, []Holder{released, alive}, true},
		{"a nanosecond before the wait's end", solo, t0.Add(fence + wait - 1), []Holder{alive}, true},
		{"exactly at the wait's end", solo, t0.Add(fence + wait), []Holder{alive}, false},
		{"no wait after the fence", Lead{Self: "b", Solo: true, Since: t0, Fence: fence}, past, []Holder{alive}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.lead.AwaitsRelease(tt.now, tt.holders); got != tt.want {
				t.Errorf("AwaitsRelease(t0%+v, %+v) = %v, want %v", tt.now.Sub(t0), tt.holders, got, tt.want)
			}
		})
	}
}

func TestLeadAlive(t *testing.T) {
	tests := []struct {
		name  string
		solo  bool
		id    string
		heard bool
		want  bool
	}{
		{"the leader, not heard of", false, "b", false, true},
		{"the leader in a Solo crawl, not heard of", true, "b", false, true},
		{"another node heard of", false, "a", true, true},
		{"another node not heard of", false, "a", false, false},
		{"another node of a Solo crawl, heard of: a replica only", true, "a", true, false},
		{"another node of a Solo crawl, not heard of", true, "a", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Lead{Self: "b", Solo: tt.solo, Since: t0, Fence: time.Second}
			if got := l.Alive(tt.id, tt.heard); got != tt.want {
				t.Errorf("Alive(%q, heard %v), Solo %v = %v, want %v", tt.id, tt.heard, tt.solo, got, tt.want)
			}
		})
	}
}

func TestLeadLastSeen(t *testing.T) {
	const fence = time.Second
	end := t0.Add(fence)
	tests := []struct {
		name string
		solo bool
		id   string
		seen time.Time
		want time.Time
	}{
		{"not Solo: the detector's time", false, "a", t0.Add(-time.Minute), t0.Add(-time.Minute)},
		{"Solo, the leader itself", true, "b", t0.Add(-time.Minute), t0.Add(-time.Minute)},
		{"Solo, a former leader seen before the fence's end", true, "a", t0.Add(-time.Minute), end},
		{"Solo, a former leader never seen", true, "a", time.Time{}, end},
		{"Solo, seen exactly at the fence's end", true, "a", end, end},
		{"Solo, seen after the fence's end", true, "a", end.Add(time.Millisecond), end.Add(time.Millisecond)},
		{"Solo, released after the fence's end", true, "a", t0.Add(-time.Minute), end.Add(time.Second)},
		{"Solo, released after the fence's end, seen later still", true, "a", end.Add(2 * time.Second), end.Add(2 * time.Second)},
		// With a release wait of 4 s: a former leader that did not
		// release aborts its requests 2 s after it last led.
		{"Solo, wait: not released", true, "a", t0.Add(-time.Minute), t0.Add(2 * time.Second)},
		{"Solo, wait: released at the fence's end", true, "r", t0.Add(-time.Minute), end},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Lead{Self: "b", Solo: tt.solo, Since: t0, Fence: fence}
			if strings.HasPrefix(tt.name, "Solo, released") {
				l.Released = end.Add(time.Second)
			}
			if strings.HasPrefix(tt.name, "Solo, wait") {
				l.ReleaseWait, l.Released, l.ReleasedBy = 4*time.Second, end, map[string]bool{"r": true}
			}
			if got := l.LastSeen(tt.id, tt.seen); !got.Equal(tt.want) {
				t.Errorf("LastSeen(%q, %v) = %v, want %v", tt.id, tt.seen, got, tt.want)
			}
		})
	}
}

// TestLeadReassign: a new Solo leader's view of the site (Alive, LastSeen)
// moves its predecessor's parts to it, their hosts free only a delay after
// the fence; without Solo the same nodes keep their parts.
func TestLeadReassign(t *testing.T) {
	const fence, delay = time.Second, 300 * time.Millisecond
	held := []Held{{Round: 3, ID: 1, Node: "a", Hosts: []string{"h.test"}, URLs: 5, Delay: delay}}
	for _, tt := range []struct {
		name string
		solo bool
		want []Move
	}{
		{"Solo: the former leader's part moves after the fence", true, []Move{{Round: 3, ID: 1, From: "a", To: "b", NotBefore: t0.Add(fence + delay)}}},
		{"not Solo: a node heard of keeps its part", false, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := Lead{Self: "b", Solo: tt.solo, Since: t0, Fence: fence}
			seenA := t0.Add(-100 * time.Millisecond) // heard of just before b began to lead
			var nodes []Node
			lastSeen := map[string]time.Time{}
			for _, id := range []string{"a", "b"} {
				nodes = append(nodes, Node{ID: id, Alive: l.Alive(id, true)})
				seen := t0
				if id == "a" {
					seen = seenA
				}
				lastSeen[id] = l.LastSeen(id, seen)
			}
			if got := Reassign(held, nodes, lastSeen, nil); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Reassign = %+v, want %+v", got, tt.want)
			}
		})
	}
}

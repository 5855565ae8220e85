package control

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func TestOpCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		op   Op
		bad  string // "" → valid; else a part of the error
	}{
		{"pause", Op{Pause: ptr(true)}, ""},
		{"limits", Op{Width: ptr(500), PerHost: ptr(3), HostBudget: ptr(0)}, ""},
		{"host delay", Op{Host: "a.test", Delay: ptr(Duration(2 * time.Second))}, ""},
		{"host block forever", Op{Host: "a.test", Block: ptr(time.Time{})}, ""},
		{"host unblock", Op{Host: "xn--bcher-kva.test:8080", Unblock: true}, ""},
		{"empty", Op{}, "nothing to change"},
		{"negative width", Op{Width: ptr(-1)}, "width must be in"},
		{"huge k", Op{PerHost: ptr(2_000_000)}, "per_host must be in"},
		{"pld budget", Op{PLDBudget: ptr(500)}, ""},
		{"negative pld budget", Op{PLDBudget: ptr(-1)}, "pld_budget must be in"},
		{"delay without host", Op{Delay: ptr(Duration(time.Second))}, "needs the host"},
		{"host alone", Op{Host: "a.test", Pause: ptr(true)}, "without a delay"},
		{"host with a scheme", Op{Host: "http://a.test", Unblock: true}, "is not one of a host name's"},
		{"upper-case host", Op{Host: "A.test", Unblock: true}, "is not one of"},
		{"block and unblock", Op{Host: "a.test", Block: ptr(time.Now()), Unblock: true}, "block and unblock"},
		{"negative delay", Op{Host: "a.test", Delay: ptr(Duration(-time.Second))}, "delay must be in"},
		{"delay over a day", Op{Host: "a.test", Delay: ptr(Duration(25 * time.Hour))}, "delay must be in"},
		{"long host", Op{Host: strings.Repeat("a", 254), Unblock: true}, "longer than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.op.Check()
			switch {
			case c.bad == "" && err != nil:
				t.Fatalf("Check: %v, want valid", err)
			case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad) || !errors.Is(err, ErrBadOp)):
				t.Fatalf("Check: %v, want ErrBadOp saying %q", err, c.bad)
			}
		})
	}
}

func TestApply(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	var c Controls
	steps := []struct {
		op    Op
		check func(Controls) bool
	}{
		{Op{Pause: ptr(true)}, func(c Controls) bool { return c.Paused && c.Version == 1 }},
		{Op{Width: ptr(400), PerHost: ptr(2)}, func(c Controls) bool { return c.Width == 400 && c.PerHost == 2 && c.Paused }},
		{Op{PLDBudget: ptr(300)}, func(c Controls) bool {
			return c.PLDBudget == 300 && c.Width == 400 && c.Changes[len(c.Changes)-1].What == "pld_budget=300"
		}},
		{Op{Host: "a.test", Block: ptr(now.Add(time.Hour))}, func(c Controls) bool {
			return c.Blocked("a.test", now) && !c.Blocked("a.test", now.Add(time.Hour)) && c.NextUnblock(now).Equal(now.Add(time.Hour))
		}},
		{Op{Host: "a.test", Delay: ptr(Duration(3 * time.Second))}, func(c Controls) bool { return c.Delay("a.test") == 3*time.Second && c.Blocked("a.test", now) }},
		{Op{Host: "b.test", Block: ptr(time.Time{})}, func(c Controls) bool {
			return c.Blocked("b.test", now.Add(1000*time.Hour)) && c.NextUnblock(now).Equal(now.Add(time.Hour))
		}},
		{Op{Host: "a.test", Unblock: true}, func(c Controls) bool { return !c.Blocked("a.test", now) && c.Delay("a.test") == 3*time.Second }},
		// A host with nothing left is forgotten.
		{Op{Host: "a.test", Delay: ptr(Duration(0))}, func(c Controls) bool { _, ok := c.Hosts["a.test"]; return !ok && len(c.Hosts) == 1 }},
		{Op{Pause: ptr(false), Width: ptr(0)}, func(c Controls) bool {
			return !c.Paused && c.Width == 0 && c.PerHost == 2 && c.PLDBudget == 300 && c.Version == 9
		}},
	}
	for i, s := range steps {
		prev := c.Encode()
		n, err := c.Apply(s.op, now, "n1")
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if string(c.Encode()) != string(prev) {
			t.Fatalf("step %d changed the controls it was applied to", i)
		}
		// Through its stored form, as every node reads it.
		if c, err = Decode(n.Encode()); err != nil {
			t.Fatalf("step %d: decode: %v", i, err)
		}
		if !s.check(c) {
			t.Fatalf("step %d (%+v): %+v", i, s.op, c)
		}
		if last := c.Changes[len(c.Changes)-1]; last.By != "n1" || last.What == "" || !last.At.Equal(now) {
			t.Fatalf("step %d: logged %+v", i, last)
		}
	}
	if got := c.Changes[0].What; got != "pause" {
		t.Errorf("first change logged as %q", got)
	}
	// The log keeps the last MaxChanges.
	for i := 0; i < MaxChanges+5; i++ {
		c, _ = c.Apply(Op{Width: ptr(i + 1)}, now, "n2")
	}
	if len(c.Changes) != MaxChanges || c.Changes[MaxChanges-1].What != "width="+itoa(MaxChanges+5) {
		t.Errorf("log of %d changes, last %+v", len(c.Changes), c.Changes[len(c.Changes)-1])
	}
	// A bad change changes nothing.
	if n, err := c.Apply(Op{Width: ptr(-5)}, now, "n1"); err == nil || n.Version != c.Version {
		t.Errorf("bad change: %v, version %d → %d", err, c.Version, n.Version)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestMaxHosts(t *testing.T) {
	c := Controls{Hosts: map[string]Host{}}
	for i := range MaxHosts {
		c.Hosts["h"+itoa(i)+".test"] = Host{Blocked: true}
	}
	if _, err := c.Apply(Op{Host: "one-more.test", Unblock: false, Block: ptr(time.Time{})}, time.Now(), "n1"); !errors.Is(err, ErrBadOp) {
		t.Fatalf("host %d: %v, want ErrBadOp", MaxHosts+1, err)
	}
	if _, err := c.Apply(Op{Host: "h1.test", Unblock: true}, time.Now(), "n1"); err != nil {
		t.Fatalf("unblock at the limit: %v", err)
	}
}

func TestDecode(t *testing.T) {
	if c, err := Decode(nil); err != nil || c.Version != 0 {
		t.Fatalf("Decode(nil) = %+v, %v", c, err)
	}
	if _, err := Decode([]byte(`{"version":`)); err == nil {
		t.Fatal("Decode of a cut value: no error")
	}
	var op Op
	if err := json.Unmarshal([]byte(`{"host":"a.test","delay":"1.5s"}`), &op); err != nil || time.Duration(*op.Delay) != 1500*time.Millisecond {
		t.Fatalf("delay as text: %+v, %v", op, err)
	}
	if err := json.Unmarshal([]byte(`{"host":"a.test","delay":"soon"}`), &op); err == nil {
		t.Fatal("a bad delay: no error")
	}
	if string(VersionValue(0)) != "" || string(VersionValue(12)) != "12" {
		t.Fatal("VersionValue")
	}
}

// FuzzOp: any request body either fails to decode or check, or applies,
// and the controls it makes read back as they were written.
func FuzzOp(f *testing.F) {
	for _, s := range []string{`{"pause":true}`, `{"width":10,"per_host":2}`, `{"host":"a.test","delay":"2s"}`,
		`{"host":"a.test","block":"2026-12-01T00:00:00Z"}`, `{"host":"a.test","unblock":true}`, `{"host":"A","delay":-1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var op Op
		if json.Unmarshal(b, &op) != nil {
			return
		}
		c, err := Controls{}.Apply(op, time.Unix(0, 0), "n")
		if err != nil {
			if op.Check() == nil {
				t.Fatalf("Apply refused a change Check accepts: %v", err)
			}
			return
		}
		back, err := Decode(c.Encode())
		if err != nil || string(back.Encode()) != string(c.Encode()) || back.Version != 1 {
			t.Fatalf("round trip: %+v, %v", back, err)
		}
	})
}

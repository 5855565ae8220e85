package robots

import (
	"testing"
	"time"
)

func TestMaxAge(t *testing.T) {
	const huge = maxDeltaSeconds * time.Second
	tests := []struct {
		cc string
		d  time.Duration
		ok bool
	}{
		{"", 0, false},
		{"public", 0, false},
		{"private, must-revalidate", 0, false},
		{"s-maxage=60", 0, false},
		{"max-age=3600", time.Hour, true},
		{"public, max-age=60", time.Minute, true},
		{"MAX-AGE=60", time.Minute, true},
		{" max-age = 60 ", time.Minute, true},
		{`max-age="120"`, 2 * time.Minute, true},
		{"max-age=0", 0, true},
		{"max-age=", 0, true},
		{"max-age", 0, true},
		{"max-age=-5", 0, true},
		{"max-age=1.5", 0, true},
		{"max-age=abc", 0, true},
		{"max-age=99999999999999999999999", huge, true},
		{"max-age=2147483648", huge, true},
		{"max-age=2147483649", huge, true},
		{"max-age=60, max-age=10", time.Minute, true}, // the first counts
		{"no-cache", 0, true},
		{"No-Cache, max-age=600", 0, true}, // the most restrictive wins
		{"max-age=600, no-store", 0, true},
		{`no-cache="Set-Cookie", max-age=600`, 10 * time.Minute, true},  // a qualified no-cache restricts the named fields only
		{`private="a, max-age=1", max-age=600`, 10 * time.Minute, true}, // a comma in a quoted string splits nothing
		{`foo="unterminated, max-age=5`, 0, false},
		{",,, max-age=7 ,", 7 * time.Second, true},
		{"max-age=60,no-store", 0, true},
	}
	for _, tt := range tests {
		d, ok := MaxAge(tt.cc)
		if d != tt.d || ok != tt.ok {
			t.Errorf("MaxAge(%q) = %v, %v; want %v, %v", tt.cc, d, ok, tt.d, tt.ok)
		}
	}
}

func TestLifetime(t *testing.T) {
	const (
		floor = 2 * time.Minute
		ttl   = 24 * time.Hour
	)
	tests := []struct {
		cc          string
		floor, want time.Duration
	}{
		{"", floor, ttl},                           // no directive: the default, the cap
		{"public", floor, ttl},                     // likewise
		{"max-age=3600", floor, time.Hour},         // within the bounds
		{"max-age=30", floor, floor},               // raised to the floor
		{"max-age=0", floor, floor},                // likewise
		{"no-cache", floor, floor},                 // likewise
		{"no-store", floor, floor},                 // likewise
		{"max-age=604800", floor, ttl},             // a week: cut to the cap
		{"max-age=2147483648", floor, ttl},         // the largest: cut to the cap
		{"max-age=1", 0, time.Second},              // no floor
		{"max-age=3600", 48 * time.Hour, ttl},      // a floor above the cap gives the cap
		{"max-age=10, max-age=7200", floor, floor}, // the first max-age counts
	}
	for _, tt := range tests {
		if got := Lifetime(tt.cc, tt.floor, ttl); got != tt.want {
			t.Errorf("Lifetime(%q, %v, %v) = %v, want %v", tt.cc, tt.floor, ttl, got, tt.want)
		}
	}
}

func FuzzMaxAge(f *testing.F) {
	for _, s := range []string{"", "max-age=60", `max-age="60"`, "no-cache, max-age=1", `a="\"", b`, `x="`, "max-age=99999999999999999999", ",=,=", "\x00max-age=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cc string) {
		d, ok := MaxAge(cc)
		if d < 0 || d > maxDeltaSeconds*time.Second {
			t.Fatalf("MaxAge(%q) = %v", cc, d)
		}
		if !ok && d != 0 {
			t.Fatalf("MaxAge(%q) = %v without a directive", cc, d)
		}
		if l := Lifetime(cc, time.Second, time.Hour); l < time.Second || l > time.Hour {
			t.Fatalf("Lifetime(%q) = %v, out of [1s, 1h]", cc, l)
		}
	})
}

// TestStale: a robots.txt unreachable past UnreachableLimit is read as its
// last good copy, or as allowing everything without one.
func TestStale(t *testing.T) {
	body := []byte("User-agent: *\nDisallow: /private\n")
	tests := []struct {
		name            string
		status          int
		body            []byte
		private, public bool
	}{
		{"last good copy", 200, body, false, true},
		{"last good copy was a 404", 404, nil, true, true},
		{"no copy", 0, nil, true, true},
		{"a copy that was unavailable", 503, body, true, true},
	}
	for _, tt := range tests {
		p := Stale(tt.status, tt.body).Agent("meridian")
		if p.Unavailable() || p.Allowed("/private/x") != tt.private || p.Allowed("/public") != tt.public {
			t.Errorf("%s: Unavailable %v, Allowed(/private/x) %v, Allowed(/public) %v; want false, %v, %v",
				tt.name, p.Unavailable(), p.Allowed("/private/x"), p.Allowed("/public"), tt.private, tt.public)
		}
	}
}

// TestAgentMatching: the group of the crawler's product token, taken from
// a whole User-Agent or given as it is, is matched case-insensitively and
// exactly; the "*" group is the fallback and is not applied to an agent
// that has a group of its own.
func TestAgentMatching(t *testing.T) {
	body := "User-agent: *\nDisallow: /star\n\nUser-agent: mybot\nDisallow: /mine\nCrawl-delay: 2\n\nUser-agent: OtherBot\nDisallow: /other\n"
	tests := []struct {
		agent            string
		star, mine, othr bool // Allowed(/star), Allowed(/mine), Allowed(/other)
		delay            time.Duration
	}{
		{"MyBot/2.0 (+https://x.test/bot)", true, false, true, 2 * time.Second},
		{"mybot", true, false, true, 2 * time.Second},
		{"MYBOT", true, false, true, 2 * time.Second},
		{"  MyBot", true, false, true, 2 * time.Second},
		{"otherbot/1", true, true, false, 0},
		{"mybo", false, true, true, 0},   // no prefix match: the "*" group
		{"mybotx", false, true, true, 0}, // likewise
		{"Meridian/0.1", false, true, true, 0},
		{"*", false, true, true, 0},
		{"", false, true, true, 0},
		{"123bot", false, true, true, 0}, // no product token
	}
	p := FromResponse(200, []byte(body))
	for _, tt := range tests {
		q := p.Agent(tt.agent)
		if q.Allowed("/star") != tt.star || q.Allowed("/mine") != tt.mine || q.Allowed("/other") != tt.othr || q.CrawlDelay() != tt.delay {
			t.Errorf("Agent(%q): /star %v /mine %v /other %v delay %v; want %v %v %v %v", tt.agent,
				q.Allowed("/star"), q.Allowed("/mine"), q.Allowed("/other"), q.CrawlDelay(), tt.star, tt.mine, tt.othr, tt.delay)
		}
	}
	// Without a "*" group an unnamed agent is allowed everything.
	q := FromResponse(200, []byte("User-agent: mybot\nDisallow: /\n")).Agent("meridian")
	if !q.Allowed("/anything") {
		t.Error("an agent without a group and no * group is disallowed")
	}
}

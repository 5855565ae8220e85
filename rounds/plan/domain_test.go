package plan

import "testing"

func TestRegistrable(t *testing.T) {
	tests := []struct {
		host, want string
	}{
		{"a.spam.test", "spam.test"}, // the list's default rule "*": test is a suffix
		{"b.a.spam.test", "spam.test"},
		{"spam.test", "spam.test"},
		{"h12.fr.test", "fr.test"}, // every websim host of a country shares one
		{"s7.linkfarm.test", "linkfarm.test"},
		{"www.example.co.uk", "example.co.uk"},
		{"example.com", "example.com"},
		{"co.uk", "co.uk"},         // a bare public suffix: itself
		{"test", "test"},           // a single label
		{"localhost", "localhost"}, // likewise
		{"127.0.0.1", "127.0.0.1"},
		{"10.1.2.3", "10.1.2.3"}, // not "2.3"
		{"[::1]", "[::1]"},
		{"::1", "::1"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Registrable(tt.host); got != tt.want {
			t.Errorf("Registrable(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}

func TestDomainSpent(t *testing.T) {
	tests := []struct {
		name              string
		fetched, inFlight int64
		budget            int
		want              bool
	}{
		{"no budget", 1_000_000, 0, 0, false},
		{"a negative budget is none", 5, 0, -1, false},
		{"one page short", 9, 0, 10, false},
		{"reached exactly", 10, 0, 10, true},
		{"reached with rounds in flight", 6, 4, 10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DomainSpent(tt.fetched, tt.inFlight, tt.budget); got != tt.want {
				t.Errorf("DomainSpent(%d, %d, %d) = %v, want %v", tt.fetched, tt.inFlight, tt.budget, got, tt.want)
			}
		})
	}
}

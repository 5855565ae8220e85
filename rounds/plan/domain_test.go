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

package urlnorm

import (
	"errors"
	"strings"
	"testing"
)

// TestIPv6 checks IPv6 literals against the WHATWG URL Standard's host
// parser and IPv6 serializer: lower-case, no leading zeros, the first
// longest run of two or more zero groups compressed, IPv4 tails in hex,
// the default port dropped; zones and what the parser refuses are
// ErrHost, with an error saying why.
func TestIPv6(t *testing.T) {
	n := New(Options{})
	for _, c := range []struct{ in, want string }{
		{"http://[2001:DB8::1]:8080/", "http://[2001:db8::1]:8080/"},
		{"http://[2001:db8:0:0:0:0:0:1]/", "http://[2001:db8::1]/"},
		{"http://[::1]:80/", "http://[::1]/"},
		{"https://[::1]:443/x", "https://[::1]/x"},
		{"https://[::1]:80/x", "https://[::1]:80/x"},
		{"http://[::1]:0080/", "http://[::1]/"},
		{"http://[::1]:/", "http://[::1]/"},
		{"http://[::1]", "http://[::1]/"},
		{"http://[0:0:0:0:0:0:0:0]/", "http://[::]/"},
		{"http://[::]/", "http://[::]/"},
		{"http://[2001:db8:0:0:1:0:0:1]/", "http://[2001:db8::1:0:0:1]/"},    // first of two equal runs
		{"http://[2001:0:0:1:0:0:0:1]/", "http://[2001:0:0:1::1]/"},          // the longest run
		{"http://[2001:db8:0:1:1:1:1:1]/", "http://[2001:db8:0:1:1:1:1:1]/"}, // one zero group is not compressed
		{"http://[1:2:3:4:5:6:7::]/", "http://[1:2:3:4:5:6:7:0]/"},
		{"http://[1::]/", "http://[1::]/"},
		{"http://[0001:0DB8::0001]/", "http://[1:db8::1]/"},
		{"http://[::ffff:192.0.2.1]/", "http://[::ffff:c000:201]/"},
		{"http://[::192.0.2.1]/", "http://[::c000:201]/"},
		{"http://[1:2:3:4:5:6:1.2.3.4]/", "http://[1:2:3:4:5:6:102:304]/"},
		{"http://[fedc:ba98:7654:3210:fedc:ba98:7654:3210]/", "http://[fedc:ba98:7654:3210:fedc:ba98:7654:3210]/"},
		{"http://user:pw@[::1]:8080/p?q#f", "http://[::1]:8080/p?q"},
		{"HTTP://[::1]/a/../b", "http://[::1]/b"},
	} {
		checkOK(t, n, c.in, c.want)
	}
	for _, c := range []struct{ in, why string }{
		{"http://[fe80::1%25eth0]/", "zone"},
		{"http://[fe80::1%eth0]/", "zone"},
		{"http://[::1/", "IPv6"},
		{"http://[::1]x/", "IPv6"},
		{"http://[::1]]/", "IPv6"},
		{"http://[::1]:80:80/", "IPv6"},
		{"http://[1.2.3.4]/", "IPv6"},
		{"http://[::1::2]/", "IPv6"},
		{"http://[12345::]/", "IPv6"},
		{"http://[g::1]/", "IPv6"},
		{"http://[]/", "IPv6"},
		{"http://[/", "IPv6"},
		{"http://[::ffff:1.2.3.04]/", "IPv6"},
		{"http://[::1.2.3]/", "IPv6"},
		{"http://[1:2:3:4:5:6:7:8:9]/", "IPv6"},
		{"http://[1:2:3:4:5:6:7:8::]/", "IPv6"},
		{"http://[%3A%3A1]/", "bad IPv6"}, // the Standard does not decode a literal
		{"http://[::1]:65536/", "port"},
	} {
		_, err := n.Normalize(nil, []byte(c.in))
		var e *Error
		if !errors.Is(err, ErrHost) || !errors.As(err, &e) || e.Input != c.in {
			t.Errorf("Normalize(%q) = %v, want ErrHost naming the input", c.in, err)
			continue
		}
		if c.why != "port" && !strings.Contains(err.Error(), c.why) {
			t.Errorf("Normalize(%q) = %v, want it to say %q", c.in, err, c.why)
		}
	}
}

// TestResolveIPv6 resolves references on and to IPv6 hosts.
func TestResolveIPv6(t *testing.T) {
	n := New(Options{})
	var b Base
	if err := b.SetString("http://[2001:db8::1]:8080/a/b?q"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ref, want string }{
		{"c", "http://[2001:db8::1]:8080/a/c"},
		{"/x", "http://[2001:db8::1]:8080/x"},
		{"?y", "http://[2001:db8::1]:8080/a/b?y"},
		{"//[2001:db8::1]:8080/z", "http://[2001:db8::1]:8080/z"},
		{"//[2001:DB8:0::1]:8080/z", "http://[2001:db8::1]:8080/z"},
		{"//[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/"},
		{"https://[::1]/", "https://[::1]/"},
		{"//h.test/", "http://h.test/"},
	} {
		got, err := n.Resolve(nil, &b, []byte(c.ref))
		if err != nil || string(got) != c.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", c.ref, got, err, c.want)
		}
	}
	if err := b.SetString("http://[2001:DB8::1]/"); !errors.Is(err, ErrSyntax) {
		t.Errorf("Base of a literal not in normal form: %v, want ErrSyntax", err)
	}
}

// TestScopeIPv6: hosts of IPv6 literals are denied and allowed by their
// bracketed form, with or without a port.
func TestScopeIPv6(t *testing.T) {
	s := &Scope{DenyHosts: []string{"[::1]"}}
	for _, c := range []struct {
		u  string
		ok bool
	}{
		{"http://[::1]/", false},
		{"http://[::1]:8080/x", false},
		{"http://[::2]:8080/x", true},
	} {
		if got := s.AllowString(c.u); got != c.ok {
			t.Errorf("DenyHosts [::1]: Allow(%q) = %v, want %v", c.u, got, c.ok)
		}
	}
	only := &Scope{HostSuffixes: []string{"[2001:db8::1]"}}
	if !only.AllowString("http://[2001:db8::1]:81/") || only.AllowString("http://[2001:db8::2]/") {
		t.Error("HostSuffixes [2001:db8::1] does not admit exactly that host")
	}
}

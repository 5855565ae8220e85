package partition

import (
	"errors"
	"testing"
)

func TestNew(t *testing.T) {
	ring := mustRing(t, testSites, 100)
	h := Host{Name: "Paris.example", Key: "127.77.0.3", Loc: at(48.86, 2.35)}
	tests := []struct {
		kind    string
		want    string
		wantErr error
	}{
		{KindConsistent, ring.Owner("127.77.0.3", nil), nil},
		{KindDistance, "eu", nil},
		{"nearest", "", ErrUnknownKind},
		{"", "", ErrUnknownKind},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			p, err := New(tt.kind, testSites, 100)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("New(%q): %v, want %v", tt.kind, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Owner(h, nil); got != tt.want {
				t.Errorf("Owner = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := New(KindDistance, []Site{{Name: "a", Lat: 100}}, 100); !errors.Is(err, ErrInvalid) {
		t.Errorf("New(distance) with a bad latitude: %v, want ErrInvalid", err)
	}
	if _, err := New(KindConsistent, testSites, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("New(consistent) with 0 replicas: %v, want ErrInvalid", err)
	}
}

func TestConsistentHashesKeyOrName(t *testing.T) {
	ring := mustRing(t, testSites, 100)
	c := Consistent{Ring: ring}
	for _, k := range keys(200) {
		if got, want := c.Owner(Host{Name: "ignored", Key: k}, nil), ring.Owner(k, nil); got != want {
			t.Fatalf("Owner(key %q) = %q, want %q", k, got, want)
		}
		if got, want := c.Owner(Host{Name: k + "."}, nil), ring.Owner(k, nil); got != want {
			t.Fatalf("Owner(name %q.) = %q, want %q", k, got, want)
		}
	}
}

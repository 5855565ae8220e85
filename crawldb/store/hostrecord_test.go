package store

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// TestHostRecordEncoding: a host record survives its encoding; one without
// RobotsUnreachableSince is stored byte for byte as before the field
// existed (version 1), so records written by older versions decode; one
// with it is version 2; one with SitemapsPending version 3; a cut or
// extended value, an unknown version or flag is refused.
func TestHostRecordEncoding(t *testing.T) {
	at := func(s string) time.Time { return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(mustDur(s)) }
	full := HostRecord{
		Robots: []byte("User-agent: *\nDisallow: /x\n"), RobotsStatus: 200, RobotsExpiry: at("24h"),
		CrawlDelay: 2 * time.Second, IPs: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")},
		IPsExpiry: at("5m"), BackoffUntil: at("10m"), Failures: 3,
	}
	unreachable := full
	unreachable.RobotsUnreachableSince = at("-744h") // 31 days before
	tests := []struct {
		name    string
		rec     HostRecord
		version byte
	}{
		{"empty", HostRecord{}, hostVersion},
		{"full", full, hostVersion},
		{"unreachable with a last good copy", unreachable, hostVersion2},
		{"unreachable without a copy", HostRecord{RobotsUnreachableSince: at("-48h"), Failures: 1, BackoffUntil: at("5s")}, hostVersion2},
		{"sitemaps pending", HostRecord{Robots: []byte("Sitemap: /s.xml\n"), RobotsStatus: 200, SitemapsPending: true}, hostVersion3},
		{"sitemaps pending, unreachable", HostRecord{RobotsUnreachableSince: at("-1h"), SitemapsPending: true}, hostVersion3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := appendHost(nil, &tt.rec)
			if b[0] != tt.version {
				t.Fatalf("version %d, want %d", b[0], tt.version)
			}
			got, err := decodeHost(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.rec) {
				t.Fatalf("decoded\n %+v\nwant\n %+v", got, tt.rec)
			}
			for n := range len(b) {
				if _, err := decodeHost(b[:n]); err == nil {
					t.Fatalf("a value cut to %d of %d bytes decoded", n, len(b))
				}
			}
			if _, err := decodeHost(append(bytes.Clone(b), 0)); err == nil {
				t.Fatal("a value with a trailing byte decoded")
			}
		})
	}
	// A version 1 value as the encoder wrote it before
	// RobotsUnreachableSince (robots "x", status 200, expiry 1 ms, crawl
	// delay 1 ns, no IPs, nothing else).
	old, _ := hex.DecodeString("010178c801020200000000")
	got, err := decodeHost(old)
	want := HostRecord{Robots: []byte("x"), RobotsStatus: 200, RobotsExpiry: time.UnixMilli(1).UTC(), CrawlDelay: 1}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("old value: %+v, %v; want %+v", got, err, want)
	}
	if b := appendHost(nil, &want); !bytes.Equal(b, old) {
		t.Errorf("encoded as %x, want the old %x", b, old)
	}
	if _, err := decodeHost(append([]byte{4}, old[1:]...)); err == nil {
		t.Error("version 4 decoded")
	}
	v3 := appendHost(nil, &HostRecord{SitemapsPending: true})
	v3[len(v3)-1] = 2 // a flag no version defines
	if _, err := decodeHost(v3); err == nil {
		t.Error("a version 3 value with an unknown flag decoded")
	}
}

func mustDur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// TestHostRecordStored: PutHost and Host keep RobotsUnreachableSince.
func TestHostRecordStored(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	rec := HostRecord{Robots: []byte("User-agent: *\nDisallow: /\n"), RobotsStatus: 200,
		RobotsUnreachableSince: time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC), Failures: 2}
	b := NewBatch()
	b.PutHost("a.test", rec)
	applyT(t, s, 1, b)
	got, ok, err := s.Host("a.test")
	if err != nil || !ok || !reflect.DeepEqual(got, rec) {
		t.Fatalf("Host: %+v, %v, %v; want %+v", got, ok, err, rec)
	}
}

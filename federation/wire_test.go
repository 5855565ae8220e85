package federation

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/meridian-crawler/meridian/crawl"
)

func sampleBatch() *Batch {
	return &Batch{
		From: "us", To: "eu", Seq: 42, First: 40, Virtual: 0.125,
		Puts: []Put{
			{URL: "http://a.example/", Cash: 0.5, Depth: 1},
			{URL: "https://b.example:8443/p?q=1#f", Cash: 0, Depth: 0},
			{URL: "http://a.example/" + strings.Repeat("x", 300), Cash: 1e-300, Depth: math.MaxUint32},
		},
		Hosts: []HostLoc{
			{Host: "a.example", Key: "example", Lat: 53.55, Lon: 9.99, Known: true},
			{Host: "b.example", Key: "", Lat: 0, Lon: 0, Known: false},
		},
	}
}

// sampleFetched is sampleBatch with fetched records: a hand-back.
func sampleFetched() *Batch {
	b := sampleBatch()
	b.Fetched = []FetchedURL{
		{URL: "http://a.example/done", Status: crawl.StatusFetched},
		{URL: "https://b.example:8443/moved", Status: crawl.StatusRedirect},
		{URL: "http://a.example/dup", Status: crawl.StatusDuplicate},
	}
	return b
}

// equalBatch compares batches, an empty slice equal to nil.
func equalBatch(a, b *Batch) bool {
	norm := func(x Batch) Batch {
		if len(x.Puts) == 0 {
			x.Puts = nil
		}
		if len(x.Hosts) == 0 {
			x.Hosts = nil
		}
		if len(x.Fetched) == 0 {
			x.Fetched = nil
		}
		return x
	}
	return reflect.DeepEqual(norm(*a), norm(*b))
}

func TestRoundTrip(t *testing.T) {
	for _, b := range []*Batch{sampleBatch(), {From: "a", To: "b"}, sampleFetched(),
		{From: "a", To: "b", Fetched: []FetchedURL{{URL: "http://x/", Status: crawl.StatusError}}}} {
		p := b.Append(nil)
		if want := byte(Version); len(b.Fetched) > 0 && p[0] != VersionFetched || len(b.Fetched) == 0 && p[0] != want {
			t.Errorf("version %d with %d fetched records", p[0], len(b.Fetched))
		}
		if len(p) != b.Size() {
			t.Errorf("Size %d, encoding %d bytes", b.Size(), len(p))
		}
		got, err := Decode(p, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if !equalBatch(got, b) {
			t.Fatalf("Decode(Append(b)) = %+v\nwant %+v", got, b)
		}
		// Append appends.
		q := b.Append([]byte("prefix"))
		if string(q[:6]) != "prefix" || string(q[6:]) != string(p) {
			t.Fatal("Append does not append")
		}
	}
}

// encode encodes b without validating it, with a correct checksum.
func encode(b *Batch) []byte { return b.Append(nil) }

// reseal recomputes the checksum of a hand-edited encoding.
func reseal(p []byte) []byte {
	body := p[:len(p)-4]
	return binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
}

func TestDecodeRejects(t *testing.T) {
	good := encode(sampleBatch())
	mod := func(f func(b *Batch)) []byte {
		b := sampleBatch()
		f(b)
		return encode(b)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		lim  Limits
		want error
		text string // in the error
	}{
		{"empty", nil, Limits{}, ErrMalformed, "shorter than any batch"},
		{"version", append([]byte{4}, good[1:]...), Limits{}, ErrMalformed, "version 4, want 1, 2 or 3"},
		{"a frame inside a frame", AppendFrame(nil, "us", "eu", 1, 1, [][]byte{AppendFrame(nil, "us", "eu", 1, 1, [][]byte{good})}), Limits{}, ErrMalformed, "a framed batch (version 3) where one batch is expected"},
		{"fetched records in version 1", func() []byte {
			p := encode(sampleFetched())
			p[0] = Version
			return reseal(p)
		}(), Limits{}, ErrMalformed, "trailing"},
		{"version 2 without fetched records", func() []byte {
			p := append([]byte(nil), good[:len(good)-4]...)
			p[0] = VersionFetched
			return reseal(append(append(p, 0), 0, 0, 0, 0))
		}(), Limits{}, ErrMalformed, "fetched at offset"},
		{"version 2, records cut", func() []byte {
			p := append([]byte(nil), good[:len(good)-4]...)
			p[0] = VersionFetched
			return reseal(append(append(p, 1, 9), "http://a"...))
		}(), Limits{}, ErrMalformed, "fetched[0].url"},
		{"fetched status not final", mod(func(b *Batch) {
			b.Fetched = []FetchedURL{{URL: "http://a.example/x", Status: crawl.StatusFetched}, {URL: "http://a.example/y", Status: crawl.StatusGenerated}}
		}), Limits{}, ErrMalformed, "fetched[1].status: 2 is not a final status"},
		{"fetched status past the last", mod(func(b *Batch) { b.Fetched = []FetchedURL{{URL: "http://a.example/x", Status: crawl.StatusCount}} }), Limits{}, ErrMalformed, "fetched[0].status"},
		{"fetched url", mod(func(b *Batch) { b.Fetched = []FetchedURL{{URL: "ftp://a.example/x", Status: crawl.StatusFetched}} }), Limits{}, ErrMalformed, "fetched[0].url"},
		{"fetched over MaxPuts", encode(&Batch{From: "us", To: "eu", Fetched: sampleFetched().Fetched}), Limits{MaxPuts: 2}, ErrTooLarge, "fetched at offset"},
		{"bad crc", append(append([]byte(nil), good[:len(good)-1]...), good[len(good)-1]^1), Limits{}, ErrMalformed, "checksum"},
		{"flipped bit", func() []byte { p := append([]byte(nil), good...); p[20] ^= 4; return p }(), Limits{}, ErrMalformed, "checksum"},
		{"truncated", good[:len(good)-7], Limits{}, ErrMalformed, "checksum"},
		{"truncated, resealed", reseal(append(append([]byte(nil), good[:len(good)-30]...), 0, 0, 0, 0)), Limits{}, ErrMalformed, "truncated"},
		{"trailing", reseal(append(append(append([]byte(nil), good[:len(good)-4]...), 0), 0, 0, 0, 0)), Limits{}, ErrMalformed, "trailing"},
		{"over MaxBytes", good, Limits{MaxBytes: len(good) - 1}, ErrTooLarge, "limit"},
		{"over MaxPuts", good, Limits{MaxPuts: 2}, ErrTooLarge, "puts at offset 18: 3 entries, limit 2"},
		{"hosts over MaxPuts", mod(func(b *Batch) { b.Puts = b.Puts[:1] }), Limits{MaxPuts: 1}, ErrTooLarge, "hosts at offset"},
		{"NaN cash", mod(func(b *Batch) { b.Puts[1].Cash = math.NaN() }), Limits{}, ErrMalformed, "puts[1].cash"},
		{"Inf cash", mod(func(b *Batch) { b.Puts[2].Cash = math.Inf(1) }), Limits{}, ErrMalformed, "puts[2].cash"},
		{"negative cash", mod(func(b *Batch) { b.Puts[0].Cash = -1 }), Limits{}, ErrMalformed, "puts[0].cash"},
		{"first after seq", mod(func(b *Batch) { b.First = 43 }), Limits{}, ErrMalformed, "first 43 is after seq 42"},
		{"negative virtual", mod(func(b *Batch) { b.Virtual = -0.5 }), Limits{}, ErrMalformed, "virtual"},
		{"empty url", mod(func(b *Batch) { b.Puts[1].URL = "" }), Limits{}, ErrMalformed, "puts[1].url: empty"},
		{"long url", mod(func(b *Batch) { b.Puts[1].URL = "http://a/" + strings.Repeat("x", MaxURLLen) }), Limits{}, ErrMalformed, "over the limit 4096"},
		{"relative url", mod(func(b *Batch) { b.Puts[0].URL = "/index.html" }), Limits{}, ErrMalformed, "puts[0].url"},
		{"ftp url", mod(func(b *Batch) { b.Puts[2].URL = "ftp://a.example/" }), Limits{}, ErrMalformed, "puts[2].url"},
		{"no host", mod(func(b *Batch) { b.Puts[0].URL = "http:///x" }), Limits{}, ErrMalformed, "with a host"},
		{"opaque", mod(func(b *Batch) { b.Puts[0].URL = "http:a.example" }), Limits{}, ErrMalformed, "with a host"},
		{"control char", mod(func(b *Batch) { b.Puts[0].URL = "http://a.example/\x01" }), Limits{}, ErrMalformed, "control character"},
		{"bad utf8", mod(func(b *Batch) { b.Puts[0].URL = "http://a.example/\xff" }), Limits{}, ErrMalformed, "UTF-8"},
		{"bad from", mod(func(b *Batch) { b.From = "US" }), Limits{}, ErrMalformed, "from"},
		{"empty to", mod(func(b *Batch) { b.To = "" }), Limits{}, ErrMalformed, "to"},
		{"lat", mod(func(b *Batch) { b.Hosts[1].Lat = 91 }), Limits{}, ErrMalformed, "hosts[1]: coordinates"},
		{"lon NaN", mod(func(b *Batch) { b.Hosts[0].Lon = math.NaN() }), Limits{}, ErrMalformed, "hosts[0]: coordinates"},
		{"empty host", mod(func(b *Batch) { b.Hosts[0].Host = "" }), Limits{}, ErrMalformed, "hosts[0].host"},
		{"host with space", mod(func(b *Batch) { b.Hosts[1].Host = "a b" }), Limits{}, ErrMalformed, "hosts[1].host"},
		{"known byte", func() []byte {
			p := append([]byte(nil), good...)
			p[len(p)-5] = 2 // the last host's known flag
			return reseal(p)
		}(), Limits{}, ErrMalformed, "hosts[1].known"},
		{"depth overflow", func() []byte {
			b := &Batch{From: "us", To: "eu", Puts: []Put{{URL: "http://a/", Depth: 1}}}
			p := encode(b)
			i := len(p) - 4 - 1 - 1 // the depth varint, before the hosts count
			q := append(append(append([]byte(nil), p[:i]...), 0x80, 0x80, 0x80, 0x80, 0x10), p[i+1:]...)
			return reseal(q)
		}(), Limits{}, ErrMalformed, "puts[0].depth"},
		{"non-minimal varint", func() []byte {
			b := &Batch{From: "us", To: "eu"}
			p := encode(b)
			i := len(p) - 4 - 1 // the hosts count, 0
			q := append(append(append([]byte(nil), p[:i]...), 0x80, 0x00), p[i+1:]...)
			return reseal(q)
		}(), Limits{}, ErrMalformed, "non-minimal"},
		{"huge count", func() []byte {
			b := &Batch{From: "us", To: "eu"}
			p := encode(b)
			i := len(p) - 4 - 2 // the puts count, 0
			q := append(append(append([]byte(nil), p[:i]...), 0xff, 0xff, 0x03), p[i+1:]...)
			return reseal(q)
		}(), Limits{}, ErrMalformed, "cannot fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Decode(tc.in, tc.lim)
			if err == nil {
				t.Fatalf("accepted: %+v", b)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %q\nwant %v saying %q", err, tc.want, tc.text)
			}
			if b != nil {
				t.Fatal("batch returned with an error")
			}
		})
	}
}

// FuzzDecode: Decode never panics, and what it accepts is canonical:
// re-encoding it gives back the input. Each input is tried as it is and
// with a correct checksum appended, so the fuzzer gets past the checksum
// into the fields.
func FuzzDecode(f *testing.F) {
	good := encode(sampleBatch())
	f.Add(good[:len(good)-4])
	f.Add(good)
	f.Add(encode(&Batch{From: "a", To: "b"}))
	f.Add(encode(sampleFetched()))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0})
	lim := Limits{MaxBytes: 1 << 20, MaxPuts: 1000}
	f.Fuzz(func(t *testing.T, p []byte) {
		sealed := binary.LittleEndian.AppendUint32(append([]byte(nil), p...), crc32.Checksum(p, castagnoli))
		for _, in := range [][]byte{p, sealed} {
			b, err := Decode(in, lim)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("error wraps no sentinel: %v", err)
				}
				continue
			}
			if q := b.Append(nil); string(q) != string(in) {
				t.Fatalf("accepted a non-canonical encoding:\n in %x\nout %x", in, q)
			}
			if err := b.Validate(lim); err != nil {
				t.Fatalf("Decode accepted what Validate rejects: %v", err)
			}
		}
	})
}

// FuzzRoundTrip: a batch Validate accepts survives Append and Decode
// unchanged; one it rejects, Decode rejects too.
func FuzzRoundTrip(f *testing.F) {
	f.Add("us", "eu", uint64(7), uint64(5), 0.25, "http://a.example/x", 0.5, uint32(3), "a.example", "example", 10.0, 20.0, true, uint8(2))
	f.Add("us", "eu", uint64(0), uint64(0), 0.0, "https://b/", 0.0, uint32(0), "b", "", -90.0, 180.0, false, uint8(1))
	f.Fuzz(func(t *testing.T, from, to string, seq, first uint64, virtual float64, u string, cash float64, depth uint32, host, key string, lat, lon float64, known bool, n uint8) {
		b := &Batch{From: from, To: to, Seq: seq, First: first, Virtual: virtual}
		for i := 0; i < int(n%4); i++ {
			b.Puts = append(b.Puts, Put{URL: u, Cash: cash * float64(i), Depth: depth + uint32(i)})
			b.Hosts = append(b.Hosts, HostLoc{Host: host, Key: key, Lat: lat, Lon: lon, Known: known})
			b.Fetched = append(b.Fetched, FetchedURL{URL: u, Status: crawl.Status(int(n/4)%10 + i)})
		}
		verr := b.Validate(Limits{})
		got, derr := Decode(b.Append(nil), Limits{})
		if (verr == nil) != (derr == nil) {
			t.Fatalf("Validate says %v, Decode says %v", verr, derr)
		}
		if derr == nil && !equalBatch(got, b) {
			t.Fatalf("Decode(Append(b)) = %+v\nwant %+v", got, b)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	batch := &Batch{From: "us", To: "eu", Seq: 1}
	for i := 0; i < 10000; i++ {
		batch.Puts = append(batch.Puts, Put{URL: "http://host" + strings.Repeat("x", i%20) + ".example/page/" + strings.Repeat("y", i%50), Cash: 0.001, Depth: 3})
	}
	p := batch.Append(nil)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(p, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

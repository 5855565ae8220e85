package websim

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/websim/geodelay"
	"github.com/meridian-crawler/meridian/websim/replay"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// ReplayOptions configure a websim that serves recorded WARC files.
type ReplayOptions struct {
	// WARCs are the files to serve; later files win for a URL seen twice.
	WARCs []string
	// IPs is how many loopback addresses the archived hosts are spread over
	// (round robin by sorted host name). Default 16.
	IPs int
	// IPBase is the first address. Default 127.77.0.1.
	IPBase netip.Addr
	// Port is the HTTP port on every address; 0 picks one. URLs in the
	// archive must name it (or no port, with Port 80) to be found.
	Port      int
	DNSAddr   string
	DNSTTL    time.Duration
	AdminAddr string
	Logger    *slog.Logger
	// Clients names client addresses as Options.Clients does. A replayed
	// web places its hosts in no city, so they pay nothing; their requests
	// and DNS answers are counted in Snapshot.Clients.
	Clients []geodelay.Client
}

// StartReplay serves the responses recorded in o.WARCs by URL, with DNS for
// their hosts. Robots violations are not tracked in replay.
func StartReplay(o ReplayOptions) (*Server, error) {
	if len(o.WARCs) == 0 {
		return nil, errors.New("websim: replay needs at least one WARC file")
	}
	if o.IPs == 0 {
		o.IPs = 16
	}
	if !o.IPBase.IsValid() {
		o.IPBase = synth.DefaultOptions().IPBase
	}
	if o.IPs < 1 || o.IPs > synth.MaxIPs {
		return nil, fmt.Errorf("websim: ips must be in [1, %d], got %d", synth.MaxIPs, o.IPs)
	}
	if o.Port < 0 || o.Port > 65535 {
		return nil, fmt.Errorf("websim: port must be in [0, 65535], got %d", o.Port)
	}
	if err := geodelay.Check(o.Clients); err != nil {
		return nil, fmt.Errorf("websim: clients: %w", err)
	}
	arc, err := replay.Open(o.WARCs...)
	if err != nil {
		return nil, fmt.Errorf("websim: %w", err)
	}
	if arc.Len() == 0 {
		arc.Close()
		return nil, fmt.Errorf("websim: replay: no HTTP response records in %s", strings.Join(o.WARCs, ", "))
	}
	hosts := arc.Hosts()
	n := max(1, min(o.IPs, len(hosts)))
	ips, err := synth.Addresses(o.IPBase, n)
	if err != nil {
		arc.Close()
		return nil, err
	}
	byName := make(map[string]netip.Addr, len(hosts))
	for i, h := range hosts {
		byName[h] = ips[i%n]
	}
	lns, port, err := listenAll(ips, o.Port)
	if err != nil {
		arc.Close()
		return nil, err
	}
	be := backend{
		ips:     ips,
		handler: arc,
		resolve: func(name string) (netip.Addr, bool) {
			ip, ok := byName[name]
			return ip, ok
		},
		close:       func() { arc.Close() },
		setObserver: arc.SetObserver,
	}
	return start(common{Port: port, DNSAddr: o.DNSAddr, DNSTTL: o.DNSTTL, AdminAddr: o.AdminAddr, Logger: o.Logger, Clients: o.Clients}, be, lns, port)
}

package site

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/crawl"
	"github.com/meridian-crawler/meridian/crawldb"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/fetcher/dnscache"
	"github.com/meridian-crawler/meridian/partition/geoip"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/route"
)

// startFederationOf opens the site's federation layer when --federation
// is set: the file, the certificates, the GeoIP database, and the endpoint
// the file names for this site (served from here on, so that peers can
// deliver as soon as the site is up). Its Fed is on the meta group (s.db);
// the shards send and receive (federation.ShardedSite).
func (s *Site) startFederationOf(res *dnscache.Resolver, seeds []string, sharded federation.ShardedSite) error {
	cfg := s.cfg
	file, err := federation.ReadFile(cfg.Federation)
	if err != nil {
		return err
	}
	spec, ok := file.Site(cfg.Region)
	if !ok {
		return fmt.Errorf("site: --region %q is not a site of the federation file %s", cfg.Region, cfg.Federation)
	}
	if cfg.Certs == "" {
		return fmt.Errorf("site: --federation needs --certs DIR (make them with: site certs --dir DIR --sites NAME,...)")
	}
	serverTLS, clientTLS, err := certs.Load(cfg.Certs, cfg.Region)
	if err != nil {
		return fmt.Errorf("site: federation certificates: %w", err)
	}
	if cfg.GeoIP != "" {
		if s.geo, err = geoip.Open(cfg.GeoIP); err != nil {
			return fmt.Errorf("site: --geoip: %w", err)
		}
	} else if file.Partitioner == "distance" {
		s.log.Warn("site: the distance partitioner without --geoip locates no host: every host is placed by consistent hashing")
	}
	s.fed, err = federation.New(federation.Options{
		File: file, Self: cfg.Region, DB: s.db, ServerTLS: serverTLS, ClientTLS: clientTLS,
		Resolve: res.Settled,
		GeoIP:   s.geo, Seeds: seeds, LeaderState: s.leaderFedState, Rounds: func() (route.Rounds, error) { return roundsInFlight(s.db) },
		Sharded: sharded,
		Logger:  s.log.With("part", "federation"),
	})
	if err != nil {
		return err
	}
	listen := spec.ListenAddr()
	switch cfg.FederationListen {
	case "off":
		s.log.Info("site: federation endpoint served by another node of the site (--federation-listen off)", "site", cfg.Region, "endpoint", spec.Endpoint)
		return nil
	case "":
	default:
		listen = cfg.FederationListen
	}
	s.fedLn, err = net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("site: federation endpoint %s (from %s): %w (a second node of the site on this machine: --federation-listen off)", listen, cfg.Federation, err)
	}
	go s.fed.Serve(s.fedLn) // owner: Site; stopped by Close
	s.log.Info("site: federation endpoint up", "site", cfg.Region, "endpoint", spec.Endpoint, "listen", listen, "partitioner", file.Partitioner, "peers", len(file.Sites)-1)
	return nil
}

// leaderFedState asks the site's leader for its federation state
// (federation.Options.LeaderState), over the site's node API.
func (s *Site) leaderFedState(ctx context.Context) ([]byte, error) {
	addr, err := s.db.LeaderAPI()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiURL(addr, "/site/federation/state"), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.nodeClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("site: the leader's federation state: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("site: the leader's federation state: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("site: the leader's federation state: %s: %.200s", resp.Status, b)
	}
	return b, nil
}

// ownSeeds keeps the seeds whose hosts this site owns: every site of a
// federation may be given the same seed list.
func (s *Site) ownSeeds(ctx context.Context, seeds []string) ([]string, error) {
	if s.fed == nil || len(seeds) == 0 {
		return seeds, nil
	}
	hosts := make([]string, 0, len(seeds))
	seen := map[string]bool{}
	for _, u := range seeds {
		if h := crawl.HostOf(u); !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	owners, err := s.fed.Owners(lctx, hosts)
	if err != nil {
		return nil, fmt.Errorf("site: place the seeds: %w", err)
	}
	var own []string
	for _, u := range seeds {
		if owners[crawl.HostOf(u)] == "" {
			own = append(own, u)
		}
	}
	s.log.Info("site: seeds of this site's hosts", "kept", len(own), "of", len(seeds))
	return own, nil
}

// roundsInFlight reads the rounds' state in db for the federation: the
// next round and those in flight.
func roundsInFlight(db *crawldb.DB) (route.Rounds, error) {
	st, err := rounds.ReadState(db.Store())
	if err != nil {
		return route.Rounds{}, err
	}
	r := route.Rounds{Next: st.Next}
	for _, a := range st.Active {
		r.Active = append(r.Active, a.Round)
	}
	return r, nil
}

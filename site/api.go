package site

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/crawldb"
)

// apiClientTimeout bounds one call to another node's API (the crawl
// database's forwarded writes have their own, longer, bound).
const apiClientTimeout = 5 * time.Second

// listenAPI loads this node's certificate (with --certs), opens the node
// API's listener (--api, else the address it had, else a free loopback
// port) and serves apiHandler on it: over mutual TLS that admits only the
// nodes of this site when the node has a certificate, else plain HTTP
// (Validate allows that only on loopback or with --insecure). It returns
// the crawl database's TLS configuration (nil: none) and sets the client
// that calls the other nodes' APIs.
func (s *Site) listenAPI(prev Info) (*crawldb.TLSConfig, error) {
	cfg := s.cfg
	var dbTLS *crawldb.TLSConfig
	s.apiScheme, s.nodeClient = "http", &http.Client{Timeout: apiClientTimeout}
	if cfg.Certs != "" {
		t, err := certs.LoadNode(cfg.Certs, cfg.Region, cfg.Node)
		if err != nil {
			return nil, fmt.Errorf("site: this node's certificate (make it with: site certs --dir %s --nodes %s/%s): %w", cfg.Certs, cfg.Region, cfg.Node, err)
		}
		s.nodeTLS = t
		allow := certs.AllowNodesOf(cfg.Region)
		dbTLS = &crawldb.TLSConfig{Server: t.Server(allow), Client: t.Client(allow)}
		s.apiScheme = "https"
		s.nodeClient = &http.Client{Timeout: apiClientTimeout, Transport: &http.Transport{
			TLSClientConfig: dbTLS.Client, TLSHandshakeTimeout: apiClientTimeout,
			MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute,
		}}
	} else if cfg.Insecure {
		s.log.Warn("site: --insecure: the node API and Raft are plain TCP without authentication; anyone who reaches them can write this site's crawl database. Use --certs outside a lab.",
			"raft", cfg.Raft, "api", cfg.API)
	}
	addr := cfg.API
	if addr == "" {
		addr = prev.API
	}
	if addr == "" {
		var err error
		if addr, err = freeAddr("node API"); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("site: --api %s: %w", addr, err)
	}
	s.apiLn = ln
	if dbTLS != nil {
		ln = tls.NewListener(ln, dbTLS.Server)
	}
	s.apiHTTP = &http.Server{
		Handler: s.apiHandler(), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute,
		// Refused handshakes ("http: TLS handshake error from ...") and
		// other connection errors are logged as warnings.
		ErrorLog: slog.NewLogLogger(s.log.With("part", "api").Handler(), slog.LevelWarn),
	}
	go s.apiHTTP.Serve(ln) // owner: Site; stopped by Close
	return dbTLS, nil
}

// apiURL is the URL of path on the node API at addr.
func (s *Site) apiURL(addr, path string) string { return s.apiScheme + "://" + addr + path }

// certsPath is dir made absolute ("" stays "").
func certsPath(dir string) string {
	if dir == "" {
		return ""
	}
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// apiHandler serves the node API (--api): the crawl database's API
// (forwarded writes, joins, leaves), the nodes' reports to the leader,
// the leader's view of the nodes and of the federation, and `site leave`.
// With --certs only the nodes of this site reach it (mutual TLS).
func (s *Site) apiHandler() http.Handler {
	mux := http.NewServeMux()
	ready := s.whenReady
	// The crawl database's API, once open.
	mux.HandleFunc("/crawldb/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		db, host := s.dbReady, s.host
		s.mu.Unlock()
		if host != nil {
			host.APIHandler().ServeHTTP(w, r)
			return
		}
		if db == nil {
			http.Error(w, "site: crawl database starting", http.StatusServiceUnavailable)
			return
		}
		db.APIHandler().ServeHTTP(w, r)
	})
	// Deliveries between the shards of a sharded site.
	mux.Handle("/shardset/", ready(func(w http.ResponseWriter, r *http.Request) {
		s.set.Handler().ServeHTTP(w, r)
	}))
	// A sharded node's rows for another node's site-wide view.
	mux.HandleFunc("GET /site/shards", ready(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.localRows())
	}))
	mux.HandleFunc("GET /site/federation/state", ready(func(w http.ResponseWriter, r *http.Request) {
		if s.fed == nil {
			http.Error(w, "site: not in a federation", http.StatusNotFound)
			return
		}
		b, err := s.fed.LeaderState()
		if err != nil {
			http.Error(w, err.Error(), http.StatusMisdirectedRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	s.controlHandlers(mux, ready)
	mux.HandleFunc("POST /site/leave", ready(func(w http.ResponseWriter, r *http.Request) {
		if err := s.Leave(); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "node %s is leaving its site\n", s.cfg.Node)
	}))
	return mux
}

// APIAddr is the node API's bound address.
func (s *Site) APIAddr() string { return s.info.API }

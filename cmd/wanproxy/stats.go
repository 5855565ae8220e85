package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/meridian-crawler/meridian/wan"
)

// linkReport is one link in the stats endpoint's JSON.
type linkReport struct {
	Name            string `json:"name"`
	Listen          string `json:"listen"`
	Upstream        string `json:"upstream"`
	Delay           string `json:"delay"`
	Jitter          string `json:"jitter"`
	UpstreamBytes   int64  `json:"upstream_bytes"`
	DownstreamBytes int64  `json:"downstream_bytes"`
	Conns           int64  `json:"conns"`
}

// statsReport is the stats endpoint's JSON.
type statsReport struct {
	Links []linkReport `json:"links"`
}

// statsHandler serves GET /stats and POST /delay for em.
func statsHandler(em *wan.Emulator) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		writeReport(w, em)
	})
	mux.HandleFunc("POST /delay", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		delay, err := time.ParseDuration(q.Get("delay"))
		if err != nil {
			http.Error(w, fmt.Sprintf("delay: %v", err), http.StatusBadRequest)
			return
		}
		var jitter time.Duration
		if s := q.Get("jitter"); s != "" {
			if jitter, err = time.ParseDuration(s); err != nil {
				http.Error(w, fmt.Sprintf("jitter: %v", err), http.StatusBadRequest)
				return
			}
		}
		names := em.Names()
		if name := q.Get("link"); name != "" {
			names = []string{name}
		}
		for _, name := range names {
			if err := em.SetDelay(name, delay, jitter); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		writeReport(w, em)
	})
	return mux
}

// writeReport writes em's links and counts as JSON.
func writeReport(w http.ResponseWriter, em *wan.Emulator) {
	var rep statsReport
	for _, l := range em.Links() {
		s, _ := em.Stats(l.Name)
		rep.Links = append(rep.Links, linkReport{
			Name: l.Name, Listen: l.Listen, Upstream: l.Upstream,
			Delay: l.Delay.String(), Jitter: l.Jitter.String(),
			UpstreamBytes: s.Upstream, DownstreamBytes: s.Downstream, Conns: s.Conns,
		})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rep)
}

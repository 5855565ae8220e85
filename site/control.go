package site

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/rounds/control"
)

// The control API (issue 24) is on the node API, under /site/control and
// /site/inject: mutual TLS with --certs, else loopback (Validate). Every
// change is a crawl-database command (rounds.ApplyControl): the site's
// crawl database, or a sharded site's meta group, so that every node and a
// new leader see it.

// maxInjectBody bounds an inject request's body.
const maxInjectBody = 64 << 20

// forwardedHeader marks a request one node forwarded to another: it is
// not forwarded again.
const forwardedHeader = "X-Meridian-Forwarded"

// BadSeed is a seed line an inject refused, with its place and reason.
type BadSeed struct {
	Line int    `json:"line"`
	Text string `json:"text"`
	Err  string `json:"err"`
}

// InjectReply is the node API's answer to an inject.
type InjectReply struct {
	rounds.Injected
	Bad []BadSeed `json:"bad,omitempty"`
}

// controlHandlers adds the control API to mux.
func (s *Site) controlHandlers(mux *http.ServeMux, ready func(http.HandlerFunc) http.HandlerFunc) {
	mux.HandleFunc("GET /site/control", ready(func(w http.ResponseWriter, r *http.Request) {
		ctl, err := rounds.ReadControls(s.db.Store())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, ctl)
	}))
	mux.HandleFunc("POST /site/control", ready(func(w http.ResponseWriter, r *http.Request) {
		var op control.Op
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&op); err != nil {
			http.Error(w, "site: control: want a JSON change (pause, width, per_host, host_budget, pld_budget, host with delay/block/unblock): "+err.Error(), http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		ctl, err := rounds.ApplyControl(ctx, s.db, op, s.cfg.Node, s.log)
		if err != nil {
			code := http.StatusServiceUnavailable
			if errors.Is(err, control.ErrBadOp) {
				code = http.StatusBadRequest
			}
			http.Error(w, err.Error(), code)
			return
		}
		writeJSON(w, ctl)
	}))
	mux.HandleFunc("POST /site/inject", ready(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxInjectBody+1))
		if err != nil {
			http.Error(w, "site: inject: read the seeds: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > maxInjectBody {
			http.Error(w, fmt.Sprintf("site: inject: more than %d bytes of seeds in one request", maxInjectBody), http.StatusRequestEntityTooLarge)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
		defer cancel()
		reply, code, err := s.inject(ctx, body, r.Header.Get(forwardedHeader) != "")
		if err != nil {
			http.Error(w, err.Error(), code)
			return
		}
		writeJSON(w, reply)
	}))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// inject reads seed lines (as --seeds does: bad lines reported, the rest
// kept) and injects them on the node that leads the crawl (a sharded
// site: a node leading a shard, whose router sends each seed to its
// shard; a federation: to its site), forwarding them there if need be.
func (s *Site) inject(ctx context.Context, body []byte, forwarded bool) (InjectReply, int, error) {
	var reply InjectReply
	urls, bad, err := ReadSeeds(bytes.NewReader(body), s.norm, s.scope)
	if err != nil {
		return reply, http.StatusBadRequest, fmt.Errorf("site: inject: %w", err)
	}
	for _, b := range bad {
		reply.Bad = append(reply.Bad, BadSeed{Line: b.Line, Text: b.Text, Err: b.Err.Error()})
		s.log.Warn("site: inject: seed skipped", "line", b.Line, "text", b.Text, "err", b.Err)
	}
	if len(urls) == 0 {
		return reply, http.StatusOK, nil
	}
	// A site starting (its shards opening) or electing has no leader for
	// a moment: wait for one.
	c, addr, err := s.injector()
	for wait := time.NewTimer(15 * time.Second); err != nil; c, addr, err = s.injector() {
		select {
		case <-ctx.Done():
			return reply, http.StatusServiceUnavailable, err
		case <-wait.C:
			return reply, http.StatusServiceUnavailable, err
		case <-time.After(100 * time.Millisecond):
		}
	}
	if c != nil {
		in, err := c.Inject(ctx, urls)
		reply.Injected = in
		if err != nil {
			return reply, http.StatusServiceUnavailable, fmt.Errorf("site: inject: %w", err)
		}
		return reply, http.StatusOK, nil
	}
	if forwarded {
		return reply, http.StatusMisdirectedRequest, fmt.Errorf("site: inject: this node (%s) does not lead the crawl; the node it was forwarded from thought it did", s.cfg.Node)
	}
	// The seeds are normalised already: the leader reads them again.
	fwd, err := s.forwardInject(ctx, addr, []byte(strings.Join(urls, "\n")+"\n"))
	reply.Injected = fwd.Injected
	if err != nil {
		return reply, http.StatusBadGateway, err
	}
	return reply, http.StatusOK, nil
}

// injector returns the crawler on this node that injects (one that leads),
// else the node API address of a node that does.
func (s *Site) injector() (*rounds.Crawler, string, error) {
	lead := s.set.Leading()
	if len(lead) > 0 {
		return lead[slices.Min(keysOf(lead))], "", nil
	}
	voters, err := s.db.Voters()
	if err != nil {
		return nil, "", fmt.Errorf("site: inject: the site's nodes: %w", err)
	}
	for _, st := range s.set.Status() {
		for _, v := range voters {
			if st.Leader != "" && v.ID == st.Leader && v.ID != s.cfg.Node && v.APIAddr != "" {
				return nil, v.APIAddr, nil
			}
		}
	}
	return nil, "", errors.New("site: inject: no shard has a leader now")
}

func keysOf[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// forwardInject sends normalised seeds to the node API at addr.
func (s *Site) forwardInject(ctx context.Context, addr string, body []byte) (InjectReply, error) {
	var reply InjectReply
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.apiURL(addr, "/site/inject"), bytes.NewReader(body))
	if err != nil {
		return reply, fmt.Errorf("site: inject: %w", err)
	}
	req.Header.Set(forwardedHeader, s.cfg.Node)
	req.Header.Set("Content-Type", "text/plain")
	c := *s.nodeClient
	c.Timeout = 2 * time.Minute
	resp, err := c.Do(req)
	if err != nil {
		return reply, fmt.Errorf("site: inject: forward to the leader at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return reply, fmt.Errorf("site: inject: the leader at %s: %s: %s", addr, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&reply); err != nil {
		return reply, fmt.Errorf("site: inject: the leader's answer: %w", err)
	}
	return reply, nil
}

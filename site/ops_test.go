package site_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/site"
)

// TestCrawlSaysWhyItStopped: a crawl cut by its round limit, by its host
// budget or by a signal says so, with the URLs it left, in the log, on the
// progress writer, in /status (and its summary) and on the last line of
// each shard's rounds.jsonl (with what that shard left); only the crawl
// that ran out of URLs says "crawl exhausted". A site of shards' end
// counts the rounds of its busiest shard (--rounds counts each shard's).
func TestCrawlSaysWhyItStopped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string
		set    func(*site.Config)
		// stopAfter > 0: the test stops the node (as a signal does) once
		// this many rounds are done.
		stopAfter uint64
		// The progress line and the summary line, given the URLs left.
		progress, summary string
	}{
		{name: "round limit", reason: rounds.EndRounds, set: func(c *site.Config) { c.Rounds, c.Width = 2, 20 },
			progress: "crawl stopped at its round limit (--rounds) after 2 rounds: %d URLs left unfetched in the frontier",
			summary:  "rounds    stopped at the round limit (--rounds) after 2 rounds; %d URLs left unfetched in the frontier"},
		{name: "host budget", reason: rounds.EndBudget, set: func(c *site.Config) { c.HostBudget = 2 },
			progress: "the %d URLs left in the frontier are all of hosts that have used their page budget (--host-budget)",
			summary:  "the %d URLs left in the frontier are all of hosts that used their page budget (--host-budget)"},
		{name: "signal", reason: rounds.EndSignal, set: func(c *site.Config) { c.Width = 8 }, stopAfter: 4,
			progress: "crawl stopped by a signal after %d rounds: %d URLs left unfetched in the frontier",
			summary:  "rounds    stopping (signal) after %d rounds; %d URLs left unfetched in the frontier"},
		{name: "exhausted", reason: rounds.EndExhausted, set: func(c *site.Config) {},
			progress: "crawl exhausted: every reachable URL in scope has been fetched",
			summary:  "rounds    finished after %d rounds (exhausted)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "realistic")
			cfg.WebsimHosts, cfg.WebsimPages = 12, 6
			tc.set(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var logs, progress syncBuffer
			s, err := site.Start(ctx, cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			rctx, stop := context.WithCancel(ctx)
			defer stop()
			if tc.stopAfter > 0 {
				go func() { // owner: this subtest; ends when the rounds are done or rctx is
					for rctx.Err() == nil && s.Status().Rounds.Done < tc.stopAfter {
						time.Sleep(20 * time.Millisecond)
					}
					stop()
				}()
			}
			if err := s.Run(rctx, &progress); err != nil {
				t.Fatalf("run: %v", err)
			}
			if ctx.Err() != nil {
				t.Fatal("the crawl did not end within its time")
			}
			left := frontierOf(s)
			if (left == 0) != (tc.reason == rounds.EndExhausted) {
				t.Fatalf("%d URLs left in the frontier after a crawl that ended for %s", left, tc.reason)
			}

			// /status, while the node still serves it.
			var st site.Status
			if err := getJSON(t, "http://"+s.Addr()+"/status", &st); err != nil {
				t.Fatal(err)
			}
			// A site of shards: the rounds its busiest shard did (each
			// shard's own rounds.jsonl, --rounds counting each shard's).
			byShard := readShardRounds(t, cfg.Data)
			most := uint64(0)
			for _, ls := range byShard {
				most = max(most, uint64(len(ls)))
			}
			end := st.Rounds.Finished
			if tc.reason == rounds.EndSignal {
				if end != nil {
					t.Fatalf("a stopped node's site says its crawl ended: %+v", end)
				}
				end = st.Stopped
			}
			if end == nil || end.Reason != tc.reason || end.Frontier != left || end.Rounds != most {
				t.Fatalf("/status says the crawl ended %+v (stopped %+v); want %s with %d URLs left after %d rounds", st.Rounds.Finished, st.Stopped, tc.reason, left, most)
			}
			args := []any{left}
			if tc.reason == rounds.EndSignal {
				args = []any{most, left}
			}
			if tc.reason == rounds.EndExhausted {
				args = []any{most}
			}
			var sum strings.Builder
			if err := st.WriteSummary(&sum); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf(tc.summary, args...); !strings.Contains(sum.String(), want) {
				t.Errorf("summary lacks %q:\n%s", want, sum.String())
			}

			// The progress writer and the log.
			out, log := progress.String(), logs.String()
			if want := fmt.Sprintf(tc.progress, args[:strings.Count(tc.progress, "%d")]...); !strings.Contains(out, want) {
				t.Errorf("progress lacks %q:\n%s", want, out)
			}
			if want := fmt.Sprintf("reason=%s rounds=%d frontier=%d", tc.reason, most, left); !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
			exhausted := tc.reason == rounds.EndExhausted
			if strings.Contains(out, "crawl exhausted") != exhausted || strings.Contains(log, "crawl exhausted") != exhausted {
				t.Errorf("a crawl ended for %s says \"crawl exhausted\" %v:\n%s\n%s", tc.reason, !exhausted, out, log)
			}

			// Each shard's rounds.jsonl: one line a round, its last one
			// marked with the shard's end and what the shard left (a
			// shard that did no round has nothing to mark); the shards'
			// rounds add up to /status's.
			stores := s.Stores()
			if len(stores) != cfg.Shards {
				t.Fatalf("the node holds %d shards' stores, want %d", len(stores), cfg.Shards)
			}
			total := uint64(0)
			for sh, lines := range byShard {
				total += uint64(len(lines))
				if len(lines) == 0 {
					continue
				}
				for _, l := range lines[:len(lines)-1] {
					if l.End != nil {
						t.Errorf("%s round %d, not the last, is marked as the end: %+v", sh, l.Round, l.End)
					}
				}
				last := lines[len(lines)-1]
				if e := last.End; e == nil || e.Rounds != uint64(len(lines)) {
					t.Errorf("%s: the last line of rounds.jsonl: round %d, end %+v; want its end after %d rounds", sh, last.Round, e, len(lines))
					continue
				}
				if tc.reason == rounds.EndSignal && last.End.Reason != rounds.EndSignal {
					t.Errorf("%s: the last line of rounds.jsonl ends %+v, want a signal's", sh, last.End)
				}
				var i int
				fmt.Sscanf(sh, "s%d", &i)
				if got, want := last.End.Frontier, stores[i].Counts().Frontier; got != want {
					t.Errorf("%s: its end says %d URLs left, its store %d", sh, got, want)
				}
			}
			if total != st.Rounds.Done {
				t.Errorf("the shards' rounds.jsonl: %d rounds; /status: %d rounds done", total, st.Rounds.Done)
			}
		})
	}
}

// TestJoinWaitsForStartingNode: a node that joins a node still starting
// (it answers 503 "site: starting") waits, saying so every few seconds,
// and joins once the node is up; here the address to join answers as a
// starting node does until the first node has started, then passes the
// requests on to it.
func TestJoinWaitsForStartingNode(t *testing.T) {
	w := startMultiWeb(t, 4, 3, 2, 3)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var target atomic.Pointer[httputil.ReverseProxy]
	var starting atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := target.Load(); p != nil {
			p.ServeHTTP(w, r)
			return
		}
		starting.Add(1)
		http.Error(w, "site: starting", http.StatusServiceUnavailable) // what a starting node answers
	}))
	defer front.Close()

	var logs syncBuffer
	type started struct {
		s   *site.Site
		err error
	}
	joined := make(chan started, 1)
	cfg2 := nodeConfig(t, w, root, "n2", strings.TrimPrefix(front.URL, "http://"))
	go func() { // owner: this test; Start returns within JoinWait (a minute)
		s, err := site.Start(ctx, cfg2, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
		joined <- started{s, err}
	}()
	// The joining node says it waits (a line every 5 s) and asks again.
	waitFor(t, 20*time.Second, "the joining node to say it waits", func() bool {
		return strings.Contains(logs.String(), "is still starting; waiting")
	})
	select {
	case r := <-joined:
		if r.s != nil {
			r.s.Close()
		}
		t.Fatalf("the join ended while its site was starting: %v", r.err)
	default:
	}
	if n := starting.Load(); n < 2 {
		t.Fatalf("the starting node was asked %d times", n)
	}

	n1, err := site.Start(ctx, nodeConfig(t, w, root, "n1", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	u, _ := url.Parse("http://" + n1.Addr())
	target.Store(httputil.NewSingleHostReverseProxy(u))

	r := <-joined
	if r.err != nil {
		t.Fatalf("join after the site started: %v\n%s", r.err, logs.String())
	}
	defer r.s.Close()
	m, err := n1.DB().Members()
	if err != nil || len(m) != 2 || m["n1"] == "" || m["n2"] == "" {
		t.Fatalf("members after the join: %v, %v", m, err)
	}
	if !strings.Contains(logs.String(), "the site to join answers") {
		t.Errorf("the log does not say the site answered at last:\n%s", logs.String())
	}
}

// TestJoinWrongAnswerFailsAtOnce: an address that answers, but not as a
// Meridian node that is starting does, fails the join at its first answer
// with the message of a join to no site, and the node does not wait.
func TestJoinWrongAnswerFailsAtOnce(t *testing.T) {
	w := startMultiWeb(t, 2, 2, 1, 3)
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name   string
		status int
		body   string
		msg    string
	}{
		{"another server's 503", http.StatusServiceUnavailable, "busy, come back later", "503 Service Unavailable"},
		{"not found", http.StatusNotFound, "404 page not found", "404 Not Found"},
		{"not a Meridian answer", http.StatusOK, `{"hello": "world"}`, "not a Meridian site's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			var logs syncBuffer
			cfg := nodeConfig(t, w, root, "x", strings.TrimPrefix(srv.URL, "http://"))
			cfg.Data = filepath.Join(root, strings.ReplaceAll(tc.name, " ", "-"))
			s, err := site.Start(ctx, cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
			if err == nil {
				s.Close()
				t.Fatal("joined")
			}
			if !errors.Is(err, site.ErrNoSite) || !strings.Contains(err.Error(), "no Meridian site answers at --join") || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q, want %v with %q", err, site.ErrNoSite, tc.msg)
			}
			if n := asked.Load(); n != 1 {
				t.Errorf("the address was asked %d times, want once", n)
			}
			if strings.Contains(logs.String(), "waiting") {
				t.Errorf("the node waited:\n%s", logs.String())
			}
		})
	}
}

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
// rounds.jsonl; only the crawl that ran out of URLs says "crawl exhausted".
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
		{name: "signal", reason: rounds.EndSignal, set: func(c *site.Config) { c.Width = 20 }, stopAfter: 1,
			progress: "crawl stopped by a signal after %d rounds: %d URLs left unfetched in the frontier",
			summary:  "rounds    stopping (signal) after %d rounds; %d URLs left unfetched in the frontier"},
		{name: "exhausted", reason: rounds.EndExhausted, set: func(c *site.Config) {},
			progress: "crawl exhausted: every reachable URL in scope has been fetched",
			summary:  "rounds    finished after %d rounds (exhausted)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "realistic")
			cfg.WebsimHosts, cfg.WebsimPages = 12, 6
			// Still the old design: a site of shards does not yet say
			// why its crawl ended as one crawl (its /status has no
			// Rounds.Finished summed over the shards, its shards'
			// rounds.jsonl each mark their own end).
			cfg.Unsharded = true
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
			end := st.Rounds.Finished
			if tc.reason == rounds.EndSignal {
				if end != nil {
					t.Fatalf("a stopped node's site says its crawl ended: %+v", end)
				}
				end = st.Stopped
			}
			if end == nil || end.Reason != tc.reason || end.Frontier != left || end.Rounds != st.Rounds.Done {
				t.Fatalf("/status says the crawl ended %+v (stopped %+v); want %s with %d URLs left after %d rounds", st.Rounds.Finished, st.Stopped, tc.reason, left, st.Rounds.Done)
			}
			args := []any{left}
			if tc.reason == rounds.EndSignal {
				args = []any{st.Rounds.Done, left}
			}
			if tc.reason == rounds.EndExhausted {
				args = []any{st.Rounds.Done}
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
			if want := fmt.Sprintf("reason=%s rounds=%d frontier=%d", tc.reason, st.Rounds.Done, left); !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
			exhausted := tc.reason == rounds.EndExhausted
			if strings.Contains(out, "crawl exhausted") != exhausted || strings.Contains(log, "crawl exhausted") != exhausted {
				t.Errorf("a crawl ended for %s says \"crawl exhausted\" %v:\n%s\n%s", tc.reason, !exhausted, out, log)
			}

			// rounds.jsonl: one line a round, the last one marked.
			lines := readRounds(t, cfg.Data)
			if len(lines) == 0 || uint64(len(lines)) != st.Rounds.Done {
				t.Fatalf("%d lines in rounds.jsonl, %d rounds done", len(lines), st.Rounds.Done)
			}
			for _, l := range lines[:len(lines)-1] {
				if l.End != nil {
					t.Errorf("round %d, not the last, is marked as the end: %+v", l.Round, l.End)
				}
			}
			last := lines[len(lines)-1]
			if e := last.End; e == nil || e.Reason != tc.reason || e.Frontier != left || e.Rounds != st.Rounds.Done {
				t.Errorf("the last line of rounds.jsonl: round %d, end %+v; want %s with %d URLs left after %d rounds", last.Round, e, tc.reason, left, st.Rounds.Done)
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

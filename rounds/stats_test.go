package rounds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/fetcher"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// TestMarkEnd: the crawl's end goes on the last line of rounds.jsonl and
// nowhere else, once, only on the round asked for; every line still
// decodes as a round; a file cut mid-line is refused.
func TestMarkEnd(t *testing.T) {
	line := func(round uint64, extra int) string {
		st := RoundStats{Round: round, Fetched: int64(round) * 10, ByClass: map[string]int64{"2xx": 1}}
		if extra > 0 { // a line longer than markEnd's read chunk
			st.Troubled = map[string]*HostFate{"h.test": {LastError: strings.Repeat("x", extra)}}
		}
		b, _ := json.Marshal(st)
		return string(b) + "\n"
	}
	end := Finish{Reason: EndRounds, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Rounds: 2, Frontier: 158}
	markedWith := func(round uint64, extra int, end Finish) string {
		l := line(round, extra)
		e, _ := json.Marshal(end)
		return l[:len(l)-2] + `,"end":` + string(e) + "}\n"
	}
	marked := func(round uint64, extra int) string { return markedWith(round, extra, end) }
	signal := Finish{Reason: EndSignal, At: end.At.Add(-time.Hour), Rounds: 2, Frontier: 1234567, InFlight: 40}
	// A signal's mark replaced by a shorter one: blanks fill its place.
	replaced := line(1, 0) + marked(2, 0)
	replaced = replaced[:len(replaced)-2] + strings.Repeat(" ", len(markedWith(2, 0, signal))-len(marked(2, 0))) + "}\n"
	for _, tc := range []struct {
		name    string
		file    string
		round   uint64 // 0: whichever
		want    string // the file after
		done    bool   // the last line carries a mark after
		signal  bool   // mark a signal's stop, not the end
		wantErr string
	}{
		{name: "no line", file: "", want: ""},
		{name: "the last of two", file: line(1, 0) + line(2, 0), want: line(1, 0) + marked(2, 0), done: true},
		{name: "the round asked for", file: line(1, 0) + line(2, 0), round: 2, want: line(1, 0) + marked(2, 0), done: true},
		{name: "not the round asked for", file: line(1, 0) + line(2, 0), round: 3, want: line(1, 0) + line(2, 0)},
		{name: "marked already", file: line(1, 0) + marked(2, 0), want: line(1, 0) + marked(2, 0), done: true},
		{name: "a signal's mark, then the end", file: line(1, 0) + markedWith(2, 0, signal), round: 2, want: replaced, done: true},
		{name: "the end's mark stays", file: line(1, 0) + marked(2, 0), want: line(1, 0) + marked(2, 0), done: true, signal: true},
		{name: "one long line", file: line(7, 200<<10), want: marked(7, 200<<10), done: true},
		{name: "a long line after another", file: line(6, 100<<10) + line(7, 150<<10), want: line(6, 100<<10) + marked(7, 150<<10), done: true},
		{name: "cut mid-line", file: line(1, 0) + `{"round":2,"fetch`, want: line(1, 0) + `{"round":2,"fetch`, wantErr: "does not end with a whole line"},
		{name: "not JSON", file: "garbage\n", want: "garbage\n", wantErr: "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rounds.jsonl")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			c := &Crawler{statsF: f}
			mark := end
			if tc.signal {
				mark = signal
			}
			done, err := c.markEnd(tc.round, mark)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if done != tc.done {
				t.Errorf("marked %v, want %v", done, tc.done)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("file after:\n%.300q\nwant\n%.300q", got, tc.want)
			}
			if tc.wantErr != "" {
				return
			}
			// Every line is still a round; only the last may carry the end.
			lines := bytes.Split(bytes.TrimSuffix(got, []byte("\n")), []byte("\n"))
			for i, l := range lines {
				if len(l) == 0 {
					continue
				}
				var st RoundStats
				if err := json.Unmarshal(l, &st); err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				e := st.End
				if last := i == len(lines)-1; e != nil && (!last || e.Reason != end.Reason || e.Frontier != end.Frontier || e.Rounds != end.Rounds || !e.At.Equal(end.At)) {
					t.Errorf("line %d (round %d) has end %+v", i+1, st.Round, st.End)
				}
			}
			// The file's own appends go after the marked line.
			if _, err := c.statsF.Write([]byte(line(9, 0))); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(path); !bytes.HasSuffix(got, []byte(tc.want+line(9, 0))) {
				t.Errorf("an append after the mark:\n%.300q", got)
			}
		})
	}
}

// holdFetcher keeps back the jobs of one URL until release is closed,
// and passes every other job on.
type holdFetcher struct {
	*fetcher.Fetcher
	url     string
	mu      sync.Mutex
	held    []fetcher.Job
	release chan struct{}
}

func (h *holdFetcher) Submit(jobs []fetcher.Job) {
	pass := jobs[:0:0]
	h.mu.Lock()
	for _, j := range jobs {
		if j.URL == h.url {
			h.held = append(h.held, j)
			continue
		}
		pass = append(pass, j)
	}
	h.mu.Unlock()
	if len(pass) > 0 {
		h.Fetcher.Submit(pass)
	}
}

// TestEndMarkedOnLastLine: a round whose fetch ends after later rounds'
// is updated after them (its line is written after theirs); the crawl's
// end goes on the file's last line, whatever its round, and on no other.
// The crawl is seeded with every URL of its web (rounds from the seeds
// alone, and none found later) and a URL that answers 404, whose job is held back
// from the fetcher until its round is the only one in flight, two rounds
// after it, with nothing else to fetch. Before the fix the end was marked
// only on the highest round's line, and no line of such a crawl had it.
func TestEndMarkedOnLastLine(t *testing.T) {
	ts := startSite(t, synth.Clean, 8, 5)
	newCrawler(t, ts, Options{Width: 12, PerHost: 2})
	c := ts.c
	defer c.Close()
	var seeds []string
	if err := ts.sim.Web().Truth(func(r *synth.Record) error {
		seeds = append(seeds, r.URL)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	missing := ts.sim.Web().FrontURL(0) + "held-back-by-the-test"
	seeds = append(seeds, missing)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Seed(ctx, seeds); err != nil {
		t.Fatal(err)
	}
	h := &holdFetcher{Fetcher: ts.f, url: missing}
	var heldRound atomic.Uint64
	go func() { // owner: this test; ends when the held job is released or ctx is done
		quiet := 0
		for ctx.Err() == nil && quiet < 10 {
			time.Sleep(50 * time.Millisecond)
			h.mu.Lock()
			if len(h.held) > 0 {
				heldRound.Store(h.held[0].Round)
			}
			h.mu.Unlock()
			r := heldRound.Load()
			s, fs := c.Status(), ts.f.Stats()
			if r > 0 && s.Next > r+2 && len(s.Active) == 1 && s.Active[0].Round == r && fs.Queued == 0 && fs.InFlight == 0 {
				quiet++
			} else {
				quiet = 0
			}
		}
		h.mu.Lock()
		held := h.held
		h.held = nil
		h.mu.Unlock()
		ts.f.Submit(held)
	}()
	fctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.f.Run(fctx) }()
	err := c.Run(ctx, h, 0)
	stop()
	if ferr := <-done; ferr != nil {
		t.Errorf("fetcher: %v", ferr)
	}
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("run: %v", err)
	}
	f, err := os.ReadFile(filepath.Join(ts.dir, "stats", "rounds.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(f, []byte("\n")), []byte("\n"))
	held := heldRound.Load()
	var top uint64
	for i, l := range lines {
		var st RoundStats
		if err := json.Unmarshal(l, &st); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		top = max(top, st.Round)
		last := i == len(lines)-1
		if last && (held == 0 || st.Round != held) {
			t.Fatalf("the last line is round %d's: round %d (held back) should have been updated last", st.Round, held)
		}
		if (st.End != nil) != last {
			t.Errorf("line %d (round %d of %d lines) has end %+v", i+1, st.Round, len(lines), st.End)
		}
		if last && st.End != nil && (st.End.Reason != EndExhausted || st.End.Rounds != c.Status().Done) {
			t.Errorf("the end mark %+v: want %s after %d rounds", st.End, EndExhausted, c.Status().Done)
		}
	}
	if uint64(len(lines)) != c.Status().Done || top < 3 {
		t.Errorf("%d lines, rounds up to %d, %d rounds done", len(lines), top, c.Status().Done)
	}
	if top < held+2 {
		t.Errorf("rounds up to %d: the held round %d was not overtaken", top, held)
	}
}

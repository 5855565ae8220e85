package rounds

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

//go:build linux

package site_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/fetcher/warcfile/cdxj"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/site"
)

const childEnv = "MERIDIAN_SITE_TEST_CHILD"

// TestMain runs a site when started as the child of TestKillResume.
func TestMain(m *testing.M) {
	if js := os.Getenv(childEnv); js != "" {
		var cfg site.Config
		if err := json.Unmarshal([]byte(js), &cfg); err != nil {
			os.Stderr.WriteString("child: bad config: " + err.Error() + "\n")
			os.Exit(2)
		}
		ctx, stop := context.WithTimeout(context.Background(), childLimit)
		defer stop()
		var log *slog.Logger
		if p := os.Getenv(childLogEnv); p != "" {
			f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err == nil {
				defer f.Close()
				log = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
			}
		}
		if err := site.Up(ctx, cfg, log, nil); err != nil {
			os.Stderr.WriteString("child: " + err.Error() + "\n")
			os.Exit(1)
		}
		if ctx.Err() != nil {
			// A crawl that did not end within the child's time is a
			// failure, not a stop: say so (exit status 3).
			os.Stderr.WriteString("child " + cfg.Node + ": stopped at its time limit (childLimit), the crawl had not ended\n")
			os.Exit(3)
		}
		os.Exit(0)
	}
	// Every goroutine a site starts stops when it is closed.
	goleak.VerifyTestMain(m)
}

func startChild(t *testing.T, cfg site.Config) *exec.Cmd {
	t.Helper()
	return startChildLog(t, cfg, "")
}

// childLimit bounds a child's run: a crawl not ended by then fails.
const childLimit = 5 * time.Minute

// childLogEnv names the file a child logs to (info level).
const childLogEnv = "MERIDIAN_SITE_TEST_LOG"

// startChildLog starts a site in a child process, logging to logPath ("":
// no log).
func startChildLog(t *testing.T, cfg site.Config, logPath string) *exec.Cmd {
	t.Helper()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(js), childLogEnv+"="+logPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// waitStatus polls the status of the site that child runs (every 5 ms,
// for at most 90 s) until ready holds, and returns that status; the test
// fails, saying the site never did what, if it does not.
func waitStatus(t *testing.T, cfg site.Config, child *exec.Cmd, what string, ready func(*site.Status) bool) site.Status {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the site never %s", what)
		}
		time.Sleep(5 * time.Millisecond)
		in, err := site.ReadInfo(cfg.Data)
		if err != nil || in.PID != child.Process.Pid {
			continue
		}
		var st site.Status
		if err := getJSON(t, "http://"+in.Listen+"/status", &st); err == nil && ready(&st) {
			return st
		}
	}
}

// restartToEnd starts the site of cfg again in a child and waits (at most
// 3 minutes) for it to end by itself; the test fails if it does not, or
// fails.
func restartToEnd(t *testing.T, cfg site.Config) {
	t.Helper()
	again := startChild(t, cfg)
	waitErr := make(chan error, 1)
	go func() { waitErr <- again.Wait() }()
	select {
	case err := <-waitErr:
		if err != nil {
			t.Fatalf("restarted site: %v", err)
		}
	case <-time.After(3 * time.Minute):
		again.Process.Kill()
		<-waitErr
		t.Fatal("restarted site did not finish")
	}
}

// TestKillResume SIGKILLs a site in the middle of a fetch phase and
// restarts it: the round resumes, nothing fetched before the kill is
// fetched again, at most the pages in flight at the kill are, and every
// target of the web is crawled (none lost with the kill).
func TestKillResume(t *testing.T) {
	cfg := testConfig(t, "realistic")
	cfg.WebsimHosts, cfg.WebsimPages = 60, 10
	cfg.Workers = 8 // the bound on requests in flight
	cfg.NoSync = false

	child := startChild(t, cfg)
	killed := false
	defer func() {
		if !killed {
			child.Process.Kill()
			child.Wait()
		}
	}()
	// Wait until the site is well into a fetch phase with requests in flight.
	st := waitStatus(t, cfg, child, "got into a fetch phase with requests in flight", func(st *site.Status) bool {
		return st.Fetcher.Done >= 150 && st.Fetcher.InFlight > 0 && st.Phase == rounds.PhaseFetch && st.Round >= 2
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	killed = true
	done := fetchedOnDisk(t, cfg.Data)
	t.Logf("killed in round %d (%v) with %d done, %d in flight; %d results in round files", st.Round, st.Phase, st.Fetcher.Done, st.Fetcher.InFlight, len(done))
	if len(done) == 0 {
		t.Fatal("no fetch results on disk at the kill: the kill did not land in a fetch phase")
	}

	// Restart: it must resume and run to exhaustion.
	restartToEnd(t, cfg)
	checkWARCIndexes(t, filepath.Join(cfg.Data, "warc"))

	rep, err := crawlcheck.CheckData(context.Background(), cfg.Data, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("coverage %d/%d = %.4f; missing %v", rep.Coverage.Covered, rep.Coverage.Targets, rep.Coverage.Ratio, rep.Coverage.Missing)
	// Every target: a kill loses nothing (0.99 let the URLs only a lost
	// sitemap linked go unseen, 12 of 1,360).
	if rep.Coverage.Covered != rep.Coverage.Targets {
		t.Errorf("coverage %.4f after the restart; missing e.g. %v", rep.Coverage.Ratio, rep.Coverage.Missing)
	}
	resp, err := crawlcheck.Responses(filepath.Join(cfg.Data, "warc"))
	if err != nil {
		t.Fatal(err)
	}
	ok2xx := func(s int) bool { return s >= 200 && s < 300 }
	// Pages, not robots.txt and sitemaps: a host's robots.txt record is
	// written with others every 200 ms (rounds' host store), and one
	// fetched since the last write before the kill is fetched again, with
	// the sitemaps it names (fetcher's TestSitemapsPendingSurvive: none
	// of their URLs is lost either way).
	pages := map[string][]int{}
	robots := 0
	for u, st := range resp {
		if strings.HasSuffix(u, "/robots.txt") || strings.Contains(u, "sitemap") {
			if n, _ := crawlcheck.Refetched(map[string][]int{u: st}, ok2xx); n > 0 {
				robots++
			}
			continue
		}
		pages[u] = st
	}
	twice, sample := crawlcheck.Refetched(pages, ok2xx)
	t.Logf("%d pages fetched twice with 2xx (bound: %d workers; %d in flight at the last status); %d robots.txt and sitemaps", twice, cfg.Workers, st.Fetcher.InFlight, robots)
	if twice > cfg.Workers {
		t.Errorf("%d pages fetched twice, more than the %d that can be in flight: %v", twice, cfg.Workers, sample)
	}
	for u := range done {
		n := 0
		for _, s := range resp[u] {
			if ok2xx(s) {
				n++
			}
		}
		if n > 1 {
			t.Errorf("%s had its result on disk at the kill but was fetched %d times", u, n)
		}
	}
}

// checkWARCIndexes checks that every WARC file in dir has its CDXJ index,
// with the bytes an index made from the file alone has (after a SIGKILL
// and a restart, the repaired file's index included), and that no partial
// index is left.
func checkWARCIndexes(t *testing.T, dir string) {
	t.Helper()
	open, _ := filepath.Glob(filepath.Join(dir, "*.cdxj.open"))
	if len(open) > 0 {
		t.Errorf("partial indexes left: %v", open)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) == 0 {
		t.Fatalf("no WARC files in %s", dir)
	}
	lines := 0
	for _, f := range files {
		got, err := os.ReadFile(f + ".cdxj")
		if err != nil {
			t.Errorf("%s: no index: %v", f, err)
			continue
		}
		want := filepath.Join(t.TempDir(), "rebuilt.cdxj")
		if _, err := cdxj.IndexFile(f, filepath.Base(f), want); err != nil {
			t.Fatal(err)
		}
		if w, _ := os.ReadFile(want); !bytes.Equal(got, w) {
			t.Errorf("%s: index differs from the one made from the file", f)
		}
		lines += bytes.Count(got, []byte("\n"))
	}
	t.Logf("%d WARC files, %d index lines", len(files), lines)
}

// fetchedOnDisk is the set of page URLs with a result in a round's fetch
// segment under data: a site of shards keeps each shard's rounds under
// shards/sNNN/, the old design its one under data.
func fetchedOnDisk(t *testing.T, data string) map[string]bool {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(data, "shards", "s*"))
	if len(dirs) == 0 {
		dirs = []string{data}
	}
	done := map[string]bool{}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "rounds")); errors.Is(err, fs.ErrNotExist) {
			continue // a shard with no round on disk
		}
		atKill, err := rounds.FetchedURLs(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, urls := range atKill {
			for _, u := range urls {
				done[u] = true
			}
		}
	}
	return done
}

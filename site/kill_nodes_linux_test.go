//go:build linux

package site_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/site"
)

// node is a site node running as a child process.
type node struct {
	name string
	cfg  site.Config
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited; then err is set
	err  error
	log  string
}

func startNode(t *testing.T, cfg site.Config) *node {
	t.Helper()
	n := &node{name: cfg.Node, cfg: cfg, done: make(chan struct{}), log: filepath.Join(filepath.Dir(cfg.Data), cfg.Node+".log")}
	n.cmd = startChildLog(t, cfg, n.log)
	go func() { n.err = n.cmd.Wait(); close(n.done) }()
	return n
}

func (n *node) kill(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-n.done
}

// status reads the node's /status (ok false if it does not answer).
func (n *node) status(t *testing.T) (site.Status, bool) {
	var st site.Status
	in, err := site.ReadInfo(n.cfg.Data)
	if err != nil || in.PID != n.cmd.Process.Pid {
		return st, false
	}
	if err := getJSON(t, "http://"+in.Listen+"/status", &st); err != nil {
		return st, false
	}
	return st, true
}

func (n *node) addr(t *testing.T) string {
	t.Helper()
	var a string
	waitFor(t, 30*time.Second, n.name+" to answer", func() bool {
		st, ok := n.status(t)
		if ok {
			in, _ := site.ReadInfo(n.cfg.Data)
			a = in.Listen
		}
		return ok && st.Node == n.name
	})
	return a
}

// tail logs the node's events that matter for a failure (logEvents).
func (n *node) tail(t *testing.T) { logEvents(t, n.name, n.log) }

// startNodes starts a site of three nodes, each its own process: n1 from
// cfg1, then n2 and n3 joining it, from nodeConfig changed by edit (if not
// nil). The map holds the nodes by name; a test that restarts one puts the
// new one in it. When the test ends, every node in it still running is
// SIGKILLed, and if the test failed, each one's events are logged.
func startNodes(t *testing.T, w *multiWeb, root string, cfg1 site.Config, edit func(*site.Config)) map[string]*node {
	t.Helper()
	nodes := map[string]*node{}
	t.Cleanup(func() {
		for _, n := range nodes {
			select {
			case <-n.done:
			default:
				n.cmd.Process.Kill()
				<-n.done
			}
		}
		if t.Failed() {
			for _, n := range nodes {
				n.tail(t)
			}
		}
	})
	nodes["n1"] = startNode(t, cfg1)
	join := nodes["n1"].addr(t)
	for _, name := range []string{"n2", "n3"} {
		cfg := nodeConfig(t, w, root, name, join)
		if edit != nil {
			edit(&cfg)
		}
		nodes[name] = startNode(t, cfg)
	}
	return nodes
}

// waitNodesEnd waits for every node in nodes to exit by itself, at most
// 3 minutes each, and fails the test at once if one exits with an error or
// does not end.
func waitNodesEnd(t *testing.T, nodes map[string]*node) {
	t.Helper()
	for name, n := range nodes {
		select {
		case <-n.done:
			if n.err != nil {
				t.Fatalf("%s: %v", name, n.err)
			}
		case <-time.After(3 * time.Minute):
			t.Fatalf("%s did not end", name)
		}
	}
}

// TestNodesKilled crawls a realistic web with three nodes, each its own
// process on real TCP. A follower is SIGKILLed mid-fetch: its parts go to
// the others within 10 s; it restarts, rejoins and takes work again. Then
// the leader is SIGKILLed mid-round: another node leads and finishes the
// round; the old leader restarts and takes work again. The crawl ends on
// every node by itself, with full coverage, no politeness breach, OPIC's
// cash conserved after every round, and no URL fetched twice but those in
// flight on the killed nodes.
func TestNodesKilled(t *testing.T) {
	w := startMultiWeb(t, 60, 16, 6, 33)
	root := t.TempDir()
	cfg1 := nodeConfig(t, w, root, "n1", "")
	cfg1.NoSync = false
	nodes := startNodes(t, w, root, cfg1, func(cfg *site.Config) { cfg.NoSync = false })
	leader := func() string {
		for name, n := range nodes {
			if st, ok := n.status(t); ok && st.Role == "leader" {
				return name
			}
		}
		return ""
	}
	// 1. A follower, mid-fetch.
	var victim string
	waitFor(t, 60*time.Second, "a follower fetching", func() bool {
		for name, n := range nodes {
			st, ok := n.status(t)
			if ok && st.Role == "follower" && st.Rounds.Parts > 0 && st.Fetcher.InFlight > 0 && st.Fetcher.Done > 20 {
				victim = name
				return true
			}
		}
		return false
	})
	killedAt := time.Now()
	nodes[victim].kill(t)
	kills := []kill{{node: victim, at: killedAt}}
	var moved time.Time
	waitFor(t, 30*time.Second, "the killed follower's parts to move", func() bool {
		l := leader()
		if l == "" {
			return false
		}
		st, ok := nodes[l].status(t)
		if !ok || st.Rounds.Replanned == "" {
			return false
		}
		moved, _ = time.Parse("2006-01-02T15:04:05.000Z07:00", st.Rounds.Replanned)
		return moved.After(killedAt)
	})
	t.Logf("follower %s killed; its parts moved %v later", victim, moved.Sub(killedAt).Round(time.Millisecond))
	if d := moved.Sub(killedAt); d > 10*time.Second {
		t.Errorf("the killed follower's parts moved after %v, want within 10 s", d)
	}
	cfg := nodes[victim].cfg
	cfg.Join = ""
	nodes[victim] = startNode(t, cfg)
	waitFor(t, 60*time.Second, victim+" to take work again", func() bool {
		st, ok := nodes[victim].status(t)
		return ok && st.Fetcher.Done > 0
	})

	// 2. The leader, mid-round.
	old := ""
	var round uint64
	var inFlight []uint64 // rounds the leader may retire just before it dies
	waitFor(t, 60*time.Second, "the leader in a fetch phase", func() bool {
		old = leader()
		if old == "" {
			return false
		}
		st, ok := nodes[old].status(t)
		if ok && st.Phase == rounds.PhaseFetch && len(st.Rounds.Active) > 0 {
			round = st.Rounds.Active[0].Round
			for _, a := range st.Rounds.Active {
				inFlight = append(inFlight, a.Round)
			}
			// And the rounds it has retired without writing their line
			// yet (the line follows the cash check's scan): those after
			// the last line it wrote.
			lined := uint64(0)
			if l := st.Rounds.Last; l != nil {
				lined = l.Round
			}
			for r := lined + 1; r < st.Rounds.Next; r++ {
				if !slices.Contains(inFlight, r) {
					inFlight = append(inFlight, r)
				}
			}
			return true
		}
		return false
	})
	kills = append(kills, kill{node: old, at: time.Now(), rounds: inFlight})
	nodes[old].kill(t)
	t.Logf("leader %s killed in round %d", old, round)
	waitFor(t, 60*time.Second, "a new leader to finish round "+itoa(round), func() bool {
		for name, n := range nodes {
			if name == old {
				continue
			}
			if st, ok := n.status(t); ok && st.Role == "leader" && st.Rounds.Done >= round && !activeHas(st.Rounds.Active, round) {
				return true
			}
		}
		return false
	})
	cfg = nodes[old].cfg
	cfg.Join = ""
	nodes[old] = startNode(t, cfg)
	waitFor(t, 60*time.Second, old+" to take work again", func() bool {
		st, ok := nodes[old].status(t)
		return ok && st.Fetcher.Done > 0
	})

	// Every node ends by itself.
	waitNodesEnd(t, nodes)
	dirs := []string{filepath.Join(root, "n1"), filepath.Join(root, "n2"), filepath.Join(root, "n3")}
	checkMultiCrawl(t, w, cfg1, dirs, kills)
}

func activeHas(as []rounds.Active, round uint64) bool {
	for _, a := range as {
		if a.Round == round {
			return true
		}
	}
	return false
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

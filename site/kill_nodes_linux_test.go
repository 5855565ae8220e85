//go:build linux

package site_test

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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

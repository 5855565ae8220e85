package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/geodelay"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// What the crawl benchmarks (bench site, cluster and federation) set up
// around their runs: the binaries, websim and the seeds of its web, and
// websim's statistics.

// simProc is websim, in a subprocess or in this process.
type simProc struct {
	child *child         // subprocess
	srv   *websim.Server // in-process
	pid   int
	dns   string
	admin string
}

// startSim starts websim serving the web c describes (in this process with
// c.InProcess, else bin in a subprocess) with its DNS and admin servers on
// free ports, its ready file in dir, and returns it with its web. clients,
// if any, pay their distance to the hosts (websim --clients, written to
// dir/clients.txt).
func startSim(ctx context.Context, c *SiteConfig, dir, bin string, clients []geodelay.Client) (*simProc, *synth.Web, error) {
	o := c.webOptions(0)
	if c.InProcess {
		srv, err := websim.Start(websim.Options{Web: o, DNSAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Clients: clients})
		if err != nil {
			return nil, nil, fmt.Errorf("bench: start websim: %w", err)
		}
		return &simProc{srv: srv, pid: os.Getpid(), dns: srv.DNSAddr(), admin: srv.AdminAddr()}, srv.Web(), nil
	}
	ready := filepath.Join(dir, "websim-ready")
	args := append(serveArgs(o, ready), "--progress", "0")
	if c.TimeScale > 0 {
		args = append(args, "--changes", "--time-scale", strconv.FormatFloat(c.TimeScale, 'g', -1, 64),
			"--epoch", o.Epoch.Format(time.RFC3339))
	}
	if len(clients) > 0 {
		file := filepath.Join(dir, "clients.txt")
		var b strings.Builder
		for _, cl := range clients {
			b.WriteString(cl.String() + "\n")
		}
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			return nil, nil, fmt.Errorf("bench: websim clients file: %w", err)
		}
		args = append(args, "--clients", file)
	}
	ch, err := startWebsim(ctx, "websim", bin, args, ready)
	if err != nil {
		return nil, nil, err
	}
	sim := &simProc{child: ch, pid: ch.p.pid}
	if err := sim.readAddrs(ready); err != nil {
		sim.stop()
		return nil, nil, err
	}
	o.Port = ch.port
	web, err := synth.New(o)
	if err != nil {
		sim.stop()
		return nil, nil, fmt.Errorf("bench: rebuild the web: %w", err)
	}
	return sim, web, nil
}

// readAddrs reads websim's DNS and admin addresses from its ready file
// (complete once waitReady has read a port from it).
func (p *simProc) readAddrs(ready string) error {
	b, err := os.ReadFile(ready)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "dns="); ok {
			p.dns = v
		} else if v, ok := strings.CutPrefix(f, "admin="); ok {
			p.admin = v
		}
	}
	if p.dns == "" || p.admin == "" {
		return fmt.Errorf("bench: websim ready file without dns= or admin=: %q", b)
	}
	return nil
}

// stop stops websim; it is idempotent.
func (p *simProc) stop() error {
	if p.child != nil {
		return p.child.stop()
	}
	return p.srv.Close()
}

// makeRunDir makes a run's directory, meridian-bench-NAME-*, in parent
// (made if missing; "": the system's temporary directory).
func makeRunDir(parent, name string) (string, error) {
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", fmt.Errorf("bench: %w", err)
		}
	}
	dir, err := os.MkdirTemp(parent, "meridian-bench-"+name+"-")
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return dir, nil
}

// cost sets st's CPU seconds and peak RSS to websim's so far (in a
// subprocess; in this process it leaves them).
func (p *simProc) cost(st *ProcStats) {
	if p.child == nil {
		return
	}
	st.PeakRSS = peakRSS(p.pid)
	if cpu, err := procCPU(p.pid); err == nil {
		st.CPUS = cpu.Seconds()
	}
}

// buildBinaries builds ./cmd/websim and ./cmd/site of the module at root
// (found if empty) into dir, unless simBin and siteBin name them already.
func buildBinaries(ctx context.Context, root, simBin, siteBin, dir string, progress func(string, ...any)) (string, string, error) {
	if simBin != "" && siteBin != "" {
		return simBin, siteBin, nil
	}
	var err error
	if root == "" {
		if root, err = moduleRoot(ctx); err != nil {
			return "", "", err
		}
	}
	progress("building ./cmd/websim and ./cmd/site")
	if simBin == "" {
		if simBin, err = buildCmd(ctx, root, dir, "websim"); err != nil {
			return "", "", err
		}
	}
	if siteBin == "" {
		if siteBin, err = buildCmd(ctx, root, dir, "site"); err != nil {
			return "", "", err
		}
	}
	return simBin, siteBin, nil
}

// buildCmd builds ./cmd/NAME of the module at root into dir and returns
// the binary's path.
func buildCmd(ctx context.Context, root, dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: go build ./cmd/%s in %s: %w: %s", name, root, err, bytes.TrimSpace(out))
	}
	return bin, nil
}

// writeSeeds writes every host's front page to path, one a line.
func writeSeeds(path string, w *synth.Web) error {
	var b bytes.Buffer
	for h := range w.Hosts() {
		b.WriteString(w.FrontURL(h))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("bench: seeds: %w", err)
	}
	return nil
}

// fetchSnapshot reads websim's visitor statistics.
func fetchSnapshot(ctx context.Context, admin string) (*websim.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/_websim/stats", nil)
	if err != nil {
		return nil, fmt.Errorf("bench: websim stats: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: websim stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: websim stats: %s", resp.Status)
	}
	var snap websim.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		return nil, fmt.Errorf("bench: websim stats: %w", err)
	}
	return &snap, nil
}

// resetWebsimStats clears websim's visitor statistics.
func resetWebsimStats(ctx context.Context, admin string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+admin+"/_websim/stats/reset", nil)
	if err != nil {
		return fmt.Errorf("bench: websim stats reset: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("bench: websim stats reset: %w", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("bench: websim stats reset: %s", resp.Status)
	}
	return nil
}

// primeFlakyRobots asks every RobotsFlaky host of w (served by websim) for
// its robots.txt until it has answered synth.RobotsFailures times: websim
// counts those failures per host for its whole life, and not statistics
// reset, so without this only the first run would meet them. It returns
// the number of such hosts.
func primeFlakyRobots(ctx context.Context, w *synth.Web) (int, error) {
	var hosts []synth.Host
	for _, h := range w.Hosts() {
		if h.Robots == synth.RobotsFlaky && h.Role == synth.RoleNone {
			hosts = append(hosts, h)
		}
	}
	port := w.Options().Port
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	get := func(h synth.Host) error {
		for range synth.RobotsFailures {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.IP.String()+":"+strconv.Itoa(port)+"/robots.txt", nil)
			if err != nil {
				return err
			}
			req.Host = h.Name + ":" + strconv.Itoa(port)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable {
				return fmt.Errorf("robots.txt of %s: %s, want 503", h.Name, resp.Status)
			}
		}
		return nil
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, h := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func() { // owner: primeFlakyRobots, which waits for it
			defer wg.Done()
			defer func() { <-sem }()
			if err := get(h); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return 0, fmt.Errorf("bench: prime websim's flaky robots.txt hosts: %w", errors.Join(errs[:min(len(errs), 3)]...))
	}
	return len(hosts), nil
}

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/bench/crawlcheck"
	"github.com/meridian-crawler/meridian/certs"
	"github.com/meridian-crawler/meridian/federation"
	"github.com/meridian-crawler/meridian/partition/geoip"
	"github.com/meridian-crawler/meridian/rounds"
	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/wan"
	"github.com/meridian-crawler/meridian/websim"
	"github.com/meridian-crawler/meridian/websim/geodb"
	"github.com/meridian-crawler/meridian/websim/geodelay"
	"github.com/meridian-crawler/meridian/websim/replay"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// RunFederation serves the web cfg describes with one websim and crawls
// it once per run (the federated runs, then the stretched ones), each a
// fresh crawl with websim's statistics reset. A run that is cut or has a
// failed process is reported and the next one runs; the error then joins
// ErrCrawlCut or ErrNodeFailed for each. Setup failures and ctx's end
// return at once.
func RunFederation(ctx context.Context, cfg FederationConfig) (FederationResult, error) {
	res := FederationResult{NumCPU: runtime.NumCPU(), Loss20to80: -1}
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return res, err
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	dir, err := makeRunDir(cfg.Dir, "federation")
	if err != nil {
		return res, err
	}
	if cfg.Keep {
		res.Dir = dir
	} else {
		defer os.RemoveAll(dir)
	}
	simBin, siteBin, err := buildBinaries(ctx, cfg.ModuleRoot, cfg.WebsimBinary, cfg.SiteBinary, dir, cfg.Progress)
	if err != nil {
		return res, err
	}
	env := &fedEnv{cfg: &cfg, bin: siteBin, dir: dir,
		seeds: filepath.Join(dir, "seeds.txt"), geoip: filepath.Join(dir, "geoip.mmdb"), certs: filepath.Join(dir, "certs")}
	defer func() {
		if env.sim != nil {
			env.sim.stop()
		}
	}()
	if len(cfg.Replay) > 0 {
		if res.Replayed, err = env.startReplay(ctx, simBin); err != nil {
			return res, err
		}
	} else {
		cfg.Progress("starting websim: %d %s hosts × %d pages on %d addresses", cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs)
		sc := cfg.siteConfig()
		var clients []geodelay.Client
		if cfg.Geo {
			if clients, err = geoClientList(GeoClients()); err != nil {
				return res, err
			}
		}
		if env.sim, env.web, err = startSim(ctx, &sc, dir, simBin, clients); err != nil {
			return res, err
		}
		if err := writeSeeds(env.seeds, env.web); err != nil {
			return res, err
		}
		if res.PrimedFlakyHosts, err = primeFlakyRobots(ctx, env.web); err != nil {
			return res, err
		}
	}
	res.Websim.PID = env.sim.pid
	if err := env.prepare(); err != nil {
		return res, err
	}
	if cfg.Geo {
		if res.Geo, err = env.prepareGeo(); err != nil {
			return res, err
		}
	}
	type spec struct {
		mode  string
		delay time.Duration
		geo   string
	}
	var specs []spec
	if cfg.Geo {
		d := cfg.Delays[0]
		all := []spec{{ModeFederated, d, GeoDistance}, {ModeFederated, d, GeoConsistent}, {ModeCentral, 0, GeoCentral}, {ModeStretched, d, GeoStretched}}
		for _, s := range all {
			if len(cfg.GeoRuns) == 0 || slices.Contains(cfg.GeoRuns, s.geo) {
				specs = append(specs, s)
			}
		}
	} else {
		for _, d := range cfg.Delays {
			specs = append(specs, spec{ModeFederated, d, ""})
		}
		for _, d := range cfg.Stretched {
			specs = append(specs, spec{ModeStretched, d, ""})
		}
	}
	var errs []error
	for i, s := range specs {
		r := &fedRun{env: env, mode: s.mode, delay: s.delay, geo: s.geo, part: cfg.Partitioner}
		if s.mode == ModeFederated && s.geo != "" {
			r.part = s.geo // GeoDistance and GeoConsistent are the partitioners' kinds
		}
		r.dir = filepath.Join(dir, fmt.Sprintf("run%d-%s-%dms", i+1, r.label(), s.delay.Milliseconds()))
		run, err := r.run(ctx)
		if !cfg.Keep {
			os.RemoveAll(r.dir)
		}
		if err != nil && (ctx.Err() != nil || run == nil) {
			return res, err
		}
		res.Runs = append(res.Runs, *run)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s at %v: %w", r.label(), s.delay, err))
		}
	}
	env.sim.cost(&res.Websim)
	res.compare()
	res.Targets = res.targets()
	return res, errors.Join(errs...)
}

// fedEnv is what the runs of RunFederation share: the web, the binaries,
// the seeds, the GeoIP file and the certificates; for the geographic
// benchmark, the web's truth and places.
type fedEnv struct {
	cfg   *FederationConfig
	sim   *simProc
	web   *synth.Web // nil when replaying WARC files
	bin   string
	dir   string
	seeds string
	geoip string
	certs string
	truth []synth.Record // FederationConfig.Geo: for the floors
	geo   *geoWeb        // FederationConfig.Geo
}

// prepare writes the GeoIP file of websim's addresses (as `websim
// --geoip` writes it; for a replayed web, the synthetic web's of the same
// addresses) and the federation's certificates.
func (e *fedEnv) prepare() error {
	w := e.web
	if w == nil {
		sc := e.cfg.siteConfig()
		var err error
		if w, err = synth.New(sc.webOptions(80)); err != nil {
			return fmt.Errorf("bench: the web that places the addresses: %w", err)
		}
	}
	if err := geodb.WriteFile(e.geoip, w.GeoEntries()); err != nil {
		return fmt.Errorf("bench: GeoIP file: %w", err)
	}
	if err := certs.Init(e.certs); err != nil {
		return fmt.Errorf("bench: certificates: %w", err)
	}
	for _, s := range FederationSites() {
		if err := certs.IssueSite(e.certs, s.Name); err != nil {
			return fmt.Errorf("bench: certificates: %w", err)
		}
		// Each federated site is one node, REGION-1: its Raft and node
		// API run over mutual TLS too.
		if err := certs.IssueNode(e.certs, s.Name, s.Name+"-1"); err != nil {
			return fmt.Errorf("bench: certificates: %w", err)
		}
	}
	return nil
}

// prepareGeo reads the web's truth (for the floors) and places its hosts
// and their owners (for the floors' RTTs), locating the hosts with the
// GeoIP file the sites read; it returns the result's geographic part,
// its comparisons to come.
func (e *fedEnv) prepareGeo() (*FederationGeo, error) {
	db, err := geoip.Open(e.geoip)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer db.Close()
	if e.geo, err = newGeoWeb(e.web, db, e.cfg.Replicas); err != nil {
		return nil, err
	}
	if e.truth, err = compactTruth(e.web); err != nil {
		return nil, err
	}
	g := &FederationGeo{DelayMS: msOf(e.cfg.Delays[0]), ModelDelayMS: msOf(GeoWANDelay()), Pairs: GeoSitePairs(),
		Clients: GeoClients(), HostShares: map[string]map[string]float64{}, UniCrawlCacheHitRate: fedCacheTarget}
	for _, kind := range []string{GeoDistance, GeoConsistent} {
		g.HostShares[kind] = e.geo.hostShares(kind)
	}
	return g, nil
}

// startReplay starts `websim replay` of the WARC files cfg.Replay names
// (as e's websim, so that RunFederation stops it), on the port their URLs
// were recorded with, and writes the seeds: each archived host's front
// page, or its first URL.
func (e *fedEnv) startReplay(ctx context.Context, bin string) (*FederationReplay, error) {
	var files []string
	for _, g := range e.cfg.Replay {
		m, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("bench: --replay %q: %w", g, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("bench: --replay %q: no such file", g)
		}
		files = append(files, m...)
	}
	arc, err := replay.Open(files...)
	if err != nil {
		return nil, fmt.Errorf("bench: replay: %w", err)
	}
	urls := arc.URLs()
	arc.Close()
	port, seeds, err := replaySeeds(urls)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(e.seeds, []byte(strings.Join(seeds, "\n")+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("bench: seeds: %w", err)
	}
	e.cfg.Progress("starting websim replay: %d WARC files, %d URLs of %d hosts on port %d, %d addresses", len(files), len(urls), len(seeds), port, e.cfg.IPs)
	ready := filepath.Join(e.dir, "websim-ready")
	args := []string{"replay", "--port", strconv.Itoa(port), "--dns", "127.0.0.1:0", "--admin", "127.0.0.1:0",
		"--ready-file", ready, "--log-level", "warn", "--progress", "0", "--ips", strconv.Itoa(e.cfg.IPs)}
	for _, f := range files {
		args = append(args, "--warc", f)
	}
	c, err := startWebsim(ctx, "websim replay", bin, args, ready)
	if err != nil {
		return nil, err
	}
	e.sim = &simProc{child: c, pid: c.p.pid}
	if err := e.sim.readAddrs(ready); err != nil {
		return nil, err
	}
	return &FederationReplay{Files: len(files), URLs: len(urls), Hosts: len(seeds), Port: port}, nil
}

// replaySeeds returns the one port that archived http URLs name and, per
// host, its front page if archived, else its first URL.
func replaySeeds(urls []string) (int, []string, error) {
	port := 0
	first := map[string]string{}
	front := map[string]bool{}
	var hosts []string
	for _, u := range urls {
		rest, ok := strings.CutPrefix(u, "http://")
		if !ok {
			continue
		}
		hostport, path, _ := strings.Cut(rest, "/")
		h, p, err := net.SplitHostPort(hostport)
		if err != nil {
			return 0, nil, fmt.Errorf("bench: replay: %s names no port: websim replays a web on one port, the one its URLs name", u)
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || port != 0 && n != port {
			return 0, nil, fmt.Errorf("bench: replay: %s: the archive's URLs name more than one port (or a bad one)", u)
		}
		port = n
		if _, ok := first[h]; !ok {
			first[h] = u
			hosts = append(hosts, h)
		}
		if path == "" && !front[h] {
			front[h], first[h] = true, u
		}
	}
	if port == 0 {
		return 0, nil, errors.New("bench: replay: no http URL in the archive")
	}
	seeds := make([]string, len(hosts))
	for i, h := range hosts {
		seeds[i] = first[h]
	}
	return port, seeds, nil
}

// fedRun is one run of RunFederation.
type fedRun struct {
	env   *fedEnv
	mode  string        // ModeFederated, ModeStretched or ModeCentral
	delay time.Duration // one-way, between sites (nodes)
	geo   string        // the geographic run (GeoModes), or ""
	part  string        // the federation file's partitioner (federated runs)
	dir   string

	ctx        context.Context // the run's: the WAN links close with it
	em         *wan.Emulator
	members    members
	simPts     []cpuPoint
	started    time.Time // the first process's start
	grace      time.Duration
	statusErrs int
}

// run runs the crawl; run is nil when it could not start at all.
func (r *fedRun) run(ctx context.Context) (*FederationRun, error) {
	cfg := r.env.cfg
	cfg.Progress("%s at %v one-way: starting", r.label(), r.delay)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	begin := time.Now()
	r.ctx = ctx
	r.grace = min(siteGrace, cfg.Timeout/5)
	defer r.close()
	if err := resetWebsimStats(ctx, r.env.sim.admin); err != nil {
		return nil, err
	}
	out := &FederationRun{Mode: r.mode, Geo: r.geo, Delay: r.delay, DelayMS: float64(r.delay) / 1e6, Load: fedLoadAverage()}
	if r.mode == ModeFederated {
		out.Partitioner = r.part
	}
	r.samplePoint(time.Now()) // websim's CPU at the start
	sctx, cancel := context.WithDeadline(ctx, begin.Add(cfg.Timeout))
	var startErr error
	switch r.mode {
	case ModeFederated:
		startErr = r.startFederated(sctx)
	case ModeCentral:
		startErr = r.startCentral(sctx)
	default:
		startErr = r.startStretched(sctx)
	}
	cancel()
	ending := ""
	if startErr == nil {
		var err error
		if ending, err = r.crawl(ctx, begin.Add(cfg.Timeout-r.grace)); err != nil {
			return nil, err
		}
	} else {
		if ctx.Err() != nil || len(r.members) == 0 {
			return nil, startErr
		}
		r.members.stop()
		ending = "failed"
	}
	r.samplePoint(time.Now())
	if err := r.collect(ctx, out, ending); err != nil {
		return out, err
	}
	if startErr != nil {
		out.Error = startErr.Error()
		return out, startErr
	}
	err := r.members.failed()
	if err != nil {
		out.Exit = "failed"
	} else {
		err = endingErr(ending)
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out, err
}

// freeAddrs returns n distinct loopback addresses whose ports are free,
// held open until all are chosen. The ports are drawn below the kernel's
// ephemeral range, so that the many outgoing connections of a crawl (and
// the WAN proxies' listeners on port 0) cannot take one before the
// process it is meant for binds it.
func freeAddrs(n int) ([]string, error) {
	lo, hi := 10_000, ephemeralLow()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []string
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	for tries := 0; len(out) < n; tries++ {
		if tries >= 100*n {
			return nil, fmt.Errorf("bench: no free port in [%d, %d) after %d tries", lo, hi, tries)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rnd.IntN(hi-lo))))
		if err != nil {
			continue // taken
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// where it cannot be read, or where it leaves too little below it).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || lo < 12_000 {
		return 32768
	}
	return lo
}

// crawlArgs are the `site up` flags that set the crawl (a federated site,
// or the stretched site's first node) with width URLs per round.
func (r *fedRun) crawlArgs(width int) []string {
	c := r.env.cfg
	return []string{"--seeds", r.env.seeds, "--dns", r.env.sim.dns, "--allow-private",
		"--rounds", strconv.Itoa(c.Rounds), "--width", strconv.Itoa(width), "--per-host", strconv.Itoa(c.PerHost),
		"--host-delay", c.HostDelay.String(), "--ip-delay", c.IPDelay.String(), "--max-crawl-delay", c.MaxCrawlDelay.String()}
}

// nodeArgs are the `site up` flags every process has. The central site
// has the workers of all the sites.
func (r *fedRun) nodeArgs(region, data, listen string) []string {
	c := r.env.cfg
	workers := c.Workers
	if r.mode == ModeCentral {
		workers *= len(FederationSites())
	}
	args := []string{"up", "--region", region, "--data", data, "--listen", listen,
		"--workers", strconv.Itoa(workers), "--progress", "5s", "--log-level", "info"}
	if c.NoSync {
		args = append(args, "--no-sync")
	}
	return args
}

// fetchFrom is, in a geographic run, the flag that makes the i-th site (or
// node) fetch from its region's client address; none otherwise.
func (r *fedRun) fetchFrom(i int) []string {
	if r.geo == "" {
		return nil
	}
	return []string{"--fetch-from", GeoClients()[i].Addr}
}

// label names the run: its geographic mode, or its mode.
func (r *fedRun) label() string {
	if r.geo != "" {
		return r.geo
	}
	return r.mode
}

// startFederated starts a WAN link in front of each site's federation
// endpoint, writes the federation file, and starts the sites, all at
// once (each seeds the hosts it owns), then waits for them.
func (r *fedRun) startFederated(ctx context.Context) error {
	c := r.env.cfg
	sites := FederationSites()
	listens, err := freeAddrs(len(sites))
	if err != nil {
		return err
	}
	var links []wan.Link
	for i, s := range sites {
		links = append(links, wan.Link{Name: s.Name, Listen: "127.0.0.1:0", Upstream: listens[i], Delay: r.delay})
	}
	if r.em, err = wan.Start(r.ctx, links); err != nil {
		return fmt.Errorf("bench: WAN: %w", err)
	}
	file := federation.File{Partitioner: r.part, Replicas: c.Replicas, Grace: federation.Duration(fedGrace)}
	for i, s := range sites {
		s.Endpoint, s.Listen = r.em.Addr(s.Name), listens[i]
		file.Sites = append(file.Sites, s)
	}
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: federation file: %w", err)
	}
	fedFile := filepath.Join(r.dir, "federation.json")
	if err := os.WriteFile(fedFile, b, 0o644); err != nil {
		return fmt.Errorf("bench: federation file: %w", err)
	}
	for i, s := range sites {
		data := filepath.Join(r.dir, s.Name)
		args := append(r.nodeArgs(s.Name, data, "127.0.0.1:0"), "--federation", fedFile, "--certs", r.env.certs)
		if r.part == "distance" {
			args = append(args, "--geoip", r.env.geoip)
		}
		args = append(append(append(args, r.crawlArgs(c.Width)...), r.fetchFrom(i)...), c.SiteFlags...)
		if err := r.startMember(s.Name, data, args); err != nil {
			return err
		}
	}
	for _, m := range r.members {
		if err := m.waitUp(ctx, m.name); err != nil {
			return err
		}
	}
	r.upLine()
	return nil
}

// startCentral starts one site in the first region (eu) without
// federation, with the width and workers of all the federation's sites,
// fetching from the region's client address, and waits for it.
func (r *fedRun) startCentral(ctx context.Context) error {
	c := r.env.cfg
	n := len(FederationSites())
	name := FederationSites()[0].Name
	data := filepath.Join(r.dir, name)
	args := append(r.nodeArgs(name, data, "127.0.0.1:0"), r.crawlArgs(c.Width*n)...)
	args = append(append(args, r.fetchFrom(0)...), c.SiteFlags...)
	if err := r.startMember(name, data, args); err != nil {
		return err
	}
	if err := r.members[0].waitUp(ctx, name); err != nil {
		return err
	}
	r.upLine()
	return nil
}

// startStretched starts one site of as many nodes as the federation has
// sites, each node behind two WAN links (its Raft listener and its node
// API, which serves the crawl database's API and the nodes' reports),
// advertising the links' addresses so that every connection between nodes
// crosses the WAN: the first node, then the others joining it (they read
// its /site/info on its status listener, which gives its API's link).
func (r *fedRun) startStretched(ctx context.Context) error {
	c := r.env.cfg
	n := len(FederationSites())
	addrs, err := freeAddrs(3 * n) // per node: Raft, API, status
	if err != nil {
		return err
	}
	var links []wan.Link
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		links = append(links,
			wan.Link{Name: name + "-raft", Listen: "127.0.0.1:0", Upstream: addrs[2*i], Delay: r.delay},
			wan.Link{Name: name + "-api", Listen: "127.0.0.1:0", Upstream: addrs[2*i+1], Delay: r.delay})
	}
	if r.em, err = wan.Start(r.ctx, links); err != nil {
		return fmt.Errorf("bench: WAN: %w", err)
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		data := filepath.Join(r.dir, name)
		args := append(r.nodeArgs("bench", data, addrs[2*n+i]), "--node", name, "--raft", addrs[2*i], "--api", addrs[2*i+1],
			"--raft-advertise", r.em.Addr(name+"-raft"), "--advertise", r.em.Addr(name+"-api"))
		args = append(args, r.fetchFrom(i)...) // node-local: not taken from n1 on --join
		if i == 0 {
			// The crawl starts once every node is there: else, on a web
			// that takes a few seconds, the first node fetches the
			// first rounds alone while the others join.
			args = append(append(args, r.crawlArgs(c.Width*n)...), c.SiteFlags...)
			args = append(args, "--expect-nodes", strconv.Itoa(n))
		} else {
			args = append(args, "--join", addrs[2*n])
		}
		if err := r.startMember(name, data, args); err != nil {
			return err
		}
		if i == 0 {
			if err := r.members[0].waitUp(ctx, r.members[0].name); err != nil {
				return err
			}
		}
	}
	for _, m := range r.members[1:] {
		if err := m.waitUp(ctx, m.name); err != nil {
			return err
		}
	}
	r.upLine()
	return nil
}

// upLine reports the processes up.
func (r *fedRun) upLine() {
	r.env.cfg.Progress("%s at %v: up: %s", r.label(), r.delay, r.members.upList())
}

// startMember starts one `site up` process.
func (r *fedRun) startMember(name, data string, args []string) error {
	m, err := startMember(r.dir, name, name, data, r.env.bin, args, r.grace)
	if err != nil {
		return err
	}
	if len(r.members) == 0 {
		r.started = m.started
	}
	r.members = append(r.members, m)
	return nil
}

// crawl samples the processes until every one has exited, stopping them
// at deadline (ending "cut") or once they have been idle for the stall
// bound (ending "stalled").
func (r *fedRun) crawl(ctx context.Context, deadline time.Time) (string, error) {
	client := &http.Client{Timeout: statusTimeout}
	defer client.CloseIdleConnections()
	lastActive, lastWork := time.Now(), int64(-1)
	stall := r.env.cfg.Stall
	ending, err := crawl(ctx, crawlLoop{every: r.env.cfg.SampleEvery, deadline: deadline, what: "every process", log: r.env.cfg.Progress,
		done: r.members.allExited, stop: r.members.stop,
		sample: func(at time.Time) string {
			work, busy := r.sample(client, at)
			now := time.Now()
			if busy || work != lastWork {
				lastActive, lastWork = now, work
			}
			if stall > 0 && now.Sub(lastActive) > stall {
				r.env.cfg.Progress("every process has been idle for %v without ending: stopping them", stall)
				return "stalled"
			}
			return ""
		},
		progress: func(now time.Time) bool {
			r.progress(now)
			return true
		}})
	if err != nil {
		return ending, fmt.Errorf("bench: federation run: %w", err)
	}
	return ending, nil
}

// sample reads every running process's /status, CPU and memory at now,
// and websim's CPU. work sums what the processes have done (pages,
// rounds, URLs exchanged), busy says whether a request is in flight
// anywhere.
func (r *fedRun) sample(client *http.Client, now time.Time) (work int64, busy bool) {
	r.statusErrs += r.members.sample(client, now, func(_ int, st *site.Status) {
		if st == nil {
			return
		}
		work += st.Fetcher.Done + int64(st.Rounds.Done)
		if f := st.Federation; f != nil {
			work += f.SentURLs + f.RecvURLs
		}
		busy = busy || st.Fetcher.InFlight > 0
	})
	r.samplePoint(now)
	return work, busy
}

// samplePoint takes websim's CPU.
func (r *fedRun) samplePoint(now time.Time) {
	if cpu, err := procCPU(r.env.sim.pid); err == nil {
		r.simPts = append(r.simPts, cpuPoint{now, cpu})
	}
}

// wanBytes is Σ over the run's links of the bytes both ways so far.
func (r *fedRun) wanBytes() int64 {
	if r.em == nil {
		return 0
	}
	var n int64
	for _, name := range r.em.Names() {
		if st, err := r.em.Stats(name); err == nil {
			n += st.Upstream + st.Downstream
		}
	}
	return n
}

// progress prints one line of the processes' state.
func (r *fedRun) progress(now time.Time) {
	var b strings.Builder
	for _, m := range r.members {
		switch {
		case m.done():
			fmt.Fprintf(&b, " | %s exited", m.name)
		case m.last != nil:
			fmt.Fprintf(&b, " | %s %s round %d, fetched %d", m.name, m.last.Role, m.last.Round, m.last.Fetcher.Done)
			if f := m.last.Federation; f != nil {
				fmt.Fprintf(&b, ", sent %d, cache %.1f%%", f.SentURLs, 100*f.CacheRate)
			}
		}
	}
	r.env.cfg.Progress("%5.0fs %s %v: WAN %s%s", now.Sub(r.started).Seconds(), r.label(), r.delay, mibf(r.wanBytes()), b.String())
}

// close stops the processes (if any still runs), closes their logs and the
// WAN links.
func (r *fedRun) close() {
	r.members.stop()
	r.members.closeLogs()
	if r.em != nil {
		r.em.Close()
	}
}

// collect reads what the stopped processes left, the WAN links' counts
// and websim's statistics, and fills out.
func (r *fedRun) collect(ctx context.Context, out *FederationRun, ending string) error {
	type key struct {
		site, group string
		round       uint64
	}
	seen := map[key]bool{}
	var stats []rounds.RoundStats
	var siteOf []string
	led := map[string]int{}
	// Each shard's last round (its URL-sent cache's counts so far) and
	// the one before, by site and shard.
	type siteShard struct{ site, group string }
	last := map[siteShard]rounds.RoundStats{}
	prev := map[siteShard]rounds.RoundStats{}
	fetched := map[string]int64{} // Σ fetched over each site's rounds
	// Each site's rounds: every shard's lines (a shard's round r on
	// whichever node led it, once), merged by round number.
	bySite := map[string][]rounds.RoundStats{}
	var sites []string
	for _, m := range r.members {
		files, err := roundFiles(m.data)
		if err != nil {
			return err
		}
		name := m.name
		if r.mode == ModeStretched {
			name = "site" // the nodes' rounds are the one site's
		}
		if _, ok := bySite[name]; !ok {
			sites = append(sites, name)
			bySite[name] = nil
		}
		for _, group := range slices.Sorted(maps.Keys(files)) {
			st, err := readRoundStats(files[group])
			if err != nil {
				return err
			}
			led[m.name] += len(st)
			for _, s := range st {
				k := key{name, group, s.Round}
				if seen[k] {
					continue // a leader change mid-update: the first line stands
				}
				seen[k] = true
				bySite[name] = append(bySite[name], s)
				ss := siteShard{name, group}
				if l, ok := last[ss]; !ok || s.Round > l.Round {
					if ok {
						prev[ss] = l
					}
					last[ss] = s
				} else if p, ok := prev[ss]; !ok || s.Round > p.Round {
					prev[ss] = s
				}
			}
		}
	}
	for _, name := range sites {
		for _, s := range mergeRounds(bySite[name]) {
			stats, siteOf = append(stats, s), append(siteOf, name)
			fetched[name] += s.Fetched
		}
	}
	var t SiteResult
	start, end := t.table(stats, r.started) // rows in stats' order
	out.WindowS, out.Pages, out.Pages2xx, out.PagesPerSec, out.FirstRoundAtS = t.WindowS, t.Pages, t.Pages2xx, t.PagesPerSec, t.FirstRoundAtS
	for i, s := range stats {
		out.Rounds = append(out.Rounds, FederationRound{Site: siteOf[i], RoundRow: t.Rounds[i], Leader: s.Leader,
			RemoteURLs: s.RemoteURLs, CacheHits: s.SentCacheHits, CacheLookups: s.SentCacheLookups, CacheHitRate: s.SentCacheHitRate})
		out.RemoteURLs += int64(s.RemoteURLs)
		out.MeanUpdateS += s.UpdateSeconds
		out.MaxUpdateS = max(out.MaxUpdateS, s.UpdateSeconds)
	}
	sort.SliceStable(out.Rounds, func(i, j int) bool { return out.Rounds[i].StartS < out.Rounds[j].StartS })
	if len(stats) > 0 {
		out.MeanUpdateS /= float64(len(stats))
	}
	var lastHits, lastLookups int64
	for name, s := range last {
		out.CacheHits += s.SentCacheHits
		out.CacheLookups += s.SentCacheLookups
		lastHits += s.SentCacheHits - prev[name].SentCacheHits
		lastLookups += s.SentCacheLookups - prev[name].SentCacheLookups
	}
	out.CacheHitRate = ratio(float64(out.CacheHits), float64(out.CacheLookups))
	out.CacheHitRateLast = ratio(float64(lastHits), float64(lastLookups))

	// A site of shards counts its URL-sent cache in its federation layer
	// (the meta group's), not in its shards' rounds: the run's counts are
	// then the sites' last /status.
	sharded := out.CacheLookups == 0 && r.mode != ModeStretched
	var memberHits, memberLookups int64
	for _, m := range r.members {
		fm := FederationMember{Name: m.name, PID: m.proc.pid, Stopped: m.stopped, PeakRSS: m.hwm, Rounds: led[m.name]}
		if !m.upAt.IsZero() {
			fm.UpS = m.upAt.Sub(m.started).Seconds()
		}
		fm.Exit, fm.ExitCode, fm.CPUS = m.proc.ended()
		if r.mode != ModeStretched {
			fm.Pages = fetched[m.name]
		}
		if st := m.last; st != nil {
			fm.Role = st.Role
			if r.mode == ModeStretched {
				fm.Pages = st.Fetcher.Done
			}
			fm.RaftSent, fm.APISent = st.Traffic.RaftSent, st.Traffic.APISent
			if f := st.Federation; f != nil {
				fm.SentURLs, fm.SentBatches, fm.RecvURLs, fm.RecvBatches = f.SentURLs, f.SentBatches, f.RecvURLs, f.RecvBatches
				fm.Outbox, fm.CacheHits, fm.CacheLookups, fm.CacheHitRate = f.Outbox, f.CacheHits, f.CacheLookup, f.CacheRate
				for _, p := range f.Peers {
					fm.TLSBytesOut += p.BytesOut
					fm.TLSBytesIn += p.BytesIn
				}
			}
		}
		if len(stats) > 0 {
			fm.WindowCPUS = (cpuAt(m.pts, end) - cpuAt(m.pts, start)).Seconds()
		}
		fm.CPUPerPageUS = 1e6 * ratio(fm.WindowCPUS, float64(fm.Pages))
		out.SiteCPUS += fm.WindowCPUS
		if r.mode != ModeStretched {
			out.CountedBytes += fm.TLSBytesOut + fm.TLSBytesIn
		} else {
			out.CountedBytes += fm.RaftSent + fm.APISent
		}
		out.Members = append(out.Members, fm)
		if sharded {
			memberHits += fm.CacheHits
			memberLookups += fm.CacheLookups
		}
	}
	if sharded {
		out.CacheHits, out.CacheLookups = memberHits, memberLookups
		out.CacheHitRate = ratio(float64(out.CacheHits), float64(out.CacheLookups))
	}
	out.WallS = r.members.lastExit(r.started).Sub(r.started).Seconds()
	out.SiteCPUPerPageUS = 1e6 * ratio(out.SiteCPUS, float64(out.Pages))
	if len(stats) > 0 && len(r.simPts) > 0 {
		out.WebsimWindowCPUS = (cpuAt(r.simPts, end) - cpuAt(r.simPts, start)).Seconds()
	}
	if r.em != nil {
		for _, name := range r.em.Names() {
			st, err := r.em.Stats(name)
			if err != nil {
				return fmt.Errorf("bench: WAN: %w", err)
			}
			out.Links = append(out.Links, FederationLink{Name: name, Upstream: st.Upstream, Downstream: st.Downstream, Conns: st.Conns})
			out.WANBytes += st.Upstream + st.Downstream
		}
	}
	out.WANBytesPerPage = ratio(float64(out.WANBytes), float64(out.Pages))
	out.StatusErrors = r.statusErrs

	out.Exit = crawlExit(ending, r.members.anyTail(exhaustedLine), r.env.cfg.Rounds, len(stats))

	snap, err := fetchSnapshot(ctx, r.env.sim.admin)
	if err != nil {
		return err
	}
	out.WebsimRequests, out.UnknownHost = snap.Requests, snap.UnknownHost
	c := r.env.cfg
	if r.env.web != nil {
		out.Breaches, out.BreachSample = politenessBreaches(r.env.web, snap, c.HostDelay, c.IPDelay, c.MaxCrawlDelay)
	} else { // a replayed web: no robots crawl-delays known here
		b := crawlcheck.Politeness(snap, c.HostDelay, c.IPDelay, func(string) time.Duration { return 0 })
		out.Breaches, out.BreachSample = len(b), b[:min(len(b), maxBreachesKept)]
	}
	if r.geo != "" {
		r.collectGeo(out, snap)
	}
	return nil
}

// collectGeo sets a geographic run's distance-aware floor (and the run's
// time to exhaustion over it) and its fetch latency as websim saw it from
// the run's clients.
func (r *fedRun) collectGeo(out *FederationRun, snap *websim.Snapshot) {
	c := r.env.cfg
	f := PolitenessFloorRTT(r.env.web, r.env.truth, c.HostDelay, c.IPDelay, c.MaxCrawlDelay, r.env.geo.rtt(r.geo))
	if out.Exit == "exhausted" && f.S > 0 {
		f.Ratio = out.WindowS / f.S
	}
	out.Floor = &f
	fetch := combineFetch(snap.Clients, geoRunClients(r.geo))
	out.Fetch = &fetch
}

// fedLoadAverage reads /proc/loadavg (zeros where it cannot).
func fedLoadAverage() [3]float64 {
	var l [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &l[0], &l[1], &l[2])
	}
	return l
}

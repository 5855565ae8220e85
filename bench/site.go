package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/meridian-crawler/meridian/site"
	"github.com/meridian-crawler/meridian/websim/synth"
)

// RunSite serves the web cfg describes with websim, crawls it with a site
// seeded with every host's front page until cfg.Rounds rounds are done or
// the crawl is exhausted, sampling the site's /status meanwhile, and then
// checks the stopped site's crawl against the web's truth. When the
// timeout cuts the crawl it returns what it measured and ErrCrawlCut.
func RunSite(ctx context.Context, cfg SiteConfig) (SiteResult, error) {
	var res SiteResult
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return res, err
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	crawlDeadline := start.Add(cfg.Timeout - cfg.Timeout/checkShare)

	dir, err := makeRunDir(cfg.Dir, "site")
	if err != nil {
		return res, err
	}
	if cfg.Keep {
		res.Dir = dir
	} else {
		defer os.RemoveAll(dir)
	}
	r := &siteRun{cfg: &cfg, dir: dir, data: filepath.Join(dir, "data")}
	defer r.close()
	if err := r.start(ctx); err != nil {
		return res, err
	}
	if cfg.RunFor > 0 {
		crawlDeadline = r.started.Add(cfg.RunFor)
	}
	cfg.Progress("site up (pid %d), data in %s", r.site.pid, r.data)
	var watch *Watch
	if cfg.Watch {
		in, err := site.ReadInfo(r.data)
		if err != nil {
			return res, err
		}
		if watch, err = StartWatch(ctx, "http://"+in.Listen); err != nil {
			return res, err
		}
		cfg.Progress("the dashboard is open in headless chromium")
	}
	var cpuHog *hog
	if cfg.Hog > 0 {
		if cpuHog, err = startHog(ctx, cfg.Hog); err != nil {
			return res, err
		}
		cfg.Progress("%d CPU busy loops running beside the crawl", cfg.Hog)
	}
	ending, err := r.crawl(ctx, crawlDeadline)
	if cpuHog != nil {
		hr := cpuHog.stop()
		res.Hog = &hr
	}
	if err != nil {
		return res, err
	}
	if err := r.collect(ctx, &res, ending); err != nil {
		return res, err
	}
	if watch != nil {
		wr := watch.Stop(r.exited.Sub(r.started), time.Duration(res.Site.CPUS*float64(time.Second)))
		res.Watch = &wr
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bench: site run: %w", err)
	}
	if !cfg.NoCheck {
		t := time.Now()
		cfg.Progress("checking the crawl against the web's truth")
		if err := r.check(ctx, &res); err != nil {
			return res, err
		}
		res.CheckS = time.Since(t).Seconds()
	}
	if cfg.RunFor > 0 && ending == "cut" {
		return res, nil // the end it asked for
	}
	return res, endingErr(ending)
}

// siteRun is one RunSite: the two processes (or in-process servers), the
// sampler and what it saw.
type siteRun struct {
	cfg  *SiteConfig
	dir  string
	data string
	web  *synth.Web
	// winStart is the measured window's start (the first round's), once
	// collected: the floor host's timeline counts from it.
	winStart time.Time
	sim      *simProc
	site     *proc
	log      *os.File // the site's output (and the in-process logs)

	samples []sample
	started time.Time // the site's start
	exited  time.Time // the site's exit
}

// sample is one look at the site and the processes.
type sample struct {
	at       time.Time
	ok       bool // /status answered
	inFlight int64
	done     int64
	busyS    float64
	phase    string
	siteCPU  time.Duration
	simCPU   time.Duration
	siteHWM  int64
	simHWM   int64
}

func (r *siteRun) close() {
	if r.site != nil {
		r.site.stop()
	}
	if r.sim != nil {
		r.sim.stop()
	}
	if r.log != nil {
		r.log.Close()
	}
}

// start builds what is needed, starts websim, writes the seeds and starts
// the site.
func (r *siteRun) start(ctx context.Context) error {
	cfg := r.cfg
	var err error
	if r.log, err = os.Create(filepath.Join(r.dir, "site.log")); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	simBin, siteBin := cfg.WebsimBinary, cfg.SiteBinary
	if !cfg.InProcess {
		if simBin, siteBin, err = buildBinaries(ctx, cfg.ModuleRoot, simBin, siteBin, r.dir, cfg.Progress); err != nil {
			return err
		}
	}
	cfg.Progress("starting websim: %d %s hosts × %d pages on %d addresses", cfg.Hosts, cfg.Profile, cfg.Pages, cfg.IPs)
	if r.sim, r.web, err = startSim(ctx, cfg, r.dir, simBin, nil); err != nil {
		return err
	}
	seeds := filepath.Join(r.dir, "seeds.txt")
	if err := writeSeeds(seeds, r.web); err != nil {
		return err
	}
	return r.startSite(ctx, siteBin, seeds)
}

// siteArgs are the flags of `site up` for cfg.
func (r *siteRun) siteArgs(seeds string) []string {
	c := r.cfg
	args := []string{"up", "--region", "bench", "--data", r.data, "--seeds", seeds,
		"--dns", r.sim.dns, "--allow-private", "--listen", "127.0.0.1:0",
		"--rounds", strconv.Itoa(c.Rounds), "--width", strconv.Itoa(c.Width), "--per-host", strconv.Itoa(c.PerHost),
		"--workers", strconv.Itoa(c.Workers), "--host-delay", c.HostDelay.String(), "--ip-delay", c.IPDelay.String(),
		"--max-crawl-delay", c.MaxCrawlDelay.String(), "--progress", "5s", "--log-level", "info"}
	if c.NoSync {
		args = append(args, "--no-sync")
	}
	return append(args, c.SiteFlags...)
}

// startSite starts the site and waits for its status API to answer.
func (r *siteRun) startSite(ctx context.Context, bin, seeds string) error {
	c := r.cfg
	r.started = time.Now()
	if c.InProcess {
		sc := site.DefaultConfig()
		sc.Region, sc.Data, sc.Seeds, sc.Websim = "bench", r.data, seeds, "off"
		sc.DNS, sc.AllowPrivate, sc.Listen = r.sim.dns, true, "127.0.0.1:0"
		sc.Rounds, sc.Width, sc.PerHost, sc.Workers = c.Rounds, c.Width, c.PerHost, c.Workers
		sc.HostDelay, sc.IPDelay, sc.MaxCrawlDelay, sc.NoSync = c.HostDelay, c.IPDelay, c.MaxCrawlDelay, c.NoSync
		sc.Progress = 5 * time.Second
		// Stopped by r.site.stop, not by ctx.
		r.site = goProc(context.WithoutCancel(ctx), r.log, siteLogTail, func(ctx context.Context, out io.Writer) error {
			log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
			return site.Up(ctx, sc, log, out)
		})
	} else {
		p, err := startProc(bin, r.siteArgs(seeds), r.log, siteLogTail, siteGrace)
		if err != nil {
			return fmt.Errorf("bench: start site: %w", err)
		}
		r.site = p
	}
	// The site writes site.json once it is seeded and serving.
	err := r.site.waitUntil(ctx, siteStartBound, 50*time.Millisecond, func() bool {
		_, err := site.ReadInfo(r.data)
		return err == nil
	})
	switch {
	case errors.Is(err, errExited):
		return fmt.Errorf("bench: the site exited before it was up (%v): %s", r.site.err, r.site.tail)
	case err != nil:
		return fmt.Errorf("bench: waiting for the site to be up: %w: %s", err, r.site.tail)
	}
	return nil
}

// crawl samples the site until it exits. It stops the site at deadline
// (ending "cut") or when it has stalled (ending "stalled").
func (r *siteRun) crawl(ctx context.Context, deadline time.Time) (string, error) {
	in, err := site.ReadInfo(r.data)
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: statusTimeout}
	defer client.CloseIdleConnections()
	url := "http://" + in.Listen + "/status"
	lastActive, lastDone := time.Now(), int64(-1)
	ending, err := crawl(ctx, crawlLoop{every: r.cfg.SampleEvery, deadline: deadline, what: "the site", log: r.cfg.Progress,
		exit: r.site.exit,
		stop: func() { go r.site.stop() }, // owner: crawl, which waits for the site's exit
		sample: func(at time.Time) string {
			s := r.sample(client, url, at)
			r.samples = append(r.samples, s)
			if !s.ok {
				return ""
			}
			if s.inFlight > 0 || s.done != lastDone || s.phase != "idle" {
				lastActive, lastDone = s.at, s.done
			}
			if r.cfg.Stall > 0 && s.at.Sub(lastActive) > r.cfg.Stall {
				r.cfg.Progress("the site has been idle for %v without finishing: stopping it", r.cfg.Stall)
				return "stalled"
			}
			return ""
		},
		progress: func(time.Time) bool {
			s := r.samples[len(r.samples)-1]
			if !s.ok {
				return false
			}
			r.cfg.Progress("%5.0fs  %-8s fetched %d, in flight %d, site CPU %.0fs, websim CPU %.0fs",
				s.at.Sub(r.started).Seconds(), s.phase, s.done, s.inFlight, s.siteCPU.Seconds(), s.simCPU.Seconds())
			return true
		}})
	if err != nil {
		return ending, fmt.Errorf("bench: site run: %w", err)
	}
	r.exited = time.Now()
	return ending, nil
}

// statusBody is the part of the site's /status that the sampler reads.
type statusBody struct {
	Phase   string `json:"phase"`
	Fetcher struct {
		InFlight int64   `json:"in_flight"`
		Done     int64   `json:"done"`
		Busy     float64 `json:"busy_s"`
	} `json:"fetcher"`
}

// sample reads the site's status and both processes' CPU and memory at `at`.
func (r *siteRun) sample(client *http.Client, url string, at time.Time) sample {
	s := sample{at: at}
	if resp, err := client.Get(url); err == nil {
		var st statusBody
		if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil {
			s.ok, s.inFlight, s.done, s.busyS, s.phase = true, st.Fetcher.InFlight, st.Fetcher.Done, st.Fetcher.Busy, st.Phase
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A process that has just exited has no CPU time to read: the sample
	// keeps zero, and is outside the window anyway.
	if r.cfg.InProcess {
		s.siteCPU, _ = selfCPU()
	} else {
		s.siteCPU, _ = procCPU(r.site.pid)
		s.simCPU, _ = procCPU(r.sim.pid)
		s.simHWM = peakRSS(r.sim.pid)
	}
	s.siteHWM = peakRSS(r.site.pid)
	return s
}

// collect reads what the stopped site left (rounds.jsonl), websim's
// statistics, and turns the samples into figures.
func (r *siteRun) collect(ctx context.Context, res *SiteResult, ending string) error {
	p := r.site
	res.WallS = r.exited.Sub(r.started).Seconds()
	res.Site.PID, res.Websim.PID = p.pid, r.sim.pid
	_, _, res.Site.CPUS = p.ended()
	if p.err != nil && ending == "" {
		return fmt.Errorf("bench: the site failed: %w: %s", p.err, p.tail)
	}
	stats, err := readSiteRounds(r.data)
	if err != nil {
		return err
	}
	res.Exit = crawlExit(ending, p.said(exhaustedLine), r.cfg.Rounds, len(stats))
	winStart, winEnd := res.table(stats, r.started)
	r.winStart = winStart

	// websim's view, before it is stopped.
	snap, err := fetchSnapshot(ctx, r.sim.admin)
	if err != nil {
		return err
	}
	r.sim.cost(&res.Websim)
	if err := r.sim.stop(); err != nil {
		return err
	}
	res.WebsimRequests, res.UnknownHost = snap.Requests, snap.UnknownHost
	r.politeness(res, snap)
	if r.cfg.Profile == synth.Hostile {
		res.Hostile = hostileReport(r.web, snap, stats)
	}
	r.busy(res, winStart, winEnd)
	return nil
}

// busy turns the samples in [start, end] into the busy fraction and the
// processes' CPU over the window.
func (r *siteRun) busy(res *SiteResult, start, end time.Time) {
	res.IdleByPhase = map[string]int{}
	var first, last *sample
	var inFlight int64
	for i := range r.samples {
		s := &r.samples[i]
		if s.siteHWM > 0 {
			res.Site.PeakRSS = s.siteHWM
		}
		if s.simHWM > res.Websim.PeakRSS {
			res.Websim.PeakRSS = s.simHWM
		}
		if s.at.Before(start) || s.at.After(end) {
			continue
		}
		if !s.ok {
			res.StatusErrors++
			continue
		}
		if first == nil {
			first = s
		}
		last = s
		res.Samples++
		inFlight += s.inFlight
		if s.inFlight > 0 {
			res.BusySamples++
		} else {
			res.IdleByPhase[s.phase]++
		}
	}
	if res.Samples > 0 {
		res.BusyFraction = float64(res.BusySamples) / float64(res.Samples)
		res.MeanInFlight = float64(inFlight) / float64(res.Samples)
	}
	if first != nil && last != first {
		span := last.at.Sub(first.at).Seconds()
		res.BusyWorkers = (last.busyS - first.busyS) / (float64(r.cfg.Workers) * span)
		res.Site.WindowCPUS = (last.siteCPU - first.siteCPU).Seconds() * res.WindowS / span
		res.Websim.WindowCPUS = (last.simCPU - first.simCPU).Seconds() * res.WindowS / span
	}
}

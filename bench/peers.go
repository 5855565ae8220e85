package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PeersConfig is `bench peers`: Meridian (a `bench site` run) and a bare
// colly crawler, one after the other, each alone on the machine with its
// own websim of the same web.
type PeersConfig struct {
	Site SiteConfig // the web, and Meridian's run on it
	// CollyWorkers are the colly crawler's requests in parallel (256);
	// CollyDuration bounds its run. It stops visiting new URLs once it
	// has as many page responses as Meridian fetched.
	CollyWorkers  int
	CollyDuration time.Duration
	// Self is the bench binary, which runs the colly crawler as a child
	// process (`bench colly-crawl`) so that its CPU is its own; default
	// this executable.
	Self string
}

// PeerRow is one crawler's figures on the web.
type PeerRow struct {
	Crawler     string  `json:"crawler"`
	Pages       int64   `json:"pages"`
	OK          int64   `json:"ok"`
	WindowS     float64 `json:"window_s"`
	PagesPerSec float64 `json:"pages_per_s"`
	CPUPerPage  float64 `json:"cpu_us_per_page"`    // the crawler's process
	SimPerPage  float64 `json:"websim_us_per_page"` // websim's, in the same run
	PeakRSS     int64   `json:"peak_rss_bytes"`
	// RobotsViolations are robots-disallowed URLs fetched, as websim
	// counts them (colly's run; Meridian's is checked by bench site).
	RobotsViolations int64 `json:"robots_violations"`
}

// PeersResult compares the crawlers.
type PeersResult struct {
	Rows []PeerRow `json:"rows"`
	// PagesRatio is Meridian's pages/s over colly's; CPURatio colly's CPU
	// per page over Meridian's (above 1: Meridian spends less).
	PagesRatio float64 `json:"pages_ratio"`
	CPURatio   float64 `json:"cpu_ratio"`
}

// RunPeers runs Meridian, then colly, on the same web.
func RunPeers(ctx context.Context, cfg PeersConfig) (PeersResult, error) {
	var res PeersResult
	sc := cfg.Site
	sc.NoCheck = true
	progress := sc.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	progress("Meridian: bench site on the web")
	m, err := RunSite(ctx, sc)
	if err != nil && m.Pages == 0 {
		return res, err
	}
	mr := PeerRow{Crawler: "meridian", Pages: m.Pages, OK: m.Pages2xx, WindowS: m.WindowS, PagesPerSec: m.PagesPerSec, PeakRSS: m.Site.PeakRSS}
	if m.Pages > 0 {
		mr.CPUPerPage = m.Site.WindowCPUS / float64(m.Pages) * 1e6
		mr.SimPerPage = m.Websim.WindowCPUS / float64(m.Pages) * 1e6
	}
	res.Rows = append(res.Rows, mr)
	progress("colly: %d workers, up to %d pages or %v", cfg.CollyWorkers, m.Pages, cfg.CollyDuration)
	cr, err := runColly(ctx, cfg, m.Pages)
	if err != nil {
		return res, err
	}
	res.Rows = append(res.Rows, cr)
	if cr.PagesPerSec > 0 {
		res.PagesRatio = mr.PagesPerSec / cr.PagesPerSec
	}
	if mr.CPUPerPage > 0 {
		res.CPURatio = cr.CPUPerPage / mr.CPUPerPage
	}
	return res, nil
}

// runColly starts websim with the same web and the colly crawler beside it.
func runColly(ctx context.Context, cfg PeersConfig, maxPages int64) (PeerRow, error) {
	row := PeerRow{Crawler: "colly"}
	sc, err := cfg.Site.WithDefaults()
	if err != nil {
		return row, err
	}
	dir, err := os.MkdirTemp(sc.Dir, "meridian-bench-peers-")
	if err != nil {
		return row, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	simBin := sc.WebsimBinary
	if simBin == "" && !sc.InProcess {
		root := sc.ModuleRoot
		if root == "" {
			if root, err = moduleRoot(ctx); err != nil {
				return row, err
			}
		}
		if simBin, err = buildWebsim(ctx, root, dir); err != nil {
			return row, err
		}
	}
	sim, web, err := startSim(ctx, &sc, dir, simBin, nil)
	if err != nil {
		return row, err
	}
	defer sim.stop()
	seeds := filepath.Join(dir, "seeds.txt")
	if err := writeSeeds(seeds, web); err != nil {
		return row, err
	}
	self := cfg.Self
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return row, fmt.Errorf("bench: %w", err)
		}
	}
	simBefore, _ := procCPU(sim.pid)
	cmd := exec.CommandContext(ctx, self, "colly-crawl", "--seeds", seeds, "--dns", sim.dns,
		"--workers", strconv.Itoa(cfg.CollyWorkers), "--max", strconv.FormatInt(maxPages, 10), "--duration", cfg.CollyDuration.String())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	setChildAttrs(cmd)
	if err := cmd.Run(); err != nil {
		return row, fmt.Errorf("bench: colly crawler: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	simAfter, _ := procCPU(sim.pid)
	if snap, err := fetchSnapshot(ctx, sim.admin); err == nil {
		row.RobotsViolations = snap.RobotsViolationCount
	}
	var cr CollyResult
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &cr); err != nil {
		return row, fmt.Errorf("bench: colly crawler's result: %w: %.300s", err, out.String())
	}
	row.Pages, row.OK, row.WindowS, row.PagesPerSec = cr.Pages, cr.OK, cr.WindowS, cr.PagesPerSec
	if cr.Pages > 0 {
		ps := cmd.ProcessState
		row.CPUPerPage = (ps.UserTime() + ps.SystemTime()).Seconds() / float64(cr.Pages) * 1e6
		row.SimPerPage = (simAfter - simBefore).Seconds() / float64(cr.Pages) * 1e6
	}
	row.PeakRSS = maxRSS(cmd.ProcessState)
	return row, nil
}

// Report is the peers table.
func (r PeersResult) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-9s %9s %9s %9s %12s %14s %10s %s\n", "crawler", "pages", "2xx", "pages/s", "CPU µs/page", "websim µs/page", "peak RSS", "robots-disallowed fetched")
	for _, row := range r.Rows {
		v := strconv.FormatInt(row.RobotsViolations, 10)
		if row.Crawler == "meridian" {
			v = "(checked by bench site: 0)"
		}
		fmt.Fprintf(&b, "  %-9s %9d %9d %9.0f %12.0f %14.0f %10s %s\n", row.Crawler, row.Pages, row.OK, row.PagesPerSec, row.CPUPerPage, row.SimPerPage, mib(row.PeakRSS), v)
	}
	fmt.Fprintf(&b, "  Meridian's pages/s ÷ colly's: %.2f (target ≥ 2.5); colly's CPU per page ÷ Meridian's: %.2f\n", r.PagesRatio, r.CPURatio)
	return b.String()
}

package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Figure is one SVG plot of a benchmark's result. Name says what it
// shows: beside a result written to BASE.json, it goes to BASE-Name.svg.
type Figure struct {
	Name string
	SVG  []byte
}

// Figures plots the site's rounds: each round's pages/s, and the rounds'
// generate, fetch and update phases on a time axis. None without rounds.
func (r SiteResult) Figures() []Figure {
	if len(r.Rounds) == 0 {
		return nil
	}
	x, y := roundRates(r.Rounds)
	first, last := float64(r.Rounds[0].Round), float64(r.Rounds[len(r.Rounds)-1].Round)
	rate := lineChart{title: "Pages/s per round", xLabel: "round", yLabel: "pages/s", series: []series{
		{name: "round: fetched ÷ fetch_s", x: x, y: y},
		{name: "run: pages ÷ window", x: []float64{first, last}, y: []float64{r.PagesPerSec, r.PagesPerSec}},
	}}
	return []Figure{{"pages", rate.svg()}, {"phases", phaseChart("Rounds' phases", r.Rounds).svg()}}
}

// Figures plots each run's pages/s per round (a line per run) and each
// run's phase timeline. None without rounds.
func (r ClusterResult) Figures() []Figure {
	rate := lineChart{title: "Pages/s per round", xLabel: "round", yLabel: "pages/s (round: fetched ÷ fetch_s)"}
	var out []Figure
	for _, run := range r.Runs {
		rows := make([]RoundRow, len(run.Rounds))
		for i, cr := range run.Rounds {
			rows[i] = cr.RoundRow
		}
		if len(rows) == 0 {
			continue
		}
		x, y := roundRates(rows)
		rate.series = append(rate.series, series{name: fmt.Sprintf("%s (run: %.0f pages/s)", nodes(run.Nodes), run.PagesPerSec), x: x, y: y})
		title := "Rounds' phases, " + nodes(run.Nodes)
		if k := run.Kill; k != nil {
			title += fmt.Sprintf(" (%s killed at %.0f s)", k.Node, k.AtWindowS)
		}
		out = append(out, Figure{fmt.Sprintf("%d-nodes-phases", run.Nodes), phaseChart(title, rows).svg()})
	}
	if len(out) == 0 {
		return nil
	}
	return append([]Figure{{"pages", rate.svg()}}, out...)
}

func nodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// roundRates are the rounds' numbers and pages/s: a round's fetched pages
// over FetchS (its start to its fetch's end), as SiteResult.Report's
// "pages/s (fetch)". Rounds overlap, so these do not add up to the run's
// pages/s. Rounds without a fetch time are left out.
func roundRates(rows []RoundRow) (x, y []float64) {
	for _, r := range rows {
		if r.FetchS > 0 {
			x, y = append(x, float64(r.Round)), append(y, float64(r.Fetched)/r.FetchS)
		}
	}
	return x, y
}

// phaseChart is the rounds' phases on a time axis, a row per round:
// generate from its start for GenerateS, fetch from there to FetchS after
// its start, update for UpdateS up to its end.
func phaseChart(title string, rows []RoundRow) barChart {
	ch := barChart{title: title, xLabel: "seconds from the first round's start", kinds: []string{"generate", "fetch", "update"}}
	for _, r := range rows {
		row := barRow{label: fmt.Sprintf("round %d", r.Round)}
		row.spans = append(row.spans, span{0, r.StartS, r.StartS + r.GenerateS})
		if r.FetchS > r.GenerateS {
			row.spans = append(row.spans, span{1, r.StartS + r.GenerateS, r.StartS + r.FetchS})
		}
		row.spans = append(row.spans, span{2, r.EndS - r.UpdateS, r.EndS})
		ch.rows = append(ch.rows, row)
	}
	return ch
}

// geoFigures plots the geographic benchmark per run: the time to
// exhaustion beside the run's distance-aware floor, the mean and p95
// fetch latency websim saw, and the WAN bytes per crawled page.
func (r FederationResult) geoFigures() []Figure {
	times := barChart{title: "Time to exhaustion and the distance-aware floor", xLabel: "seconds",
		kinds: []string{"time to exhaustion", "floor: slowest host's URLs × (delay + RTT)"}, values: true}
	latency := barChart{title: "Fetch latency (websim's modelled delay before a response)", xLabel: "milliseconds",
		kinds: []string{"mean", "p95"}, values: true}
	bytes := barChart{title: "WAN bytes (both ways) per crawled page", xLabel: "bytes per page", values: true}
	for _, run := range r.Runs {
		if run.Geo == "" {
			continue
		}
		name := run.Geo
		if run.Exit != "exhausted" {
			name += " (" + run.Exit + ")"
		}
		times.rows = append(times.rows, barRow{label: name, spans: []span{{0, 0, run.WindowS}}})
		if f := run.Floor; f != nil {
			times.rows = append(times.rows, barRow{label: run.Geo + " floor", spans: []span{{1, 0, f.S}}})
		}
		if f := run.Fetch; f != nil && f.Requests > 0 {
			latency.rows = append(latency.rows, barRow{label: run.Geo + " mean", spans: []span{{0, 0, f.MeanMS}}},
				barRow{label: run.Geo + " p95", spans: []span{{1, 0, f.P95MS}}})
		}
		bytes.rows = append(bytes.rows, barRow{label: run.Geo, spans: []span{{0, 0, run.WANBytesPerPage}}})
	}
	if len(bytes.rows) == 0 {
		return nil
	}
	out := []Figure{{"exhaustion", times.svg()}}
	if len(latency.rows) > 0 {
		out = append(out, Figure{"latency", latency.svg()})
	}
	return append(out, Figure{"wan-bytes", bytes.svg()})
}

// Figures plots the federated runs against the WAN delay when they were
// made at two delays or more (aggregate pages/s; mean and longest update
// of a round), and, when there are stretched runs, each stretched run
// beside the federated run at its delay (WAN bytes per crawled page;
// pages/s). The geographic benchmark has figures of its own (geoFigures).
func (r FederationResult) Figures() []Figure {
	if r.Geo != nil {
		return r.geoFigures()
	}
	var out []Figure
	var fed []FederationRun
	delays := map[float64]bool{}
	for _, run := range r.Runs {
		if run.Mode == "federated" {
			fed = append(fed, run)
			delays[run.DelayMS] = true
		}
	}
	if len(delays) >= 2 {
		slices.SortStableFunc(fed, func(a, b FederationRun) int { return cmp.Compare(a.Delay, b.Delay) })
		var ms, pps, mean, longest []float64
		for _, run := range fed {
			ms, pps = append(ms, run.DelayMS), append(pps, run.PagesPerSec)
			mean, longest = append(mean, run.MeanUpdateS), append(longest, run.MaxUpdateS)
		}
		pages := lineChart{title: "Federation: pages/s against the WAN delay", xLabel: "one-way WAN delay (ms)", yLabel: "pages/s",
			series: []series{{name: "three federated sites", x: ms, y: pps}}}
		update := lineChart{title: "Federation: update time against the WAN delay", xLabel: "one-way WAN delay (ms)", yLabel: "update of a round (s)",
			series: []series{{name: "mean over the rounds", x: ms, y: mean}, {name: "longest", x: ms, y: longest}}}
		out = append(out, Figure{"delay-pages", pages.svg()}, Figure{"delay-update", update.svg()})
	}
	bytes := barChart{title: "Inter-site bytes per crawled page", xLabel: "WAN bytes (both ways) per page", values: true}
	pages := barChart{title: "Pages/s, federated and stretched", xLabel: "pages/s", values: true}
	for _, run := range r.Runs {
		if run.Mode != "stretched" {
			continue
		}
		for k, m := range []*FederationRun{r.firstRun("federated", run.Delay), &run} {
			if m == nil {
				continue
			}
			label := fmt.Sprintf("%s, %g ms", m.Mode, m.DelayMS)
			bytes.rows = append(bytes.rows, barRow{label: label, spans: []span{{k, 0, m.WANBytesPerPage}}})
			pages.rows = append(pages.rows, barRow{label: label, spans: []span{{k, 0, m.PagesPerSec}}})
		}
	}
	if len(bytes.rows) > 0 {
		out = append(out, Figure{"wan-bytes", bytes.svg()}, Figure{"pages", pages.svg()})
	}
	return out
}

// Figures plots, per federation (set of sites), the consistent
// partitioner's max deviation from the fair share against its replica
// count: of the ring's hash space, of pages when host names or Keys
// (addresses) are hashed, and the p95 over random federations. The
// distance partitioner has no replica count (its fallback ring serves only
// hosts it cannot locate) and is not plotted.
func (r PartitionResult) Figures() []Figure {
	var out []Figure
	for _, set := range r.Sets {
		if len(set.Consistent) == 0 {
			continue
		}
		var rep, ring, byName, byKey, tx, p95 []float64
		for _, c := range set.Consistent {
			rep, ring = append(rep, float64(c.Replicas)), append(ring, c.RingDev)
			byName, byKey = append(byName, c.PagesByNameDev), append(byKey, c.PagesByKeyDev)
		}
		ch := lineChart{title: "Consistent hashing, " + set.Name + ": max deviation from the fair share",
			xLabel: "replicas per site", yLabel: "max deviation (% of the fair share)", series: []series{
				{name: "ring (hash space)", x: rep, y: ring},
				{name: "pages, host names hashed", x: rep, y: byName},
				{name: "pages, Keys (addresses) hashed", x: rep, y: byKey},
			}}
		n := 0
		for _, t := range set.Trials {
			tx, p95, n = append(tx, float64(t.Replicas)), append(p95, t.P95), t.N
		}
		if len(tx) > 0 {
			ch.series = append(ch.series, series{name: fmt.Sprintf("ring, p95 of %d random sets", n), x: tx, y: p95})
		}
		out = append(out, Figure{slug(set.Name), ch.svg()})
	}
	return out
}

// slug is s in lower case with every run of other characters than letters
// and digits made one '-'.
func slug(s string) string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
	})
	return strings.Join(f, "-")
}
